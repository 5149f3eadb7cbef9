//! Named queries that read one form's rows read them by key. Where a stored atom binds a
//! non-key column to a constant (`*version{id, source: ''}`), Cozo 0.7.6 reads the whole
//! relation and joins it in memory (`stored_mat_join`): on a 1 M-line store, every version.

use formdb_engine::store::{params, str_at, Store};

#[test]
fn a_form_history_reads_its_versions_by_key() {
    let store = Store::open_in_memory().unwrap();
    let history = formdb_queries::get("history").expect("the history query");
    let plan = store
        .query(&format!("::explain {{ {} }}", history.script), params([("key", "x".into())]))
        .unwrap();
    let op = plan.headers.iter().position(|h| h == "op").unwrap();
    let rows: Vec<String> = plan
        .rows
        .iter()
        .map(|r| r.iter().map(|v| format!("{v:?}")).collect::<Vec<_>>().join(" "))
        .collect();
    let scans: Vec<&String> = rows
        .iter()
        .zip(&plan.rows)
        .filter(|(_, r)| str_at(r, op) == "stored_mat_join")
        .map(|(s, _)| s)
        .collect();
    assert!(scans.is_empty(), "whole relations joined in memory: {scans:#?}");
}
