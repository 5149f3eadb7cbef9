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

type FieldId = std::num::NonZeroU16;

use crate::nsdecl::NsDecl;
use crate::syntax::{meta_value, metas, Pos};

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
    CORE.get_or_init(|| names(include_str!("../data/clojure-core-publics.txt")))
}

/// The public var and macro names of `cljs.core` (ClojureScript 1.12), from
/// `data/cljs-core-publics.txt` (its header says how it was made).
pub fn cljs_core_publics() -> &'static HashSet<String> {
    static CORE: OnceLock<HashSet<String>> = OnceLock::new();
    CORE.get_or_init(|| names(include_str!("../data/cljs-core-publics.txt")))
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
        if matches!(n.kind(), "read_cond_lit" | "splicing_read_cond_lit") {
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
const JAVA_LANG: &[&str] = &[
    "AbstractMethodError",
    "Appendable",
    "ArithmeticException",
    "ArrayIndexOutOfBoundsException",
    "ArrayStoreException",
    "AssertionError",
    "AutoCloseable",
    "Boolean",
    "BootstrapMethodError",
    "Byte",
    "CharSequence",
    "Character",
    "Class",
    "ClassCastException",
    "ClassCircularityError",
    "ClassFormatError",
    "ClassLoader",
    "ClassNotFoundException",
    "ClassValue",
    "CloneNotSupportedException",
    "Cloneable",
    "Comparable",
    "Compiler",
    "Deprecated",
    "Double",
    "Enum",
    "EnumConstantNotPresentException",
    "Error",
    "Exception",
    "ExceptionInInitializerError",
    "Float",
    "FunctionalInterface",
    "IllegalAccessError",
    "IllegalAccessException",
    "IllegalArgumentException",
    "IllegalCallerException",
    "IllegalMonitorStateException",
    "IllegalStateException",
    "IllegalThreadStateException",
    "IncompatibleClassChangeError",
    "IndexOutOfBoundsException",
    "InheritableThreadLocal",
    "InstantiationError",
    "InstantiationException",
    "Integer",
    "InternalError",
    "InterruptedException",
    "Iterable",
    "LayerInstantiationException",
    "LinkageError",
    "Long",
    "Math",
    "Module",
    "ModuleLayer",
    "NegativeArraySizeException",
    "NoClassDefFoundError",
    "NoSuchFieldError",
    "NoSuchFieldException",
    "NoSuchMethodError",
    "NoSuchMethodException",
    "NullPointerException",
    "Number",
    "NumberFormatException",
    "Object",
    "OutOfMemoryError",
    "Override",
    "Package",
    "Process",
    "ProcessBuilder",
    "ProcessHandle",
    "Readable",
    "Record",
    "ReflectiveOperationException",
    "Runnable",
    "Runtime",
    "RuntimeException",
    "RuntimePermission",
    "SafeVarargs",
    "SecurityException",
    "SecurityManager",
    "Short",
    "StackOverflowError",
    "StackTraceElement",
    "StackWalker",
    "StrictMath",
    "String",
    "StringBuffer",
    "StringBuilder",
    "StringIndexOutOfBoundsException",
    "SuppressWarnings",
    "System",
    "Thread",
    "ThreadDeath",
    "ThreadGroup",
    "ThreadLocal",
    "Throwable",
    "TypeNotPresentException",
    "UnknownError",
    "UnsatisfiedLinkError",
    "UnsupportedClassVersionError",
    "UnsupportedOperationException",
    "VerifyError",
    "VirtualMachineError",
    "Void",
];

/// A class every Clojure namespace imports by default: `java.lang.*` plus three more.
fn default_import(name: &str) -> Option<String> {
    match name {
        "BigInteger" | "BigDecimal" => Some(format!("java.math.{name}")),
        "Callable" => Some("java.util.concurrent.Callable".to_string()),
        _ => JAVA_LANG.binary_search(&name).ok().map(|_| format!("java.lang.{name}")),
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

/// Node kinds, by grammar symbol id: comparing numbers instead of the kind's name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum K {
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
    /// `^meta` and `#^meta`.
    Meta,
    Other,
}

fn kind(node: Node) -> K {
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
                    "meta_lit" | "old_meta_lit" => K::Meta,
                    _ => K::Other,
                },
                _ => K::Other,
            })
            .collect()
    });
    table.get(node.kind_id() as usize).copied().unwrap_or(K::Other)
}

/// Field ids of the grammar, looked up once.
struct Fields {
    value: Option<FieldId>,
    namespace: Option<FieldId>,
    name: Option<FieldId>,
    meta: Option<FieldId>,
    old_meta: Option<FieldId>,
}

fn fields() -> &'static Fields {
    static F: OnceLock<Fields> = OnceLock::new();
    F.get_or_init(|| {
        let lang: tree_sitter::Language = tree_sitter_clojure_orchard::LANGUAGE.into();
        Fields {
            value: lang.field_id_for_name("value"),
            namespace: lang.field_id_for_name("namespace"),
            name: lang.field_id_for_name("name"),
            meta: lang.field_id_for_name("meta"),
            old_meta: lang.field_id_for_name("old_meta"),
        }
    })
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
                    K::Meta => meta = true,
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

    // ----- symbols ---------------------------------------------------------------------------

    fn is_local(&self, name: &str) -> bool {
        self.locals.iter().rev().any(|l| *l == name)
    }

    /// `clojure.core`, `cljs.core` or the configured core namespace: its macros are known.
    fn is_core_ns(&self, ns: &str) -> bool {
        ns == self.env.core_ns || ns == "clojure.core" || ns == "cljs.core"
    }

    /// The platform the code at byte `at` is read for.
    fn platform_at(&self, at: usize) -> Platform {
        // Outer branches come first, so the last branch holding `at` is the innermost.
        let branch = self.branches.iter().rev().find(|(s, e, _)| (*s..*e).contains(&at));
        match branch {
            Some((_, _, p)) => *p,
            None if self.env.core_ns == "cljs.core" => Platform::Cljs,
            None => Platform::Clj,
        }
    }

    /// The core namespace of `platform` and its public names; the file's own for a platform
    /// without a table.
    fn core_of(&self, platform: Platform) -> (&'a str, &'a HashSet<String>) {
        let env = self.env;
        let file_is_cljs = env.core_ns == "cljs.core";
        match platform {
            Platform::Cljs if !file_is_cljs => ("cljs.core", cljs_core_publics()),
            Platform::Clj if file_is_cljs => ("clojure.core", clojure_core_publics()),
            _ => (env.core_ns, env.core_publics),
        }
    }

    /// The core namespace that has `name` referred into this namespace, for the code at `at`:
    /// the platform's; for a platform without a table, the file's or else the other one.
    fn core_having(&self, name: &str, at: usize) -> Option<&'a str> {
        let platform = self.platform_at(at);
        let (ns, names) = self.core_of(platform);
        if self.core_has(names, name) {
            return Some(ns);
        }
        if platform == Platform::Other {
            let other = if ns == "cljs.core" { Platform::Clj } else { Platform::Cljs };
            let (ns, names) = self.core_of(other);
            return self.core_has(names, name).then_some(ns);
        }
        None
    }

    /// Whether the core namespace's `name` (one of `names`) is referred into this namespace.
    fn core_has(&self, names: &HashSet<String>, name: &str) -> bool {
        let decl = self.env.decl;
        names.contains(name)
            && !decl.core_exclude.contains(name)
            && decl.core_only.as_ref().is_none_or(|o| o.contains(name))
            && !decl.core_rename.values().any(|v| v == name)
    }

    /// A namespace this one can name: its own, the core one, anything required or aliased,
    /// anything the store knows.
    fn known_ns(&self, ns: &str) -> bool {
        let env = self.env;
        let decl = env.decl;
        self.is_core_ns(ns)
            || decl.name == ns
            || decl.requires.iter().any(|r| r == ns)
            || decl.macro_libs.iter().any(|r| r == ns)
            || decl.refer_all.iter().any(|r| r == ns)
            || decl.aliases.values().any(|r| r == ns)
            || env.publics.contains_key(ns)
            || env.known_nss.contains(ns)
    }

    /// The class a name denotes: imported, fully qualified (`loose`: any dotted name, else one
    /// whose last segment is capitalised), a default import, or a record/type of this namespace.
    fn class_name(&self, name: &str, loose: bool) -> Option<String> {
        let decl = self.env.decl;
        if let Some(full) = decl.imports.get(name) {
            return Some(full.clone());
        }
        if let Some((_, last)) = name.rsplit_once('.') {
            return (loose || starts_upper(last)).then(|| name.to_string());
        }
        if let Some(c) = default_import(name) {
            return Some(c);
        }
        if starts_upper(name) && self.env.own_vars.contains(&format!("->{name}")) {
            return Some(format!("{}.{name}", decl.name.replace('-', "_")));
        }
        None
    }

    /// Resolve a symbol node, record what it refers to, and say what it is.
    fn symbol(&mut self, node: Node<'a>, kind: RefKind) -> Res<'a> {
        let sym = self.sym_parts(node);
        if sym.meta {
            self.walk_meta(node, false);
        }
        if sym.name.is_empty() {
            return Res::Other;
        }
        match sym.ns {
            Some(ns) => self.qualified(&sym, ns, kind),
            None => self.unqualified(sym.anchor, sym.name, kind, false),
        }
    }

    fn qualified(&mut self, sym: &Sym<'a>, ns: &'a str, kind: RefKind) -> Res<'a> {
        let env = self.env;
        let name = sym.name;
        let at = sym.anchor;
        if self.is_core_ns(ns) {
            self.push_ref(format!("{ns}/{name}"), kind, at);
            return Res::Core(name);
        }
        if let Some(target) = env.decl.aliases.get(ns) {
            if target != ns && symbolic_ns(target) {
                self.rewrite(sym.ns_start, sym.ns_start + ns.len(), target.clone());
            }
            self.push_ref(format!("{target}/{name}"), kind, at);
            return if self.is_core_ns(target) { Res::Core(name) } else { Res::Var(name) };
        }
        if self.known_ns(ns) {
            self.push_ref(format!("{ns}/{name}"), kind, at);
            return Res::Var(name);
        }
        if ns == "js" {
            return Res::Other;
        }
        if let Some(class) = self.class_name(ns, false) {
            self.push_class(class);
            return Res::Other;
        }
        if starts_upper(ns) {
            self.push_class(ns.to_string());
            return Res::Other;
        }
        self.push_unresolved(format!("{ns}/{name}"), at);
        Res::Unresolved(name)
    }

    /// `sq`: inside a syntax-quote template, where the reader resolves symbols without regard
    /// to locals and leaves `x#` gensyms alone.
    fn unqualified(&mut self, at: Node<'a>, name: &'a str, kind: RefKind, sq: bool) -> Res<'a> {
        if self.anon > 0 && is_percent(name) {
            return Res::Local;
        }
        if sq {
            if name.len() > 1 && name.ends_with('#') {
                return Res::Local;
            }
        } else if self.is_local(name) {
            return Res::Local;
        }
        if is_special(name) {
            return Res::Special(name);
        }
        if name != ".." && name.len() > 1 {
            if name.starts_with('.') {
                // `.method`, `.-field`: interop on whatever the target is.
                return Res::Other;
            }
            if let Some(class) = name.strip_suffix('.') {
                let full = self.class_name(class, true).unwrap_or_else(|| class.to_string());
                self.push_class(full);
                return Res::Other;
            }
            if name.contains('.') {
                self.push_class(name.to_string());
                return Res::Other;
            }
        }
        let env = self.env;
        let decl = env.decl;
        if let Some(full) = decl.imports.get(name) {
            self.push_class(full.clone());
            return Res::Other;
        }
        if let Some(orig) = decl.core_rename.get(name) {
            let core = self.core_of(self.platform_at(at.start_byte())).0;
            self.push_ref(format!("{core}/{orig}"), kind, at);
            return Res::Core(orig.as_str());
        }
        if let Some(fqn) = decl.refers.get(name) {
            self.push_ref(fqn.clone(), kind, at);
            let core = fqn.split_once('/').is_some_and(|(ns, _)| self.is_core_ns(ns));
            return if core { Res::Core(name) } else { Res::Var(name) };
        }
        if env.own_vars.contains(name) {
            self.push_ref(format!("{}/{name}", decl.name), kind, at);
            // Inside clojure.core itself, `fn`, `let`, … are own vars and still core macros.
            return if self.is_core_ns(&decl.name) { Res::Core(name) } else { Res::Var(name) };
        }
        if let Some(core) = self.core_having(name, at.start_byte()) {
            self.push_ref(format!("{core}/{name}"), kind, at);
            return Res::Core(name);
        }
        for ns in &decl.refer_all {
            if env.publics.get(ns).is_some_and(|p| p.contains(name)) {
                self.push_ref(format!("{ns}/{name}"), kind, at);
                return Res::Var(name);
            }
        }
        if let Some(class) = self.class_name(name, false) {
            self.push_class(class);
            return Res::Other;
        }
        // In a template, a symbol that names nothing is usually a method, field or binding name
        // of the generated code; the reader qualifies it with the current namespace and moves on.
        if !sq {
            self.push_unresolved(name.to_string(), at);
        }
        Res::Unresolved(name)
    }

    // ----- keywords and metadata -------------------------------------------------------------

    /// `::alias/kw` → `:full.ns/kw`.
    fn keyword(&mut self, node: Node<'a>) {
        let t = self.text(node);
        let Some(rest) = t.strip_prefix("::") else { return };
        let Some((alias, _)) = rest.split_once('/') else { return };
        if let Some(target) = self.env.decl.aliases.get(alias).filter(|t| symbolic_ns(t)) {
            let start = node.start_byte();
            self.rewrite(start, start + 2 + alias.len(), format!(":{target}"));
        }
    }

    /// `#::alias{...}` → `#:full.ns{...}`.
    fn ns_map_prefix(&mut self, node: Node<'a>) {
        let Some(prefix) = node.child_by_field_name("prefix") else { return };
        if kind(prefix) != K::Kwd {
            return;
        }
        let t = self.text(prefix);
        if let Some(alias) = t.strip_prefix("::") {
            if let Some(target) = self.env.decl.aliases.get(alias).filter(|t| symbolic_ns(t)) {
                self.rewrite(prefix.start_byte(), prefix.end_byte(), format!(":{target}"));
            }
        }
    }

    /// The metadata of a node. `eval`: map values are code (metadata of collection literals and
    /// of defined names is evaluated), except `:tag`. Otherwise only keywords are rewritten.
    fn walk_meta(&mut self, node: Node<'a>, eval: bool) {
        for m in metas(node) {
            let Some(v) = meta_value(m) else { continue };
            if !eval || kind(v) != K::Map {
                self.quoted(v);
                continue;
            }
            let (s, e) = self.kids(v);
            let mut i = s;
            while i < e {
                let k = self.buf[i];
                let tag = self.text(k) == ":tag";
                self.quoted(k);
                if i + 1 < e {
                    let val = self.buf[i + 1];
                    if tag {
                        self.quoted(val);
                    } else {
                        self.form(val);
                    }
                }
                i += 2;
            }
            self.buf.truncate(s);
        }
    }

    // ----- walking ---------------------------------------------------------------------------

    /// Walk a node as code in value position.
    fn form(&mut self, node: Node<'a>) {
        match kind(node) {
            K::Sym => {
                self.symbol(node, RefKind::Value);
            }
            K::List => self.list(node),
            K::Kwd => self.keyword(node),
            K::Vec | K::Map | K::Set => {
                let (s, e) = self.kids(node);
                if self.kids_meta {
                    self.walk_meta(node, true);
                }
                self.forms(s, e);
                self.buf.truncate(s);
            }
            K::Quote => self.quoted(node),
            K::SynQuote => {
                let (s, e) = self.kids(node);
                for i in s..e {
                    let n = self.buf[i];
                    self.sq(n);
                }
                self.buf.truncate(s);
            }
            K::VarQuote => {
                // `#'x` is `(var x)`: a reference to the var itself.
                self.each(node);
            }
            K::Deref => {
                // `@x` reads as `(clojure.core/deref x)`.
                let core = self.core_of(self.platform_at(node.start_byte())).0;
                let fqn = format!("{core}/deref");
                self.push_ref(fqn, RefKind::Call, node);
                self.each(node);
            }
            K::AnonFn => {
                let (s, e) = self.kids(node);
                self.anon += 1;
                let top = std::mem::replace(&mut self.top, false);
                self.call(s, e, top);
                self.anon -= 1;
                self.buf.truncate(s);
            }
            K::ReadCond => {
                let (s, e) = self.kids(node);
                for i in (s..e).skip(1).step_by(2) {
                    let n = self.buf[i];
                    self.form(n);
                }
                self.buf.truncate(s);
            }
            K::SplicingReadCond => {
                let (s, e) = self.kids(node);
                for i in (s..e).skip(1).step_by(2) {
                    let n = self.buf[i];
                    self.each(n);
                }
                self.buf.truncate(s);
            }
            K::NsMap => {
                self.ns_map_prefix(node);
                self.each(node);
            }
            K::Tagged | K::Evaling | K::Unquote | K::UnquoteSplicing => {
                self.each(node);
            }
            _ => {}
        }
    }

    /// Walk every value child of a node as code.
    fn each(&mut self, node: Node<'a>) {
        let (s, e) = self.kids(node);
        self.forms(s, e);
        self.buf.truncate(s);
    }

    /// Walk buffered nodes `a..b` as code.
    fn forms(&mut self, a: usize, b: usize) {
        for i in a..b {
            let n = self.buf[i];
            self.form(n);
        }
    }

    fn list(&mut self, node: Node<'a>) {
        let top = std::mem::replace(&mut self.top, false);
        let (s, e) = self.kids(node);
        if self.kids_meta {
            self.walk_meta(node, false);
        }
        self.call(s, e, top);
        self.buf.truncate(s);
    }

    /// A call-shaped sequence in the buffer: head at `s`, arguments after it.
    fn call(&mut self, s: usize, e: usize, top: bool) {
        if s >= e {
            return;
        }
        let head = self.buf[s];
        let res = match kind(head) {
            K::Sym
                if self.in_test_assertion > 0
                    && matches!(
                        self.plain_sym_text(head),
                        Some("thrown?" | "thrown-with-msg?")
                    ) =>
            {
                // `(is (thrown? Class body))`: syntax of `is` (its `assert-expr` methods).
                Res::Other
            }
            K::Sym => self.symbol(head, RefKind::Call),
            K::ReadCond => {
                let (hs, he) = self.kids(head);
                for i in (hs..he).skip(1).step_by(2) {
                    let n = self.buf[i];
                    if kind(n) == K::Sym {
                        self.symbol(n, RefKind::Call);
                    } else {
                        self.form(n);
                    }
                }
                self.buf.truncate(hs);
                Res::Other
            }
            _ => {
                self.form(head);
                Res::Other
            }
        };
        let (a, b) = (s + 1, e);
        match res {
            Res::Special(name) => self.special(name, a, b),
            Res::Core(name) => self.core_macro(name, a, b),
            Res::Var(name) | Res::Unresolved(name) => self.other_macro(name, a, b, top),
            Res::Local | Res::Other => self.forms(a, b),
        }
    }

    fn kind_at(&self, i: usize, b: usize) -> K {
        if i < b {
            kind(self.buf[i])
        } else {
            K::Other
        }
    }

    fn special(&mut self, name: &str, a: usize, b: usize) {
        match name {
            "quote" => {
                for i in a..b {
                    let n = self.buf[i];
                    self.quoted(n);
                }
            }
            "def" => self.def_like(a, b),
            "fn*" => self.fn_form(a, b),
            "let*" | "loop*" => self.let_like(a, b),
            "letfn*" => self.letfn_star(a, b),
            "catch" => self.catch(a, b),
            "." => self.dot(a, b),
            "case*" | "deftype*" | "reify*" | "import*" | "js*" => {
                for i in a..b {
                    let n = self.buf[i];
                    self.quoted(n);
                }
            }
            // var, new, if, do, try, finally, throw, recur, set!, monitor-*: arguments are code
            // (`(var x)` and `(new Class)` resolve their symbol like any other).
            _ => self.forms(a, b),
        }
    }

    fn core_macro(&mut self, name: &str, a: usize, b: usize) {
        match name {
            "defn" | "defn-" | "definline" => self.defn(a, b, false),
            "defmacro" => self.defn(a, b, true),
            "fn" | "bound-fn" => self.fn_form(a, b),
            "let" | "loop" | "when-let" | "when-some" | "when-first" | "with-open"
            | "with-local-vars" | "dotimes" => self.let_like(a, b),
            "if-let" | "if-some" => self.if_let(a, b),
            "for" | "doseq" => self.comprehension(a, b),
            "letfn" => self.letfn(a, b),
            "as->" => self.as_thread(a, b),
            // cljs: `(this-as self body)`.
            "this-as" => self.this_as(a, b),
            "case" => self.case(a, b),
            "binding" | "with-redefs" => self.binding(a, b),
            "defonce" | "defmulti" | "defstruct" => self.def_like(a, b),
            "defmethod" => self.defmethod(a, b),
            "deftype" | "defrecord" => self.deftype(a, b),
            "reify" => self.specs(a, b, false),
            "specify" | "specify!" => {
                if a < b {
                    let n = self.buf[a];
                    self.form(n);
                }
                self.specs(a + 1, b, false);
            }
            "proxy" => self.proxy(a, b),
            "extend-type" => self.extend_type(a, b),
            "extend-protocol" => self.extend_protocol(a, b),
            "->" | "->>" | "some->" | "some->>" | "doto" => self.thread(a, b),
            "cond->" | "cond->>" => self.cond_thread(a, b),
            ".." => self.dotdot(a, b),
            "areduce" => self.areduce(a, b),
            "amap" => self.amap(a, b),
            "proxy-super" => self.forms((a + 1).min(b), b),
            "comment" => {
                self.mute += 1;
                self.forms(a, b);
                self.mute -= 1;
            }
            // Names, class names and option keywords, none of them references.
            "declare" | "defprotocol" | "definterface" | "ns" | "import" | "gen-class"
            | "gen-interface" | "memfn" | "refer-clojure" => {
                for i in a..b {
                    let n = self.buf[i];
                    self.quoted(n);
                }
            }
            _ => self.forms(a, b),
        }
    }

    /// Heads that are not core vars: look-alikes of core binding macros, and, for the
    /// top-level form, `def`-something macros (`deftest`, `defstate`, `s/defn`, …) whose second
    /// element is the name they define.
    fn other_macro(&mut self, name: &str, a: usize, b: usize, top: bool) {
        let first = self.kind_at(a, b);
        if binding_lookalike(name) && (first == K::Vec || (name == "fn" && first == K::Sym)) {
            self.core_macro(if name == "go-loop" { "loop" } else { name }, a, b);
        } else if matches!(name, "this-as" | "specify" | "specify!") {
            // cljs.core macros, unknown to a resolver given the clojure.core publics.
            self.core_macro(name, a, b);
        } else if name == "are" && first == K::Vec {
            // clojure.test/are: the argument vector names the template's locals.
            let mark = self.locals.len();
            let v = self.buf[a];
            self.bind(v);
            if a + 1 < b {
                let t = self.buf[a + 1];
                self.in_test_assertion += 1;
                self.form(t);
                self.in_test_assertion -= 1;
            }
            self.locals.truncate(mark);
            self.forms((a + 2).min(b), b);
        } else if name == "is" {
            self.in_test_assertion += 1;
            self.forms(a, b);
            self.in_test_assertion -= 1;
        } else if top && name.starts_with("def") && name.len() > 3 && first == K::Sym {
            self.def_like_macro(a, b);
        } else {
            self.forms(a, b);
        }
    }

    /// `(def name doc? init?)` and friends: the name is not a reference to itself.
    fn def_like(&mut self, a: usize, b: usize) {
        let mut i = a;
        if self.is_name_at(i, b) {
            let n = self.buf[i];
            self.walk_meta(n, true);
            i += 1;
        }
        self.forms(i, b);
    }

    /// `(defsomething name doc? attr-map? [params] body...)` or with arities, or anything else.
    fn def_like_macro(&mut self, a: usize, b: usize) {
        let n = self.buf[a];
        self.walk_meta(n, true);
        let mut i = a + 1;
        while i < b && matches!(kind(self.buf[i]), K::Str | K::Map) {
            let n = self.buf[i];
            self.form(n);
            i += 1;
        }
        if self.kind_at(i, b) == K::Vec && self.type_like(i + 1, b) {
            // `(defcache C [fields] Proto (method [this x] ..) ...)`: a deftype look-alike.
            let mark = self.locals.len();
            let fields = self.buf[i];
            self.bind(fields);
            self.specs(i + 1, b, false);
            self.locals.truncate(mark);
            return;
        }
        let fn_like = match self.kind_at(i, b) {
            K::Vec => i + 1 < b,
            K::List => {
                let mut all = true;
                for j in i..b {
                    let n = self.buf[j];
                    all &= self.starts_with_vec(n) == Some(true);
                }
                all
            }
            _ => false,
        };
        if fn_like {
            self.fn_tail(i, b);
        } else {
            self.forms(i, b);
        }
    }

    /// Whether `a..b` looks like the body of a deftype: protocol symbols and method
    /// implementations `(name [params] body...)`, with at least one symbol or two methods.
    fn type_like(&mut self, a: usize, b: usize) -> bool {
        let (mut syms, mut methods) = (0, 0);
        for j in a..b {
            let n = self.buf[j];
            match kind(n) {
                K::Sym => syms += 1,
                K::List => {
                    let (s, e) = self.kids(n);
                    let method = e >= s + 3
                        && kind(self.buf[s]) == K::Sym
                        && kind(self.buf[s + 1]) == K::Vec;
                    self.buf.truncate(s);
                    if !method {
                        return false;
                    }
                    methods += 1;
                }
                _ => return false,
            }
        }
        methods > 0 && (syms > 0 || methods > 1)
    }

    /// Whether a node is a list whose first element is a vector (`None`: not a list).
    fn starts_with_vec(&mut self, list: Node<'a>) -> Option<bool> {
        if kind(list) != K::List {
            return None;
        }
        let (s, e) = self.kids(list);
        let yes = s < e && kind(self.buf[s]) == K::Vec;
        self.buf.truncate(s);
        Some(yes)
    }

    /// `(defn name doc? attr-map? [params] body)` / `(defn name doc? attr-map? ([p] b)+ attr?)`.
    fn defn(&mut self, a: usize, b: usize, is_macro: bool) {
        let mut i = a;
        if self.is_name_at(i, b) {
            let n = self.buf[i];
            self.walk_meta(n, true);
            i += 1;
        }
        // A docstring, possibly one per platform.
        if self.kind_at(i, b) == K::Str || (i < b && self.cond_of(self.buf[i], K::Str)) {
            i += 1;
        }
        if self.kind_at(i, b) == K::Map {
            let n = self.buf[i];
            self.form(n);
            i += 1;
        }
        let mark = self.locals.len();
        if is_macro {
            self.locals.push("&form");
            self.locals.push("&env");
        }
        self.fn_tail(i, b);
        self.locals.truncate(mark);
    }

    /// `(fn name? [params] body)` / `(fn name? ([params] body)+)`.
    fn fn_form(&mut self, a: usize, b: usize) {
        let mark = self.locals.len();
        let mut i = a;
        if self.kind_at(i, b) == K::Sym {
            let n = self.buf[i];
            self.bind(n);
            i += 1;
        }
        self.fn_tail(i, b);
        self.locals.truncate(mark);
    }

    /// `[params] body...` or `([params] body...)+`, anything else walked as code.
    fn fn_tail(&mut self, i: usize, b: usize) {
        if i >= b {
            return;
        }
        let first = self.buf[i];
        // `#?(:clj [a ^long n] :cljs [a n])` as the parameter vector binds every branch.
        if kind(first) == K::Vec || self.cond_of(first, K::Vec) {
            self.fn_body(first, i + 1, b);
            return;
        }
        for j in i..b {
            let n = self.buf[j];
            self.arity(n);
        }
    }

    /// `([params] body...)`, possibly inside a reader conditional; anything else is code.
    fn arity(&mut self, n: Node<'a>) {
        match kind(n) {
            K::List => {
                let (s, e) = self.kids(n);
                // `(#?(:clj ^long [n] :cljs [n]) body...)`: the parameters of every platform.
                if s < e && (kind(self.buf[s]) == K::Vec || self.cond_of(self.buf[s], K::Vec)) {
                    let params = self.buf[s];
                    self.fn_body(params, s + 1, e);
                } else {
                    self.forms(s, e);
                }
                self.buf.truncate(s);
            }
            K::ReadCond => {
                let (s, e) = self.branches(n);
                for j in s..e {
                    let b = self.buf[j];
                    self.arity(b);
                }
                self.buf.truncate(s);
            }
            _ => self.form(n),
        }
    }

    /// Push the branches of a reader conditional (not its platform keywords) onto the buffer.
    fn branches(&mut self, n: Node<'a>) -> (usize, usize) {
        let (s, e) = self.kids(n);
        let mut w = s;
        for r in (s + 1..e).step_by(2) {
            self.buf[w] = self.buf[r];
            w += 1;
        }
        self.buf.truncate(w);
        (s, w)
    }

    /// Whether `n` is a reader conditional whose branches are all of kind `k`.
    fn cond_of(&mut self, n: Node<'a>, k: K) -> bool {
        if kind(n) != K::ReadCond {
            return false;
        }
        let (s, e) = self.branches(n);
        let yes = s < e && (s..e).all(|j| kind(self.buf[j]) == k);
        self.buf.truncate(s);
        yes
    }

    /// Whether buffered node `i` (< `b`) is the defined name: a symbol, or one per platform.
    fn is_name_at(&mut self, i: usize, b: usize) -> bool {
        if i >= b {
            return false;
        }
        let n = self.buf[i];
        kind(n) == K::Sym || self.cond_of(n, K::Sym)
    }

    /// Parameters, then an optional `{:pre .. :post ..}` map, then the body.
    fn fn_body(&mut self, params: Node<'a>, a: usize, b: usize) {
        let mark = self.locals.len();
        self.bind(params);
        let mut i = a;
        if i + 1 < b && kind(self.buf[i]) == K::Map {
            // In :post, `%` is the return value.
            self.locals.push("%");
            let n = self.buf[i];
            self.form(n);
            self.locals.pop();
            i += 1;
        }
        self.forms(i, b);
        self.locals.truncate(mark);
    }

    /// Bind the pairs of a binding vector in order: each init sees the earlier bindings.
    /// The locals stay pushed; the caller truncates.
    fn bindings(&mut self, vec: Node<'a>) {
        if kind(vec) != K::Vec {
            self.form(vec);
            return;
        }
        let (s, e) = self.kids(vec);
        let mut j = s;
        while j < e {
            let lhs = self.buf[j];
            if j + 1 < e {
                let init = self.buf[j + 1];
                self.form(init);
            }
            self.bind(lhs);
            j += 2;
        }
        self.buf.truncate(s);
    }

    fn let_like(&mut self, a: usize, b: usize) {
        let mark = self.locals.len();
        if a < b {
            let v = self.buf[a];
            self.bindings(v);
        }
        self.forms((a + 1).min(b), b);
        self.locals.truncate(mark);
    }

    /// `(if-let [x init] then else)`: the else branch does not see `x`.
    fn if_let(&mut self, a: usize, b: usize) {
        let mark = self.locals.len();
        if a < b {
            let v = self.buf[a];
            self.bindings(v);
        }
        if a + 1 < b {
            let then = self.buf[a + 1];
            self.form(then);
        }
        self.locals.truncate(mark);
        self.forms((a + 2).min(b), b);
    }

    /// `for`/`doseq` bindings with `:let`, `:when` and `:while`.
    fn comprehension(&mut self, a: usize, b: usize) {
        let mark = self.locals.len();
        if a < b && kind(self.buf[a]) == K::Vec {
            let v = self.buf[a];
            let (s, e) = self.kids(v);
            let mut j = s;
            while j < e {
                let lhs = self.buf[j];
                let rhs = (j + 1 < e).then(|| self.buf[j + 1]);
                j += 2;
                if kind(lhs) == K::Kwd {
                    let Some(rhs) = rhs else { break };
                    match self.text(lhs) {
                        ":let" => self.bindings(rhs),
                        _ => self.form(rhs),
                    }
                    continue;
                }
                if let Some(rhs) = rhs {
                    self.form(rhs);
                }
                self.bind(lhs);
            }
            self.buf.truncate(s);
        } else if a < b {
            let n = self.buf[a];
            self.form(n);
        }
        self.forms((a + 1).min(b), b);
        self.locals.truncate(mark);
    }

    /// `(letfn [(f [x] ...) (g [y] ...)] body)`: every name is visible everywhere.
    fn letfn(&mut self, a: usize, b: usize) {
        let mark = self.locals.len();
        if a < b && kind(self.buf[a]) == K::Vec {
            let v = self.buf[a];
            let (s, e) = self.kids(v);
            for j in s..e {
                let spec = self.buf[j];
                if kind(spec) == K::List {
                    let (fs, fe) = self.kids(spec);
                    if fs < fe && kind(self.buf[fs]) == K::Sym {
                        let n = self.buf[fs];
                        self.bind(n);
                    }
                    self.buf.truncate(fs);
                }
            }
            for j in s..e {
                let spec = self.buf[j];
                if kind(spec) == K::List {
                    let (fs, fe) = self.kids(spec);
                    let start = if fs < fe && kind(self.buf[fs]) == K::Sym { fs + 1 } else { fs };
                    self.fn_tail(start, fe);
                    self.buf.truncate(fs);
                } else {
                    self.form(spec);
                }
            }
            self.buf.truncate(s);
        }
        self.forms((a + 1).min(b), b);
        self.locals.truncate(mark);
    }

    /// `(letfn* [f (fn* f ...) g (fn* g ...)] body)`.
    fn letfn_star(&mut self, a: usize, b: usize) {
        let mark = self.locals.len();
        if a < b && kind(self.buf[a]) == K::Vec {
            let v = self.buf[a];
            let (s, e) = self.kids(v);
            for j in (s..e).step_by(2) {
                let n = self.buf[j];
                self.bind(n);
            }
            for j in (s..e).skip(1).step_by(2) {
                let n = self.buf[j];
                self.form(n);
            }
            self.buf.truncate(s);
        }
        self.forms((a + 1).min(b), b);
        self.locals.truncate(mark);
    }

    /// `(as-> expr name forms...)`.
    fn as_thread(&mut self, a: usize, b: usize) {
        let mark = self.locals.len();
        if a < b {
            let n = self.buf[a];
            self.form(n);
        }
        if a + 1 < b {
            let n = self.buf[a + 1];
            self.bind(n);
        }
        self.forms((a + 2).min(b), b);
        self.locals.truncate(mark);
    }

    /// `(this-as name body...)`.
    fn this_as(&mut self, a: usize, b: usize) {
        let mark = self.locals.len();
        if a < b {
            let n = self.buf[a];
            self.bind(n);
        }
        self.forms((a + 1).min(b), b);
        self.locals.truncate(mark);
    }

    /// `(case expr test result ... default?)`: the tests are constants.
    fn case(&mut self, a: usize, b: usize) {
        if a >= b {
            return;
        }
        let n = self.buf[a];
        self.form(n);
        let clauses = b - (a + 1);
        for k in 0..clauses / 2 {
            let test = self.buf[a + 1 + 2 * k];
            self.quoted(test);
            let result = self.buf[a + 2 + 2 * k];
            self.form(result);
        }
        if clauses % 2 == 1 {
            let default = self.buf[b - 1];
            self.form(default);
        }
    }

    /// `(binding [*x* v] body)`: the left-hand symbols are vars, not new locals.
    fn binding(&mut self, a: usize, b: usize) {
        if a < b && kind(self.buf[a]) == K::Vec {
            let v = self.buf[a];
            let (s, e) = self.kids(v);
            self.forms(s, e);
            self.buf.truncate(s);
        } else if a < b {
            let n = self.buf[a];
            self.form(n);
        }
        self.forms((a + 1).min(b), b);
    }

    /// `(defmethod multi dispatch-value name? [params] body)` or with arities.
    fn defmethod(&mut self, a: usize, b: usize) {
        if a < b {
            let multi = self.buf[a];
            self.form(multi);
        }
        if a + 1 < b {
            let dispatch = self.buf[a + 1];
            self.form(dispatch);
        }
        let mark = self.locals.len();
        let mut i = a + 2;
        if self.kind_at(i, b) == K::Sym {
            let n = self.buf[i];
            self.bind(n);
            i += 1;
        }
        self.fn_tail(i.min(b), b);
        self.locals.truncate(mark);
    }

    /// `(deftype Name [fields] opts* Proto (method [this ..] ..) ...)`; same for defrecord.
    fn deftype(&mut self, a: usize, b: usize) {
        let mark = self.locals.len();
        let mut i = a;
        if self.kind_at(i, b) == K::Sym {
            let n = self.buf[i];
            self.walk_meta(n, false);
            i += 1;
        }
        if self.kind_at(i, b) == K::Vec {
            let fields = self.buf[i];
            self.bind(fields);
            i += 1;
        }
        self.specs(i, b, false);
        self.locals.truncate(mark);
    }

    /// Protocol/interface names (references) and method implementations (names are not).
    fn specs(&mut self, a: usize, b: usize, implicit_this: bool) {
        let mut i = a;
        while i < b {
            let n = self.buf[i];
            match kind(n) {
                K::Kwd => {
                    // deftype/defrecord options: `:load-ns true`.
                    i += 2;
                    continue;
                }
                _ => self.spec_item(n, implicit_this),
            }
            i += 1;
        }
    }

    fn spec_item(&mut self, n: Node<'a>, implicit_this: bool) {
        match kind(n) {
            K::Sym => {
                self.symbol(n, RefKind::Value);
            }
            K::List => self.method(n, implicit_this),
            K::ReadCond => {
                let (s, e) = self.branches(n);
                for j in s..e {
                    let b = self.buf[j];
                    self.spec_item(b, implicit_this);
                }
                self.buf.truncate(s);
            }
            _ => self.form(n),
        }
    }

    /// `(name [params] body)` or `(name ([params] body)+)`.
    fn method(&mut self, list: Node<'a>, implicit_this: bool) {
        let mark = self.locals.len();
        if implicit_this {
            self.locals.push("this");
        }
        let (s, e) = self.kids(list);
        if s < e && kind(self.buf[s]) == K::Sym {
            let name = self.buf[s];
            self.walk_meta(name, false);
        }
        self.fn_tail((s + 1).min(e), e);
        self.buf.truncate(s);
        self.locals.truncate(mark);
    }

    /// `(proxy [Class Iface] [ctor args] (method [params] body) ...)`: `this` is implicit.
    fn proxy(&mut self, a: usize, b: usize) {
        if a < b {
            let classes = self.buf[a];
            self.form(classes);
        }
        if a + 1 < b {
            let args = self.buf[a + 1];
            self.form(args);
        }
        for i in (a + 2).min(b)..b {
            let n = self.buf[i];
            if kind(n) == K::List {
                self.method(n, true);
            } else {
                self.form(n);
            }
        }
    }

    /// The target type of `extend-type`/`extend-protocol`: cljs' base types are no symbols.
    fn type_name(&mut self, n: Node<'a>) {
        if kind(n) == K::Sym {
            let t = self.text(n);
            if matches!(t, "default" | "object" | "string" | "number" | "function" | "array")
                || matches!(t, "boolean" | "nil")
            {
                return;
            }
            self.symbol(n, RefKind::Value);
        } else {
            self.form(n);
        }
    }

    fn extend_type(&mut self, a: usize, b: usize) {
        if a < b {
            let t = self.buf[a];
            self.type_name(t);
        }
        self.specs((a + 1).min(b), b, false);
    }

    fn extend_protocol(&mut self, a: usize, b: usize) {
        if a < b {
            let p = self.buf[a];
            self.form(p);
        }
        for i in (a + 1).min(b)..b {
            let n = self.buf[i];
            self.extension(n);
        }
    }

    /// A type or a method implementation of `extend-protocol`, possibly per platform.
    fn extension(&mut self, n: Node<'a>) {
        match kind(n) {
            K::List => self.method(n, false),
            K::ReadCond => {
                let (s, e) = self.branches(n);
                for j in s..e {
                    let b = self.buf[j];
                    self.extension(b);
                }
                self.buf.truncate(s);
            }
            _ => self.type_name(n),
        }
    }

    /// `(catch Class e body)`.
    fn catch(&mut self, a: usize, b: usize) {
        let mark = self.locals.len();
        if a < b {
            let class = self.buf[a];
            self.form(class);
        }
        if a + 1 < b {
            let e = self.buf[a + 1];
            self.bind(e);
        }
        self.forms((a + 2).min(b), b);
        self.locals.truncate(mark);
    }

    /// `(. target member args)` / `(. target (member args))`.
    fn dot(&mut self, a: usize, b: usize) {
        if a < b {
            let t = self.buf[a];
            self.form(t);
        }
        if a + 1 < b {
            let m = self.buf[a + 1];
            self.member(m);
        }
        self.forms((a + 2).min(b), b);
    }

    /// A method or field name (not a reference), or `(method args)`.
    fn member(&mut self, m: Node<'a>) {
        match kind(m) {
            K::List => {
                let (s, e) = self.kids(m);
                self.forms((s + 1).min(e), e);
                self.buf.truncate(s);
            }
            K::Sym => {}
            _ => self.form(m),
        }
    }

    /// `(.. target member (member args) ...)`.
    fn dotdot(&mut self, a: usize, b: usize) {
        if a < b {
            let t = self.buf[a];
            self.form(t);
        }
        for i in (a + 1).min(b)..b {
            let m = self.buf[i];
            self.member(m);
        }
    }

    /// `(-> x f (g y))`: a bare symbol step is a call.
    fn thread(&mut self, a: usize, b: usize) {
        if a < b {
            let x = self.buf[a];
            self.form(x);
        }
        for i in (a + 1).min(b)..b {
            let step = self.buf[i];
            self.step(step);
        }
    }

    fn step(&mut self, step: Node<'a>) {
        if kind(step) == K::Sym {
            self.symbol(step, RefKind::Call);
        } else if !self.as_thread_step(step) {
            self.form(step);
        }
    }

    /// `(-> x (as-> name body...))`: the threaded value fills the expression slot, so the
    /// step's first element is the name `as->` binds. False if `step` is not such a form.
    fn as_thread_step(&mut self, step: Node<'a>) -> bool {
        if kind(step) != K::List {
            return false;
        }
        let (s, e) = self.kids(step);
        let head = self.buf[s..e].first().copied();
        let is_as = head.and_then(|h| self.plain_sym_text(h)).is_some_and(|t| {
            t == "as->" || t.strip_suffix("/as->").is_some_and(|ns| self.is_core_ns(ns))
        });
        if is_as && s + 1 < e {
            let head = self.buf[s];
            self.symbol(head, RefKind::Call);
            let mark = self.locals.len();
            let name = self.buf[s + 1];
            self.bind(name);
            self.forms(s + 2, e);
            self.locals.truncate(mark);
        }
        self.buf.truncate(s);
        is_as && s + 1 < e
    }

    /// `(cond-> x test step ...)`.
    fn cond_thread(&mut self, a: usize, b: usize) {
        if a < b {
            let x = self.buf[a];
            self.form(x);
        }
        for (k, i) in ((a + 1).min(b)..b).enumerate() {
            let n = self.buf[i];
            if k % 2 == 0 {
                self.form(n);
            } else {
                self.step(n);
            }
        }
    }

    /// `(areduce a idx ret init expr)`.
    fn areduce(&mut self, a: usize, b: usize) {
        let mark = self.locals.len();
        let at = |k: usize| (a + k < b).then_some(a + k);
        if let Some(i) = at(0) {
            let n = self.buf[i];
            self.form(n);
        }
        if let Some(i) = at(3) {
            let n = self.buf[i];
            self.form(n);
        }
        for k in [1, 2] {
            if let Some(i) = at(k) {
                let n = self.buf[i];
                self.bind(n);
            }
        }
        self.forms((a + 4).min(b), b);
        self.locals.truncate(mark);
    }

    /// `(amap a idx ret expr)`.
    fn amap(&mut self, a: usize, b: usize) {
        let mark = self.locals.len();
        if a < b {
            let n = self.buf[a];
            self.form(n);
        }
        for i in (a + 1).min(b)..(a + 3).min(b) {
            let n = self.buf[i];
            self.bind(n);
        }
        self.forms((a + 3).min(b), b);
        self.locals.truncate(mark);
    }

    // ----- destructuring ---------------------------------------------------------------------

    /// Push the locals a binding form introduces; `:or` defaults and lookup keys are code.
    fn bind(&mut self, node: Node<'a>) {
        match kind(node) {
            K::Sym => {
                let sym = self.sym_parts(node);
                if sym.meta {
                    self.walk_meta(node, false);
                }
                if !sym.name.is_empty() && sym.name != "&" {
                    self.locals.push(sym.name);
                }
            }
            K::Vec => {
                let (s, e) = self.kids(node);
                let mut j = s;
                while j < e {
                    let n = self.buf[j];
                    j += 1;
                    if kind(n) == K::Kwd {
                        if self.text(n) == ":as" && j < e {
                            let t = self.buf[j];
                            self.bind(t);
                            j += 1;
                        }
                        continue;
                    }
                    self.bind(n);
                }
                self.buf.truncate(s);
            }
            K::Map => {
                let (s, e) = self.kids(node);
                let mut or = None;
                let mut j = s;
                while j < e {
                    let k = self.buf[j];
                    let v = (j + 1 < e).then(|| self.buf[j + 1]);
                    j += 2;
                    if kind(k) != K::Kwd {
                        // `{local :key}`: the key is looked up by value.
                        self.bind(k);
                        if let Some(v) = v {
                            self.form(v);
                        }
                        continue;
                    }
                    self.keyword(k);
                    let t = self.text(k);
                    let name = t.rsplit('/').next().unwrap_or(t).trim_start_matches(':');
                    let plain = !t.get(1..).unwrap_or("").contains('/') && !t.starts_with("::");
                    match (name, v) {
                        ("keys" | "strs" | "syms", Some(v)) => self.bind_names(v),
                        ("as", Some(v)) if plain => self.bind(v),
                        ("or", Some(v)) if plain => or = Some(v),
                        (_, Some(v)) => self.form(v),
                        (_, None) => {}
                    }
                }
                // Defaults may use the names bound by this map (`{:keys [a b] :or {b a}}`).
                if let Some(or) = or {
                    if kind(or) == K::Map {
                        let (os, oe) = self.kids(or);
                        for i in (os..oe).skip(1).step_by(2) {
                            let d = self.buf[i];
                            self.form(d);
                        }
                        self.buf.truncate(os);
                    } else {
                        self.form(or);
                    }
                }
                self.buf.truncate(s);
            }
            K::ReadCond => {
                let (s, e) = self.kids(node);
                for i in (s..e).skip(1).step_by(2) {
                    let n = self.buf[i];
                    self.bind(n);
                }
                self.buf.truncate(s);
            }
            _ => {}
        }
    }

    /// The vector of `:keys`/`:strs`/`:syms`: symbols or keywords, bound by their name part.
    fn bind_names(&mut self, v: Node<'a>) {
        if !matches!(kind(v), K::Vec | K::List | K::Set) {
            self.form(v);
            return;
        }
        let (s, e) = self.kids(v);
        for i in s..e {
            let n = self.buf[i];
            match kind(n) {
                K::Sym => self.bind(n),
                K::Kwd => {
                    self.keyword(n);
                    let t = self.text(n);
                    let name = t.rsplit('/').next().unwrap_or(t).trim_start_matches(':');
                    if !name.is_empty() {
                        self.locals.push(name);
                    }
                }
                _ => {}
            }
        }
        self.buf.truncate(s);
    }

    // ----- quote and syntax-quote ------------------------------------------------------------

    /// Quoted data: nothing is a reference; `::alias/kw` is still resolved by the reader.
    fn quoted(&mut self, node: Node<'a>) {
        match kind(node) {
            K::Kwd => self.keyword(node),
            K::Sym
            | K::Str
            | K::Num
            | K::Char
            | K::Nil
            | K::Bool
            | K::Regex
            | K::Comment
            | K::SymVal => {}
            kind => {
                // Only `::` keywords matter here; most quoted data has none.
                if !self.text(node).contains("::") {
                    return;
                }
                if kind == K::NsMap {
                    self.ns_map_prefix(node);
                }
                let (s, e) = self.kids(node);
                for i in s..e {
                    let n = self.buf[i];
                    self.quoted(n);
                }
                self.buf.truncate(s);
            }
        }
    }

    /// A syntax-quote template: symbols resolve as the reader resolves them (as values, locals
    /// ignored, gensyms and special forms left alone); `~x` and `~@xs` are code.
    fn sq(&mut self, node: Node<'a>) {
        match kind(node) {
            K::Sym => {
                let sym = self.sym_parts(node);
                if sym.meta {
                    self.walk_meta(node, false);
                }
                if sym.name.is_empty() {
                    return;
                }
                match sym.ns {
                    Some(ns) => {
                        self.qualified(&sym, ns, RefKind::Value);
                    }
                    None => {
                        self.unqualified(sym.anchor, sym.name, RefKind::Value, true);
                    }
                }
            }
            K::Kwd => self.keyword(node),
            K::Unquote | K::UnquoteSplicing => self.each(node),
            K::Str | K::Num | K::Char | K::Nil | K::Bool | K::Regex | K::Comment | K::SymVal => {}
            kind => {
                if kind == K::NsMap {
                    self.ns_map_prefix(node);
                }
                let anon = kind == K::AnonFn;
                let cond = kind == K::ReadCond;
                if anon {
                    self.anon += 1;
                }
                let (s, e) = self.kids(node);
                if self.kids_meta && kind != K::SynQuote {
                    self.walk_meta(node, false);
                }
                // `(. target member args)`: the member is no symbol to resolve.
                let dot = kind == K::List && s < e && self.plain_sym_text(self.buf[s]) == Some(".");
                for (k, i) in (s..e).enumerate() {
                    if cond && k % 2 == 0 {
                        continue;
                    }
                    let n = self.buf[i];
                    if dot && k == 2 {
                        if self::kind(n) == K::List {
                            let (ms, me) = self.kids(n);
                            for j in (ms + 1).min(me)..me {
                                let m = self.buf[j];
                                self.sq(m);
                            }
                            self.buf.truncate(ms);
                        }
                        continue;
                    }
                    self.sq(n);
                }
                self.buf.truncate(s);
                if anon {
                    self.anon -= 1;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::nsdecl::{apply_top_level_directive, parse_ns_form};
    use crate::syntax::{parse, sym_parts, top_level_forms, values};

    /// What resolving the last form of a small file gives.
    struct Out {
        r: Resolution,
        canonical: String,
    }

    impl Out {
        fn refs(&self) -> BTreeSet<&str> {
            self.r.refs.iter().map(|v| v.fqn.as_str()).collect()
        }
        fn calls(&self) -> BTreeSet<&str> {
            self.r.refs.iter().filter(|v| v.kind == RefKind::Call).map(|v| v.fqn.as_str()).collect()
        }
        fn values(&self) -> BTreeSet<&str> {
            self.r
                .refs
                .iter()
                .filter(|v| v.kind == RefKind::Value)
                .map(|v| v.fqn.as_str())
                .collect()
        }
        fn unresolved(&self) -> BTreeSet<&str> {
            self.r.unresolved.iter().map(|u| u.symbol.as_str()).collect()
        }
        fn classes(&self) -> BTreeSet<&str> {
            self.r.classes.iter().map(String::as_str).collect()
        }
    }

    fn set<'x>(xs: &[&'x str]) -> BTreeSet<&'x str> {
        xs.iter().copied().collect()
    }

    /// Read the ns form (if the file starts with one) and top-level directives, collect the
    /// names every `def…` form defines, and resolve the last form.
    fn resolve_last_in(src: &str, publics: &[(&str, &[&str])], core_ns: &str) -> Out {
        let tree = parse(src);
        let forms = top_level_forms(&tree);
        let mut decl = NsDecl { name: "user".into(), ..NsDecl::default() };
        let mut own = HashSet::new();
        for (i, f) in forms.iter().enumerate() {
            if i == 0 {
                if let Some(d) = parse_ns_form(*f, src) {
                    decl = d;
                    continue;
                }
            }
            apply_top_level_directive(&mut decl, *f, src);
            let vs = values(*f);
            if let [head, name, ..] = vs.as_slice() {
                if head.kind() == "sym_lit" && name.kind() == "sym_lit" {
                    let head = sym_parts(*head, src).1;
                    let name = sym_parts(*name, src).1.to_string();
                    if head.starts_with("def") {
                        if matches!(head, "defrecord" | "deftype") {
                            own.insert(format!("->{name}"));
                        }
                        if head == "defprotocol" {
                            for sig in vs.iter().filter(|s| s.kind() == "list_lit") {
                                if let Some(m) = values(*sig).first() {
                                    own.insert(sym_parts(*m, src).1.to_string());
                                }
                            }
                        }
                        own.insert(name);
                    }
                }
            }
        }
        let publics: HashMap<String, HashSet<String>> = publics
            .iter()
            .map(|(ns, vars)| (ns.to_string(), vars.iter().map(|v| v.to_string()).collect()))
            .collect();
        let env = ResolveEnv {
            decl: &decl,
            own_vars: &own,
            publics: &publics,
            known_nss: &HashSet::new(),
            core_ns,
            core_publics: clojure_core_publics(),
        };
        let last = *forms.last().expect("a form");
        let r = resolve_form(last, src, &env);
        let mut canonical = String::new();
        let mut at = last.start_byte();
        for w in &r.rewrites {
            assert!(w.start >= at, "rewrites overlap or are out of order: {:?}", r.rewrites);
            canonical.push_str(&src[at..w.start]);
            canonical.push_str(&w.replacement);
            at = w.end;
        }
        canonical.push_str(&src[at..last.end_byte()]);
        Out { r, canonical }
    }

    fn resolve_last(src: &str) -> Out {
        resolve_last_with(src, &[])
    }

    fn resolve_last_with(src: &str, publics: &[(&str, &[&str])]) -> Out {
        resolve_last_in(src, publics, "clojure.core")
    }

    #[test]
    fn core_publics_are_loaded() {
        let core = clojure_core_publics();
        assert!(core.len() > 600);
        for name in ["map", "defn", "let", "+", "->", "..", "*out*", "/"] {
            assert!(core.contains(name), "{name}");
        }
        assert!(!core.contains("if"), "special forms are not vars");
    }

    #[test]
    fn alias_qualified_symbols_resolve_and_are_rewritten() {
        let o = resolve_last(
            "(ns app.core (:require [clojure.string :as str] [app.db :as db]))
(defn f [x] (str/join \",\" (map db/row x)))",
        );
        assert_eq!(
            o.calls(),
            set(&["clojure.core/defn", "clojure.string/join", "clojure.core/map"])
        );
        assert_eq!(o.values(), set(&["app.db/row"]));
        assert!(o.unresolved().is_empty());
        assert_eq!(o.canonical, "(defn f [x] (clojure.string/join \",\" (map app.db/row x)))");
    }

    #[test]
    fn as_alias_keywords_are_rewritten_plain_auto_keywords_kept() {
        let o = resolve_last(
            "(ns app.user (:require [my.domain.user :as-alias user] [clojure.spec.alpha :as s]))
(s/def ::user/id (s/and int? #(pos? %)))
(def k [::user/id ::local :other/x #::user{:name 1} '::user/q {::s/x 1}])",
        );
        assert!(o.refs().is_empty(), "{:?}", o.refs());
        assert_eq!(
            o.canonical,
            "(def k [:my.domain.user/id ::local :other/x #:my.domain.user{:name 1} \
             ':my.domain.user/q {:clojure.spec.alpha/x 1}])"
        );
    }

    #[test]
    fn alias_rewrite_leaves_symbol_metadata_alone() {
        let src = "(ns m (:require [clojure.string :as str]))\n(def x ^{:tag String} str/join)";
        let o = resolve_last(src);
        assert_eq!(o.canonical, "(def x ^{:tag String} clojure.string/join)");
        assert_eq!(o.r.rewrites.len(), 1);
        let w = &o.r.rewrites[0];
        assert_eq!(&src[w.start..w.end], "str");
        assert_eq!(o.values(), set(&["clojure.string/join"]));
    }

    #[test]
    fn referred_vars_resolve_to_their_namespace() {
        let o = resolve_last(
            "(ns r (:require [c.d :refer [x y]]))
(defn f [] (x (y)) x)",
        );
        assert_eq!(o.calls(), set(&["clojure.core/defn", "c.d/x", "c.d/y"]));
        assert_eq!(o.values(), set(&["c.d/x"]));
    }

    #[test]
    fn refer_with_rename_uses_the_new_name() {
        let o = resolve_last(
            "(ns r (:require [c.d :refer [x] :rename {x z}]))
(defn f [] (z 1) (x 2))",
        );
        assert_eq!(o.calls(), set(&["clojure.core/defn", "c.d/x"]));
        assert_eq!(o.unresolved(), set(&["x"]));
    }

    #[test]
    fn refer_all_and_use_need_the_publics() {
        let o = resolve_last_with(
            "(ns r (:require [lib.a :refer :all]) (:use lib.b))
(defn f [] (foo (bar) (baz)))",
            &[("lib.a", &["foo"]), ("lib.b", &["bar"])],
        );
        assert_eq!(o.calls(), set(&["clojure.core/defn", "lib.a/foo", "lib.b/bar"]));
        assert_eq!(o.unresolved(), set(&["baz"]));
    }

    #[test]
    fn refer_clojure_exclude_and_rename() {
        let o = resolve_last(
            "(ns r (:refer-clojure :exclude [map] :rename {get core-get}))
(defn f [m] (map (core-get m :a) (get m :b) (filter odd? m)))",
        );
        assert_eq!(
            o.refs(),
            set(&[
                "clojure.core/defn",
                "clojure.core/get",
                "clojure.core/filter",
                "clojure.core/odd?"
            ])
        );
        assert_eq!(o.unresolved(), set(&["map", "get"]));
    }

    #[test]
    fn refer_clojure_only_limits_core() {
        let o = resolve_last(
            "(ns r (:refer-clojure :only [defn inc]))
(defn f [x] (inc (dec x)))",
        );
        assert_eq!(o.refs(), set(&["clojure.core/defn", "clojure.core/inc"]));
        assert_eq!(o.unresolved(), set(&["dec"]));
    }

    #[test]
    fn own_vars_win_over_core() {
        // No :refer-clojure :exclude: after loading, ns-resolve gives the namespace's own var.
        let o = resolve_last(
            "(ns a)
(defn helper [] 1)
(defn update [m] m)
(defn f [x] (update x (helper)) (str x) (clojure.core/update x :a inc))",
        );
        assert_eq!(
            o.calls(),
            set(&[
                "clojure.core/defn",
                "a/update",
                "a/helper",
                "clojure.core/str",
                "clojure.core/update"
            ])
        );
        assert_eq!(o.values(), set(&["clojure.core/inc"]));
    }

    #[test]
    fn same_namespace_var_defined_later_in_the_file() {
        let src = "(ns a)\n(defn f [x] (g x))\n(defn g [x] x)";
        let tree = parse(src);
        let forms = top_level_forms(&tree);
        let decl = parse_ns_form(forms[0], src).unwrap();
        let own: HashSet<String> = ["f", "g"].iter().map(|s| s.to_string()).collect();
        let publics = HashMap::new();
        let env = ResolveEnv {
            decl: &decl,
            own_vars: &own,
            publics: &publics,
            known_nss: &HashSet::new(),
            core_ns: "clojure.core",
            core_publics: clojure_core_publics(),
        };
        let r = resolve_form(forms[1], src, &env);
        let fqns: Vec<(&str, RefKind, Pos)> =
            r.refs.iter().map(|v| (v.fqn.as_str(), v.kind, v.pos)).collect();
        assert_eq!(
            fqns,
            vec![
                ("clojure.core/defn", RefKind::Call, Pos { line: 2, col: 2 }),
                ("a/g", RefKind::Call, Pos { line: 2, col: 14 }),
            ]
        );
    }

    #[test]
    fn var_quote_is_a_value_reference() {
        let o = resolve_last("(ns a)\n(defn h [] 1)\n(def x [#'h (#'h) #'clojure.core/map])");
        assert_eq!(o.values(), set(&["a/h", "clojure.core/map"]));
        assert!(o.calls().is_empty(), "{:?}", o.calls());
    }

    #[test]
    fn defined_name_is_not_a_reference_but_recursion_is() {
        let o = resolve_last(
            "(ns a)
(defn fact \"Doc.\" {:added \"1.0\"} [n] (if (zero? n) 1 (* n (fact (dec n)))))",
        );
        assert_eq!(
            o.calls(),
            set(&[
                "clojure.core/defn",
                "clojure.core/zero?",
                "clojure.core/*",
                "a/fact",
                "clojure.core/dec"
            ])
        );
        assert_eq!(o.r.refs.iter().filter(|v| v.fqn == "a/fact").count(), 1);
        let o = resolve_last("(ns a)\n(def ^:private x (inc 1))");
        assert_eq!(o.refs(), set(&["clojure.core/inc"]));
    }

    #[test]
    fn let_destructuring_vectors_maps_and_or_defaults() {
        let o = resolve_last(
            "(ns a)
(defn xs [] 1)
(defn default-b [] 1)
(defn f [ys zs]
  (let [[a & more :as all] (xs)
        {:keys [b c/d] :strs [e] :syms [g] :as m :or {b (default-b) e d}} ys
        {h :h [i j] :ij :person/keys [name age] ::keys [kw]} zs
        k (count a)]
    (list a more all b d e g m h i j name age kw k unknown)))",
        );
        assert_eq!(
            o.refs(),
            set(&[
                "clojure.core/defn",
                "clojure.core/let",
                "a/xs",
                "a/default-b",
                "clojure.core/count",
                "clojure.core/list",
            ])
        );
        // `name` is a local, not clojure.core/name.
        assert_eq!(o.unresolved(), set(&["unknown"]));
    }

    #[test]
    fn let_init_does_not_see_its_own_binding() {
        let o = resolve_last("(ns a)\n(defn x [] 1)\n(let [x (x)] x)");
        assert_eq!(o.calls(), set(&["clojure.core/let", "a/x"]));
        assert_eq!(o.r.refs.len(), 2);
    }

    #[test]
    fn loop_and_recur() {
        let o = resolve_last(
            "(defn f [n] (loop [i 0 acc []] (if (< i n) (recur (inc i) (conj acc i)) acc)))",
        );
        assert_eq!(
            o.refs(),
            set(&[
                "clojure.core/defn",
                "clojure.core/loop",
                "clojure.core/<",
                "clojure.core/inc",
                "clojure.core/conj"
            ])
        );
        assert!(o.unresolved().is_empty(), "{:?}", o.unresolved());
    }

    #[test]
    fn if_let_else_branch_does_not_see_the_binding() {
        let o = resolve_last("(ns a)\n(def x 1)\n(defn f [] (if-let [x (seq [])] x x))");
        assert_eq!(o.values(), set(&["a/x"]));
        assert_eq!(o.r.refs.iter().filter(|v| v.fqn == "a/x").count(), 1);
    }

    #[test]
    fn other_binding_macros() {
        let o = resolve_last(
            "(ns o (:require [clojure.java.io :as io]))
(defn f [xs path]
  (when-let [a (first xs)] a)
  (when-some [b (first xs)] b)
  (if-some [c (first xs)] c nil)
  (when-first [d xs] d)
  (with-open [r (io/reader path)] (slurp r))
  (with-local-vars [v 1] (var-get v))
  (dotimes [i 3] (println i))
  (as-> xs t (map inc t) (vec t)))",
        );
        assert!(o.unresolved().is_empty(), "{:?}", o.unresolved());
        for core in ["when-let", "when-some", "if-some", "when-first", "with-open", "slurp"] {
            assert!(o.refs().contains(format!("clojure.core/{core}").as_str()), "{core}");
        }
        assert!(o.refs().contains("clojure.core/as->"));
        // clojure.java.io is neither required nor known.
        let o = resolve_last("(defn f [p] (clojure.java.io/reader p))");
        assert_eq!(o.unresolved(), set(&["clojure.java.io/reader"]));
    }

    #[test]
    fn for_and_doseq_with_modifiers() {
        let o = resolve_last(
            "(defn f [xss]
  (for [xs xss :let [n (count xs) m (inc n)] :when (pos? m) x xs :while (< x n)] [x m])
  (doseq [[k v] {} :let [kv (str k v)]] (println kv)))",
        );
        assert!(o.unresolved().is_empty(), "{:?}", o.unresolved());
        assert!(o.calls().contains("clojure.core/pos?"));
        assert!(o.calls().contains("clojure.core/str"));
    }

    #[test]
    fn letfn_names_are_visible_everywhere() {
        let o = resolve_last(
            "(defn f [n]
  (letfn [(ev? [n] (if (zero? n) true (od? (dec n))))
          (od? [n] (if (zero? n) false (ev? (dec n))))]
    (ev? n)))",
        );
        assert!(o.unresolved().is_empty(), "{:?}", o.unresolved());
        assert_eq!(
            o.refs(),
            set(&[
                "clojure.core/defn",
                "clojure.core/letfn",
                "clojure.core/zero?",
                "clojure.core/dec"
            ])
        );
    }

    #[test]
    fn fn_params_names_arities_and_conditions() {
        let o = resolve_last(
            "(def f (fn self
  ([] (self 1))
  ([x & {:keys [y]}]
   {:pre [(pos? x)] :post [(number? %)]}
   (+ x y))))",
        );
        assert!(o.unresolved().is_empty(), "{:?}", o.unresolved());
        assert_eq!(
            o.refs(),
            set(&[
                "clojure.core/fn",
                "clojure.core/pos?",
                "clojure.core/number?",
                "clojure.core/+"
            ])
        );
        let o = resolve_last("(def g (fn* [a] (inc a)))");
        assert_eq!(o.refs(), set(&["clojure.core/inc"]));
        assert!(o.unresolved().is_empty());
    }

    #[test]
    fn defmacro_has_form_and_env_locals() {
        let o = resolve_last(
            "(defmacro m \"doc\" [x & body] (when (:ns &env) (meta &form)) `(do ~x ~@body))",
        );
        assert!(o.unresolved().is_empty(), "{:?}", o.unresolved());
        assert_eq!(
            o.calls(),
            set(&["clojure.core/defmacro", "clojure.core/when", "clojure.core/meta"])
        );
    }

    #[test]
    fn defmethod_params_and_dispatch_value() {
        let o = resolve_last(
            "(ns shapes)
(defmulti area :shape)
(defmethod area ::circle area-of-circle [{:keys [r]}] (* Math/PI r r (area-of-circle {})))",
        );
        assert_eq!(o.values(), set(&["shapes/area"]));
        assert_eq!(o.calls(), set(&["clojure.core/defmethod", "clojure.core/*"]));
        assert_eq!(o.classes(), set(&["java.lang.Math"]));
        assert!(o.unresolved().is_empty(), "{:?}", o.unresolved());
    }

    #[test]
    fn catch_binds_the_exception_and_names_a_class() {
        let o = resolve_last(
            "(ns t (:import (java.io IOException)))
(defn f [] (try (slurp \"x\") (catch IOException e (.getMessage e)) (catch Exception e e) (finally (flush))))",
        );
        assert!(o.unresolved().is_empty(), "{:?}", o.unresolved());
        assert_eq!(o.classes(), set(&["java.io.IOException", "java.lang.Exception"]));
        assert_eq!(
            o.refs(),
            set(&["clojure.core/defn", "clojure.core/slurp", "clojure.core/flush"])
        );
    }

    #[test]
    fn binding_left_hand_sides_are_var_references() {
        let o = resolve_last(
            "(ns b)
(def ^:dynamic *depth* 0)
(defn f [w] (binding [*out* w *depth* (inc *depth*)] (println *depth*)))",
        );
        assert_eq!(o.values(), set(&["clojure.core/*out*", "b/*depth*"]));
        assert_eq!(o.r.refs.iter().filter(|v| v.fqn == "b/*depth*").count(), 3);
        assert!(o.unresolved().is_empty());
    }

    #[test]
    fn case_test_constants_are_not_references() {
        let o = resolve_last("(defn f [x] (case x (a b) 1 c 2 :k (inc 3) \"s\" x (str x)))");
        assert_eq!(
            o.refs(),
            set(&[
                "clojure.core/defn",
                "clojure.core/case",
                "clojure.core/inc",
                "clojure.core/str"
            ])
        );
        assert!(o.unresolved().is_empty(), "{:?}", o.unresolved());
    }

    #[test]
    fn quoted_forms_have_no_references() {
        let o = resolve_last(
            "(ns q (:require [clojure.string :as str]))
(def x ['(foo bar/baz str/join) (quote (nope)) 'map])",
        );
        assert!(o.refs().is_empty(), "{:?}", o.refs());
        assert!(o.unresolved().is_empty());
        assert!(o.r.rewrites.is_empty(), "a quoted symbol is data; its alias stays");
    }

    #[test]
    fn syntax_quote_resolves_template_symbols_except_gensyms_and_unquotes() {
        let o = resolve_last(
            "(ns mac (:require [clojure.string :as str]))
(defn helper [x] x)
(defmacro m [x & body]
  `(let [y# ~(inc x)] (helper y# ~@body) (str/join y#) (if y# 'quoted-helper &)))",
        );
        assert_eq!(o.values(), set(&["clojure.core/let", "mac/helper", "clojure.string/join"]));
        assert_eq!(o.calls(), set(&["clojure.core/defmacro", "clojure.core/inc"]));
        // The reader would write `mac/quoted-helper`, which names nothing: in a template that
        // is a method, field or binding name of the generated code, not reported.
        assert!(o.unresolved().is_empty(), "{:?}", o.unresolved());
        assert!(o.canonical.contains("(clojure.string/join y#)"));
        // A template symbol named like a local is still resolved as the reader does.
        let o = resolve_last("(defmacro m [inc] `(inc ~inc))");
        assert_eq!(o.values(), set(&["clojure.core/inc"]));
    }

    #[test]
    fn interop_forms_are_classes_not_vars() {
        let o = resolve_last(
            "(ns i (:import java.util.Date [java.io File]))
(defn f [^String s]
  (.toUpperCase s) (.-x s) (Date.) (java.util.UUID/randomUUID) (Math/abs -1)
  (File. \"x\") (System/getProperty \"a\") (. s trim) (.. s trim length)
  (new StringBuilder) (instance? java.util.Map s) (js/alert s) BigDecimal/ONE [Date File])",
        );
        assert_eq!(
            o.refs(),
            set(&["clojure.core/defn", "clojure.core/..", "clojure.core/instance?"])
        );
        assert!(o.unresolved().is_empty(), "{:?}", o.unresolved());
        assert_eq!(
            o.classes(),
            set(&[
                "java.util.Date",
                "java.util.UUID",
                "java.lang.Math",
                "java.io.File",
                "java.lang.System",
                "java.lang.StringBuilder",
                "java.util.Map",
                "java.math.BigDecimal",
            ])
        );
    }

    #[test]
    fn clojurescript_interop_npm_aliases_and_this_as() {
        let o = resolve_last_in(
            "(ns app.ui (:require [\"react\" :as react] [\"@mui/material\" :as mui]
                              [goog.string :as gstr]))
(defn f [] (this-as self (.log js/console self)) (react/createElement \"div\") (mui/Button)
  (gstr/format \"%s\" @(atom 1)) #js {:a (inc 1)})",
            &[],
            "cljs.core",
        );
        assert_eq!(
            o.calls(),
            set(&[
                "cljs.core/defn",
                "react/createElement",
                "@mui/material/Button",
                "goog.string/format",
                "cljs.core/deref",
                "cljs.core/atom",
                "cljs.core/inc",
            ])
        );
        // this-as is not in the clojure.core publics; it still binds `self`.
        assert_eq!(o.unresolved(), set(&["this-as"]));
        assert_eq!(
            o.canonical,
            "(defn f [] (this-as self (.log js/console self)) (react/createElement \"div\") \
             (mui/Button)\n  (goog.string/format \"%s\" @(atom 1)) #js {:a (inc 1)})"
        );
    }

    #[test]
    fn reader_conditionals_contribute_every_branch() {
        let o = resolve_last(
            "(ns rc)
(defn clj-only [] 1) (defn cljs-only [] 1) (defn a [] 1) (defn b [] 1)
(defn f [] #?(:clj (clj-only) :cljs (cljs-only)) [#?@(:clj [(a)] :cljs [(b)])]
  (let [#?@(:clj [x (a)] :cljs [x (b)])] x))",
        );
        assert_eq!(
            o.calls(),
            set(&[
                "clojure.core/defn",
                "clojure.core/let",
                "rc/clj-only",
                "rc/cljs-only",
                "rc/a",
                "rc/b"
            ])
        );
        assert!(o.unresolved().is_empty(), "{:?}", o.unresolved());
    }

    #[test]
    fn deftype_fields_are_locals_and_method_names_are_not_refs() {
        let o = resolve_last(
            "(ns geo)
(defprotocol Shape (area [s]) (describe [s] \"Describe it.\"))
(defrecord Point [x y]
  Shape
  (area [_] (* x y))
  (describe [this] (str (area this) x))
  Object
  (toString [_] (pr-str (->Point x y))))",
        );
        assert_eq!(
            o.refs(),
            set(&[
                "clojure.core/defrecord",
                "geo/Shape",
                "clojure.core/*",
                "clojure.core/str",
                "geo/area",
                "clojure.core/pr-str",
                "geo/->Point",
            ])
        );
        assert_eq!(o.classes(), set(&["java.lang.Object"]));
        assert!(o.unresolved().is_empty(), "{:?}", o.unresolved());
        // defprotocol signatures contain no references.
        let o = resolve_last("(defprotocol P (m [this x] \"doc\") (n [this]))");
        assert_eq!(o.refs(), set(&["clojure.core/defprotocol"]));
        assert!(o.unresolved().is_empty());
    }

    #[test]
    fn reify_proxy_extend_forms() {
        let o = resolve_last(
            "(ns e)
(defprotocol P (m [this x]))
(defn g [] [(reify P (m [this x] (inc x)) Runnable (run [_] (flush)))
   (proxy [Object] [] (toString [] (str this)))
   (extend-protocol P String (m [s x] (count s)) nil (m [_ x] x))
   (extend-type Long P (m [n x] (+ n x)))])",
        );
        assert!(o.unresolved().is_empty(), "{:?}", o.unresolved());
        assert_eq!(
            o.refs(),
            set(&[
                "clojure.core/defn",
                "clojure.core/reify",
                "clojure.core/proxy",
                "clojure.core/extend-protocol",
                "clojure.core/extend-type",
                "e/P",
                "clojure.core/inc",
                "clojure.core/flush",
                "clojure.core/str",
                "clojure.core/count",
                "clojure.core/+",
            ])
        );
        assert_eq!(
            o.classes(),
            set(&["java.lang.Runnable", "java.lang.Object", "java.lang.String", "java.lang.Long"])
        );
    }

    #[test]
    fn reader_conditionals_in_names_parameters_arities_and_types() {
        let o = resolve_last(
            "(ns rc2)
(defprotocol P (m [x]))
(defn #?(:clj f :cljs ^boolean f) #?(:clj ([x] (inc x)) :cljs ([x] (dec x))))
(defn g #?(:clj [a ^long n] :cljs [a n]) (+ a n))
(extend-protocol P #?(:clj String :cljs string) (m [s] (count s)) #?(:cljs default) (m [_] nil))",
        );
        assert_eq!(o.refs(), set(&["clojure.core/extend-protocol", "rc2/P", "clojure.core/count"]));
        assert_eq!(o.classes(), set(&["java.lang.String"]));
        assert!(o.unresolved().is_empty(), "{:?}", o.unresolved());
        let o = resolve_last(
            "(defn #?(:clj f :cljs ^boolean f) #?(:clj ([x] (inc x)) :cljs ([x] (dec x))))",
        );
        // Each branch resolves for its platform: the :cljs arity calls cljs.core.
        assert_eq!(o.refs(), set(&["clojure.core/defn", "clojure.core/inc", "cljs.core/dec"]));
        assert!(o.unresolved().is_empty(), "{:?}", o.unresolved());
        let o = resolve_last("(defn g #?(:clj [a ^long n] :cljs [a n]) (+ a n))");
        assert_eq!(o.refs(), set(&["clojure.core/defn", "clojure.core/+"]));
        assert!(o.unresolved().is_empty(), "{:?}", o.unresolved());
    }

    #[test]
    fn binding_look_alikes_and_deftype_look_alikes() {
        let o = resolve_last(
            "(ns la (:require [promesa.core :as p] [clojure.core.async :refer [go-loop <!]]))
(defn f [ch] (p/let [x (p/resolved 1) {:keys [y]} (g x)] (+ x y))
  (go-loop [acc []] (recur (conj acc (<! ch)))))",
        );
        assert_eq!(o.unresolved(), set(&["g"]));
        assert!(o.calls().contains("promesa.core/let"));
        assert!(o.calls().contains("clojure.core.async/go-loop"));
        let o = resolve_last(
            "(ns dc (:require [clojure.core.cache :refer [defcache CacheProtocol]]))
(defcache BasicCache [cache]
  CacheProtocol
  (lookup [_ item] (get cache item))
  (has? [_ item] (contains? cache item)))",
        );
        assert!(o.unresolved().is_empty(), "{:?}", o.unresolved());
        assert_eq!(
            o.refs(),
            set(&[
                "clojure.core.cache/defcache",
                "clojure.core.cache/CacheProtocol",
                "clojure.core/get",
                "clojure.core/contains?",
            ])
        );
    }

    #[test]
    fn dot_forms_in_templates_and_evaluated_metadata() {
        let o = resolve_last(
            "(defmacro with-b [m & body]
  `(do (. clojure.lang.Var (pushThreadBindings ~m)) (try ~@body (finally (. clojure.lang.Var (popThreadBindings))))))",
        );
        assert_eq!(o.refs(), set(&["clojure.core/defmacro"]));
        assert_eq!(o.classes(), set(&["clojure.lang.Var"]));
        assert!(o.unresolved().is_empty());
        let o = resolve_last(
            "(ns mt)
(defn check [] 1)
(def ^{:test (fn [] (check)) :tag String} x 1)",
        );
        assert_eq!(o.refs(), set(&["clojure.core/fn", "mt/check"]));
        assert!(o.classes().is_empty(), "a :tag is a type hint, not a use");
    }

    #[test]
    fn own_record_constructor_is_a_class_of_the_namespace() {
        let o = resolve_last(
            "(ns my-geo.core)
(defrecord Point [x y])
(defn origin [] (Point. 0 0) (->Point 0 0))",
        );
        assert_eq!(o.classes(), set(&["my_geo.core.Point"]));
        assert_eq!(o.refs(), set(&["clojure.core/defn", "my-geo.core/->Point"]));
    }

    #[test]
    fn anonymous_fn_params_are_locals() {
        let o = resolve_last("(def f #(apply + % %1 %2 %&))");
        assert_eq!(o.refs(), set(&["clojure.core/apply", "clojure.core/+"]));
        assert_eq!(o.values(), set(&["clojure.core/+"]));
        assert!(o.unresolved().is_empty());
        let o = resolve_last("(def g (fn [] %))");
        assert_eq!(o.unresolved(), set(&["%"]));
    }

    #[test]
    fn threading_steps_are_calls_and_deref_is_core_deref() {
        let o = resolve_last("(defn f [a] (-> @a inc (max 3) str))");
        assert_eq!(
            o.calls(),
            set(&[
                "clojure.core/defn",
                "clojure.core/->",
                "clojure.core/deref",
                "clojure.core/inc",
                "clojure.core/max",
                "clojure.core/str",
            ])
        );
        assert!(o.values().is_empty());
    }

    #[test]
    fn comment_blocks_rewrite_but_do_not_refer() {
        let o = resolve_last(
            "(ns c (:require [clojure.string :as str]))
(comment (str/join [1]) (undefined-thing))",
        );
        assert_eq!(o.refs(), set(&["clojure.core/comment"]));
        assert!(o.unresolved().is_empty());
        assert_eq!(o.canonical, "(comment (clojure.string/join [1]) (undefined-thing))");
    }

    #[test]
    fn top_level_require_is_folded_into_the_declaration() {
        let o = resolve_last(
            "(ns t)
(require '[clojure.set :as set])
(defn f [a b] (set/union a b) (clojure.set/difference a b) (other.ns/x))",
        );
        assert_eq!(
            o.calls(),
            set(&["clojure.core/defn", "clojure.set/union", "clojure.set/difference"])
        );
        assert_eq!(o.unresolved(), set(&["other.ns/x"]));
        assert_eq!(
            o.canonical,
            "(defn f [a b] (clojure.set/union a b) (clojure.set/difference a b) (other.ns/x))"
        );
    }

    #[test]
    fn def_like_macros_at_top_level_do_not_refer_to_their_name() {
        let o = resolve_last(
            "(ns t (:require [clojure.test :refer [deftest is are]]))
(deftest adds (is (= 2 (+ 1 1))) (are [x y] (= x (inc y)) 2 1))",
        );
        assert_eq!(
            o.calls(),
            set(&[
                "clojure.test/deftest",
                "clojure.test/is",
                "clojure.test/are",
                "clojure.core/=",
                "clojure.core/+",
                "clojure.core/inc",
            ])
        );
        assert!(o.unresolved().is_empty(), "{:?}", o.unresolved());
    }

    #[test]
    fn positions_count_characters() {
        let o = resolve_last("(def s \"ü\") (def t [\"üü\" (inc 1) \"ä\" (dec 2)\n  (ü/x)])");
        let pos: Vec<Pos> = o.r.refs.iter().map(|r| r.pos).collect();
        assert_eq!(pos, vec![Pos { line: 1, col: 27 }, Pos { line: 1, col: 39 }]);
        assert_eq!(o.r.unresolved[0].pos, Pos { line: 2, col: 4 });
    }

    #[test]
    fn odd_input_does_not_panic() {
        for src in [
            "()",
            "(let)",
            "(let [x])",
            "(let [1 2 :a 3 \"s\" 4] x)",
            "(let x y)",
            "(fn)",
            "(fn [])",
            "(fn name)",
            "(defn)",
            "(defn f)",
            "(defn f \"doc\")",
            "(letfn [(f)] (f))",
            "(letfn)",
            "(for [x] x)",
            "(for [:let] 1)",
            "(doseq [:when])",
            "(case)",
            "(case x)",
            "(catch)",
            "(try (catch))",
            "(binding)",
            "(defmethod)",
            "(defmethod m)",
            "(deftype)",
            "(defrecord R)",
            "(reify)",
            "(proxy)",
            "(extend-protocol)",
            "(areduce a)",
            "(amap)",
            "(. x)",
            "(..)",
            "(->)",
            "(cond-> x a)",
            "(as->)",
            "(let [{:keys} m {:or} n [& :as] o] 1)",
            "(let [{:keys [1 \"s\"] :or 5 :as 7} m] 1)",
            "#()",
            "`()",
            "`(~)",
            "#?()",
            "#?@()",
            "(#?(:clj f :cljs g) 1)",
            "^:meta ()",
            "(::foo/bar m)",
            "(a/)",
        ] {
            let _ = resolve_last(src);
        }
    }
}
