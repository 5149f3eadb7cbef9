//! The FUSE filesystem: the tree, open handles, scratch files and commits.
//!
//! State that only the mount knows (inode numbers, open handles, scratch files, directories made
//! with `mkdir`, tracked files an editor renamed away) lives in one mutex; the store is never
//! called with that mutex held, so a slow save does not stall the other request threads.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::ffi::OsStr;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use formdb_edit::save::{self, Saved, Writer};
use formdb_edit::{ops, EditError};
use formdb_engine::query;
use formdb_engine::store::{params, str_at, Params, Store};
use formdb_projector::views::{self, Render};
use fuser::{
    AccessFlags, BsdFileFlags, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags,
    Generation, INodeNo, LockOwner, OpenAccMode, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate,
    ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite,
    ReplyXattr, Request, TimeOrNow, WriteFlags,
};

use crate::names;

/// Directories change rarely and are invalidated by the watcher.
const DIR_TTL: Duration = Duration::from_secs(1);
/// Names are cached a second (the watcher invalidates names that come and go).
const ENTRY_TTL: Duration = Duration::from_secs(1);
/// File attributes are never cached by the kernel: a stat always sees the current size.
const FILE_TTL: Duration = Duration::ZERO;
const ROOT: u64 = 1;
/// Appends shorter than this are checked at the write (see `Shared::append_refusal`).
const APPEND_CHECKED_BELOW: usize = 4096;
/// A handle holding more than this gives its memory back to the system when it goes, and so
/// does a rendering of a file this big (glibc keeps freed memory in its arenas otherwise: a
/// 10 MB save left the mount gigabytes larger).
const TRIM_ABOVE: usize = 1 << 20;
/// The longest file name Linux filesystems take (`NAME_MAX`), in bytes.
const NAME_MAX: usize = 255;
/// The longest path the kernel takes (`PATH_MAX`, with its NUL), in bytes.
const PATH_MAX: usize = 4096;

pub(crate) const META: &str = ".formdb";
pub(crate) const STATUS: &str = ".formdb/status";
pub(crate) const FORMS: &str = ".formdb/forms";
pub(crate) const ONELINE: &str = ".formdb/oneline";

/// What a path is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A directory; `writable` is false for the `.formdb` tree (except `forms/`).
    Dir {
        writable: bool,
    },
    /// A tracked file whose content is the store's (its draft, else its rendered view).
    Stored,
    /// A new tracked file, in memory until its first commit.
    Pending,
    /// A scratch file: memory only.
    Scratch,
    /// A symbolic link: memory only (emacs lock files).
    Symlink,
    Status,
    /// `.formdb/forms/<id>.clj`
    Form(String),
    /// `.formdb/oneline/<path>`
    Oneline(String),
}

impl Kind {
    fn file_type(&self) -> FileType {
        match self {
            Kind::Dir { .. } => FileType::Directory,
            Kind::Symlink => FileType::Symlink,
            _ => FileType::RegularFile,
        }
    }

    fn tracked(&self) -> bool {
        matches!(self, Kind::Stored | Kind::Pending | Kind::Form(_))
    }
}

/// A file (or symlink) kept in memory.
#[derive(Clone, Debug)]
struct MemNode {
    data: Vec<u8>,
    perm: u16,
    uid: u32,
    gid: u32,
    mtime: SystemTime,
    symlink: Option<Vec<u8>>,
    /// Scratch (never committed) or a pending tracked file.
    scratch: bool,
    /// For a pending file: the text the writer had read under that name (merge base).
    base: Option<Vec<u8>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum HandleKind {
    /// A scratch file: reads and writes go to the shared memory node.
    Mem,
    /// A tracked file: its own buffer, committed on flush/fsync.
    Tracked,
    /// A read-only view rendered at open.
    Snapshot,
}

/// Which request asks for a commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum When {
    Flush,
    Fsync,
    Release,
}

#[derive(Debug)]
struct Handle {
    ino: u64,
    kind: HandleKind,
    data: Vec<u8>,
    /// The text this handle served (merge base); `None` when it served a draft.
    base: Option<Vec<u8>>,
    dirty: bool,
    /// Written (not only truncated) since the last commit: what makes a `flush` commit. A
    /// truncation alone waits for the release (`cat x > f` flushes the truncated file once
    /// before it writes, when the shell closes its duplicate descriptor).
    written: bool,
    /// Bumped by every write, so a commit knows whether writes raced it.
    writes: u64,
    /// Made by `create` and not committed yet: committed at release even if never written.
    created: bool,
    append: bool,
    writable: bool,
    /// The error of this handle's last commit, returned again by later flushes.
    error: Option<Errno>,
}

/// The store's paths at one generation, as a tree.
#[derive(Default)]
pub(crate) struct Tree {
    files: HashSet<String>,
    /// Directory → children (name, is a directory).
    dirs: HashMap<String, BTreeSet<(String, bool)>>,
}

impl Tree {
    fn build(paths: Vec<String>) -> Tree {
        let mut t = Tree::default();
        t.dirs.entry(String::new()).or_default();
        for p in paths {
            if p == META || p.starts_with(".formdb/") {
                continue;
            }
            let mut parent = String::new();
            let parts: Vec<&str> = p.split('/').collect();
            for (i, part) in parts.iter().enumerate() {
                let is_dir = i + 1 < parts.len();
                t.dirs.entry(parent.clone()).or_default().insert((part.to_string(), is_dir));
                parent = join(&parent, part);
                if is_dir {
                    t.dirs.entry(parent.clone()).or_default();
                }
            }
            t.files.insert(p);
        }
        t
    }
}

#[derive(Default)]
struct Inodes {
    by_path: HashMap<String, u64>,
    by_ino: HashMap<u64, String>,
    next: u64,
}

impl Inodes {
    fn new() -> Inodes {
        let mut i = Inodes { next: ROOT + 1, ..Default::default() };
        i.by_path.insert(String::new(), ROOT);
        i.by_ino.insert(ROOT, String::new());
        i
    }

    fn get(&mut self, path: &str) -> u64 {
        if let Some(i) = self.by_path.get(path) {
            return *i;
        }
        let i = self.next;
        self.next += 1;
        self.by_path.insert(path.to_string(), i);
        self.by_ino.insert(i, path.to_string());
        i
    }

    fn path(&self, ino: u64) -> Option<String> {
        self.by_ino.get(&ino).cloned()
    }

    fn remove(&mut self, path: &str) {
        if let Some(i) = self.by_path.remove(path) {
            self.by_ino.remove(&i);
        }
    }

    /// The inode of `from` (and of everything under it) now names `to`; what `to` was is gone.
    fn rename(&mut self, from: &str, to: &str) {
        let prefix = format!("{from}/");
        let moved: Vec<(String, u64)> = self
            .by_path
            .iter()
            .filter(|(p, _)| p.as_str() == from || p.starts_with(&prefix))
            .map(|(p, i)| (p.clone(), *i))
            .collect();
        self.remove(to);
        let to_prefix = format!("{to}/");
        let stale: Vec<String> =
            self.by_path.keys().filter(|p| p.starts_with(&to_prefix)).cloned().collect();
        for p in stale {
            self.remove(&p);
        }
        for (p, i) in moved {
            self.by_path.remove(&p);
            let np = format!("{to}{}", &p[from.len()..]);
            self.by_path.insert(np.clone(), i);
            self.by_ino.insert(i, np);
        }
    }
}

/// A rendered file at a store generation.
struct Rendered {
    gen: u64,
    bytes: Arc<Vec<u8>>,
    draft: bool,
    mtime: SystemTime,
}

/// The content a path last served and since when: its mtime. Kept when renders are dropped (a
/// save, the watcher), so the mtime of a path moves only when the bytes a read returns differ
/// from these, and never back to an older time.
struct Stamp {
    /// The store generation the bytes were read at (`None`: not tied to one, the status file).
    gen: Option<u64>,
    bytes: Arc<Vec<u8>>,
    mtime: SystemTime,
}

/// The text last served under each tracked path: the merge base of saves that bring none of
/// their own (a write-only open, a file renamed onto the name, a file written anew under a name
/// an editor renamed away). Bounded by count: the least recently served go first, except a path
/// with an open handle or a hidden (renamed-away) stored file, whose save may still come.
#[derive(Default)]
struct Served {
    cap: usize,
    seq: u64,
    by_path: HashMap<String, (u64, Vec<u8>)>,
    /// Insertion sequence → path, oldest first.
    order: BTreeMap<u64, String>,
}

impl Served {
    fn get(&self, path: &str) -> Option<&Vec<u8>> {
        self.by_path.get(path).map(|(_, b)| b)
    }

    fn remove(&mut self, path: &str) -> Option<Vec<u8>> {
        let (seq, bytes) = self.by_path.remove(path)?;
        self.order.remove(&seq);
        Some(bytes)
    }

    fn len(&self) -> usize {
        self.by_path.len()
    }

    /// Record `bytes` as served under `path` now (the most recent entry).
    fn insert(&mut self, path: String, bytes: Vec<u8>) {
        self.remove(&path);
        self.seq += 1;
        self.order.insert(self.seq, path.clone());
        self.by_path.insert(path, (self.seq, bytes));
    }

    /// Drop the oldest entries beyond the cap, skipping the paths in `keep`.
    fn evict(&mut self, keep: &HashSet<String>) {
        let over = self.len().saturating_sub(self.cap.max(1));
        if over == 0 {
            return;
        }
        let victims: Vec<String> =
            self.order.values().filter(|p| !keep.contains(*p)).take(over).cloned().collect();
        for p in victims {
            self.remove(&p);
        }
    }

    /// Entries at `from` or under `from/` move to the same place under `to`.
    fn rename_tree(&mut self, from: &str, to: &str) {
        let prefix = format!("{from}/");
        let moving: Vec<String> = self
            .by_path
            .keys()
            .filter(|p| p.as_str() == from || p.starts_with(&prefix))
            .cloned()
            .collect();
        for p in moving {
            if let Some(b) = self.remove(&p) {
                self.insert(format!("{to}{}", &p[from.len()..]), b);
            }
        }
    }
}

/// One line of `/.formdb/status`'s recent saves.
struct LogLine {
    at: SystemTime,
    path: String,
    text: String,
    error: bool,
}

#[derive(Default)]
struct State {
    inodes: Inodes,
    mem: HashMap<String, MemNode>,
    mem_dirs: BTreeSet<String>,
    /// Stored paths an editor renamed to a scratch name; absent from the tree until a new file
    /// is written under the name (or the scratch file is renamed back).
    hidden: HashSet<String>,
    handles: HashMap<u64, Handle>,
    dir_handles: HashMap<u64, Vec<(u64, FileType, String)>>,
    served: Served,
    renders: HashMap<String, Rendered>,
    /// What each store-backed path last served, for its mtime.
    stamps: HashMap<String, Stamp>,
    tree: Option<(u64, Arc<Tree>)>,
    log: VecDeque<LogLine>,
    /// Per inode, the bytes its kernel page cache can hold: what every handle opened on it
    /// since an open last dropped that cache served. An open that serves the same bytes keeps
    /// the cache (`FOPEN_KEEP_CACHE`), so a warm read never comes here. Dropped for an inode
    /// whenever anything else can put other bytes there (a write, a truncation, a rename).
    page_cache: HashMap<u64, Arc<Vec<u8>>>,
}

impl State {
    /// Record the text served under `path` (see [`Served`]), evicting the oldest entries past
    /// the cap that no open handle or hidden file still needs.
    fn serve(&mut self, path: String, bytes: Vec<u8>) {
        self.served.insert(path.clone(), bytes);
        if self.served.len() > self.served.cap {
            let mut keep: HashSet<String> =
                self.handles.values().filter_map(|h| self.inodes.path(h.ino)).collect();
            keep.extend(self.hidden.iter().cloned());
            keep.insert(path);
            self.served.evict(&keep);
        }
    }
}

/// Everything the request threads and the watcher share.
pub(crate) struct Shared {
    pub(crate) store: Arc<Store>,
    writer: Writer,
    render: Render,
    read_only: bool,
    verbose: bool,
    uid: u32,
    gid: u32,
    started: SystemTime,
    start_gen: u64,
    /// The newest store generation seen (by the watcher, or after a save/open).
    pub(crate) gen: AtomicU64,
    /// When `gen` was last read from the store (µs since `clock`).
    refreshed: AtomicU64,
    clock: std::time::Instant,
    next_fh: AtomicU64,
    state: Mutex<State>,
    /// Last version time of each stored file at mount time: initial mtimes.
    vtimes: HashMap<String, SystemTime>,
    /// Tells cheaply that the store cannot have changed (`None`: not an on-disk SQLite store).
    db: Option<DbFiles>,
}

/// What identifies a file's state: device, inode, size, mtime and ctime (s, ns).
type FileState = (u64, u64, u64, i64, i64, i64, i64);

/// The store's SQLite files. Reading the generation is a Cozo query (~0.1 ms), and every open
/// needs to know whether the store moved (a change made elsewhere shows at the next read): at
/// a few hundred opens a second that query is most of an open. But every commit, by any
/// process, writes the database file (or its WAL), which moves its mtime/ctime/size; so when
/// those are what they were at the last read of the generation, and were already old then (a
/// clock tick past: a later write cannot carry the same coarse timestamp), nothing committed
/// since, and the generation read then still holds. Otherwise the generation is read again.
struct DbFiles {
    paths: [std::path::PathBuf; 2],
    /// The files' states at the last read of the generation, and whether they were settled
    /// then (last written more than `SETTLED` before).
    seen: Mutex<Option<([Option<FileState>; 2], bool)>>,
}

/// How old a file's timestamps must be for a later write to be sure to change them: well over
/// the kernel's coarse clock tick (a few ms) that file timestamps are taken from.
const SETTLED: Duration = Duration::from_millis(50);

impl DbFiles {
    fn new(store: &Store) -> Option<DbFiles> {
        let db = store.location()?.join("store.db");
        db.is_file().then(|| {
            let wal = db.with_file_name("store.db-wal");
            DbFiles { paths: [db, wal], seen: Mutex::new(None) }
        })
    }

    fn states(&self) -> [Option<FileState>; 2] {
        use std::os::unix::fs::MetadataExt;
        self.paths.clone().map(|p| {
            std::fs::metadata(p).ok().map(|m| {
                (m.dev(), m.ino(), m.size(), m.mtime(), m.mtime_nsec(), m.ctime(), m.ctime_nsec())
            })
        })
    }

    /// True when `now` (states just taken) shows no commit since the generation was last read.
    fn unchanged(&self, now: &[Option<FileState>; 2]) -> bool {
        let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        matches!(&*seen, Some((states, true)) if states == now)
    }

    /// Record the states taken (at `at`, before the generation was read).
    fn record(&self, states: [Option<FileState>; 2], at: SystemTime) {
        let stamp = |s: i64, ns: i64| UNIX_EPOCH + Duration::new(s.max(0) as u64, ns as u32);
        let settled = states
            .iter()
            .flatten()
            .all(|&(_, _, _, ms, mns, cs, cns)| stamp(ms, mns).max(stamp(cs, cns)) + SETTLED <= at);
        *self.seen.lock().unwrap_or_else(|p| p.into_inner()) = Some((states, settled));
    }
}

pub(crate) fn join(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_string()
    } else {
        format!("{parent}/{name}")
    }
}

fn split(path: &str) -> (&str, &str) {
    path.rsplit_once('/').unwrap_or(("", path))
}

fn secs(t: f64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs_f64(t.max(0.0))
}

fn write_at(data: &mut Vec<u8>, offset: usize, bytes: &[u8]) {
    let end = offset + bytes.len();
    if data.len() < end {
        data.resize(end, 0);
    }
    data[offset..end].copy_from_slice(bytes);
}

/// The errno a save that left a draft fails with: EINVAL when the text itself was refused at a
/// place (it does not parse, is not UTF-8, holds a NUL byte, declares a namespace another file
/// owns): "Invalid argument" is what happened. EIO when the text was fine but could not be
/// applied as written (a conflict with changes made since it was read, a form deleted since).
fn refused(saved: &Saved) -> Option<Errno> {
    match saved {
        Saved::Draft { draft } if draft.line > 0 => Some(Errno::EINVAL),
        Saved::Draft { .. } | Saved::Conflict { .. } => Some(Errno::EIO),
        Saved::Committed { .. } | Saved::Unchanged { .. } => None,
    }
}

fn edit_errno(e: &EditError) -> Errno {
    match e {
        EditError::Invalid(_) => Errno::EINVAL,
        _ => Errno::EIO,
    }
}

/// What a new tracked file holds now: the bytes of a handle that wrote to it and has not
/// committed them, else its memory node's.
fn pending_data<'a>(st: &'a State, ino: u64, node: &'a [u8]) -> &'a [u8] {
    st.handles
        .values()
        .find(|h| h.ino == ino && h.kind == HandleKind::Tracked && h.dirty)
        .map_or(node, |h| &h.data)
}

/// A new file under `.formdb/forms/` written as `<id>.clj` saves that form.
fn form_kind(path: &str, kind: Kind) -> Kind {
    match (&kind, path.strip_prefix(".formdb/forms/").and_then(|n| n.strip_suffix(".clj"))) {
        (Kind::Pending, Some(id)) => Kind::Form(id.to_string()),
        _ => kind,
    }
}

fn enotsup() -> Errno {
    Errno::from_i32(libc::ENOTSUP)
}

impl Shared {
    pub(crate) fn new(
        store: Arc<Store>,
        writer: Writer,
        opts: &crate::Options,
    ) -> Result<Shared, formdb_engine::store::StoreError> {
        let start_gen = query::generation(&store)?;
        let rows = store.query("?[file, max(at)] := *version{file, at}", Params::new())?;
        let vtimes = rows
            .rows
            .iter()
            .map(|r| (str_at(r, 0), secs(r[1].get_float().unwrap_or(0.0))))
            .collect();
        let render = writer.render();
        let db = DbFiles::new(&store);
        // SAFETY: getuid/getgid cannot fail.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        Ok(Shared {
            store,
            writer,
            render,
            read_only: opts.read_only,
            verbose: opts.verbose,
            uid,
            gid,
            started: SystemTime::now(),
            start_gen,
            gen: AtomicU64::new(start_gen),
            refreshed: AtomicU64::new(0),
            clock: std::time::Instant::now(),
            next_fh: AtomicU64::new(1),
            state: Mutex::new(State {
                inodes: Inodes::new(),
                served: Served { cap: opts.merge_bases, ..Default::default() },
                ..Default::default()
            }),
            vtimes,
            db,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The store's generation now (a change made elsewhere shows at the next open): read from
    /// the store unless its files show that nothing was committed since the last read (see
    /// [`DbFiles`]).
    fn refresh_gen(&self) -> u64 {
        let now = self.clock.elapsed().as_micros() as u64;
        // The time first, then the files' states, then the generation: a commit after the
        // states were taken moves them; one before is in the generation read after.
        let at = SystemTime::now();
        let states = self.db.as_ref().map(DbFiles::states);
        if let (Some(db), Some(states)) = (&self.db, &states) {
            if db.unchanged(states) {
                self.refreshed.store(now, Ordering::SeqCst);
                return self.gen.load(Ordering::SeqCst);
            }
        }
        let g = query::generation(&self.store).unwrap_or(0);
        // Published before the states are: a request that trusts them finds `g` in `gen`.
        let gen = self.gen.fetch_max(g, Ordering::SeqCst).max(g);
        if let (Some(db), Some(states)) = (&self.db, states) {
            db.record(states, at);
        }
        self.refreshed.store(now, Ordering::SeqCst);
        gen
    }

    /// `refresh_gen` unless it ran in the last few milliseconds (lookups and stats come in
    /// bursts: `ls -l`, a tree walk); opens always read the generation.
    fn refresh_gen_recent(&self) -> u64 {
        let now = self.clock.elapsed().as_micros() as u64;
        if now.saturating_sub(self.refreshed.load(Ordering::SeqCst)) < 5_000 {
            return self.gen.load(Ordering::SeqCst);
        }
        self.refresh_gen()
    }

    /// Record a line of `/.formdb/status`; a failure also goes to stderr (every line with
    /// `verbose`): an editor shows only an errno, the mount's terminal says why.
    fn log(&self, path: &str, text: String, error: bool) {
        if self.verbose || error {
            eprintln!("formdb mount: {path}: {text}");
        }
        let mut st = self.lock();
        st.log.push_back(LogLine { at: SystemTime::now(), path: path.to_string(), text, error });
        while st.log.len() > 100 {
            st.log.pop_front();
        }
    }

    fn log_saved(&self, path: &str, saved: &Result<Saved, EditError>) {
        match saved {
            Ok(Saved::Committed { applied, .. }) => self.log(
                path,
                format!(
                    "saved: {} changed, {} added, {} removed",
                    applied.changed, applied.added, applied.removed
                ),
                false,
            ),
            Ok(Saved::Unchanged { .. }) => self.log(path, "saved: unchanged".into(), false),
            Ok(Saved::Draft { draft }) => self.log(
                path,
                format!(
                    "kept as a draft, the store is unchanged: {}:{}:{}: {}",
                    draft.path, draft.line, draft.col, draft.error
                ),
                true,
            ),
            Ok(Saved::Conflict { draft, .. }) => {
                self.log(path, format!("merged with a conflict: {}", draft.error), true)
            }
            Err(e) => self.log(path, format!("save failed: {e}"), true),
        }
    }

    pub(crate) fn tree(&self) -> Arc<Tree> {
        let gen = self.gen.load(Ordering::SeqCst);
        if let Some((g, t)) = &self.lock().tree {
            if *g == gen {
                return t.clone();
            }
        }
        let t = Arc::new(Tree::build(save::paths(&self.store).unwrap_or_default()));
        self.lock().tree = Some((gen, t.clone()));
        t
    }

    fn form_exists(&self, id: &str) -> bool {
        let p = params([("id", id.into())]);
        let q = self.store.query("?[id] := *form{id, parent}, id = $id, parent == ''", p);
        matches!(q, Ok(r) if !r.rows.is_empty())
    }

    /// What `path` is now.
    pub(crate) fn resolve(&self, path: &str) -> Option<Kind> {
        let tree = self.tree();
        let (mem, hidden) = {
            let st = self.lock();
            let mem = st.mem.get(path).map(|n| {
                if n.symlink.is_some() {
                    Kind::Symlink
                } else if n.scratch {
                    Kind::Scratch
                } else {
                    Kind::Pending
                }
            });
            let dir = st.mem_dirs.contains(path);
            (mem.or(dir.then_some(Kind::Dir { writable: true })), st.hidden.contains(path))
        };
        match path {
            "" => return Some(Kind::Dir { writable: true }),
            META | ONELINE => return Some(Kind::Dir { writable: false }),
            FORMS => return Some(Kind::Dir { writable: true }),
            STATUS => return Some(Kind::Status),
            _ => {}
        }
        if let Some(rest) = path.strip_prefix(".formdb/oneline/") {
            if tree.files.contains(rest) {
                return Some(Kind::Oneline(rest.to_string()));
            }
            return tree.dirs.contains_key(rest).then_some(Kind::Dir { writable: false });
        }
        if let Some(name) = path.strip_prefix(".formdb/forms/") {
            if mem.is_some() {
                return mem;
            }
            if hidden || name.contains('/') {
                return None;
            }
            let id = name.strip_suffix(".clj")?;
            let drafted = matches!(save::draft(&self.store, path), Ok(Some(_)));
            return (drafted || self.form_exists(id)).then(|| Kind::Form(id.to_string()));
        }
        if path.starts_with(".formdb/") {
            return None;
        }
        if mem.is_some() {
            return mem;
        }
        if hidden {
            return None;
        }
        if tree.files.contains(path) {
            return Some(Kind::Stored);
        }
        if tree.dirs.contains_key(path) {
            return Some(Kind::Dir { writable: true });
        }
        let prefix = format!("{path}/");
        let st = self.lock();
        (st.mem.keys().any(|k| k.starts_with(&prefix))
            || st.mem_dirs.iter().any(|d| d.starts_with(&prefix)))
        .then_some(Kind::Dir { writable: true })
    }

    /// The bytes of a store-backed file and whether they are a draft.
    fn fetch(&self, path: &str, kind: &Kind) -> Result<(Vec<u8>, bool), Errno> {
        match kind {
            Kind::Stored => {
                if let Ok(Some(d)) = save::draft(&self.store, path) {
                    return Ok((d.bytes, true));
                }
                match save::read(&self.store, path, &self.render) {
                    Ok(Some(b)) => Ok((b, false)),
                    Ok(None) => Err(Errno::ENOENT),
                    Err(e) => Err(edit_errno(&e)),
                }
            }
            Kind::Form(id) => {
                if let Ok(Some(d)) = save::draft(&self.store, path) {
                    return Ok((d.bytes, true));
                }
                match ops::form_text(&self.store, &self.writer, id) {
                    Ok(t) => Ok((t.into_bytes(), false)),
                    Err(_) => Err(Errno::ENOENT),
                }
            }
            Kind::Oneline(p) => match views::render_path(&self.store, p, &Render::Oneline) {
                Ok((b, _)) => Ok((b, false)),
                Err(views::ViewError::NoFile(_)) => Err(Errno::ENOENT),
                Err(_) => Err(Errno::EIO),
            },
            Kind::Status => Ok((self.status_text().into_bytes(), false)),
            _ => Err(Errno::EINVAL),
        }
    }

    /// The mtime of a path this mount has not served yet: when its content last changed in the
    /// store (its last version, or its draft if that is newer), so it is stable across remounts.
    fn initial_mtime(&self, path: &str, gen: u64, draft: bool) -> SystemTime {
        let file = path.strip_prefix(".formdb/oneline/").unwrap_or(path);
        // The one time a query answers for `path`, if any.
        let time_of = |script: &str, path: &str| {
            self.store
                .query(script, params([("path", path.into())]))
                .ok()
                .and_then(|r| r.rows.first().and_then(|r| r[0].get_float()))
                .map(secs)
        };
        let version = if gen == self.start_gen {
            self.vtimes.get(file).copied()
        } else {
            time_of("?[max(at)] := *version{file: $path, at}", file)
        };
        let drafted = draft.then(|| time_of("?[at] := *draft{path: $path, at}", path)).flatten();
        match (version, drafted) {
            (Some(v), Some(d)) => v.max(d),
            (v, d) => v.or(d).unwrap_or(self.started),
        }
    }

    /// Fetch a path's bytes together with the store generation they were read at: the
    /// generation is read before and after, and the fetch repeated (a few times) when a change
    /// landed in between, so two fetches can be ordered by what they saw.
    fn fetch_at(&self, path: &str, kind: &Kind) -> Result<(Vec<u8>, bool, u64), Errno> {
        let mut tries = 0;
        loop {
            let before = query::generation(&self.store).unwrap_or(0);
            let (bytes, draft) = self.fetch(path, kind)?;
            let after = query::generation(&self.store).unwrap_or(0);
            tries += 1;
            if before == after || tries == 3 {
                self.gen.fetch_max(before, Ordering::SeqCst);
                return Ok((bytes, draft, before));
            }
        }
    }

    /// A store-backed file's content as of generation `gen` or later (rendered once per
    /// generation), with its mtime: that moves exactly when the bytes differ from the last ones
    /// this path served, to a time after the last one (see [`Stamp`]).
    fn content(&self, path: &str, kind: &Kind, gen: u64) -> Result<Rendered, Errno> {
        let status = matches!(kind, Kind::Status);
        if !status {
            let st = self.lock();
            if let Some(r) = st.renders.get(path).filter(|r| r.gen >= gen) {
                return Ok(Rendered {
                    gen: r.gen,
                    bytes: r.bytes.clone(),
                    draft: r.draft,
                    mtime: r.mtime,
                });
            }
        }
        let (bytes, draft, at) = if status {
            (self.status_text().into_bytes(), false, None)
        } else {
            let (b, d, g) = self.fetch_at(path, kind)?;
            if b.len() > TRIM_ABOVE {
                // Rendering a big file reads a row per form: give back what that took.
                trim_heap();
            }
            (b, d, Some(g))
        };
        let bytes = Arc::new(bytes);
        // Only a path never served needs its history (outside the lock: it asks the store).
        let first = !self.lock().stamps.contains_key(path);
        let initial = match (first, at) {
            (false, _) => None,
            (true, None) => Some(self.started),
            (true, Some(g)) => Some(self.initial_mtime(path, g, draft)),
        };
        let mut st = self.lock();
        let (mtime, current) = match st.stamps.get_mut(path) {
            None => {
                let mtime = initial.unwrap_or_else(SystemTime::now);
                st.stamps.insert(path.to_string(), Stamp { gen: at, bytes: bytes.clone(), mtime });
                (mtime, true)
            }
            Some(s) if *s.bytes == *bytes => {
                s.gen = s.gen.max(at);
                (s.mtime, true)
            }
            // Read before what this path last served was: older bytes, not a change. They are
            // served (this request asked before the change) but neither cached nor stamped.
            Some(s) if at.is_some() && at <= s.gen => (s.mtime, false),
            Some(s) => {
                s.mtime = SystemTime::now().max(s.mtime + Duration::from_nanos(1));
                s.gen = at;
                s.bytes = bytes.clone();
                (s.mtime, true)
            }
        };
        let gen = at.unwrap_or(gen);
        if current && !status {
            st.renders
                .insert(path.to_string(), Rendered { gen, bytes: bytes.clone(), draft, mtime });
        }
        Ok(Rendered { gen, bytes, draft, mtime })
    }

    fn attr(&self, ino: u64, path: &str, kind: &Kind, fh: Option<u64>) -> Result<FileAttr, Errno> {
        let mk = |size: u64, perm: u16, mtime: SystemTime, uid: u32, gid: u32| FileAttr {
            ino: INodeNo(ino),
            size,
            blocks: size.div_ceil(512),
            atime: mtime,
            mtime,
            ctime: mtime,
            crtime: mtime,
            kind: kind.file_type(),
            perm,
            nlink: if matches!(kind, Kind::Dir { .. }) { 2 } else { 1 },
            uid,
            gid,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        };
        let ro = self.read_only;
        match kind {
            Kind::Dir { writable } => {
                let perm = if *writable && !ro { 0o755 } else { 0o555 };
                Ok(mk(4096, perm, self.started, self.uid, self.gid))
            }
            Kind::Scratch | Kind::Pending | Kind::Symlink => {
                let st = self.lock();
                let n = st.mem.get(path).ok_or(Errno::ENOENT)?;
                let size = n.symlink.as_ref().map_or(n.data.len(), Vec::len) as u64;
                let size = match kind {
                    Kind::Pending => self.open_size(&st, ino, fh).unwrap_or(size),
                    _ => size,
                };
                let perm = if matches!(kind, Kind::Symlink) { 0o777 } else { n.perm };
                Ok(mk(size, perm, n.mtime, n.uid, n.gid))
            }
            _ => {
                let open = self.open_size(&self.lock(), ino, fh);
                let gen = self.gen.load(Ordering::SeqCst);
                let r = self.content(path, kind, gen)?;
                let size = open.unwrap_or(r.bytes.len() as u64);
                let perm = match kind {
                    Kind::Stored | Kind::Form(_) if !ro => 0o644,
                    _ => 0o444,
                };
                Ok(mk(size, perm, r.mtime, self.uid, self.gid))
            }
        }
    }

    /// The size an open handle gives a file: the asking handle's, else a written handle's.
    fn open_size(&self, st: &State, ino: u64, fh: Option<u64>) -> Option<u64> {
        if let Some(h) = fh.and_then(|f| st.handles.get(&f)) {
            if h.ino == ino && h.kind != HandleKind::Mem {
                return Some(h.data.len() as u64);
            }
        }
        st.handles
            .values()
            .find(|h| h.ino == ino && h.kind == HandleKind::Tracked && h.dirty)
            .map(|h| h.data.len() as u64)
    }

    fn path_of(&self, ino: u64) -> Result<String, Errno> {
        self.lock().inodes.path(ino).ok_or(Errno::ENOENT)
    }

    /// The path of `name` in directory `parent`. A name longer than Linux's NAME_MAX, or a
    /// path longer than PATH_MAX, is ENAMETOOLONG, as on a disk filesystem: the store would take
    /// it, but no working directory could hold it, so the file could never be written back.
    fn child(&self, parent: u64, name: &OsStr) -> Result<String, Errno> {
        if name.len() > NAME_MAX {
            return Err(Errno::ENAMETOOLONG);
        }
        let name = name.to_str().ok_or(Errno::EINVAL)?;
        let path = join(&self.path_of(parent)?, name);
        if path.len() >= PATH_MAX {
            return Err(Errno::ENAMETOOLONG);
        }
        Ok(path)
    }

    fn lookup_path(&self, path: &str) -> Result<(u64, Kind, FileAttr), Errno> {
        let kind = self.resolve(path).ok_or(Errno::ENOENT)?;
        let ino = self.lock().inodes.get(path);
        let attr = self.attr(ino, path, &kind, None)?;
        Ok((ino, kind, attr))
    }

    fn children(&self, path: &str) -> Vec<(String, FileType)> {
        let mut out: Vec<(String, FileType)> = Vec::new();
        let file_or_dir = |d: bool| if d { FileType::Directory } else { FileType::RegularFile };
        if path == META {
            return vec![
                ("forms".into(), FileType::Directory),
                ("oneline".into(), FileType::Directory),
                ("status".into(), FileType::RegularFile),
            ];
        }
        let tree = self.tree();
        // `forms/` and the top of `oneline/` list nothing of the store: a recursive walk from
        // the root (`grep -r`, `find`, `rg`) would otherwise read a file per form and the whole
        // tree twice more. Their files resolve by name all the same (see the crate docs).
        if path == ONELINE {
            return out;
        }
        if let Some(rest) = path.strip_prefix(ONELINE) {
            let rest = rest.trim_start_matches('/');
            if let Some(c) = tree.dirs.get(rest) {
                out.extend(c.iter().map(|(n, d)| (n.clone(), file_or_dir(*d))));
            }
            return out;
        }
        if path != FORMS {
            if let Some(c) = tree.dirs.get(path) {
                out.extend(c.iter().map(|(n, d)| (n.clone(), file_or_dir(*d))));
            }
        }
        if path.is_empty() {
            out.push((META.into(), FileType::Directory));
        }
        let st = self.lock();
        let prefix = if path.is_empty() { String::new() } else { format!("{path}/") };
        out.retain(|(n, _)| {
            !st.hidden.contains(&join(path, n)) && !st.mem.contains_key(&join(path, n))
        });
        for (p, n) in &st.mem {
            if let Some(rest) = p.strip_prefix(&prefix) {
                if !rest.contains('/') {
                    let t =
                        if n.symlink.is_some() { FileType::Symlink } else { FileType::RegularFile };
                    out.push((rest.to_string(), t));
                } else if let Some((d, _)) = rest.split_once('/') {
                    out.push((d.to_string(), FileType::Directory));
                }
            }
        }
        for d in &st.mem_dirs {
            if let Some(rest) = d.strip_prefix(&prefix) {
                let first = rest.split('/').next().unwrap_or(rest);
                if !first.is_empty() {
                    out.push((first.to_string(), FileType::Directory));
                }
            }
        }
        drop(st);
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out.dedup_by(|a, b| a.0 == b.0);
        out
    }

    fn status_text(&self) -> String {
        let mut s = String::new();
        let at = self.store.location().map(|p| p.display().to_string()).unwrap_or_default();
        s.push_str(&format!("formdb mount of {at} for user {}\n\n", self.writer.user));
        let drafts = save::drafts(&self.store).unwrap_or_default();
        if drafts.is_empty() {
            s.push_str("drafts: none\n");
        } else {
            s.push_str(&format!(
                "drafts ({}): saves kept as written, not in the store (`formdb drafts`)\n",
                drafts.len()
            ));
            for d in &drafts {
                s.push_str(&format!(
                    "  {}:{}:{}: {} (by {})\n",
                    d.path, d.line, d.col, d.error, d.user
                ));
            }
        }
        let st = self.lock();
        if !st.log.is_empty() {
            s.push_str("\nrecent saves (newest last):\n");
            for l in &st.log {
                let t = l.at.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
                let mark = if l.error { "error" } else { "ok" };
                s.push_str(&format!("  [{t}] {mark} {}: {}\n", l.path, l.text));
            }
        }
        s
    }

    fn new_fh(&self) -> u64 {
        self.next_fh.fetch_add(1, Ordering::SeqCst)
    }

    /// Save text under a tracked path, outside the state lock.
    fn save_path(
        &self,
        path: &str,
        kind: &Kind,
        data: &[u8],
        base: Option<&[u8]>,
    ) -> Result<Saved, EditError> {
        let r = match kind {
            Kind::Form(id) => ops::save_form_text(&self.store, &self.writer, id, data, base),
            _ => save::save(&self.store, &self.writer, path, data, base),
        };
        self.log_saved(path, &r);
        self.refresh_gen();
        r
    }

    /// Commit a tracked handle's content: at `flush` if it was written, at `fsync` if it
    /// changed at all, at release if it changed or was created and never committed.
    fn commit(&self, fh: u64, when: When) -> Result<(), Errno> {
        let started = std::time::Instant::now();
        let (path, data, base, writes) = {
            let st = self.lock();
            let Some(h) = st.handles.get(&fh) else { return Ok(()) };
            if h.kind != HandleKind::Tracked {
                return Ok(());
            }
            let due = match when {
                When::Flush => h.written,
                When::Fsync => h.dirty,
                When::Release => h.dirty || h.created,
            };
            if !due {
                return h.error.map_or(Ok(()), Err);
            }
            let Some(path) = st.inodes.path(h.ino) else {
                // Unlinked while open: nothing to commit to.
                return Ok(());
            };
            (path, h.data.clone(), h.base.clone(), h.writes)
        };
        let kind = match self.resolve(&path).map(|k| form_kind(&path, k)) {
            Some(k) if k.tracked() => k,
            // Renamed to a scratch name while open: the bytes go to the memory node.
            Some(Kind::Scratch) => {
                let mut st = self.lock();
                if let Some(n) = st.mem.get_mut(&path) {
                    n.data = data;
                }
                if let Some(h) = st.handles.get_mut(&fh) {
                    h.dirty = false;
                    h.written = false;
                    h.created = false;
                }
                return Ok(());
            }
            // Deleted elsewhere (another mount, the CLI, a checkout) while open here: what was
            // written is saved all the same, not dropped (a file is written anew; a form file's
            // text is kept as its draft).
            None if !self.lock().hidden.contains(&path) => match form_kind(&path, Kind::Pending) {
                k @ Kind::Form(_) => k,
                k if !path.starts_with(".formdb/") && !names::scratch_path(&path) => k,
                _ => return Ok(()),
            },
            _ => return Ok(()),
        };
        let resolved = started.elapsed();
        let saved = self.save_path(&path, &kind, &data, base.as_deref());
        // With FORMDB_TRACE set, what a close waits for, next to the save's own phases (edit)
        // and the transaction (engine): where a slow save spends its time.
        if formdb_engine::trace::tracing() {
            eprintln!(
                "{:>8.1} ms  commit {path} (resolving the path {:.1} ms)",
                started.elapsed().as_secs_f64() * 1000.0,
                resolved.as_secs_f64() * 1000.0
            );
        }
        let mut st = self.lock();
        let result = match &saved {
            Ok(s) => {
                st.mem.remove(&path);
                st.hidden.remove(&path);
                st.renders.remove(&path);
                st.serve(path.clone(), data.clone());
                refused(s).map_or(Ok(()), Err)
            }
            Err(_) => {
                // A new file stays in memory: it holds what was written, for the next open.
                if let Some(n) = st.mem.get_mut(&path) {
                    n.data.clone_from(&data);
                }
                Err(Errno::EIO)
            }
        };
        if let Some(h) = st.handles.get_mut(&fh) {
            h.created = false;
            if saved.is_ok() {
                if h.writes == writes {
                    h.dirty = false;
                    h.written = false;
                }
                h.base = Some(data);
            }
            h.error = result.err();
        }
        result
    }

    /// Open `ino`: a handle and the open flags for the kernel (see [`State::page_cache`]).
    fn open(&self, ino: u64, flags: i32, created: bool) -> Result<(u64, FopenFlags), Errno> {
        let path = self.path_of(ino)?;
        let kind = self.resolve(&path).ok_or(Errno::ENOENT)?;
        let acc = OpenFlags(flags).acc_mode();
        let writable = acc != OpenAccMode::O_RDONLY;
        let readable = acc != OpenAccMode::O_WRONLY;
        if writable {
            if self.read_only {
                return Err(Errno::EROFS);
            }
            if matches!(kind, Kind::Oneline(_) | Kind::Status) {
                return Err(Errno::EACCES);
            }
        }
        if matches!(kind, Kind::Dir { .. }) {
            return Err(Errno::EISDIR);
        }
        let append = flags & libc::O_APPEND != 0;
        let mut h = Handle {
            ino,
            kind: HandleKind::Mem,
            data: Vec::new(),
            base: None,
            dirty: false,
            written: false,
            writes: 0,
            created,
            append,
            writable,
            error: None,
        };
        // The snapshot a read-only open of a store-backed file serves: the kernel may keep
        // the pages it cached of the same bytes.
        let mut snapshot: Option<Arc<Vec<u8>>> = None;
        match &kind {
            Kind::Scratch | Kind::Symlink => {}
            Kind::Pending => {
                let st = self.lock();
                let n = st.mem.get(&path).ok_or(Errno::ENOENT)?;
                h.kind = HandleKind::Tracked;
                h.data = pending_data(&st, ino, &n.data).to_vec();
                h.base = n.base.clone();
            }
            Kind::Stored | Kind::Form(_) => {
                let gen = self.refresh_gen();
                let r = self.content(&path, &kind, gen)?;
                h.kind = HandleKind::Tracked;
                h.data = r.bytes.to_vec();
                snapshot = (!writable).then_some(r.bytes);
                let mut st = self.lock();
                h.base = if r.draft {
                    None
                } else if readable {
                    st.serve(path.clone(), h.data.clone());
                    Some(h.data.clone())
                } else {
                    Some(st.served.get(&path).cloned().unwrap_or_else(|| h.data.clone()))
                };
            }
            Kind::Oneline(_) | Kind::Status => {
                let gen = self.refresh_gen();
                h.kind = HandleKind::Snapshot;
                let bytes = self.content(&path, &kind, gen)?.bytes;
                h.data = bytes.to_vec();
                // The status file changes without the store moving: always read afresh.
                snapshot = matches!(kind, Kind::Oneline(_)).then_some(bytes);
            }
            Kind::Dir { .. } => unreachable!(),
        }
        let fh = self.new_fh();
        let mut st = self.lock();
        let mut open_flags = FopenFlags::empty();
        // A handle that cannot write has nothing to commit at `close` (see `commit`).
        if !writable {
            open_flags |= FopenFlags::FOPEN_NOFLUSH;
        }
        match snapshot {
            // Every handle open on the inode must serve these bytes too: one serving others
            // (an older snapshot, unsaved writes) may put its own pages in the cache.
            Some(bytes) if st.handles.values().all(|o| o.ino != ino || *o.data == **bytes) => {
                let cached = st.page_cache.get(&ino);
                if cached.is_some_and(|c| Arc::ptr_eq(c, &bytes) || **c == *bytes) {
                    open_flags |= FopenFlags::FOPEN_KEEP_CACHE;
                }
                st.page_cache.insert(ino, bytes);
            }
            _ => {
                st.page_cache.remove(&ino);
            }
        }
        st.handles.insert(fh, h);
        Ok((fh, open_flags))
    }

    fn read(&self, fh: u64, offset: u64, size: u32) -> Result<Vec<u8>, Errno> {
        let st = self.lock();
        let h = st.handles.get(&fh).ok_or(Errno::EBADF)?;
        let slice = |d: &[u8]| {
            let start = (offset as usize).min(d.len());
            let end = (start + size as usize).min(d.len());
            d[start..end].to_vec()
        };
        if h.kind == HandleKind::Mem {
            let path = st.inodes.path(h.ino);
            if let Some(n) = path.and_then(|p| st.mem.get(&p)) {
                return Ok(slice(&n.data));
            }
        }
        Ok(slice(&h.data))
    }

    /// Why an append would be refused, checked at the write itself: an append shorter than
    /// [`APPEND_CHECKED_BELOW`] (what `echo … >> f` or `printf … >> f` writes in one call) is
    /// taken as all the writer appends, and when the text it leaves does not parse (or is not
    /// UTF-8, or holds a NUL byte) the write fails with EINVAL and nothing of it is kept. A shell
    /// never sees what `close` says (it closes a redirection with `dup2`), so the write is the
    /// one call that can tell it. Longer writes may be one chunk of many (`cat big >> f`) and
    /// are checked at close, as every save is. Returns the path and the reason, as
    /// `path:line:col: why`.
    fn append_refusal(&self, fh: u64, data: &[u8]) -> Option<(String, String)> {
        if data.len() >= APPEND_CHECKED_BELOW {
            return None;
        }
        let (path, mut text) = {
            let st = self.lock();
            let h = st.handles.get(&fh)?;
            if !(h.append && h.writable && h.kind == HandleKind::Tracked) {
                return None;
            }
            let path = st.inodes.path(h.ino)?;
            formdb_engine::syntax::Lang::from_path(&path)?;
            (path, h.data.clone())
        };
        text.extend_from_slice(data);
        let text = match String::from_utf8(text) {
            Ok(t) => t,
            Err(e) => {
                let at = e.utf8_error().valid_up_to();
                return Some((path.clone(), format!("{path}: not UTF-8 at byte {at}")));
            }
        };
        if let Some(at) = text.find('\0') {
            let line = text[..at].matches('\n').count() + 1;
            return Some((path.clone(), format!("{path}:{line}: a NUL byte")));
        }
        // The check takes one or more forms: the `nil` after the text is one more, so a file of
        // comments only passes too, and it is swallowed by an unclosed form, which fails.
        let problem = formdb_edit::check::source(&format!("{text}\nnil"), false, true).err()?;
        // The check drops leading blank lines; its lines count from the first line it kept.
        let skipped = text.len() - text.trim_start_matches(['\n', '\r']).len();
        let line = problem.line as usize + text[..skipped].matches('\n').count();
        let why = problem.message;
        let why = why
            .strip_prefix(&format!("line {}, column {}: ", problem.line, problem.col))
            .unwrap_or(&why);
        let why = why.split_once("; nothing was stored").map_or(why, |(w, _)| w);
        let why = format!("{path}:{line}:{}: {why}", problem.col);
        Some((path, why))
    }

    fn write(&self, fh: u64, offset: u64, data: &[u8]) -> Result<u32, Errno> {
        if let Some((path, why)) = self.append_refusal(fh, data) {
            self.log(&path, format!("append refused, nothing written: {why}"), true);
            return Err(Errno::EINVAL);
        }
        let mut st = self.lock();
        let st = &mut *st;
        let h = st.handles.get_mut(&fh).ok_or(Errno::EBADF)?;
        if !h.writable {
            return Err(Errno::EBADF);
        }
        // The kernel puts written bytes in its page cache too.
        st.page_cache.remove(&h.ino);
        let path = st.inodes.path(h.ino);
        match h.kind {
            HandleKind::Snapshot => return Err(Errno::EBADF),
            HandleKind::Mem => {
                let n = path.and_then(|p| st.mem.get_mut(&p)).ok_or(Errno::ENOENT)?;
                let at = if h.append { n.data.len() } else { offset as usize };
                write_at(&mut n.data, at, data);
                n.mtime = SystemTime::now();
            }
            HandleKind::Tracked => {
                let at = if h.append { h.data.len() } else { offset as usize };
                write_at(&mut h.data, at, data);
                h.dirty = true;
                h.written = true;
                h.writes += 1;
                h.error = None;
                // A new file's memory node is not copied into here at every write (a 50 MB
                // file comes in 400 writes): its other opens read this handle's bytes, see
                // `pending_data`.
                if let Some(n) = path.and_then(|p| st.mem.get_mut(&p)) {
                    n.mtime = SystemTime::now();
                }
            }
        }
        Ok(data.len() as u32)
    }

    fn truncate(
        &self,
        ino: u64,
        path: &str,
        kind: &Kind,
        fh: Option<u64>,
        size: u64,
    ) -> Result<(), Errno> {
        let size = size as usize;
        let mut guard = self.lock();
        let st = &mut *guard;
        st.page_cache.remove(&ino);
        let mut done = false;
        for (f, h) in st.handles.iter_mut() {
            let mine = fh == Some(*f) || (fh.is_none() && h.writable);
            if h.ino == ino && h.kind == HandleKind::Tracked && mine {
                h.data.resize(size, 0);
                h.dirty = true;
                h.writes += 1;
                h.error = None;
                done = true;
            }
        }
        if let Some(n) = st.mem.get_mut(path) {
            n.data.resize(size, 0);
            n.mtime = SystemTime::now();
            return Ok(());
        }
        if done || !kind.tracked() {
            return Ok(());
        }
        // `truncate` on a closed tracked file: a save of the shortened text.
        drop(guard);
        let gen = self.refresh_gen();
        let r = self.content(path, kind, gen)?;
        let mut data = r.bytes.to_vec();
        data.resize(size, 0);
        let base = (!r.draft).then(|| r.bytes.to_vec());
        match self.save_path(path, kind, &data, base.as_deref()) {
            Ok(s) => refused(&s).map_or(Ok(()), Err),
            Err(e) => Err(edit_errno(&e)),
        }
    }

    fn new_node(
        &self,
        path: &str,
        perm: u32,
        uid: u32,
        gid: u32,
        symlink: Option<Vec<u8>>,
    ) -> Result<(u64, Kind), Errno> {
        if self.read_only {
            return Err(Errno::EROFS);
        }
        let (parent, name) = split(path);
        match self.resolve(parent) {
            Some(Kind::Dir { writable: true }) => {}
            Some(Kind::Dir { .. }) => return Err(Errno::EACCES),
            Some(_) => return Err(Errno::ENOTDIR),
            None => return Err(Errno::ENOENT),
        }
        if self.resolve(path).is_some() {
            return Err(Errno::EEXIST);
        }
        let in_forms = parent == FORMS;
        let scratch = symlink.is_some()
            || if in_forms { names::scratch_component(name) } else { names::scratch_path(path) };
        let mut st = self.lock();
        if in_forms && !scratch && !st.hidden.contains(path) {
            // New forms come from editing a namespace, not from new files here (an editor may
            // write a form file anew after renaming it to its backup name).
            return Err(Errno::EACCES);
        }
        let base = if scratch { None } else { st.served.get(path).cloned() };
        st.mem.insert(
            path.to_string(),
            MemNode {
                data: Vec::new(),
                perm: (perm & 0o7777) as u16,
                uid,
                gid,
                mtime: SystemTime::now(),
                symlink,
                scratch,
                base,
            },
        );
        let ino = st.inodes.get(path);
        let kind = if scratch { Kind::Scratch } else { Kind::Pending };
        Ok((ino, kind))
    }

    fn keep_parents(&self, path: &str) {
        let mut st = self.lock();
        let mut p = path;
        while let Some((parent, _)) = p.rsplit_once('/') {
            if parent == META || parent.starts_with(".formdb/") {
                break;
            }
            st.mem_dirs.insert(parent.to_string());
            p = parent;
        }
    }

    fn unlink(&self, path: &str) -> Result<(), Errno> {
        if self.read_only {
            return Err(Errno::EROFS);
        }
        let kind = self.resolve(path).ok_or(Errno::ENOENT)?;
        match kind {
            Kind::Scratch | Kind::Symlink | Kind::Pending => {
                self.lock().mem.remove(path);
            }
            Kind::Stored => {
                let r = save::delete(&self.store, &self.writer, path);
                self.refresh_gen();
                match r {
                    Ok(_) => {
                        self.log(path, "deleted (`formdb restore` brings it back)".into(), false)
                    }
                    Err(e) => {
                        self.log(path, format!("delete failed: {e}"), true);
                        return Err(edit_errno(&e));
                    }
                }
                let mut st = self.lock();
                st.renders.remove(path);
                st.served.remove(path);
            }
            Kind::Dir { .. } => return Err(Errno::EISDIR),
            _ => return Err(Errno::EACCES),
        }
        self.keep_parents(path);
        self.lock().inodes.remove(path);
        Ok(())
    }

    fn rmdir(&self, path: &str) -> Result<(), Errno> {
        if self.read_only {
            return Err(Errno::EROFS);
        }
        match self.resolve(path) {
            Some(Kind::Dir { writable: true }) if !path.is_empty() && path != FORMS => {}
            Some(Kind::Dir { .. }) => return Err(Errno::EACCES),
            Some(_) => return Err(Errno::ENOTDIR),
            None => return Err(Errno::ENOENT),
        }
        if !self.children(path).is_empty() {
            return Err(Errno::ENOTEMPTY);
        }
        self.keep_parents(path);
        let mut st = self.lock();
        st.mem_dirs.remove(path);
        st.inodes.remove(path);
        Ok(())
    }

    fn rename(&self, from: &str, to: &str, flags: RenameFlags) -> Result<(), Errno> {
        if flags.contains(RenameFlags::RENAME_EXCHANGE)
            || flags.contains(RenameFlags::RENAME_WHITEOUT)
        {
            return Err(Errno::EINVAL);
        }
        if self.read_only {
            return Err(Errno::EROFS);
        }
        if from == to {
            return Ok(());
        }
        // Inodes move between names (and kinds) here; their cached pages are not known to be
        // what the new names serve. Renames are rare: forget them all.
        self.lock().page_cache.clear();
        let fk = self.resolve(from).ok_or(Errno::ENOENT)?;
        let tk = self.resolve(to);
        if flags.contains(RenameFlags::RENAME_NOREPLACE) && tk.is_some() {
            return Err(Errno::EEXIST);
        }
        let (to_parent, to_name) = split(to);
        match self.resolve(to_parent) {
            Some(Kind::Dir { writable: true }) => {}
            Some(Kind::Dir { .. }) => return Err(Errno::EACCES),
            _ => return Err(Errno::ENOENT),
        }
        if to_parent == FORMS
            && !names::scratch_component(to_name)
            && !matches!(tk, Some(Kind::Form(_)))
        {
            return Err(Errno::EACCES);
        }
        match (&fk, &tk) {
            (Kind::Dir { .. }, Some(Kind::Dir { .. })) if !self.children(to).is_empty() => {
                return Err(Errno::ENOTEMPTY)
            }
            (Kind::Dir { .. }, Some(Kind::Dir { .. })) => {}
            (Kind::Dir { .. }, Some(_)) => return Err(Errno::ENOTDIR),
            (_, Some(Kind::Dir { .. })) => return Err(Errno::EISDIR),
            _ => {}
        }
        if matches!(fk, Kind::Status | Kind::Oneline(_))
            || (from.starts_with(".formdb/") != to.starts_with(".formdb/"))
        {
            return Err(Errno::EACCES);
        }
        // Where the name ends up: tracked if the store holds it, else by the scratch rule.
        let to_tracked = match &tk {
            Some(k) if k.tracked() => true,
            Some(_) => false,
            None if to_parent == FORMS => false,
            None => !names::scratch_path(to),
        };
        match fk {
            Kind::Dir { .. } => {
                let tree = self.tree();
                let prefix = format!("{from}/");
                if tree.files.iter().any(|p| p.starts_with(&prefix)) {
                    // Everything the store holds under it moves in one change set: copying file
                    // by file (what `mv` does on EXDEV) would declare each namespace again while
                    // its old file still owns it, and lose the forms' ids.
                    let r = save::rename_dir(&self.store, &self.writer, from, to);
                    self.refresh_gen();
                    match r {
                        Ok(moved) => self.log(
                            from,
                            format!("directory renamed to {to} ({} paths moved)", moved.len()),
                            false,
                        ),
                        Err(e) => {
                            self.log(from, format!("rename to {to} failed: {e}"), true);
                            return Err(edit_errno(&e));
                        }
                    }
                }
                let mut guard = self.lock();
                let st = &mut *guard;
                let move_key = |k: &String| -> Option<String> {
                    if k == from {
                        Some(to.to_string())
                    } else {
                        k.strip_prefix(&prefix).map(|r| format!("{to}/{r}"))
                    }
                };
                let dirs: Vec<String> = st.mem_dirs.iter().cloned().collect();
                st.mem_dirs =
                    dirs.iter().map(|d| move_key(d).unwrap_or_else(|| d.clone())).collect();
                st.mem_dirs.insert(to.to_string());
                let mem: Vec<(String, MemNode)> = st.mem.drain().collect();
                st.mem = mem.into_iter().map(|(k, v)| (move_key(&k).unwrap_or(k), v)).collect();
                let hidden: Vec<String> = st.hidden.drain().collect();
                st.hidden = hidden.into_iter().map(|k| move_key(&k).unwrap_or(k)).collect();
                st.served.rename_tree(from, to);
                // Rendered bytes are keyed by path: the moved paths render afresh (their
                // stamps stay behind, so a later file at an old path still gets a newer mtime).
                st.renders.retain(|k, _| move_key(k).is_none());
                st.inodes.rename(from, to);
                drop(guard);
                self.keep_parents(from);
            }
            Kind::Scratch | Kind::Pending | Kind::Symlink => {
                let node = {
                    let st = self.lock();
                    let mut node = st.mem.get(from).cloned().ok_or(Errno::ENOENT)?;
                    if let Some(ino) = st.inodes.by_path.get(from) {
                        node.data = pending_data(&st, *ino, &node.data).to_vec();
                    }
                    node
                };
                if to_tracked && node.symlink.is_none() {
                    let kind = match tk.clone() {
                        Some(k @ (Kind::Form(_) | Kind::Stored)) => k,
                        _ => form_kind(to, Kind::Pending),
                    };
                    let base = {
                        let st = self.lock();
                        st.served
                            .get(to)
                            .cloned()
                            .or_else(|| st.mem.get(to).and_then(|n| n.base.clone()))
                    };
                    let saved = self.save_path(to, &kind, &node.data, base.as_deref());
                    if saved.is_err() {
                        return Err(Errno::EIO);
                    }
                    let mut st = self.lock();
                    st.mem.remove(from);
                    st.mem.remove(to);
                    st.hidden.remove(to);
                    st.renders.remove(to);
                    st.serve(to.to_string(), node.data);
                    st.inodes.rename(from, to);
                } else {
                    let mut st = self.lock();
                    st.mem.remove(from);
                    let mut node = node;
                    node.scratch = node.symlink.is_some() || !to_tracked;
                    st.mem.insert(to.to_string(), node);
                    st.inodes.rename(from, to);
                }
            }
            Kind::Stored | Kind::Form(_) if !to_tracked => {
                // An editor's backup by rename (`f` → `f~`): the store keeps the file; the name
                // is hidden until the editor writes the new `f`.
                let gen = self.refresh_gen();
                let r = self.content(from, &fk, gen)?;
                let mut st = self.lock();
                st.hidden.insert(from.to_string());
                if !r.draft && st.served.get(from).is_none() {
                    st.serve(from.to_string(), r.bytes.to_vec());
                }
                st.mem.insert(
                    to.to_string(),
                    MemNode {
                        data: r.bytes.to_vec(),
                        perm: 0o644,
                        uid: self.uid,
                        gid: self.gid,
                        mtime: r.mtime,
                        symlink: None,
                        scratch: true,
                        base: None,
                    },
                );
                st.inodes.rename(from, to);
            }
            Kind::Stored => {
                if let Some(Kind::Form(_)) = tk {
                    return Err(Errno::EACCES);
                }
                let r = save::rename(&self.store, &self.writer, from, to, true);
                self.refresh_gen();
                if let Err(e) = r {
                    self.log(from, format!("rename to {to} failed: {e}"), true);
                    return Err(Errno::EIO);
                }
                self.log(from, format!("renamed to {to}"), false);
                {
                    let mut st = self.lock();
                    st.mem.remove(to);
                    st.hidden.remove(to);
                    st.renders.remove(to);
                    st.renders.remove(from);
                    if let Some(s) = st.served.remove(from) {
                        st.serve(to.to_string(), s);
                    }
                    st.inodes.rename(from, to);
                }
                self.keep_parents(from);
            }
            _ => return Err(Errno::EACCES),
        }
        Ok(())
    }
}

/// Hand the heap's free memory back to the system.
fn trim_heap() {
    // SAFETY: malloc_trim only releases free memory of glibc's arenas.
    #[cfg(target_env = "gnu")]
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The fuser filesystem over [`Shared`].
pub(crate) struct Fs {
    pub(crate) shared: Arc<Shared>,
}

fn ttl(kind: &Kind) -> Duration {
    if matches!(kind, Kind::Dir { .. }) {
        DIR_TTL
    } else {
        FILE_TTL
    }
}

impl Filesystem for Fs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let s = &self.shared;
        let gen = s.refresh_gen_recent();
        let mut r = s.child(parent.0, name).and_then(|p| s.lookup_path(&p));
        if r.is_err() && s.refresh_gen() != gen {
            // A name made elsewhere in the last few milliseconds.
            r = s.child(parent.0, name).and_then(|p| s.lookup_path(&p));
        }
        match r {
            Ok((_, kind, attr)) => {
                reply.entry_with_ttls(&ttl(&kind), &ENTRY_TTL, &attr, Generation(0))
            }
            Err(e) => reply.error(e),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        let s = &self.shared;
        let fh = fh.map(|f| f.0);
        if fh.is_none() {
            // A stat sees changes made elsewhere (within a few milliseconds).
            s.refresh_gen_recent();
        }
        let r = s.path_of(ino.0).and_then(|path| {
            let kind = s.resolve(&path).ok_or(Errno::ENOENT)?;
            Ok((s.attr(ino.0, &path, &kind, fh)?, kind))
        });
        match r {
            Ok((attr, kind)) => reply.attr(&ttl(&kind), &attr),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let s = &self.shared;
        let r = (|| {
            let path = s.path_of(ino.0)?;
            let kind = s.resolve(&path).ok_or(Errno::ENOENT)?;
            let changes = size.is_some()
                || mode.is_some()
                || uid.is_some()
                || gid.is_some()
                || mtime.is_some();
            if changes && s.read_only {
                return Err(Errno::EROFS);
            }
            if let Some(size) = size {
                match kind {
                    Kind::Dir { .. } => return Err(Errno::EISDIR),
                    Kind::Oneline(_) | Kind::Status => return Err(Errno::EACCES),
                    _ => s.truncate(ino.0, &path, &kind, fh.map(|f| f.0), size)?,
                }
            }
            {
                let mut st = s.lock();
                if let Some(n) = st.mem.get_mut(&path) {
                    if let Some(m) = mode {
                        n.perm = (m & 0o7777) as u16;
                    }
                    if let Some(u) = uid {
                        n.uid = u;
                    }
                    if let Some(g) = gid {
                        n.gid = g;
                    }
                    match mtime {
                        Some(TimeOrNow::SpecificTime(t)) => n.mtime = t,
                        Some(TimeOrNow::Now) => n.mtime = SystemTime::now(),
                        None => {}
                    }
                }
            }
            Ok((s.attr(ino.0, &path, &kind, fh.map(|f| f.0))?, kind))
        })();
        match r {
            Ok((attr, kind)) => reply.attr(&ttl(&kind), &attr),
            Err(e) => reply.error(e),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        let s = &self.shared;
        let r = s.path_of(ino.0).and_then(|p| {
            s.lock().mem.get(&p).and_then(|n| n.symlink.clone()).ok_or(Errno::EINVAL)
        });
        match r {
            Ok(t) => reply.data(&t),
            Err(e) => reply.error(e),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        let s = &self.shared;
        if mode & libc::S_IFMT != libc::S_IFREG {
            return reply.error(Errno::EPERM);
        }
        let r = s.child(parent.0, name).and_then(|p| {
            let (ino, kind) = s.new_node(&p, mode & !umask, req.uid(), req.gid(), None)?;
            Ok((s.attr(ino, &p, &kind, None)?, kind))
        });
        match r {
            Ok((attr, kind)) => {
                reply.entry_with_ttls(&ttl(&kind), &ENTRY_TTL, &attr, Generation(0))
            }
            Err(e) => reply.error(e),
        }
    }

    fn mkdir(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        let s = &self.shared;
        let r = s.child(parent.0, name).and_then(|p| {
            if s.read_only {
                return Err(Errno::EROFS);
            }
            let (par, _) = split(&p);
            match s.resolve(par) {
                Some(Kind::Dir { writable: true }) if par != FORMS => {}
                Some(Kind::Dir { .. }) => return Err(Errno::EACCES),
                Some(_) => return Err(Errno::ENOTDIR),
                None => return Err(Errno::ENOENT),
            }
            if s.resolve(&p).is_some() {
                return Err(Errno::EEXIST);
            }
            s.lock().mem_dirs.insert(p.clone());
            s.lookup_path(&p)
        });
        match r {
            Ok((_, kind, attr)) => {
                reply.entry_with_ttls(&ttl(&kind), &ENTRY_TTL, &attr, Generation(0))
            }
            Err(e) => reply.error(e),
        }
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let s = &self.shared;
        match s.child(parent.0, name).and_then(|p| s.unlink(&p)) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let s = &self.shared;
        match s.child(parent.0, name).and_then(|p| s.rmdir(&p)) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let s = &self.shared;
        use std::os::unix::ffi::OsStrExt;
        let target = target.as_os_str().as_bytes().to_vec();
        let r = s.child(parent.0, link_name).and_then(|p| {
            let (ino, _) = s.new_node(&p, 0o777, req.uid(), req.gid(), Some(target))?;
            Ok((s.attr(ino, &p, &Kind::Symlink, None)?, Kind::Symlink))
        });
        match r {
            Ok((attr, kind)) => {
                reply.entry_with_ttls(&ttl(&kind), &ENTRY_TTL, &attr, Generation(0))
            }
            Err(e) => reply.error(e),
        }
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let s = &self.shared;
        let r = s.child(parent.0, name).and_then(|from| {
            let to = s.child(newparent.0, newname)?;
            s.rename(&from, &to, flags)
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        match self.shared.open(ino.0, flags.0, false) {
            Ok((fh, open_flags)) => reply.opened(FileHandle(fh), open_flags),
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        match self.shared.read(fh.0, offset, size) {
            Ok(d) => reply.data(&d),
            Err(e) => reply.error(e),
        }
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        match self.shared.write(fh.0, offset, data) {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(e),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        match self.shared.commit(fh.0, When::Flush) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        // Anything still uncommitted (a created file never written) goes now; errors were
        // reported by flush, or are in /.formdb/status.
        let _ = self.shared.commit(fh.0, When::Release);
        let gone = self.shared.lock().handles.remove(&fh.0);
        reply.ok();
        let big = gone.as_ref().is_some_and(|h| h.data.len() > TRIM_ABOVE);
        drop(gone);
        if big {
            trim_heap();
        }
    }

    fn fsync(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        match self.shared.commit(fh.0, When::Fsync) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let s = &self.shared;
        let r = s.path_of(ino.0).and_then(|path| {
            match s.resolve(&path) {
                Some(Kind::Dir { .. }) => {}
                Some(_) => return Err(Errno::ENOTDIR),
                None => return Err(Errno::ENOENT),
            }
            let children = s.children(&path);
            let mut st = s.lock();
            let parent_ino = if path.is_empty() { ROOT } else { st.inodes.get(split(&path).0) };
            let mut list = vec![
                (ino.0, FileType::Directory, ".".to_string()),
                (parent_ino, FileType::Directory, "..".to_string()),
            ];
            for (name, t) in children {
                let i = st.inodes.get(&join(&path, &name));
                list.push((i, t, name));
            }
            let fh = s.new_fh();
            st.dir_handles.insert(fh, list);
            Ok(fh)
        });
        match r {
            Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::empty()),
            Err(e) => reply.error(e),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let st = self.shared.lock();
        let Some(list) = st.dir_handles.get(&fh.0) else { return reply.error(Errno::EBADF) };
        for (i, (ino, t, name)) in list.iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(*ino), (i + 1) as u64, *t, name) {
                break;
            }
        }
        reply.ok();
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.shared.lock().dir_handles.remove(&fh.0);
        reply.ok();
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        reply.statfs(1 << 24, 1 << 23, 1 << 23, 1 << 20, 1 << 19, 4096, 255, 4096);
    }

    fn setxattr(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _name: &OsStr,
        _value: &[u8],
        _flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        reply.error(enotsup());
    }

    fn getxattr(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _name: &OsStr,
        _size: u32,
        reply: ReplyXattr,
    ) {
        reply.error(enotsup());
    }

    fn listxattr(&self, _req: &Request, _ino: INodeNo, _size: u32, reply: ReplyXattr) {
        reply.error(enotsup());
    }

    fn removexattr(&self, _req: &Request, _ino: INodeNo, _name: &OsStr, reply: ReplyEmpty) {
        reply.error(enotsup());
    }

    fn access(&self, _req: &Request, ino: INodeNo, mask: AccessFlags, reply: ReplyEmpty) {
        let s = &self.shared;
        let r = s.path_of(ino.0).and_then(|p| s.resolve(&p).ok_or(Errno::ENOENT));
        match r {
            Ok(kind) => {
                let wants_write = mask.contains(AccessFlags::W_OK);
                let ro =
                    matches!(kind, Kind::Oneline(_) | Kind::Status | Kind::Dir { writable: false });
                if wants_write && s.read_only {
                    reply.error(Errno::EROFS)
                } else if wants_write && ro {
                    reply.error(Errno::EACCES)
                } else {
                    reply.ok()
                }
            }
            Err(e) => reply.error(e),
        }
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let s = &self.shared;
        let r = s.child(parent.0, name).and_then(|p| {
            let (ino, created) = match s.new_node(&p, mode & !umask, req.uid(), req.gid(), None) {
                Ok((ino, _)) => (ino, true),
                // Lost a race with another creator: open what is there (unless O_EXCL).
                Err(e) if e == Errno::EEXIST && flags & libc::O_EXCL == 0 => {
                    (s.lock().inodes.get(&p), false)
                }
                Err(e) => return Err(e),
            };
            let (fh, open_flags) = s.open(ino, flags, created)?;
            let kind = s.resolve(&p).ok_or(Errno::ENOENT)?;
            Ok((s.attr(ino, &p, &kind, Some(fh))?, kind, fh, open_flags))
        });
        match r {
            Ok((attr, kind, fh, open_flags)) => {
                reply.created(&ttl(&kind), &attr, Generation(0), FileHandle(fh), open_flags)
            }
            Err(e) => reply.error(e),
        }
    }
}

/// What the watcher must tell the kernel after the store changed `paths` (`true`: the path
/// appeared or disappeared): inodes whose data/attributes to drop and names to forget.
impl Shared {
    pub(crate) fn invalidations(&self, paths: &[(String, bool)]) -> (Vec<u64>, Vec<(u64, String)>) {
        let mut st = self.lock();
        let mut inodes = Vec::new();
        let mut entries = Vec::new();
        for (p, existence) in paths {
            st.renders.remove(p);
            for path in [p.clone(), format!("{ONELINE}/{p}")] {
                if let Some(i) = st.inodes.by_path.get(&path) {
                    if !st.mem.contains_key(&path) {
                        inodes.push(*i);
                    }
                }
                if *existence {
                    let (parent, name) = split(&path);
                    if let Some(pi) = st.inodes.by_path.get(parent) {
                        entries.push((*pi, name.to_string()));
                        inodes.push(*pi);
                    }
                }
            }
        }
        for (p, i) in &st.inodes.by_path {
            if p == STATUS || p.starts_with(".formdb/forms/") {
                inodes.push(*i);
            }
        }
        inodes.sort_unstable();
        inodes.dedup();
        (inodes, entries)
    }
}
