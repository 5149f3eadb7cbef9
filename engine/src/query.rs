//! Running the named queries of `queries/*.cozo` against a store, with rows returned as JSON
//! objects keyed by column name (what the CLI prints and the MCP server returns).
//!
//! Search needs no index: it scans `form` (see [`search`]).

use cozo::{DataValue, NamedRows};
use serde_json::{Map, Value};

use crate::store::{params, Params, Result, Store, StoreError};

pub mod sandbox;

/// Result rows of a query, each a JSON object.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Rows {
    pub headers: Vec<String>,
    pub rows: Vec<Map<String, Value>>,
}

impl Rows {
    pub fn from_named(named: NamedRows) -> Rows {
        let rows = named
            .rows
            .iter()
            .map(|r| named.headers.iter().cloned().zip(r.iter().map(to_json)).collect())
            .collect();
        Rows { headers: named.headers, rows }
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

/// A Cozo value as JSON (bytes as a UTF-8 string where they are text).
pub fn to_json(v: &DataValue) -> Value {
    match v {
        DataValue::Null => Value::Null,
        DataValue::Bool(b) => Value::Bool(*b),
        DataValue::Num(_) => match v.get_int() {
            Some(i) => Value::from(i),
            None => Value::from(v.get_float().unwrap_or(f64::NAN)),
        },
        DataValue::Str(s) => Value::String(s.to_string()),
        DataValue::Bytes(b) => Value::String(String::from_utf8_lossy(b).into_owned()),
        DataValue::List(items) => Value::Array(items.iter().map(to_json).collect()),
        DataValue::Json(j) => j.0.clone(),
        other => Value::String(other.to_string()),
    }
}

/// Parameters of a user's script given as JSON values (MCP `query`, `formdb query NAME=VALUE`).
pub fn json_params(pairs: impl IntoIterator<Item = (String, Value)>) -> Params {
    pairs.into_iter().map(|(k, v)| (k, DataValue::from(v))).collect()
}

/// Run one of the named queries with parameters.
pub fn run_named(store: &Store, name: &str, p: Params) -> Result<Rows> {
    let q = named(name, &p)?;
    let rows = store.query(q.script, p).map_err(|e| match e {
        StoreError::Query { message, .. } => {
            StoreError::Query { script: format!("queries/{name}.cozo"), message }
        }
        e => e,
    })?;
    Ok(Rows::from_named(rows))
}

/// The named query `name`, if `p` holds every parameter it reads.
fn named(name: &str, p: &Params) -> Result<&'static formdb_queries::NamedQuery> {
    let q = formdb_queries::get(name)
        .ok_or_else(|| StoreError::Refused(format!("no query named `{name}`")))?;
    for needed in q.params() {
        if !p.contains_key(needed) {
            return Err(StoreError::Refused(format!(
                "query `{name}` needs the parameter `{needed}`"
            )));
        }
    }
    Ok(q)
}

/// A form by id or var name.
pub fn form(store: &Store, key: &str) -> Result<Option<Map<String, Value>>> {
    Ok(run_named(store, "form", params([("key", key.into())]))?.rows.into_iter().next())
}

/// Like [`form`], but a missing form is an error naming the key.
pub fn form_required(store: &Store, key: &str) -> Result<Map<String, Value>> {
    form(store, key)?.ok_or_else(|| StoreError::NoForm { key: key.to_string() })
}

pub fn usages(store: &Store, fqn: &str) -> Result<Rows> {
    run_named(store, "usages", params([("fqn", fqn.into())]))
}

pub fn callers(store: &Store, fqn: &str, depth: i64) -> Result<Rows> {
    run_named(store, "callers", params([("fqn", fqn.into()), ("depth", depth.into())]))
}

pub fn callees(store: &Store, key: &str, depth: i64) -> Result<Rows> {
    run_named(store, "callees", params([("key", key.into()), ("depth", depth.into())]))
}

pub fn ns_overview(store: &Store, ns: &str) -> Result<Rows> {
    run_named(store, "ns_overview", params([("ns", ns.into())]))
}

/// The namespace's docstring and file, if the namespace is known.
pub fn ns_info(store: &Store, ns: &str) -> Result<Option<(String, String)>> {
    let rows =
        store.query("?[doc, file] := *ns_decl{ns: $ns, doc, file}", params([("ns", ns.into())]))?;
    Ok(rows.rows.first().map(|r| (crate::store::str_at(r, 0), crate::store::str_at(r, 1))))
}

pub fn history(store: &Store, key: &str) -> Result<Rows> {
    run_named(store, "history", params([("key", key.into())]))
}

pub fn stats(store: &Store) -> Result<Rows> {
    run_named(store, "stats", Params::new())
}

/// Full-text search over names, docstrings and source, best match first. Words are matched
/// whole and case-insensitively (a word is a run of letters and digits; punctuation is
/// ignored), any of them (OR). A form scores like a TF-IDF index over its name three times, its
/// docstring twice and its source once: per word, its count times
/// `ln(1 + (forms - hits + 0.5) / (hits + 0.5))`.
///
/// No index: one scan of `form` keeps the forms whose text holds a word (Cozo's regex on each
/// row), and only those are tokenised and scored here. An index (Cozo FTS) was another copy of
/// all source plus its postings, and building it on the first search after an import took
/// 34 s on 1 M lines; the scan takes about a second there and is never stale.
pub fn search(store: &Store, text: &str, limit: i64) -> Result<Rows> {
    let mut words: Vec<String> = tokens(text).collect();
    words.sort();
    words.dedup();
    if words.is_empty() {
        return Err(StoreError::Refused(format!(
            "nothing to search for in `{text}`: give at least one word"
        )));
    }
    // A superset of the hits: the words anywhere, in any case (whole words are told below).
    let re = format!("(?i){}", words.join("|"));
    let found = store.query(
        "?[id, fqn, ns, name, kind, file, line, doc, source] :=
             *form{id, fqn, ns, name, kind, file, line, doc, source},
             regex_matches(concat(name, ' ', doc, ' ', source), $re)",
        params([("re", re.into())]),
    )?;
    let total = store.query("?[count(id)] := *form_at{id}", Params::new())?;
    let total = total.rows.first().and_then(|r| r[0].get_int()).unwrap_or(0) as f64;
    // Per candidate, how often each word occurs: names three times, docstrings twice.
    let counts: Vec<Vec<usize>> = found
        .rows
        .iter()
        .map(|r| {
            let mut n = vec![0; words.len()];
            for (col, weight) in [(3, 3), (7, 2), (8, 1)] {
                for t in tokens(r[col].get_str().unwrap_or_default()) {
                    if let Ok(i) = words.binary_search(&t) {
                        n[i] += weight;
                    }
                }
            }
            n
        })
        .collect();
    let idf: Vec<f64> = (0..words.len())
        .map(|i| {
            let hits = counts.iter().filter(|n| n[i] > 0).count() as f64;
            (1.0 + (total - hits + 0.5) / (hits + 0.5)).ln()
        })
        .collect();
    let mut scored: Vec<(f64, &Vec<DataValue>)> = found
        .rows
        .iter()
        .zip(&counts)
        .map(|(r, n)| (n.iter().zip(&idf).map(|(n, idf)| *n as f64 * idf).sum(), r))
        .filter(|(score, _)| *score > 0.0)
        .collect();
    // Best first; ties in file order.
    scored.sort_by(|(a, ra), (b, rb)| {
        b.total_cmp(a).then_with(|| (&ra[5], &ra[6]).cmp(&(&rb[5], &rb[6])))
    });
    scored.truncate(limit.max(1) as usize);
    let headers = ["score", "id", "fqn", "ns", "name", "kind", "file", "line", "doc"];
    let rows = scored
        .into_iter()
        .map(|(score, r)| {
            let mut row = vec![DataValue::from(score)];
            row.extend(r[..8].iter().cloned());
            row
        })
        .collect();
    Ok(Rows::from_named(NamedRows::new(headers.map(String::from).to_vec(), rows)))
}

/// The words of a text as search counts them: runs of letters and digits, lowercased.
fn tokens(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase)
}

/// A stored file's text: as kept whole (`file_text`) where that hashes to the file's hash, else
/// reassembled from its forms (`leading + source` of each top-level form, then the trailing
/// trivia), or its raw bytes if it did not parse, or a blob's content. `None` if the store has
/// no such path. Read as one state of the store, a part of a big file's forms at a time
/// ([`crate::read::files::file_texts`]).
pub fn file_bytes(store: &Store, path: &str) -> Result<Option<Vec<u8>>> {
    store.reading(|| {
        if let Some(file) = crate::read::files::file_texts(store, &[path])?.remove(path) {
            return Ok(Some(file.bytes));
        }
        let blob = store
            .query("?[content] := *blob{path: $path, content}", params([("path", path.into())]))?;
        Ok(blob.rows.first().and_then(|r| r[0].get_bytes().map(<[u8]>::to_vec)))
    })
}

/// Every path the store holds (Clojure files and blobs), sorted.
pub fn paths(store: &Store) -> Result<Vec<String>> {
    let rows =
        store.query("?[path] := *file{path} ?[path] := *blob{path} :order path", Params::new())?;
    Ok(rows.rows.iter().map(|r| crate::store::str_at(r, 0)).collect())
}

/// The vars form `id` defines (`ns/name`).
pub fn vars_defined_by(store: &Store, id: &str) -> Result<Vec<String>> {
    let rows = store.query("?[var] := *defined_by{id: $id, var}", params([("id", id.into())]))?;
    Ok(rows.rows.iter().map(|r| crate::store::str_at(r, 0)).collect())
}

/// The store's write counter: moves on with every applied change set (0 for a new store).
pub fn generation(store: &Store) -> Result<u64> {
    let rows = store.query("?[v] := *meta{key: 'generation', value: v}", Params::new())?;
    Ok(rows.rows.first().and_then(|r| r[0].get_str()).and_then(|s| s.parse().ok()).unwrap_or(0))
}
