//! Parinfer's indent mode for Clojure source: close-parens re-derived from indentation.
//!
//! This crate owns the indent-mode rules of Shaun Lebron's Parinfer (as in parinfer.js 3.x,
//! without a cursor and without smart mode) and nothing else: it is a pure function from text to
//! repaired text plus an exact list of what changed. It must not touch the store, files, or any
//! other I/O; callers decide whether a repair is shown as a suggestion or applied.
//!
//! Deviations from the reference, each chosen so that a repair changes nothing but brackets:
//!
//! - Tabs are never rewritten. The reference replaces every tab in code with two spaces; here a
//!   tab in code still counts as two columns when comparing indentation with open-paren columns
//!   (so the inferred structure is the reference's), but the tab itself stays in the text.
//! - Indentation is never changed. The reference lets tab expansion leak into an internal
//!   "indent delta" that can shift a following line's indentation even outside smart mode.
//! - Line endings are kept per line (`\n`, `\r\n`, or none on the last line); the reference
//!   rewrites every ending to `\r\n` once it sees a `\r`. As there, a lone `\r` is a char.
//! - Columns count Unicode scalar values (`char`s), not UTF-16 units.

use std::fmt;

use serde::Serialize;

/// Indent mode with the reference's default options: close-parens re-derived from indentation.
///
/// An unmatched close-paren inside a line, or a leading close-paren followed by code on its
/// line, is an error here (as in parinfer.js without `forceBalance`) because no repair of it is
/// safe to infer; see [`indent_mode_with`] to remove such parens instead.
pub fn indent_mode(text: &str) -> Result<Repair, ParinferError> {
    indent_mode_with(text, Options::default())
}

/// Indent mode with explicit [`Options`].
pub fn indent_mode_with(text: &str, options: Options) -> Result<Repair, ParinferError> {
    let lines = split_lines(text);
    let mut state = State::new(&lines, options);
    for line_no in 0..lines.len() {
        state.process_line(line_no)?;
    }
    state.finish()?;
    Ok(state.into_repair())
}

/// Options of indent mode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Options {
    /// The reference's `forceBalance`: remove unmatched close-parens inside a line and leading
    /// close-parens followed by code, instead of refusing with an error.
    pub force_balance: bool,
}

/// The result of indent mode.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Repair {
    /// The repaired text.
    pub text: String,
    /// What changed, in order: each edit is on one line of the ORIGINAL text.
    pub edits: Vec<Edit>,
}

/// One change on one line of the original text. Indent mode never adds or removes lines, so
/// the line number is also the line of the repaired text.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Edit {
    /// 1-based line in the original text.
    pub line: usize,
    /// 1-based column (in chars) where the change starts.
    pub col: usize,
    /// Text removed there (e.g. `")"` or `"))"`).
    pub removed: String,
    /// Text inserted there.
    pub inserted: String,
}

impl Repair {
    /// Whether indent mode changed anything.
    pub fn changed(&self) -> bool {
        !self.edits.is_empty()
    }

    /// A unified-style line diff from `original` to the repaired text: one hunk per run of
    /// changed lines, with a `@@ -start,count +start,count @@` header, then each old line as
    /// `-N | text` and each new line as `+N | text` (N is the 1-based line number). Empty when
    /// nothing changed.
    pub fn diff(&self, original: &str) -> String {
        let old: Vec<&str> = split_lines(original).into_iter().map(|l| l.body).collect();
        let new: Vec<&str> = split_lines(&self.text).into_iter().map(|l| l.body).collect();
        let count = old.len().max(new.len());
        let width = count.to_string().len();
        let line = |v: &[&'_ str], i: usize| v.get(i).copied().unwrap_or("").to_string();
        let mut out = String::new();
        let mut i = 0;
        while i < count {
            if old.get(i) == new.get(i) {
                i += 1;
                continue;
            }
            let start = i;
            while i < count && old.get(i) != new.get(i) {
                i += 1;
            }
            let n = i - start;
            out.push_str(&format!("@@ -{},{n} +{},{n} @@\n", start + 1, start + 1));
            for k in start..i {
                out.push_str(&format!("-{:>width$} | {}\n", k + 1, line(&old, k)));
            }
            for k in start..i {
                out.push_str(&format!("+{:>width$} | {}\n", k + 1, line(&new, k)));
            }
        }
        out
    }
}

/// Why indent mode refused to repair the text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorKind {
    /// A string is still open at the end of the text.
    UnclosedQuote,
    /// A comment holds an odd number of unescaped `"` before the next line of code: the quotes
    /// may have been meant as a string, so inferring structure past them is unsafe.
    QuoteDanger,
    /// A line of code ends in a backslash (a character literal cut by the newline).
    EolBackslash,
    /// A close-paren inside a line (before its paren trail) matches no open-paren.
    UnmatchedCloseParen,
    /// A line starts with close-parens and continues with code.
    LeadingCloseParen,
    /// Reserved for the reference's paren-mode error; indent mode closes every open-paren, so
    /// it never returns this.
    UnclosedParen,
}

impl ErrorKind {
    /// The reference's name for the error (`"unclosed-quote"`, ...).
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::UnclosedQuote => "unclosed-quote",
            ErrorKind::QuoteDanger => "quote-danger",
            ErrorKind::EolBackslash => "eol-backslash",
            ErrorKind::UnmatchedCloseParen => "unmatched-close-paren",
            ErrorKind::LeadingCloseParen => "leading-close-paren",
            ErrorKind::UnclosedParen => "unclosed-paren",
        }
    }
}

/// An indent-mode error at a position of the original text.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ParinferError {
    pub kind: ErrorKind,
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in chars.
    pub col: usize,
    /// Human-readable, names the line and column.
    pub message: String,
}

impl fmt::Display for ParinferError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ParinferError {}

/// A position in the original text, 0-based line and char index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Pos {
    line: usize,
    col: usize,
}

impl Pos {
    fn describe(self) -> String {
        format!("line {}, column {}", self.line + 1, self.col + 1)
    }
}

fn error(kind: ErrorKind, pos: Pos, detail: String) -> ParinferError {
    ParinferError {
        kind,
        line: pos.line + 1,
        col: pos.col + 1,
        message: format!("{}: {} ({})", pos.describe(), detail, kind.name()),
    }
}

/// One line of input: its text without the line ending, and the ending to put back.
struct Line<'a> {
    body: &'a str,
    ending: &'a str,
}

fn split_lines(text: &str) -> Vec<Line<'_>> {
    let mut lines = Vec::new();
    let mut start = 0;
    loop {
        let (end, next) = match text[start..].find('\n') {
            Some(i) => (start + i, Some(start + i + 1)),
            None => (text.len(), None),
        };
        // As in the reference, only `\r\n` is a line ending; a lone `\r` is a char.
        let crlf = next.is_some() && text[start..end].ends_with('\r');
        let body_end = if crlf { end - 1 } else { end };
        let ending_end = next.unwrap_or(end);
        lines.push(Line { body: &text[start..body_end], ending: &text[body_end..ending_end] });
        match next {
            Some(n) => start = n,
            None => return lines,
        }
    }
}

fn is_open(ch: char) -> bool {
    matches!(ch, '(' | '[' | '{')
}

fn is_close(ch: char) -> bool {
    matches!(ch, ')' | ']' | '}')
}

fn closer_of(open: char) -> char {
    match open {
        '(' => ')',
        '[' => ']',
        _ => '}',
    }
}

#[derive(Clone, Copy, Debug)]
struct Opener {
    ch: char,
    pos: Pos,
    /// Column in the repaired line, with a code tab counted as two, which is what indentation
    /// is compared against.
    x: usize,
}

/// The close-parens at the end of the last line of code that had any code: everything after
/// its last "closable" char up to and including its last matched close-paren.
#[derive(Debug, Default)]
struct Trail {
    line: Option<usize>,
    /// Char range in the original line.
    start: usize,
    end: usize,
    /// Openers its close-parens matched, innermost first.
    openers: Vec<Opener>,
}

/// Changes decided for one line, in original char indices.
#[derive(Debug, Default)]
struct LineChanges {
    deleted: Vec<usize>,
    trail: Option<(usize, usize, String)>,
}

struct State<'a> {
    lines: &'a [Line<'a>],
    chars: Vec<Vec<char>>,
    changes: Vec<LineChanges>,
    options: Options,

    stack: Vec<Opener>,
    trail: Trail,
    in_str: bool,
    in_comment: bool,
    escaping: bool,
    str_start: Pos,
    /// Set while the comments seen so far hold an odd number of quotes: where it turned odd.
    quote_danger: Option<Pos>,

    // Per line.
    x: usize,
    tracking_indent: bool,
    unmatched: Option<(Pos, Option<Opener>)>,
    leading_close: Option<Pos>,
}

impl<'a> State<'a> {
    fn new(lines: &'a [Line<'a>], options: Options) -> Self {
        State {
            lines,
            chars: lines.iter().map(|l| l.body.chars().collect()).collect(),
            changes: lines.iter().map(|_| LineChanges::default()).collect(),
            options,
            stack: Vec::new(),
            trail: Trail::default(),
            in_str: false,
            in_comment: false,
            escaping: false,
            str_start: Pos { line: 0, col: 0 },
            quote_danger: None,
            x: 0,
            tracking_indent: false,
            unmatched: None,
            leading_close: None,
        }
    }

    fn in_code(&self) -> bool {
        !self.in_str && !self.in_comment
    }

    fn process_line(&mut self, line_no: usize) -> Result<(), ParinferError> {
        self.x = 0;
        self.unmatched = None;
        self.leading_close = None;
        // A line that starts inside a string has no indentation point.
        self.tracking_indent = !self.in_str;

        for col in 0..self.chars[line_no].len() {
            let ch = self.chars[line_no][col];
            self.process_char(Some(ch), Pos { line: line_no, col })?;
        }
        // The newline (also after the last line) is a char: it ends comments and exposes a
        // hanging backslash. Its position is that of the last char, where the reference puts
        // the eol-backslash error.
        let last = self.chars[line_no].len().saturating_sub(1);
        self.process_char(None, Pos { line: line_no, col: last })?;

        if !self.options.force_balance {
            if let Some((pos, opener)) = self.unmatched {
                let outside_trail = self.trail.line != Some(line_no) || pos.col < self.trail.start;
                if outside_trail {
                    return Err(unmatched_error(&self.chars, pos, opener));
                }
            }
            if let Some(pos) = self.leading_close {
                if self.trail.line == Some(line_no) {
                    let ch = self.chars[pos.line][pos.col];
                    return Err(error(
                        ErrorKind::LeadingCloseParen,
                        pos,
                        format!(
                            "the line starts with `{ch}` and continues with code; indent mode \
                             cannot tell where that close-paren belongs"
                        ),
                    ));
                }
            }
        }

        if self.trail.line == Some(line_no) {
            if self.in_str {
                // A line ending inside a string has no paren trail: its "closers" are text.
                self.trail = Trail::default();
            } else {
                // Trail parens are provisional: their openers stay open until the indentation
                // of the next line of code decides which of them close here.
                while let Some(op) = self.trail.openers.pop() {
                    self.stack.push(op);
                }
            }
        }
        Ok(())
    }

    /// One char (`None` = end of line): decides whether it is kept, and its effect on state.
    fn process_char(&mut self, ch: Option<char>, pos: Pos) -> Result<(), ParinferError> {
        let mut removed = false;
        if self.tracking_indent {
            match ch {
                Some(c) if is_close(c) => {
                    // Leading close-parens belong to the previous line's trail, which the next
                    // indentation point recomputes; here they are simply dropped.
                    if !self.options.force_balance && self.leading_close.is_none() {
                        self.leading_close = Some(pos);
                    }
                    removed = true;
                }
                Some(';') => self.tracking_indent = false,
                None | Some(' ') | Some('\t') => {}
                Some(_) => self.on_indent()?,
            }
        }
        let mut width = 1;
        if !removed {
            let (w, r) = self.on_char(ch, pos)?;
            width = w;
            removed = r;
        }
        if removed {
            if ch.is_some() {
                self.changes[pos.line].deleted.push(pos.col);
            }
        } else if ch.is_some() {
            self.x += width;
        }
        Ok(())
    }

    /// Returns (visual width, whether the char is dropped).
    fn on_char(&mut self, ch: Option<char>, pos: Pos) -> Result<(usize, bool), ParinferError> {
        let mut escaped = false;
        let mut width = 1;
        let mut removed = false;
        if self.escaping {
            self.escaping = false;
            escaped = true;
            if ch.is_none() {
                if self.in_code() {
                    return Err(error(
                        ErrorKind::EolBackslash,
                        pos,
                        "the line ends in a backslash: a character literal needs a character \
                         after `\\`"
                            .into(),
                    ));
                }
                self.in_comment = false;
            }
        } else {
            match ch {
                Some(c) if is_open(c) => {
                    if self.in_code() {
                        self.stack.push(Opener { ch: c, pos, x: self.x });
                    }
                }
                Some(c) if is_close(c) => {
                    if self.in_code() {
                        if self.stack.last().is_some_and(|o| closer_of(o.ch) == c) {
                            let op = self.stack.pop().expect("checked non-empty");
                            self.trail.end = pos.col + 1;
                            self.trail.openers.push(op);
                        } else {
                            if self.unmatched.is_none() {
                                self.unmatched = Some((pos, self.stack.last().copied()));
                            }
                            removed = true;
                        }
                    }
                }
                Some('"') => {
                    if self.in_str {
                        self.in_str = false;
                    } else if self.in_comment {
                        self.quote_danger = match self.quote_danger {
                            Some(_) => None,
                            None => Some(pos),
                        };
                    } else {
                        self.in_str = true;
                        self.str_start = pos;
                    }
                }
                Some(';') => {
                    if self.in_code() {
                        self.in_comment = true;
                    }
                }
                Some('\\') => self.escaping = true,
                Some('\t') => {
                    if self.in_code() {
                        width = 2;
                    }
                }
                None => self.in_comment = false,
                Some(_) => {}
            }
        }

        // A "closable" char can be the last code char of a list: the paren trail starts after
        // it, so close-parens are inferred right there.
        let closable = match ch {
            _ if removed || !self.in_code() => false,
            None => false,
            Some(' ') | Some('\t') => escaped,
            Some(c) if is_close(c) => escaped,
            Some(_) => true,
        };
        if closable {
            self.trail = Trail {
                line: Some(pos.line),
                start: pos.col + 1,
                end: pos.col + 1,
                openers: Vec::new(),
            };
        }
        Ok((width, removed))
    }

    /// The first code char of a line: its column closes every open-paren at or right of it.
    fn on_indent(&mut self) -> Result<(), ParinferError> {
        self.tracking_indent = false;
        if let Some(pos) = self.quote_danger {
            return Err(quote_danger_error(pos));
        }
        self.correct_paren_trail(self.x);
        Ok(())
    }

    fn correct_paren_trail(&mut self, indent_x: usize) {
        let mut parens = String::new();
        while let Some(top) = self.stack.last() {
            if top.x < indent_x {
                break;
            }
            parens.push(closer_of(top.ch));
            self.stack.pop();
        }
        if let Some(line) = self.trail.line {
            self.changes[line].trail = Some((self.trail.start, self.trail.end, parens));
        }
    }

    fn finish(&mut self) -> Result<(), ParinferError> {
        if let Some(pos) = self.quote_danger {
            return Err(quote_danger_error(pos));
        }
        if self.in_str {
            return Err(error(
                ErrorKind::UnclosedQuote,
                self.str_start,
                "this string is never closed: add the closing `\"`".into(),
            ));
        }
        // The end of the text is an indentation point at column 0: everything still open closes
        // at the end of the last line of code.
        self.correct_paren_trail(0);
        Ok(())
    }

    fn into_repair(self) -> Repair {
        let mut text = String::new();
        let mut edits = Vec::new();
        for (i, line) in self.lines.iter().enumerate() {
            let chars = &self.chars[i];
            for (start, end, inserted) in line_ops(&self.changes[i]) {
                let removed: Vec<char> = chars[start..end].to_vec();
                let ins: Vec<char> = inserted.chars().collect();
                let prefix = removed.iter().zip(&ins).take_while(|(a, b)| a == b).count();
                let suffix = removed[prefix..]
                    .iter()
                    .rev()
                    .zip(ins[prefix..].iter().rev())
                    .take_while(|(a, b)| a == b)
                    .count();
                let removed: String = removed[prefix..removed.len() - suffix].iter().collect();
                let ins: String = ins[prefix..ins.len() - suffix].iter().collect();
                if removed.is_empty() && ins.is_empty() {
                    continue;
                }
                edits.push((i, start + prefix, removed, ins));
            }
            let mut col = 0;
            for (start, end, inserted) in line_ops(&self.changes[i]) {
                text.extend(&chars[col..start]);
                text.push_str(&inserted);
                col = end;
            }
            text.extend(&chars[col..]);
            text.push_str(line.ending);
        }
        let edits = edits
            .into_iter()
            .map(|(line, col, removed, inserted)| Edit {
                line: line + 1,
                col: col + 1,
                removed,
                inserted,
            })
            .collect();
        Repair { text, edits }
    }
}

/// A line's changes as sorted, non-overlapping replacements `(start, end, inserted)`, adjacent
/// ones merged so that e.g. `]]` → `])` reads as one edit.
fn line_ops(changes: &LineChanges) -> Vec<(usize, usize, String)> {
    let mut ops: Vec<(usize, usize, String)> = Vec::new();
    if let Some((s, e, parens)) = &changes.trail {
        ops.push((*s, *e, parens.clone()));
    }
    for &d in &changes.deleted {
        // A dropped unmatched paren inside the trail is already replaced with the trail.
        let in_trail = changes.trail.as_ref().is_some_and(|(s, e, _)| *s <= d && d < *e);
        if !in_trail {
            ops.push((d, d + 1, String::new()));
        }
    }
    ops.sort_by_key(|(s, e, _)| (*s, *e));
    let mut merged: Vec<(usize, usize, String)> = Vec::new();
    for (s, e, ins) in ops {
        match merged.last_mut() {
            Some(last) if last.1 == s => {
                last.1 = e;
                last.2.push_str(&ins);
            }
            _ => merged.push((s, e, ins)),
        }
    }
    merged
}

fn quote_danger_error(pos: Pos) -> ParinferError {
    error(
        ErrorKind::QuoteDanger,
        pos,
        "this `\"` leaves an odd number of quotes in the comments before the next line of code; \
         balance the quotes in the comment or escape it as `\\\"`"
            .into(),
    )
}

fn unmatched_error(chars: &[Vec<char>], pos: Pos, opener: Option<Opener>) -> ParinferError {
    let ch = chars[pos.line][pos.col];
    let detail = match opener {
        Some(o) => format!(
            "`{ch}` inside the line does not match the innermost open `{}` (at {}), which \
             expects `{}`",
            o.ch,
            o.pos.describe(),
            closer_of(o.ch)
        ),
        None => format!("`{ch}` inside the line closes nothing: no bracket is open there"),
    };
    error(ErrorKind::UnmatchedCloseParen, pos, detail)
}

#[cfg(test)]
mod tests;
