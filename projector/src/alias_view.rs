//! The alias view of a file's text, and its inverse: what `views::user_view` and
//! `views::parse_back` compute for a stored text.
//!
//! The alias view changes only the alias tokens of the syntax tree: the `:as`/`:as-alias`
//! binding in the namespace declaration, the namespace part of `alias/name` symbols and of
//! `::alias/kw` keywords, and `#::alias{...}` map prefixes. Strings and comments are never
//! touched. Continuation lines aligned past a renamed token are re-indented by the length
//! delta so the file still looks hand-formatted.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use formdb_engine::nsdecl::{self, NsDecl};
use formdb_engine::syntax::{self, alias_site, qualifiers, visit, KindOf, LineIndex, NodeKind};
use tree_sitter::{Node, Tree};

use crate::aliases::AliasMap;
use crate::scan::{self, Aligned, Site};

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

/// Every alias token of a parsed text, in one walk of the tree, sorted by position.
fn sites(tree: &Tree, src: &str) -> Vec<Site> {
    let mut out = Vec::new();
    let site = |n: Node, used| Site { start: n.start_byte(), end: n.end_byte(), used };
    visit(tree.root_node(), &mut |n| {
        if let Some(q) = alias_site(n, src) {
            out.push(site(q, true));
        }
        if !matches!(n.node_kind(), NodeKind::Vec | NodeKind::List) {
            return;
        }
        let vals = syntax::values(n);
        for (i, v) in vals.iter().enumerate() {
            let is_as = v.node_kind() == NodeKind::Kwd
                && matches!(syntax::text(*v, src), ":as" | ":as-alias");
            let is_alias_call = i == 0
                && v.node_kind() == NodeKind::Sym
                && matches!(syntax::sym_str(*v, src).as_str(), "alias" | "clojure.core/alias");
            if !(is_as || is_alias_call) {
                continue;
            }
            let next = vals.get(i + 1).map(|x| strip_quote(*x));
            if let Some(s) = next.filter(|s| s.node_kind() == NodeKind::Sym) {
                if syntax::field(s, syntax::fields().namespace).is_none() {
                    if let Some(name) = syntax::field(s, syntax::fields().name) {
                        out.push(site(name, false));
                    }
                }
            }
        }
    });
    out.sort_by_key(|s| s.start);
    out.dedup_by_key(|s| s.start);
    out
}

fn strip_quote(node: Node) -> Node {
    if node.node_kind() == NodeKind::Quote {
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

/// The renames of a text's alias tokens, and whether renaming the result back (the inverse
/// map, applied to the same token positions) gives the tokens of `text` again: false when a
/// token left alone is spelled like an alias the map renames to.
fn rename_edits(
    src: &str,
    sites: &[Site],
    renames: &BTreeMap<String, String>,
) -> (Vec<Edit>, bool) {
    let targets: BTreeSet<&str> = renames.values().map(String::as_str).collect();
    let mut edits = Vec::new();
    let mut invertible = true;
    for s in sites {
        let old = &src[s.start..s.end];
        match renames.get(old) {
            Some(new) => edits.push(Edit { start: s.start, end: s.end, text: new.clone() }),
            None => invertible &= !targets.contains(old),
        }
    }
    (edits, invertible)
}

/// `text` with `edits` (sorted, not overlapping) applied.
fn apply_edits(text: &str, edits: &[Edit]) -> String {
    let mut out = String::with_capacity(text.len() + 64);
    push_edited(&mut out, text, edits);
    out
}

/// [`apply_edits`], appended to `out`.
fn push_edited(out: &mut String, text: &str, edits: &[Edit]) {
    let mut at = 0;
    for e in edits {
        out.push_str(&text[at..e.start]);
        out.push_str(&e.text);
        at = e.end;
    }
    out.push_str(&text[at..]);
}

/// Byte offsets of each line's start.
fn line_starts(text: &str) -> Vec<usize> {
    let mut out = vec![0usize];
    out.extend(text.bytes().enumerate().filter(|(_, b)| *b == b'\n').map(|(i, _)| i + 1));
    out
}

/// The [`Aligned`] lines after line `from`, in one walk of the tree (a cursor keeps the stack of
/// enclosing nodes, so no node is looked up from the root again).
fn aligned_lines(tree: &Tree, text: &str, starts: &[usize], from: usize) -> Vec<Aligned> {
    // (first non-blank byte, line, line start, blank bytes)
    let mut pending = Vec::new();
    for line in from + 1..starts.len() {
        let start = starts[line];
        let end = starts.get(line + 1).map_or(text.len(), |e| e - 1);
        let row = &text[start..end];
        let ws = row.len() - row.trim_start_matches([' ', '\t']).len();
        if ws < row.len() {
            pending.push((start + ws, line, start, ws));
        }
    }
    let mut out = Vec::new();
    let aligned = |stack: &[(usize, usize)], line: usize, start: usize, ws: usize| {
        // The innermost enclosing node starting on an earlier line; not the file itself.
        let i = stack.iter().rposition(|(_, row)| *row < line)?;
        if i == 0 {
            return None;
        }
        let blanks = &text[start..start + ws];
        Some(Aligned {
            line,
            start,
            ws,
            col: blanks.chars().count(),
            tabs: blanks.contains('\t'),
            anchor: stack[i].1,
        })
    };
    let mut cursor = tree.walk();
    // (start byte, start row) of the nodes enclosing the cursor's node.
    let mut stack: Vec<(usize, usize)> = Vec::new();
    let mut j = 0;
    'walk: loop {
        let node = cursor.node();
        // Line starts before this node, after the previous sibling: inside the parent but in no
        // child. Such a byte starts a token only if it starts the parent.
        while j < pending.len() && pending[j].0 < node.start_byte() {
            let (b, line, start, ws) = pending[j];
            if let Some((parent_start, _)) = stack.last() {
                if *parent_start == b {
                    out.extend(aligned(&stack[..stack.len() - 1], line, start, ws));
                }
            }
            j += 1;
        }
        if j == pending.len() {
            break;
        }
        let b = pending[j].0;
        if node.end_byte() > b {
            if node.child_count() > 0 {
                stack.push((node.start_byte(), node.start_position().row));
                cursor.goto_first_child();
                continue;
            }
            // A token covering the line start(s) in it.
            while j < pending.len() && pending[j].0 < node.end_byte() {
                let (b, line, start, ws) = pending[j];
                if b == node.start_byte() {
                    out.extend(aligned(&stack, line, start, ws));
                }
                j += 1;
            }
        }
        loop {
            if cursor.goto_next_sibling() {
                break;
            }
            if !cursor.goto_parent() {
                break 'walk;
            }
            stack.pop();
        }
    }
    out
}

/// The shift of each aligned line, given the renamed tokens' (end column, char delta) per line:
/// the summed deltas of the tokens before the line's indentation column on its anchor line,
/// plus the anchor line's own shift. A line moves only by spaces: not if its indentation has
/// tabs, not left by more blanks than it has. Returns (line index, shift) of the lines moved.
fn shifts(
    lines: &[Aligned],
    changes: &BTreeMap<usize, Vec<(usize, i64)>>,
    nlines: usize,
    // The lines' indentation before the rename, as (line -> (blank bytes, column)) deltas.
    moved_before: &dyn Fn(usize) -> i64,
) -> Vec<i64> {
    let mut shift = vec![0i64; nlines];
    for l in lines {
        let before = moved_before(l.line);
        let (ws, col) = ((l.ws as i64 + before) as usize, (l.col as i64 + before) as usize);
        let mut s = shift[l.anchor];
        if let Some(cs) = changes.get(&l.anchor) {
            s += cs.iter().filter(|(end_col, _)| *end_col < col).map(|(_, d)| d).sum::<i64>();
        }
        if s == 0 || l.tabs || (s < 0 && (ws as i64) < -s) {
            continue;
        }
        shift[l.line] = s;
    }
    shift
}

/// A rename of `text` (renames as `edits`, sorted), with aligned continuation lines
/// re-indented when `reindent` ([`reindent_edits`]); without, where `check` finds the
/// re-indentation would not rename back exactly.
fn renamed<'a>(
    text: &str,
    edits: Vec<Edit>,
    reindent: bool,
    check: bool,
    aligned: impl FnOnce(&[usize], usize) -> Cow<'a, [Aligned]>,
) -> String {
    if edits.is_empty() || !reindent {
        return apply_edits(text, &edits);
    }
    match reindent_edits(text, &edits, check, aligned) {
        Some(moves) => with_moves(text, edits, moves),
        None => apply_edits(text, &edits),
    }
}

/// `text` with `edits` and the indentation `moves` that follow them applied.
fn with_moves(text: &str, edits: Vec<Edit>, moves: Vec<Edit>) -> String {
    let mut out = String::with_capacity(text.len() + 64);
    push_with_moves(&mut out, text, edits, moves);
    out
}

/// [`with_moves`], appended to `out`.
fn push_with_moves(out: &mut String, text: &str, edits: Vec<Edit>, moves: Vec<Edit>) {
    if moves.is_empty() {
        return push_edited(out, text, &edits);
    }
    let mut all = edits;
    all.extend(moves);
    all.sort_by_key(|e| (e.start, e.end));
    push_edited(out, text, &all)
}

/// The indentation edits that keep `text`'s aligned continuation lines aligned once `edits`
/// (renames, sorted) are applied. With `check`, `None` unless renaming the result back would
/// re-indent every line back exactly (the law `parse_back(view) == stored` needs it): the
/// check is arithmetic over the same lines, not a second parse and render.
/// `aligned(line starts, first)` gives the [`Aligned`] lines after line `first` (from the parse
/// tree, or from the scanner).
fn reindent_edits<'a>(
    text: &str,
    edits: &[Edit],
    check: bool,
    aligned: impl FnOnce(&[usize], usize) -> Cow<'a, [Aligned]>,
) -> Option<Vec<Edit>> {
    let starts = line_starts(text);
    let line_of = |b: usize| match starts.binary_search(&b) {
        Ok(l) => l,
        Err(l) => l - 1,
    };
    let col_of = |b: usize| text[starts[line_of(b)]..b].chars().count();
    // Per line: (end column, char delta) of each renamed token, in order.
    let mut changes: BTreeMap<usize, Vec<(usize, i64)>> = BTreeMap::new();
    for e in edits {
        let d = e.text.chars().count() as i64 - text[e.start..e.end].chars().count() as i64;
        if d != 0 {
            changes.entry(line_of(e.end)).or_default().push((col_of(e.end), d));
        }
    }
    let Some(first) = changes.keys().next().copied() else { return Some(Vec::new()) };
    let lines = aligned(&starts, first);
    let shift = shifts(&lines, &changes, starts.len(), &|_| 0);
    if check {
        // The inverse rename sees each token's end column moved by its line's shift and the
        // deltas of the renamed tokens up to it, and each line's indentation moved by its shift.
        let back: BTreeMap<usize, Vec<(usize, i64)>> = changes
            .iter()
            .map(|(line, cs)| {
                let mut run = shift[*line];
                let moved = cs
                    .iter()
                    .map(|(end_col, d)| {
                        run += d;
                        ((*end_col as i64 + run) as usize, -d)
                    })
                    .collect();
                (*line, moved)
            })
            .collect();
        let undo = shifts(&lines, &back, starts.len(), &|line| shift[line]);
        if lines.iter().any(|l| undo[l.line] != -shift[l.line]) {
            return None;
        }
    }
    let mut moves = Vec::new();
    for l in lines.iter() {
        let s = shift[l.line];
        if s > 0 {
            moves.push(Edit { start: l.start, end: l.start, text: " ".repeat(s as usize) });
        } else if s < 0 {
            moves.push(Edit { start: l.start, end: l.start + (-s) as usize, text: String::new() });
        }
    }
    Some(moves)
}

/// Rename aliases in `text` (old -> new), re-indenting aligned continuation lines if `reindent`.
fn rename(text: &str, renames: &BTreeMap<String, String>, reindent: bool) -> String {
    if renames.is_empty() {
        return text.to_string();
    }
    if let Some(scan) = scan::scan(text) {
        let (edits, _) = rename_edits(text, &scan.sites, renames);
        return renamed(text, edits, reindent, false, |_, first| {
            Cow::Borrowed(scan.aligned_after(first))
        });
    }
    if text.len() > syntax::IN_RUNS_OVER {
        return pieces::rename(text, renames, reindent);
    }
    let tree = syntax::parse(text);
    if syntax::too_deep_error(&tree, text).is_some() {
        // Stored raw as it is (the depth gate): nothing renamed, nothing walked.
        return text.to_string();
    }
    let (edits, _) = rename_edits(text, &sites(&tree, text), renames);
    renamed(text, edits, reindent, false, |starts, first| {
        Cow::Owned(aligned_lines(&tree, text, starts, first))
    })
}

/// The forward plan of a stored text under a map, with the parsed declaration's aliases.
fn plan_for(stored: &str, map: &AliasMap) -> Plan {
    if let Some(scan) = scan::scan(stored) {
        if let Some(decl) = scanned_decl(stored, &scan) {
            let Some(decl) = decl else { return Plan::default() };
            return plan(&decl, &used(stored, &scan.sites), map);
        }
    }
    if stored.len() > syntax::IN_RUNS_OVER {
        return pieces::plan_for(stored, map);
    }
    let tree = syntax::parse(stored);
    if syntax::first_error(&tree, stored)
        .or_else(|| syntax::too_deep_error(&tree, stored))
        .is_some()
    {
        return Plan::default();
    }
    let Some(decl) = file_decl(&tree, stored) else { return Plan::default() };
    plan(&decl, &qualifiers(tree.root_node(), stored), map)
}

/// The texts of the alias uses among `sites`: the qualifiers a text is written with.
fn used(text: &str, sites: &[Site]) -> BTreeSet<String> {
    sites.iter().filter(|s| s.used).map(|s| text[s.start..s.end].to_string()).collect()
}

/// The namespace declaration of a scanned text, read by [`file_decl`] from a parse of the
/// declaration forms alone (a few lines, where the whole file is hundreds): `Some(None)` for a
/// text that declares none, `None` if those forms do not parse on their own (then the whole
/// text is parsed instead).
fn scanned_decl(text: &str, scan: &scan::Scan) -> Option<Option<NsDecl>> {
    if scan.decl_forms.is_empty() {
        return Some(None);
    }
    let mut forms = String::new();
    for (start, end) in &scan.decl_forms {
        forms.push_str(&text[*start..*end]);
        forms.push('\n');
    }
    let tree = syntax::parse(&forms);
    if syntax::first_error(&tree, &forms).is_some() {
        return None;
    }
    Some(file_decl(&tree, &forms))
}

/// The user's view of a stored file text: the alias tokens renamed; aligned lines re-indented
/// where renaming back restores them exactly (else the tokens alone are renamed). Read by the
/// scanner ([`crate::scan`]), or from a parse tree where the scanner does not vouch for a text.
pub fn user_view_text(stored: &str, map: &AliasMap) -> UserView {
    if map.is_empty() {
        // No wish, so no rename and no fallback, whatever the text declares.
        return UserView { text: stored.to_string(), fallbacks: Vec::new() };
    }
    user_view_text_scanned(stored, map).unwrap_or_else(|| user_view_text_parsed(stored, map))
}

/// [`user_view_text`] read by the scanner alone: `None` where the scanner does not vouch for
/// the text (a syntax error, or anything it leaves to tree-sitter). Public for the tests that
/// hold it to [`user_view_text_parsed`].
#[doc(hidden)]
pub fn user_view_text_scanned(stored: &str, map: &AliasMap) -> Option<UserView> {
    let unchanged = |fallbacks| UserView { text: stored.to_string(), fallbacks };
    let scan = scan::scan(stored)?;
    let Some(decl) = scanned_decl(stored, &scan)? else { return Some(unchanged(Vec::new())) };
    let plan = plan(&decl, &used(stored, &scan.sites), map);
    if plan.renames.is_empty() {
        return Some(unchanged(plan.fallbacks));
    }
    let (edits, tokens_invertible) = rename_edits(stored, &scan.sites, &plan.renames);
    let text = renamed(stored, edits, tokens_invertible, true, |_, first| {
        Cow::Borrowed(scan.aligned_after(first))
    });
    Some(UserView { text, fallbacks: plan.fallbacks })
}

/// [`user_view_text`] from a parse tree of the whole text: one parse, one walk of the tree for
/// the alias tokens, one for the aligned lines. The fallback of the scanner, and the reference
/// it is checked against.
#[doc(hidden)]
pub fn user_view_text_parsed(stored: &str, map: &AliasMap) -> UserView {
    if stored.len() > syntax::IN_RUNS_OVER {
        // Its whole-file tree would be about 70 bytes a byte.
        return pieces::user_view(stored, map);
    }
    let unchanged = |fallbacks| UserView { text: stored.to_string(), fallbacks };
    let tree = syntax::parse(stored);
    // A text the engine keeps raw (it does not parse, or nests past the depth gate) is shown
    // as stored: no recursive walk sees a tree that deep.
    if syntax::first_error(&tree, stored)
        .or_else(|| syntax::too_deep_error(&tree, stored))
        .is_some()
    {
        return unchanged(Vec::new());
    }
    let Some(decl) = file_decl(&tree, stored) else { return unchanged(Vec::new()) };
    let sites = sites(&tree, stored);
    let plan = plan(&decl, &used(stored, &sites), map);
    if plan.renames.is_empty() {
        return unchanged(plan.fallbacks);
    }
    let (edits, tokens_invertible) = rename_edits(stored, &sites, &plan.renames);
    let text = renamed(stored, edits, tokens_invertible, true, |starts, first| {
        Cow::Owned(aligned_lines(&tree, stored, starts, first))
    });
    UserView { text, fallbacks: plan.fallbacks }
}

/// The user's view of a stored file text as first written: render, then render the result
/// back and compare, re-rendering without re-indentation if that differs; each node's
/// enclosing form found by walking up from the node. Slow; kept so tests can check
/// [`user_view_text`] against it.
#[doc(hidden)]
pub fn user_view_text_checked(stored: &str, map: &AliasMap) -> UserView {
    reference::user_view_text(stored, map)
}

/// Map a user's text back to the stored aliases of the stored file text.
pub fn parse_back_text(stored: &str, text: &str, map: &AliasMap) -> String {
    // The view of the stored text itself, unedited: several texts can render to one view (a
    // line left in place may be one a rename back would move), and this one is the stored one.
    if user_view_text(stored, map).text == text {
        return stored.to_string();
    }
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

mod pieces;

/// The first implementation of the user view, for tests.
mod reference {
    use super::*;

    /// The alias binding sites: the symbol after `:as`/`:as-alias` anywhere in the file, and the
    /// first argument of a top-level `(alias 'a 'ns)`, restricted to the aliases in `names`.
    fn binding_sites<'t>(
        tree: &'t Tree,
        src: &str,
        names: &BTreeMap<String, String>,
    ) -> Vec<Node<'t>> {
        let mut out = Vec::new();
        visit(tree.root_node(), &mut |n| {
            if !matches!(n.node_kind(), NodeKind::Vec | NodeKind::List) {
                return;
            }
            let vals = syntax::values(n);
            for (i, v) in vals.iter().enumerate() {
                let next = vals.get(i + 1).map(|x| strip_quote(*x));
                let is_as = v.node_kind() == NodeKind::Kwd
                    && matches!(syntax::text(*v, src), ":as" | ":as-alias");
                let is_alias_call = i == 0
                    && v.node_kind() == NodeKind::Sym
                    && matches!(syntax::sym_str(*v, src).as_str(), "alias" | "clojure.core/alias");
                if !(is_as || is_alias_call) {
                    continue;
                }
                if let Some(s) = next.filter(|s| s.node_kind() == NodeKind::Sym) {
                    if syntax::field(s, syntax::fields().namespace).is_none() {
                        if let Some(name) = syntax::field(s, syntax::fields().name) {
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
                    edits.push(Edit {
                        start: q.start_byte(),
                        end: q.end_byte(),
                        text: new.clone(),
                    });
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
                || anchor.node_kind() == NodeKind::Source
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
        plan(&decl, &qualifiers(tree.root_node(), stored), map)
    }

    /// The user's view of a stored file text.
    pub(crate) fn user_view_text(stored: &str, map: &AliasMap) -> UserView {
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
}

#[cfg(test)]
mod tests;
