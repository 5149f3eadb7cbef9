//! The directory sync's bookkeeping (`formdb-sync`): the hash each path had when the directory and the store were last in step, persisted in the
//! store itself (relation `sync_state`, created on first use, keyed by the directory) so a
//! restart after `kill -9` can tell "changed on disk" from "changed in the store".
//!
//! Beside it, `sync_base`: the text both sides had then, for the Clojure files, so a path changed
//! on both sides is merged form by form (`merge`) instead of file by file. Its cost is one copy
//! of each synced Clojure file's text in the store, written only when the agreed text moves,
//! packed ([`crate::packed`]: a quarter of its size). A packed text over [`BASE_PART`] is kept
//! in parts ([`base_rows`]): Cozo and SQLite copy a value
//! several times over as they write it, and a 50 MB file's text written back as one value was
//! its mount save's peak (+207 MB in the write, on top of the save's own).
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
use rayon::prelude::*;

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
            Some(h) => {
                let mut row = key(dir, path);
                row.push(h.as_str().into());
                rows.push(row);
            }
            None => delete.push(key(dir, path)),
        }
    }
    Change::Bookkeeping { relation: "sync_state".into(), rows, delete }
}

/// The `sync_base` rows of the same paths: the agreed text where it is known (`None`: the row
/// goes, and a later conflict of that path is decided file by file).
pub fn base_change(
    store: &Store,
    dir: &str,
    bases: &BTreeMap<String, Option<Vec<u8>>>,
) -> Result<Change> {
    let (rows, delete) = base_rows(store, dir, bases)?;
    Ok(Change::Bookkeeping { relation: "sync_base".into(), rows, delete })
}

/// A base longer than this is kept in parts of this size: a head row under its path holding
/// [`PARTED`] and how many parts follow, and a row per part under the path, a NUL and the
/// part's number (no path holds a NUL).
pub const BASE_PART: usize = 1 << 20;

/// What a parted base's head row starts with. No packed text starts so (it starts with
/// 0xFE), so a head is never taken for a text.
const PARTED: &[u8] = b"\xFFformdb base in parts: ";

/// Rows of `sync_base` in schema order, or its keys.
type Rows = Vec<Vec<DataValue>>;

/// The key of a path's row in a relation keyed by directory and path.
fn key(dir: &str, path: &str) -> Vec<DataValue> {
    vec![DataValue::from(dir), DataValue::from(path)]
}

fn part_key(path: &str, part: usize) -> String {
    format!("{path}\0{part:06}")
}

/// How many parts a base's head row says follow, if it is a head.
fn parts_of(value: &[u8]) -> Option<usize> {
    std::str::from_utf8(value.strip_prefix(PARTED)?).ok()?.parse().ok()
}

/// The `sync_base` rows that keep `bases` (whole, or a head and its parts) and the keys to
/// delete: the paths whose base goes, and the parts an older, longer base of a path left that
/// the new one does not overwrite.
fn base_rows(
    store: &Store,
    dir: &str,
    bases: &BTreeMap<String, Option<Vec<u8>>>,
) -> Result<(Rows, Rows)> {
    let old_parts = stored_part_counts(store, dir, bases.keys())?;
    let (mut rows, mut delete) = (Vec::new(), Vec::new());
    // Packed on every core, then parted if still long (a packed value never starts as a head
    // does). After an import the bases are every file of the tree: recording them took
    // 383–573 ms against 447–592 ms packed one by one at a million lines (six runs alternating),
    // a tail of the import that nothing else runs beside.
    let packed: Vec<(&String, Option<Vec<u8>>)> = bases
        .par_iter()
        .map(|(path, text)| (path, text.as_deref().map(crate::packed::pack)))
        .collect();
    for (path, packed) in packed {
        let parts = match packed {
            Some(t) if t.len() <= BASE_PART => {
                let mut row = key(dir, path);
                row.push(DataValue::Bytes(t));
                rows.push(row);
                0
            }
            Some(t) => {
                let mut head = PARTED.to_vec();
                let parts = t.len().div_ceil(BASE_PART);
                head.extend_from_slice(parts.to_string().as_bytes());
                let mut row = key(dir, path);
                row.push(DataValue::Bytes(head));
                rows.push(row);
                for (i, part) in t.chunks(BASE_PART).enumerate() {
                    let mut row = key(dir, &part_key(path, i + 1));
                    row.push(DataValue::Bytes(part.to_vec()));
                    rows.push(row);
                }
                parts
            }
            None => {
                delete.push(key(dir, path));
                0
            }
        };
        let old = old_parts.get(path.as_str()).copied().unwrap_or(0);
        delete.extend((parts + 1..=old).map(|i| key(dir, &part_key(path, i))));
    }
    Ok((rows, delete))
}

/// How many parts the stored bases of `paths` have (parted ones only).
fn stored_part_counts<'p>(
    store: &Store,
    dir: &str,
    paths: impl Iterator<Item = &'p String>,
) -> Result<HashMap<String, usize>> {
    let paths: Vec<DataValue> = paths.map(|p| DataValue::List(vec![p.as_str().into()])).collect();
    if paths.is_empty() {
        return Ok(HashMap::new());
    }
    let rows = store.query(
        "paths[path] <- $paths ?[path, text] := paths[path], *sync_base{dir: $dir, path, text}",
        params([("dir", dir.into()), ("paths", DataValue::List(paths))]),
    )?;
    Ok(rows
        .rows
        .iter()
        .filter_map(|r| match &r[1] {
            DataValue::Bytes(b) => Some((str_at(r, 0), parts_of(b)?)),
            _ => None,
        })
        .collect())
}

/// The agreed text of `path`, if it was kept. A parted one missing a part (which no write
/// leaves) counts as not kept: the path's next conflict is then decided file by file.
pub fn base(store: &Store, dir: &str, path: &str) -> Result<Option<Vec<u8>>> {
    let rows = store.query(
        "?[text] := *sync_base{dir: $dir, path: $path, text}",
        params([("dir", dir.into()), ("path", path.into())]),
    )?;
    let Some(DataValue::Bytes(head)) =
        rows.rows.into_iter().next().and_then(|r| r.into_iter().next())
    else {
        return Ok(None);
    };
    let Some(parts) = parts_of(&head) else {
        return Ok(Some(crate::packed::unpack(head)));
    };
    let keys: Vec<DataValue> =
        (1..=parts).map(|i| DataValue::List(vec![part_key(path, i).into()])).collect();
    let rows = store.query(
        "keys[path] <- $keys ?[path, text] := keys[path], *sync_base{dir: $dir, path, text}",
        params([("dir", dir.into()), ("keys", DataValue::List(keys))]),
    )?;
    if rows.rows.len() != parts {
        return Ok(None);
    }
    let mut found: Vec<(String, Vec<u8>)> = rows
        .rows
        .into_iter()
        .filter_map(|r| {
            let mut r = r.into_iter();
            match (r.next(), r.next()) {
                (Some(DataValue::Str(p)), Some(DataValue::Bytes(b))) => Some((p.to_string(), b)),
                _ => None,
            }
        })
        .collect();
    found.sort_by(|a, b| a.0.cmp(&b.0));
    let mut text = Vec::with_capacity(found.iter().map(|(_, b)| b.len()).sum());
    for (_, part) in found {
        text.extend_from_slice(&part);
    }
    Ok(Some(crate::packed::unpack(text)))
}

/// Every stored base packed ([`crate::packed`]), for a store written before bases were (the
/// upgrade to schema 10): each is read whole and written again, a few hundred paths a
/// transaction. A packed base reads as its text, so the step is safe to repeat.
pub(crate) fn repack_bases(store: &Store) -> Result<()> {
    if !has_relation(store, "sync_base")? {
        return Ok(());
    }
    let rows = store.query("?[dir, path] := *sync_base{dir, path}", Params::new())?;
    let mut by_dir: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for r in &rows.rows {
        let path = str_at(r, 1);
        // A part is read with its head.
        if !path.contains('\0') {
            by_dir.entry(str_at(r, 0)).or_default().push(path);
        }
    }
    for (dir, paths) in by_dir {
        let mut bases = BTreeMap::new();
        let mut bytes = 0;
        for (i, path) in paths.iter().enumerate() {
            // A parted base missing a part is left as it is: it reads as not kept.
            if let Some(text) = base(store, &dir, path)? {
                bytes += text.len();
                bases.insert(path.clone(), Some(text));
            }
            if bases.len() == 256 || bytes > REPACK_BYTES || i + 1 == paths.len() {
                let (rows, delete) = base_rows(store, &dir, &std::mem::take(&mut bases))?;
                store.put_rows(BTreeMap::from([
                    ("sync_base".to_string(), rows),
                    ("-sync_base".to_string(), delete),
                ]))?;
                bytes = 0;
            }
        }
    }
    Ok(())
}

/// The most text [`repack_bases`] holds unpacked before it writes what it packed.
const REPACK_BYTES: usize = 32 << 20;

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
    let mut rows: BTreeMap<String, Vec<Vec<DataValue>>> = BTreeMap::new();
    let (base_rows, base_deletes) = base_rows(store, dir, bases)?;
    if !base_rows.is_empty() {
        rows.insert("sync_base".into(), base_rows);
    }
    if !base_deletes.is_empty() {
        rows.insert("-sync_base".into(), base_deletes);
    }
    let mut put =
        |rel: &str, row: Vec<DataValue>| rows.entry(rel.to_string()).or_default().push(row);
    for (path, hash) in changed {
        match hash {
            Some(h) => {
                let mut row = key(dir, path);
                row.push(h.as_str().into());
                put("sync_state", row);
            }
            None => put("-sync_state", key(dir, path)),
        }
    }
    for path in settled {
        put("-sync_intent", key(dir, path));
    }
    store.put_rows(rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::change::{self, ChangeSet};

    const DIR: &str = "/work/tree";

    /// The `sync_base` keys of `DIR`, parts included.
    fn keys(store: &Store) -> Vec<String> {
        let rows = store
            .query("?[path] := *sync_base{dir: $dir, path}", params([("dir", DIR.into())]))
            .unwrap();
        let mut keys: Vec<String> = rows.rows.iter().map(|r| str_at(r, 0)).collect();
        keys.sort();
        keys
    }

    fn put(store: &Store, path: &str, text: Option<Vec<u8>>) {
        let bases = BTreeMap::from([(path.to_string(), text)]);
        save(store, DIR, &BTreeMap::new(), &bases, &[]).unwrap();
    }

    #[test]
    fn a_long_base_is_kept_in_parts_and_the_parts_a_longer_one_left_go() {
        let store = Store::open_in_memory().unwrap();
        ensure(&store).unwrap();
        let path = "src/app/big.clj";
        // Bytes that do not pack (xorshift), so a long one stays long once packed.
        let mut state = 0x9E37_79B9_7F4A_7C15_u64;
        let long: Vec<u8> = (0..BASE_PART * 3 + 17)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        put(&store, path, Some(long.clone()));
        assert_eq!(base(&store, DIR, path).unwrap(), Some(long.clone()));
        assert_eq!(keys(&store).len(), 5, "a head and four parts: {:?}", keys(&store));

        let shorter = long[..BASE_PART + 5].to_vec();
        put(&store, path, Some(shorter.clone()));
        assert_eq!(base(&store, DIR, path).unwrap(), Some(shorter));
        assert_eq!(keys(&store).len(), 3, "the third and fourth parts went");

        let small = b"(ns app.big)\n".to_vec();
        put(&store, path, Some(small.clone()));
        assert_eq!(base(&store, DIR, path).unwrap(), Some(small));
        assert_eq!(keys(&store), vec![path.to_string()]);

        // A short text that starts as a head does is never read as one.
        let like_a_head = [PARTED, b"7"].concat();
        put(&store, path, Some(like_a_head.clone()));
        assert_eq!(base(&store, DIR, path).unwrap(), Some(like_a_head));

        put(&store, path, Some(long.clone()));
        put(&store, path, None);
        assert_eq!(base(&store, DIR, path).unwrap(), None);
        assert!(keys(&store).is_empty(), "every part went with the base: {:?}", keys(&store));

        // The sync's own change set (a disk text taken into the store) keeps it the same way.
        let bases = BTreeMap::from([(path.to_string(), Some(long.clone()))]);
        let set = ChangeSet {
            author: "sync".into(),
            op: "sync".into(),
            changes: vec![base_change(&store, DIR, &bases).unwrap()],
        };
        change::apply(&store, &set).unwrap();
        assert_eq!(base(&store, DIR, path).unwrap(), Some(long));
        assert_eq!(keys(&store).len(), 5);
    }

    /// The bytes of `path`'s stored base row as they lie in the store.
    fn stored_value(store: &Store, path: &str) -> Vec<u8> {
        let rows = store
            .query(
                "?[text] := *sync_base{dir: $dir, path: $path, text}",
                params([("dir", DIR.into()), ("path", path.into())]),
            )
            .unwrap();
        rows.rows[0][0].get_bytes().unwrap().to_vec()
    }

    #[test]
    fn a_base_is_kept_packed_and_one_kept_before_packing_reads_as_it_was() {
        let store = Store::open_in_memory().unwrap();
        ensure(&store).unwrap();
        let path = "src/app/core.clj";
        let text: Vec<u8> = (0..400)
            .map(|i| format!("(defn f{i}\n  \"Doc {i}.\"\n  [x]\n  (+ x {i}))\n\n"))
            .collect::<String>()
            .into_bytes();
        put(&store, path, Some(text.clone()));
        assert_eq!(base(&store, DIR, path).unwrap(), Some(text.clone()));
        let stored = stored_value(&store, path).len();
        assert!(stored * 4 < text.len(), "{stored} bytes stored for a text of {}", text.len());

        // A row a formdb before packing wrote holds the text itself.
        let old = b"(ns app.core)\n\n(def x 1)\n".to_vec();
        store
            .write(
                "?[dir, path, text] <- [[$dir, $path, $text]] :put sync_base {dir, path => text}",
                params([
                    ("dir", DIR.into()),
                    ("path", path.into()),
                    ("text", DataValue::Bytes(old.clone())),
                ]),
            )
            .unwrap();
        assert_eq!(stored_value(&store, path), old);
        assert_eq!(base(&store, DIR, path).unwrap(), Some(old));
    }
}
