//! Edits through the engine API produce code the real Clojure runtime loads.
//!
//! Corpus namespaces (Debian's packaged libraries, from `scripts/corpus.sh`) get forms inserted
//! (one explicitly placed near the top that calls a helper; the helper inserted without a
//! position, so placement must put it before its caller) and forms replaced by agent text laid
//! out cljfmt-style. The edited store is exported and every edited namespace is loaded, and the
//! new functions called, by the Debian `clojure` runtime.

use std::path::PathBuf;
use std::process::Command;

use formdb_edit::ops::{self, Op, Options};
use formdb_edit::save::Writer;
use formdb_engine::import::{self, Quiet};
use formdb_engine::query;
use formdb_engine::store::{params, str_at, Store, STORE_DIR};
use formdb_projector::aliases::AliasMap;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// (library directory in the corpus, namespace) pairs to edit.
const TARGETS: &[(&str, &str)] = &[
    ("medley", "medley.core"),
    ("math.combinatorics", "clojure.math.combinatorics"),
    ("tools.cli", "clojure.tools.cli"),
    ("data.priority-map", "clojure.data.priority-map"),
    ("hiccup", "hiccup.util"),
    ("instaparse", "instaparse.core"),
];

/// Top-level public `defn`s of a namespace in file order: (id, name, source).
fn defns(store: &Store, ns: &str) -> Vec<(String, String, String)> {
    let rows = store
        .query(
            "?[file, pos, id, name, source] := *file{path: file, ns: file_ns}, file_ns == $ns, *form_at{file, pos, id}, *form{id, kind, name, source, parent, private}, kind == 'defn', parent == '', private == false :order file, pos",
            params([("ns", ns.into())]),
        )
        .unwrap();
    rows.rows.iter().map(|r| (str_at(r, 2), str_at(r, 3), str_at(r, 4))).collect()
}

#[test]
fn edited_corpus_namespaces_load_in_clojure() {
    let Some(dir) = formdb_testkit::corpus() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open(&tmp.path().join(STORE_DIR)).unwrap();
    import::import_dir(&store, &dir, "import", &Quiet).unwrap();
    let agent = Writer::new("agent", AliasMap::default());

    let mut calls = Vec::new();
    for (n, (_, ns)) in TARGETS.iter().enumerate() {
        let fns = defns(&store, ns);
        assert!(fns.len() >= 2, "{ns} has public defns");
        let (first_id, _, _) = fns[0].clone();
        let user = format!("formdb-user-{n}");
        let helper = format!("formdb-helper-{n}");
        // The user goes right after the first defn; the helper, inserted without a position,
        // must land before it.
        ops::apply(
            &store,
            &agent,
            &[
                Op::Insert {
                    ns: ns.to_string(),
                    source: format!("(defn {user} [x] ({helper} x))"),
                    before: None,
                    after: Some(first_id),
                },
                Op::Insert {
                    ns: ns.to_string(),
                    source: format!("(defn {helper}\n\"Tags x.\"\n[x]\n(vector :formdb {n} x))"),
                    before: None,
                    after: None,
                },
            ],
            Options::default(),
        )
        .unwrap_or_else(|e| panic!("{ns}: {e}"));
        // Replace the last public defn with its own text as an agent sends it: re-laid out.
        let (last_id, last_name, last_source) = fns.last().unwrap().clone();
        let out = ops::apply(
            &store,
            &agent,
            &[Op::Replace { id: last_id.clone(), source: last_source, expected_hash: None }],
            Options::default(),
        )
        .unwrap_or_else(|e| panic!("{ns}/{last_name}: {e}"));
        assert_eq!(out.results[0].id, last_id, "{ns}/{last_name} keeps its id");

        let path = formdb_projector::views::ns_path(&store, ns).unwrap();
        let text = formdb_projector::views::stored_text(&store, &path).unwrap();
        let h = text.find(&format!("(defn {helper}")).expect("helper stored");
        let u = text.find(&format!("(defn {user}")).expect("user stored");
        assert!(h < u, "{ns}: the helper is placed before its caller");
        calls.push(format!("(assert (= [:formdb {n} 7] ({ns}/{user} 7)) \"{ns}\")"));
    }

    // Export the whole store and load the edited namespaces in front of the packaged jars.
    let export = tmp.path().join("export");
    for path in query::paths(&store).unwrap() {
        let bytes = query::file_bytes(&store, &path).unwrap().unwrap();
        let dest = export.join(&path);
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        std::fs::write(dest, bytes).unwrap();
    }
    let cp = Command::new(root().join("scripts/corpus.sh")).arg("--classpath").output().unwrap();
    assert!(cp.status.success());
    let mut classpath: Vec<String> =
        TARGETS.iter().map(|(lib, _)| export.join(lib).display().to_string()).collect();
    classpath.push(String::from_utf8(cp.stdout).unwrap().trim().to_string());
    let requires: Vec<String> = TARGETS.iter().map(|(_, ns)| format!("'{ns}")).collect();
    let script = format!(
        "(require {}) {} (println \"loaded\" (count (all-ns)))",
        requires.join(" "),
        calls.join(" ")
    );
    let out = Command::new("clojure")
        .arg("-cp")
        .arg(classpath.join(":"))
        .arg("-e")
        .arg(&script)
        .output()
        .expect("run the Debian clojure runtime");
    assert!(
        out.status.success(),
        "clojure failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("loaded"));
}
