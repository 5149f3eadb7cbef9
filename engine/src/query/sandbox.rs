//! Running a script a user wrote (CLI `query` and `run`, MCP `query`): checked, then evaluated
//! where it can be stopped.
//!
//! Cozo checks its `:timeout` only between the steps of an evaluation, so one rule over a huge
//! product (`a in int_range(100000000)`) runs on past it and allocates until the kernel kills
//! the process. A script is therefore evaluated in a child process (the `formdb` binary,
//! registered with [`run_scripts_in`]) that reads the store on its own; it is killed at the
//! time limit or when its resident memory passes the memory limit, and the caller's process
//! never holds its rows. Without a registered worker (a library user, an in-memory store) the
//! script runs on a thread of this process under Cozo's own timeout, and a runaway is left to
//! finish while new scripts are refused.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::Rows;
use crate::store::{Params, Result, Store, StoreError};

/// Seconds a script may run.
pub const TIME_LIMIT_S: u64 = 10;
/// Resident memory (MB) the process evaluating a script may reach.
pub const MEMORY_LIMIT_MB: u64 = 1024;
/// Rows a script may answer; past it, the script is asked to narrow (or `:limit`) itself.
pub const ROW_LIMIT: usize = 100_000;
/// Bracket nesting a script may have: Cozo's parser recurses on it (and overflowed its stack
/// at 20,000 levels); real queries nest a handful.
pub const MAX_SCRIPT_DEPTH: usize = 100;
/// Scripts evaluated at once in worker processes; more are refused, so memory stays bounded.
const MAX_WORKERS: usize = 4;

/// The fixed rules (`<~ Name(...)`) a script may apply: Cozo 0.7.6's graph algorithms and
/// pure utilities. `CsvReader` and `JsonReader` read any file or URL the process can, so they,
/// and anything a later Cozo adds, are refused.
const ALLOWED_FIXED_RULES: &[&str] = &[
    "ClusteringCoefficients",
    "DegreeCentrality",
    "ClosenessCentrality",
    "BetweennessCentrality",
    "DepthFirstSearch",
    "DFS",
    "BreadthFirstSearch",
    "BFS",
    "ShortestPathBFS",
    "ShortestPathDijkstra",
    "ShortestPathAStar",
    "KShortestPathYen",
    "MinimumSpanningTreePrim",
    "MinimumSpanningForestKruskal",
    "TopSort",
    "ConnectedComponents",
    "StronglyConnectedComponents",
    "SCC",
    "PageRank",
    "CommunityDetectionLouvain",
    "LabelPropagation",
    "RandomWalk",
    "ReorderSort",
    "Constant",
];

/// The first argument that makes the `formdb` binary a script worker ([`serve_worker`]).
pub const WORKER_ARG: &str = "__query-worker";

static WORKER: OnceLock<PathBuf> = OnceLock::new();

/// Evaluate scripts of on-disk stores in child processes of `exe`, which must call
/// [`serve_worker`] when started with [`WORKER_ARG`].
pub fn run_scripts_in(exe: PathBuf) {
    let _ = WORKER.set(exe);
}

/// Run a script a user wrote: refused if it could escape the limits or read outside the
/// store, else evaluated under them.
pub fn run_user(store: &Arc<Store>, script: &str, params: Params) -> Result<Rows> {
    let script = checked(script)?;
    run(store, script, params)
}

/// Run one of the named queries under the same limits (a user chose its parameters).
pub fn run_named(store: &Arc<Store>, name: &str, params: Params) -> Result<Rows> {
    let q = super::named(name, &params)?;
    run(store, format!("{}\n:timeout {TIME_LIMIT_S}", q.script), params)
}

fn refused(message: String) -> StoreError {
    StoreError::Refused(message)
}

fn time_limit() -> StoreError {
    refused(format!(
        "the query ran past the {TIME_LIMIT_S} s time limit and was stopped: make it narrower (bind a namespace, name or id; join relations on shared columns instead of pairing every row with every row; add `:limit`)"
    ))
}

/// The script made safe to run under the time limit, or why it cannot be.
///
/// Cozo stops a query at its `:timeout`, and of several `:timeout` options the last wins, so
/// the limit goes last and a script's own (however large) cannot raise it. Scripts whose
/// parts would not all be under that one option are refused: `{…}` chains and `%` imperative
/// scripts (each block runs on its own, a `%loop` forever), and `:sleep` (Cozo sleeps after the
/// query, past any timeout). System ops (`::`) run as they are: the read-only ones
/// `Store::query_user` lets through evaluate no rules.
pub fn checked(script: &str) -> Result<String> {
    let code = code_only(script);
    let depth = bracket_depth(&code);
    if depth > MAX_SCRIPT_DEPTH {
        return Err(refused(format!(
            "the script nests brackets {depth} deep, more than the {MAX_SCRIPT_DEPTH} a query may: split it into rules"
        )));
    }
    let start = code.trim_start();
    if start.starts_with("::") {
        return Ok(script.to_string());
    }
    if start.starts_with('{') || start.starts_with('%') {
        return Err(refused(format!(
            "send one query (rules and options), not a `{{…}}` chain or a `%` imperative script: those cannot run under the {TIME_LIMIT_S} s limit as a whole. Several rules in one query cover what chaining does"
        )));
    }
    if words_after(&code, ":sleep").next().is_some() {
        return Err(refused(format!(
            "`:sleep` is not allowed here: Cozo sleeps past the {TIME_LIMIT_S} s time limit; remove it"
        )));
    }
    for (at, rule) in
        code.match_indices("<~").map(|(at, m)| (at, fixed_rule_name(&code[at + m.len()..])))
    {
        if !ALLOWED_FIXED_RULES.contains(&rule) {
            let line = code[..at].matches('\n').count() + 1;
            return Err(refused(format!(
                "line {line}: the fixed rule `{rule}` is not allowed in a query (it reads outside the store or is unknown); allowed: {}",
                ALLOWED_FIXED_RULES.join(", ")
            )));
        }
    }
    // On its own line: a script may end in a `#` comment.
    Ok(format!("{script}\n:timeout {TIME_LIMIT_S}"))
}

/// Places where `word` stands as a whole word in `code`.
fn words_after<'c>(code: &'c str, word: &'c str) -> impl Iterator<Item = usize> + 'c {
    code.match_indices(word)
        .filter(move |(at, m)| {
            !code[at + m.len()..].starts_with(|c: char| c.is_alphanumeric() || c == '_')
        })
        .map(|(at, _)| at)
}

/// The name of the fixed rule applied after a `<~`.
fn fixed_rule_name(after: &str) -> &str {
    let name = after.trim_start();
    let end =
        name.find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.')).unwrap_or(name.len());
    &name[..end]
}

/// The deepest nesting of `(`, `[` and `{` in code (strings and comments blanked).
fn bracket_depth(code: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    for c in code.bytes() {
        match c {
            b'(' | b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// The script with its strings and comments blanked out, so options are found only in code.
/// Cozo's literals: `"…"` and `'…'` with backslash escapes, raw strings `_"…"_` (as many `_`
/// each side), `#` line comments and nesting `/* */` block comments.
fn code_only(script: &str) -> String {
    let b = script.as_bytes();
    let mut out = b.to_vec();
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for c in &mut out[from..to.min(b.len())] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    };
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'#' => {
                let end = script[i..].find('\n').map_or(b.len(), |n| i + n);
                blank(&mut out, i, end);
                i = end;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let (mut depth, mut j) = (0usize, i);
                while j < b.len() {
                    if b[j..].starts_with(b"/*") {
                        depth += 1;
                        j += 2;
                    } else if b[j..].starts_with(b"*/") {
                        depth -= 1;
                        j += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        j += 1;
                    }
                }
                blank(&mut out, i, j);
                i = j;
            }
            q @ (b'"' | b'\'') => {
                let unders = b[..i].iter().rev().take_while(|&&c| c == b'_').count();
                let mut j = i + 1;
                if q == b'"' && unders > 0 {
                    let close = format!("\"{}", "_".repeat(unders));
                    j = script[j..].find(&close).map_or(b.len(), |n| j + n + close.len());
                } else {
                    while j < b.len() && b[j] != q {
                        j += if b[j] == b'\\' { 2 } else { 1 };
                    }
                    j = (j + 1).min(b.len());
                }
                blank(&mut out, i, j);
                i = j;
            }
            _ => i += 1,
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Evaluate a checked script: in a worker process when the store is on disk and a worker is
/// registered, else on a thread here.
fn run(store: &Arc<Store>, script: String, params: Params) -> Result<Rows> {
    match (WORKER.get(), store.location()) {
        (Some(exe), Some(dir)) => run_in_worker(exe, dir, &script, &params),
        _ => run_on_thread(store.clone(), script, params),
    }
}

/// What the parent sends a worker on its stdin.
#[derive(Serialize, Deserialize)]
struct Request {
    dir: PathBuf,
    script: String,
    params: Params,
}

/// What a worker answers on its stdout.
#[derive(Serialize, Deserialize)]
enum Answer {
    Rows(Rows),
    Refused(String),
    Failed(String),
}

/// Scripts being evaluated in workers now.
static WORKERS: AtomicUsize = AtomicUsize::new(0);

struct WorkerSlot;

impl Drop for WorkerSlot {
    fn drop(&mut self) {
        WORKERS.fetch_sub(1, Ordering::SeqCst);
    }
}

fn run_in_worker(exe: &Path, dir: &Path, script: &str, params: &Params) -> Result<Rows> {
    if WORKERS.fetch_add(1, Ordering::SeqCst) >= MAX_WORKERS {
        WORKERS.fetch_sub(1, Ordering::SeqCst);
        return Err(refused(format!(
            "{MAX_WORKERS} queries are running already; retry when one has answered"
        )));
    }
    let _slot = WorkerSlot;
    let failed = |e: std::io::Error| user_failed(format!("cannot start the query: {e}"));
    let mut child = Command::new(exe)
        .arg(WORKER_ARG)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(failed)?;
    let request = serde_json::to_vec(&Request {
        dir: dir.to_path_buf(),
        script: script.to_string(),
        params: params.clone(),
    })
    .map_err(|e| user_failed(e.to_string()))?;
    let mut stdin = child.stdin.take().expect("piped");
    let writing = std::thread::spawn(move || stdin.write_all(&request));
    let mut stdout = child.stdout.take().expect("piped");
    let reading = std::thread::spawn(move || {
        let mut out = Vec::new();
        stdout.read_to_end(&mut out).map(|_| out)
    });
    let mut stderr = child.stderr.take().expect("piped");
    let reading_err = std::thread::spawn(move || {
        let mut out = String::new();
        let _ = stderr.read_to_string(&mut out);
        out
    });
    // A little past Cozo's own timeout, so a script it can stop reports its own error.
    let deadline = Instant::now() + Duration::from_secs(TIME_LIMIT_S + 1);
    let stopped = loop {
        if let Some(status) = child.try_wait().map_err(failed)? {
            break Ok(status);
        }
        if Instant::now() > deadline {
            break Err(time_limit());
        }
        if resident_mb(child.id()).is_some_and(|mb| mb > MEMORY_LIMIT_MB) {
            break Err(refused(format!(
                "the query used more than {MEMORY_LIMIT_MB} MB of memory and was stopped: make it narrower (bind a namespace, name or id; avoid large `int_range`s and rules that pair every row with every row; add `:limit`)"
            )));
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    if stopped.is_err() {
        let _ = child.kill();
        let _ = child.wait();
    }
    let _ = writing.join();
    let out = reading.join().ok().and_then(|r| r.ok()).unwrap_or_default();
    let err = reading_err.join().unwrap_or_default();
    let status = stopped?;
    match serde_json::from_slice::<Answer>(&out) {
        Ok(Answer::Rows(rows)) => Ok(rows),
        Ok(Answer::Refused(m)) => Err(StoreError::Refused(m)),
        Ok(Answer::Failed(m)) => Err(user_failed(m)),
        Err(_) => Err(user_failed(format!(
            "the query ended without an answer ({status}){}",
            err.lines().last().map(|l| format!(": {l}")).unwrap_or_default()
        ))),
    }
}

/// A process's resident memory in MB, from `/proc` (None where there is none).
fn resident_mb(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024)
}

/// The worker's side: read a request from stdin, evaluate it against the store it names, and
/// write the answer to stdout. Returns whether it answered.
pub fn serve_worker() -> bool {
    let mut input = Vec::new();
    if std::io::stdin().read_to_end(&mut input).is_err() {
        return false;
    }
    let answer = match serde_json::from_slice::<Request>(&input) {
        Err(e) => Answer::Failed(format!("a malformed request: {e}")),
        Ok(req) => match Store::open_existing(&req.dir)
            .and_then(|store| store.query_user(&req.script, req.params))
        {
            Ok(named) => match capped(Rows::from_named(named)) {
                Ok(rows) => Answer::Rows(rows),
                Err(e) => answer_of(e),
            },
            Err(e) => answer_of(e),
        },
    };
    let out = serde_json::to_vec(&answer).expect("rows of JSON values serialize");
    std::io::stdout().write_all(&out).and_then(|()| std::io::stdout().flush()).is_ok()
}

/// A user's script that failed, or could not be run.
fn user_failed(message: impl Into<String>) -> StoreError {
    StoreError::Query { script: crate::store::USER_SCRIPT.into(), message: message.into() }
}

fn answer_of(e: StoreError) -> Answer {
    match e {
        StoreError::Refused(m) => Answer::Refused(m),
        e if e.to_string().contains("killed before completion") => match time_limit() {
            StoreError::Refused(m) => Answer::Refused(m),
            _ => unreachable!("time_limit is a refusal"),
        },
        StoreError::Query { message, .. } => Answer::Failed(message),
        e => Answer::Failed(e.to_string()),
    }
}

fn capped(rows: Rows) -> Result<Rows> {
    if rows.rows.len() > ROW_LIMIT {
        return Err(refused(format!(
            "the query answers {} rows, more than the {ROW_LIMIT} a query may: narrow it or add `:limit` (and `:offset` for the next rows)",
            rows.rows.len()
        )));
    }
    Ok(rows)
}

/// Scripts run on a thread that went past the time limit and are still running: at most one.
static RUNAWAY: AtomicUsize = AtomicUsize::new(0);

/// Run a script on its own thread and answer within the time limit whatever it does. A script
/// Cozo cannot stop is left to finish on its thread while the caller gets its refusal; while it
/// runs, new scripts are refused, so runaways cannot pile up.
fn run_on_thread(store: Arc<Store>, script: String, params: Params) -> Result<Rows> {
    const RUNNING: u8 = 0;
    const DONE: u8 = 1;
    const ABANDONED: u8 = 2;
    if RUNAWAY.load(Ordering::SeqCst) > 0 {
        return Err(refused(format!(
            "an earlier query ran past the {TIME_LIMIT_S} s time limit and is still running (Cozo stops a single rule only when it ends); no new query runs until it does. Retry later, and make queries narrower: bind a namespace or name, avoid unrelated relations in one rule"
        )));
    }
    let state = Arc::new(AtomicU8::new(RUNNING));
    let (tx, rx) = std::sync::mpsc::channel();
    let st = state.clone();
    std::thread::Builder::new()
        .name("formdb-query".into())
        .spawn(move || {
            let r = store.query_user(&script, params);
            if st.swap(DONE, Ordering::SeqCst) == ABANDONED {
                RUNAWAY.fetch_sub(1, Ordering::SeqCst);
            }
            let _ = tx.send(r);
        })
        .map_err(|e| user_failed(format!("cannot start the query: {e}")))?;
    let deadline = Duration::from_secs(TIME_LIMIT_S + 2);
    let answer = match rx.recv_timeout(deadline) {
        Ok(r) => r,
        Err(RecvTimeoutError::Timeout) => {
            // Counted before it is marked, so the thread's decrement always follows.
            RUNAWAY.fetch_add(1, Ordering::SeqCst);
            if state
                .compare_exchange(RUNNING, ABANDONED, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
            {
                return Err(time_limit());
            }
            RUNAWAY.fetch_sub(1, Ordering::SeqCst);
            rx.recv().map_err(|_| user_failed("the query stopped without an answer"))?
        }
        Err(RecvTimeoutError::Disconnected) => {
            return Err(user_failed(
                "the query failed inside the database without an answer; simplify it",
            ))
        }
    };
    match answer {
        Ok(named) => capped(Rows::from_named(named)),
        Err(e) if e.to_string().contains("killed before completion") => Err(time_limit()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn brackets_in_strings_and_comments_do_not_nest() {
        let deep = format!("?[x] := x = {}1{}", "(".repeat(200), ")".repeat(200));
        let err = checked(&deep).unwrap_err().to_string();
        assert!(err.contains("nests brackets 200 deep"), "{err}");
        let quoted = format!("?[x] := x = '{}' # {}", "(".repeat(200), "[".repeat(200));
        assert!(checked(&quoted).is_ok());
    }

    #[test]
    fn only_pure_fixed_rules_are_allowed() {
        let err = checked("?[x] <~ CsvReader(url: 'file:///etc/passwd', types: ['String'])")
            .unwrap_err()
            .to_string();
        assert!(err.contains("`CsvReader` is not allowed"), "{err}");
        let err = checked("x[] <- [[1]]\n?[a] <~  JsonReader(url: 'http://x', fields: ['a'])")
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 2: the fixed rule `JsonReader`"), "{err}");
        assert!(checked("e[a, b] <- [[1, 2]]\n?[n, c] <~ ConnectedComponents(e[])").is_ok());
        // The words in a string are only text.
        assert!(checked("?[x] := x = '<~ CsvReader('").is_ok());
    }
}
