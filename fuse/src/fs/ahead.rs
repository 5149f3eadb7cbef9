//! Reading ahead: a cold read of a Clojure file reads the files after it from the store in one
//! script, and a walk (`cat`, `grep -r`, an editor loading a project) keeps reading its next
//! window on a thread of its own while the reader is served from what was read before.

use std::ops::Bound;
use std::sync::Condvar;

use super::*;

/// A window of a walk read ahead on a thread of its own.
pub(super) struct Window {
    /// The files it reads.
    files: HashSet<String>,
    /// A read of one of its files started the next window already.
    moved_on: bool,
    done: Arc<Done>,
}

/// Whether a window's read has ended (kept what it read, or nothing).
#[derive(Default)]
struct Done {
    ended: Mutex<bool>,
    cv: Condvar,
}

impl Done {
    fn wait(&self) {
        let mut ended = self.ended.lock().unwrap_or_else(|p| p.into_inner());
        while !*ended {
            ended = self.cv.wait(ended).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn end(&self) {
        *self.ended.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.cv.notify_all();
    }
}

/// Ends its window when dropped, however the read ended (a panic included): a reader waiting
/// on a window never waits for ever.
struct EndOnDrop(Arc<Done>);

impl Drop for EndOnDrop {
    fn drop(&mut self) {
        self.0.end();
    }
}

fn clojure(p: &str) -> bool {
    formdb_engine::syntax::Lang::from_path(p).is_some()
}

impl Shared {
    /// Read `path` and the Clojure files after it from the store in one script, when the
    /// render cache has nothing of `path` yet: the rest of its directory (up to
    /// [`READ_AHEAD`] files), or, when `path` comes right after the last read ahead (a walk:
    /// `cat`, `grep -r`, an editor loading a project), the next [`WALK_AHEAD`] files in path
    /// order across directories. A walk then costs a script per 64 files, not two a file (a
    /// script's parse, plan and transaction cost as much as reading 150 forms). What is read
    /// waits in the render cache, under its bound, proven current by the store's stamp like
    /// any text it keeps.
    ///
    /// A walk goes on reading on a thread of its own (see [`Shared::read_on`]): a read of a
    /// file of the window being read there waits for that script instead of running its own.
    pub(super) fn read_ahead(&self, path: &str) {
        if !clojure(path) {
            return;
        }
        let tree = self.tree();
        let pending = {
            let mut st = self.lock();
            match st.ahead.as_mut() {
                Some(w) if w.files.contains(path) => {
                    let first = !w.moved_on;
                    w.moved_on = true;
                    Some((w.done.clone(), first))
                }
                _ => None,
            }
        };
        if let Some((done, first)) = pending {
            done.wait();
            // The walk reached the window: the next one is read while this one is served.
            if first {
                self.read_on(&tree);
            }
        }
        let walking = self.lock().read_ahead_next.as_deref() == Some(path);
        let (dir, _) = split(path);
        let prefix = if dir.is_empty() { String::new() } else { format!("{dir}/") };
        let later = || tree.files.range::<str, _>((Bound::Excluded(path), Bound::Unbounded));
        let after: Vec<&str> = if walking {
            later().filter(|p| clojure(p)).take(WALK_AHEAD - 1).map(String::as_str).collect()
        } else {
            later()
                .take_while(|p| p.starts_with(&prefix))
                .filter(|p| !p[prefix.len()..].contains('/'))
                .filter(|p| clojure(p))
                .take(READ_AHEAD - 1)
                .map(String::as_str)
                .collect()
        };
        // A failed read ahead changes nothing: the render reads the file alone and says why.
        if matches!(views::read_ahead(&self.store, path, &after), Ok(n) if n > 0) {
            // The first file after `path` not read ahead: past the window, or in a subdirectory
            // the directory's window skipped.
            let read: HashSet<&str> = after.iter().copied().collect();
            let next = later().filter(|p| clojure(p)).find(|p| !read.contains(p.as_str())).cloned();
            self.lock().read_ahead_next = next;
            if walking {
                self.read_on(&tree);
            }
        }
    }

    /// Read the next [`WALK_AHEAD`] files of a walk, from [`State::read_ahead_next`], on a
    /// thread of its own, unless a window is being read already. A walk's reader spends about
    /// as long in the kernel's round trips of a window as the store's script for the next one
    /// takes: on two CPUs the two overlap. The texts go to the render cache, proven current by
    /// the store's stamp like any read ahead (a write that lands while reading keeps nothing).
    fn read_on(&self, tree: &Tree) {
        let mut st = self.lock();
        if st
            .ahead
            .as_ref()
            .is_some_and(|w| !*w.done.ended.lock().unwrap_or_else(|p| p.into_inner()))
        {
            return;
        }
        let Some(from) = st.read_ahead_next.clone() else { return };
        let window: Vec<String> = tree
            .files
            .range::<str, _>((Bound::Included(from.as_str()), Bound::Unbounded))
            .filter(|p| clojure(p))
            .take(WALK_AHEAD)
            .cloned()
            .collect();
        let Some(last) = window.last() else { return };
        st.read_ahead_next = tree
            .files
            .range::<str, _>((Bound::Excluded(last.as_str()), Bound::Unbounded))
            .find(|p| clojure(p))
            .cloned();
        let done = Arc::new(Done::default());
        st.ahead = Some(Window {
            files: window.iter().cloned().collect(),
            moved_on: false,
            done: done.clone(),
        });
        drop(st);
        let store = self.store.clone();
        let end = EndOnDrop(done);
        let spawned = std::thread::Builder::new().name("formdb-ahead".into()).spawn(move || {
            let _end = end;
            let after: Vec<&str> = window[1..].iter().map(String::as_str).collect();
            // Nothing kept (an error, a write meanwhile): each file is read when it is asked for.
            let _ = views::read_ahead(&store, &window[0], &after);
        });
        // No thread (out of resources): the window's files are read when asked for; the
        // dropped closure ended the window, so nobody waits on it.
        drop(spawned);
    }
}
