//! Writers other than `formdb up` and the working directory the store was imported from, with
//! the real binary, real files and real git: a standalone `formdb mcp` (a real rmcp stdio
//! client) and `formdb fmt` write their changes back before they answer, and `formdb import`
//! after them reverts nothing; while `formdb up` owns the store every other writer is refused;
//! write-back never leaves the directory through a symbolic link.

mod support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use serde_json::{json, Value};
use support::{copy_dir, formdb, git, read, BIN};

/// `examples/shop` (plus `extra` files) committed in a fresh git repository.
fn repo(tmp: &Path, extra: &[(&str, &str)]) -> PathBuf {
    let dir = tmp.join("shop");
    copy_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/shop"), &dir);
    for (rel, text) in extra {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    git(&dir, &["init", "-q"]);
    git(&dir, &["add", "-A"]);
    git(&dir, &["commit", "-qm", "shop"]);
    dir
}

fn run(cwd: &Path, args: &[&str]) -> Output {
    Command::new(BIN).args(args).current_dir(cwd).output().unwrap()
}

fn stored(dir: &Path, ns: &str) -> String {
    formdb(dir, &["view", ns])
}

type Client = RunningService<RoleClient, ()>;

async fn standalone_mcp(dir: &Path) -> Client {
    let cmd = tokio::process::Command::new(BIN).configure(|c| {
        c.args(["mcp", "--user", "agent"]).current_dir(dir);
    });
    ().serve(TokioChildProcess::new(cmd).unwrap()).await.expect("formdb mcp starts")
}

async fn call(c: &Client, tool: &str, args: Value) -> (bool, Value) {
    let r = c
        .call_tool(
            CallToolRequestParams::new(tool.to_string())
                .with_arguments(args.as_object().cloned().unwrap_or_default()),
        )
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}"));
    let text = r.content.first().and_then(|c| c.as_text()).map(|t| t.text.clone());
    let v = r.structured_content.clone().unwrap_or_else(|| json!(text));
    (r.is_error != Some(true), v)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standalone_mcp_rename_reaches_the_files_and_a_later_import_keeps_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = repo(tmp.path(), &[]);
    formdb(&dir, &["import", "."]);
    assert_eq!(git(&dir, &["status", "--porcelain", "--untracked-files=no"]), "");

    let c = standalone_mcp(&dir).await;
    let (ok, r) = call(
        &c,
        "rename_symbol",
        json!({"symbol": "shop.cart/line-total", "new_name": "item-total"}),
    )
    .await;
    assert!(ok, "{r}");
    // Written before the reply: no waiting.
    let status = git(&dir, &["status", "--porcelain", "--untracked-files=no"]);
    assert!(status.contains("src/shop/cart.clj"), "the rename reached DIR: {status:?}");
    let cart = read(&dir.join("src/shop/cart.clj"));
    assert!(cart.contains("(defn item-total") && !cart.contains("line-total"), "{cart}");
    assert_eq!(cart, stored(&dir, "shop.cart"), "DIR holds the as-stored text");
    c.cancel().await.unwrap();

    formdb(&dir, &["import", "."]);
    assert!(stored(&dir, "shop.cart").contains("(defn item-total"), "import did not revert it");
    assert_eq!(read(&dir.join("src/shop/cart.clj")), cart);
    formdb(&dir, &["show", "shop.cart/item-total"]);
}

const UGLY: &str = "(ns shop.ugly)\n\n(defn f [x]\n(inc x))\n";

#[test]
fn fmt_writes_its_layout_to_the_files_and_a_later_import_keeps_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = repo(tmp.path(), &[("src/shop/ugly.clj", UGLY)]);
    formdb(&dir, &["import", "."]);
    formdb(&dir, &["fmt", "shop.ugly"]);
    let laid = read(&dir.join("src/shop/ugly.clj"));
    assert_ne!(laid, UGLY, "fmt changed the file in DIR");
    assert_eq!(laid, stored(&dir, "shop.ugly"));
    let status = git(&dir, &["status", "--porcelain", "--untracked-files=no"]);
    assert_eq!(status.trim(), "M src/shop/ugly.clj");

    formdb(&dir, &["import", "."]);
    assert_eq!(stored(&dir, "shop.ugly"), laid, "import did not revert the layout");
}

const UGLY2: &str = "(ns shop.ugly)\n\n(defn f [x]\n(inc x))\n\n(defn h [x]\n(dec x))\n";

#[test]
fn import_merges_store_edits_with_disk_edits_form_by_form_and_reports_conflicts() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = repo(tmp.path(), &[("src/shop/ugly.clj", UGLY2)]);
    let db = tmp.path().join("elsewhere");
    let db_arg = db.to_str().unwrap();
    let dir_arg = dir.to_str().unwrap();
    formdb(tmp.path(), &["--db", db_arg, "import", dir_arg]);
    let f_id = formdb(tmp.path(), &["--db", db_arg, "--json", "show", "shop.ugly/f"]);
    let f_id = serde_json::from_str::<Value>(&f_id).unwrap()["id"].as_str().unwrap().to_string();

    // The directory is away while a standalone writer changes the store: the writer says that
    // nothing reached it.
    let away = tmp.path().join("away");
    std::fs::rename(&dir, &away).unwrap();
    let out = run(tmp.path(), &["--db", db_arg, "fmt", "shop.ugly"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("the directory is gone"), "{stderr}");
    std::fs::rename(&away, &dir).unwrap();
    let laid = formdb(tmp.path(), &["--db", db_arg, "view", "shop.ugly"]);
    assert_ne!(laid, UGLY2, "fmt changed the store");
    let h_laid = laid[laid.find("(defn h").unwrap()..].trim_end().to_string();
    assert_ne!(h_laid, "(defn h [x]\n(dec x))", "{laid}");
    assert_eq!(read(&dir.join("src/shop/ugly.clj")), UGLY2);

    // Meanwhile in DIR: f changed too (a real conflict), g is new.
    let disk = UGLY2.replace("(defn f [x]\n(inc x))", "(defn f [x] (+ x 2))") + "\n(defn g [] 2)\n";
    std::fs::write(dir.join("src/shop/ugly.clj"), &disk).unwrap();

    let out = run(tmp.path(), &["--db", db_arg, "--json", "import", dir_arg]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("conflict: src/shop/ugly.clj") && stderr.contains(&f_id), "{stderr}");
    assert_eq!(report["conflicts"][0]["path"], "src/shop/ugly.clj", "{report}");
    let forms = report["conflicts"][0]["forms"].to_string();
    assert!(forms.contains(&f_id) && !forms.contains("`h`"), "{report}");

    let merged = formdb(tmp.path(), &["--db", db_arg, "view", "shop.ugly"]);
    assert!(merged.contains("(defn f [x] (+ x 2))"), "the disk wins f: {merged}");
    assert!(merged.contains(&h_laid), "the store's h survives: {merged}");
    assert!(merged.contains("(defn g [] 2)"), "the disk's g is taken: {merged}");
    assert_eq!(read(&dir.join("src/shop/ugly.clj")), merged, "the merge is in DIR too");
    let draft = formdb(tmp.path(), &["--db", db_arg, "drafts", "show", "src/shop/ugly.clj"]);
    assert_eq!(draft, laid, "the store's text is kept as a draft");
}

/// A running `formdb up --no-mount`.
struct Daemon {
    child: Child,
}

impl Daemon {
    fn start(dir: &Path) -> (Daemon, u32) {
        let mut child = Command::new(BIN)
            .args(["--json", "up", "--no-mount"])
            .arg(dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let up: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("formdb up did not start: {e}: {line:?}"));
        assert_eq!(up["event"], "up", "{up}");
        let pid = up["pid"].as_u64().unwrap() as u32;
        (Daemon { child }, pid)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        // SAFETY: a plain kill(2) of our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

#[test]
fn while_up_owns_the_store_every_other_writer_is_refused_with_its_pid() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = repo(tmp.path(), &[("src/shop/ugly.clj", UGLY)]);
    let (daemon, pid) = Daemon::start(&dir);
    let stats = formdb(&dir, &["--json", "stats"]);
    // A file removed from DIR while the daemon is not looking at it would be removed from the
    // store by a second importer; it must not get the chance.
    let mnt = tmp.path().join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    let mnt = mnt.to_str().unwrap().to_string();
    let writers: [&[&str]; 7] = [
        &["import", "."],
        &["fmt", "--all"],
        &["fmt", "shop.ugly"],
        &["alias", "set", "me", "shop.money", "m"],
        &["restore", "src/shop/gone.clj"],
        &["drafts", "discard", "src/shop/cart.clj"],
        &["mount", &mnt],
    ];
    for args in writers {
        let out = run(&dir, args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "formdb {args:?} was not refused");
        assert!(stderr.contains(&format!("pid {pid}")), "formdb {args:?}: {stderr}");
        assert!(stderr.contains("refused"), "formdb {args:?}: {stderr}");
    }
    assert_eq!(formdb(&dir, &["--json", "stats"]), stats, "nothing changed");
    assert_eq!(read(&dir.join("src/shop/ugly.clj")), UGLY);
    // Readers are not writers.
    formdb(&dir, &["view", "shop.ugly"]);
    formdb(&dir, &["alias", "list", "me"]);
    formdb(&dir, &["drafts"]);
    drop(daemon);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_back_refuses_a_path_through_a_symbolic_link_out_of_the_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = repo(tmp.path(), &[]);
    let outside = tmp.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, dir.join("src/etclink")).unwrap();
    formdb(&dir, &["import", "."]);

    let c = standalone_mcp(&dir).await;
    let (_, r) = call(
        &c,
        "create_namespace",
        json!({"ns": "etclink.x", "path": "src/etclink/x.clj", "doc": "Escapes?"}),
    )
    .await;
    c.cancel().await.unwrap();
    assert_eq!(
        std::fs::read_dir(&outside).unwrap().count(),
        0,
        "nothing was written outside DIR ({r})"
    );
}

/// A standalone `formdb mount`, stopped by SIGTERM (and killed if a test fails).
struct Mount {
    child: Child,
}

impl Mount {
    fn start(dir: &Path, mnt: &Path) -> Mount {
        let mut child = Command::new(BIN)
            .args(["--json", "mount"])
            .arg(mnt)
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let v: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("formdb mount did not start: {e}: {line:?}"));
        assert_eq!(v["event"], "mounted", "{v}");
        Mount { child }
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        // SAFETY: a plain kill(2) of our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

#[test]
fn a_standalone_mount_save_reaches_the_files_and_never_leaves_the_tree() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = repo(tmp.path(), &[]);
    let outside = tmp.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, dir.join("src/etclink")).unwrap();
    formdb(&dir, &["import", "."]);
    let mnt = tmp.path().join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    let mount = Mount::start(&dir, &mnt);

    let money = "src/shop/money.clj";
    let saved = read(&dir.join(money)).replace("(rem c 100)", "(mod c 100)");
    std::fs::write(mnt.join(money), &saved).unwrap();
    // The save returned: DIR has it already.
    assert_eq!(read(&dir.join(money)), saved, "the save reached DIR");
    let status = git(&dir, &["status", "--porcelain", "--untracked-files=no"]);
    assert_eq!(status.trim(), format!("M {money}"));

    // A file created on the mount under a link out of DIR stays in the store.
    std::fs::create_dir_all(mnt.join("src/etclink")).unwrap();
    std::fs::write(mnt.join("src/etclink/x.clj"), "(ns etclink.x)\n").unwrap();
    let _ = std::fs::remove_file(mnt.join("src/etclink/x.clj"));
    drop(mount);
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0, "nothing written outside DIR");

    formdb(&dir, &["import", "."]);
    assert_eq!(stored(&dir, "shop.money"), saved, "import did not revert the save");
}
