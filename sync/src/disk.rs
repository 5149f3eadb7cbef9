//! Reading, hashing and atomically writing the working directory's files, never outside it.
//!
//! Every path is resolved from the directory's own descriptor one component at a time with
//! `O_NOFOLLOW` (`openat`, rustix), so a symbolic link anywhere on the way (`src/etclink →
//! /etc`) refuses the write, rename or delete instead of following it. Resolving this way,
//! rather than canonicalizing and checking the prefix, leaves no window between the check and
//! the use: a link swapped in after a directory was opened does not change the directory the
//! descriptor names. A path through a link reads as absent, as `formdb import` (which does not
//! follow links) sees it.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use formdb_engine::forms::content_hash;
use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags};
use rustix::io::Errno;

use crate::rules::TMP_MARK;

/// What a stat of a file showed when it was last hashed.
#[derive(Clone, Debug)]
struct Stamp {
    len: u64,
    mtime: (i64, i64),
    ino: u64,
    hash: String,
    hashed_at: SystemTime,
}

/// A file's content as found on disk.
#[derive(Clone)]
pub(crate) struct Found {
    pub hash: String,
    /// The bytes, when they were read (not when the hash came from the stat cache).
    pub bytes: Option<Vec<u8>>,
}

/// Hashes of files by path, reused while a file's size, mtime and inode are unchanged and it was
/// not modified within a second of being hashed (a "racily clean" file is read again).
#[derive(Default)]
pub(crate) struct Disk {
    stamps: HashMap<String, Stamp>,
}

const RACY: Duration = Duration::from_secs(1);

/// Why a path was refused: a component on the way is a symbolic link (or not a directory).
fn outside(rel: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!(
            "refused: {rel} leads through a symbolic link (or a non-directory); formdb writes and deletes only inside the working directory"
        ),
    )
}

/// The components of `rel`: its directories and its file name. `..`, `.` and empty ones are
/// refused (store paths never hold them).
fn split(rel: &str) -> io::Result<(Vec<&str>, &str)> {
    let mut parts: Vec<&str> = rel.split('/').collect();
    if parts.iter().any(|p| p.is_empty() || *p == "." || *p == "..") {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("refused: {rel} is not a plain relative path"),
        ));
    }
    let name = parts.pop().unwrap_or_default();
    Ok((parts, name))
}

/// The directory `dirs` below `root`, opened without following a link on the way. `create`
/// makes the missing ones; otherwise a missing one is `NotFound`.
fn open_dir(root: &Path, dirs: &[&str], rel: &str, create: bool) -> io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let mut fd = rustix::fs::open(root, flags, Mode::empty())?;
    for d in dirs {
        let next = match rustix::fs::openat(&fd, *d, flags | OFlags::NOFOLLOW, Mode::empty()) {
            Err(Errno::NOENT) if create => {
                match rustix::fs::mkdirat(&fd, *d, Mode::from_bits_truncate(0o777)) {
                    Ok(()) | Err(Errno::EXIST) => {}
                    Err(e) => return Err(e.into()),
                }
                rustix::fs::openat(&fd, *d, flags | OFlags::NOFOLLOW, Mode::empty())
            }
            r => r,
        };
        fd = match next {
            Ok(f) => f,
            Err(Errno::LOOP | Errno::NOTDIR) => return Err(outside(rel)),
            Err(e) => return Err(e.into()),
        };
    }
    Ok(fd)
}

/// Open `name` in `dir` to read, refusing a symbolic link (`ELOOP`) and never blocking on a
/// FIFO.
fn open_file(dir: &OwnedFd, name: &str) -> rustix::io::Result<OwnedFd> {
    rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
        Mode::empty(),
    )
}

/// The bytes of the regular file at `rel`, read without following links.
pub(crate) fn read(root: &Path, rel: &str) -> io::Result<Vec<u8>> {
    let (dirs, name) = split(rel)?;
    let dir = open_dir(root, &dirs, rel, false)?;
    let fd = match open_file(&dir, name) {
        Ok(f) => f,
        Err(Errno::LOOP) => return Err(outside(rel)),
        Err(e) => return Err(e.into()),
    };
    let mut out = Vec::new();
    File::from(fd).read_to_end(&mut out)?;
    Ok(out)
}

impl Disk {
    /// The file at `rel`: `Ok(None)` if there is no regular file there (missing, a directory, a
    /// symlink, or a symlink on the way). `cached` allows the stat cache; without it the file
    /// is read.
    pub(crate) fn find(
        &mut self,
        root: &Path,
        rel: &str,
        cached: bool,
    ) -> io::Result<Option<Found>> {
        let absent = |stamps: &mut HashMap<String, Stamp>| {
            stamps.remove(rel);
            Ok(None)
        };
        let (dirs, name) = split(rel)?;
        let dir = match open_dir(root, &dirs, rel, false) {
            Ok(d) => d,
            Err(e) if gone(&e) || e.kind() == io::ErrorKind::PermissionDenied => {
                return absent(&mut self.stamps)
            }
            Err(e) => return Err(e),
        };
        let stat = match rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(s) => s,
            Err(Errno::NOENT | Errno::NOTDIR) => return absent(&mut self.stamps),
            Err(e) => return Err(e.into()),
        };
        if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
            return absent(&mut self.stamps);
        }
        let key = stamp_key(&stat);
        if cached {
            if let Some(s) = self.stamps.get(rel) {
                let modified = SystemTime::UNIX_EPOCH
                    + Duration::new(key.1 .0.max(0) as u64, key.1 .1.clamp(0, 999_999_999) as u32);
                let settled = modified + RACY < s.hashed_at;
                if settled && (s.len, s.mtime, s.ino) == key {
                    return Ok(Some(Found { hash: s.hash.clone(), bytes: None }));
                }
            }
        }
        let now = SystemTime::now();
        let fd = match open_file(&dir, name) {
            Ok(f) => f,
            Err(Errno::NOENT | Errno::LOOP) => return absent(&mut self.stamps),
            Err(e) => return Err(e.into()),
        };
        let mut file = File::from(fd);
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        let hash = content_hash(&bytes);
        // The stamp is only kept if the file did not change while it was read.
        if let Ok(after) = rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            if stamp_key(&after) == key {
                self.stamps.insert(
                    rel.to_string(),
                    Stamp {
                        len: key.0,
                        mtime: key.1,
                        ino: key.2,
                        hash: hash.clone(),
                        hashed_at: now,
                    },
                );
            }
        }
        Ok(Some(Found { hash, bytes: Some(bytes) }))
    }

    /// Write `bytes` to `rel` atomically if it still holds `expect` (`None`: absent): a
    /// temporary file in the same directory, fsynced, then swapped with the old file
    /// (`renameat2(RENAME_EXCHANGE)`; a new file with `RENAME_NOREPLACE`), whose permissions it
    /// takes, and the directory fsynced. The swapped-out text is checked after the swap: if
    /// someone wrote the file between the check and the swap (an editor's save, `sed -i`), the
    /// swap is undone and their text stays ([`Written::Changed`]). Refused when the way to
    /// `rel` leads through a symbolic link.
    pub(crate) fn write(
        &mut self,
        root: &Path,
        rel: &str,
        bytes: &[u8],
        expect: Option<&str>,
    ) -> io::Result<Written> {
        self.stamps.remove(rel);
        let (dirs, name) = split(rel)?;
        let dir = open_dir(root, &dirs, rel, true)?;
        let tmp = temp_name(name);
        let result = (|| {
            let fd = rustix::fs::openat(
                &dir,
                tmp.as_str(),
                OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::from_bits_truncate(0o666),
            )?;
            let mut f = File::from(fd);
            f.write_all(bytes)?;
            if let Ok(old) = rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
                if FileType::from_raw_mode(old.st_mode) == FileType::RegularFile {
                    rustix::fs::fchmod(f.as_fd(), Mode::from_raw_mode(old.st_mode & 0o7777))?;
                }
            }
            f.sync_all()?;
            drop(f);
            let outcome = match expect {
                None => {
                    match rustix::fs::renameat_with(
                        &dir,
                        tmp.as_str(),
                        &dir,
                        name,
                        RenameFlags::NOREPLACE,
                    ) {
                        Ok(()) => Written::Done { replaced: None },
                        Err(Errno::EXIST) => Written::Changed,
                        Err(Errno::INVAL | Errno::NOSYS) => {
                            rustix::fs::renameat(&dir, tmp.as_str(), &dir, name)?;
                            Written::Done { replaced: None }
                        }
                        Err(e) => return Err(e.into()),
                    }
                }
                // Looked at again just before the swap, after the fsync: a write of theirs
                // landing in between would be undone after the swap (below), but a reader in
                // that moment would read ours, and a program that rewrites what it read (`sed
                // -i`) would then write ours back over theirs.
                Some(expect)
                    if read_at(&dir, name).ok().as_deref().map(content_hash).as_deref()
                        != Some(expect) =>
                {
                    Written::Changed
                }
                Some(expect) => {
                    match rustix::fs::renameat_with(
                        &dir,
                        tmp.as_str(),
                        &dir,
                        name,
                        RenameFlags::EXCHANGE,
                    ) {
                        Ok(()) => {
                            let old = read_at(&dir, tmp.as_str()).ok();
                            if old.as_deref().map(content_hash).as_deref() == Some(expect) {
                                Written::Done { replaced: old }
                            } else {
                                // Theirs came in between: it goes back, ours is dropped.
                                rustix::fs::renameat_with(
                                    &dir,
                                    tmp.as_str(),
                                    &dir,
                                    name,
                                    RenameFlags::EXCHANGE,
                                )?;
                                // A third write between the two exchanges left ours under the
                                // name and the newest text under the temporary one: the newest
                                // goes back over ours (their watcher event brings it in).
                                if read_at(&dir, tmp.as_str()).ok().as_deref() != Some(bytes) {
                                    rustix::fs::renameat(&dir, tmp.as_str(), &dir, name)?;
                                }
                                Written::Changed
                            }
                        }
                        Err(Errno::NOENT) => Written::Changed,
                        Err(Errno::INVAL | Errno::NOSYS) => {
                            // No RENAME_EXCHANGE on this file system: a plain rename.
                            let old = read_at(&dir, name).ok();
                            rustix::fs::renameat(&dir, tmp.as_str(), &dir, name)?;
                            Written::Done { replaced: old }
                        }
                        Err(e) => return Err(e.into()),
                    }
                }
            };
            let _ = rustix::fs::unlinkat(&dir, tmp.as_str(), AtFlags::empty());
            rustix::fs::fsync(&dir)?;
            Ok::<Written, io::Error>(outcome)
        })();
        if result.is_err() {
            let _ = rustix::fs::unlinkat(&dir, tmp.as_str(), AtFlags::empty());
        }
        result
    }

    /// Remove the file at `rel`, then the directories it leaves empty (up to the root), as
    /// `git checkout` does. Refused when the way to `rel` leads through a symbolic link.
    pub(crate) fn remove(&mut self, root: &Path, rel: &str) -> io::Result<()> {
        self.stamps.remove(rel);
        let (dirs, name) = split(rel)?;
        let dir = match open_dir(root, &dirs, rel, false) {
            Ok(d) => d,
            Err(e) if gone(&e) => return Ok(()),
            Err(e) => return Err(e),
        };
        match rustix::fs::unlinkat(&dir, name, AtFlags::empty()) {
            Ok(()) => {}
            Err(Errno::NOENT) => return Ok(()),
            Err(e) => return Err(e.into()),
        }
        rustix::fs::fsync(&dir)?;
        for depth in (0..dirs.len()).rev() {
            let Ok(parent) = open_dir(root, &dirs[..depth], rel, false) else { break };
            if rustix::fs::unlinkat(&parent, dirs[depth], AtFlags::REMOVEDIR).is_err() {
                break;
            }
        }
        Ok(())
    }
}

/// What [`Disk::write`] did.
pub(crate) enum Written {
    /// Written; `replaced` is the text it replaced (read back after the swap).
    Done { replaced: Option<Vec<u8>> },
    /// The file no longer held what was expected: nothing was written.
    Changed,
}

fn read_at(dir: &OwnedFd, name: &str) -> io::Result<Vec<u8>> {
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
        Mode::empty(),
    )?;
    let mut out = Vec::new();
    File::from(fd).read_to_end(&mut out)?;
    Ok(out)
}

// The field types of `stat` differ by platform; the casts are no-ops on some.
#[allow(clippy::unnecessary_cast)]
fn stamp_key(s: &rustix::fs::Stat) -> (u64, (i64, i64), u64) {
    (s.st_size as u64, (s.st_mtime as i64, s.st_mtime_nsec as i64), s.st_ino as u64)
}

fn gone(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::NotFound | io::ErrorKind::NotADirectory)
}

fn temp_name(name: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    format!(".{name}{TMP_MARK}{}-{n}", std::process::id())
}

/// Remove temporary files our atomic writes left behind (a crash between creating and
/// renaming one). Returns how many.
pub(crate) fn clean_temps(files: &[(String, std::path::PathBuf)]) -> usize {
    let mut n = 0;
    for (rel, abs) in files {
        let name = rel.rsplit('/').next().unwrap_or(rel);
        if name.starts_with('.') && name.contains(TMP_MARK) && std::fs::remove_file(abs).is_ok() {
            n += 1;
        }
    }
    n
}
