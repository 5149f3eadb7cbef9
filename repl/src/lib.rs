//! The REPL loop: formdb's client of a real nREPL server.
//!
//! Owns: finding the project's nREPL server (`.nrepl-port`, a named `HOST:PORT`, or one it
//! starts with Debian's `clojure` and `nrepl` on the tree's source paths: `server`), the bencode
//! protocol with deadlines, `interrupt` at a timeout and reconnection after a restart
//! (`nrepl`), evaluating stored forms and whole namespaces as the store holds them, and running
//! `clojure.test` tests with each failure mapped back to its form (`session`).
//!
//! Must not touch: the store's relations (it reads forms and writes the evaluation log through
//! the engine's typed functions), parsing, editing, any transport (MCP and the CLI call it).

pub mod nrepl;
pub mod server;
pub mod session;

use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use formdb_engine::evals::EvalLog;
use formdb_engine::store::{Store, StoreError};
use serde::Serialize;

use crate::nrepl::{Connection, Reply, Request};
use crate::server::Endpoint;

/// How a REPL request can fail. Every message says what to do next.
#[derive(Debug, thiserror::Error)]
pub enum ReplError {
    #[error("no REPL is connected: {0}")]
    NotConnected(String),
    #[error("the REPL at {0} is not on this machine: formdb only connects to 127.0.0.1/localhost")]
    NotLocal(String),
    #[error("cannot reach a REPL at {0}")]
    Unreachable(String),
    #[error(
        "the REPL died ({0}); restart it (`formdb up --repl` starts one) and formdb reconnects"
    )]
    Dead(String),
    #[error("the REPL did not answer in time")]
    Timeout,
    #[error("nREPL protocol: {0}")]
    Protocol(String),
    #[error("{0}")]
    Io(String),
}

impl ReplError {
    fn io(e: std::io::Error) -> ReplError {
        ReplError::Io(e.to_string())
    }
}

pub type Result<T, E = ReplError> = std::result::Result<T, E>;

/// One sentence for tools when there is no REPL: what to run to get one.
pub const HOW_TO_START: &str = "start one with `formdb up --repl` (or `formdb mcp --repl`), point formdb at a running nREPL with `--nrepl HOST:PORT`, or start your own so it writes `.nrepl-port` in the tree";

/// An exception, with its cause chain, outermost first.
#[derive(Clone, Debug, Serialize, PartialEq, schemars::JsonSchema)]
pub struct Exception {
    pub class: String,
    pub message: String,
    pub causes: Vec<Cause>,
}

#[derive(Clone, Debug, Serialize, PartialEq, schemars::JsonSchema)]
pub struct Cause {
    pub class: String,
    pub message: String,
}

/// What one evaluation gave.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Evaluation {
    /// The printed value of each top-level form evaluated, in order.
    pub values: Vec<String>,
    pub out: String,
    pub err: String,
    pub exception: Option<Exception>,
    /// The namespace the REPL was in afterwards.
    pub ns: Option<String>,
    pub elapsed_ms: f64,
    /// The evaluation ran past its timeout and was interrupted.
    pub interrupted: bool,
}

impl Evaluation {
    /// The last value: what a REPL shows.
    pub fn value(&self) -> Option<&str> {
        self.values.last().map(String::as_str)
    }
}

/// Where code comes from, so compiled code carries the store's file and lines.
#[derive(Clone, Debug, Default)]
pub struct Origin {
    pub file: Option<String>,
    pub line: Option<u32>,
    pub column: Option<u32>,
}

/// The state of the connection, as `formdb up`'s status shows it.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Status {
    pub connected: bool,
    /// `host:port` of the server, when known.
    pub addr: Option<String>,
    /// How the server is found: `.nrepl-port`, `--nrepl`, or started by formdb.
    pub source: String,
    pub last_error: Option<String>,
    /// The process id of the server formdb started, if it started one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
}

/// A REPL connection that finds its server again: after the server dies, the next request
/// reconnects (reading `.nrepl-port` again, or the same address), so a restarted REPL is
/// picked up without restarting formdb.
pub struct Repl {
    endpoint: Endpoint,
    conn: Mutex<Option<Connection>>,
    last_error: Mutex<Option<String>>,
    connect_timeout: Duration,
    /// The evaluation log of the store this REPL's evaluations are logged to, started at the
    /// first evaluation.
    log: OnceLock<EvalLog>,
}

impl std::fmt::Debug for Repl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Repl").field("endpoint", &self.endpoint.describe()).finish()
    }
}

impl Repl {
    pub fn new(endpoint: Endpoint) -> Repl {
        Repl {
            endpoint,
            conn: Mutex::new(None),
            last_error: Mutex::new(None),
            connect_timeout: Duration::from_secs(3),
            log: OnceLock::new(),
        }
    }

    /// The evaluation log of `store`, started on first use (one per REPL: a REPL serves one
    /// project's store).
    pub fn log(&self, store: &Arc<Store>) -> Result<&EvalLog, StoreError> {
        if let Some(log) = self.log.get() {
            return Ok(log);
        }
        let started = EvalLog::start(store.clone())?;
        // Another thread may have started one meanwhile; dropping ours commits nothing.
        let _ = self.log.set(started);
        Ok(self.log.get().expect("set above"))
    }

    /// Wait until every evaluation logged so far is committed (before reading the log).
    pub fn flush_log(&self) {
        if let Some(log) = self.log.get() {
            log.flush();
        }
    }

    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    pub fn status(&self) -> Status {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        Status {
            connected: conn.is_some(),
            addr: conn.as_ref().map(|c| c.addr().to_string()).or_else(|| self.endpoint.addr().ok()),
            source: self.endpoint.describe(),
            last_error: self.last_error.lock().unwrap_or_else(|p| p.into_inner()).clone(),
            pid: self.endpoint.pid(),
        }
    }

    /// Whether the server answers now: connects if not connected, and round-trips a trivial
    /// evaluation if connected (a dead server is found and its connection dropped).
    pub fn ping(&self) -> bool {
        self.eval("nil", Some("user"), &Origin::default(), Duration::from_secs(5)).is_ok()
    }

    /// Connect now if not connected (a no-op when connected).
    pub fn connect(&self) -> Result<()> {
        let mut conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        self.ensure(&mut conn).map(|_| ())
    }

    fn ensure<'c>(&self, conn: &'c mut Option<Connection>) -> Result<&'c mut Connection> {
        if conn.is_none() {
            let addr = self.endpoint.addr().map_err(|e| self.note(e))?;
            let c = Connection::open(&addr, self.connect_timeout).map_err(|e| self.note(e))?;
            *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = None;
            *conn = Some(c);
        }
        Ok(conn.as_mut().expect("connected above"))
    }

    fn note(&self, e: ReplError) -> ReplError {
        *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
        e
    }

    /// Evaluate `code` in namespace `ns` (the REPL's current one when `None`). Past `timeout`
    /// the evaluation is interrupted (nREPL `interrupt`) and reported as such; the connection
    /// stays usable. A dead server is reported, and the next call reconnects.
    pub fn eval(
        &self,
        code: &str,
        ns: Option<&str>,
        origin: &Origin,
        timeout: Duration,
    ) -> Result<Evaluation> {
        let mut req = Request::op("eval").with("code", code);
        if let Some(ns) = ns {
            req = req.with("ns", ns);
        }
        if let Some(f) = &origin.file {
            req = req.with("file", f);
        }
        if let Some(l) = origin.line {
            req = req.with_int("line", l as i64);
        }
        if let Some(c) = origin.column {
            req = req.with_int("column", c as i64);
        }
        self.request(req, timeout)
    }

    /// Load a whole file's text (nREPL `load-file`): its forms in order, with their lines.
    pub fn load_file(&self, text: &str, path: &str, timeout: Duration) -> Result<Evaluation> {
        let name = path.rsplit('/').next().unwrap_or(path);
        let req = Request::op("load-file")
            .with("file", text)
            .with("file-path", path)
            .with("file-name", name);
        self.request(req, timeout)
    }

    fn request(&self, req: Request, timeout: Duration) -> Result<Evaluation> {
        let mut guard = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        let conn = self.ensure(&mut guard)?;
        let started = Instant::now();
        let result = run(conn, req, timeout);
        let mut ev = match result {
            Ok(ev) => ev,
            Err(e @ ReplError::Dead(_)) | Err(e @ ReplError::Protocol(_)) => {
                *guard = None;
                return Err(self.note(e));
            }
            Err(e) => return Err(self.note(e)),
        };
        if ev.exception.is_some() {
            // The cause chain of `*e`, in the same session, one line per cause.
            let code = "(doseq [m (:via (Throwable->map *e))] (println (str \"formdb-cause\\t\" (:type m) \"\\t\" (.replaceAll (str (:message m)) \"\\\\s+\" \" \"))))";
            if let Ok(chain) =
                run(conn, Request::op("eval").with("code", code), Duration::from_secs(5))
            {
                let causes: Vec<Cause> = chain
                    .out
                    .lines()
                    .filter_map(|l| {
                        let mut parts = l.strip_prefix("formdb-cause\t")?.splitn(2, '\t');
                        Some(Cause {
                            class: parts.next()?.to_string(),
                            message: parts.next().unwrap_or("").to_string(),
                        })
                    })
                    .collect();
                if let Some(ex) = ev.exception.as_mut() {
                    if let Some(first) = causes.first() {
                        ex.class = first.class.clone();
                        ex.message = first.message.clone();
                    }
                    ex.causes = causes.into_iter().skip(1).collect();
                }
            }
        }
        ev.elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
        Ok(ev)
    }
}

/// Send one request and gather its replies until `done`, interrupting it past `timeout`.
fn run(conn: &mut Connection, req: Request, timeout: Duration) -> Result<Evaluation> {
    let id = conn.send(req)?;
    let mut ev = Evaluation::default();
    let mut until = Instant::now() + timeout;
    let mut interrupted_at: Option<Instant> = None;
    loop {
        let reply = match conn.read_until(until) {
            Ok(r) => r,
            Err(ReplError::Timeout) if interrupted_at.is_none() => {
                conn.send(Request::op("interrupt").with("interrupt-id", &id))?;
                ev.interrupted = true;
                interrupted_at = Some(Instant::now());
                // The interrupted evaluation still ends with `done`; give it a while.
                until = Instant::now() + Duration::from_secs(10);
                continue;
            }
            Err(ReplError::Timeout) => {
                return Err(ReplError::Dead(format!(
                    "{} did not stop an evaluation it was told to interrupt",
                    conn.addr()
                )))
            }
            Err(e) => return Err(e),
        };
        if reply.get("id") != Some(id.as_str()) {
            continue;
        }
        take(&mut ev, &reply);
        if reply.done() {
            return Ok(ev);
        }
    }
}

fn take(ev: &mut Evaluation, r: &Reply) {
    if let Some(v) = r.get("value") {
        ev.values.push(v.to_string());
    }
    if let Some(o) = r.get("out") {
        ev.out.push_str(o);
    }
    if let Some(e) = r.get("err") {
        ev.err.push_str(e);
    }
    if let Some(ns) = r.get("ns") {
        ev.ns = Some(ns.to_string());
    }
    if let Some(ex) = r.get("ex") {
        ev.exception =
            Some(Exception { class: ex.to_string(), message: String::new(), causes: Vec::new() });
    }
    if r.status.iter().any(|s| s == "interrupted") {
        ev.interrupted = true;
    }
}
