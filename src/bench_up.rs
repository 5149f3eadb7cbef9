//! `formdb bench up`: latencies through a running `formdb up` (a child process of this one),
//! as an agent and an editor see them: an MCP `replace_form` returning → the new text readable
//! through the mount and present in the directory; a file written in the directory →
//! `get_form` returning it. Next to the bare MCP round trip, in one run.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{json, Value};

/// The daemon; killed with SIGTERM (and reaped) on every exit path.
pub(crate) struct Daemon(pub(crate) Child);

impl Daemon {
    /// `exe --json up WORK --mount MNT --user bench`, and the line it prints once it serves.
    pub(crate) fn start(exe: &Path, work: &Path, mnt: &Path) -> Result<(Daemon, String)> {
        let mut child = Command::new(exe)
            .args(["--json", "up"])
            .arg(work)
            .arg("--mount")
            .arg(mnt)
            .args(["--user", "bench"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let mut line = String::new();
        let out = child.stdout.take().context("daemon stdout");
        let daemon = Daemon(child);
        BufReader::new(out?).read_line(&mut line)?;
        Ok((daemon, line))
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        // SAFETY: a plain kill(2) of our own child.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let _ = self.0.wait();
    }
}

fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)? {
        let e = e?;
        let name = e.file_name();
        if name == ".formdb" || name == ".git" {
            continue;
        }
        let dest = to.join(&name);
        if e.file_type()?.is_dir() {
            copy_tree(&e.path(), &dest)?;
        } else if e.file_type()?.is_file() {
            std::fs::copy(e.path(), dest)?;
        }
    }
    Ok(())
}

async fn call(c: &RunningService<RoleClient, ()>, tool: &str, args: Value) -> Result<Value> {
    let r = c
        .call_tool(
            CallToolRequestParams::new(tool.to_string())
                .with_arguments(args.as_object().cloned().unwrap_or_default()),
        )
        .await?;
    if r.is_error == Some(true) {
        bail!("{tool} refused: {:?}", r.content);
    }
    r.structured_content.context("no structured content")
}

fn wait_until(what: &str, mut ok: impl FnMut() -> bool) -> Result<Duration> {
    let start = Instant::now();
    while !ok() {
        if start.elapsed() > Duration::from_secs(10) {
            bail!("timed out waiting for {what}");
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    Ok(start.elapsed())
}

struct Series(&'static str, Vec<Duration>);

impl Series {
    fn p(&self, q: f64) -> f64 {
        let mut v = self.1.clone();
        v.sort();
        let i = ((v.len() as f64 - 1.0) * q).round() as usize;
        v.get(i).map(|d| d.as_secs_f64() * 1000.0).unwrap_or(0.0)
    }
}

pub(crate) fn run(dir: Option<PathBuf>, samples: usize, json_out: bool) -> Result<()> {
    let src =
        dir.unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/shop"));
    let tmp = tempfile::tempdir()?;
    let work = tmp.path().join("tree");
    copy_tree(&src, &work).with_context(|| format!("copying {}", src.display()))?;
    let mnt = tmp.path().join("mnt");
    std::fs::create_dir_all(&mnt)?;
    eprintln!("starting formdb up on a copy of {} ...", src.display());
    let (_daemon, line) = Daemon::start(&std::env::current_exe()?, &work, &mnt)?;
    let up: Value = serde_json::from_str(&line).context("formdb up did not start")?;
    let info: Value =
        serde_json::from_str(&fs_err::read_to_string(work.join(".formdb/server.json"))?)?;
    let (url, token) =
        (info["url"].as_str().unwrap_or_default(), info["token"].as_str().unwrap_or_default());
    if up["url"] != info["url"] {
        bail!("server.json does not match the daemon's start line");
    }

    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(async {
        let headers = HashMap::from([(
            http::HeaderName::from_static("x-formdb-user"),
            http::HeaderValue::from_static("bench"),
        )]);
        let config = StreamableHttpClientTransportConfig::with_uri(url.to_string())
            .auth_header(token.to_string())
            .custom_headers(headers);
        let c = ().serve(StreamableHttpClientTransport::from_config(config)).await?;

        // Targets: defns of the tree, each edited in turn, read beside the daemon (readers
        // share the store's lock).
        let store = formdb_engine::store::Store::open_existing(&work.join(".formdb"))?;
        let targets: Vec<(String, String, String)> =
            formdb_engine::read::forms::top_level_defns(&store)?
                .into_iter()
                .take(50)
                .map(|d| (d.id, d.fqn, d.file))
                .collect();
        drop(store);
        if targets.is_empty() {
            bail!("the tree has no defn to edit");
        }

        let mut round_trip = Series("get_form round trip (HTTP)", Vec::new());
        let mut replace = Series("replace_form round trip (HTTP)", Vec::new());
        let mut to_mount = Series("replace_form returned → mount", Vec::new());
        let mut to_dir = Series("replace_form returned → DIR", Vec::new());
        let mut from_dir = Series("DIR written → get_form", Vec::new());
        let mut missing = 0usize;
        for i in 0..samples {
            let (id, fqn, file) = &targets[i % targets.len()];
            let t = Instant::now();
            let f = call(&c, "get_form", json!({"id": id})).await?;
            round_trip.1.push(t.elapsed());
            let source = f["source"].as_str().unwrap_or_default();
            // One more keyword before the form's last bracket: a real change that still parses.
            let marker = format!(":bench-{i}");
            let cut = source.rfind(')').unwrap_or(source.len());
            let new = format!("{} {marker}{}", &source[..cut], &source[cut..]);
            let t = Instant::now();
            call(&c, "replace_form", json!({"id": id, "source": new})).await?;
            replace.1.push(t.elapsed());
            let returned = Instant::now();
            let (m, d) = (mnt.join(file), work.join(file));
            wait_until("the mount", || std::fs::read_to_string(&m).is_ok_and(|t| t.contains(&marker)))?;
            to_mount.1.push(returned.elapsed());
            wait_until("DIR", || std::fs::read_to_string(&d).is_ok_and(|t| t.contains(&marker)))?;
            to_dir.1.push(returned.elapsed());

            // The other way: an editor writes the file in DIR.
            let text = fs_err::read_to_string(&d)?;
            let back = format!(":back-{i}");
            let edited = text.replacen(&marker, &back, 1);
            fs_err::write(&d, &edited)?;
            let written = Instant::now();
            loop {
                // A refusal here means the form was missing for a moment: counted and shown.
                let seen = match call(&c, "get_form", json!({"symbol": fqn})).await {
                    Ok(f) => f["source"].to_string(),
                    Err(e) => {
                        missing += 1;
                        e.to_string()
                    }
                };
                if seen.contains(&back) {
                    break;
                }
                if written.elapsed() > Duration::from_secs(10) {
                    bail!("{fqn}: the DIR write did not reach get_form: it returns {seen}");
                }
            }
            from_dir.1.push(written.elapsed());
        }
        c.cancel().await.ok();

        let all = [&round_trip, &replace, &to_mount, &to_dir, &from_dir];
        if json_out {
            let figures: Vec<Value> = all
                .iter()
                .map(|s| json!({"figure": s.0, "p50_ms": s.p(0.5), "p99_ms": s.p(0.99), "samples": s.1.len()}))
                .collect();
            println!(
                "{}",
                json!({"tree": src.display().to_string(), "figures": figures, "missing": missing})
            );
        } else {
            println!("formdb up on {} ({samples} edits)", src.display());
            println!("{:<34} {:>9} {:>9} {:>14}", "figure", "p50 ms", "p99 ms", "p50 vs get_form");
            let base = round_trip.p(0.5).max(1e-6);
            for s in all {
                println!("{:<34} {:>9.2} {:>9.2} {:>13.1}x", s.0, s.p(0.5), s.p(0.99), s.p(0.5) / base);
            }
            println!("target: replace_form → mount and DIR, and DIR → get_form, under 200 ms p99");
            println!("get_form found no form while a DIR write was taken in: {missing} times");
        }
        Ok(())
    })
}
