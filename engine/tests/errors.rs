//! A failed script names itself: the engine source line that ran it, or the user's script.

use formdb_engine::store::{Params, Store, StoreError, USER_SCRIPT};

#[test]
fn a_failed_script_names_the_line_that_ran_it() {
    let store = Store::open_in_memory().unwrap();
    let line = line!() + 1;
    let err = store.query("?[x] := *no_such_relation{x}", Params::new()).unwrap_err();
    let here = format!("{}:{line}", file!());
    match &err {
        StoreError::Query { script, .. } => assert_eq!(script, &here),
        other => panic!("a failed query, got {other}"),
    }
    assert!(err.to_string().contains(&here), "{err}");
    assert!(err.to_string().contains("no_such_relation"), "says what failed: {err}");

    let err = store.query_user("?[x] := *no_such_relation{x}", Params::new()).unwrap_err();
    assert!(err.to_string().contains(USER_SCRIPT), "{err}");
}
