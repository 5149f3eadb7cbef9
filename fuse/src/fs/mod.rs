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
use formdb_engine::read;
use formdb_engine::stamp::ChangeStamp;
use formdb_engine::store::Store;
use formdb_projector::views::{self, Render};
use fuser::{
    AccessFlags, BsdFileFlags, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags,
    Generation, INodeNo, LockOwner, OpenAccMode, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate,
    ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite,
    ReplyXattr, Request, TimeOrNow, WriteFlags,
};

use crate::names;

mod handles;
mod kernel;
mod lookup;
mod names_ops;

/// How long the kernel may keep what it was told without asking again. The watcher tells it
/// what changed within its poll (names that come and go with their directories, a changed
/// file's attributes and pages), so this is a backstop, long enough that a recursive walk run
/// now and then (`grep -r`, `rg`, `find`) finds every name and size cached as on a disk: each
/// `LOOKUP` or `GETATTR` is a round trip through the kernel, and a walk makes one or two a file.
const CACHED: Duration = Duration::from_secs(10);
/// Directory attributes.
const DIR_TTL: Duration = CACHED;
/// Names.
const ENTRY_TTL: Duration = CACHED;
/// The attributes of a store-backed file. Besides the watcher, an open that serves other bytes
/// than the kernel was last told of drops them first (see [`Shared::open`]), so a read never
/// stops at a stale size.
const FILE_TTL: Duration = CACHED;
/// Files whose size moves without the store moving (the status file, the mount's own scratch
/// and pending files) are never cached: a stat always sees the current size.
const VOLATILE_TTL: Duration = Duration::ZERO;
const ROOT: u64 = 1;
/// How long an `open` waits for the release of a truncation its process closed to come (see
/// [`Handle::truncated_by`]), and at most for the release's commit to end.
const TRUNCATION_RELEASE_WAIT: Duration = Duration::from_millis(100);
const COMMIT_WAIT: Duration = Duration::from_secs(10);
/// Appends shorter than this are checked at the write (see `Shared::append_refusal`).
const APPEND_CHECKED_BELOW: usize = 4096;
/// A handle holding more than this gives its memory back to the system when it goes, and so
/// does a rendering of a file this big (glibc keeps freed memory in its arenas otherwise: a
/// 10 MB save left the mount gigabytes larger).
const TRIM_ABOVE: usize = 1 << 20;
/// How many files of a directory one read from the store reads ahead (see
/// `Shared::read_ahead`): a bound on what one cold read costs.
const READ_AHEAD: usize = 32;
/// How many files, across directories, one read from the store reads ahead during a walk.
const WALK_AHEAD: usize = 64;
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

/// A file's bytes as open handles, merge bases and the page cache share them: an open serves
/// the rendered text to all of them as one allocation, and a commit saves a handle's bytes
/// without copying them (a write after it copies, `Arc::make_mut`). Copied, a 5 MB save held
/// four copies of the old text and two of the new while it ran.
pub(super) type Text = Arc<Vec<u8>>;

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
    base: Option<Text>,
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
    /// A `flush` by process `pid`.
    Flush(u32),
    Fsync,
    Release,
}

#[derive(Debug)]
struct Handle {
    ino: u64,
    kind: HandleKind,
    data: Text,
    /// The text this handle served (merge base); `None` when it served a draft.
    base: Option<Text>,
    dirty: bool,
    /// Written (not only truncated) since the last commit: what makes a `flush` commit. A
    /// truncation alone waits for the release (`cat x > f` flushes the truncated file once
    /// before it writes, when the shell closes its duplicate descriptor).
    written: bool,
    /// Bumped by every write, so a commit knows whether writes raced it.
    writes: u64,
    /// The processes whose writes it holds (the `pid` of their requests): only their `flush`
    /// commits ([`Handle::flushes`]).
    writers: Vec<u32>,
    /// Made by `create` and not committed yet: committed at release even if never written.
    created: bool,
    /// The process that truncated it last (`O_TRUNC`, `ftruncate`), and whether that process
    /// has closed it since. A truncation alone is committed at the release, which the kernel
    /// sends after `close` has returned: an `open` of the inode in between waits for that
    /// release ([`Shared::wait_for_closed_truncations`]), so that it reads what `close` left
    /// (close-to-open, as on a disk: `: > f; cat f` printed the old text).
    truncated_by: Option<u32>,
    truncation_closed: bool,
    /// Its release has come and is committing it.
    releasing: bool,
    /// The [`State::tick`] of this handle's last change (create, truncation, write). A release
    /// commits what was only created or truncated just if no handle committed the inode since.
    changed_at: u64,
    append: bool,
    writable: bool,
    /// The error of this handle's last commit, returned again by later flushes.
    error: Option<Errno>,
    /// Held through a commit of any handle of this inode (the handles open on one inode share
    /// it). One handle gets several `flush`es at once: the writer's `close`, and the `close` of
    /// every process forked while the descriptor was open (a `fork` copies it; `exec` closes
    /// it). Both found the text due and saved it; the one finishing last recorded the writer's
    /// text as served after the writer had read the store's newer one, and the writer's next
    /// save was merged against that older base. And two handles' commits: the late release of
    /// an emptied handle still saving while a newer handle's close saved the text; the empty
    /// save finished last.
    committing: Arc<Mutex<()>>,
}

impl Handle {
    /// Whether a `flush` by process `pid` commits it: it holds writes of that process. Another
    /// process's flush (a fork's copy closed at `exec`) leaves them to the writer's own flush,
    /// or to the release.
    fn flushes(&self, pid: u32) -> bool {
        self.written && self.writers.contains(&pid)
    }
}

/// The store's paths at one generation, as a tree.
#[derive(Default)]
pub(crate) struct Tree {
    /// In path order: the order of a walk, which a read ahead follows.
    files: BTreeSet<String>,
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
    bytes: Text,
    draft: bool,
    mtime: SystemTime,
}

/// The content a path last served and since when: its mtime. Kept when renders are dropped (a
/// save, the watcher), so the mtime of a path moves only when the bytes a read returns differ
/// from these, and never back to an older time.
struct Stamp {
    /// The store generation the bytes were read at (`None`: not tied to one, the status file).
    gen: Option<u64>,
    bytes: Text,
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
    by_path: HashMap<String, (u64, Text)>,
    /// Insertion sequence → path, oldest first.
    order: BTreeMap<u64, String>,
}

impl Served {
    fn get(&self, path: &str) -> Option<&Text> {
        self.by_path.get(path).map(|(_, b)| b)
    }

    fn remove(&mut self, path: &str) -> Option<Text> {
        let (seq, bytes) = self.by_path.remove(path)?;
        self.order.remove(&seq);
        Some(bytes)
    }

    fn len(&self) -> usize {
        self.by_path.len()
    }

    /// Record `bytes` as served under `path` now (the most recent entry).
    fn insert(&mut self, path: String, bytes: Text) {
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
    page_cache: HashMap<u64, Text>,
    /// Per inode, the size and mtime the kernel was last told of a store-backed file (cached
    /// for [`FILE_TTL`]). An open serving other bytes drops the kernel's copy first.
    told: HashMap<u64, (u64, SystemTime)>,
    /// Per directory inode, the listing a `READDIR` pass is reading (taken at offset 0).
    listed: HashMap<u64, Vec<(u64, FileType, String)>>,
    /// A clock of handle changes and commits, for [`Handle::changed_at`].
    tick: u64,
    /// Per inode with open handles, the tick of its last commit through the mount. The kernel
    /// releases a closed handle asynchronously, so the release of one that was only created
    /// or truncated can come after another handle saved the file (Emacs's precious save
    /// creates its temporary file, closes it, opens it again with `O_TRUNC`, writes and
    /// renames it over the file): saved then, its empty text would replace the one saved.
    committed_at: HashMap<u64, u64>,
    /// The Clojure file after the last read ahead (in path order): a cold read of it is a walk
    /// going on, and reads further ahead (see `Shared::read_ahead`).
    read_ahead_next: Option<String>,
}

impl State {
    fn tick(&mut self) -> u64 {
        self.tick += 1;
        self.tick
    }

    /// Record the text served under `path` (see [`Served`]), evicting the oldest entries past
    /// the cap that no open handle or hidden file still needs.
    fn serve(&mut self, path: String, bytes: Text) {
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
    /// The kernel's notification channel, for the one notice a request handler sends: an
    /// inode's attributes are stale (see [`Shared::drop_kernel_attrs`]).
    notifier: std::sync::OnceLock<fuser::Notifier>,
}

/// The store's change stamp at the last read of the generation. Reading the generation is a
/// Cozo query (~0.1 ms), and every open needs to know whether the store moved (a change made
/// elsewhere shows at the next read): at a few hundred opens a second that query is most of an
/// open. But every commit, by any process, moves the stamp ([`Store::change_stamp`], one
/// `pread`); so while it is what it was at the last read of the generation, nothing committed
/// since, and the generation read then still holds. Otherwise the generation is read again.
struct DbFiles {
    seen: Mutex<Option<ChangeStamp>>,
    /// The paths with a draft, as of a stamp: a read asks whether its path has one, and drafts
    /// are rare, so one query answers every read until the next commit.
    drafted: Mutex<Option<(ChangeStamp, Arc<HashSet<String>>)>>,
}

impl DbFiles {
    /// `None` for a store without a stamp (in memory, another engine).
    fn new(store: &Store) -> Option<DbFiles> {
        store.change_stamp().map(|_| DbFiles { seen: Mutex::new(None), drafted: Mutex::new(None) })
    }

    /// True when `now` (the stamp just taken) shows no commit since the generation was last read.
    fn unchanged(&self, now: &ChangeStamp) -> bool {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).as_ref() == Some(now)
    }

    /// Record the stamp taken before the generation was read.
    fn record(&self, stamp: ChangeStamp) {
        *self.seen.lock().unwrap_or_else(|p| p.into_inner()) = Some(stamp);
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

/// Truncate or extend a handle's bytes to `size`, copying only what stays of bytes it shares.
fn resize(data: &mut Text, size: usize) {
    if size < data.len() && Arc::strong_count(data) > 1 {
        *data = Arc::new(data[..size].to_vec());
    } else {
        Arc::make_mut(data).resize(size, 0);
    }
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
        EditError::Store(_) | EditError::View(_) => Errno::EIO,
        _ => Errno::EINVAL,
    }
}

/// An edit's error as the mount's status line and stderr say it, with the advice an editor's
/// user can act on (the engine and the edits word their errors for no transport).
fn worded(e: &EditError) -> String {
    match e.cause() {
        EditError::UnknownId { .. } => format!("{e}: {UNKNOWN_FORM_FILE}"),
        _ => e.to_string(),
    }
}

/// Why `.formdb/forms/<id>.clj` for an id no form has cannot be made.
const UNKNOWN_FORM_FILE: &str = "`.formdb/forms/` holds a file for each form already in the store, named by its id; to add a form, write it into its namespace's file";

/// What a new tracked file holds now: the bytes of a handle that wrote to it and has not
/// committed them, else its memory node's.
fn pending_data<'a>(st: &'a State, ino: u64, node: &'a [u8]) -> &'a [u8] {
    st.handles
        .values()
        .find(|h| h.ino == ino && h.kind == HandleKind::Tracked && h.dirty)
        .map_or(node, |h| h.data.as_slice())
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
        let vtimes = read::files::last_version_times(&store)?
            .into_iter()
            .map(|(file, at)| (file, secs(at)))
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
            notifier: std::sync::OnceLock::new(),
        })
    }

    pub(crate) fn set_notifier(&self, notifier: fuser::Notifier) {
        let _ = self.notifier.set(notifier);
    }

    /// Tell the kernel that what it cached of `ino`'s attributes is stale, so the next `fstat`
    /// or read past the cached size asks again. Attributes only (offset -1: no page is
    /// touched), which takes no lock the kernel may hold while it waits for a reply (the inode
    /// is looked up and its attribute time reset under a spinlock): safe from a request
    /// handler, unlike the watcher's page and name invalidations.
    fn drop_kernel_attrs(&self, ino: u64) {
        if let Some(n) = self.notifier.get() {
            let _ = n.inval_inode(INodeNo(ino), -1, 0);
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The store's generation now (a change made elsewhere shows at the next open): read from
    /// the store unless its files show that nothing was committed since the last read (see
    /// [`DbFiles`]).
    fn refresh_gen(&self) -> u64 {
        let now = self.clock.elapsed().as_micros() as u64;
        // The stamp first, then the generation: a commit after the stamp was taken moves it;
        // one before is in the generation read after.
        let stamp = self.db.as_ref().and_then(|_| self.store.change_stamp());
        if let (Some(db), Some(stamp)) = (&self.db, &stamp) {
            if db.unchanged(stamp) {
                self.refreshed.store(now, Ordering::SeqCst);
                return self.gen.load(Ordering::SeqCst);
            }
        }
        let g = query::generation(&self.store).unwrap_or(0);
        // Published before the states are: a request that trusts them finds `g` in `gen`.
        let gen = self.gen.fetch_max(g, Ordering::SeqCst).max(g);
        if let (Some(db), Some(stamp)) = (&self.db, stamp) {
            db.record(stamp);
        }
        self.refreshed.store(now, Ordering::SeqCst);
        gen
    }

    /// The draft of `path`, if it has one. Which paths have one is read once per change stamp.
    fn draft(&self, path: &str) -> Option<formdb_engine::change::Draft> {
        let stamp = self.store.change_stamp();
        if let (Some(db), Some(stamp)) = (&self.db, stamp) {
            let mut drafted = db.drafted.lock().unwrap_or_else(|p| p.into_inner());
            let known = match &*drafted {
                Some((at, paths)) if *at == stamp => paths.clone(),
                _ => {
                    let paths: HashSet<String> =
                        read::drafts::paths(&self.store).ok()?.into_iter().collect();
                    let paths = Arc::new(paths);
                    *drafted = Some((stamp, paths.clone()));
                    paths
                }
            };
            drop(drafted);
            if !known.contains(path) {
                return None;
            }
        }
        save::draft(&self.store, path).ok().flatten()
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
            Err(e) => self.log(path, format!("save failed: {}", worded(e)), true),
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
    match kind {
        Kind::Dir { .. } => DIR_TTL,
        Kind::Status | Kind::Scratch | Kind::Pending | Kind::Symlink => VOLATILE_TTL,
        _ => FILE_TTL,
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
                // A file that comes or goes may bring or take its directories with it: every
                // ancestor's name and listing is dropped too (the kernel keeps names, and a
                // directory's listing while it stays the same, for seconds).
                let mut at = path.as_str();
                while *existence && !at.is_empty() {
                    let (parent, name) = split(at);
                    if let Some(pi) = st.inodes.by_path.get(parent) {
                        entries.push((*pi, name.to_string()));
                        inodes.push(*pi);
                    }
                    at = parent;
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
