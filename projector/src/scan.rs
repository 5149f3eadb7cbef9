//! A hand-written scanner of Clojure text for the alias view: the alias tokens, the lines whose
//! indentation may follow a renamed token, and the top-level forms that can declare aliases —
//! what the alias view needs from a file, without a tree-sitter parse of all of it.
//!
//! **Why.** The alias view of a cold (uncached) file was dominated by the tree-sitter parse of
//! the whole text (~3 ms per 1000 lines, more than the store read it follows). This scanner
//! reads the same text in one pass over its bytes (~20x faster) and only the namespace
//! declaration forms, a few lines, are still parsed by tree-sitter, so the declaration is read
//! by the engine's own `nsdecl`, exactly as the engine reads it.
//!
//! **Agreement with the tree.** The scanner follows the grammar the engine parses with
//! (`tree-sitter-clojure-orchard` 0.2.9, `grammar.js`): its token classes (whitespace, symbol
//! and keyword characters, numbers, character literals, strings), which forms take metadata,
//! and the node each token belongs to (a form with metadata starts at its first `^`). Where a
//! text is anything the scanner does not fully understand — a syntax error tree-sitter would
//! report, a token tree-sitter could split differently (`1abc/d`, `\abc`, `foo/`), a
//! nesting deeper than [`MAX_DEPTH`] — [`scan`] returns `None` and the caller renders from the
//! parse tree instead: the tree stays the reference, and the scanner only ever answers for
//! texts on which it agrees with it (checked on every corpus file by the tests).

/// An alias token of a file: the alias part of an alias use ([`formdb_engine::syntax::alias_site`]), or the symbol an
/// alias is bound by (after `:as`/`:as-alias` anywhere in the file, or the first argument of
/// `(alias 'a 'ns)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Site {
    pub start: usize,
    pub end: usize,
    /// An alias use (`q/x`, `::q/x`, `#::q{}`), not a binding.
    pub used: bool,
}

/// A line whose indentation may follow a renamed token: its first non-blank byte starts a
/// token, and a form enclosing that token (not the file) starts on an earlier line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Aligned {
    pub line: usize,
    /// Byte offset of the line.
    pub start: usize,
    /// Bytes of leading blanks (spaces and tabs).
    pub ws: usize,
    /// Characters of leading blanks.
    pub col: usize,
    pub tabs: bool,
    /// The line the innermost enclosing form that starts on an earlier line starts on.
    pub anchor: usize,
}

/// Nesting beyond this is left to tree-sitter (the scanner recurses once per level): well
/// inside the engine's depth gate (`syntax::MAX_DEPTH`, counted in tree nodes, a few per level
/// at most), so a text the engine keeps raw for its depth is never answered for here.
const MAX_DEPTH: usize = formdb_engine::syntax::MAX_DEPTH / 2;

/// What the alias view needs from a text.
#[derive(Debug, Default)]
pub(crate) struct Scan {
    /// Every alias token, sorted by position (as the tree walk finds them).
    pub sites: Vec<Site>,
    /// Every line whose indentation may follow a renamed token, in line order.
    pub aligned: Vec<Aligned>,
    /// Byte ranges of the top-level forms that can declare aliases: lists whose head is (or may
    /// be) `ns`, `in-ns`, `require`, `use`, `alias`, ... In file order.
    pub decl_forms: Vec<(usize, usize)>,
}

impl Scan {
    /// The aligned lines after line `first`.
    pub(crate) fn aligned_after(&self, first: usize) -> &[Aligned] {
        // In line order: each is pushed as the scan passes its line.
        &self.aligned[self.aligned.partition_point(|l| l.line <= first)..]
    }
}

/// Scan a text; `None` if the scanner does not vouch for agreeing with the parse tree on it.
pub(crate) fn scan(text: &str) -> Option<Scan> {
    let mut s = Scanner::new(text);
    s.source()?;
    Some(Scan { sites: finish_sites(s.sites), aligned: s.aligned, decl_forms: s.decl_forms })
}

fn finish_sites(mut sites: Vec<Site>) -> Vec<Site> {
    sites.sort_by_key(|s| s.start);
    sites.dedup_by_key(|s| s.start);
    sites
}

/// Whitespace as the grammar has it (`java.lang.Character.isWhitespace` and the comma).
fn is_ws(c: char) -> bool {
    matches!(
        c,
        '\u{c}'
            | '\n'
            | '\r'
            | '\t'
            | ','
            | ' '
            | '\u{b}'
            | '\u{1c}'..='\u{1f}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{1680}'
            | '\u{2000}'..='\u{2006}'
            | '\u{2008}'..='\u{200a}'
            | '\u{205f}'
            | '\u{3000}'
    )
}

/// Characters that end a symbol or keyword token.
fn is_delim(c: char) -> bool {
    match u8::try_from(c) {
        Ok(b) if b < 0x80 => ASCII_DELIM[b as usize],
        _ => is_ws(c),
    }
}

/// [`is_delim`] of each ASCII character: a table, as testing every byte of every token is the
/// scanner's inner loop.
const ASCII_DELIM: [bool; 128] = {
    let mut t = [false; 128];
    let mut b = 0;
    while b < 128 {
        t[b] = matches!(
            b as u8,
            b'\x0b' | b'\x0c' | b'\n' | b'\r' | b'\t' | b',' | b' ' | 0x1c..=0x1f
        ) || matches!(
            b as u8,
            b'(' | b')'
                | b'['
                | b']'
                | b'{'
                | b'}'
                | b'"'
                | b'@'
                | b'~'
                | b'^'
                | b';'
                | b'`'
                | b'\\'
        );
        b += 1;
    }
    t
};

/// The heads that make a top-level list part of the namespace declaration (`nsdecl`'s
/// `parse_ns_form` and `apply_top_level_directive`).
fn declares(head: &str) -> bool {
    let name = match head.split_once('/') {
        Some(("clojure.core" | "cljs.core", name)) => name,
        Some(_) => return false,
        None => head,
    };
    matches!(
        name,
        "ns" | "in-ns"
            | "require"
            | "require-macros"
            | "use"
            | "use-macros"
            | "import"
            | "refer-clojure"
            | "refer"
            | "alias"
    )
}

/// True if `run` is one whole NUMBER token of the grammar (so tree-sitter does not split it).
fn is_number(run: &str) -> bool {
    let s = run.strip_prefix(['+', '-']).unwrap_or(run);
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let hex = s
        .strip_prefix("0x")
        .or_else(|| s.strip_prefix("0X"))
        .map(|h| h.strip_suffix('N').unwrap_or(h))
        .is_some_and(|h| !h.is_empty() && h.bytes().all(|b| b.is_ascii_hexdigit()));
    let octal = s
        .strip_prefix('0')
        .map(|o| o.strip_suffix('N').unwrap_or(o))
        .is_some_and(|o| !o.is_empty() && o.bytes().all(|b| (b'0'..=b'7').contains(&b)));
    let radix = s.split_once(['r', 'R']).is_some_and(|(n, v)| {
        digits(n) && !v.is_empty() && v.bytes().all(|b| b.is_ascii_alphanumeric())
    });
    let ratio = s.split_once('/').is_some_and(|(n, d)| digits(n) && digits(d));
    let integer = digits(s.strip_suffix(['M', 'N']).unwrap_or(s));
    let double = {
        let s = s.strip_suffix('M').unwrap_or(s);
        let (mantissa, exp) = match s.split_once(['e', 'E']) {
            Some((m, e)) => (m, Some(e.strip_prefix(['+', '-']).unwrap_or(e))),
            None => (s, None),
        };
        let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        digits(int) && (frac.is_empty() || digits(frac)) && exp.is_none_or(digits)
    };
    hex || octal || radix || ratio || integer || double
}

/// A value as its enclosing collection sees it (what the alias sites and the declaration
/// forms depend on).
#[derive(Clone, Copy, Debug)]
enum Value {
    /// A symbol token (without its metadata): its span, and whether it has a namespace part.
    Sym {
        start: usize,
        end: usize,
        qualified: bool,
    },
    Kwd {
        start: usize,
        end: usize,
    },
    /// `'x`: the span of the quoted value when it is a symbol without a namespace.
    Quoted(Option<(usize, usize)>),
    /// A list (with or without metadata), and its first value when that is a symbol.
    List {
        head: Head,
    },
    /// `nil`, `true`, `false` (the grammar's own tokens, which take no metadata).
    Literal,
    /// `#?(...)` (not `#?@(...)`).
    ReadCond,
    Other,
}

#[derive(Clone, Copy, Debug)]
enum Head {
    Empty,
    Sym(usize, usize),
    Other,
}

/// Which collection a bracket opens: what closes it, and whether its values are checked for
/// alias bindings (`:as x`, `(alias 'x ...)`: lists and vectors, as in the tree walk).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Coll {
    List,
    Vec,
    /// Maps, sets, `#(...)`, `#?(...)`.
    Plain(u8),
}

struct Scanner<'a> {
    text: &'a str,
    b: &'a [u8],
    pos: usize,
    line_starts: Vec<usize>,
    /// The row `pos` was last seen on (form starts only move forward).
    row: usize,
    /// (first non-blank byte, line, line start, blank bytes) of each line after the first that
    /// has something on it; `next` is the first not yet passed.
    pending: Vec<(usize, usize, usize, usize)>,
    next: usize,
    /// Start rows of the nodes enclosing `pos` (not the file), outermost first.
    rows: Vec<usize>,
    sites: Vec<Site>,
    aligned: Vec<Aligned>,
    decl_forms: Vec<(usize, usize)>,
}

impl<'a> Scanner<'a> {
    fn new(text: &'a str) -> Scanner<'a> {
        let b = text.as_bytes();
        let mut line_starts = vec![0usize];
        line_starts.extend(memchr_newlines(b));
        let mut pending = Vec::new();
        for line in 1..line_starts.len() {
            let start = line_starts[line];
            let end = line_starts.get(line + 1).map_or(b.len(), |e| e - 1);
            let ws = b[start..end].iter().take_while(|c| matches!(c, b' ' | b'\t')).count();
            if start + ws < end {
                pending.push((start + ws, line, start, ws));
            }
        }
        Scanner {
            text,
            b,
            pos: 0,
            line_starts,
            row: 0,
            pending,
            next: 0,
            rows: Vec::new(),
            sites: Vec::new(),
            aligned: Vec::new(),
            decl_forms: Vec::new(),
        }
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.pos).copied()
    }

    fn peek_at(&self, off: usize) -> Option<u8> {
        self.b.get(self.pos + off).copied()
    }

    fn char_at(&self, at: usize) -> Option<char> {
        self.text.get(at..)?.chars().next()
    }

    /// The row of `at`, for positions at or after the last asked for.
    fn row_of(&mut self, at: usize) -> usize {
        while self.line_starts.get(self.row + 1).is_some_and(|s| *s <= at) {
            self.row += 1;
        }
        self.row
    }

    /// A node starts at `at` (a form, a `^meta`, a `#_` discard): it encloses what follows
    /// until [`Scanner::close`].
    fn open(&mut self, at: usize) {
        let row = self.row_of(at);
        self.rows.push(row);
    }

    fn close(&mut self) {
        self.rows.pop();
    }

    /// A token starts at `at`. A line whose first non-blank byte this is may be aligned: its
    /// anchor is the innermost enclosing node that starts on an earlier line. Lines whose first
    /// byte no token starts at (inside a multi-line string, or a comma) are passed over.
    fn token(&mut self, at: usize) {
        while let Some(&(first, line, start, ws)) = self.pending.get(self.next) {
            if first > at {
                break;
            }
            self.next += 1;
            if first < at {
                continue;
            }
            // Rows only grow inward, so the innermost one before the line is the last.
            if let Some(&anchor) = self.rows.iter().rev().find(|r| **r < line) {
                let blanks = &self.b[start..start + ws];
                self.aligned.push(Aligned {
                    line,
                    start,
                    ws,
                    col: ws,
                    tabs: blanks.contains(&b'\t'),
                    anchor,
                });
            }
        }
    }

    fn source(&mut self) -> Option<()> {
        // `syntax::parse` hands tree-sitter a leading byte order mark as blanks.
        if self.text.starts_with('\u{feff}') {
            self.pos = 3;
        }
        loop {
            self.gaps(0)?;
            match self.peek() {
                None => return Some(()),
                Some(b')' | b']' | b'}') => return None,
                Some(_) => {}
            }
            let start = self.pos;
            let value = self.form(0)?;
            if let Value::List { head } = value {
                let declares = match head {
                    Head::Empty => false,
                    Head::Sym(s, e) => declares(&self.text[s..e]),
                    // A reader conditional or anything else in head position: let the parse
                    // of the declaration forms decide.
                    Head::Other => true,
                };
                if declares {
                    self.decl_forms.push((start, self.pos));
                }
            }
        }
    }

    /// Whitespace, comments and `#_` discards.
    fn gaps(&mut self, depth: usize) -> Option<()> {
        loop {
            let Some(c) = self.peek() else { return Some(()) };
            match c {
                b' ' | b'\t' | b'\n' | b'\r' | b',' | 0x0b | 0x0c | 0x1c..=0x1f => self.pos += 1,
                b';' => self.comment(),
                b'#' if self.peek_at(1) == Some(b'!') => self.comment(),
                b'#' if self.peek_at(1) == Some(b'_') => {
                    let at = self.pos;
                    self.open(at);
                    self.token(at);
                    self.pos += 2;
                    self.gaps(depth)?;
                    self.required_form(depth + 1)?;
                    self.close();
                }
                c if c >= 0x80 => {
                    let ch = self.char_at(self.pos)?;
                    if !is_ws(ch) {
                        return Some(());
                    }
                    self.pos += ch.len_utf8();
                }
                _ => return Some(()),
            }
        }
    }

    /// Whitespace only (between `#?` and its list).
    fn blanks(&mut self) {
        while let Some(ch) = self.char_at(self.pos).filter(|c| is_ws(*c)) {
            self.pos += ch.len_utf8();
        }
    }

    fn comment(&mut self) {
        self.token(self.pos);
        self.pos = match self.b[self.pos..].iter().position(|c| *c == b'\n') {
            Some(i) => self.pos + i + 1,
            None => self.b.len(),
        };
    }

    /// A form where the grammar requires one (after a prefix like `'` or `^meta`).
    fn required_form(&mut self, depth: usize) -> Option<Value> {
        match self.peek() {
            None | Some(b')' | b']' | b'}') => None,
            Some(_) => self.form(depth),
        }
    }

    /// One form with its metadata; the node opens at its first `^`.
    fn form(&mut self, depth: usize) -> Option<Value> {
        if depth > MAX_DEPTH {
            return None;
        }
        let start = self.pos;
        self.open(start);
        let mut meta = false;
        loop {
            let marker = match (self.peek(), self.peek_at(1)) {
                (Some(b'^'), _) => 1,
                (Some(b'#'), Some(b'^')) => 2,
                _ => break,
            };
            let at = self.pos;
            self.open(at);
            self.token(at);
            self.pos += marker;
            self.gaps(depth)?;
            self.required_form(depth + 1)?;
            self.close();
            self.gaps(depth)?;
            meta = true;
        }
        let value = self.bare(depth, meta)?;
        self.close();
        Some(value)
    }

    /// A form without its metadata. `meta`: metadata came before, which only some forms take.
    fn bare(&mut self, depth: usize, meta: bool) -> Option<Value> {
        let at = self.pos;
        let c = self.peek()?;
        let prefixed = |s: &mut Self, len: usize| -> Option<Value> {
            s.token(at);
            s.pos += len;
            s.gaps(depth)?;
            s.required_form(depth + 1)
        };
        match c {
            b'(' => self.coll(depth, 1, Coll::List),
            b'[' => self.coll(depth, 1, Coll::Vec),
            b'{' => self.coll(depth, 1, Coll::Plain(b'}')),
            b'"' if !meta => {
                self.token(at);
                self.pos += 1;
                self.string()?;
                Some(Value::Other)
            }
            b'\\' if !meta => self.character(),
            b':' if !meta => self.keyword(),
            b'\'' => {
                let inner = prefixed(self, 1)?;
                Some(Value::Quoted(match inner {
                    Value::Sym { start, end, qualified: false } => Some((start, end)),
                    _ => None,
                }))
            }
            b'`' => prefixed(self, 1).map(|_| Value::Other),
            b'~' if self.peek_at(1) == Some(b'@') => prefixed(self, 2).map(|_| Value::Other),
            b'~' | b'@' => prefixed(self, 1).map(|_| Value::Other),
            b'#' => self.dispatch(depth, meta),
            // Closers; and strings, characters, keywords after metadata (they take none).
            b')' | b']' | b'}' | b'"' | b'\\' | b':' => None,
            c if c.is_ascii_digit()
                || (matches!(c, b'+' | b'-')
                    && self.peek_at(1).is_some_and(|d| d.is_ascii_digit())) =>
            {
                if meta {
                    return None;
                }
                self.token(at);
                let end = self.run_end(at);
                self.pos = end;
                is_number(&self.text[at..end]).then_some(Value::Other)
            }
            _ => self.symbol(meta),
        }
    }

    /// `#` forms other than `#_`, `#!` and `#^` (gaps and metadata).
    fn dispatch(&mut self, depth: usize, meta: bool) -> Option<Value> {
        let at = self.pos;
        self.token(at);
        match self.peek_at(1)? {
            b'{' => self.coll(depth, 2, Coll::Plain(b'}')),
            b'(' => self.coll(depth, 2, Coll::Plain(b')')),
            b'"' if !meta => {
                self.pos += 2;
                self.string()?;
                Some(Value::Other)
            }
            b'?' => {
                let splicing = self.peek_at(2) == Some(b'@');
                self.pos += if splicing { 3 } else { 2 };
                self.blanks();
                if self.peek() != Some(b'(') {
                    return None;
                }
                self.coll(depth, 1, Coll::Plain(b')'))?;
                Some(if splicing { Value::Other } else { Value::ReadCond })
            }
            b':' => {
                // `#:ns{}`, `#::{}`, `#::alias{}`: the prefix is a keyword, or a bare `::`.
                self.pos += 1;
                let bare = self.peek_at(1) == Some(b':')
                    && self.char_at(self.pos + 2).is_none_or(is_delim);
                if bare {
                    self.token(self.pos);
                    self.pos += 2;
                } else if let Value::Kwd { start, end } = self.keyword()? {
                    let kw = &self.text[start..end];
                    if let Some(name) = kw.strip_prefix("::").filter(|n| !n.contains('/')) {
                        self.sites.push(Site { start: end - name.len(), end, used: true });
                    }
                }
                self.gaps(depth)?;
                if self.peek() != Some(b'{') {
                    return None;
                }
                self.coll(depth, 1, Coll::Plain(b'}'))
            }
            b'\'' => {
                self.pos += 2;
                self.gaps(depth)?;
                self.required_form(depth + 1).map(|_| Value::Other)
            }
            b'#' if !meta => {
                self.pos += 2;
                self.gaps(depth)?;
                self.required_form(depth + 1).map(|_| Value::Other)
            }
            b'=' => {
                // Read-eval takes a list, a reader conditional or a symbol.
                self.pos += 2;
                self.gaps(depth)?;
                match self.required_form(depth + 1)? {
                    Value::List { .. } | Value::ReadCond | Value::Sym { .. } => Some(Value::Other),
                    _ => None,
                }
            }
            b'#' => None,
            _ => {
                // A tagged literal: `#tag value`, the tag a symbol.
                self.pos += 1;
                self.gaps(depth)?;
                if !matches!(self.required_form(depth + 1)?, Value::Sym { .. }) {
                    return None;
                }
                self.gaps(depth)?;
                self.required_form(depth + 1).map(|_| Value::Other)
            }
        }
    }

    /// A collection whose opening bracket (after a `open - 1` byte marker) is at `pos`.
    fn coll(&mut self, depth: usize, open: usize, kind: Coll) -> Option<Value> {
        self.token(self.pos);
        self.pos += open;
        let close = match kind {
            Coll::List => b')',
            Coll::Vec => b']',
            Coll::Plain(c) => c,
        };
        let bindings = matches!(kind, Coll::List | Coll::Vec);
        let mut head = Head::Empty;
        // The previous value was `:as`/`:as-alias`, or the `alias` of `(alias 'x ...)`.
        let mut binds_next = false;
        let mut i = 0;
        loop {
            self.gaps(depth)?;
            if let c @ (b')' | b']' | b'}') = self.peek()? {
                if c != close {
                    return None;
                }
                self.token(self.pos);
                self.pos += 1;
                break;
            }
            let value = self.form(depth + 1)?;
            if i == 0 {
                head = match value {
                    Value::Sym { start, end, .. } => Head::Sym(start, end),
                    _ => Head::Other,
                };
            }
            if bindings {
                if binds_next {
                    let bound = match value {
                        Value::Sym { start, end, qualified: false } => Some((start, end)),
                        Value::Quoted(sym) => sym,
                        _ => None,
                    };
                    if let Some((start, end)) = bound {
                        self.sites.push(Site { start, end, used: false });
                    }
                }
                binds_next = match value {
                    Value::Kwd { start, end } => {
                        matches!(&self.text[start..end], ":as" | ":as-alias")
                    }
                    Value::Sym { start, end, .. } => {
                        i == 0 && matches!(&self.text[start..end], "alias" | "clojure.core/alias")
                    }
                    _ => false,
                };
            }
            i += 1;
        }
        Some(match kind {
            Coll::List => Value::List { head },
            _ => Value::Other,
        })
    }

    /// The end of the symbol or keyword characters from `from`.
    fn run_end(&self, from: usize) -> usize {
        let mut end = from;
        while end < self.b.len() {
            let c = self.b[end];
            if c < 0x80 {
                if ASCII_DELIM[c as usize] {
                    break;
                }
                end += 1;
            } else {
                match self.char_at(end) {
                    Some(ch) if !is_delim(ch) => end += ch.len_utf8(),
                    _ => break,
                }
            }
        }
        end
    }

    /// A `"..."` string body after its opening quote (strings and regexes).
    fn string(&mut self) -> Option<()> {
        loop {
            let i = self.b[self.pos..].iter().position(|c| matches!(c, b'"' | b'\\'))?;
            self.pos += i;
            if self.b[self.pos] == b'"' {
                self.pos += 1;
                return Some(());
            }
            // The grammar's escape is `\` and any character but a line break.
            match self.peek_at(1)? {
                b'\n' | b'\r' => return None,
                _ => {
                    let ch = self.char_at(self.pos + 1)?;
                    self.pos += 1 + ch.len_utf8();
                }
            }
        }
    }

    /// `\c`, `\newline`, `\u00e9`, `\o17`. A character literal run together with a following
    /// token (`\abc`) is left to tree-sitter.
    fn character(&mut self) -> Option<Value> {
        let at = self.pos;
        self.token(at);
        let rest = &self.text[at + 1..];
        let len = ["backspace", "formfeed", "newline", "return", "space", "tab"]
            .iter()
            .find(|n| rest.starts_with(**n))
            .map(|n| n.len())
            .or_else(|| {
                let hex = rest.strip_prefix('u')?.as_bytes();
                (hex.len() >= 4 && hex[..4].iter().all(u8::is_ascii_hexdigit)).then_some(5)
            })
            .or_else(|| {
                let oct = rest.strip_prefix('o')?.as_bytes();
                let n = oct.iter().take(3).take_while(|c| c.is_ascii_digit()).count();
                (n > 0).then_some(1 + n)
            })
            .or_else(|| rest.chars().next().map(char::len_utf8))?;
        self.pos = at + 1 + len;
        if self.char_at(self.pos).is_some_and(|c| !is_delim(c)) {
            return None;
        }
        Some(Value::Other)
    }

    /// `:kw`, `:ns/kw`, `::kw`, `::alias/kw`; the alias of the last is a site.
    fn keyword(&mut self) -> Option<Value> {
        let at = self.pos;
        self.token(at);
        let marker = if self.peek_at(1) == Some(b':') { 2 } else { 1 };
        let end = self.run_end(at + marker);
        self.pos = end;
        let rest = &self.text[at + marker..end];
        if rest.is_empty() || rest.starts_with(':') {
            return None;
        }
        if let Some((ns, name)) = rest.split_once('/') {
            if name.is_empty() && !ns.is_empty() {
                return None;
            }
            if marker == 2 && !ns.is_empty() {
                let start = at + marker;
                self.sites.push(Site { start, end: start + ns.len(), used: true });
            }
        }
        Some(Value::Kwd { start: at, end })
    }

    /// A symbol (or `nil`/`true`/`false`); the namespace part of `ns/name` is a site.
    fn symbol(&mut self, meta: bool) -> Option<Value> {
        let at = self.pos;
        self.token(at);
        let end = self.run_end(at);
        if end == at {
            return None;
        }
        self.pos = end;
        let sym = &self.text[at..end];
        if matches!(sym, "nil" | "true" | "false") {
            // After metadata tree-sitter reads these as symbols; not worth following.
            return (!meta).then_some(Value::Literal);
        }
        let qualified = match sym.split_once('/') {
            None => false,
            Some(("", "")) => false,
            Some(("", _) | (_, "") | ("nil" | "true" | "false", _)) => return None,
            Some((ns, _)) => {
                self.sites.push(Site { start: at, end: at + ns.len(), used: true });
                true
            }
        };
        Some(Value::Sym { start: at, end, qualified })
    }
}

/// Byte offsets just after each `\n`.
fn memchr_newlines(b: &[u8]) -> impl Iterator<Item = usize> + '_ {
    b.iter().enumerate().filter(|(_, c)| **c == b'\n').map(|(i, _)| i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_delimiter_table_is_the_grammar_s() {
        for b in 0u8..128 {
            let c = b as char;
            let grammar = is_ws(c)
                || matches!(
                    c,
                    '(' | ')' | '[' | ']' | '{' | '}' | '"' | '@' | '~' | '^' | ';' | '`' | '\\'
                );
            assert_eq!(is_delim(c), grammar, "{c:?}");
        }
        assert!(is_delim('\u{2028}') && is_delim('\u{3000}') && !is_delim('\u{a0}'));
    }

    #[test]
    fn numbers_are_whole_number_tokens() {
        for n in [
            "1", "-1", "+1.5", "1.", "1e5", "1.5e-3M", "0x1F", "0XffN", "017", "2r101", "1/2",
            "7N", "08",
        ] {
            assert!(is_number(n), "{n}");
        }
        for n in ["1a", "1/x", "1.2.3", "0x", "1e", "2r", "1//2", "-"] {
            assert!(!is_number(n), "{n}");
        }
    }
}
