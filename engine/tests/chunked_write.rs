//! A big change is written a chunk of forms at a time inside its one transaction
//! (`change::apply_in_chunks_of`): it must store exactly what one `import_relations` call
//! stores, and a failure part-way must leave the store as it was.

use formdb_engine::change::{self, Change, ChangeSet, Stamp};
use formdb_engine::import::{self, Incoming, Quiet};
use formdb_engine::store::{str_at, Store};

const PATH: &str = "src/big/forms.clj";

/// A text of `n` small forms calling each other and `clojure.string`, with a comment block,
/// an unresolved call, a multimethod and a `def` of a constant.
fn many_forms(n: usize) -> String {
    let mut text = String::from("(ns big.forms\n  (:require [clojure.string :as str]))\n\n");
    for i in 0..n {
        text.push_str(&format!(";; form {i}\n(defn f{i} [x] (str/upper-case (f{} x)))\n", i / 2));
    }
    text.push_str("(comment\n  (f1 \"a\")\n  (f2 (f3 \"b\")))\n");
    text.push_str("(defmulti area :shape)\n(defmethod area :square [s] (* (:side s) (:side s)))\n");
    text.push_str("(def limit 10)\n(println (f0 \"a\") (undefined-thing))\n");
    text
}

/// The next version of `many_forms(300)`: forms gone, renamed, changed, moved and new.
fn edited() -> String {
    many_forms(320)
        .replace("(defn f7 ", "(defn f7b ")
        .replace("(defn f11 [x] (str/upper-case (f5 x)))", "(defn f11 [x] (str/lower-case x))")
        .replacen(";; form 3\n", ";; form 3, moved\n\n", 1)
        .replace("(defn f40 [x] (str/upper-case (f20 x)))\n", "")
}

/// Every row of every relation, in order (what a store holds, comparable across stores).
fn dump(store: &Store) -> Vec<String> {
    let rels = store.query("::relations", Default::default()).unwrap();
    let mut out = Vec::new();
    for r in &rels.rows {
        let rel = str_at(r, 0);
        let cols = store.query(&format!("::columns {rel}"), Default::default()).unwrap();
        let cols: Vec<String> = cols.rows.iter().map(|c| str_at(c, 0)).collect();
        let cols = cols.join(", ");
        let rows = store.query(&format!("?[{cols}] := *{rel}{{{cols}}}"), Default::default());
        for row in rows.unwrap().rows {
            out.push(format!("{rel} {row:?}"));
        }
    }
    out
}

fn changes(store: &Store, text: &str) -> Vec<Change> {
    let incoming = vec![Incoming { path: PATH.into(), bytes: text.as_bytes().to_vec() }];
    let (changes, errors) = import::file_changes(store, incoming, &Quiet).unwrap();
    assert!(errors.is_empty(), "{errors:?}");
    changes
}

fn save(store: &Store, text: &str, forms_per_chunk: usize) {
    let set = ChangeSet { author: "t".into(), op: "save".into(), changes: changes(store, text) };
    let stamp = Stamp { at: Some(1.0), commit: Some("c0ffee".into()) };
    change::apply_in_chunks_of(store, &set, &stamp, forms_per_chunk).unwrap();
}

#[test]
fn a_change_written_in_chunks_stores_what_one_call_stores() {
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (whole, chunked) = (Store::open(dir_a.path()).unwrap(), Store::open(dir_b.path()).unwrap());
    for text in [many_forms(300), edited()] {
        save(&whole, &text, usize::MAX);
        save(&chunked, &text, 7);
        let (a, b) = (dump(&whole), dump(&chunked));
        assert!(a.iter().any(|r| r.starts_with("version_commit ")), "{a:?}");
        assert_eq!(a.len(), b.len());
        for (a, b) in a.iter().zip(&b) {
            assert_eq!(a, b);
        }
    }
}

#[test]
fn a_change_failing_part_way_through_its_chunks_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    save(&store, &many_forms(300), usize::MAX);
    let before = dump(&store);
    // The change's own rows are all written first (deletes, then its forms chunk by chunk);
    // this row, missing a column, fails when the rest of the batch is written after them.
    let mut changes = changes(&store, &edited());
    changes.push(Change::Bookkeeping {
        relation: "alias_map".into(),
        rows: vec![vec!["me".into(), "big.forms".into()]],
        delete: Vec::new(),
    });
    let set = ChangeSet { author: "t".into(), op: "save".into(), changes };
    let failed = change::apply_in_chunks_of(&store, &set, &Stamp::default(), 7);
    assert!(failed.is_err(), "{failed:?}");
    assert!(dump(&store) == before, "the failed change left rows behind");
    // The store still takes writes: the transaction was rolled back, not left open.
    save(&store, &edited(), 7);
    assert!(dump(&store) != before, "the change after it wrote nothing");
}
