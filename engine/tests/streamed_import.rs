//! The streamed import parses each file once and resolves each batch against the namespace
//! tables read so far: what it stores must be what one transaction of the whole tree stores,
//! also where a batch read tables that later batches grew.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use formdb_engine::forms::first_ns_decl;
use formdb_engine::import::{self, Quiet};
use formdb_engine::store::{str_at, Store};

/// A tree where resolving a file against the tables of the batches before it gets something
/// wrong, once for each way tables grow after a file is resolved (in the order batches go).
const TREE: &[(&str, &str)] = &[
    // Names `m.other`, which only an `in-ns` in the middle of a later file declares.
    ("a/late_ref.clj", "(ns a.late-ref)\n\n(defn f [] (m.other/b))\n"),
    ("m/multi.clj", "(ns m.multi)\n\n(defn a [] 1)\n\n(in-ns 'm.other)\n\n(defn b [] 2)\n"),
    // One namespace over two files: `helper` and `map` are defined by the second.
    (
        "s/split.clj",
        "(ns s.split)\n\n(defn use-it [] (helper))\n\n(defn use-map [] (map inc [1]))\n",
    ),
    ("s/split_more.clj", "(in-ns 's.split)\n\n(defn helper [] 1)\n\n(defn map [f xs] xs)\n"),
    // A require cycle: `c.two` comes first and refers all of `c.one`, written after it.
    ("c/one.clj", "(ns c.one (:require c.two))\n\n(defn one [] 1)\n"),
    ("c/two.clj", "(ns c.two (:use c.one))\n\n(defn two [] (one))\n"),
    // The first `ns` form the declaration scan finds is discarded: `fake.guess` is no
    // namespace, and `fake.guess/x` names nothing.
    ("f/fake.clj", "#_(ns fake.guess)\n(ns f.fake)\n\n(defn g [] (fake.guess/x))\n"),
];

fn write_tree(root: &Path) {
    for (rel, text) in TREE {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

/// Every row of the relations an import writes, per relation, sorted.
fn imported_rows(store: &Store) -> BTreeMap<String, Vec<String>> {
    const RELATIONS: &[&str] = &[
        "file",
        "form",
        "form_at",
        "file_text",
        "defines",
        "defined_by",
        "calls",
        "unresolved",
        "diagnostic",
        "ns_decl",
    ];
    let mut out = BTreeMap::new();
    for rel in RELATIONS {
        let cols = store.query(&format!("::columns {rel}"), Default::default()).unwrap();
        let names: Vec<String> = cols.rows.iter().map(|r| str_at(r, 0)).collect();
        let script = format!("?[{0}] := *{rel}{{{0}}}", names.join(", "));
        let rows = store.query(&script, Default::default()).unwrap();
        let mut v: Vec<String> = rows.rows.iter().map(|r| format!("{r:?}")).collect();
        v.sort();
        out.insert(rel.to_string(), v);
    }
    let versions = store
        .query(
            "?[id, v, op, file, ns, name, hash] := *version{id, v, op, file, ns, name, hash}",
            Default::default(),
        )
        .unwrap();
    let mut v: Vec<String> = versions.rows.iter().map(|r| format!("{r:?}")).collect();
    v.sort();
    out.insert("version".into(), v);
    out
}

fn calls(store: &Store) -> Vec<(String, String)> {
    let rows = store
        .query("?[name, to] := *calls{from: id, to}, *form{id, name}", Default::default())
        .unwrap();
    let mut out: Vec<(String, String)> =
        rows.rows.iter().map(|r| (str_at(r, 0), str_at(r, 1))).collect();
    out.sort();
    out
}

#[test]
fn batches_resolved_against_tables_grown_later_are_resolved_again() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("tree");
    write_tree(&root);
    let whole = Store::open_in_memory().unwrap();
    import::import_dir_in_batches(&whole, &root, "test", &Quiet, 0).unwrap();
    let expected = imported_rows(&whole);
    let whole_calls = calls(&whole);
    for call in [("f", "m.other/b"), ("use-it", "s.split/helper"), ("use-map", "s.split/map")] {
        assert!(
            whole_calls.contains(&(call.0.into(), call.1.into())),
            "{call:?} not in {whole_calls:?}"
        );
    }
    assert!(whole_calls.contains(&("two".into(), "c.one/one".into())), "{whole_calls:?}");
    assert!(!whole_calls.iter().any(|(_, to)| to.starts_with("fake.guess/")), "{whole_calls:?}");
    for batch in [1, 2, 3] {
        let streamed = Store::open_in_memory().unwrap();
        import::import_dir_in_batches(&streamed, &root, "test", &Quiet, batch).unwrap();
        let got = imported_rows(&streamed);
        for (rel, rows) in &expected {
            assert_eq!(rows, &got[rel], "batches of {batch}: {rel} differs");
        }
    }
}

/// A re-import resolves again the unchanged files whose resolution depends on what the changed
/// ones define: here `c.two`, which refers all of `c.one` and calls `three`, defined by the
/// new text of `c/one.clj`.
#[test]
fn a_streamed_reimport_resolves_unchanged_dependents_again() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("tree");
    write_tree(&root);
    std::fs::write(root.join("c/two.clj"), "(ns c.two (:use c.one))\n\n(defn two [] (three))\n")
        .unwrap();
    let streamed = Store::open_in_memory().unwrap();
    import::import_dir_in_batches(&streamed, &root, "test", &Quiet, 1).unwrap();
    assert!(!calls(&streamed).contains(&("two".into(), "c.one/three".into())));
    std::fs::write(root.join("c/one.clj"), "(ns c.one (:require c.two))\n\n(defn three [] 3)\n")
        .unwrap();
    let summary = import::import_dir_in_batches(&streamed, &root, "test", &Quiet, 1).unwrap();
    assert_eq!(summary.files_changed, 1);
    let whole = Store::open_in_memory().unwrap();
    import::import_dir_in_batches(&whole, &root, "test", &Quiet, 0).unwrap();
    let expected = calls(&whole);
    assert!(expected.contains(&("two".into(), "c.one/three".into())), "{expected:?}");
    assert_eq!(calls(&streamed), expected);
}

#[test]
fn the_declaration_scan_finds_the_first_ns_form() {
    let decl = first_ns_decl(
        ";; (ns not.this)\n\"(ns nor.this)\" \\( #\"(\" \n(comment (ns nor.that))\n(ns ^{:doc \"x\"} the.one\n  (:require [b.c :as c] d.e))\n",
    )
    .unwrap();
    assert_eq!(decl.name, "the.one");
    assert_eq!(decl.requires, vec!["b.c".to_string(), "d.e".to_string()]);
    assert_eq!(first_ns_decl("(in-ns 'x.y)\n(defn f [] 1)").unwrap().name, "x.y");
    assert!(first_ns_decl("(defn f [] \"(ns x)\")\n").is_none());
    assert!(first_ns_decl("(ns").is_none());
    // Nested past any parse's limit, it is no guess (and no overflow): the parse reports it.
    let deep = format!("(ns deep (:require {}x{}))\n", "[a ".repeat(100_000), "]".repeat(100_000));
    assert!(first_ns_decl(&deep).is_none());
}

/// The corpus (`FORMDB_CORPUS`, as `scripts/test.sh` sets it) streamed in batches of 7 and of
/// 256 files stores what one transaction stores. Batches of 7 put most callers in an earlier
/// transaction than the vars they call, and split namespaces over batches.
#[test]
fn the_streamed_corpus_stores_what_one_transaction_stores() {
    let Some(dir) = std::env::var_os("FORMDB_CORPUS").map(std::path::PathBuf::from) else {
        eprintln!("skipping: no corpus (set FORMDB_CORPUS, as scripts/test.sh does)");
        return;
    };
    let whole = Store::open_in_memory().unwrap();
    import::import_dir_in_batches(&whole, &dir, "corpus-test", &Quiet, 0).unwrap();
    let expected = imported_rows(&whole);
    assert!(expected["form"].len() > 5_000, "only {} forms", expected["form"].len());
    for batch in [7, 256] {
        let streamed = Store::open_in_memory().unwrap();
        import::import_dir_in_batches(&streamed, &dir, "corpus-test", &Quiet, batch).unwrap();
        let got = imported_rows(&streamed);
        for (rel, rows) in &expected {
            let other = &got[rel];
            let (mine, theirs): (BTreeSet<&String>, BTreeSet<&String>) =
                (rows.iter().collect(), other.iter().collect());
            let only_whole: Vec<&&String> = mine.difference(&theirs).take(5).collect();
            let only_streamed: Vec<&&String> = theirs.difference(&mine).take(5).collect();
            assert!(
                only_whole.is_empty() && only_streamed.is_empty() && rows.len() == other.len(),
                "batches of {batch}: {rel}: only in one transaction: {only_whole:#?}; only streamed: {only_streamed:#?}"
            );
        }
    }
}
