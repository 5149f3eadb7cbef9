//! Forms by id: their text, place and vars.

use crate::store::{params, Result, Store};

/// Whether `id` is a stored top-level form.
pub fn is_top_level(store: &Store, id: &str) -> Result<bool> {
    let rows = store
        .query("?[id] := *form{id, parent}, id = $id, parent == ''", params([("id", id.into())]))?;
    Ok(!rows.rows.is_empty())
}
