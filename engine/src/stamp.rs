//! [`Store::change_stamp`]: a cheap proof that nothing was committed to an on-disk store
//! between two moments, for caches that would otherwise ask the store on every read.
//!
//! SQLite increments its file change counter (bytes 24..28 of the database header) on every
//! committed write transaction in rollback-journal mode, whichever process or connection
//! wrote. The counter is read with one `pread`, together with the file's identity (device,
//! inode, ctime, size). Equal stamps: nothing was committed in between. No stamp (memory
//! stores, WAL mode, other engines): the caller asks the store.
//!
//! The file is opened once per handle and kept open: the mount takes a stamp at every open
//! of a file, and opening the database by its path each time was two of the four system
//! calls a stamp cost (`grep -r` over the mount makes one open a file). A descriptor held
//! open reads the file SQLite reads: SQLite keeps its own open too, so a database file
//! renamed over this one is not the store this handle reads either way.

use crate::store::Store;

/// The state of an on-disk store's database file; see the module docs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChangeStamp {
    dev: u64,
    ino: u64,
    ctime: i64,
    ctime_ns: i64,
    size: u64,
    counter: u32,
}

impl Store {
    /// The store's change stamp now, if it has one: read it before a read of the store, and
    /// while a later stamp equals it, what was read is current.
    #[cfg(unix)]
    pub fn change_stamp(&self) -> Option<ChangeStamp> {
        use std::os::unix::fs::{FileExt, MetadataExt};
        let file = match self.stamp_file.get() {
            Some(file) => file,
            None => {
                let file = std::fs::File::open(self.sqlite_file.as_ref()?).ok()?;
                self.stamp_file.get_or_init(|| file)
            }
        };
        let mut header = [0u8; 28];
        file.read_exact_at(&mut header, 0).ok()?;
        // Bytes 18/19 are 1 in rollback-journal mode, 2 in WAL mode, where the counter does
        // not move.
        if &header[..16] != b"SQLite format 3\0" || header[18] != 1 || header[19] != 1 {
            return None;
        }
        let meta = file.metadata().ok()?;
        Some(ChangeStamp {
            dev: meta.dev(),
            ino: meta.ino(),
            ctime: meta.ctime(),
            ctime_ns: meta.ctime_nsec(),
            size: meta.size(),
            counter: u32::from_be_bytes([header[24], header[25], header[26], header[27]]),
        })
    }

    #[cfg(not(unix))]
    pub fn change_stamp(&self) -> Option<ChangeStamp> {
        None
    }
}

#[cfg(test)]
mod tests {
    use crate::import::{import_dir, Quiet};
    use crate::store::{Store, STORE_DIR};

    #[test]
    fn stamp_moves_with_every_commit_and_only_then() {
        let dir = tempfile::tempdir().unwrap();
        let src = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join(STORE_DIR)).unwrap();
        assert!(Store::open_in_memory().unwrap().change_stamp().is_none());
        let before = store.change_stamp().expect("an on-disk SQLite store has a stamp");
        crate::query::generation(&store).unwrap();
        assert_eq!(store.change_stamp(), Some(before), "a read moves nothing");
        std::fs::write(src.path().join("a.clj"), "(ns a)\n(defn f [] 1)\n").unwrap();
        import_dir(&store, src.path(), "test", &Quiet).unwrap();
        let after = store.change_stamp().unwrap();
        assert_ne!(after, before, "a commit moves the stamp");
        // Another handle's commit moves it too.
        let other = Store::open(&dir.path().join(STORE_DIR)).unwrap();
        std::fs::write(src.path().join("b.clj"), "(ns b)\n").unwrap();
        import_dir(&other, src.path(), "test", &Quiet).unwrap();
        assert_ne!(store.change_stamp().unwrap(), after);
    }
}
