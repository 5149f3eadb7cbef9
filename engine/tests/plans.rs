//! Named queries that read one form's rows, or one namespace's, read them by key. Where a
//! stored atom binds a non-key column to a constant (`*version{id, source: ''}`,
//! `*form{id, ns: $ns}`), Cozo 0.7.6 reads the whole relation and joins it in memory
//! (`stored_mat_join`): on a 1 M-line store, every version, or every form (`ns_overview` took
//! 0.53 s that way, 0.025 s by key).

use formdb_engine::store::{params, Store};

/// The steps of named query `name`'s plan that join a whole stored relation in memory.
fn whole_relations_joined(name: &str, param: &str) -> Vec<String> {
    let store = Store::open_in_memory().unwrap();
    let query = formdb_queries::get(name).unwrap_or_else(|| panic!("the {name} query"));
    let steps = store.plan_steps(query.script, params([(param, "x".into())])).unwrap();
    steps.into_iter().filter(|(op, _)| op == "stored_mat_join").map(|(_, step)| step).collect()
}

#[test]
fn a_form_history_reads_its_versions_by_key() {
    let scans = whole_relations_joined("history", "key");
    assert!(scans.is_empty(), "whole relations joined in memory: {scans:#?}");
}

#[test]
fn a_namespace_overview_reads_its_forms_by_key() {
    let scans = whole_relations_joined("ns_overview", "ns");
    assert!(scans.is_empty(), "whole relations joined in memory: {scans:#?}");
}
