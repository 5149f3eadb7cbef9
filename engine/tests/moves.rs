//! Which stored form a new form is, when files change places in one change set: a named form
//! keeps its id with its namespace and name, wherever its text lands; the forms a path held
//! before are other forms, however alike their names.

use formdb_engine::change::{self, ChangeSet};
use formdb_engine::import::{self, Incoming, Quiet, Removals};
use formdb_engine::store::{params, str_at, Store};

fn ns_text(ns: &str, value: u32) -> String {
    format!("(ns {ns})\n\n(defn -main [& args] (println {value}))\n\n(def config {value})\n")
}

/// Write `files` (path, text) in one change set, deleting `removed`.
fn write(store: &Store, files: &[(&str, String)], removed: &[&str]) {
    let incoming = files
        .iter()
        .map(|(path, text)| Incoming { path: path.to_string(), bytes: text.as_bytes().to_vec() })
        .collect();
    let removals = Removals {
        removed: removed.iter().map(|p| p.to_string()).collect(),
        moved_from: Default::default(),
    };
    let (mut changes, errors) =
        import::file_changes_with_removals(store, incoming, &removals, &Quiet).unwrap();
    assert!(errors.is_empty(), "{errors:?}");
    for path in removed {
        changes.push(change::Change::DeleteFile { path: path.to_string() });
    }
    let set = ChangeSet { author: "test".into(), op: "test".into(), changes };
    change::apply(store, &set).unwrap();
}

fn id_of(store: &Store, fqn: &str) -> String {
    let rows =
        store.query("?[id] := *form{id, fqn}, fqn = $fqn", params([("fqn", fqn.into())])).unwrap();
    assert_eq!(rows.rows.len(), 1, "one form defines {fqn}");
    str_at(&rows.rows[0], 0)
}

fn ids(store: &Store, vars: &[&str]) -> Vec<String> {
    vars.iter().map(|v| id_of(store, v)).collect()
}

const VARS: [&str; 4] = ["m.a/-main", "m.a/config", "m.b/-main", "m.b/config"];

#[test]
fn files_that_swap_their_texts_keep_each_forms_id_with_its_namespace() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join(".formdb")).unwrap();
    write(&store, &[("src/m/a.clj", ns_text("m.a", 1)), ("src/m/b.clj", ns_text("m.b", 2))], &[]);
    let before = ids(&store, &VARS);
    // `mv a.clj t; mv b.clj a.clj; mv t b.clj`, seen at once: each path holds the other's text,
    // whose forms have the same kinds and names as the ones it held.
    write(&store, &[("src/m/a.clj", ns_text("m.b", 2)), ("src/m/b.clj", ns_text("m.a", 1))], &[]);
    assert_eq!(ids(&store, &VARS), before);
}

#[test]
fn a_file_renamed_over_a_deleted_one_keeps_its_forms_ids() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join(".formdb")).unwrap();
    write(&store, &[("src/m/a.clj", ns_text("m.a", 1)), ("src/m/b.clj", ns_text("m.b", 2))], &[]);
    let kept = ids(&store, &VARS[..2]);
    // `rm b.clj; mv a.clj b.clj`.
    write(&store, &[("src/m/b.clj", ns_text("m.a", 1))], &["src/m/a.clj"]);
    assert_eq!(ids(&store, &VARS[..2]), kept);
    let gone = store.query("?[id] := *form{id, ns}, ns = 'm.b'", Default::default()).unwrap();
    assert!(gone.rows.is_empty(), "m.b's forms are deleted: {:?}", gone.rows);
}

#[test]
fn a_namespace_renamed_in_its_file_keeps_its_forms_ids() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join(".formdb")).unwrap();
    write(&store, &[("src/m/a.clj", ns_text("m.a", 1))], &[]);
    let before = ids(&store, &VARS[..2]);
    write(&store, &[("src/m/a.clj", ns_text("m.z", 1))], &[]);
    assert_eq!(ids(&store, &["m.z/-main", "m.z/config"]), before);
}
