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
