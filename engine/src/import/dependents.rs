//! Stored files whose resolution a change can move (same namespaces, or requiring them): they
//! are resolved again with it.

use super::*;

/// Stored Clojure files (not among `parsed`) whose resolution can change because the vars that
/// `parsed` define differ from what the store holds for those files: files of the same
/// namespaces, and files that require them. Their stored text comes back as `Incoming`.
pub(super) fn dependent_files(
    store: &Store,
    parsed: &[ParsedFile],
    removed: &[String],
) -> Result<Vec<Incoming>> {
    // A removed file defines nothing any more: its old vars count as changed.
    let paths: HashSet<&str> =
        parsed.iter().map(|f| f.path.as_str()).chain(removed.iter().map(String::as_str)).collect();
    if paths.is_empty() {
        return Ok(Vec::new());
    }
    let mut new_vars: HashMap<String, HashSet<String>> = HashMap::new();
    for f in parsed {
        for (ns, name) in f.defined_vars() {
            new_vars.entry(ns.to_string()).or_default().insert(name.to_string());
        }
    }
    let old_vars = vars_of_files(store, &paths)?;
    files_depending_on(store, &changed_namespaces(&old_vars, &new_vars), &paths)
}

/// The vars the stored files at `paths` define, per namespace.
pub(super) fn vars_of_files(
    store: &Store,
    paths: &HashSet<&str>,
) -> Result<HashMap<String, HashSet<String>>> {
    let mut vars: HashMap<String, HashSet<String>> = HashMap::new();
    if paths.is_empty() {
        return Ok(vars);
    }
    let rows = store.query(
        "paths[file] <- $paths ?[var] := paths[file], *form_at{file, id}, *defined_by{id, var}",
        params([("paths", column(paths.iter().map(|p| (*p).into())))]),
    )?;
    for r in &rows.rows {
        if let Some((ns, name)) = str_at(r, 0).split_once('/') {
            vars.entry(ns.to_string()).or_default().insert(name.to_string());
        }
    }
    Ok(vars)
}

/// The namespaces whose vars differ between two readings, sorted.
pub(super) fn changed_namespaces(
    old_vars: &HashMap<String, HashSet<String>>,
    new_vars: &HashMap<String, HashSet<String>>,
) -> Vec<String> {
    let mut changed: Vec<String> = new_vars
        .keys()
        .chain(old_vars.keys())
        .filter(|ns| new_vars.get(*ns) != old_vars.get(*ns))
        .cloned()
        .collect();
    changed.sort();
    changed.dedup();
    changed
}

/// Of the `unchanged` stored files, those of the `changed` namespaces or requiring them, with
/// their stored text.
pub(super) fn unchanged_dependents(
    store: &Store,
    changed: &[String],
    unchanged: &[String],
) -> Result<Vec<Incoming>> {
    if changed.is_empty() || unchanged.is_empty() {
        return Ok(Vec::new());
    }
    let changed: HashSet<&str> = changed.iter().map(String::as_str).collect();
    let files = || params([("files", column(unchanged.iter().map(|p| p.as_str().into())))]);
    let of_ns = store.query(
        "files[file] <- $files ?[file, ns] := files[file], *file{path: file, ns, error}, error == ''",
        files(),
    )?;
    let requiring = store.query(
        "files[file] <- $files ?[file, n] := files[file], *ns_decl{file, requires}, n in requires",
        files(),
    )?;
    let mut paths: BTreeSet<String> = BTreeSet::new();
    for r in of_ns.rows.iter().chain(&requiring.rows) {
        if changed.contains(str_at(r, 1).as_str()) {
            paths.insert(str_at(r, 0));
        }
    }
    let mut out = Vec::new();
    for path in paths {
        if let Some(bytes) = crate::query::file_bytes(store, &path)? {
            out.push(Incoming { path, bytes });
        }
    }
    Ok(out)
}

/// Stored Clojure files outside `paths` of the `changed` namespaces or requiring them, with
/// their stored text.
pub(super) fn files_depending_on(
    store: &Store,
    changed: &[String],
    paths: &HashSet<&str>,
) -> Result<Vec<Incoming>> {
    if changed.is_empty() {
        return Ok(Vec::new());
    }
    let rows = store.query(
        "changed[n] <- $changed
         ?[file] := changed[n], *ns_decl{file, requires}, is_in(n, requires)
         ?[file] := changed[n], *file{path: file, ns: n, error}, error == ''",
        params([("changed", column(changed.iter().map(|n| n.as_str().into())))]),
    )?;
    let mut out = Vec::new();
    for r in &rows.rows {
        let path = str_at(r, 0);
        if paths.contains(path.as_str()) {
            continue;
        }
        if let Some(bytes) = crate::query::file_bytes(store, &path)? {
            out.push(Incoming { path, bytes });
        }
    }
    Ok(out)
}
