//! Drafts: texts saved to a path that could not be stored as forms.

use crate::store::{params, str_at, Params, Result, Store};

/// Whether `path` has a draft.
pub fn exists(store: &Store, path: &str) -> Result<bool> {
    let rows =
        store.query("?[path] := *draft{path}, path = $path", params([("path", path.into())]))?;
    Ok(!rows.rows.is_empty())
}

/// When the draft of `path` was saved, if it has one.
pub fn saved_at(store: &Store, path: &str) -> Result<Option<f64>> {
    let rows = store.query("?[at] := *draft{path: $path, at}", params([("path", path.into())]))?;
    Ok(rows.rows.first().and_then(|r| r[0].get_float()))
}

/// Every draft's path and when it was saved.
pub fn saved_times(store: &Store) -> Result<Vec<(String, f64)>> {
    let rows = store.query("?[path, at] := *draft{path, at}", Params::new())?;
    Ok(rows.rows.iter().map(|r| (str_at(r, 0), r[1].get_float().unwrap_or(0.0))).collect())
}

/// A stored draft without its bytes: where, whose and why.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Header {
    pub path: String,
    pub user: String,
    /// Why the text was not stored as forms.
    pub error: String,
    pub line: i64,
    pub col: i64,
}

/// Every draft's header. A draft may be a whole big save (50 MB kept because one bracket was
/// left open): a caller that lists them reads no bytes.
pub fn headers(store: &Store) -> Result<Vec<Header>> {
    let rows = store.query(
        "?[path, user, error, line, col] := *draft{path, user, error, line, col}",
        Params::new(),
    )?;
    Ok(rows
        .rows
        .iter()
        .map(|r| Header {
            path: str_at(r, 0),
            user: str_at(r, 1),
            error: str_at(r, 2),
            line: crate::store::int_at(r, 3),
            col: crate::store::int_at(r, 4),
        })
        .collect())
}

/// The namespace the draft of `path` declares, found as a streamed import guesses a file's
/// ([`crate::forms::first_ns_decl`]: a scan of its first forms, the `ns` form parsed alone). A
/// draft did not parse: a whole parse of a big one to find its `ns` form took gigabytes.
pub fn declared_ns(store: &Store, path: &str) -> Result<Option<String>> {
    let rows =
        store.query("?[bytes] := *draft{path: $path, bytes}", params([("path", path.into())]))?;
    let Some(bytes) = rows.rows.first().and_then(|r| r[0].get_bytes()) else { return Ok(None) };
    let text = String::from_utf8_lossy(bytes);
    Ok(crate::forms::first_ns_decl(&text).map(|d| d.name).filter(|n| !n.is_empty()))
}

/// Every draft as the change model holds it (with its base text), in path order.
pub fn stored(store: &Store) -> Result<Vec<crate::change::Draft>> {
    stored_rows(store, "?[path, user, bytes, error, line, col, base] := *draft{path, user, bytes, error, line, col, base} :order path", Params::new())
}

/// The draft of `path` as the change model holds it, if it has one.
pub fn stored_one(store: &Store, path: &str) -> Result<Option<crate::change::Draft>> {
    Ok(stored_rows(
        store,
        "?[path, user, bytes, error, line, col, base] := path = $path, *draft{path, user, bytes, error, line, col, base}",
        params([("path", path.into())]),
    )?
    .pop())
}

fn stored_rows(store: &Store, script: &str, p: Params) -> Result<Vec<crate::change::Draft>> {
    let bytes_at = |r: &[cozo::DataValue], i: usize| {
        r.get(i).and_then(|v| v.get_bytes()).map(<[u8]>::to_vec).unwrap_or_default()
    };
    let rows = store.query(script, p)?;
    Ok(rows
        .rows
        .iter()
        .map(|r| crate::change::Draft {
            path: str_at(r, 0),
            user: str_at(r, 1),
            bytes: bytes_at(r, 2),
            error: str_at(r, 3),
            line: crate::store::int_at(r, 4) as u32,
            col: crate::store::int_at(r, 5) as u32,
            base: bytes_at(r, 6),
        })
        .collect())
}

/// Every path with a draft, in path order.
pub fn paths(store: &Store) -> Result<Vec<String>> {
    let rows = store.query("?[path] := *draft{path} :order path", Params::new())?;
    Ok(rows.rows.iter().map(|r| str_at(r, 0)).collect())
}
