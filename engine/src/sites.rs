//! The call sites of a top-level form, as the diagnostics check them: each call of a var with
//! the number of arguments it passes, the call around it and whether it runs when the namespace
//! loads.
//!
//! They are found here, where the form is parsed and resolved, and stored (the form's `sites`
//! column, [`stored`]), so that diagnostics are queries: an agent's edit asks for the
//! diagnostics of the namespaces it touches before and after, and parsing and resolving those
//! files again for each was most of the edit's time.
//!
//! Purely syntactic plus the form's own resolution; nothing here reads the store or knows what
//! the called vars are (arities, macros and purity are looked up when the sites are checked).

use std::collections::{BTreeMap, HashMap};

use tree_sitter::Node;

use crate::analyze::Kind;
use crate::resolve::{RefKind, VarRef};
use crate::syntax::{self, Pos};
use crate::syntax::{KindOf, NodeKind};

/// One call of a var in a form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Site {
    /// Where the called symbol is written (the symbol itself, after any metadata).
    pub pos: Pos,
    /// The var called.
    pub to: String,
    /// How many arguments the call passes, threaded ones included; -1 when that cannot be told
    /// from the text (a `~@` or `#?@` splice, a syntax-quote template, not a call of a list).
    pub argc: i64,
    /// The var called by the list around this call (whose argument this call is), or empty.
    /// An argument of a macro is whatever the macro makes of it, so a checker skips the site
    /// when this is a macro.
    pub outer: String,
    /// Whether the call runs when the namespace loads: it is in the init of a `def` or
    /// `defonce`, outside any `fn`, `delay`, `lazy-seq`, ….
    pub load: bool,
    /// The called symbol as written, metadata included.
    pub head: String,
}

/// A form's call sites as its `form` row keeps them (the `sites` column): one JSON array of
/// `[line, col, to, argc, outer, load, head]` per site. The line counts from the form's first
/// line `first` (a form moved by whole lines keeps its column as it was); `to` and `outer` are
/// indices into the form's `callees` where they are among them (`outer` -1: none); `head` is
/// empty where it is the name of `to` (`str/join` is kept, `join` is not); `load` is 0 or 1.
/// One column of the form's own row, not a row per site: checks read the sites of whole
/// forms, and a row per site cost the store about 130 bytes each (a sixth of it at 1 M lines).
pub fn stored(sites: &[Site], first: u32, callees: &[&str]) -> String {
    if sites.is_empty() {
        return String::new();
    }
    let var = |fqn: &str| match callees.iter().position(|c| *c == fqn) {
        Some(i) => StoredVar::At(i as i64),
        None => StoredVar::Named(fqn.to_string()),
    };
    let rows: Vec<StoredSite> = sites
        .iter()
        .map(|s| {
            (
                i64::from(s.pos.line) - i64::from(first),
                s.pos.col,
                var(&s.to),
                s.argc,
                if s.outer.is_empty() { StoredVar::At(-1) } else { var(&s.outer) },
                u8::from(s.load),
                if s.head == name_of(&s.to) { String::new() } else { s.head.clone() },
            )
        })
        .collect();
    serde_json::to_string(&rows).unwrap_or_default()
}

/// The call sites [`stored`] kept for a form whose first line is now `first` and whose
/// callees are `callees`. A column that is not such an array (no store writes one) reads as no
/// sites.
pub fn from_stored(column: &str, first: u32, callees: &[impl AsRef<str>]) -> Vec<Site> {
    if column.is_empty() {
        return Vec::new();
    }
    let rows: Vec<StoredSite> = serde_json::from_str(column).unwrap_or_default();
    let var = |v: StoredVar| match v {
        StoredVar::At(i) => usize::try_from(i)
            .ok()
            .and_then(|i| callees.get(i))
            .map_or_else(String::new, |c| c.as_ref().to_string()),
        StoredVar::Named(fqn) => fqn,
    };
    rows.into_iter()
        .map(|(line, col, to, argc, outer, load, head)| {
            let to = var(to);
            let head = if head.is_empty() { name_of(&to).to_string() } else { head };
            Site {
                pos: Pos { line: (line + i64::from(first)).max(0) as u32, col },
                to,
                argc,
                outer: var(outer),
                load: load != 0,
                head,
            }
        })
        .collect()
}

/// The name of a var (`join` of `clojure.string/join`; `/` of `clojure.core//`).
fn name_of(fqn: &str) -> &str {
    match fqn.split_once('/') {
        Some((_, name)) if !name.is_empty() => name,
        _ => fqn,
    }
}

/// A var of a stored site: its index among the form's callees, or its name.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(untagged)]
enum StoredVar {
    At(i64),
    Named(String),
}

/// One site as stored: relative line, col, to, argc, outer, load (0/1), head.
type StoredSite = (i64, u32, StoredVar, i64, StoredVar, u8, String);

/// Threading macros: the first step (index into the list) and the stride between steps.
fn threading(fqn: &str) -> Option<(usize, usize)> {
    match fqn {
        "clojure.core/->"
        | "clojure.core/->>"
        | "clojure.core/some->"
        | "clojure.core/some->>"
        | "clojure.core/doto"
        | "cljs.core/->"
        | "cljs.core/->>"
        | "cljs.core/some->"
        | "cljs.core/some->>"
        | "cljs.core/doto" => Some((2, 1)),
        "clojure.core/cond->"
        | "clojure.core/cond->>"
        | "cljs.core/cond->"
        | "cljs.core/cond->>" => Some((3, 2)),
        _ => None,
    }
}

/// The call sites of the top-level form `root` of kind `kind` in `src`, given the references
/// its resolution found (only calls count), ordered by place.
pub fn sites(root: Node, src: &str, kind: Kind, refs: &[VarRef]) -> Vec<Site> {
    let calls: HashMap<Pos, &str> =
        refs.iter().filter(|r| r.kind == RefKind::Call).map(|r| (r.pos, r.fqn.as_str())).collect();
    if calls.is_empty() {
        return Vec::new();
    }
    let called = |sym: Node| -> Option<(Pos, &str)> {
        if sym.node_kind() != NodeKind::Sym {
            return None;
        }
        let p = symbol_pos(sym, src);
        calls.get(&p).map(|f| (p, *f))
    };
    let mut out: BTreeMap<Pos, Site> = BTreeMap::new();
    let site = |pos: Pos, to: &str, argc: i64, outer: &str, head: Node| Site {
        pos,
        to: to.to_string(),
        argc,
        outer: outer.to_string(),
        load: false,
        head: syntax::text(head, src).to_string(),
    };
    // Extra (threaded) arguments of the lists that are steps of `->`, `->>`, `doto`, ….
    let mut extra: HashMap<usize, i64> = HashMap::new();
    let lists = lists_in(root);
    // The var each list's head calls, by the list's place in `lists`: a list's `outer` is its
    // parent's, and parents come first.
    let mut head_calls: Vec<Option<&str>> = Vec::with_capacity(lists.len());
    for l in &lists {
        let vals = syntax::values(l.node);
        let head = vals.first().copied();
        let call = head.and_then(called);
        head_calls.push(call.map(|(_, f)| f));
        let (Some(head), Some((at, fqn))) = (head, call) else { continue };
        if l.quoted {
            // A template: its argument count is not the call's.
            out.insert(at, site(at, fqn, -1, "", head));
            continue;
        }
        let outer = l.parent_list.and_then(|p| head_calls[p]).unwrap_or("");
        if let Some((first, stride)) = threading(fqn) {
            for step in vals.iter().skip(first).step_by(stride) {
                match step.node_kind() {
                    NodeKind::List => {
                        extra.insert(step.start_byte(), 1);
                    }
                    // A bare symbol step is a call with the threaded value alone; it is
                    // skipped with the threading form it belongs to.
                    NodeKind::Sym => {
                        if let Some((p, f)) = called(*step) {
                            out.insert(p, site(p, f, 1, outer, *step));
                        }
                    }
                    _ => {}
                }
            }
        }
        let spliced = vals.iter().any(|v| {
            matches!(v.node_kind(), NodeKind::SplicingReadCond | NodeKind::UnquoteSplicing)
        });
        let argc = if spliced {
            -1
        } else {
            (vals.len() - 1) as i64 + extra.get(&l.node.start_byte()).copied().unwrap_or(0)
        };
        out.insert(at, site(at, fqn, argc, outer, head));
    }
    // Calls the resolver found anywhere else: not checked for arity, but they may run at load.
    for r in refs.iter().filter(|r| r.kind == RefKind::Call) {
        out.entry(r.pos).or_insert_with(|| Site {
            pos: r.pos,
            to: r.fqn.clone(),
            argc: -1,
            outer: String::new(),
            load: false,
            head: String::new(),
        });
    }
    if matches!(kind, Kind::Def | Kind::Defonce) {
        for p in load_time(root, src) {
            if let Some(s) = out.get_mut(&p) {
                s.load = true;
            }
        }
    }
    out.into_values().collect()
}

/// Places of the symbols of a `def`'s init that are evaluated when the `def` is: all of them
/// but those under `fn`, `delay`, `lazy-seq`, `reify`, … (none if the init is a function).
fn load_time(root: Node, src: &str) -> Vec<Pos> {
    if root.node_kind() != NodeKind::List {
        return Vec::new();
    }
    let vals = syntax::values(root);
    if vals.len() < 3 {
        return Vec::new();
    }
    let init = vals[vals.len() - 1];
    if is_fn(init, src) {
        return Vec::new();
    }
    let mut deferred: Vec<(usize, usize)> = Vec::new();
    let mut syms = Vec::new();
    syntax::visit(init, &mut |n| {
        if is_fn(n, src) || deferring(n, src) {
            deferred.push((n.start_byte(), n.end_byte()));
        }
        if n.node_kind() == NodeKind::Sym {
            syms.push(n);
        }
    });
    syms.into_iter()
        .filter(|s| !deferred.iter().any(|(a, e)| *a <= s.start_byte() && s.start_byte() < *e))
        .map(|s| symbol_pos(s, src))
        .collect()
}

/// Where the resolver places a reference by symbol `sym`: the symbol itself, after any
/// metadata written on it (`^Type sym`).
fn symbol_pos(sym: Node, src: &str) -> Pos {
    pos(syntax::symbol_anchor(sym, src), src)
}

/// 1-based line and column (in characters) of a node's start, as the resolver places refs.
fn pos(node: Node, src: &str) -> Pos {
    let p = node.start_position();
    let b = node.start_byte();
    let line_start = b.saturating_sub(p.column);
    let col = src.get(line_start..b).map_or(p.column, |s| s.chars().count());
    Pos { line: p.row as u32 + 1, col: col as u32 + 1 }
}

fn is_fn(n: Node, src: &str) -> bool {
    n.node_kind() == NodeKind::AnonFn
        || matches!(syntax::list_head_name(n, src), Some("fn" | "fn*" | "bound-fn"))
}

fn deferring(n: Node, src: &str) -> bool {
    matches!(
        syntax::list_head_name(n, src),
        Some("delay" | "lazy-seq" | "reify" | "proxy" | "letfn" | "defn" | "defn-" | "memoize-fn")
    )
}

/// A list or `#(...)` of a form, as [`lists_in`] finds it.
struct ListAt<'t> {
    node: Node<'t>,
    /// Whether it lies inside a syntax-quote template.
    quoted: bool,
    /// The place in the found lists of the list directly around it, if the node directly
    /// around it is a list (not a vector, a map, metadata or `#(...)`).
    parent_list: Option<usize>,
}

/// Every list and `#(...)` under `root` (itself included), in document order, each before the
/// lists inside it, found in one walk of one cursor: a recursive walk made a cursor for every
/// node, and with a second read of each parent's values it was more than half of what finding
/// a form's sites cost (a fifth of a 1 M-line import's reading thread). The cursor also keeps
/// any depth off the stack.
fn lists_in(root: Node<'_>) -> Vec<ListAt<'_>> {
    let mut out = Vec::new();
    let mut cursor = root.walk();
    // For each node on the cursor's path above the current one: whether its children are in
    // a template, and its place in `out` if it is a list.
    let mut path: Vec<(bool, Option<usize>)> = Vec::new();
    loop {
        let node = cursor.node();
        let (quoted, parent_list) = path.last().copied().unwrap_or((false, None));
        let kind = node.node_kind();
        let at = matches!(kind, NodeKind::List | NodeKind::AnonFn).then(|| {
            out.push(ListAt { node, quoted, parent_list });
            out.len() - 1
        });
        if cursor.goto_first_child() {
            let in_template = quoted || kind == NodeKind::SynQuote;
            path.push((in_template, at.filter(|_| kind == NodeKind::List)));
            continue;
        }
        while !cursor.goto_next_sibling() {
            if !cursor.goto_parent() {
                return out;
            }
            path.pop();
        }
    }
}
