//! Working directory sync: keeps a directory (an ordinary git working tree, `DIR`) and the store
//! in step both ways while `formdb up` runs.
//!
//! Owns: watching `DIR` (`notify`, one non-recursive watch per synced directory), debouncing and
//! batching its changes into one change set (a `git checkout` is one transaction), writing store
//! changes back to `DIR` atomically (temporary file in the same directory, fsync, rename), telling
//! our own writes from others' (no echo), conflicts (both sides changed: the disk wins in the
//! store, the store's text is kept as a draft), the initial re-sync that is also crash recovery,
//! and the per-path state that makes it possible.
//!
//! Must not touch: parsing or resolution of its own (texts from `DIR` become changes through
//! `formdb_engine::import::file_changes` and `change::apply`, like an import); rendering other
//! than the as-stored view (`formdb_engine::query::file_bytes`, the bytes
//! `formdb_projector::views::stored_text` and `formdb_edit::save::read` serve); mounts or
//! protocols. Drafts are never written to `DIR`: it holds the last good text.
//!
//! # Model
//!
//! Per path the sync remembers `h`, the content hash both sides had when they were last in step.
//! With `d` the hash on disk and `s` the store's (`file.hash`/`blob.hash`, absent = `None`):
//! `d == s` is in step; `d == h` means the store changed (write it to `DIR`); `s == h` means the
//! disk changed (import it); neither means both changed: the three texts are merged form by form
//! (`merge`, against the agreed text kept in `sync_base`), the merge is imported and written to
//! `DIR`, and a form changed on both sides takes the disk's text while the store's whole text is
//! kept as a draft whose error names those forms by id (unless the path has a draft already).
//! Without a kept agreed text, or when a side does not parse, the disk's whole file wins.
//! A change of a file right after the sync wrote the store's text over it (an editor or `sed -i`
//! that read the old text first) is merged against the text that write replaced: the nearest,
//! form for form, of the texts the file held lately, leaving out those the disk's text has
//! moved past (it has a form as only a newer text has it). A disk text that is an older text's
//! forms exactly is an undo of what came after or a stale rewrite, and no text tells which: it
//! is merged against the next nearest, and the forms that depends on are conflicts (the disk's
//! text stored, the store's kept as a draft). Blank lines before a form are no change
//! of it (deleting its neighbour leaves them); a form deleted in the store and changed on disk
//! stays, reported as a conflict.
//! Our own writes set `h` to what we wrote, so their watcher events find `d == h == s` and are
//! skipped.
//!
//! # State
//!
//! `h` is kept in the store in a relation of our own, `sync_state {dir, path => hash}`, created
//! with `Store::write` on first start (the engine schema is untouched), keyed by the canonical
//! `DIR` so one store synced with another directory never mistakes that one's files for
//! deletions. It is written after each batch is applied to both sides; a crash between the two
//! leaves an older `h`, which is safe: both sides then hold the same text (`d == s`), and the
//! next start sees them in step. A crash in the middle of a write to `DIR` leaves the old file
//! (rename is atomic) and a temporary file that the next start removes.
//!
//! # Threads
//!
//! Writers outside `formdb up` use the same rules and state without a thread:
//! [`write_back_after_commits`] makes every commit of a store handle write the store's changes
//! to the directory it was imported from ([`origin`], relation `sync_origin`) before the commit
//! returns; [`keep_store_edits`] does the same before `formdb import`, which then never reverts
//! a store edit.
//!
//! [`DirSync::start`] re-syncs synchronously, then one thread waits for watcher events
//! (debounced by [`Options::debounce`]) and polls the store's generation every
//! [`Options::poll`] to notice writes from the mount or MCP.

mod disk;
mod lately;
mod merge;
pub mod probe;
pub mod rules;
mod state;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime};

use formdb_engine::change::{self, Change, ChangeSet, Draft};
use formdb_engine::forms::content_hash;
use formdb_engine::import::{self, Incoming, Quiet};
use formdb_engine::query;
use formdb_engine::read;
use formdb_engine::store::{Store, StoreError};
use formdb_engine::syntax::Lang;
use notify::event::{AccessKind, AccessMode, CreateKind, EventKind, ModifyKind, RenameMode};
use notify::{RecommendedWatcher, RecursiveMode, Watcher};

use crate::disk::Disk;
use crate::rules::Rules;

/// What starting or running the sync can fail with.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("watching the working directory: {0}")]
    Watch(#[from] notify::Error),
    #[error("{0}")]
    Invalid(String),
}

pub type Result<T, E = SyncError> = std::result::Result<T, E>;

/// How long an emptied file is given before it is taken as empty (see `classify`).
const SECOND_LOOK: Duration = Duration::from_millis(50);

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> SyncError + '_ {
    move |source| SyncError::Io { path: path.to_path_buf(), source }
}

/// How the sync runs.
#[derive(Clone, Debug)]
pub struct Options {
    /// History author of the changes it imports from `DIR` (and of conflict drafts).
    pub author: String,
    /// Quiet time after the last watcher event before a batch is handled.
    pub debounce: Duration,
    /// A batch is handled at the latest this long after its first event, even if events keep
    /// coming.
    pub max_batch_wait: Duration,
    /// How long a batch waits past its quiet time for a file being written (created or
    /// modified, and not closed yet) to be closed: read in between, a file truncated and then
    /// written (`>`, an editor's save in place) is empty, and its forms would vanish from the
    /// store with their ids until the text came.
    pub write_wait: Duration,
    /// How often the store's generation is polled.
    pub poll: Duration,
    /// Print errors and conflicts on stderr as they happen (the daemon's log).
    pub log: bool,
}

impl Options {
    pub fn new(author: &str) -> Options {
        Options {
            author: author.to_string(),
            debounce: Duration::from_millis(25),
            max_batch_wait: Duration::from_millis(400),
            write_wait: Duration::from_secs(2),
            poll: Duration::from_millis(10),
            log: false,
        }
    }
}

/// Counters, for a benchmark or a status line.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Stats {
    /// Loop iterations of the sync thread.
    pub ticks: u64,
    /// Watcher events received (access events not counted).
    pub events: u64,
    /// Batches of watcher events handled.
    pub batches: u64,
    /// Full re-syncs (the one at start, watcher overflows, ignore files changed, [`DirSync::rescan`]).
    pub full_rescans: u64,
    /// Change sets applied to the store for changes in `DIR`.
    pub change_sets: u64,
    /// Files imported from `DIR` (new or changed).
    pub files_imported: u64,
    /// Files deleted from the store because they were deleted in `DIR`.
    pub files_deleted_in_store: u64,
    /// Files written to `DIR` from the store.
    pub files_written: u64,
    /// Files removed from `DIR` because the store deleted them.
    pub files_removed: u64,
    /// Paths changed on both sides (the disk won; the store's text became a draft).
    pub conflicts: u64,
    /// Watcher events for paths already in step (our own writes coming back, or no-op writes).
    pub echoes_skipped: u64,
    /// Store-side changes noticed (generation moves handled).
    pub store_changes: u64,
    /// Temporary files of a crashed write removed at start.
    pub temps_removed: u64,
    pub errors: u64,
    pub last_error: Option<String>,
    /// Paths changed on both sides whose forms merged cleanly (each side's changed forms kept).
    pub merges: u64,
    /// The latest conflicts (at most [`KEPT_CONFLICTS`]), oldest first.
    pub conflict_list: Vec<Conflict>,
}

/// How many conflicts [`Stats::conflict_list`] keeps.
pub const KEPT_CONFLICTS: usize = 64;

/// A path changed on both sides: the disk's text is in the file and the store, the store's
/// text is a draft.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Conflict {
    pub path: String,
    /// The ids of the forms changed on both sides (with their names), or empty when the file
    /// could not be merged form by form (no agreed text kept, or a side does not parse).
    pub forms: Vec<String>,
}

enum Msg {
    Fs(notify::Result<notify::Event>),
    Rescan(Sender<Result<(), String>>),
    Stop,
}

struct Shared {
    stop: AtomicBool,
    progress: Mutex<Progress>,
    changed: Condvar,
}

#[derive(Default)]
struct Progress {
    stats: Stats,
    /// Completed loop iterations.
    ticks: u64,
    /// The last iteration found nothing to do.
    idle: bool,
    /// The store generation the sync has caught up with.
    handled_generation: u64,
    running: bool,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Progress> {
        self.progress.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A running sync of one directory with one store. Stops when dropped.
pub struct DirSync {
    shared: Arc<Shared>,
    tx: Sender<Msg>,
    thread: Option<std::thread::JoinHandle<()>>,
    store: Arc<Store>,
    dir: PathBuf,
}

impl DirSync {
    /// Re-sync `dir` with the store (disk changes imported, store changes written back, files
    /// deleted on one side deleted on the other), then keep them in step until stopped.
    pub fn start(store: Arc<Store>, dir: impl AsRef<Path>, author: &str) -> Result<DirSync> {
        DirSync::start_with(store, dir, Options::new(author))
    }

    pub fn start_with(store: Arc<Store>, dir: impl AsRef<Path>, opts: Options) -> Result<DirSync> {
        let (tx, rx) = mpsc::channel();
        let watch_tx = tx.clone();
        let watcher = notify::recommended_watcher(move |ev| {
            let _ = watch_tx.send(Msg::Fs(ev));
        })?;
        let mut worker = Worker::new(store.clone(), dir.as_ref(), opts, Some(watcher))?;
        let shared = worker.shared.clone();
        let root = worker.root.clone();
        // Watches go up before the first look, so nothing changed during it is missed.
        worker.full_reconcile()?;
        worker.publish(true);
        let thread = std::thread::Builder::new()
            .name("formdb-sync".into())
            .spawn(move || worker.run(rx))
            .map_err(io_err(&root))?;
        Ok(DirSync { shared, tx, thread: Some(thread), store, dir: root })
    }

    /// The synced directory (canonical).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The counters so far.
    pub fn stats(&self) -> Stats {
        self.shared.lock().stats.clone()
    }

    /// Wait until the sync has nothing left to do: two loop iterations completed after this call,
    /// the last of which had no watcher events to handle, and the store's generation is the one
    /// it last handled. Returns false on timeout (or if the sync thread has stopped).
    ///
    /// Events the kernel has not delivered yet cannot be waited for; two iterations (at least
    /// two [`Options::poll`] periods) give them time to arrive.
    pub fn wait_idle(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let start = self.shared.lock().ticks;
        loop {
            let generation = query::generation(&self.store).ok();
            let mut p = self.shared.lock();
            loop {
                if !p.running {
                    return false;
                }
                if p.ticks >= start + 2 && p.idle {
                    break;
                }
                let now = Instant::now();
                if now >= deadline {
                    return false;
                }
                p = self
                    .shared
                    .changed
                    .wait_timeout(p, deadline - now)
                    .map(|r| r.0)
                    .unwrap_or_else(|e| e.into_inner().0);
            }
            if generation.is_none_or(|g| g <= p.handled_generation) {
                return true;
            }
            drop(p);
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Re-sync the whole directory now (as at start) and wait for it.
    pub fn rescan(&self, timeout: Duration) -> Result<()> {
        let (tx, rx) = mpsc::channel();
        self.tx
            .send(Msg::Rescan(tx))
            .map_err(|_| SyncError::Invalid("the sync has stopped".into()))?;
        match rx.recv_timeout(timeout) {
            Ok(r) => r.map_err(SyncError::Invalid),
            Err(_) => {
                Err(SyncError::Invalid(format!("the re-sync did not finish within {timeout:?}")))
            }
        }
    }

    /// Handle what is pending (watcher events received, store changes), then stop. Returns the
    /// final counters. Dropping without `stop` abandons pending work, as a crash would; the next
    /// start re-syncs it.
    pub fn stop(mut self) -> Stats {
        let _ = self.tx.send(Msg::Stop);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.stats()
    }
}

impl Drop for DirSync {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Bring `dir` and the store in step now, both ways, by the rules and with the state of
/// [`DirSync`] (a path changed on both sides is merged form by form; the disk wins a form
/// changed on both, the store's text is kept as a draft), and record `dir` as the directory
/// writers write back to. What `formdb import` does once a store has been imported.
pub fn sync_now(store: Arc<Store>, dir: &Path, opts: Options) -> Result<Stats> {
    let mut worker = Worker::new(store, dir, opts, None)?;
    worker.full_reconcile()?;
    Ok(worker.stats)
}

/// Before an import of `dir`: write the store's edits that `dir` does not have yet to it (merged
/// form by form with what changed there too), so the import that follows takes only what
/// changed in `dir` and reverts nothing. Nothing to do for a directory never synced.
pub fn keep_store_edits(store: Arc<Store>, dir: &Path, author: &str) -> Result<Stats> {
    let mut worker = Worker::new(store, dir, Options::new(author), None)?;
    if worker.synced.is_empty() {
        return Ok(worker.stats);
    }
    let cands = worker.store_side_candidates()?;
    if !cands.is_empty() {
        worker.reconcile(cands, false)?;
    }
    Ok(worker.stats)
}

/// Record `dir` as in step with the store as it is now (after an import of it): every path both
/// sides hold alike gets its agreed hash and text.
pub fn record_in_step(store: Arc<Store>, dir: &Path, author: &str) -> Result<Stats> {
    sync_now(store, dir, Options::new(author))
}

/// The directory the store writes back to: the one it was last imported from or synced with.
pub fn origin(store: &Store) -> Result<Option<PathBuf>> {
    Ok(state::origin(store)?.map(PathBuf::from))
}

/// What a write-back did.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "write_back", rename_all = "snake_case")]
pub enum WriteBack {
    /// The store was never imported from a directory: nothing to write to.
    NoDirectory,
    /// The directory it was imported from is gone: nothing was written.
    Gone { dir: PathBuf },
    /// Written (or nothing to write).
    Done { dir: PathBuf, stats: Stats },
}

impl WriteBack {
    /// One line for a user: what reached the directory, or why nothing did.
    pub fn describe(&self) -> String {
        match self {
            WriteBack::NoDirectory => "not written to any directory: the store was not imported from one (`formdb import DIR` records it)".into(),
            WriteBack::Gone { dir } => format!("not written to {}: the directory is gone", dir.display()),
            WriteBack::Done { dir, stats } => {
                let mut s = format!(
                    "written back to {}: {} file(s) written, {} removed",
                    dir.display(),
                    stats.files_written,
                    stats.files_removed
                );
                if stats.files_imported + stats.files_deleted_in_store > 0 {
                    s.push_str(&format!(
                        ", {} changed there taken in",
                        stats.files_imported + stats.files_deleted_in_store
                    ));
                }
                for c in &stats.conflict_list {
                    s.push_str("; ");
                    s.push_str(&describe(c));
                }
                if let Some(e) = &stats.last_error {
                    s.push_str(&format!("; {} error(s), the last: {e}", stats.errors));
                }
                s
            }
        }
    }

    /// A write-back that could not run, as one that failed with its error.
    fn or_failed(outcome: Result<WriteBack>) -> WriteBack {
        outcome.unwrap_or_else(|e| WriteBack::Done {
            dir: PathBuf::new(),
            stats: Stats { errors: 1, last_error: Some(e.to_string()), ..Stats::default() },
        })
    }

    /// Nothing to write to, or nothing written, taken in, removed, conflicting or failed.
    fn did_nothing(&self) -> bool {
        match self {
            WriteBack::NoDirectory => true,
            WriteBack::Gone { .. } => false,
            WriteBack::Done { stats, .. } => {
                stats.files_written
                    + stats.files_removed
                    + stats.files_imported
                    + stats.files_deleted_in_store
                    + stats.conflicts
                    + stats.errors
                    == 0
            }
        }
    }

    /// Files that did not reach the directory (refused, failed) or conflicts.
    pub fn is_trouble(&self) -> bool {
        match self {
            WriteBack::NoDirectory | WriteBack::Gone { .. } => true,
            WriteBack::Done { stats, .. } => stats.errors > 0 || stats.conflicts > 0,
        }
    }
}

/// Write what the store changed since it and its directory last agreed to that directory now,
/// by [`DirSync`]'s rules and state: as-stored text, atomic writes, no echo; a path changed in
/// the directory too is merged form by form, the disk winning a form changed on both sides.
/// For writers outside `formdb up` (a standalone `formdb mcp` or `formdb mount`, `fmt`, …),
/// after each commit.
pub fn write_back_now(store: Arc<Store>, author: &str) -> Result<WriteBack> {
    let Some(dir) = origin(&store)? else { return Ok(WriteBack::NoDirectory) };
    if !dir.is_dir() {
        return Ok(WriteBack::Gone { dir });
    }
    let mut worker = Worker::new(store, &dir, Options::new(author), None)?;
    let cands = worker.store_side_candidates()?;
    if !cands.is_empty() {
        worker.reconcile(cands, false)?;
    }
    Ok(WriteBack::Done { dir: worker.root.clone(), stats: worker.stats })
}

/// What the write-backs after commits did, for the command to report.
#[derive(Clone, Default)]
pub struct WriteBacks(Arc<Mutex<Vec<WriteBack>>>);

impl WriteBacks {
    /// Everything reported since the last call.
    pub fn take(&self) -> Vec<WriteBack> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

thread_local! {
    /// Set while this thread writes back: the write-back's own commits do not start another.
    static WRITING_BACK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Make every commit through `store` write back to the store's directory before the commit
/// returns ([`write_back_now`]). Outcomes that leave files behind (no directory, gone, refused,
/// a conflict) are printed on stderr with `log`; all are kept in the returned [`WriteBacks`].
///
/// First, before this process writes anything, it writes back what an earlier writer committed
/// and never wrote: one killed between its commit and its write-back left the directory behind
/// the store, and a save here that changes nothing commits nothing, so no hook would ever catch
/// the directory up while that save is acknowledged.
pub fn write_back_after_commits(store: &Arc<Store>, author: &str, log: bool) -> WriteBacks {
    let reports = WriteBacks::default();
    let caught_up = WriteBack::or_failed(write_back_now(store.clone(), author));
    // Nothing to catch up with is the common start: say nothing.
    if !caught_up.did_nothing() {
        if log {
            tracing::warn!("formdb: at start: {}", caught_up.describe());
        }
        reports.0.lock().unwrap_or_else(|p| p.into_inner()).push(caught_up);
    }
    let kept = reports.clone();
    let weak = Arc::downgrade(store);
    let author = author.to_string();
    store.set_after_commit(Some(Arc::new(move || {
        if WRITING_BACK.with(|w| w.replace(true)) {
            return;
        }
        let outcome = match weak.upgrade() {
            Some(store) => write_back_now(store, &author),
            None => Ok(WriteBack::NoDirectory),
        };
        WRITING_BACK.with(|w| w.set(false));
        let outcome = WriteBack::or_failed(outcome);
        if log && outcome.is_trouble() {
            tracing::warn!("formdb: {}", outcome.describe());
        }
        let mut all = kept.0.lock().unwrap_or_else(|p| p.into_inner());
        if all.len() >= 1024 {
            all.remove(0);
        }
        all.push(outcome);
    })));
    reports
}

/// A stored path's hash and whether it is a Clojure `file` or a `blob`.
#[derive(Clone, Debug)]
struct Entry {
    hash: String,
    blob: bool,
}

/// What reconciling one path decided.
#[derive(Clone)]
enum Action {
    /// Both sides hold this (hash, or absent), with the bytes when they were read.
    InStep(Option<String>, Option<Vec<u8>>),
    /// Import the disk's content (`None`: delete from the store), or the merge of both sides'
    /// forms; `merged_from` is then the disk's hash, and the merge is written back to `DIR`.
    ToStore { found: Option<disk::Found>, conflict: Option<Conflict>, merged_from: Option<String> },
    /// Write the store's content to disk; the disk held `expect` when this was decided.
    ToDisk { expect: Option<String> },
}

impl Action {
    /// Whether the disk had the file when the action was decided; `None` where the disk's
    /// side is not what it was decided from (the store's text goes to disk, and the write-back
    /// looks at the file again).
    fn disk_had(&self) -> Option<bool> {
        match self {
            Action::InStep(hash, _) => Some(hash.is_some()),
            Action::ToStore { found, .. } => Some(found.is_some()),
            Action::ToDisk { .. } => None,
        }
    }
}

/// How long a batch waits for the new name of a file renamed (see [`Worker::gather`]).
const RENAME_WAIT: Duration = Duration::from_millis(250);

/// Watcher events gathered for one batch.
#[derive(Default)]
struct Batch {
    paths: BTreeSet<String>,
    /// Paths written in this batch whose writer has not closed them yet.
    writing: BTreeSet<String>,
    /// Renames whose old name this batch has and whose new name it has not yet (by the
    /// watcher's cookie), with when the old name came.
    renaming: HashMap<usize, Instant>,
    full: bool,
    rules_changed: bool,
    acks: Vec<Sender<Result<(), String>>>,
    stop: bool,
    events: u64,
}

impl Batch {
    fn is_empty(&self) -> bool {
        self.paths.is_empty() && !self.full && !self.rules_changed && self.acks.is_empty()
    }
}

struct Worker {
    store: Arc<Store>,
    root: PathBuf,
    /// `sync_state` key: the canonical directory.
    key: String,
    opts: Options,
    rules: Rules,
    /// Per path, the hash both sides had when last in step.
    synced: HashMap<String, String>,
    /// Entries of `synced` changed since last persisted.
    dirty: BTreeMap<String, Option<String>>,
    /// Writes to `DIR` announced in the store (`sync_intent`) and not yet settled: path → the
    /// hash written (`None`: removed). Left over from a crash, they tell our own last write
    /// from someone else's change.
    intents: HashMap<String, Option<String>>,
    disk: Disk,
    /// `None` in a one-shot sync ([`sync_now`], [`write_back_now`]).
    watcher: Option<RecommendedWatcher>,
    /// `sync_base` rows to write with `dirty` (`None`: drop the row).
    bases: BTreeMap<String, Option<Vec<u8>>>,
    /// The texts paths held lately (see [`lately`]).
    replaced: lately::Lately,
    watched: HashSet<PathBuf>,
    shared: Arc<Shared>,
    stats: Stats,
}

impl Worker {
    fn new(
        store: Arc<Store>,
        dir: &Path,
        opts: Options,
        watcher: Option<RecommendedWatcher>,
    ) -> Result<Worker> {
        let root = dir.canonicalize().map_err(io_err(dir))?;
        if !root.is_dir() {
            return Err(SyncError::Invalid(format!("{}: not a directory", root.display())));
        }
        state::ensure(&store)?;
        let key = root.to_string_lossy().into_owned();
        state::set_origin(&store, &key)?;
        let synced = state::load(&store, &key)?;
        let intents = state::load_intents(&store, &key)?;
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            progress: Mutex::new(Progress { running: true, ..Progress::default() }),
            changed: Condvar::new(),
        });
        Ok(Worker {
            store,
            rules: Rules::load(&root, std::iter::empty()),
            root,
            key,
            opts,
            synced,
            dirty: BTreeMap::new(),
            intents,
            disk: Disk::default(),
            watcher,
            watched: HashSet::new(),
            bases: BTreeMap::new(),
            replaced: lately::Lately::default(),
            shared,
            stats: Stats::default(),
        })
    }

    /// The paths the store changed since it and the directory last agreed.
    fn store_side_candidates(&self) -> Result<BTreeMap<String, bool>> {
        let entries = store_entries(&self.store, None)?;
        let mut cands: BTreeMap<String, bool> = BTreeMap::new();
        for (p, e) in &entries {
            if self.synced.get(p) != Some(&e.hash) {
                cands.insert(p.clone(), false);
            }
        }
        for p in self.synced.keys() {
            if !entries.contains_key(p) {
                cands.insert(p.clone(), false);
            }
        }
        cands.retain(|p, _| self.rules.managed(p));
        Ok(cands)
    }

    fn run(mut self, rx: Receiver<Msg>) {
        loop {
            if self.shared.stop.load(Ordering::SeqCst) {
                break;
            }
            let mut batch = Batch::default();
            match rx.recv_timeout(self.opts.poll) {
                Ok(m) => {
                    if self.take(m, &mut batch) {
                        self.gather(&rx, &mut batch);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            if self.shared.stop.load(Ordering::SeqCst) {
                break;
            }
            let quiet = batch.is_empty();
            let stop = batch.stop;
            if !quiet {
                let acks = std::mem::take(&mut batch.acks);
                let r = self.handle_batch(batch);
                if let Err(e) = &r {
                    self.error(e.to_string());
                }
                for ack in acks {
                    let _ = ack.send(r.as_ref().map(|_| ()).map_err(|e| e.to_string()));
                }
            }
            let store_quiet = match self.check_store() {
                Ok(q) => q,
                Err(e) => {
                    self.error(e.to_string());
                    true
                }
            };
            self.stats.ticks += 1;
            self.publish(quiet && store_quiet);
            if stop {
                break;
            }
        }
        self.shared.lock().running = false;
        self.shared.changed.notify_all();
    }

    fn publish(&self, idle: bool) {
        let mut p = self.shared.lock();
        p.stats = self.stats.clone();
        p.ticks += 1;
        p.idle = idle;
        drop(p);
        self.shared.changed.notify_all();
    }

    fn set_handled(&self, generation: u64) {
        self.shared.lock().handled_generation = generation;
    }

    fn handled(&self) -> u64 {
        self.shared.lock().handled_generation
    }

    fn error(&mut self, message: String) {
        if self.opts.log {
            tracing::warn!("formdb sync: {message}");
        }
        self.stats.errors += 1;
        self.stats.last_error = Some(message);
    }

    fn rel(&self, path: &Path) -> Option<String> {
        let rel = path.strip_prefix(&self.root).ok()?;
        let parts: Vec<String> =
            rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
        if parts.is_empty() {
            return None;
        }
        Some(parts.join("/"))
    }

    /// Take more messages into `batch` until none that matters came for `debounce` (or
    /// `max_batch_wait` passed since the first). Events that do not matter (the store's own
    /// files under `.formdb`, scratch files, access events) do not hold the batch open: a busy
    /// store makes them all the time.
    fn gather(&mut self, rx: &Receiver<Msg>, batch: &mut Batch) {
        let first = Instant::now();
        let mut quiet_at = first + self.opts.debounce;
        while !batch.stop {
            let now = Instant::now();
            // A file still being written holds the batch until its writer closes it.
            let mut until = match batch.writing.is_empty() {
                true => quiet_at.min(first + self.opts.max_batch_wait),
                false => quiet_at.max(first + self.opts.write_wait),
            };
            // A rename's two names go in one batch: handled apart, the old name's file is
            // deleted from the store and the new one's forms are new, and they lose their ids.
            // The watcher sends them one after the other, so only a busy machine parts them;
            // a file moved out of the directory has no new name, and holds the batch briefly.
            if let Some(from) = batch.renaming.values().min() {
                until = until.max(*from + RENAME_WAIT);
            }
            if now >= until {
                break;
            }
            match rx.recv_timeout(until - now) {
                Ok(m) => {
                    if self.take(m, batch) {
                        quiet_at = Instant::now() + self.opts.debounce;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
    }

    /// Add a message to the batch; false if it changes nothing the batch will do.
    fn take(&mut self, m: Msg, batch: &mut Batch) -> bool {
        match m {
            Msg::Fs(Ok(ev)) => {
                if ev.need_rescan() {
                    batch.full = true;
                }
                // Whether the event opens a write of its paths (true) or ends one (false).
                let writes = match ev.kind {
                    EventKind::Access(AccessKind::Close(AccessMode::Write)) => Some(false),
                    EventKind::Access(_) => return ev.need_rescan(),
                    EventKind::Create(CreateKind::File)
                    | EventKind::Modify(ModifyKind::Data(_)) => Some(true),
                    _ => None,
                };
                if let (EventKind::Modify(ModifyKind::Name(mode)), Some(cookie)) =
                    (ev.kind, ev.attrs.tracker())
                {
                    match mode {
                        RenameMode::From => {
                            batch.renaming.insert(cookie, Instant::now());
                        }
                        RenameMode::To | RenameMode::Both => {
                            batch.renaming.remove(&cookie);
                        }
                        _ => {}
                    }
                }
                let mut counted = false;
                for p in &ev.paths {
                    let Some(rel) = self.rel(p) else { continue };
                    let first = rel.split('/').next().unwrap_or("");
                    if rules::SKIP_DIRS.contains(&first) {
                        continue;
                    }
                    let name = rel.rsplit('/').next().unwrap_or("");
                    if rules::is_rule_file(name) {
                        batch.rules_changed = true;
                        counted = true;
                    }
                    if rules::is_scratch(name) {
                        continue;
                    }
                    counted = true;
                    match writes {
                        // Only files the sync takes: a log file an ignore rule leaves out is
                        // written all the time.
                        Some(true) if self.rules.managed(&rel) => batch.writing.insert(rel.clone()),
                        Some(true) => false,
                        Some(false) => batch.writing.remove(&rel),
                        None => false,
                    };
                    batch.paths.insert(rel);
                }
                if counted {
                    batch.events += 1;
                }
                counted || ev.need_rescan()
            }
            Msg::Fs(Err(e)) => {
                self.error(format!("watcher: {e}"));
                batch.full = true;
                true
            }
            Msg::Rescan(ack) => {
                batch.full = true;
                batch.acks.push(ack);
                true
            }
            Msg::Stop => {
                batch.stop = true;
                true
            }
        }
    }

    fn handle_batch(&mut self, batch: Batch) -> Result<()> {
        self.stats.events += batch.events;
        if batch.full || batch.rules_changed {
            return self.full_reconcile();
        }
        if batch.paths.is_empty() {
            return Ok(());
        }
        self.stats.batches += 1;
        // Candidate paths, with whether their content must be read (a watcher event says it
        // changed) or may come from the stat cache (found by listing a directory).
        let mut cands: BTreeMap<String, bool> = BTreeMap::new();
        for rel in batch.paths {
            let abs = self.root.join(&rel);
            match std::fs::symlink_metadata(&abs) {
                Ok(m) if m.is_dir() => {
                    if self.rules.managed_dir(&rel) {
                        // Watched again, with what is below it: a directory removed and made
                        // anew (the sync's own write-back prunes a directory it empties, then
                        // writes a file in it again; a checkout) is another directory, and the
                        // watch of the old one, still in `watched`, sees nothing of it.
                        self.watched.retain(|w| !w.starts_with(&abs));
                        self.watch_tree(&rel, &mut cands);
                    }
                }
                Ok(_) => {
                    cands.insert(rel, true);
                }
                Err(_) => {
                    // Gone: a file, or a directory with everything synced below it.
                    let prefix = format!("{rel}/");
                    for p in self.synced.keys().filter(|p| p.starts_with(&prefix)) {
                        cands.entry(p.clone()).or_insert(true);
                    }
                    self.watched.retain(|w| !w.starts_with(&abs));
                    cands.insert(rel, true);
                }
            }
        }
        self.reconcile(cands, true)
    }

    /// The other half of each rename in `plan` (the classified `cands`) in one directory, not
    /// in `cands`. A rename's two names are taken in one change set, so the file's forms keep
    /// their ids; its events may come in two batches even so, when another event (of our own
    /// write-back, of a file deleted just before) opens a batch just before the rename and the
    /// batch reads the new name: the old one was then deleted in the next batch, and the forms
    /// at the new name were new, or took the ids of the forms the new name held before.
    /// - Gone (synced, not on disk): a file whose stored namespace a text the plan read
    ///   declares. Only those: a file an editor's save renames away (Emacs, to `name~`) and
    ///   writes anew is gone for an instant too, and deleted then its forms would lose their
    ///   ids.
    /// - Come (on disk, not synced): every one in a directory where the plan deletes a file,
    ///   or read one that is gone since.
    ///
    /// Managed paths only. (A path read before the rename is read again: see
    /// [`Worker::reconcile`].)
    fn renamed_halves(
        &self,
        cands: &BTreeMap<String, bool>,
        plan: &[(String, Action)],
    ) -> BTreeMap<String, bool> {
        let dirs: BTreeSet<&str> = cands.keys().map(|rel| dir_of(rel)).collect();
        // Each directory listed once, each name with whether it is a file: what is gone, what
        // came and what the plan read that is gone since are told from its names.
        let mut listed: BTreeMap<&str, BTreeMap<String, bool>> = BTreeMap::new();
        for dir in &dirs {
            let abs = if dir.is_empty() { self.root.clone() } else { self.root.join(dir) };
            let entries = std::fs::read_dir(abs).into_iter().flatten().flatten();
            let names = entries.map(|e| {
                let file = e.file_type().is_ok_and(|t| t.is_file());
                (e.file_name().to_string_lossy().into_owned(), file)
            });
            listed.insert(dir, names.collect());
        }
        let in_listing = |rel: &str| {
            let name = rel.rsplit_once('/').map_or(rel, |(_, n)| n);
            listed.get(dir_of(rel)).is_some_and(|names| names.contains_key(name))
        };
        // Directories where the plan deletes a file, or read one that is gone since (the plan's
        // paths are all in `cands`, so their directories are listed).
        let deleting: BTreeSet<&str> = plan
            .iter()
            .filter(|(path, a)| a.disk_had().is_some_and(|had| !had || !in_listing(path)))
            .map(|(path, _)| dir_of(path))
            .collect();
        let mut read_ns: Option<BTreeSet<String>> = None;
        let mut halves = BTreeMap::new();
        let gone =
            self.synced.keys().filter(|p| dirs.contains(dir_of(p)) && !cands.contains_key(*p));
        for rel in gone.filter(|p| !in_listing(p)) {
            // The namespaces the texts read declare, found once there is a file gone.
            let read_ns = read_ns.get_or_insert_with(|| declared_namespaces(plan));
            let stored_ns = read::files::ns_of(&self.store, rel).ok().flatten();
            if stored_ns.is_some_and(|ns| read_ns.contains(&ns)) {
                halves.insert(rel.clone(), true);
            }
        }
        for (dir, names) in listed.iter().filter(|(dir, _)| deleting.contains(*dir)) {
            for name in names.iter().filter(|(_, file)| **file).map(|(name, _)| name) {
                let rel = if dir.is_empty() { name.clone() } else { format!("{dir}/{name}") };
                let come = !self.synced.contains_key(&rel) && !cands.contains_key(&rel);
                if come && self.rules.managed(&rel) {
                    halves.insert(rel, true);
                }
            }
        }
        halves
    }

    /// Whether `rel` is on disk (as anything: a file read is gone only when nothing is there).
    fn on_disk(&self, rel: &str) -> bool {
        std::fs::symlink_metadata(self.root.join(rel)).is_ok()
    }

    /// Watch `rel` (a directory) and every synced directory below it; add the files below it to
    /// `cands`.
    fn watch_tree(&mut self, rel: &str, cands: &mut BTreeMap<String, bool>) {
        let mut stack = vec![rel.to_string()];
        while let Some(d) = stack.pop() {
            let abs = if d.is_empty() { self.root.clone() } else { self.root.join(&d) };
            if let Some(watcher) = self.watcher.as_mut().filter(|_| !self.watched.contains(&abs)) {
                match watcher.watch(&abs, RecursiveMode::NonRecursive) {
                    Ok(()) => {
                        self.watched.insert(abs.clone());
                    }
                    Err(e) => {
                        self.error(format!("watching {}: {e}", abs.display()));
                        continue;
                    }
                }
            }
            let Ok(entries) = std::fs::read_dir(&abs) else { continue };
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let child = if d.is_empty() { name } else { format!("{d}/{name}") };
                let Ok(t) = e.file_type() else { continue };
                if t.is_dir() {
                    if self.rules.managed_dir(&child) {
                        stack.push(child);
                    }
                } else if t.is_file() && self.rules.managed(&child) {
                    cands.entry(child).or_insert(false);
                }
            }
        }
    }

    /// Compare everything: the files `walk` lists, every stored path and every synced path.
    fn full_reconcile(&mut self) -> Result<()> {
        self.stats.full_rescans += 1;
        let generation = query::generation(&self.store)?;
        let files = import::walk(&self.root)?;
        self.stats.temps_removed += disk::clean_temps(&files) as u64;
        self.rules = Rules::load(&self.root, files.iter().map(|(r, _)| r.as_str()));
        let mut cands: BTreeMap<String, bool> = BTreeMap::new();
        self.watched.retain(|w| w.is_dir());
        self.watch_tree("", &mut cands);
        for (rel, _) in &files {
            cands.entry(rel.clone()).or_insert(false);
        }
        for p in query::paths(&self.store)? {
            cands.entry(p).or_insert(false);
        }
        for p in self.synced.keys() {
            cands.entry(p.clone()).or_insert(false);
        }
        let before = self.handled();
        self.set_handled(generation.max(before));
        self.reconcile(cands, false)
    }

    /// Notice writes to the store that are not ours. Returns true if there were none.
    fn check_store(&mut self) -> Result<bool> {
        let generation = query::generation(&self.store)?;
        if generation <= self.handled() {
            return Ok(true);
        }
        self.stats.store_changes += 1;
        self.set_handled(generation);
        let cands = self.store_side_candidates()?;
        if cands.is_empty() {
            return Ok(true);
        }
        self.reconcile(cands, false)?;
        Ok(false)
    }

    /// Bring the candidate paths in step, both ways.
    fn reconcile(&mut self, mut cands: BTreeMap<String, bool>, from_events: bool) -> Result<()> {
        cands.retain(|p, _| self.rules.managed(p));
        if cands.is_empty() {
            return Ok(());
        }
        let plan = {
            // Held from the first read of the store to the commit of what the disk brings, as
            // every edit holds it: a writer committing in between (an agent's `replace_form`
            // of another form of the file) would otherwise be overwritten by a change set
            // computed from the text before it, and its acknowledged edit lost.
            let store = self.store.clone();
            let _writer = store.writer()?;
            let g0 = query::generation(&self.store)?;
            let mut entries = store_entries(&self.store, Some(&cands))?;
            let mut plan = self.classify(&cands, &entries, from_events);
            // Looked for once the texts are read: a file read at a rename's new name was
            // renamed before, and its old name is gone by now. Again once the halves found are
            // read: a file come is the new name of a file gone, told by the namespace its text
            // declares. Each round takes only paths not taken before, so it ends.
            loop {
                let mut halves = match from_events {
                    true => self.renamed_halves(&cands, &plan),
                    false => BTreeMap::new(),
                };
                if halves.is_empty() {
                    break;
                }
                // A path read before the rename and renamed since is read again: taken as
                // read, its text stood at both names, and its forms at the new one were new.
                plan.retain(|(path, action)| {
                    let Some(found) = action.disk_had() else { return true };
                    let again = found != self.on_disk(path);
                    if again {
                        halves.insert(path.clone(), true);
                    }
                    !again
                });
                entries.extend(store_entries(&self.store, Some(&halves))?);
                plan.extend(self.classify(&halves, &entries, from_events));
                cands.extend(halves);
            }
            if plan.iter().any(|(_, a)| matches!(a, Action::ToStore { .. })) {
                let changes = self.store_changes(&plan, &entries)?;
                self.import(&plan, changes, g0)?;
            }
            plan
        };
        // Writes to DIR are announced in the store first (see `intents`).
        let mut writes = Vec::new();
        let mut announced = BTreeMap::new();
        for (path, action) in plan {
            match action {
                Action::InStep(h, bytes) => self.mark(&path, h, bytes),
                Action::ToStore { found: Some(found), merged_from: Some(disk), .. }
                    if found.hash != disk =>
                {
                    // The merge goes to DIR too, if the store took it: with what the store took
                    // since (an agent's edit). Left out, the disk kept the text merged from
                    // while the state said it held the merge, and the next change of it was
                    // merged against the wrong text: its stale forms won as conflicts.
                    if self.synced.get(&path) == Some(&found.hash) {
                        let bytes = query::file_bytes(&self.store, &path)?;
                        announced.insert(path.clone(), bytes.as_deref().map(content_hash));
                        writes.push((path, Some(disk), bytes));
                    }
                }
                Action::ToStore { .. } => {}
                Action::ToDisk { expect } => {
                    let bytes = query::file_bytes(&self.store, &path)?;
                    announced.insert(path.clone(), bytes.as_deref().map(content_hash));
                    writes.push((path, expect, bytes));
                }
            }
        }
        state::save_intents(&self.store, &self.key, &announced)?;
        self.intents.extend(announced);
        for (path, expect, bytes) in writes {
            if let Err(e) = self.write_back(&path, expect, bytes) {
                self.error(e.to_string());
            }
        }
        self.persist()
    }

    fn classify(
        &mut self,
        cands: &BTreeMap<String, bool>,
        entries: &HashMap<String, Entry>,
        from_events: bool,
    ) -> Vec<(String, Action)> {
        let mut plan = Vec::new();
        let empty = content_hash(b"");
        for (path, read) in cands {
            let mut found = self.disk.find(&self.root, path, !read);
            // A writer that truncates and then writes (`>`, `std::fs::write`, editors that
            // write in place) leaves the file empty for a moment. Read then, a stored file
            // would be emptied in one change set and filled again in the next, and its forms
            // would vanish for readers in between: an empty file where the store has text
            // gets a second look a little later.
            if entries.contains_key(path)
                && found.as_ref().is_ok_and(|f| f.as_ref().is_some_and(|f| f.hash == empty))
            {
                std::thread::sleep(SECOND_LOOK);
                found = self.disk.find(&self.root, path, false);
            }
            let found = match found {
                Ok(f) => f,
                Err(e) => {
                    // Unreadable now (not gone): leave it for a later event.
                    self.error(format!("{path}: {e}"));
                    continue;
                }
            };
            let d_owned = found.as_ref().map(|f| f.hash.clone());
            let d = d_owned.as_deref();
            let s = entries.get(path).map(|e| e.hash.as_str());
            let synced = self.synced.get(path).cloned();
            let mut h = synced.as_deref();
            // Our own write, made just before a crash that kept its `sync_state` row from
            // being written: the disk holds what the store held then.
            if self.intents.get(path).is_some_and(|i| i.as_deref() == d) {
                h = d;
            }
            let action = if d == s {
                if from_events && *read {
                    self.stats.echoes_skipped += 1;
                }
                Action::InStep(d.map(str::to_string), found.and_then(|f| f.bytes))
            } else if d == h {
                Action::ToDisk { expect: d.map(str::to_string) }
            } else {
                let found = match found.map(|f| self.with_bytes(path, f)).transpose() {
                    Ok(f) => f,
                    Err(e) => {
                        self.error(e.to_string());
                        continue;
                    }
                };
                // The disk changed shortly after we wrote the store's text over its old one
                // (an editor or `sed -i` that read the file first, maybe before several of
                // our writes): merged against the text it was edited from, the one of the
                // texts the file held lately that is closest to the disk's, so the store's
                // edits we wrote survive whether or not the store moved again since.
                // One of those texts itself coming back is a revert (`git checkout`), not
                // an edit of it: merged against the agreed text, the disk wins its forms.
                let recent = self.recent_replaced(path);
                let revert =
                    recent.iter().any(|(old, ours)| *ours && Some(content_hash(old).as_str()) == d);
                let agreed = state::base(&self.store, &self.key, path)
                    .ok()
                    .flatten()
                    .filter(|b| h.is_some_and(|h| content_hash(b) == h));
                let whole = Action::ToStore {
                    found: found.clone(),
                    // The disk's whole text wins; the store's is kept if it moved too.
                    conflict: (s != h).then(|| Conflict { path: path.clone(), forms: Vec::new() }),
                    merged_from: None,
                };
                let recent = recent.into_iter().map(|(old, _)| old).collect::<Vec<_>>();
                let action = if !revert && !recent.is_empty() {
                    match edited_from(path, found.as_ref(), recent, agreed) {
                        Some(EditedFrom { base, caught_up, older }) => {
                            if caught_up {
                                self.replaced.forget(path);
                            }
                            self.merge_sides(path, Some(base), found.clone(), older)
                        }
                        None => None,
                    }
                    .unwrap_or(whole)
                } else if s == h {
                    whole
                } else {
                    self.merge_sides(path, agreed, found.clone(), None).unwrap_or(whole)
                };
                // A text merged into the store may stay on disk a while (the merge's write
                // back waits for the store, or finds the file changed again), and a writer may
                // edit it meanwhile: it is one of the texts the file held lately.
                if let (Action::ToStore { merged_from: Some(_), .. }, Some(bytes)) =
                    (&action, found.as_ref().and_then(|f| f.bytes.clone()))
                {
                    self.replaced.remember_disk_text(path, bytes, SystemTime::now());
                }
                action
            };
            plan.push((path.clone(), action));
        }
        plan
    }

    /// The texts `path` held lately, newest first (see [`lately::Lately::recent`]).
    fn recent_replaced(&mut self, path: &str) -> Vec<(Vec<u8>, bool)> {
        let root = &self.root;
        self.replaced.recent(path, || git_index_time(root), SystemTime::now())
    }

    /// Keep `text` as one `path` held lately (`ours`: one of our writes replaced it).
    fn remember(&mut self, path: &str, text: Vec<u8>, ours: bool) {
        self.replaced.remember(path, text, ours, SystemTime::now());
    }

    /// `found` with its bytes read, if they came from the stat cache.
    fn with_bytes(&self, path: &str, found: disk::Found) -> Result<disk::Found> {
        if found.bytes.is_some() {
            return Ok(found);
        }
        let abs = self.root.join(path);
        let bytes = disk::read(&self.root, path).map_err(io_err(&abs))?;
        Ok(disk::Found { hash: content_hash(&bytes), bytes: Some(bytes) })
    }

    /// A path changed on both sides since `base`: merged form by form when all three texts
    /// parse; `None` otherwise (the caller decides for the whole file).
    /// `older`: see [`merge::merge`].
    fn merge_sides(
        &self,
        path: &str,
        base: Option<Vec<u8>>,
        found: Option<disk::Found>,
        older: Option<merge::FormTexts>,
    ) -> Option<Action> {
        let lang = Lang::from_path(path)?;
        let disk = found.as_ref()?;
        let disk_text = std::str::from_utf8(disk.bytes.as_deref()?).ok()?;
        let base = base?;
        let base = std::str::from_utf8(&base).ok()?;
        let stored = query::file_bytes(&self.store, path).ok()??;
        let stored = std::str::from_utf8(&stored).ok()?;
        let m = merge::merge(path, lang, base, stored, disk_text, older.as_ref())?;
        let conflict = if m.conflicts.is_empty() && m.kept_deleted.is_empty() {
            None
        } else {
            let ids = top_level_ids(&self.store, path).unwrap_or_default();
            let forms = m
                .conflicts
                .iter()
                .zip(&m.labels)
                .map(|(&i, label)| match ids.get(i) {
                    Some(id) => format!("{id} {label}"),
                    None => label.clone(),
                })
                .chain(m.kept_deleted.iter().cloned())
                .collect();
            Some(Conflict { path: path.to_string(), forms })
        };
        let bytes = m.text.into_bytes();
        Some(Action::ToStore {
            found: Some(disk::Found { hash: content_hash(&bytes), bytes: Some(bytes) }),
            conflict,
            merged_from: Some(disk.hash.clone()),
        })
    }

    /// The change set that makes the store hold the disk's side of the `ToStore` paths.
    fn store_changes(
        &mut self,
        plan: &[(String, Action)],
        entries: &HashMap<String, Entry>,
    ) -> Result<Vec<Change>> {
        let mut changes = Vec::new();
        let mut incoming = Vec::new();
        let mut removals = import::Removals::default();
        for (path, action) in plan {
            let Action::ToStore { found, conflict, .. } = action else { continue };
            if let Some(c) = conflict.as_ref().filter(|_| entries.contains_key(path)) {
                if let Some(d) = self.conflict_draft(c)? {
                    changes.push(Change::PutDraft(d));
                }
            }
            match found {
                Some(f) => {
                    let bytes = match &f.bytes {
                        Some(b) => b.clone(),
                        None => std::fs::read(self.root.join(path))
                            .map_err(io_err(&self.root.join(path)))?,
                    };
                    if Lang::from_path(path).is_some() {
                        incoming.push(Incoming { path: path.clone(), bytes });
                    } else {
                        let hash = content_hash(&bytes);
                        changes.push(Change::PutBlob { path: path.clone(), hash, content: bytes });
                    }
                }
                None => match entries.get(path) {
                    Some(e) if e.blob => changes.push(Change::DeleteBlob { path: path.clone() }),
                    Some(_) => {
                        removals.removed.push(path.clone());
                        changes.push(Change::DeleteFile { path: path.clone() })
                    }
                    None => {}
                },
            }
        }
        if !incoming.is_empty() {
            let (more, _errors) =
                import::file_changes_with_removals(&self.store, incoming, &removals, &Quiet)?;
            changes.extend(more);
        }
        Ok(changes)
    }

    /// The store's text of `path`, kept as a draft because the disk's version wins — unless the
    /// path has a draft already (a user's unsaved text is worth more than a text the history
    /// holds too).
    fn conflict_draft(&self, conflict: &Conflict) -> Result<Option<Draft>> {
        let path = conflict.path.as_str();
        if read::drafts::exists(&self.store, path)? {
            return Ok(None);
        }
        let Some(bytes) = query::file_bytes(&self.store, path)? else { return Ok(None) };
        Ok(Some(Draft {
            path: path.to_string(),
            user: self.opts.author.clone(),
            bytes,
            error: if conflict.forms.is_empty() {
                format!(
                    "conflict: {path} changed in the working directory and in the store since they were last in step; the working directory's version is stored, this draft holds the store's text"
                )
            } else {
                format!(
                    "conflict: form(s) {} of {path} changed in the working directory and in the store since they were last in step; the working directory's text of them is stored (the other forms merged), this draft holds the store's text",
                    conflict.forms.join(", ")
                )
            },
            line: 0,
            col: 0,
            base: Vec::new(),
        }))
    }

    /// Apply the changes from disk; on failure, path by path so one bad file does not hold up the
    /// rest.
    fn import(&mut self, plan: &[(String, Action)], changes: Vec<Change>, g0: u64) -> Result<()> {
        let to_store = plan.iter().filter(|(_, a)| matches!(a, Action::ToStore { .. })).count();
        match self.apply_from_disk(plan, changes, g0) {
            Ok(()) => Ok(()),
            Err(e) if to_store > 1 => {
                self.error(format!(
                    "importing a batch from the working directory: {e}; trying file by file"
                ));
                for (path, action) in plan {
                    if !matches!(action, Action::ToStore { .. }) {
                        continue;
                    }
                    let one = [(path.clone(), action.clone())];
                    let g = query::generation(&self.store)?;
                    let entries = store_entries(&self.store, Some(&[(path.clone(), true)].into()))?;
                    let r = self
                        .store_changes(&one, &entries)
                        .and_then(|changes| self.apply_from_disk(&one, changes, g));
                    if let Err(e) = r {
                        self.error(format!("{path}: {e}"));
                    }
                }
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// One change set bringing the plan's `ToStore` paths into the store, with their
    /// `sync_state` rows in the same transaction.
    fn apply_from_disk(
        &mut self,
        plan: &[(String, Action)],
        mut changes: Vec<Change>,
        g0: u64,
    ) -> Result<()> {
        let in_step: BTreeMap<String, Option<String>> = plan
            .iter()
            .filter_map(|(path, action)| match action {
                Action::ToStore { found, .. } => {
                    Some((path.clone(), found.as_ref().map(|f| f.hash.clone())))
                }
                _ => None,
            })
            .collect();
        let bases: BTreeMap<String, Option<Vec<u8>>> = plan
            .iter()
            .filter_map(|(path, action)| match action {
                Action::ToStore { found, .. } if Lang::from_path(path).is_some() => {
                    Some((path.clone(), found.as_ref().and_then(|f| f.bytes.clone())))
                }
                _ => None,
            })
            .collect();
        changes.push(state::in_step_change(&self.key, &in_step));
        changes.push(state::base_change(&self.store, &self.key, &bases)?);
        let set = ChangeSet { author: self.opts.author.clone(), op: "sync".into(), changes };
        change::apply(&self.store, &set)?;
        self.stats.change_sets += 1;
        // Nobody else wrote in between: the generation our write made is handled.
        if let Ok(g1) = query::generation(&self.store) {
            if g1 == g0 + 1 && self.handled() == g0 {
                self.set_handled(g1);
            }
        }
        for (_, action) in plan {
            if let Action::ToStore { found, conflict, merged_from } = action {
                self.count_import(found.is_some(), conflict.as_ref(), merged_from.is_some());
            }
        }
        for (path, hash) in in_step {
            // Recorded already, by the change itself.
            self.dirty.remove(&path);
            self.bases.remove(&path);
            match hash {
                Some(h) => self.synced.insert(path, h),
                None => self.synced.remove(&path),
            };
        }
        Ok(())
    }

    fn count_import(&mut self, present: bool, conflict: Option<&Conflict>, merged: bool) {
        if present {
            self.stats.files_imported += 1;
        } else {
            self.stats.files_deleted_in_store += 1;
        }
        match conflict {
            Some(c) => {
                self.stats.conflicts += 1;
                if self.opts.log {
                    tracing::warn!("formdb sync: {}", describe(c));
                }
                if self.stats.conflict_list.len() == KEPT_CONFLICTS {
                    self.stats.conflict_list.remove(0);
                }
                self.stats.conflict_list.push(c.clone());
            }
            None if merged => self.stats.merges += 1,
            None => {}
        }
    }

    /// Write the store's content of `path` to disk (or remove it), if the disk still holds what
    /// it held when this was decided.
    fn write_back(
        &mut self,
        path: &str,
        expect: Option<String>,
        bytes: Option<Vec<u8>>,
    ) -> Result<()> {
        let now = self.disk.find(&self.root, path, false).map_err(io_err(&self.root.join(path)))?;
        if now.map(|f| f.hash) != expect {
            // Changed on disk meanwhile: its watcher event will bring it (as a conflict).
            return Ok(());
        }
        match bytes {
            Some(b) => {
                let written = self
                    .disk
                    .write(&self.root, path, &b, expect.as_deref())
                    .map_err(io_err(&self.root.join(path)))?;
                match written {
                    // Changed on disk meanwhile: its watcher event brings it.
                    disk::Written::Changed => return Ok(()),
                    disk::Written::Done { replaced: Some(old) } => self.remember(path, old, true),
                    disk::Written::Done { replaced: None } => {}
                }
                self.stats.files_written += 1;
                let hash = content_hash(&b);
                self.mark(path, Some(hash), Some(b));
            }
            None => {
                self.disk.remove(&self.root, path).map_err(io_err(&self.root.join(path)))?;
                self.stats.files_removed += 1;
                self.mark(path, None, None);
            }
        }
        Ok(())
    }

    /// Record that both sides hold `hash` (with its bytes, when at hand) at `path`. The bytes
    /// become the merge base as they are (a big file's text is not copied once more).
    fn mark(&mut self, path: &str, hash: Option<String>, bytes: Option<Vec<u8>>) {
        if self.synced.get(path) == hash.as_ref() {
            return;
        }
        if Lang::from_path(path).is_some() {
            let base = match (&hash, bytes) {
                (Some(_), Some(b)) => Some(b),
                (Some(h), None) => query::file_bytes(&self.store, path)
                    .ok()
                    .flatten()
                    .filter(|b| content_hash(b) == *h),
                (None, _) => None,
            };
            self.bases.insert(path.to_string(), base);
        }
        match &hash {
            Some(h) => self.synced.insert(path.to_string(), h.clone()),
            None => self.synced.remove(path),
        };
        self.dirty.insert(path.to_string(), hash);
    }

    /// Write the changed `sync_state` rows, settling every announced write (made, or skipped
    /// because the disk changed meanwhile) in the same transaction.
    fn persist(&mut self) -> Result<()> {
        if self.dirty.is_empty() && self.intents.is_empty() && self.bases.is_empty() {
            return Ok(());
        }
        let dirty = std::mem::take(&mut self.dirty);
        let bases = std::mem::take(&mut self.bases);
        let settled: Vec<String> = self.intents.keys().cloned().collect();
        if let Err(e) = state::save(&self.store, &self.key, &dirty, &bases, &settled) {
            // Kept for the next try.
            self.dirty = dirty;
            self.bases = bases;
            return Err(e.into());
        }
        self.intents.clear();
        Ok(())
    }
}

/// Stored paths with their hashes: all of them, or those among `paths`.
fn store_entries(
    store: &Store,
    paths: Option<&BTreeMap<String, bool>>,
) -> Result<HashMap<String, Entry>> {
    let only: Option<BTreeSet<&str>> = paths.map(|p| p.keys().map(String::as_str).collect());
    Ok(read::files::path_hashes(store, only.as_ref())?
        .into_iter()
        .map(|h| (h.path, Entry { hash: h.hash, blob: h.blob }))
        .collect())
}

/// The text a disk's text was edited from (see [`edited_from`]).
struct EditedFrom {
    base: Vec<u8>,
    /// Every text the file held lately is one the disk has moved past.
    caught_up: bool,
    /// An older text the writer may have read instead, when the texts cannot tell (see
    /// [`merge::merge`]), as parsed to choose the base.
    older: Option<merge::FormTexts>,
}

/// Of the texts `path` held lately (`recent`, newest first, then the `agreed` one), the one the
/// disk's text was most likely edited from: the fewest forms apart from it (on a tie, the
/// newest older text rather than the agreed one: the forms it differs in are then conflicts,
/// and the store's text is kept). `None` when the disk's text is not at hand, does not parse,
/// or declares another namespace than the agreed text (it is another file's, moved over this
/// one: it wins whole). Three kinds of older text are no base:
/// - one declaring another namespace than the disk's text;
/// - one the disk has moved past: it has a form as the agreed text has it and the older text
///   has not, so its writer read what came after (when the disk has moved past every one, they
///   are forgotten: a writer editing the file again edits what it wrote);
/// - one the disk has every form of (`undone`): its writer either undid what came after, or
///   wrote back what it read before, and no text tells which. The merge is then against the
///   next nearest, and the forms that older text has otherwise are conflicts, so the store's
///   text is kept as a draft either way.
fn edited_from(
    path: &str,
    found: Option<&disk::Found>,
    recent: Vec<Vec<u8>>,
    agreed: Option<Vec<u8>>,
) -> Option<EditedFrom> {
    let lang = Lang::from_path(path)?;
    let parse = |text: &[u8]| merge::FormTexts::parse(path, lang, std::str::from_utf8(text).ok()?);
    let disk = parse(found?.bytes.as_deref()?)?;
    // A text declaring another namespace is another file's (moved or renamed over this one,
    // a checkout), not an edit of this one: merging it form by form with this one's texts
    // made a file of one's namespace and the other's forms.
    let other_ns = |forms: &merge::FormTexts| match (forms.namespace(), disk.namespace()) {
        (Some(a), Some(b)) => a != b,
        _ => false,
    };
    let agreed = agreed.and_then(|a| Some((parse(&a)?, a)));
    if agreed.as_ref().is_some_and(|(a, _)| other_ns(a)) {
        return None;
    }
    let in_step = agreed.as_ref().is_some_and(|(a, _)| a.same_forms(&disk));
    let mut undone = None;
    let mut nearest: Option<(usize, Vec<u8>)> = None;
    let mut caught_up = true;
    for old in recent {
        let Some(forms) = parse(&old).filter(|f| !other_ns(f)) else { continue };
        if agreed.as_ref().is_some_and(|(a, _)| merge::read_after(&forms, a, &disk)) {
            continue;
        }
        caught_up = false;
        if !in_step && forms.same_forms(&disk) {
            undone.get_or_insert((forms, old));
            continue;
        }
        let apart = forms.distance(&disk);
        if nearest.as_ref().is_none_or(|(n, _)| apart < *n) {
            nearest = Some((apart, old));
        }
    }
    let base = match (nearest, agreed) {
        (Some((apart, old)), Some((a, agreed))) => match a.distance(&disk) < apart {
            true => agreed,
            false => old,
        },
        (Some((_, old)), None) => old,
        (None, Some((_, agreed))) => agreed,
        (None, None) => undone.take()?.1,
    };
    Some(EditedFrom { base, caught_up, older: undone.map(|(forms, _)| forms) })
}

/// The directory `rel` is in (`""` for the top).
fn dir_of(rel: &str) -> &str {
    rel.rsplit_once('/').map_or("", |(dir, _)| dir)
}

/// The namespaces the Clojure texts a plan read declare.
fn declared_namespaces(plan: &[(String, Action)]) -> BTreeSet<String> {
    plan.iter()
        .filter_map(|(path, action)| {
            let Action::ToStore { found: Some(found), .. } = action else { return None };
            let text = std::str::from_utf8(found.bytes.as_deref()?).ok()?;
            let forms = merge::FormTexts::parse(path, Lang::from_path(path)?, text)?;
            forms.namespace().map(str::to_string)
        })
        .collect()
}

/// When git's index in `root` last changed (a checkout, commit, reset or stash writes it), if
/// `root` is a git working tree.
fn git_index_time(root: &Path) -> Option<SystemTime> {
    let dot_git = root.join(".git");
    let git_dir = if dot_git.is_dir() {
        dot_git
    } else {
        // A linked worktree or a submodule: `.git` is a file naming the git directory.
        let text = std::fs::read_to_string(&dot_git).ok()?;
        let dir = PathBuf::from(text.strip_prefix("gitdir:")?.trim());
        if dir.is_absolute() {
            dir
        } else {
            root.join(dir)
        }
    };
    std::fs::metadata(git_dir.join("index")).and_then(|m| m.modified()).ok()
}

/// The ids of the top-level forms of a stored file, in file order.
fn top_level_ids(store: &Store, path: &str) -> Result<Vec<String>> {
    Ok(read::files::top_level_ids(store, path)?)
}

/// A conflict as one line for a log or a report.
pub fn describe(c: &Conflict) -> String {
    if c.forms.is_empty() {
        format!(
            "conflict: {} changed in the working directory and in the store; the directory's text is stored, the store's is a draft (`formdb drafts show {}`)",
            c.path, c.path
        )
    } else {
        format!(
            "conflict: {}: form(s) {} changed in the working directory and in the store; the directory's text of them is stored, the store's file text is a draft (`formdb drafts show {}`)",
            c.path,
            c.forms.join(", "),
            c.path
        )
    }
}
