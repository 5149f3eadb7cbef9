//! The loop itself: evaluate code or stored forms in the project's REPL, run the tests a change
//! reaches, and log every evaluation in the store.
//!
//! Stored forms are sent with their file and line, so what the REPL compiles carries the
//! store's places: a failing assertion's line maps back to its form. Replies hold at most a
//! page of each text; the whole is in the evaluation log, read on by its sequence number.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use formdb_engine::evals::EvalRecord;
use formdb_engine::reach::{self, StoredForm};
use formdb_engine::store::Store;
use formdb_projector::aliases::AliasMap;
use schemars::JsonSchema;
use serde::Serialize;

use crate::{Evaluation, Exception, Origin, Repl, ReplError};

/// Characters of a value, out or err a reply holds; the log holds the rest.
pub const PAGE: usize = 4096;

/// What a request can fail with: the REPL, or the store.
#[derive(Debug, thiserror::Error)]
pub enum LoopError {
    #[error(transparent)]
    Repl(#[from] ReplError),
    #[error(transparent)]
    Store(#[from] formdb_engine::store::StoreError),
    #[error("{0}")]
    Invalid(String),
}

pub type Result<T, E = LoopError> = std::result::Result<T, E>;

/// One evaluation as a reply shows it: texts cut at a page, and the log entry with the rest.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct Ran {
    pub value: Option<String>,
    pub out: String,
    pub err: String,
    pub exception: Option<Exception>,
    pub ns: Option<String>,
    pub elapsed_ms: f64,
    pub interrupted: bool,
    /// The evaluation log's entry (`repl_log` reads it whole).
    pub log_seq: i64,
    /// A text was cut at a page: read it whole from the log entry.
    pub truncated: bool,
}

/// One failing or erring assertion.
#[derive(Clone, Debug, Serialize, PartialEq, JsonSchema)]
pub struct Failure {
    /// `fail` (an assertion did not hold) or `error` (an exception).
    pub kind: String,
    /// The test var, and the id of its form.
    pub test: String,
    pub test_id: String,
    pub message: String,
    pub expected: String,
    pub actual: String,
    /// Where it failed: the stored file and line, and the form holding that line.
    pub file: String,
    pub line: i64,
    pub form_id: String,
}

/// What running tests gave.
#[derive(Clone, Debug, Default, Serialize, JsonSchema)]
pub struct TestReport {
    /// The tests that ran, as var names.
    pub tests: Vec<String>,
    pub ran: i64,
    pub pass: i64,
    pub fail: i64,
    pub error: i64,
    pub failures: Vec<Failure>,
    pub elapsed_ms: f64,
    pub log_seq: i64,
}

/// A user's REPL loop on one store.
pub struct Loop<'a> {
    pub store: &'a Arc<Store>,
    pub repl: &'a Repl,
    pub user: &'a str,
    pub timeout: Duration,
}

fn now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

fn cut(s: &str) -> (String, bool) {
    match s.char_indices().nth(PAGE) {
        Some((at, _)) => (format!("{}…", &s[..at]), true),
        None => (s.to_string(), false),
    }
}

fn exception_text(ex: &Exception) -> String {
    let mut t = format!("{}: {}", ex.class, ex.message);
    for c in &ex.causes {
        t.push_str(&format!("\ncaused by {}: {}", c.class, c.message));
    }
    t
}

impl Loop<'_> {
    fn log(&self, ns: &str, ids: Vec<String>, code: &str, ev: &Evaluation) -> Result<Ran> {
        let status = if ev.interrupted {
            "interrupted"
        } else if ev.exception.is_some() {
            "error"
        } else {
            "ok"
        };
        let rec = EvalRecord {
            seq: 0,
            at: now(),
            user: self.user.to_string(),
            ns: ev.ns.clone().unwrap_or_else(|| ns.to_string()),
            ids,
            code: code.to_string(),
            value: ev.value().unwrap_or("").to_string(),
            out: ev.out.clone(),
            err: ev.err.clone(),
            exception: ev.exception.as_ref().map(exception_text).unwrap_or_default(),
            ms: ev.elapsed_ms,
            status: status.to_string(),
        };
        let seq = self.repl.log(self.store)?.record(rec);
        let (value, v_cut) = match ev.value() {
            Some(v) => {
                let (v, c) = cut(v);
                (Some(v), c)
            }
            None => (None, false),
        };
        let (out, o_cut) = cut(&ev.out);
        let (err, e_cut) = cut(&ev.err);
        Ok(Ran {
            value,
            out,
            err,
            exception: ev.exception.clone(),
            ns: ev.ns.clone(),
            elapsed_ms: ev.elapsed_ms,
            interrupted: ev.interrupted,
            log_seq: seq,
            truncated: v_cut || o_cut || e_cut,
        })
    }

    /// Evaluate `code` in `ns`, written in `aliases` (the caller's): mapped back to the
    /// namespace's own aliases first, as an edit would be.
    pub fn eval(&self, code: &str, ns: Option<&str>, aliases: &AliasMap) -> Result<Ran> {
        let code = match ns {
            Some(ns) if !aliases.is_empty() => {
                formdb_projector::views::parse_back(self.store, ns, code, aliases)
                    .unwrap_or_else(|_| code.to_string())
            }
            _ => code.to_string(),
        };
        let ev = self.repl.eval(&code, ns, &Origin::default(), self.timeout)?;
        self.log(ns.unwrap_or(""), Vec::new(), &code, &ev)
    }

    /// Evaluate stored forms by id, each with its file and line, in the order given. A form
    /// whose namespace the REPL has not loaded yet loads that whole namespace from the store
    /// instead (its `ns` form first, so the form's aliases and requires hold).
    pub fn load_forms(&self, ids: &[String]) -> Result<Ran> {
        let forms = reach::forms(self.store, ids)?;
        if let Some(missing) = ids.iter().find(|i| !forms.iter().any(|f| &f.id == *i)) {
            return Err(LoopError::Invalid(format!("no form with id `{missing}`")));
        }
        let mut all = Evaluation::default();
        let mut code = String::new();
        let mut loaded: Vec<&str> = Vec::new();
        for f in &forms {
            if loaded.contains(&f.ns.as_str()) {
                continue;
            }
            let ev = if self.ns_loaded(&f.ns)? {
                let origin = Origin {
                    file: Some(f.file.clone()),
                    line: Some(f.line as u32),
                    column: Some(f.col as u32),
                };
                code.push_str(&f.source);
                code.push('\n');
                self.repl.eval(&f.source, Some(&f.ns), &origin, self.timeout)?
            } else {
                loaded.push(&f.ns);
                let (path, text) = ns_text(self.store, &f.ns)?;
                code.push_str(&format!(";; load {path} from the store\n"));
                self.repl.load_file(&text, &path, self.timeout)?
            };
            merge(&mut all, ev);
            if all.exception.is_some() || all.interrupted {
                break;
            }
        }
        let ns = forms.first().map(|f| f.ns.clone()).unwrap_or_default();
        self.log(&ns, ids.to_vec(), &code, &all)
    }

    /// Whether the REPL has namespace `ns`.
    fn ns_loaded(&self, ns: &str) -> Result<bool> {
        let code = format!("(some? (find-ns '{ns}))");
        let ev = self.repl.eval(&code, Some("user"), &Origin::default(), self.timeout)?;
        Ok(ev.value() == Some("true"))
    }

    /// Run the tests that reach any of `keys` (form ids or vars) through the call graph.
    pub fn run_affected(&self, keys: &[String]) -> Result<TestReport> {
        let tests = reach::tests_reaching(self.store, keys)?;
        self.run_tests(&tests)
    }

    /// Load a whole namespace as the store holds it, forms in file order.
    pub fn load_ns(&self, ns: &str) -> Result<Ran> {
        let (path, text) = ns_text(self.store, ns)?;
        let ev = self.repl.load_file(&text, &path, self.timeout)?;
        self.log(ns, Vec::new(), &format!(";; load {path} from the store"), &ev)
    }

    /// Run these test forms with `clojure.test`, after loading their namespaces from the store.
    pub fn run_tests(&self, tests: &[StoredForm]) -> Result<TestReport> {
        let mut report = TestReport {
            tests: tests.iter().map(|t| t.fqn.clone()).collect(),
            ..Default::default()
        };
        if tests.is_empty() {
            return Ok(report);
        }
        let nss: std::collections::BTreeSet<&str> = tests.iter().map(|t| t.ns.as_str()).collect();
        for ns in nss {
            let loaded = self.load_ns(ns)?;
            if let Some(ex) = loaded.exception {
                return Err(LoopError::Invalid(format!(
                    "loading test namespace {ns} from the store failed: {}",
                    exception_text(&ex)
                )));
            }
        }
        let vars: Vec<String> = tests.iter().map(|t| format!("#'{}", t.fqn)).collect();
        let code = test_code(&vars);
        let ev = self.repl.eval(&code, Some("user"), &Origin::default(), self.timeout)?;
        let ran = self.log("user", tests.iter().map(|t| t.id.clone()).collect(), &code, &ev)?;
        report.log_seq = ran.log_seq;
        report.elapsed_ms = ev.elapsed_ms;
        if let Some(ex) = &ev.exception {
            return Err(LoopError::Invalid(format!(
                "running the tests failed: {}",
                exception_text(ex)
            )));
        }
        for line in ev.out.lines() {
            let parts: Vec<&str> = line.split('\t').collect();
            match parts.as_slice() {
                ["formdb-counts", ran, pass, fail, error] => {
                    report.ran = ran.parse().unwrap_or(0);
                    report.pass = pass.parse().unwrap_or(0);
                    report.fail = fail.parse().unwrap_or(0);
                    report.error = error.parse().unwrap_or(0);
                }
                ["formdb-test", kind, var, line, message, expected, actual] => {
                    let test =
                        tests.iter().find(|t| format!("#'{}", t.fqn) == *var || t.fqn == *var);
                    let file = test.map(|t| t.file.clone()).unwrap_or_default();
                    let line: i64 = line.parse().unwrap_or(0);
                    let form_id = reach::form_at_line(self.store, &file, line)?
                        .map(|f| f.id)
                        .unwrap_or_default();
                    report.failures.push(Failure {
                        kind: kind.to_string(),
                        test: var.trim_start_matches("#'").to_string(),
                        test_id: test.map(|t| t.id.clone()).unwrap_or_default(),
                        message: message.to_string(),
                        expected: expected.to_string(),
                        actual: actual.to_string(),
                        file,
                        line,
                        form_id,
                    });
                }
                _ => {}
            }
        }
        Ok(report)
    }
}

fn merge(all: &mut Evaluation, ev: Evaluation) {
    all.values.extend(ev.values);
    all.out.push_str(&ev.out);
    all.err.push_str(&ev.err);
    all.elapsed_ms += ev.elapsed_ms;
    all.interrupted |= ev.interrupted;
    if ev.ns.is_some() {
        all.ns = ev.ns;
    }
    if all.exception.is_none() {
        all.exception = ev.exception;
    }
}

/// The stored file of a namespace and its text.
fn ns_text(store: &Store, ns: &str) -> Result<(String, String)> {
    let text = formdb_projector::views::as_stored(store, ns)
        .map_err(|_| LoopError::Invalid(format!("no namespace `{ns}` in the store")))?;
    let path =
        reach::ns_file(store, ns)?.unwrap_or_else(|| format!("{}.clj", ns.replace('.', "/")));
    Ok((path, text))
}

/// `clojure.test` run over `vars`, reporting one tab-separated line per failure and the counts.
/// Failures carry the line `clojure.test` found (from the compiled code: the store's line).
fn test_code(vars: &[String]) -> String {
    format!(
        r#"(let [counts (atom {{:test 0 :pass 0 :fail 0 :error 0}})
      found (atom [])
      one-line (fn [x] (.replaceAll (str x) "[\t\n\r]+" " "))]
  (binding [clojure.test/report
            (fn [m]
              (case (:type m)
                :begin-test-var (swap! counts update :test inc)
                :pass (swap! counts update :pass inc)
                (:fail :error)
                (do (swap! counts update (:type m) inc)
                    (swap! found conj (assoc m :var (first clojure.test/*testing-vars*))))
                nil))]
    (clojure.test/test-vars [{vars}]))
  (doseq [m @found]
    (println (str "formdb-test\t" (name (:type m)) "\t" (:var m) "\t" (:line m) "\t"
                  (one-line (:message m)) "\t" (one-line (pr-str (:expected m))) "\t"
                  (one-line (pr-str (:actual m))))))
  (let [c @counts]
    (println (str "formdb-counts\t" (:test c) "\t" (:pass c) "\t" (:fail c) "\t" (:error c))))
  :formdb-done)"#,
        vars = vars.join(" ")
    )
}
