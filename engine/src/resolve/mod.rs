//! Resolution of the symbols in a form's body to fully-qualified var names, the way the Clojure
//! compiler would, without expanding macros.
//!
//! One walk over the syntax tree per top-level form. Locals are a stack of `&str` slices of the
//! source; children are collected into one shared node buffer, so the walk allocates only for
//! what it reports (FQN strings, rewrites). Binding forms of `clojure.core` (and of a few
//! look-alikes such as `p/let` or `go-loop`) are understood by shape: `let`, `loop`, `fn`,
//! `defn`, `letfn`, `for`, `doseq`, `if-let`, `case`, `reify`, `deftype`, … with full
//! destructuring.

use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;

use tree_sitter::{Node, TreeCursor};

use crate::nsdecl::NsDecl;
use crate::syntax::{fields, kind, meta_value, metas, Fields, NodeKind as K, Pos};

mod bindings;
mod special_forms;
mod symbols;
mod syntax_quote;
#[cfg(test)]
mod tests;

/// What a resolver may know beyond the namespace declaration.
pub struct ResolveEnv<'a> {
    /// The namespace declaration of the file.
    pub decl: &'a NsDecl,
    /// Names of every var defined in this namespace (anywhere in it, also later in the file).
    pub own_vars: &'a HashSet<String>,
    /// Public var names of namespaces known to the store (for `:refer :all` and `:use`).
    pub publics: &'a HashMap<String, HashSet<String>>,
    /// Names of namespaces the store knows beyond those in `publics`.
    pub known_nss: &'a HashSet<String>,
    /// The public vars of the implicit core namespace (`clojure.core` or `cljs.core`).
    pub core_ns: &'a str,
    pub core_publics: &'a HashSet<String>,
}

/// How a var is referred to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum RefKind {
    /// In call position `(f ...)`.
    Call,
    /// Anywhere else (passed as a value, `#'f`, inside a syntax-quote template).
    Value,
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct VarRef {
    pub fqn: String,
    pub kind: RefKind,
    pub pos: Pos,
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Unresolved {
    pub symbol: String,
    pub pos: Pos,
}

/// A byte range in the form's text and what to write there in the canonical source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rewrite {
    pub start: usize,
    pub end: usize,
    pub replacement: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resolution {
    /// Var references in source order (duplicates kept; callers dedupe).
    pub refs: Vec<VarRef>,
    /// Symbols that resolve to nothing (not a local, a special form, a class or a known var).
    pub unresolved: Vec<Unresolved>,
    /// Java classes referred to (interop), fully qualified where the imports say so.
    pub classes: Vec<String>,
    /// Rewrites that turn the form text into canonical text (alias-qualified symbols and
    /// `::alias/kw` keywords written fully qualified). Byte offsets are absolute in `src`.
    pub rewrites: Vec<Rewrite>,
}

/// The public var names of `clojure.core` (Clojure 1.11), from `data/clojure-core-publics.txt`.
pub fn clojure_core_publics() -> &'static HashSet<String> {
    static CORE: OnceLock<HashSet<String>> = OnceLock::new();
    CORE.get_or_init(|| names(include_str!("../../data/clojure-core-publics.txt")))
}

/// The public var and macro names of `cljs.core` (ClojureScript 1.12), from
/// `data/cljs-core-publics.txt` (its header says how it was made).
pub fn cljs_core_publics() -> &'static HashSet<String> {
    static CORE: OnceLock<HashSet<String>> = OnceLock::new();
    CORE.get_or_init(|| names(include_str!("../../data/cljs-core-publics.txt")))
}

/// The public names of a core namespace: `cljs.core`'s for it, else `clojure.core`'s.
pub fn core_publics(core_ns: &str) -> &'static HashSet<String> {
    if core_ns == "cljs.core" {
        cljs_core_publics()
    } else {
        clojure_core_publics()
    }
}

/// One name a line; `;` starts a comment line.
fn names(list: &str) -> HashSet<String> {
    list.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with(';'))
        .map(String::from)
        .collect()
}

/// The platform code is read for: a `.cljs` file's, a `.clj` or `.cljc` file's outside reader
/// conditionals (resolved as Clojure, as before platforms were told apart), or a reader
/// conditional branch's. Branches of platforms without a table of core names (`:cljr`, `:bb`,
/// `:default`, …) are resolved against both tables and never reported as unresolved: formdb
/// cannot know what they name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Platform {
    Clj,
    Cljs,
    Other,
}

impl Platform {
    fn of_feature(feature: &str) -> Platform {
        match feature {
            ":clj" => Platform::Clj,
            ":cljs" => Platform::Cljs,
            _ => Platform::Other,
        }
    }
}

/// The byte ranges of a form's reader-conditional branches with their platforms, outer
/// branches before the inner ones they hold; empty for a form without any.
fn branch_platforms(node: Node, src: &str) -> Vec<(usize, usize, Platform)> {
    let mut out = Vec::new();
    if !src.get(node.byte_range()).is_some_and(|t| t.contains("#?")) {
        return out;
    }
    let mut stack = vec![node];
    while let Some(n) = stack.pop() {
        if matches!(kind(n), K::ReadCond | K::SplicingReadCond) {
            let values = crate::syntax::values(n);
            for pair in values.chunks(2) {
                if let [feature, branch] = pair {
                    let feature = src.get(feature.byte_range()).unwrap_or("");
                    out.push((
                        branch.start_byte(),
                        branch.end_byte(),
                        Platform::of_feature(feature),
                    ));
                }
            }
        }
        let mut cursor = n.walk();
        let kids: Vec<Node> = n.named_children(&mut cursor).collect();
        stack.extend(kids.into_iter().rev());
    }
    out
}

/// Resolve every symbol in a top-level form.
pub fn resolve_form(node: Node, src: &str, env: &ResolveEnv) -> Resolution {
    let mut r = Resolver {
        src,
        env,
        f: fields(),
        cursor: node.walk(),
        buf: Vec::with_capacity(64),
        locals: Vec::with_capacity(16),
        anon: 0,
        mute: 0,
        top: kind(node) == K::List,
        kids_meta: false,
        last_pos: (usize::MAX, 0, 0),
        branches: branch_platforms(node, src),
        in_test_assertion: 0,
        out: Resolution::default(),
    };
    r.form(node);
    let mut out = r.out;
    // Each node is walked once, so rewrites cannot overlap; keep that promise regardless.
    out.rewrites.sort_by_key(|w| (w.start, w.end));
    out.rewrites.dedup_by(|b, a| b.start < a.end);
    out
}

/// The special forms of the Clojure compiler (plus `&`, which is never a var).
fn is_special(name: &str) -> bool {
    matches!(
        name,
        "def"
            | "if"
            | "do"
            | "let*"
            | "letfn*"
            | "loop*"
            | "recur"
            | "fn*"
            | "quote"
            | "var"
            | "throw"
            | "try"
            | "catch"
            | "finally"
            | "new"
            | "set!"
            | "monitor-enter"
            | "monitor-exit"
            | "."
            | "&"
            | "case*"
            | "deftype*"
            | "reify*"
            | "import*"
            | "js*"
    )
}

/// `%`, `%1`, `%2`, …, `%&`: the parameters of `#(...)`.
fn is_percent(name: &str) -> bool {
    match name.strip_prefix('%') {
        Some(rest) => rest.is_empty() || rest == "&" || rest.bytes().all(|b| b.is_ascii_digit()),
        None => false,
    }
}

/// Public top-level classes of `java.lang` (JDK 17), imported into every Clojure namespace.
fn java_lang() -> &'static HashSet<String> {
    static SET: OnceLock<HashSet<String>> = OnceLock::new();
    SET.get_or_init(|| names(include_str!("../../data/java-lang-classes.txt")))
}

/// A class every Clojure namespace imports by default: `java.lang.*` plus three more.
fn default_import(name: &str) -> Option<String> {
    match name {
        "BigInteger" | "BigDecimal" => Some(format!("java.math.{name}")),
        "Callable" => Some("java.util.concurrent.Callable".to_string()),
        _ => java_lang().contains(name).then(|| format!("java.lang.{name}")),
    }
}

/// Whether a namespace name can be written as a symbol's namespace (npm module names such as
/// `"@mui/material"` cannot; aliases of those are left as written).
fn symbolic_ns(ns: &str) -> bool {
    !ns.is_empty()
        && !ns.contains(['/', ' ', ',', '"', '\'', '`', '~', '@', '^', '\\', ':', '#'])
        && !ns.starts_with(|c: char| c.is_ascii_digit())
}

fn starts_upper(s: &str) -> bool {
    s.chars().next().is_some_and(char::is_uppercase)
}

/// What a symbol turned out to be; for lists, what decides how the arguments are walked.
#[derive(Clone, Copy)]
enum Res<'a> {
    Local,
    Special(&'a str),
    /// A var of the core namespace, by name.
    Core(&'a str),
    /// A var of another namespace, by the name part as written.
    Var(&'a str),
    Unresolved(&'a str),
    /// Classes, interop, nothing at all.
    Other,
}

/// Core macros whose look-alikes in other namespaces (`p/let`, `go-loop`, …) bind the same way.
fn binding_lookalike(name: &str) -> bool {
    matches!(
        name,
        "let"
            | "loop"
            | "go-loop"
            | "when-let"
            | "when-some"
            | "if-let"
            | "if-some"
            | "with-open"
            | "dotimes"
            | "for"
            | "doseq"
            | "fn"
    )
}

/// A symbol's parts: namespace (as written) and where it starts, name, the node whose start is
/// the symbol's position (after any metadata), and whether metadata is attached.
struct Sym<'a> {
    ns: Option<&'a str>,
    ns_start: usize,
    name: &'a str,
    anchor: Node<'a>,
    meta: bool,
}

struct Resolver<'a> {
    src: &'a str,
    env: &'a ResolveEnv<'a>,
    f: &'static Fields,
    cursor: TreeCursor<'a>,
    /// Children of the nodes being walked; each walk step pushes its children and truncates.
    buf: Vec<Node<'a>>,
    locals: Vec<&'a str>,
    /// Depth of `#(...)` (where `%` and friends are locals).
    anon: u32,
    /// Depth of code that is never evaluated (`comment`): rewrites only, no references.
    mute: u32,
    /// The next list is the top-level form itself.
    top: bool,
    /// Whether the node of the last `kids` call carries metadata.
    kids_meta: bool,
    /// The last position computed: line start byte, byte, character column (0-based).
    last_pos: (usize, usize, usize),
    /// Reader-conditional branches of the form and their platforms ([`branch_platforms`]).
    branches: Vec<(usize, usize, Platform)>,
    /// Depth of `clojure.test/is` (and `are`) arguments, where `thrown?` and
    /// `thrown-with-msg?` are the macro's own syntax, not vars.
    in_test_assertion: u32,
    out: Resolution,
}

impl<'a> Resolver<'a> {
    // ----- tree access -----------------------------------------------------------------------

    /// Push the value children of `node` (no brackets, metadata, comments or discards) onto the
    /// buffer, with `#?@(...)` spliced (every branch). Returns the range pushed.
    fn kids(&mut self, node: Node<'a>) -> (usize, usize) {
        let start = self.buf.len();
        let mut meta = false;
        let mut splice = false;
        let count = node.named_child_count();
        if count <= 8 && !matches!(kind(node), K::NsMap | K::Tagged) {
            // Small nodes: indexing named children skips brackets and is cheaper than a cursor
            // (each lookup is linear in the index, hence the cursor for long nodes). The named
            // children of these nodes are their metadata, values, comments and discards.
            for i in 0..count {
                let Some(n) = node.named_child(i as u32) else { break };
                match kind(n) {
                    K::Comment | K::Dis => {}
                    K::Meta | K::OldMeta => meta = true,
                    k => {
                        splice |= k == K::SplicingReadCond;
                        self.buf.push(n);
                    }
                }
            }
        } else {
            self.cursor.reset(node);
            if self.cursor.goto_first_child() {
                loop {
                    let fid = self.cursor.field_id();
                    if fid.is_some() && fid == self.f.value {
                        let n = self.cursor.node();
                        if !matches!(kind(n), K::Comment | K::Dis) {
                            splice |= kind(n) == K::SplicingReadCond;
                            self.buf.push(n);
                        }
                    } else if fid.is_some() && (fid == self.f.meta || fid == self.f.old_meta) {
                        meta = true;
                    }
                    if !self.cursor.goto_next_sibling() {
                        break;
                    }
                }
            }
        }
        if splice {
            let raw: Vec<Node<'a>> = self.buf.drain(start..).collect();
            for n in raw {
                if kind(n) == K::SplicingReadCond {
                    let (s, e) = self.kids(n);
                    let branches: Vec<Node<'a>> = self.buf.drain(s..e).skip(1).step_by(2).collect();
                    for b in branches {
                        self.kids(b);
                    }
                } else {
                    self.buf.push(n);
                }
            }
        }
        self.kids_meta = meta;
        (start, self.buf.len())
    }

    /// A symbol's parts. Without metadata (the common case) they are read off the text, which
    /// is much cheaper than visiting the node's children.
    fn sym_parts(&mut self, node: Node<'a>) -> Sym<'a> {
        let t = self.text(node);
        if !t.starts_with('^') && !t.starts_with("#^") {
            let start = node.start_byte();
            let (ns, name) = match t.find('/') {
                Some(i) if i > 0 => (Some(&t[..i]), &t[i + 1..]),
                _ => (None, t),
            };
            return Sym { ns, ns_start: start, name, anchor: node, meta: false };
        }
        let mut ns_node = None;
        let mut name_node = None;
        self.cursor.reset(node);
        if self.cursor.goto_first_child() {
            loop {
                let fid = self.cursor.field_id();
                if fid.is_some() {
                    if fid == self.f.name {
                        name_node = Some(self.cursor.node());
                    } else if fid == self.f.namespace {
                        ns_node = Some(self.cursor.node());
                    }
                }
                if !self.cursor.goto_next_sibling() {
                    break;
                }
            }
        }
        let anchor = ns_node.or(name_node).unwrap_or(node);
        Sym {
            ns: ns_node.map(|n| self.text(n)),
            ns_start: anchor.start_byte(),
            name: name_node.map_or("", |n| self.text(n)),
            anchor,
            meta: true,
        }
    }

    /// The text of a symbol node without metadata, if the node is such a symbol.
    fn plain_sym_text(&self, n: Node<'a>) -> Option<&'a str> {
        (kind(n) == K::Sym)
            .then(|| self.text(n))
            .filter(|t| !t.starts_with('^') && !t.starts_with("#^"))
    }

    fn text(&self, node: Node) -> &'a str {
        self.src.get(node.byte_range()).unwrap_or("")
    }

    /// The 1-based line and character column of a node's start. Columns are counted from the
    /// previous position when it is on the same line, so long lines are not rescanned.
    fn pos(&mut self, node: Node) -> Pos {
        let p = node.start_position();
        let b = node.start_byte();
        let Some(line_start) = b.checked_sub(p.column) else {
            return Pos { line: p.row as u32 + 1, col: p.column as u32 + 1 };
        };
        let (from, base) = match self.last_pos {
            (ls, lb, lc) if ls == line_start && lb <= b => (lb, lc),
            _ => (line_start, 0),
        };
        let col = base + self.src.get(from..b).map_or(b - from, |s| s.chars().count());
        self.last_pos = (line_start, b, col);
        Pos { line: p.row as u32 + 1, col: col as u32 + 1 }
    }

    // ----- output ----------------------------------------------------------------------------

    fn push_ref(&mut self, fqn: String, kind: RefKind, at: Node) {
        if self.mute == 0 {
            let pos = self.pos(at);
            self.out.refs.push(VarRef { fqn, kind, pos });
        }
    }

    fn push_class(&mut self, class: String) {
        if self.mute == 0 {
            self.out.classes.push(class);
        }
    }

    fn push_unresolved(&mut self, symbol: String, at: Node) {
        // What a platform without a table names, formdb cannot tell.
        if self.mute == 0 && self.platform_at(at.start_byte()) != Platform::Other {
            let pos = self.pos(at);
            self.out.unresolved.push(Unresolved { symbol, pos });
        }
    }

    fn rewrite(&mut self, start: usize, end: usize, replacement: String) {
        self.out.rewrites.push(Rewrite { start, end, replacement });
    }
}
