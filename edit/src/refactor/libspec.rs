//! Libspecs of `ns` forms and top-level `require`/`use`/`refer`.

use super::*;

/// One lib of a require/use clause, with its options.
pub(crate) struct Spec<'t> {
    pub lib: String,
    /// The vector/list of the libspec (`None` for a bare lib symbol).
    pub node: Option<Node<'t>>,
    /// Where the libspec is written (its vector, list or lib symbol).
    pub at: Node<'t>,
    /// The prefix, when the libspec sits in a prefix list.
    pub prefix: Option<String>,
    /// (key name, key node, value node).
    pub opts: Vec<(String, Node<'t>, Node<'t>)>,
}

pub(super) fn directive_name<'s>(node: Node, text: &'s str) -> Option<&'s str> {
    match node.node_kind() {
        NodeKind::Kwd => syntax::field(node, syntax::fields().name).map(|n| syntax::text(n, text)),
        NodeKind::Sym => match syntax::sym_parts(node, text) {
            (None | Some("clojure.core"), n) => Some(n),
            _ => None,
        },
        _ => None,
    }
}

pub(crate) fn libspecs<'t>(top: &[Node<'t>], text: &str) -> Vec<Spec<'t>> {
    let mut out = Vec::new();
    for node in top {
        if node.node_kind() != NodeKind::List {
            continue;
        }
        let vals = flat_values(*node);
        let Some(head) = vals.first() else { continue };
        match directive_name(*head, text) {
            Some("ns") => {
                for clause in &vals[1..] {
                    if clause.node_kind() == NodeKind::List {
                        clause_specs(*clause, text, &mut out);
                    }
                }
            }
            Some("require" | "use" | "require-macros" | "use-macros" | "refer") => {
                clause_specs(*node, text, &mut out)
            }
            _ => {}
        }
    }
    out
}

pub(super) fn clause_specs<'t>(clause: Node<'t>, text: &str, out: &mut Vec<Spec<'t>>) {
    let vals: Vec<Node> = flat_values(clause).into_iter().map(|v| unquote(v, text)).collect();
    let Some(head) = vals.first() else { return };
    match directive_name(*head, text) {
        Some("require" | "use" | "require-macros" | "use-macros") => {
            for arg in &vals[1..] {
                spec_arg(*arg, text, out);
            }
        }
        Some("refer") => {
            if let Some(lib) = vals.get(1).filter(|l| l.node_kind() == NodeKind::Sym) {
                out.push(Spec {
                    lib: syntax::sym_str(*lib, text),
                    node: Some(clause),
                    at: *lib,
                    prefix: None,
                    opts: opts(&vals[2..], text),
                });
            }
        }
        _ => {}
    }
}

pub(super) fn opts<'t>(rest: &[Node<'t>], text: &str) -> Vec<(String, Node<'t>, Node<'t>)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i + 1 < rest.len() {
        if let Some(k) = syntax::field(rest[i], syntax::fields().name)
            .filter(|_| rest[i].node_kind() == NodeKind::Kwd)
        {
            out.push((syntax::text(k, text).to_string(), rest[i], unquote(rest[i + 1], text)));
            i += 2;
        } else {
            i += 1;
        }
    }
    out
}

/// The libs of one argument of a require clause, read as the engine reads them.
pub(super) fn spec_arg<'t>(arg: Node<'t>, text: &str, out: &mut Vec<Spec<'t>>) {
    let mut specs = Vec::new();
    nsdecl::libspec_nodes(arg, text, None, &mut specs);
    out.extend(specs.into_iter().map(|s| Spec {
        lib: s.lib,
        node: s.node,
        at: s.at,
        prefix: s.prefix,
        opts: opts(&s.opts, text),
    }));
}

/// The symbols of a `[..]`/`(..)`/`#{..}` of symbols.
pub(super) fn seq_syms<'t>(node: Node<'t>, _text: &str) -> Vec<Node<'t>> {
    if !matches!(node.node_kind(), NodeKind::Vec | NodeKind::List | NodeKind::Set) {
        return Vec::new();
    }
    flat_values(node).into_iter().filter(|n| n.node_kind() == NodeKind::Sym).collect()
}

/// The symbol pairs of a `{a b}` map.
pub(super) fn map_sym_pairs<'t>(node: Node<'t>, _text: &str) -> Vec<(Node<'t>, Node<'t>)> {
    if node.node_kind() != NodeKind::Map {
        return Vec::new();
    }
    let vals = flat_values(node);
    vals.chunks(2)
        .filter_map(|p| match p {
            [k, v] if k.node_kind() == NodeKind::Sym && v.node_kind() == NodeKind::Sym => {
                Some((*k, *v))
            }
            _ => None,
        })
        .collect()
}

/// An edit adding libspecs to the `(:require ...)` of the file's `ns` form (made if missing),
/// each on its own line aligned under the first libspec.
pub(super) fn require_edit(file: &ParsedFile, specs: &[String]) -> Result<Edit, String> {
    let tree = file.tree.as_ref().expect("parsed");
    let text = &file.text;
    let Some(ns) = syntax::top_level_forms(tree).into_iter().find(|n| is_ns_form(*n, text)) else {
        return Err(format!(
            "{} has no `ns` form to add {} to: add an `ns` form first",
            file.path,
            specs.join(" ")
        ));
    };
    let idx = LineIndex::new(text);
    let clause = syntax::values(ns).into_iter().find(|c| {
        c.node_kind() == NodeKind::List
            && syntax::values(*c).first().is_some_and(|h| {
                h.node_kind() == NodeKind::Kwd && syntax::text(*h, text) == ":require"
            })
    });
    match clause {
        Some(c) => {
            let vals = syntax::values(c);
            if vals.len() < 2 {
                let head = vals[0];
                return Ok(Edit {
                    start: head.end_byte(),
                    end: head.end_byte(),
                    text: format!(" {}", specs.join(" ")),
                });
            }
            let col = idx.pos(vals[1].start_byte()).col as usize - 1;
            let last = vals[vals.len() - 1];
            let pad = " ".repeat(col);
            let text: String = specs.iter().map(|s| format!("\n{pad}{s}")).collect();
            Ok(Edit { start: last.end_byte(), end: last.end_byte(), text })
        }
        None => {
            let last = *syntax::values(ns).last().expect("ns has a head");
            let pad = " ".repeat("  (:require ".len());
            let body = specs.join(&format!("\n{pad}"));
            Ok(Edit {
                start: last.end_byte(),
                end: last.end_byte(),
                text: format!("\n  (:require {body})"),
            })
        }
    }
}
