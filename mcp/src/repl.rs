//! The REPL tools: `eval`, `load`, `run_tests` and `repl_log`, and what `eval: true` /
//! `test: true` add to an edit's answer. Each is a call into `formdb-repl`'s loop on this
//! session's store and REPL; without a REPL each says so in one sentence naming how to start one.

use std::sync::Arc;
use std::time::Duration;

use formdb_engine::evals;
use formdb_engine::reach;
use formdb_repl::session::{LoopError, Ran, TestReport, PAGE};
use formdb_repl::{Repl, HOW_TO_START};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::tools::{Session, ToolError, ToolResult};

/// How long one evaluation may run before it is interrupted, unless the call says otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

fn repl(s: &Session) -> ToolResult<&Arc<Repl>> {
    s.repl.as_ref().ok_or_else(|| {
        ToolError::new(format!("no REPL is connected to this formdb server: {HOW_TO_START}"))
    })
}

fn looped<'a>(
    s: &'a Session,
    repl: &'a Repl,
    timeout_ms: Option<u64>,
) -> formdb_repl::session::Loop<'a> {
    formdb_repl::session::Loop {
        store: &s.store,
        repl,
        user: &s.writer.user,
        timeout: timeout_ms.map(Duration::from_millis).unwrap_or(DEFAULT_TIMEOUT),
    }
}

impl From<LoopError> for ToolError {
    fn from(e: LoopError) -> ToolError {
        ToolError::new(e.to_string())
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct EvalArgs {
    /// Clojure code, in your aliases; every top-level form is evaluated.
    pub code: String,
    /// The namespace to evaluate in (default: the REPL's `user`).
    #[serde(default)]
    pub ns: Option<String>,
    /// Interrupt the evaluation after this many milliseconds (default 30000).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

pub fn eval(s: &Session, a: EvalArgs) -> ToolResult<Ran> {
    if a.code.trim().is_empty() {
        return Err(ToolError::new("`code` is empty: send the Clojure code to evaluate"));
    }
    let repl = repl(s)?;
    Ok(looped(s, repl, a.timeout_ms).eval(&a.code, a.ns.as_deref(), &s.writer.aliases)?)
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct LoadArgs {
    /// Stored forms to evaluate, by id, in this order.
    #[serde(default)]
    pub ids: Vec<String>,
    /// Or a whole namespace, in file order, as the store holds it.
    #[serde(default)]
    pub ns: Option<String>,
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

pub fn load(s: &Session, a: LoadArgs) -> ToolResult<Ran> {
    let repl = repl(s)?;
    let l = looped(s, repl, a.timeout_ms);
    match (a.ns, a.ids.is_empty()) {
        (Some(ns), true) => Ok(l.load_ns(&ns)?),
        (None, false) => Ok(l.load_forms(&a.ids)?),
        _ => Err(ToolError::new("send either `ids` (form ids) or `ns` (a namespace), not both")),
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct RunTestsArgs {
    /// Every test of these namespaces.
    #[serde(default)]
    pub ns: Vec<String>,
    /// These test forms, by id (or var name).
    #[serde(default)]
    pub ids: Vec<String>,
    /// The tests that reach any of these forms (ids) or vars (`my.ns/f`) through calls,
    /// transitively, across namespaces.
    #[serde(default)]
    pub affected_by: Vec<String>,
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

pub fn run_tests(s: &Session, a: RunTestsArgs) -> ToolResult<TestReport> {
    if a.ns.is_empty() && a.ids.is_empty() && a.affected_by.is_empty() {
        return Err(ToolError::new(
            "name the tests: `ns` (namespaces), `ids` (deftest ids) or `affected_by` (form ids or vars)",
        ));
    }
    let mut tests = Vec::new();
    for ns in &a.ns {
        tests.extend(reach::ns_tests(&s.store, ns)?);
    }
    for id in &a.ids {
        match reach::form_by_key(&s.store, id)? {
            Some(f) if f.test => tests.push(f),
            Some(f) => {
                return Err(ToolError::new(format!(
                "`{id}` is not a test ({} at {}:{}); `affected_by` runs the tests that reach it",
                f.fqn, f.file, f.line
            )))
            }
            None => return Err(ToolError::new(format!("no form or var `{id}` in the store"))),
        }
    }
    if !a.affected_by.is_empty() {
        tests.extend(reach::tests_reaching(&s.store, &a.affected_by)?);
    }
    let mut seen = std::collections::HashSet::new();
    tests.retain(|t| seen.insert(t.id.clone()));
    // Selecting no tests needs no REPL: say so without one.
    if tests.is_empty() {
        return Ok(TestReport::default());
    }
    let repl = repl(s)?;
    Ok(looped(s, repl, a.timeout_ms).run_tests(&tests)?)
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ReplLogArgs {
    /// One evaluation by its `log_seq`, its texts read from `text_offset`.
    #[serde(default)]
    pub seq: Option<i64>,
    #[serde(default)]
    pub text_offset: Option<usize>,
    /// Else the newest evaluations first, in pages.
    #[serde(default)]
    pub offset: Option<usize>,
    #[serde(default)]
    pub limit: Option<usize>,
}

/// One logged evaluation; texts a page long at most (`next_text_offset` reads on).
#[derive(Debug, Serialize, JsonSchema)]
pub struct LogEntry {
    pub seq: i64,
    /// Seconds since the Unix epoch.
    pub at: f64,
    pub user: String,
    pub ns: String,
    pub ids: Vec<String>,
    pub code: String,
    pub value: String,
    pub out: String,
    pub err: String,
    pub exception: String,
    pub ms: f64,
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_text_offset: Option<usize>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ReplLog {
    pub entries: Vec<LogEntry>,
    /// Send as `offset` for the next page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_offset: Option<usize>,
}

/// `text[from..]`, a page of it at most, and whether more follows.
fn page_of(text: &str, from: usize) -> (String, bool) {
    let mut chars = text.chars().skip(from);
    let page: String = chars.by_ref().take(PAGE).collect();
    (page, chars.next().is_some())
}

fn entry(r: evals::EvalRecord, from: usize) -> LogEntry {
    let mut more = false;
    let mut cut = |t: &str| {
        let (p, m) = page_of(t, from);
        more |= m;
        p
    };
    let (code, value, out, err, exception) =
        (cut(&r.code), cut(&r.value), cut(&r.out), cut(&r.err), cut(&r.exception));
    LogEntry {
        seq: r.seq,
        at: r.at,
        user: r.user,
        ns: r.ns,
        ids: r.ids,
        code,
        value,
        out,
        err,
        exception,
        ms: r.ms,
        status: r.status,
        next_text_offset: more.then_some(from + PAGE),
    }
}

pub fn repl_log(s: &Session, a: ReplLogArgs) -> ToolResult<ReplLog> {
    // Rows are committed behind the evaluations: read after the last one is in.
    if let Some(repl) = &s.repl {
        repl.flush_log();
    }
    if let Some(seq) = a.seq {
        let r = evals::get(&s.store, seq)?
            .ok_or_else(|| ToolError::new(format!("no evaluation {seq} in the log")))?;
        return Ok(ReplLog {
            entries: vec![entry(r, a.text_offset.unwrap_or(0))],
            next_offset: None,
        });
    }
    let offset = a.offset.unwrap_or(0);
    let limit = a.limit.unwrap_or(20).clamp(1, crate::tools::MAX_ROWS);
    let rows = evals::page(&s.store, offset, limit + 1)?;
    let next_offset = (rows.len() > limit).then_some(offset + limit);
    Ok(ReplLog {
        entries: rows.into_iter().take(limit).map(|r| entry(r, 0)).collect(),
        next_offset,
    })
}

/// What `eval: true` and `test: true` add to an edit's answer.
#[derive(Debug, Default, Serialize, JsonSchema)]
pub struct AfterEdit {
    /// The changed forms evaluated into the REPL (hot reload).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eval: Option<Ran>,
    /// The tests that reach the changed forms, run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tests: Option<TestReport>,
    /// Why the REPL part did not run or stopped (the edit itself is committed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// After a committed edit that wrote forms `ids`: evaluate them (`eval`), then (`test`) run
/// the tests that reach them. A REPL failure is reported here; the edit stays committed.
pub fn after_edit(s: &Session, ids: &[String], eval: bool, test: bool) -> Option<AfterEdit> {
    if !eval && !test {
        return None;
    }
    let mut out = AfterEdit::default();
    let Some(repl) = s.repl.as_ref() else {
        out.error =
            Some(format!("the edit is committed, but no REPL is connected: {HOW_TO_START}"));
        return Some(out);
    };
    let l = looped(s, repl, None);
    if !ids.is_empty() {
        match l.load_forms(ids) {
            Ok(ran) => {
                let failed = ran.exception.is_some() || ran.interrupted;
                out.eval = Some(ran);
                if failed {
                    return Some(out);
                }
            }
            Err(e) => {
                out.error = Some(e.to_string());
                return Some(out);
            }
        }
    }
    if test {
        match l.run_affected(ids) {
            Ok(report) => out.tests = Some(report),
            Err(e) => out.error = Some(e.to_string()),
        }
    }
    Some(out)
}
