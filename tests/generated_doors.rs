//! Generated operations through every door of one `formdb up` at once: an MCP agent
//! (replace, insert, delete, rename and move forms, create namespaces), a writer on the FUSE
//! mount (rewrites, added and cut forms, new files, renames, deletes) and a shell in the
//! working directory (`sed -i`, new files, `mv`, `rm`). In each burst the three take disjoint
//! files, or share files with each on forms of its own (the mount writing some from a text it
//! read a while before, as an editor does). Once the doors settle, the directory and the mount
//! must hold exactly the files of the model that every acknowledged operation changed, with no
//! draft. `FORMDB_RANDOM_SEED` and `FORMDB_RANDOM_ROUNDS` replay a run or run more;
//! `FORMDB_RANDOM_LOG` prints each burst's operations.

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use formdb_testkit::Seeded;
use serde_json::json;
use support::*;

/// Where the generated files live, in the directory and on the mount.
const DIR: &str = "src/gd";

/// A file as the model holds it: its namespace and its `(def NAME VALUE)` forms.
#[derive(Clone, Debug, PartialEq)]
struct File {
    ns: String,
    defs: BTreeMap<String, u64>,
}

/// The model: path under `DIR` → file.
type Model = BTreeMap<String, File>;

/// A file as it is read: its namespace and defs, whatever the layout (the store lays out
/// inserted forms, the mount and the sync keep blank lines).
fn parse(text: &str) -> Option<File> {
    let ns_at = text.find("(ns ")? + 4;
    let ns: String =
        text[ns_at..].chars().take_while(|c| !c.is_whitespace() && *c != ')').collect();
    let mut defs = BTreeMap::new();
    let mut rest = text;
    while let Some(at) = rest.find("(def ") {
        rest = &rest[at + 5..];
        let name: String = rest.chars().take_while(|c| !c.is_whitespace()).collect();
        let value: String =
            rest[name.len()..].trim_start().chars().take_while(|c| c.is_ascii_digit()).collect();
        defs.insert(name, value.parse().ok()?);
    }
    Some(File { ns, defs })
}

fn text_of(f: &File) -> String {
    let mut t = format!("(ns {})\n", f.ns);
    for (name, value) in &f.defs {
        t.push_str(&format!("\n(def {name} {value})\n"));
    }
    t
}

/// The generated files of a tree, read as the model reads them.
fn read_tree(root: &Path) -> BTreeMap<String, Option<File>> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(root.join(DIR)).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        if name.ends_with(".clj") {
            out.insert(name, parse(&read(&entry.path())));
        }
    }
    out
}

/// The store's text of each namespace of the model (`formdb view`), by the model's path.
fn store_views(dir: &Path, model: &Model) -> BTreeMap<String, Option<File>> {
    let view = |ns: &str| {
        let out = Command::new(BIN).args(["view", ns]).current_dir(dir).output().ok()?;
        out.status.success().then(|| parse(&String::from_utf8_lossy(&out.stdout)))?
    };
    model.iter().map(|(p, f)| (p.clone(), view(&f.ns))).collect()
}

fn as_read(model: &Model) -> BTreeMap<String, Option<File>> {
    model.iter().map(|(p, f)| (p.clone(), Some(f.clone()))).collect()
}

/// One operation, on one door.
#[derive(Clone, Debug)]
enum Op {
    /// MCP `replace_form` of `ns/name` with `(def name value)`.
    Replace { path: String, name: String, value: u64 },
    /// MCP `insert_form` of `(def name 0)` into the file's namespace.
    Insert { path: String, name: String },
    /// MCP `delete_form` of `ns/name`.
    Delete { path: String, name: String },
    /// MCP `create_namespace` at a new path.
    CreateNs { path: String, ns: String },
    /// MCP `rename_symbol` of `ns/name` to `to`.
    RenameVar { path: String, name: String, to: String },
    /// MCP `move_form` of `ns/name` into the namespace of the file at `to`.
    MoveVar { path: String, name: String, to: String },
    /// Set a value in the file's text (the mount: read, change, write whole, close; the
    /// shell: `sed -i`).
    SetValue { path: String, name: String, value: u64 },
    /// The mount as an editor whose buffer grows stale: read the file, wait while the other
    /// doors write, set a value in the text read, write it whole.
    LateSet { path: String, name: String, value: u64, pause_ms: u64 },
    /// Add a form at the end of the file's text (the mount: read, append, write whole; the
    /// shell: `sed -i '$a …'`).
    Append { path: String, name: String },
    /// Take a form out of the file's text (the mount: read, cut, write whole; the shell:
    /// `sed -i '/…/d'`).
    Cut { path: String, name: String },
    /// A new file.
    Create { path: String, file: File },
    /// `mv`.
    Rename { from: String, to: String },
    /// `rm`.
    Remove { path: String },
}

impl Op {
    /// The file it works on (a rename's new name).
    fn path(&self) -> &str {
        match self {
            Op::Replace { path, .. }
            | Op::Insert { path, .. }
            | Op::Delete { path, .. }
            | Op::CreateNs { path, .. }
            | Op::RenameVar { path, .. }
            | Op::MoveVar { to: path, .. }
            | Op::SetValue { path, .. }
            | Op::Append { path, .. }
            | Op::Cut { path, .. }
            | Op::LateSet { path, .. }
            | Op::Create { path, .. }
            | Op::Remove { path }
            | Op::Rename { to: path, .. } => path,
        }
    }

    /// What the operation does to the model, once acknowledged.
    fn apply(&self, model: &mut Model) {
        match self {
            Op::Replace { path, name, value }
            | Op::SetValue { path, name, value }
            | Op::LateSet { path, name, value, .. } => {
                model.get_mut(path).unwrap().defs.insert(name.clone(), *value);
            }
            Op::Insert { path, name } | Op::Append { path, name } => {
                model.get_mut(path).unwrap().defs.insert(name.clone(), 0);
            }
            Op::Delete { path, name } | Op::Cut { path, name } => {
                model.get_mut(path).unwrap().defs.remove(name);
            }
            Op::CreateNs { path, ns } => {
                model.insert(path.clone(), File { ns: ns.clone(), defs: BTreeMap::new() });
            }
            Op::RenameVar { path, name, to } => {
                let defs = &mut model.get_mut(path).unwrap().defs;
                let value = defs.remove(name).unwrap();
                defs.insert(to.clone(), value);
            }
            Op::MoveVar { path, name, to } => {
                let value = model.get_mut(path).unwrap().defs.remove(name).unwrap();
                model.get_mut(to).unwrap().defs.insert(name.clone(), value);
            }
            Op::Create { path, file } => {
                model.insert(path.clone(), file.clone());
            }
            Op::Rename { from, to } => {
                let f = model.remove(from).unwrap();
                model.insert(to.clone(), f);
            }
            Op::Remove { path } => {
                model.remove(path);
            }
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Door {
    Agent,
    Mount,
    Shell,
}

/// Fresh names: every file and form the run makes has its own.
struct Names(u64);

impl Names {
    fn next(&mut self, prefix: &str) -> String {
        self.0 += 1;
        format!("{prefix}{}", self.0)
    }
}

/// Up to three operations of `door` on `files` (its own this burst), as it would do them one
/// after another; `model` is the door's view, moved on by each.
fn ops_of(
    door: Door,
    files: &[String],
    model: &mut Model,
    rng: &mut Seeded,
    names: &mut Names,
) -> Vec<Op> {
    let mut mine: Vec<String> = files.to_vec();
    let mut ops = Vec::new();
    for _ in 0..1 + rng.below(3) {
        let pick = |rng: &mut Seeded, mine: &[String]| mine[rng.below(mine.len())].clone();
        let def_of = |rng: &mut Seeded, model: &Model, path: &str| {
            let defs: Vec<&String> = model[path].defs.keys().collect();
            (!defs.is_empty()).then(|| defs[rng.below(defs.len())].clone())
        };
        let value = 1 + rng.below(1_000_000) as u64;
        let op = match (door, rng.below(if door == Door::Agent { 8 } else { 6 })) {
            (_, 0) | (_, 1) if !mine.is_empty() => {
                let path = pick(rng, &mine);
                match def_of(rng, model, &path) {
                    Some(name) if door == Door::Agent => Op::Replace { path, name, value },
                    Some(name) => Op::SetValue { path, name, value },
                    None if door == Door::Shell => continue,
                    None => {
                        let name = names.next("v");
                        match door {
                            Door::Agent => Op::Insert { path, name },
                            _ => Op::Append { path, name },
                        }
                    }
                }
            }
            (Door::Agent, 2) if !mine.is_empty() => {
                Op::Insert { path: pick(rng, &mine), name: names.next("v") }
            }
            (Door::Mount, 2) if !mine.is_empty() => {
                Op::Append { path: pick(rng, &mine), name: names.next("v") }
            }
            (Door::Agent, 3) if !mine.is_empty() => {
                let path = pick(rng, &mine);
                match def_of(rng, model, &path) {
                    Some(name) => Op::Delete { path, name },
                    None => continue,
                }
            }
            (Door::Agent, 5) if !mine.is_empty() => {
                let path = pick(rng, &mine);
                match def_of(rng, model, &path) {
                    Some(name) => Op::RenameVar { path, name, to: names.next("v") },
                    None => continue,
                }
            }
            (Door::Agent, 6) if mine.len() > 1 => {
                let path = pick(rng, &mine);
                let to = pick(rng, &mine);
                match def_of(rng, model, &path) {
                    Some(name) if to != path => Op::MoveVar { path, name, to },
                    _ => continue,
                }
            }
            (Door::Agent, _) => {
                let ns = names.next("gd.a");
                Op::CreateNs { path: format!("{}.clj", ns.trim_start_matches("gd.")), ns }
            }
            (_, 3) | (_, 4) if !mine.is_empty() => {
                let from = pick(rng, &mine);
                Op::Rename { from, to: format!("{}.clj", names.next("r")) }
            }
            (_, 5) if !mine.is_empty() => Op::Remove { path: pick(rng, &mine) },
            _ => {
                let prefix = if door == Door::Mount { "gd.m" } else { "gd.s" };
                let ns = names.next(prefix);
                let mut defs = BTreeMap::new();
                defs.insert(names.next("v"), value);
                let path = format!("{}.clj", ns.trim_start_matches("gd."));
                Op::Create { path, file: File { ns, defs } }
            }
        };
        op.apply(model);
        match &op {
            Op::CreateNs { path, .. } | Op::Create { path, .. } => mine.push(path.clone()),
            Op::Rename { from, to } => {
                mine.retain(|p| p != from);
                mine.push(to.clone());
            }
            Op::Remove { path } => mine.retain(|p| p != path),
            _ => {}
        }
        ops.push(op);
    }
    ops
}

/// Up to three operations of `door` on forms of its own (named with its letter), in any file:
/// the doors share files, never a form.
fn shared_ops_of(door: Door, model: &mut Model, rng: &mut Seeded, names: &mut Names) -> Vec<Op> {
    let letter = match door {
        Door::Agent => "a",
        Door::Mount => "m",
        Door::Shell => "s",
    };
    let mut ops = Vec::new();
    for _ in 0..1 + rng.below(3) {
        let paths: Vec<&String> = model.keys().collect();
        let path = paths[rng.below(paths.len())].clone();
        let own: Vec<&String> =
            model[&path].defs.keys().filter(|n| n.starts_with(letter)).collect();
        let mine = (!own.is_empty()).then(|| own[rng.below(own.len())].clone());
        let value = 1 + rng.below(1_000_000) as u64;
        let op = match (rng.below(4), mine) {
            (0 | 1, Some(name)) if door == Door::Agent => Op::Replace { path, name, value },
            (0, Some(name)) if door == Door::Mount => {
                Op::LateSet { path, name, value, pause_ms: rng.below(150) as u64 }
            }
            (0 | 1, Some(name)) => Op::SetValue { path, name, value },
            (3, Some(name)) if door == Door::Agent => Op::Delete { path, name },
            (3, Some(name)) => Op::Cut { path, name },
            _ if door == Door::Agent => {
                Op::Insert { path, name: names.next(&format!("{letter}n")) }
            }
            _ => Op::Append { path, name: names.next(&format!("{letter}n")) },
        };
        op.apply(model);
        ops.push(op);
    }
    ops
}

/// Run the agent's operations through MCP: each one's acknowledgement.
async fn run_agent(c: &Client, ops: &[Op], model: &Model) -> Vec<Result<(), String>> {
    let mut nss: BTreeMap<String, String> =
        model.iter().map(|(p, f)| (p.clone(), f.ns.clone())).collect();
    let mut out = Vec::new();
    for op in ops {
        let id_of = |path: &str, name: &str| {
            let symbol = format!("{}/{name}", nss[path]);
            async move {
                let form = call_result(c, "get_form", json!({ "symbol": symbol })).await?;
                Ok::<String, String>(form["id"].as_str().unwrap_or_default().to_string())
            }
        };
        let done = match op {
            Op::Replace { path, name, value } => match id_of(path, name).await {
                Ok(id) => {
                    let source = format!("(def {name} {value})");
                    call_result(c, "replace_form", json!({"id": id, "source": source})).await
                }
                Err(e) => Err(e),
            },
            Op::Insert { path, name } => {
                let args = json!({"ns": nss[path], "source": format!("(def {name} 0)")});
                call_result(c, "insert_form", args).await
            }
            Op::Delete { path, name } => match id_of(path, name).await {
                Ok(id) => call_result(c, "delete_form", json!({ "id": id })).await,
                Err(e) => Err(e),
            },
            Op::CreateNs { path, ns } => {
                let args = json!({"ns": ns, "path": format!("{DIR}/{path}")});
                let made = call_result(c, "create_namespace", args).await;
                nss.insert(path.clone(), ns.clone());
                made
            }
            Op::RenameVar { path, name, to } => {
                let args = json!({"symbol": format!("{}/{name}", nss[path]), "new_name": to});
                call_result(c, "rename_symbol", args).await
            }
            Op::MoveVar { path, name, to } => match id_of(path, name).await {
                Ok(id) => call_result(c, "move_form", json!({"id": id, "to_ns": nss[to]})).await,
                Err(e) => Err(e),
            },
            other => panic!("not an agent's operation: {other:?}"),
        };
        out.push(done.map(|_| ()));
    }
    out
}

/// `sed -i EXPR PATH`, as a person at a shell runs it.
fn sed(expr: &str, path: &Path) -> Result<(), String> {
    match Command::new("sed").arg("-i").arg(expr).arg(path).status() {
        Ok(s) if s.success() => Ok(()),
        other => Err(format!("sed -i {expr:?}: {other:?}")),
    }
}

/// Run the mount writer's or the shell's operations on the files under `root`.
fn run_files(root: &Path, ops: &[Op], door: Door) -> Vec<Result<(), String>> {
    let at = |p: &str| root.join(DIR).join(p);
    let write = |path: &Path, text: &str| match door {
        Door::Mount => write_and_close(path, text.as_bytes()).map_err(|e| e.to_string()),
        _ => std::fs::write(path, text).map_err(|e| e.to_string()),
    };
    ops.iter()
        .map(|op| match op {
            Op::SetValue { path, name, value } if door == Door::Shell => {
                sed(&format!("s/(def {name} [0-9]*)/(def {name} {value})/"), &at(path))
            }
            Op::SetValue { path, name, value } | Op::LateSet { path, name, value, .. } => {
                let text = read(&at(path));
                if let Op::LateSet { pause_ms, .. } = op {
                    std::thread::sleep(std::time::Duration::from_millis(*pause_ms));
                }
                let Some(new) = set_value(&text, name, *value) else {
                    return Err(format!("{name} is not in {path}: {text:?}"));
                };
                write(&at(path), &new)
            }
            Op::Append { path, name } if door == Door::Shell => {
                sed(&format!("$a (def {name} 0)"), &at(path))
            }
            Op::Cut { path, name } if door == Door::Shell => {
                sed(&format!("/(def {name} /d"), &at(path))
            }
            Op::Cut { path, name } => {
                let text = read(&at(path));
                let kept: Vec<&str> =
                    text.lines().filter(|l| !l.starts_with(&format!("(def {name} "))).collect();
                write(&at(path), &format!("{}\n", kept.join("\n")))
            }
            Op::Append { path, name } => {
                let text = read(&at(path));
                write(&at(path), &format!("{text}\n(def {name} 0)\n"))
            }
            Op::Create { path, file } => write(&at(path), &text_of(file)),
            Op::Rename { from, to } => std::fs::rename(at(from), at(to)).map_err(|e| e.to_string()),
            Op::Remove { path } => std::fs::remove_file(at(path)).map_err(|e| e.to_string()),
            other => panic!("not a file operation: {other:?}"),
        })
        .collect()
}

/// How the doors share the tree in a burst.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    /// Each door takes its own files: whole-file operations (new, renamed, deleted files).
    OwnFiles,
    /// The doors share every file, each editing forms of its own: per-form merges.
    SharedFiles,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn generated_operations_through_every_door_on_files_of_their_own_keep_every_acknowledged_one()
{
    run(Mode::OwnFiles, 7).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn generated_operations_through_every_door_on_shared_files_keep_every_acknowledged_one() {
    run(Mode::SharedFiles, 11).await;
}

async fn run(mode: Mode, seed: u64) {
    let mut rng = Seeded::from_env(seed);
    let bursts = formdb_testkit::random_rounds(50);
    let mut model = Model::new();
    for k in 0..if mode == Mode::OwnFiles { 6 } else { 3 } {
        let mut defs = BTreeMap::new();
        let names = match mode {
            Mode::OwnFiles => ["x", "y"].as_slice(),
            Mode::SharedFiles => ["a", "m", "s"].as_slice(),
        };
        for name in names {
            defs.insert(format!("{name}{k}"), 0);
        }
        model.insert(format!("f{k}.clj"), File { ns: format!("gd.f{k}"), defs });
    }
    let start: Vec<(String, String)> =
        model.iter().map(|(p, f)| (format!("{DIR}/{p}"), text_of(f))).collect();
    let start: Vec<(&str, &str)> = start.iter().map(|(p, t)| (p.as_str(), t.as_str())).collect();
    let tmp = tempfile::tempdir().unwrap();
    let dir = repo_of(&tmp.path().join("tree"), &start);
    let mnt: PathBuf = tmp.path().join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    let mut daemon = Daemon::start(&dir, &mnt, "doors");
    let agent = http_client(&daemon, "agent").await;
    let mut names = Names(0);
    let (mut acked, mut refused, mut conflicts) = ([0usize; 3], Vec::new(), 0);
    // When the store last wrote each file (through the agent or the mount).
    let mut store_wrote: BTreeMap<String, Instant> = BTreeMap::new();
    for burst in 0..bursts {
        let all = [Door::Agent, Door::Mount, Door::Shell];
        let plans: Vec<Vec<Op>> = match mode {
            Mode::OwnFiles => {
                // Each door takes its own files this burst.
                let mut doors: [Vec<String>; 3] = Default::default();
                for path in model.keys() {
                    doors[rng.below(3)].push(path.clone());
                }
                let mut view = model.clone();
                all.iter()
                    .zip(&doors)
                    .map(|(door, files)| ops_of(*door, files, &mut view, &mut rng, &mut names))
                    .collect()
            }
            Mode::SharedFiles => all
                .iter()
                .map(|door| shared_ops_of(*door, &mut model.clone(), &mut rng, &mut names))
                .collect(),
        };
        let before = model.clone();
        if std::env::var_os("FORMDB_RANDOM_LOG").is_some() {
            eprintln!("burst {burst}: {plans:?}");
        }
        let started = Instant::now();
        let (mount_ops, shell_ops) = (plans[1].clone(), plans[2].clone());
        let (mnt2, dir2) = (mnt.clone(), dir.clone());
        let mount = std::thread::spawn(move || run_files(&mnt2, &mount_ops, Door::Mount));
        let shell = std::thread::spawn(move || run_files(&dir2, &shell_ops, Door::Shell));
        let by_agent = run_agent(&agent, &plans[0], &model).await;
        let results = [by_agent, mount.join().unwrap(), shell.join().unwrap()];
        for (door, (ops, results)) in plans.iter().zip(&results).enumerate() {
            for (op, result) in ops.iter().zip(results) {
                match result {
                    Ok(()) => {
                        op.apply(&mut model);
                        acked[door] += 1;
                        match op {
                            Op::Rename { from, to } => {
                                if let Some(at) = store_wrote.remove(from) {
                                    store_wrote.insert(to.clone(), at);
                                }
                            }
                            Op::MoveVar { path, to, .. } => {
                                store_wrote.insert(path.clone(), Instant::now());
                                store_wrote.insert(to.clone(), Instant::now());
                            }
                            _ if door < 2 => {
                                store_wrote.insert(op.path().to_string(), Instant::now());
                            }
                            _ => {}
                        }
                    }
                    Err(e) => refused.push(format!("burst {burst}: {op:?}: {e}")),
                }
            }
        }
        let want = as_read(&model);
        let listed =
            || formdb_json(&dir, &["drafts", "list"]).as_array().cloned().unwrap_or_default();
        let mut settled = poll(20, || {
            read_tree(&dir) == want && (read_tree(&mnt) == want || !listed().is_empty())
        });
        // A conflict: the shell rewrote a file the store wrote seconds before, and no text
        // tells which version `sed` read. The directory's text is stored, the store's kept as
        // a draft (which the mount shows): it must be what the store held.
        // Doors that share files but no form never conflict.
        for draft in if settled && mode == Mode::OwnFiles { listed() } else { Vec::new() } {
            let path = draft["path"].as_str().unwrap_or_default().to_string();
            let name = path.trim_start_matches(&format!("{DIR}/")).to_string();
            let shell_wrote =
                plans[2].iter().any(|op| matches!(op, Op::SetValue { path, .. } if *path == name));
            let recent = store_wrote
                .get(&name)
                .is_some_and(|at| started.saturating_duration_since(*at).as_secs() < 4);
            let kept = parse(&formdb(&dir, &["drafts", "show", &path]));
            assert!(
                shell_wrote && recent && kept.as_ref() == before.get(&name),
                "burst {burst}: a conflict only where the shell rewrote a file the store had \
                 just written, its draft the store's text: {draft}\nkept: {kept:?}\n\
                 before: {:?}\nplans: {plans:#?}",
                before.get(&name)
            );
            // Resolved as under `formdb up` a person would: the text they keep (the
            // directory's), saved over the draft the mount shows.
            let resolved = std::fs::read(dir.join(&path)).unwrap();
            write_and_close(&mnt.join(&path), &resolved).unwrap();
            conflicts += 1;
        }
        settled = settled && poll(20, || read_tree(&mnt) == want);
        daemon.assert_alive();
        assert!(
            settled,
            "{mode:?} burst {burst} (seed {:?}): the directory and the mount hold what every acknowledged \
             operation made\nplans: {plans:#?}\nresults: {results:?}\nmodel: {want:#?}\n\
             dir: {:#?}\nmount: {:#?}\nstore: {:#?}\ndrafts: {:?}",
            std::env::var("FORMDB_RANDOM_SEED"),
            read_tree(&dir),
            read_tree(&mnt),
            store_views(&dir, &model),
            listed(),
        );
    }
    let drafts = formdb_json(&dir, &["drafts", "list"]);
    assert_eq!(drafts.as_array().map(Vec::len), Some(0), "every draft was looked at: {drafts}");
    assert_eq!(store_views(&dir, &model), as_read(&model), "the store holds the model");
    // An operation is refused only when it has to be; none of these has to.
    assert!(refused.is_empty(), "refused: {refused:#?}");
    eprintln!(
        "generated doors, {mode:?}: {bursts} bursts; acknowledged: agent {}, mount {}, shell {}; \
         {conflicts} conflicts",
        acked[0], acked[1], acked[2]
    );
    agent.cancel().await.ok();
    daemon.stop();
}
