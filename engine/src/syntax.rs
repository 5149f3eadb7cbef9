//! Tree-sitter plumbing: parse Clojure text and split a file into top-level pieces.
//!
//! A file is a sequence of pieces, each one top-level form with the trivia in front of it
//! (blank lines, `;` comments, `#_` discards, a shebang), followed by the file's trailing trivia.
//! Concatenating `leading + source` of every piece and then `trailing` gives back the file byte
//! for byte; `split_file` checks that law before it returns.

use std::cell::RefCell;
use std::collections::{BTreeSet, HashSet};
use std::sync::Mutex;
use std::sync::OnceLock;

use tree_sitter::{InputEdit, Node, Parser, Point, Tree};

use crate::scan;

/// Languages we parse as Clojure. Everything else is a blob.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Lang {
    Clj,
    Cljc,
    Cljs,
    Edn,
    Bb,
}

impl Lang {
    pub fn from_path(path: &str) -> Option<Lang> {
        let ext = path.rsplit_once('.').map(|(_, e)| e)?;
        Some(match ext {
            "clj" => Lang::Clj,
            "cljc" => Lang::Cljc,
            "cljs" => Lang::Cljs,
            "edn" => Lang::Edn,
            "bb" => Lang::Bb,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Lang::Clj => "clj",
            Lang::Cljc => "cljc",
            Lang::Cljs => "cljs",
            Lang::Edn => "edn",
            Lang::Bb => "bb",
        }
    }

    /// The namespace whose vars are referred implicitly.
    pub fn core_ns(self) -> &'static str {
        match self {
            Lang::Cljs => "cljs.core",
            _ => "clojure.core",
        }
    }
}

/// A 1-based line and column; the column counts characters, as Clojure's `:column` does.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Default,
    serde::Serialize,
    serde::Deserialize,
)]
pub struct Pos {
    pub line: u32,
    pub col: u32,
}

/// A syntax error with the place it was found.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SyntaxError {
    pub pos: Pos,
    pub message: String,
}

impl std::fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}: {}", self.pos.line, self.pos.col, self.message)
    }
}

thread_local! {
    static PARSER: RefCell<Parser> = RefCell::new({
        let mut p = Parser::new();
        p.set_language(&tree_sitter_clojure_orchard::LANGUAGE.into())
            .expect("the Clojure grammar is compatible with the linked tree-sitter");
        p
    });
}

/// Parse text with the Clojure grammar. A UTF-8 byte order mark is blanked (same length) in the
/// copy handed to tree-sitter so byte offsets still index the original text.
pub fn parse(text: &str) -> Tree {
    PARSER.with(|p| {
        let mut p = p.borrow_mut();
        let tree = if let Some(rest) = text.strip_prefix('\u{feff}') {
            let mut copy = String::with_capacity(text.len());
            copy.push_str("   ");
            copy.push_str(rest);
            p.parse(&copy, None)
        } else {
            p.parse(text, None)
        };
        tree.expect("parsing without a timeout or cancellation flag always returns a tree")
    })
}

/// The last text parsed for each of a few paths of a store (by `Store::id`), with its tree: an
/// edited version of a file is re-parsed from it, and tree-sitter then re-reads only around the
/// bytes that changed (a save of an 8,000-line file re-parses in a fraction of the time a fresh
/// parse takes).
static LAST_PARSED: Mutex<Vec<LastParsed>> = Mutex::new(Vec::new());

struct LastParsed {
    store: u64,
    path: String,
    text: String,
    tree: Tree,
}

/// Paths whose last parse is kept (the files being edited now).
const LAST_PARSED_PATHS: usize = 8;

/// The largest text whose parse (and per-form memo) is kept for the next save of its file:
/// clojure/core.clj is a quarter of it. Larger files parse afresh each save.
pub const KEEP_AT_MOST: usize = 1 << 20;

/// [`parse`] for the text of `path`, re-parsing from the last text parsed for that path when
/// there is one. The tree is the one a fresh parse gives: tree-sitter's incremental parse of
/// valid text is exact, and a text with a syntax error is parsed afresh so its error is found
/// the way [`parse`] finds it.
pub fn parse_at(store: &crate::store::Store, path: &str, text: &str) -> Tree {
    let store = store.id();
    let last = {
        let mut last = LAST_PARSED.lock().unwrap_or_else(|p| p.into_inner());
        last.iter().position(|l| l.store == store && l.path == path).map(|i| last.remove(i))
    };
    let bom = |t: &str| t.starts_with('\u{feff}');
    let reparsed = match &last {
        Some(LastParsed { text: old_text, tree: old_tree, .. })
            if !bom(old_text) && !bom(text) && !old_tree.root_node().has_error() =>
        {
            let mut tree = old_tree.clone();
            tree.edit(&edit_between(old_text, text));
            PARSER
                .with(|p| p.borrow_mut().parse(text, Some(&tree)))
                .filter(|t| !t.root_node().has_error())
        }
        _ => None,
    };
    let tree = reparsed.unwrap_or_else(|| parse(text));
    let mut last = LAST_PARSED.lock().unwrap_or_else(|p| p.into_inner());
    if text.len() > KEEP_AT_MOST {
        return tree;
    }
    if last.len() >= LAST_PARSED_PATHS {
        last.remove(0);
    }
    last.push(LastParsed {
        store,
        path: path.to_string(),
        text: text.to_string(),
        tree: tree.clone(),
    });
    tree
}

/// The text the kept parse of `path` in `store` is of, if one is kept.
#[cfg(test)]
pub(crate) fn last_parsed_text(store: &crate::store::Store, path: &str) -> Option<String> {
    let last = LAST_PARSED.lock().unwrap_or_else(|p| p.into_inner());
    last.iter().find(|l| l.store == store.id() && l.path == path).map(|l| l.text.clone())
}

/// The edit that turns `old` into `new`: what lies between their common prefix and suffix.
fn edit_between(old: &str, new: &str) -> InputEdit {
    let mut prefix = old.bytes().zip(new.bytes()).take_while(|(a, b)| a == b).count();
    while !old.is_char_boundary(prefix) {
        prefix -= 1;
    }
    let room = old.len().min(new.len()) - prefix;
    let mut suffix =
        old.bytes().rev().zip(new.bytes().rev()).take(room).take_while(|(a, b)| a == b).count();
    while !old.is_char_boundary(old.len() - suffix) || !new.is_char_boundary(new.len() - suffix) {
        suffix -= 1;
    }
    let point = |text: &str, at: usize| {
        let before = &text[..at];
        let row = before.bytes().filter(|&b| b == b'\n').count();
        Point { row, column: at - before.rfind('\n').map_or(0, |i| i + 1) }
    };
    InputEdit {
        start_byte: prefix,
        old_end_byte: old.len() - suffix,
        new_end_byte: new.len() - suffix,
        start_position: point(old, prefix),
        old_end_position: point(old, old.len() - suffix),
        new_end_position: point(new, new.len() - suffix),
    }
}

/// Texts longer than this are read a run of top-level forms at a time ([`parse_in_runs`]): a
/// syntax tree takes about 56 bytes a byte of source, so the whole-file tree of a 5 MB save was
/// 280 MB, and a 50 MB save's gigabytes.
pub const IN_RUNS_OVER: usize = KEEP_AT_MOST;

/// How much text one run's tree covers at first (to the end of that line): a few MB of tree,
/// and parsed in runs this long a text takes no longer than parsed whole.
pub const RUN_BYTES: usize = 64 << 10;

/// The longest top-level form a text read in runs may hold. Its syntax tree alone is about 70
/// bytes a byte (a 5 MB form peaked at +392 MB to save), and a run that reads no whole form
/// is parsed again twice as long: without this bound a 50 MB text with an unclosed bracket near
/// its top was parsed whole. The longest top-level form in Debian's ~100 Clojure libraries is
/// under 100 KB. A longer one, and a bracket or string that never closes, is reported as a
/// syntax error where its form starts, found by a scan of the text ([`scan::first_trouble`]).
pub const MAX_FORM_BYTES: usize = 1 << 20;

/// Parse `text[start..end]` alone (a BOM at 0 left out). Nodes carry the byte offsets and
/// points of the whole text, and the tree of a run of whole top-level pieces has the nodes a
/// parse of the whole file has for them: at a top-level boundary the parser is in the state it
/// starts in.
pub fn parse_span(idx: &LineIndex, start: usize, end: usize) -> Tree {
    let start = if start == 0 && idx.text.starts_with('\u{feff}') { 3 } else { start };
    let range = tree_sitter::Range {
        start_byte: start,
        end_byte: end,
        start_point: idx.point(start),
        end_point: idx.point(end),
    };
    PARSER.with(|p| {
        let mut p = p.borrow_mut();
        p.set_included_ranges(&[range]).expect("one range, in order, inside the text");
        let tree = p.parse(idx.text, None);
        p.set_included_ranges(&[]).expect("no ranges: the whole text");
        tree.expect("parsing without a timeout or cancellation flag always returns a tree")
    })
}

/// The top-level forms of a text a run at a time, each run's tree dropped before the next is
/// parsed: runs start at about `run_bytes`; `each` gets a run's form nodes, in order, and the
/// runs cover the text's forms in order. Returns the first syntax error a whole-file parse finds (the runs before it have
/// been handed to `each`).
///
/// A run is parsed from a top-level boundary to a line end a byte count past it (`run_end`);
/// its last piece may be cut there, and a piece with an error may read differently with more
/// text, so only the forms before both are taken and the next run starts after them. A run with
/// no such form is parsed again twice as long, up to the end of the text, where errors are final.
pub fn parse_in_runs(
    idx: &LineIndex,
    run_bytes: usize,
    mut each: impl FnMut(&[Node<'_>]),
) -> Option<SyntaxError> {
    let text = idx.text;
    let mut at = 0;
    let run_bytes = run_bytes.max(1);
    let mut size = run_bytes;
    while at < text.len() {
        let end = run_end(text.as_bytes(), (at + size).min(text.len()), run_bytes);
        let tree = parse_span(idx, at, end);
        if end == text.len() {
            if let Some(error) = first_error(&tree, text) {
                return Some(error);
            }
            each(&top_level_forms(&tree));
            return None;
        }
        let root = tree.root_node();
        let mut cursor = root.walk();
        let children: Vec<Node> =
            if root.is_error() { Vec::new() } else { root.children(&mut cursor).collect() };
        let whole = children
            .iter()
            .position(|c| c.has_error())
            .unwrap_or(children.len())
            .min(children.len().saturating_sub(1));
        let forms: Vec<Node> =
            children[..whole].iter().copied().filter(|c| !is_trivia(*c) && c.is_named()).collect();
        match forms.last() {
            Some(last) => {
                at = last.end_byte();
                size = run_bytes;
                each(&forms);
            }
            // Only comments and discards before the run's last piece (a long block of them):
            // the next run starts after them, and they lead the form after them as ever.
            None if whole > 0 && children[whole - 1].end_byte() > at => {
                at = children[whole - 1].end_byte();
                size = run_bytes;
            }
            // No whole form: the run ends inside a form, or its first form does not read.
            // What is left of a short text is read to its end, where its errors are the ones
            // a whole-file read finds. Past that a scan of the text says which: a longer run
            // reads a form no longer than a form may be, and an error no longer run changes is
            // reported now (a 50 MB text with an unclosed bracket at its top was parsed whole).
            None if text.len() - at <= 2 * MAX_FORM_BYTES => size *= 2,
            None => {
                let cut_last = whole + 1 >= children.len();
                match scan::first_trouble(text.as_bytes(), at, end, MAX_FORM_BYTES) {
                    Err(trouble) => return Some(unreadable_run(idx, &tree, at, Some(trouble))),
                    // An error in a form the run holds whole, and not in the last one (which
                    // the run's end may cut): the same in any longer run.
                    Ok(stopped) if stopped <= end && !cut_last => {
                        return Some(unreadable_run(idx, &tree, at, None))
                    }
                    Ok(_) if size <= MAX_FORM_BYTES => size *= 2,
                    Ok(_) => return Some(unreadable_run(idx, &tree, at, None)),
                }
            }
        }
    }
    None
}

/// Why a top-level form read in runs is kept from the walks that read forms: nested deeper than
/// [`MAX_DEPTH`], or longer than [`MAX_FORM_BYTES`].
fn unreadable_form(idx: &LineIndex, node: Node) -> Option<SyntaxError> {
    if let Some(deep) = too_deep(node, MAX_DEPTH) {
        return Some(SyntaxError {
            pos: idx.pos(deep.start_byte()),
            message: format!("nesting deeper than {MAX_DEPTH} levels"),
        });
    }
    let len = node.byte_range().len();
    (len > MAX_FORM_BYTES)
        .then(|| SyntaxError { pos: idx.pos(node.start_byte()), message: too_long_message(len) })
}

/// The top-level forms of a text a run at a time ([`parse_in_runs`]), as a whole-file read
/// takes them: `each` gets every form before the first that no walk may read (nested too deep
/// or too long, [`unreadable_form`]). Returns what keeps the text from being read into forms,
/// as a whole-file read finds it: its first syntax error, else that form's error.
pub fn readable_forms_in_runs(
    idx: &LineIndex,
    run_bytes: usize,
    mut each: impl FnMut(Node<'_>),
) -> Option<SyntaxError> {
    let mut unreadable = None;
    let error = parse_in_runs(idx, run_bytes, |nodes| {
        for node in nodes {
            if unreadable.is_none() {
                unreadable = unreadable_form(idx, *node);
            }
            if unreadable.is_none() {
                each(*node);
            }
        }
    });
    error.or(unreadable)
}

/// What keeps a text of any size from being read into forms ([`readable_forms_in_runs`]),
/// found with no whole-file tree.
pub fn first_error_in_runs(text: &str) -> Option<SyntaxError> {
    readable_forms_in_runs(&LineIndex::new(text), RUN_BYTES, |_| {})
}

/// The error of a top-level form of `len` bytes, longer than [`MAX_FORM_BYTES`].
pub fn too_long_message(len: usize) -> String {
    format!(
        "a top-level form of {len} bytes: longer than the {MAX_FORM_BYTES} bytes one form may be"
    )
}

/// Why a run from `at` holds no whole form to read: the trouble a scan of the text found
/// there first (a form too long, a bracket or string never closed, a stray closing bracket),
/// else the run's own first syntax error.
fn unreadable_run(
    idx: &LineIndex,
    run: &Tree,
    at: usize,
    trouble: Option<scan::Trouble>,
) -> SyntaxError {
    use scan::Trouble;
    let message = match trouble {
        Some(Trouble::TooLong(start, end)) => too_long_message(end - start),
        Some(Trouble::Unclosed(_)) => "unclosed bracket: no matching closing bracket".into(),
        Some(Trouble::UnterminatedString(_)) => "unterminated string".into(),
        Some(Trouble::StrayCloser(at)) => {
            format!("unexpected closing `{}`", idx.text.as_bytes()[at] as char)
        }
        None => {
            return first_error(run, idx.text).unwrap_or_else(|| SyntaxError {
                pos: idx.pos(at),
                message: format!("no top-level form ends within {MAX_FORM_BYTES} bytes"),
            })
        }
    };
    SyntaxError { pos: idx.pos(trouble.map_or(at, Trouble::at)), message }
}

/// Where a run reaching `from` ends: after a newline, as a token cut anywhere else may read as
/// other whole tokens (`1/2` as `1` and `/`), but a newline ends every token but a string. A
/// cut inside a string or a form leaves the parser unable to close it, and its recovery can
/// turn the whole run into one error (doubling the run to the end of a big text, whose tree is
/// tens of bytes a byte): so the line end taken is the first, within `look` bytes, followed by
/// a line opening a form at column 0, which is where top-level forms start in written code.
fn run_end(text: &[u8], from: usize, look: usize) -> usize {
    let window = &text[from..(from.saturating_add(look)).min(text.len())];
    let opens_form = |i: usize| matches!(window.get(i + 1), Some(b'(' | b'[' | b'{' | b'#'));
    if let Some(i) = (0..window.len()).find(|&i| window[i] == b'\n' && opens_form(i)) {
        return from + i + 1;
    }
    // A text of long lines (minified data) is cut after a space instead, past the longest form
    // a run reads: a space too ends every token but a string and a character.
    let far = &text[from..(from.saturating_add(MAX_FORM_BYTES)).min(text.len())];
    let after = |at: Option<usize>| at.map(|i| from + i + 1);
    after(far.iter().position(|&b| b == b'\n'))
        .or_else(|| after(text[from..].iter().position(|&b| matches!(b, b' ' | b',' | b'\n'))))
        .unwrap_or(text.len())
}

/// The nodes of forms given by their byte ranges (whole top-level forms of `idx`'s text, in
/// order), a run of about `run_bytes` at a time: `each` gets the index of a form and its node.
/// Each run's tree is dropped before the next is parsed.
pub fn forms_in_runs(
    idx: &LineIndex,
    ranges: &[(usize, usize)],
    run_bytes: usize,
    mut each: impl FnMut(usize, Node),
) {
    let mut first = 0;
    while first < ranges.len() {
        let start = ranges[first].0;
        let mut last = first;
        while last + 1 < ranges.len() && ranges[last + 1].1 - start <= run_bytes.max(1) {
            last += 1;
        }
        let tree = parse_span(idx, start, ranges[last].1);
        let nodes = top_level_forms(&tree);
        debug_assert_eq!(nodes.len(), last + 1 - first, "a run of whole forms parses to them");
        for (i, node) in (first..=last).zip(nodes) {
            each(i, node);
        }
        first = last + 1;
    }
}

/// The byte offset → 1-based character column conversion for one text.
pub struct LineIndex<'a> {
    text: &'a str,
    line_starts: Vec<usize>,
}

impl<'a> LineIndex<'a> {
    pub fn new(text: &'a str) -> Self {
        // Counted first: grown by doubling, a big file's index held up to twice its lines.
        let lines = text.bytes().filter(|&b| b == b'\n').count();
        let mut line_starts = Vec::with_capacity(lines + 1);
        line_starts.push(0);
        for (i, b) in text.bytes().enumerate() {
            if b == b'\n' {
                line_starts.push(i + 1);
            }
        }
        LineIndex { text, line_starts }
    }

    /// Tree-sitter's point of a byte offset: 0-based row, column in bytes.
    pub fn point(&self, byte: usize) -> Point {
        let row = match self.line_starts.binary_search(&byte) {
            Ok(l) => l,
            Err(l) => l - 1,
        };
        Point { row, column: byte - self.line_starts[row] }
    }

    pub fn pos(&self, byte: usize) -> Pos {
        let line = match self.line_starts.binary_search(&byte) {
            Ok(l) => l,
            Err(l) => l - 1,
        };
        let start = self.line_starts[line];
        let col = self.text.get(start..byte).map(|s| s.chars().count()).unwrap_or(byte - start);
        Pos { line: line as u32 + 1, col: col as u32 + 1 }
    }
}

/// The first error in a tree, if any, as a place and a message a person can act on.
pub fn first_error(tree: &Tree, text: &str) -> Option<SyntaxError> {
    let root = tree.root_node();
    if !root.has_error() {
        return None;
    }
    let idx = LineIndex::new(text);
    let mut cursor = root.walk();
    let mut stack = vec![root];
    while let Some(node) = stack.pop() {
        if node.is_missing() {
            let what = node.kind();
            return Some(SyntaxError {
                pos: idx.pos(node.start_byte()),
                message: format!(
                    "missing `{what}`: unbalanced brackets or an unterminated literal"
                ),
            });
        }
        if node.is_error() {
            let snippet: String =
                text[node.start_byte()..node.end_byte()].chars().take(20).collect();
            let message = match snippet.chars().next() {
                Some(c @ (')' | ']' | '}')) => format!("unexpected closing `{c}`"),
                Some('(' | '[' | '{') => {
                    "unclosed bracket: no matching closing bracket".to_string()
                }
                Some('"') => "unterminated string".to_string(),
                _ => format!("cannot parse `{}`", snippet.trim()),
            };
            return Some(SyntaxError { pos: idx.pos(node.start_byte()), message });
        }
        if node.has_error() {
            // Depth-first, left to right: push children in reverse.
            let children: Vec<Node> = node.children(&mut cursor).collect();
            stack.extend(children.into_iter().rev());
        }
    }
    Some(SyntaxError { pos: Pos { line: 1, col: 1 }, message: "syntax error".into() })
}

/// How deep forms may nest (tree-sitter nodes below a top-level form) before the code that
/// walks a form recursively (analysis, resolution, call sites, purity, layout) is kept away
/// from them. The Clojure reader itself overflows its JVM stack between 1,000 and 2,000 levels
/// (`read-string` on `clojure` 1.11, default stack), so no loadable code comes near; 512
/// leaves every recursive walk room on a 2 MB thread stack in a debug build.
pub const MAX_DEPTH: usize = 512;

/// A form nested deeper than [`MAX_DEPTH`]: where, as a syntax error a person can act on.
pub fn too_deep_error(tree: &Tree, text: &str) -> Option<SyntaxError> {
    let node = top_level_forms(tree).into_iter().find_map(|form| too_deep(form, MAX_DEPTH))?;
    Some(SyntaxError {
        pos: LineIndex::new(text).pos(node.start_byte()),
        message: format!("nesting deeper than {MAX_DEPTH} levels"),
    })
}

/// The first node (in document order) more than `limit` levels below `node`, found with a
/// cursor rather than recursion so any depth is measured without touching the stack.
/// The depth is counted as the cursor moves: tree-sitter's `TreeCursor::depth` counts the
/// cursor's whole stack at each call, which was a third of this walk, itself a fifth of a
/// million-line import's parse.
///
/// A node is not entered when its descendants are too few to reach past the limit (a path of
/// `n` levels below a node passes `n` of them; tree-sitter keeps each node's count of the
/// visible ones the cursor moves over): most top-level forms are never walked at all, and
/// walking every form was 8% of a 1 M-line import's reading thread.
pub fn too_deep(node: Node<'_>, limit: usize) -> Option<Node<'_>> {
    let mut cursor = node.walk();
    let mut depth = 0usize;
    loop {
        if depth > limit {
            return Some(cursor.node());
        }
        let below = cursor.node().descendant_count() - 1;
        if below > limit - depth && cursor.goto_first_child() {
            depth += 1;
            continue;
        }
        while !cursor.goto_next_sibling() {
            if !cursor.goto_parent() {
                return None;
            }
            depth -= 1;
        }
    }
}

/// True for nodes that are trivia where they stand: comments and `#_` discards.
pub fn is_trivia(node: Node) -> bool {
    matches!(node.node_kind(), NodeKind::Comment | NodeKind::Dis)
}

/// The source text of a node.
pub fn text<'s>(node: Node, src: &'s str) -> &'s str {
    &src[node.byte_range()]
}

/// The value children of a collection or wrapper node: no brackets, metadata, comments or
/// discards.
pub fn values<'t>(node: Node<'t>) -> Vec<Node<'t>> {
    let mut cursor = node.walk();
    match fields().value {
        Some(value) => {
            node.children_by_field_id(value, &mut cursor).filter(|n| !is_trivia(*n)).collect()
        }
        None => Vec::new(),
    }
}

/// The metadata nodes (`^...` and `#^...`) attached to a node, outermost first.
pub fn metas<'t>(node: Node<'t>) -> Vec<Node<'t>> {
    let mut cursor = node.walk();
    node.children(&mut cursor)
        .filter(|n| matches!(n.node_kind(), NodeKind::Meta | NodeKind::OldMeta))
        .collect()
}

/// The value inside a `^meta` node.
pub fn meta_value(meta: Node) -> Option<Node> {
    field(meta, fields().value)
}

/// A symbol's namespace part (if written) and name part.
pub fn sym_parts<'s>(node: Node, src: &'s str) -> (Option<&'s str>, &'s str) {
    let ns = field(node, fields().namespace).map(|n| text(n, src));
    let name = field(node, fields().name).map(|n| text(n, src)).unwrap_or("");
    (ns, name)
}

/// The symbol as written without metadata: `ns/name` or `name`.
pub fn sym_str(node: Node, src: &str) -> String {
    match sym_parts(node, src) {
        (Some(ns), name) => format!("{ns}/{name}"),
        (None, name) => name.to_string(),
    }
}

/// The contents of a string literal, unescaped the way the Clojure reader does.
pub fn string_value(node: Node, src: &str) -> String {
    let raw = text(node, src);
    let inner = raw.strip_prefix('"').and_then(|s| s.strip_suffix('"')).unwrap_or(raw);
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('b') => out.push('\u{8}'),
            Some('f') => out.push('\u{c}'),
            Some('"') => out.push('"'),
            Some('\\') => out.push('\\'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    Some(ch) => out.push(ch),
                    None => {
                        out.push_str("\\u");
                        out.push_str(&hex);
                    }
                }
            }
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    out
}

/// One top-level form with the trivia in front of it, as byte ranges into the file text.
#[derive(Clone, Debug)]
pub struct PieceSpan {
    /// Start of the leading trivia (the end of the previous piece).
    pub leading_start: usize,
    /// Start and end of the form itself.
    pub start: usize,
    pub end: usize,
}

/// Split a parsed file into top-level pieces. The trailing trivia starts at the last piece's
/// end (or 0).
pub fn split_pieces(tree: &Tree) -> Vec<PieceSpan> {
    let root = tree.root_node();
    let mut cursor = root.walk();
    let mut pieces = Vec::new();
    let mut prev_end = 0;
    for child in root.children(&mut cursor) {
        if is_trivia(child) || !child.is_named() {
            continue;
        }
        pieces.push(PieceSpan {
            leading_start: prev_end,
            start: child.start_byte(),
            end: child.end_byte(),
        });
        prev_end = child.end_byte();
    }
    pieces
}

/// The top-level form nodes of a tree, in the same order as `split_pieces`.
pub fn top_level_forms(tree: &Tree) -> Vec<Node<'_>> {
    let root = tree.root_node();
    let mut cursor = root.walk();
    root.children(&mut cursor).filter(|c| !is_trivia(*c) && c.is_named()).collect()
}

/// Call `f` on `node` and every node below it, in document order (with a cursor: any depth).
pub fn visit<'t>(node: Node<'t>, f: &mut impl FnMut(Node<'t>)) {
    let mut cursor = node.walk();
    loop {
        f(cursor.node());
        if cursor.goto_first_child() {
            continue;
        }
        while !cursor.goto_next_sibling() {
            if !cursor.goto_parent() {
                return;
            }
        }
    }
}

/// The name of a symbol that is unqualified or qualified with `clojure.core`/`cljs.core`.
pub fn core_sym_name<'s>(node: Node, src: &'s str) -> Option<&'s str> {
    if node.node_kind() != NodeKind::Sym {
        return None;
    }
    match sym_parts(node, src) {
        (None | Some("clojure.core" | "cljs.core"), name) => Some(name),
        _ => None,
    }
}

/// The value children of a node with reader conditionals flattened: every branch of `#?(...)`
/// and the contents of every branch of `#?@(...)` take the conditional's place.
pub fn flat_values(node: Node) -> Vec<Node> {
    let mut out = Vec::new();
    for v in values(node) {
        push_flat(v, &mut out);
    }
    out
}

/// Push `node` onto `out`, or with reader conditionals flattened as [`flat_values`] does.
pub fn push_flat<'t>(node: Node<'t>, out: &mut Vec<Node<'t>>) {
    match node.node_kind() {
        NodeKind::ReadCond => {
            for branch in values(node).into_iter().skip(1).step_by(2) {
                push_flat(branch, out);
            }
        }
        NodeKind::SplicingReadCond => {
            for branch in values(node).into_iter().skip(1).step_by(2) {
                for v in values(branch) {
                    push_flat(v, out);
                }
            }
        }
        _ => out.push(node),
    }
}

/// Strip `'x` and `(quote x)` wrappers.
pub fn unquote<'t>(node: Node<'t>, src: &str) -> Node<'t> {
    let mut n = node;
    loop {
        match n.node_kind() {
            NodeKind::Quote => match values(n).first() {
                Some(v) => n = *v,
                None => return n,
            },
            NodeKind::List => {
                let vs = values(n);
                match vs.as_slice() {
                    [q, v] if core_sym_name(*q, src) == Some("quote") => n = *v,
                    _ => return n,
                }
            }
            _ => return n,
        }
    }
}

/// The alias node of an alias use: the namespace part of `q/name` and `::q/kw`, the name of a
/// `#::q{}` prefix.
pub fn alias_site<'t>(node: Node<'t>, src: &str) -> Option<Node<'t>> {
    match node.node_kind() {
        NodeKind::Sym => field(node, fields().namespace),
        NodeKind::Kwd => {
            let marker = field(node, fields().marker)?;
            if text(marker, src) != "::" {
                return None;
            }
            field(node, fields().namespace)
        }
        NodeKind::NsMap => {
            let prefix = field(node, fields().prefix)?;
            if prefix.node_kind() == NodeKind::Kwd
                && field(prefix, fields().marker).map(|m| text(m, src)) == Some("::")
                && field(prefix, fields().namespace).is_none()
            {
                field(prefix, fields().name)
            } else {
                None
            }
        }
        _ => None,
    }
}

/// Qualifiers (`q/..` symbols, `::q/..` keywords) written in a text.
pub fn qualifiers(root: Node, src: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    visit(root, &mut |n| {
        if let Some(q) = alias_site(n, src) {
            out.insert(text(q, src).to_string());
        }
    });
    out
}

/// The node kinds of the grammar that formdb tells apart, looked up by grammar symbol id:
/// comparing numbers instead of kind names, and a misspelt kind does not compile. Every other
/// node (brackets, `ERROR`, the parts of a symbol) is `Other`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NodeKind {
    List,
    Vec,
    Map,
    Set,
    Sym,
    Kwd,
    Str,
    Num,
    Char,
    Nil,
    Bool,
    Regex,
    SymVal,
    Quote,
    SynQuote,
    VarQuote,
    Deref,
    AnonFn,
    ReadCond,
    SplicingReadCond,
    NsMap,
    Tagged,
    Evaling,
    Unquote,
    UnquoteSplicing,
    Comment,
    Dis,
    /// `^meta`.
    Meta,
    /// `#^meta`.
    OldMeta,
    /// The root of a parsed text.
    Source,
    Other,
}

/// The kind of a node.
pub fn kind(node: Node) -> NodeKind {
    use NodeKind as K;
    static TABLE: OnceLock<Vec<K>> = OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let lang: tree_sitter::Language = tree_sitter_clojure_orchard::LANGUAGE.into();
        (0..lang.node_kind_count() as u16)
            .map(|id| match lang.node_kind_for_id(id) {
                Some(name) if lang.node_kind_is_named(id) => match name {
                    "list_lit" => K::List,
                    "vec_lit" => K::Vec,
                    "map_lit" => K::Map,
                    "set_lit" => K::Set,
                    "sym_lit" => K::Sym,
                    "kwd_lit" => K::Kwd,
                    "str_lit" => K::Str,
                    "num_lit" => K::Num,
                    "char_lit" => K::Char,
                    "nil_lit" => K::Nil,
                    "bool_lit" => K::Bool,
                    "regex_lit" => K::Regex,
                    "sym_val_lit" => K::SymVal,
                    "quoting_lit" => K::Quote,
                    "syn_quoting_lit" => K::SynQuote,
                    "var_quoting_lit" => K::VarQuote,
                    "derefing_lit" => K::Deref,
                    "anon_fn_lit" => K::AnonFn,
                    "read_cond_lit" => K::ReadCond,
                    "splicing_read_cond_lit" => K::SplicingReadCond,
                    "ns_map_lit" => K::NsMap,
                    "tagged_or_ctor_lit" => K::Tagged,
                    "evaling_lit" => K::Evaling,
                    "unquoting_lit" => K::Unquote,
                    "unquote_splicing_lit" => K::UnquoteSplicing,
                    "comment" => K::Comment,
                    "dis_expr" => K::Dis,
                    "meta_lit" => K::Meta,
                    "old_meta_lit" => K::OldMeta,
                    "source" => K::Source,
                    _ => K::Other,
                },
                _ => K::Other,
            })
            .collect()
    });
    table.get(node.kind_id() as usize).copied().unwrap_or(K::Other)
}

/// A grammar field id (`value`, `name`, …), for [`Node::child_by_field_id`] and cursors.
pub type FieldId = std::num::NonZeroU16;

/// Field ids of the grammar, looked up once.
pub struct Fields {
    pub value: Option<FieldId>,
    pub namespace: Option<FieldId>,
    pub name: Option<FieldId>,
    pub meta: Option<FieldId>,
    pub old_meta: Option<FieldId>,
    pub marker: Option<FieldId>,
    pub prefix: Option<FieldId>,
    pub open: Option<FieldId>,
}

/// The grammar's field ids: tree-sitter's `*_by_field_name` scans the grammar's field names
/// on every call, and a million-line import asks for nodes' values, names and namespaces some
/// ten million times.
pub fn fields() -> &'static Fields {
    static F: OnceLock<Fields> = OnceLock::new();
    F.get_or_init(|| {
        let lang: tree_sitter::Language = tree_sitter_clojure_orchard::LANGUAGE.into();
        Fields {
            value: lang.field_id_for_name("value"),
            namespace: lang.field_id_for_name("namespace"),
            name: lang.field_id_for_name("name"),
            meta: lang.field_id_for_name("meta"),
            old_meta: lang.field_id_for_name("old_meta"),
            marker: lang.field_id_for_name("marker"),
            prefix: lang.field_id_for_name("prefix"),
            open: lang.field_id_for_name("open"),
        }
    })
}

/// The child of `node` in grammar field `id`.
pub fn field<'t>(node: Node<'t>, id: Option<FieldId>) -> Option<Node<'t>> {
    node.child_by_field_id(id?.get())
}

/// [`kind`] as a method of a node: `node.node_kind() == NodeKind::Sym`.
pub trait KindOf {
    fn node_kind(&self) -> NodeKind;
}

impl KindOf for Node<'_> {
    fn node_kind(&self) -> NodeKind {
        kind(*self)
    }
}

/// Unqualified symbols written under `node` (a coarse reading: locals count too).
pub fn unqualified_symbols(node: Node, src: &str, out: &mut HashSet<String>) {
    visit(node, &mut |n| {
        if n.node_kind() == NodeKind::Sym {
            if let (None, name) = sym_parts(n, src) {
                out.insert(name.to_string());
            }
        }
    });
}

/// Where a reference by symbol node `sym` is placed: the symbol itself, after any metadata
/// written on it (`^Type sym`, whose node starts at the `^`).
pub fn symbol_anchor<'t>(sym: Node<'t>, src: &str) -> Node<'t> {
    let t = text(sym, src);
    if t.starts_with('^') || t.starts_with("#^") {
        field(sym, fields().namespace).or(field(sym, fields().name)).unwrap_or(sym)
    } else {
        sym
    }
}

/// The name (without namespace) of the symbol heading a list, if it is one.
pub fn list_head_name<'s>(n: Node, src: &'s str) -> Option<&'s str> {
    if n.node_kind() != NodeKind::List {
        return None;
    }
    let h = *values(n).first()?;
    (h.node_kind() == NodeKind::Sym).then(|| sym_parts(h, src).1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_depth_counted_as_the_cursor_moves_is_tree_sitters() {
        // tree-sitter's own count, as `too_deep` read it before it counted for itself.
        fn by_cursor_depth(node: Node<'_>, limit: usize) -> Option<Node<'_>> {
            let mut cursor = node.walk();
            loop {
                if cursor.depth() as usize > limit {
                    return Some(cursor.node());
                }
                if cursor.goto_first_child() {
                    continue;
                }
                while !cursor.goto_next_sibling() {
                    if !cursor.goto_parent() {
                        return None;
                    }
                }
            }
        }
        let texts = [
            "(a (b [c {:d #{e}}]) (f))",
            "(defn ^:private ^{:doc \"x\"} g [x] `(~x ~@[1 2] '(3 #(inc %))))",
            "#?(:clj (do (defmacro m [] 1)) :cljs #?@(:cljs [(def n 2)]))",
            "(((((((((((((((((((x)))))))))))))))))))",
            "''''''''''''''''''''''''''''x",
            "(a #_(b (c)) ;; note\n (d @(e ^:m [f])))",
            "(broken (x",
        ];
        for text in texts {
            let tree = parse(text);
            for form in top_level_forms(&tree) {
                for limit in 0..48 {
                    assert_eq!(
                        too_deep(form, limit).map(|n| n.id()),
                        by_cursor_depth(form, limit).map(|n| n.id()),
                        "{text:?} at {limit}"
                    );
                }
            }
        }
    }

    fn roundtrip(text: &str) {
        let tree = parse(text);
        assert!(first_error(&tree, text).is_none(), "{text:?} should parse");
        let pieces = split_pieces(&tree);
        let mut out = String::new();
        for p in &pieces {
            out.push_str(&text[p.leading_start..p.end]);
        }
        out.push_str(&text[pieces.last().map_or(0, |p| p.end)..]);
        assert_eq!(out, text);
    }

    #[test]
    fn pieces_reassemble_byte_for_byte() {
        roundtrip("(ns a)\n\n;; doc\n(defn f [x] x)\n");
        roundtrip("\u{feff}(ns a)\r\n\t(def x \"ünïcode\")");
        roundtrip("#!/usr/bin/env bb\n#_(ignored) (println 1) ; tail\n\n");
        roundtrip("");
        roundtrip(";; only a comment");
    }

    #[test]
    fn bom_does_not_break_the_first_form() {
        let src = "\u{feff}(ns a.b)\n";
        let tree = parse(src);
        let forms = top_level_forms(&tree);
        assert_eq!(forms.len(), 1);
        assert_eq!(text(forms[0], src), "(ns a.b)");
    }

    #[test]
    fn errors_name_the_place() {
        let src = "(ns a)\n(defn f [x]\n  (inc x)\n";
        let err = first_error(&parse(src), src).expect("unbalanced");
        assert!(err.pos.line >= 2, "{err:?}");
        let src = "(ns a)\n(def x 1))\n";
        let err = first_error(&parse(src), src).expect("extra paren");
        assert_eq!(err.pos.line, 2, "{err:?}");
    }

    #[test]
    fn columns_count_characters() {
        let idx = LineIndex::new("ab\nüx(y)");
        assert_eq!(idx.pos(0), Pos { line: 1, col: 1 });
        assert_eq!(idx.pos(6), Pos { line: 2, col: 3 });
    }

    #[test]
    fn strings_unescape() {
        let src = r#""a\"b\n\u00e9""#;
        let tree = parse(src);
        let node = top_level_forms(&tree)[0];
        assert_eq!(string_value(node, src), "a\"b\né");
    }
}
