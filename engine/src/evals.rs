//! The evaluation log: every evaluation formdb sends to a REPL, one row each (relation
//! `eval_log`, created on first use), so what ran and what it gave is queryable like the rest
//! of the store and survives restarts.
//!
//! Rows are committed behind the evaluations ([`EvalLog`]): an answer from the REPL does not
//! wait for its row's commit (a journal write and two fsyncs, tens of ms on a busy disk), and
//! rows that arrive together commit together. A row's `seq` is its time in microseconds since
//! the epoch, made strictly increasing within a process, so it is known before the commit and
//! two processes (a daemon and `formdb eval`) need no shared counter; readers flush first.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{SystemTime, UNIX_EPOCH};

use cozo::DataValue;
use serde::Serialize;

use crate::store::{params, str_at, Params, Result, Store, StoreError};

/// Made with a new store's schema; a store made before it gets it on first use.
pub(crate) const CREATE: &str = ":create eval_log {seq: Int => at: Float, user: String, ns: String, ids: [String], code: String, value: String, out: String, err: String, exception: String, ms: Float, status: String}";

/// One evaluation as logged.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct EvalRecord {
    /// Its place in the log (assigned when recorded).
    pub seq: i64,
    /// Seconds since the epoch.
    pub at: f64,
    pub user: String,
    pub ns: String,
    /// The stored forms evaluated, when the code came from the store.
    pub ids: Vec<String>,
    pub code: String,
    pub value: String,
    pub out: String,
    pub err: String,
    /// `Class: message`, then each cause on its own line; empty when none.
    pub exception: String,
    pub ms: f64,
    /// `ok`, `error`, `interrupted` or `unreachable`.
    pub status: String,
}

fn ensure(store: &Store) -> Result<()> {
    let rels = store.query("::relations", Params::new())?;
    if rels.rows.iter().any(|r| str_at(r, 0) == "eval_log") {
        return Ok(());
    }
    if let Err(e) = store.write(CREATE, Params::new()) {
        let rels = store.query("::relations", Params::new())?;
        if !rels.rows.iter().any(|r| str_at(r, 0) == "eval_log") {
            return Err(e);
        }
    }
    Ok(())
}

/// What the log's thread is sent.
enum Msg {
    Row(Box<EvalRecord>),
    /// Answered once every row sent before it is committed.
    Flush(mpsc::Sender<()>),
}

/// A store's evaluation log, committed by a thread of its own. Dropping it commits what is
/// pending first.
pub struct EvalLog {
    store: Arc<Store>,
    last_seq: AtomicI64,
    tx: Mutex<Option<mpsc::Sender<Msg>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for EvalLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EvalLog").field("last_seq", &self.last_seq).finish()
    }
}

fn micros_now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros() as i64).unwrap_or(0)
}

impl EvalLog {
    /// The log of `store`, creating its relation if it has none.
    pub fn start(store: Arc<Store>) -> Result<EvalLog> {
        ensure(&store)?;
        let (tx, rx) = mpsc::channel::<Msg>();
        let writer = store.clone();
        let thread = std::thread::Builder::new()
            .name("formdb-eval-log".into())
            .spawn(move || {
                while let Ok(first) = rx.recv() {
                    let (mut rows, mut waiting) = (Vec::new(), Vec::new());
                    for m in std::iter::once(first).chain(std::iter::from_fn(|| rx.try_recv().ok()))
                    {
                        match m {
                            Msg::Row(r) => rows.push(*r),
                            Msg::Flush(w) => waiting.push(w),
                        }
                    }
                    if !rows.is_empty() {
                        if let Err(e) = write_rows(&writer, rows) {
                            tracing::warn!("the evaluation log could not be written: {e}");
                        }
                    }
                    for w in waiting {
                        let _ = w.send(());
                    }
                }
            })
            .map_err(|e| StoreError::Refused(format!("cannot start the evaluation log: {e}")))?;
        Ok(EvalLog {
            store,
            last_seq: AtomicI64::new(0),
            tx: Mutex::new(Some(tx)),
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Log `rec`, giving it its `seq` (returned); the row is committed shortly after, or at
    /// the next [`EvalLog::flush`].
    pub fn record(&self, mut rec: EvalRecord) -> i64 {
        let now = micros_now();
        let next = |last: i64| now.max(last + 1);
        let prev = self
            .last_seq
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |last| Some(next(last)))
            .unwrap_or(now);
        let seq = next(prev);
        rec.seq = seq;
        let row = Box::new(rec);
        // A send hands the row back when the thread is gone (only while dropping).
        let unsent = match self.tx.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            Some(tx) => match tx.send(Msg::Row(row)) {
                Ok(()) => None,
                Err(mpsc::SendError(Msg::Row(row))) => Some(row),
                Err(mpsc::SendError(Msg::Flush(_))) => None,
            },
            None => Some(row),
        };
        if let Some(row) = unsent {
            // The thread is gone: commit here rather than lose the row.
            if let Err(e) = write_rows(&self.store, vec![*row]) {
                tracing::warn!("the evaluation log could not be written: {e}");
            }
        }
        seq
    }

    /// Wait until every row recorded so far is committed.
    pub fn flush(&self) {
        let (done, wait) = mpsc::channel();
        let sent = self
            .tx
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|tx| tx.send(Msg::Flush(done)).is_ok());
        if sent == Some(true) {
            let _ = wait.recv();
        }
    }
}

impl Drop for EvalLog {
    fn drop(&mut self) {
        self.tx.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(t) = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = t.join();
        }
    }
}

/// Commit `rows` in one transaction. A `seq` another process took meanwhile (the same
/// microsecond) moves to the next free one.
fn write_rows(store: &Store, mut rows: Vec<EvalRecord>) -> Result<()> {
    let _writer = store.writer()?;
    let seqs = DataValue::List(rows.iter().map(|r| DataValue::from(r.seq)).collect());
    let taken =
        store.query("?[seq] := *eval_log{seq}, is_in(seq, $seqs)", params([("seqs", seqs)]))?;
    let mut taken: std::collections::BTreeSet<i64> =
        taken.rows.iter().filter_map(|r| r[0].get_int()).collect();
    for r in &mut rows {
        while taken.contains(&r.seq) {
            tracing::warn!("evaluation {} of the log was taken by another process", r.seq);
            r.seq += 1;
        }
        taken.insert(r.seq);
    }
    let rows = DataValue::List(
        rows.iter()
            .map(|r| {
                DataValue::List(vec![
                    r.seq.into(),
                    r.at.into(),
                    r.user.as_str().into(),
                    r.ns.as_str().into(),
                    DataValue::List(r.ids.iter().map(|i| DataValue::from(i.as_str())).collect()),
                    r.code.as_str().into(),
                    r.value.as_str().into(),
                    r.out.as_str().into(),
                    r.err.as_str().into(),
                    r.exception.as_str().into(),
                    r.ms.into(),
                    r.status.as_str().into(),
                ])
            })
            .collect(),
    );
    store.write(
        "?[seq, at, user, ns, ids, code, value, out, err, exception, ms, status] <- $rows :put eval_log {seq => at, user, ns, ids, code, value, out, err, exception, ms, status}",
        params([("rows", rows)]),
    )?;
    Ok(())
}

const COLUMNS: &str = "seq, at, user, ns, ids, code, value, out, err, exception, ms, status";

fn from_row(r: &[DataValue]) -> EvalRecord {
    EvalRecord {
        seq: r[0].get_int().unwrap_or(0),
        at: r[1].get_float().unwrap_or(0.0),
        user: str_at(r, 2),
        ns: str_at(r, 3),
        ids: match &r[4] {
            DataValue::List(l) => {
                l.iter().filter_map(|v| v.get_str().map(str::to_string)).collect()
            }
            _ => Vec::new(),
        },
        code: str_at(r, 5),
        value: str_at(r, 6),
        out: str_at(r, 7),
        err: str_at(r, 8),
        exception: str_at(r, 9),
        ms: r[10].get_float().unwrap_or(0.0),
        status: str_at(r, 11),
    }
}

/// The newest evaluations first: `limit` of them, skipping `offset`.
pub fn page(store: &Store, offset: usize, limit: usize) -> Result<Vec<EvalRecord>> {
    ensure(store)?;
    let rows = store.query(
        &format!(
            "?[{COLUMNS}] := *eval_log{{{COLUMNS}}} :order -seq :offset $offset :limit $limit"
        ),
        params([("offset", (offset as i64).into()), ("limit", (limit as i64).into())]),
    )?;
    Ok(rows.rows.iter().map(|r| from_row(r)).collect())
}

/// One evaluation by its sequence number.
pub fn get(store: &Store, seq: i64) -> Result<Option<EvalRecord>> {
    ensure(store)?;
    let rows = store.query(
        &format!("?[{COLUMNS}] := *eval_log{{{COLUMNS}}}, seq = $seq"),
        params([("seq", seq.into())]),
    )?;
    Ok(rows.rows.first().map(|r| from_row(r)))
}
