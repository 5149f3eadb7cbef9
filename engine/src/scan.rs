//! A scan of a text's bytes for brackets, strings, characters and comments, without a parse:
//! where a bracketed form ends, and what first keeps a run of top-level forms from being read.
//!
//! Allocation-free and linear, so it can look over a text of any size. It is approximate (a
//! reader macro is bytes like any other), so it only ever locates: forms are read from a
//! tree-sitter parse, never from a scan.

/// The byte after the line `from` is on (the text's end on its last line).
pub fn line_end(b: &[u8], from: usize) -> usize {
    b[from..].iter().position(|&c| c == b'\n').map_or(b.len(), |n| from + n + 1)
}

/// The byte after the string opening at `open`; `None` if it never closes.
pub fn string_end(b: &[u8], open: usize) -> Option<usize> {
    let mut at = open + 1;
    while at < b.len() {
        match b[at] {
            b'\\' => at += 2,
            b'"' => return Some(at + 1),
            _ => at += 1,
        }
    }
    None
}

/// The byte after the bracket closing the one at `open`; `None` if it never closes: the one
/// form a [`first_trouble`] scan from `open` follows.
pub fn list_end(b: &[u8], open: usize) -> Option<usize> {
    first_trouble(b, open, open + 1, usize::MAX).ok()
}

/// What first keeps the top-level forms after a byte from being read, as a scan finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trouble {
    /// A closing bracket with nothing open, at this byte.
    StrayCloser(usize),
    /// A bracket opened at top level at this byte and never closed.
    Unclosed(usize),
    /// A string opened at this byte and never closed.
    UnterminatedString(usize),
    /// A bracketed form from the first byte to the second, longer than the limit given.
    TooLong(usize, usize),
}

impl Trouble {
    /// The byte the trouble is reported at: where the form or string it concerns starts.
    pub fn at(self) -> usize {
        match self {
            Trouble::StrayCloser(at)
            | Trouble::Unclosed(at)
            | Trouble::UnterminatedString(at)
            | Trouble::TooLong(at, _) => at,
        }
    }
}

/// Scan the top-level forms that start at `from` or after it and before `until`: the first
/// one that has a closing bracket with nothing open, a bracket or a string never closed, or is
/// longer than `longest` bytes. Otherwise `Ok` with where the scan stopped: `until`, or past it
/// where a form (or string, or comment) starting before `until` ends.
pub fn first_trouble(
    b: &[u8],
    from: usize,
    until: usize,
    longest: usize,
) -> Result<usize, Trouble> {
    let (mut at, mut depth, mut open_at) = (from, 0usize, from);
    while at < b.len() {
        if depth == 0 && at >= until {
            return Ok(at);
        }
        match b[at] {
            b';' => at = line_end(b, at),
            b'#' if b.get(at + 1) == Some(&b'!') => at = line_end(b, at),
            b'\\' => at += 2,
            b'"' => match string_end(b, at) {
                Some(end) => at = end,
                None => return Err(Trouble::UnterminatedString(at)),
            },
            b'(' | b'[' | b'{' => {
                if depth == 0 {
                    open_at = at;
                }
                depth += 1;
                at += 1;
            }
            b')' | b']' | b'}' => {
                if depth == 0 {
                    return Err(Trouble::StrayCloser(at));
                }
                depth -= 1;
                at += 1;
                if depth == 0 && at - open_at > longest {
                    return Err(Trouble::TooLong(open_at, at));
                }
            }
            _ => at += 1,
        }
    }
    if depth > 0 {
        return Err(Trouble::Unclosed(open_at));
    }
    Ok(b.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trouble(text: &str, longest: usize) -> Option<Trouble> {
        first_trouble(text.as_bytes(), 0, text.len(), longest).err()
    }

    #[test]
    fn balanced_forms_with_strings_characters_and_comments_have_no_trouble() {
        let text = "(ns a)\n(def s \"(\\\" ]\") ; (unclosed in a comment\n(def c \\()\n#!/bin/x (\n[1 {2 3}]";
        assert_eq!(trouble(text, 1 << 20), None);
        assert_eq!(list_end(text.as_bytes(), 7), Some(text.find(" ;").unwrap()));
    }

    #[test]
    fn each_trouble_is_found_where_its_form_starts() {
        let unclosed = "(a)\n(defn f [x]\n  (let [y x]\n\n(b)";
        assert_eq!(trouble(unclosed, 100), Some(Trouble::Unclosed(4)));
        assert_eq!(trouble("(a)\n(b))\n(c)", 100), Some(Trouble::StrayCloser(7)));
        assert_eq!(trouble("(a)\n\"never (closed)", 100), Some(Trouble::UnterminatedString(4)));
        assert_eq!(trouble("(a)\n[1 2 3 4 5 6]\n(c)", 8), Some(Trouble::TooLong(4, 17)));
    }

    #[test]
    fn the_scan_stops_after_the_form_reaching_until() {
        let text = "(a)\n(b)\n(c";
        assert_eq!(first_trouble(text.as_bytes(), 0, 8, 100), Ok(8));
        assert_eq!(first_trouble(text.as_bytes(), 0, 9, 100), Err(Trouble::Unclosed(8)));
        // A form starting before `until` is followed past it.
        assert_eq!(first_trouble(b"(a b c)\n(d)", 0, 2, 100), Ok(7));
        assert_eq!(first_trouble(b"(a\n\n\n", 0, 1, 100), Err(Trouble::Unclosed(0)));
    }
}
