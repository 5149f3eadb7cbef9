//! Bringing a store of an earlier schema to [`SCHEMA_VERSION`] when it is opened.
//!
//! Schema 5 → 6 stores each text once: a form's `canonical` is empty where it equals its
//! `source`, the current version of a live form keeps no `source` of its own (it is the form's
//! `leading` + `source`), and the full-text index (`search_text` and its FTS index, another copy
//! of all source) is gone: search scans `form`. The SQLite file is then given a new store's
//! pages (16 KiB) and compacted.
//!
//! Schema 6 → 7 keeps a top-level form's call sites in a column of its `form` row (`sites`,
//! see `sites::stored`) instead of a `call_site` row per call.
//!
//! Schema 7 → 8 keeps a top-level form's `leading` and `source` in its `form_at` row too, so
//! that a file's text is read as a range of narrow rows.
//!
//! Schema 8 → 9 drops `ns_form` (a namespace's forms by position): its one reader, a
//! namespace's tests, reads the namespace's files' places instead, and a 1 M-line import
//! wrote one row fewer per form.
//!
//! Schema 9 → 10 packs the texts kept whole (`crate::packed`): the sync's agreed texts
//! (`sync_base`), a copy of every synced file, take a quarter of the bytes; and it keeps each
//! parsed file's text whole and packed (`file_text`), so a whole file reads as one value; and
//! `form_at` keeps the lengths of a top-level form's texts instead of the texts (each was the
//! form's own a second time).
//!
//! Each step can be interrupted: the rows and the step's progress move in one transaction, and
//! dropping the index and relaying the file are each safe to repeat. Schema 9 → 10 moves its
//! rows in several transactions and its progress last; each of its parts is safe to repeat
//! (`a_schema_9_store_stopped_half_way_through_its_upgrade_is_upgraded_at_the_next_open`).
//!
//! Before any row moves, the store says [`SCHEMA_VERSION`] and keeps the schema its rows are at
//! under [`UPGRADING_FROM`], which each step moves on and the end removes. So a formdb of an
//! older schema refuses a store whose upgrade was stopped (it would read packed texts as text),
//! and this one finishes the upgrade at the next open.

use std::collections::HashMap;
use std::path::Path;

use cozo::ScriptMutability;

use cozo::DataValue;

use super::{column, int_at, params, str_at, Result, Store, StoreError, PAGE_SIZE, SCHEMA_VERSION};
use crate::change::FILE_TEXT_MAX;
use crate::sites::{self, Site};
use crate::syntax::Pos;

/// The oldest schema this formdb brings forward.
pub(super) const OLDEST: i64 = 5;

/// The `meta` key of a store whose upgrade has begun and not ended: the schema its rows are at.
pub(super) const UPGRADING_FROM: &str = "upgrading_from";

/// Bring the store from schema `found` (at least [`OLDEST`]) to [`SCHEMA_VERSION`]. Runs under
/// the exclusive lock `open` holds.
pub(super) fn migrate(store: &Store, found: i64) -> Result<()> {
    let mut p = super::Params::new();
    p.insert("v".into(), SCHEMA_VERSION.to_string().into());
    p.insert("from".into(), found.to_string().into());
    store
        .db
        .run_script(
            &format!(
                "?[key, value] <- [['schema_version', $v], ['{UPGRADING_FROM}', $from]]
                 :put meta {{key => value}}"
            ),
            p,
            ScriptMutability::Mutable,
        )
        .map_err(|e| failed(SCHEMA_VERSION, "marking the store as being upgraded", e))?;
    if found <= 5 {
        five_to_six(store)?;
    }
    if found <= 6 {
        six_to_seven(store)?;
    }
    if found <= 7 {
        seven_to_eight(store)?;
    }
    if found <= 8 {
        eight_to_nine(store)?;
    }
    if found <= 9 {
        nine_to_ten(store)?;
    }
    if let Some(file) = &store.sqlite_file {
        relay_file(file).map_err(|e| StoreError::Open {
            path: file.clone(),
            message: format!("compacting the store after its upgrade: {e}"),
        })?;
    }
    store
        .db
        .run_script(
            &format!("?[key] <- [['{UPGRADING_FROM}']] :rm meta {{key}}"),
            Default::default(),
            ScriptMutability::Mutable,
        )
        .map_err(|e| failed(SCHEMA_VERSION, "ending the upgrade", e))?;
    Ok(())
}

/// A failed step of the upgrade to schema `to`, named.
fn failed(to: i64, step: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Query {
        script: format!("the upgrade to schema {to}: {step}"),
        message: e.to_string(),
    }
}

fn upgrade_failed(step: &str, e: impl std::fmt::Display) -> StoreError {
    failed(6, step, e)
}

/// Whether the store still has relation `name`, for the step to schema `to` that drops it (a
/// step stopped half-way dropped it already).
fn has_relation(store: &Store, to: i64, name: &str) -> Result<bool> {
    let existing = store
        .db
        .run_script("::relations", Default::default(), ScriptMutability::Immutable)
        .map_err(|e| failed(to, "`::relations`", e))?;
    Ok(existing.rows.iter().any(|r| r.first().and_then(|v| v.get_str()) == Some(name)))
}

/// Record that the store's rows are at schema `v`, for a step whose rows moved in their own
/// transactions before.
fn set_progress(store: &Store, v: i64) -> Result<()> {
    let mut p = super::Params::new();
    p.insert("v".into(), v.to_string().into());
    store
        .db
        .run_script(
            &format!("?[key, value] <- [['{UPGRADING_FROM}', $v]] :put meta {{key => value}}"),
            p,
            ScriptMutability::Mutable,
        )
        .map_err(|e| failed(v, "the upgrade's progress", e))?;
    Ok(())
}

fn five_to_six(store: &Store) -> Result<()> {
    if has_relation(store, 6, "search_text")? {
        for op in ["::fts drop search_text:fts", "::remove search_text"] {
            store
                .db
                .run_script(op, Default::default(), ScriptMutability::Mutable)
                .map_err(|e| upgrade_failed(&format!("`{op}`"), e))?;
        }
    }
    let mut p = super::Params::new();
    p.insert("v".into(), "6".into());
    store
        .db
        .run_script(
            "{?[id, canonical] := *form{id, source, canonical: c}, c == source, canonical = ''
              :update form {id => canonical}}
             {last[id, max(v)] := *version{id, v}
              ?[id, v, source] := last[id, v], *version{id, v, op, source: s}, op != 'delete',
                  *form{id, leading, source: now}, s == concat(leading, now), source = ''
              :update version {id, v => source}}
             {?[key, value] <- [['upgrading_from', $v]] :put meta {key => value}}
             {?[key] <- [['search_dirty']] :rm meta {key}}",
            p,
            ScriptMutability::Mutable,
        )
        .map_err(|e| upgrade_failed("the rewrite of texts stored twice", e))?;
    Ok(())
}

/// The columns of `form` in schema 6 (all but `sites`).
const FORM_COLS_6: &str = "id, file, ns, pos, parent, kind, head, name, fqn, dispatch, doc, arglists, leading, source, canonical, line, col, end_line, end_col, hash, private, dynamic, deprecated, test, export, macro, platforms, purity, rhash, callees";

/// Forms whose call sites move per transaction: bounds what the upgrade holds at once.
const FORMS_A_STEP: usize = 4096;

/// `form` gets its `sites` column, filled from `call_site`, which then goes. Repeatable: a
/// store stopped half-way is still schema 6 with its `call_site` rows, and starts over.
fn six_to_seven(store: &Store) -> Result<()> {
    let run = |step: &str, script: &str, p: super::Params| {
        store.db.run_script(script, p, ScriptMutability::Mutable).map_err(|e| failed(7, step, e))
    };
    let schema = super::SCHEMA
        .iter()
        .find_map(|s| s.strip_prefix(":create form {"))
        .expect("the schema creates `form`");
    run(
        "the `sites` column of `form`",
        &format!("?[{FORM_COLS_6}, sites] := *form{{{FORM_COLS_6}}}, sites = '' :replace form {{{schema}"),
        Default::default(),
    )?;
    let with_sites =
        run("the forms with call sites", "?[from] := *call_site{from}", Default::default())?;
    let ids: Vec<DataValue> = with_sites.rows.into_iter().map(|mut r| r.swap_remove(0)).collect();
    for chunk in ids.chunks(FORMS_A_STEP) {
        let rows = run(
            "reading call sites",
            "ids[id] <- $ids
             ?[from, line, col, to, argc, outer, load, head] := ids[from],
                 *call_site{from, line, col, to, argc, outer, load, head}",
            params([("ids", column(chunk.iter().cloned()))]),
        )?;
        let callees = run(
            "reading callees",
            "ids[id] <- $ids ?[id, callees] := ids[id], *form{id, callees}",
            params([("ids", column(chunk.iter().cloned()))]),
        )?;
        let callees: HashMap<String, Vec<String>> = callees
            .rows
            .iter()
            .map(|r| {
                let list = r[1].get_slice().unwrap_or_default();
                (
                    str_at(r, 0),
                    list.iter().map(|v| v.get_str().unwrap_or_default().to_string()).collect(),
                )
            })
            .collect();
        let mut by_form: std::collections::BTreeMap<String, Vec<Site>> = Default::default();
        for r in &rows.rows {
            // Stored relative to the form's first line, as the column keeps them too.
            by_form.entry(str_at(r, 0)).or_default().push(Site {
                pos: Pos { line: int_at(r, 1) as u32, col: int_at(r, 2) as u32 },
                to: str_at(r, 3),
                argc: int_at(r, 4),
                outer: str_at(r, 5),
                load: r[6].get_bool().unwrap_or(false),
                head: str_at(r, 7),
            });
        }
        let updates = DataValue::List(
            by_form
                .iter()
                .map(|(id, s)| {
                    let callees: Vec<&str> =
                        callees.get(id).into_iter().flatten().map(String::as_str).collect();
                    DataValue::List(vec![id.as_str().into(), sites::stored(s, 0, &callees).into()])
                })
                .collect(),
        );
        run(
            "writing call sites",
            "?[id, sites] <- $rows :update form {id => sites}",
            params([("rows", updates)]),
        )?;
    }
    set_progress(store, 7)?;
    drop_call_site(store)
}

/// `form_at` gets the texts of the top-level forms it places, and the version moves, in one
/// transaction.
fn seven_to_eight(store: &Store) -> Result<()> {
    let schema = "file: String, pos: Int, id: String => leading: String, source: String}";
    let mut p = super::Params::new();
    p.insert("v".into(), "8".into());
    store
        .db
        .run_script(
            &format!(
                "{{?[file, pos, id, leading, source] := *form_at{{file, pos, id}},
                     *form{{id, parent, leading, source}}, parent == ''
                  ?[file, pos, id, leading, source] := *form_at{{file, pos, id}},
                     *form{{id, parent}}, parent != '', leading = '', source = ''
                  :replace form_at {{{schema}}}
                 {{?[key, value] <- [['{UPGRADING_FROM}', $v]] :put meta {{key => value}}}}"
            ),
            p,
            ScriptMutability::Mutable,
        )
        .map_err(|e| failed(8, "the texts of `form_at`", e))?;
    Ok(())
}

/// `ns_form` goes, then the version moves. Repeatable: a store stopped between the two is
/// schema 8 without `ns_form`.
fn eight_to_nine(store: &Store) -> Result<()> {
    if has_relation(store, 9, "ns_form")? {
        store
            .db
            .run_script("::remove ns_form", Default::default(), ScriptMutability::Mutable)
            .map_err(|e| failed(9, "removing `ns_form`", e))?;
    }
    set_progress(store, 9)
}

/// Remove schema 6's `call_site` rows, once `form` holds the sites.
pub(super) fn drop_call_site(store: &Store) -> Result<()> {
    store
        .db
        .run_script("::remove call_site", Default::default(), ScriptMutability::Mutable)
        .map_err(|e| failed(7, "removing `call_site`", e))?;
    Ok(())
}

/// Lay the file out on a new store's pages ([`PAGE_SIZE`]) and compact it: `VACUUM` writes
/// every row again, packed.
fn relay_file(file: &Path) -> std::result::Result<(), sqlite::Error> {
    sqlite::open(file)?.execute(format!("PRAGMA page_size = {PAGE_SIZE}; VACUUM;"))
}

/// Every `sync_base` text packed, `form_at` keeping the lengths of the texts it held, every
/// parsed file's text kept whole (read from its forms), then the version moves. Repeatable: a
/// packed base is read as its text and packed again to the same bytes, `form_at` is rewritten
/// only while it holds texts, and a file's text is read and kept again.
fn nine_to_ten(store: &Store) -> Result<()> {
    crate::read::sync_state::repack_bases(store)
        .map_err(|e| failed(10, "packing the sync's agreed texts", e))?;
    if !has_relation(store, 10, "file_text")? {
        store
            .db
            .run_script(created("file_text"), Default::default(), ScriptMutability::Mutable)
            .map_err(|e| failed(10, "creating `file_text`", e))?;
    }
    let columns = store
        .db
        .run_script("::columns form_at", Default::default(), ScriptMutability::Immutable)
        .map_err(|e| failed(10, "the columns of `form_at`", e))?;
    if columns.rows.iter().any(|r| r.first().and_then(|v| v.get_str()) == Some("source")) {
        let schema = created("form_at").trim_start_matches(":create form_at {");
        store
            .db
            .run_script(
                &format!(
                    "?[file, pos, id, leading_chars, source_chars] :=
                         *form_at{{file, pos, id, leading, source}},
                         leading_chars = length(leading), source_chars = length(source)
                     :replace form_at {{{schema}"
                ),
                Default::default(),
                ScriptMutability::Mutable,
            )
            .map_err(|e| failed(10, "the lengths of `form_at`", e))?;
    }
    keep_file_texts(store).map_err(|e| failed(10, "keeping each file's text whole", e))?;
    set_progress(store, 10)
}

/// Keep the whole text of every stored parsed file of up to [`FILE_TEXT_MAX`] bytes in
/// `file_text`, read from its forms, 64 files a transaction (a store written before texts were
/// kept whole). A file whose places count more characters than that is not read (a character
/// is a byte or more), nor kept; nor is a text that does not hash to its file's hash.
fn keep_file_texts(store: &Store) -> Result<()> {
    let files = store.query(
        "?[path, n] := *file{path, error, trailing}, error == '', n = length(trailing)",
        Default::default(),
    )?;
    let mut chars: HashMap<String, i64> =
        files.rows.iter().map(|r| (str_at(r, 0), int_at(r, 1))).collect();
    let places = store.query(
        "?[file, pos, l, s] := *form_at{file, pos, leading_chars: l, source_chars: s}",
        Default::default(),
    )?;
    for r in &places.rows {
        if let Some(n) = chars.get_mut(r[0].get_str().unwrap_or_default()) {
            *n += int_at(r, 2) + int_at(r, 3);
        }
    }
    let mut paths: Vec<String> =
        chars.into_iter().filter(|(_, n)| *n <= FILE_TEXT_MAX as i64).map(|(p, _)| p).collect();
    paths.sort_unstable();
    for chunk in paths.chunks(64) {
        let chunk: Vec<&str> = chunk.iter().map(String::as_str).collect();
        let texts = crate::read::files::file_texts(store, &chunk)?;
        let rows = texts
            .into_iter()
            .filter(|(_, t)| {
                t.bytes.len() <= FILE_TEXT_MAX && crate::forms::content_hash(&t.bytes) == t.hash
            })
            .map(|(path, t)| vec![path.into(), DataValue::Bytes(crate::packed::pack(&t.bytes))])
            .collect();
        store.put_rows(std::collections::BTreeMap::from([("file_text".to_string(), rows)]))?;
    }
    Ok(())
}

/// The schema's `:create` statement of `relation`.
fn created(relation: &str) -> &'static str {
    super::SCHEMA
        .iter()
        .find(|s| super::relation_made_by(s) == Some(relation))
        .expect("the schema creates every relation an upgrade makes")
}
