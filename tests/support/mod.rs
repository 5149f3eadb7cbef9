//! What the end-to-end tests of the real binary share: a git working tree, a running
//! `formdb up` with its mount, MCP clients (rmcp over HTTP and through the stdio relay), and
//! writes that report what `close` returned.
#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{ConfigureCommandExt, StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use serde_json::{json, Value};

pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_formdb");

pub(crate) fn git(dir: &Path, args: &[&str]) -> String {
    let out = git_output(dir, args);
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// A git working tree holding `files` (relative path, text), committed.
pub(crate) fn repo_of(dir: &Path, files: &[(&str, &str)]) -> PathBuf {
    for (path, text) in files {
        let p = dir.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    git(dir, &["init", "-q"]);
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-qm", "start"]);
    dir.to_path_buf()
}

/// `formdb ARGS` in `cwd`; its stdout, or a failed test with its stderr.
pub(crate) fn formdb(cwd: &Path, args: &[&str]) -> String {
    let out = Command::new(BIN).args(args).current_dir(cwd).output().unwrap();
    assert!(out.status.success(), "formdb {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// `formdb --json ARGS` in `cwd`, parsed.
pub(crate) fn formdb_json(cwd: &Path, args: &[&str]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    serde_json::from_str(&formdb(cwd, &all)).expect("--json prints JSON")
}

/// Poll until `ok` holds; false if it still does not after `secs`.
pub(crate) fn poll(secs: u64, mut ok: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + Duration::from_secs(secs);
    while !ok() {
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

pub(crate) fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

/// A running `formdb up`.
pub(crate) struct Daemon {
    pub child: Child,
    /// Its stdout, kept open: the daemon reports its stop there.
    out: BufReader<std::process::ChildStdout>,
    pub url: String,
    pub token: String,
}

impl Daemon {
    pub(crate) fn start(dir: &Path, mnt: &Path, user: &str) -> Daemon {
        let mut child = Command::new(BIN)
            .args(["--json", "up"])
            .arg(dir)
            .arg("--mount")
            .arg(mnt)
            .args(["--user", user])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        out.read_line(&mut line).unwrap();
        let up: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("formdb up did not start: {e}: {line:?}"));
        assert_eq!(up["event"], "up", "{up}");
        let info: Value =
            serde_json::from_str(&read(&dir.join(".formdb/server.json"))).expect("server.json");
        Daemon {
            child,
            out,
            url: info["url"].as_str().unwrap().to_string(),
            token: info["token"].as_str().unwrap().to_string(),
        }
    }

    pub(crate) fn assert_alive(&mut self) {
        assert_eq!(self.child.try_wait().unwrap(), None, "formdb up died");
    }

    /// Reap the daemon after something killed it.
    pub(crate) fn wait(mut self) {
        self.child.wait().unwrap();
    }

    /// SIGTERM, and a clean exit that reports its stop.
    pub(crate) fn stop(mut self) {
        // SAFETY: a plain kill(2) of our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let status = self.child.wait().unwrap();
        assert!(status.success(), "formdb up exits cleanly on SIGTERM: {status}");
        let mut line = String::new();
        self.out.read_line(&mut line).unwrap();
        let down: Value = serde_json::from_str(&line).expect("a last line");
        assert_eq!((&down["event"], &down["signal"]), (&json!("down"), &json!("SIGTERM")));
    }
}

impl Drop for Daemon {
    /// A failed test must not leave a daemon (and its mount) behind: SIGTERM lets it unmount.
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            // SAFETY: a plain kill(2) of our own child.
            unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
            poll(20, || !matches!(self.child.try_wait(), Ok(None)));
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

pub(crate) type Client = RunningService<RoleClient, ()>;

pub(crate) async fn http_client(d: &Daemon, user: &str) -> Client {
    let headers = HashMap::from([(
        http::HeaderName::from_static("x-formdb-user"),
        http::HeaderValue::from_str(user).unwrap(),
    )]);
    let config = StreamableHttpClientTransportConfig::with_uri(d.url.clone())
        .auth_header(d.token.clone())
        .custom_headers(headers);
    ().serve(StreamableHttpClientTransport::from_config(config)).await.expect("MCP over HTTP")
}

pub(crate) async fn stdio_relay(dir: &Path, user: &str) -> Client {
    let cmd = tokio::process::Command::new(BIN).configure(|c| {
        c.args(["mcp", "--user", user]).current_dir(dir);
    });
    ().serve(TokioChildProcess::new(cmd).unwrap()).await.expect("formdb mcp relays")
}

/// A tool call that must succeed: its structured content.
pub(crate) async fn call(c: &Client, tool: &str, args: Value) -> Value {
    match call_result(c, tool, args).await {
        Ok(v) => v,
        Err(e) => panic!("{tool}: {e}"),
    }
}

/// A tool call: its structured content, or the error the tool or the protocol gave.
pub(crate) async fn call_result(c: &Client, tool: &str, args: Value) -> Result<Value, String> {
    let req = CallToolRequestParams::new(tool.to_string())
        .with_arguments(args.as_object().unwrap().clone());
    let r = c.call_tool(req).await.map_err(|e| e.to_string())?;
    if r.is_error == Some(true) {
        return Err(format!("{:?}", r.content));
    }
    r.structured_content.ok_or_else(|| "no structured content".to_string())
}

/// Write a whole file and close it, reporting the error `close` returns (which `std::fs::write`
/// drops): on the mount, close is where a save is committed or refused.
pub(crate) fn write_and_close(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::fd::IntoRawFd;
    let mut f = std::fs::OpenOptions::new().write(true).truncate(true).create(true).open(path)?;
    f.write_all(bytes)?;
    // SAFETY: the fd is ours (into_raw_fd) and closed exactly once.
    match unsafe { libc::close(f.into_raw_fd()) } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

pub(crate) fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[allow(unused_imports)]
pub(crate) use formdb_testkit::copy_dir;

/// `git add -A` while the daemon writes back: git lists a directory, then stats what it
/// listed, and the daemon's temporary file of an atomic write may be renamed away in between
/// (git says "unable to stat" and stops, as it does beside any editor's atomic save). Run
/// again, as a person would; any other failure fails the test.
pub(crate) fn git_add_all(dir: &Path) {
    for _ in 0..20 {
        let out = git_output(dir, &["add", "-A"]);
        if out.status.success() {
            return;
        }
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("unable to stat"), "git add -A: {err}");
    }
    panic!("git add -A kept meeting vanished files");
}

pub(crate) fn git_output(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.com",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git runs")
}

/// A git working tree holding the example project, committed.
pub(crate) fn repo(tmp: &Path) -> PathBuf {
    let dir = tmp.join("shop");
    formdb_testkit::copy_shop(&dir);
    git(&dir, &["init", "-q"]);
    git(&dir, &["add", "-A"]);
    git(&dir, &["commit", "-qm", "shop"]);
    dir
}

/// Poll until `ok` holds (or fail after `secs`).
pub(crate) fn wait_for(what: &str, secs: u64, ok: impl FnMut() -> bool) {
    assert!(poll(secs, ok), "timed out waiting for {what}");
}

/// A tool call that may fail (the daemon may be dead): `None` unless it returned success.
pub(crate) async fn try_call(c: &Client, tool: &str, args: Value) -> Option<Value> {
    let req = CallToolRequestParams::new(tool.to_string())
        .with_arguments(args.as_object().unwrap().clone());
    let r = tokio::time::timeout(Duration::from_secs(3), c.call_tool(req)).await.ok()?.ok()?;
    assert_ne!(r.is_error, Some(true), "{tool} refused: {:?}", r.content);
    r.structured_content
}

/// Every file of a tree (`.git` and `.formdb` left out): relative path → bytes.
pub(crate) fn tree(root: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut std::collections::BTreeMap<String, Vec<u8>>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name == ".git" || name == ".formdb" {
                continue;
            }
            let p = e.path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                out.insert(rel, std::fs::read(&p).unwrap_or_default());
            }
        }
    }
    let mut out = Default::default();
    walk(root, root, &mut out);
    out
}

/// The value of `(def NAME N)` in `text`.
pub(crate) fn value_of(text: &str, name: &str) -> Option<u64> {
    let at = text.find(&format!("(def {name} "))? + 6 + name.len();
    let digits: String = text[at..].chars().take_while(|c| c.is_ascii_digit()).collect();
    digits.parse().ok()
}

/// `text` with `(def NAME N)` set to `v`, if it has that form.
pub(crate) fn set_value(text: &str, name: &str, v: u64) -> Option<String> {
    let old = value_of(text, name)?;
    Some(text.replacen(&format!("(def {name} {old})"), &format!("(def {name} {v})"), 1))
}
