//! The working directory sync against real everything: a git repository in a temporary
//! directory, a persistent store in its `.formdb/`, the real watcher and real `git`.

use std::collections::{BTreeMap, HashMap, HashSet};
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
    formdb_testkit::copy_shop(&dir);
    // Two corpus files too, when there is a corpus.
    let corpus = formdb_testkit::corpus();
    for f in ["clout/clout/core.clj", "crypto-equality/crypto/equality.clj"] {
        let Some(src) = corpus.as_ref().map(|c| c.join(f)).filter(|s| s.is_file()) else {
            continue;
        };
        let to = dir.join("corpus").join(f);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(&src, &to).unwrap();
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

/// Write `text` over `rel` in `dir` as `sed -i` does: a temporary file beside it renamed over
/// it.
fn sed_write(dir: &Path, rel: &str, text: &str) {
    let tmp = dir.join(rel).with_file_name(".sed.tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, dir.join(rel)).unwrap();
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
    Writer::new(user, Default::default())
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

/// A writer that truncates a file and writes it a while later (`cat > f` from a slow pipe, an
/// editor's in-place save on a loaded machine): the sync reads the file once its writer closed
/// it, not the empty file in between, so the forms keep their ids and only the edited one gets
/// a version; an agent's edit of another form meanwhile is kept, with no conflict.
#[test]
fn a_file_written_in_place_slowly_is_read_once_its_writer_closes_it() {
    use std::io::Write;
    let r = repo();
    let sync = DirSync::start(r.store.clone(), &r.dir, "sync").unwrap();
    let before = versions(&r.store);
    let ids = (id_of(&r.store, "shop.money/cents"), id_of(&r.store, "shop.money/format-cents"));
    let text = read(&r.dir, MONEY).replace("(rem c 100)", "(mod c 100)");
    let mut f = std::fs::File::create(r.dir.join(MONEY)).unwrap();
    // Well past the sync's debounce, before the text is written.
    std::thread::sleep(Duration::from_millis(150));
    replace(&r.store, "shop.money/cents", NEW_CENTS);
    f.write_all(text.as_bytes()).unwrap();
    drop(f);
    wait_for("the store takes the write", || {
        stored(&r.store, MONEY).is_some_and(|t| t.contains("(mod c 100)"))
    });
    assert!(sync.wait_idle(DEADLINE));
    let merged = stored(&r.store, MONEY).unwrap();
    assert!(merged.contains(NEW_CENTS), "the agent's edit is kept: {merged}");
    assert_eq!(
        (id_of(&r.store, "shop.money/cents"), id_of(&r.store, "shop.money/format-cents")),
        ids,
        "the forms keep their ids"
    );
    let new: Vec<_> = versions(&r.store).into_iter().filter(|v| !before.contains(v)).collect();
    assert_eq!(new.len(), 2, "a version for each edited form, nothing deleted: {new:?}");
    assert_eq!(sync.stats().conflicts, 0, "{:?}", sync.stats());
    assert_eq!(save::drafts(&r.store).unwrap(), vec![]);
    assert_in_step(&r);
}

/// A directory removed and made anew at once (a checkout, a script, the sync's own write-back
/// pruning a directory it emptied and then writing into it again) is another directory: it
/// is watched again, so later edits in it reach the store.
#[test]
fn a_directory_removed_and_made_anew_is_watched_again() {
    let r = repo();
    let sync = DirSync::start(r.store.clone(), &r.dir, "sync").unwrap();
    let dir = r.dir.join("src/anew");
    let (file, rel) = (dir.join("a.clj"), "src/anew/a.clj");
    let text = |v: u32| format!("(ns anew.a)\n\n(def x {v})\n");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(&file, text(1)).unwrap();
    wait_for("the new file imported", || stored(&r.store, rel) == Some(text(1)));
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(&file, text(2)).unwrap();
    wait_for("the file in the new directory imported", || stored(&r.store, rel) == Some(text(2)));
    assert!(sync.wait_idle(DEADLINE));
    std::fs::write(&file, text(3)).unwrap();
    wait_for("an edit in the new directory imported", || stored(&r.store, rel) == Some(text(3)));
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

/// A file whose agreed text is kept in parts (over `sync_state::BASE_PART`): `n` defns.
fn big_file(n: usize) -> String {
    let mut t = String::from("(ns shop.big)\n");
    for i in 0..n {
        t.push_str(&format!(
            "\n(defn f{i}\n  \"Returns x plus {i}; a docstring long enough that the file takes \
             two parts of its merge base.\"\n  [x]\n  (+ x {i}))\n"
        ));
    }
    t
}

#[test]
fn forms_changed_on_different_sides_of_a_file_kept_in_parts_both_survive() {
    const BIG: &str = "src/shop/big.clj";
    let r = repo();
    let text = big_file(9_000);
    assert!(text.len() > formdb_engine::read::sync_state::BASE_PART, "{} bytes", text.len());
    std::fs::write(r.dir.join(BIG), &text).unwrap();
    // With the sync stopped, the store changes defn `f{store}` and the disk `f{disk}`; started
    // again, it merges them per form against the kept base, and runs on.
    let both_sides = |sync: DirSync, store: usize, disk: usize| {
        sync.stop();
        replace(
            &r.store,
            &format!("shop.big/f{store}"),
            &format!("(defn f{store} [x] (* x {store}))"),
        );
        let edited =
            read(&r.dir, BIG).replace(&format!("(+ x {disk}))"), &format!("(- x {disk}))"));
        std::fs::write(r.dir.join(BIG), &edited).unwrap();
        let sync = DirSync::start(r.store.clone(), &r.dir, "sync").unwrap();
        let merged = stored(&r.store, BIG).unwrap();
        assert!(merged.contains(&format!("(* x {store}))")), "the store's f{store} survives");
        assert!(merged.contains(&format!("(- x {disk}))")), "the disk's f{disk} survives");
        assert_eq!(save::drafts(&r.store).unwrap(), vec![], "merged per form: no conflict");
        assert_eq!(read(&r.dir, BIG), merged, "the merge is written to DIR");
        sync
    };
    // Taken in by the sync: its base is written with the change set that imports it.
    let sync = DirSync::start(r.store.clone(), &r.dir, "sync").unwrap();
    assert_eq!(stored(&r.store, BIG).as_deref(), Some(text.as_str()));
    let sync = both_sides(sync, 10, 8990);
    // A store edit written back while the sync runs: its base is written by the write-back.
    replace(&r.store, "shop.big/f20", "(defn f20 [x] (* x 20))");
    wait_for("the store edit is written back", || read(&r.dir, BIG).contains("(* x 20)"));
    assert!(sync.wait_idle(DEADLINE));
    let sync = both_sides(sync, 30, 8980);
    let merged = stored(&r.store, BIG).unwrap();
    for kept in ["(* x 10))", "(* x 20))", "(* x 30))", "(- x 8990))", "(- x 8980))"] {
        assert!(merged.contains(kept), "{kept} survives");
    }
    assert_eq!(sync.stop().conflicts, 0);
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
        sed_write(&r.dir, MONEY, &disk);
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
fn a_form_the_disk_added_and_then_cut_with_another_stays_cut() {
    let r = repo();
    let sync = DirSync::start(r.store.clone(), &r.dir, "sync").unwrap();
    // The store writes the file: from now on the disk's changes of it are merged against the
    // texts it held lately.
    let cents =
        "(defn cents\n  \"Whole units and cents to cents.\"\n  [units c]\n  (+ c (* units 100)))";
    replace(&r.store, "shop.money/cents", cents);
    wait_for("the store's edit written back", || read(&r.dir, MONEY).contains(cents));
    // The disk edits a form, then adds one: each text is merged and kept as one the disk held.
    let edited = read(&r.dir, MONEY).replace("(rem c 100)))", "(rem c 100) 1))");
    sed_write(&r.dir, MONEY, &edited);
    wait_for("the disk's edit stored", || stored(&r.store, MONEY).unwrap().contains("100) 1))"));
    sed_write(&r.dir, MONEY, &format!("{edited}\n(def added 1)\n"));
    wait_for("the disk's form stored", || stored(&r.store, MONEY).unwrap().contains("added"));
    // Then it cuts the form it added and another one, at once: it edited the text it held
    // last. Merged against the one before (one form apart, not two), the cut form was taken
    // for the store's addition and put back.
    let cut = edited.replace("(defn- rounding-mode [] :half-up)\n", "");
    sed_write(&r.dir, MONEY, &cut);
    wait_for("the disk's cut stored", || {
        !stored(&r.store, MONEY).unwrap().contains("rounding-mode")
    });
    assert!(sync.wait_idle(DEADLINE));
    let s = stored(&r.store, MONEY).unwrap();
    assert!(!s.contains("(def added 1)"), "the form the disk cut stays cut: {s}");
    assert_eq!(read(&r.dir, MONEY), s);
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

/// A standalone writer (`formdb mount`, `formdb mcp`) killed between a commit and its
/// write-back leaves DIR behind the store. The next writer catches DIR up as it starts, before
/// any commit of its own: a save of the same text commits nothing, so it would otherwise be
/// acknowledged while DIR still held the older text.
#[test]
fn the_next_writer_finishes_a_write_back_a_crash_left_undone() {
    let r = repo();
    formdb_sync::record_in_step(r.store.clone(), &r.dir, "import").unwrap();
    let before = read(&r.dir, CART);
    // Committed, and the process died before its write-back.
    replace(
        &r.store,
        "shop.cart/subtotal",
        "(defn subtotal [items]\n  (apply + (map line-total items)))",
    );
    let committed = stored(&r.store, CART).unwrap();
    assert_ne!(committed, before);
    assert_eq!(read(&r.dir, CART), before, "DIR is behind the store");

    let reports = formdb_sync::write_back_after_commits(&r.store, "mount", false);
    assert_eq!(read(&r.dir, CART), committed, "caught up before any commit of its own");
    let outcomes = reports.take();
    assert!(
        matches!(outcomes.as_slice(), [formdb_sync::WriteBack::Done { stats, .. }]
            if stats.files_written == 1 && stats.errors == 0),
        "{outcomes:?}"
    );
    assert_in_step(&r);

    // A second writer's start finds nothing to do and reports nothing.
    let reports = formdb_sync::write_back_after_commits(&r.store, "mcp", false);
    assert!(reports.take().is_empty());
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
    // The temporary file of `sed -i`, and a patch's backup: the mount's scratch names too.
    std::fs::write(r.dir.join("src/shop/sedAb12Cd"), "(ns shop.money)\n").unwrap();
    std::fs::write(r.dir.join("src/shop/money.clj.orig"), "(ns shop.money)\n").unwrap();
    // A new directory tree made in one go, then a file in it.
    std::fs::create_dir_all(r.dir.join("src/shop/deep/er")).unwrap();
    std::fs::write(r.dir.join("src/shop/deep/er/x.clj"), "(ns shop.deep.er.x)\n").unwrap();
    wait_for("a file in a new directory", || stored(&r.store, "src/shop/deep/er/x.clj").is_some());
    assert!(sync.wait_idle(DEADLINE));
    for p in [
        "build/out.clj",
        "src/shop/.money.clj.swp",
        "src/shop/money.clj~",
        "src/shop/sedAb12Cd",
        "src/shop/money.clj.orig",
    ] {
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

/// The `(def name value)` forms of `text`, by name.
fn defs(text: &str) -> BTreeMap<String, u64> {
    text.match_indices("(def ")
        .filter_map(|(at, _)| {
            let form = text[at + 5..].split(')').next()?;
            let (name, value) = form.split_once(' ')?;
            Some((name.to_string(), value.trim().parse().ok()?))
        })
        .collect()
}

/// Where `(def {name} …)` is in `text`: its start and end.
fn def_at(text: &str, name: &str) -> (usize, usize) {
    let at = text.find(&format!("(def {name} ")).unwrap_or_else(|| panic!("{name} in {text}"));
    (at, at + text[at..].find(')').unwrap() + 1)
}

/// One generated edit of a `(def name value)` form, made on one side.
#[derive(Clone, Copy, Debug)]
enum DefEdit {
    Set(u64),
    Add(u64),
    Delete,
}

/// `text` after `edit` of form `name`, as a program editing the file would make it.
fn edited_on_disk(text: &str, name: &str, edit: DefEdit) -> String {
    match edit {
        DefEdit::Set(v) => {
            let (at, end) = def_at(text, name);
            format!("{}(def {name} {v}){}", &text[..at], &text[end..])
        }
        DefEdit::Add(v) => format!("{}\n(def {name} {v})\n", text.trim_end()),
        DefEdit::Delete => {
            let (at, end) = def_at(text, name);
            let end = if text[end..].starts_with('\n') { end + 1 } else { end };
            format!("{}{}", &text[..at], &text[end..])
        }
    }
}

/// Generated edits on both sides at once, as an agent and an editor make them while `formdb
/// up` runs: forms of the store changed, added and deleted (acknowledged by `ops::apply`), and
/// the same done to the directory's files by a program that reads a file first (`sed -i`'s
/// rename, or a write in place), at random moments against the sync's batches. Within a burst
/// no form is edited on both sides. After each burst, once both sides are in step, each file
/// holds exactly the forms the edits left, each with the last value written to it on either
/// side: no acknowledged write is lost, reverted or brought back.
///
/// Where the sync cannot tell which text a writer read, within seconds of a store edit of the
/// file written back (the writer may have read the text from before it):
/// - a conflict is allowed, on a form the disk edited; it must keep the store's text of the
///   form in its draft (which the test then discards, as a user would);
/// - a form added within those seconds (on either side) that the disk then deleted may stay, as
///   the store last had it before the deletion: the disk's text is also that of a writer that
///   read the file before the addition.
#[test]
fn generated_edits_on_both_sides_keep_every_acknowledged_form() {
    const FILES: usize = 3;
    // The sync's window for a writer that read a file before its write-back, with a margin.
    const RECENT: Duration = Duration::from_secs(4);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("work");
    let path = |k: usize| format!("src/gen/f{k}.clj");
    std::fs::create_dir_all(dir.join("src/gen")).unwrap();
    let mut model: Vec<BTreeMap<String, u64>> = Vec::new();
    for k in 0..FILES {
        let forms: String = (0..4).map(|j| format!("\n(def a{j} 0)\n")).collect();
        std::fs::write(dir.join(path(k)), format!("(ns gen.f{k})\n{forms}")).unwrap();
        model.push((0..4).map(|j| (format!("a{j}"), 0)).collect());
    }
    git(&dir, &["init", "-q", "-b", "main"]);
    std::fs::write(dir.join(".git/info/exclude"), ".formdb/\n").unwrap();
    let store = Arc::new(Store::open(&dir.join(STORE_DIR)).unwrap());
    import_dir(&store, &dir, "import", &Quiet).unwrap();
    let sync = DirSync::start(store.clone(), &dir, "sync").unwrap();

    let mut gen = formdb_testkit::Seeded::from_env(7);
    // The store's last acknowledged edit of each form (its value, or none once deleted), and
    // when.
    let mut by_store: HashMap<(usize, String), (Option<u64>, Instant)> = HashMap::new();
    // When each form was added, on either side.
    let mut added: HashMap<(usize, String), Instant> = HashMap::new();
    let mut kept_added = 0;
    let (mut store_edits, mut disk_edits, mut refused, mut conflicts) = (0, 0, 0, 0);
    let rounds = formdb_testkit::random_rounds(40);
    for round in 0..rounds {
        // Which side edits each form in this burst (true: the disk).
        let mut side: HashMap<(usize, String), bool> = HashMap::new();
        // What the store may hold of a form when a conflict keeps its text: its value before
        // the burst, or one the disk wrote in it (imported before the conflict).
        let mut held: HashMap<(usize, String), Vec<Option<u64>>> = HashMap::new();
        let mut log = Vec::new();
        for op in 0..1 + gen.below(5) {
            let k = gen.below(FILES);
            let value = round * 100 + op as u64 + 1;
            let names: Vec<&String> = model[k].keys().collect();
            let (name, edit) = match gen.below(10) {
                0 | 1 => (format!("n{value}"), DefEdit::Add(value)),
                2 | 3 if names.len() > 1 => {
                    (names[gen.below(names.len())].clone(), DefEdit::Delete)
                }
                _ => (names[gen.below(names.len())].clone(), DefEdit::Set(value)),
            };
            let on_disk = *side.entry((k, name.clone())).or_insert(gen.below(2) == 0);
            held.entry((k, name.clone())).or_insert_with(|| vec![model[k].get(&name).copied()]);
            let done = if on_disk {
                let now = std::fs::read_to_string(dir.join(path(k))).unwrap();
                let text = edited_on_disk(&now, &name, edit);
                let how = if gen.below(2) == 0 {
                    sed_write(&dir, &path(k), &text);
                    "rename"
                } else {
                    std::fs::write(dir.join(path(k)), &text).unwrap();
                    "write"
                };
                disk_edits += 1;
                log.push(format!("disk {how} f{k} {name} {edit:?}"));
                true
            } else {
                let ns = format!("gen.f{k}");
                let op = match edit {
                    DefEdit::Set(v) => Op::Replace {
                        id: id_of(&store, &format!("{ns}/{name}")),
                        source: format!("(def {name} {v})"),
                        expected_hash: None,
                    },
                    DefEdit::Add(v) => Op::Insert {
                        ns,
                        source: format!("(def {name} {v})"),
                        before: None,
                        after: None,
                    },
                    DefEdit::Delete => Op::Delete { id: id_of(&store, &format!("{ns}/{name}")) },
                };
                let opts = ops::Options { repair: false, keep_layout: true };
                let result = ops::apply(&store, &writer("agent"), &[op], opts);
                log.push(format!("store f{k} {name} {edit:?}: {:?}", result.as_ref().err()));
                if result.is_ok() {
                    let kept = match edit {
                        DefEdit::Set(v) | DefEdit::Add(v) => Some(v),
                        DefEdit::Delete => None,
                    };
                    by_store.insert((k, name.clone()), (kept, Instant::now()));
                    store_edits += 1;
                } else {
                    refused += 1;
                }
                result.is_ok()
            };
            if let (true, DefEdit::Add(_)) = (done, edit) {
                added.insert((k, name.clone()), Instant::now());
            }
            if done && on_disk {
                let now = match edit {
                    DefEdit::Set(v) | DefEdit::Add(v) => Some(v),
                    DefEdit::Delete => None,
                };
                held.entry((k, name.clone())).or_default().push(now);
            }
            if done {
                match edit {
                    DefEdit::Set(v) | DefEdit::Add(v) => model[k].insert(name, v),
                    DefEdit::Delete => model[k].remove(&name),
                };
            }
            std::thread::sleep(Duration::from_millis(gen.below(3) as u64 * gen.below(15) as u64));
        }
        if std::env::var_os("FORMDB_RANDOM_LOG").is_some() {
            eprintln!("round {round}: {log:?}");
        }
        let in_step = || {
            (0..FILES).all(|k| {
                std::fs::read(dir.join(path(k))).ok()
                    == query::file_bytes(&store, &path(k)).unwrap()
            })
        };
        let start = Instant::now();
        while !(sync.wait_idle(DEADLINE) && in_step()) {
            assert!(start.elapsed() < DEADLINE, "round {round}: not in step after {log:?}");
        }
        for (k, want) in model.iter_mut().enumerate() {
            let text = stored(&store, &path(k)).unwrap();
            let now = defs(&text);
            for (key, values) in &held {
                let lately = added.get(key).is_some_and(|at| at.elapsed() < RECENT);
                let deleted =
                    key.0 == k && values.last() == Some(&None) && !want.contains_key(&key.1);
                // A value it had before the deletion: before the burst, or one the disk wrote
                // (the store kept the last of them it imported: a deletion right after a
                // change comes in one batch with it).
                let kept = now.get(&key.1).filter(|v| values.contains(&Some(**v)));
                if let (true, true, Some(kept)) = (lately, deleted, kept) {
                    want.insert(key.1.clone(), *kept);
                    kept_added += 1;
                }
            }
            if &defs(&text) != want {
                let stats = sync.stats();
                let drafts = save::drafts(&store).unwrap();
                let drafts: Vec<(&str, &str)> = drafts
                    .iter()
                    .map(|d| (d.path.as_str(), std::str::from_utf8(&d.bytes).unwrap_or("")))
                    .collect();
                panic!(
                    "round {round}, f{k}, after {log:?}: {:?}, not {want:?}; conflicts {:?}, drafts {drafts:?}",
                    defs(&text),
                    &stats.conflict_list[stats.conflict_list.len() - (stats.conflicts - conflicts) as usize..],
                );
            }
        }
        let stats = sync.stats();
        let new = (stats.conflicts - conflicts) as usize;
        conflicts = stats.conflicts;
        // A path's draft is kept by its first conflict; later ones find it there.
        let new = &stats.conflict_list[stats.conflict_list.len() - new..];
        let paths: std::collections::BTreeSet<&str> = new.iter().map(|c| c.path.as_str()).collect();
        for p in paths {
            let k = (0..FILES).find(|k| path(*k) == p).expect("a conflict names a file");
            let draft = save::draft(&store, p).unwrap().unwrap_or_else(|| {
                panic!("round {round}: a conflict of {p} keeps no draft, after {log:?}; {stats:?}")
            });
            let draft = defs(std::str::from_utf8(&draft.bytes).unwrap());
            for c in new.iter().filter(|c| c.path == p) {
                assert!(!c.forms.is_empty(), "round {round}: {c:?} names its forms, after {log:?}");
                for form in &c.forms {
                    let name = form.split('`').nth(1).unwrap().to_string();
                    let key = (k, name.clone());
                    let store_lately =
                        by_store.iter().any(|((f, _), (_, at))| *f == k && at.elapsed() < RECENT);
                    assert!(
                        side.get(&key) == Some(&true) && store_lately,
                        "round {round}: {c:?}: {name} is not a form the disk edited just after the store edited its file, after {log:?}"
                    );
                    let kept = draft.get(&name).copied();
                    assert!(
                        held[&key].contains(&kept),
                        "round {round}: the draft keeps the store's {name}: {kept:?}, not one of {:?}",
                        held[&key]
                    );
                }
            }
            assert!(save::discard_draft(&store, &writer("t"), p).unwrap());
        }
        assert_eq!(save::drafts(&store).unwrap(), vec![], "round {round}: {log:?}");
    }
    eprintln!(
        "{rounds} bursts: {store_edits} store edits, {disk_edits} disk edits, {refused} refused, {conflicts} conflicts, {kept_added} additions kept over a deletion"
    );
    assert!(refused * 10 <= store_edits, "an edit is seldom refused: {refused} of {store_edits}");
}

/// One generated operation on whole files, made on one side.
#[derive(Clone, Debug)]
enum FileOp {
    /// A new file at a free path, with content `cid` (its own namespace) and a value.
    Create {
        path: String,
        cid: u64,
        value: u64,
    },
    /// The file's text rewritten whole with another value.
    Set {
        path: String,
        value: u64,
    },
    Rename {
        from: String,
        to: String,
    },
    Delete {
        path: String,
    },
}

/// The text of file content `cid`: a namespace of its own, so a renamed file declares no
/// namespace another file declares.
fn content_text(cid: u64, value: u64) -> String {
    format!("(ns fl.c{cid})\n\n(def v {value})\n")
}

/// Content id and value of a text [`content_text`] made.
fn content_of(text: &str) -> Option<(u64, u64)> {
    let cid = text.strip_prefix("(ns fl.c")?.split(')').next()?.parse().ok()?;
    Some((cid, *defs(text).get("v")?))
}

/// Generated file operations on both sides at once, as an agent (through the store: saves,
/// renames and deletes, as the mount makes them) and a person at a shell (`DIR`: new files,
/// `sed -i` or in-place rewrites, `mv`, `rm`) make them while `formdb up` runs. Within a burst
/// the two sides touch different paths; a side may touch one path several times. After each
/// burst, once both sides are in step, `DIR` and the store hold exactly the files the model
/// holds, each with its content and last value, with no draft left; a renamed file's form
/// keeps its id, on either side. (One exception: the disk renaming a file in a burst of
/// several renames and deletes on disk, a chain through one path within milliseconds, may
/// give its form a new id: the sync reads the directory a file at a time, and no read sees
/// the chain whole. Its content is kept.)
///
/// As with forms (above), a rewrite on disk of a file the store wrote in the last seconds may
/// have read the text from before that write: a conflict is allowed there, and its draft must
/// hold the store's text of the file as the burst found it.
#[test]
fn generated_file_operations_on_both_sides_keep_every_acknowledged_file() {
    const PATHS: usize = 6;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("work");
    let path_of = |k: usize| format!("src/fl/p{k}.clj");
    std::fs::create_dir_all(dir.join("src/fl")).unwrap();
    // Path → (content id, value).
    let mut model: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for k in 0..3 {
        std::fs::write(dir.join(path_of(k)), content_text(k as u64, 0)).unwrap();
        model.insert(path_of(k), (k as u64, 0));
    }
    git(&dir, &["init", "-q", "-b", "main"]);
    std::fs::write(dir.join(".git/info/exclude"), ".formdb/\n").unwrap();
    let store = Arc::new(Store::open(&dir.join(STORE_DIR)).unwrap());
    import_dir(&store, &dir, "import", &Quiet).unwrap();
    let sync = DirSync::start(store.clone(), &dir, "sync").unwrap();
    // The id of each content's form: a rename moves it, on either side.
    let id_of_content = |cid: u64| id_of(&store, &format!("fl.c{cid}/v"));
    let mut ids: HashMap<u64, String> = (0..3).map(|c| (c, id_of_content(c))).collect();

    // The sync's window for a writer that read a file before its write-back, with a margin.
    const RECENT: Duration = Duration::from_secs(4);
    // When the store last wrote each path.
    let mut store_wrote: HashMap<String, Instant> = HashMap::new();
    let mut conflicts = 0;
    let mut gen = formdb_testkit::Seeded::from_env(11);
    let mut next_cid = 3;
    let (mut store_ops, mut disk_ops, mut renewed) = (0, 0, 0);
    let rounds = formdb_testkit::random_rounds(40);
    for round in 0..rounds {
        // Which side each path touched in this burst belongs to (true: the disk).
        let mut side: HashMap<String, bool> = HashMap::new();
        // What each path held when the burst first touched it, then what the disk wrote there
        // (imported before a conflict, the store holds it).
        let mut held: HashMap<String, Vec<Option<(u64, u64)>>> = HashMap::new();
        // Contents the disk renamed, and how many renames and deletes it made.
        let (mut renamed_on_disk, mut disk_moves) = (HashSet::new(), 0);
        let mut log = Vec::new();
        for _ in 0..1 + gen.below(5) {
            let on_disk = gen.below(2) == 0;
            let mine = |p: &String, side: &HashMap<String, bool>| {
                side.get(p).is_none_or(|s| *s == on_disk)
            };
            let present: Vec<String> = model.keys().filter(|p| mine(p, &side)).cloned().collect();
            let free: Vec<String> = (0..PATHS)
                .map(path_of)
                .filter(|p| !model.contains_key(p) && mine(p, &side))
                .collect();
            let value = gen.next_u64() % 1_000_000 + 1;
            let op = match gen.below(10) {
                0..=2 if !free.is_empty() => {
                    next_cid += 1;
                    FileOp::Create {
                        path: free[gen.below(free.len())].clone(),
                        cid: next_cid,
                        value,
                    }
                }
                3 | 4 if !present.is_empty() && !free.is_empty() => FileOp::Rename {
                    from: present[gen.below(present.len())].clone(),
                    to: free[gen.below(free.len())].clone(),
                },
                5 if present.len() > 1 => {
                    FileOp::Delete { path: present[gen.below(present.len())].clone() }
                }
                _ if !present.is_empty() => {
                    FileOp::Set { path: present[gen.below(present.len())].clone(), value }
                }
                _ => continue,
            };
            let paths: Vec<String> = match &op {
                FileOp::Create { path, .. }
                | FileOp::Set { path, .. }
                | FileOp::Delete { path } => {
                    vec![path.clone()]
                }
                FileOp::Rename { from, to } => vec![from.clone(), to.clone()],
            };
            for p in paths.iter().cloned() {
                held.entry(p.clone()).or_insert_with(|| vec![model.get(&p).copied()]);
                if !on_disk {
                    store_wrote.insert(p.clone(), Instant::now());
                }
                side.insert(p, on_disk);
            }
            let text = |path: &String, value: u64, model: &BTreeMap<String, (u64, u64)>| match &op {
                FileOp::Create { cid, .. } => content_text(*cid, value),
                _ => content_text(model[path].0, value),
            };
            if on_disk {
                let file = |p: &str| dir.join(p);
                match &op {
                    FileOp::Create { path, value, .. } | FileOp::Set { path, value } => {
                        let text = text(path, *value, &model);
                        if gen.below(2) == 0 {
                            sed_write(&dir, path, &text);
                        } else {
                            std::fs::write(file(path), &text).unwrap();
                        }
                    }
                    FileOp::Rename { from, to } => {
                        std::fs::rename(file(from), file(to)).unwrap();
                        renamed_on_disk.insert(model[from].0);
                        disk_moves += 1;
                    }
                    FileOp::Delete { path } => {
                        std::fs::remove_file(file(path)).unwrap();
                        disk_moves += 1;
                    }
                }
                disk_ops += 1;
            } else {
                let w = writer("agent");
                match &op {
                    FileOp::Create { path, value, .. } | FileOp::Set { path, value } => {
                        let base = query::file_bytes(&store, path).unwrap();
                        let saved = save::save(
                            &store,
                            &w,
                            path,
                            text(path, *value, &model).as_bytes(),
                            base.as_deref(),
                        )
                        .unwrap();
                        assert!(
                            matches!(saved, save::Saved::Committed { .. }),
                            "round {round}: {op:?}: {saved:?}"
                        );
                    }
                    FileOp::Rename { from, to } => {
                        save::rename(&store, &w, from, to, false).unwrap()
                    }
                    FileOp::Delete { path } => assert!(save::delete(&store, &w, path).unwrap()),
                }
                store_ops += 1;
            }
            log.push(format!("{} {op:?}", if on_disk { "disk" } else { "store" }));
            match op {
                FileOp::Create { path, cid, value } => {
                    model.insert(path, (cid, value));
                }
                FileOp::Set { path, value } => model.get_mut(&path).unwrap().1 = value,
                FileOp::Rename { from, to } => {
                    let content = model.remove(&from).unwrap();
                    model.insert(to, content);
                }
                FileOp::Delete { path } => {
                    model.remove(&path);
                }
            }
            if on_disk {
                for p in paths {
                    held.get_mut(&p).unwrap().push(model.get(&p).copied());
                }
            }
            std::thread::sleep(Duration::from_millis(gen.below(3) as u64 * gen.below(15) as u64));
        }
        if std::env::var_os("FORMDB_RANDOM_LOG").is_some() {
            eprintln!("round {round}: {log:?}");
        }
        let on_disk = || -> BTreeMap<String, Vec<u8>> {
            (0..PATHS)
                .filter_map(|k| Some((path_of(k), std::fs::read(dir.join(path_of(k))).ok()?)))
                .collect()
        };
        let in_store = || -> BTreeMap<String, Vec<u8>> {
            (0..PATHS)
                .filter_map(|k| {
                    Some((path_of(k), query::file_bytes(&store, &path_of(k)).unwrap()?))
                })
                .collect()
        };
        let start = Instant::now();
        while !(sync.wait_idle(DEADLINE) && on_disk() == in_store()) {
            if start.elapsed() > DEADLINE {
                let (disk, stored) = (on_disk(), in_store());
                let text = |b: Option<&Vec<u8>>| b.map(|b| String::from_utf8_lossy(b).into_owned());
                let apart: Vec<_> = (0..PATHS)
                    .map(path_of)
                    .filter(|p| disk.get(p) != stored.get(p))
                    .map(|p| (text(disk.get(&p)), text(stored.get(&p)), p))
                    .collect();
                let stats = sync.stats();
                panic!(
                    "round {round}: not in step after {log:?}: (disk, store, path) {apart:?}; {} errors, the last {:?}",
                    stats.errors, stats.last_error
                );
            }
        }
        let now: BTreeMap<String, Option<(u64, u64)>> = in_store()
            .into_iter()
            .map(|(p, b)| (p, content_of(&String::from_utf8(b).unwrap())))
            .collect();
        let want: BTreeMap<String, Option<(u64, u64)>> =
            model.iter().map(|(p, c)| (p.clone(), Some(*c))).collect();
        let stats = sync.stats();
        assert_eq!(
            now,
            want,
            "round {round}, after {log:?}: conflicts {:?}, drafts {:?}",
            stats.conflict_list,
            save::drafts(&store).unwrap().iter().map(|d| &d.path).collect::<Vec<_>>()
        );
        // The list keeps the latest conflicts only.
        let new = (stats.conflicts - conflicts) as usize;
        let new = &stats.conflict_list[stats.conflict_list.len() - new..];
        conflicts = stats.conflicts;
        for c in new {
            let lately = store_wrote.get(&c.path).is_some_and(|at| at.elapsed() < RECENT);
            assert!(
                side.get(&c.path) == Some(&true) && lately,
                "round {round}: {c:?} is not of a file the disk wrote just after the store did, after {log:?}"
            );
            // A path's draft is kept by its first conflict; later ones find it there.
            let Some(draft) = save::draft(&store, &c.path).unwrap() else { continue };
            let kept = content_of(std::str::from_utf8(&draft.bytes).unwrap());
            assert!(
                held[&c.path].contains(&kept),
                "round {round}: the draft of {c:?} keeps the store's text: {kept:?}, not one of {:?}, after {log:?}",
                held[&c.path]
            );
            assert!(save::discard_draft(&store, &writer("t"), &c.path).unwrap());
        }
        assert_eq!(
            save::drafts(&store).unwrap(),
            vec![],
            "round {round}: {log:?}; new conflicts {new:?}, {}",
            sync.stats().conflicts
        );
        for (cid, _) in model.values() {
            let id = id_of_content(*cid);
            let kept = ids.entry(*cid).or_insert_with(|| id.clone());
            if *kept != id && disk_moves > 1 && renamed_on_disk.contains(cid) {
                renewed += 1;
                *kept = id.clone();
            }
            assert_eq!(
                *kept, id,
                "round {round}: content {cid} keeps its form's id, after {log:?}"
            );
        }
    }
    eprintln!(
        "{rounds} bursts: {store_ops} store operations, {disk_ops} disk operations, {conflicts} conflicts, {renewed} ids renewed in a chain of renames"
    );
}
