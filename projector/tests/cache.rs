//! The render cache against real stores: cached views are the uncached renders, byte for byte;
//! a write through the engine's change API, through this handle or another handle on the same
//! on-disk store (as another process would), is seen by the next render; the cache stays within
//! its bound; readers on many threads see only texts the store held.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use formdb_engine::change::{self, ChangeSet};
use formdb_engine::import::{self, Incoming, Quiet};
use formdb_engine::query;
use formdb_engine::store::Store;
use formdb_projector::aliases::AliasMap;
use formdb_projector::cache::{CacheStats, RenderCache};
use formdb_projector::views;
use formdb_testkit::disk_store_of;

const CORE: &str = "(ns app.core
  (:require [clojure.string :as string]
            [app.util :as u]))

(defn greet [names]
  (string/join \", \"
               (map u/shout names)))
";

const UTIL: &str = "(ns app.util\r\n  (:require [clojure.string :as str]))\r\n\r\n(defn shout [s] (str/upper-case s))\r\n";

fn tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in [
        ("src/app/core.clj", CORE),
        ("src/app/util.clj", UTIL),
        ("src/app/broken.clj", "(ns app.broken)\n(defn oops [x]\n"),
        ("resources/config.json", "{\"port\": 8080}"),
    ] {
        let p = dir.path().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    dir
}

/// Save a file's new text the way an editor's save does: parse it into a change set and apply.
fn write(store: &Store, path: &str, text: &str) {
    let incoming = vec![Incoming { path: path.into(), bytes: text.as_bytes().to_vec() }];
    let (changes, errors) = import::file_changes(store, incoming, &Quiet).unwrap();
    assert!(errors.is_empty(), "{errors:?}");
    change::apply(store, &ChangeSet { author: "test".into(), op: "save".into(), changes }).unwrap();
}

fn uncached(store: &Store, path: &str) -> String {
    String::from_utf8(query::file_bytes(store, path).unwrap().unwrap()).unwrap()
}

fn text(cache: &RenderCache, store: &Store, path: &str) -> String {
    cache.stored(store, path).unwrap().as_text().unwrap().to_string()
}

fn map(pairs: &[(&str, &str)]) -> AliasMap {
    AliasMap::from_pairs(pairs.iter().map(|(a, b)| (a.to_string(), b.to_string())))
}

fn delta(a: CacheStats, b: CacheStats) -> (u64, u64, u64) {
    (b.hits - a.hits, b.revalidated - a.revalidated, b.misses - a.misses)
}

#[test]
fn cached_views_are_the_uncached_renders_and_hit() {
    let src = tree();
    let (store, _tmp, _) = disk_store_of(src.path(), "test");
    let cache = RenderCache::new(1 << 20);
    let alice = map(&[("clojure.string", "s")]);
    for path in query::paths(&store).unwrap() {
        let bytes = query::file_bytes(&store, &path).unwrap().unwrap();
        assert_eq!(cache.stored(&store, &path).unwrap().as_bytes(), bytes, "{path}");
        let Ok(text) = String::from_utf8(bytes) else { continue };
        if !path.ends_with(".clj") {
            continue;
        }
        let v = cache.user_view(&store, &path, &alice).unwrap().unwrap();
        assert_eq!(*v, views::user_view_text(&text, &alice), "{path}");
        let one = cache.oneline(&store, &path).unwrap().unwrap();
        assert_eq!(&*one, views::oneline_text(&text), "{path}");
    }
    // Unchanged store: every read again is served under the unchanged SQLite stamp.
    let before = cache.stats();
    assert_eq!(text(&cache, &store, "src/app/core.clj"), CORE);
    let v = cache.user_view(&store, "src/app/core.clj", &alice).unwrap().unwrap();
    assert!(v.text.contains("(s/join \", \"\n          (map u/shout names))"), "{}", v.text);
    cache.oneline(&store, "src/app/core.clj").unwrap();
    assert_eq!(delta(before, cache.stats()), (3, 0, 0));
    // Another alias map is another view.
    let bob = map(&[("clojure.string", "cs")]);
    let v = cache.user_view(&store, "src/app/core.clj", &bob).unwrap().unwrap();
    assert!(v.text.contains("(cs/join"), "{}", v.text);
    assert_eq!(delta(before, cache.stats()).2, 1);
    // The global cache behind the views functions gives the same texts.
    assert_eq!(views::as_stored(&store, "app.core").unwrap(), CORE);
    assert_eq!(views::as_stored(&store, "app.core").unwrap(), CORE);
    assert_eq!(views::as_stored(&store, "app.util").unwrap(), UTIL);
    assert!(matches!(cache.stored(&store, "src/no/such.clj"), Err(views::ViewError::NoFile(_))));
}

#[test]
fn a_write_through_this_handle_is_seen() {
    let src = tree();
    let (store, _tmp, _) = disk_store_of(src.path(), "test");
    let cache = RenderCache::new(1 << 20);
    let m = map(&[("clojure.string", "s")]);
    let p = "src/app/util.clj";
    assert_eq!(text(&cache, &store, p), UTIL);
    cache.user_view(&store, p, &m).unwrap();
    cache.oneline(&store, p).unwrap();
    assert_eq!(views::as_stored(&store, "app.util").unwrap(), UTIL);

    let v2 = UTIL.replace("(str/upper-case s)", "(str/lower-case s)");
    write(&store, p, &v2);
    let before = cache.stats();
    assert_eq!(text(&cache, &store, p), v2);
    assert_eq!(uncached(&store, p), v2);
    let v = cache.user_view(&store, p, &m).unwrap().unwrap();
    assert!(v.text.contains("(s/lower-case s)"), "{}", v.text);
    assert!(cache.oneline(&store, p).unwrap().unwrap().contains("(str/lower-case s)"));
    assert_eq!(delta(before, cache.stats()).2, 3, "each view rendered again");
    assert_eq!(views::as_stored(&store, "app.util").unwrap(), v2);
    assert!(views::user_view(&store, "app.util", &m).unwrap().text.contains("s/lower-case"));

    // Back to the first text (same hash as the first cached copy): still the current text.
    write(&store, p, UTIL);
    assert_eq!(text(&cache, &store, p), UTIL);
    assert_eq!(views::as_stored(&store, "app.util").unwrap(), UTIL);
    assert!(cache.user_view(&store, p, &m).unwrap().unwrap().text.contains("s/upper-case"));

    // A deleted file is gone from its views too.
    let changes = vec![formdb_engine::change::Change::DeleteFile { path: p.into() }];
    change::apply(&store, &ChangeSet { author: "t".into(), op: "delete".into(), changes }).unwrap();
    assert!(cache.stored(&store, p).is_err());
    assert!(views::stored_text(&store, p).is_err());
    assert!(views::as_stored(&store, "app.util").is_err());
}

#[test]
fn a_write_from_another_handle_is_seen() {
    let src = tree();
    let (store, _tmp, sdir) = disk_store_of(src.path(), "test");
    let cache = RenderCache::new(1 << 20);
    let p = "src/app/core.clj";
    let m = map(&[("clojure.string", "s")]);
    assert_eq!(text(&cache, &store, p), CORE);
    assert!(cache.user_view(&store, p, &m).unwrap().unwrap().text.contains("(s/join"));
    assert_eq!(views::as_stored(&store, "app.core").unwrap(), CORE);
    // Another process: its own connection to the same SQLite file.
    let other = Store::open(&sdir).unwrap();
    for round in 0..3 {
        let next = format!("{CORE}\n(def round {round})\n");
        write(&other, p, &next);
        assert_eq!(text(&cache, &store, p), next);
        assert_eq!(views::as_stored(&store, "app.core").unwrap(), next);
        assert_eq!(views::stored_text(&store, p).unwrap(), next);
        let v = cache.user_view(&store, p, &m).unwrap().unwrap();
        assert!(v.text.ends_with(&format!("(def round {round})\n")), "{}", v.text);
        assert!(cache
            .oneline(&store, p)
            .unwrap()
            .unwrap()
            .ends_with(&format!("(def round {round})\n")));
    }
    // A namespace moved to another file by the other handle: the ns -> file entry follows.
    write(&other, "src/app/core.clj", "(ns app.core-old)\n");
    write(&other, "src/app/core2.clj", CORE);
    assert_eq!(views::ns_path(&store, "app.core").unwrap(), "src/app/core2.clj");
    assert_eq!(views::as_stored(&store, "app.core").unwrap(), CORE);
}

#[test]
fn memory_stores_are_checked_by_hash() {
    let src = tree();
    let store = Store::open_in_memory().unwrap();
    import::import_dir(&store, src.path(), "test", &Quiet).unwrap();
    let cache = RenderCache::new(1 << 20);
    let p = "src/app/core.clj";
    assert_eq!(text(&cache, &store, p), CORE);
    let before = cache.stats();
    assert_eq!(text(&cache, &store, p), CORE);
    assert_eq!(delta(before, cache.stats()), (0, 1, 0), "no stamp: revalidated by hash");
    let next = CORE.replace("greet", "welcome");
    write(&store, p, &next);
    assert_eq!(text(&cache, &store, p), next);
    assert_eq!(views::as_stored(&store, "app.core").unwrap(), next);
    // Blobs are stored paths too.
    assert_eq!(
        cache.stored(&store, "resources/config.json").unwrap().as_bytes(),
        b"{\"port\": 8080}"
    );
}

/// Two stores in one process hold a file of the same path with different texts, on disk and in
/// memory: each store's views are its own text, through one cache and through the process-wide
/// one, while both change.
#[test]
fn stores_never_see_each_others_renders_of_one_path() {
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let pairs = [
        (disk_store(dir_a.path()), disk_store(dir_b.path())),
        (Store::open_in_memory().unwrap(), Store::open_in_memory().unwrap()),
    ];
    let cache = RenderCache::new(1 << 20);
    let p = "src/app/core.clj";
    for (a, b) in &pairs {
        for round in 0..2 {
            let (text_a, text_b) = (
                CORE.replace("greet", &format!("a{round}")),
                CORE.replace("greet", &format!("b{round}")),
            );
            write(a, p, &text_a);
            write(b, p, &text_b);
            for _ in 0..2 {
                assert_eq!(text(&cache, a, p), text_a);
                assert_eq!(text(&cache, b, p), text_b);
                assert_eq!(views::stored_text(a, p).unwrap(), text_a);
                assert_eq!(views::stored_text(b, p).unwrap(), text_b);
                assert_eq!(views::as_stored(a, "app.core").unwrap(), text_a);
                assert_eq!(views::as_stored(b, "app.core").unwrap(), text_b);
            }
        }
    }
}

fn disk_store(dir: &std::path::Path) -> Store {
    Store::open(&dir.join(formdb_engine::store::STORE_DIR)).unwrap()
}

#[test]
fn the_cache_stays_within_its_bound() {
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for i in 0..40 {
        let path = format!("src/app/n{i}.clj");
        let mut text = format!("(ns app.n{i} (:require [clojure.string :as string]))\n");
        for j in 0..40 {
            text.push_str(&format!(
                "(defn f{j} [x]\n  (string/join \",\"\n               [x {j}]))\n"
            ));
        }
        let p = dir.path().join(&path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, &text).unwrap();
        files.push((path, text));
    }
    let (store, _tmp, _) = disk_store_of(dir.path(), "test");
    let cap = 32 << 10;
    let cache = RenderCache::new(cap);
    let m = map(&[("clojure.string", "s")]);
    for _ in 0..2 {
        for (path, text) in &files {
            assert_eq!(&self::text(&cache, &store, path), text);
            let v = cache.user_view(&store, path, &m).unwrap().unwrap();
            assert_eq!(*v, views::user_view_text(text, &m));
            assert!(cache.stats().bytes <= cap, "{:?}", cache.stats());
        }
    }
    assert!(cache.stats().entries > 0);
    cache.clear();
    assert_eq!((cache.stats().entries, cache.stats().bytes), (0, 0));
}

#[test]
fn concurrent_readers_see_only_stored_texts() {
    let src = tree();
    let (store, _tmp, sdir) = disk_store_of(src.path(), "test");
    let store = Arc::new(store);
    let cache = Arc::new(RenderCache::new(1 << 20));
    let p = "src/app/core.clj";
    let versions: Vec<String> = (0..=12)
        .map(|i| if i == 0 { CORE.to_string() } else { format!("{CORE}\n(def v {i})\n") })
        .collect();
    let versions = Arc::new(versions);
    let done = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..3)
        .map(|r| {
            let (store, cache, versions, done) =
                (store.clone(), cache.clone(), versions.clone(), done.clone());
            std::thread::spawn(move || {
                let mut last = 0;
                let mut reads = 0;
                while !done.load(Ordering::SeqCst) || reads == 0 {
                    let t = if r == 0 {
                        views::as_stored(&store, "app.core")
                    } else {
                        cache.stored(&store, p).map(|c| c.as_text().unwrap().to_string())
                    };
                    // Readers wait for another handle's commit; they never fail on it.
                    let t = t.unwrap_or_else(|e| panic!("a read failed during writes: {e}"));
                    let i = versions.iter().position(|v| *v == t).expect("a stored version");
                    assert!(i >= last, "went back from version {last} to {i}");
                    last = i;
                    reads += 1;
                }
            })
        })
        .collect();
    // Writes from this handle and from a second one (as another process would), alternately.
    let other = Store::open(&sdir).unwrap();
    for (i, v) in versions.iter().enumerate().skip(1) {
        write(if i % 2 == 0 { &store } else { &other }, p, v);
        assert_eq!(text(&cache, &store, p), *v);
    }
    done.store(true, Ordering::SeqCst);
    for r in readers {
        r.join().unwrap();
    }
    let last = versions.last().unwrap();
    assert_eq!(&text(&cache, &store, p), last);
    assert_eq!(&views::as_stored(&store, "app.core").unwrap(), last);
}

#[test]
fn corpus_cached_views_are_the_renders_and_follow_writes() {
    let Some(dir) = formdb_testkit::corpus() else { return };
    let (store, _tmp, sdir) = disk_store_of(&dir, "test");
    let cache = RenderCache::new(64 << 20);
    let m = map(&[("clojure.string", "s"), ("clojure.java.io", "jio"), ("clojure.set", "st")]);
    let paths = query::paths(&store).unwrap();
    for round in 0..2 {
        for path in &paths {
            let bytes = query::file_bytes(&store, path).unwrap().unwrap();
            assert_eq!(cache.stored(&store, path).unwrap().as_bytes(), bytes, "{path}");
            if formdb_engine::syntax::Lang::from_path(path).is_none() {
                continue;
            }
            let Ok(text) = String::from_utf8(bytes) else { continue };
            let v = cache.user_view(&store, path, &m).unwrap().unwrap();
            assert_eq!(*v, views::user_view_text(&text, &m), "{path}");
            assert_eq!(&*cache.oneline(&store, path).unwrap().unwrap(), views::oneline_text(&text));
        }
        if round == 0 {
            // Everything is cached now: the second round is served without rendering.
            let s = cache.stats();
            assert!(s.entries > 0 && s.misses > 0, "{s:?}");
        }
    }
    // A write to one corpus namespace through another handle.
    let ns_rows = store.query("?[ns, file] := *ns_decl{ns, file}", Default::default()).unwrap();
    let r = &ns_rows.rows[ns_rows.rows.len() / 2];
    let (ns, file) = (r[0].get_str().unwrap().to_string(), r[1].get_str().unwrap().to_string());
    let old = views::as_stored(&store, &ns).unwrap();
    let new = format!("{old}\n(defn added-by-test [] :ok)\n");
    write(&Store::open(&sdir).unwrap(), &file, &new);
    assert_eq!(views::as_stored(&store, &ns).unwrap(), new);
    assert_eq!(text(&cache, &store, &file), new);
    assert!(cache
        .user_view(&store, &file, &m)
        .unwrap()
        .unwrap()
        .text
        .ends_with("(defn added-by-test [] :ok)\n"));
}

#[test]
fn a_read_ahead_keeps_the_stored_texts_and_later_reads_touch_no_store() {
    let src = tree();
    let (store, _tmp, sdir) = disk_store_of(src.path(), "test");
    let cache = RenderCache::new(1 << 20);
    let first = "src/app/broken.clj";
    let after =
        ["src/app/core.clj", "src/app/util.clj", "resources/config.json", "src/no/such.clj"];
    // The blob and the missing path are not Clojure files stored: left to `stored`.
    assert_eq!(cache.prefetch(&store, first, &after).unwrap(), 3);
    assert_eq!(cache.stats().prefetched, 3);
    assert!(cache.holds(&store, "src/app/util.clj"));
    assert!(!cache.holds(&store, "resources/config.json"));
    let before = cache.stats();
    for path in [first, "src/app/core.clj", "src/app/util.clj"] {
        let bytes = query::file_bytes(&store, path).unwrap().unwrap();
        assert_eq!(cache.stored(&store, path).unwrap().as_bytes(), bytes, "{path}");
    }
    assert_eq!(delta(before, cache.stats()), (3, 0, 0), "each served as read ahead");
    // What is kept is not read again, nor read ahead when its first path is kept.
    assert_eq!(cache.prefetch(&store, first, &after).unwrap(), 0);
    assert_eq!(cache.prefetch(&store, "src/app/core.clj", &[]).unwrap(), 0);

    // A write elsewhere after the read ahead: the next read sees it.
    let other = Store::open(&sdir).unwrap();
    let next = format!("{UTIL}(def later 1)\n");
    write(&other, "src/app/util.clj", &next);
    assert_eq!(text(&cache, &store, "src/app/util.clj"), next);
    assert_eq!(text(&cache, &store, "src/app/core.clj"), CORE, "revalidated, unchanged");
}
