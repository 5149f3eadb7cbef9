//! History from git in the CLI: `import --history`, `blame`, and `bench history`.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use formdb_engine::history::{self, HistoryOptions, HistorySummary};
use formdb_engine::import::Progress;
use formdb_engine::query;
use formdb_engine::store::Store;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{json, Map, Value};

/// The `import` flags of history.
#[derive(clap::Args)]
pub(crate) struct ImportArgs {
    /// Walk the first-parent git history of the tree's repository first: every form gets a
    /// version per commit that changed it (a re-run walks only new commits).
    #[arg(long)]
    pub history: bool,
    /// Start after this revision.
    #[arg(long, requires = "history", value_name = "REV")]
    since: Option<String>,
    /// Walk at most this many commits (the newest).
    #[arg(long, requires = "history", value_name = "N")]
    max_commits: Option<usize>,
}

impl ImportArgs {
    pub(crate) fn options(&self, author: String) -> HistoryOptions {
        HistoryOptions { since: self.since.clone(), max_commits: self.max_commits, author }
    }
}

/// `formdb up --history` on first start: the walk into the daemon's new store, with its
/// progress and summary (on stderr: `up` keeps stdout for its own events).
pub(crate) fn import_into(store: &Store, dir: &Path, author: &str, json_out: bool) -> Result<()> {
    history::check_repo(dir)?;
    let opts = HistoryOptions { since: None, max_commits: None, author: author.to_string() };
    let bar = CommitBar::new(!json_out && std::io::stderr().is_terminal());
    let s = history::import_history(store, dir, &opts, &bar)?;
    if !json_out {
        eprintln!(
            "imported the git history of {}: {} commits, {} versions",
            dir.display(),
            s.commits,
            s.versions
        );
    }
    Ok(())
}

/// `formdb import --history`: walk the git history into the store, then import the tree.
pub(crate) fn import(dir: &Path, db: &Path, opts: &HistoryOptions, json_out: bool) -> Result<()> {
    // A tree outside git is refused before a store is made for it.
    history::check_repo(dir)?;
    let store = &Store::open(db)?;
    let bar = CommitBar::new(!json_out && std::io::stderr().is_terminal());
    let s = history::import_history(store, dir, opts, &bar)?;
    if json_out {
        println!("{}", serde_json::to_string_pretty(&s)?);
        return Ok(());
    }
    print_summary(&s);
    println!("store: {}", db.display());
    Ok(())
}

fn print_summary(s: &HistorySummary) {
    let rate = if s.walk_secs > 0.0 { s.commits as f64 / s.walk_secs } else { 0.0 };
    println!(
        "history: {} commits walked ({} changed Clojure files, {} merges followed by their first parent) in {:.1} s, {:.0} commits/s",
        s.commits, s.commits_applied, s.merges, s.walk_secs, rate
    );
    println!(
        "forms: {} versions recorded ({} added, {} changed, {} removed)",
        s.versions, s.forms.added, s.forms.changed, s.forms.removed
    );
    if !s.errors.is_empty() {
        println!(
            "{} file version(s) did not parse and are kept as raw text for their commit:",
            s.errors.len()
        );
        for e in &s.errors {
            println!("  {} {}", short(&e.commit), e.error);
        }
    }
    for (what, list) in [("submodule", &s.submodules), ("binary file", &s.binaries)] {
        if !list.is_empty() {
            println!("{} {what} entr(ies) skipped:", list.len());
            for (path, commit) in list {
                println!("  {} {path}", short(commit));
            }
        }
    }
    let i = &s.import;
    println!(
        "working tree: {} files added, {} changed, {} removed, {} unchanged; {} form versions",
        i.files_added, i.files_changed, i.files_removed, i.files_unchanged, i.forms.versions
    );
    println!("head: {}", s.head);
}

/// `formdb blame KEY`: who last changed a form, and when.
pub(crate) fn blame(store: &Store, key: &str, json_out: bool) -> Result<()> {
    let rows = query::history(store, key)?;
    let Some(last) = rows.rows.last() else {
        bail!("no history for `{key}`: no form has that id or var name");
    };
    let out = blame_row(last, rows.rows.len());
    if json_out {
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    let commit = s(&out, "commit");
    let what = if commit.is_empty() {
        s(&out, "op")
    } else {
        format!("{} {}", short(&commit), s(&out, "summary"))
    };
    println!(
        "{}  {}  {}  v{} of {}  {}",
        s(&out, "id"),
        s(&out, "author"),
        s(&out, "date"),
        s(&out, "v"),
        s(&out, "versions"),
        what
    );
    Ok(())
}

fn blame_row(r: &Map<String, Value>, versions: usize) -> Map<String, Value> {
    let at = r.get("at").and_then(Value::as_f64).unwrap_or(0.0);
    let mut out = Map::new();
    for k in ["id", "v", "at", "author", "op", "commit", "summary", "file", "ns", "name"] {
        out.insert(k.into(), r.get(k).cloned().unwrap_or(Value::Null));
    }
    out.insert("date".into(), utc_date(at).into());
    out.insert("versions".into(), versions.into());
    out
}

fn s(r: &Map<String, Value>, k: &str) -> String {
    match r.get(k) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(v) => v.to_string(),
    }
}

fn short(sha: &str) -> &str {
    &sha[..sha.len().min(10)]
}

/// `YYYY-MM-DD HH:MM:SS UTC` of seconds since the epoch (Howard Hinnant's civil-from-days).
fn utc_date(at: f64) -> String {
    let secs = at.floor() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC", rem / 3600, rem / 60 % 60, rem % 60)
}

/// The walk's progress on a terminal: commits with their rate and the time left; the final
/// import's phases as plain bars.
struct CommitBar {
    enabled: bool,
    files: crate::progress::Bar,
    bar: std::sync::Mutex<Option<ProgressBar>>,
}

impl CommitBar {
    fn new(enabled: bool) -> CommitBar {
        CommitBar {
            enabled,
            files: crate::progress::Bar::new(enabled),
            bar: std::sync::Mutex::new(None),
        }
    }
}

impl Progress for CommitBar {
    fn start(&self, phase: &str, total: u64) {
        if phase != "commits" {
            return self.files.start(phase, total);
        }
        if !self.enabled {
            return;
        }
        let bar = ProgressBar::new(total);
        bar.set_style(
            ProgressStyle::with_template("   commits [{bar:40}] {pos}/{len}  {per_sec}  ETA {eta}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        if let Ok(mut b) = self.bar.lock() {
            *b = Some(bar);
        }
    }

    fn inc(&self, n: u64) {
        match self.bar.lock().ok().and_then(|b| b.clone()) {
            Some(b) => b.inc(n),
            None => self.files.inc(n),
        }
    }

    fn finish(&self) {
        match self.bar.lock().ok().and_then(|mut b| b.take()) {
            Some(b) => b.finish_and_clear(),
            None => self.files.finish(),
        }
    }
}

/// `formdb bench history`.
#[derive(clap::Args)]
pub(crate) struct BenchArgs {
    /// A git repository to walk (default: a synthetic history built from $FORMDB_CORPUS).
    #[arg(long)]
    repo: Option<PathBuf>,
    /// Commits of the synthetic history.
    #[arg(long, default_value_t = 2800)]
    commits: usize,
    /// Files of the synthetic history.
    #[arg(long, default_value_t = 500)]
    files: usize,
    /// Walk at most this many commits (the newest).
    #[arg(long)]
    max_commits: Option<usize>,
    /// Build the synthetic history in this (new) directory and keep it.
    #[arg(long, value_name = "DIR")]
    keep_repo: Option<PathBuf>,
}

/// Walk a repository's history into a scratch store in a child `formdb` (so its peak RSS is
/// its own), and report commits per second, the walk's time and the peak RSS.
pub(crate) fn bench(args: BenchArgs, json_out: bool) -> Result<()> {
    let scratch = tempfile::tempdir()?;
    let repo = match args.repo {
        Some(r) => r.canonicalize().with_context(|| r.display().to_string())?,
        None => {
            let corpus = std::env::var_os("FORMDB_CORPUS")
                .map(PathBuf::from)
                .context("set FORMDB_CORPUS to a tree of Clojure sources, or pass --repo")?;
            let repo = args.keep_repo.unwrap_or_else(|| scratch.path().join("repo"));
            let t = Instant::now();
            synthetic_history(&corpus, &repo, args.files, args.commits)?;
            eprintln!(
                "built a synthetic history of {} commits in {:.1} s",
                args.commits,
                t.elapsed().as_secs_f64()
            );
            repo
        }
    };
    let db = scratch.path().join("store");
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.args(["--json", "--db"]).arg(&db).args(["import", "--history"]);
    if let Some(n) = args.max_commits {
        cmd.args(["--max-commits", &n.to_string()]);
    }
    let t = Instant::now();
    let out = cmd.arg(&repo).stderr(Stdio::inherit()).output()?;
    let wall = t.elapsed().as_secs_f64();
    if !out.status.success() {
        bail!("formdb import --history failed");
    }
    let (rss_mb, cpu_secs) = children_usage();
    let s: Value = serde_json::from_slice(&out.stdout)?;
    let commits = s["commits"].as_f64().unwrap_or(0.0);
    let walk = s["walk_secs"].as_f64().unwrap_or(0.0);
    let figures = json!({
        "repo": repo.display().to_string(),
        "commits": commits,
        "commits_applied": s["commits_applied"],
        "versions": s["versions"],
        "walk_secs": walk,
        "commits_per_sec": if walk > 0.0 { commits / walk } else { 0.0 },
        "total_secs": wall,
        "cpu_secs": cpu_secs,
        "peak_rss_mb": rss_mb,
        "target": "2,800 commits of a 500-file repository in under 60 s, under 500 MB RSS",
    });
    if json_out {
        println!("{}", serde_json::to_string_pretty(&figures)?);
    } else {
        println!("history of {}", repo.display());
        println!(
            "  {} commits ({} changed Clojure files), {} versions",
            commits, s["commits_applied"], s["versions"]
        );
        println!(
            "  walk {walk:.1} s ({:.0} commits/s); with the final import {wall:.1} s ({cpu_secs:.1} s of CPU); peak RSS {rss_mb:.0} MB",
            figures["commits_per_sec"].as_f64().unwrap_or(0.0)
        );
        println!(
            "  target: 2,800 commits of a 500-file repository in under 60 s, under 500 MB RSS"
        );
    }
    Ok(())
}

/// The waited-for children's peak RSS in MB and CPU seconds (user + system): on a shared
/// machine the CPU time says more than the wall time.
fn children_usage() -> (f64, f64) {
    // SAFETY: getrusage fills the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (usage.ru_maxrss as f64 / 1024.0, secs(usage.ru_utime) + secs(usage.ru_stime))
}

/// A history of `commits` commits over `files` corpus files, written with `git fast-import`:
/// the files arrive a few per commit, then each commit edits one to three of them (a function
/// added, changed or removed), and now and then a file is renamed.
fn synthetic_history(corpus: &Path, repo: &Path, files: usize, commits: usize) -> Result<()> {
    let mut sources: Vec<(String, String)> = Vec::new();
    for (rel, abs) in formdb_engine::import::walk(corpus)? {
        if sources.len() >= files {
            break;
        }
        if !rel.ends_with(".clj") {
            continue;
        }
        if let Ok(text) = std::fs::read_to_string(&abs) {
            if text.len() < 200_000 {
                sources.push((rel, text));
            }
        }
    }
    if sources.is_empty() {
        bail!("{}: no Clojure files", corpus.display());
    }
    std::fs::create_dir_all(repo)?;
    let git = |args: &[&str]| -> Result<()> {
        let ok = Command::new("git").arg("-C").arg(repo).args(args).status()?.success();
        if !ok {
            bail!("git {} failed", args.join(" "));
        }
        Ok(())
    };
    git(&["init", "-q", "-b", "main"])?;
    let mut child = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["fast-import", "--quiet"])
        .stdin(Stdio::piped())
        .spawn()?;
    let mut w = std::io::BufWriter::new(child.stdin.take().context("fast-import stdin")?);
    let adding = sources.len().div_ceil(5).min(commits / 2).max(1);
    let per_add = sources.len().div_ceil(adding);
    let mut paths: Vec<String> = sources.iter().map(|(p, _)| p.clone()).collect();
    let mut extra: Vec<Vec<usize>> = vec![Vec::new(); sources.len()];
    let mut rng = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let text_of = |i: usize, extra: &[usize]| {
        let mut t = sources[i].1.clone();
        for k in extra {
            t.push_str(&format!("\n(defn bench-fn-{k}\n  [x]\n  (+ x {k}))\n"));
        }
        t
    };
    for c in 0..commits {
        let mut ops: Vec<String> = Vec::new();
        if c < adding {
            for i in (c * per_add)..((c + 1) * per_add).min(sources.len()) {
                ops.push(modify(&paths[i], &text_of(i, &extra[i])));
            }
        } else {
            let n = 1 + (next() % 3) as usize;
            for _ in 0..n {
                let i = (next() % sources.len() as u64) as usize;
                match next() % 10 {
                    0 if !extra[i].is_empty() => {
                        extra[i].pop();
                    }
                    1 => {
                        let old = paths[i].clone();
                        let new = old.replacen(".clj", "_r.clj", 1);
                        ops.push(format!("R {old} {new}\n"));
                        paths[i] = new;
                        continue;
                    }
                    2 if !extra[i].is_empty() => {
                        let last = extra[i].len() - 1;
                        extra[i][last] += 1_000_000;
                    }
                    _ => extra[i].push(c),
                }
                ops.push(modify(&paths[i], &text_of(i, &extra[i])));
            }
        }
        let msg = format!("commit {c}");
        write!(
            w,
            "commit refs/heads/main\ncommitter Bench <bench@example.com> {} +0000\ndata {}\n{msg}\n",
            1_600_000_000 + c * 60,
            msg.len() + 1
        )?;
        for op in ops {
            w.write_all(op.as_bytes())?;
        }
        writeln!(w)?;
    }
    w.flush()?;
    drop(w);
    if !child.wait()?.success() {
        bail!("git fast-import failed");
    }
    git(&["checkout", "-q", "-f", "main"])?;
    Ok(())
}

fn modify(path: &str, text: &str) -> String {
    format!("M 100644 inline {path}\ndata {}\n{text}\n", text.len())
}
