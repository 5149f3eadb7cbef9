//! `formdb import --history` on a repository built here with real git commits: an edit, a file
//! rename, a form moved between namespaces, a form deleted and added back, a commit whose file
//! does not parse, and a merge. Each form's versions are checked against what git itself holds
//! at each first-parent commit; the store after the walk is checked against a plain import of
//! the same tree; a re-run adds nothing, and a new commit adds only its own versions.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::process::Command;

use formdb_engine::Store;
use serde_json::Value;

fn formdb(args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_formdb")).arg("--json").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "formdb {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A repository whose commits get increasing, fixed dates (so the test is the same every run).
struct Repo<'a> {
    dir: &'a Path,
    clock: std::cell::Cell<u64>,
}

impl Repo<'_> {
    fn git(&self, args: &[&str]) -> String {
        self.clock.set(self.clock.get() + 60);
        let date = format!("{} +0000", 1_700_000_000 + self.clock.get());
        let out = Command::new("git")
            .arg("-C")
            .arg(self.dir)
            .args(["-c", "user.name=Ada Lovelace", "-c", "user.email=ada@example.com"])
            .args(args)
            .env("GIT_AUTHOR_DATE", &date)
            .env("GIT_COMMITTER_DATE", &date)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }

    fn write(&self, rel: &str, text: &str) {
        let path = self.dir.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn commit(&self, message: &str) {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "-m", message]);
    }
}

fn core(greet: &str, add: bool, moved: bool) -> String {
    let mut t =
        format!("(ns app.core\n  (:require [app.util :as u]))\n\n(defn greet [name]\n  {greet})\n");
    if add {
        t.push_str("\n(defn add [a b]\n  (+ a b))\n");
    }
    if moved {
        t.push_str("\n(defn moving-fn [x]\n  (* x 3))\n");
    }
    t
}

fn util(helper: &str, moving: bool) -> String {
    let mut t = format!("(ns app.util)\n\n(defn helper [x]\n  {helper})\n");
    if helper.contains('+') {
        // Arrives in a commit that leaves `app.extra`, its caller, as it is.
        t.push_str("\n(defn later-fn [x]\n  x)\n");
    }
    if moving {
        t.push_str("\n(defn moving-fn [x]\n  (* x 3))\n");
    }
    t
}

const EXTRA: &str =
    "(ns app.extra\n  (:require [app.util :refer :all]))\n\n(defn extra-fn []\n  (later-fn :extra))\n";
const EXTRA_BROKEN: &str = "(ns app.extra\n  (:require [app.util :refer :all]))\n\n(defn extra-fn []\n  (later-fn :extra))\n\n(defn broken [\n";

fn build(repo: &Repo) {
    repo.git(&["init", "-q", "-b", "main"]);
    repo.write("src/app/core.clj", &core("(str \"hi \" name)", true, false));
    repo.write("src/app/util.clj", &util("(inc x)", true));
    repo.write("src/app/extra.clj", EXTRA);
    repo.write("README.md", "# app\n");
    repo.commit("init");
    repo.write("README.md", "# app\n\nNo Clojure here.\n");
    std::fs::create_dir_all(repo.dir.join("resources")).unwrap();
    std::fs::write(repo.dir.join("resources/data.edn"), b"\0\x01binary\0").unwrap();
    repo.commit("docs, and a binary file with a Clojure name");
    repo.write("src/app/core.clj", &core("(str \"hello \" name)", true, false));
    repo.commit("edit greet");
    repo.git(&["mv", "src/app/util.clj", "src/app/helpers.clj"]);
    repo.commit("rename util");
    repo.write("src/app/helpers.clj", &util("(inc x)", false));
    repo.write("src/app/core.clj", &core("(str \"hello \" name)", true, true));
    repo.commit("move moving-fn to app.core");
    repo.write("src/app/core.clj", &core("(str \"hello \" name)", false, true));
    repo.commit("delete add");
    repo.write("src/app/core.clj", &core("(str \"hello \" name)", true, true));
    repo.commit("add add back");
    repo.write("src/app/extra.clj", EXTRA_BROKEN);
    repo.commit("break extra");
    repo.write("src/app/extra.clj", EXTRA);
    repo.write("src/app/core.clj", &core("(str \"hello, \" name)", true, true));
    repo.commit("fix extra, edit greet");
    repo.git(&["checkout", "-q", "-b", "side"]);
    repo.write("src/app/helpers.clj", &util("(+ x 1)", false));
    repo.commit("side: helper by addition");
    repo.git(&["checkout", "-q", "main"]);
    repo.write("src/app/core.clj", &core("(str \"hey \" name)", true, true));
    repo.commit("main: edit greet");
    repo.git(&["merge", "-q", "--no-ff", "side", "-m", "merge side"]);
}

/// A form as git holds it at one commit: its file and text, or `None` when no file that parses
/// has it. Top-level forms of these files are separated by blank lines; a file "parses" when
/// its brackets balance.
fn form_at(repo: &Repo, commit: &str, name: &str) -> Option<(String, String)> {
    let files = repo.git(&["ls-tree", "-r", "--name-only", commit]);
    for path in files.lines().filter(|p| p.ends_with(".clj")) {
        let text = repo.git(&["show", &format!("{commit}:{path}")]);
        if text.matches('(').count() != text.matches(')').count() {
            continue;
        }
        for block in text.split("\n\n") {
            if block.starts_with(&format!("(defn {name} ")) {
                return Some((path.to_string(), block.trim_end().to_string()));
            }
        }
    }
    None
}

/// (commit, deleted) of each version git's first-parent history implies for a form: where it
/// appears, changes text or file, or goes.
fn expected_versions(repo: &Repo, name: &str) -> Vec<(String, bool)> {
    let commits = repo.git(&["rev-list", "--first-parent", "--reverse", "HEAD"]);
    let mut out = Vec::new();
    let mut before = None;
    for c in commits.lines() {
        let now = form_at(repo, c, name);
        if now != before {
            out.push((c.to_string(), now.is_none()));
        }
        before = now;
    }
    out
}

fn versions(db: &str, key: &str) -> Vec<(String, bool)> {
    let rows = formdb(&["--db", db, "history", key]);
    rows.as_array()
        .unwrap()
        .iter()
        .map(|r| (r["commit"].as_str().unwrap().to_string(), r["op"] == "delete"))
        .collect()
}

#[test]
fn a_tree_outside_git_is_refused_and_no_store_is_made() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("store");
    let out = Command::new(env!("CARGO_BIN_EXE_formdb"))
        .args(["--db", db.to_str().unwrap(), "import", "--history"])
        .arg(tmp.path())
        .env("GIT_CEILING_DIRECTORIES", tmp.path().parent().unwrap())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("not in a git repository") && err.contains(tmp.path().to_str().unwrap()),
        "{err}"
    );
    assert!(!db.exists(), "a store was made");
}

#[test]
fn history_import_follows_each_form_through_git_and_ends_as_a_plain_import() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("repo");
    std::fs::create_dir(&dir).unwrap();
    let repo = Repo { dir: &dir, clock: Default::default() };
    build(&repo);
    let db = tmp.path().join("history.formdb");
    let db = db.to_str().unwrap();
    let summary = formdb(&["--db", db, "import", "--history", dir.to_str().unwrap()]);
    let first_parent = repo.git(&["rev-list", "--first-parent", "--count", "HEAD"]);
    assert_eq!(summary["commits"].to_string(), first_parent.trim());
    assert_eq!(summary["merges"], 1);
    // "docs, and a binary file" changes no Clojure file: the binary one is skipped.
    let binaries = summary["binaries"].as_array().unwrap();
    assert_eq!(binaries.len(), 1, "{summary}");
    assert_eq!(binaries[0][0], "resources/data.edn");
    assert_eq!(
        summary["commits_applied"].as_u64().unwrap() + 1,
        summary["commits"].as_u64().unwrap()
    );
    let errors = summary["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 1, "{summary}");
    assert_eq!(errors[0]["path"], "src/app/extra.clj");
    assert_eq!(errors[0]["line"], 7, "the error names the place: {}", errors[0]);

    for (key, name) in [
        ("app.core/greet", "greet"),
        ("app.core/add", "add"),
        ("app.util/helper", "helper"),
        ("app.core/moving-fn", "moving-fn"),
        ("app.extra/extra-fn", "extra-fn"),
    ] {
        let expected = expected_versions(&repo, name);
        assert!(expected.len() >= 2, "{name}: the scenario changes it: {expected:?}");
        assert_eq!(versions(db, key), expected, "versions of {key}");
    }
    // The moved form kept its id across files and namespaces (one history from `init`).
    let moved = formdb(&["--db", db, "history", "app.core/moving-fn"]);
    let files: Vec<&str> =
        moved.as_array().unwrap().iter().map(|r| r["file"].as_str().unwrap()).collect();
    assert_eq!(files, ["src/app/util.clj", "src/app/helpers.clj", "src/app/core.clj"]);

    // Blame names the last commit that changed the form.
    let blame = formdb(&["--db", db, "blame", "app.core/greet"]);
    let greet_last = expected_versions(&repo, "greet").pop().unwrap().0;
    assert_eq!(blame["commit"], greet_last.as_str());
    assert_eq!(blame["summary"], "main: edit greet");
    assert_eq!(blame["author"], "Ada Lovelace");

    // Named queries over the commits.
    let churn = formdb(&["--db", db, "run", "churn", "from=", "to=", "limit=3"]);
    let top = &churn.as_array().unwrap()[0];
    assert_eq!(top["name"], "greet", "{churn}");
    assert_eq!(top["commits"].as_u64().unwrap() as usize, expected_versions(&repo, "greet").len());
    let together = formdb(&["--db", db, "run", "changed-together", "key=app.core/add", "limit=10"]);
    let names: Vec<&str> =
        together.as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"greet") && !names.contains(&"add"), "{together}");

    // The store equals a plain import of the same tree, but for the history rows and the ids of
    // forms first seen under another path (the renamed file's, the moved form's): those keep the
    // id they had from their first commit.
    let plain = tmp.path().join("plain.formdb");
    formdb(&["--db", plain.to_str().unwrap(), "import", dir.to_str().unwrap()]);
    let h = Store::open_existing(Path::new(db)).unwrap();
    let p = Store::open_existing(&plain).unwrap();
    let ids = |s: &Store| -> BTreeMap<(String, i64), (String, String)> {
        s.query(
            "?[file, pos, id, name] := *form{file, pos, id, name, parent: ''}",
            Default::default(),
        )
        .unwrap()
        .rows
        .iter()
        .map(|r| {
            let g = |i: usize| r[i].get_str().unwrap().to_string();
            ((g(0), r[1].get_int().unwrap()), (g(2), g(3)))
        })
        .collect()
    };
    let (hid, pid) = (ids(&h), ids(&p));
    assert_eq!(hid.keys().collect::<Vec<_>>(), pid.keys().collect::<Vec<_>>());
    let mut rename: HashMap<String, String> = HashMap::new();
    for (k, (id, name)) in &hid {
        let (plain_id, _) = &pid[k];
        let first_path = moved_or_renamed(&k.0, name);
        assert_eq!(id == plain_id, !first_path, "{k:?} {name}: history id {id}, plain {plain_id}");
        rename.insert(id.clone(), plain_id.clone());
    }
    for rel in [
        "form",
        "form_at",
        "file",
        "blob",
        "defines",
        "defined_by",
        "calls",
        "unresolved",
        "diagnostic",
        "ns_decl",
        "ns_refer",
        "ns_require",
    ] {
        assert_eq!(rows(&h, rel, &rename), rows(&p, rel, &HashMap::new()), "relation {rel}");
    }

    // A re-run walks nothing; a new commit adds only its versions.
    let versions_before = count(&h, "version");
    let again = formdb(&["--db", db, "import", "--history", dir.to_str().unwrap()]);
    assert_eq!(again["commits"], 0, "{again}");
    assert_eq!(count(&h, "version"), versions_before);
    repo.write("src/app/helpers.clj", &util("(+ 1 x)", false));
    repo.commit("helper, the other way round");
    let next = formdb(&["--db", db, "import", "--history", dir.to_str().unwrap()]);
    assert_eq!((next["commits"].as_u64(), next["versions"].as_u64()), (Some(1), Some(1)), "{next}");
    assert_eq!(count(&h, "version"), versions_before + 1);
    let helper = versions(db, "app.util/helper");
    assert_eq!(helper, expected_versions(&repo, "helper"));
    assert_eq!(
        formdb(&["--db", db, "blame", "app.util/helper"])["summary"],
        "helper, the other way round"
    );
}

/// Forms whose first sight was under another path than HEAD's.
fn moved_or_renamed(file: &str, name: &str) -> bool {
    (file == "src/app/helpers.clj" && name != "later-fn") || name == "moving-fn"
}

fn count(s: &Store, rel: &str) -> usize {
    s.query(&format!("?[count(id)] := *{rel}{{id}}"), Default::default()).unwrap().rows[0][0]
        .get_int()
        .unwrap() as usize
}

/// Every row of a relation as JSON, with form ids renamed, sorted.
fn rows(s: &Store, rel: &str, rename: &HashMap<String, String>) -> Vec<Value> {
    let cols = s.query(&format!("::columns {rel}"), Default::default()).unwrap();
    let names: Vec<String> =
        cols.rows.iter().map(|r| r[0].get_str().unwrap().to_string()).collect();
    let list = names.join(", ");
    let got = s.query(&format!("?[{list}] := *{rel}{{{list}}}"), Default::default()).unwrap();
    let mut out: Vec<Value> =
        got.rows.iter().map(|r| renamed(serde_json::to_value(r).unwrap(), rename)).collect();
    out.sort_by_key(|v| v.to_string());
    out
}

fn renamed(v: Value, rename: &HashMap<String, String>) -> Value {
    match v {
        Value::String(s) => Value::String(rename.get(&s).cloned().unwrap_or(s)),
        Value::Array(a) => Value::Array(a.into_iter().map(|x| renamed(x, rename)).collect()),
        Value::Object(o) => {
            Value::Object(o.into_iter().map(|(k, x)| (k, renamed(x, rename))).collect())
        }
        other => other,
    }
}

#[test]
fn up_with_history_walks_git_on_first_start() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("tree");
    let repo = Repo { dir: &dir, clock: std::cell::Cell::new(0) };
    repo.write("src/app/core.clj", "(ns app.core)\n\n(defn f [] 1)\n");
    repo.git(&["init", "-q"]);
    repo.commit("first");
    repo.write("src/app/core.clj", "(ns app.core)\n\n(defn f [] 2)\n");
    repo.commit("second");
    let head = repo.git(&["rev-parse", "HEAD"]).trim().to_string();
    let mut up = Command::new(env!("CARGO_BIN_EXE_formdb"))
        .args(["--json", "up"])
        .arg(&dir)
        .args(["--no-mount", "--history"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(up.stdout.take().unwrap()), &mut line)
        .unwrap();
    let db = dir.join(".formdb");
    let got = versions(db.to_str().unwrap(), "app.core/f");
    // SAFETY: a plain kill(2) of our own child.
    unsafe { libc::kill(up.id() as i32, libc::SIGTERM) };
    up.wait().unwrap();
    assert!(line.contains("\"up\""), "formdb up started: {line}");
    assert_eq!(got.len(), 2, "one version per commit: {got:?}");
    assert_eq!(got[1].0, head, "the last version is HEAD's commit");
}
