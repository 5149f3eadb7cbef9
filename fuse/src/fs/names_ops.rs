//! Operations on names: new nodes, unlink, rmdir and rename.

use super::*;

impl Shared {
    pub(super) fn new_node(
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
            drop(st);
            let id = name.strip_suffix(".clj").unwrap_or(name).to_string();
            let why = worded(&EditError::UnknownId { id });
            self.log(path, format!("not created: {why}"), true);
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

    pub(super) fn keep_parents(&self, path: &str) {
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

    pub(super) fn unlink(&self, path: &str) -> Result<(), Errno> {
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

    pub(super) fn rmdir(&self, path: &str) -> Result<(), Errno> {
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

    pub(super) fn rename(&self, from: &str, to: &str, flags: RenameFlags) -> Result<(), Errno> {
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
                    let base = base.as_ref().map(|b| b.as_slice());
                    let data = Arc::new(node.data);
                    if self.save_path(to, &kind, &data, base).is_err() {
                        return Err(Errno::EIO);
                    }
                    let mut st = self.lock();
                    st.mem.remove(from);
                    st.mem.remove(to);
                    st.hidden.remove(to);
                    st.renders.remove(to);
                    st.serve(to.to_string(), data);
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
                    st.serve(from.to_string(), r.bytes.clone());
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
