//! The render cache: rendered file texts kept in memory, so reading an untouched file costs about
//! what a read from disk costs.
//!
//! What is kept, per store:
//! - a file's stored bytes (as stored view; blobs and files stored raw too), with the file's
//!   content hash (`file.hash` / `blob.hash`, which changes whenever the text changes);
//! - a user's view of a file, per alias map (by a BLAKE3 fingerprint of the map), with the hash
//!   of the stored text it was rendered from;
//! - the one-form-per-line view of a file, with that hash;
//! - which file a namespace lives in.
//!
//! **Validation.** A cached text is served only while the file's stored hash is the one it was
//! rendered from. Checking that takes one point lookup in the store (~tens of µs through Cozo),
//! so on-disk stores have a cheaper proof that *nothing* changed: the store's change stamp
//! (`Store::change_stamp`, SQLite's file change counter read with one `pread`), taken
//! *before* any store read, and an entry remembers the stamp it was last proven valid under.
//! Same stamp: served without touching the store. Other stamp (or no stamp: memory stores, WAL
//! mode, other engines): the file's hash is looked up, and the entry is re-stamped if it still
//! matches, else rendered again. Namespace → file entries have no hash and are only served under
//! an unchanged stamp.
//!
//! The store's `generation` counter was the other candidate and is not used: it costs a Cozo
//! query like the hash lookup does, and it is read and incremented outside the write
//! transaction, so two processes writing at once can both store the same next value — a reader
//! keyed on it could then miss the second write.
//!
//! **Bound.** Entries are evicted least recently used first once the cached bytes pass a cap
//! (64 MiB for the process-wide cache, [`global`]); a single text over an eighth of the cap is
//! not kept.
//!
//! **Threads.** One mutex guards the maps; it is never held across a store query or a render,
//! so concurrent readers (a mount and an MCP server on one `Arc<Store>`) only serialise on the
//! map operations.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use formdb_engine::read;
use formdb_engine::store::Store;
use formdb_engine::trace::Timings;

use crate::alias_view::{self, UserView};
use crate::aliases::AliasMap;
use crate::error::{Result, ViewError};

/// The process-wide cache the free functions of `views` render through.
pub fn global() -> &'static RenderCache {
    static GLOBAL: OnceLock<RenderCache> = OnceLock::new();
    GLOBAL.get_or_init(|| RenderCache::new(64 << 20))
}

/// A stored file's content: text when it is UTF-8 (checked once, when cached).
#[derive(Clone, Debug)]
pub enum Content {
    Text(Arc<str>),
    Bytes(Arc<[u8]>),
}

impl Content {
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            Content::Text(t) => t.as_bytes(),
            Content::Bytes(b) => b,
        }
    }

    pub fn as_text(&self) -> Option<&Arc<str>> {
        match self {
            Content::Text(t) => Some(t),
            Content::Bytes(_) => None,
        }
    }

    fn from_bytes(bytes: Vec<u8>) -> Content {
        match String::from_utf8(bytes) {
            Ok(s) => Content::Text(s.into()),
            Err(e) => Content::Bytes(e.into_bytes().into()),
        }
    }
}

/// Counters of what the cache did (for tests and the bench; not timing).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Served under an unchanged store stamp, without a store query.
    pub hits: u64,
    /// Served after a hash lookup proved the entry still valid.
    pub revalidated: u64,
    /// Rendered (nothing cached, or the cached text was stale).
    pub misses: u64,
    /// Stored texts read ahead of their first use, in batches ([`RenderCache::prefetch`]).
    pub prefetched: u64,
    pub entries: usize,
    pub bytes: usize,
}

/// A proof-of-no-change token for on-disk stores ([`Store::change_stamp`]).
type Stamp = formdb_engine::stamp::ChangeStamp;

fn stamp_of(store: &Store) -> Option<Stamp> {
    store.change_stamp()
}

/// Which store an entry belongs to: its directory (every handle of an on-disk store shares its
/// entries, proven current by the store's stamp), or (memory stores) the handle's
/// `Store::id`, which no later store reuses. (An address was used once: a store dropped and
/// another made at its address, at the same generation, served the first one's namespace →
/// file entries.)
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum StoreId {
    Dir(PathBuf),
    Mem(u64),
}

fn store_id(store: &Store) -> StoreId {
    match store.location() {
        Some(dir) => StoreId::Dir(dir.to_path_buf()),
        None => StoreId::Mem(store.id()),
    }
}

/// Proof that nothing was written between two moments: the stamp where there is one, else the
/// store's generation (enough for memory stores, which only this process writes, through
/// `change::apply` under the store's write lock).
fn token(store: &Store, stamp: Option<Stamp>) -> Result<(Option<Stamp>, u64)> {
    Ok(match stamp {
        Some(s) => (Some(s), 0),
        None => (None, formdb_engine::query::generation(store)?),
    })
}

/// What a cached value was rendered from, and when it was last proven current.
#[derive(Clone, Debug)]
struct Slot<V> {
    /// The stored file's content hash the value was rendered from.
    hash: String,
    /// The stamp under which `hash` was last seen in the store.
    stamp: Option<Stamp>,
    value: V,
    size: usize,
    used: u64,
}

impl<V> Slot<V> {
    /// Current under `stamp` without asking the store, or given the store's `hash` now.
    fn current(&self, stamp: Option<Stamp>, hash: Option<&str>) -> bool {
        match hash {
            None => stamp.is_some() && self.stamp == stamp,
            Some(h) => self.hash == h,
        }
    }
}

/// A fingerprint of an alias map.
type Fingerprint = [u8; 32];

fn fingerprint(map: &AliasMap) -> Fingerprint {
    let mut h = blake3::Hasher::new();
    for (ns, alias) in map.iter() {
        h.update(&(ns.len() as u64).to_le_bytes());
        h.update(ns.as_bytes());
        h.update(&(alias.len() as u64).to_le_bytes());
        h.update(alias.as_bytes());
    }
    *h.finalize().as_bytes()
}

/// A view derived from a stored file's text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum View {
    Oneline,
    User(Fingerprint),
}

#[derive(Clone, Debug)]
enum Derived {
    Oneline(Arc<str>),
    User(Arc<UserView>),
}

#[derive(Default)]
struct PerStore {
    stored: HashMap<String, Slot<Content>>,
    /// path -> the views of it (few per path: one per alias map in use, and the one-line view)
    derived: HashMap<String, Vec<(View, Slot<Derived>)>>,
    /// ns -> (file path, stamp it was read under, last use)
    ns_path: HashMap<String, (String, Stamp, u64)>,
}

impl PerStore {
    fn is_empty(&self) -> bool {
        self.stored.is_empty() && self.derived.is_empty() && self.ns_path.is_empty()
    }
}

#[derive(Default)]
struct Inner {
    stores: HashMap<StoreId, PerStore>,
    bytes: usize,
    entries: usize,
    tick: u64,
}

impl Inner {
    fn tick(&mut self) -> u64 {
        self.tick += 1;
        self.tick
    }

    /// Count a new entry of `size` bytes that replaced one of `old` bytes (if any).
    fn account(&mut self, old: Option<usize>, size: usize) {
        match old {
            Some(o) => self.bytes = self.bytes - o + size,
            None => {
                self.bytes += size;
                self.entries += 1;
            }
        }
    }
}

/// A stored file as fetched: its content, its hash, the stamp it was proven under, and whether
/// content and hash are known to belong together (no write landed while reading them).
struct Fetched {
    content: Content,
    hash: String,
    stamp: Option<Stamp>,
    consistent: bool,
}

/// A bounded, thread-safe cache of rendered views. See the module documentation.
pub struct RenderCache {
    inner: Mutex<Inner>,
    max_bytes: usize,
    hits: AtomicU64,
    revalidated: AtomicU64,
    misses: AtomicU64,
    prefetched: AtomicU64,
}

/// Entry bookkeeping cost beyond the text itself.
const OVERHEAD: usize = 128;

impl RenderCache {
    /// A cache holding up to `max_bytes` of text.
    pub fn new(max_bytes: usize) -> RenderCache {
        RenderCache {
            inner: Mutex::new(Inner::default()),
            max_bytes,
            hits: AtomicU64::new(0),
            revalidated: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            prefetched: AtomicU64::new(0),
        }
    }

    /// Drop every entry (the counters stay).
    pub fn clear(&self) {
        let mut inner = self.lock();
        inner.stores.clear();
        inner.bytes = 0;
        inner.entries = 0;
    }

    pub fn stats(&self) -> CacheStats {
        let inner = self.lock();
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            revalidated: self.revalidated.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            prefetched: self.prefetched.load(Ordering::Relaxed),
            entries: inner.entries,
            bytes: inner.bytes,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // Every update under the lock is a single insert or remove and its accounting, so a
        // lock poisoned by a panic elsewhere still guards consistent maps.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn count(&self, revalidated: bool) {
        if revalidated {
            self.revalidated.fetch_add(1, Ordering::Relaxed);
        } else {
            self.hits.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The file of a namespace: the declaring file, else the first file in the ns.
    pub fn ns_path(&self, store: &Store, ns: &str) -> Result<String> {
        let stamp = stamp_of(store);
        let id = store_id(store);
        if let Some(stamp) = stamp {
            let mut inner = self.lock();
            let tick = inner.tick();
            if let Some((path, s, used)) =
                inner.stores.get_mut(&id).and_then(|p| p.ns_path.get_mut(ns))
            {
                if *s == stamp {
                    *used = tick;
                    return Ok(path.clone());
                }
            }
        }
        let path = ns_path_uncached(store, ns)?;
        if let Some(stamp) = stamp {
            let mut inner = self.lock();
            let tick = inner.tick();
            let size = OVERHEAD + ns.len() + path.len();
            let old = inner
                .stores
                .entry(id)
                .or_default()
                .ns_path
                .insert(ns.to_string(), (path.clone(), stamp, tick));
            inner.account(old.map(|(p, _, _)| OVERHEAD + ns.len() + p.len()), size);
            self.evict(&mut inner);
        }
        Ok(path)
    }

    /// A stored path's bytes (a Clojure file reassembled from its forms, a file stored raw, or
    /// a blob), exactly as `formdb_engine::query::file_bytes` gives them.
    pub fn stored(&self, store: &Store, path: &str) -> Result<Content> {
        Ok(self.stored_fetch(store, path, stamp_of(store))?.content)
    }

    /// When `path` has no entry yet, read its stored text and those of the files `after` it
    /// that have none either in one store read, and keep them, proven current under the
    /// store's stamp like any other entry: a reader of many files (a directory's) pays for one
    /// script, not two a file. Entries that exist, current or not, are left to
    /// [`RenderCache::stored`] (a stale one costs a hash lookup there, not a batch here).
    /// Nothing is kept if a write landed while reading, or for stores with no change stamp.
    /// Returns how many texts were kept.
    pub fn prefetch(&self, store: &Store, path: &str, after: &[&str]) -> Result<usize> {
        let Some(stamp) = stamp_of(store) else { return Ok(0) };
        let id = store_id(store);
        let missing: Vec<&str> = {
            let inner = self.lock();
            let cached = inner.stores.get(&id).map(|p| &p.stored);
            let new = |p: &&str| !cached.is_some_and(|c| c.contains_key(*p));
            if !new(&path) {
                return Ok(0);
            }
            std::iter::once(path).chain(after.iter().copied().filter(new)).collect()
        };
        let before = token(store, Some(stamp))?;
        let mut trace = Timings::traced(format!("read ahead {} files", missing.len()));
        let files = read::files::file_texts(store, &missing)?;
        trace.lap("files");
        if token(store, stamp_of(store))? != before {
            return Ok(0);
        }
        let mut inner = self.lock();
        let mut kept = 0;
        for (path, read::files::FileText { hash, bytes }) in files {
            let content = Content::from_bytes(bytes);
            let size = OVERHEAD + content.as_bytes().len();
            if size > self.max_bytes / 8 {
                continue;
            }
            let used = inner.tick();
            let slot = Slot { hash, stamp: Some(stamp), value: content, size, used };
            let per = inner.stores.entry(id.clone()).or_default();
            // A text cached by a reader since the check above is as current: it stays.
            if per.stored.contains_key(&path) {
                continue;
            }
            per.stored.insert(path, slot);
            inner.account(None, size);
            kept += 1;
        }
        self.evict(&mut inner);
        self.prefetched.fetch_add(kept as u64, Ordering::Relaxed);
        Ok(kept)
    }

    /// Whether a stored text of `path` is kept, current or not (what [`RenderCache::prefetch`]
    /// leaves alone).
    pub fn holds(&self, store: &Store, path: &str) -> bool {
        self.has_stored(&store_id(store), path)
    }

    /// The one-form-per-line view of a stored file; `None` if the file is not UTF-8 text.
    pub fn oneline(&self, store: &Store, path: &str) -> Result<Option<Arc<str>>> {
        let d = self.derived(store, path, View::Oneline, |text| {
            Derived::Oneline(crate::oneline::oneline_text(text).into())
        })?;
        Ok(d.map(|d| match d {
            Derived::Oneline(t) => t,
            Derived::User(v) => v.text.as_str().into(),
        }))
    }

    /// A user's view of a stored file; `None` if the file is not UTF-8 text.
    pub fn user_view(
        &self,
        store: &Store,
        path: &str,
        map: &AliasMap,
    ) -> Result<Option<Arc<UserView>>> {
        let d = self.derived(store, path, View::User(fingerprint(map)), |text| {
            Derived::User(Arc::new(alias_view::user_view_text(text, map)))
        })?;
        Ok(d.map(|d| match d {
            Derived::User(v) => v,
            Derived::Oneline(t) => Arc::new(UserView { text: t.to_string(), fallbacks: vec![] }),
        }))
    }

    /// The stored content, proven current: a cached copy under an unchanged stamp, a cached
    /// copy whose hash is still the store's, or read from the store.
    fn stored_fetch(&self, store: &Store, path: &str, stamp: Option<Stamp>) -> Result<Fetched> {
        // The stamp was read before anything from the store: a write that lands after it
        // changes the stamp, so whatever is cached below is checked again next time.
        let id = store_id(store);
        if stamp.is_some() {
            if let Some(hit) = self.lookup_stored(&id, path, stamp, None) {
                return Ok(hit);
            }
        }
        // A copy cached under another stamp may still be current, which one hash lookup proves.
        // With no copy there is nothing to prove: the hash comes with the text below (a cold
        // read was two hash lookups, a third of its store time, before).
        if self.has_stored(&id, path) {
            let hash = stored_hash(store, path)?.ok_or_else(|| ViewError::NoFile(path.into()))?;
            if let Some(hit) = self.lookup_stored(&id, path, stamp, Some(&hash)) {
                return Ok(hit);
            }
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        // Read the hash with the text, between two proofs that nothing was written.
        let before = token(store, stamp)?;
        let mut trace = Timings::traced(format!("read {path}"));
        let (hash, bytes) =
            stored_file(store, path, &mut trace)?.ok_or_else(|| ViewError::NoFile(path.into()))?;
        let consistent = token(store, stamp_of(store))? == before;
        let content = Content::from_bytes(bytes);
        let size = OVERHEAD + content.as_bytes().len();
        if consistent && size <= self.max_bytes / 8 {
            let mut inner = self.lock();
            let used = inner.tick();
            let slot = Slot { hash: hash.clone(), stamp, value: content.clone(), size, used };
            let old = inner.stores.entry(id).or_default().stored.insert(path.to_string(), slot);
            inner.account(old.map(|s| s.size), size);
            self.evict(&mut inner);
        }
        Ok(Fetched { content, hash, stamp, consistent })
    }

    fn has_stored(&self, id: &StoreId, path: &str) -> bool {
        self.lock().stores.get(id).is_some_and(|p| p.stored.contains_key(path))
    }

    fn lookup_stored(
        &self,
        id: &StoreId,
        path: &str,
        stamp: Option<Stamp>,
        hash: Option<&str>,
    ) -> Option<Fetched> {
        let mut inner = self.lock();
        let tick = inner.tick();
        let slot = inner.stores.get_mut(id)?.stored.get_mut(path)?;
        if !slot.current(stamp, hash) {
            return None;
        }
        slot.used = tick;
        slot.stamp = stamp;
        self.count(hash.is_some());
        Some(Fetched {
            content: slot.value.clone(),
            hash: slot.hash.clone(),
            stamp,
            consistent: true,
        })
    }

    /// A view derived from the stored text of `path`, proven current like the stored text is.
    fn derived(
        &self,
        store: &Store,
        path: &str,
        view: View,
        render: impl FnOnce(&str) -> Derived,
    ) -> Result<Option<Derived>> {
        let stamp = stamp_of(store);
        let id = store_id(store);
        if stamp.is_some() {
            if let Some(hit) = self.lookup_derived(&id, path, view, stamp, None) {
                return Ok(Some(hit));
            }
        }
        let stored = self.stored_fetch(store, path, stamp)?;
        let Some(text) = stored.content.as_text() else { return Ok(None) };
        if let Some(hit) = self.lookup_derived(&id, path, view, stored.stamp, Some(&stored.hash)) {
            return Ok(Some(hit));
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        // With FORMDB_TRACE, each cold render says what it cost beside its store read's line.
        let what = match view {
            View::Oneline => "one form per line",
            View::User(_) => "user view",
        };
        let mut trace = Timings::traced(format!("render {path} ({what})"));
        let value = render(text);
        trace.lap("render");
        let size = OVERHEAD
            + match &value {
                Derived::Oneline(t) => t.len(),
                Derived::User(v) => v.text.len(),
            };
        if stored.consistent && size <= self.max_bytes / 8 {
            let mut inner = self.lock();
            let used = inner.tick();
            let slot =
                Slot { hash: stored.hash, stamp: stored.stamp, value: value.clone(), size, used };
            let list = inner.stores.entry(id).or_default().derived.entry(path.into()).or_default();
            let old = match list.iter_mut().find(|(v, _)| *v == view) {
                Some((_, s)) => Some(std::mem::replace(s, slot).size),
                None => {
                    list.push((view, slot));
                    None
                }
            };
            inner.account(old, size);
            self.evict(&mut inner);
        }
        Ok(Some(value))
    }

    fn lookup_derived(
        &self,
        id: &StoreId,
        path: &str,
        view: View,
        stamp: Option<Stamp>,
        hash: Option<&str>,
    ) -> Option<Derived> {
        let mut inner = self.lock();
        let tick = inner.tick();
        let list = inner.stores.get_mut(id)?.derived.get_mut(path)?;
        let (_, slot) = list.iter_mut().find(|(v, _)| *v == view)?;
        if !slot.current(stamp, hash) {
            return None;
        }
        slot.used = tick;
        slot.stamp = stamp;
        self.count(hash.is_some());
        Some(slot.value.clone())
    }

    /// Evict least recently used entries once the cache passes its bound, down to 3/4 of it
    /// (so the sort below runs rarely).
    fn evict(&self, inner: &mut Inner) {
        if inner.bytes <= self.max_bytes {
            return;
        }
        enum Which {
            Stored(String),
            Derived(String, View),
            NsPath(String),
        }
        let mut all: Vec<(u64, StoreId, Which)> = Vec::new();
        for (id, per) in &inner.stores {
            for (p, s) in &per.stored {
                all.push((s.used, id.clone(), Which::Stored(p.clone())));
            }
            for (p, list) in &per.derived {
                for (v, s) in list {
                    all.push((s.used, id.clone(), Which::Derived(p.clone(), *v)));
                }
            }
            for (n, (_, _, used)) in &per.ns_path {
                all.push((*used, id.clone(), Which::NsPath(n.clone())));
            }
        }
        all.sort_unstable_by_key(|e| e.0);
        let target = self.max_bytes / 4 * 3;
        for (_, id, which) in all {
            if inner.bytes <= target {
                break;
            }
            let Some(per) = inner.stores.get_mut(&id) else { continue };
            let freed = match which {
                Which::Stored(p) => per.stored.remove(&p).map(|s| s.size),
                Which::NsPath(n) => {
                    per.ns_path.remove(&n).map(|(p, _, _)| OVERHEAD + n.len() + p.len())
                }
                Which::Derived(p, v) => {
                    let list = per.derived.get_mut(&p);
                    let freed = list.and_then(|l| {
                        let i = l.iter().position(|(x, _)| *x == v)?;
                        Some(l.swap_remove(i).1.size)
                    });
                    if per.derived.get(&p).is_some_and(Vec::is_empty) {
                        per.derived.remove(&p);
                    }
                    freed
                }
            };
            if per.is_empty() {
                inner.stores.remove(&id);
            }
            if let Some(n) = freed {
                inner.bytes -= n;
                inner.entries -= 1;
            }
        }
    }
}

/// A stored path's content hash and bytes: what [`stored_hash`] and
/// `formdb_engine::query::file_bytes` read in four queries, in one (the file's row with its
/// hash and its top-level forms), or two for a blob.
fn stored_file(
    store: &Store,
    path: &str,
    trace: &mut Timings,
) -> Result<Option<(String, Vec<u8>)>> {
    // The file's row and its forms in one script (a script's parse, plan and transaction cost
    // as much as reading a hundred forms).
    let file = read::files::file_texts(store, &[path])?.remove(path);
    trace.lap("file");
    let Some(file) = file else {
        return Ok(read::files::blob(store, path)?.map(|b| (b.hash, b.content)));
    };
    Ok(Some((file.hash, file.bytes)))
}

/// The content hash the store holds for a path: a Clojure file's, else a blob's (the order
/// `file_bytes` reads them in). One point lookup.
fn stored_hash(store: &Store, path: &str) -> Result<Option<String>> {
    Ok(read::files::stored_hash(store, path)?)
}

/// [`RenderCache::ns_path`] read from the store.
fn ns_path_uncached(store: &Store, ns: &str) -> Result<String> {
    read::namespaces::file_of(store, ns)?.ok_or_else(|| ViewError::NoNamespace(ns.into()))
}
