//! Views of a namespace's file: as stored (byte for byte), a user's alias view, one form per
//! line; and the inverse of the alias view (`parse_back`), so an edited view can be imported.
//!
//! The alias view changes only the alias tokens of the syntax tree: the `:as`/`:as-alias`
//! binding in the namespace declaration, the namespace part of `alias/name` symbols and of
//! `::alias/kw` keywords, and `#::alias{...}` map prefixes. Strings and comments are never
//! touched. Continuation lines aligned past a renamed token are re-indented by the length
//! delta so the file still looks hand-formatted.

use std::collections::{BTreeMap, BTreeSet};

use formdb_engine::nsdecl::{self, NsDecl};
use formdb_engine::store::{params, str_at, Store, StoreError};
use formdb_engine::syntax::{self, LineIndex};
use tree_sitter::{Node, Tree};

use crate::aliases::AliasMap;

/// What can go wrong rendering or parsing back a view.
#[derive(Debug, thiserror::Error)]
pub enum ViewError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("no namespace `{0}` in the store (`formdb ns` lists what a namespace holds; `formdb stats` what the store holds)")]
    NoNamespace(String),
    #[error("no file `{0}` in the store")]
    NoFile(String),
    #[error("{0}: the stored file is not UTF-8 text; it has no text view")]
    NotText(String),
    #[error("{0}")]
    Invalid(String),
}

pub type Result<T, E = ViewError> = std::result::Result<T, E>;

/// An alias the user prefers that could not be used in a namespace.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Fallback {
    /// The required namespace whose alias was to change.
    pub ns: String,
    /// The user's preferred alias.
    pub wanted: String,
    /// The alias shown instead (the stored one).
    pub used: String,
    pub reason: String,
}

/// A user's view of a namespace's file.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct UserView {
    pub text: String,
    pub fallbacks: Vec<Fallback>,
}

/// The stored path of a namespace's file: the declaring file, else the first file in the ns.
pub fn ns_path(store: &Store, ns: &str) -> Result<String> {
    let p = params([("ns", ns.into())]);
    let rows = store.query("?[file] := *ns_decl{ns: $ns, file}", p.clone())?;
    if let Some(r) = rows.rows.first() {
        return Ok(str_at(r, 0));
    }
    let rows = store.query("?[path] := *file{path, ns: $ns} :order path", p)?;
    rows.rows.first().map(|r| str_at(r, 0)).ok_or_else(|| ViewError::NoNamespace(ns.into()))
}

/// A stored file's text (reassembled from its forms), byte for byte.
pub fn stored_text(store: &Store, path: &str) -> Result<String> {
    let bytes = formdb_engine::query::file_bytes(store, path)?
        .ok_or_else(|| ViewError::NoFile(path.into()))?;
    String::from_utf8(bytes).map_err(|_| ViewError::NotText(path.into()))
}

/// The namespace's file text as stored: byte-identical to the source for an untouched import.
pub fn as_stored(store: &Store, ns: &str) -> Result<String> {
    stored_text(store, &ns_path(store, ns)?)
}

/// The namespace's file with the user's preferred aliases.
pub fn user_view(store: &Store, ns: &str, aliases: &AliasMap) -> Result<UserView> {
    let stored = as_stored(store, ns)?;
    Ok(user_view_text(&stored, aliases))
}

/// The inverse of [`user_view`]: the user's aliases mapped back to the stored ones.
pub fn parse_back(store: &Store, ns: &str, text: &str, aliases: &AliasMap) -> Result<String> {
    let stored = as_stored(store, ns)?;
    Ok(parse_back_text(&stored, text, aliases))
}

/// Every top-level form of the namespace's file on one line.
pub fn oneline(store: &Store, ns: &str) -> Result<String> {
    Ok(oneline_text(&as_stored(store, ns)?))
}

/// How to render stored files.
#[derive(Clone, Debug)]
pub enum Render {
    AsStored,
    User(AliasMap),
    Oneline,
}

/// A stored path rendered: Clojure files that parse as the chosen view, anything else (blobs,
/// files stored raw) as its stored bytes.
pub fn render_path(store: &Store, path: &str, how: &Render) -> Result<(Vec<u8>, Vec<Fallback>)> {
    let bytes = formdb_engine::query::file_bytes(store, path)?
        .ok_or_else(|| ViewError::NoFile(path.into()))?;
    if matches!(how, Render::AsStored) || syntax::Lang::from_path(path).is_none() {
        return Ok((bytes, Vec::new()));
    }
    let Ok(text) = String::from_utf8(bytes) else {
        let bytes = formdb_engine::query::file_bytes(store, path)?.unwrap_or_default();
        return Ok((bytes, Vec::new()));
    };
    Ok(match how {
        Render::User(map) => {
            let v = user_view_text(&text, map);
            (v.text.into_bytes(), v.fallbacks)
        }
        Render::Oneline => (oneline_text(&text).into_bytes(), Vec::new()),
        Render::AsStored => (text.into_bytes(), Vec::new()),
    })
}

// ---------------------------------------------------------------------------------------------
// The alias plan

/// Stored alias -> alias shown, for the aliases that change; and the fallbacks.
#[derive(Clone, Debug, Default)]
struct Plan {
    renames: BTreeMap<String, String>,
    fallbacks: Vec<Fallback>,
}

/// The namespace declaration of a file's text, read the way the engine reads it: the first `ns`
/// form, then top-level `require`/`alias`/... forms.
pub fn file_decl(tree: &Tree, text: &str) -> Option<NsDecl> {
    let mut decl: Option<NsDecl> = None;
    for node in syntax::top_level_forms(tree) {
        match decl.as_mut() {
            None => decl = nsdecl::parse_ns_form(node, text).filter(|d| !d.name.is_empty()),
            Some(d) => {
                if nsdecl::parse_ns_form(node, text).is_some() {
                    break;
                }
                nsdecl::apply_top_level_directive(d, node, text);
            }
        }
    }
    decl
}

/// Qualifiers (`q/..` symbols, `::q/..` keywords) written in a text.
fn qualifiers(tree: &Tree, text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    visit(tree.root_node(), &mut |n| {
        if let Some(q) = alias_site(n, text) {
            out.insert(syntax::text(q, text).to_string());
        }
    });
    out
}

fn plan(decl: &NsDecl, qualifiers: &BTreeSet<String>, map: &AliasMap) -> Plan {
    // alias -> ns of the stored declaration; several aliases may name one ns.
    let mut wants: BTreeMap<String, String> = BTreeMap::new();
    // When several aliases name one namespace, the first (in name order) takes the wish.
    let mut wished: BTreeSet<&str> = BTreeSet::new();
    for (alias, ns) in &decl.aliases {
        if !wished.insert(ns.as_str()) {
            continue;
        }
        if let Some(want) = map.get(ns) {
            if decl.aliases.get(want) == Some(ns) {
                continue; // the wanted alias is bound too: keep each as written
            }
            if want != alias {
                wants.insert(alias.clone(), want.to_string());
            }
        }
    }
    let mut fallbacks = Vec::new();
    let reject = |alias: &str, want: &str, reason: String, fallbacks: &mut Vec<Fallback>| {
        fallbacks.push(Fallback {
            ns: decl.aliases[alias].clone(),
            wanted: want.to_string(),
            used: alias.to_string(),
            reason,
        });
    };
    // Invalid wanted aliases first.
    for (alias, want) in std::mem::take(&mut wants) {
        if !crate::aliases::valid_alias(&want) {
            reject(&alias, &want, format!("`{want}` is not a valid alias"), &mut fallbacks);
        } else {
            wants.insert(alias, want);
        }
    }
    // Then collisions, until the final aliases are distinct (a swap is fine).
    loop {
        let finals: BTreeMap<&str, &str> = decl
            .aliases
            .keys()
            .map(|a| (a.as_str(), wants.get(a).map_or(a.as_str(), String::as_str)))
            .collect();
        let mut bad = Vec::new();
        for (alias, want) in &wants {
            if let Some((other, _)) = finals.iter().find(|(o, f)| *o != alias && *f == want) {
                let reason = if wants.contains_key(*other) {
                    format!(
                        "`{want}` is also the preferred alias of `{}` here",
                        decl.aliases[*other]
                    )
                } else {
                    format!("`{want}` is already the alias of `{}` here", decl.aliases[*other])
                };
                bad.push((alias.clone(), want.clone(), reason));
            } else if qualifiers.contains(want) && !decl.aliases.contains_key(want) {
                bad.push((
                    alias.clone(),
                    want.clone(),
                    format!("`{want}/` already qualifies other symbols in this file"),
                ));
            }
        }
        if bad.is_empty() {
            break;
        }
        for (alias, want, reason) in bad {
            wants.remove(&alias);
            reject(&alias, &want, reason, &mut fallbacks);
        }
    }
    Plan { renames: wants, fallbacks }
}

// ---------------------------------------------------------------------------------------------
// Rewriting

/// Depth-first pre-order over every node.
fn visit<'t>(node: Node<'t>, f: &mut impl FnMut(Node<'t>)) {
    f(node);
    let mut cursor = node.walk();
    for child in node.children(&mut cursor) {
        visit(child, f);
    }
}

/// The alias node of an alias use: the namespace part of `q/name` and `::q/kw`, the name of a
/// `#::q{}` prefix.
fn alias_site<'t>(node: Node<'t>, src: &str) -> Option<Node<'t>> {
    match node.kind() {
        "sym_lit" => node.child_by_field_name("namespace"),
        "kwd_lit" => {
            let marker = node.child_by_field_name("marker")?;
            if syntax::text(marker, src) != "::" {
                return None;
            }
            node.child_by_field_name("namespace")
        }
        "ns_map_lit" => {
            let prefix = node.child_by_field_name("prefix")?;
            if prefix.kind() == "kwd_lit"
                && prefix.child_by_field_name("marker").map(|m| syntax::text(m, src)) == Some("::")
                && prefix.child_by_field_name("namespace").is_none()
            {
                prefix.child_by_field_name("name")
            } else {
                None
            }
        }
        _ => None,
    }
}

/// The alias binding sites: the symbol after `:as`/`:as-alias` anywhere in the file, and the
/// first argument of a top-level `(alias 'a 'ns)`, restricted to the aliases in `names`.
fn binding_sites<'t>(tree: &'t Tree, src: &str, names: &BTreeMap<String, String>) -> Vec<Node<'t>> {
    let mut out = Vec::new();
    visit(tree.root_node(), &mut |n| {
        if !matches!(n.kind(), "vec_lit" | "list_lit") {
            return;
        }
        let vals = syntax::values(n);
        for (i, v) in vals.iter().enumerate() {
            let next = vals.get(i + 1).map(|x| strip_quote(*x));
            let is_as =
                v.kind() == "kwd_lit" && matches!(syntax::text(*v, src), ":as" | ":as-alias");
            let is_alias_call = i == 0
                && v.kind() == "sym_lit"
                && matches!(syntax::sym_str(*v, src).as_str(), "alias" | "clojure.core/alias");
            if !(is_as || is_alias_call) {
                continue;
            }
            if let Some(s) = next.filter(|s| s.kind() == "sym_lit") {
                if s.child_by_field_name("namespace").is_none() {
                    if let Some(name) = s.child_by_field_name("name") {
                        if names.contains_key(syntax::text(name, src)) {
                            out.push(name);
                        }
                    }
                }
            }
        }
    });
    out
}

fn strip_quote(node: Node) -> Node {
    if node.kind() == "quoting_lit" {
        if let Some(v) = syntax::values(node).first() {
            return *v;
        }
    }
    node
}

/// A byte range replaced by new text.
#[derive(Clone, Debug)]
struct Edit {
    start: usize,
    end: usize,
    text: String,
}

/// Rename aliases in `text` (old -> new), re-indenting aligned continuation lines if `reindent`.
fn rename(text: &str, renames: &BTreeMap<String, String>, reindent: bool) -> String {
    if renames.is_empty() {
        return text.to_string();
    }
    let tree = syntax::parse(text);
    let mut edits: Vec<Edit> = Vec::new();
    visit(tree.root_node(), &mut |n| {
        if let Some(q) = alias_site(n, text) {
            if let Some(new) = renames.get(syntax::text(q, text)) {
                edits.push(Edit { start: q.start_byte(), end: q.end_byte(), text: new.clone() });
            }
        }
    });
    for site in binding_sites(&tree, text, renames) {
        let new = &renames[syntax::text(site, text)];
        edits.push(Edit { start: site.start_byte(), end: site.end_byte(), text: new.clone() });
    }
    edits.sort_by_key(|e| e.start);
    edits.dedup_by_key(|e| e.start);
    if reindent {
        let shifts = indent_edits(&tree, text, &edits);
        edits.extend(shifts);
        edits.sort_by_key(|e| (e.start, e.end));
    }
    let mut out = String::with_capacity(text.len() + 64);
    let mut at = 0;
    for e in &edits {
        out.push_str(&text[at..e.start]);
        out.push_str(&e.text);
        at = e.end;
    }
    out.push_str(&text[at..]);
    out
}

/// Indentation edits for lines aligned after a renamed token on an earlier line of an enclosing
/// form: each such line moves by the summed length deltas of the renamed tokens before its
/// indentation column on the line where its enclosing form starts (plus that line's own move).
fn indent_edits(tree: &Tree, text: &str, edits: &[Edit]) -> Vec<Edit> {
    let idx = LineIndex::new(text);
    let mut line_starts = vec![0usize];
    for (i, b) in text.bytes().enumerate() {
        if b == b'\n' {
            line_starts.push(i + 1);
        }
    }
    // Per line (0-based): (end column, char delta) of each renamed token.
    let mut changes: BTreeMap<usize, Vec<(usize, i64)>> = BTreeMap::new();
    for e in edits {
        let p = idx.pos(e.end);
        let d = e.text.chars().count() as i64 - text[e.start..e.end].chars().count() as i64;
        if d != 0 {
            changes.entry(p.line as usize - 1).or_default().push((p.col as usize - 1, d));
        }
    }
    let Some(first) = changes.keys().next().copied() else { return Vec::new() };
    let root = tree.root_node();
    let mut shift = vec![0i64; line_starts.len()];
    let mut out = Vec::new();
    for line in first + 1..line_starts.len() {
        let start = line_starts[line];
        let end = line_starts.get(line + 1).map_or(text.len(), |e| e - 1);
        let row = &text[start..end];
        let ws = row.len() - row.trim_start_matches([' ', '\t']).len();
        if ws == row.len() {
            continue;
        }
        let b = start + ws;
        let Some(leaf) = root.descendant_for_byte_range(b, b + 1) else { continue };
        if leaf.start_byte() != b {
            continue; // inside a multi-line string or other token
        }
        // The nearest enclosing node that starts on an earlier line.
        let mut anchor = leaf;
        while anchor.start_position().row >= line {
            match anchor.parent() {
                Some(p) => anchor = p,
                None => break,
            }
        }
        if anchor.start_position().row >= line
            || anchor.kind() == "source"
            || anchor.parent().is_none()
        {
            continue;
        }
        let a = anchor.start_position().row;
        let col = row[..ws].chars().count();
        let mut s = shift[a];
        if let Some(cs) = changes.get(&a) {
            s += cs.iter().filter(|(end_col, _)| *end_col < col).map(|(_, d)| d).sum::<i64>();
        }
        if s == 0 {
            continue;
        }
        if row[..ws].contains('\t') {
            continue;
        }
        if s > 0 {
            out.push(Edit { start, end: start, text: " ".repeat(s as usize) });
        } else if (ws as i64) >= -s {
            out.push(Edit { start, end: start + (-s) as usize, text: String::new() });
        } else {
            continue;
        }
        shift[line] = s;
    }
    out
}

/// The forward plan of a stored text under a map, with the parsed declaration's aliases.
fn plan_for(stored: &str, map: &AliasMap) -> Plan {
    let tree = syntax::parse(stored);
    if syntax::first_error(&tree, stored).is_some() {
        return Plan::default();
    }
    let Some(decl) = file_decl(&tree, stored) else { return Plan::default() };
    plan(&decl, &qualifiers(&tree, stored), map)
}

/// The user's view of a stored file text.
pub fn user_view_text(stored: &str, map: &AliasMap) -> UserView {
    let plan = plan_for(stored, map);
    let inverse: BTreeMap<String, String> =
        plan.renames.iter().map(|(a, b)| (b.clone(), a.clone())).collect();
    let mut text = rename(stored, &plan.renames, true);
    if rename(&text, &inverse, true) != stored {
        // Re-indentation that would not invert exactly (odd alignments): rename only.
        text = rename(stored, &plan.renames, false);
    }
    UserView { text, fallbacks: plan.fallbacks }
}

/// Map a user's text back to the stored aliases of the stored file text.
pub fn parse_back_text(stored: &str, text: &str, map: &AliasMap) -> String {
    let plan = plan_for(stored, map);
    let inverse: BTreeMap<String, String> =
        plan.renames.iter().map(|(a, b)| (b.clone(), a.clone())).collect();
    let back = rename(text, &inverse, true);
    if user_view_text(&back, map).text == text {
        return back;
    }
    let plain = rename(text, &inverse, false);
    if user_view_text(&plain, map).text == text {
        return plain;
    }
    back
}

// ---------------------------------------------------------------------------------------------
// One form per line

/// Every top-level form on exactly one line: whitespace runs collapsed to one space outside
/// strings (none after an opening or before a closing bracket), comments and `#_` discards
/// inside forms dropped, raw newlines in strings written as `\n`. A text that does not parse is
/// returned as is.
pub fn oneline_text(text: &str) -> String {
    let tree = syntax::parse(text);
    if syntax::first_error(&tree, text).is_some() {
        return text.to_string();
    }
    let mut out = String::new();
    for form in syntax::top_level_forms(&tree) {
        let mut line = Line { out: String::new(), pending: false, after_open: true };
        emit(form, text, &mut line);
        out.push_str(&line.out);
        out.push('\n');
    }
    out
}

struct Line {
    out: String,
    pending: bool,
    after_open: bool,
}

fn is_open(kind: &str) -> bool {
    kind.ends_with('(') || kind.ends_with('[') || kind.ends_with('{')
}

fn is_close(kind: &str) -> bool {
    matches!(kind, ")" | "]" | "}")
}

fn push_piece(line: &mut Line, piece: &str, close: bool, open: bool) {
    if line.pending && !line.after_open && !close && !line.out.is_empty() {
        line.out.push(' ');
    }
    line.pending = false;
    line.out.push_str(piece);
    line.after_open = open;
}

fn emit(node: Node, src: &str, line: &mut Line) {
    let kind = node.kind();
    if matches!(kind, "str_lit" | "regex_lit") || node.child_count() == 0 {
        let t = syntax::text(node, src);
        let t = if matches!(kind, "str_lit" | "regex_lit") || t.contains('\n') {
            t.replace('\r', "\\r").replace('\n', "\\n")
        } else {
            t.to_string()
        };
        let named = node.is_named();
        push_piece(line, &t, !named && is_close(kind), !named && is_open(kind));
        return;
    }
    let mut cursor = node.walk();
    let mut prev_end = None;
    for child in node.children(&mut cursor) {
        if let Some(pe) = prev_end {
            if child.start_byte() > pe {
                line.pending = true;
            }
        }
        prev_end = Some(child.end_byte());
        if syntax::is_trivia(child) {
            line.pending = true;
            continue;
        }
        emit(child, src, line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> AliasMap {
        AliasMap::from_pairs(pairs.iter().map(|(a, b)| (a.to_string(), b.to_string())))
    }

    #[test]
    fn renames_tokens_not_strings_or_comments() {
        let src = "(ns a (:require [clojure.string :as str]))\n;; str/x\n(defn f [x] \"str/join\" (str/join x ::str/k #::str{:a 1}))\n";
        let v = user_view_text(src, &map(&[("clojure.string", "s")]));
        assert_eq!(
            v.text,
            "(ns a (:require [clojure.string :as s]))\n;; str/x\n(defn f [x] \"str/join\" (s/join x ::s/k #::s{:a 1}))\n"
        );
        assert_eq!(parse_back_text(src, &v.text, &map(&[("clojure.string", "s")])), src);
    }

    #[test]
    fn oneline_collapses() {
        let src = "(ns a)\n\n;; c\n(defn f\n  [x] ; c\n  #_(foo)\n  \"a\nb\"\n  (  inc x ))\n";
        assert_eq!(oneline_text(src), "(ns a)\n(defn f [x] \"a\\nb\" (inc x))\n");
    }
}
