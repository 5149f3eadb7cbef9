//! User scripts run sandboxed, through the real binary: `formdb query`, `formdb run` and the
//! MCP `query` tool (stdio). A script cannot read host files through Cozo's fixed rules, and one
//! that would allocate without end (`int_range(100000000)`) is stopped within its limits: the
//! processes' peak memory stays bounded and the server answers after.

mod stdio_mcp;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use formdb_engine::query::sandbox::{MEMORY_LIMIT_MB, TIME_LIMIT_S};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_formdb");

const READ_PASSWD: &str = "?[x] <~ CsvReader(url: 'file:///etc/passwd', types: ['String'])";
const READ_JSON: &str =
    "?[x] <~ JsonReader(url: 'file:///etc/hostname', fields: ['x'], json_lines: false)";
const RUNAWAY: &str = "?[a] := a in int_range(100000000)";

/// Peak memory a process may show: the limit, and room for what runs beside the script.
const PEAK_LIMIT_KB: u64 = 2 * 1024 * 1024;

struct Project {
    _tmp: tempfile::TempDir,
    db: PathBuf,
}

fn project() -> Project {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("a.clj"), "(ns a)\n\n(defn f [] (inc 1))\n").unwrap();
    let db = tmp.path().join("db");
    let out = Command::new(BIN).arg("--db").arg(&db).arg("import").arg(&src).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    Project { _tmp: tmp, db }
}

/// `formdb query` of a script: exit code, stdout, stderr.
fn cli_query(db: &Path, script: &str) -> (Option<i32>, String, String) {
    let mut child = Command::new(BIN)
        .arg("--db")
        .arg(db)
        .args(["--json", "query", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), script.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

/// The peak resident memory (kB) of any terminated child this process waited for, and of theirs.
fn children_peak_kb() -> u64 {
    // SAFETY: getrusage fills the struct we hand it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) }, 0);
    usage.ru_maxrss as u64
}

/// A process's peak resident memory (kB), from `/proc/PID/status`.
fn peak_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn a_script_cannot_read_files_through_fixed_rules() {
    let p = project();
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap();
    let first_user = passwd.lines().next().unwrap().split(':').next().unwrap().to_string();
    for script in [READ_PASSWD, READ_JSON] {
        let (code, out, err) = cli_query(&p.db, script);
        assert_eq!(code, Some(1), "{out}{err}");
        assert!(err.contains("is not allowed in a query"), "{err}");
        assert!(!out.contains(&first_user), "{out}");
    }
    let mut mcp = stdio_mcp::Server::start(BIN, &p.db);
    for script in [READ_PASSWD, READ_JSON] {
        let r = mcp.call("query", json!({ "script": script }));
        assert!(r.is_error && r.text.contains("is not allowed in a query"), "{}", r.text);
        assert!(!r.text.contains(&format!("{first_user}:")), "{}", r.text);
    }
    // The pure graph algorithms still run.
    let r = mcp.call(
        "query",
        json!({"script": "e[a, b] <- [[1, 2], [2, 3], [7, 8]]\n?[n, c] <~ ConnectedComponents(e[])"}),
    );
    assert!(!r.is_error, "{}", r.text);
    let rows: Value = serde_json::from_str(&r.text).unwrap();
    assert_eq!(rows["rows"].as_array().unwrap().len(), 5, "{rows}");
}

#[test]
fn a_runaway_query_on_the_cli_stops_within_its_limits() {
    let p = project();
    let t = Instant::now();
    let (code, out, err) = cli_query(&p.db, RUNAWAY);
    let secs = t.elapsed().as_secs();
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(
        err.contains(&format!("more than {MEMORY_LIMIT_MB} MB of memory"))
            || err.contains(&format!("{TIME_LIMIT_S} s time limit")),
        "{err}"
    );
    assert!(secs <= TIME_LIMIT_S + 5, "stopped after {secs} s");
    // `formdb query` and the process that evaluated the script (its child) both stayed bounded.
    let peak = children_peak_kb();
    assert!(peak < PEAK_LIMIT_KB, "a process reached {peak} kB");
    // The named queries of `formdb run` go through the same sandbox.
    let out = Command::new(BIN).arg("--db").arg(&p.db).args(["--json", "run", "stats"]).output();
    let out = out.unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let answer: Value = serde_json::from_str(&cli_query(&p.db, "?[x] := x = 1").1).unwrap();
    assert_eq!(answer, json!([{"x": 1}]));
}

#[test]
fn a_runaway_query_over_mcp_stops_and_the_server_answers_after() {
    let p = project();
    let mut mcp = stdio_mcp::Server::start(BIN, &p.db);
    let t = Instant::now();
    let r = mcp.call("query", json!({ "script": RUNAWAY }));
    let secs = t.elapsed().as_secs();
    assert!(r.is_error, "{}", r.text);
    assert!(
        r.text.contains(&format!("more than {MEMORY_LIMIT_MB} MB of memory"))
            || r.text.contains(&format!("{TIME_LIMIT_S} s time limit")),
        "{}",
        r.text
    );
    assert!(secs <= TIME_LIMIT_S + 5, "answered after {secs} s");
    let peak = peak_kb(mcp.child.id());
    assert!(peak < PEAK_LIMIT_KB, "the server reached {peak} kB");
    // Nothing keeps running: the next query answers at once, and so do the other tools.
    let r = mcp.call("query", json!({"script": "?[x] := x = 1"}));
    assert!(!r.is_error, "{}", r.text);
    let r = mcp.call("query", json!({"script": "?[fqn] := *form{fqn}, fqn = 'a/f'"}));
    assert!(!r.is_error && r.text.contains("a/f"), "{}", r.text);
}
