//! Reading a namespace declaration: `(ns ...)`, `(in-ns 'x)` and top-level
//! `require`/`use`/`import`/`refer-clojure` calls, into the tables resolution needs.
//!
//! Every shape the Clojure (and ClojureScript) `ns` macro accepts is read: keyword or symbol
//! directive heads, libspec vectors and lists, prefix lists, `:refer`/`:rename`/`:only`/
//! `:exclude`, `:as-alias`, string namespaces (npm modules in cljs), `:require-macros`,
//! `:import` of single classes and of package lists, and reader conditionals anywhere, of which
//! every branch is taken (a `.cljc` file's declaration lists the requires of all platforms).

use std::collections::{BTreeMap, BTreeSet};

use tree_sitter::Node;

use crate::syntax::{
    core_sym_name, flat_values, meta_value, metas, push_flat, string_value, sym_str, text, unquote,
    values,
};
use crate::syntax::{KindOf, NodeKind};

/// What a namespace declaration says about how symbols resolve in that namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NsDecl {
    /// The namespace name.
    pub name: String,
    /// The ns docstring, if any.
    pub doc: Option<String>,
    /// alias -> namespace, from `:as` and `:as-alias`.
    pub aliases: BTreeMap<String, String>,
    /// local symbol -> fully-qualified var, from `:refer [..]` (after `:rename`) and `:use ... :only`.
    pub refers: BTreeMap<String, String>,
    /// Namespaces referred wholesale: `:refer :all` and `:use` without `:only`.
    pub refer_all: Vec<String>,
    /// Every namespace required or used: the namespaces this one depends on.
    pub requires: Vec<String>,
    /// Namespaces whose macros only are required (cljs `:require-macros`, `:use-macros`, or
    /// this namespace's own name with `:include-macros`/`:refer-macros`): the compiler loads
    /// them, the program does not depend on them, so they make no cycle.
    #[serde(default)]
    pub macro_libs: Vec<String>,
    /// `:refer-clojure :exclude`.
    pub core_exclude: BTreeSet<String>,
    /// `:refer-clojure :only`, when given.
    pub core_only: Option<BTreeSet<String>>,
    /// `:refer-clojure :rename`: new local name -> core var name.
    pub core_rename: BTreeMap<String, String>,
    /// Short class name -> fully-qualified class name, from `:import`.
    pub imports: BTreeMap<String, String>,
}

/// Read an `(ns ...)` or `(in-ns 'x)` form. `None` if the form is neither.
pub fn parse_ns_form(node: Node, src: &str) -> Option<NsDecl> {
    if node.node_kind() != NodeKind::List {
        return None;
    }
    let items = flat_values(node);
    let head = *items.first()?;
    let head_name = core_sym_name(head, src)?;
    match head_name {
        "ns" => {
            let name_node = *items.get(1)?;
            if name_node.node_kind() != NodeKind::Sym {
                return None;
            }
            let mut decl = NsDecl { name: sym_str(name_node, src), ..NsDecl::default() };
            for m in metas(name_node) {
                if let Some(map) = meta_value(m).filter(|v| v.node_kind() == NodeKind::Map) {
                    read_doc_from_map(map, src, &mut decl.doc);
                }
            }
            for (i, item) in items.iter().enumerate().skip(2) {
                match item.node_kind() {
                    NodeKind::Str if i == 2 => decl.doc = Some(string_value(*item, src)),
                    NodeKind::Map => read_doc_from_map(*item, src, &mut decl.doc),
                    NodeKind::List => directive(&mut decl, *item, src),
                    _ => {}
                }
            }
            Some(decl)
        }
        "in-ns" => {
            let arg = unquote(*items.get(1)?, src);
            (arg.node_kind() == NodeKind::Sym)
                .then(|| NsDecl { name: sym_str(arg, src), ..NsDecl::default() })
        }
        _ => None,
    }
}

/// Fold a top-level `(require ...)`, `(use ...)`, `(import ...)` or `(refer-clojure ...)` call
/// into an existing declaration. Returns false if the form is none of those.
///
/// Also understood: `(require-macros ...)`, `(refer 'ns ...)` and `(alias 'x 'full.ns)`.
pub fn apply_top_level_directive(decl: &mut NsDecl, node: Node, src: &str) -> bool {
    if node.node_kind() != NodeKind::List {
        return false;
    }
    let items = flat_values(node);
    let Some(head) = items.first() else { return false };
    let Some(name) = core_sym_name(*head, src) else { return false };
    let args: Vec<Node> = items[1..].iter().map(|a| unquote(*a, src)).collect();
    match name {
        "require" => libspecs(decl, &args, src, Load::Require),
        "require-macros" => libspecs(decl, &args, src, Load::RequireMacros),
        "use" => libspecs(decl, &args, src, Load::Use),
        "use-macros" => libspecs(decl, &args, src, Load::UseMacros),
        "import" => imports(decl, &args, src),
        "refer-clojure" => refer_clojure(decl, &args, src),
        "refer" => refer(decl, &args, src),
        "alias" => {
            if let [a, ns, ..] = args.as_slice() {
                if a.node_kind() == NodeKind::Sym && ns.node_kind() == NodeKind::Sym {
                    decl.aliases.insert(sym_str(*a, src), sym_str(*ns, src));
                }
            }
        }
        _ => return false,
    }
    true
}

/// The keyword's name without namespace or colons, if the node is a keyword.
fn kwd_name<'s>(node: Node, src: &'s str) -> Option<&'s str> {
    if node.node_kind() != NodeKind::Kwd {
        return None;
    }
    crate::syntax::field(node, crate::syntax::fields().name).map(|n| text(n, src))
}

fn read_doc_from_map(map: Node, src: &str, doc: &mut Option<String>) {
    let vs = values(map);
    for pair in vs.chunks(2) {
        if let [k, v] = pair {
            if k.node_kind() == NodeKind::Kwd
                && text(*k, src) == ":doc"
                && v.node_kind() == NodeKind::Str
            {
                *doc = Some(string_value(*v, src));
            }
        }
    }
}

/// One `(:require ...)`-like clause of an ns form.
fn directive(decl: &mut NsDecl, node: Node, src: &str) {
    let items = flat_values(node);
    let Some(head) = items.first() else { return };
    let name = match head.node_kind() {
        NodeKind::Kwd => match kwd_name(*head, src) {
            Some(n) => n,
            None => return,
        },
        NodeKind::Sym => match core_sym_name(*head, src) {
            Some(n) => n,
            None => return,
        },
        _ => return,
    };
    let args: Vec<Node> = items[1..].iter().map(|a| unquote(*a, src)).collect();
    match name {
        "require" => libspecs(decl, &args, src, Load::Require),
        "require-macros" => libspecs(decl, &args, src, Load::RequireMacros),
        "use" => libspecs(decl, &args, src, Load::Use),
        "use-macros" => libspecs(decl, &args, src, Load::UseMacros),
        "import" => imports(decl, &args, src),
        "refer-clojure" => refer_clojure(decl, &args, src),
        "refer" => refer(decl, &args, src),
        // :gen-class, :load and anything unknown say nothing about resolution.
        _ => {}
    }
}

/// How a directive loads its libs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Load {
    Require,
    /// cljs `:require-macros`: the libs' macros, from the Clojure namespaces of those names.
    RequireMacros,
    /// `:use`: every public var referred unless `:only` says otherwise.
    Use,
    /// cljs `:use-macros`: `:use` of the libs' macros.
    UseMacros,
}

/// A lib name: a symbol or (cljs) a string.
fn lib_name(node: Node, src: &str) -> Option<String> {
    match node.node_kind() {
        NodeKind::Sym => Some(sym_str(node, src)),
        NodeKind::Str => Some(string_value(node, src)),
        _ => None,
    }
}

fn push_unique(list: &mut Vec<String>, s: &str) {
    if !list.iter().any(|x| x == s) {
        list.push(s.to_string());
    }
}

/// The arguments of `require`/`use`: lib names, libspecs, prefix lists and flags.
fn libspecs(decl: &mut NsDecl, args: &[Node], src: &str, load: Load) {
    for arg in args {
        libspec_arg(decl, *arg, src, None, load);
    }
}

fn join_prefix(prefix: Option<&str>, name: &str) -> String {
    match prefix {
        Some(p) => format!("{p}.{name}"),
        None => name.to_string(),
    }
}

fn libspec_arg(decl: &mut NsDecl, arg: Node, src: &str, prefix: Option<&str>, load: Load) {
    let mut specs = Vec::new();
    libspec_nodes(arg, src, prefix, &mut specs);
    for spec in specs {
        lib(decl, &spec.lib, &spec.opts, src, load);
    }
}

/// One lib of a `require`/`use` argument, as written.
pub struct LibspecNode<'t> {
    /// The lib's full name (prefix joined).
    pub lib: String,
    /// The libspec vector or list (`None` for a bare lib name).
    pub node: Option<Node<'t>>,
    /// Where the libspec is written: its vector or list, or the lib name.
    pub at: Node<'t>,
    /// The prefix, when the libspec sits in a prefix list.
    pub prefix: Option<String>,
    /// The options after the lib name, flattened through reader conditionals and unquoted.
    pub opts: Vec<Node<'t>>,
}

/// The libs of one `require`/`use` argument: a lib name (symbol, or a string in cljs), a
/// libspec `[lib :as a ..]` (one per branch of a reader-conditional lib name), or a prefix list
/// `(prefix lib [lib :as a])`. Flags such as `:reload` give none.
pub fn libspec_nodes<'t>(
    arg: Node<'t>,
    src: &str,
    prefix: Option<&str>,
    out: &mut Vec<LibspecNode<'t>>,
) {
    let arg = unquote(arg, src);
    match arg.node_kind() {
        NodeKind::Sym | NodeKind::Str => {
            if let Some(name) = lib_name(arg, src) {
                out.push(LibspecNode {
                    lib: join_prefix(prefix, &name),
                    node: None,
                    at: arg,
                    prefix: prefix.map(str::to_string),
                    opts: Vec::new(),
                });
            }
        }
        NodeKind::Vec | NodeKind::List => {
            let raw = values(arg);
            let Some(head) = raw.first() else { return };
            // `[#?(:clj clojure.core :cljs cljs.core) :as core]`: one libspec per branch.
            let mut names = Vec::new();
            push_flat(*head, &mut names);
            let mut rest = Vec::new();
            for v in &raw[1..] {
                push_flat(*v, &mut rest);
            }
            let rest: Vec<Node> = rest.into_iter().map(|n| unquote(n, src)).collect();
            for name in names {
                let Some(first) = lib_name(unquote(name, src), src) else { continue };
                let full = join_prefix(prefix, &first);
                let is_spec = rest.first().is_none_or(|n| n.node_kind() == NodeKind::Kwd);
                if is_spec {
                    out.push(LibspecNode {
                        lib: full,
                        node: Some(arg),
                        at: arg,
                        prefix: prefix.map(str::to_string),
                        opts: rest.clone(),
                    });
                } else {
                    for item in &rest {
                        libspec_nodes(*item, src, Some(&full), out);
                    }
                }
            }
        }
        // Flags such as :reload, :reload-all, :verbose.
        _ => {}
    }
}

/// The symbol names in a vector/list/set of symbols (through reader conditionals and quotes).
fn sym_names(node: Node, src: &str) -> Vec<String> {
    let node = unquote(node, src);
    let mut out = Vec::new();
    if matches!(node.node_kind(), NodeKind::Vec | NodeKind::List | NodeKind::Set) {
        for v in flat_values(node) {
            let v = unquote(v, src);
            if v.node_kind() == NodeKind::Sym {
                out.push(sym_str(v, src));
            }
        }
    }
    out
}

/// The symbol pairs of a map of symbols (`:rename {a b}`).
fn sym_pairs(node: Node, src: &str) -> Vec<(String, String)> {
    let node = unquote(node, src);
    let mut out = Vec::new();
    if node.node_kind() == NodeKind::Map {
        let vs: Vec<Node> = flat_values(node).into_iter().map(|n| unquote(n, src)).collect();
        for pair in vs.chunks(2) {
            if let [k, v] = pair {
                if k.node_kind() == NodeKind::Sym && v.node_kind() == NodeKind::Sym {
                    out.push((sym_str(*k, src), sym_str(*v, src)));
                }
            }
        }
    }
    out
}

/// One lib with its options: `[lib :as a :refer [..] :rename {..}]`, or `(use '[lib :only ..])`.
fn lib(decl: &mut NsDecl, name: &str, opts: &[Node], src: &str, load: Load) {
    let mut has_as = false;
    let mut has_as_alias = false;
    let mut refer_all = matches!(load, Load::Use | Load::UseMacros);
    let macros_only = matches!(load, Load::RequireMacros | Load::UseMacros);
    let mut macros = macros_only;
    let mut refers: Vec<String> = Vec::new();
    let mut renames: Vec<(String, String)> = Vec::new();
    let mut i = 0;
    while i < opts.len() {
        let Some(key) = kwd_name(opts[i], src) else {
            i += 1;
            continue;
        };
        let Some(val) = opts.get(i + 1).map(|v| unquote(*v, src)) else { break };
        match key {
            "as" | "as-alias" => {
                if val.node_kind() == NodeKind::Sym {
                    // With reader conditionals an alias can be bound once per platform; the
                    // first (usually :clj) binding wins.
                    decl.aliases.entry(sym_str(val, src)).or_insert_with(|| name.to_string());
                }
                if key == "as" {
                    has_as = true;
                } else {
                    has_as_alias = true;
                }
            }
            "refer" | "refer-macros" | "only" => {
                macros |= key == "refer-macros";
                if kwd_name(val, src) == Some("all") {
                    refer_all = true;
                } else {
                    // `:only` limits a `use` to the listed vars.
                    if key == "only" {
                        refer_all = false;
                    }
                    refers.extend(sym_names(val, src));
                }
            }
            "rename" => renames.extend(sym_pairs(val, src)),
            "include-macros" => macros |= kwd_name(val, src) != Some("false"),
            // :exclude (use), :include-macros, :default, :reload and so on.
            _ => {}
        }
        i += 2;
    }
    // `[a :as-alias b]` alone does not load the namespace.
    let loads = !has_as_alias || has_as || refer_all || !refers.is_empty() || !renames.is_empty();
    // ClojureScript's `:require-macros`/`:use-macros` load a Clojure namespace into the
    // compiler, not the namespace into the program: no dependency edge, no cycle. Nor is a
    // namespace requiring its own name for macros (`:include-macros`, `:refer-macros`; the
    // usual idiom) a dependency on itself.
    let own_macros = macros && name == decl.name;
    if loads && (macros_only || own_macros) {
        push_unique(&mut decl.macro_libs, name);
    } else if loads {
        push_unique(&mut decl.requires, name);
    }
    if refer_all {
        push_unique(&mut decl.refer_all, name);
    }
    for r in &refers {
        decl.refers.entry(r.clone()).or_insert_with(|| format!("{name}/{r}"));
    }
    for (old, new) in renames {
        if refers.contains(&old) {
            decl.refers.remove(&old);
        }
        decl.refers.insert(new, format!("{name}/{old}"));
    }
}

/// `(:import java.util.Date [java.io File Reader] (java.net URI))`.
fn imports(decl: &mut NsDecl, args: &[Node], src: &str) {
    for arg in args {
        let arg = unquote(*arg, src);
        match arg.node_kind() {
            NodeKind::Sym => {
                let full = sym_str(arg, src);
                if let Some((_, short)) = full.rsplit_once('.') {
                    decl.imports.insert(short.to_string(), full.clone());
                }
            }
            NodeKind::Vec | NodeKind::List => {
                let items: Vec<Node> =
                    flat_values(arg).into_iter().map(|n| unquote(n, src)).collect();
                let Some(pkg) = items.first().filter(|p| p.node_kind() == NodeKind::Sym) else {
                    continue;
                };
                let pkg = sym_str(*pkg, src);
                for class in &items[1..] {
                    if class.node_kind() == NodeKind::Sym {
                        let short = sym_str(*class, src);
                        decl.imports.insert(short.clone(), format!("{pkg}.{short}"));
                    }
                }
            }
            _ => {}
        }
    }
}

/// `(:refer-clojure :exclude [..] :only [..] :rename {..})`.
fn refer_clojure(decl: &mut NsDecl, args: &[Node], src: &str) {
    let mut i = 0;
    while i + 1 < args.len() {
        let val = args[i + 1];
        match kwd_name(args[i], src) {
            Some("exclude") => decl.core_exclude.extend(sym_names(val, src)),
            Some("only") => {
                decl.core_only.get_or_insert_with(BTreeSet::new).extend(sym_names(val, src))
            }
            Some("rename") => {
                for (old, new) in sym_pairs(val, src) {
                    decl.core_rename.insert(new, old);
                }
            }
            Some(_) => {}
            None => {
                i += 1;
                continue;
            }
        }
        i += 2;
    }
}

/// `(refer 'ns :only [..] :exclude [..] :rename {..})`: like `use` without loading.
fn refer(decl: &mut NsDecl, args: &[Node], src: &str) {
    let Some(ns) = args.first().filter(|a| a.node_kind() == NodeKind::Sym) else { return };
    let ns = sym_str(*ns, src);
    if ns == "clojure.core" || ns == "cljs.core" {
        refer_clojure(decl, &args[1..], src);
        return;
    }
    let before = decl.requires.clone();
    lib(decl, &ns, &args[1..], src, Load::Use);
    decl.requires = before;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::syntax::{parse, top_level_forms};

    fn ns_of(src: &str) -> NsDecl {
        let tree = parse(src);
        let forms = top_level_forms(&tree);
        let mut decl = parse_ns_form(forms[0], src).expect("an ns form");
        for f in &forms[1..] {
            apply_top_level_directive(&mut decl, *f, src);
        }
        decl
    }

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
    }

    fn strs(xs: &[&str]) -> Vec<String> {
        xs.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn ns_requires_with_aliases_refers_and_renames() {
        let d = ns_of(
            r#"(ns my.app.core
  "The core."
  (:require [a.b :as ab]
            [c.d :refer [x y] :rename {x z}]
            [e.f :as-alias ef]
            [g :refer :all]
            a.plain
            "react"
            [clojure.string :as str :refer [join]]))"#,
        );
        assert_eq!(d.name, "my.app.core");
        assert_eq!(d.doc.as_deref(), Some("The core."));
        assert_eq!(d.aliases, map(&[("ab", "a.b"), ("ef", "e.f"), ("str", "clojure.string")]));
        assert_eq!(
            d.refers,
            map(&[("z", "c.d/x"), ("y", "c.d/y"), ("join", "clojure.string/join")])
        );
        assert_eq!(d.refer_all, strs(&["g"]));
        // :as-alias does not load e.f.
        assert_eq!(d.requires, strs(&["a.b", "c.d", "g", "a.plain", "react", "clojure.string"]));
    }

    #[test]
    fn ns_prefix_lists() {
        let d =
            ns_of("(ns p (:require [clojure [set :as set] string] (app [db :as db :refer [q]])))");
        assert_eq!(d.requires, strs(&["clojure.set", "clojure.string", "app.db"]));
        assert_eq!(d.aliases, map(&[("set", "clojure.set"), ("db", "app.db")]));
        assert_eq!(d.refers, map(&[("q", "app.db/q")]));
    }

    #[test]
    fn ns_use_only_exclude_and_refer_clojure() {
        let d = ns_of(
            "(ns u (:use a [b :only [x]] [c :exclude [y]] [d :rename {p q}])
                   (:refer-clojure :exclude [map filter] :rename {get core-get}))",
        );
        assert_eq!(d.requires, strs(&["a", "b", "c", "d"]));
        assert_eq!(d.refer_all, strs(&["a", "c", "d"]));
        assert_eq!(d.refers, map(&[("x", "b/x"), ("q", "d/p")]));
        assert_eq!(d.core_exclude, ["filter", "map"].iter().map(|s| s.to_string()).collect());
        assert_eq!(d.core_rename, map(&[("core-get", "get")]));
        assert_eq!(d.core_only, None);
        let d = ns_of("(ns o (:refer-clojure :only [defn let]))");
        assert_eq!(d.core_only, Some(["defn", "let"].iter().map(|s| s.to_string()).collect()));
    }

    #[test]
    fn ns_imports_all_shapes() {
        let d = ns_of(
            "(ns i (:import java.util.Date [java.io File Reader] (java.net URI)) (:gen-class))",
        );
        assert_eq!(
            d.imports,
            map(&[
                ("Date", "java.util.Date"),
                ("File", "java.io.File"),
                ("Reader", "java.io.Reader"),
                ("URI", "java.net.URI"),
            ])
        );
    }

    #[test]
    fn ns_reader_conditionals_take_every_branch() {
        let d = ns_of(
            "(ns rc
  (:require #?(:clj [clojure.java.io :as io] :cljs [cljs.reader :as reader])
            #?@(:clj [[a.clj :as ac] b.clj] :cljs [[a.cljs :as ac2]])
            [shared :refer [f]])
  #?(:clj (:import (java.io File)))
  #?(:cljs (:require-macros [m.macros :as mm :refer [defm]])))",
        );
        assert_eq!(
            d.requires,
            strs(&["clojure.java.io", "cljs.reader", "a.clj", "b.clj", "a.cljs", "shared",])
        );
        assert_eq!(d.macro_libs, strs(&["m.macros"]));
        assert_eq!(d.aliases.get("io").map(String::as_str), Some("clojure.java.io"));
        assert_eq!(d.aliases.get("reader").map(String::as_str), Some("cljs.reader"));
        assert_eq!(d.aliases.get("ac2").map(String::as_str), Some("a.cljs"));
        assert_eq!(d.aliases.get("mm").map(String::as_str), Some("m.macros"));
        assert_eq!(d.refers.get("defm").map(String::as_str), Some("m.macros/defm"));
        assert_eq!(d.imports.get("File").map(String::as_str), Some("java.io.File"));
    }

    #[test]
    fn ns_metadata_doc_comments_discards_and_symbol_heads() {
        let d = ns_of(
            "(ns ^{:doc \"From meta.\" :author \"me\"} m.doc
  ;; a comment
  #_(:require [ignored :as ig])
  (require [x.y :as xy])
  (:require #_[gone] [kept]))",
        );
        assert_eq!(d.name, "m.doc");
        assert_eq!(d.doc.as_deref(), Some("From meta."));
        assert_eq!(d.requires, strs(&["x.y", "kept"]));
        assert_eq!(d.aliases, map(&[("xy", "x.y")]));
        let d = ns_of("(ns a.b {:doc \"From attr-map.\"})");
        assert_eq!(d.doc.as_deref(), Some("From attr-map."));
    }

    #[test]
    fn in_ns_and_non_ns_forms() {
        let src = "(in-ns 'my.other) (defn f [] 1) (ns) 42";
        let tree = parse(src);
        let forms = top_level_forms(&tree);
        assert_eq!(parse_ns_form(forms[0], src).map(|d| d.name), Some("my.other".to_string()));
        assert_eq!(parse_ns_form(forms[1], src), None);
        assert_eq!(parse_ns_form(forms[2], src), None);
        assert_eq!(parse_ns_form(forms[3], src), None);
    }

    #[test]
    fn top_level_require_use_import_refer_clojure_alias() {
        let d = ns_of(
            "(ns t)
(require '[a.b :as ab] 'c.d '[e :refer [f]])
(use 'u.v)
(import '(java.io File) 'java.util.Date)
(refer-clojure :exclude '[update])
(alias 'x 'x.y.z)
(defn not-a-directive [] 1)",
        );
        assert_eq!(d.requires, strs(&["a.b", "c.d", "e", "u.v"]));
        assert_eq!(d.aliases, map(&[("ab", "a.b"), ("x", "x.y.z")]));
        assert_eq!(d.refers, map(&[("f", "e/f")]));
        assert_eq!(d.refer_all, strs(&["u.v"]));
        assert_eq!(d.imports, map(&[("File", "java.io.File"), ("Date", "java.util.Date")]));
        assert!(d.core_exclude.contains("update"));
        let src = "(defn f [] 1)";
        let tree = parse(src);
        let mut decl = NsDecl::default();
        assert!(!apply_top_level_directive(&mut decl, top_level_forms(&tree)[0], src));
        assert_eq!(decl, NsDecl::default());
    }

    #[test]
    fn odd_shapes_do_not_panic() {
        for src in [
            "(ns)",
            "(ns a (:require))",
            "(ns a (:require []))",
            "(ns a (:require [b :as]))",
            "(ns a (:refer-clojure :exclude))",
            "(ns a (:import []) (:use) ())",
            "(ns a (:require [b :refer :all :rename]))",
            "(ns a (:require [1 2] #?(:clj) #?@(:cljs [])))",
            "(in-ns)",
            "(ns \"x\")",
        ] {
            let tree = parse(src);
            let _ = parse_ns_form(top_level_forms(&tree)[0], src);
        }
    }
}
