//! The `formdb` binary as a user runs it: import a small Clojure project into `DIR/.formdb`, then
//! ask questions from inside the project (and from a subdirectory, where the store is found by
//! walking up), as text and as `--json`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

const UTIL: &str = include_str!("../testkit/fixtures/inline-shop/util.clj");

const CORE: &str = r#"(ns shop.core
  "Entry point of the shop."
  (:require [shop.util :as u :refer [slugify]]
            [clojure.string :as str]))

(defn double-all [xs] (map inc xs))

(defn shout! [msg] (println (str/upper-case msg)))

(defn titles [products] (map (comp slugify :title) products))

(defn total [prices] (reduce + (map u/price-with-tax prices)))

(defn summary [order] (helper-later order))

(defn helper-later [order] (double-all (:items order)))

(defn -main [& args] (shout! "start"))
"#;

const CORE_TEST: &str = include_str!("../testkit/fixtures/inline-shop/core_test.clj");

const REPORT: &str = "(ns shop.report)\n\n(defn render [x] (format-money x))\n";

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A small project: a few namespaces, a test, a require cycle, an unresolved symbol.
fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "deps.edn", "{:paths [\"src\"]}\n");
    write(root, "README.md", "# Shop\n");
    write(root, "src/shop/util.clj", UTIL);
    write(root, "src/shop/core.clj", CORE);
    write(root, "test/shop/core_test.clj", CORE_TEST);
    write(root, "src/shop/report.clj", REPORT);
    write(
        root,
        "src/shop/cycle_a.clj",
        "(ns shop.cycle-a\n  (:require [shop.cycle-b :as b]))\n\n(defn a [] (b/b))\n",
    );
    write(
        root,
        "src/shop/cycle_b.clj",
        "(ns shop.cycle-b\n  (:require [shop.cycle-a :as a]))\n\n(defn b [] (a/a))\n",
    );
    dir
}

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Run {
    fn ok(self) -> Run {
        assert_eq!(
            self.code,
            Some(0),
            "expected success\n--- stdout\n{}\n--- stderr\n{}",
            self.stdout,
            self.stderr
        );
        assert!(self.stderr.is_empty(), "nothing on stderr on success: {}", self.stderr);
        self
    }

    /// A failure the user caused: non-zero exit, one line on stderr that mentions `what`, and no
    /// sign of a panic.
    fn fails_naming(self, what: &str) -> Run {
        assert_ne!(self.code, Some(0), "expected failure, got\n{}", self.stdout);
        assert!(self.code.is_some(), "killed by a signal: {}", self.stderr);
        assert_eq!(
            self.stderr.trim_end().lines().count(),
            1,
            "one line on stderr:\n{}",
            self.stderr
        );
        assert!(self.stderr.contains(what), "stderr names `{what}`: {}", self.stderr);
        for bad in ["panicked", "backtrace", "RUST_BACKTRACE", "internal error"] {
            assert!(!self.stderr.contains(bad), "no panic text: {}", self.stderr);
        }
        assert!(self.stdout.is_empty(), "nothing on stdout: {}", self.stdout);
        self
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}", self.stdout))
    }
}

fn formdb_in(cwd: &Path, args: &[&str], stdin: Option<&str>) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_formdb"));
    cmd.args(args).current_dir(cwd).stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd.env_remove("RUST_BACKTRACE").env_remove("RUST_LIB_BACKTRACE");
    cmd.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() });
    let mut child = cmd.spawn().expect("run formdb");
    if let Some(input) = stdin {
        child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    }
    let Output { status, stdout, stderr } = child.wait_with_output().unwrap();
    Run {
        code: status.code(),
        stdout: String::from_utf8(stdout).unwrap(),
        stderr: String::from_utf8(stderr).unwrap(),
    }
}

fn formdb(cwd: &Path, args: &[&str]) -> Run {
    formdb_in(cwd, args, None)
}

/// `args` with `--json`, which must succeed; the parsed output.
fn json(cwd: &Path, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    formdb(cwd, &all).ok().json()
}

/// The project, imported into its own `.formdb` by a user standing somewhere else.
fn imported() -> tempfile::TempDir {
    let dir = project();
    let elsewhere = tempfile::tempdir().unwrap();
    let out = formdb(elsewhere.path(), &["import", dir.path().to_str().unwrap()]).ok();
    assert!(
        out.stdout.contains(
            "files: 8 added, 0 changed, 0 removed, 0 unchanged (1 non-Clojure kept as blobs)"
        ),
        "{}",
        out.stdout
    );
    assert!(dir.path().join(".formdb").is_dir());
    assert!(
        !elsewhere.path().join(".formdb").exists(),
        "the store goes to DIR/.formdb, not the cwd"
    );
    dir
}

fn subdir(dir: &Path) -> PathBuf {
    dir.join("src/shop")
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

/// One field of every row of a JSON array of objects.
fn col(rows: &Value, key: &str) -> Vec<Value> {
    rows.as_array()
        .unwrap_or_else(|| panic!("not an array: {rows}"))
        .iter()
        .map(|r| r[key].clone())
        .collect()
}

/// A table as printed: its header, then each row, as whitespace-separated words.
fn table(stdout: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let mut lines =
        stdout.lines().map(|l| l.split_whitespace().map(String::from).collect::<Vec<_>>());
    let header = lines.next().unwrap_or_else(|| panic!("no header in {stdout:?}"));
    (header, lines.collect())
}

/// The rows of a printed table, each row's words joined by one space.
fn table_rows(stdout: &str, header: &[&str]) -> Vec<String> {
    let (h, rows) = table(stdout);
    assert_eq!(h, header, "the header of\n{stdout}");
    rows.into_iter().map(|r| r.join(" ")).collect()
}

fn id_of(dir: &Path, fqn: &str) -> String {
    json(dir, &["show", fqn])["id"].as_str().unwrap().to_string()
}

// ---------------------------------------------------------------------------------------------

#[test]
fn import_reports_what_it_did() {
    let dir = project();
    let out = formdb(dir.path(), &["import", "."]).ok();
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(
        lines[0],
        "files: 8 added, 0 changed, 0 removed, 0 unchanged (1 non-Clojure kept as blobs)"
    );
    assert!(
        lines[1].starts_with("forms: 21 added, 0 changed, 0 removed, 0 unchanged"),
        "{}",
        out.stdout
    );
    let store = dir.path().join(".formdb").canonicalize().unwrap();
    assert_eq!(lines.last().unwrap(), &format!("store: {}", store.display()));

    // Again, with the default directory (the current one): nothing to do.
    let out = formdb(dir.path(), &["import"]).ok();
    assert!(
        out.stdout.contains("files: 0 added, 0 changed, 0 removed, 8 unchanged"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("forms: 0 added, 0 changed, 0 removed"), "{}", out.stdout);

    // Edit one form of one file.
    write(dir.path(), "src/shop/core.clj", &CORE.replace("(map inc xs)", "(mapv inc xs)"));
    let out = formdb(dir.path(), &["import", "."]).ok();
    assert!(
        out.stdout.contains("files: 0 added, 1 changed, 0 removed, 7 unchanged"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("forms: 0 added, 1 changed, 0 removed"), "{}", out.stdout);
    let h = json(dir.path(), &["history", "shop.core/double-all"]);
    assert_eq!(col(&h, "v"), [Value::from(1), Value::from(2)]);
    assert!(
        h[1]["source"].as_str().unwrap().ends_with("(defn double-all [xs] (mapv inc xs))"),
        "{h}"
    );

    let j = json(dir.path(), &["import", "."]);
    assert_eq!(j["files_unchanged"], 8);
    assert_eq!(j["forms"]["added"], 0);
    assert_eq!(j["forms"]["versions"], 0);
    assert_eq!(j["errors"], serde_json::json!([]));
}

#[test]
fn import_lists_files_that_do_not_parse() {
    let dir = project();
    write(dir.path(), "src/shop/broken.clj", "(ns shop.broken)\n\n(defn oops [x]\n  (inc x)\n");
    let out = formdb(dir.path(), &["import", "."]).ok();
    assert!(
        out.stdout.contains("1 file(s) did not parse and are kept as raw text:"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("  src/shop/broken.clj:3:1: "), "{}", out.stdout);
    assert_eq!(json(dir.path(), &["stats"])["parse_errors"], 1);
    // The rest is there.
    assert_eq!(json(dir.path(), &["show", "shop.util/slugify"])["file"], "src/shop/util.clj");
}

#[test]
fn show_by_name_and_by_id_from_the_project_and_a_subdirectory() {
    let dir = imported();
    for cwd in [dir.path().to_path_buf(), subdir(dir.path())] {
        let out = formdb(&cwd, &["show", "shop.core/summary"]).ok();
        let first = out.stdout.lines().next().unwrap();
        assert!(first.starts_with("shop.core/summary  ["), "{first}");
        assert!(first.contains("src/shop/core.clj:14  defn  pure"), "{first}");
        assert!(out.stdout.contains("calls: "), "{}", out.stdout);
        assert!(out.stdout.contains("shop.core/helper-later"), "{}", out.stdout);
        assert!(
            out.stdout.trim_end().ends_with("(defn summary [order] (helper-later order))"),
            "{}",
            out.stdout
        );

        let j = json(&cwd, &["show", "shop.util/slugify"]);
        assert_eq!(j["fqn"], "shop.util/slugify");
        assert_eq!(j["kind"], "defn");
        assert_eq!(j["line"], 5);
        assert_eq!(j["doc"], "Turn a product title into a URL slug.");
        assert_eq!(j["arglists"], serde_json::json!(["[title]"]));
        assert_eq!(j["purity"], "pure");
        let calls = strings(&j["calls"]);
        assert!(calls.contains(&"clojure.string/join".to_string()), "{calls:?}");
        assert!(calls.contains(&"clojure.string/lower-case".to_string()), "{calls:?}");

        let id = j["id"].as_str().unwrap();
        assert_eq!(id.len(), 8);
        let by_id = json(&cwd, &["show", id]);
        assert_eq!(by_id, j);
        let text = formdb(&cwd, &["show", id]).ok();
        assert!(
            text.stdout.starts_with(&format!(
                "shop.util/slugify  [{id}]  src/shop/util.clj:5  defn  pure"
            )),
            "{}",
            text.stdout
        );
        assert!(text.stdout.contains("  Turn a product title into a URL slug."), "{}", text.stdout);
    }
    let private = json(dir.path(), &["show", "shop.util/unused-helper"]);
    assert_eq!(private["private"], true);
    assert_eq!(private["kind"], "defn-");
    assert_eq!(json(dir.path(), &["show", "shop.core/shout!"])["purity"], "impure");
}

#[test]
fn usages_and_transitive_callers() {
    let dir = imported();
    let cwd = subdir(dir.path());
    let out = formdb(&cwd, &["usages", "shop.core/double-all"]).ok();
    let rows = table_rows(&out.stdout, &["FILE", "LINE", "CALLER", "CALLER_ID"]);
    assert_eq!(rows.len(), 2, "{}", out.stdout);
    assert!(rows[0].starts_with("src/shop/core.clj 16 shop.core/helper-later "), "{}", out.stdout);
    assert!(
        rows[1].starts_with("test/shop/core_test.clj 6 shop.core-test/double-all-test "),
        "{}",
        out.stdout
    );

    let j = json(&cwd, &["usages", "shop.core/double-all"]);
    assert_eq!(
        col(&j, "caller"),
        [Value::from("shop.core/helper-later"), Value::from("shop.core-test/double-all-test")]
    );
    assert_eq!(
        col(&j, "file"),
        [Value::from("src/shop/core.clj"), Value::from("test/shop/core_test.clj")]
    );
    assert_eq!(col(&j, "line"), [Value::from(16), Value::from(6)]);
    assert_eq!(j[0]["caller_id"], id_of(dir.path(), "shop.core/helper-later").as_str());

    let out = formdb(&cwd, &["usages", "shop.core/double-all", "--depth", "2"]).ok();
    let rows = table_rows(&out.stdout, &["FILE", "LINE", "DEPTH", "FQN", "ID"]);
    assert!(
        rows.iter().any(|l| l.starts_with("src/shop/core.clj 14 2 shop.core/summary ")),
        "{}",
        out.stdout
    );
    let j = json(&cwd, &["usages", "shop.core/double-all", "--depth", "2"]);
    let summary = j
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["fqn"] == "shop.core/summary")
        .unwrap_or_else(|| panic!("{j}"));
    assert_eq!(summary["depth"], 2);
    assert_eq!(summary["file"], "src/shop/core.clj");
    let helper =
        j.as_array().unwrap().iter().find(|r| r["fqn"] == "shop.core/helper-later").unwrap();
    assert_eq!(helper["depth"], 1);
    assert!(!col(&json(&cwd, &["usages", "shop.core/double-all"]), "caller")
        .contains(&Value::from("shop.core/summary")));

    // A library var used by the project is a var too.
    let j = json(&cwd, &["usages", "clojure.string/upper-case"]);
    assert_eq!(col(&j, "caller"), [Value::from("shop.core/shout!")]);
    // An alias-qualified use is found under the var's real name.
    let j = json(&cwd, &["usages", "shop.util/price-with-tax"]);
    assert_eq!(col(&j, "caller"), [Value::from("shop.core/total")]);
    assert_eq!(j[0]["kind"], "value");
}

#[test]
fn callees_direct_and_transitive() {
    let dir = imported();
    let out = formdb(dir.path(), &["callees", "shop.core/summary"]).ok();
    let rows = table_rows(&out.stdout, &["DEPTH", "FQN", "ID", "FILE", "LINE"]);
    let helper = id_of(dir.path(), "shop.core/helper-later");
    assert!(
        rows.contains(&format!("1 shop.core/helper-later {helper} src/shop/core.clj 16")),
        "{}",
        out.stdout
    );
    let j = json(dir.path(), &["callees", "shop.core/summary"]);
    let fqns = col(&j, "fqn");
    assert!(fqns.contains(&Value::from("shop.core/helper-later")), "{j}");
    assert!(!fqns.contains(&Value::from("shop.core/double-all")), "{j}");
    let j = json(dir.path(), &["callees", "shop.core/summary", "--depth", "2"]);
    let d = j
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["fqn"] == "shop.core/double-all")
        .unwrap_or_else(|| panic!("{j}"));
    assert_eq!(d["depth"], 2);
    assert_eq!(d["id"], id_of(dir.path(), "shop.core/double-all").as_str());
    // Library callees have no id.
    let j = json(dir.path(), &["callees", "shop.core/shout!"]);
    let up = j
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["fqn"] == "clojure.string/upper-case")
        .unwrap_or_else(|| panic!("{j}"));
    assert_eq!(up["id"], "");
    // By id.
    let id = id_of(dir.path(), "shop.core/summary");
    assert_eq!(
        json(dir.path(), &["callees", &id]),
        json(dir.path(), &["callees", "shop.core/summary"])
    );
}

#[test]
fn ns_overview() {
    let dir = imported();
    let out = formdb(&subdir(dir.path()), &["ns", "shop.util"]).ok();
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines[0], "shop.util  (src/shop/util.clj)");
    assert_eq!(lines[1], "  Small helpers shared by the shop.");
    assert!(out.stdout.contains("slugify [title]"), "{}", out.stdout);
    assert!(out.stdout.contains("Turn a product title into a URL slug."), "{}", out.stdout);
    assert!(!out.stdout.contains("unused-helper"), "private vars are not listed: {}", out.stdout);

    let j = json(dir.path(), &["ns", "shop.util"]);
    assert_eq!(j["ns"], "shop.util");
    assert_eq!(j["doc"], "Small helpers shared by the shop.");
    assert_eq!(j["file"], "src/shop/util.clj");
    assert_eq!(col(&j["vars"], "name"), [Value::from("slugify"), Value::from("price-with-tax")]);
    assert_eq!(col(&j["vars"], "line"), [Value::from(5), Value::from(12)]);
    let core = json(dir.path(), &["ns", "shop.core"]);
    assert_eq!(
        col(&core["vars"], "name"),
        ["double-all", "shout!", "titles", "total", "summary", "helper-later", "-main"]
            .map(Value::from),
        "file order"
    );
}

#[test]
fn search_by_docstring_word() {
    let dir = imported();
    let out = formdb(dir.path(), &["search", "slug"]).ok();
    let rows = table_rows(&out.stdout, &["SCORE", "FQN", "KIND", "FILE", "LINE", "ID"]);
    assert!(rows[0].contains(" shop.util/slugify defn src/shop/util.clj 5 "), "{}", out.stdout);
    let j = json(dir.path(), &["search", "sales", "tax"]);
    assert_eq!(j[0]["fqn"], "shop.util/price-with-tax", "{j}");
    assert!(j[0]["score"].as_f64().unwrap() > 0.0);
    assert_eq!(j[0]["doc"], "Price including the sales tax.");
    let j = json(dir.path(), &["search", "helper-later"]);
    assert_eq!(j[0]["fqn"], "shop.core/helper-later", "its name ranks it above its caller: {j}");
    assert!(col(&j, "fqn").contains(&Value::from("shop.core/summary")), "{j}");
    assert_eq!(json(dir.path(), &["search", "zebra"]), serde_json::json!([]));
    assert_eq!(formdb(dir.path(), &["search", "zebra"]).ok().stdout, "(none)\n");
    let j = json(dir.path(), &["search", "slugify", "--limit", "1"]);
    assert_eq!(j.as_array().unwrap().len(), 1);
}

#[test]
fn query_from_a_file_and_from_stdin() {
    let dir = imported();
    let script = "?[ns, file] := *ns_decl{ns, file} :order ns";
    let file = dir.path().join("namespaces.cozo");
    std::fs::write(&file, script).unwrap();
    let expected = [
        "NS              FILE",
        "shop.core       src/shop/core.clj",
        "shop.core-test  test/shop/core_test.clj",
        "shop.cycle-a    src/shop/cycle_a.clj",
        "shop.cycle-b    src/shop/cycle_b.clj",
        "shop.report     src/shop/report.clj",
        "shop.util       src/shop/util.clj",
    ];
    let out = formdb(&subdir(dir.path()), &["query", file.to_str().unwrap()]).ok();
    assert_eq!(out.stdout.lines().collect::<Vec<_>>(), expected);
    let from_file = json(&subdir(dir.path()), &["query", file.to_str().unwrap()]);
    assert_eq!(col(&from_file, "ns")[0], "shop.core");
    let out = formdb_in(dir.path(), &["query", "-"], Some(script)).ok();
    assert_eq!(out.stdout.lines().collect::<Vec<_>>(), expected);
    let j = formdb_in(dir.path(), &["query", "-", "--json"], Some(script)).ok().json();
    assert_eq!(j, from_file);
    assert_eq!(j.as_array().unwrap().len(), 6);
    assert_eq!(j[5], serde_json::json!({"ns": "shop.util", "file": "src/shop/util.clj"}));

    // Parameters: strings, and JSON values.
    let out = formdb_in(
        dir.path(),
        &["query", "-", "--json", "--param", "v=shop.util/slugify", "--param", "n=1"],
        Some("?[id, line, n] := *defines{var: $v, id}, *form{id, line}, n = $n + 1"),
    )
    .ok();
    let j = out.json();
    assert_eq!(j[0]["line"], 5);
    assert_eq!(j[0]["n"], 2);
    assert_eq!(j[0]["id"], id_of(dir.path(), "shop.util/slugify").as_str());

    // A script that does not parse is an error, not a crash.
    // (Cozo's diagnostic may span several lines.)
    let bad = formdb_in(dir.path(), &["query", "-"], Some("?[x] := *nope{x}"));
    assert_eq!(bad.code, Some(1), "{}", bad.stderr);
    assert!(
        bad.stderr.starts_with("formdb: query failed") && bad.stderr.contains("'nope'"),
        "{}",
        bad.stderr
    );
    assert!(!bad.stderr.contains("panicked"), "{}", bad.stderr);
    formdb(dir.path(), &["query", "/no/such/script.cozo"]).fails_naming("/no/such/script.cozo");
}

#[test]
fn named_queries_via_run() {
    let dir = imported();
    let out = formdb(dir.path(), &["run", "--list"]).ok();
    let names: Vec<&str> =
        out.stdout.lines().skip(1).map(|l| l.split_whitespace().next().unwrap()).collect();
    for n in [
        "form",
        "usages",
        "callers",
        "callees",
        "ns_overview",
        "search",
        "unresolved",
        "dead_vars",
        "ns_cycles",
        "stats",
        "history",
    ] {
        assert!(names.contains(&n), "{n} listed: {}", out.stdout);
    }
    assert_eq!(
        table(&out.stdout).0,
        ["NAME", "PARAMS", "DESCRIPTION"],
        "a header names the columns: {}",
        out.stdout
    );
    let usages_line = out.stdout.lines().find(|l| l.starts_with("usages ")).unwrap();
    assert_eq!(
        usages_line.split_whitespace().collect::<Vec<_>>().join(" "),
        "usages fqn Every form that uses a var directly, with the place of its first use."
    );

    let out = formdb(&subdir(dir.path()), &["run", "usages", "fqn=shop.util/slugify"]).ok();
    let rows = table_rows(
        &out.stdout,
        &["FILE", "LINE", "COL", "CALLER_ID", "CALLER", "NS", "KIND", "COUNT"],
    );
    assert_eq!(rows.len(), 1, "{}", out.stdout);
    assert!(rows[0].starts_with("src/shop/core.clj 10 "), "{}", out.stdout);
    assert!(out.stdout.contains("shop.core/titles"), "{}", out.stdout);
    let j = json(dir.path(), &["run", "usages", "fqn=shop.util/slugify"]);
    assert_eq!(col(&j, "caller"), [Value::from("shop.core/titles")]);
    assert_eq!(j[0]["line"], 10);
    let j = json(dir.path(), &["run", "callers", "fqn=shop.core/double-all", "depth=2"]);
    assert!(col(&j, "fqn").contains(&Value::from("shop.core/summary")), "{j}");
    let j = json(dir.path(), &["run", "search", "q=slug"]);
    assert_eq!(j[0]["fqn"], "shop.util/slugify");

    formdb(dir.path(), &["run", "usages"]).fails_naming("fqn");
    formdb(dir.path(), &["run", "no_such_query"]).fails_naming("no_such_query");
}

#[test]
fn run_list_as_json() {
    let dir = imported();
    let j = json(dir.path(), &["run", "--list"]);
    assert!(j.as_array().unwrap().len() >= 11, "{j}");
}

#[test]
fn history_of_a_form() {
    let dir = imported();
    let id = id_of(dir.path(), "shop.core/titles");
    let out = formdb(dir.path(), &["history", &id]).ok();
    let (header, rows) = table(&out.stdout);
    assert_eq!(
        header,
        ["V", "TIME_UTC", "AUTHOR", "OP", "HASH", "COMMIT", "SUMMARY"],
        "{}",
        out.stdout
    );
    assert_eq!(rows.len(), 1, "{}", out.stdout);
    assert_eq!(
        [&rows[0][0], &rows[0][2], &rows[0][3]],
        ["1", "import", "import"],
        "{}",
        out.stdout
    );
    let j = json(&subdir(dir.path()), &["history", &id]);
    assert_eq!(j.as_array().unwrap().len(), 1);
    assert_eq!(j[0]["v"], 1);
    assert_eq!(j[0]["id"], id.as_str());
    assert_eq!(j[0]["op"], "import");
    assert_eq!(j[0]["name"], "titles");
    assert_eq!(j[0]["file"], "src/shop/core.clj");
    assert!(j[0]["at_unix"].as_f64().unwrap() > 1.6e9, "a Unix time: {}", j[0]["at_unix"]);
    assert_eq!(j[0]["at"].as_str(), Some(rows[0][1].as_str()), "the time the table shows");
    assert!(j[0]["source"]
        .as_str()
        .unwrap()
        .ends_with("(defn titles [products] (map (comp slugify :title) products))"));
    // Deleted forms keep their history under their id.
    write(
        dir.path(),
        "src/shop/core.clj",
        &CORE.replace("(defn titles [products] (map (comp slugify :title) products))\n\n", ""),
    );
    formdb(dir.path(), &["import", "--author", "alice", "."]).ok();
    formdb(dir.path(), &["show", &id]).fails_naming(&id);
    let j = json(dir.path(), &["history", &id]);
    assert_eq!(col(&j, "op"), [Value::from("import"), Value::from("delete")]);
    assert_eq!(j[1]["author"], "alice");
}

#[test]
fn stats_counts_the_store() {
    let dir = imported();
    let j = json(dir.path(), &["stats"]);
    assert_eq!(j["files"], 7);
    assert_eq!(j["blobs"], 1);
    assert_eq!(j["forms"], 21);
    assert_eq!(j["namespaces"], 6);
    assert_eq!(j["versions"], 21);
    assert_eq!(j["unresolved"], 1);
    assert_eq!(j["parse_errors"], 0);
    assert!(j["calls"].as_i64().unwrap() > 20, "{j}");
    let out = formdb(&subdir(dir.path()), &["stats"]).ok();
    assert!(
        out.stdout.lines().any(|l| l.split_whitespace().collect::<Vec<_>>() == ["forms", "21"]),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.lines().any(|l| l.split_whitespace().collect::<Vec<_>>() == ["files", "7"]),
        "{}",
        out.stdout
    );
}

#[test]
fn unresolved_symbols() {
    let dir = imported();
    let out = formdb(dir.path(), &["unresolved"]).ok();
    assert_eq!(
        out.stdout,
        "FILE                 LINE  COL  SYM\nsrc/shop/report.clj     3   19  format-money\n"
    );
    let j = json(dir.path(), &["unresolved"]);
    assert_eq!(j.as_array().unwrap().len(), 1, "{j}");
    assert_eq!(j[0]["sym"], "format-money");
    assert_eq!(j[0]["file"], "src/shop/report.clj");
    assert_eq!((j[0]["line"].as_i64(), j[0]["col"].as_i64()), (Some(3), Some(19)));
    assert_eq!(j[0]["ns"], "shop.report");
    assert_eq!(j[0]["id"], id_of(dir.path(), "shop.report/render").as_str());
}

#[test]
fn dead_vars() {
    let dir = imported();
    let out = formdb(dir.path(), &["dead"]).ok();
    assert!(out.stdout.contains("shop.util/unused-helper"), "{}", out.stdout);
    let j = json(dir.path(), &["dead"]);
    let fqns = col(&j, "fqn");
    assert!(fqns.contains(&Value::from("shop.util/unused-helper")), "{j}");
    assert!(!fqns.contains(&Value::from("shop.core/-main")), "{j}");
    assert!(!fqns.contains(&Value::from("shop.core-test/double-all-test")), "{j}");
    assert!(!fqns.contains(&Value::from("shop.util/slugify")), "{j}");
}

#[test]
fn namespace_cycles() {
    let dir = imported();
    let out = formdb(dir.path(), &["cycles"]).ok();
    assert_eq!(
        table_rows(&out.stdout, &["NS", "CYCLE"]),
        ["shop.cycle-a shop.cycle-a shop.cycle-b", "shop.cycle-b shop.cycle-a shop.cycle-b"],
        "{}",
        out.stdout
    );
    let j = json(dir.path(), &["cycles"]);
    assert_eq!(col(&j, "ns"), [Value::from("shop.cycle-a"), Value::from("shop.cycle-b")]);
    assert!(strings(&j[0]["collect(other)"]).contains(&"shop.cycle-b".to_string()), "{j}");
    // Break the cycle.
    write(dir.path(), "src/shop/cycle_b.clj", "(ns shop.cycle-b)\n\n(defn b [] 1)\n");
    formdb(dir.path(), &["import"]).ok();
    assert_eq!(json(dir.path(), &["cycles"]), serde_json::json!([]));
    assert_eq!(formdb(dir.path(), &["cycles"]).ok().stdout, "(none)\n");
}

// ---------------------------------------------------------------------------------------------
// Errors

#[test]
fn unknown_ids_and_vars_are_clear_errors() {
    let dir = imported();
    for json_flag in [false, true] {
        let with = |args: &[&str]| -> Vec<String> {
            let mut v: Vec<String> = args.iter().map(|s| s.to_string()).collect();
            if json_flag {
                v.push("--json".into());
            }
            v
        };
        let run = |args: &[&str]| {
            let a = with(args);
            formdb(dir.path(), &a.iter().map(String::as_str).collect::<Vec<_>>())
        };
        run(&["show", "zzzzzzzz"]).fails_naming("zzzzzzzz");
        run(&["show", "shop.core/nope"]).fails_naming("shop.core/nope");
        run(&["usages", "shop.core/nope"]).fails_naming("shop.core/nope");
        run(&["usages", "shop.core/nope", "--depth", "2"]).fails_naming("shop.core/nope");
        run(&["usages", "nope"]).fails_naming("nope");
        run(&["callees", "shop.core/nope"]).fails_naming("shop.core/nope");
        run(&["history", "zzzzzzzz"]).fails_naming("zzzzzzzz");
        run(&["ns", "no.such.ns"]).fails_naming("no.such.ns");
    }
}

/// An unknown id is worded for a shell user: the subcommand that finds ids, never an MCP tool.
#[test]
fn an_unknown_id_names_the_subcommand_that_finds_ids() {
    let dir = imported();
    for key in ["zzzzzzzz", "shop.core/nope"] {
        let out = formdb(dir.path(), &["show", key]).fails_naming(&format!("`{key}`"));
        assert!(out.stderr.contains("no form with id or var name"), "{}", out.stderr);
        assert!(out.stderr.contains("`formdb search TEXT`"), "{}", out.stderr);
        for tool in ["get_form", "explore_namespace", "list_namespaces", "`search`"] {
            assert!(!out.stderr.contains(tool), "no MCP tool ({tool}): {}", out.stderr);
        }
    }
}

#[test]
fn no_store_is_a_clear_error() {
    let empty = tempfile::tempdir().unwrap();
    for args in [&["show", "a/b"][..], &["stats"], &["usages", "a/b"], &["query", "-"]] {
        let out = formdb(empty.path(), args).fails_naming("no formdb store found");
        assert!(out.stderr.contains("formdb import"), "says what to do: {}", out.stderr);
    }
    let missing = empty.path().join("not-a-store");
    formdb(empty.path(), &["--db", missing.to_str().unwrap(), "stats"]).fails_naming("not-a-store");
    assert!(!missing.exists(), "reading commands never create a store");
}

#[test]
fn mutating_queries_are_refused_and_change_nothing() {
    let dir = imported();
    let before = json(dir.path(), &["stats"]);
    let forms = "?[id] := *form{id} :order id";
    let forms_before = formdb_in(dir.path(), &["query", "-", "--json"], Some(forms)).ok().json();
    for script in [
        "?[id] := *form{id} :rm form {id}",
        "?[key, value] <- [['schema_version', '7']] :put meta {key => value}",
        "::remove form",
        "# first a comment\n::remove calls",
        "?[a] <- [[1]] :replace form {a}",
        ":create scratch {a}",
    ] {
        let out = formdb_in(dir.path(), &["query", "-"], Some(script));
        assert_ne!(out.code, Some(0), "{script:?} must be refused: {}", out.stdout);
        assert!(
            out.stderr.contains("read-only") || out.stderr.contains("refused"),
            "{script:?}: {}",
            out.stderr
        );
        assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
    }
    let file = dir.path().join("evil.cozo");
    std::fs::write(&file, "?[id] := *form{id} :rm form {id}").unwrap();
    formdb(dir.path(), &["query", file.to_str().unwrap()]).fails_naming("read-only");
    assert_eq!(json(dir.path(), &["stats"]), before);
    assert_eq!(
        formdb_in(dir.path(), &["query", "-", "--json"], Some(forms)).ok().json(),
        forms_before
    );
    let relations = formdb_in(dir.path(), &["query", "-"], Some("::relations")).ok();
    assert!(!relations.stdout.contains("scratch"), "{}", relations.stdout);
    assert_eq!(json(dir.path(), &["show", "shop.util/slugify"])["kind"], "defn");
}

#[test]
fn db_flag_points_elsewhere() {
    let dir = project();
    let other = tempfile::tempdir().unwrap();
    let db = other.path().join("stores/shop");
    let db_arg = db.to_str().unwrap();
    let out = formdb(other.path(), &["--db", db_arg, "import", dir.path().to_str().unwrap()]).ok();
    assert!(out.stdout.contains(&format!("store: {}", db.display())), "{}", out.stdout);
    assert!(db.join("store.db").is_file());
    assert!(!dir.path().join(".formdb").exists(), "nothing written into the project");

    // Without --db, the project has no store.
    formdb(dir.path(), &["stats"]).fails_naming("no formdb store found");
    // With it, from anywhere (the flag is global: before or after the subcommand).
    let j =
        formdb(dir.path(), &["show", "shop.util/slugify", "--db", db_arg, "--json"]).ok().json();
    assert_eq!(j["file"], "src/shop/util.clj");
    let j = formdb(other.path(), &["--db", db_arg, "--json", "stats"]).ok().json();
    assert_eq!(j["forms"], 21);
    let out = formdb(other.path(), &["--db", db_arg, "import", dir.path().to_str().unwrap()]).ok();
    assert!(
        out.stdout.contains("files: 0 added, 0 changed, 0 removed, 8 unchanged"),
        "{}",
        out.stdout
    );

    // --db beats a store found by walking up.
    formdb(dir.path(), &["import", "."]).ok();
    write(dir.path(), "src/shop/extra.clj", "(ns shop.extra)\n(defn more [] 1)\n");
    formdb(dir.path(), &["import", "."]).ok();
    formdb(dir.path(), &["show", "shop.extra/more"]).ok();
    formdb(dir.path(), &["--db", db_arg, "show", "shop.extra/more"])
        .fails_naming("shop.extra/more");
}

#[test]
fn import_of_a_missing_directory_fails_cleanly() {
    let other = tempfile::tempdir().unwrap();
    let missing = other.path().join("nope");
    formdb(other.path(), &["import", missing.to_str().unwrap()]).fails_naming("nope");
    assert!(!missing.exists());
    assert!(!other.path().join(".formdb").exists());
}

#[test]
fn fmt_lays_out_a_namespace_as_one_recorded_edit() {
    let dir = imported();
    let root = dir.path();
    write(
        root,
        "src/shop/messy.clj",
        "(ns shop.messy)\n(defn   messy\n[x]\n      (let [a 1 b 2]\n   (+ a b x)))\n\n\n(def y 1)",
    );
    formdb(root, &["import", "."]).ok();
    let before = id_of(root, "shop.messy/messy");
    let out = formdb(root, &["fmt", "shop.messy"]).ok();
    assert!(out.stdout.contains("formatted 1 of 1 file(s)"), "{}", out.stdout);
    let view = formdb(root, &["view", "shop.messy"]).ok().stdout;
    assert_eq!(
        view,
        "(ns shop.messy)\n\n(defn messy [x] (let [a 1 b 2] (+ a b x)))\n\n(def y 1)\n"
    );
    assert_eq!(id_of(root, "shop.messy/messy"), before, "ids survive formatting");
    let history = json(root, &["history", "shop.messy/messy"]);
    let last = history.as_array().and_then(|h| h.last()).cloned().unwrap_or_default();
    assert_eq!(
        (last["op"].as_str(), last["author"].as_str()),
        (Some("fmt"), Some("fmt")),
        "{history}"
    );
    // Formatting is idempotent: a second pass over everything changes nothing.
    formdb(root, &["fmt", "--all"]).ok();
    let again = formdb(root, &["fmt", "--all"]).ok();
    assert!(again.stdout.starts_with("formatted 0 of"), "{}", again.stdout);
    assert!(again.stdout.contains(" 0 form(s) changed"), "{}", again.stdout);
    formdb(root, &["fmt", "no.such.ns"]).fails_naming("no.such.ns");
}

// ---------------------------------------------------------------------------------------------
// What the output reads like

#[test]
fn history_times_are_iso_8601_in_utc() {
    let dir = imported();
    let out = formdb(dir.path(), &["history", "shop.core/titles"]).ok();
    let (header, rows) = table(&out.stdout);
    assert_eq!(header[1], "TIME_UTC", "{}", out.stdout);
    let j = json(dir.path(), &["history", "shop.core/titles"]);
    let unix = j[0]["at_unix"].as_f64().unwrap_or_else(|| panic!("seconds since 1970: {j}"));
    // The same instant as GNU date writes it in UTC.
    let date = Command::new("date")
        .args(["-u", "-d", &format!("@{}", unix.floor()), "+%Y-%m-%dT%H:%M:%SZ"])
        .output()
        .unwrap();
    let expected = String::from_utf8(date.stdout).unwrap().trim().to_string();
    assert_eq!(rows[0][1], expected, "{}", out.stdout);
    assert_eq!(j[0]["at"], expected.as_str(), "{j}");
}

#[test]
fn search_scores_are_rounded_to_two_decimals() {
    let dir = imported();
    let out = formdb(dir.path(), &["search", "shop", "total", "slug"]).ok();
    let (_, rows) = table(&out.stdout);
    assert!(rows.len() > 2, "{}", out.stdout);
    let j = json(dir.path(), &["search", "shop", "total", "slug"]);
    for (row, score) in rows.iter().zip(col(&j, "score")) {
        let decimals = row[0].split_once('.').map_or(0, |(_, d)| d.len());
        assert!(decimals <= 2, "{}", out.stdout);
        let score = score.as_f64().unwrap();
        assert_eq!((score * 100.0).round() / 100.0, score, "{j}");
        assert_eq!(row[0].parse::<f64>().unwrap(), score, "the table shows the JSON score");
    }
}

#[test]
fn callees_leave_out_the_forms_own_defining_macro() {
    let dir = project();
    write(
        dir.path(),
        "src/shop/defs.clj",
        "(ns shop.defs\n  (:require [clojure.spec.alpha :as s]))\n\n\
         (defmacro defconst [n v] `(defn ~n [] ~v))\n\n\
         (s/def ::price int?)\n\n\
         (defn make [] (defn made [] 1))\n",
    );
    formdb(dir.path(), &["import", "."]).ok();
    let callees = |key: &str, depth: &str| -> Vec<Value> {
        col(&json(dir.path(), &["callees", key, "--depth", depth]), "fqn")
    };
    let summary = callees("shop.core/summary", "2");
    assert!(summary.contains(&Value::from("shop.core/helper-later")), "{summary:?}");
    assert!(summary.contains(&Value::from("shop.core/double-all")), "{summary:?}");
    assert!(!summary.contains(&Value::from("clojure.core/defn")), "{summary:?}");
    let test = callees("shop.core-test/double-all-test", "1");
    assert!(test.contains(&Value::from("clojure.test/is")), "{test:?}");
    assert!(!test.contains(&Value::from("clojure.test/deftest")), "{test:?}");
    let spec =
        formdb_in(dir.path(), &["query", "-", "--json"], Some("?[id] := *form{id, head: 's/def'}"))
            .ok()
            .json()[0]["id"]
            .as_str()
            .unwrap()
            .to_string();
    assert_eq!(callees(&spec, "1"), [Value::from("clojure.core/int?")], "an aliased head");
    // `defn` used inside a form's body, besides its head, is a call of it.
    let made = callees("shop.defs/make", "1");
    assert_eq!(made, [Value::from("clojure.core/defn")], "used again in the body");
    let quoted = callees("shop.defs/defconst", "1");
    assert!(!quoted.contains(&Value::from("clojure.core/defmacro")), "{quoted:?}");
}

#[test]
fn run_list_describes_each_query_in_whole_sentences() {
    let dir = imported();
    let out = formdb(dir.path(), &["run", "--list"]).ok();
    let j = json(dir.path(), &["run", "--list"]);
    for q in j.as_array().unwrap() {
        let (name, about) = (q["name"].as_str().unwrap(), q["about"].as_str().unwrap());
        assert!(about.starts_with(char::is_uppercase) && about.ends_with('.'), "{name}: {about}");
        for internal in ["`", "$", "::", "_", "*"] {
            assert!(!about.contains(internal), "{name}: no `{internal}` in {about}");
        }
        let line = out.stdout.lines().find(|l| l.starts_with(&format!("{name} "))).unwrap();
        assert!(line.ends_with(about), "the table shows it whole: {line}");
    }
}

/// Reads stdout lines of a child on a thread, so a wait for one can time out.
fn lines_of(child: &mut std::process::Child) -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead;
    let (tx, rx) = std::sync::mpsc::channel();
    let out = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for l in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    rx
}

/// Without `--user` or `$USER`, a mount's user is the login name, not a made-up one.
/// (Needs /dev/fuse, as tests/mount_cli.rs does.)
#[test]
fn mount_defaults_to_the_login_name() {
    let dir = imported();
    let mnt = tempfile::tempdir().unwrap();
    let login = Command::new("id").arg("-un").output().unwrap();
    let login = String::from_utf8(login.stdout).unwrap().trim().to_string();
    assert!(!login.is_empty());
    let mut child = Command::new(env!("CARGO_BIN_EXE_formdb"))
        .args(["--json", "mount"])
        .arg(mnt.path())
        .current_dir(dir.path())
        .env_remove("USER")
        .env_remove("LOGNAME")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let lines = lines_of(&mut child);
    let first = lines.recv_timeout(std::time::Duration::from_secs(30));
    // SAFETY: signalling our own child by its pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    let first = first.expect("the mount says it is mounted");
    let event: Value = serde_json::from_str(&first).unwrap();
    assert_eq!(event["event"], "mounted", "{first}");
    assert_eq!(event["user"], login.as_str(), "{first}");
    assert!(status.success(), "unmounted on SIGTERM: {status}");
}

// ---------------------------------------------------------------------------------------------
// What is imported

fn git(cwd: &Path, args: &[&str]) {
    let out = Command::new("git").args(args).current_dir(cwd).output().unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// Git's index wins over `.gitignore`, as in git: clj-kondo commits `AwesomeClass$Foo.class`
/// while ignoring `*.class`. The tracked file is stored and exported byte for byte; an untracked
/// one stays out.
#[test]
fn a_file_git_tracks_is_imported_though_gitignore_ignores_it() {
    let dir = project();
    let root = dir.path();
    let class = b"\xca\xfe\xba\xbe\x00\x00\x00\x34 tracked";
    write(root, ".gitignore", "*.class\n/out/\n");
    std::fs::create_dir_all(root.join("corpus/java")).unwrap();
    std::fs::write(root.join("corpus/java/AwesomeClass$Foo.class"), class).unwrap();
    std::fs::write(root.join("corpus/java/Untracked.class"), b"\xca\xfe").unwrap();
    write(root, "out/shop/gen.clj", "(ns shop.gen)\n");
    git(root, &["init", "-q"]);
    git(root, &["add", "."]);
    git(root, &["add", "-f", "corpus/java/AwesomeClass$Foo.class", "out/shop/gen.clj"]);

    let out = formdb(root, &["import", "."]).ok();
    assert!(out.stdout.contains("files: 11 added"), "{}", out.stdout);
    let stored = |path: &str| {
        let script = "?[p] := *blob{path: p}, p == $p\n?[p] := *file{path: p}, p == $p";
        let arg = format!("p={path}");
        let rows = formdb_in(root, &["query", "-", "--json", "--param", &arg], Some(script));
        !rows.ok().json().as_array().unwrap().is_empty()
    };
    assert!(stored("corpus/java/AwesomeClass$Foo.class"));
    assert!(stored("out/shop/gen.clj"), "below an ignored directory");
    assert!(!stored("corpus/java/Untracked.class"));
    assert_eq!(json(root, &["ns", "shop.gen"])["file"], "out/shop/gen.clj");

    let export = tempfile::tempdir().unwrap();
    formdb(root, &["export", export.path().to_str().unwrap()]).ok();
    assert_eq!(
        std::fs::read(export.path().join("corpus/java/AwesomeClass$Foo.class")).unwrap(),
        class
    );
    assert!(!export.path().join("corpus/java/Untracked.class").exists());
}

// ---------------------------------------------------------------------------------------------
// The README

/// Every command line of the README's "Using it" section, run as written on a copy of
/// `examples/shop`, exits 0. The copy lives in a temporary directory where the README says
/// `/tmp/shop`; `cargo build` is left out (the binary under test is built, and put first on
/// PATH instead); `cd` moves where the next lines run. Lines needing a mount or a daemon
/// (`formdb mount`, `formdb up`, `bench mount`, `bench up`) would be skipped: a mount needs
/// /dev/fuse and outlives its line, a daemon runs until stopped (tests/mount_cli.rs and
/// tests/up.rs run those).
#[test]
fn the_readme_using_it_section_runs_as_written_on_the_example() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(repo.join("README.md")).unwrap();
    let section = readme.split("\n## Using it\n").nth(1).expect("a Using it section");
    let section = section.split("\n## ").next().unwrap();
    let block = section.split("```sh\n").nth(1).expect("a sh block").split("```").next().unwrap();

    let tmp = tempfile::tempdir().unwrap();
    let shop = tmp.path().join("shop");
    let bin = Path::new(env!("CARGO_BIN_EXE_formdb")).parent().unwrap().to_path_buf();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let mut cwd = repo.to_path_buf();
    let mut ran = 0;
    for line in block.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let line = line.replace("/tmp/shop", shop.to_str().unwrap());
        if line.starts_with("cargo build") {
            continue;
        }
        if let Some(to) = line.strip_prefix("cd ") {
            let to = to.split(" #").next().unwrap().trim();
            cwd = cwd.join(to);
            assert!(cwd.is_dir(), "{line}");
            continue;
        }
        if ["formdb mount", "formdb up", "bench mount", "bench up"].iter().any(|w| line.contains(w))
        {
            continue;
        }
        let out = Command::new("sh")
            .args(["-c", &line])
            .current_dir(&cwd)
            .env("PATH", &path)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "`{line}` in {}:\n--- stdout\n{}\n--- stderr\n{}",
            cwd.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        ran += line.contains("formdb ") as usize;
    }
    assert!(ran >= 25, "the section's formdb lines ran ({ran})");
    assert!(shop.join(".formdb").is_dir(), "the lines worked on the copy");
    assert!(tmp.path().join("shop-export/src/shop/cart.clj").is_file());
}

/// `formdb query` runs a script under the MCP `query` tool's sandbox: the same time limit (a
/// script's own `:timeout` cannot raise it), and the same refusals of what would escape it.
#[test]
fn formdb_query_has_the_mcp_query_tools_limits() {
    let dir = imported();
    let runaway = "r[n] := n = 0\nr[m] := r[n], m = n + 1\n?[count(n)] := r[n]\n:timeout 100000";
    let out = formdb_in(dir.path(), &["query", "-"], Some(runaway));
    assert_ne!(out.code, Some(0), "a runaway script is stopped: {}", out.stdout);
    assert!(
        out.stderr.contains("10 s time limit") || out.stderr.contains("MB of memory"),
        "stopped at the sandbox's limit: {}",
        out.stderr
    );
    for (script, says) in [
        ("{?[x] := x = 1} {?[y] := y = 2}", "send one query"),
        ("?[x] := x = 1\n:sleep 100", "`:sleep` is not allowed"),
        ("?[a] <~ CsvReader(url: 'file:///etc/passwd', types: ['String'])", "CsvReader"),
    ] {
        let out = formdb_in(dir.path(), &["query", "-"], Some(script));
        assert_ne!(out.code, Some(0), "{script:?} must be refused: {}", out.stdout);
        assert!(out.stderr.contains(says), "{script:?}: {}", out.stderr);
    }
    // Parameters come as the MCP tool's JSON values do.
    let q = "?[x, y] := x = $n + 1, y = $s";
    let rows = formdb_in(
        dir.path(),
        &["query", "-", "--json", "--param", "n=41", "--param", "s=text"],
        Some(q),
    )
    .ok()
    .json();
    assert_eq!(rows, serde_json::json!([{"x": 42, "y": "text"}]));
}

/// `kill -9` while `formdb import` makes a new store, at 40 points from the store file's
/// creation on: every time, the next import opens what was left and imports the whole tree.
/// A store made one relation a commit, killed between two, was refused at every later open as
/// "the store at … has schema version 0, this formdb expects 9".
#[test]
fn a_store_killed_while_it_is_made_opens_again() {
    let dir = project();
    let store = dir.path().join(".formdb/store.db");
    let mut killed_running = 0;
    for round in 0..40u64 {
        let _ = std::fs::remove_dir_all(dir.path().join(".formdb"));
        let mut child = Command::new(env!("CARGO_BIN_EXE_formdb"))
            .arg("import")
            .current_dir(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let started = std::time::Instant::now();
        while !store.exists() && started.elapsed() < std::time::Duration::from_secs(20) {
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
        std::thread::sleep(std::time::Duration::from_micros(round * 750));
        if child.try_wait().unwrap().is_none() {
            killed_running += 1;
        }
        // SAFETY: our own child, not yet reaped.
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        child.wait().unwrap();
        let out = formdb(dir.path(), &["import", "--json"]).ok().json();
        let files = out["files_added"].as_u64().unwrap()
            + out["files_changed"].as_u64().unwrap()
            + out["files_unchanged"].as_u64().unwrap();
        assert_eq!(files, 8, "round {round}: every file is in the store: {out}");
    }
    assert!(killed_running >= 10, "only {killed_running} of 40 kills found the import running");
}
