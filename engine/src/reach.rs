//! What the REPL loop reads: the stored forms to evaluate with their places, and the tests a
//! change reaches through the call graph.

use cozo::DataValue;
use serde::Serialize;

use crate::store::{int_at, params, str_at, Result, Store};

/// Strings as one list parameter (for `x in $list`).
fn list(items: &[String]) -> DataValue {
    DataValue::List(items.iter().map(|i| DataValue::from(i.as_str())).collect())
}

/// A stored top-level form with what evaluating it needs.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct StoredForm {
    pub id: String,
    pub ns: String,
    pub fqn: String,
    pub file: String,
    pub line: i64,
    pub end_line: i64,
    pub col: i64,
    pub source: String,
    pub test: bool,
}

const FORM_COLS: &str = "id, ns, fqn, file, line, end_line, col, source, test";

fn form_from_row(r: &[DataValue]) -> StoredForm {
    StoredForm {
        id: str_at(r, 0),
        ns: str_at(r, 1),
        fqn: str_at(r, 2),
        file: str_at(r, 3),
        line: int_at(r, 4),
        end_line: int_at(r, 5),
        col: int_at(r, 6),
        source: str_at(r, 7),
        test: r[8].get_bool().unwrap_or(false),
    }
}

/// The forms with these ids (unknown ids are left out), in the order asked.
pub fn forms(store: &Store, ids: &[String]) -> Result<Vec<StoredForm>> {
    let rows = store.query(
        &format!("?[{FORM_COLS}] := id in $ids, *form{{{FORM_COLS}}}"),
        params([("ids", list(ids))]),
    )?;
    let mut found: Vec<StoredForm> = rows.rows.iter().map(|r| form_from_row(r)).collect();
    found.sort_by_key(|f| ids.iter().position(|i| *i == f.id));
    Ok(found)
}

/// The form a var names (its defining form), or the form with that id.
pub fn form_by_key(store: &Store, key: &str) -> Result<Option<StoredForm>> {
    let rows = store.query(
        &format!(
            "target[id] := *defines{{var: $key, id}}
             target[id] := id = $key, *form{{id}}
             ?[{FORM_COLS}] := target[id], *form{{{FORM_COLS}}}"
        ),
        params([("key", key.into())]),
    )?;
    Ok(rows.rows.first().map(|r| form_from_row(r)))
}

/// The test forms (`deftest` and the like) of a namespace, in file order: those of the files
/// read in that namespace (`file`, a row per file, is scanned: a namespace's forms have no
/// index of their own).
pub fn ns_tests(store: &Store, ns: &str) -> Result<Vec<StoredForm>> {
    let rows = store.query(
        &format!(
            "?[{FORM_COLS}, pos] := *file{{path: file, ns: file_ns}}, file_ns == $ns,
                 *form_at{{file, pos, id}}, *form{{{FORM_COLS}}}, ns == $ns, test == true
             :order file, pos"
        ),
        params([("ns", ns.into())]),
    )?;
    Ok(rows.rows.iter().map(|r| form_from_row(r)).collect())
}

/// The top-level form of `file` whose lines hold `line`.
pub fn form_at_line(store: &Store, file: &str, line: i64) -> Result<Option<StoredForm>> {
    let rows = store.query(
        &format!(
            "?[{FORM_COLS}] := *form_at{{file: $file, id}}, *form{{{FORM_COLS}, parent}},
               parent == '', line <= $line, end_line >= $line"
        ),
        params([("file", file.into()), ("line", line.into())]),
    )?;
    Ok(rows.rows.first().map(|r| form_from_row(r)))
}

/// Every test form that reaches one of `keys` (form ids or fully-qualified var names) through
/// calls, transitively and across namespaces: the forms that call a var the targets define,
/// the forms that call theirs, and so on. A target that is itself a test is included.
pub fn tests_reaching(store: &Store, keys: &[String]) -> Result<Vec<StoredForm>> {
    let keys = list(keys);
    let rows = store.query(
        &format!(
            "start[id] := k in $keys, *defines{{var: k, id}}
             start[id] := id in $keys, *form{{id}}
             reach[id] := start[id]
             reach[from] := reach[id], *defined_by{{id, var}}, *calls{{to: var, from}}
             ?[{FORM_COLS}] := reach[id], *form{{{FORM_COLS}}}, test = true"
        ),
        params([("keys", keys)]),
    )?;
    let mut out: Vec<StoredForm> = rows.rows.iter().map(|r| form_from_row(r)).collect();
    out.sort_by(|a, b| (&a.file, a.line).cmp(&(&b.file, b.line)));
    Ok(out)
}

/// The stored file of a namespace.
pub fn ns_file(store: &Store, ns: &str) -> Result<Option<String>> {
    let rows = store.query("?[file] := *ns_decl{ns: $ns, file}", params([("ns", ns.into())]))?;
    Ok(rows.rows.first().map(|r| str_at(r, 0)))
}

/// The whole call graph as plain edges, for checks that walk it themselves: which form calls
/// which var, which form defines which var, and the ids of the test forms.
#[derive(Clone, Debug, Default)]
pub struct CallGraph {
    /// (caller form id, callee var)
    pub calls: Vec<(String, String)>,
    /// (var, defining form id)
    pub defines: Vec<(String, String)>,
    pub tests: Vec<String>,
    /// Every form id with its var, if it defines one.
    pub forms: Vec<(String, String)>,
}

pub fn call_graph(store: &Store) -> Result<CallGraph> {
    let pairs = |script: &str| -> Result<Vec<(String, String)>> {
        let rows = store.query(script, crate::store::Params::new())?;
        Ok(rows.rows.iter().map(|r| (str_at(r, 0), str_at(r, 1))).collect())
    };
    Ok(CallGraph {
        calls: pairs("?[from, to] := *calls{to, from}")?,
        defines: pairs("?[var, id] := *defines{var, id}")?,
        tests: pairs("?[id, fqn] := *form{id, fqn, test}, test = true")?
            .into_iter()
            .map(|(id, _)| id)
            .collect(),
        forms: pairs("?[id, fqn] := *form{id, fqn, parent}, parent == ''")?,
    })
}
