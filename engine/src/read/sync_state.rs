//! The directory sync's bookkeeping (`formdb-sync`): the hash each path had when the directory and the store were last in step, persisted in the
//! store itself (relation `sync_state`, created on first use, keyed by the directory) so a
//! restart after `kill -9` can tell "changed on disk" from "changed in the store".
//!
//! Beside it, `sync_base`: the text both sides had then, for the Clojure files, so a path changed
//! on both sides is merged form by form (`merge`) instead of file by file. Its cost is one copy
//! of each synced Clojure file's text in the store, written only when the agreed text moves.
//!
//! `sync_origin`: the directory the store was last imported from or synced with, which writers
//! outside `formdb up` write their changes back to.
//!
//! And `sync_intent`: the hash about to be written to the directory, persisted before
//! the write and dropped with the `sync_state` rows written after it. A crash between the write
//! and those rows leaves the intent, and the next start knows that text on disk is our own
//! write, not someone else's change (which would make it a conflict that the disk wins, undoing
//! store edits that were already acknowledged).

use std::collections::{BTreeMap, HashMap};

use cozo::DataValue;

use crate::change::Change;
use crate::store::{params, str_at, Params, Result, Store};

/// Made with a new store's schema; a store made before them gets them on first use.
pub(crate) const RELATIONS: [(&str, &str); 4] = [
    ("sync_state", ":create sync_state {dir: String, path: String => hash: String}"),
    ("sync_intent", ":create sync_intent {dir: String, path: String => hash: String}"),
    ("sync_base", ":create sync_base {dir: String, path: String => text: Bytes}"),
    ("sync_origin", ":create sync_origin {slot: Int => dir: String}"),
];

/// Create the relations the store does not have yet.
pub fn ensure(store: &Store) -> Result<()> {
    let rels = store.query("::relations", Params::new())?;
    if RELATIONS.iter().all(|(name, _)| rels.rows.iter().any(|r| str_at(r, 0) == *name)) {
        return Ok(());
    }
    for (name, create) in RELATIONS {
        if has_relation(store, name)? {
            continue;
        }
        if let Err(e) = store.write(create, Params::new()) {
            // Another sync may have created it in between.
            if !has_relation(store, name)? {
                return Err(e);
            }
        }
    }
    Ok(())
}

fn has_relation(store: &Store, name: &str) -> Result<bool> {
    let rels = store.query("::relations", Params::new())?;
    Ok(rels.rows.iter().any(|r| str_at(r, 0) == name))
}

/// Every write to the directory that was announced and not confirmed: path → the hash being
/// written (`None`: the file was being removed).
pub fn load_intents(store: &Store, dir: &str) -> Result<HashMap<String, Option<String>>> {
    let rows = store.query(
        "?[path, hash] := *sync_intent{dir: $dir, path, hash}",
        params([("dir", dir.into())]),
    )?;
    Ok(rows
        .rows
        .iter()
        .map(|r| (str_at(r, 0), Some(str_at(r, 1)).filter(|h| !h.is_empty())))
        .collect())
}

/// Announce writes to the directory (one transaction), before making them.
pub fn save_intents(
    store: &Store,
    dir: &str,
    intents: &BTreeMap<String, Option<String>>,
) -> Result<()> {
    if intents.is_empty() {
        return Ok(());
    }
    let rows = intents
        .iter()
        .map(|(path, hash)| {
            DataValue::List(vec![
                dir.into(),
                path.as_str().into(),
                hash.as_deref().unwrap_or("").into(),
            ])
        })
        .collect();
    store.write(
        "?[dir, path, hash] <- $rows :put sync_intent {dir, path => hash}",
        params([("rows", DataValue::List(rows))]),
    )?;
    Ok(())
}

/// The `sync_state` rows that record `in_step` paths (`None`: absent on both sides), as a
/// change to apply with the change that brings them in step: a crash can then never leave a
/// path's store text newer than its record, which the next start would take for a store edit
/// and so for a conflict.
pub fn in_step_change(dir: &str, in_step: &BTreeMap<String, Option<String>>) -> Change {
    let mut rows = Vec::new();
    let mut delete = Vec::new();
    for (path, hash) in in_step {
        match hash {
            Some(h) => rows.push(vec![dir.into(), path.as_str().into(), h.as_str().into()]),
            None => delete.push(vec![dir.into(), path.as_str().into()]),
        }
    }
    Change::Bookkeeping { relation: "sync_state".into(), rows, delete }
}

/// The `sync_base` rows of the same paths: the agreed text where it is known (`None`: the row
/// goes, and a later conflict of that path is decided file by file).
pub fn base_change(dir: &str, bases: &BTreeMap<String, Option<Vec<u8>>>) -> Change {
    let mut rows = Vec::new();
    let mut delete = Vec::new();
    for (path, text) in bases {
        match text {
            Some(t) => {
                rows.push(vec![dir.into(), path.as_str().into(), DataValue::Bytes(t.clone())])
            }
            None => delete.push(vec![dir.into(), path.as_str().into()]),
        }
    }
    Change::Bookkeeping { relation: "sync_base".into(), rows, delete }
}

/// The agreed text of `path`, if it was kept.
pub fn base(store: &Store, dir: &str, path: &str) -> Result<Option<Vec<u8>>> {
    let rows = store.query(
        "?[text] := *sync_base{dir: $dir, path: $path, text}",
        params([("dir", dir.into()), ("path", path.into())]),
    )?;
    Ok(rows.rows.first().and_then(|r| match &r[0] {
        DataValue::Bytes(b) => Some(b.clone()),
        _ => None,
    }))
}

/// The directory writers write back to: the last one imported or synced.
pub fn origin(store: &Store) -> Result<Option<String>> {
    if !has_relation(store, "sync_origin")? {
        return Ok(None);
    }
    let rows = store.query("?[dir] := *sync_origin{slot: 0, dir}", Params::new())?;
    Ok(rows.rows.first().map(|r| str_at(r, 0)))
}

pub fn set_origin(store: &Store, dir: &str) -> Result<()> {
    if origin(store)?.as_deref() == Some(dir) {
        return Ok(());
    }
    store.write(
        "?[slot, dir] <- [[0, $dir]] :put sync_origin {slot => dir}",
        params([("dir", dir.into())]),
    )?;
    Ok(())
}

/// Every path's last synced hash for `dir`.
pub fn load(store: &Store, dir: &str) -> Result<HashMap<String, String>> {
    let rows = store.query(
        "?[path, hash] := *sync_state{dir: $dir, path, hash}",
        params([("dir", dir.into())]),
    )?;
    Ok(rows.rows.iter().map(|r| (str_at(r, 0), str_at(r, 1))).collect())
}

/// Write changed entries (`None`: the path is in step as absent on both sides) and drop the
/// intents of `settled` paths, in one transaction. The bases go in as rows, not as constants
/// of a script (which Cozo copies several times over: a big file's text, written back, was a
/// mount save's peak).
pub fn save(
    store: &Store,
    dir: &str,
    changed: &BTreeMap<String, Option<String>>,
    bases: &BTreeMap<String, Option<Vec<u8>>>,
    settled: &[String],
) -> Result<()> {
    let key = |path: &str| vec![DataValue::from(dir), DataValue::from(path)];
    let mut rows: BTreeMap<String, Vec<Vec<DataValue>>> = BTreeMap::new();
    let mut put =
        |rel: &str, row: Vec<DataValue>| rows.entry(rel.to_string()).or_default().push(row);
    for (path, text) in bases {
        match text {
            Some(t) => {
                let mut row = key(path);
                row.push(DataValue::Bytes(t.clone()));
                put("sync_base", row);
            }
            None => put("-sync_base", key(path)),
        }
    }
    for (path, hash) in changed {
        match hash {
            Some(h) => {
                let mut row = key(path);
                row.push(h.as_str().into());
                put("sync_state", row);
            }
            None => put("-sync_state", key(path)),
        }
    }
    for path in settled {
        put("-sync_intent", key(path));
    }
    store.put_rows(rows)
}
