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
    pub file: String,
    pub source: String,
}

/// Every form that defines a var (sources left empty).
pub fn var_forms(store: &Store) -> Result<Vec<VarForm>> {
    let rows = store
        .query("?[fqn, id, ns, file] := *form{fqn, id, ns, file}, fqn != ''", Default::default())?;
    Ok(rows
        .rows
        .iter()
        .map(|r| VarForm {
            fqn: crate::store::str_at(r, 0),
            id: crate::store::str_at(r, 1),
            ns: crate::store::str_at(r, 2),
            file: crate::store::str_at(r, 3),
            source: String::new(),
        })
        .collect())
}

/// The top-level `defn` forms, with their sources, in id order.
pub fn top_level_defns(store: &Store) -> Result<Vec<VarForm>> {
    let rows = store.query(
        "?[id, fqn, source, ns, file] := *form{id, fqn, source, kind, parent, ns, file}, kind == 'defn', parent == '', fqn != ''
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
            file: crate::store::str_at(r, 4),
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

/// The content hash of form `id`, if it exists.
pub fn hash(store: &Store, id: &str) -> Result<Option<String>> {
    let rows = store.query("?[hash] := *form{id: $id, hash}", params([("id", id.into())]))?;
    Ok(rows.rows.first().map(|r| crate::store::str_at(r, 0)))
}

/// A top-level form as an edit reports it back: its id, hash, namespace and first line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stamp {
    pub id: String,
    pub hash: String,
    pub ns: String,
    pub line: i64,
}

/// The top-level form at index `pos` of `file`, if there is one.
pub fn top_level_at(store: &Store, file: &str, pos: i64) -> Result<Option<Stamp>> {
    let rows = store.query(
        "?[id, hash, ns, line] := *form_at{file: $file, pos: $pos, id}, *form{id, hash, ns, line, parent}, parent == ''",
        params([("file", file.into()), ("pos", pos.into())]),
    )?;
    Ok(rows.rows.first().map(|r| Stamp {
        id: crate::store::str_at(r, 0),
        hash: crate::store::str_at(r, 1),
        ns: crate::store::str_at(r, 2),
        line: crate::store::int_at(r, 3),
    }))
}

/// What form `id` names: its kind (`defn`, `ns`, …), the name it defines and its namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Naming {
    pub kind: String,
    pub name: String,
    pub ns: String,
}

/// What form `id` names, if it exists.
pub fn naming(store: &Store, id: &str) -> Result<Option<Naming>> {
    let rows = store.query(
        "?[kind, name, ns] := *form{id: $id, kind, name, ns}",
        params([("id", id.into())]),
    )?;
    Ok(rows.rows.first().map(|r| Naming {
        kind: crate::store::str_at(r, 0),
        name: crate::store::str_at(r, 1),
        ns: crate::store::str_at(r, 2),
    }))
}

/// A form that defines a given var.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Definer {
    pub id: String,
    pub kind: String,
    /// The name the form itself defines (a generated var's is its generator's).
    pub name: String,
    pub hash: String,
    pub ns: String,
    pub file: String,
    pub line: i64,
}

/// The forms that define var `fqn` (`ns/name`), in id order.
pub fn definers(store: &Store, fqn: &str) -> Result<Vec<Definer>> {
    let rows = store.query(
        "?[id, kind, name, hash, ns, file, line] := *defines{var: $v, id}, *form{id, kind, name, hash, ns, file, line}",
        params([("v", fqn.into())]),
    )?;
    Ok(rows
        .rows
        .iter()
        .map(|r| Definer {
            id: crate::store::str_at(r, 0),
            kind: crate::store::str_at(r, 1),
            name: crate::store::str_at(r, 2),
            hash: crate::store::str_at(r, 3),
            ns: crate::store::str_at(r, 4),
            file: crate::store::str_at(r, 5),
            line: crate::store::int_at(r, 6),
        })
        .collect())
}

/// What a form is and where: its file, namespace, the var it defines and its enclosing form.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Header {
    pub file: String,
    pub ns: String,
    pub name: String,
    /// The var it defines (`ns/name`; empty if none).
    pub fqn: String,
    pub kind: String,
    /// The enclosing form (empty for a top-level form).
    pub parent: String,
    pub line: i64,
}

/// The header of form `id`, if it exists.
pub fn header(store: &Store, id: &str) -> Result<Option<Header>> {
    let rows = store.query(
        "?[file, ns, name, fqn, kind, parent, line] := *form{id: $id, file, ns, name, fqn, kind, parent, line}",
        params([("id", id.into())]),
    )?;
    Ok(rows.rows.first().map(|r| Header {
        file: crate::store::str_at(r, 0),
        ns: crate::store::str_at(r, 1),
        name: crate::store::str_at(r, 2),
        fqn: crate::store::str_at(r, 3),
        kind: crate::store::str_at(r, 4),
        parent: crate::store::str_at(r, 5),
        line: crate::store::int_at(r, 6),
    }))
}

/// Every defined var (`ns/name`) with whether it is private.
pub fn var_privacy(store: &Store) -> Result<Vec<(String, bool)>> {
    let rows = store
        .query("?[var, private] := *defines{var, id}, *form{id, private}", Default::default())?;
    Ok(rows
        .rows
        .iter()
        .map(|r| (crate::store::str_at(r, 0), r[1].get_bool().unwrap_or(false)))
        .collect())
}
