//! `formdb bench scale`: every figure of the monorepo-scale issue on a synthetic monorepo built
//! from the corpus (`scripts/monorepo.sh`), each next to its baseline and target, in one run.
//!
//! Imports run as `formdb import` child processes, so their wall time and peak RSS are the
//! command's own (`wait4`'s `ru_maxrss`); the mount and the edits run on the imported store.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use formdb_engine::import;
use formdb_engine::store::Store;
use formdb_engine::syntax::{self, Lang};
use formdb_mcp::tools::{self, ReplaceArgs};
use serde_json::{json, Value};

use crate::bench_mount::{tool_pass, Bindfs};

#[derive(clap::Args)]
pub(crate) struct ScaleArgs {
    /// Copies of every non-`clojure` corpus library in the largest monorepo (17: 1.0 M lines);
    /// the RSS series also imports a quarter and a half of that.
    #[arg(long, default_value_t = 17)]
    copies: usize,
    /// The corpus (default: $FORMDB_CORPUS, else target/corpus).
    #[arg(long)]
    corpus: Option<PathBuf>,
    /// `replace_form` calls timed on the monorepo store.
    #[arg(long, default_value_t = 300)]
    edits: usize,
    /// Edits through `formdb up` before its RSS is compared with the RSS after 100 (0: skip).
    #[arg(long, default_value_t = 10_000)]
    up_edits: usize,
    /// Only time `replace_form` on this imported store (the store's directory, as `--db` names
    /// it; its forms are edited), and `formdb up` RSS if `--up-edits` is over 100.
    #[arg(long)]
    store: Option<PathBuf>,
}

/// A figure: name, measured, baseline (if any) and the target in words.
struct Row {
    name: String,
    value: f64,
    unit: &'static str,
    baseline: Option<(String, f64)>,
    target: &'static str,
}

impl Row {
    fn new(name: impl Into<String>, value: f64, unit: &'static str, target: &'static str) -> Row {
        Row { name: name.into(), value, unit, baseline: None, target }
    }
    fn against(mut self, name: impl Into<String>, value: f64) -> Row {
        self.baseline = Some((name.into(), value));
        self
    }
    fn ratio(&self) -> Option<f64> {
        self.baseline.as_ref().map(|(_, b)| self.value / b.max(1e-9))
    }
}

/// Keep a figure, and show it at once on stderr (a long run shows what it measured so far).
fn push(rows: &mut Vec<Row>, row: Row) {
    eprintln!("  {}: {:.2} {}", row.name, row.value, row.unit);
    rows.push(row);
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// Run a child to its end: its wall time and peak RSS in MB (`wait4`), failing on a non-zero exit.
fn run_measured(cmd: &mut Command) -> Result<(Duration, f64)> {
    let start = Instant::now();
    let child = cmd.stdout(Stdio::null()).stderr(Stdio::piped()).spawn()?;
    let pid = child.id() as libc::pid_t;
    let mut stderr = child.stderr.context("child stderr")?;
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut s);
        s
    });
    let mut status = 0;
    // SAFETY: wait4 on our own child, with a zeroed rusage to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let took = start.elapsed();
    let err = reader.join().unwrap_or_default();
    if rc != pid || !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        bail!("{cmd:?} failed: {err}");
    }
    Ok((took, usage.ru_maxrss as f64 / 1024.0))
}

/// Bytes of every file under `dir`.
fn tree_bytes(dir: &Path) -> u64 {
    walkdir(dir).iter().filter_map(|p| std::fs::metadata(p).ok()).map(|m| m.len()).sum()
}

fn walkdir(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            match e.file_type() {
                Ok(t) if t.is_dir() => todo.push(e.path()),
                Ok(t) if t.is_file() => out.push(e.path()),
                _ => {}
            }
        }
    }
    out
}

/// Clojure files of a tree, their lines and bytes.
fn clojure_files(dir: &Path) -> Result<(Vec<PathBuf>, usize, u64)> {
    let files: Vec<PathBuf> = import::walk(dir)?
        .into_iter()
        .filter(|(rel, _)| Lang::from_path(rel).is_some())
        .map(|(_, abs)| abs)
        .collect();
    let (mut lines, mut bytes) = (0, 0);
    for f in &files {
        let b = fs_err::read(f)?;
        lines += b.iter().filter(|c| **c == b'\n').count();
        bytes += b.len() as u64;
    }
    Ok((files, lines, bytes))
}

/// Single-thread tree-sitter parse of the files, read from disk: the import's baseline.
fn parse_alone(files: &[PathBuf]) -> Result<Duration> {
    let t = Instant::now();
    let mut nodes = 0usize;
    for p in files {
        let text = String::from_utf8_lossy(&fs_err::read(p)?).into_owned();
        nodes += syntax::parse(&text).root_node().child_count();
    }
    std::hint::black_box(nodes);
    Ok(t.elapsed())
}

fn monorepo(copies: usize, corpus: &Path, out: &Path) -> Result<()> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/monorepo.sh");
    let st = Command::new(&script).arg(copies.to_string()).arg(out).arg(corpus).status()?;
    if !st.success() {
        bail!("{} {copies} {} failed", script.display(), out.display());
    }
    Ok(())
}

/// Runs of the corpus import and of its parse, for their medians.
const CORPUS_RUNS: usize = 5;

fn import_child(exe: &Path, db: &Path, dir: &Path) -> Result<(Duration, f64)> {
    run_measured(Command::new(exe).arg("--db").arg(db).arg("import").arg(dir))
}

/// A cold pass reading every file under `root` (fresh mount), then its time.
fn read_all(root: &Path, paths: &[String]) -> Result<(Duration, usize)> {
    let t = Instant::now();
    let mut n = 0;
    for p in paths {
        n += fs_err::read(root.join(p))?.len();
    }
    Ok((t.elapsed(), n))
}

pub(crate) fn run(args: ScaleArgs, json_out: bool) -> Result<()> {
    let exe = std::env::current_exe()?;
    let corpus = args
        .corpus
        .or_else(|| std::env::var_os("FORMDB_CORPUS").map(PathBuf::from))
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/corpus"));
    let corpus = corpus.canonicalize().with_context(|| format!("corpus {}", corpus.display()))?;
    let tmp = tempfile::tempdir()?;
    let mut rows: Vec<Row> = Vec::new();
    if let Some(db) = &args.store {
        replace_form_figures(&mut rows, Arc::new(Store::open_existing(db)?), args.edits)?;
        up_figure(&mut rows, &exe, &corpus, tmp.path(), args.up_edits)?;
        return print_rows(&rows, args.copies, json_out);
    }

    // The corpus itself: import against single-thread parsing, the median of runs taken in
    // turn (each import into a new store), as one run of a second swung by a fifth.
    let (corpus_files, _, _) = clojure_files(&corpus)?;
    let (mut parses, mut imports) = (Vec::new(), Vec::new());
    for run in 0..CORPUS_RUNS {
        parses.push(parse_alone(&corpus_files)?);
        imports
            .push(import_child(&exe, &tmp.path().join(format!("corpus-store{run}")), &corpus)?.0);
    }
    let (parse, took) = (crate::bench::median(parses), crate::bench::median(imports));
    push(
        &mut rows,
        Row::new("import of the corpus", secs(took), "s", "<= 2x parse")
            .against("tree-sitter parse, 1 thread", secs(parse)),
    );

    // Peak RSS at a quarter, a half and all of the monorepo; the last is measured on.
    let sizes = [(args.copies / 4).max(1), (args.copies / 2).max(1), args.copies.max(1)];
    let mut last = None;
    for (i, copies) in sizes.iter().enumerate() {
        let tree = tmp.path().join(format!("mono{copies}"));
        eprintln!("building a monorepo of {copies} copies ...");
        monorepo(*copies, &corpus, &tree)?;
        let (files, lines, bytes) = clojure_files(&tree)?;
        let db = tmp.path().join(format!("store{copies}"));
        eprintln!("importing {} files, {lines} lines ...", files.len());
        let (took, rss) = import_child(&exe, &db, &tree)?;
        push(
            &mut rows,
            Row::new(
                format!("import peak RSS, {:.2} M lines", lines as f64 / 1e6),
                rss,
                "MB",
                "< 500 MB, flat",
            ),
        );
        if i + 1 == sizes.len() {
            let parse = parse_alone(&files)?;
            push(
                &mut rows,
                Row::new(
                    format!("import, {} files, {:.2} M lines", files.len(), lines as f64 / 1e6),
                    secs(took),
                    "s",
                    "< 10 s",
                )
                .against("tree-sitter parse, 1 thread", secs(parse)),
            );
            last = Some((tree, db, bytes));
        } else {
            fs_err::remove_dir_all(&tree)?;
            fs_err::remove_dir_all(&db)?;
        }
    }
    let (tree, db, source_bytes) = last.expect("at least one size");
    let all_source = tree_bytes(&tree);
    let stored = tree_bytes(&db);
    push(
        &mut rows,
        Row::new("store on disk", stored as f64 / 1e6, "MB", "<= 4x source")
            .against("source bytes", all_source as f64 / 1e6),
    );
    let _ = source_bytes;
    let (again, _) = import_child(&exe, &db, &tree)?;
    push(&mut rows, Row::new("re-import, unchanged", secs(again), "s", "< 1 s"));
    let (search, _) =
        run_measured(Command::new(&exe).arg("--db").arg(&db).args(["search", "reduce"]))?;
    push(&mut rows, Row::new("first search after import", secs(search), "s", "< 2 s"));

    // The mount against bindfs on the same tree, each freshly mounted (cold).
    let store = Arc::new(Store::open(&db)?);
    let paths = formdb_engine::query::paths(&store)?;
    let bind_at = tmp.path().join("bindfs");
    let mount_at = tmp.path().join("mnt");
    fs_err::create_dir(&bind_at)?;
    fs_err::create_dir(&mount_at)?;
    if Command::new("bindfs").arg(&tree).arg(&bind_at).status().map(|s| s.success()).ok()
        != Some(true)
    {
        bail!("bindfs is needed for the mount's baseline: apt-get install bindfs");
    }
    let bindfs = Bindfs(bind_at.clone());
    let mounted = formdb_fuse::spawn(store.clone(), &mount_at, &formdb_fuse::Options::default())?;
    let (find_b, nb) = tool_pass(&["find"], &bind_at)?;
    let (find_m, nm) = tool_pass(&["find"], &mount_at)?;
    if nb + 1 < nm {
        eprintln!("find lists {nm} entries through the mount, {nb} through bindfs");
    }
    let (read_b, bytes_b) = read_all(&bind_at, &paths)?;
    let (read_m, bytes_m) = read_all(&mount_at, &paths)?;
    if bytes_b != bytes_m {
        bail!("the mount reads {bytes_m} bytes, bindfs {bytes_b}");
    }
    // Warm: the median of 5 runs on each side after a first one, interleaved.
    let ([grep_d, grep_b, grep_m], _) = crate::bench_mount::median_passes(
        &["grep", "-r", "defn"],
        [&tree, &bind_at, &mount_at],
        5,
    )?;
    push(
        &mut rows,
        Row::new("find MNT, cold", secs(find_m), "s", "<= 1.5x bindfs")
            .against("find through bindfs", secs(find_b)),
    );
    push(
        &mut rows,
        Row::new("read of every file, cold", secs(read_m), "s", "<= 2x bindfs")
            .against("read through bindfs", secs(read_b)),
    );
    push(
        &mut rows,
        Row::new("grep -r defn MNT, warm", secs(grep_m), "s", "<= 3x disk")
            .against("grep -r on disk", secs(grep_d)),
    );
    push(
        &mut rows,
        Row::new("grep -r defn through bindfs", secs(grep_b), "s", "(baseline)")
            .against("grep -r on disk", secs(grep_d)),
    );
    drop(mounted);
    drop(bindfs);

    replace_form_figures(&mut rows, store, args.edits)?;

    up_figure(&mut rows, &exe, &corpus, tmp.path(), args.up_edits)?;
    print_rows(&rows, args.copies, json_out)
}

/// `formdb up` RSS after `up_edits` edits against after 100 (none for 100 or fewer).
fn up_figure(
    rows: &mut Vec<Row>,
    exe: &Path,
    corpus: &Path,
    tmp: &Path,
    up_edits: usize,
) -> Result<()> {
    if up_edits > 100 {
        let (after_100, after_n) = up_rss(exe, corpus, tmp, up_edits)?;
        push(
            rows,
            Row::new(format!("formdb up RSS after {up_edits} edits"), after_n, "MB", "<= 1.2x")
                .against("after 100 edits", after_100),
        );
    }
    Ok(())
}

fn print_rows(rows: &[Row], copies: usize, json_out: bool) -> Result<()> {
    if json_out {
        let out: Vec<Value> = rows
            .iter()
            .map(|r| {
                json!({"figure": r.name, "value": r.value, "unit": r.unit, "target": r.target,
                       "baseline": r.baseline.as_ref().map(|(n, v)| json!({"name": n, "value": v})),
                       "ratio": r.ratio()})
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&json!({ "copies": copies, "figures": out }))?);
        return Ok(());
    }
    println!(
        "{:<44} {:>10}  {:<30} {:>10} {:>8}  target",
        "figure", "value", "baseline", "", "ratio"
    );
    for r in rows {
        let (bn, bv) = match &r.baseline {
            Some((n, v)) => (n.as_str(), format!("{v:.2}")),
            None => ("", String::new()),
        };
        let ratio = r.ratio().map(|x| format!("{x:.2}x")).unwrap_or_default();
        println!(
            "{:<44} {:>7.2} {:<2}  {:<30} {:>10} {:>8}  {}",
            r.name, r.value, r.unit, bn, bv, ratio, r.target
        );
    }
    Ok(())
}

/// `replace_form` timed on `store`, in process, on `edits` defns spread over the store: its p50
/// and p99 (none for no edits).
fn replace_form_figures(rows: &mut Vec<Row>, store: Arc<Store>, edits: usize) -> Result<()> {
    if edits == 0 {
        return Ok(());
    }
    let session = formdb_mcp::session(
        store.clone(),
        &formdb_mcp::ServeOptions { user: "bench".into(), read_only: false, repl: None },
    )?;
    let targets = formdb_engine::read::forms::top_level_defns(&store)?;
    if targets.is_empty() {
        bail!("the monorepo has no defn to edit");
    }
    let step = (targets.len() / edits.max(1)).max(1);
    let mut times = Vec::new();
    let mut refused = 0;
    for (i, r) in targets.iter().step_by(step).take(edits).enumerate() {
        let (id, source) = (r.id.clone(), &r.source);
        let cut = source.rfind(')').unwrap_or(source.len());
        let new = format!("{} :bench-{i}{}", &source[..cut], &source[cut..]);
        let t = Instant::now();
        let args = ReplaceArgs {
            id: id.clone(),
            source: new,
            expected_hash: None,
            repair: false,
            full_diagnostics: false,
            eval: false,
            test: false,
        };
        // A form whose last bracket is inside a string or comment: the edit is refused.
        match tools::replace_form(&session, args) {
            Ok(_) => times.push(t.elapsed().as_secs_f64() * 1000.0),
            Err(_) => refused += 1,
        }
    }
    if times.is_empty() {
        bail!("every replace_form was refused");
    }
    if refused > 0 {
        eprintln!("replace_form: {refused} edits refused (not counted)");
    }
    times.sort_by(f64::total_cmp);
    let pct = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
    push(rows, Row::new("replace_form p50, monorepo store", pct(0.5), "ms", "< 5 ms"));
    push(rows, Row::new("replace_form p99, monorepo store", pct(0.99), "ms", "< 20 ms"));
    Ok(())
}

/// How long `up_rss` waits before reading the daemon's RSS: longer than its trim period.
const SETTLE: Duration = Duration::from_secs(3);

/// `formdb up` on a copy of the corpus, edited through MCP over HTTP: its RSS (MB) after 100
/// edits and after `edits`, each read once it has settled.
fn up_rss(exe: &Path, corpus: &Path, tmp: &Path, edits: usize) -> Result<(f64, f64)> {
    let work = tmp.join("up-tree");
    let st = Command::new("cp").arg("-r").arg(corpus).arg(&work).status()?;
    if !st.success() {
        bail!("copying {} failed", corpus.display());
    }
    let mnt = tmp.join("up-mnt");
    fs_err::create_dir_all(&mnt)?;
    eprintln!("formdb up: {edits} edits ...");
    let (daemon, _) = crate::bench_up::Daemon::start(exe, &work, &mnt)?;
    let pid = daemon.0.id();
    let info: Value =
        serde_json::from_str(&fs_err::read_to_string(work.join(".formdb/server.json"))?)?;
    let (url, token) = (
        info["url"].as_str().unwrap_or_default().to_string(),
        info["token"].as_str().unwrap_or_default().to_string(),
    );
    // Read once the daemon has given back what the last edit freed (its trim thread runs every
    // 2 s, `allocator::trim_while_running`): both readings are of what it holds, not of what
    // one edit had in flight, which made the ratio swing by 0.3 between runs.
    let settled_rss = || -> f64 {
        std::thread::sleep(SETTLE);
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("VmRSS:"))
                    .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
            })
            .map_or(0.0, |kb| kb / 1024.0)
    };
    use rmcp::model::CallToolRequestParams;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::ServiceExt;
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(async {
        let headers = HashMap::from([(
            http::HeaderName::from_static("x-formdb-user"),
            http::HeaderValue::from_static("bench"),
        )]);
        let config = StreamableHttpClientTransportConfig::with_uri(url)
            .auth_header(token)
            .custom_headers(headers);
        let c = ().serve(StreamableHttpClientTransport::from_config(config)).await?;
        let call = |tool: &'static str, args: Value| {
            let c = &c;
            async move {
                let r = c
                    .call_tool(
                        CallToolRequestParams::new(tool)
                            .with_arguments(args.as_object().cloned().unwrap_or_default()),
                    )
                    .await?;
                if r.is_error == Some(true) {
                    bail!("{tool} refused: {:?}", r.content);
                }
                r.structured_content.context("no structured content")
            }
        };
        // The defns to edit, read beside the daemon (readers share the store's lock).
        let store = Store::open_existing(&work.join(".formdb"))?;
        let ids: Vec<String> = formdb_engine::read::forms::top_level_defns(&store)?
            .into_iter()
            .take(200)
            .map(|d| d.id)
            .collect();
        drop(store);
        if ids.is_empty() {
            bail!("the corpus has no defn to edit");
        }
        let mut after_100 = 0.0;
        // Each form alternates between its first text and that text with one keyword more:
        // the edits change forms, the files keep their size.
        let mut first: HashMap<String, String> = HashMap::new();
        let start = Instant::now();
        for i in 0..edits {
            let id = &ids[i % ids.len()];
            if !first.contains_key(id) {
                let f = call("get_form", json!({"id": id})).await?;
                first.insert(id.clone(), f["source"].as_str().unwrap_or_default().to_string());
            }
            let base = &first[id];
            let cut = base.rfind(')').unwrap_or(base.len());
            let new = if (i / ids.len()).is_multiple_of(2) {
                format!("{} :bench{}", &base[..cut], &base[cut..])
            } else {
                base.clone()
            };
            // A refused edit (a last bracket inside a string) changes nothing; the next goes on.
            let _ = call("replace_form", json!({"id": id, "source": new})).await;
            if i + 1 == 100 {
                after_100 = settled_rss();
            }
        }
        let rss_after = settled_rss();
        let took = start.elapsed();
        eprintln!(
            "formdb up: {edits} edits in {:.1} s ({:.1} ms each, first reads included)",
            took.as_secs_f64(),
            took.as_secs_f64() * 1e3 / edits as f64
        );
        c.cancel().await.ok();
        Ok((after_100, rss_after))
    })
}
