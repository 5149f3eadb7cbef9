//! Namespaces: where they live and what they hold.

use std::collections::BTreeMap;

use crate::store::{params, str_at, Params, Result, Store};

/// A namespace with its file, docstring and number of top-level forms.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NamespaceSummary {
    pub ns: String,
    pub file: String,
    pub doc: String,
    pub forms: i64,
}

/// The file whose `ns` form declares `ns`, else the first file (by path) whose forms are in
/// `ns`.
pub fn file_of(store: &Store, ns: &str) -> Result<Option<String>> {
    let p = params([("ns", ns.into())]);
    let rows = store.query("?[file] := *ns_decl{ns: $ns, file}", p.clone())?;
    if let Some(r) = rows.rows.first() {
        return Ok(Some(str_at(r, 0)));
    }
    let rows = store.query("?[path] := *file{path, ns: $ns} :order path", p)?;
    Ok(rows.rows.first().map(|r| str_at(r, 0)))
}

/// Every declared namespace with its file, in namespace order.
pub fn declared(store: &Store) -> Result<Vec<(String, String)>> {
    let rows = store.query("?[ns, file] := *ns_decl{ns, file} :order ns", Params::new())?;
    Ok(rows.rows.iter().map(|r| (str_at(r, 0), str_at(r, 1))).collect())
}

/// The files that declare a namespace, in path order.
pub fn declaring_files(store: &Store) -> Result<Vec<String>> {
    let rows = store.query("?[file] := *ns_decl{file} :order file", Params::new())?;
    Ok(rows.rows.iter().map(|r| str_at(r, 0)).collect())
}

/// Every namespace, in name order.
pub fn summaries(store: &Store) -> Result<Vec<NamespaceSummary>> {
    let rows = store.query(
        "n[ns, count(id)] := *form{id, ns, parent}, parent == '', ns != ''
         ?[ns, file, doc, n] := *ns_decl{ns, file, doc}, n[ns, n]
         ?[ns, file, doc, n] := *ns_decl{ns, file, doc}, not n[ns, _], n = 0
         :order ns",
        Params::new(),
    )?;
    Ok(rows
        .rows
        .iter()
        .map(|r| NamespaceSummary {
            ns: str_at(r, 0),
            file: str_at(r, 1),
            doc: str_at(r, 2),
            forms: r[3].get_int().unwrap_or(0),
        })
        .collect())
}

/// Namespace → what identifies its file's content now: the file's hash, and its draft's time
/// if it has one.
pub fn content_keys(store: &Store) -> Result<BTreeMap<String, String>> {
    let rows = store.query(
        "d[path, h] := *draft{path, at}, h = to_string(at)
         ?[ns, h] := *ns_decl{ns, file}, *file{path: file, hash}, d[file, dh], h = concat(hash, dh)
         ?[ns, h] := *ns_decl{ns, file}, *file{path: file, hash}, not d[file, _], h = hash",
        Params::new(),
    )?;
    Ok(rows.rows.iter().map(|r| (str_at(r, 0), str_at(r, 1))).collect())
}

/// Whether the store knows namespace `ns` (declared, or holding forms).
pub fn exists(store: &Store, ns: &str) -> Result<bool> {
    let rows = store.query(
        "?[n] := n = $ns, *ns_decl{ns: n} ?[n] := n = $ns, *form{ns: n}",
        params([("ns", ns.into())]),
    )?;
    Ok(!rows.rows.is_empty())
}

/// The file whose `ns` form declares `ns`, if one does.
pub fn declared_by(store: &Store, ns: &str) -> Result<Option<String>> {
    let rows = store.query("?[file] := *ns_decl{ns: $ns, file}", params([("ns", ns.into())]))?;
    Ok(rows.rows.first().map(|r| str_at(r, 0)))
}

/// A declared namespace's file and the namespaces its `ns` form requires.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Requires {
    pub ns: String,
    pub file: String,
    pub requires: Vec<String>,
}

/// Every declared namespace with what it requires, in namespace order.
pub fn requires(store: &Store) -> Result<Vec<Requires>> {
    let rows =
        store.query("?[ns, file, requires] := *ns_decl{ns, file, requires}", Params::new())?;
    Ok(rows
        .rows
        .iter()
        .map(|r| Requires {
            ns: str_at(r, 0),
            file: str_at(r, 1),
            requires: r[2]
                .get_slice()
                .map(|s| s.iter().filter_map(|v| v.get_str().map(str::to_string)).collect())
                .unwrap_or_default(),
        })
        .collect())
}
