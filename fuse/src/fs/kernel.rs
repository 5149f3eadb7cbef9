//! The fuser callbacks: each decodes a request, asks [`Shared`], and replies.

use super::*;

impl Filesystem for Fs {
    /// `O_TRUNC` comes with the open it belongs to (`FUSE_ATOMIC_O_TRUNC`), so it empties
    /// that open's handle alone. Without it the kernel sends the truncation afterwards as a
    /// `setattr` that names no handle, and which of the inode's handles it belongs to is a
    /// guess: one closed and still awaiting its (asynchronous) release looks as fresh.
    fn init(&mut self, _req: &Request, config: &mut fuser::KernelConfig) -> std::io::Result<()> {
        if let Err(missing) = config.add_capabilities(fuser::InitFlags::FUSE_ATOMIC_O_TRUNC) {
            let why = format!("the kernel lacks {missing:?}: O_TRUNC comes as a setattr after it");
            self.shared.log("/", why, true);
        }
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let s = &self.shared;
        let gen = s.refresh_gen_recent();
        let mut r = s.child(parent.0, name).and_then(|p| s.lookup_path(&p));
        if r.is_err() && s.refresh_gen() != gen {
            // A name made elsewhere in the last few milliseconds.
            r = s.child(parent.0, name).and_then(|p| s.lookup_path(&p));
        }
        reply_entry(reply, r.map(|(_, kind, attr)| (attr, kind)))
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
        req: &Request,
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
                    _ => s.truncate(ino.0, &path, &kind, fh.map(|f| f.0), size, req.pid())?,
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
        reply_entry(reply, r)
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
        reply_entry(reply, r.map(|(_, kind, attr)| (attr, kind)))
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
        reply_entry(reply, r)
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

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        match self.shared.open(ino.0, flags.0, false, req.pid()) {
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
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        match self.shared.write(fh.0, offset, data, req.pid()) {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(e),
        }
    }

    fn flush(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        match self.shared.commit(fh.0, When::Flush(req.pid())) {
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
        // reported by flush, or are in /.formdb/status. An open waiting for this commit waits
        // to its end (`Shared::wait_for_closed_truncations`).
        if let Some(h) = self.shared.lock().handles.get_mut(&fh.0) {
            h.releasing = true;
        }
        let _ = self.shared.commit(fh.0, When::Release);
        let gone = {
            let mut st = self.shared.lock();
            let gone = st.handles.remove(&fh.0);
            if let Some(h) = &gone {
                if !st.handles.values().any(|o| o.ino == h.ino) {
                    st.committed_at.remove(&h.ino);
                }
            }
            gone
        };
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

    /// Not served: answered ENOSYS once, the kernel opens directories itself from then on
    /// (no `OPENDIR` or `RELEASEDIR` round trip) and keeps each listing it read
    /// (`FOPEN_CACHE_DIR`) until it changes a directory itself or is told the listing changed
    /// (the watcher drops the listings above every name that comes or goes elsewhere). A
    /// recursive walk of a warm tree (`find`, `grep -r`) then makes no round trip per directory.
    fn opendir(&self, _req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        reply.error(Errno::ENOSYS);
    }

    /// The listing from `offset`. At 0 it is taken afresh and kept for the rest of the pass
    /// (`State::listed`), so a listing read in several replies is one listing.
    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let s = &self.shared;
        if offset == 0 || !s.lock().listed.contains_key(&ino.0) {
            // A listing sees names made elsewhere, as a lookup does.
            s.refresh_gen_recent();
            match s.listing(ino.0) {
                Ok(list) => {
                    s.lock().listed.insert(ino.0, list);
                }
                Err(e) => return reply.error(e),
            }
        }
        let st = s.lock();
        let Some(list) = st.listed.get(&ino.0) else { return reply.error(Errno::ENOENT) };
        for (i, (ino, t, name)) in list.iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(*ino), (i + 1) as u64, *t, name) {
                break;
            }
        }
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
            let (fh, open_flags) = s.open(ino, flags, created, req.pid())?;
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

/// Answer a request that names an inode: its attributes, cached as its kind allows, and its
/// name, cached for [`ENTRY_TTL`].
fn reply_entry(reply: ReplyEntry, r: Result<(FileAttr, Kind), Errno>) {
    match r {
        Ok((attr, kind)) => reply.entry_with_ttls(&ttl(&kind), &ENTRY_TTL, &attr, Generation(0)),
        Err(e) => reply.error(e),
    }
}
