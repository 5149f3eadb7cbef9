//! `move_form`: a definition moved to another namespace, its callers and requires following.

use super::*;

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

pub(super) fn move_form_here(store: &Store, writer: &Writer, id: &str, to_ns: &str) -> Res<Edited> {
    // Held from the first read to the commit: the files are rewritten whole from what is read.
    let _lock = store.writer()?;
    let Some(form) = read::forms::header(store, id)? else {
        return Err(EditError::UnknownId { id: id.to_string() }.into());
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
        return Err(EditError::NoNamespace { ns: to_ns.to_string() }.into());
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
pub(super) struct Plan {
    file: ParsedFile,
    edits: Vec<Edit>,
    /// Libspecs to add to the file's `(:require ...)`.
    adds: Vec<String>,
    /// Aliases chosen for namespaces required by `adds`.
    new_aliases: BTreeMap<String, String>,
}

pub(super) struct Mover<'a> {
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
            let part = match syntax::field(s, syntax::fields().namespace) {
                Some(nsn) => Some(nsn),
                None => syntax::field(s, syntax::fields().name),
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
