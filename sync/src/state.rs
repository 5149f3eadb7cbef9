//! The hash each path had when the directory and the store were last in step, persisted in the
//! store itself (relation `sync_state`, created on first use, keyed by the directory) so a
//! restart after `kill -9` can tell "changed on disk" from "changed in the store".

use std::collections::{BTreeMap, HashMap};

use cozo::DataValue;
use formdb_engine::store::{params, str_at, Params, Result, Store};

const CREATE: &str = ":create sync_state {dir: String, path: String => hash: String}";

/// Create the relation if the store does not have it yet.
pub fn ensure(store: &Store) -> Result<()> {
    if has_relation(store)? {
        return Ok(());
    }
    if let Err(e) = store.write(CREATE, Params::new()) {
        // Another sync may have created it in between.
        if !has_relation(store)? {
            return Err(e);
        }
    }
    Ok(())
}

fn has_relation(store: &Store) -> Result<bool> {
    let rels = store.query("::relations", Params::new())?;
    Ok(rels.rows.iter().any(|r| str_at(r, 0) == "sync_state"))
}

/// Every path's last synced hash for `dir`.
pub fn load(store: &Store, dir: &str) -> Result<HashMap<String, String>> {
    let rows = store.query(
        "?[path, hash] := *sync_state{dir: $dir, path, hash}",
        params([("dir", dir.into())]),
    )?;
    Ok(rows.rows.iter().map(|r| (str_at(r, 0), str_at(r, 1))).collect())
}

/// Write changed entries (`None`: the path is in step as absent on both sides) in one
/// transaction.
pub fn save(store: &Store, dir: &str, changed: &BTreeMap<String, Option<String>>) -> Result<()> {
    let mut puts = Vec::new();
    let mut rms = Vec::new();
    for (path, hash) in changed {
        match hash {
            Some(h) => puts.push(DataValue::List(vec![
                dir.into(),
                path.as_str().into(),
                h.as_str().into(),
            ])),
            None => rms.push(DataValue::List(vec![dir.into(), path.as_str().into()])),
        }
    }
    let mut script = String::new();
    let mut p = Params::new();
    if !puts.is_empty() {
        script.push_str("{?[dir, path, hash] <- $puts :put sync_state {dir, path => hash}}\n");
        p.insert("puts".into(), DataValue::List(puts));
    }
    if !rms.is_empty() {
        script.push_str("{?[dir, path] <- $rms :rm sync_state {dir, path}}\n");
        p.insert("rms".into(), DataValue::List(rms));
    }
    if script.is_empty() {
        return Ok(());
    }
    store.write(&script, p)?;
    Ok(())
}
