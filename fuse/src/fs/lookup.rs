//! Paths to what they show: kinds, content rendered from the store, attributes and listings.

use std::ops::Bound;

use super::*;

impl Shared {
    pub(super) fn form_exists(&self, id: &str) -> bool {
        matches!(read::forms::is_top_level(&self.store, id), Ok(true))
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
            // Whether it has one, not its text: a lookup is no read.
            let drafted = read::drafts::exists(&self.store, path).unwrap_or(false);
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
    pub(super) fn fetch(&self, path: &str, kind: &Kind) -> Result<(Vec<u8>, bool), Errno> {
        match kind {
            Kind::Stored => {
                if let Some(d) = self.draft(path) {
                    return Ok((d.bytes, true));
                }
                self.read_ahead(path);
                match views::render_path(&self.store, path, &self.render) {
                    Ok((b, _)) => Ok((b, false)),
                    Err(views::ViewError::NoFile(_)) => Err(Errno::ENOENT),
                    Err(_) => Err(Errno::EIO),
                }
            }
            Kind::Form(id) => {
                if let Some(d) = self.draft(path) {
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

    /// Read `path` and the Clojure files after it from the store in one script, when the
    /// render cache has nothing of `path` yet: the rest of its directory (up to
    /// [`READ_AHEAD`] files), or, when `path` comes right after the last read ahead (a walk:
    /// `cat`, `grep -r`, an editor loading a project), the next [`WALK_AHEAD`] files in path
    /// order across directories. A walk then costs a script per 64 files, not two a file (a
    /// script's parse, plan and transaction cost as much as reading 150 forms). What is read
    /// waits in the render cache, under its bound, proven current by the store's stamp like
    /// any text it keeps.
    fn read_ahead(&self, path: &str) {
        let clojure = |p: &&String| formdb_engine::syntax::Lang::from_path(p).is_some();
        if !clojure(&&path.to_string()) {
            return;
        }
        let tree = self.tree();
        let walking = self.lock().read_ahead_next.as_deref() == Some(path);
        let (dir, _) = split(path);
        let prefix = if dir.is_empty() { String::new() } else { format!("{dir}/") };
        let later = || tree.files.range::<str, _>((Bound::Excluded(path), Bound::Unbounded));
        let after: Vec<&str> = if walking {
            later().filter(clojure).take(WALK_AHEAD - 1).map(String::as_str).collect()
        } else {
            later()
                .take_while(|p| p.starts_with(&prefix))
                .filter(|p| !p[prefix.len()..].contains('/'))
                .filter(clojure)
                .take(READ_AHEAD - 1)
                .map(String::as_str)
                .collect()
        };
        // A failed read ahead changes nothing: the render reads the file alone and says why.
        if matches!(views::read_ahead(&self.store, path, &after), Ok(n) if n > 0) {
            // The first file after `path` not read ahead: past the window, or in a subdirectory
            // the directory's window skipped.
            let read: HashSet<&str> = after.iter().copied().collect();
            let next = later().filter(clojure).find(|p| !read.contains(p.as_str())).cloned();
            self.lock().read_ahead_next = next;
        }
    }

    /// The mtime of a path this mount has not served yet: when its content last changed in the
    /// store (its last version, or its draft if that is newer), so it is stable across remounts.
    pub(super) fn initial_mtime(&self, path: &str, gen: u64, draft: bool) -> SystemTime {
        let file = path.strip_prefix(".formdb/oneline/").unwrap_or(path);
        let version = if gen == self.start_gen {
            self.vtimes.get(file).copied()
        } else {
            read::files::last_version_time(&self.store, file).ok().flatten().map(secs)
        };
        let drafted = draft
            .then(|| read::drafts::saved_at(&self.store, path).ok().flatten().map(secs))
            .flatten();
        match (version, drafted) {
            (Some(v), Some(d)) => v.max(d),
            (v, d) => v.or(d).unwrap_or(self.started),
        }
    }

    /// Fetch a path's bytes together with the store generation they were read at: the
    /// generation is read before and after, and the fetch repeated (a few times) when a change
    /// landed in between, so two fetches can be ordered by what they saw.
    pub(super) fn fetch_at(&self, path: &str, kind: &Kind) -> Result<(Vec<u8>, bool, u64), Errno> {
        let mut tries = 0;
        loop {
            // Each read of the generation is a `pread` of the store's change stamp while no
            // commit moved it (see `DbFiles`), not a query.
            let before = self.refresh_gen();
            let (bytes, draft) = self.fetch(path, kind)?;
            let after = self.refresh_gen();
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
    pub(super) fn content(&self, path: &str, kind: &Kind, gen: u64) -> Result<Rendered, Errno> {
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

    pub(super) fn attr(
        &self,
        ino: u64,
        path: &str,
        kind: &Kind,
        fh: Option<u64>,
    ) -> Result<FileAttr, Errno> {
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
                if !matches!(kind, Kind::Status) {
                    self.lock().told.insert(ino, (size, r.mtime));
                }
                Ok(mk(size, perm, r.mtime, self.uid, self.gid))
            }
        }
    }

    /// The size an open handle gives a file: the asking handle's, else a written handle's.
    pub(super) fn open_size(&self, st: &State, ino: u64, fh: Option<u64>) -> Option<u64> {
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

    pub(super) fn path_of(&self, ino: u64) -> Result<String, Errno> {
        self.lock().inodes.path(ino).ok_or(Errno::ENOENT)
    }

    /// The path of `name` in directory `parent`. A name longer than Linux's NAME_MAX, or a
    /// path longer than PATH_MAX, is ENAMETOOLONG, as on a disk filesystem: the store would take
    /// it, but no working directory could hold it, so the file could never be written back.
    pub(super) fn child(&self, parent: u64, name: &OsStr) -> Result<String, Errno> {
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

    pub(super) fn lookup_path(&self, path: &str) -> Result<(u64, Kind, FileAttr), Errno> {
        let kind = self.resolve(path).ok_or(Errno::ENOENT)?;
        let ino = self.lock().inodes.get(path);
        let attr = self.attr(ino, path, &kind, None)?;
        Ok((ino, kind, attr))
    }

    /// A directory's listing, `.` and `..` first: (inode, type, name).
    pub(super) fn listing(&self, ino: u64) -> Result<Vec<(u64, FileType, String)>, Errno> {
        let path = self.path_of(ino)?;
        match self.resolve(&path) {
            Some(Kind::Dir { .. }) => {}
            Some(_) => return Err(Errno::ENOTDIR),
            None => return Err(Errno::ENOENT),
        }
        let children = self.children(&path);
        let mut st = self.lock();
        let parent_ino = if path.is_empty() { ROOT } else { st.inodes.get(split(&path).0) };
        let mut list = vec![
            (ino, FileType::Directory, ".".to_string()),
            (parent_ino, FileType::Directory, "..".to_string()),
        ];
        for (name, t) in children {
            let i = st.inodes.get(&join(&path, &name));
            list.push((i, t, name));
        }
        Ok(list)
    }

    pub(super) fn children(&self, path: &str) -> Vec<(String, FileType)> {
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

    pub(super) fn status_text(&self) -> String {
        let mut s = String::new();
        let at = self.store.location().map(|p| p.display().to_string()).unwrap_or_default();
        s.push_str(&format!("formdb mount of {at} for user {}\n\n", self.writer.user));
        // Their headers: a draft may be a whole big save, and this file is read often.
        let drafts = read::drafts::headers(&self.store).unwrap_or_default();
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
}
