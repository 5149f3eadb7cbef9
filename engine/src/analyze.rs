//! What a top-level form is, read off its syntax alone: kind, name, docstring, arglists,
//! metadata flags, reader-conditional platforms and the vars it defines.
//!
//! No namespace context is needed here; resolution of the body lives in `resolve`.

use compact_str::CompactString;
use tree_sitter::Node;

use crate::syntax::{self, meta_value, metas, sym_parts, text, values};
use crate::syntax::{KindOf, NodeKind};

/// The kind of a top-level form.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    Ns,
    Def,
    Defn,
    #[serde(rename = "defn-")]
    DefnPrivate,
    Defmacro,
    Defmulti,
    Defmethod,
    Defprotocol,
    Defrecord,
    Deftype,
    Defonce,
    Definterface,
    ExtendType,
    ExtendProtocol,
    Comment,
    /// A `def`-like macro recognised by shape: `(s/def ::k ...)`, `(defstate x ...)`,
    /// `(deftest t ...)`. The head symbol is kept in `Analysis::head`.
    DefLike,
    #[default]
    Other,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Ns => "ns",
            Kind::Def => "def",
            Kind::Defn => "defn",
            Kind::DefnPrivate => "defn-",
            Kind::Defmacro => "defmacro",
            Kind::Defmulti => "defmulti",
            Kind::Defmethod => "defmethod",
            Kind::Defprotocol => "defprotocol",
            Kind::Defrecord => "defrecord",
            Kind::Deftype => "deftype",
            Kind::Defonce => "defonce",
            Kind::Definterface => "definterface",
            Kind::ExtendType => "extend-type",
            Kind::ExtendProtocol => "extend-protocol",
            Kind::Comment => "comment",
            Kind::DefLike => "def-like",
            Kind::Other => "other",
        }
    }

    pub fn parse(s: &str) -> Kind {
        match s {
            "ns" => Kind::Ns,
            "def" => Kind::Def,
            "defn" => Kind::Defn,
            "defn-" => Kind::DefnPrivate,
            "defmacro" => Kind::Defmacro,
            "defmulti" => Kind::Defmulti,
            "defmethod" => Kind::Defmethod,
            "defprotocol" => Kind::Defprotocol,
            "defrecord" => Kind::Defrecord,
            "deftype" => Kind::Deftype,
            "defonce" => Kind::Defonce,
            "definterface" => Kind::Definterface,
            "extend-type" => Kind::ExtendType,
            "extend-protocol" => Kind::ExtendProtocol,
            "comment" => Kind::Comment,
            "def-like" => Kind::DefLike,
            _ => Kind::Other,
        }
    }

    /// Forms that define a var named by their second element.
    pub fn defines_var(self) -> bool {
        matches!(
            self,
            Kind::Def
                | Kind::Defn
                | Kind::DefnPrivate
                | Kind::Defmacro
                | Kind::Defmulti
                | Kind::Defprotocol
                | Kind::Defrecord
                | Kind::Deftype
                | Kind::Defonce
                | Kind::Definterface
                | Kind::DefLike
        )
    }
}

/// Metadata flags of a defined var.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Flags {
    pub private: bool,
    pub dynamic: bool,
    pub deprecated: bool,
    pub test: bool,
    pub export: bool,
    pub macro_: bool,
}

/// A var a form defines, with the line of the form that defines it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Defined {
    pub name: CompactString,
    pub line: u32,
}

/// Everything read off one form's syntax.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Analysis {
    pub kind: Kind,
    /// The head symbol as written (`defn`, `s/def`, `deftest`, …); empty for non-lists.
    pub head: CompactString,
    /// The defined name: a symbol's name, or for keyword-named forms (`(s/def ::k ...)`) the
    /// keyword as written. Empty if the form names nothing.
    pub name: CompactString,
    /// `defmethod` dispatch value as written.
    pub dispatch: CompactString,
    pub doc: CompactString,
    pub arglists: Vec<String>,
    pub flags: Flags,
    /// Platforms named by reader conditionals in the form (`clj`, `cljs`, `default`, …).
    pub platforms: Vec<String>,
    /// Vars the form defines: its own name plus generated ones (`->R`, `map->R`, protocol
    /// methods) and defs nested in top-level wrappers such as `(when ... (defn ...))`.
    pub defines: Vec<Defined>,
}

fn head_name<'s>(list: Node, src: &'s str) -> Option<(Option<&'s str>, &'s str, String)> {
    let first = *values(list).first()?;
    if first.node_kind() != NodeKind::Sym {
        return None;
    }
    let (ns, name) = sym_parts(first, src);
    Some((ns, name, syntax::sym_str(first, src)))
}

fn kind_of(ns: Option<&str>, name: &str) -> Kind {
    let core = matches!(ns, None | Some("clojure.core") | Some("cljs.core"));
    if core {
        let k = Kind::parse(name);
        if k != Kind::Other && k != Kind::DefLike {
            return k;
        }
    }
    // `s/def`, `spec/def`, `defstate`, `deftest`, `defroutes`…
    if name.starts_with("def") && (name.len() > 3 || ns.is_some()) {
        return Kind::DefLike;
    }
    Kind::Other
}

/// Keyword-valued metadata shorthand (`^:private`) and map entries (`^{:private true}`) of a
/// node, folded into flags. Also picks up `:doc` and `:arglists` from metadata maps.
fn read_meta(
    node: Node,
    src: &str,
    flags: &mut Flags,
    doc: &mut CompactString,
    arglists: &mut Vec<String>,
) {
    for m in metas(node) {
        let Some(v) = meta_value(m) else { continue };
        match v.node_kind() {
            NodeKind::Kwd => set_flag(flags, text(v, src).trim_start_matches(':'), true),
            NodeKind::Map => {
                let kv = values(v);
                for pair in kv.chunks(2) {
                    let [k, val] = pair else { continue };
                    if k.node_kind() != NodeKind::Kwd {
                        continue;
                    }
                    let key = text(*k, src).trim_start_matches(':');
                    match key {
                        "doc" if val.node_kind() == NodeKind::Str => {
                            *doc = syntax::string_value(*val, src).into()
                        }
                        "arglists" => {
                            let inner = if val.node_kind() == NodeKind::Quote {
                                values(*val).first().copied()
                            } else {
                                Some(*val)
                            };
                            if let Some(l) = inner {
                                *arglists =
                                    values(l).iter().map(|a| compact(text(*a, src))).collect();
                            }
                        }
                        _ => {
                            let truthy = !matches!(text(*val, src), "false" | "nil");
                            set_flag(flags, key, truthy);
                        }
                    }
                }
            }
            _ => {}
        }
    }
}

fn set_flag(flags: &mut Flags, key: &str, value: bool) {
    match key {
        "private" => flags.private = value,
        "dynamic" => flags.dynamic = value,
        "deprecated" => flags.deprecated = value,
        "test" => flags.test = value,
        "export" => flags.export = value,
        "macro" => flags.macro_ = value,
        _ => {}
    }
}

/// Whitespace runs collapsed to one space (arglists are shown on one line).
fn compact(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Analyse one top-level form. `line_of` maps a byte offset to its 1-based line.
pub fn analyze(node: Node, src: &str, line_of: &dyn Fn(usize) -> u32) -> Analysis {
    let mut a = Analysis::default();
    collect_platforms(node, src, &mut a.platforms);
    if matches!(node.node_kind(), NodeKind::ReadCond | NodeKind::SplicingReadCond) {
        return analyze_reader_conditional(node, src, line_of, a);
    }
    if node.node_kind() != NodeKind::List {
        return a;
    }
    let Some((hns, hname, head)) = head_name(node, src) else { return a };
    a.head = head.into();
    a.kind = kind_of(hns, hname);
    let items = values(node);
    let line = line_of(node.start_byte());

    match a.kind {
        Kind::Ns => {
            if let Some(n) = items.get(1) {
                a.name = name_of(*n, src).into();
                read_meta(*n, src, &mut a.flags, &mut a.doc, &mut a.arglists);
            }
            if let Some(d) = items.get(2).filter(|d| d.node_kind() == NodeKind::Str) {
                a.doc = syntax::string_value(*d, src).into();
            }
        }
        Kind::Comment | Kind::Other => {
            if hname == "in-ns" {
                a.kind = Kind::Ns;
                if let Some(n) = items.get(1) {
                    a.name = text(*n, src).trim_start_matches('\'').into();
                }
            } else if hname == "declare" && hns.is_none() {
                // `declare` creates vars too; the later real definition owns the line.
            } else if a.kind == Kind::Other {
                nested_defines(node, src, line_of, &mut a.defines, 0);
            }
        }
        Kind::ExtendType | Kind::ExtendProtocol => {
            if let Some(n) = items.get(1) {
                a.name = text(*n, src).into();
            }
        }
        Kind::Defmethod => {
            if let Some(n) = items.get(1) {
                a.name = name_of(*n, src).into();
            }
            if let Some(d) = items.get(2) {
                a.dispatch = compact(text(*d, src)).into();
            }
        }
        _ => {
            let Some(name_node) = items.get(1) else { return a };
            a.name = name_of(*name_node, src).into();
            if a.kind == Kind::DefnPrivate {
                a.flags.private = true;
            }
            if a.kind == Kind::Defmacro {
                a.flags.macro_ = true;
            }
            if a.head.ends_with("deftest") {
                a.flags.test = true;
            }
            read_meta(*name_node, src, &mut a.flags, &mut a.doc, &mut a.arglists);
            let rest = &items[2..];
            read_doc_and_arglists(a.kind, rest, src, &mut a);
            if matches!(name_node.node_kind(), NodeKind::Sym | NodeKind::ReadCond)
                && !a.name.is_empty()
            {
                a.defines.push(Defined { name: a.name.clone(), line });
                generated_vars(a.kind, &a.name, rest, src, line, &mut a.defines);
            }
        }
    }
    a
}

/// The defined name of a form's second element: a symbol's name or a keyword as written.
fn name_of(node: Node, src: &str) -> String {
    match node.node_kind() {
        // `(defn #?(:clj when? :cljs ^boolean when?) ...)`: the `:clj` (else `:default`, else
        // first) branch names it.
        NodeKind::ReadCond => {
            let items = values(node);
            let pick = ["clj", "default"]
                .iter()
                .find_map(|p| {
                    items
                        .chunks(2)
                        .find(|c| c.len() == 2 && text(c[0], src).trim_start_matches(':') == *p)
                })
                .or_else(|| items.chunks(2).next())
                .and_then(|c| c.get(1).copied());
            pick.map(|n| name_of(n, src)).unwrap_or_default()
        }
        NodeKind::Sym => sym_parts(node, src).1.to_string(),
        NodeKind::Kwd => {
            // Metadata can't attach to keywords; the node text is the keyword.
            text(node, src).to_string()
        }
        _ => String::new(),
    }
}

fn read_doc_and_arglists(kind: Kind, rest: &[Node], src: &str, a: &mut Analysis) {
    let mut i = 0;
    let takes_doc = matches!(
        kind,
        Kind::Defn
            | Kind::DefnPrivate
            | Kind::Defmacro
            | Kind::Defmulti
            | Kind::Defprotocol
            | Kind::Definterface
            | Kind::DefLike
            | Kind::Def
            | Kind::Defonce
    );
    if takes_doc {
        if let Some(d) = rest.first().filter(|d| d.node_kind() == NodeKind::Str) {
            // `(def x "string")` with no value after it is a value, not a docstring.
            let is_value = matches!(kind, Kind::Def | Kind::Defonce) && rest.len() == 1;
            if !is_value {
                a.doc = syntax::string_value(*d, src).into();
                i = 1;
            }
        }
    }
    if !matches!(kind, Kind::Defn | Kind::DefnPrivate | Kind::Defmacro) {
        return;
    }
    if let Some(m) = rest.get(i).filter(|m| m.node_kind() == NodeKind::Map) {
        // attr-map: may carry :arglists or flags.
        let mut doc = CompactString::default();
        let mut arglists = Vec::new();
        let kv = values(*m);
        for pair in kv.chunks(2) {
            if let [k, v] = pair {
                let key = text(*k, src).trim_start_matches(':');
                if key == "arglists" || key == "doc" {
                    continue;
                }
                set_flag(&mut a.flags, key, !matches!(text(*v, src), "false" | "nil"));
            }
        }
        read_meta(*m, src, &mut a.flags, &mut doc, &mut arglists);
        i += 1;
    }
    if !a.arglists.is_empty() {
        return;
    }
    match rest.get(i) {
        Some(v) if v.node_kind() == NodeKind::Vec => a.arglists.push(compact(strip_meta(*v, src))),
        _ => {
            for arity in &rest[i..] {
                if arity.node_kind() != NodeKind::List {
                    continue;
                }
                if let Some(p) = values(*arity).first().filter(|p| p.node_kind() == NodeKind::Vec) {
                    a.arglists.push(compact(strip_meta(*p, src)));
                }
            }
        }
    }
}

/// A node's text without the metadata written in front of it.
fn strip_meta<'s>(node: Node, src: &'s str) -> &'s str {
    let start = metas(node).last().map_or(node.start_byte(), |m| {
        // Skip whitespace after the last metadata node.
        let mut s = m.end_byte();
        while src.as_bytes().get(s).is_some_and(|b| b.is_ascii_whitespace() || *b == b',') {
            s += 1;
        }
        s
    });
    &src[start..node.end_byte()]
}

/// Vars that `defrecord`, `deftype` and `defprotocol` create besides their own name.
fn generated_vars(
    kind: Kind,
    name: &str,
    rest: &[Node],
    src: &str,
    line: u32,
    out: &mut Vec<Defined>,
) {
    match kind {
        Kind::Defrecord => {
            out.push(Defined { name: compact_str::format_compact!("->{name}"), line });
            out.push(Defined { name: compact_str::format_compact!("map->{name}"), line });
        }
        Kind::Deftype => out.push(Defined { name: compact_str::format_compact!("->{name}"), line }),
        Kind::Defprotocol => {
            for sig in rest {
                if sig.node_kind() != NodeKind::List {
                    continue;
                }
                if let Some(m) = values(*sig).first().filter(|m| m.node_kind() == NodeKind::Sym) {
                    out.push(Defined { name: sym_parts(*m, src).1.into(), line });
                }
            }
        }
        _ => {}
    }
}

/// Defs nested inside top-level wrappers (`let`, `when`, `do`, `if`, …): their vars exist after
/// loading and carry the nested form's own line.
/// A top-level `#?(:clj (defn f ...) :cljs (defn f ...))` is the form its branches define: the
/// `:clj` branch (else `:default`, else the first) gives kind, name and doc; every branch adds
/// the vars it defines.
fn analyze_reader_conditional(
    node: Node,
    src: &str,
    line_of: &dyn Fn(usize) -> u32,
    mut a: Analysis,
) -> Analysis {
    let items = values(node);
    let branches: Vec<(&str, Node)> = items
        .chunks(2)
        .filter_map(|pair| match pair {
            [k, v] => Some((text(*k, src).trim_start_matches(':'), *v)),
            _ => None,
        })
        .collect();
    let primary = ["clj", "default"]
        .iter()
        .find_map(|p| branches.iter().find(|(k, _)| k == p))
        .or(branches.first())
        .map(|(_, v)| *v);
    let mut defines: Vec<Defined> = Vec::new();
    for (_, branch) in &branches {
        let b = analyze(*branch, src, line_of);
        for d in b.defines {
            if !defines.iter().any(|x| x.name == d.name) {
                defines.push(d);
            }
        }
    }
    if let Some(p) = primary {
        let b = analyze(p, src, line_of);
        if !b.name.is_empty() && b.kind != Kind::Ns {
            let platforms = std::mem::take(&mut a.platforms);
            a = b;
            a.platforms = platforms;
        }
    }
    a.defines = defines;
    a
}

fn nested_defines(
    node: Node,
    src: &str,
    line_of: &dyn Fn(usize) -> u32,
    out: &mut Vec<Defined>,
    depth: u32,
) {
    if depth > 6 {
        return;
    }
    for child in values(node) {
        if matches!(child.node_kind(), NodeKind::ReadCond | NodeKind::SplicingReadCond) {
            nested_defines(child, src, line_of, out, depth + 1);
            continue;
        }
        if child.node_kind() != NodeKind::List {
            continue;
        }
        let Some((hns, hname, _)) = head_name(child, src) else { continue };
        if hname == "fn" || hname == "fn*" || hname == "quote" {
            continue;
        }
        let kind = kind_of(hns, hname);
        if kind.defines_var() {
            let items = values(child);
            if let Some(n) = items.get(1).filter(|n| n.node_kind() == NodeKind::Sym) {
                let name: CompactString = sym_parts(*n, src).1.into();
                let line = line_of(child.start_byte());
                generated_vars(kind, &name, &items[2..], src, line, out);
                out.push(Defined { name, line });
            }
        } else {
            nested_defines(child, src, line_of, out, depth + 1);
        }
    }
}

fn collect_platforms(node: Node, src: &str, out: &mut Vec<String>) {
    // Every reader conditional starts `#?`: a form without one in its text (all of a `.clj`
    // file's, most of a `.cljc`'s) is not walked. The walk of every form was 0.7 s of a
    // million-line import's parse.
    if !text(node, src).contains("#?") {
        return;
    }
    let mut stack = vec![node];
    while let Some(n) = stack.pop() {
        if matches!(n.node_kind(), NodeKind::ReadCond | NodeKind::SplicingReadCond) {
            for (i, v) in values(n).iter().enumerate() {
                if i % 2 == 0 && v.node_kind() == NodeKind::Kwd {
                    let p = text(*v, src).trim_start_matches(':').to_string();
                    if !out.contains(&p) {
                        out.push(p);
                    }
                }
            }
        }
        let mut cursor = n.walk();
        stack.extend(n.named_children(&mut cursor));
    }
    out.sort();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::syntax::{parse, top_level_forms, LineIndex};

    fn analyze_one(src: &str) -> Analysis {
        let tree = parse(src);
        let idx = LineIndex::new(src);
        let node = top_level_forms(&tree)[0];
        analyze(node, src, &|b| idx.pos(b).line)
    }

    #[test]
    fn defn_with_doc_meta_and_arities() {
        let a = analyze_one("(defn ^:deprecated ^{:dynamic true} foo\n  \"Does foo.\"\n  {:added \"1.0\"}\n  ([x] x)\n  ([x y] (+ x y)))");
        assert_eq!(a.kind, Kind::Defn);
        assert_eq!(a.name, "foo");
        assert_eq!(a.doc, "Does foo.");
        assert_eq!(a.arglists, vec!["[x]", "[x y]"]);
        assert!(a.flags.deprecated && a.flags.dynamic && !a.flags.private);
        assert_eq!(a.defines, vec![Defined { name: "foo".into(), line: 1 }]);
    }

    #[test]
    fn private_forms_and_def_values() {
        let a = analyze_one("(defn- helper [^String s & more] s)");
        assert_eq!((a.kind, a.flags.private), (Kind::DefnPrivate, true));
        assert_eq!(a.arglists, vec!["[^String s & more]"]);
        let a = analyze_one("(def ^:private greeting \"hello\")");
        assert_eq!((a.kind, a.flags.private, a.doc.as_str()), (Kind::Def, true, ""));
        let a = analyze_one("(def answer \"The answer.\" 42)");
        assert_eq!(a.doc, "The answer.");
    }

    #[test]
    fn defmethod_records_dispatch() {
        let a = analyze_one("(defmethod area :circle [{:keys [r]}] (* r r))");
        assert_eq!(
            (a.kind, a.name.as_str(), a.dispatch.as_str()),
            (Kind::Defmethod, "area", ":circle")
        );
        assert!(a.defines.is_empty());
    }

    #[test]
    fn records_protocols_and_types_define_generated_vars() {
        let a = analyze_one("(defrecord Point [x y] Object (toString [_] \"p\"))");
        let names: Vec<_> = a.defines.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, vec!["Point", "->Point", "map->Point"]);
        let a = analyze_one("(defprotocol Shape \"Shapes.\" (area [s] \"Area.\") (perimeter [s]))");
        let names: Vec<_> = a.defines.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, vec!["Shape", "area", "perimeter"]);
        assert_eq!(a.doc, "Shapes.");
    }

    #[test]
    fn def_like_macros_by_shape() {
        let a = analyze_one("(s/def ::port int?)");
        assert_eq!((a.kind, a.head.as_str(), a.name.as_str()), (Kind::DefLike, "s/def", "::port"));
        let a = analyze_one("(deftest adds (is (= 2 (+ 1 1))))");
        assert_eq!((a.kind, a.name.as_str(), a.flags.test), (Kind::DefLike, "adds", true));
        let a = analyze_one("(mount/defstate conn :start (connect!))");
        assert_eq!((a.kind, a.name.as_str()), (Kind::DefLike, "conn"));
    }

    #[test]
    fn ns_and_in_ns() {
        let a = analyze_one(
            "(ns ^{:doc \"Meta doc.\"} my.app.core (:require [clojure.string :as str]))",
        );
        assert_eq!(
            (a.kind, a.name.as_str(), a.doc.as_str()),
            (Kind::Ns, "my.app.core", "Meta doc.")
        );
        let a = analyze_one("(in-ns 'clojure.core)");
        assert_eq!((a.kind, a.name.as_str()), (Kind::Ns, "clojure.core"));
    }

    #[test]
    fn names_written_as_reader_conditionals() {
        let a =
            analyze_one("(defn #?(:clj when? :cljs ^boolean when?) [pred x] (when (pred x) x))");
        assert_eq!((a.kind, a.name.as_str()), (Kind::Defn, "when?"));
        assert_eq!(a.defines, vec![Defined { name: "when?".into(), line: 1 }]);
    }

    #[test]
    fn nested_defs_in_wrappers() {
        let a = analyze_one("(when-not (resolve 'x)\n  (defn x [] 1))");
        assert_eq!(a.kind, Kind::Other);
        assert_eq!(a.defines, vec![Defined { name: "x".into(), line: 2 }]);
    }

    #[test]
    fn top_level_reader_conditionals_are_the_form_they_define() {
        let a = analyze_one("#?(:clj (defn now \"Time.\" [] (System/currentTimeMillis))\n   :cljs (defn now [] (.now js/Date)))");
        assert_eq!((a.kind, a.name.as_str(), a.doc.as_str()), (Kind::Defn, "now", "Time."));
        assert_eq!(a.platforms, vec!["clj", "cljs"]);
        assert_eq!(a.defines, vec![Defined { name: "now".into(), line: 1 }]);
        let a = analyze_one("#?(:clj (do (defn a [] 1)\n  (def b 2)))");
        assert_eq!(a.kind, Kind::Other);
        let names: Vec<_> = a.defines.iter().map(|d| (d.name.as_str(), d.line)).collect();
        assert_eq!(names, vec![("a", 1), ("b", 2)]);
    }

    #[test]
    fn reader_conditional_platforms() {
        let a =
            analyze_one("(defn now [] #?(:clj (System/currentTimeMillis) :cljs (.now js/Date)))");
        assert_eq!(a.platforms, vec!["clj", "cljs"]);
    }

    #[test]
    fn comment_blocks() {
        let a = analyze_one("(comment (foo 1) (bar))");
        assert_eq!(a.kind, Kind::Comment);
    }
}
