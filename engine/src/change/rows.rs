//! Rows as stored: forms, files and call sites to and from Cozo values, the reads of old rows
//! `apply` compares with, and the batch it writes.

use std::collections::{BTreeMap, HashMap, HashSet};

use cozo::DataValue;

use super::{FileRow, FormRow, OldForm, OLD_FORM_ATOM, OLD_FORM_COLS};
use crate::forms::Call;
use crate::store::{column, cstr_at, int_at, params, str_at, Result, Store};
use crate::syntax::Pos;

/// The strings of a stored list (`[String]` column); empty for anything else.
pub(super) fn string_list(v: &DataValue) -> Vec<String> {
    match v {
        DataValue::List(items) => {
            items.iter().map(|i| i.get_str().unwrap_or_default().to_string()).collect()
        }
        _ => Vec::new(),
    }
}

/// [`string_list`] borrowed: the texts of a stored list of strings (none when it is not one).
pub(super) fn strs_of(v: &DataValue) -> impl Iterator<Item = &str> {
    v.get_slice().unwrap_or_default().iter().filter_map(DataValue::get_str)
}

/// Columns of the `form` relation in the order `form_value` writes them.
pub const FORM_COLS: &str = "id, file, ns, pos, parent, kind, head, name, fqn, dispatch, doc, arglists, leading, source, canonical, line, col, end_line, end_col, hash, private, dynamic, deprecated, test, export, macro, platforms, purity, rhash, callees, sites";

pub(super) fn strs(v: &[String]) -> DataValue {
    DataValue::List(v.iter().map(|s| s.as_str().into()).collect())
}

pub(super) fn form_value(f: &FormRow) -> Vec<DataValue> {
    vec![
        f.id.as_str().into(),
        f.file.as_str().into(),
        f.ns.as_str().into(),
        f.pos.into(),
        f.parent.as_str().into(),
        f.kind.as_str().into(),
        f.head.as_str().into(),
        f.name.as_str().into(),
        f.fqn.as_str().into(),
        f.dispatch.as_str().into(),
        f.doc.as_str().into(),
        strs(&f.arglists),
        f.leading.as_str().into(),
        f.source.as_str().into(),
        // Stored only where it differs from the source (a fifth of the forms): each text once.
        (if f.canonical == f.source { "" } else { f.canonical.as_str() }).into(),
        (f.start.line as i64).into(),
        (f.start.col as i64).into(),
        (f.end.line as i64).into(),
        (f.end.col as i64).into(),
        f.hash.as_str().into(),
        f.private.into(),
        f.dynamic.into(),
        f.deprecated.into(),
        f.test.into(),
        f.export.into(),
        f.macro_.into(),
        strs(&f.platforms),
        f.purity.as_str().into(),
        f.rhash.as_str().into(),
        DataValue::List(f.calls.iter().map(|c| c.to.as_str().into()).collect()),
        f.stored_sites().as_ref().into(),
    ]
}

/// Read a `form` row (selected with `FORM_COLS`) back.
pub fn form_from_row(r: &[DataValue]) -> FormRow {
    let list = string_list;
    let b = |v: &DataValue| v.get_bool().unwrap_or(false);
    let cstr = |i: usize| cstr_at(r, i);
    FormRow {
        id: cstr(0),
        file: cstr(1),
        ns: cstr(2),
        pos: int_at(r, 3),
        parent: cstr(4),
        kind: cstr(5),
        head: cstr(6),
        name: cstr(7),
        fqn: cstr(8),
        dispatch: cstr(9),
        doc: cstr(10),
        arglists: list(&r[11]),
        leading: cstr(12),
        source: str_at(r, 13),
        canonical: str_at(r, 14),
        start: Pos { line: int_at(r, 15) as u32, col: int_at(r, 16) as u32 },
        end: Pos { line: int_at(r, 17) as u32, col: int_at(r, 18) as u32 },
        hash: cstr(19),
        private: b(&r[20]),
        dynamic: b(&r[21]),
        deprecated: b(&r[22]),
        test: b(&r[23]),
        export: b(&r[24]),
        macro_: b(&r[25]),
        platforms: list(&r[26]),
        purity: cstr(27),
        rhash: cstr(28),
        // Only callee names are on the row; places and kinds are in `calls`.
        calls: list(&r[29])
            .into_iter()
            .map(|to| Call {
                to: to.into(),
                kind: crate::resolve::RefKind::Call,
                pos: Pos::default(),
                count: 0,
            })
            .collect(),
        unresolved: Vec::new(),
        defines: Vec::new(),
        sites: super::Sites::Stored(str_at(r, 30)),
    }
}

pub(super) fn file_value(f: &FileRow) -> Vec<DataValue> {
    let (error, line, col) = match &f.error {
        Some(e) => (e.message.clone(), e.pos.line as i64, e.pos.col as i64),
        None => (String::new(), 0, 0),
    };
    vec![
        f.path.as_str().into(),
        f.lang.as_str().into(),
        f.ns.as_str().into(),
        f.hash.as_str().into(),
        f.trailing.as_str().into(),
        error.into(),
        line.into(),
        col.into(),
        DataValue::Bytes(f.raw.clone()),
    ]
}

/// Stored forms of the given files.
pub(super) fn load_old_forms(store: &Store, paths: &[&str]) -> Result<HashMap<String, OldForm>> {
    let (cols, atom) = (OLD_FORM_COLS, OLD_FORM_ATOM);
    load_forms(
        store,
        &format!(
            "paths[file] <- $keys ?[{cols}] := paths[file], *form_at{{file, pos, id}}, *form{{{atom}}}"
        ),
        paths,
    )
}

/// Stored forms with the given ids (wherever they live).
pub(super) fn load_forms_by_id(store: &Store, ids: &[&str]) -> Result<HashMap<String, OldForm>> {
    let cols = OLD_FORM_COLS;
    load_forms(store, &format!("ids[id] <- $keys ?[{cols}] := ids[id], *form{{{cols}}}"), ids)
}

fn load_forms(store: &Store, script: &str, keys: &[&str]) -> Result<HashMap<String, OldForm>> {
    let mut out = HashMap::new();
    query_in_parts(
        store,
        script,
        "keys",
        keys,
        |k| (*k).into(),
        |rows| {
            out.extend(rows.iter().map(|r| (str_at(r, 0), OldForm::from_row(r))));
            Ok(())
        },
    )?;
    Ok(out)
}

/// Keys given to one query at most. Cozo copies a query's constant list several times while it
/// evaluates it (about 400 bytes a key all told), so a big save's lists of all its forms or
/// vars go a part at a time.
pub(crate) const KEYS_PER_QUERY: usize = 4096;

/// Run `script` with the list `$name` bound to `keys`, [`KEYS_PER_QUERY`] of them at a time
/// (each made a value by `key`), and hand each part's rows to `each`.
pub(crate) fn query_in_parts<K>(
    store: &Store,
    script: &str,
    name: &str,
    keys: &[K],
    key: impl Fn(&K) -> DataValue,
    mut each: impl FnMut(Vec<Vec<DataValue>>) -> Result<()>,
) -> Result<()> {
    for part in keys.chunks(KEYS_PER_QUERY) {
        let rows = store.query(script, params([(name, column(part.iter().map(&key)))]))?;
        each(rows.rows)?;
    }
    Ok(())
}

pub(super) fn load_deleted_meta(
    store: &Store,
    deleted: &[(String, String)],
) -> Result<HashMap<String, (String, String)>> {
    let mut out = HashMap::new();
    let script = "ids[id] <- $ids ?[id, ns, name] := ids[id], *form{id, ns, name}";
    query_in_parts(
        store,
        script,
        "ids",
        deleted,
        |(id, _)| id.as_str().into(),
        |rows| {
            out.extend(rows.iter().map(|r| (str_at(r, 0), (str_at(r, 1), str_at(r, 2)))));
            Ok(())
        },
    )?;
    Ok(out)
}

pub(super) fn next_versions(store: &Store, ids: &[&str]) -> Result<BTreeMap<String, i64>> {
    let mut out = BTreeMap::new();
    let script = "ids[id] <- $ids ?[id, max(v)] := ids[id], *version{id, v}";
    query_in_parts(
        store,
        script,
        "ids",
        ids,
        |id| (*id).into(),
        |rows| {
            out.extend(rows.iter().map(|r| (str_at(r, 0), int_at(r, 1) + 1)));
            Ok(())
        },
    )?;
    Ok(out)
}

/// Deletes and puts per relation, for one `import_relations` transaction.
#[derive(Default)]
pub(super) struct Batch {
    rows: BTreeMap<String, Vec<Vec<DataValue>>>,
}

impl Batch {
    pub(super) fn put(&mut self, rel: &str, row: Vec<DataValue>) {
        self.rows.entry(rel.to_string()).or_default().push(row);
    }

    pub(super) fn del(&mut self, rel: &str, key: Vec<DataValue>) {
        self.rows.entry(format!("-{rel}")).or_default().push(key);
    }

    /// Add `other`'s rows after this batch's own.
    pub(super) fn append(&mut self, other: Batch) {
        for (rel, rows) in other.rows {
            self.rows.entry(rel).or_default().extend(rows);
        }
    }

    pub(super) fn len(&self) -> usize {
        self.rows.values().map(Vec::len).sum()
    }

    /// Name the columns of every relation from the store's own schema. A delete of a key the
    /// batch also puts is left out: the put replaces the row anyway (most rows of an edited
    /// form are written again as they were), and a relation left with nothing to delete costs
    /// the transaction nothing.
    pub(super) fn into_named_rows(
        mut self,
        store: &Store,
    ) -> Result<BTreeMap<String, cozo::NamedRows>> {
        let mut out = BTreeMap::new();
        let puts: Vec<String> = self.rows.keys().filter(|r| !r.starts_with('-')).cloned().collect();
        for rel in puts {
            let Some(deletes) = self.rows.get(&format!("-{rel}")) else { continue };
            let keys = store.columns(&rel)?.iter().filter(|(_, is_key)| *is_key).count();
            // Row values are strings, numbers, lists and bytes: nothing in them changes while
            // they are keys (the lint sees the regex variant a query value can hold).
            #[allow(clippy::mutable_key_type)]
            let put: HashSet<&[DataValue]> =
                self.rows[&rel].iter().map(|r| &r[..keys.min(r.len())]).collect();
            let kept: Vec<Vec<DataValue>> =
                deletes.iter().filter(|k| !put.contains(k.as_slice())).cloned().collect();
            self.rows.insert(format!("-{rel}"), kept);
        }
        for (rel, rows) in self.rows {
            if rows.is_empty() {
                continue;
            }
            let named = store.named_rows(&rel, rows)?;
            out.insert(rel, named);
        }
        Ok(out)
    }
}
