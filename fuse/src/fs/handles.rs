//! Open files: handles, reads and writes, truncation, and the commit of what was written.

use super::*;

impl Shared {
    pub(super) fn new_fh(&self) -> u64 {
        self.next_fh.fetch_add(1, Ordering::SeqCst)
    }

    /// Save text under a tracked path, outside the state lock. A file's save reads the mount's
    /// buffer in place instead of copying it.
    pub(super) fn save_path(
        &self,
        path: &str,
        kind: &Kind,
        data: &Text,
        base: Option<&[u8]>,
    ) -> Result<Saved, EditError> {
        let r = match kind {
            Kind::Form(id) => ops::save_form_text(&self.store, &self.writer, id, data, base),
            _ => save::save_shared(&self.store, &self.writer, path, data, base),
        };
        self.log_saved(path, &r);
        self.refresh_gen();
        r
    }

    /// Commit a tracked handle's content: at `flush` if it was written, at `fsync` if it
    /// changed at all, at release if it changed or was created and never committed.
    pub(super) fn commit(&self, fh: u64, when: When) -> Result<(), Errno> {
        let started = std::time::Instant::now();
        let committing = {
            let mut st = self.lock();
            let Some(h) = st.handles.get_mut(&fh) else { return Ok(()) };
            // A flush that commits nothing returns before the inode's commit lock, touching
            // no store: a process forked while the descriptor was open flushes its copy when
            // its `exec` closes it, holding copies of every descriptor of the process it was
            // forked from, the store's lock file included. Where that is the process serving
            // this mount, and a writer held the store's lock at the fork, the lock stays held
            // until that `exec` finishes: a commit of the child's flush waited on it, the
            // writer's own flush waited on the commit lock behind it, and the mount hung.
            if let When::Flush(pid) = when {
                if h.kind == HandleKind::Tracked && !h.flushes(pid) {
                    if h.dirty && h.truncated_by == Some(pid) {
                        h.truncation_closed = true;
                    }
                    return h.error.map_or(Ok(()), Err);
                }
            }
            h.committing.clone()
        };
        // One commit of an inode at a time; the next one finds the text saved, so not due, or
        // superseded by a newer handle's.
        let _committing = committing.lock().unwrap_or_else(|p| p.into_inner());
        let (path, data, base, writes) = {
            let st = self.lock();
            let Some(h) = st.handles.get(&fh) else { return Ok(()) };
            if h.kind != HandleKind::Tracked {
                return Ok(());
            }
            let superseded = st.committed_at.get(&h.ino).is_some_and(|&at| at > h.changed_at);
            let due = match when {
                When::Flush(pid) => h.flushes(pid),
                When::Fsync => h.dirty,
                When::Release => h.written || ((h.dirty || h.created) && !superseded),
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
                    n.data = Arc::unwrap_or_clone(data);
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
        let saved = self.save_path(&path, &kind, &data, base.as_ref().map(|b| b.as_slice()));
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
                    n.data.clone_from(&*data);
                }
                Err(Errno::EIO)
            }
        };
        if saved.is_ok() {
            let now = st.tick();
            if let Some(ino) = st.handles.get(&fh).map(|h| h.ino) {
                st.committed_at.insert(ino, now);
            }
        }
        if let Some(h) = st.handles.get_mut(&fh) {
            h.created = false;
            if saved.is_ok() {
                if h.writes == writes {
                    h.dirty = false;
                    h.written = false;
                    h.writers.clear();
                }
                h.base = Some(data);
            }
            h.error = result.err();
        }
        result
    }

    /// Wait for the release of every truncation of `ino` that its process has closed (see
    /// [`Handle::truncated_by`]): the release commits it. The kernel sends it just after the
    /// `close`, and it is waited for [`TRUNCATION_RELEASE_WAIT`] to come, then to the end of its
    /// commit (a save, 10–80 ms while other saves run). One still open elsewhere (a `dup`, a
    /// forked child's copy) does not come in that time and stays uncommitted, and the next open
    /// does not wait for it again: committed here, its empty text would delete every form of
    /// the file before the text written next (`cat x > f` truncates, closes a duplicate, then
    /// writes) put them back with new versions.
    fn wait_for_closed_truncations(&self, ino: u64) {
        let pending = |h: &Handle| h.ino == ino && h.truncation_closed && h.dirty && !h.written;
        let started = std::time::Instant::now();
        loop {
            let (waiting, releasing) = {
                let st = self.lock();
                let mut due = st.handles.values().filter(|h| pending(h)).peekable();
                (due.peek().is_some(), due.any(|h| h.releasing))
            };
            let waited = started.elapsed();
            if !waiting {
                return;
            }
            if (!releasing && waited >= TRUNCATION_RELEASE_WAIT) || waited >= COMMIT_WAIT {
                for h in self.lock().handles.values_mut().filter(|h| pending(h)) {
                    h.truncation_closed = false;
                }
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// Open `ino` for process `pid`: a handle and the open flags for the kernel (see
    /// [`State::page_cache`]).
    pub(super) fn open(
        &self,
        ino: u64,
        flags: i32,
        created: bool,
        pid: u32,
    ) -> Result<(u64, FopenFlags), Errno> {
        self.wait_for_closed_truncations(ino);
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
        let truncating = writable && flags & libc::O_TRUNC != 0;
        let mut h = Handle {
            ino,
            kind: HandleKind::Mem,
            data: Text::default(),
            base: None,
            dirty: false,
            written: false,
            writes: 0,
            writers: Vec::new(),
            created,
            truncated_by: None,
            truncation_closed: false,
            releasing: false,
            append,
            writable,
            error: None,
            committing: Arc::default(),
            changed_at: 0,
        };
        // The snapshot a read-only open of a store-backed file serves: the kernel may keep
        // the pages it cached of the same bytes.
        let mut snapshot: Option<Text> = None;
        // The size and mtime this open serves, for a store-backed file (see `State::told`).
        let mut serves: Option<(u64, SystemTime)> = None;
        match &kind {
            Kind::Scratch | Kind::Symlink => {}
            Kind::Pending => {
                let st = self.lock();
                let n = st.mem.get(&path).ok_or(Errno::ENOENT)?;
                h.kind = HandleKind::Tracked;
                h.data = Arc::new(pending_data(&st, ino, &n.data).to_vec());
                h.base = n.base.clone();
            }
            Kind::Stored | Kind::Form(_) => {
                let gen = self.refresh_gen();
                let r = self.content(&path, &kind, gen)?;
                h.kind = HandleKind::Tracked;
                h.data = r.bytes.clone();
                serves = Some((r.bytes.len() as u64, r.mtime));
                snapshot = (!writable).then_some(r.bytes);
                // A file's draft is served with the text it was written from (a sync
                // conflict's draft, the store's older text written by nobody: itself), so a
                // save of it is merged form by form like any other. Served with none, the next
                // save through the mount put every form of the draft back over what the store
                // took since. A form file holds one form: the next save of its draft is the
                // writer's resolution of that form, taken whole. An empty base is an empty
                // text when the store holds the file empty: taken for the draft itself, a save
                // of the draft's own bytes (refused again) found the writer had changed
                // nothing, kept the store's empty text and dropped the draft, and with it the
                // bytes just written.
                let draft_base = match (&kind, r.draft) {
                    (Kind::Stored, true) => match save::draft(&self.store, &path) {
                        Ok(Some(d)) if d.bytes == *h.data => {
                            let stored_empty = formdb_engine::query::file_bytes(&self.store, &path)
                                .is_ok_and(|b| b.is_some_and(|b| b.is_empty()));
                            let unknown = d.base.is_empty() && !stored_empty;
                            Some(Arc::new(if unknown { d.bytes } else { d.base }))
                        }
                        _ => None,
                    },
                    _ => None,
                };
                let mut st = self.lock();
                h.base = if r.draft {
                    draft_base
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
                let r = self.content(&path, &kind, gen)?;
                serves =
                    matches!(kind, Kind::Oneline(_)).then_some((r.bytes.len() as u64, r.mtime));
                let bytes = r.bytes;
                h.data = bytes.clone();
                // The status file changes without the store moving: always read afresh.
                snapshot = matches!(kind, Kind::Oneline(_)).then_some(bytes);
            }
            Kind::Dir { .. } => unreachable!(),
        }
        let fh = self.new_fh();
        let mut st = self.lock();
        h.changed_at = st.tick();
        if let Some(other) = st.handles.values().find(|o| o.ino == ino) {
            h.committing = other.committing.clone();
        }
        if truncating {
            // `O_TRUNC` (see `Fs::init`): this handle starts empty. Like a truncation by
            // `setattr`, it is committed at release, or with the writes that follow.
            if let Some(n) = st.mem.get_mut(&path) {
                n.data.clear();
                n.mtime = SystemTime::now();
            }
            if h.kind == HandleKind::Tracked {
                h.data = Text::default();
                h.dirty = true;
                h.writes += 1;
                h.truncated_by = Some(pid);
            }
            snapshot = None;
        }
        let mut open_flags = FopenFlags::empty();
        // A handle that cannot write has nothing to commit at `close` (see `commit`).
        if !writable {
            open_flags |= FopenFlags::FOPEN_NOFLUSH;
        }
        match snapshot {
            // Every handle open on the inode must serve these bytes too: one serving others
            // (an older snapshot, unsaved writes) may put its own pages in the cache.
            Some(bytes) if st.handles.values().all(|o| o.ino != ino || **o.data == **bytes) => {
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
        // The kernel caches attributes (`FILE_TTL`): told of other bytes than these, it would
        // stop a read at the old size until the watcher caught up.
        let stale = serves.is_some_and(|now| st.told.get(&ino).is_some_and(|told| *told != now));
        if stale {
            st.told.remove(&ino);
        }
        st.handles.insert(fh, h);
        drop(st);
        if stale {
            self.drop_kernel_attrs(ino);
        }
        Ok((fh, open_flags))
    }

    pub(super) fn read(&self, fh: u64, offset: u64, size: u32) -> Result<Vec<u8>, Errno> {
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
        Ok(slice(&h.data[..]))
    }

    /// Why an append would be refused, checked at the write itself: an append shorter than
    /// [`APPEND_CHECKED_BELOW`] (what `echo … >> f` or `printf … >> f` writes in one call) is
    /// taken as all the writer appends, and when the text it leaves does not parse (or is not
    /// UTF-8, or holds a NUL byte) the write fails with EINVAL and nothing of it is kept. A shell
    /// never sees what `close` says (it closes a redirection with `dup2`), so the write is the
    /// one call that can tell it. Longer writes may be one chunk of many (`cat big >> f`) and
    /// are checked at close, as every save is. Returns the path and the reason, as
    /// `path:line:col: why`.
    pub(super) fn append_refusal(&self, fh: u64, data: &[u8]) -> Option<(String, String)> {
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
            (path, h.data.to_vec())
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
        // A big file is read as a save reads it, in runs, for its errors alone: its whole-file
        // tree would be about 70 bytes a byte, and agent source that long is refused unread.
        if text.len() > formdb_engine::syntax::IN_RUNS_OVER {
            let error = formdb_engine::syntax::first_error_in_runs(&text)?;
            let why = format!("{path}:{}:{}: {}", error.pos.line, error.pos.col, error.message);
            return Some((path, why));
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

    pub(super) fn write(&self, fh: u64, offset: u64, data: &[u8], pid: u32) -> Result<u32, Errno> {
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
                write_at(Arc::make_mut(&mut h.data), at, data);
                st.tick += 1;
                h.changed_at = st.tick;
                h.dirty = true;
                h.written = true;
                h.writes += 1;
                if !h.writers.contains(&pid) {
                    h.writers.push(pid);
                }
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

    pub(super) fn truncate(
        &self,
        ino: u64,
        path: &str,
        kind: &Kind,
        fh: Option<u64>,
        size: u64,
        pid: u32,
    ) -> Result<(), Errno> {
        let size = size as usize;
        let mut guard = self.lock();
        let st = &mut *guard;
        st.page_cache.remove(&ino);
        let mut done = false;
        // A truncation naming no handle is a `truncate(2)` of the path, or, from a kernel
        // without `FUSE_ATOMIC_O_TRUNC` (see `Fs::init`), an `O_TRUNC` open's (the kernel
        // strips the flag from the open and sends it after as a `setattr` without a handle):
        // it is then the fresh handle's alone. Applied to every writable handle, it emptied one
        // already closed whose release was still to come (releases are asynchronous), and that
        // release saved the empty text over the writer's next save.
        let fresh = |h: &Handle| h.ino == ino && h.writable && h.writes == 0 && !h.dirty;
        let opened_truncating = fh.is_none() && st.handles.values().any(fresh);
        for (f, h) in st.handles.iter_mut() {
            let mine =
                fh == Some(*f) || (fh.is_none() && h.writable && (!opened_truncating || fresh(h)));
            if h.ino == ino && h.kind == HandleKind::Tracked && mine {
                resize(&mut h.data, size);
                st.tick += 1;
                h.changed_at = st.tick;
                h.dirty = true;
                h.writes += 1;
                h.truncated_by = Some(pid);
                h.truncation_closed = false;
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
        match self.save_path(path, kind, &Arc::new(data), base.as_deref()) {
            Ok(s) => refused(&s).map_or(Ok(()), Err),
            Err(e) => Err(edit_errno(&e)),
        }
    }
}
