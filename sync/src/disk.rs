//! Reading, hashing and atomically writing the working directory's files.

use std::collections::HashMap;
use std::io::{self, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use formdb_engine::forms::content_hash;

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
pub struct Found {
    pub hash: String,
    /// The bytes, when they were read (not when the hash came from the stat cache).
    pub bytes: Option<Vec<u8>>,
}

/// Hashes of files by path, reused while a file's size, mtime and inode are unchanged and it was
/// not modified within a second of being hashed (a "racily clean" file is read again).
#[derive(Default)]
pub struct Disk {
    stamps: HashMap<String, Stamp>,
}

const RACY: Duration = Duration::from_secs(1);

impl Disk {
    /// The file at `rel`: `Ok(None)` if there is no regular file there (missing, a directory, a
    /// symlink). `cached` allows the stat cache; without it the file is read.
    pub fn find(&mut self, root: &Path, rel: &str, cached: bool) -> io::Result<Option<Found>> {
        let abs = root.join(rel);
        let meta = match std::fs::symlink_metadata(&abs) {
            Ok(m) => m,
            Err(e) if gone(&e) => {
                self.stamps.remove(rel);
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        if !meta.file_type().is_file() {
            self.stamps.remove(rel);
            return Ok(None);
        }
        let key = (meta.len(), (meta.mtime(), meta.mtime_nsec()), meta.ino());
        if cached {
            if let Some(s) = self.stamps.get(rel) {
                let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
                let settled = modified + RACY < s.hashed_at;
                if settled && (s.len, s.mtime, s.ino) == key {
                    return Ok(Some(Found { hash: s.hash.clone(), bytes: None }));
                }
            }
        }
        let now = SystemTime::now();
        let bytes = match std::fs::read(&abs) {
            Ok(b) => b,
            Err(e) if gone(&e) => {
                self.stamps.remove(rel);
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        let hash = content_hash(&bytes);
        // The stamp is only kept if the file did not change while it was read.
        if let Ok(after) = std::fs::symlink_metadata(&abs) {
            let key_after = (after.len(), (after.mtime(), after.mtime_nsec()), after.ino());
            if key_after == key {
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

    /// Write `bytes` to `rel` atomically: a temporary file in the same directory, fsynced, then
    /// renamed over the old file (whose permissions it takes), and the directory fsynced.
    pub fn write(&mut self, root: &Path, rel: &str, bytes: &[u8]) -> io::Result<()> {
        let path = root.join(rel);
        let dir = path.parent().unwrap_or(root).to_path_buf();
        std::fs::create_dir_all(&dir)?;
        let tmp = temp_path(&path);
        let result = (|| {
            let mut f = std::fs::OpenOptions::new().write(true).create_new(true).open(&tmp)?;
            f.write_all(bytes)?;
            if let Ok(old) = std::fs::metadata(&path) {
                f.set_permissions(old.permissions())?;
            }
            f.sync_all()?;
            drop(f);
            std::fs::rename(&tmp, &path)?;
            sync_dir(&dir)
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        self.stamps.remove(rel);
        result
    }

    /// Remove the file at `rel`, then the directories it leaves empty (up to the root), as
    /// `git checkout` does.
    pub fn remove(&mut self, root: &Path, rel: &str) -> io::Result<()> {
        let path = root.join(rel);
        self.stamps.remove(rel);
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if gone(&e) => return Ok(()),
            Err(e) => return Err(e),
        }
        let mut dir = path.parent();
        while let Some(d) = dir {
            if d == root || !d.starts_with(root) || std::fs::remove_dir(d).is_err() {
                break;
            }
            dir = d.parent();
        }
        if let Some(d) = path.parent().filter(|d| d.exists()) {
            sync_dir(d)?;
        }
        Ok(())
    }
}

fn gone(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::NotFound | io::ErrorKind::NotADirectory)
}

fn temp_path(path: &Path) -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let n = N.fetch_add(1, Ordering::Relaxed);
    path.with_file_name(format!(".{name}{TMP_MARK}{}-{n}", std::process::id()))
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// Remove temporary files our atomic writes left behind (a crash between creating and
/// renaming one). Returns how many.
pub fn clean_temps(files: &[(String, PathBuf)]) -> usize {
    let mut n = 0;
    for (rel, abs) in files {
        let name = rel.rsplit('/').next().unwrap_or(rel);
        if name.starts_with('.') && name.contains(TMP_MARK) && std::fs::remove_file(abs).is_ok() {
            n += 1;
        }
    }
    n
}
