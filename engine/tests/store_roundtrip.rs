//! End-to-end tests of the engine on small, realistic Clojure trees: import a directory into a
//! real Cozo store, then check what the store says against what the files say.
//!
//! Every fixture is written to a fresh temporary directory; the stores are in memory unless
//! persistence is the subject.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use formdb_engine::import::{self, ImportSummary};
use formdb_engine::query;
use formdb_engine::store::{params, str_at, Params, Store, StoreError, SCHEMA_VERSION, STORE_DIR};
use serde_json::{Map, Value};

// ---------------------------------------------------------------------------------------------
// Fixture

// The small shop both this file and `tests/cli.rs` build from: its shared files live in
// `testkit/fixtures/inline-shop/` (the engine cannot depend on testkit, which depends on it).
const UTIL: &str = include_str!("../../testkit/fixtures/inline-shop/util.clj");

const CORE: &str = r#"(ns shop.core
  "Entry point of the shop."
  (:require [shop.util :as u :refer [slugify]]
            [clojure.string :as str]
            [clojure.tools.logging :as log]
            [acme.payments :as pay]))

(defrecord Order [id items kind])

(defmulti total-of :kind)

(defmethod total-of :simple [o]
  (reduce + (map :price (:items o))))

(defmethod total-of :taxed [o]
  (u/price-with-tax (total-of (assoc o :kind :simple))))

(defn double-all [xs] (map inc xs))

(defn shout! [msg] (println (str/upper-case msg)))

(defn audit [msg] (log/info "audit" msg))

(defn titles [products] (map (comp slugify :title) products))

(defn checkout [order] (pay/charge! (:id order)))

(defn summary [order] (helper-later order))

(defn helper-later [order] (double-all (:items order)))

(println "shop loaded")

(comment
  (shout! "hi")
  (def scratch 42))

(defn -main [& args] (shout! "start"))
"#;

const CORE_TEST: &str = include_str!("../../testkit/fixtures/inline-shop/core_test.clj");

/// The files of the fixture tree, as (relative path, bytes).
fn shop_files() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("deps.edn", b"{:paths [\"src\" \"resources\"]\n :deps {org.clojure/clojure {:mvn/version \"1.11.1\"}}}\n".to_vec()),
        ("README.md", b"# Shop\n\nA tiny shop.\n".to_vec()),
        (".gitignore", b"ignored/\n".to_vec()),
        ("ignored/junk.clj", b"(ns ignored.junk)\n(defn junk [] 1)\n".to_vec()),
        ("target/classes/gen.clj", b"(ns gen)\n(defn gen [] 1)\n".to_vec()),
        ("src/shop/util.clj", UTIL.as_bytes().to_vec()),
        ("src/shop/core.clj", CORE.as_bytes().to_vec()),
        ("test/shop/core_test.clj", CORE_TEST.as_bytes().to_vec()),
        ("src/shop/cycle_a.clj", b"(ns shop.cycle-a\n  (:require [shop.cycle-b :as b]))\n\n(defn a [] (b/b))\n".to_vec()),
        ("src/shop/cycle_b.clj", b"(ns shop.cycle-b\n  (:require [shop.cycle-a :as a]))\n\n(defn b [] (a/a))\n".to_vec()),
        ("src/shop/crlf.clj", b"(ns shop.crlf)\r\n\r\n;; tabs and CRLF\r\n(defn tabbed [x]\r\n\t(inc x))\r\n".to_vec()),
        ("src/shop/i18n.clj", "\u{feff}(ns shop.i18n)\n\n(def greeting \"Grüße, 世界\")\n".as_bytes().to_vec()),
        ("src/shop/nofinal.clj", b"(ns shop.nofinal)\n\n(defn f [] 1)".to_vec()),
        ("bin/tool.clj", b"#!/usr/bin/env bb\n(ns tool)\n\n#_(defn old [] 0)\n(defn go [] #_ignored 1)\n#_ (trailing discard)\n".to_vec()),
        (
            "src/shop/platform.cljc",
            b"(ns shop.platform)\n\n(defn now []\n  #?(:clj (System/currentTimeMillis)\n     :cljs (.now js/Date)))\n".to_vec(),
        ),
        ("resources/config.edn", b"{:port 8080\n :db {:host \"localhost\"}}\n".to_vec()),
    ]
}

/// Paths of the fixture that must be imported (everything but `ignored/` and `target/`).
fn imported_paths() -> BTreeSet<String> {
    shop_files()
        .into_iter()
        .map(|(p, _)| p.to_string())
        .filter(|p| !p.starts_with("ignored/") && !p.starts_with("target/"))
        .collect()
}

fn write(root: &Path, rel: &str, bytes: &[u8]) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

fn shop_tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (rel, bytes) in shop_files() {
        write(dir.path(), rel, &bytes);
    }
    dir
}

fn import(store: &Store, root: &Path) -> ImportSummary {
    import::import_dir(store, root, "test", &import::Quiet).unwrap()
}

/// The fixture imported into a fresh in-memory store.
fn shop() -> (tempfile::TempDir, Store, ImportSummary) {
    let dir = shop_tree();
    let store = Store::open_in_memory().unwrap();
    let summary = import(&store, dir.path());
    assert!(summary.errors.is_empty(), "the fixture parses: {:?}", summary.errors);
    (dir, store, summary)
}

// ---------------------------------------------------------------------------------------------
// Helpers over the store

fn form(store: &Store, key: &str) -> Map<String, Value> {
    query::form(store, key).unwrap().unwrap_or_else(|| panic!("no form `{key}` in the store"))
}

fn field(f: &Map<String, Value>, k: &str) -> String {
    match f.get(k) {
        Some(Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
        None => panic!("form has no field `{k}`: {f:?}"),
    }
}

fn id_of(store: &Store, key: &str) -> String {
    field(&form(store, key), "id")
}

fn calls_of(store: &Store, key: &str) -> Vec<String> {
    form(store, key)["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

/// Every named form's id, by fully-qualified name.
fn ids_by_fqn(store: &Store) -> BTreeMap<String, String> {
    let rows = store.query("?[fqn, id] := *form{fqn, id}, fqn != ''", Params::new()).unwrap();
    rows.rows.iter().map(|r| (str_at(r, 0), str_at(r, 1))).collect()
}

fn stat(store: &Store, column: &str) -> i64 {
    let rows = query::stats(store).unwrap();
    rows.rows[0][column].as_i64().unwrap()
}

fn history(store: &Store, key: &str) -> Vec<Map<String, Value>> {
    query::history(store, key).unwrap().rows
}

/// The id of the top-level form of `file` whose source starts with `prefix`.
fn id_by_source(store: &Store, file: &str, prefix: &str) -> String {
    // Bound through a variable: see `binding_an_indexed_column_in_a_user_query` for why.
    let rows = store
        .query(
            "?[id, source] := *form{id, file: f, source}, f == $file",
            params([("file", file.into())]),
        )
        .unwrap();
    let hits: Vec<String> = rows
        .rows
        .iter()
        .filter(|r| str_at(r, 1).starts_with(prefix))
        .map(|r| str_at(r, 0))
        .collect();
    assert_eq!(hits.len(), 1, "exactly one form of {file} starts with {prefix:?}: {hits:?}");
    hits[0].clone()
}

fn column(rows: &query::Rows, name: &str) -> Vec<String> {
    rows.rows.iter().map(|r| r[name].as_str().unwrap_or_default().to_string()).collect()
}

// ---------------------------------------------------------------------------------------------
// Round trip

#[test]
fn every_imported_file_reassembles_byte_for_byte() {
    let (dir, store, summary) = shop();
    let stored: BTreeSet<String> = query::paths(&store).unwrap().into_iter().collect();
    assert_eq!(
        stored,
        imported_paths(),
        "ignored/ and target/ are skipped, everything else is kept"
    );
    assert_eq!(summary.files_added, imported_paths().len());
    assert_eq!(summary.blobs, 2, "README.md and .gitignore are blobs");
    for path in &stored {
        let on_disk = std::fs::read(dir.path().join(path)).unwrap();
        let back = query::file_bytes(&store, path)
            .unwrap()
            .unwrap_or_else(|| panic!("{path} has no bytes"));
        assert!(
            back == on_disk,
            "{path} does not round-trip:\n--- disk\n{:?}\n--- store\n{:?}",
            String::from_utf8_lossy(&on_disk),
            String::from_utf8_lossy(&back)
        );
    }
    for absent in ["ignored/junk.clj", "target/classes/gen.clj", "no/such/file.clj"] {
        assert_eq!(query::file_bytes(&store, absent).unwrap(), None, "{absent}");
    }
    // Nothing was lost to raw storage: the odd files are parsed into forms.
    for (fqn, file) in [
        ("shop.crlf/tabbed", "src/shop/crlf.clj"),
        ("shop.i18n/greeting", "src/shop/i18n.clj"),
        ("shop.nofinal/f", "src/shop/nofinal.clj"),
        ("tool/go", "bin/tool.clj"),
        ("shop.platform/now", "src/shop/platform.cljc"),
    ] {
        assert_eq!(field(&form(&store, fqn), "file"), file, "{fqn}");
    }
    assert_eq!(stat(&store, "parse_errors"), 0);
}

#[test]
fn odd_files_keep_their_shape_in_forms() {
    let (_dir, store, _) = shop();
    let tabbed = form(&store, "shop.crlf/tabbed");
    assert_eq!(field(&tabbed, "source"), "(defn tabbed [x]\r\n\t(inc x))");
    assert_eq!(field(&tabbed, "line"), "4");
    let greeting = form(&store, "shop.i18n/greeting");
    assert_eq!(field(&greeting, "source"), "(def greeting \"Grüße, 世界\")");
    assert_eq!(field(&greeting, "line"), "3");
    assert_eq!(field(&form(&store, "shop.nofinal/f"), "source"), "(defn f [] 1)");
    // The discarded `(defn old ...)` is trivia, not a form.
    assert!(query::form(&store, "tool/old").unwrap().is_none());
    assert_eq!(field(&form(&store, "tool/go"), "line"), "5");
    let now = form(&store, "shop.platform/now");
    assert!(field(&now, "source").contains(":cljs (.now js/Date)"), "{now:?}");
}

#[test]
fn files_that_do_not_parse_are_kept_raw_with_their_error() {
    let dir = shop_tree();
    let broken = b"(ns shop.broken)\n\n(defn oops [x]\n  (inc x)\n".to_vec();
    let latin1 = b"(ns shop.latin1)\n(def s \"caf\xe9\")\n".to_vec();
    write(dir.path(), "src/shop/broken.clj", &broken);
    write(dir.path(), "src/shop/latin1.clj", &latin1);
    let store = Store::open_in_memory().unwrap();
    let summary = import(&store, dir.path());

    let errors: BTreeMap<&str, (u32, u32)> =
        summary.errors.iter().map(|e| (e.path.as_str(), (e.line, e.col))).collect();
    assert_eq!(errors.len(), 2, "{:?}", summary.errors);
    assert_eq!(errors["src/shop/broken.clj"], (3, 1), "the unclosed `(defn` opens on line 3");
    assert_eq!(errors["src/shop/latin1.clj"], (2, 12), "the byte 0xE9 follows `(def s \"caf`");
    for e in &summary.errors {
        assert!(!e.message.is_empty());
        assert!(e.to_string().starts_with(&format!("{}:{}:{}: ", e.path, e.line, e.col)), "{e}");
    }
    // The rest of the tree is imported all the same.
    assert_eq!(field(&form(&store, "shop.util/slugify"), "file"), "src/shop/util.clj");
    assert!(query::form(&store, "shop.broken/oops").unwrap().is_none());
    assert_eq!(query::file_bytes(&store, "src/shop/broken.clj").unwrap().unwrap(), broken);
    assert_eq!(query::file_bytes(&store, "src/shop/latin1.clj").unwrap().unwrap(), latin1);
    assert_eq!(stat(&store, "parse_errors"), 2);

    // Unchanged raw files are unchanged on re-import too.
    let again = import(&store, dir.path());
    assert_eq!((again.files_added, again.files_changed, again.files_removed), (0, 0, 0));
    assert_eq!(again.files_unchanged, imported_paths().len() + 2);

    // Fixing the file turns it into forms.
    let fixed = b"(ns shop.broken)\n\n(defn oops [x]\n  (inc x))\n".to_vec();
    write(dir.path(), "src/shop/broken.clj", &fixed);
    let after = import(&store, dir.path());
    assert_eq!(after.files_changed, 1);
    assert!(
        after.errors.is_empty(),
        "only files read by this import are reported: {:?}",
        after.errors
    );
    assert_eq!(field(&form(&store, "shop.broken/oops"), "line"), "3");
    assert_eq!(query::file_bytes(&store, "src/shop/broken.clj").unwrap().unwrap(), fixed);
    assert_eq!(stat(&store, "parse_errors"), 1);
}

#[test]
fn reimport_of_an_unchanged_tree_changes_nothing() {
    let (dir, store, first) = shop();
    assert!(first.forms.added > 30, "{first:?}");
    assert_eq!(first.forms.versions, first.forms.added, "one version row per new form");
    let ids = ids_by_fqn(&store);
    let versions = stat(&store, "versions");
    let again = import(&store, dir.path());
    assert_eq!(
        (again.files_added, again.files_changed, again.files_removed),
        (0, 0, 0),
        "{again:?}"
    );
    assert_eq!(again.files_unchanged, imported_paths().len());
    assert_eq!(
        (again.forms.added, again.forms.changed, again.forms.removed, again.forms.versions),
        (0, 0, 0, 0)
    );
    assert_eq!(stat(&store, "versions"), versions);
    assert_eq!(ids_by_fqn(&store), ids);
}

#[test]
fn a_fresh_store_gives_the_same_ids() {
    let (dir, store, _) = shop();
    let other = Store::open_in_memory().unwrap();
    import(&other, dir.path());
    assert_eq!(ids_by_fqn(&store), ids_by_fqn(&other));
}

// ---------------------------------------------------------------------------------------------
// Identity and history

/// A form renamed in its file, its text otherwise the same, keeps its id (matched by its text;
/// the stored texts are read only for forms that matching by name can leave over), beside forms
/// kept by their names, an unnamed form and two definitions of one name of which one is renamed.
#[test]
fn a_form_renamed_in_its_file_keeps_its_id_beside_the_forms_kept_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let text = "(ns shop.renames)\n\n(defn total [xs] (if (seq xs) (+ (first xs) (total (rest xs))) 0))\n\n\
                (defn kept [x] x)\n\n(println \"loaded\")\n\n(defn twice [x] x)\n\n(defn twice [x] (* 2 x))\n";
    write(dir.path(), "src/shop/renames.clj", text.as_bytes());
    let store = Store::open_in_memory().unwrap();
    import(&store, dir.path());
    let path = "src/shop/renames.clj";
    let before: Vec<String> = ["(defn total", "(defn kept", "(println", "(defn twice [x] (*"]
        .iter()
        .map(|p| id_by_source(&store, path, p))
        .collect();

    let renamed = text
        .replace("total", "sum")
        .replace("(defn twice [x] (* 2 x))", "(defn thrice [x] (* 2 x))")
        .replace("\"loaded\"", "\"loaded!\"");
    write(dir.path(), path, renamed.as_bytes());
    let s = import(&store, dir.path());
    assert_eq!((s.forms.added, s.forms.removed), (0, 0), "{s:?}");
    let after: Vec<String> = ["(defn sum", "(defn kept", "(println", "(defn thrice"]
        .iter()
        .map(|p| id_by_source(&store, path, p))
        .collect();
    assert_eq!(after, before, "renamed, kept, edited unnamed and renamed duplicate forms");
}

#[test]
fn ids_survive_edits_reorders_and_insertions() {
    let (dir, store, _) = shop();
    let before = ids_by_fqn(&store);
    let println_id = id_by_source(&store, "src/shop/core.clj", "(println \"shop loaded\")");
    let versions = stat(&store, "versions");

    let edited = CORE
        // Edit one body.
        .replace("(defn double-all [xs] (map inc xs))", "(defn double-all [xs] (mapv inc xs))")
        // Swap two forms (both are preceded by one blank line, so their text is unchanged).
        .replace("(defn shout! [msg] (println (str/upper-case msg)))", "@@AUDIT@@")
        .replace(
            "(defn audit [msg] (log/info \"audit\" msg))",
            "(defn shout! [msg] (println (str/upper-case msg)))",
        )
        .replace("@@AUDIT@@", "(defn audit [msg] (log/info \"audit\" msg))")
        // A small edit of an unnamed form.
        .replace("(println \"shop loaded\")", "(println \"shop loaded!\")")
        // A new form at the top, right after the ns form.
        .replace("(defrecord Order", "(def version \"1.0\")\n\n(defrecord Order");
    assert_ne!(edited, CORE);
    write(dir.path(), "src/shop/core.clj", edited.as_bytes());
    let s = import(&store, dir.path());
    assert_eq!((s.files_changed, s.files_unchanged), (1, imported_paths().len() - 1));
    assert_eq!((s.forms.added, s.forms.changed, s.forms.removed), (1, 2, 0), "{s:?}");
    assert_eq!(s.forms.versions, 3);
    assert_eq!(stat(&store, "versions"), versions + 3);

    let after = ids_by_fqn(&store);
    for (fqn, id) in &before {
        assert_eq!(after.get(fqn), Some(id), "{fqn} kept its id");
    }
    assert_eq!(after.len(), before.len() + 1);
    assert!(after.contains_key("shop.core/version"));
    assert_eq!(
        id_by_source(&store, "src/shop/core.clj", "(println \"shop loaded!\")"),
        println_id,
        "unnamed form kept its id"
    );
    assert_eq!(
        field(&form(&store, "shop.core/shout!"), "line"),
        "24",
        "the swapped form moved down (and 2 lines for the new form)"
    );

    let h = history(&store, "shop.core/double-all");
    assert_eq!(h.len(), 2, "{h:?}");
    assert_eq!(h[0]["v"], 1);
    assert_eq!(h[1]["v"], 2);
    assert!(field(&h[0], "source").ends_with("(defn double-all [xs] (map inc xs))"));
    assert!(field(&h[1], "source").ends_with("(defn double-all [xs] (mapv inc xs))"));
    assert_eq!(field(&h[1], "author"), "test");
    assert_eq!(history(&store, &println_id).len(), 2);
    for unchanged in [
        "shop.core/shout!",
        "shop.core/audit",
        "shop.core/titles",
        "shop.util/slugify",
        "shop.core/Order",
    ] {
        assert_eq!(history(&store, unchanged).len(), 1, "{unchanged} got no new version");
    }
    assert_eq!(query::file_bytes(&store, "src/shop/core.clj").unwrap().unwrap(), edited.as_bytes());

    // Deleting a form removes it and records a `delete` version.
    let checkout_id = before["shop.core/checkout"].clone();
    let without = edited.replace("(defn checkout [order] (pay/charge! (:id order)))\n\n", "");
    assert_ne!(without, edited);
    write(dir.path(), "src/shop/core.clj", without.as_bytes());
    let s = import(&store, dir.path());
    assert_eq!(
        (s.forms.added, s.forms.changed, s.forms.removed, s.forms.versions),
        (0, 0, 1, 1),
        "{s:?}"
    );
    assert!(query::form(&store, "shop.core/checkout").unwrap().is_none());
    assert!(query::form(&store, &checkout_id).unwrap().is_none());
    let h = history(&store, &checkout_id);
    assert_eq!(h.len(), 2, "{h:?}");
    assert_eq!(field(&h[1], "op"), "delete");
    assert_eq!(field(&h[1], "name"), "checkout");
    assert_eq!(field(&h[1], "ns"), "shop.core");
    let usages = query::usages(&store, "acme.payments/charge!").unwrap();
    assert!(usages.is_empty(), "the deleted form's calls are gone: {usages:?}");
    assert_eq!(
        query::file_bytes(&store, "src/shop/core.clj").unwrap().unwrap(),
        without.as_bytes()
    );
    let mut expected = before.clone();
    expected.remove("shop.core/checkout");
    expected.insert("shop.core/version".into(), after["shop.core/version"].clone());
    assert_eq!(ids_by_fqn(&store), expected);
}

#[test]
fn comment_block_children_are_forms_of_their_own() {
    let (_dir, store, _) = shop();
    let block = id_by_source(&store, "src/shop/core.clj", "(comment");
    assert_eq!(field(&form(&store, &block), "kind"), "comment");
    assert_eq!(field(&form(&store, &block), "parent"), "");
    let rows = store
        .query(
            "?[pos, id, source] := *form{id, parent: $p, pos, source} :order pos",
            params([("p", block.as_str().into())]),
        )
        .unwrap();
    let children: Vec<(String, String)> =
        rows.rows.iter().map(|r| (str_at(r, 1), str_at(r, 2))).collect();
    assert_eq!(
        children.iter().map(|(_, s)| s.as_str()).collect::<Vec<_>>(),
        ["(shout! \"hi\")", "(def scratch 42)"]
    );
    let ids: BTreeSet<&str> =
        children.iter().map(|(id, _)| id.as_str()).chain([block.as_str()]).collect();
    assert_eq!(ids.len(), 3, "block and children have distinct ids");
    let scratch = form(&store, &children[1].0);
    assert_eq!(field(&scratch, "parent"), block);
    assert_eq!(field(&scratch, "kind"), "def");
    assert_eq!(field(&scratch, "line"), "36");
    assert_eq!(field(&scratch, "ns"), "shop.core");
    let shout_child = form(&store, &children[0].0);
    assert_eq!(field(&shout_child, "parent"), block);
    assert!(calls_of(&store, &children[0].0).contains(&"shop.core/shout!".to_string()));
}

// ---------------------------------------------------------------------------------------------
// Resolution

#[test]
fn calls_are_fully_qualified() {
    let (_dir, store, _) = shop();
    let slugify = calls_of(&store, "shop.util/slugify");
    for c in ["clojure.string/join", "clojure.string/split", "clojure.string/lower-case"] {
        assert!(slugify.contains(&c.to_string()), "{c} in {slugify:?}");
    }
    assert!(!slugify.iter().any(|c| c.starts_with("str/")), "{slugify:?}");
    let titles = calls_of(&store, "shop.core/titles");
    assert!(
        titles.contains(&"shop.util/slugify".to_string()),
        "a :refer'red fn is its FQN: {titles:?}"
    );
    assert!(titles.contains(&"clojure.core/map".to_string()), "{titles:?}");
    assert!(
        calls_of(&store, "shop.core/summary").contains(&"shop.core/helper-later".to_string()),
        "a same-ns fn defined later"
    );
    assert!(calls_of(&store, "shop.core/shout!").contains(&"clojure.string/upper-case".to_string()));
    assert!(calls_of(&store, "shop.core/audit").contains(&"clojure.tools.logging/info".to_string()));
    assert!(calls_of(&store, "shop.core/checkout").contains(&"acme.payments/charge!".to_string()));
    assert!(calls_of(&store, "shop.cycle-a/a").contains(&"shop.cycle-b/b".to_string()));
    let taxed = id_by_source(&store, "src/shop/core.clj", "(defmethod total-of :taxed");
    let taxed_calls = calls_of(&store, &taxed);
    assert!(taxed_calls.contains(&"shop.util/price-with-tax".to_string()), "{taxed_calls:?}");
    assert!(taxed_calls.contains(&"shop.core/total-of".to_string()), "{taxed_calls:?}");
    let test_calls = calls_of(&store, "shop.core-test/double-all-test");
    assert!(test_calls.contains(&"shop.core/double-all".to_string()), "{test_calls:?}");
    assert!(test_calls.contains(&"clojure.test/is".to_string()), "{test_calls:?}");
    let unresolved = query::run_named(&store, "unresolved", Params::new()).unwrap();
    assert!(unresolved.is_empty(), "everything in the fixture resolves: {unresolved:?}");
}

#[test]
fn usages_callers_and_callees() {
    let (_dir, store, _) = shop();
    let u = query::usages(&store, "shop.util/slugify").unwrap();
    assert_eq!(u.rows.len(), 1, "{u:?}");
    assert_eq!(u.rows[0]["caller"], "shop.core/titles");
    assert_eq!(u.rows[0]["file"], "src/shop/core.clj");
    assert_eq!(u.rows[0]["line"], 24);
    assert_eq!(u.rows[0]["caller_id"], id_of(&store, "shop.core/titles").as_str());

    let u = query::usages(&store, "shop.core/double-all").unwrap();
    let callers: BTreeSet<String> = column(&u, "caller").into_iter().collect();
    assert_eq!(
        callers,
        ["shop.core/helper-later", "shop.core-test/double-all-test"].map(String::from).into()
    );
    let in_test = u.rows.iter().find(|r| r["caller"] == "shop.core-test/double-all-test").unwrap();
    assert_eq!(in_test["file"], "test/shop/core_test.clj");
    assert_eq!(in_test["line"], 6, "the line of the use, inside the deftest");

    let direct = query::callers(&store, "shop.core/double-all", 1).unwrap();
    assert!(!column(&direct, "fqn").contains(&"shop.core/summary".to_string()), "{direct:?}");
    let two = query::callers(&store, "shop.core/double-all", 2).unwrap();
    let summary = two
        .rows
        .iter()
        .find(|r| r["fqn"] == "shop.core/summary")
        .unwrap_or_else(|| panic!("{two:?}"));
    assert_eq!(summary["depth"], 2);
    assert_eq!(summary["line"], 28);
    let helper = two.rows.iter().find(|r| r["fqn"] == "shop.core/helper-later").unwrap();
    assert_eq!(helper["depth"], 1);

    let callees = query::callees(&store, "shop.core/summary", 1).unwrap();
    assert!(column(&callees, "fqn").contains(&"shop.core/helper-later".to_string()), "{callees:?}");
    assert!(!column(&callees, "fqn").contains(&"shop.core/double-all".to_string()), "{callees:?}");
    let helper = callees.rows.iter().find(|r| r["fqn"] == "shop.core/helper-later").unwrap();
    assert_eq!(helper["id"], id_of(&store, "shop.core/helper-later").as_str());
    assert_eq!(helper["file"], "src/shop/core.clj");
    let deep = query::callees(&store, "shop.core/summary", 2).unwrap();
    let d = deep
        .rows
        .iter()
        .find(|r| r["fqn"] == "shop.core/double-all")
        .unwrap_or_else(|| panic!("{deep:?}"));
    assert_eq!(d["depth"], 2);
    // Library vars are listed with an empty id.
    let lib = query::callees(&store, "shop.core/checkout", 1).unwrap();
    let charge = lib
        .rows
        .iter()
        .find(|r| r["fqn"] == "acme.payments/charge!")
        .unwrap_or_else(|| panic!("{lib:?}"));
    assert_eq!(charge["id"], "");
    // By id too.
    let by_id = query::callees(&store, &id_of(&store, "shop.core/summary"), 1).unwrap();
    assert_eq!(column(&by_id, "fqn"), column(&callees, "fqn"));
}

#[test]
fn canonical_source_writes_aliases_fully_qualified() {
    let (_dir, store, _) = shop();
    let canonical = |key: &str| -> String {
        let id = id_of(&store, key);
        let rows = store
            .query("?[c] := *form{id: $id, canonical: c}", params([("id", id.as_str().into())]))
            .unwrap();
        str_at(&rows.rows[0], 0)
    };
    assert_eq!(
        canonical("shop.util/slugify"),
        "(defn slugify\n  \"Turn a product title into a URL slug.\"\n  [title]\n  (clojure.string/join \"-\" (clojure.string/split (clojure.string/lower-case title) #\"\\s+\")))"
    );
    assert_eq!(
        canonical("shop.core/audit"),
        "(defn audit [msg] (clojure.tools.logging/info \"audit\" msg))"
    );
    assert_eq!(
        canonical("shop.core/checkout"),
        "(defn checkout [order] (acme.payments/charge! (:id order)))"
    );
    // The text as written is untouched.
    assert_eq!(
        field(&form(&store, "shop.core/audit"), "source"),
        "(defn audit [msg] (log/info \"audit\" msg))"
    );
    // Nothing to rewrite: the text is stored once, `canonical` left empty.
    assert_eq!(canonical("shop.core/double-all"), "");
    assert_eq!(
        field(&form(&store, "shop.core/double-all"), "source"),
        "(defn double-all [xs] (map inc xs))"
    );
}

#[test]
fn purity_classes() {
    let (_dir, store, _) = shop();
    let purity = |key: &str| field(&form(&store, key), "purity");
    assert_eq!(purity("shop.core/shout!"), "impure", "calls println");
    assert_eq!(purity("shop.core/double-all"), "pure", "calls map and inc only");
    assert_eq!(purity("shop.core/audit"), "telemetry", "calls clojure.tools.logging/info only");
    assert_eq!(purity("shop.core/helper-later"), "pure", "calls a pure fn of its own ns");
    assert_eq!(purity("shop.core/summary"), "pure", "calls a pure fn that calls a pure fn");
    assert_eq!(purity("shop.core/checkout"), "unknown", "calls an unknown library fn");
    assert_eq!(purity("shop.util/slugify"), "pure", "clojure.string is pure");
    assert_eq!(purity("shop.core/titles"), "pure", "calls a pure fn of another ns");
    assert_eq!(purity("shop.core/-main"), "impure", "calls an impure fn of its own ns");
}

/// Purity of a form in an unchanged file depends on vars of a changed file: an incremental
/// import must give what a fresh import of the same tree gives.
#[test]
fn purity_follows_a_callee_edited_in_another_file() {
    let (dir, store, _) = shop();
    assert_eq!(field(&form(&store, "shop.core/titles"), "purity"), "pure");
    let util = UTIL.replace("(str/join \"-\"", "(println title) (str/join \"-\"");
    write(dir.path(), "src/shop/util.clj", util.as_bytes());
    import(&store, dir.path());
    assert_eq!(field(&form(&store, "shop.util/slugify"), "purity"), "impure");
    let fresh = Store::open_in_memory().unwrap();
    import(&fresh, dir.path());
    assert_eq!(
        field(&form(&fresh, "shop.core/titles"), "purity"),
        "impure",
        "a fresh import sees it"
    );
    assert_eq!(
        field(&form(&store, "shop.core/titles"), "purity"),
        "impure",
        "the re-import does not"
    );
}

/// A var two files define (one namespace declared in two source roots) is as bad as the worse
/// of its definitions: a change to one definition moves its callers only when the worse one
/// moves, and then an incremental import gives what a fresh one gives.
#[test]
fn purity_of_a_var_two_files_define_is_the_worse_of_them() {
    let dir = tempfile::tempdir().unwrap();
    let dup = |body: &str| format!("(ns x.dup)\n\n(defn v [] {body})\n");
    write(dir.path(), "one/x/dup.clj", dup("(println 1)").as_bytes());
    write(dir.path(), "two/x/dup.clj", dup("1").as_bytes());
    write(
        dir.path(),
        "app/x/app.clj",
        b"(ns x.app\n  (:require [x.dup]))\n\n(defn caller [] (x.dup/v))\n",
    );
    let store = Store::open_in_memory().unwrap();
    import(&store, dir.path());
    let caller = |store: &Store| field(&form(store, "x.app/caller"), "purity");
    let fresh = |dir: &Path| {
        let fresh = Store::open_in_memory().unwrap();
        import(&fresh, dir);
        caller(&fresh)
    };
    assert_eq!(caller(&store), "impure", "one definition prints");
    // Each step changes one definition; the callers follow the worse of the two.
    for (file, body, expected) in [
        ("two/x/dup.clj", "2", "impure"),
        ("one/x/dup.clj", "(inc 1)", "pure"),
        ("two/x/dup.clj", "(println 2)", "impure"),
        ("one/x/dup.clj", "(println 1)", "impure"),
        ("two/x/dup.clj", "3", "impure"),
        ("one/x/dup.clj", "4", "pure"),
    ] {
        write(dir.path(), file, dup(body).as_bytes());
        import(&store, dir.path());
        assert_eq!(fresh(dir.path()), expected, "a fresh import after {file}: {body}");
        assert_eq!(caller(&store), expected, "the re-import after {file}: {body}");
    }
}

/// The same for resolution: a var referred with `:use` appears in another file.
#[test]
fn resolution_follows_a_var_added_in_another_file() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "src/a/lib.clj", b"(ns a.lib)\n\n(defn helper [x] (inc x))\n");
    write(
        dir.path(),
        "src/a/app.clj",
        b"(ns a.app\n  (:use [a.lib]))\n\n(defn later [x] (new-fn x))\n",
    );
    let store = Store::open_in_memory().unwrap();
    import(&store, dir.path());
    assert_eq!(
        column(&query::run_named(&store, "unresolved", Params::new()).unwrap(), "sym"),
        ["new-fn"]
    );
    write(
        dir.path(),
        "src/a/lib.clj",
        b"(ns a.lib)\n\n(defn helper [x] (inc x))\n\n(defn new-fn [x] x)\n",
    );
    import(&store, dir.path());
    let fresh = Store::open_in_memory().unwrap();
    import(&fresh, dir.path());
    assert!(
        calls_of(&fresh, "a.app/later").contains(&"a.lib/new-fn".to_string()),
        "a fresh import resolves it"
    );
    assert!(
        calls_of(&store, "a.app/later").contains(&"a.lib/new-fn".to_string()),
        "the re-import does not"
    );
    assert!(query::run_named(&store, "unresolved", Params::new()).unwrap().is_empty());
}

// ---------------------------------------------------------------------------------------------
// Named queries

#[test]
fn search_finds_docstrings_and_ranks_names_first() {
    let (_dir, store, _) = shop();
    let hits = query::search(&store, "URL", 10).unwrap();
    assert_eq!(
        column(&hits, "fqn").first().map(String::as_str),
        Some("shop.util/slugify"),
        "{hits:?}"
    );
    let hits = query::search(&store, "sales tax", 10).unwrap();
    assert_eq!(
        column(&hits, "fqn").first().map(String::as_str),
        Some("shop.util/price-with-tax"),
        "{hits:?}"
    );
    // `helper-later` is named by `summary` too, but its own name ranks it first.
    let hits = query::search(&store, "helper-later", 10).unwrap();
    let fqns = column(&hits, "fqn");
    assert_eq!(fqns.first().map(String::as_str), Some("shop.core/helper-later"), "{hits:?}");
    assert!(fqns.contains(&"shop.core/summary".to_string()), "{hits:?}");
    assert!(hits.rows[0]["score"].as_f64().unwrap() > hits.rows[1]["score"].as_f64().unwrap());
    assert!(query::search(&store, "zebra", 10).unwrap().is_empty());
    assert!(matches!(query::search(&store, " -- ", 10), Err(StoreError::Refused(_))));
}

#[test]
fn search_index_follows_edits() {
    let (dir, store, _) = shop();
    assert!(query::search(&store, "discount", 10).unwrap().is_empty());
    let util = UTIL.replace(
        "\"Price including the sales tax.\"",
        "\"Price including the sales tax, before any discount.\"",
    );
    write(dir.path(), "src/shop/util.clj", util.as_bytes());
    import(&store, dir.path());
    let hits = query::search(&store, "discount", 10).unwrap();
    assert_eq!(column(&hits, "fqn"), ["shop.util/price-with-tax"]);
}

#[test]
fn ns_overview_lists_public_vars_in_file_order() {
    let (_dir, store, _) = shop();
    let rows = query::ns_overview(&store, "shop.util").unwrap();
    assert_eq!(column(&rows, "name"), ["slugify", "price-with-tax"], "no private unused-helper");
    assert_eq!(rows.rows[0]["doc"], "Turn a product title into a URL slug.");
    assert_eq!(rows.rows[0]["arglists"], serde_json::json!(["[title]"]));
    let core = column(&query::ns_overview(&store, "shop.core").unwrap(), "name");
    assert_eq!(
        core,
        [
            "Order",
            "total-of",
            "double-all",
            "shout!",
            "audit",
            "titles",
            "checkout",
            "summary",
            "helper-later",
            "-main"
        ],
        "top-level vars only, in file order (the comment block's `scratch` is not listed)"
    );
    assert_eq!(
        query::ns_info(&store, "shop.util").unwrap(),
        Some(("Small helpers shared by the shop.".into(), "src/shop/util.clj".into()))
    );
    assert_eq!(query::ns_info(&store, "no.such").unwrap(), None);
}

#[test]
fn dead_vars_lists_unused_private_fns() {
    let (_dir, store, _) = shop();
    let dead = column(&query::run_named(&store, "dead_vars", Params::new()).unwrap(), "fqn");
    assert!(dead.contains(&"shop.util/unused-helper".to_string()), "{dead:?}");
    assert!(!dead.contains(&"shop.core/-main".to_string()), "{dead:?}");
    assert!(!dead.contains(&"shop.core-test/double-all-test".to_string()), "{dead:?}");
    assert!(!dead.contains(&"shop.util/slugify".to_string()), "{dead:?}");
}

#[test]
fn ns_cycles_reports_mutual_requires() {
    let (_dir, store, _) = shop();
    let rows = query::run_named(&store, "ns_cycles", Params::new()).unwrap();
    assert_eq!(column(&rows, "ns"), ["shop.cycle-a", "shop.cycle-b"], "{rows:?}");
    let others = &rows.rows[0]["collect(other)"];
    assert!(others.as_array().unwrap().contains(&Value::from("shop.cycle-b")), "{others}");
}

#[test]
fn findings_lists_what_the_checks_stored_for_a_namespace() {
    let (_dir, store, _) = shop();
    let p = params([("ns", "shop.core".into())]);
    let rows = query::run_named(&store, "findings", p).unwrap();
    let found: Vec<(String, String)> =
        column(&rows, "kind").into_iter().zip(column(&rows, "message")).collect();
    // The top-level `(println "shop loaded")`, and nothing else.
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0, "side_effect");
    assert!(found[0].1.starts_with("src/shop/core.clj:32: the top-level `(println"), "{found:?}");
    let none = query::run_named(&store, "findings", params([("ns", "shop.util".into())])).unwrap();
    assert!(column(&none, "kind").is_empty(), "shop.util is clean");
}

#[test]
fn named_queries_check_their_parameters() {
    let (_dir, store, _) = shop();
    assert!(
        matches!(query::run_named(&store, "usages", Params::new()), Err(StoreError::Refused(m)) if m.contains("fqn"))
    );
    assert!(matches!(query::run_named(&store, "nope", Params::new()), Err(StoreError::Refused(_))));
    let missing = query::form_required(&store, "shop.core/nope").unwrap_err();
    assert!(missing.to_string().contains("shop.core/nope"), "{missing}");
}

#[test]
fn user_queries_cannot_change_the_store() {
    let (_dir, store, _) = shop();
    let forms = stat(&store, "forms");
    let err = store.query_user("?[id] := *form{id} :rm form {id}", Params::new()).unwrap_err();
    assert!(matches!(err, StoreError::Refused(_)), "{err}");
    let err = store
        .query_user(
            "?[key, value] <- [['schema_version', '999']] :put meta {key => value}",
            Params::new(),
        )
        .unwrap_err();
    assert!(matches!(err, StoreError::Refused(_)), "{err}");
    let err = store.query_user("::remove form", Params::new()).unwrap_err();
    assert!(matches!(err, StoreError::Refused(_)), "{err}");
    let err = store.query_user("  # a comment first\n::remove form", Params::new()).unwrap_err();
    assert!(matches!(err, StoreError::Refused(_)), "{err}");
    assert!(store
        .query_user("{?[key, value] <- [['x', 'y']] :put meta {key => value}}", Params::new())
        .is_err());
    assert_eq!(stat(&store, "forms"), forms);
    assert_eq!(store.meta("schema_version").unwrap(), Some(SCHEMA_VERSION.to_string()));
    assert_eq!(store.meta("x").unwrap(), None);
    let rows = store
        .query_user(
            "?[fqn] := *form{fqn, ns: n}, n == $ns, fqn != '' :order fqn",
            params([("ns", "shop.util".into())]),
        )
        .unwrap();
    assert_eq!(rows.rows.len(), 3);
}

/// `*form{id, file: 'x', source}` is the natural way to write "the source of every form of x";
/// Cozo 0.7.6 answers it through the `form:by_file` index and joins the index's `id` against
/// the relation's `file` column (see `::explain`), so it silently returns nothing. The engine's
/// own scripts avoid the pattern; user scripts (`formdb query`) hit it.
#[test]
fn binding_an_indexed_column_in_a_user_query() {
    let (_dir, store, _) = shop();
    let via_filter = store
        .query_user(
            "?[id, source] := *form{id, file: f, source}, f == 'src/shop/util.clj'",
            Params::new(),
        )
        .unwrap();
    assert_eq!(via_filter.rows.len(), 4);
    let only_id =
        store.query_user("?[id] := *form{id, file: 'src/shop/util.clj'}", Params::new()).unwrap();
    assert_eq!(only_id.rows.len(), 4, "index-covered columns work");
    let bound = store
        .query_user("?[id, source] := *form{id, file: 'src/shop/util.clj', source}", Params::new())
        .unwrap();
    assert_eq!(bound.rows.len(), 4, "binding the column directly gives the same rows");
    let by_ns =
        store.query_user("?[id, kind] := *form{id, ns: 'shop.util', kind}", Params::new()).unwrap();
    assert_eq!(by_ns.rows.len(), 4);
}

// ---------------------------------------------------------------------------------------------
// Persistence

#[test]
fn a_persistent_store_survives_reopening() {
    let dir = shop_tree();
    let db = tempfile::tempdir().unwrap();
    let db = db.path().join(STORE_DIR);
    let all_forms =
        "?[id, fqn, file, hash, source, purity] := *form{id, fqn, file, hash, source, purity}";
    let (before, versions) = {
        let store = Store::open(&db).unwrap();
        let s = import(&store, dir.path());
        assert!(s.forms.added > 30);
        (store.query(all_forms, Params::new()).unwrap().rows, stat(&store, "versions"))
    };
    let store = Store::open_existing(&db).unwrap();
    assert_eq!(store.location(), Some(db.as_path()));
    assert_eq!(store.query(all_forms, Params::new()).unwrap().rows, before);
    assert_eq!(stat(&store, "versions"), versions);
    let core = std::fs::read(dir.path().join("src/shop/core.clj")).unwrap();
    assert_eq!(query::file_bytes(&store, "src/shop/core.clj").unwrap().unwrap(), core);
    let again = import(&store, dir.path());
    assert_eq!(
        (again.files_added, again.files_changed, again.files_removed, again.forms.versions),
        (0, 0, 0, 0)
    );
    assert_eq!(query::search(&store, "URL", 5).unwrap().rows[0]["fqn"], "shop.util/slugify");
    drop(store);
    assert!(matches!(
        Store::open_existing(&db.parent().unwrap().join("elsewhere")),
        Err(StoreError::NotFound(_))
    ));
}

#[test]
fn removed_files_leave_the_store() {
    let (dir, store, _) = shop();
    std::fs::remove_file(dir.path().join("src/shop/cycle_b.clj")).unwrap();
    std::fs::remove_file(dir.path().join("README.md")).unwrap();
    let s = import(&store, dir.path());
    assert_eq!(s.files_removed, 2, "{s:?}");
    assert_eq!(s.forms.removed, 2, "the ns form and `b`");
    let paths: BTreeSet<String> = query::paths(&store).unwrap().into_iter().collect();
    assert!(!paths.contains("src/shop/cycle_b.clj") && !paths.contains("README.md"), "{paths:?}");
    assert!(query::form(&store, "shop.cycle-b/b").unwrap().is_none());
    assert_eq!(query::ns_info(&store, "shop.cycle-b").unwrap(), None);
    assert!(query::run_named(&store, "ns_cycles", Params::new()).unwrap().is_empty());
}

/// A file renamed on disk (same namespace, new path) is one file in the store after a
/// re-import: the old path is not re-resolved as a neighbour of the new one and put back.
#[test]
fn a_file_renamed_on_disk_leaves_no_copy_behind() {
    let (dir, store, _) = shop();
    let paths = |store: &Store| -> BTreeSet<String> {
        let rows = store.query("?[p] := *file{path: p}", Params::new()).unwrap();
        rows.rows.iter().map(|r| str_at(r, 0)).collect()
    };
    let before = paths(&store);
    let from = before.iter().find(|p| p.ends_with("util.clj")).expect("a util file").clone();
    let to = from.replace("util.clj", "utilities.clj");
    std::fs::rename(dir.path().join(&from), dir.path().join(&to)).unwrap();
    let summary = import(&store, dir.path());
    assert_eq!((summary.files_added, summary.files_removed), (1, 1));
    let after = paths(&store);
    assert!(!after.contains(&from), "{from} is gone: {after:?}");
    assert!(after.contains(&to), "{to} is stored: {after:?}");
    assert_eq!(after.len(), before.len());
    let text = std::fs::read(dir.path().join(&to)).unwrap();
    assert_eq!(query::file_bytes(&store, &to).unwrap().unwrap(), text);
}

/// Bookkeeping rows (the sync's record of what DIR and the store agreed on) land in the same
/// transaction as the change they describe; a change that fails writes neither, and the form
/// model's own relations cannot be written this way.
#[test]
fn bookkeeping_rows_commit_with_their_change_or_not_at_all() {
    use formdb_engine::change::{self, Change, ChangeSet};
    let (_tmp, store, _) = shop();
    store.write(":create agreed {path: String => hash: String}", Params::new()).unwrap();
    let agreed = |store: &Store| {
        let rows = store.query("?[p, h] := *agreed{path: p, hash: h}", Params::new()).unwrap();
        rows.rows.iter().map(|r| (str_at(r, 0), str_at(r, 1))).collect::<Vec<_>>()
    };
    let blob = |hash: &str| Change::PutBlob {
        path: "notes.txt".into(),
        hash: hash.into(),
        content: b"hello".to_vec(),
    };
    let keep = |relation: &str, hash: &str| Change::Bookkeeping {
        relation: relation.into(),
        rows: vec![vec!["notes.txt".into(), hash.into()]],
        delete: vec![],
    };
    let set = |changes| ChangeSet { author: "test".into(), op: "sync".into(), changes };
    change::apply(&store, &set(vec![blob("h1"), keep("agreed", "h1")])).unwrap();
    assert_eq!(agreed(&store), [("notes.txt".to_string(), "h1".to_string())]);

    // A model relation named as bookkeeping: refused, and the blob beside it is not written.
    let err = change::apply(&store, &set(vec![blob("h2"), keep("form", "h2")])).unwrap_err();
    assert!(matches!(err, StoreError::Refused(_)), "{err}");
    // A relation that does not exist: the whole change fails, the blob included.
    assert!(change::apply(&store, &set(vec![blob("h3"), keep("nowhere", "h3")])).is_err());
    let hash = store.query("?[h] := *blob{path: 'notes.txt', hash: h}", Params::new()).unwrap();
    assert_eq!(str_at(&hash.rows[0], 0), "h1");
    assert_eq!(agreed(&store), [("notes.txt".to_string(), "h1".to_string())]);

    let forget = Change::Bookkeeping {
        relation: "agreed".into(),
        rows: vec![],
        delete: vec![vec!["notes.txt".into()]],
    };
    change::apply(&store, &set(vec![Change::DeleteBlob { path: "notes.txt".into() }, forget]))
        .unwrap();
    assert!(agreed(&store).is_empty());
}

// ---------------------------------------------------------------------------------------------
// Call sites (what diagnostics check)

/// (line, col, to, argc, outer, load, head) of every stored call site of a file, by place.
fn call_sites(store: &Store, file: &str) -> Vec<(i64, i64, String, i64, String, bool, String)> {
    let rows = store
        .query(
            // Kept on the form's row, relative to its first line.
            "?[first, sites, callees] := *form_at{file: $f, id}, *form{id, line: first, sites, callees}",
            params([("f", file.into())]),
        )
        .unwrap();
    let mut out: Vec<_> = rows
        .rows
        .iter()
        .flat_map(|r| {
            let callees: Vec<String> = r[2]
                .get_slice()
                .unwrap()
                .iter()
                .map(|v| v.get_str().unwrap().to_string())
                .collect();
            formdb_engine::sites::from_stored(
                &str_at(r, 1),
                r[0].get_int().unwrap() as u32,
                &callees,
            )
        })
        .map(|s| {
            (i64::from(s.pos.line), i64::from(s.pos.col), s.to, s.argc, s.outer, s.load, s.head)
        })
        .collect();
    out.sort();
    out
}

#[test]
fn call_sites_keep_argument_counts_the_call_around_and_load_time() {
    let dir = tempfile::tempdir().unwrap();
    let src = r#"(ns app.sites
  (:require [clojure.string :as str]))

(defn f [a b] (str/join a b))

(defn g [xs]
  (-> xs (f 1) str/trim)
  (cond-> xs true (f 2))
  `(f ~@xs)
  (f ~@xs))

(def table (f (str/trim "x") (fn [] (f 1 2))))

(comment (f 1))
"#;
    write(dir.path(), "src/app/sites.clj", src.as_bytes());
    let store = Store::open_in_memory().unwrap();
    import(&store, dir.path());
    let sites = call_sites(&store, "src/app/sites.clj");
    let s = |line: i64, col: i64, to: &str, argc: i64, outer: &str, load: bool, head: &str| {
        (line, col, to.to_string(), argc, outer.to_string(), load, head.to_string())
    };
    assert_eq!(
        sites,
        [
            s(1, 2, "clojure.core/ns", 2, "", false, "ns"),
            s(4, 2, "clojure.core/defn", 3, "", false, "defn"),
            s(4, 16, "clojure.string/join", 2, "clojure.core/defn", false, "str/join"),
            s(6, 2, "clojure.core/defn", 6, "", false, "defn"),
            s(7, 4, "clojure.core/->", 3, "clojure.core/defn", false, "->"),
            // A list step gets the threaded value as one more argument; a symbol step is a
            // call with that value alone, skipped with its threading form (same `outer`).
            s(7, 11, "app.sites/f", 2, "clojure.core/->", false, "f"),
            s(7, 16, "clojure.string/trim", 1, "clojure.core/defn", false, "str/trim"),
            s(8, 4, "clojure.core/cond->", 3, "clojure.core/defn", false, "cond->"),
            s(8, 20, "app.sites/f", 2, "clojure.core/cond->", false, "f"),
            // A syntax-quote template calls nothing (its symbols are values); a splice does
            // not tell the count.
            s(10, 4, "app.sites/f", -1, "clojure.core/defn", false, "f"),
            // The init of a `def` (a special form: no `outer`) runs at load, except under `fn`.
            s(12, 13, "app.sites/f", 2, "", true, "f"),
            s(12, 16, "clojure.string/trim", 1, "app.sites/f", true, "str/trim"),
            s(12, 31, "clojure.core/fn", 2, "app.sites/f", false, "fn"),
            s(12, 38, "app.sites/f", 2, "clojure.core/fn", false, "f"),
            // A comment block's sites are its children's.
            s(14, 2, "clojure.core/comment", 1, "", false, "comment"),
            s(14, 11, "app.sites/f", 1, "clojure.core/comment", false, "f"),
        ]
    );

    // An edit replaces the sites of the forms it changes and drops those of removed forms.
    let edited = src
        .replace("(f (str/trim \"x\") (fn [] (f 1 2)))", "(delay (f 1 2 3))")
        .replace("\n(comment (f 1))\n", "\n");
    write(dir.path(), "src/app/sites.clj", edited.as_bytes());
    import(&store, dir.path());
    let after = call_sites(&store, "src/app/sites.clj");
    assert_eq!(after[..10], sites[..10], "the unchanged forms keep their sites");
    assert_eq!(
        after[10..],
        [
            // Under `delay`, nothing runs at load.
            s(12, 13, "clojure.core/delay", 1, "", false, "delay"),
            s(12, 20, "app.sites/f", 3, "clojure.core/delay", false, "f"),
        ]
    );
    // A removed form's sites went with its row.

    // Two new lines above the first definition move it and every form after it: their sites
    // move with them (only their `form` rows are rewritten; the sites count from the form).
    let moved = edited.replace("\n(defn f", "\n;; moved\n;; down\n(defn f");
    write(dir.path(), "src/app/sites.clj", moved.as_bytes());
    let summary = import(&store, dir.path());
    // The comment above `f` is its own: `f` changed, `g` and `table` moved.
    assert_eq!((summary.forms.changed, summary.forms.moved), (1, 2), "{:?}", summary.forms);
    let shifted: Vec<_> = after
        .iter()
        .map(|s| {
            if s.0 > 1 {
                (s.0 + 2, s.1, s.2.clone(), s.3, s.4.clone(), s.5, s.6.clone())
            } else {
                s.clone()
            }
        })
        .collect();
    assert_eq!(call_sites(&store, "src/app/sites.clj"), shifted);
}

/// `ns_refer` holds the vars each `ns` form refers by name and `ns_require` the namespaces it
/// requires, kept by every write: who names a var is a key lookup, and the require graph is
/// walked without reading whole declarations.
#[test]
fn referred_vars_and_required_namespaces_follow_the_ns_forms() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "src/a.clj", b"(ns a)\n\n(defn f [] 1)\n\n(defn g [] 2)\n");
    let b = |requires: &str| format!("(ns b\n  (:require {requires}))\n\n(defn h [] 3)\n");
    write(dir.path(), "src/b.clj", b("[a :refer [f g] :rename {g gg}]").as_bytes());
    let store = Store::open_in_memory().unwrap();
    import(&store, dir.path());
    let refers = |store: &Store| -> Vec<(String, String)> {
        let rows = store.query("?[var, ns] := *ns_refer{var, ns}", Params::new()).unwrap();
        rows.rows.iter().map(|r| (str_at(r, 0), str_at(r, 1))).collect()
    };
    let requires = |store: &Store| -> Vec<(String, String)> {
        let rows = store.query("?[ns, lib] := *ns_require{ns, lib}", Params::new()).unwrap();
        rows.rows.iter().map(|r| (str_at(r, 0), str_at(r, 1))).collect()
    };
    let pair = |v: &str, n: &str| (v.to_string(), n.to_string());
    assert_eq!(refers(&store), [pair("a/f", "b"), pair("a/g", "b")]);
    assert_eq!(requires(&store), [pair("b", "a")]);

    write(dir.path(), "src/b.clj", b("[a :refer [g]] [clojure.set :as set]").as_bytes());
    import(&store, dir.path());
    assert_eq!(refers(&store), [pair("a/g", "b")], "a dropped refer goes");
    assert_eq!(requires(&store), [pair("b", "a"), pair("b", "clojure.set")]);

    write(dir.path(), "src/b.clj", b("[clojure.set :as set]").as_bytes());
    import(&store, dir.path());
    assert_eq!(refers(&store), [], "a dropped require takes its refers");
    assert_eq!(requires(&store), [pair("b", "clojure.set")], "a dropped require goes");

    write(dir.path(), "src/b.clj", b("[a :refer [f]]").as_bytes());
    import(&store, dir.path());
    assert_eq!((refers(&store), requires(&store)), (vec![pair("a/f", "b")], vec![pair("b", "a")]));

    // The file's `ns` form renamed: the old namespace's declaration goes with what it held.
    let renamed = b("[a :refer [g]]").replace("(ns b", "(ns c");
    write(dir.path(), "src/b.clj", renamed.as_bytes());
    import(&store, dir.path());
    assert_eq!((refers(&store), requires(&store)), (vec![pair("a/g", "c")], vec![pair("c", "a")]));
    let decls = store.query("?[ns] := *ns_decl{ns}", Params::new()).unwrap();
    let decls: Vec<String> = decls.rows.iter().map(|r| str_at(r, 0)).collect();
    assert_eq!(decls, ["a", "c"], "no declaration of `b` is left");
    std::fs::remove_file(dir.path().join("src/b.clj")).unwrap();
    import(&store, dir.path());
    assert_eq!((refers(&store), requires(&store)), (vec![], vec![]), "a deleted file's go");
    let decls = store.query("?[ns] := *ns_decl{ns}", Params::new()).unwrap();
    assert_eq!(decls.rows.len(), 1, "only `a` is declared");
}

/// A form edited in place carries only the `form` rows of the forms it moves down: computed at
/// one generation, it is refused at a later one, and nothing is written.
#[test]
fn a_form_edited_in_place_is_refused_once_another_write_came_in() {
    use formdb_engine::change::{self, ChangeSet};
    let dir = tempfile::tempdir().unwrap();
    let src = "(ns app.m)\n\n(defn f [] 1)\n\n(defn g [] (f))\n";
    write(dir.path(), "src/app/m.clj", src.as_bytes());
    write(dir.path(), "src/app/n.clj", b"(ns app.n)\n\n(defn h [] 2)\n");
    let store = Store::open_in_memory().unwrap();
    import(&store, dir.path());
    let rows = store
        .query("?[id, source] := *form{id, fqn, source}, fqn == 'app.m/f'", Params::new())
        .unwrap();
    let id = str_at(&rows.rows[0], 0);
    let source_of_f = |store: &Store| {
        let q = "?[source] := *form{id: $id, source}";
        str_at(&store.query(q, params([("id", id.as_str().into())])).unwrap().rows[0], 0)
    };
    // One more line: `g` moves down.
    let new_f = "(defn f []\n  1)";
    let text = src.replace("(defn f [] 1)", new_f);
    let changes = import::form_in_place(&store, "src/app/m.clj", &id, new_f, &text)
        .unwrap()
        .expect("a definition keeping its vars is edited in place");
    let set = ChangeSet { author: "t".into(), op: "replace_form".into(), changes };

    // Another writer comes first.
    write(dir.path(), "src/app/n.clj", b"(ns app.n)\n\n(defn h [] 3)\n");
    import(&store, dir.path());
    let err = change::apply(&store, &set).expect_err("the store moved on");
    assert!(matches!(err, StoreError::Moved { .. }), "{err}");
    assert_eq!(source_of_f(&store), "(defn f [] 1)", "nothing was written");

    // Computed again, it applies.
    let changes =
        import::form_in_place(&store, "src/app/m.clj", &id, new_f, &text).unwrap().unwrap();
    change::apply(&store, &ChangeSet { changes, ..set }).unwrap();
    assert_eq!(source_of_f(&store), new_f);
}

/// The namespaces a store handle holds for resolving (`Store::file_nss_at`) follow its own
/// writes and are read again after another handle's: a qualified symbol naming a namespace
/// that came in either way resolves to a var of it, in an edit applied in place.
#[test]
fn namespaces_added_by_this_handle_or_another_are_known_to_edits_in_place() {
    use formdb_engine::change::{self, ChangeSet};
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    let db = dir.path().join(STORE_DIR);
    // `f` is impure whatever else it calls, so its class stays and it is edited in place.
    let src = "(ns app.m)\n\n(defn f [] (println))\n";
    write(&tree, "src/app/m.clj", src.as_bytes());
    let mine = Store::open(&db).unwrap();
    import(&mine, &tree);
    let id = str_at(
        &mine.query("?[id] := *form{id, fqn: 'app.m/f'}", Params::new()).unwrap().rows[0],
        0,
    );
    let edit = |store: &Store, body: &str| -> (Vec<String>, Vec<String>) {
        let new_f = format!("(defn f [] (println) {body})");
        let text = src.replace("(defn f [] (println))", &new_f);
        let changes = import::form_in_place(store, "src/app/m.clj", &id, &new_f, &text)
            .unwrap()
            .expect("edited in place");
        change::apply(store, &ChangeSet { author: "t".into(), op: "replace_form".into(), changes })
            .unwrap();
        let p = || params([("id", id.as_str().into())]);
        let calls = store.query("?[to] := *calls{to, from: $id}", p()).unwrap();
        let unresolved = store.query("?[sym] := *unresolved{from: $id, sym}", p()).unwrap();
        let col = |rows: cozo::NamedRows| rows.rows.iter().map(|r| str_at(r, 0)).collect();
        (col(calls), col(unresolved))
    };
    let unknown = edit(&mine, "(app.y/yy)");
    assert_eq!(unknown.1, ["app.y/yy"], "no namespace app.y yet: {unknown:?}");

    // This handle writes a new namespace: its edits know it at once.
    write(&tree, "src/app/y.clj", b"(ns app.y)\n\n(defn yy [] 2)\n");
    import(&mine, &tree);
    let (calls, unresolved) = edit(&mine, "(app.y/yy)");
    assert!(
        calls.contains(&"app.y/yy".to_string()) && unresolved.is_empty(),
        "{calls:?} {unresolved:?}"
    );

    // Another handle (another process, as the daemon and the CLI are) writes one.
    write(&tree, "src/app/z.clj", b"(ns app.z)\n\n(defn zz [] 3)\n");
    import(&Store::open(&db).unwrap(), &tree);
    let (calls, unresolved) = edit(&mine, "(app.z/zz)");
    assert!(
        calls.contains(&"app.z/zz".to_string()) && unresolved.is_empty(),
        "{calls:?} {unresolved:?}"
    );
}
