//! Bringing a store of an earlier schema to [`SCHEMA_VERSION`] when it is opened.
//!
//! Schema 5 → 6 stores each text once: a form's `canonical` is empty where it equals its
//! `source`, the current version of a live form keeps no `source` of its own (it is the form's
//! `leading` + `source`), and the full-text index (`search_text` and its FTS index, another copy
//! of all source) is gone: search scans `form`. The SQLite file is then given a new store's
//! pages (16 KiB) and compacted.
//!
//! Each step can be interrupted: the rows and the version number move in one transaction, and
//! dropping the index and relaying the file are each safe to repeat.

use std::path::Path;

use cozo::ScriptMutability;

use super::{Result, Store, StoreError, PAGE_SIZE, SCHEMA_VERSION};

/// The oldest schema this formdb brings forward.
pub(super) const OLDEST: i64 = 5;

/// Bring the store from schema `found` (at least [`OLDEST`]) to [`SCHEMA_VERSION`]. Runs under
/// the exclusive lock `open` holds.
pub(super) fn migrate(store: &Store, found: i64) -> Result<()> {
    if found == 5 {
        five_to_six(store)?;
    }
    if let Some(file) = &store.sqlite_file {
        relay_file(file).map_err(|e| StoreError::Open {
            path: file.clone(),
            message: format!("compacting the store after its upgrade: {e}"),
        })?;
    }
    Ok(())
}

/// A failed step of the upgrade to schema 6, named.
fn upgrade_failed(step: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Query { script: format!("the upgrade to schema 6: {step}"), message: e.to_string() }
}

fn five_to_six(store: &Store) -> Result<()> {
    let existing = store
        .db
        .run_script("::relations", Default::default(), ScriptMutability::Immutable)
        .map_err(|e| upgrade_failed("`::relations`", e))?;
    if existing.rows.iter().any(|r| r.first().and_then(|v| v.get_str()) == Some("search_text")) {
        for op in ["::fts drop search_text:fts", "::remove search_text"] {
            store
                .db
                .run_script(op, Default::default(), ScriptMutability::Mutable)
                .map_err(|e| upgrade_failed(&format!("`{op}`"), e))?;
        }
    }
    let mut p = super::Params::new();
    p.insert("v".into(), SCHEMA_VERSION.to_string().into());
    store
        .db
        .run_script(
            "{?[id, canonical] := *form{id, source, canonical: c}, c == source, canonical = ''
              :update form {id => canonical}}
             {last[id, max(v)] := *version{id, v}
              ?[id, v, source] := last[id, v], *version{id, v, op, source: s}, op != 'delete',
                  *form{id, leading, source: now}, s == concat(leading, now), source = ''
              :update version {id, v => source}}
             {?[key, value] <- [['schema_version', $v]] :put meta {key => value}}
             {?[key] <- [['search_dirty']] :rm meta {key}}",
            p,
            ScriptMutability::Mutable,
        )
        .map_err(|e| upgrade_failed("the rewrite of texts stored twice", e))?;
    Ok(())
}

/// Lay the file out on a new store's pages ([`PAGE_SIZE`]) and compact it: `VACUUM` writes
/// every row again, packed.
fn relay_file(file: &Path) -> std::result::Result<(), sqlite::Error> {
    sqlite::open(file)?.execute(format!("PRAGMA page_size = {PAGE_SIZE}; VACUUM;"))
}
