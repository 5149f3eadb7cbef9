//! Input nested 100,000 levels deep through every door of the real binary: `formdb import`,
//! `formdb up` starting with such a file in DIR and syncing one that arrives later, a save on
//! its FUSE mount, MCP `insert_form`/`replace_form` over the stdio relay, and `formdb query`.
//! No process overflows its stack: a file is kept as raw text with the finding "nesting deeper
//! than 512 levels" at its place, an edit or a script is refused with a clear error, and later
//! operations work. Forms nested right up to the limit go through every recursive walk.

mod stdio_mcp;
mod support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use formdb_engine::syntax::{self, MAX_DEPTH};
use serde_json::{json, Value};
use support::git;

const BIN: &str = env!("CARGO_BIN_EXE_formdb");

/// Levels the tests nest past the limit.
const DEEP: usize = 100_000;

/// A namespace requiring `clojure.string :as str` (so an alias view has a token to rename) with
/// a function whose body nests `levels` calls, then a plain function after it.
fn deep_file(ns: &str, levels: usize) -> String {
    format!(
        "(ns {ns}\n  (:require [clojure.string :as str]))\n\n(defn deep [] {}{})\n\n(defn after [] (deep))\n",
        "(str/join ".repeat(levels),
        ")".repeat(levels)
    )
}

/// A definition whose body nests every kind of form the recursive walks treat apart (calls,
/// `let` bindings, vectors, maps, sets, quotes, `fn` locals, `#(...)`, reader conditionals,
/// metadata) `levels` times.
fn mixed(levels: usize) -> String {
    const OPEN: [&str; 9] =
        ["(let [x ", "(fn [y] ", "[", "{:k ", "#{", "'(g ", "#(h % ", "#?(:clj ", "(^:m str "];
    const CLOSE: [&str; 9] = ["] x)", ")", "]", "}", "}", ")", ")", ")", ")"];
    let (mut open, mut close) = (String::new(), String::new());
    for i in 0..levels {
        open.push_str(OPEN[i % OPEN.len()]);
        close.insert_str(0, CLOSE[i % CLOSE.len()]);
    }
    format!("(defn mixed [] {open}1{close})")
}

/// The deepest [`mixed`] form the depth gate lets through, found by asking the gate itself.
fn mixed_at_the_limit() -> String {
    let fits = |levels| {
        let src = mixed(levels);
        let tree = syntax::parse(&src);
        assert!(syntax::first_error(&tree, &src).is_none(), "{levels} levels parse");
        syntax::too_deep_error(&tree, &src).is_none()
    };
    let mut levels = 1;
    while fits(levels + 1) {
        levels += 1;
    }
    assert!(levels > MAX_DEPTH / 4, "only {levels} levels fit");
    mixed(levels)
}

fn formdb(args: &[&std::ffi::OsStr]) -> std::process::Output {
    Command::new(BIN).args(args).stdin(Stdio::null()).output().unwrap()
}

fn ok(args: &[&std::ffi::OsStr]) -> String {
    let out = formdb(args);
    assert!(
        out.status.success(),
        "formdb {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Rows of a script run by `formdb --json query`.
fn query(db: &Path, script: &str) -> Vec<Value> {
    let tmp = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(tmp.path(), script).unwrap();
    let out = ok(&[
        "--json".as_ref(),
        "--db".as_ref(),
        db.as_os_str(),
        "query".as_ref(),
        tmp.path().as_os_str(),
    ]);
    serde_json::from_str::<Value>(&out).unwrap().as_array().cloned().unwrap_or_default()
}

/// The error the store records for a file (empty when it parsed into forms), with its place.
fn file_error(db: &Path, path: &str) -> Option<(String, i64, i64)> {
    let rows = query(
        db,
        &format!("?[error, l, c] := *file{{path: '{path}', error, error_line: l, error_col: c}}"),
    );
    rows.first().map(|r| {
        (
            r["error"].as_str().unwrap().to_string(),
            r["l"].as_i64().unwrap(),
            r["c"].as_i64().unwrap(),
        )
    })
}

fn fqns(db: &Path, ns: &str) -> Vec<String> {
    let rows = query(db, &format!("?[fqn] := *form{{ns: '{ns}', fqn}}, fqn != '' :order fqn"));
    rows.iter().map(|r| r["fqn"].as_str().unwrap().to_string()).collect()
}

/// The place of the first node past the limit in `deep_file`: line 3, after `(defn deep [] `
/// and 511 more `(f `; the node past the limit is the symbol's name inside the 512th call.
fn deep_place() -> (i64, i64) {
    let src = deep_file("x", DEEP);
    let tree = syntax::parse(&src);
    let e = syntax::too_deep_error(&tree, &src).expect("too deep");
    (e.pos.line as i64, e.pos.col as i64)
}

#[test]
fn an_import_keeps_a_file_too_deep_as_raw_text_with_its_place() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("deep.clj"), deep_file("deep", DEEP)).unwrap();
    std::fs::write(src.join("limit.clj"), format!("(ns limit)\n\n{}\n", mixed_at_the_limit()))
        .unwrap();
    std::fs::write(src.join("plain.clj"), "(ns plain)\n\n(defn p [] (inc 1))\n").unwrap();
    // A namespace declaration that deep (a prefix list in a prefix list ...).
    let deep_ns = format!("(ns deep-ns (:require {}x{}))\n", "[a ".repeat(DEEP), "]".repeat(DEEP));
    std::fs::write(src.join("deep_ns.clj"), &deep_ns).unwrap();
    let db = tmp.path().join("db");
    let out = formdb(&["--db".as_ref(), db.as_os_str(), "import".as_ref(), src.as_os_str()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    let (line, col) = deep_place();
    assert!(
        stdout.contains(&format!("deep.clj:{line}:{col}: nesting deeper than {MAX_DEPTH} levels")),
        "{stdout}"
    );
    let message = format!("nesting deeper than {MAX_DEPTH} levels");
    assert_eq!(file_error(&db, "deep.clj"), Some((message.clone(), line, col)));
    assert_eq!(file_error(&db, "deep_ns.clj").unwrap().0, message);
    // The bytes are kept whole, and every view shows them as stored: as stored, in a user's
    // alias view (the user reads `s` for `clojure.string`), one form per line.
    ok(&[
        "--db".as_ref(),
        db.as_os_str(),
        "alias".as_ref(),
        "set".as_ref(),
        "ann".as_ref(),
        "s".as_ref(),
        "clojure.string".as_ref(),
    ]);
    for (out, view) in [("out", None), ("user", Some("--user=ann")), ("oneline", Some("--oneline"))]
    {
        let dir = tmp.path().join(out);
        let mut args: Vec<&std::ffi::OsStr> =
            vec!["--db".as_ref(), db.as_os_str(), "export".as_ref(), dir.as_os_str()];
        args.extend(view.map(std::ffi::OsStr::new));
        ok(&args);
        let read = |p: &str| std::fs::read_to_string(dir.join(p)).unwrap();
        assert_eq!(read("deep.clj"), deep_file("deep", DEEP), "{out}");
        assert_eq!(read("deep_ns.clj"), deep_ns, "{out}");
    }
    // A form right at the limit went through analysis, resolution and checks as any other.
    assert_eq!(file_error(&db, "limit.clj").unwrap().0, "");
    assert_eq!(fqns(&db, "limit"), ["limit/mixed"]);
    assert_eq!(fqns(&db, "plain"), ["plain/p"]);
    // Layout walks it too.
    ok(&["--db".as_ref(), db.as_os_str(), "fmt".as_ref(), "limit".as_ref()]);
}

#[test]
fn a_script_nested_deep_is_refused_before_cozo_parses_it() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("plain.clj"), "(ns plain)\n").unwrap();
    let db = tmp.path().join("db");
    ok(&["--db".as_ref(), db.as_os_str(), "import".as_ref(), src.as_os_str()]);
    for levels in [2_000, 20_000, DEEP] {
        let script = format!("?[x] := x = {}1{}", "(".repeat(levels), ")".repeat(levels));
        let file = tmp.path().join("q.cozo");
        std::fs::write(&file, &script).unwrap();
        let out = formdb(&["--db".as_ref(), db.as_os_str(), "query".as_ref(), file.as_os_str()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains(&format!("the script nests brackets {levels} deep")), "{err}");
    }
    assert_eq!(query(&db, "?[x] := x = ((1))"), [json!({"x": 1})]);
}

/// A running `formdb up`, killed if a test fails.
struct Daemon {
    child: Child,
}

impl Daemon {
    fn start(dir: &Path, mnt: &Path) -> Daemon {
        let mut child = Command::new(BIN)
            .args(["--json", "up"])
            .arg(dir)
            .arg("--mount")
            .arg(mnt)
            .args(["--user", "ann"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let up: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("formdb up did not start: {e}: {line:?}"));
        assert_eq!(up["event"], "up", "{up}");
        Daemon { child }
    }

    fn assert_alive(&mut self) {
        assert_eq!(self.child.try_wait().unwrap(), None, "formdb up died");
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            // SAFETY: a plain kill(2) of our own child; SIGTERM lets it unmount.
            unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
            let deadline = Instant::now() + Duration::from_secs(20);
            while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn wait_for(what: &str, secs: u64, mut ok: impl FnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(secs);
    while !ok() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn dir_with_git(tmp: &Path) -> PathBuf {
    let dir = tmp.join("proj");
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(dir.join("src/deep.clj"), deep_file("deep", DEEP)).unwrap();
    std::fs::write(dir.join("src/plain.clj"), "(ns plain)\n\n(defn p [] (inc 1))\n").unwrap();
    git(&dir, &["init", "-q"]);
    git(&dir, &["add", "-A"]);
    git(&dir, &["commit", "-qm", "deep"]);
    dir
}

#[test]
fn the_daemon_survives_deep_files_at_start_from_sync_on_its_mount_and_from_agents() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = dir_with_git(tmp.path());
    let mnt = tmp.path().join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    let db = dir.join(".formdb");
    // The mount shows ann her alias view (`s` for `clojure.string`), and parses her saves back.
    ok(&["--db".as_ref(), db.as_os_str(), "import".as_ref(), dir.as_os_str()]);
    let alias = ["alias", "set", "ann", "s", "clojure.string"].map(std::ffi::OsStr::new);
    ok(&[&["--db".as_ref(), db.as_os_str()], &alias[..]].concat());
    let mut daemon = Daemon::start(&dir, &mnt);
    let message = format!("nesting deeper than {MAX_DEPTH} levels");
    let (line, col) = deep_place();
    assert_eq!(file_error(&db, "src/deep.clj"), Some((message.clone(), line, col)));
    assert_eq!(fqns(&db, "plain"), ["plain/p"]);

    // A deep file arriving later (a `git pull`) reaches the store through the sync.
    std::fs::write(dir.join("src/later.clj"), deep_file("later", DEEP)).unwrap();
    wait_for("the sync of later.clj", 30, || file_error(&db, "src/later.clj").is_some());
    assert_eq!(file_error(&db, "src/later.clj").unwrap().0, message);
    daemon.assert_alive();

    // A save on the mount of a file that deep is kept as a draft with the finding, as a save
    // that does not parse is: the bytes read back, nothing else changed.
    std::fs::write(mnt.join("src/saved.clj"), deep_file("saved", DEEP)).unwrap();
    let drafts = ok(&["--json".as_ref(), "--db".as_ref(), db.as_os_str(), "drafts".as_ref()]);
    let drafts: Value = serde_json::from_str(&drafts).unwrap();
    assert_eq!(
        drafts,
        json!([{"path": "src/saved.clj", "user": "ann", "error": message, "line": line, "col": col}])
    );
    assert_eq!(
        std::fs::read_to_string(mnt.join("src/saved.clj")).unwrap(),
        deep_file("saved", DEEP)
    );
    assert_eq!(file_error(&db, "src/saved.clj"), None);
    // A draft whose namespace declaration is that deep; the files read back through the mount.
    let deep_ns = format!("(ns deep-ns (:require {}x{}))\n", "[a ".repeat(DEEP), "]".repeat(DEEP));
    std::fs::write(mnt.join("src/deep_ns.clj"), &deep_ns).unwrap();
    assert_eq!(std::fs::read_to_string(mnt.join("src/deep_ns.clj")).unwrap(), deep_ns);
    assert_eq!(std::fs::read_to_string(mnt.join("src/deep.clj")).unwrap(), deep_file("deep", DEEP));
    daemon.assert_alive();

    // Agents through the stdio relay: edits that deep are refused and change nothing.
    let mut mcp = stdio_mcp::Server::start(BIN, &db);
    let rows = query(&db, "?[id] := *form{fqn: 'plain/p', id}");
    let p_id = rows[0]["id"].as_str().unwrap().to_string();
    let deep_form = format!("(defn q [] {}{})", "(f ".repeat(DEEP), ")".repeat(DEEP));
    let r = mcp.call("insert_form", json!({"ns": "plain", "source": deep_form}));
    assert!(r.is_error && r.text.contains(&message), "{}", r.text);
    let r = mcp.call("replace_form", json!({"id": p_id, "source": deep_form}));
    assert!(r.is_error && r.text.contains(&message), "{}", r.text);
    let r = mcp.call(
        "query",
        json!({"script": format!("?[x] := x = {}1{}", "(".repeat(DEEP), ")".repeat(DEEP))}),
    );
    assert!(r.is_error && r.text.contains("the script nests brackets"), "{}", r.text);
    // Diagnostics read the drafts' namespaces.
    let r = mcp.call("diagnostics", json!({}));
    assert!(!r.is_error && r.text.contains("src/deep_ns.clj"), "{}", r.text);
    // Later operations work.
    let r = mcp.call("replace_form", json!({"id": p_id, "source": "(defn p [] (inc 2))"}));
    assert!(!r.is_error, "{}", r.text);
    assert_eq!(fqns(&db, "plain"), ["plain/p"]);
    daemon.assert_alive();
}
