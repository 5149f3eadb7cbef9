//! The FUSE mount: the store's source tree as a real filesystem that ordinary editors edit.
//!
//! Owns the FUSE filesystem (`fs`): the tree (the imported layout, `/.formdb/forms/<id>.clj`,
//! `/.formdb/oneline/...`, `/.formdb/status`), stable inode numbers, open handles that serve one
//! rendered snapshot each, scratch files kept in memory (`names`), when a save is committed,
//! and the live view (`watch`: a thread that invalidates the kernel's caches when the store
//! moves). Also mounting itself: refusing busy or non-empty mount points, cleaning up the dead
//! mount a crash left, unmounting on Ctrl-C/SIGTERM.
//!
//! Must not parse Clojure or write the store except through `formdb-edit` (every save is
//! `save::save` / `ops::save_form_text`, every delete and rename `save::delete` /
//! `save::rename`), and must not render except through `formdb-projector`.
//!
//! # Rules
//! - **Scratch files**: a path the store does not hold and whose name matches an editor or tool
//!   scratch pattern (see [`names`]: hidden names, `#f#`, `f~`, `4913`, `sedXXXXXX`, `*.swp`,
//!   `*.tmp`, …) lives in memory only and never reaches the store; so do symlinks (emacs lock
//!   files). Directories made with `mkdir` live in memory until a file in them is committed.
//! - **Commit points**: a tracked file's handle keeps its own buffer; it is saved (one
//!   transaction via `formdb-edit`) on `flush` (every `close`) and `fsync` when it was written,
//!   at `release` when it was created and never written (`touch`), and when a file is renamed
//!   onto a tracked name (`sed -i`, atomic writers). A tracked file renamed to a scratch name
//!   (vim's and emacs's backup by rename) stays in the store, hidden under its name until the
//!   editor writes the new file there.
//! - **Errors**: a save kept as a draft makes `flush`/`fsync` fail, so `close` fails: with
//!   EINVAL when the text was refused at a place (does not parse, not UTF-8, a NUL byte, a
//!   namespace another file declares), with EIO when it could not be applied as written (a
//!   conflict, a form deleted since it was read). Editors show only the errno (vim: `E512:
//!   Close failed`), so every failure is also printed on the mount's stderr as
//!   `path:line:col: why`, and listed in `/.formdb/status` and `formdb drafts`. A shell never
//!   sees `close` fail (it closes a redirection with `dup2`): an append shorter than a page
//!   (`echo … >> f`) is checked at the write, which fails with EINVAL and keeps nothing when
//!   the text would be refused (bash: `write error: Invalid argument`, status 1); longer
//!   appends may be one chunk of many and are checked at close. A rename onto a tracked name
//!   cannot fail after the fact: its draft shows only there. RENAME_EXCHANGE is EINVAL,
//!   RENAME_NOREPLACE onto an existing name EEXIST, xattrs ENOTSUP, a name over 255 bytes
//!   (NAME_MAX) or a path over PATH_MAX ENAMETOOLONG (no working directory could hold it).
//! - **Walks**: `.formdb/forms/` and the top of `.formdb/oneline/` list nothing: a recursive
//!   walk from the root (`grep -r`, `find`, `rg --hidden`) would otherwise read a file per form
//!   and the tree twice more. Every path under them resolves all the same
//!   (`cat .formdb/forms/ID.clj`, `ls .formdb/oneline/src/shop`).
//! - **Memory**: a save holds the written bytes in its handle only (a new file's memory node
//!   is not copied at every write), and a handle of more than a MiB gives the heap back to the
//!   system when it goes (`malloc_trim`).
//! - **Directories**: renaming a directory moves every stored file, blob and draft under it in
//!   one change set (`save::rename_dir`: forms keep their ids), and its scratch files with it.
//! - **mtime** moves exactly when the bytes a read returns change (a commit, a draft, a change
//!   made elsewhere), once per change, and never backwards.
//! - **Kernel caches**: names, directory attributes and the attributes of store-backed files are
//!   cached for ten seconds, as a disk's are for ever: a recursive walk (`grep -r`, `rg`) would
//!   otherwise make a `LOOKUP` and two `GETATTR` round trips a file. What changes elsewhere is
//!   dropped by the watcher within its poll (a changed file's attributes and pages; a name that
//!   comes or goes, with every directory above it). An open that serves other bytes than the
//!   kernel was last told of drops the inode's attributes before it answers (an attributes-only
//!   notice, safe inside a handler), so a read never stops at a stale size; the status file and
//!   the mount's own scratch files are never cached. A read-only open keeps the inode's page
//!   cache (`FOPEN_KEEP_CACHE`) when it serves the same bytes as every open since that cache was
//!   last dropped, so a warm read makes no `READ` round trip; any other open drops it.
//!   Directories are opened by the kernel itself (`OPENDIR` answers ENOSYS once), which keeps
//!   each listing it read until it changes the directory itself or the watcher says the listing
//!   changed: a warm `find` makes no round trip at all. A dead mount is told by `statfs`
//!   ([`is_dead_mount`]), which always asks. Read-only handles skip `FLUSH` (`FOPEN_NOFLUSH`):
//!   they have nothing to commit.
//! - **No lost updates**: a save passes the text its handle served (or, for a write-only open
//!   or a rename, the text last served under that name) as the merge base; form files too.

pub mod names;

mod fs;
mod watch;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use formdb_edit::save::Writer;
use formdb_engine::store::Store;
use fuser::{Config, MountOption, Session, SessionUnmounter};

/// Why a mount could not start.
#[derive(Debug, thiserror::Error)]
pub enum MountError {
    #[error("{0}")]
    MountPoint(String),
    #[error(transparent)]
    Store(#[from] formdb_engine::store::StoreError),
    #[error(transparent)]
    View(#[from] formdb_projector::views::ViewError),
    #[error("{context}: {source}")]
    Io { context: String, source: io::Error },
}

fn io_err(context: impl Into<String>) -> impl FnOnce(io::Error) -> MountError {
    let context = context.into();
    move |source| MountError::Io { context, source }
}

/// How to mount.
#[derive(Clone, Debug)]
pub struct Options {
    /// Whose alias map the files are rendered with; the author of the saves.
    pub user: String,
    pub read_only: bool,
    /// Request threads.
    pub threads: usize,
    /// How often the live view polls the store's generation.
    pub poll: Duration,
    /// Print each save on stderr.
    pub verbose: bool,
    /// How many paths' last served text the mount keeps as merge bases for saves that bring
    /// none of their own (write-only opens, renames onto a tracked name). The least recently
    /// served go first; a path with an open handle or an editor's backup pending is never
    /// dropped.
    pub merge_bases: usize,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            user: "mount".into(),
            read_only: false,
            threads: 4,
            poll: Duration::from_millis(150),
            verbose: false,
            merge_bases: 4096,
        }
    }
}

/// Is `path` a mount point (per /proc/self/mountinfo)?
fn is_mount_point(path: &Path) -> bool {
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else { return false };
    let want = path.to_string_lossy();
    info.lines().any(|l| l.split(' ').nth(4).map(unescape_mountinfo).is_some_and(|p| p == want))
}

fn unescape_mountinfo(s: &str) -> String {
    let mut out = String::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v as char);
            i += 4;
        } else {
            out.push(b[i] as char);
            i += 1;
        }
    }
    out
}

/// Detach whatever is mounted at `path` (`fusermount3 -u -z`, else `umount2(MNT_DETACH)`).
pub fn lazy_unmount(path: &Path) -> bool {
    let ok = std::process::Command::new("fusermount3")
        .arg("-u")
        .arg("-z")
        .arg("-q")
        .arg(path)
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        return true;
    }
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) else { return false };
    // SAFETY: a valid NUL-terminated path.
    unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) == 0 }
}

/// Check a mount point before mounting: it must be an existing, empty directory that nothing is
/// mounted on. A dead FUSE mount left by a crash (stat fails with ENOTCONN) is detached first;
/// the returned note says so.
/// Is `path` a FUSE mount whose daemon is gone? The kernel answers a stat, and a listing it
/// cached, of a dead mount from its caches; a `statfs` always asks the daemon, and a dead
/// connection answers ENOTCONN.
pub fn is_dead_mount(path: &Path) -> bool {
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) else { return false };
    // SAFETY: a NUL-terminated path and a zeroed statfs buffer of the right type.
    let rc = unsafe {
        let mut buf: libc::statfs = std::mem::zeroed();
        libc::statfs(c.as_ptr(), &mut buf)
    };
    rc != 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ENOTCONN)
}

pub fn prepare_mountpoint(path: &Path) -> Result<(PathBuf, Option<String>), MountError> {
    let mut note = None;
    match std::fs::metadata(path) {
        Err(e) if e.raw_os_error() == Some(libc::ENOTCONN) => {
            if !lazy_unmount(path) {
                return Err(MountError::MountPoint(format!(
                    "{}: a dead mount from an earlier crash is in the way and could not be detached; run `fusermount3 -u -z {}`",
                    path.display(),
                    path.display()
                )));
            }
            note =
                Some(format!("{}: detached a dead mount left by an earlier crash", path.display()));
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(MountError::MountPoint(format!(
                "{}: no such directory; create it first (`mkdir -p {}`)",
                path.display(),
                path.display()
            )))
        }
        Err(e) => return Err(io_err(format!("{}", path.display()))(e)),
        Ok(m) if !m.is_dir() => {
            return Err(MountError::MountPoint(format!("{}: not a directory", path.display())))
        }
        Ok(_) => {}
    }
    let abs = path.canonicalize().map_err(io_err(format!("{}", path.display())))?;
    if is_mount_point(&abs) && is_dead_mount(&abs) {
        if !lazy_unmount(&abs) {
            return Err(MountError::MountPoint(format!(
                "{}: a dead mount from an earlier crash is in the way and could not be detached; run `fusermount3 -u -z {}`",
                abs.display(),
                abs.display()
            )));
        }
        note = Some(format!("{}: detached a dead mount left by an earlier crash", abs.display()));
    }
    if is_mount_point(&abs) {
        return Err(MountError::MountPoint(format!(
            "{}: busy: something is already mounted there (another `formdb mount`?); unmount it with `fusermount3 -u {}`",
            abs.display(),
            abs.display()
        )));
    }
    let mut entries = std::fs::read_dir(&abs).map_err(io_err(format!("{}", abs.display())))?;
    if entries.next().is_some() {
        return Err(MountError::MountPoint(format!(
            "{}: not empty; mount on an empty directory so no files are hidden under the mount",
            abs.display()
        )));
    }
    Ok((abs, note))
}

/// A running mount. Dropping it unmounts.
pub struct Mounted {
    mountpoint: PathBuf,
    unmounter: Option<SessionUnmounter>,
    session: Option<JoinHandle<io::Result<()>>>,
    stop: Arc<AtomicBool>,
    watcher: Option<JoinHandle<()>>,
    /// What `prepare_mountpoint` had to say (a dead mount detached).
    pub note: Option<String>,
}

/// Mount the store's tree at `mountpoint`, served by background threads.
pub fn spawn(store: Arc<Store>, mountpoint: &Path, opts: &Options) -> Result<Mounted, MountError> {
    let (abs, note) = prepare_mountpoint(mountpoint)?;
    let aliases = formdb_projector::aliases::load(&store, &opts.user)?;
    let writer = Writer::new(&opts.user, aliases);
    let shared = Arc::new(fs::Shared::new(store, writer, opts)?);
    let mut config = Config::default();
    config.mount_options = vec![
        MountOption::FSName("formdb".into()),
        MountOption::Subtype("formdb".into()),
        MountOption::NoAtime,
        MountOption::NoDev,
        MountOption::NoSuid,
    ];
    if opts.read_only {
        config.mount_options.push(MountOption::RO);
    }
    config.n_threads = Some(opts.threads.max(1));
    let fs = fs::Fs { shared: shared.clone() };
    let mut session = Session::new(fs, &abs, &config)
        .map_err(io_err(format!("mounting at {}", abs.display())))?;
    let notifier = session.notifier();
    shared.set_notifier(notifier.clone());
    let unmounter = session.unmount_callable();
    let thread = std::thread::Builder::new()
        .name("formdb-fuse".into())
        .spawn(move || session.run())
        .map_err(io_err("starting the mount thread"))?;
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = watch::spawn(shared, notifier, stop.clone(), opts.poll)
        .map_err(io_err("starting the watcher thread"))?;
    Ok(Mounted {
        mountpoint: abs,
        unmounter: Some(unmounter),
        session: Some(thread),
        stop,
        watcher: Some(watcher),
        note,
    })
}

impl Mounted {
    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }

    /// Has the mount ended (unmounted from outside, e.g. `fusermount3 -u`)?
    pub fn ended(&self) -> bool {
        self.session.as_ref().is_none_or(|s| s.is_finished())
    }

    /// Unmount and wait for the request threads (up to 10 s). Returns a note when the mount point
    /// was busy and had to be detached lazily.
    pub fn unmount(mut self) -> Result<Option<String>, MountError> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Result<Option<String>, MountError> {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(w) = self.watcher.take() {
            let _ = w.join();
        }
        let mut note = None;
        if let Some(mut u) = self.unmounter.take() {
            if !self.ended() {
                if let Err(e) = u.unmount() {
                    lazy_unmount(&self.mountpoint);
                    note = Some(format!(
                        "{}: busy ({e}); detached lazily: it goes away when the last open file closes",
                        self.mountpoint.display()
                    ));
                }
            }
        }
        if let Some(s) = self.session.take() {
            let deadline = Instant::now() + Duration::from_secs(10);
            while !s.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            if s.is_finished() {
                match s.join() {
                    Ok(Ok(())) | Err(_) => {}
                    Ok(Err(e)) => return Err(io_err("the mount ended with an error")(e)),
                }
            }
        }
        Ok(note)
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

/// Block SIGINT and SIGTERM in this thread and every thread it starts later, so that
/// [`wait_for_signal`] receives them. Call before starting any thread.
pub fn block_signals() {
    // SAFETY: plain libc signal-mask calls on a local set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGHUP);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// Run until SIGINT/SIGTERM/SIGHUP (blocked first with [`block_signals`]) or until the mount is
/// unmounted from outside; then unmount. Returns the signal's name, if one ended it.
pub fn wait_for_signal(
    mounted: Mounted,
) -> Result<(Option<&'static str>, Option<String>), MountError> {
    let signal = wait_for_signal_or(|| mounted.ended())?;
    let note = mounted.unmount()?;
    Ok((signal, note))
}

/// Wait until SIGINT/SIGTERM/SIGHUP arrives (blocked first with [`block_signals`]) or `ended()`
/// turns true (checked every 100 ms). Returns the signal's name, if one ended the wait.
pub fn wait_for_signal_or(ended: impl Fn() -> bool) -> Result<Option<&'static str>, MountError> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("formdb-signals".into())
        .spawn(move || {
            // SAFETY: sigwait on the set blocked by `block_signals`.
            let sig = unsafe {
                let mut set: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut set);
                libc::sigaddset(&mut set, libc::SIGINT);
                libc::sigaddset(&mut set, libc::SIGTERM);
                libc::sigaddset(&mut set, libc::SIGHUP);
                let mut sig = 0;
                libc::sigwait(&set, &mut sig);
                sig
            };
            let _ = tx.send(sig);
        })
        .map_err(io_err("starting the signal thread"))?;
    loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(sig) => {
                return Ok(Some(match sig {
                    libc::SIGINT => "SIGINT",
                    libc::SIGTERM => "SIGTERM",
                    _ => "SIGHUP",
                }))
            }
            Err(_) if ended() => return Ok(None),
            Err(_) => {}
        }
    }
}
