//! Forms by id: their text, place and vars.

use crate::store::{params, Result, Store};

/// Whether `id` is a stored top-level form.
pub fn is_top_level(store: &Store, id: &str) -> Result<bool> {
    let rows = store
        .query("?[id] := *form{id, parent}, id = $id, parent == ''", params([("id", id.into())]))?;
    Ok(!rows.rows.is_empty())
}

/// The var form `id` defines (`ns/name`; empty if it defines none), if the form exists.
pub fn fqn(store: &Store, id: &str) -> Result<Option<String>> {
    let rows = store.query("?[fqn] := *form{id: $id, fqn}", params([("id", id.into())]))?;
    Ok(rows.rows.first().map(|r| crate::store::str_at(r, 0)))
}

/// A form that defines a var.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VarForm {
    pub id: String,
    /// The var (`ns/name`).
    pub fqn: String,
    pub ns: String,
    pub source: String,
}

/// Every form that defines a var (sources left empty).
pub fn var_forms(store: &Store) -> Result<Vec<VarForm>> {
    let rows =
        store.query("?[fqn, id, ns] := *form{fqn, id, ns}, fqn != ''", Default::default())?;
    Ok(rows
        .rows
        .iter()
        .map(|r| VarForm {
            fqn: crate::store::str_at(r, 0),
            id: crate::store::str_at(r, 1),
            ns: crate::store::str_at(r, 2),
            source: String::new(),
        })
        .collect())
}

/// The top-level `defn` forms, with their sources, in id order.
pub fn top_level_defns(store: &Store) -> Result<Vec<VarForm>> {
    let rows = store.query(
        "?[id, fqn, source, ns] := *form{id, fqn, source, kind, parent, ns}, kind == 'defn', parent == '', fqn != ''
         :order id",
        Default::default(),
    )?;
    Ok(rows
        .rows
        .iter()
        .map(|r| VarForm {
            id: crate::store::str_at(r, 0),
            fqn: crate::store::str_at(r, 1),
            source: crate::store::str_at(r, 2),
            ns: crate::store::str_at(r, 3),
        })
        .collect())
}

/// Where a form is: its namespace, file and enclosing form (empty for a top-level form).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Place {
    pub ns: String,
    pub file: String,
    pub parent: String,
}

/// Where form `id` is, if it exists.
pub fn place(store: &Store, id: &str) -> Result<Option<Place>> {
    let rows = store.query(
        "?[ns, file, parent] := *form{id: $id, ns, file, parent}",
        params([("id", id.into())]),
    )?;
    Ok(rows.rows.first().map(|r| Place {
        ns: crate::store::str_at(r, 0),
        file: crate::store::str_at(r, 1),
        parent: crate::store::str_at(r, 2),
    }))
}
