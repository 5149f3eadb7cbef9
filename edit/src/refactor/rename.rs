//! `rename_symbol`: a var renamed everywhere it is used.

use super::*;

/// Rename a var (`symbol`: its FQN `my.ns/foo`, or the id of its defining form) to `new_name`:
/// the definition, every use in the store (unqualified in its namespace, qualified, through
/// any alias, referred, `#'var`), the names in `:refer`/`:only` vectors and the source side of
/// `:rename` maps. Locals that shadow the name are left alone. One transaction.
pub fn rename_symbol(store: &Store, writer: &Writer, symbol: &str, new_name: &str) -> Res<Edited> {
    // Dozens of queries: run them where Cozo evaluates in place (see `on_worker`).
    formdb_engine::store::on_worker(|| rename_symbol_here(store, writer, symbol, new_name))
}

pub(super) fn rename_symbol_here(
    store: &Store,
    writer: &Writer,
    symbol: &str,
    new_name: &str,
) -> Res<Edited> {
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
pub(super) fn rename_edits(
    file: &ParsedFile,
    nss: &Namespaces,
    var: &Var,
    new_name: &str,
) -> Vec<Edit> {
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
        if let Some(n) = syntax::field(*node, syntax::fields().name) {
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
                            if let Some(n) = syntax::field(s, syntax::fields().name) {
                                edits.push(Edit::replace(n, new_name));
                            }
                        }
                    }
                }
                "rename" => {
                    for (k, _) in map_sym_pairs(*val, text) {
                        if syntax::sym_str(k, text) == var.name {
                            if let Some(n) = syntax::field(k, syntax::fields().name) {
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
pub(super) fn def_names<'t>(
    node: Node<'t>,
    src: &str,
    name: &str,
    depth: u32,
    f: &mut impl FnMut(Node<'t>),
) {
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
            && syntax::field(n, syntax::fields().namespace).is_none()
            && syntax::sym_parts(n, src).1 == name
    };
    if hname == "declare" {
        for v in &vals[1..] {
            if is_name(*v) {
                if let Some(n) = syntax::field(*v, syntax::fields().name) {
                    f(n);
                }
            }
        }
        return;
    }
    if hname.starts_with("def") && hname != "defmethod" {
        if let Some(second) = vals.get(1) {
            if is_name(*second) {
                if let Some(n) = syntax::field(*second, syntax::fields().name) {
                    f(n);
                }
            } else if second.node_kind() == NodeKind::ReadCond {
                for b in syntax::values(*second).into_iter().skip(1).step_by(2) {
                    if is_name(b) {
                        if let Some(n) = syntax::field(b, syntax::fields().name) {
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
