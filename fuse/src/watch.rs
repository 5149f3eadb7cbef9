//! The live view: a thread that polls the store's generation and, when it moved (a save here,
//! another mount, the CLI, an agent), finds the paths whose content changed and tells the kernel
//! to drop what it cached of them. Page and name invalidations are sent only from here, never
//! from a request handler (the kernel may hold locks they need while it waits for a reply);
//! the one notice a handler sends is attributes-only (see `Shared::drop_kernel_attrs`).

use std::collections::HashMap;
use std::ffi::OsStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use formdb_engine::query;
use formdb_engine::read;
use formdb_engine::store::Store;
use fuser::{INodeNo, Notifier};

use crate::fs::Shared;

/// What identifies each path's content: file/blob hash, and the draft's time if it has one.
fn content_keys(store: &Store) -> HashMap<String, String> {
    let mut out = HashMap::new();
    if let Ok(hashes) = read::files::path_hashes(store, None) {
        for h in hashes {
            out.insert(h.path, h.hash);
        }
    }
    if let Ok(drafts) = read::drafts::saved_times(store) {
        for (path, at) in drafts {
            out.entry(path).or_default().push_str(&format!("|draft@{at}"));
        }
    }
    out
}

pub(crate) fn spawn(
    shared: Arc<Shared>,
    notifier: Notifier,
    stop: Arc<AtomicBool>,
    poll: Duration,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new().name("formdb-watch".into()).spawn(move || {
        let store = shared.store.clone();
        let mut last = query::generation(&store).unwrap_or(0);
        let mut keys = content_keys(&store);
        let step = Duration::from_millis(20).min(poll);
        while !stop.load(Ordering::SeqCst) {
            let mut slept = Duration::ZERO;
            while slept < poll && !stop.load(Ordering::SeqCst) {
                std::thread::sleep(step);
                slept += step;
            }
            let Ok(gen) = query::generation(&store) else { continue };
            if gen == last {
                continue;
            }
            last = gen;
            shared.gen.fetch_max(gen, Ordering::SeqCst);
            let now = content_keys(&store);
            let mut changed: Vec<(String, bool)> = Vec::new();
            for (p, k) in &now {
                match keys.get(p) {
                    Some(old) if old == k => {}
                    Some(_) => changed.push((p.clone(), false)),
                    None => changed.push((p.clone(), true)),
                }
            }
            for p in keys.keys() {
                if !now.contains_key(p) {
                    changed.push((p.clone(), true));
                }
            }
            keys = now;
            let (inodes, entries) = shared.invalidations(&changed);
            for i in inodes {
                let _ = notifier.inval_inode(INodeNo(i), 0, 0);
            }
            for (parent, name) in entries {
                let _ = notifier.inval_entry(INodeNo(parent), OsStr::new(&name));
            }
        }
    })
}
