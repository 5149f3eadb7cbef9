//! The stored findings of the checks (`crate::checks`) and the reads that place them.

use std::collections::BTreeSet;

use cozo::DataValue;

use crate::store::{column, int_at, params, str_at, Result, Store};

/// One stored finding, placed in its file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Finding {
    /// The form the finding is about (a comment block's child reports its own id).
    pub id: String,
    pub line: i64,
    pub col: i64,
    pub kind: String,
    /// The message without its place.
    pub message: String,
    pub severity: String,
    pub ns: String,
    pub file: String,
    /// The top-level form whose check reported it.
    pub report: String,
}

fn names(nss: &BTreeSet<String>) -> DataValue {
    column(nss.iter().map(|n| n.as_str().into()))
}

/// The findings in the namespaces `nss` (`None`: every namespace); with `report`, only those
/// reported by that top-level form (and only when `nss` is given). One read, whatever the scope.
pub fn findings(
    store: &Store,
    nss: Option<&BTreeSet<String>>,
    report: Option<&str>,
) -> Result<Vec<Finding>> {
    const COLS: &str = "id, line, col, kind, message, severity, ns, file, report";
    // Places are stored relative to the form's first line.
    const ROW: &str = "*diagnostic{id, line: below, col, kind, message, severity, ns, file, report}, *form{id, line: first}, line = first + below";
    let rows = match (report, nss) {
        (Some(id), Some(nss)) => store.query(
            &format!("nss[ns] <- $nss ?[{COLS}] := nss[ns], {ROW}, report == $id"),
            params([("id", id.into()), ("nss", names(nss))]),
        )?,
        (None, Some(nss)) => store.query(
            &format!("nss[ns] <- $nss ?[{COLS}] := nss[ns], {ROW}"),
            params([("nss", names(nss))]),
        )?,
        (_, None) => store.query(&format!("?[{COLS}] := {ROW}"), Default::default())?,
    };
    Ok(rows
        .rows
        .iter()
        .map(|r| Finding {
            id: str_at(r, 0),
            line: int_at(r, 1),
            col: int_at(r, 2),
            kind: str_at(r, 3),
            message: str_at(r, 4),
            severity: str_at(r, 5),
            ns: str_at(r, 6),
            file: str_at(r, 7),
            report: str_at(r, 8),
        })
        .collect())
}

/// The require edges `(ns, lib)`: all of them (`None`), or those reachable from `nss`.
pub fn require_edges(
    store: &Store,
    from: Option<&BTreeSet<String>>,
) -> Result<Vec<(String, String)>> {
    let rows = match from {
        Some(nss) => store.query(
            "start[n] <- $nss
             reach[n] := start[n]
             reach[m] := reach[n], *ns_require{ns: n, lib: m}
             ?[ns, lib] := reach[ns], *ns_require{ns, lib}",
            params([("nss", names(nss))]),
        )?,
        None => store.query("?[ns, lib] := *ns_require{ns, lib}", Default::default())?,
    };
    Ok(rows.rows.iter().map(|r| (str_at(r, 0), str_at(r, 1))).collect())
}

/// The files that declare the namespaces `nss`: `(ns, file)`.
pub fn declaring_files_of(store: &Store, nss: &BTreeSet<String>) -> Result<Vec<(String, String)>> {
    let rows = store.query(
        "nss[n] <- $nss ?[ns, file] := nss[ns], *ns_decl{ns, file}",
        params([("nss", names(nss))]),
    )?;
    Ok(rows.rows.iter().map(|r| (str_at(r, 0), str_at(r, 1))).collect())
}

/// A top-level form that may require a namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequiringForm {
    /// Its position among the file's top-level forms.
    pub pos: i64,
    pub id: String,
    pub line: i64,
    pub col: i64,
    pub source: String,
}

/// The top-level forms of `file` that are its first form, an `ns` form, or a call whose head
/// is one of `heads`, in file order.
pub fn requiring_forms(store: &Store, file: &str, heads: &[String]) -> Result<Vec<RequiringForm>> {
    let rows = store.query(
        "?[pos, id, line, col, source] := *form_at{file: $f, pos, id}, *form{id, parent, kind, head, line, col, source}, parent == '', or(pos == 0, kind == 'ns', is_in(head, $heads))
         :order pos",
        params([("f", file.into()), ("heads", column(heads.iter().map(|h| h.as_str().into())))]),
    )?;
    Ok(rows
        .rows
        .iter()
        .map(|r| RequiringForm {
            pos: int_at(r, 0),
            id: str_at(r, 1),
            line: int_at(r, 2),
            col: int_at(r, 3),
            source: str_at(r, 4),
        })
        .collect())
}
