//! The working directory sync against real everything: a git repository in a temporary
//! directory, a persistent store in its `.formdb/`, the real watcher and real `git`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use formdb_edit::ops::{self, Op};
use formdb_edit::save::{self, Writer};
use formdb_engine::import::{import_dir, Quiet};
use formdb_engine::query;
use formdb_engine::store::{params, str_at, Params, Store, STORE_DIR};
use formdb_sync::DirSync;

/// Generous: the sync's own target is well under a second.
const DEADLINE: Duration = Duration::from_secs(10);

struct Repo {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    store: Arc<Store>,
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

const CART: &str = "src/shop/cart.clj";
const MONEY: &str = "src/shop/money.clj";
const CART_TEST: &str = "test/shop/cart_test.clj";

/// The shop example (and two corpus files when the corpus is there) under git, with a branch
/// `other` that changes `cart.clj` (one form), adds a form to `money.clj` and deletes
/// `cart_test.clj`; `main` checked out and imported into `.formdb/`.
fn repo() -> Repo {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("work");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    copy_tree(&root.join("examples/shop"), &dir);
    let corpus = std::env::var_os("FORMDB_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/corpus"));
    for f in ["clout/clout/core.clj", "crypto-equality/crypto/equality.clj"] {
        let src = corpus.join(f);
        if src.is_file() {
            let to = dir.join("corpus").join(f);
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::copy(&src, &to).unwrap();
        }
    }
    git(&dir, &["init", "-q", "-b", "main"]);
    std::fs::write(dir.join(".git/info/exclude"), ".formdb/\n").unwrap();
    git(&dir, &["add", "-A"]);
    git(&dir, &["commit", "-q", "-m", "shop"]);
    git(&dir, &["checkout", "-q", "-b", "other"]);
    let cart = read(&dir, CART)
        .replace("(reduce + (map line-total items))", "(transduce (map line-total) + items)");
    std::fs::write(dir.join(CART), cart).unwrap();
    let mut money = read(&dir, MONEY);
    money.push_str("\n(defn dollars [c] (quot c 100))\n");
    std::fs::write(dir.join(MONEY), money).unwrap();
    std::fs::remove_file(dir.join(CART_TEST)).unwrap();
    git(&dir, &["commit", "-q", "-a", "-m", "other"]);
    git(&dir, &["checkout", "-q", "main"]);
    let store = Arc::new(Store::open(&dir.join(STORE_DIR)).unwrap());
    import_dir(&store, &dir, "import", &Quiet).unwrap();
    Repo { _tmp: tmp, dir, store }
}

fn read(dir: &Path, rel: &str) -> String {
    std::fs::read_to_string(dir.join(rel)).unwrap()
}

fn stored(store: &Store, path: &str) -> Option<String> {
    query::file_bytes(store, path).unwrap().map(|b| String::from_utf8(b).unwrap())
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < DEADLINE, "not within {DEADLINE:?}: {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Version rows: (id, v, op, file, at).
fn versions(store: &Store) -> Vec<(String, i64, String, String, String)> {
    let rows = store
        .query("?[id, v, op, file, at] := *version{id, v, op, file, at}", Params::new())
        .unwrap();
    rows.rows
        .iter()
        .map(|r| (str_at(r, 0), r[1].get_int().unwrap(), str_at(r, 2), str_at(r, 3), str_at(r, 4)))
        .collect()
}

fn id_of(store: &Store, fqn: &str) -> String {
    let rows =
        store.query("?[id] := *form{id, fqn}, fqn = $fqn", params([("fqn", fqn.into())])).unwrap();
    str_at(&rows.rows[0], 0)
}

fn forms_in(store: &Store, file: &str) -> usize {
    store
        .query("?[id] := *form{id, file}, file = $file", params([("file", file.into())]))
        .unwrap()
        .rows
        .len()
}

fn generation(store: &Store) -> u64 {
    query::generation(store).unwrap()
}

/// Every synced file on disk equals the store's as-stored text, and the other way round.
fn assert_in_step(r: &Repo) {
    let mut disk: Vec<String> =
        formdb_engine::import::walk(&r.dir).unwrap().into_iter().map(|(rel, _)| rel).collect();
    disk.sort();
    let mut stored_paths = query::paths(&r.store).unwrap();
    stored_paths.sort();
    assert_eq!(disk, stored_paths, "the same files on both sides");
    for p in &disk {
        assert_eq!(
            std::fs::read(r.dir.join(p)).unwrap(),
            query::file_bytes(&r.store, p).unwrap().unwrap(),
            "{p} differs"
        );
    }
}

fn writer(user: &str) -> Writer {
    Writer { user: user.to_string(), aliases: Default::default() }
}

fn replace(store: &Store, fqn: &str, source: &str) {
    let id = id_of(store, fqn);
    ops::apply(
        store,
        &writer("agent"),
        &[Op::Replace { id, source: source.to_string(), expected_hash: None }],
        ops::Options { repair: false, keep_layout: true },
    )
    .unwrap();
}

#[test]
fn a_plain_write_in_dir_reaches_the_store_with_one_version_row() {
    let r = repo();
    let sync = DirSync::start(r.store.clone(), &r.dir, "sync").unwrap();
    assert_eq!(sync.stats().change_sets, 0, "a freshly imported tree is in step");
    assert_in_step(&r);
    let before = versions(&r.store);
    let g0 = generation(&r.store);

    let text = read(&r.dir, MONEY).replace("(rem c 100)", "(mod c 100)");
    std::fs::write(r.dir.join(MONEY), &text).unwrap();
    wait_for("the store takes the write", || stored(&r.store, MONEY).as_deref() == Some(&text));
    assert!(sync.wait_idle(DEADLINE));

    let after = versions(&r.store);
    let new: Vec<_> = after.iter().filter(|v| !before.contains(v)).collect();
    assert_eq!(new.len(), 1, "only the edited form gets a version: {new:?}");
    assert_eq!(new[0].0, id_of(&r.store, "shop.money/format-cents"));
    assert_eq!((new[0].1, new[0].2.as_str()), (2, "sync"));
    assert_eq!(generation(&r.store), g0 + 1, "one change set, no echo");
    let stats = sync.stats();
    assert_eq!(
        (stats.change_sets, stats.files_imported, stats.files_written),
        (1, 1, 0),
        "{stats:?}"
    );
    assert_eq!(read(&r.dir, MONEY), text, "the file is left as written");

    // A write of the same bytes (an editor saving without change) is no change at all.
    std::fs::write(r.dir.join(MONEY), &text).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    assert!(sync.wait_idle(DEADLINE));
    assert_eq!(generation(&r.store), g0 + 1);
    assert!(sync.stats().echoes_skipped >= 1, "{:?}", sync.stats());
    assert_in_step(&r);
}

#[test]
fn git_checkout_is_one_change_set_with_only_changed_forms_versioned() {
    let r = repo();
    let sync = DirSync::start(r.store.clone(), &r.dir, "sync").unwrap();
    let before = versions(&r.store);
    let g0 = generation(&r.store);
    let test_forms = forms_in(&r.store, CART_TEST);
    assert!(test_forms >= 2);
    let subtotal = id_of(&r.store, "shop.cart/subtotal");

    git(&r.dir, &["checkout", "-q", "other"]);
    wait_for("the checkout reaches the store", || {
        stored(&r.store, CART_TEST).is_none()
            && stored(&r.store, CART).as_deref() == Some(&read(&r.dir, CART))
            && stored(&r.store, MONEY).as_deref() == Some(&read(&r.dir, MONEY))
    });
    assert!(sync.wait_idle(DEADLINE));

    let new: Vec<_> = versions(&r.store).into_iter().filter(|v| !before.contains(v)).collect();
    for v in &new {
        // Deleted forms are recorded as deletes, the rest under the sync's op.
        let op = if v.3 == CART_TEST { "delete" } else { "sync" };
        assert_eq!(v.2, op, "{v:?}");
    }
    let edited: Vec<_> = new.iter().filter(|v| v.3 == CART).collect();
    assert_eq!(edited.len(), 1, "one form of cart.clj changed: {edited:?}");
    assert_eq!(edited[0].0, subtotal, "and it kept its id");
    let added: Vec<_> = new.iter().filter(|v| v.3 == MONEY).collect();
    assert_eq!(added.len(), 1, "one form added to money.clj: {added:?}");
    assert_eq!(id_of(&r.store, "shop.money/dollars"), added[0].0);
    assert_eq!(new.iter().filter(|v| v.3 == CART_TEST).count(), test_forms, "deleted forms");
    assert_eq!(new.len(), 2 + test_forms, "nothing else: {new:?}");
    let times: std::collections::BTreeSet<&str> = new.iter().map(|v| v.4.as_str()).collect();
    assert_eq!(times.len(), 1, "one transaction");
    assert_eq!(generation(&r.store), g0 + 1, "one change set");
    assert_eq!(sync.stats().files_deleted_in_store, 1);
    assert_in_step(&r);

    // And back: the deleted file returns, the forms go back.
    git(&r.dir, &["checkout", "-q", "main"]);
    wait_for("back on main", || {
        stored(&r.store, CART_TEST).as_deref() == Some(&read(&r.dir, CART_TEST))
    });
    assert!(sync.wait_idle(DEADLINE));
    assert!(stored(&r.store, MONEY).is_some_and(|t| !t.contains("dollars")));
    assert_eq!(generation(&r.store), g0 + 2);
    assert_in_step(&r);
}

#[test]
fn a_store_edit_is_written_to_dir_and_git_diff_shows_exactly_it() {
    let r = repo();
    let sync = DirSync::start(r.store.clone(), &r.dir, "sync").unwrap();
    let old = read(&r.dir, MONEY);
    let before_versions = versions(&r.store).len();
    replace(
        &r.store,
        "shop.money/cents",
        "(defn cents\n  \"Whole units and cents to cents.\"\n  [units c]\n  (+ c (* units 100)))",
    );
    let g_edit = generation(&r.store);
    let want = stored(&r.store, MONEY).unwrap();
    assert_ne!(want, old);
    wait_for("DIR gets the store's text", || read(&r.dir, MONEY) == want);
    assert!(sync.wait_idle(DEADLINE));

    assert_eq!(git(&r.dir, &["status", "--porcelain"]), format!(" M {MONEY}\n"));
    let diff = git(&r.dir, &["diff", "-U0", "--", MONEY]);
    let hunks: Vec<&str> = diff.lines().filter(|l| l.starts_with("@@")).collect();
    assert_eq!(hunks.len(), 1, "{diff}");
    let minus: Vec<&str> =
        diff.lines().filter(|l| l.starts_with('-') && !l.starts_with("---")).collect();
    let plus: Vec<&str> =
        diff.lines().filter(|l| l.starts_with('+') && !l.starts_with("+++")).collect();
    assert_eq!(minus, ["-  (+ (* 100 units) c))"], "{diff}");
    assert_eq!(plus, ["+  (+ c (* units 100)))"], "{diff}");

    // No echo: our write did not come back as a change.
    assert_eq!(generation(&r.store), g_edit, "no change set after the edit");
    assert_eq!(versions(&r.store).len(), before_versions + 1);
    let stats = sync.stats();
    assert_eq!((stats.change_sets, stats.files_written), (0, 1), "{stats:?}");
    std::thread::sleep(Duration::from_millis(200));
    assert!(sync.wait_idle(DEADLINE));
    assert_eq!(generation(&r.store), g_edit);

    // A file created and one deleted in the store appear and vanish in DIR.
    save::save(
        &r.store,
        &writer("agent"),
        "src/shop/tax.clj",
        b"(ns shop.tax)\n\n(def rate 8)\n",
        None,
    )
    .unwrap();
    save::delete(&r.store, &writer("agent"), CART_TEST).unwrap();
    wait_for("new file written, deleted one removed", || {
        std::fs::read(r.dir.join("src/shop/tax.clj")).ok().as_deref()
            == Some(b"(ns shop.tax)\n\n(def rate 8)\n".as_slice())
            && !r.dir.join(CART_TEST).exists()
    });
    assert!(sync.wait_idle(DEADLINE));
    assert!(!r.dir.join("test").exists(), "emptied directories go too");
    assert_in_step(&r);
    let status = git(&r.dir, &["status", "--porcelain"]);
    assert_eq!(status, format!(" M {MONEY}\n D {CART_TEST}\n?? src/shop/tax.clj\n"));
    assert_eq!(sync.stats().change_sets, 0, "none of our writes echoed");
    let leftovers: Vec<_> =
        walk_all(&r.dir).into_iter().filter(|p| p.contains(".formdb-tmp-")).collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

fn walk_all(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            if e.file_type().unwrap().is_dir() {
                if e.file_name() != ".git" && e.file_name() != ".formdb" {
                    stack.push(e.path());
                }
            } else {
                out.push(e.path().to_string_lossy().into_owned());
            }
        }
    }
    out
}

const NEW_CENTS: &str =
    "(defn cents\n  \"Whole units and cents to cents.\"\n  [units c]\n  (+ c (* units 100)))";

#[test]
fn forms_changed_on_different_sides_of_one_file_both_survive() {
    let r = repo();
    let sync = DirSync::start(r.store.clone(), &r.dir, "sync").unwrap();
    sync.stop();
    // Both sides change money.clj while the sync is not looking: the store `cents`, the disk
    // `format-cents`.
    replace(&r.store, "shop.money/cents", NEW_CENTS);
    let disk_text = read(&r.dir, MONEY).replace("(rem c 100)", "(mod c 100)");
    std::fs::write(r.dir.join(MONEY), &disk_text).unwrap();
    // Another file changed only in the store, one only on disk.
    replace(
        &r.store,
        "shop.cart/subtotal",
        "(defn subtotal [items]\n  (apply + (map line-total items)))",
    );
    let cart_store = stored(&r.store, CART).unwrap();
    let deps = read(&r.dir, "deps.edn").replace("1.11.1", "1.12.0");
    std::fs::write(r.dir.join("deps.edn"), &deps).unwrap();

    let sync = DirSync::start(r.store.clone(), &r.dir, "sync").unwrap();
    let merged = stored(&r.store, MONEY).unwrap();
    assert!(merged.contains(NEW_CENTS), "the store's form survives: {merged}");
    assert!(merged.contains("(mod c 100)"), "the disk's form survives: {merged}");
    assert_eq!(merged, disk_text.replace("(+ (* 100 units) c)", "(+ c (* units 100))"));
    assert_eq!(read(&r.dir, MONEY), merged, "the merge is written to DIR");
    assert_eq!(save::drafts(&r.store).unwrap(), vec![], "no conflict, no draft");
    assert_eq!(read(&r.dir, CART), cart_store, "a store-only change is written");
    assert_eq!(
        stored(&r.store, "deps.edn").as_deref(),
        Some(deps.as_str()),
        "a disk-only change is imported"
    );
    let stats = sync.stats();
    assert_eq!(
        (stats.conflicts, stats.merges, stats.files_imported, stats.files_written),
        (0, 1, 2, 2),
        "{stats:?}"
    );
    assert_in_step(&r);
}

#[test]
fn a_form_changed_on_both_sides_keeps_the_disk_text_and_the_store_text_as_a_draft() {
    let r = repo();
    let sync = DirSync::start(r.store.clone(), &r.dir, "sync").unwrap();
    sync.stop();
    let cents_id = id_of(&r.store, "shop.money/cents");
    replace(&r.store, "shop.money/cents", NEW_CENTS);
    let store_text = stored(&r.store, MONEY).unwrap();
    let disk_text = read(&r.dir, MONEY)
        .replace("(+ (* 100 units) c)", "(+ c (* 100 units))")
        .replace("(rem c 100)", "(mod c 100)");
    std::fs::write(r.dir.join(MONEY), &disk_text).unwrap();

    let sync = DirSync::start(r.store.clone(), &r.dir, "sync").unwrap();
    assert_eq!(stored(&r.store, MONEY).as_deref(), Some(disk_text.as_str()), "the disk wins");
    assert_eq!(read(&r.dir, MONEY), disk_text, "DIR is not touched");
    let drafts = save::drafts(&r.store).unwrap();
    assert_eq!(drafts.len(), 1, "{drafts:?}");
    assert_eq!(drafts[0].path, MONEY);
    assert_eq!(String::from_utf8(drafts[0].bytes.clone()).unwrap(), store_text, "nothing lost");
    assert!(drafts[0].error.starts_with("conflict"), "{}", drafts[0].error);
    assert!(drafts[0].error.contains(&cents_id), "names the form: {}", drafts[0].error);
    let stats = sync.stats();
    assert_eq!(stats.conflicts, 1, "{stats:?}");
    assert_eq!(stats.conflict_list[0].path, MONEY);
    assert_eq!(stats.conflict_list[0].forms, vec![format!("{cents_id} `cents`")]);
    // Drafts are not written to DIR; the as-stored text is.
    assert_in_step(&r);
}

#[test]
fn a_store_edit_and_a_disk_edit_of_another_form_right_after_both_survive() {
    let r = repo();
    let sync = DirSync::start(r.store.clone(), &r.dir, "sync").unwrap();
    for i in 0..12 {
        let cents = format!(
            "(defn cents\n  \"Whole units and cents to cents.\"\n  [units c]\n  (+ c (* units 100) {i}))"
        );
        replace(&r.store, "shop.money/cents", &cents);
        // `sed -i` of another form of the same file, right after the acknowledged edit.
        let now = std::fs::read_to_string(r.dir.join(MONEY)).unwrap();
        let disk: String = now
            .lines()
            .map(|l| match l.trim_start().starts_with("(format ") {
                true => format!("  (format \"%d.%02d\" (quot c 100) (rem c 100) {i}))\n"),
                false => format!("{l}\n"),
            })
            .collect();
        let tmp = r.dir.join("src/shop/sedtmp");
        std::fs::write(&tmp, &disk).unwrap();
        std::fs::rename(&tmp, r.dir.join(MONEY)).unwrap();
        // The kernel may deliver the rename's events after the sync next looks: wait for
        // the disk's edit to arrive (or lose the store's, which fails below).
        let fmt_edit = format!("(rem c 100) {i}))");
        wait_for("the disk edit reaches the store", || {
            stored(&r.store, MONEY).unwrap().contains(&fmt_edit)
        });
        assert!(sync.wait_idle(DEADLINE), "round {i}");
        let s = stored(&r.store, MONEY).unwrap();
        assert!(s.contains(&cents), "round {i}: the store edit survives: {s}");
        assert_eq!(read(&r.dir, MONEY), s, "round {i}");
    }
    assert_eq!(save::drafts(&r.store).unwrap(), vec![]);
    assert_eq!(sync.stop().conflicts, 0);
}

#[test]
fn write_back_never_follows_a_symbolic_link_out_of_the_directory() {
    let r = repo();
    let outside = r._tmp.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    // A directory that was real when imported and is a link out of DIR now.
    std::fs::create_dir_all(r.dir.join("src/real")).unwrap();
    std::fs::write(r.dir.join("src/real/y.clj"), "(ns real.y)\n").unwrap();
    let sync = DirSync::start(r.store.clone(), &r.dir, "sync").unwrap();
    assert!(stored(&r.store, "src/real/y.clj").is_some());
    sync.stop();
    std::fs::remove_dir_all(r.dir.join("src/real")).unwrap();
    std::fs::write(outside.join("y.clj"), "(ns real.y)\n").unwrap();
    std::os::unix::fs::symlink(&outside, r.dir.join("src/real")).unwrap();
    std::os::unix::fs::symlink(&outside, r.dir.join("src/link")).unwrap();

    let sync = DirSync::start(r.store.clone(), &r.dir, "sync").unwrap();
    // The store deletes the file and creates one under the other link.
    let (mut changes, _) = formdb_engine::import::file_changes(
        &r.store,
        vec![formdb_engine::import::Incoming {
            path: "src/link/x.clj".into(),
            bytes: b"(ns link.x)\n".to_vec(),
        }],
        &Quiet,
    )
    .unwrap();
    changes.push(formdb_engine::change::Change::DeleteFile { path: "src/real/y.clj".into() });
    let set = formdb_engine::change::ChangeSet { author: "t".into(), op: "t".into(), changes };
    formdb_engine::change::apply(&r.store, &set).unwrap();
    assert!(sync.wait_idle(DEADLINE));
    let stats = sync.stop();
    assert!(!outside.join("x.clj").exists(), "nothing is created outside DIR");
    assert_eq!(read(&outside, "y.clj"), "(ns real.y)\n", "nothing is deleted outside DIR");
    assert!(
        stats.last_error.as_deref().is_some_and(|e| e.contains("symbolic link")),
        "the refusal is reported: {stats:?}"
    );
}

#[test]
fn a_restart_after_a_crash_resyncs_both_ways() {
    let r = repo();
    // A temporary file of a write that a crash interrupted.
    let temp = r.dir.join("src/shop/.money.clj.formdb-tmp-99999-0");
    std::fs::write(&temp, "half a file").unwrap();
    let sync = DirSync::start(r.store.clone(), &r.dir, "sync").unwrap();
    assert!(!temp.exists(), "removed at start");
    assert_eq!(sync.stats().temps_removed, 1);
    assert!(stored(&r.store, "src/shop/.money.clj.formdb-tmp-99999-0").is_none());
    // Work in flight when the process dies: a write just made, not yet handled.
    std::fs::write(r.dir.join("README.md"), "# shop\n\nchanged just before the crash\n").unwrap();
    drop(sync); // no clean stop: pending events are abandoned

    // While it is down: DIR changes (edit, delete, new file) ...
    let money = read(&r.dir, MONEY).replace("(rem c 100)", "(mod c 100)");
    std::fs::write(r.dir.join(MONEY), &money).unwrap();
    std::fs::remove_file(r.dir.join(CART_TEST)).unwrap();
    std::fs::create_dir_all(r.dir.join("src/shop/new")).unwrap();
    std::fs::write(r.dir.join("src/shop/new/thing.clj"), "(ns shop.new.thing)\n(defn f [] 1)\n")
        .unwrap();
    // ... and so does the store (edit, delete, new file).
    replace(
        &r.store,
        "shop.cart/subtotal",
        "(defn subtotal [items]\n  (apply + (map line-total items)))",
    );
    let cart = stored(&r.store, CART).unwrap();
    save::delete(&r.store, &writer("agent"), "deps.edn").unwrap();
    save::save(
        &r.store,
        &writer("agent"),
        "src/shop/tax.clj",
        b"(ns shop.tax)\n(def rate 8)\n",
        None,
    )
    .unwrap();
    let g_before = generation(&r.store);

    let sync = DirSync::start(r.store.clone(), &r.dir, "sync").unwrap();
    assert!(stored(&r.store, "README.md").is_some_and(|t| t.contains("before the crash")));
    assert_eq!(stored(&r.store, MONEY).as_deref(), Some(money.as_str()));
    assert!(stored(&r.store, CART_TEST).is_none());
    assert!(stored(&r.store, "src/shop/new/thing.clj").is_some());
    assert_eq!(read(&r.dir, CART), cart);
    assert!(!r.dir.join("deps.edn").exists());
    assert_eq!(read(&r.dir, "src/shop/tax.clj"), "(ns shop.tax)\n(def rate 8)\n");
    assert!(save::drafts(&r.store).unwrap().is_empty(), "no conflicts");
    assert_eq!(generation(&r.store), g_before + 1, "the disk's side is one change set");
    let stats = sync.stats();
    assert_eq!(stats.conflicts, 0);
    assert_eq!((stats.files_imported, stats.files_deleted_in_store), (3, 1), "{stats:?}");
    assert_eq!((stats.files_written, stats.files_removed), (2, 1), "{stats:?}");
    assert_in_step(&r);

    // The new directory is watched from the start.
    std::fs::write(r.dir.join("src/shop/new/thing.clj"), "(ns shop.new.thing)\n(defn f [] 2)\n")
        .unwrap();
    wait_for("a write in the new directory", || {
        stored(&r.store, "src/shop/new/thing.clj").is_some_and(|t| t.contains("[] 2"))
    });
    drop(sync);

    // A second start finds nothing to do.
    let g = generation(&r.store);
    let sync = DirSync::start(r.store.clone(), &r.dir, "sync").unwrap();
    let stats = sync.stats();
    assert_eq!(
        (stats.change_sets, stats.files_written, stats.files_removed, stats.conflicts),
        (0, 0, 0, 0),
        "{stats:?}"
    );
    assert_eq!(generation(&r.store), g);
}

#[test]
fn ignored_and_scratch_files_are_not_synced_and_new_directories_are() {
    let r = repo();
    std::fs::write(r.dir.join(".gitignore"), "build/\n").unwrap();
    let sync = DirSync::start(r.store.clone(), &r.dir, "sync").unwrap();
    assert!(stored(&r.store, ".gitignore").is_some(), "the ignore file itself is a file");
    std::fs::create_dir_all(r.dir.join("build")).unwrap();
    std::fs::write(r.dir.join("build/out.clj"), "(ns out)\n").unwrap();
    std::fs::write(r.dir.join("src/shop/.money.clj.swp"), "vim").unwrap();
    std::fs::write(r.dir.join("src/shop/money.clj~"), "backup").unwrap();
    // A new directory tree made in one go, then a file in it.
    std::fs::create_dir_all(r.dir.join("src/shop/deep/er")).unwrap();
    std::fs::write(r.dir.join("src/shop/deep/er/x.clj"), "(ns shop.deep.er.x)\n").unwrap();
    wait_for("a file in a new directory", || stored(&r.store, "src/shop/deep/er/x.clj").is_some());
    assert!(sync.wait_idle(DEADLINE));
    for p in ["build/out.clj", "src/shop/.money.clj.swp", "src/shop/money.clj~"] {
        assert!(stored(&r.store, p).is_none(), "{p} must not be synced");
    }
    // Renaming a directory moves its files.
    std::fs::rename(r.dir.join("src/shop/deep"), r.dir.join("src/shop/deeper")).unwrap();
    wait_for("the renamed directory", || {
        stored(&r.store, "src/shop/deeper/er/x.clj").is_some()
            && stored(&r.store, "src/shop/deep/er/x.clj").is_none()
    });
    // And a file in the moved directory is still watched.
    std::fs::write(r.dir.join("src/shop/deeper/er/x.clj"), "(ns shop.deep.er.x)\n(def y 1)\n")
        .unwrap();
    wait_for("a write in the moved directory", || {
        stored(&r.store, "src/shop/deeper/er/x.clj").is_some_and(|t| t.contains("def y"))
    });
    assert_eq!(sync.stats().errors, 0, "{:?}", sync.stats().last_error);
}

#[test]
fn the_latency_probe_measures_both_ways() {
    let r = repo();
    let sync = DirSync::start(r.store.clone(), &r.dir, "sync").unwrap();
    let l = formdb_sync::probe::latency_probe(&r.store, &r.dir, MONEY, 3, DEADLINE).unwrap();
    assert_eq!((l.dir_to_store.len(), l.store_to_dir.len()), (3, 3));
    assert!(sync.wait_idle(DEADLINE));
    assert_eq!(git(&r.dir, &["status", "--porcelain"]), "", "the file is put back");
    assert_in_step(&r);
}
