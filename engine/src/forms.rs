//! A source file read into forms: pieces with their trivia, analysis, namespace, and (in a second
//! step that needs the namespace tables of the whole store) resolution.

use std::collections::{HashMap, HashSet};

use compact_str::CompactString;
use tree_sitter::{Node, Tree};

use crate::analyze::{self, Analysis, Kind};
use crate::file_text::FileText;
use crate::memo;
use crate::nsdecl::{self, NsDecl};
use crate::purity::{self, Purity};
use crate::resolve::{self, RefKind, ResolveEnv, VarRef};
use crate::scan;
use crate::sites::{self, Site};
use crate::store::Store;
use crate::syntax::{self, Lang, LineIndex, Pos, SyntaxError};

/// A short content hash, printable.
pub fn hash_text(parts: &[&str]) -> String {
    hash_text_compact(parts).into()
}

/// [`hash_text`] fed a part at a time, formatted parts written straight into the hasher (no
/// string made for each): each part is followed by a NUL, and the hash is the same.
#[derive(Default)]
pub struct PartsHasher(blake3::Hasher);

impl PartsHasher {
    pub fn part(&mut self, text: &str) {
        self.0.update(text.as_bytes());
        self.0.update(&[0]);
    }

    pub fn part_fmt(&mut self, args: std::fmt::Arguments) {
        use std::io::Write;
        // Writing into a hasher cannot fail.
        let _ = self.0.write_fmt(args);
        self.0.update(&[0]);
    }

    pub fn finish(self) -> String {
        self.finish_compact().into()
    }

    /// [`PartsHasher::finish`], held inline (16 bytes): a form's hash, kept for every form of
    /// a file until its rows are written, needs no heap block of its own.
    pub fn finish_compact(self) -> CompactString {
        CompactString::from(&self.0.finalize().to_hex()[..16])
    }
}

/// [`hash_text`], held inline ([`PartsHasher::finish_compact`]).
pub fn hash_text_compact(parts: &[&str]) -> CompactString {
    let mut h = PartsHasher::default();
    for p in parts {
        h.part(p);
    }
    h.finish_compact()
}

/// The hash a file's content is skipped by: of its text, or of its bytes when it is not UTF-8.
pub fn content_hash(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text) => hash_text(&[text]),
        Err(_) => format!("bin:{}", blake3::hash(bytes).to_hex()),
    }
}

/// One form read from a file (top-level, or directly inside a top-level `(comment ...)`).
#[derive(Clone, Debug)]
pub struct ParsedForm {
    /// Trivia in front of the form (for a comment-block child: between the previous sibling and
    /// this form).
    pub leading: CompactString,
    pub source: String,
    /// Byte range of `source` in the file text.
    pub range: (usize, usize),
    pub start: Pos,
    pub end: Pos,
    /// The namespace the form is read in.
    pub ns: CompactString,
    pub analysis: Analysis,
    /// `leading` and `source` hashed together.
    pub hash: CompactString,
    /// Forms directly inside a top-level `(comment ...)` block.
    pub children: Vec<ParsedForm>,
}

/// The content of a file after parsing.
#[derive(Debug)]
pub enum Content {
    /// Parsed: the forms in order and the trivia after the last one.
    Forms { forms: Vec<ParsedForm>, trailing: String },
    /// Did not parse: kept as raw text, with the error.
    Raw { error: SyntaxError },
}

/// A Clojure source file read into forms.
#[derive(Debug)]
pub struct ParsedFile {
    pub path: String,
    pub lang: Lang,
    pub text: FileText,
    /// Hash of the whole text, for skipping unchanged files.
    pub hash: String,
    /// The file's namespace (its first `ns`/`in-ns`), or empty.
    pub ns: String,
    pub decl: NsDecl,
    pub content: Content,
    pub tree: Option<Tree>,
    /// Parsed as a file being edited in this store ([`parse_edited_file`], by `Store::id`): its
    /// resolution reuses what the last one found for the forms whose text did not change
    /// (`memo`).
    pub(crate) edited: Option<u64>,
    /// Read in runs of about this many bytes of forms, with no tree kept
    /// ([`parse_file_in_runs`]): resolution parses each run again. 0 for a file with a tree.
    run_bytes: usize,
    /// Top-level forms resolved at a time while its rows are built ([`resolved_in_chunks`]);
    /// 0 for [`RESOLVE_CHUNK`]. Set by tests, which compare small chunks with none.
    resolve_chunk: usize,
}

impl ParsedFile {
    /// Does the file declare its namespace with an `(ns ...)` form? (Files that only switch to
    /// it with `in-ns`, like clojure.core's `core_print.clj`, contribute to a namespace that
    /// another file declares.)
    pub fn declares_ns(&self) -> bool {
        self.forms().iter().any(|f| {
            f.analysis.kind.as_str() == "ns"
                && matches!(f.analysis.head.as_str(), "ns" | "clojure.core/ns")
        })
    }

    /// A file kept as raw text because it did not parse.
    pub fn raw(
        path: &str,
        lang: Lang,
        text: impl Into<FileText>,
        hash: String,
        error: SyntaxError,
    ) -> ParsedFile {
        ParsedFile {
            path: path.into(),
            lang,
            text: text.into(),
            hash,
            ns: String::new(),
            decl: NsDecl::default(),
            content: Content::Raw { error },
            tree: None,
            edited: None,
            run_bytes: 0,
            resolve_chunk: 0,
        }
    }

    pub fn forms(&self) -> &[ParsedForm] {
        match &self.content {
            Content::Forms { forms, .. } => forms,
            Content::Raw { .. } => &[],
        }
    }

    /// The declaration the forms of namespace `ns` in this file resolve against: the file's
    /// own, or for forms after an `in-ns` to another namespace, a bare one of that name.
    pub fn decl_for(&self, ns: &str) -> std::borrow::Cow<'_, NsDecl> {
        if ns == self.decl.name {
            std::borrow::Cow::Borrowed(&self.decl)
        } else {
            std::borrow::Cow::Owned(NsDecl { name: ns.to_string(), ..NsDecl::default() })
        }
    }

    /// This file resolved `forms` top-level forms at a time as its rows are built (`usize::MAX`:
    /// whole), instead of [`RESOLVE_CHUNK`]: for tests, which compare small chunks with none.
    #[doc(hidden)]
    pub fn resolved_in_chunks_of(mut self, forms: usize) -> ParsedFile {
        self.resolve_chunk = forms.max(1);
        self
    }

    /// Every var this file defines, per namespace.
    pub fn defined_vars(&self) -> impl Iterator<Item = (&str, &str)> {
        self.forms()
            .iter()
            .flat_map(|f| f.analysis.defines.iter().map(move |d| (f.ns.as_str(), d.name.as_str())))
    }
}

/// Read a file's text into forms. Never fails: text that does not parse becomes `Content::Raw`.
pub fn parse_file(path: &str, lang: Lang, text: impl Into<FileText>) -> ParsedFile {
    parse_file_with(path, lang, text.into(), syntax::parse, None)
}

/// [`parse_file`] for a text of any size: one longer than [`syntax::IN_RUNS_OVER`] is read in
/// runs ([`parse_file_in_runs`]), with no tree, as its whole-file tree would be about 70 bytes a
/// byte (a 20 MB file imported whole peaked at 2.27 GB). The forms are the same.
pub fn parse_file_bounded(path: &str, lang: Lang, text: impl Into<FileText>) -> ParsedFile {
    let text = text.into();
    if text.len() > syntax::IN_RUNS_OVER {
        parse_file_in_runs(path, lang, text, syntax::RUN_BYTES)
    } else {
        parse_file(path, lang, text)
    }
}

/// [`parse_file`] for a file being edited: re-parsed from the last text parsed for its path
/// ([`syntax::parse_at`]). The same result, sooner for a small edit of a large file.
/// Forms whose text is unchanged since then keep their analysis (`memo`).
/// A text longer than [`syntax::IN_RUNS_OVER`] is read in runs instead ([`parse_file_in_runs`]):
/// neither its parse nor its memo would be kept, and its whole-file tree alone is gigabytes.
pub fn parse_edited_file(
    store: &Store,
    path: &str,
    lang: Lang,
    text: impl Into<FileText>,
) -> ParsedFile {
    let text = text.into();
    if text.len() > syntax::IN_RUNS_OVER {
        return parse_file_bounded(path, lang, text);
    }
    let mut memo = memo::take(store.id(), path);
    let parse = |t: &str| syntax::parse_at(store, path, t);
    let mut file = parse_file_with(path, lang, text, parse, Some(&memo));
    memo.replace_forms(file.forms());
    memo::keep(memo);
    file.edited = Some(store.id());
    file
}

fn parse_file_with(
    path: &str,
    lang: Lang,
    text: FileText,
    parse: impl FnOnce(&str) -> tree_sitter::Tree,
    memo: Option<&memo::FileMemo>,
) -> ParsedFile {
    let hash = content_hash(text.as_bytes());
    if let Some(error) = nul_byte(&text) {
        return ParsedFile::raw(path, lang, text, hash, error);
    }
    let tree = parse(&text);
    // Past the depth gate no recursive walk sees the tree: the file is kept as it is.
    if let Some(error) =
        syntax::first_error(&tree, &text).or_else(|| syntax::too_deep_error(&tree, &text))
    {
        return ParsedFile::raw(path, lang, text, hash, error);
    }
    let idx = LineIndex::new(&text);
    let nodes = syntax::top_level_forms(&tree);
    let spans = syntax::split_pieces(&tree);
    let mut reader = FormReader::new(&text, &idx, lang, memo);
    for (node, span) in nodes.iter().zip(&spans) {
        reader.read(*node, span.leading_start);
    }
    let (ns, decl, forms) = reader.finish();
    let trailing = text[spans.last().map_or(0, |s| s.end)..].to_string();
    drop(idx);
    ParsedFile {
        path: path.into(),
        lang,
        hash,
        ns,
        decl,
        content: Content::Forms { forms, trailing },
        tree: Some(tree),
        text,
        edited: None,
        run_bytes: 0,
        resolve_chunk: 0,
    }
}

/// The namespace declaration a file most likely opens with, found without parsing the file:
/// the first `(ns ...)` or `(in-ns ...)` list among its first top-level forms (found by a scan
/// of brackets, strings, characters and comments), parsed alone. A streamed import orders its
/// batches by it before it parses each file, once; a wrong guess costs time, never results.
pub fn first_ns_decl(text: &str) -> Option<NsDecl> {
    const FORMS_LOOKED_AT: usize = 16;
    const HEADS: [&str; 4] = ["ns", "in-ns", "clojure.core/ns", "clojure.core/in-ns"];
    let b = text.as_bytes();
    let (mut at, mut forms) = (0, 0);
    while at < b.len() && forms < FORMS_LOOKED_AT {
        match b[at] {
            b';' => at = scan::line_end(b, at),
            b'#' if b.get(at + 1) == Some(&b'!') => at = scan::line_end(b, at),
            b'\\' => at += 2,
            b'"' => {
                at = scan::string_end(b, at)?;
                forms += 1;
            }
            open @ (b'(' | b'[' | b'{') => {
                let end = scan::list_end(b, at)?;
                forms += 1;
                let head = text[at + 1..end].trim_start();
                let is_decl = open == b'('
                    && HEADS.iter().any(|h| {
                        head.strip_prefix(h)
                            .is_some_and(|rest| rest.starts_with(|c: char| c.is_whitespace()))
                    });
                // A form past the longest one may be is read by no parse either.
                if is_decl && end - at <= syntax::MAX_FORM_BYTES {
                    let source = &text[at..end];
                    let tree = syntax::parse(source);
                    // Read no deeper than any parse does: the file's own parse reports it.
                    if syntax::too_deep_error(&tree, source).is_some() {
                        return None;
                    }
                    let node = *syntax::top_level_forms(&tree).first()?;
                    return nsdecl::parse_ns_form(node, source);
                }
                at = end;
            }
            _ => at += 1,
        }
    }
    None
}

/// A NUL byte anywhere makes a text no source: the file is kept as raw bytes with this error.
fn nul_byte(text: &str) -> Option<SyntaxError> {
    let at = text.find('\0')?;
    Some(SyntaxError { pos: LineIndex::new(text).pos(at), message: "NUL byte in source".into() })
}

/// [`parse_file`] for a text longer than [`syntax::IN_RUNS_OVER`]: the same forms, read a run
/// of top-level forms of about `run_bytes` ([`syntax::RUN_BYTES`]) at a time
/// ([`syntax::parse_in_runs`]) with no syntax tree kept, so that the trees of a big save never
/// coexist (resolution parses each run again).
pub fn parse_file_in_runs(
    path: &str,
    lang: Lang,
    text: impl Into<FileText>,
    run_bytes: usize,
) -> ParsedFile {
    let text = text.into();
    let hash = content_hash(text.as_bytes());
    if let Some(error) = nul_byte(&text) {
        return ParsedFile::raw(path, lang, text, hash, error);
    }
    let idx = LineIndex::new(&text);
    let mut reader = FormReader::new(&text, &idx, lang, None);
    // A whole-file parse reports a syntax error anywhere before a form nested too deep or too
    // long: the first such form stops the reading (no recursive walk may see it), not the parse.
    let mut leading_start = 0;
    let unreadable = syntax::readable_forms_in_runs(&idx, run_bytes, |node| {
        reader.read(node, leading_start);
        leading_start = node.end_byte();
    });
    if let Some(error) = unreadable {
        drop(reader);
        drop(idx);
        return ParsedFile::raw(path, lang, text, hash, error);
    }
    let (ns, decl, forms) = reader.finish();
    let trailing = text[leading_start..].to_string();
    drop(idx);
    ParsedFile {
        path: path.into(),
        lang,
        hash,
        ns,
        decl,
        content: Content::Forms { forms, trailing },
        tree: None,
        text,
        edited: None,
        run_bytes,
        resolve_chunk: 0,
    }
}

/// Reads top-level form nodes of one text, in order, into forms: each form's analysis (or the
/// memo's, for a text seen before) and the namespace it is read in, and the file's namespace
/// declaration with the top-level directives that extend it.
struct FormReader<'a> {
    text: &'a str,
    idx: &'a LineIndex<'a>,
    lang: Lang,
    memo: Option<&'a memo::FileMemo>,
    forms: Vec<ParsedForm>,
    current_ns: CompactString,
    file_ns: CompactString,
    decl: NsDecl,
    seen_decl: bool,
}

impl<'a> FormReader<'a> {
    fn new(
        text: &'a str,
        idx: &'a LineIndex<'a>,
        lang: Lang,
        memo: Option<&'a memo::FileMemo>,
    ) -> Self {
        FormReader {
            text,
            idx,
            lang,
            memo,
            forms: Vec::new(),
            current_ns: if lang == Lang::Edn { CompactString::default() } else { "user".into() },
            file_ns: CompactString::default(),
            decl: NsDecl::default(),
            seen_decl: false,
        }
    }

    /// Read the next top-level form, whose leading trivia starts at `leading_start`.
    fn read(&mut self, node: Node, leading_start: usize) {
        let (text, idx, lang) = (self.text, self.idx, self.lang);
        let line_of = |b: usize| idx.pos(b).line;
        let source = &text[node.byte_range()];
        let start = idx.pos(node.start_byte());
        let known = self.memo.and_then(|m| m.form(source, start, node.start_byte()));
        let analysis = match &known {
            Some(f) => f.analysis.clone(),
            None if lang == Lang::Edn => Analysis::default(),
            None => analyze::analyze(node, text, &line_of),
        };
        if analysis.kind == Kind::Ns {
            if let Some(d) = nsdecl::parse_ns_form(node, text) {
                self.current_ns = d.name.as_str().into();
                if !self.seen_decl {
                    self.file_ns = d.name.as_str().into();
                    self.decl = d;
                    self.seen_decl = true;
                }
            } else if !analysis.name.is_empty() {
                self.current_ns = analysis.name.clone();
            }
        } else if lang != Lang::Edn
            && self.seen_decl
            && analysis.kind == Kind::Other
            && self.current_ns == self.file_ns
        {
            nsdecl::apply_top_level_directive(&mut self.decl, node, text);
        }
        let current_ns = &self.current_ns;
        let form = match known {
            Some(mut form) => {
                // The same text: only what lies before it and the namespace may differ.
                form.leading = text[leading_start..node.start_byte()].into();
                form.hash = hash_text_compact(&[&form.leading, &form.source]);
                form.ns = current_ns.clone();
                for child in &mut form.children {
                    child.ns = current_ns.clone();
                }
                form
            }
            None => {
                let mut form = make_form(text, idx, leading_start, node, current_ns, analysis);
                if form.analysis.kind == Kind::Comment {
                    form.children = comment_children(node, text, idx, current_ns, &line_of);
                }
                form
            }
        };
        self.forms.push(form);
    }

    /// The file's namespace, its declaration, and the forms read.
    fn finish(self) -> (String, NsDecl, Vec<ParsedForm>) {
        let mut decl = self.decl;
        if decl.name.is_empty() {
            decl.name = self.file_ns.to_string();
        }
        (self.file_ns.into(), decl, self.forms)
    }
}

fn make_form(
    text: &str,
    idx: &LineIndex,
    leading_start: usize,
    node: Node,
    ns: &str,
    analysis: Analysis,
) -> ParsedForm {
    let leading = &text[leading_start..node.start_byte()];
    let source = &text[node.byte_range()];
    ParsedForm {
        leading: leading.into(),
        source: source.to_string(),
        range: (node.start_byte(), node.end_byte()),
        start: idx.pos(node.start_byte()),
        end: idx.pos(node.end_byte()),
        ns: ns.into(),
        hash: hash_text_compact(&[leading, source]),
        analysis,
        children: Vec::new(),
    }
}

fn comment_children(
    block: Node,
    text: &str,
    idx: &LineIndex,
    ns: &str,
    line_of: &dyn Fn(usize) -> u32,
) -> Vec<ParsedForm> {
    let items = syntax::values(block);
    let mut prev_end = items.first().map_or(block.start_byte(), |h| h.end_byte());
    let mut out = Vec::new();
    for node in items.iter().skip(1) {
        let analysis = analyze::analyze(*node, text, line_of);
        out.push(make_form(text, idx, prev_end, *node, ns, analysis));
        prev_end = node.end_byte();
    }
    out
}

/// What resolution adds to a form.
#[derive(Clone, Debug, Default)]
pub struct Resolved {
    /// Canonical source: alias-qualified symbols and `::alias/kw` written fully qualified;
    /// empty where that is the source.
    pub canonical: String,
    /// Distinct var references: FQN → (kind of first use, place of first use, count).
    pub calls: Vec<Call>,
    pub unresolved: Vec<(String, Pos)>,
    pub purity: Purity,
    /// Every call with its argument count (top-level forms only: a comment block's sites
    /// include its children's).
    pub sites: Vec<Site>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call {
    pub to: CompactString,
    pub kind: RefKind,
    pub pos: Pos,
    pub count: u32,
}

/// The namespace tables resolution reads, across the store and the files being resolved: public
/// vars and every var (publics and privates) per namespace, of the namespaces resolution looks
/// into (at least the files' own and those they refer wholesale), and the names of every
/// namespace known.
#[derive(Clone, Default)]
pub struct Namespaces {
    pub publics: HashMap<String, HashSet<String>>,
    pub all_vars: HashMap<String, HashSet<String>>,
    /// Namespaces a fully qualified symbol may name without a `require`; those with vars in
    /// `publics` count too.
    pub known: std::sync::Arc<HashSet<String>>,
}

impl Namespaces {
    /// What a resolver knows of the forms of namespace `ns`, declared by `decl`, in a file of
    /// language `lang`.
    pub fn env<'a>(&'a self, decl: &'a NsDecl, ns: &str, lang: Lang) -> ResolveEnv<'a> {
        static NO_VARS: std::sync::OnceLock<HashSet<String>> = std::sync::OnceLock::new();
        ResolveEnv {
            decl,
            own_vars: self.all_vars.get(ns).unwrap_or_else(|| NO_VARS.get_or_init(HashSet::new)),
            publics: &self.publics,
            known_nss: &self.known,
            core_ns: lang.core_ns(),
            core_publics: resolve::core_publics(lang.core_ns()),
        }
    }
}

/// Resolve every form of a parsed file. Returns one `Resolved` per top-level form, and for
/// comment blocks one per child after it, in the same order as `ParsedFile::forms` flattened
/// (form, then its children).
pub fn resolve_file(file: &ParsedFile, nss: &Namespaces) -> Vec<Resolved> {
    resolve_forms_from(file, file.forms(), 0, nss, None)
}

/// Files with more top-level forms than this, and no memo, are resolved this many forms at a
/// time while their rows are built ([`resolved_in_chunks`]).
pub const RESOLVE_CHUNK: usize = 2048;

/// How many top-level forms at a time a file is resolved as its rows are built (each chunk's
/// parse and resolution moved into its rows before the next chunk is resolved), if it is: a
/// file of many small forms would otherwise hold every form's parse, resolution and row at once
/// (about 4 KB a form). A file being edited resolves whole, with its memo.
pub fn resolved_in_chunks(file: &ParsedFile) -> Option<usize> {
    let chunk = if file.resolve_chunk == 0 { RESOLVE_CHUNK } else { file.resolve_chunk };
    (file.edited.is_none() && file.forms().len() > chunk).then_some(chunk)
}

/// [`resolve_file`] for `forms`, the file's top-level forms from its `first`th on (all of them
/// or a run of them), taken out of the file or not. `lines` is the index of the file's text
/// when it has no tree, made once for all its chunks (else each makes its own).
pub fn resolve_forms_from(
    file: &ParsedFile,
    forms: &[ParsedForm],
    first: usize,
    nss: &Namespaces,
    lines: Option<&LineIndex>,
) -> Vec<Resolved> {
    if let Content::Raw { .. } = file.content {
        return Vec::new();
    }
    if file.lang == Lang::Edn || crate::checks::build_data_file(&file.path) {
        return forms
            .iter()
            .flat_map(|f| std::iter::once(f).chain(&f.children))
            .map(|_| Resolved { purity: Purity::Pure, ..Default::default() })
            .collect();
    }
    let per_form = resolve_forms(file, (forms, first, lines), nss, |node, form, env| {
        let (mut top, mut refs) = resolve_one(node, form, &file.text, env);
        let mut out = Vec::with_capacity(1 + form.children.len());
        if !form.children.is_empty() {
            let items = syntax::values(node);
            for (child, cnode) in form.children.iter().zip(items.iter().skip(1)) {
                let (resolved, child_refs) = resolve_one(*cnode, child, &file.text, env);
                out.push(resolved);
                refs.extend(child_refs);
            }
        }
        // A comment block refers to nothing itself; its sites are its children's calls.
        top.sites = sites::sites(node, &file.text, form.analysis.kind, &refs);
        out.insert(0, top);
        out
    });
    per_form.into_iter().flatten().collect()
}

/// Resolve each of `forms` (the file's top-level forms from its `first`th on, with their
/// comment-block children) with `resolve`, under the environment of its namespace. A file
/// being edited resolves again only the forms whose text or context changed: the others'
/// resolution of the same kind comes from `memo`.
fn resolve_forms<T: memo::Resolution>(
    file: &ParsedFile,
    which: Which,
    nss: &Namespaces,
    resolve: impl Fn(Node, &ParsedForm, &ResolveEnv) -> T,
) -> Vec<T> {
    let mut memo = file.edited.map(|store| memo::take(store, &file.path));
    let tables = if memo.is_some() { memo::tables(nss) } else { 0 };
    let mut out = Vec::with_capacity(which.0.len());
    each_form_node(file, which, |form, node| {
        let decl = file.decl_for(&form.ns);
        let key = memo.as_ref().map(|_| memo::env(&decl, &form.ns, file.lang, tables));
        if let Some(known) = memo.as_ref().zip(key).and_then(|(m, k)| m.resolution(form, k)) {
            out.push(known);
            return;
        }
        let resolved = resolve(node, form, &nss.env(&decl, &form.ns, file.lang));
        if let Some((m, k)) = memo.as_mut().zip(key) {
            m.record(form, k, resolved.clone());
        }
        out.push(resolved);
    });
    if let Some(m) = memo {
        memo::keep(m);
    }
    out
}

/// Some top-level forms of a file: those from its `first`th on, with the index of its text if
/// made already.
type Which<'a, 'f> = (&'f [ParsedForm], usize, Option<&'a LineIndex<'a>>);

/// Call `each` with each of `forms` (the file's top-level forms from its `first`th on) and its
/// node: from the file's tree, or for a file read in runs (no tree kept), from each run of
/// forms parsed again.
fn each_form_node(file: &ParsedFile, which: Which, mut each: impl FnMut(&ParsedForm, Node)) {
    let (forms, first, lines) = which;
    match &file.tree {
        Some(tree) => {
            for (form, node) in
                forms.iter().zip(syntax::top_level_forms(tree).into_iter().skip(first))
            {
                each(form, node);
            }
        }
        None => {
            let made;
            let idx = match lines {
                Some(idx) => idx,
                None => {
                    made = LineIndex::new(&file.text);
                    &made
                }
            };
            let ranges: Vec<(usize, usize)> = forms.iter().map(|f| f.range).collect();
            let run_bytes = if file.run_bytes == 0 { syntax::RUN_BYTES } else { file.run_bytes };
            syntax::forms_in_runs(idx, &ranges, run_bytes, |i, node| each(&forms[i], node));
        }
    }
}

/// The references of one top-level form (with its comment-block children), each where it is
/// written, and the symbols that resolve to nothing.
#[derive(Clone, Debug, Default)]
pub struct FormRefs {
    pub refs: Vec<VarRef>,
    pub unresolved: Vec<String>,
}

/// Resolve every top-level form of a file the way [`resolve_file`] does, keeping each
/// reference and its place (refactors and diagnostics look calls up by place). A file being
/// edited reuses what the last resolution found for its unchanged forms (`memo`).
pub fn resolve_refs(file: &ParsedFile, nss: &Namespaces) -> Vec<FormRefs> {
    if let Content::Raw { .. } = file.content {
        return Vec::new();
    }
    if file.lang == Lang::Edn {
        return file.forms().iter().map(|_| FormRefs::default()).collect();
    }
    resolve_forms(file, (file.forms(), 0, None), nss, |node, form, env| {
        let r = resolve::resolve_form(node, &file.text, env);
        let mut f = FormRefs {
            refs: r.refs,
            unresolved: r.unresolved.into_iter().map(|u| u.symbol).collect(),
        };
        if !form.children.is_empty() {
            for child in syntax::values(node).into_iter().skip(1) {
                let r = resolve::resolve_form(child, &file.text, env);
                f.refs.extend(r.refs);
                f.unresolved.extend(r.unresolved.into_iter().map(|u| u.symbol));
            }
        }
        f
    })
}

/// Resolve one form: what is stored of it (without call sites, which belong to top-level
/// forms), and every reference it makes.
fn resolve_one(
    node: Node,
    form: &ParsedForm,
    text: &str,
    env: &ResolveEnv,
) -> (Resolved, Vec<VarRef>) {
    let r = resolve::resolve_form(node, text, env);
    // Empty where nothing is written out (most forms): a big file's texts are held once.
    let mut canonical = String::new();
    let mut at = form.range.0;
    let mut rewrites = r.rewrites;
    rewrites.sort_by_key(|w| w.start);
    let mut rewritten = false;
    for w in &rewrites {
        if w.start < at || w.end > form.range.1 {
            continue;
        }
        canonical.push_str(&text[at..w.start]);
        canonical.push_str(&w.replacement);
        at = w.end;
        rewritten = true;
    }
    if rewritten {
        canonical.push_str(&text[at..form.range.1]);
    }

    let mut calls: Vec<Call> = Vec::new();
    let mut index: HashMap<&str, usize> = HashMap::new();
    let self_fqn = if form.analysis.name.is_empty() {
        String::new()
    } else {
        format!("{}/{}", form.ns, form.analysis.name)
    };
    for v in &r.refs {
        if let Some(&i) = index.get(v.fqn.as_str()) {
            calls[i].count += 1;
            continue;
        }
        index.insert(&v.fqn, calls.len());
        calls.push(Call { to: v.fqn.as_str().into(), kind: v.kind, pos: v.pos, count: 1 });
    }
    let purity = purity::classify(calls.iter().map(|c| c.to.as_str()).filter(|c| *c != self_fqn));
    let mut unresolved: Vec<(String, Pos)> = Vec::new();
    for u in r.unresolved {
        if !unresolved.iter().any(|(s, _)| *s == u.symbol) {
            unresolved.push((u.symbol, u.pos));
        }
    }
    // Held with the form's row until the change is written: without the room they grew into
    // (a third of their size, a tenth of a big save's peak).
    calls.shrink_to_fit();
    unresolved.shrink_to_fit();
    (Resolved { canonical, calls, unresolved, purity, sites: Vec::new() }, r.refs)
}
