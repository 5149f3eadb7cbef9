//! Latency of the sync, for `formdb bench up`: "file written in `DIR` → store updated" and
//! "store changed → file in `DIR`". Both poll (every 200 µs) against a running [`DirSync`], so
//! they measure what a reader would see, including the debounce and the generation poll.
//!
//! [`DirSync`]: crate::DirSync

use std::path::Path;
use std::time::{Duration, Instant};

use formdb_edit::save::{self, Writer};
use formdb_engine::forms::content_hash;
use formdb_engine::query;
use formdb_engine::read;
use formdb_engine::store::Store;

use crate::{Result, SyncError};

const TICK: Duration = Duration::from_micros(200);

/// Write `bytes` to `dir/path` with a plain write (as an editor or git does) and wait until the
/// store holds them. Returns the time from the write returning to the store holding the text.
pub fn dir_to_store(
    store: &Store,
    dir: &Path,
    path: &str,
    bytes: &[u8],
    timeout: Duration,
) -> Result<Duration> {
    let want = content_hash(bytes);
    let abs = dir.join(path);
    std::fs::write(&abs, bytes).map_err(|source| SyncError::Io { path: abs.clone(), source })?;
    let start = Instant::now();
    loop {
        if stored_hash(store, path)?.as_deref() == Some(want.as_str()) {
            return Ok(start.elapsed());
        }
        if start.elapsed() > timeout {
            return Err(SyncError::Invalid(format!(
                "{path}: the store did not take the new text within {timeout:?}"
            )));
        }
        std::thread::sleep(TICK);
    }
}

/// Save `bytes` as `path` through the edit API (as a mount save or an MCP edit does), then wait
/// until `dir/path` holds the as-stored text. Returns the time from the save returning to the
/// file being in `DIR`.
pub fn store_to_dir(
    store: &Store,
    dir: &Path,
    path: &str,
    bytes: &[u8],
    author: &str,
    timeout: Duration,
) -> Result<Duration> {
    let writer = Writer::new(author, Default::default());
    let saved = save::save(store, &writer, path, bytes, None)
        .map_err(|e| SyncError::Invalid(format!("{path}: saving: {e}")))?;
    if let Some(d) = saved.draft() {
        return Err(SyncError::Invalid(format!("{path}: the save became a draft: {}", d.error)));
    }
    let start = Instant::now();
    let want = query::file_bytes(store, path)?
        .ok_or_else(|| SyncError::Invalid(format!("{path}: not in the store after saving")))?;
    let abs = dir.join(path);
    loop {
        if std::fs::read(&abs).is_ok_and(|b| b == want) {
            return Ok(start.elapsed());
        }
        if start.elapsed() > timeout {
            return Err(SyncError::Invalid(format!(
                "{path}: the working directory did not get the store's text within {timeout:?}"
            )));
        }
        std::thread::sleep(TICK);
    }
}

/// Latencies of `rounds` edits each way on one synced file.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Latencies {
    pub dir_to_store: Vec<Duration>,
    pub store_to_dir: Vec<Duration>,
}

/// Edit `path` (a file both sides hold) `rounds` times each way, alternating: a line comment is
/// appended through `DIR`, then another through the store. The file's text is put back at the
/// end (through `DIR`).
pub fn latency_probe(
    store: &Store,
    dir: &Path,
    path: &str,
    rounds: usize,
    timeout: Duration,
) -> Result<Latencies> {
    let abs = dir.join(path);
    let original = std::fs::read(&abs).map_err(|source| SyncError::Io { path: abs, source })?;
    let mut out = Latencies::default();
    for i in 0..rounds {
        let mut a = original.clone();
        a.extend_from_slice(
            format!("\n;; formdb probe {i} from the working directory\n").as_bytes(),
        );
        out.dir_to_store.push(dir_to_store(store, dir, path, &a, timeout)?);
        let mut b = original.clone();
        b.extend_from_slice(format!("\n;; formdb probe {i} from the store\n").as_bytes());
        out.store_to_dir.push(store_to_dir(store, dir, path, &b, "formdb-probe", timeout)?);
    }
    dir_to_store(store, dir, path, &original, timeout)?;
    Ok(out)
}

fn stored_hash(store: &Store, path: &str) -> Result<Option<String>> {
    Ok(read::files::stored_hash(store, path)?)
}
