//! Refactorings across the store: rename a var everywhere it is used, move a definition to
//! another namespace.
//!
//! Both read every file that can mention the var in the writer's view, find the symbol tokens
//! the engine's resolver resolves to it (so locals that shadow the name, `:rename`d refers and
//! syntax-quote templates are told apart exactly as the compiler would), replace only those
//! tokens (and the `:refer`/`:rename` entries of `ns` forms), then re-resolve every edited file
//! and refuse the edit if any symbol would now mean something else (a local or a referred var
//! capturing the new name). All files go to the store in one `commit_texts` call: one
//! transaction.
//!
//! `move_form` adds requires where callers need them; when the moved form uses vars of its old
//! namespace it requires that namespace from the new one (with an alias) and qualifies those
//! uses, and it refuses the move when a new require would close a namespace cycle (Clojure
//! cannot load one), naming the cycle.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use formdb_engine::forms::{self, resolve_refs, Content, Namespaces, ParsedFile};
use formdb_engine::import;
use formdb_engine::nsdecl::{self, NsDecl};
use formdb_engine::read;
use formdb_engine::resolve;
use formdb_engine::store::Store;
use formdb_engine::syntax::{self, flat_values, qualifiers, unquote, Lang, LineIndex};
use formdb_projector::views;
use tree_sitter::Node;

use crate::ops::{self, Edited, OpError, OpResult};
use crate::save::Writer;
use crate::EditError;
use formdb_engine::syntax::{KindOf, NodeKind};

type Res<T> = std::result::Result<T, OpError>;

fn invalid(msg: String) -> OpError {
    OpError::Edit(EditError::Invalid(msg))
}

// =============================================================================================
// rename_symbol

/// Rename a var (`symbol`: its FQN `my.ns/foo`, or the id of its defining form) to `new_name`:
/// the definition, every use in the store (unqualified in its namespace, qualified, through
/// any alias, referred, `#'var`), the names in `:refer`/`:only` vectors and the source side of
/// `:rename` maps. Locals that shadow the name are left alone. One transaction.
pub fn rename_symbol(store: &Store, writer: &Writer, symbol: &str, new_name: &str) -> Res<Edited> {
    // Dozens of queries: run them where Cozo evaluates in place (see `on_worker`).
    formdb_engine::store::on_worker(|| rename_symbol_here(store, writer, symbol, new_name))
}

fn rename_symbol_here(store: &Store, writer: &Writer, symbol: &str, new_name: &str) -> Res<Edited> {
    // Held from the first read to the commit: the files are rewritten whole from what is read.
    let _lock = store.writer()?;
    let var = find_var(store, symbol)?;
    let new_name = match new_name.trim().split_once('/') {
        Some((ns, name)) if ns == var.ns => name.to_string(),
        Some((ns, _)) => {
            return Err(invalid(format!(
                "`{new_name}` names namespace `{ns}`, but rename_symbol keeps `{}` in `{}`: send the new name only (e.g. `{}-2`); to change its namespace use move_form",
                var.fqn, var.ns, var.name
            )))
        }
        None => new_name.trim().to_string(),
    };
    if !valid_symbol_name(&new_name) {
        return Err(invalid(format!(
            "`{new_name}` is not a valid Clojure symbol name for a var (the Clojure reader would not read it back as that symbol, or Clojure reserves it); nothing was changed: send a name without spaces, `/`, `.`, brackets, quotes, `@`, `^`, a backquote, `~` or `\\`, a leading digit, `:`, `#` or `'`, or a final `:`, and not `nil`, `true`, `false` or `&`, such as `{}-v2`",
            var.name
        )));
    }
    if new_name == var.name {
        return Err(invalid(format!(
            "`{}` is already called `{new_name}`: send a different new_name",
            var.fqn
        )));
    }
    let new_fqn = format!("{}/{new_name}", var.ns);
    if let Some((file, line, id)) = definition_of(store, &new_fqn)? {
        return Err(invalid(format!(
            "`{new_fqn}` exists already ({file}:{line}, id {id}): send another new_name, or rename or delete that var first"
        )));
    }
    let nss = namespaces(store)?;
    let mut notes = Vec::new();
    let mut changed: Vec<(String, ParsedFile, String)> = Vec::new();
    for path in candidate_files(store, &var.fqn, &var.ns)? {
        let Some(file) = load(store, writer, &path)? else {
            notes.push(format!(
                "{path} was left as it is: it is stored as raw text (it does not parse)"
            ));
            continue;
        };
        let edits = rename_edits(&file, &nss, &var, &new_name);
        if edits.is_empty() {
            continue;
        }
        // A namespace referring the var under its own name would refer the new name: it must
        // not be taken there already (Clojure refuses to load that).
        if file.decl.refers.get(&var.name) == Some(&var.fqn) {
            let here = &file.decl.name;
            if let Some(other) = file.decl.refers.get(&new_name) {
                return Err(invalid(format!(
                    "{path} refers `{new_name}` from `{}` already and refers `{}` too: the rename would refer two vars as `{new_name}` there; send another new_name",
                    other.split_once('/').map_or(other.as_str(), |(n, _)| n),
                    var.fqn
                )));
            }
            if nss.all_vars.get(here).is_some_and(|v| v.contains(&new_name)) {
                return Err(invalid(format!(
                    "`{here}` ({path}) defines `{new_name}` and refers `{}`: the rename would clash there; send another new_name",
                    var.fqn
                )));
            }
        }
        let text = apply_edits(&file.text, edits);
        changed.push((path, file, text));
    }
    if changed.is_empty() {
        return Err(invalid(format!(
            "found no text of `{}` to rename: re-import the tree and retry",
            var.fqn
        )));
    }
    // Every edited file must resolve exactly as before, with the old name mapped to the new.
    let mut after = nss.clone();
    rename_in_nss(&mut after, &var.ns, &[var.name.as_str()], &var.ns, &[new_name.as_str()]);
    let map = HashMap::from([(var.fqn.clone(), new_fqn.clone())]);
    for (path, old, text) in &changed {
        let new = parse(path, text.clone())?;
        let before: Vec<Sig> = signature(old, &nss).into_iter().flatten().collect();
        let now: Vec<Sig> = signature(&new, &after).into_iter().flatten().collect();
        compare(path, &new, &map, &before, &now, "rename")?;
    }
    let files: Vec<(String, String)> =
        changed.iter().map(|(p, _, t)| (p.clone(), t.clone())).collect();
    let (applied, written) = ops::commit_texts(store, writer, "rename_symbol", files)?;
    let result = read_back(store, "rename_symbol", &new_fqn)?;
    if !var.ids.contains(&result.id) && !var.ids.is_empty() {
        notes.push(format!(
            "the definition's id changed from {} to {} (ids follow names)",
            var.ids[0], result.id
        ));
    }
    let uses = changed.len();
    notes.insert(0, format!("renamed `{}` to `{new_fqn}` in {uses} file(s)", var.fqn));
    let namespaces = namespaces_of(store, &written)?;
    Ok(Edited { results: vec![result], applied, files: written, namespaces, notes })
}

/// The token edits of one file for a rename.
fn rename_edits(file: &ParsedFile, nss: &Namespaces, var: &Var, new_name: &str) -> Vec<Edit> {
    let Some(tree) = &file.tree else { return Vec::new() };
    let text = &file.text;
    let syms = sym_index(tree.root_node(), text);
    let mut edits = Vec::new();
    for r in resolve_refs(file, nss).into_iter().flat_map(|f| f.refs) {
        if r.fqn != var.fqn {
            continue;
        }
        let Some(node) = syms.get(&(r.pos.line, r.pos.col)) else { continue };
        let (ns, name) = syntax::sym_parts(*node, text);
        // An unqualified name other than the var's is a `:rename`d refer: the local name stays.
        if ns.is_none() && name != var.name {
            continue;
        }
        if let Some(n) = node.child_by_field_name("name") {
            edits.push(Edit::replace(n, new_name));
        }
    }
    // The definition itself (and `declare`s) in the var's namespace.
    let nodes = syntax::top_level_forms(tree);
    for (form, node) in file.forms().iter().zip(&nodes) {
        if form.ns == var.ns {
            def_names(*node, text, &var.name, 0, &mut |n| edits.push(Edit::replace(n, new_name)));
        }
    }
    // `:refer [..]`, `:only [..]`, `:exclude [..]` and `:rename {..}` of libspecs naming the ns.
    for spec in libspecs(&nodes, text) {
        if spec.lib != var.ns {
            continue;
        }
        for (key, _, val) in &spec.opts {
            match key.as_str() {
                "refer" | "only" | "exclude" => {
                    for s in seq_syms(*val, text) {
                        if syntax::sym_str(s, text) == var.name {
                            if let Some(n) = s.child_by_field_name("name") {
                                edits.push(Edit::replace(n, new_name));
                            }
                        }
                    }
                }
                "rename" => {
                    for (k, _) in map_sym_pairs(*val, text) {
                        if syntax::sym_str(k, text) == var.name {
                            if let Some(n) = k.child_by_field_name("name") {
                                edits.push(Edit::replace(n, new_name));
                            }
                        }
                    }
                }
                _ => {}
            }
        }
    }
    edits
}

/// The name symbols of `(def... name ...)` forms (at any depth a definition can sit at) and of
/// `(declare ...)` that are `name`.
fn def_names<'t>(node: Node<'t>, src: &str, name: &str, depth: u32, f: &mut impl FnMut(Node<'t>)) {
    if depth > 8 || node.node_kind() != NodeKind::List {
        for v in syntax::values(node) {
            if depth <= 8
                && matches!(
                    v.node_kind(),
                    NodeKind::List | NodeKind::ReadCond | NodeKind::SplicingReadCond
                )
            {
                def_names(v, src, name, depth + 1, f);
            }
        }
        return;
    }
    let vals = syntax::values(node);
    let Some(head) = vals.first().filter(|h| h.node_kind() == NodeKind::Sym) else { return };
    let (_, hname) = syntax::sym_parts(*head, src);
    if matches!(hname, "quote" | "fn" | "fn*") {
        return;
    }
    let is_name = |n: Node| {
        n.node_kind() == NodeKind::Sym
            && n.child_by_field_name("namespace").is_none()
            && syntax::sym_parts(n, src).1 == name
    };
    if hname == "declare" {
        for v in &vals[1..] {
            if is_name(*v) {
                if let Some(n) = v.child_by_field_name("name") {
                    f(n);
                }
            }
        }
        return;
    }
    if hname.starts_with("def") && hname != "defmethod" {
        if let Some(second) = vals.get(1) {
            if is_name(*second) {
                if let Some(n) = second.child_by_field_name("name") {
                    f(n);
                }
            } else if second.node_kind() == NodeKind::ReadCond {
                for b in syntax::values(*second).into_iter().skip(1).step_by(2) {
                    if is_name(b) {
                        if let Some(n) = b.child_by_field_name("name") {
                            f(n);
                        }
                    }
                }
            }
        }
        return;
    }
    for v in &vals[1..] {
        if matches!(v.node_kind(), NodeKind::List | NodeKind::ReadCond | NodeKind::SplicingReadCond)
        {
            def_names(*v, src, name, depth + 1, f);
        }
    }
}

// =============================================================================================
// move_form

/// Move the definition `id` to namespace `to_ns`: removed from its file, placed in the target
/// namespace's file (appended after one blank line, or before the first form there that uses
/// it), callers rewritten to the new var (through an existing alias of `to_ns`, else a new
/// `[to.ns :as <last-segment>]` require), `:refer` vectors moved over. The form's own uses of
/// vars of its old namespace are qualified through a require of that namespace; a move that
/// would need a require closing a namespace cycle is refused. One transaction.
pub fn move_form(store: &Store, writer: &Writer, id: &str, to_ns: &str) -> Res<Edited> {
    // Dozens of queries: run them where Cozo evaluates in place (see `on_worker`).
    formdb_engine::store::on_worker(|| move_form_here(store, writer, id, to_ns))
}

fn move_form_here(store: &Store, writer: &Writer, id: &str, to_ns: &str) -> Res<Edited> {
    // Held from the first read to the commit: the files are rewritten whole from what is read.
    let _lock = store.writer()?;
    let Some(form) = read::forms::header(store, id)? else {
        return Err(invalid(format!(
            "no form with id `{id}`: ids are 8 characters, as `get_form`, `explore_namespace` and `search` return them"
        )));
    };
    let read::forms::Header { file: src_path, ns: from, name, fqn: old_fqn, kind, parent, .. } =
        form;
    if !parent.is_empty() {
        return Err(invalid(format!(
            "form {id} sits inside the (comment ...) block {parent}: move_form moves top-level definitions; take it out of the block first"
        )));
    }
    if old_fqn.is_empty() || kind == "ns" || kind == "defmethod" {
        return Err(invalid(format!(
            "form {id} ({kind}) defines no var: move_form moves definitions (`def`, `defn`, `defmacro`, …); for other forms use delete_form and insert_form"
        )));
    }
    if matches!(kind.as_str(), "defrecord" | "deftype" | "defprotocol" | "definterface") {
        return Err(invalid(format!(
            "`{old_fqn}` is a {kind}: moving it renames its Java class and generated vars, which move_form does not rewrite; delete it and insert it in `{to_ns}` instead, then fix the callers"
        )));
    }
    if from == to_ns {
        return Err(invalid(format!("`{old_fqn}` is in `{to_ns}` already: send another to_ns")));
    }
    let Some((_, tgt_path)) = formdb_engine::query::ns_info(store, to_ns)? else {
        let known: Vec<String> =
            read::namespaces::declared(store)?.into_iter().map(|(ns, _)| ns).take(20).collect();
        return Err(invalid(format!(
            "no namespace `{to_ns}` in the store: create it first with create_namespace, or send one of: {}",
            known.join(", ")
        )));
    };
    if tgt_path == src_path {
        return Err(invalid(format!(
            "`{to_ns}` is declared in {src_path}, the file `{old_fqn}` is in already: move_form moves forms between files"
        )));
    }
    let defined = formdb_engine::query::vars_defined_by(store, id)?;
    let names: Vec<String> = defined
        .iter()
        .filter_map(|v| v.strip_prefix(&format!("{from}/")).map(str::to_string))
        .collect();
    let names = if names.is_empty() { vec![name.clone()] } else { names };
    for n in &names {
        let there = format!("{to_ns}/{n}");
        if let Some((file, line, other)) = definition_of(store, &there)? {
            return Err(invalid(format!(
                "`{there}` exists already ({file}:{line}, id {other}): rename one of them first (rename_symbol), or delete the one in `{to_ns}`"
            )));
        }
    }
    let new_fqn = format!("{to_ns}/{name}");
    let tgt_refers = load(store, writer, &tgt_path)?.map(|f| f.decl.refers).unwrap_or_default();
    for n in &names {
        if let Some(other) = tgt_refers.get(n).filter(|f| **f != format!("{from}/{n}")) {
            return Err(invalid(format!(
                "`{to_ns}` refers `{n}` from elsewhere (`{other}`), so it cannot define `{n}`: drop that refer first, or rename one of them"
            )));
        }
    }
    let nss = namespaces(store)?;
    let mut after = nss.clone();
    let name_refs: Vec<&str> = names.iter().map(String::as_str).collect();
    rename_in_nss(&mut after, &from, &name_refs, to_ns, &name_refs);
    let map: HashMap<String, String> =
        names.iter().map(|n| (format!("{from}/{n}"), format!("{to_ns}/{n}"))).collect();

    let mut mv = Mover {
        store,
        writer,
        nss: &nss,
        from: from.clone(),
        to: to_ns.to_string(),
        name: name.clone(),
        old_fqn: old_fqn.clone(),
        plans: BTreeMap::new(),
        notes: Vec::new(),
    };
    for p in [src_path.clone(), tgt_path.clone()] {
        mv.plan(&p)?;
    }
    for p in candidate_files(store, &old_fqn, &from)? {
        mv.plan(&p)?;
    }
    let src_index = mv.plans[&src_path]
        .file
        .forms()
        .iter()
        .position(|f| f.analysis.name == name && f.ns == from && f.analysis.kind.as_str() == kind)
        .ok_or_else(|| {
            invalid(format!("form {id} is not in {src_path} any more: re-import and retry"))
        })?;

    // The moved form, rewritten for its new namespace.
    let moved = mv.moved_text(&src_path, &tgt_path, src_index)?;
    // Callers, refers and declares everywhere.
    let paths: Vec<String> = mv.plans.keys().cloned().collect();
    for p in &paths {
        let skip = (p == &src_path).then_some(src_index);
        mv.callers(p, skip)?;
    }
    mv.remove_declares(&src_path)?;
    // Out of the source file.
    {
        let plan = mv.plans.get_mut(&src_path).expect("planned");
        let tree = plan.file.tree.as_ref().expect("parsed");
        let spans = syntax::split_pieces(tree);
        let s = &spans[src_index];
        plan.edits.push(Edit { start: s.leading_start, end: s.end, text: String::new() });
    }
    // Into the target file.
    let insert_at = mv.place(&tgt_path, &moved)?;

    // No new require may close a namespace cycle.
    mv.check_cycles()?;

    // Build the texts, re-resolve and compare.
    let mut texts: Vec<(String, String)> = Vec::new();
    let mut moved_sig: Vec<Sig> = Vec::new();
    {
        let src = &mv.plans[&src_path].file;
        if let Some(s) = signature(src, &nss).get(src_index) {
            moved_sig = s.clone();
        }
    }
    for (path, plan) in &mv.plans {
        if plan.edits.is_empty() && plan.adds.is_empty() {
            continue;
        }
        let mut edits = plan.edits.clone();
        if !plan.adds.is_empty() {
            edits.push(require_edit(&plan.file, &plan.adds).map_err(invalid)?);
        }
        let text = apply_edits(&plan.file.text, edits);
        let new = parse(path, text.clone())?;
        let old_forms = signature(&plan.file, &nss);
        let mut before: Vec<Sig> = Vec::new();
        for (i, f) in old_forms.into_iter().enumerate() {
            if path == &src_path && i == src_index {
                continue;
            }
            if path == &tgt_path && Some(i) == insert_at {
                before.extend(moved_sig.iter().cloned());
            }
            before.extend(f);
        }
        if path == &tgt_path && insert_at.is_none() {
            before.extend(moved_sig.iter().cloned());
        }
        let now: Vec<Sig> = signature(&new, &after).into_iter().flatten().collect();
        compare(path, &new, &map, &before, &now, "move")?;
        texts.push((path.clone(), text));
    }
    let (applied, written) = ops::commit_texts(store, writer, "move_form", texts)?;
    let result = read_back(store, "move_form", &new_fqn)?;
    let mut notes = vec![format!("moved `{old_fqn}` to `{new_fqn}` ({})", result.file)];
    notes.append(&mut mv.notes);
    if result.id != id {
        notes.push(format!("the form's id changed from {id} to {} (ids follow files)", result.id));
    }
    let namespaces = namespaces_of(store, &written)?;
    Ok(Edited { results: vec![result], applied, files: written, namespaces, notes })
}

/// One file's share of a move.
struct Plan {
    file: ParsedFile,
    edits: Vec<Edit>,
    /// Libspecs to add to the file's `(:require ...)`.
    adds: Vec<String>,
    /// Aliases chosen for namespaces required by `adds`.
    new_aliases: BTreeMap<String, String>,
}

struct Mover<'a> {
    store: &'a Store,
    writer: &'a Writer,
    nss: &'a Namespaces,
    from: String,
    to: String,
    name: String,
    old_fqn: String,
    plans: BTreeMap<String, Plan>,
    notes: Vec<String>,
}

impl Mover<'_> {
    fn plan(&mut self, path: &str) -> Res<()> {
        if self.plans.contains_key(path) {
            return Ok(());
        }
        let Some(file) = load(self.store, self.writer, path)? else {
            return Err(invalid(format!(
                "{path} is stored as raw text (it does not parse) and may use `{}`: fix it with a whole-file save first",
                self.old_fqn
            )));
        };
        self.plans.insert(
            path.to_string(),
            Plan { file, edits: Vec::new(), adds: Vec::new(), new_aliases: BTreeMap::new() },
        );
        Ok(())
    }

    /// The alias `path` can write `ns/` with: one its declaration binds, else a new one (added
    /// to its requires).
    fn alias_for(&mut self, path: &str, ns: &str, hint: Option<&str>) -> String {
        let writer = self.writer;
        let plan = self.plans.get_mut(path).expect("planned");
        if let Some(a) = plan.new_aliases.get(ns) {
            return a.clone();
        }
        let decl = &plan.file.decl;
        let bound: Vec<&String> =
            decl.aliases.iter().filter(|(_, n)| n.as_str() == ns).map(|(a, _)| a).collect();
        if let Some(pref) = writer.aliases.get(ns).filter(|p| bound.iter().any(|b| b == p)) {
            return pref.to_string();
        }
        if let Some(a) = bound.first() {
            return (*a).clone();
        }
        let text = &plan.file.text;
        let used = qualifiers(plan.file.tree.as_ref().expect("parsed").root_node(), text);
        let stored_aliases: BTreeSet<String> = views::stored_text(self.store, path)
            .ok()
            .and_then(|s| {
                let t = syntax::parse(&s);
                views::file_decl(&t, &s)
            })
            .map(|d| d.aliases.into_keys().collect())
            .unwrap_or_default();
        let free = |a: &str| {
            !decl.aliases.contains_key(a)
                && !stored_aliases.contains(a)
                && !used.contains(a)
                && !plan.new_aliases.values().any(|v| v == a)
                && a != decl.name
        };
        let last = ns.rsplit('.').next().unwrap_or(ns).to_string();
        let mut candidates: Vec<String> = Vec::new();
        if let Some(p) = writer.aliases.get(ns) {
            candidates.push(p.to_string());
        }
        candidates.extend(hint.map(str::to_string));
        candidates.push(last.clone());
        for i in 2..100 {
            candidates.push(format!("{last}{i}"));
        }
        let alias = candidates
            .into_iter()
            .find(|a| valid_symbol_name(a) && !a.contains('.') && free(a))
            .unwrap_or_else(|| ns.to_string());
        plan.new_aliases.insert(ns.to_string(), alias.clone());
        plan.adds.push(format!("[{ns} :as {alias}]"));
        self.notes.push(format!("added `[{ns} :as {alias}]` to the requires of {path}"));
        alias
    }

    /// The moved form's text for its new namespace: leading comments kept, self-references
    /// unqualified, other var references written so they resolve to the same vars there,
    /// `::kw` keywords and imported class names written in full.
    fn moved_text(&mut self, src_path: &str, tgt_path: &str, index: usize) -> Res<String> {
        let (leading, range, text) = {
            let file = &self.plans[src_path].file;
            let tree = file.tree.as_ref().expect("parsed");
            let span = &syntax::split_pieces(tree)[index];
            let text = file.text.clone();
            let leading = text[span.leading_start..span.start].trim().to_string();
            (leading, (span.start, span.end), text)
        };
        let mut edits = Vec::new();
        // A copy of the source file, so new requires can be planned while reading it.
        let src_copy = forms::parse_file(src_path, self.plans[src_path].file.lang, text.clone());
        let src_file = &src_copy;
        let tree = src_file.tree.as_ref().expect("parsed");
        let node = syntax::top_level_forms(tree)[index];
        let syms = sym_index(node, &text);
        let refs = resolve_refs(src_file, self.nss).into_iter().nth(index).map(|f| f.refs);
        let refs = refs.unwrap_or_default();
        let old_decl = src_file.decl.clone();
        let tgt_decl = self.plans[tgt_path].file.decl.clone();
        let mut tgt_own: HashSet<String> =
            self.nss.all_vars.get(&self.to).cloned().unwrap_or_default();
        tgt_own.insert(self.name.clone());
        let mut ref_starts = HashSet::new();
        let mut needs_from = Vec::new();
        for r in &refs {
            let Some(sym) = syms.get(&(r.pos.line, r.pos.col)).copied() else { continue };
            ref_starts.insert(sym.start_byte());
            let (q, n) = syntax::sym_parts(sym, &text);
            let (fns, fname) = r.fqn.split_once('/').unwrap_or(("", r.fqn.as_str()));
            let written = if r.fqn == self.old_fqn {
                // Itself: unqualified in its new namespace.
                (q.is_some() || n != self.name).then(|| self.name.clone())
            } else if self.resolves_in_target(&tgt_decl, &tgt_own, q, n) == Some(r.fqn.clone()) {
                None
            } else if is_core(fns) {
                Some(format!("{fns}/{fname}"))
            } else if fns == self.to {
                Some(fname.to_string())
            } else {
                if fns == self.from {
                    needs_from.push(fname.to_string());
                }
                let alias = self.alias_for(tgt_path, fns, q);
                Some(format!("{alias}/{fname}"))
            };
            if let Some(w) = written {
                edits.push(Edit::replace_sym(sym, &w));
            }
        }
        if !needs_from.is_empty() {
            needs_from.sort();
            needs_from.dedup();
            self.notes.push(format!(
                "the moved form uses {} of `{}`, now written through the new require",
                needs_from.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", "),
                self.from
            ));
        }
        // `::kw` means the current namespace: write the old one out.
        let mut kws = Vec::new();
        syntax::visit(node, &mut |n| {
            if n.node_kind() == NodeKind::Kwd {
                kws.push(n);
            }
        });
        for k in kws {
            let t = syntax::text(k, &text);
            let Some(rest) = t.strip_prefix("::") else { continue };
            let full = match rest.split_once('/') {
                Some((a, kw)) => match old_decl.aliases.get(a) {
                    Some(ns) if tgt_decl.aliases.get(a) != Some(ns) => format!(":{ns}/{kw}"),
                    _ => continue,
                },
                None => format!(":{}/{rest}", self.from),
            };
            edits.push(Edit { start: k.start_byte(), end: k.end_byte(), text: full });
        }
        // Classes imported by the old namespace but not by the new one: fully qualified.
        let mut class_syms = Vec::new();
        syntax::visit(node, &mut |n| {
            if n.node_kind() == NodeKind::Sym {
                class_syms.push(n);
            }
        });
        for s in class_syms {
            if ref_starts.contains(&s.start_byte()) {
                continue;
            }
            let part = match s.child_by_field_name("namespace") {
                Some(nsn) => Some(nsn),
                None => s.child_by_field_name("name"),
            };
            let Some(part) = part else { continue };
            let t = syntax::text(part, &text);
            let base = t.strip_suffix('.').unwrap_or(t);
            if let Some(full) = old_decl.imports.get(base) {
                if tgt_decl.imports.get(base) != Some(full) {
                    edits.push(Edit {
                        start: part.start_byte(),
                        end: part.start_byte() + base.len(),
                        text: full.clone(),
                    });
                }
            }
        }
        let body = apply_edits_in(&text, range, edits);
        Ok(if leading.is_empty() { body } else { format!("{leading}\n{body}") })
    }

    /// What an unqualified (`q` None) or qualified symbol resolves to in the target namespace,
    /// by the declaration alone (the moved form keeps its locals).
    fn resolves_in_target(
        &self,
        decl: &NsDecl,
        own: &HashSet<String>,
        q: Option<&str>,
        n: &str,
    ) -> Option<String> {
        match q {
            Some(q) => {
                if is_core(q) {
                    return Some(format!("{q}/{n}"));
                }
                if let Some(ns) = decl.aliases.get(q) {
                    return Some(format!("{ns}/{n}"));
                }
                let known = decl.name == q
                    || decl.requires.iter().any(|r| r == q)
                    || self.nss.publics.contains_key(q);
                known.then(|| format!("{q}/{n}"))
            }
            None => {
                if let Some(orig) = decl.core_rename.get(n) {
                    return Some(format!("clojure.core/{orig}"));
                }
                if let Some(f) = decl.refers.get(n) {
                    // A refer of the moved var itself is dropped by the move.
                    return (f != &self.old_fqn).then(|| f.clone());
                }
                if own.contains(n) {
                    return Some(format!("{}/{n}", self.to));
                }
                let core = resolve::clojure_core_publics();
                if core.contains(n)
                    && !decl.core_exclude.contains(n)
                    && decl.core_only.as_ref().is_none_or(|o| o.contains(n))
                    && !decl.core_rename.values().any(|v| v == n)
                {
                    return Some(format!("clojure.core/{n}"));
                }
                for ns in &decl.refer_all {
                    if self.nss.publics.get(ns).is_some_and(|p| p.contains(n)) {
                        return Some(format!("{ns}/{n}"));
                    }
                }
                None
            }
        }
    }

    /// Rewrite the uses of the moved var in one file (all forms but `skip`) and its refers.
    fn callers(&mut self, path: &str, skip: Option<usize>) -> Res<()> {
        let (ns, refs) = {
            let plan = &self.plans[path];
            let file = &plan.file;
            let tree = file.tree.as_ref().expect("parsed");
            let text = &file.text;
            let syms = sym_index(tree.root_node(), text);
            let mut found = Vec::new();
            for (i, f) in resolve_refs(file, self.nss).into_iter().enumerate() {
                if Some(i) == skip {
                    continue;
                }
                for r in f.refs {
                    if r.fqn != self.old_fqn {
                        continue;
                    }
                    if let Some(s) = syms.get(&(r.pos.line, r.pos.col)) {
                        let (q, n) = syntax::sym_parts(*s, text);
                        found.push((s.start_byte(), s.end_byte(), q.is_some(), n.to_string()));
                    }
                }
            }
            (file.decl.name.clone(), found)
        };
        let in_target = ns == self.to;
        // Refers of the moved var from the old namespace: which local names they bind.
        let referred_as: BTreeSet<String> = {
            let decl = &self.plans[path].file.decl;
            decl.refers
                .iter()
                .filter(|(_, f)| **f == self.old_fqn)
                .map(|(l, _)| l.clone())
                .collect()
        };
        let mut keep_refer = false;
        for (start, end, qualified, written) in refs {
            let replacement = if in_target {
                (qualified || written != self.name).then(|| self.name.clone())
            } else if !qualified && written == self.name && referred_as.contains(&written) {
                // Referred under its own name: the refer moves to the new namespace.
                keep_refer = true;
                None
            } else {
                let alias = self.alias_for(path, &self.to.clone(), None);
                Some(format!("{alias}/{}", self.name))
            };
            if let Some(w) = replacement {
                let plan = self.plans.get_mut(path).expect("planned");
                plan.edits.push(Edit { start, end, text: w });
            }
        }
        // The libspecs of the old namespace: take the name out of `:refer`/`:only`/`:rename`.
        let mut removed_refer = false;
        {
            let plan = self.plans.get_mut(path).expect("planned");
            let text = plan.file.text.clone();
            let tree = plan.file.tree.as_ref().expect("parsed");
            let nodes = syntax::top_level_forms(tree);
            for spec in libspecs(&nodes, &text) {
                if spec.lib != self.from {
                    continue;
                }
                for (key, knode, val) in &spec.opts {
                    match key.as_str() {
                        "refer" | "only" => {
                            let syms = seq_syms(*val, &text);
                            let hits: Vec<Node> = syms
                                .iter()
                                .copied()
                                .filter(|s| syntax::sym_str(*s, &text) == self.name)
                                .collect();
                            if hits.is_empty() {
                                continue;
                            }
                            removed_refer = true;
                            if hits.len() == syms.len() && key == "refer" {
                                plan.edits.push(remove_pair(*knode, *val));
                            } else {
                                for h in hits {
                                    plan.edits.push(remove_value(h));
                                }
                            }
                        }
                        "rename" => {
                            let pairs = map_sym_pairs(*val, &text);
                            let hits: Vec<(Node, Node)> = pairs
                                .iter()
                                .copied()
                                .filter(|(k, _)| syntax::sym_str(*k, &text) == self.name)
                                .collect();
                            if hits.is_empty() {
                                continue;
                            }
                            if hits.len() == pairs.len() {
                                plan.edits.push(remove_pair(*knode, *val));
                            } else {
                                for (k, v) in hits {
                                    plan.edits.push(remove_pair(k, v));
                                }
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
        if removed_refer {
            self.notes.push(format!(
                "took `{}` out of the `:refer` of `{}` in {path}",
                self.name, self.from
            ));
        }
        if keep_refer && !in_target {
            self.add_refer(path)?;
        }
        Ok(())
    }

    /// Refer the moved var from its new namespace: into an existing `[to.ns ...]` libspec of
    /// the `ns` form, else a new `[to.ns :refer [name]]`.
    fn add_refer(&mut self, path: &str) -> Res<()> {
        let plan = self.plans.get_mut(path).expect("planned");
        let text = plan.file.text.clone();
        let tree = plan.file.tree.as_ref().expect("parsed");
        let nodes = syntax::top_level_forms(tree);
        let ns_node = nodes.iter().copied().find(|n| is_ns_form(*n, &text));
        let spec = libspecs(&nodes, &text).into_iter().find(|s| {
            s.lib == self.to
                && s.node.is_some_and(|n| n.node_kind() == NodeKind::Vec)
                && s.prefix.is_none()
                && ns_node.is_some_and(|ns| {
                    s.node.is_some_and(|n| {
                        n.start_byte() > ns.start_byte() && n.end_byte() < ns.end_byte()
                    })
                })
        });
        let name = self.name.clone();
        match spec {
            Some(spec) => {
                let vec = spec.node.expect("checked");
                match spec.opts.iter().find(|(k, _, _)| k == "refer") {
                    Some((_, _, val)) if val.node_kind() == NodeKind::Vec => {
                        plan.edits.push(insert_value(*val, &name));
                    }
                    Some(_) => {} // `:refer :all`
                    None => {
                        let last = syntax::values(vec).last().copied().expect("a lib name");
                        plan.edits.push(Edit {
                            start: last.end_byte(),
                            end: last.end_byte(),
                            text: format!(" :refer [{name}]"),
                        });
                    }
                }
            }
            None => {
                // A libspec this move adds already: refer through it.
                let to = self.to.clone();
                match plan.adds.iter_mut().find(|a| a.starts_with(&format!("[{to} "))) {
                    Some(a) => {
                        a.pop();
                        a.push_str(&format!(" :refer [{name}]]"));
                    }
                    None => plan.adds.push(format!("[{to} :refer [{name}]]")),
                }
            }
        }
        self.notes.push(format!("{path} now refers `{name}` from `{}`", self.to));
        Ok(())
    }

    /// Take the moved name out of `(declare ...)` forms of the old namespace in its file.
    fn remove_declares(&mut self, path: &str) -> Res<()> {
        let plan = self.plans.get_mut(path).expect("planned");
        let text = plan.file.text.clone();
        let tree = plan.file.tree.as_ref().expect("parsed");
        let spans = syntax::split_pieces(tree);
        let nodes = syntax::top_level_forms(tree);
        for (i, node) in nodes.iter().enumerate() {
            if plan.file.forms()[i].ns != self.from || node.node_kind() != NodeKind::List {
                continue;
            }
            let vals = syntax::values(*node);
            let is_declare = vals.first().is_some_and(|h| {
                h.node_kind() == NodeKind::Sym && syntax::sym_str(*h, &text) == "declare"
            });
            if !is_declare {
                continue;
            }
            let hits: Vec<Node> = vals[1..]
                .iter()
                .copied()
                .filter(|v| {
                    v.node_kind() == NodeKind::Sym && syntax::sym_str(*v, &text) == self.name
                })
                .collect();
            if hits.is_empty() {
                continue;
            }
            if hits.len() + 1 == vals.len() {
                let s = &spans[i];
                plan.edits.push(Edit { start: s.leading_start, end: s.end, text: String::new() });
            } else {
                for h in hits {
                    plan.edits.push(remove_value(h));
                }
            }
        }
        Ok(())
    }

    /// Put the moved text into the target file: before the first form that uses the var (if
    /// the forms it uses from there come earlier), else at the end. Returns the index of the
    /// form it goes before (`None`: appended).
    fn place(&mut self, tgt_path: &str, moved: &str) -> Res<Option<usize>> {
        let plan = self.plans.get_mut(tgt_path).expect("planned");
        let file = &plan.file;
        let tree = file.tree.as_ref().expect("parsed");
        let spans = syntax::split_pieces(tree);
        let sigs = resolve_refs(file, self.nss);
        let first_user = sigs.iter().position(|f| f.refs.iter().any(|r| r.fqn == self.old_fqn));
        let moved_uses: HashSet<String> = {
            let t = syntax::parse(moved);
            let mut s = HashSet::new();
            for n in syntax::top_level_forms(&t) {
                syntax::unqualified_symbols(n, moved, &mut s);
            }
            s
        };
        // Where each var of the target is defined.
        let defined_at = |name: &str| {
            file.forms().iter().position(|f| f.analysis.defines.iter().any(|d| d.name == name))
        };
        let at = match first_user {
            Some(u) => {
                let late = moved_uses.iter().any(|n| defined_at(n).is_some_and(|d| d >= u));
                if late {
                    // Mutual use: append, declared before the first user.
                    let s = &spans[u];
                    plan.edits.push(Edit {
                        start: s.start,
                        end: s.start,
                        text: format!("(declare {})\n\n", self.name),
                    });
                    self.notes.push(format!(
                        "added `(declare {})` to {tgt_path}: forms there use it before its definition",
                        self.name
                    ));
                    None
                } else {
                    Some(u)
                }
            }
            None => None,
        };
        match at {
            Some(u) => {
                let s = &spans[u];
                plan.edits.push(Edit {
                    start: s.start,
                    end: s.start,
                    text: format!("{moved}\n\n"),
                });
            }
            None => {
                let end = file.text.trim_end().len();
                plan.edits.push(Edit {
                    start: end,
                    end: file.text.len(),
                    text: format!("\n\n{moved}\n"),
                });
            }
        }
        Ok(at)
    }

    /// Refuse if a require added by the move closes a namespace cycle.
    fn check_cycles(&self) -> Res<()> {
        let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for decl in read::namespaces::requires(self.store)? {
            graph.insert(decl.ns, decl.requires.into_iter().collect());
        }
        let mut added = Vec::new();
        for plan in self.plans.values() {
            let ns = plan.file.decl.name.clone();
            for req in plan.new_aliases.keys() {
                added.push((ns.clone(), req.clone()));
            }
            for a in &plan.adds {
                if let Some(lib) = a.trim_start_matches('[').split_whitespace().next() {
                    added.push((ns.clone(), lib.to_string()));
                }
            }
        }
        for (a, b) in &added {
            graph.entry(a.clone()).or_default().insert(b.clone());
        }
        for (a, b) in &added {
            if let Some(path) = path_between(&graph, b, a) {
                let cycle = std::iter::once(a.clone()).chain(path).collect::<Vec<_>>().join(" → ");
                return Err(invalid(format!(
                    "moving `{}` to `{}` needs `{a}` to require `{b}`, which closes the namespace cycle {cycle}: Clojure cannot load it, so nothing was changed. Move the forms on one side of the cycle along (move the vars `{}` uses first, or its callers), or pick a namespace that does not depend on `{a}`",
                    self.old_fqn, self.to, self.name
                )));
            }
        }
        Ok(())
    }
}

/// A shortest require path from `a` to `b` (both ends included), if any.
pub(crate) fn path_between(
    graph: &BTreeMap<String, BTreeSet<String>>,
    a: &str,
    b: &str,
) -> Option<Vec<String>> {
    let mut prev: HashMap<String, String> = HashMap::new();
    let mut queue = std::collections::VecDeque::from([a.to_string()]);
    let mut seen = HashSet::from([a.to_string()]);
    while let Some(n) = queue.pop_front() {
        if n == b {
            let mut path = vec![n.clone()];
            let mut cur = n;
            while let Some(p) = prev.get(&cur) {
                path.push(p.clone());
                cur = p.clone();
            }
            path.reverse();
            return Some(path);
        }
        for m in graph.get(&n).into_iter().flatten() {
            if seen.insert(m.clone()) {
                prev.insert(m.clone(), n.clone());
                queue.push_back(m.clone());
            }
        }
    }
    None
}

// =============================================================================================
// Shared: vars, files, resolution

/// A var to refactor.
struct Var {
    fqn: String,
    ns: String,
    name: String,
    /// Ids of the forms defining it.
    ids: Vec<String>,
}

fn find_var(store: &Store, symbol: &str) -> Res<Var> {
    let symbol = symbol.trim().trim_start_matches("#'");
    let fqn = if symbol.contains('/') {
        symbol.to_string()
    } else {
        match read::forms::fqn(store, symbol)? {
            Some(fqn) if !fqn.is_empty() => fqn,
            Some(_) => {
                return Err(invalid(format!(
                    "form {symbol} defines no var: send the FQN (`my.ns/foo`) or the id of a `def`/`defn` form"
                )))
            }
            None => {
                return Err(invalid(format!(
                    "`{symbol}` is neither a var name (send `my.ns/foo`) nor a form id (8 characters, as `get_form` returns them)"
                )))
            }
        }
    };
    let definers = read::forms::definers(store, &fqn)?;
    let (ns, name) = fqn.split_once('/').expect("qualified");
    if definers.is_empty() {
        return Err(invalid(format!(
            "no var `{fqn}` is defined in the store: send the FQN of a var defined here (see `explore_namespace {ns}`), or the id of its defining form"
        )));
    }
    for d in &definers {
        let (kind, fname) = (&d.kind, &d.name);
        if matches!(kind.as_str(), "defrecord" | "deftype" | "defprotocol" | "definterface") {
            return Err(invalid(format!(
                "`{fqn}` is defined by a {kind} ({}): renaming it renames a Java class and generated vars, which rename_symbol does not rewrite; replace the form with replace_form instead",
                d.id
            )));
        }
        if fname != name && !fname.is_empty() {
            return Err(invalid(format!(
                "`{fqn}` is generated by `{fname}` (form {}): rename `{ns}/{fname}` instead",
                d.id
            )));
        }
    }
    Ok(Var {
        fqn: fqn.clone(),
        ns: ns.to_string(),
        name: name.to_string(),
        ids: definers.into_iter().map(|d| d.id).collect(),
    })
}

/// Where a var is defined: file, line and form id.
fn definition_of(store: &Store, fqn: &str) -> Res<Option<(String, i64, String)>> {
    // The first by file, line and id, as one place to show.
    Ok(read::forms::definers(store, fqn)?.into_iter().map(|d| (d.file, d.line, d.id)).min())
}

/// Files that can mention a var: those of forms calling it, defining it or read in its
/// namespace, and those whose namespace requires its namespace (for `:refer`s).
fn candidate_files(store: &Store, fqn: &str, ns: &str) -> Res<Vec<String>> {
    let mut out = read::usages::files_near(store, fqn, ns)?;
    for decl in read::namespaces::requires(store)? {
        if decl.requires.iter().any(|r| r == ns) {
            out.insert(decl.file);
        }
    }
    Ok(out.into_iter().filter(|p| Lang::from_path(p).is_some_and(|l| l != Lang::Edn)).collect())
}

/// The namespace tables of the store, as import builds them.
pub(crate) fn namespaces(store: &Store) -> Result<Namespaces, formdb_engine::StoreError> {
    let mut nss = Namespaces::default();
    for (var, private) in read::forms::var_privacy(store)? {
        let Some((ns, name)) = var.split_once('/') else { continue };
        nss.all_vars.entry(ns.to_string()).or_default().insert(name.to_string());
        if !private {
            nss.publics.entry(ns.to_string()).or_default().insert(name.to_string());
        }
    }
    nss.known = import::known_namespaces(store, &HashSet::new(), None)?;
    Ok(nss)
}

/// Vars `old` of `from` become vars `new` of `to`.
fn rename_in_nss(nss: &mut Namespaces, from: &str, old: &[&str], to: &str, new: &[&str]) {
    let mut public = Vec::new();
    for (o, n) in old.iter().zip(new) {
        let was_public = nss.publics.get_mut(from).is_some_and(|s| s.remove(*o));
        if let Some(s) = nss.all_vars.get_mut(from) {
            s.remove(*o);
        }
        public.push((n.to_string(), was_public));
    }
    for (n, p) in public {
        nss.all_vars.entry(to.to_string()).or_default().insert(n.clone());
        if p {
            nss.publics.entry(to.to_string()).or_default().insert(n);
        }
    }
}

/// A stored file in the writer's view, parsed; `None` if it is stored raw.
fn load(store: &Store, writer: &Writer, path: &str) -> Res<Option<ParsedFile>> {
    let stored = views::stored_text(store, path)?;
    let text = if writer.aliases.is_empty() {
        stored
    } else {
        views::user_view_text(&stored, &writer.aliases).text
    };
    let lang = Lang::from_path(path).unwrap_or(Lang::Clj);
    let parsed = forms::parse_file(path, lang, text);
    Ok(matches!(parsed.content, Content::Forms { .. }).then_some(parsed))
}

fn parse(path: &str, text: String) -> Res<ParsedFile> {
    let lang = Lang::from_path(path).unwrap_or(Lang::Clj);
    let parsed = forms::parse_file(path, lang, text);
    if let Content::Raw { error } = &parsed.content {
        return Err(invalid(format!(
            "{path}:{}:{}: the edited file would not parse ({}); nothing was changed",
            error.pos.line, error.pos.col, error.message
        )));
    }
    Ok(parsed)
}

/// What a reference or unresolved symbol is, position aside.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Sig {
    Ref(String, u32, u32),
    Unresolved(String),
}

fn signature(file: &ParsedFile, nss: &Namespaces) -> Vec<Vec<Sig>> {
    resolve_refs(file, nss)
        .into_iter()
        .map(|f| {
            let mut v: Vec<Sig> =
                f.refs.into_iter().map(|r| Sig::Ref(r.fqn, r.pos.line, r.pos.col)).collect();
            let mut u: Vec<Sig> = f.unresolved.into_iter().map(Sig::Unresolved).collect();
            u.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
            v.append(&mut u);
            v
        })
        .collect()
}

/// Refuse an edit after which a file's symbols would resolve differently (beyond `map`).
fn compare(
    path: &str,
    _new: &ParsedFile,
    map: &HashMap<String, String>,
    before: &[Sig],
    now: &[Sig],
    what: &str,
) -> Res<()> {
    let strip = |s: &Sig, mapped: bool| match s {
        Sig::Ref(f, _, _) if mapped => Sig::Ref(map.get(f).cloned().unwrap_or(f.clone()), 0, 0),
        Sig::Ref(f, _, _) => Sig::Ref(f.clone(), 0, 0),
        u => u.clone(),
    };
    let b: Vec<Sig> = before.iter().map(|s| strip(s, true)).collect();
    let n: Vec<Sig> = now.iter().map(|s| strip(s, false)).collect();
    if b == n {
        return Ok(());
    }
    let i = b.iter().zip(&n).position(|(x, y)| x != y).unwrap_or(b.len().min(n.len()));
    let b_orig: Vec<Sig> = before.iter().map(|s| strip(s, false)).collect();
    let describe = |s: Option<&Sig>| match s {
        Some(Sig::Ref(f, ..)) => format!("`{f}`"),
        Some(Sig::Unresolved(s)) => format!("nothing (`{s}` would not resolve)"),
        None => "nothing".into(),
    };
    let at = match (before.get(i), now.get(i)) {
        (Some(Sig::Ref(_, l, c)), _) | (_, Some(Sig::Ref(_, l, c))) => format!("{path}:{l}:{c}"),
        _ => path.to_string(),
    };
    Err(invalid(format!(
        "the {what} would change what a symbol means at {at}: it refers to {} and would refer to {} (a local or another var takes the name there); nothing was changed. Pick another name, or rename that local first",
        describe(b_orig.get(i)),
        describe(n.get(i))
    )))
}

/// Symbol nodes by the position the resolver reports for them (their start after metadata).
pub(crate) fn sym_index<'t>(root: Node<'t>, text: &str) -> HashMap<(u32, u32), Node<'t>> {
    let idx = LineIndex::new(text);
    let mut out = HashMap::new();
    syntax::visit(root, &mut |n| {
        if n.node_kind() == NodeKind::Sym {
            let p = idx.pos(syntax::symbol_anchor(n, text).start_byte());
            out.insert((p.line, p.col), n);
        }
    });
    out
}

fn is_core(ns: &str) -> bool {
    ns == "clojure.core" || ns == "cljs.core"
}

fn is_ns_form(node: Node, text: &str) -> bool {
    node.node_kind() == NodeKind::List
        && syntax::values(node).first().is_some_and(|h| {
            h.node_kind() == NodeKind::Sym
                && matches!(syntax::sym_str(*h, text).as_str(), "ns" | "clojure.core/ns")
        })
}

/// A symbol name a var can have: what the Clojure reader reads back as that unqualified
/// symbol, less the names Clojure reserves. Names with a `.` are reserved (a leading or final
/// one is interop, `Foo.` and `.method`) or read as a class name (`a.b`), and `&` is the rest
/// marker of argument vectors; `nil`, `true` and `false` read as values, a leading digit or sign
/// and digit as a number, a final `:` or an inner `::` not at all.
pub(crate) fn valid_symbol_name(s: &str) -> bool {
    const BAD: &[char] =
        &['/', ',', '(', ')', '[', ']', '{', '}', '"', ';', '@', '^', '`', '~', '\\', '.'];
    let mut chars = s.chars();
    let Some(first) = chars.next() else { return false };
    if first.is_ascii_digit()
        || matches!(first, ':' | '#' | '\'')
        || s.contains(BAD)
        || s.contains(|c: char| c.is_whitespace() || c.is_control())
        || s.ends_with(':')
        || s.contains("::")
    {
        return false;
    }
    // `-1`, `+2` read as numbers.
    let number = matches!(first, '+' | '-') && chars.next().is_some_and(|c| c.is_ascii_digit());
    !number && !matches!(s, "nil" | "true" | "false" | "&")
}

/// The form written by a refactoring, read back by var name.
fn read_back(store: &Store, op: &str, fqn: &str) -> Res<OpResult> {
    let mut r = OpResult { op: op.to_string(), ..OpResult::default() };
    if let Some(d) = read::forms::definers(store, fqn)?.into_iter().next() {
        (r.id, r.hash, r.ns, r.file, r.line) = (d.id, d.hash, d.ns, d.file, d.line);
    }
    Ok(r)
}

fn namespaces_of(store: &Store, files: &[String]) -> Res<Vec<String>> {
    let mut out = BTreeSet::new();
    for f in files {
        out.extend(read::files::ns_of(store, f)?.filter(|s| !s.is_empty()));
    }
    Ok(out.into_iter().collect())
}

// =============================================================================================
// Libspecs of `ns` forms and top-level `require`/`use`/`refer`

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

fn directive_name<'s>(node: Node, text: &'s str) -> Option<&'s str> {
    match node.node_kind() {
        NodeKind::Kwd => node.child_by_field_name("name").map(|n| syntax::text(n, text)),
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

fn clause_specs<'t>(clause: Node<'t>, text: &str, out: &mut Vec<Spec<'t>>) {
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

fn opts<'t>(rest: &[Node<'t>], text: &str) -> Vec<(String, Node<'t>, Node<'t>)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i + 1 < rest.len() {
        if let Some(k) =
            rest[i].child_by_field_name("name").filter(|_| rest[i].node_kind() == NodeKind::Kwd)
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
fn spec_arg<'t>(arg: Node<'t>, text: &str, out: &mut Vec<Spec<'t>>) {
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
fn seq_syms<'t>(node: Node<'t>, _text: &str) -> Vec<Node<'t>> {
    if !matches!(node.node_kind(), NodeKind::Vec | NodeKind::List | NodeKind::Set) {
        return Vec::new();
    }
    flat_values(node).into_iter().filter(|n| n.node_kind() == NodeKind::Sym).collect()
}

/// The symbol pairs of a `{a b}` map.
fn map_sym_pairs<'t>(node: Node<'t>, _text: &str) -> Vec<(Node<'t>, Node<'t>)> {
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
fn require_edit(file: &ParsedFile, specs: &[String]) -> Result<Edit, String> {
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

// =============================================================================================
// Text edits

#[derive(Clone, Debug)]
pub(crate) struct Edit {
    start: usize,
    end: usize,
    text: String,
}

impl Edit {
    fn replace(node: Node, text: &str) -> Edit {
        Edit { start: node.start_byte(), end: node.end_byte(), text: text.to_string() }
    }

    /// Replace a symbol as written (namespace and name; its metadata stays).
    fn replace_sym(sym: Node, text: &str) -> Edit {
        let start = sym.child_by_field_name("namespace").unwrap_or(sym);
        let start = if start == sym {
            sym.child_by_field_name("name").unwrap_or(sym).start_byte()
        } else {
            start.start_byte()
        };
        let end = sym.child_by_field_name("name").map_or(sym.end_byte(), |n| n.end_byte());
        Edit { start, end, text: text.to_string() }
    }
}

/// Remove one value of a collection with the whitespace before it (after it, for the first).
fn remove_value(node: Node) -> Edit {
    let Some(parent) = node.parent() else {
        return Edit { start: node.start_byte(), end: node.end_byte(), text: String::new() };
    };
    let vals = syntax::values(parent);
    let i = vals.iter().position(|v| *v == node).unwrap_or(0);
    if i > 0 {
        Edit { start: vals[i - 1].end_byte(), end: node.end_byte(), text: String::new() }
    } else if vals.len() > 1 {
        Edit { start: node.start_byte(), end: vals[1].start_byte(), text: String::new() }
    } else {
        Edit { start: node.start_byte(), end: node.end_byte(), text: String::new() }
    }
}

/// Remove a key/value pair (or two adjacent values) with the whitespace before them.
fn remove_pair(key: Node, val: Node) -> Edit {
    let start = key
        .parent()
        .map(|p| syntax::values(p))
        .and_then(|vals| {
            let i = vals.iter().position(|v| *v == key)?;
            (i > 0).then(|| vals[i - 1].end_byte())
        })
        .unwrap_or(key.start_byte());
    Edit { start, end: val.end_byte(), text: String::new() }
}

/// Append a symbol to a vector.
fn insert_value(vec: Node, name: &str) -> Edit {
    match syntax::values(vec).last() {
        Some(last) => {
            Edit { start: last.end_byte(), end: last.end_byte(), text: format!(" {name}") }
        }
        None => {
            let at = vec.end_byte() - 1;
            Edit { start: at, end: at, text: name.to_string() }
        }
    }
}

/// Apply non-overlapping edits (duplicates by range dropped; an insertion at a point keeps the
/// order given).
pub(crate) fn apply_edits(text: &str, edits: Vec<Edit>) -> String {
    apply_edits_in(text, (0, text.len()), edits)
}

fn apply_edits_in(text: &str, range: (usize, usize), mut edits: Vec<Edit>) -> String {
    edits.retain(|e| e.start >= range.0 && e.end <= range.1);
    edits.sort_by_key(|e| (e.start, e.end));
    edits.dedup_by(|b, a| a.start == b.start && a.end == b.end && a.start != a.end);
    let mut out = String::with_capacity(range.1 - range.0 + 64);
    let mut at = range.0;
    for e in edits {
        if e.start < at {
            continue; // overlapping: the earlier edit wins
        }
        out.push_str(&text[at..e.start]);
        out.push_str(&e.text);
        at = e.end;
    }
    out.push_str(&text[at..range.1]);
    out
}
