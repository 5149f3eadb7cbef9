//! A big change is written a chunk of forms at a time inside its one transaction
//! (`change::apply_in_chunks_of`): it must store exactly what one `import_relations` call
//! stores, and a failure part-way must leave the store as it was. A big file is resolved a
//! chunk of forms at a time as its rows are built: its change must be the one a whole
//! resolution makes.

use formdb_engine::change::{self, Change, ChangeSet, Sites, Stamp};
use formdb_engine::forms::{self, ParsedFile};
use formdb_engine::import::{self, Incoming, Quiet};
use formdb_engine::store::{str_at, Store};
use formdb_engine::syntax::Lang;

const PATH: &str = "src/big/forms.clj";

/// A text of `n` small forms calling each other and `clojure.string`, with a comment block,
/// an unresolved call, a multimethod and a `def` of a constant.
fn many_forms(n: usize) -> String {
    let mut text = String::from("(ns big.forms\n  (:require [clojure.string :as str]))\n\n");
    for i in 0..n {
        text.push_str(&format!(";; form {i}\n(defn f{i} [x] (str/upper-case (f{} x)))\n", i / 2));
        // Findings enough for several chunks of them.
        if i % 20 == 0 {
            text.push_str(&format!("(defn g{i} [x] (missing-{i} x))\n"));
        }
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
        let findings = a.iter().filter(|r| r.starts_with("diagnostic ")).count();
        assert!(findings > 2 * 7, "{findings} findings: written in one chunk of them");
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

/// A change as written, less what was read of the store to compute it (the same, in hash order).
/// Its forms' call sites are read back: a file resolved in chunks holds them as stored.
fn written(changes: Vec<Change>) -> String {
    let mut changes: Vec<Change> =
        changes.into_iter().filter(|c| !matches!(c, Change::Read(_))).collect();
    for c in &mut changes {
        if let Change::PutFile { forms, .. } = c {
            for f in forms {
                f.sites = Sites::Found(f.call_sites().into_owned());
            }
        }
    }
    format!("{changes:#?}")
}

/// Two changes as written are the same; else the lines around the first where they differ.
fn same(got: &str, expected: &str, chunk: usize) {
    let (got, expected): (Vec<&str>, Vec<&str>) =
        (got.lines().collect(), expected.lines().collect());
    if let Some(at) = (0..got.len().max(expected.len())).find(|i| got.get(*i) != expected.get(*i)) {
        let around = |lines: &[&str]| {
            lines[at.saturating_sub(20).min(lines.len())..(at + 5).min(lines.len())].join("\n")
        };
        panic!(
            "resolved in chunks of {chunk}, the change differs at line {at}:\n{}\n---- whole:\n{}",
            around(&got),
            around(&expected)
        );
    }
}

/// A file of many forms is resolved a chunk of them at a time as its rows are built, each
/// chunk's parse and resolution moved into its rows before the next chunk is resolved
/// (`forms::resolved_in_chunks`). Its change must be the one a whole resolution makes: the
/// same ids (matched against the stored forms, fresh ones in order), calls, purity across
/// chunks (the forms call each other), comment-block children and findings; read whole or in
/// runs, saved new and over its stored forms. Written, its rows (which hold their call sites
/// as stored) give the store the same findings.
#[test]
fn a_file_resolved_in_chunks_makes_the_change_one_resolution_makes() {
    let (dir, dir_chunked) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let store = Store::open(dir.path()).unwrap();
    let chunked = Store::open(dir_chunked.path()).unwrap();
    // A comment block, and a call with one argument too many.
    let with_block = |text: String| {
        text.replacen(
            ";; form 2\n",
            "(comment\n  (f1 \"a\")\n  (f9 (f3 \"b\")))\n(defn caller [] (f1 \"a\" \"b\"))\n;; form 2\n",
            1,
        )
    };
    let change = |store: &Store, parsed: ParsedFile| {
        let (changes, errors) = import::parsed_file_changes(store, vec![parsed], &Quiet).unwrap();
        assert!(errors.is_empty(), "{errors:?}");
        changes
    };
    let stamp = Stamp { at: Some(1.0), commit: None };
    for text in [with_block(many_forms(300)), with_block(edited())] {
        let whole = || forms::parse_file(PATH, Lang::Clj, text.clone());
        let in_runs = || forms::parse_file_in_runs(PATH, Lang::Clj, text.clone(), 512);
        let one = change(&store, whole().resolved_in_chunks_of(usize::MAX));
        let expected = written(one.clone());
        for chunk in [1, 7, 64] {
            same(&written(change(&store, whole().resolved_in_chunks_of(chunk))), &expected, chunk);
            same(
                &written(change(&store, in_runs().resolved_in_chunks_of(chunk))),
                &expected,
                chunk,
            );
        }
        let set = ChangeSet { author: "t".into(), op: "save".into(), changes: one };
        change::apply_at(&store, &set, &stamp).unwrap();
        let in_chunks = change(&chunked, in_runs().resolved_in_chunks_of(7));
        let set = ChangeSet { author: "t".into(), op: "save".into(), changes: in_chunks };
        change::apply_at(&chunked, &set, &stamp).unwrap();
    }
    let (a, b) = (dump(&store), dump(&chunked));
    assert!(a.iter().any(|r| r.starts_with("diagnostic ") && r.contains("\"arity\"")), "{a:#?}");
    assert_eq!(a.len(), b.len());
    for (a, b) in a.iter().zip(&b) {
        assert_eq!(a, b);
    }
}
