//! The evaluation log: every evaluation formdb sends to a REPL, one row each (relation
//! `eval_log`, created on first use), so what ran and what it gave is queryable like the rest
//! of the store and survives restarts.

use cozo::DataValue;
use serde::Serialize;

use crate::store::{params, str_at, Params, Result, Store};

const CREATE: &str = ":create eval_log {seq: Int => at: Float, user: String, ns: String, ids: [String], code: String, value: String, out: String, err: String, exception: String, ms: Float, status: String}";

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

/// Append `rec` to the log; its sequence number.
pub fn record(store: &Store, rec: &EvalRecord) -> Result<i64> {
    ensure(store)?;
    let _writer = store.writer()?;
    let last = store.query("?[max(seq)] := *eval_log{seq}", Params::new())?;
    let seq = last.rows.first().and_then(|r| r[0].get_int()).unwrap_or(0) + 1;
    let ids = DataValue::List(rec.ids.iter().map(|i| DataValue::from(i.as_str())).collect());
    store.write(
        "?[seq, at, user, ns, ids, code, value, out, err, exception, ms, status] <- [[$seq, $at, $user, $ns, $ids, $code, $value, $out, $err, $exception, $ms, $status]] :put eval_log {seq => at, user, ns, ids, code, value, out, err, exception, ms, status}",
        params([
            ("seq", seq.into()),
            ("at", rec.at.into()),
            ("user", rec.user.as_str().into()),
            ("ns", rec.ns.as_str().into()),
            ("ids", ids),
            ("code", rec.code.as_str().into()),
            ("value", rec.value.as_str().into()),
            ("out", rec.out.as_str().into()),
            ("err", rec.err.as_str().into()),
            ("exception", rec.exception.as_str().into()),
            ("ms", rec.ms.into()),
            ("status", rec.status.as_str().into()),
        ]),
    )?;
    Ok(seq)
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
