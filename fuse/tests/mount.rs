//! The mount, for real: a kernel FUSE mount of a store imported from `examples/shop`, edited with
//! vim and emacs in batch mode, sed, the shell, cp, mv, rm, mkdir and emacs-style scratch files;
//! the store is checked after each edit. Needs /dev/fuse and root (or fusermount3); CI runs as root.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::fs::{self, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::os::unix::io::IntoRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use formdb_edit::ops;
use formdb_edit::save::{self, Writer};
use formdb_engine::import::{self, Quiet};
use formdb_engine::query;
use formdb_engine::store::{params, str_at, Store};
use formdb_fuse::{Mounted, Options};
use formdb_projector::aliases::{self, AliasMap};
use formdb_testkit::relative_files;

const MONEY: &str = "src/shop/money.clj";
const CART: &str = "src/shop/cart.clj";

/// A store imported from a copy of examples/shop, and a mount of it. Not under /tmp: vim skips
/// backups there (`backupskip`), and the backup dance is part of what is tested.
struct Fx {
    dir: tempfile::TempDir,
    tree: PathBuf,
    mnt: PathBuf,
    store: Arc<Store>,
    mounted: Option<Mounted>,
}

fn fixture() -> Fx {
    fixture_as("mount")
}

fn fixture_as(user: &str) -> Fx {
    fixture_with(Options { user: user.into(), ..Default::default() })
}

fn fixture_with(opts: Options) -> Fx {
    let dir =
        tempfile::Builder::new().prefix("mount-").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let tree = dir.path().join("tree");
    formdb_testkit::copy_shop(&tree);
    let store = Arc::new(Store::open(&tree.join(".formdb")).unwrap());
    import::import_dir(&store, &tree, "import", &Quiet).unwrap();
    let mnt = dir.path().join("mnt");
    fs::create_dir(&mnt).unwrap();
    let mut fx = Fx { dir, tree, mnt, store, mounted: None };
    fx.mount_with(&opts);
    fx
}

impl Fx {
    fn mount(&mut self, user: &str) {
        self.mount_with(&Options { user: user.into(), ..Default::default() });
    }

    fn mount_with(&mut self, opts: &Options) {
        self.mounted = Some(formdb_fuse::spawn(self.store.clone(), &self.mnt, opts).unwrap());
        wait_for(|| self.mnt.join("src").is_dir(), "the mount to show src/");
    }

    fn unmount(&mut self) {
        if let Some(m) = self.mounted.take() {
            m.unmount().unwrap();
        }
        assert!(
            fs::read_dir(&self.mnt).unwrap().next().is_none(),
            "mount point empty after unmount"
        );
    }

    fn p(&self, rel: &str) -> PathBuf {
        self.mnt.join(rel)
    }

    fn read(&self, rel: &str) -> String {
        String::from_utf8(fs::read(self.p(rel)).unwrap()).unwrap()
    }

    fn stored(&self, rel: &str) -> String {
        formdb_projector::views::stored_text(&self.store, rel).unwrap()
    }
}

impl Drop for Fx {
    fn drop(&mut self) {
        // Unmount before the temp dir goes.
        self.mounted.take();
        let _ = &self.dir;
    }
}

fn wait_for(mut ok: impl FnMut() -> bool, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Run a command with stdin from /dev/null, killed after 30 s.
fn run(cmd: &mut Command) -> Output {
    let child =
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let pid = child.id() as i32;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            // SAFETY: killing the child we started.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("{cmd:?} timed out");
        }
    }
}

fn ok(cmd: &mut Command) -> Output {
    let out = run(cmd);
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn sh(script: &str) -> Output {
    ok(Command::new("sh").arg("-c").arg(script))
}

fn vim(fx: &Fx, file: &Path, cmds: &[&str]) -> Output {
    let mut c = Command::new("vim");
    c.env("HOME", fx.dir.path()).arg("-E").arg("-s");
    for x in cmds {
        c.arg("-c").arg(x);
    }
    c.arg("-c").arg("wq").arg(file);
    ok(&mut c)
}

/// Top-level forms of a stored file: name (or source for unnamed) → (id, source, versions).
fn forms(store: &Store, path: &str) -> BTreeMap<String, (String, String, i64)> {
    let rows = store
        .query(
            "?[pos, id, name, source] := *form_at{file: $path, pos, id}, *form{id, name, source, parent}, parent == '' :order pos",
            params([("path", path.into())]),
        )
        .unwrap();
    rows.rows
        .iter()
        .map(|r| {
            let id = str_at(r, 1);
            let name = str_at(r, 2);
            let key = if name.is_empty() { str_at(r, 3) } else { name };
            let v = store
                .query("?[v] := *version{id: $id, v}", params([("id", id.as_str().into())]))
                .unwrap();
            let versions = v.rows.len() as i64;
            (key, (id, str_at(r, 3), versions))
        })
        .collect()
}

/// Every form of `before` except `changed` is in `after` with the same id, text and history;
/// every name in `changed` differs.
fn assert_only(
    before: &BTreeMap<String, (String, String, i64)>,
    after: &BTreeMap<String, (String, String, i64)>,
    changed: &[&str],
) {
    for (name, b) in before {
        if changed.contains(&name.as_str()) {
            assert_ne!(after.get(name), Some(b), "{name} should have changed");
        } else {
            assert_eq!(
                after.get(name),
                Some(b),
                "{name} should be untouched (same id, text, versions)"
            );
        }
    }
    for name in changed {
        assert!(before.get(*name) != after.get(*name), "{name} should differ");
    }
}

/// The names a directory lists, sorted.
fn listed(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn store_paths(store: &Store) -> Vec<String> {
    save::paths(store).unwrap()
}

/// Close a file descriptor and return the errno close failed with, if any.
fn close(f: fs::File) -> Option<i32> {
    let fd = f.into_raw_fd();
    // SAFETY: we own fd.
    let rc = unsafe { libc::close(fd) };
    (rc != 0).then(|| std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
}

/// Write a whole file through the mount (open, truncate, write, close) and return close's errno.
fn write_file(path: &Path, bytes: &[u8]) -> Option<i32> {
    let mut f = OpenOptions::new().write(true).truncate(true).create(true).open(path).unwrap();
    f.write_all(bytes).unwrap();
    close(f)
}

#[test]
fn the_tree_reads_back_byte_for_byte_with_sizes_inodes_and_mtimes() {
    let fx = fixture();
    let original = relative_files(&fx.tree);
    let mounted = relative_files(&fx.mnt);
    assert_eq!(original, mounted, "the mount lists exactly the imported files");
    assert!(original.len() >= 5);
    for rel in &original {
        let want = fs::read(fx.tree.join(rel)).unwrap();
        let got = fs::read(fx.p(rel)).unwrap();
        assert_eq!(got, want, "{rel} reads back byte for byte");
        let m1 = fs::metadata(fx.p(rel)).unwrap();
        assert_eq!(m1.len(), got.len() as u64, "{rel}: stat size is the read length");
        assert!(m1.is_file());
        let m2 = fs::metadata(fx.p(rel)).unwrap();
        assert_eq!(m1.ino(), m2.ino(), "{rel}: inode stable");
        assert_eq!(m1.mtime(), m2.mtime(), "{rel}: mtime stable while content is");
    }
    assert!(fs::metadata(fx.p("src/shop")).unwrap().is_dir());
    let names = listed(&fx.p("src/shop"));
    assert!(names.contains(&"cart.clj".to_string()) && names.contains(&"money.clj".to_string()));

    // One form per line, read-only.
    let oneline = fx.read(&format!(".formdb/oneline/{CART}"));
    assert_eq!(oneline, formdb_projector::views::oneline_text(&fx.stored(CART)));
    assert_eq!(oneline.lines().count(), forms(&fx.store, CART).len());
    assert_eq!(
        fs::metadata(fx.p(&format!(".formdb/oneline/{CART}"))).unwrap().len(),
        oneline.len() as u64
    );
    assert!(OpenOptions::new().write(true).open(fx.p(&format!(".formdb/oneline/{CART}"))).is_err());

    // Each form as a file.
    let (id, src, _) = forms(&fx.store, MONEY)["cents"].clone();
    let form = fx.read(&format!(".formdb/forms/{id}.clj"));
    assert_eq!(form, format!("{src}\n"));
    // ... reachable by path, never listed (see `a_walk_from_the_root_...`).
    assert!(fs::metadata(fx.p(&format!(".formdb/forms/{id}.clj"))).unwrap().is_file());

    let status = fx.read(".formdb/status");
    assert!(status.contains("drafts: none"), "{status}");

    // The mtime moves when (and only when) the content does.
    let before = fs::metadata(fx.p(MONEY)).unwrap();
    let cart_before = fs::metadata(fx.p(CART)).unwrap();
    std::thread::sleep(Duration::from_millis(1100));
    let text = fx.read(MONEY).replace(":half-up", ":half-even");
    assert_eq!(write_file(&fx.p(MONEY), text.as_bytes()), None);
    let after = fs::metadata(fx.p(MONEY)).unwrap();
    assert!(after.mtime() > before.mtime(), "mtime moved with the content");
    assert_eq!(after.ino(), before.ino(), "inode kept across a save");
    assert_eq!(fs::metadata(fx.p(CART)).unwrap().mtime(), cart_before.mtime());
}

fn vim_edit(cmds: &[&str]) {
    let fx = fixture();
    let before = forms(&fx.store, MONEY);
    let paths = store_paths(&fx.store);
    let mut all = vec!["%s/:half-up/:half-down/"];
    all.extend_from_slice(cmds);
    vim(&fx, &fx.p(MONEY), &all);
    let after = forms(&fx.store, MONEY);
    assert_only(&before, &after, &["rounding-mode"]);
    assert!(after["rounding-mode"].1.contains(":half-down"));
    assert_eq!(after["rounding-mode"].0, before["rounding-mode"].0, "an edited form keeps its id");
    assert_eq!(after["rounding-mode"].2, before["rounding-mode"].2 + 1, "one new version");
    assert_eq!(store_paths(&fx.store), paths, "no swap, backup or 4913 file reached the store");
    let text = fx.read(MONEY);
    assert_eq!(text, fx.stored(MONEY));
    assert_eq!(fs::metadata(fx.p(MONEY)).unwrap().len(), text.len() as u64);
    let left = listed(&fx.p("src/shop"));
    assert_eq!(
        left,
        vec!["cart.clj".to_string(), "money.clj".to_string()],
        "vim cleaned up its scratch files"
    );
}

#[test]
fn vim_batch_defaults() {
    // Vi-compatible defaults in batch mode: swap file, backup by copy, write, fsync.
    vim_edit(&[]);
}

#[test]
fn vim_backupcopy_yes() {
    vim_edit(&["set backupcopy=yes"]);
}

#[test]
fn vim_backup_by_rename_with_4913_probe_and_swap() {
    // Vim's own defaults (nocompatible): the 4913 probe, then f → f~, a new f, fsync, rm f~.
    vim_edit(&["set nocompatible", "set backupcopy=auto", "set swapfile", "set writebackup"]);
}

/// Emacs in batch mode visits `file` on the mount, replaces `:half-up` with `:half-down` and
/// saves, after evaluating `setup` (its save strategy).
fn emacs(fx: &Fx, file: &Path, setup: &str) -> Output {
    // Emacs makes no backup of a file under `temporary-file-directory` (`/tmp`), where a
    // clone of this repository may live: back up wherever the file is.
    let script = format!(
        "(progn (setq backup-enable-predicate (lambda (_name) t)) {setup} (find-file {file:?}) (goto-char (point-min)) \
         (while (search-forward \":half-up\" nil t) (replace-match \":half-down\")) \
         (save-buffer) (kill-buffer) (kill-emacs 0))",
        file = file.display().to_string()
    );
    ok(Command::new("emacs").env("HOME", fx.dir.path()).args(["--batch", "-Q", "--eval", &script]))
}

/// A real Emacs save through the mount changes exactly the edited form, keeps its id, adds one
/// version and lets no lock, backup or temporary file reach the store. What Emacs leaves beside
/// the file (its `~` backup) stays on the mount, in memory.
fn emacs_edit(setup: &str, left_beside: &[&str]) {
    let fx = fixture();
    let before = forms(&fx.store, MONEY);
    let paths = store_paths(&fx.store);
    emacs(&fx, &fx.p(MONEY), setup);
    let after = forms(&fx.store, MONEY);
    assert_only(&before, &after, &["rounding-mode"]);
    assert!(after["rounding-mode"].1.contains(":half-down"));
    assert_eq!(after["rounding-mode"].0, before["rounding-mode"].0, "an edited form keeps its id");
    assert_eq!(after["rounding-mode"].2, before["rounding-mode"].2 + 1, "one new version");
    assert_eq!(
        store_paths(&fx.store),
        paths,
        "no lock, backup or temporary file reached the store"
    );
    assert_eq!(fx.read(MONEY), fx.stored(MONEY));
    let left = listed(&fx.p("src/shop"));
    let mut want: Vec<String> = ["cart.clj", "money.clj"].iter().map(|s| s.to_string()).collect();
    want.extend(left_beside.iter().map(|s| s.to_string()));
    want.sort();
    assert_eq!(left, want, "Emacs's lock file is gone, its backup (if any) stays beside the file");
}

#[test]
fn emacs_batch_defaults_back_up_by_rename() {
    // Emacs's defaults: a lock symlink `.#money.clj` while modified, then on the first save
    // money.clj → money.clj~ by rename and a new money.clj written in its place.
    emacs_edit("nil", &["money.clj~"]);
}

#[test]
fn emacs_backup_by_copying() {
    emacs_edit("(setq backup-by-copying t)", &["money.clj~"]);
}

#[test]
fn emacs_precious_file_writes_a_temporary_and_renames_it_over() {
    // `file-precious-flag`: Emacs writes a temporary file beside the file and renames it over.
    emacs_edit("(setq make-backup-files nil file-precious-flag t)", &[]);
}

/// Emacs's precious save, with the release of its first handle late, as under load: Emacs
/// creates the temporary file (`O_EXCL`) and closes it, opens it again with `O_TRUNC`, writes
/// the text, closes, and renames it over the file. The kernel releases a closed handle
/// asynchronously; here a second descriptor of the first open (a `dup`, as a forked child
/// holds one) keeps that release back until after the text was saved. That late release once
/// saved the first handle's empty text over it (and the `O_TRUNC`, sent without a handle,
/// emptied both handles), and the rename then emptied the file in the store. The same goes
/// for a truncation (`: > f`) released after a later writer saved. Each case ends with an
/// unmount, which waits for every release the kernel queued.
#[test]
fn a_late_release_of_an_empty_handle_never_saves_over_a_text_saved_since() {
    let mut fx = fixture();
    let before = forms(&fx.store, MONEY);
    let text = fx.read(MONEY).replace(":half-up", ":half-down");
    let tmp = fx.p("src/shop/tmpR32j7i");
    let created = OpenOptions::new().read(true).write(true).create_new(true).open(&tmp).unwrap();
    let held = created.try_clone().unwrap();
    assert_eq!(close(created), None);
    assert_eq!(write_file(&tmp, text.as_bytes()), None);
    let reopened = OpenOptions::new().write(true).open(&tmp).unwrap();
    assert_eq!(close(reopened), None);
    assert_eq!(close(held), None, "the first handle's last close, and its release");
    fs::rename(&tmp, fx.p(MONEY)).unwrap();
    fx.unmount();
    assert_eq!(fx.stored(MONEY), text);
    let after = forms(&fx.store, MONEY);
    assert_only(&before, &after, &["rounding-mode"]);
    assert!(save::drafts(&fx.store).unwrap().is_empty());

    fx.mount("mount");
    let text2 = text.replace(":half-down", ":ceiling");
    let truncated = OpenOptions::new().write(true).truncate(true).open(fx.p(MONEY)).unwrap();
    let held = truncated.try_clone().unwrap();
    assert_eq!(close(truncated), None);
    assert_eq!(write_file(&fx.p(MONEY), text2.as_bytes()), None);
    assert_eq!(close(held), None);
    fx.unmount();
    assert_eq!(fx.stored(MONEY), text2);
    assert_only(&after, &forms(&fx.store, MONEY), &["rounding-mode"]);
    assert!(save::drafts(&fx.store).unwrap().is_empty());
}

/// A process forked while a written descriptor of the mount is open, and while the store's
/// writer lock is held, holds copies of both: its `exec` closes its copy of the descriptor (a
/// `flush` of the mount's handle) with the lock's copy still open. That flush used to commit
/// the handle, waiting on the lock that only the end of its own `exec` would release: the fork
/// never returned and the mount hung (the test suite hung in the vim and emacs tests, forked
/// beside other tests' open files). Only a process that wrote through a handle commits it.
#[test]
fn a_process_forked_while_a_written_file_is_open_never_hangs_the_mount() {
    let fx = fixture();
    let text = fx.read(MONEY).replace(":half-up", ":half-even");
    let mut f = OpenOptions::new().write(true).truncate(true).open(fx.p(MONEY)).unwrap();
    f.write_all(text.as_bytes()).unwrap();
    let writer = fx.store.writer().unwrap();
    let (done, forked) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let status = Command::new("true").status();
        let _ = done.send(status.map(|s| s.success()));
    });
    let status = forked.recv_timeout(Duration::from_secs(30));
    assert!(matches!(status, Ok(Ok(true))), "the fork hung on the mount: {status:?}");
    drop(writer);
    assert_eq!(close(f), None, "the writer's own close commits");
    assert_eq!(fx.stored(MONEY), text);
}

#[test]
fn sed_in_place_shell_redirects_cp_and_tee() {
    let fx = fixture();
    let before = forms(&fx.store, MONEY);
    let paths = store_paths(&fx.store);
    let f = fx.p(MONEY);
    ok(Command::new("sed")
        .arg("-i")
        .arg("s/Whole units and cents to cents./Units and cents, in cents./")
        .arg(&f));
    let after = forms(&fx.store, MONEY);
    assert_only(&before, &after, &["cents"]);
    assert_eq!(after["cents"].0, before["cents"].0);
    assert_eq!(store_paths(&fx.store), paths, "sed's temp file never reached the store");

    // `>>`: append a form.
    sh(&format!("printf '\\n(defn dollars [c] (quot c 100))\\n' >> '{}'", f.display()));
    let appended = forms(&fx.store, MONEY);
    assert_only(&after, &appended, &[]);
    assert!(appended.contains_key("dollars"), "{appended:?}");
    assert!(fx.read(MONEY).ends_with("(defn dollars [c] (quot c 100))\n"));

    // `>`: the whole file replaced, one form changed.
    let text = fx.read(MONEY).replace("(quot c 100))\n", "(quot c 100.0))\n");
    let tmp = fx.dir.path().join("money.new");
    fs::write(&tmp, &text).unwrap();
    sh(&format!("cat '{}' > '{}'", tmp.display(), f.display()));
    let replaced = forms(&fx.store, MONEY);
    assert_only(&appended, &replaced, &["dollars"]);
    assert_eq!(fx.stored(MONEY), text);

    // `cp` over the file.
    let text2 = text.replace(":half-up", ":ceiling");
    fs::write(&tmp, &text2).unwrap();
    ok(Command::new("cp").arg(&tmp).arg(&f));
    let copied = forms(&fx.store, MONEY);
    assert_only(&replaced, &copied, &["rounding-mode"]);
    assert_eq!(fx.stored(MONEY), text2);

    // `tee` (open for writing with truncation, from a pipe), then `tee -a` (append).
    let text3 = text2.replace(":ceiling", ":floor");
    fs::write(&tmp, &text3).unwrap();
    sh(&format!("cat '{}' | tee '{}' > /dev/null", tmp.display(), f.display()));
    let teed = forms(&fx.store, MONEY);
    assert_only(&copied, &teed, &["rounding-mode"]);
    assert_eq!(fx.stored(MONEY), text3);
    sh(&format!("printf '\n(def tee-appended 1)\n' | tee -a '{}' > /dev/null", f.display()));
    let appended_by_tee = forms(&fx.store, MONEY);
    assert_only(&teed, &appended_by_tee, &[]);
    assert!(appended_by_tee.contains_key("tee-appended"), "{appended_by_tee:?}");
    assert_eq!(fx.stored(MONEY), format!("{text3}\n(def tee-appended 1)\n"));
    assert_eq!(fx.read(MONEY), fx.stored(MONEY));
    assert!(save::drafts(&fx.store).unwrap().is_empty());
    assert_eq!(store_paths(&fx.store), paths);
}

#[test]
fn mv_moves_a_file_in_the_store() {
    let fx = fixture();
    let text = fx.stored(MONEY);
    let before = forms(&fx.store, MONEY);
    ok(Command::new("mv").arg(fx.p(MONEY)).arg(fx.p("src/shop/cash.clj")));
    // The moved file's forms keep their ids and text (each gets a version row for its move).
    let ids_and_text = |m: BTreeMap<String, (String, String, i64)>| -> Vec<(String, String)> {
        m.into_values().map(|(id, source, _)| (id, source)).collect()
    };
    assert_eq!(ids_and_text(forms(&fx.store, "src/shop/cash.clj")), ids_and_text(before));
    assert!(!store_paths(&fx.store).contains(&MONEY.to_string()), "{:?}", store_paths(&fx.store));
    assert_eq!(fx.stored("src/shop/cash.clj"), text);
    assert!(!fx.p(MONEY).exists());
    assert_eq!(fx.read("src/shop/cash.clj"), text);
}

#[test]
fn rm_mkdir_new_namespace_and_restore() {
    let fx = fixture();
    let money = forms(&fx.store, MONEY);
    let text = fx.stored(MONEY);

    // rm: the file and its forms go; restore brings them back.
    ok(Command::new("rm").arg(fx.p(MONEY)));
    assert!(forms(&fx.store, MONEY).is_empty());
    assert!(!store_paths(&fx.store).contains(&MONEY.to_string()));
    assert!(!fx.p(MONEY).exists());
    assert!(fx.p("src/shop").is_dir(), "the directory stays");
    save::restore(&fx.store, &Writer::default(), MONEY).unwrap();
    wait_for(|| fx.p(MONEY).exists(), "the restored file to appear");
    assert_eq!(fx.read(MONEY), text);
    let restored = forms(&fx.store, MONEY);
    assert_eq!(restored.keys().collect::<Vec<_>>(), money.keys().collect::<Vec<_>>());

    // mkdir and a brand new namespace file.
    ok(Command::new("mkdir").arg(fx.p("src/shop/util")));
    assert!(fx.p("src/shop/util").is_dir());
    let new_ns = "(ns shop.util.text)\n\n(defn shout [s] (str s \"!\"))\n";
    let tmp = fx.dir.path().join("text.clj");
    fs::write(&tmp, new_ns).unwrap();
    sh(&format!("cat '{}' > '{}'", tmp.display(), fx.p("src/shop/util/text.clj").display()));
    assert_eq!(fx.stored("src/shop/util/text.clj"), new_ns);
    let f = forms(&fx.store, "src/shop/util/text.clj");
    assert!(f.contains_key("shout") && f.len() == 2, "{f:?}");
    let ns = fx
        .store
        .query("?[file] := *ns_decl{ns: 'shop.util.text', file}", Default::default())
        .unwrap();
    assert_eq!(str_at(&ns.rows[0], 0), "src/shop/util/text.clj");
    assert_eq!(fx.read("src/shop/util/text.clj"), new_ns);

    // An empty directory made with mkdir can be removed again; one with files cannot.
    ok(Command::new("mkdir").arg(fx.p("src/empty")));
    ok(Command::new("rmdir").arg(fx.p("src/empty")));
    assert!(!fx.p("src/empty").exists());
    assert!(!run(Command::new("rmdir").arg(fx.p("src/shop"))).status.success());
}

#[test]
fn emacs_lock_autosave_and_backup_files_stay_in_memory() {
    let mut fx = fixture();
    let paths = store_paths(&fx.store);
    let before = forms(&fx.store, MONEY);
    let dir = fx.p("src/shop");
    std::os::unix::fs::symlink("root@host.4242:1700000000", dir.join(".#money.clj")).unwrap();
    assert_eq!(
        fs::read_link(dir.join(".#money.clj")).unwrap(),
        Path::new("root@host.4242:1700000000")
    );
    fs::write(dir.join("#money.clj#"), "(ns shop.money) ; autosaved").unwrap();
    // Emacs saves by renaming the file to its backup, then writing a new one.
    let text = fx.read(MONEY);
    fs::rename(dir.join("money.clj"), dir.join("money.clj~")).unwrap();
    assert!(!dir.join("money.clj").exists(), "renamed away");
    assert_eq!(fs::read_to_string(dir.join("money.clj~")).unwrap(), text);
    assert!(store_paths(&fx.store).contains(&MONEY.to_string()), "the store keeps it meanwhile");
    let new = text.replace(":half-up", ":emacs");
    assert_eq!(write_file(&dir.join("money.clj"), new.as_bytes()), None);
    assert_eq!(fx.stored(MONEY), new);
    // The file written anew under the old name is the same file: every form keeps its id, and
    // only the edited one gets a version.
    let after = forms(&fx.store, MONEY);
    assert_only(&before, &after, &["rounding-mode"]);
    assert_eq!(after["rounding-mode"].0, before["rounding-mode"].0, "the edited form keeps its id");
    assert_eq!(after["rounding-mode"].2, before["rounding-mode"].2 + 1);
    fs::remove_file(dir.join("#money.clj#")).unwrap();
    fs::remove_file(dir.join(".#money.clj")).unwrap();
    let names = listed(&dir);
    assert_eq!(names, ["cart.clj", "money.clj", "money.clj~"]);
    assert_eq!(store_paths(&fx.store), paths, "no scratch file reached the store");
    // Scratch files are gone after a remount; the saved file is not.
    fx.unmount();
    fx.mount("mount");
    assert!(!dir.join("money.clj~").exists());
    assert_eq!(fx.read(MONEY), new);
}

#[test]
fn a_bad_save_is_a_draft_that_reads_back_survives_remount_and_is_fixed() {
    let mut fx = fixture();
    let before = forms(&fx.store, MONEY);
    let stored = fx.stored(MONEY);
    let bad = b"(ns shop.money)\n\n(defn cents [units c]\n  (+ (* 100 units) c)\n";
    assert_eq!(
        write_file(&fx.p(MONEY), bad),
        Some(libc::EINVAL),
        "close fails on a save kept as a draft"
    );
    assert_eq!(forms(&fx.store, MONEY), before, "the store is unchanged");
    assert_eq!(fx.stored(MONEY), stored);
    assert_eq!(fs::read(fx.p(MONEY)).unwrap(), bad, "reads back exactly as written");
    assert_eq!(fs::metadata(fx.p(MONEY)).unwrap().len(), bad.len() as u64);
    let drafts = save::drafts(&fx.store).unwrap();
    assert_eq!(drafts.len(), 1);
    assert_eq!(drafts[0].path, MONEY);
    let status = fx.read(".formdb/status");
    assert!(status.contains(&format!("{MONEY}:")) && status.contains("drafts (1)"), "{status}");
    assert!(status.contains("kept as a draft"), "{status}");

    // Not UTF-8, a NUL byte: drafts too, reading back exactly as written.
    assert_eq!(write_file(&fx.p(MONEY), b"(ns shop.money)\n\xff\xfe"), Some(libc::EINVAL));
    assert_eq!(fs::read(fx.p(MONEY)).unwrap(), b"(ns shop.money)\n\xff\xfe");
    assert_eq!(forms(&fx.store, MONEY), before);
    let nul = stored.replace(":half-up", ":half\0up");
    assert_eq!(write_file(&fx.p(MONEY), nul.as_bytes()), Some(libc::EINVAL), "close fails on NUL");
    assert_eq!(fs::read(fx.p(MONEY)).unwrap(), nul.as_bytes(), "the NUL save reads back exactly");
    assert_eq!(fs::metadata(fx.p(MONEY)).unwrap().len(), nul.len() as u64);
    let d = save::draft(&fx.store, MONEY).unwrap().expect("a draft");
    assert!(d.error.contains("NUL"), "{}", d.error);
    assert_eq!(d.bytes, nul.as_bytes());
    assert_eq!(forms(&fx.store, MONEY), before, "the store is unchanged");
    assert_eq!(fx.stored(MONEY), stored);
    assert_eq!(write_file(&fx.p(MONEY), bad), Some(libc::EINVAL));

    // Drafts live in the store: they survive a remount.
    fx.unmount();
    fx.mount("mount");
    assert_eq!(fs::read(fx.p(MONEY)).unwrap(), bad);
    assert!(fx.read(".formdb/status").contains(MONEY));

    // A good save replaces the draft.
    let fixed = stored.replace(":half-up", ":fixed");
    assert_eq!(write_file(&fx.p(MONEY), fixed.as_bytes()), None);
    assert!(save::drafts(&fx.store).unwrap().is_empty());
    assert_eq!(fx.stored(MONEY), fixed);
    assert_only(&before, &forms(&fx.store, MONEY), &["rounding-mode"]);
    assert!(fx.read(".formdb/status").contains("drafts: none"));
}

#[test]
fn changes_made_elsewhere_show_at_the_next_read_and_stat() {
    let fx = fixture();
    let other = Writer::new("other", AliasMap::default());
    let text = fx
        .stored(MONEY)
        .replace("(defn- rounding-mode [] :half-up)", "(defn- rounding-mode []\n  :half-even)");
    save::save(&fx.store, &other, MONEY, text.as_bytes(), None).unwrap();
    assert_eq!(fx.read(MONEY), text, "visible at the next read");
    assert_eq!(fs::metadata(fx.p(MONEY)).unwrap().len(), text.len() as u64, "and the next stat");
    // A new file made elsewhere appears, a deleted one goes.
    save::save(&fx.store, &other, "src/shop/extra.clj", b"(ns shop.extra)\n", None).unwrap();
    assert_eq!(fx.read("src/shop/extra.clj"), "(ns shop.extra)\n");
    save::delete(&fx.store, &other, "src/shop/extra.clj").unwrap();
    wait_for(|| !fx.p("src/shop/extra.clj").exists(), "the deleted file to go");
}

#[test]
fn no_lost_updates_merge_and_conflict() {
    let fx = fixture();
    let other = Writer::new("other", AliasMap::default());
    // Open, read; the store changes one form; we change another and save: both stay.
    let mut f = OpenOptions::new().read(true).write(true).open(fx.p(MONEY)).unwrap();
    let mut mine = String::new();
    f.read_to_string(&mut mine).unwrap();
    let theirs = mine.replace("\"Whole units and cents to cents.\"", "\"Changed elsewhere.\"");
    save::save(&fx.store, &other, MONEY, theirs.as_bytes(), None).unwrap();
    let mine = mine.replace(":half-up", ":mine");
    f.seek(SeekFrom::Start(0)).unwrap();
    f.set_len(0).unwrap();
    f.write_all(mine.as_bytes()).unwrap();
    assert_eq!(close(f), None);
    let text = fx.stored(MONEY);
    assert!(text.contains("Changed elsewhere.") && text.contains(":mine"), "{text}");

    // Both sides change the same form: the store keeps its version, ours is a draft.
    let mut f = OpenOptions::new().read(true).write(true).open(fx.p(MONEY)).unwrap();
    let mut mine = String::new();
    f.read_to_string(&mut mine).unwrap();
    let theirs = mine.replace(":mine", ":theirs");
    save::save(&fx.store, &other, MONEY, theirs.as_bytes(), None).unwrap();
    let mine = mine.replace(":mine", ":ours");
    f.seek(SeekFrom::Start(0)).unwrap();
    f.set_len(0).unwrap();
    f.write_all(mine.as_bytes()).unwrap();
    assert_eq!(close(f), Some(libc::EIO), "a conflict fails the close");
    assert!(fx.stored(MONEY).contains(":theirs"));
    let d = save::draft(&fx.store, MONEY).unwrap().expect("conflict draft");
    assert!(d.error.contains("conflict"), "{}", d.error);
    assert_eq!(d.bytes, mine.as_bytes());
    assert!(fx.read(".formdb/status").contains("conflict"));
}

fn renameat2(from: &Path, to: &Path, flags: u32) -> Option<i32> {
    let a = CString::new(from.as_os_str().as_bytes()).unwrap();
    let b = CString::new(to.as_os_str().as_bytes()).unwrap();
    // SAFETY: valid C strings.
    let rc =
        unsafe { libc::renameat2(libc::AT_FDCWD, a.as_ptr(), libc::AT_FDCWD, b.as_ptr(), flags) };
    (rc != 0).then(|| std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
}

#[test]
fn rename_flags_and_xattrs() {
    let fx = fixture();
    let (m, c) = (fx.p(MONEY), fx.p(CART));
    assert_eq!(renameat2(&m, &c, libc::RENAME_NOREPLACE), Some(libc::EEXIST));
    assert_eq!(renameat2(&m, &c, libc::RENAME_EXCHANGE), Some(libc::EINVAL));
    assert_eq!(fx.read(MONEY), fx.stored(MONEY), "nothing moved");
    assert_eq!(renameat2(&m, &fx.p("src/shop/m2.clj"), libc::RENAME_NOREPLACE), None);
    assert!(store_paths(&fx.store).contains(&"src/shop/m2.clj".to_string()));

    let p = CString::new(c.as_os_str().as_bytes()).unwrap();
    let name = CString::new("user.test").unwrap();
    let mut buf = [0u8; 64];
    // SAFETY: valid pointers and lengths.
    let get =
        unsafe { libc::getxattr(p.as_ptr(), name.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    assert_eq!(get, -1);
    assert_eq!(std::io::Error::last_os_error().raw_os_error(), Some(libc::ENOTSUP));
    // SAFETY: as above.
    let set = unsafe { libc::setxattr(p.as_ptr(), name.as_ptr(), b"x".as_ptr().cast(), 1, 0) };
    assert_eq!(set, -1);
    assert_eq!(std::io::Error::last_os_error().raw_os_error(), Some(libc::ENOTSUP));
}

/// A form file made under an id no form has is refused, and the mount's status line says what
/// form files are, in an editor user's words (no MCP tool, no CLI command).
#[test]
fn a_form_file_of_an_unknown_id_says_what_form_files_are() {
    let fx = fixture();
    let before = forms(&fx.store, MONEY);
    let made = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(fx.p(".formdb/forms/zzzzzzzz.clj"));
    assert_eq!(made.unwrap_err().raw_os_error(), Some(libc::EACCES));
    assert_eq!(forms(&fx.store, MONEY), before, "store unchanged");
    let status = fx.read(".formdb/status");
    let line = status
        .lines()
        .find(|l| l.contains("error .formdb/forms/zzzzzzzz.clj"))
        .unwrap_or_else(|| panic!("a status line for the save: {status}"));
    assert!(line.contains("no form with id `zzzzzzzz`"), "{line}");
    assert!(line.contains("`.formdb/forms/` holds a file for each form"), "{line}");
    for other in ["get_form", "explore_namespace", "`search`", "formdb search"] {
        assert!(!line.contains(other), "no {other}: {line}");
    }
}

#[test]
fn form_files_write_one_form_and_keep_bad_text_as_a_draft() {
    let fx = fixture();
    let before = forms(&fx.store, MONEY);
    let id = before["cents"].0.clone();
    let path = fx.p(&format!(".formdb/forms/{id}.clj"));
    let new =
        "(defn cents\n  \"Cents from units and cents.\"\n  [units c]\n  (+ (* 100 units) c))\n";
    assert_eq!(write_file(&path, new.as_bytes()), None);
    let after = forms(&fx.store, MONEY);
    assert_only(&before, &after, &["cents"]);
    assert_eq!(after["cents"].0, id);
    assert!(after["cents"].1.contains("Cents from units and cents."));
    assert_eq!(fs::read_to_string(&path).unwrap(), new);

    let bad = b"(defn cents [units c]\n  (+ (* 100 units) c)\n";
    assert_eq!(write_file(&path, bad), Some(libc::EINVAL));
    assert_eq!(forms(&fx.store, MONEY), after, "store unchanged");
    assert_eq!(fs::read(&path).unwrap(), bad);
    assert!(fx.read(".formdb/status").contains(&format!(".formdb/forms/{id}.clj")));

    // vim on a form file.
    assert_eq!(write_file(&path, new.as_bytes()), None);
    vim(&fx, &path, &["%s/Cents from/Cents of/"]);
    assert!(forms(&fx.store, MONEY)["cents"].1.contains("Cents of units"));
    assert!(save::drafts(&fx.store).unwrap().is_empty());
    // ... and with its backup by rename, which writes the form file anew.
    vim(&fx, &path, &["set nocompatible", "set backupcopy=auto", "%s/Cents of/Cents in/"]);
    let last = forms(&fx.store, MONEY);
    assert!(last["cents"].1.contains("Cents in units"), "{last:?}");
    assert_eq!(last["cents"].0, id);
    assert_only(&after, &last, &["cents"]);
    let listed = listed(&fx.p(".formdb/forms"));
    assert!(
        !listed.iter().any(|n| n.ends_with('~') || n.ends_with(".swp") || n == "4913"),
        "{listed:?}"
    );
}

#[test]
fn two_users_see_their_aliases_and_each_others_edits() {
    let mut alice = fixture_as("alice");
    aliases::set(&alice.store, "alice", "clojure.string", "s").unwrap();
    // Remount so alice's new alias map is loaded.
    alice.unmount();
    alice.mount("alice");
    let bob_mnt = alice.dir.path().join("bob");
    fs::create_dir(&bob_mnt).unwrap();
    let bob = formdb_fuse::spawn(
        alice.store.clone(),
        &bob_mnt,
        &Options { user: "bob".into(), ..Default::default() },
    )
    .unwrap();
    let a = alice.read(CART);
    let b = fs::read_to_string(bob_mnt.join(CART)).unwrap();
    assert!(a.contains("(s/join") && a.contains("[clojure.string :as s]"), "{a}");
    assert!(b.contains("(str/join") && !b.contains("(s/join"), "{b}");
    assert_eq!(fs::metadata(alice.p(CART)).unwrap().len(), a.len() as u64);

    // Alice edits in her view; the store keeps the canonical aliases; Bob sees the edit.
    ok(Command::new("sed")
        .arg("-i")
        .arg("s/A printable receipt./Receipt text./")
        .arg(alice.p(CART)));
    assert!(alice.stored(CART).contains("(str/join"), "parse-back restored the stored alias");
    let b = fs::read_to_string(bob_mnt.join(CART)).unwrap();
    assert!(b.contains("Receipt text.") && b.contains("(str/join"), "{b}");
    assert!(alice.read(CART).contains("(s/join"));
    bob.unmount().unwrap();
}

#[test]
fn read_only_mounts_and_busy_or_non_empty_mount_points() {
    let mut fx = fixture();
    // A second mount on a mounted directory is refused.
    let err = match formdb_fuse::spawn(fx.store.clone(), &fx.mnt, &Options::default()) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("mounted twice"),
    };
    assert!(err.contains("busy"), "{err}");
    fx.unmount();
    // A non-empty directory is refused.
    let full = fx.dir.path().join("full");
    fs::create_dir(&full).unwrap();
    fs::write(full.join("x"), "x").unwrap();
    let err = match formdb_fuse::spawn(fx.store.clone(), &full, &Options::default()) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("mounted on a non-empty directory"),
    };
    assert!(err.contains("not empty"), "{err}");

    let m = formdb_fuse::spawn(
        fx.store.clone(),
        &fx.mnt,
        &Options { read_only: true, ..Default::default() },
    )
    .unwrap();
    wait_for(|| fx.mnt.join("src").is_dir(), "the read-only mount");
    let before = fx.stored(MONEY);
    let e = OpenOptions::new().write(true).open(fx.p(MONEY)).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EROFS));
    assert_eq!(fs::remove_file(fx.p(MONEY)).unwrap_err().raw_os_error(), Some(libc::EROFS));
    assert_eq!(fx.read(MONEY), before);
    m.unmount().unwrap();
}

#[test]
fn clojure_loads_and_runs_a_namespace_from_the_mount_before_and_after_an_edit() {
    let fx = fixture();
    let total = |fx: &Fx| {
        let out = ok(Command::new("clojure").arg("-cp").arg(fx.p("src")).arg("-e").arg(
            "(require 'shop.cart) (println (shop.cart/total [{:name \"tea\" :price 350 :qty 2}]))",
        ));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert_eq!(total(&fx), "756");
    ok(Command::new("sed")
        .arg("-i")
        .arg("s/(def ^:dynamic \\*tax-rate\\* 8)/(def ^:dynamic *tax-rate* 10)/")
        .arg(fx.p(CART)));
    assert!(fx.stored(CART).contains("*tax-rate* 10"));
    assert_eq!(total(&fx), "770");
}

/// Top-level forms of a stored file as (id, source), in file order.
fn ids_and_sources(store: &Store, path: &str) -> Vec<(String, String)> {
    forms(store, path).into_values().map(|(id, source, _)| (id, source)).collect()
}

#[test]
fn mv_of_a_directory_moves_files_blobs_drafts_and_scratch_in_one_change() {
    let fx = fixture();
    let dir = fx.p("src/shop");
    // A blob, a draft and a scratch file live under the directory besides its two namespaces.
    assert_eq!(write_file(&dir.join("notes.txt"), b"plain notes\n"), None);
    let bad = b"(ns shop.cart)\n(defn broken [x\n";
    assert_eq!(write_file(&fx.p(CART), bad), Some(libc::EINVAL));
    fs::write(dir.join("#money.clj#"), "autosaved").unwrap();
    let money_text = fx.read(MONEY);
    let money = ids_and_sources(&fx.store, MONEY);
    let cart = ids_and_sources(&fx.store, CART);
    assert!(money.len() >= 3 && cart.len() >= 3);
    let gen = query::generation(&fx.store).unwrap();

    ok(Command::new("mv").arg(&dir).arg(fx.p("src/store")));

    assert!(!dir.exists(), "the old directory is gone");
    assert_eq!(query::generation(&fx.store).unwrap(), gen + 1, "one change set");
    let moved: Vec<String> =
        store_paths(&fx.store).into_iter().filter(|p| p.starts_with("src/")).collect();
    assert_eq!(moved, ["src/store/cart.clj", "src/store/money.clj", "src/store/notes.txt"]);
    assert_eq!(ids_and_sources(&fx.store, "src/store/money.clj"), money, "ids kept");
    assert_eq!(ids_and_sources(&fx.store, "src/store/cart.clj"), cart, "ids kept");
    assert_eq!(fx.read("src/store/money.clj"), money_text, "byte for byte");
    assert_eq!(fs::read(fx.p("src/store/cart.clj")).unwrap(), bad, "the draft moved with it");
    assert_eq!(fs::read(fx.p("src/store/notes.txt")).unwrap(), b"plain notes\n");
    assert_eq!(fs::read_to_string(fx.p("src/store/#money.clj#")).unwrap(), "autosaved");
    let drafts: Vec<String> =
        save::drafts(&fx.store).unwrap().into_iter().map(|d| d.path).collect();
    assert_eq!(drafts, ["src/store/cart.clj"], "no draft made by the move");
    let names = listed(&fx.p("src/store"));
    assert_eq!(names, ["#money.clj#", "cart.clj", "money.clj", "notes.txt"]);
    assert!(fx.p("src").is_dir());

    // The moved files are edited where they are now, and the draft is fixed there.
    ok(Command::new("sed")
        .arg("-i")
        .arg("s/:half-up/:half-even/")
        .arg(fx.p("src/store/money.clj")));
    let after = forms(&fx.store, "src/store/money.clj");
    assert!(after["rounding-mode"].1.contains(":half-even"));
    assert_eq!(ids_and_sources(&fx.store, "src/store/money.clj")[0], money[0]);
    let good = fx.stored("src/store/cart.clj");
    assert_eq!(write_file(&fx.p("src/store/cart.clj"), good.as_bytes()), None);
    assert!(save::drafts(&fx.store).unwrap().is_empty());
}

#[test]
fn form_file_saves_merge_against_what_was_read_and_keep_refusals_as_drafts() {
    let fx = fixture();
    let before = forms(&fx.store, MONEY);
    let id = before["cents"].0.clone();
    let rel = format!(".formdb/forms/{id}.clj");
    let path = fx.p(&rel);
    let other = Writer::new("other", AliasMap::default());

    // Read, the store changes the form elsewhere, write ours: the store's version stays and
    // ours is a draft with the conflict; close fails.
    let mut f = OpenOptions::new().read(true).write(true).open(&path).unwrap();
    let mut read = String::new();
    f.read_to_string(&mut read).unwrap();
    let theirs = read.replace("Whole units and cents to cents.", "Theirs.");
    ops::save_form_text(&fx.store, &other, &id, theirs.as_bytes(), None).unwrap();
    let mine = read.replace("(+ (* 100 units) c)", "(+ c (* 100 units))");
    f.seek(SeekFrom::Start(0)).unwrap();
    f.set_len(0).unwrap();
    f.write_all(mine.as_bytes()).unwrap();
    assert_eq!(close(f), Some(libc::EIO), "a conflict fails the close");
    assert!(forms(&fx.store, MONEY)["cents"].1.contains("Theirs."), "the store's version stays");
    assert!(!fx.stored(MONEY).contains("(+ c (* 100 units))"));
    let d = save::draft(&fx.store, &rel).unwrap().expect("a conflict draft");
    assert!(d.error.contains("conflict"), "{}", d.error);
    assert_eq!(fs::read_to_string(&path).unwrap(), mine, "the draft reads back as written");
    assert!(fx.read(".formdb/status").contains("conflict"));

    // Resolved on the current text: committed, the draft goes.
    let resolved = theirs.replace("(+ (* 100 units) c)", "(+ c (* 100 units))");
    assert_eq!(write_file(&path, resolved.as_bytes()), None);
    assert!(save::draft(&fx.store, &rel).unwrap().is_none());
    assert_eq!(fs::read_to_string(&path).unwrap(), resolved);

    // Not UTF-8 and a NUL byte: drafts that read back exactly; the store is unchanged.
    let now = forms(&fx.store, MONEY);
    for bad in [&b"(defn cents [] \xff)\n"[..], &b"(defn cents [] \"\x00\")\n"[..]] {
        assert_eq!(write_file(&path, bad), Some(libc::EINVAL));
        assert_eq!(fs::read(&path).unwrap(), bad);
        assert_eq!(save::draft(&fx.store, &rel).unwrap().unwrap().bytes, bad);
        assert_eq!(forms(&fx.store, MONEY), now);
    }
    assert_eq!(write_file(&path, resolved.as_bytes()), None);

    // The form deleted elsewhere while open here: the text written is kept as a draft.
    let rounding = before["rounding-mode"].0.clone();
    let rrel = format!(".formdb/forms/{rounding}.clj");
    let mut f = OpenOptions::new().read(true).write(true).open(fx.p(&rrel)).unwrap();
    let mut read = String::new();
    f.read_to_string(&mut read).unwrap();
    ops::apply(
        &fx.store,
        &other,
        &[ops::Op::Delete { id: rounding.clone() }],
        ops::Options::default(),
    )
    .unwrap();
    let mine = read.replace(":half-up", ":half-even");
    f.seek(SeekFrom::Start(0)).unwrap();
    f.write_all(mine.as_bytes()).unwrap();
    assert_eq!(close(f), Some(libc::EIO));
    let d = save::draft(&fx.store, &rrel).unwrap().expect("a draft of the deleted form");
    assert_eq!(d.bytes, mine.as_bytes());
    assert!(
        d.error.contains("no form with id") && d.error.contains("deleted since you read it"),
        "{}",
        d.error
    );
    assert_eq!(fs::read_to_string(fx.p(&rrel)).unwrap(), mine);
}

fn mtime(path: &Path) -> std::time::SystemTime {
    fs::metadata(path).unwrap().modified().unwrap()
}

#[test]
fn mtime_moves_once_when_what_a_read_returns_changes_and_never_back() {
    // A watcher polling often, so its invalidations race the stats below many times over.
    let fx = fixture_with(Options { poll: Duration::from_millis(10), ..Default::default() });
    let f = fx.p(MONEY);
    let m0 = mtime(&f);
    assert_eq!(mtime(&f), m0, "no change, same mtime");
    let cart0 = mtime(&fx.p(CART));

    // A save kept as a draft changes what a read returns: the mtime moves, once.
    let bad = b"(ns shop.money)\n(defn broken [x\n";
    assert_eq!(write_file(&f, bad), Some(libc::EINVAL));
    let m1 = mtime(&f);
    assert!(m1 > m0, "a draft moves the mtime: {m0:?} -> {m1:?}");
    // Stats and reads while the watcher sees the change: the same content, the same mtime.
    for _ in 0..30 {
        assert_eq!(fs::read(&f).unwrap(), bad);
        assert_eq!(mtime(&f), m1, "one change, one mtime move");
        std::thread::sleep(Duration::from_millis(5));
    }
    // The same bad bytes saved again: the content a read returns is the same, so is the mtime.
    assert_eq!(write_file(&f, bad), Some(libc::EINVAL));
    assert_eq!(mtime(&f), m1);

    // A good save: moves again.
    let good = fx.stored(MONEY).replace(":half-up", ":half-even");
    assert_eq!(write_file(&f, good.as_bytes()), None);
    let m2 = mtime(&f);
    assert!(m2 > m1);
    // A change made elsewhere: moves; a change to another file does not.
    let other = Writer::new("other", AliasMap::default());
    let elsewhere = good.replace(":half-even", ":ceiling");
    save::save(&fx.store, &other, MONEY, elsewhere.as_bytes(), None).unwrap();
    // (A stat may be answered from a generation read in the last few milliseconds; an open
    // always reads the store's, so read first.)
    assert_eq!(fx.read(MONEY), elsewhere);
    let m3 = mtime(&f);
    assert!(m3 > m2);
    let cart = fx.stored(CART).replace("A printable receipt.", "Receipt.");
    save::save(&fx.store, &other, CART, cart.as_bytes(), None).unwrap();
    assert_eq!(fx.read(CART), cart);
    assert!(mtime(&fx.p(CART)) > cart0);
    for _ in 0..30 {
        assert_eq!(mtime(&f), m3);
        std::thread::sleep(Duration::from_millis(5));
    }

    // A form file: a refused save moves its mtime too.
    let id = forms(&fx.store, MONEY)["cents"].0.clone();
    let form = fx.p(&format!(".formdb/forms/{id}.clj"));
    let f0 = mtime(&form);
    assert_eq!(write_file(&form, b"(defn cents [\n"), Some(libc::EINVAL));
    let f1 = mtime(&form);
    assert!(f1 > f0);
    assert_eq!(mtime(&form), f1);
}

#[test]
fn merge_bases_outlive_other_reads_and_are_kept_while_a_handle_is_open() {
    let fx = fixture_with(Options { merge_bases: 8, ..Default::default() });
    let other = Writer::new("other", AliasMap::default());
    let ids: Vec<String> = [CART, "test/shop/cart_test.clj"]
        .iter()
        .flat_map(|p| forms(&fx.store, p).into_values().map(|(id, _, _)| id))
        .collect();
    assert!(ids.len() >= 8, "{ids:?}");
    let read_forms = |ids: &[String]| {
        for id in ids {
            fs::read(fx.p(&format!(".formdb/forms/{id}.clj"))).unwrap();
        }
    };

    // An atomic writer: read the file, (others read other files meanwhile), write a temp file,
    // rename it onto the name. Someone else changed another form in between: both edits stay,
    // because the text read is still the merge base of the rename.
    read_forms(&ids[..5]);
    let read = fx.read(MONEY);
    read_forms(&ids[5..8]);
    let theirs = read.replace("\"Whole units and cents to cents.\"", "\"Theirs.\"");
    save::save(&fx.store, &other, MONEY, theirs.as_bytes(), None).unwrap();
    let mine = read.replace(":half-up", ":mine");
    let tmp = fx.p("src/shop/.money.clj.tmp");
    fs::write(&tmp, &mine).unwrap();
    fs::rename(&tmp, fx.p(MONEY)).unwrap();
    let text = fx.stored(MONEY);
    assert!(text.contains("\"Theirs.\"") && text.contains(":mine"), "{text}");

    // A reader keeps the file open while many other files are read; a write-only open (`>`)
    // then saves with what that reader was served as its base: the other change stays.
    let mut reader = OpenOptions::new().read(true).open(fx.p(MONEY)).unwrap();
    let mut read = String::new();
    reader.read_to_string(&mut read).unwrap();
    read_forms(&ids);
    read_forms(&ids);
    let theirs = read.replace("\"Theirs.\"", "\"Theirs again.\"");
    save::save(&fx.store, &other, MONEY, theirs.as_bytes(), None).unwrap();
    let mine = read.replace(":mine", ":mine-again");
    let src = fx.dir.path().join("money.new");
    fs::write(&src, &mine).unwrap();
    sh(&format!("cat '{}' > '{}'", src.display(), fx.p(MONEY).display()));
    drop(reader);
    let text = fx.stored(MONEY);
    assert!(text.contains("\"Theirs again.\"") && text.contains(":mine-again"), "{text}");
    assert!(save::drafts(&fx.store).unwrap().is_empty());
}

#[test]
fn changes_made_through_another_store_handle_show_at_the_next_read_busy_or_quiet() {
    let fx = fixture();
    // A second handle on the same store, as the CLI or another process has.
    let elsewhere = Store::open(&fx.tree.join(".formdb")).unwrap();
    let other = Writer::new("other", AliasMap::default());
    let mut text = fx.read(MONEY);
    for (i, mode) in [":a", ":b", ":c", ":d", ":e", ":f"].into_iter().enumerate() {
        if i % 2 == 0 {
            // A quiet spell: long enough for the mount to trust the store's files as they are
            // and skip reading the generation, until a commit moves them.
            std::thread::sleep(Duration::from_millis(300));
            assert_eq!(fx.read(MONEY), text);
            assert_eq!(fx.read(MONEY), text);
        }
        let next = fx
            .stored(MONEY)
            .replace("(defn- rounding-mode [] ", &format!("(defn- rounding-mode [] {mode} "));
        save::save(&elsewhere, &other, MONEY, next.as_bytes(), None).unwrap();
        assert_eq!(fx.read(MONEY), next, "change {i} shows at the next read");
        assert_eq!(fs::metadata(fx.p(MONEY)).unwrap().len(), next.len() as u64);
        text = next;
    }
}

#[test]
fn a_file_read_ahead_with_its_directory_still_shows_a_change_made_before_its_first_read() {
    let fx = fixture();
    let cache = formdb_projector::cache::global();
    assert!(!cache.holds(&fx.store, MONEY), "nothing of money.clj read yet");
    // The first read in src/shop/ reads the files after cart.clj there too, in one script.
    assert_eq!(fx.read(CART), fx.stored(CART));
    assert!(cache.holds(&fx.store, MONEY), "money.clj read ahead with cart.clj");
    // Changed through another handle before its first read: the read shows the change.
    let elsewhere = Store::open(&fx.tree.join(".formdb")).unwrap();
    let other = Writer::new("other", AliasMap::default());
    let next = fx.stored(MONEY).replace("(defn- rounding-mode [] ", "(defn- rounding-mode [] :a ");
    save::save(&elsewhere, &other, MONEY, next.as_bytes(), None).unwrap();
    assert_eq!(fx.read(MONEY), next);
    assert_eq!(fs::metadata(fx.p(MONEY)).unwrap().len(), next.len() as u64);
}

#[test]
fn a_walk_reads_ahead_across_directories_and_a_lone_read_within_its_own() {
    let fx = fixture();
    let cache = formdb_projector::cache::global();
    let test = "test/shop/cart_test.clj";
    let later = "test/shop/zz/later.clj";
    let other = Writer::new("other", AliasMap::default());
    save::save(&fx.store, &other, later, b"(ns shop.zz.later)\n", None).unwrap();
    // A first read reads its directory ahead, not the next one.
    assert_eq!(fx.read(CART), fx.stored(CART));
    assert!(cache.holds(&fx.store, MONEY));
    assert!(!cache.holds(&fx.store, test), "another directory: not read ahead");
    // The file right after what was read ahead: a walk, which reads on across directories
    // (later.clj is in a subdirectory of test/shop/).
    assert_eq!(fx.read(test), fx.stored(test));
    assert!(cache.holds(&fx.store, later), "read ahead with the walk");
    assert_eq!(fx.read(later), "(ns shop.zz.later)\n");
}

/// How many of a file's pages the kernel's page cache holds just after an open (mincore on a
/// mapping): an open that keeps the cache leaves the pages earlier reads put there; any other
/// open drops them.
fn cached_pages_after_open(path: &Path) -> usize {
    use std::os::unix::io::AsRawFd;
    let f = fs::File::open(path).unwrap();
    let len = f.metadata().unwrap().len() as usize;
    assert!(len > 0);
    // SAFETY: a read-only mapping of an open file, unmapped before return; `pages` has one byte
    // per page of it, as mincore needs.
    unsafe {
        let addr = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        );
        assert_ne!(addr, libc::MAP_FAILED, "mmap: {}", std::io::Error::last_os_error());
        let mut pages = vec![0u8; len.div_ceil(4096)];
        let rc = libc::mincore(addr, len, pages.as_mut_ptr());
        libc::munmap(addr, len);
        assert_eq!(rc, 0, "mincore: {}", std::io::Error::last_os_error());
        pages.iter().filter(|p| **p & 1 == 1).count()
    }
}

#[test]
fn a_warm_read_keeps_the_page_cache_only_while_the_bytes_are_the_same() {
    // A watcher that never runs in the test: the opens alone must keep reads right.
    let fx = fixture_with(Options { poll: Duration::from_secs(600), ..Default::default() });
    let f = fx.p(MONEY);
    let text = fx.read(MONEY);
    assert_eq!(fx.read(MONEY), text);
    assert!(cached_pages_after_open(&f) > 0, "an open serving the same bytes keeps the pages");

    // Changed elsewhere to the same length: neither the size nor anything else tells the
    // kernel its pages are stale; the open must drop them.
    let other = Writer::new("other", AliasMap::default());
    let theirs = text.replace(":half-up", ":half-UP");
    assert!(theirs != text && theirs.len() == text.len());
    save::save(&fx.store, &other, MONEY, theirs.as_bytes(), None).unwrap();
    assert_eq!(cached_pages_after_open(&f), 0, "an open serving new bytes drops the pages");
    assert_eq!(fx.read(MONEY), theirs);
    assert_eq!(fx.read(MONEY), theirs);

    // A handle still serving the old bytes reads after a newer open: its pages go into the
    // same cache, so a later open of the newer bytes must not trust it.
    let mut old = fs::File::open(&f).unwrap();
    let mut buf = String::new();
    old.read_to_string(&mut buf).unwrap();
    let newer = theirs.replace(":half-UP", ":half-DN");
    assert_eq!(newer.len(), text.len());
    save::save(&fx.store, &other, MONEY, newer.as_bytes(), None).unwrap();
    let new = fs::File::open(&f).unwrap();
    old.seek(SeekFrom::Start(0)).unwrap();
    buf.clear();
    old.read_to_string(&mut buf).unwrap();
    drop((old, new));
    assert_eq!(fx.read(MONEY), newer, "the next open reads the newest bytes");

    // Written through the mount, the same length: read back as written.
    let mine = newer.replace(":half-DN", ":half-up");
    assert_eq!(write_file(&f, mine.as_bytes()), None);
    assert_eq!(fx.read(MONEY), mine);
    assert_eq!(fx.stored(MONEY), mine);
}

#[test]
fn a_walk_from_the_root_lists_no_form_or_oneline_files_which_still_resolve_by_path() {
    let fx = fixture();
    let mnt = fx.mnt.to_string_lossy().to_string();
    let found = sh(&format!("find '{mnt}'"));
    let found: Vec<String> = String::from_utf8_lossy(&found.stdout)
        .lines()
        .map(|l| l.strip_prefix(&mnt).unwrap_or(l).trim_start_matches('/').to_string())
        .collect();
    let under_meta: Vec<&String> = found.iter().filter(|p| p.starts_with(".formdb/")).collect();
    assert_eq!(
        under_meta,
        [".formdb/forms", ".formdb/oneline", ".formdb/status"],
        "a walk from the root sees .formdb's three entries and nothing under forms/ or oneline/"
    );
    let files = relative_files(&fx.tree);
    for f in &files {
        assert!(found.contains(f), "find lists {f}: {found:?}");
    }

    // grep -r finds each match once: in the file, not again in its form or oneline view.
    let grep = run(Command::new("grep").arg("-r").arg("-l").arg("defn cents").arg(&fx.mnt));
    let hits = String::from_utf8_lossy(&grep.stdout).to_string();
    assert_eq!(hits.lines().count(), 1, "{hits}");
    assert!(hits.trim_end().ends_with(MONEY), "{hits}");

    // Every path still resolves: a form file, a oneline view, a oneline directory's listing.
    let (id, src, _) = forms(&fx.store, MONEY)["cents"].clone();
    let cat = sh(&format!("cat '{mnt}/.formdb/forms/{id}.clj'"));
    assert_eq!(String::from_utf8_lossy(&cat.stdout), format!("{src}\n"));
    let oneline = fx.read(&format!(".formdb/oneline/{MONEY}"));
    assert_eq!(oneline, formdb_projector::views::oneline_text(&fx.stored(MONEY)));
    let listed = listed(&fx.p(".formdb/oneline/src/shop"));
    assert!(listed.contains(&"money.clj".to_string()), "{listed:?}");
    assert_eq!(fs::read_dir(fx.p(".formdb/forms")).unwrap().count(), 0);
    assert_eq!(fs::read_dir(fx.p(".formdb/oneline")).unwrap().count(), 0);
}

#[test]
fn names_over_name_max_and_paths_over_path_max_are_enametoolong() {
    let fx = fixture();
    let errno = |r: std::io::Result<()>| r.err().and_then(|e| e.raw_os_error());
    let long = format!("{}.clj", "n".repeat(252)); // 256 bytes
    let at = fx.p("src/shop").join(&long);
    let created = OpenOptions::new().write(true).create(true).truncate(true).open(&at);
    assert_eq!(errno(created.map(drop)), Some(libc::ENAMETOOLONG), "create");
    assert_eq!(errno(fs::create_dir(fx.p("src").join("d".repeat(256)))), Some(libc::ENAMETOOLONG));
    assert_eq!(errno(fs::rename(fx.p(MONEY), &at)), Some(libc::ENAMETOOLONG), "rename");
    let c = CString::new(at.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    let rc = unsafe { libc::mknod(c.as_ptr(), libc::S_IFREG | 0o644, 0) };
    assert_eq!(rc, -1);
    assert_eq!(std::io::Error::last_os_error().raw_os_error(), Some(libc::ENAMETOOLONG), "mknod");
    assert!(!store_paths(&fx.store).iter().any(|p| p.contains("nnnn")), "nothing stored");
    assert!(fx.p(MONEY).is_file(), "the rename changed nothing");

    // A path longer than PATH_MAX out of names that each fit, made one level at a time from
    // the directory above (the kernel would refuse the whole path itself).
    let name = CString::new("d".repeat(250)).unwrap();
    let src = CString::new(fx.p("src").as_os_str().as_bytes()).unwrap();
    // SAFETY: plain openat/mkdirat/close on descriptors this test opens and closes.
    let (levels, made) = unsafe {
        let mut dir = libc::open(src.as_ptr(), libc::O_DIRECTORY | libc::O_RDONLY);
        let mut levels = 0;
        let made = loop {
            if levels == 30 || libc::mkdirat(dir, name.as_ptr(), 0o755) != 0 {
                break std::io::Error::last_os_error().raw_os_error();
            }
            levels += 1;
            let next = libc::openat(dir, name.as_ptr(), libc::O_DIRECTORY | libc::O_RDONLY);
            libc::close(dir);
            dir = next;
        };
        libc::close(dir);
        (levels, made)
    };
    assert_eq!(made, Some(libc::ENAMETOOLONG), "mkdir past PATH_MAX, after {levels} levels");
    assert_eq!(levels, (4096 - "src/".len()) / 251, "every level that fits is made");

    // 255 bytes is a name like any other.
    let fits = format!("{}.clj", "m".repeat(251));
    assert_eq!(write_file(&fx.p("src/shop").join(&fits), b"(ns shop.long)\n(def x 1)\n"), None);
    assert!(store_paths(&fx.store).contains(&format!("src/shop/{fits}")));
}

#[test]
fn a_refused_save_fails_with_einval_in_vim_and_an_append_fails_in_the_shell() {
    let fx = fixture();
    let before = forms(&fx.store, MONEY);
    let stored = fx.stored(MONEY);

    // `echo … >> f`: the shell ignores close; the write itself fails, and nothing is kept.
    let money = fx.p(MONEY);
    let out = run(Command::new("bash")
        .arg("-c")
        .arg(format!("echo '(defn broken [x' >> '{}'", money.display())));
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(1), "bash reports the failed append: {err}");
    assert!(err.contains("write error: Invalid argument"), "{err}");
    assert_eq!(fx.stored(MONEY), stored, "the store is unchanged");
    assert!(save::drafts(&fx.store).unwrap().is_empty(), "no draft: nothing was written");
    assert_eq!(fx.read(MONEY), stored, "reads back as before");
    let status = fx.read(".formdb/status");
    assert!(status.contains(&format!("append refused, nothing written: {MONEY}:")), "{status}");
    // An append that parses is saved.
    sh(&format!("echo '(def appended 1)' >> '{}'", money.display()));
    assert!(fx.stored(MONEY).ends_with("(def appended 1)\n"));
    let appended = fx.stored(MONEY);

    // vim: the failed close says the text was refused (EINVAL), and vim says the write failed.
    let mut c = Command::new("vim");
    // `-V1`: the messages `-s` would silence.
    c.env("HOME", fx.dir.path()).arg("-E").arg("-s").arg("-V1");
    for x in ["%s/(defn cents/(defn cents [[/", "wq"] {
        c.arg("-c").arg(x);
    }
    let out = run(c.arg(&money));
    let said =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    eprintln!("vim on a refused save says: {said}");
    assert!(!out.status.success(), "vim fails the write: {said}");
    assert!(said.contains("E667") || said.contains("E512"), "{said}");
    assert_eq!(fx.stored(MONEY), appended, "the store is unchanged");
    // vim puts its backup back after a failed write: the name reads the stored text again, or,
    // when the refused text's draft is still the newest thing written under the name, that
    // draft (the refused bytes, kept exactly). Nothing is lost either way.
    let now = fx.read(MONEY);
    let drafted = save::draft(&fx.store, MONEY).unwrap().map(|d| d.bytes);
    assert!(
        now == appended || drafted.as_deref() == Some(now.as_bytes()),
        "the name reads the stored text or the refused text's draft: {now:?}"
    );
    assert_eq!(forms(&fx.store, MONEY).len(), before.len() + 1);
    // A plain write and close of the same text: close fails with EINVAL, the text is a draft.
    let broken = appended.replace("(defn cents", "(defn cents [[");
    assert_eq!(write_file(&money, broken.as_bytes()), Some(libc::EINVAL));
    let draft = save::draft(&fx.store, MONEY).unwrap().expect("kept as a draft");
    assert!(draft.line > 0, "{draft:?}");
}

/// `echo … >> f` on a file past the size agent source may be (`syntax::MAX_FORM_BYTES`): the
/// write-time check reads the file as a save does, in runs, so a form appended to a big file is
/// saved, and one that does not parse fails the write with its place (the check once refused
/// every append to a big file as "longer than one edit may send").
#[test]
fn an_append_to_a_big_file_is_checked_as_a_save_reads_it() {
    let fx = fixture();
    let path = "src/shop/big.clj";
    let mut text = String::from("(ns shop.big)\n");
    let mut n = 0;
    while text.len() <= formdb_engine::syntax::MAX_FORM_BYTES + (64 << 10) {
        text.push_str(&format!("(defn f{n}\n  \"Doc {n}.\"\n  [x]\n  (+ x {n}))\n\n"));
        n += 1;
    }
    assert_eq!(write_file(&fx.p(path), text.as_bytes()), None);
    let big = fx.p(path);
    sh(&format!("echo '(def appended 1)' >> '{}'", big.display()));
    let stored = fx.stored(path);
    assert_eq!(stored, format!("{text}(def appended 1)\n"));
    let out = run(Command::new("bash")
        .arg("-c")
        .arg(format!("echo '(defn broken [x' >> '{}'", big.display())));
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(fx.stored(path), stored, "the store is unchanged");
    let line = stored.lines().count() + 1;
    let status = fx.read(".formdb/status");
    assert!(
        status.contains(&format!("append refused, nothing written: {path}:{line}:1: unclosed")),
        "{status}"
    );
}

/// A rewrite with `O_TRUNC` while an earlier handle of the file is still open after its last
/// save (a dup kept open here; a release the kernel has not sent yet in real use): the kernel
/// sends the truncation as a `setattr` naming no handle, and it empties the new handle only.
/// It used to empty the earlier one too, whose release then saved the empty text.
#[test]
fn a_truncating_rewrite_leaves_an_earlier_open_handle_alone() {
    let mut fx = fixture();
    let cash = fx.p(CART);
    let first = fx.read(CART).replace("(ns shop.cart", "(ns shop.cart\n  ;; one");
    let mut earlier = OpenOptions::new().write(true).truncate(true).open(&cash).unwrap();
    earlier.write_all(first.as_bytes()).unwrap();
    let kept_open = earlier.try_clone().unwrap();
    assert_eq!(close(earlier), None, "the first save");
    assert_eq!(fx.stored(CART), first);
    let second = first.replace(";; one", ";; two");
    assert_eq!(write_file(&cash, second.as_bytes()), None, "the second save");
    assert_eq!(close(kept_open), None, "the earlier handle's last close");
    // Its release comes after close returns; the unmount waits for it.
    fx.unmount();
    assert_eq!(fx.stored(CART), second, "the second save stays");
}

/// A file with a draft the sync left (a conflict: the store's older text, written from nothing
/// known) serves the draft; a save of it merges form by form with what the store took since,
/// as any save does, instead of putting every form of the draft back.
#[test]
fn a_save_of_a_served_conflict_draft_keeps_what_the_store_took_since() {
    let fx = fixture();
    let old = fx.stored(CART);
    let newer = old.replace("(def ^:dynamic *tax-rate* 8)", "(def ^:dynamic *tax-rate* 9)");
    assert_ne!(old, newer);
    save::save(&fx.store, &Writer::new("agent", AliasMap::default()), CART, newer.as_bytes(), None)
        .unwrap();
    let draft = formdb_engine::change::Draft {
        path: CART.into(),
        user: "sync".into(),
        bytes: old.clone().into_bytes(),
        error: "conflict: the working directory's text is stored, this draft holds the store's"
            .into(),
        line: 0,
        col: 0,
        base: Vec::new(),
    };
    let set = formdb_engine::change::ChangeSet {
        author: "sync".into(),
        op: "sync".into(),
        changes: vec![formdb_engine::change::Change::PutDraft(draft)],
    };
    formdb_engine::change::apply(&fx.store, &set).unwrap();
    let served = fx.read(CART);
    assert_eq!(served, old, "the mount serves the draft");
    let edited = served.replace("Price times quantity", "Unit price times quantity");
    assert_eq!(write_file(&fx.p(CART), edited.as_bytes()), None);
    let stored = fx.stored(CART);
    assert!(stored.contains("Unit price times quantity"), "the edit is saved: {stored}");
    assert!(
        stored.contains("*tax-rate* 9)"),
        "the store's later text of another form stays: {stored}"
    );
}

#[test]
fn sizes_are_cached_yet_an_open_reads_the_whole_text_changed_elsewhere() {
    // A watcher that never runs: the opens alone must keep reads and listings right.
    let fx = fixture_with(Options { poll: Duration::from_secs(600), ..Default::default() });
    let other = Writer::new("other", AliasMap::default());
    let text = fx.read(MONEY);
    let told = fs::metadata(fx.p(MONEY)).unwrap().len();
    assert_eq!(told, text.len() as u64);
    // Longer, changed elsewhere: the kernel still holds the old size, which would end a read
    // there; the open that serves the new bytes drops it.
    let longer =
        format!("{text}\n(def added-elsewhere\n  \"a form the kernel was not told of\")\n");
    save::save(&fx.store, &other, MONEY, longer.as_bytes(), None).unwrap();
    let mut f = fs::File::open(fx.p(MONEY)).unwrap();
    assert_eq!(f.metadata().unwrap().len(), longer.len() as u64, "fstat after the open");
    let mut read = String::new();
    f.read_to_string(&mut read).unwrap();
    assert_eq!(read, longer, "the whole new text, not the old size of it");
}

#[test]
fn a_directory_that_goes_elsewhere_goes_from_the_mount_within_the_watchers_poll() {
    let fx = fixture_with(Options { poll: Duration::from_millis(20), ..Default::default() });
    let other = Writer::new("other", AliasMap::default());
    let file = "src/shop/gone/soon.clj";
    save::save(&fx.store, &other, file, b"(ns shop.gone.soon)\n", None).unwrap();
    wait_for(|| fx.p(file).exists(), "the new file to show");
    assert!(fx.p("src/shop/gone").is_dir());
    // Listings are kept by the kernel until it is told they changed.
    let before = listed(&fx.p("src/shop"));
    assert_eq!(listed(&fx.p("src/shop")), before);
    save::save(&fx.store, &other, "src/shop/extra.clj", b"(ns shop.extra)\n", None).unwrap();
    wait_for(|| listed(&fx.p("src/shop")).contains(&"extra.clj".to_string()), "extra.clj listed");
    assert_eq!(listed(&fx.p("src/shop")).len(), before.len() + 1);
    save::delete(&fx.store, &other, file).unwrap();
    // Names are cached for seconds: the watcher must drop the directory's name with its file.
    let deadline = Instant::now() + Duration::from_secs(3);
    while fx.p("src/shop/gone").exists() || listed(&fx.p("src/shop")).contains(&"gone".to_string())
    {
        assert!(Instant::now() < deadline, "src/shop/gone still shows after its last file went");
        std::thread::sleep(Duration::from_millis(20));
    }
    // And a stat made after the watcher's poll sees a size changed elsewhere.
    let text = fx.read(MONEY);
    let shorter = text.replace("(defn- rounding-mode [] :half-up)", "");
    assert!(shorter.len() < text.len());
    save::save(&fx.store, &other, MONEY, shorter.as_bytes(), None).unwrap();
    wait_for(
        || fs::metadata(fx.p(MONEY)).unwrap().len() == shorter.len() as u64,
        "the new size at a stat",
    );
}

/// `default` rounds, or `FORMDB_RANDOM_ROUNDS`.
fn random_runs(default: u64) -> u64 {
    formdb_testkit::random_rounds(default)
}

/// A seeded generator of numbers below `n`, from `FORMDB_RANDOM_SEED` or `default`: the same
/// seed makes the same calls, so a failure is replayed exactly.
fn seeded(default: u64) -> impl FnMut(usize) -> usize {
    let mut gen = formdb_testkit::Seeded::from_env(default);
    move |n: usize| gen.below(n)
}

/// Writes through the mount as a program makes them on a disk file (writes at any offset,
/// truncations, appends, opens with and without `O_TRUNC`), generated from a seed, checked
/// against a byte vector given the same calls: after each `close`, the file reads back as the
/// vector, through the mount and from the store (its stored text, or its draft when the bytes
/// do not parse), whatever the bytes.
#[test]
fn generated_writes_read_back_as_on_a_disk() {
    use std::os::unix::fs::FileExt;
    let fx = fixture();
    let pieces: &[&str] = &[
        "(defn f [x] x)\n",
        "(def a 1)\n",
        "(ns shop.rnd)\n",
        "\n\n",
        "(",
        ")",
        "]",
        "\"",
        ";; c\n",
        "é",
        "λ",
        "🙂",
        "(defn g\n  [y]\n  (+ y 1))\n",
        "#_",
        "\u{0}",
        "\r\n",
        "(comment (f 1))\n",
        "{:a [1 2]}",
        "x",
        " ",
    ];
    let runs = random_runs(300);
    let mut below = seeded(0x9E37_79B9_7F4A_7C15);
    for round in 0..runs {
        let rel = ["src/shop/rnd.clj", CART, "src/shop/rnd2.cljc"][below(3)];
        let mut model: Vec<u8> = fs::read(fx.p(rel)).unwrap_or_default();
        let truncate = below(3) == 0;
        let append = !truncate && below(5) == 0;
        let f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(truncate)
            .append(append)
            .open(fx.p(rel))
            .unwrap();
        if truncate {
            model.clear();
        }
        let mut calls = Vec::new();
        for _ in 0..1 + below(4) {
            match below(5) {
                0 => {
                    let len = below(model.len() + 12);
                    f.set_len(len as u64).unwrap();
                    model.resize(len, 0);
                    calls.push(format!("set_len({len})"));
                }
                _ => {
                    let mut data = String::new();
                    for _ in 0..1 + below(4) {
                        data.push_str(pieces[below(pieces.len())]);
                    }
                    if append {
                        // A short append that leaves a text that does not parse is refused
                        // at the write (see `append_refusal`): nothing of it is kept.
                        match (&f).write_all(data.as_bytes()) {
                            Ok(()) => {
                                model.extend_from_slice(data.as_bytes());
                                calls.push(format!("append({data:?})"));
                            }
                            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                                calls.push(format!("append({data:?}) refused"));
                            }
                            Err(e) => panic!("round {round}: append to {rel}: {e}"),
                        }
                    } else {
                        let at = below(model.len() + 1);
                        f.write_all_at(data.as_bytes(), at as u64).unwrap();
                        let end = at + data.len();
                        if model.len() < end {
                            model.resize(end, 0);
                        }
                        model[at..end].copy_from_slice(data.as_bytes());
                        calls.push(format!("write_at({at}, {data:?})"));
                    }
                }
            }
        }
        drop(f);
        let shown = fs::read(fx.p(rel)).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&shown),
            String::from_utf8_lossy(&model),
            "round {round}: {rel} after open(truncate {truncate}, append {append}) and {calls:?}"
        );
        let kept = match save::draft(&fx.store, rel).unwrap() {
            Some(d) => d.bytes,
            None => fx.stored(rel).into_bytes(),
        };
        assert_eq!(kept, model, "round {round}: the store keeps other bytes after {calls:?}");
    }
}

/// A file truncated and closed with nothing written (`: > f`, `open(f, 'w').close()`, an
/// `ftruncate` before `close`) reads back truncated at once. The truncation is committed at
/// the release, which the kernel sends after `close` has returned: the next open came first
/// and read the old text.
#[test]
fn a_truncation_closed_reads_back_at_once() {
    let fx = fixture();
    let other = Writer::new("other", AliasMap::default());
    let rel = "src/shop/cut.clj";
    for round in 0..20 {
        let text = format!("(ns shop.cut)\n\n(def round {round})\n");
        save::save(&fx.store, &other, rel, text.as_bytes(), None).unwrap();
        wait_for(|| fs::read(fx.p(rel)).is_ok_and(|b| b == text.as_bytes()), "the saved text");
        // `: > f`: opened truncating, closed.
        drop(OpenOptions::new().write(true).truncate(true).open(fx.p(rel)).unwrap());
        assert_eq!(fx.read(rel), "", "round {round}: the truncated file read back otherwise");
        // `: > f; echo … >> f`: the append goes after nothing.
        save::save(&fx.store, &other, rel, text.as_bytes(), None).unwrap();
        wait_for(|| fs::read(fx.p(rel)).is_ok_and(|b| b == text.as_bytes()), "the saved text");
        drop(OpenOptions::new().write(true).truncate(true).open(fx.p(rel)).unwrap());
        let mut f = OpenOptions::new().append(true).open(fx.p(rel)).unwrap();
        f.write_all(b"(ns shop.cut)\n").unwrap();
        drop(f);
        assert_eq!(fx.read(rel), "(ns shop.cut)\n", "round {round}: appended after a truncation");
        save::save(&fx.store, &other, rel, text.as_bytes(), None).unwrap();
        wait_for(|| fs::read(fx.p(rel)).is_ok_and(|b| b == text.as_bytes()), "the saved text");
        // A program that shortens a file and closes it.
        let f = OpenOptions::new().write(true).open(fx.p(rel)).unwrap();
        f.set_len(14).unwrap();
        drop(f);
        assert_eq!(fx.read(rel), "(ns shop.cut)\n", "round {round}: the shortened file");
        assert_eq!(fx.stored(rel), "(ns shop.cut)\n", "round {round}: the store");
    }
}

/// Files made, written, renamed over each other and removed through the mount, generated
/// from a seed, checked against a map of byte vectors given the same calls: after each call,
/// every path exists through the mount exactly when it is in the map, with its bytes.
#[test]
fn generated_renames_and_removes_keep_every_file_as_on_a_disk() {
    use std::collections::HashMap;
    let fx = fixture();
    let names = ["src/shop/r1.clj", "src/shop/r2.clj", "src/shop/r3.cljc", "src/shop/sub/r4.clj"];
    fs::create_dir_all(fx.p("src/shop/sub")).unwrap();
    let texts: &[&str] = &[
        "(ns shop.r1)\n(defn f [x] x)\n",
        "(ns shop.r2)\n\n(def a 1)\n",
        "(ns shop.r3)\n(defn g [y]\n  (+ y 1))\n",
        "(ns shop.r4)\n",
        "(def loose 1)\n",
        "(ns shop.broken\n",
        ";; only a comment\n",
        "",
        "(ns shop.r1)\n(defn f [x] (inc x))\n",
    ];
    let runs = random_runs(200);
    let mut below = seeded(0x2545_F491_4F6C_DD1D);
    let mut model: HashMap<&str, Vec<u8>> = HashMap::new();
    for round in 0..runs {
        let (p, q) = (names[below(names.len())], names[below(names.len())]);
        let call = match below(6) {
            0..=2 => {
                let t = texts[below(texts.len())];
                fs::write(fx.p(p), t).unwrap();
                model.insert(p, t.as_bytes().to_vec());
                format!("write {p} {t:?}")
            }
            3 | 4 if model.contains_key(p) => {
                fs::rename(fx.p(p), fx.p(q)).unwrap();
                let bytes = model.remove(p).unwrap();
                model.insert(q, bytes);
                format!("rename {p} {q}")
            }
            _ if model.contains_key(p) => {
                fs::remove_file(fx.p(p)).unwrap();
                model.remove(p);
                format!("remove {p}")
            }
            _ => continue,
        };
        for name in names {
            let shown = fs::read(fx.p(name)).ok();
            assert_eq!(
                shown.as_deref().map(String::from_utf8_lossy),
                model.get(name).map(|b| String::from_utf8_lossy(b)),
                "round {round}: {name} after {call}"
            );
        }
    }
}

/// A draft-only file (a new file whose text was refused) renamed over a stored file replaces
/// it, as on a disk: the stored file at the new name used to stay under the draft, and the
/// next save there was merged with its old forms (`(def loose 1)` came back in front of the
/// text written).
#[test]
fn a_draft_renamed_over_a_stored_file_replaces_it() {
    let fx = fixture();
    let (from, to) = ("src/shop/r1.clj", "src/shop/r3.cljc");
    fs::write(fx.p(to), "(def loose 1)\n").unwrap();
    // Refused: `shop.money` is declared by money.clj.
    fs::write(fx.p(from), "(ns shop.money)\n").unwrap();
    assert!(save::draft(&fx.store, from).unwrap().is_some());
    fs::rename(fx.p(from), fx.p(to)).unwrap();
    assert_eq!(fx.read(to), "(ns shop.money)\n");
    assert!(fs::read(fx.p(from)).is_err());
    let text = "(ns shop.r3)\n(defn g [y] y)\n";
    fs::write(fx.p(to), text).unwrap();
    assert_eq!(fx.read(to), text);
    assert_eq!(fx.stored(to), text);
    assert!(save::draft(&fx.store, to).unwrap().is_none());
}

/// A file the store holds empty, given a text that is refused (a draft with an empty base),
/// then the same text again: the draft stays, and so do the bytes. Its empty base was taken
/// for "unknown" and the draft itself served as the base; the second save then found nothing
/// changed, kept the store's empty text and dropped the draft with the bytes just written.
#[test]
fn a_draft_of_an_empty_file_saved_again_keeps_its_bytes() {
    let fx = fixture();
    let rel = "src/shop/r2.clj";
    let refused = "(ns shop.money)\n(defn f [x] (inc x))\n";
    // A file created and never written is committed at its release.
    fs::write(fx.p(rel), "").unwrap();
    wait_for(
        || formdb_projector::views::stored_text(&fx.store, rel).is_ok_and(|t| t.is_empty()),
        "the empty file in the store",
    );
    for round in 0..3 {
        fs::write(fx.p(rel), refused).unwrap();
        assert_eq!(fx.read(rel), refused, "round {round}");
        let draft = save::draft(&fx.store, rel).unwrap().expect("the refused text is a draft");
        assert_eq!(draft.bytes, refused.as_bytes(), "round {round}");
        assert_eq!(fx.stored(rel), "", "round {round}");
    }
}

/// Directories made and renamed, and files written, moved between them and removed, through
/// the mount, generated from a seed, checked against a map of byte vectors and a set of
/// directories given the same calls: after each call, every path and directory exists
/// through the mount exactly when the model has it, with its bytes.
#[test]
fn generated_directory_moves_keep_every_file_as_on_a_disk() {
    use std::collections::BTreeSet;
    let fx = fixture();
    let dirs = ["src/x/a", "src/x/b", "src/x/a/c", "src/y"];
    let files = ["f.clj", "g.cljc", "h.edn"];
    let texts =
        ["(ns x.f)\n(defn f [] 1)\n", "(def a 1)\n", "(ns broken\n", "", "{:a 1}\n", ";; c\n"];
    let runs = random_runs(300);
    let mut below = seeded(7);
    let mut model: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut made: BTreeSet<String> = BTreeSet::new();
    let under = |d: &str, p: &str| p == d || p.starts_with(&format!("{d}/"));
    let parent = |p: &str| p.rsplit_once('/').map_or("", |(d, _)| d).to_string();
    for round in 0..runs {
        let d = dirs[below(dirs.len())];
        let f = format!("{d}/{}", files[below(files.len())]);
        let call = match below(7) {
            0..=2 if made.contains(d) => {
                let t = texts[below(texts.len())];
                fs::write(fx.p(&f), t).unwrap();
                model.insert(f.clone(), t.as_bytes().to_vec());
                format!("write {f} {t:?}")
            }
            3 if !made.contains(d) => {
                fs::create_dir_all(fx.p(d)).unwrap();
                let mut at = String::from("src");
                for part in d.split('/').skip(1) {
                    at = format!("{at}/{part}");
                    made.insert(at.clone());
                }
                format!("mkdir -p {d}")
            }
            4 => {
                let to = dirs[below(dirs.len())];
                let to_parent = parent(to);
                if !made.contains(d)
                    || made.contains(to)
                    || under(d, to)
                    || (to_parent != "src" && !made.contains(&to_parent))
                {
                    continue;
                }
                fs::rename(fx.p(d), fx.p(to)).unwrap();
                let moved = |p: &String| format!("{to}{}", &p[d.len()..]);
                model = model
                    .into_iter()
                    .map(|(p, b)| (if under(d, &p) { moved(&p) } else { p }, b))
                    .collect();
                made = made.into_iter().map(|p| if under(d, &p) { moved(&p) } else { p }).collect();
                format!("mv {d} {to}")
            }
            5 if model.contains_key(&f) => {
                fs::remove_file(fx.p(&f)).unwrap();
                model.remove(&f);
                format!("rm {f}")
            }
            6 if model.contains_key(&f) => {
                let to = format!("{}/{}", dirs[below(dirs.len())], files[below(files.len())]);
                if !made.contains(&parent(&to)) {
                    continue;
                }
                fs::rename(fx.p(&f), fx.p(&to)).unwrap();
                let bytes = model.remove(&f).unwrap();
                model.insert(to.clone(), bytes);
                format!("mv {f} {to}")
            }
            _ => continue,
        };
        for d in dirs {
            assert_eq!(
                fx.p(d).is_dir(),
                made.contains(d),
                "round {round}: directory {d} after {call}"
            );
            for name in files {
                let path = format!("{d}/{name}");
                assert_eq!(
                    fs::read(fx.p(&path)).ok().as_deref().map(String::from_utf8_lossy),
                    model.get(&path).map(|b| String::from_utf8_lossy(b)),
                    "round {round}: {path} after {call}"
                );
            }
        }
    }
}
