//! A soak of every door at once: two MCP agents (HTTP and the stdio relay) each editing its own
//! form, a writer on the FUSE mount, `sed -i` in the working directory and a CLI reader, all
//! against one running `formdb up`; once with the writers on three files, once with all four on
//! one file. No two writers edit one form, so there is no real conflict: at the end every
//! acknowledged write must be in its form's history, the last one must be the form's text in the
//! store, the mount and the directory, no form's value may ever move backwards, and no draft is
//! left.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use serde_json::{json, Value};
use support::*;

/// Writes per writer through formdb (three writers, and a reader beside them).
const ROUNDS: u64 = 400;
/// `sed -i` runs in the directory, one every `SED_PAUSE`: an editor's or a script's pace, while
/// the others write as fast as they are answered.
const SED_ROUNDS: u64 = 60;
const SED_PAUSE: std::time::Duration = std::time::Duration::from_millis(100);
/// Where each writer's form lives: the agents' `a` and `b`, the mount writer's `c`, the `d` that
/// `sed -i` edits in the directory.
struct Layout {
    a: &'static str,
    b: &'static str,
    c: &'static str,
    d: &'static str,
}

/// The namespace of a file under `src/`.
fn ns_of(path: &str) -> String {
    path.trim_start_matches("src/").trim_end_matches(".clj").replace('/', ".").replace('_', "-")
}

/// The values a form held, version by version, and its current one.
fn history(dir: &Path, ns: &str, name: &str) -> Vec<u64> {
    let rows = formdb_json(dir, &["history", &format!("{ns}/{name}")]);
    let mut rows: Vec<&Value> = rows.as_array().unwrap().iter().collect();
    rows.sort_by_key(|r| r["v"].as_u64());
    rows.iter().filter_map(|r| value_of(r["source"].as_str()?, name)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writers_through_every_door_lose_no_acknowledged_write() {
    // The agents share a file; the mount writer and `sed -i` each have their own.
    let layout = Layout {
        a: "src/soak/core.clj",
        b: "src/soak/core.clj",
        c: "src/soak/mount.clj",
        d: "src/soak/disk.clj",
    };
    soak(layout).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writers_of_one_file_through_every_door_lose_no_acknowledged_write() {
    let one = "src/soak/core.clj";
    soak(Layout { a: one, b: one, c: one, d: one }).await;
}

/// A mount writer reading and rewriting a file while an agent edits another form of it and
/// another thread keeps forking: each fork copies the writer's open descriptor and closes it at
/// `exec`, so one handle gets a second `flush` beside the writer's `close`. That flush saved the
/// text again and recorded it as served after the writer had read the store's newer text, and
/// the writer's next save was merged against it: the agent's form showed as changed on both
/// sides, and the save was refused as a conflict.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_handle_flushed_by_a_forked_child_too_is_saved_once_against_what_its_writer_read() {
    let path = "src/soak/fork.clj";
    let tmp = tempfile::tempdir().unwrap();
    let dir =
        repo_of(&tmp.path().join("tree"), &[(path, "(ns soak.fork)\n\n(def a 0)\n\n(def c 0)\n")]);
    let mnt = tmp.path().join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    let daemon = Daemon::start(&dir, &mnt, "soak");
    let agent = http_client(&daemon, "agent").await;
    let id = call(&agent, "get_form", json!({"symbol": "soak.fork/a"})).await["id"].clone();

    let stop = Arc::new(AtomicBool::new(false));
    let forks = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                Command::new("true").status().unwrap();
                n += 1;
            }
            n
        })
    };
    let agent_stop = stop.clone();
    let agent = tokio::spawn(async move {
        let mut i = 0u64;
        while !agent_stop.load(Ordering::Relaxed) {
            i += 1;
            let args = json!({"id": id, "source": format!("(def a {i})")});
            call(&agent, "replace_form", args).await;
        }
        agent.cancel().await.ok();
        i
    });
    let on_mount = mnt.join(path);
    let writer = std::thread::spawn(move || {
        let mut refused = Vec::new();
        for i in 1..=ROUNDS {
            let text = std::fs::read_to_string(&on_mount).unwrap();
            let new = set_value(&text, "c", i).expect("c is in the file");
            if let Err(e) = write_and_close(&on_mount, new.as_bytes()) {
                refused.push((i, e.to_string()));
            }
        }
        refused
    });
    let refused = writer.join().unwrap();
    stop.store(true, Ordering::Relaxed);
    let agent_writes = agent.await.unwrap();
    let forked = forks.join().unwrap();
    let drafts = formdb_json(&dir, &["drafts", "list"]);
    eprintln!("{ROUNDS} saves beside {agent_writes} agent edits and {forked} forks");
    assert!(
        refused.is_empty(),
        "saves refused with no form changed on both sides: {refused:?}\ndrafts: {drafts}"
    );
    let versions = history(&dir, "soak.fork", "c");
    assert!(
        (1..=ROUNDS).all(|v| versions.contains(&v)),
        "every save of c is in its history: {versions:?}"
    );
    assert!(versions.windows(2).all(|w| w[0] <= w[1]), "c never moves backwards: {versions:?}");
    daemon.stop();
}

async fn soak(layout: Layout) {
    let names = [("a", layout.a), ("b", layout.b), ("c", layout.c), ("d", layout.d)];
    let mut files: Vec<(&str, String)> = Vec::new();
    for (name, path) in names {
        match files.iter_mut().find(|(p, _)| *p == path) {
            Some((_, text)) => text.push_str(&format!("\n(def {name} 0)\n")),
            None => files.push((path, format!("(ns {})\n\n(def {name} 0)\n", ns_of(path)))),
        }
    }
    let tmp = tempfile::tempdir().unwrap();
    let start: Vec<(&str, &str)> = files.iter().map(|(p, t)| (*p, t.as_str())).collect();
    let dir = repo_of(&tmp.path().join("tree"), &start);
    let mnt = tmp.path().join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    let daemon = Daemon::start(&dir, &mnt, "soak");

    let agent1 = http_client(&daemon, "agent1").await;
    let agent2 = stdio_relay(&dir, "agent2").await;
    let id = |c: &Value| c["id"].as_str().unwrap().to_string();
    let (ns_a, ns_b) = (ns_of(layout.a), ns_of(layout.b));
    let id_a = id(&call(&agent1, "get_form", json!({"symbol": format!("{ns_a}/a")})).await);
    let id_b = id(&call(&agent2, "get_form", json!({"symbol": format!("{ns_b}/b")})).await);
    // Two agents, each replacing its own form, counting what the server acknowledged.
    async fn agent(c: support::Client, form: String, name: &'static str) -> (Vec<u64>, u64) {
        let (mut acked, mut refused) = (Vec::new(), 0);
        for i in 1..=ROUNDS {
            let args = json!({"id": form, "source": format!("(def {name} {i})")});
            match call_result(&c, "replace_form", args).await {
                Ok(_) => acked.push(i),
                Err(_) => refused += 1,
            }
        }
        c.cancel().await.ok();
        (acked, refused)
    }
    let a = tokio::spawn(agent(agent1, id_a, "a"));
    let b = tokio::spawn(agent(agent2, id_b, "b"));

    // A writer on the mount: read the file, set `c`, write it whole, close.
    let on_mount = mnt.join(layout.c);
    let mount_writer = std::thread::spawn(move || {
        let (mut acked, mut refused) = (Vec::new(), 0);
        for i in 1..=ROUNDS {
            let text = std::fs::read_to_string(&on_mount).unwrap();
            let Some(new) = set_value(&text, "c", i) else {
                panic!("c is missing from the mount's file: {text:?}")
            };
            match write_and_close(&on_mount, new.as_bytes()) {
                Ok(()) => acked.push(i),
                Err(_) => refused += 1,
            }
        }
        (acked, refused)
    });

    // `sed -i` in the working directory, setting `d`.
    let on_disk: PathBuf = dir.join(layout.d);
    let sed = std::thread::spawn(move || {
        for i in 1..=SED_ROUNDS {
            let expr = format!("s/(def d [0-9]*)/(def d {i})/");
            let st = Command::new("sed").arg("-i").arg(&expr).arg(&on_disk).status().unwrap();
            assert!(st.success(), "sed -i");
            std::thread::sleep(SED_PAUSE);
        }
    });

    // A reader beside them: every read succeeds and sees a whole form.
    let stop = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicU64::new(0));
    let reader = {
        let (stop, reads, dir, ns_a) = (stop.clone(), reads.clone(), dir.clone(), ns_a.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let shown = formdb_json(&dir, &["show", &format!("{ns_a}/a")]);
                assert!(value_of(shown["source"].as_str().unwrap(), "a").is_some(), "{shown}");
                reads.fetch_add(1, Ordering::Relaxed);
            }
        })
    };

    let (acked_a, refused_a) = a.await.unwrap();
    let (acked_b, refused_b) = b.await.unwrap();
    let (acked_c, refused_c) = mount_writer.join().unwrap();
    sed.join().unwrap();
    stop.store(true, Ordering::Relaxed);
    reader.join().unwrap();

    let last = |v: &[u64]| v.last().copied().unwrap_or(0);
    let want = [
        ("a", layout.a, last(&acked_a)),
        ("b", layout.b, last(&acked_b)),
        ("c", layout.c, last(&acked_c)),
        ("d", layout.d, SED_ROUNDS),
    ];
    let agree =
        |root: &Path| want.iter().all(|(n, p, v)| value_of(&read(&root.join(p)), n) == Some(*v));
    let stored_agree = || {
        want.iter().all(|(n, p, v)| {
            let shown = formdb_json(&dir, &["show", &format!("{}/{n}", ns_of(p))]);
            value_of(shown["source"].as_str().unwrap_or(""), n) == Some(*v)
        })
    };
    let settled = poll(60, || agree(&dir) && agree(&mnt) && stored_agree());
    let drafts = formdb_json(&dir, &["drafts", "list"]);
    let texts =
        |root: &Path| files.iter().map(|(p, _)| read(&root.join(p))).collect::<Vec<_>>().join("");
    assert!(
        settled,
        "the store, the mount and the directory agree on the last acknowledged writes {want:?}\n\
         disk:  {}\nmount: {}\ndrafts: {drafts}",
        texts(&dir),
        texts(&mnt),
    );
    for (name, path, acked) in
        [("a", layout.a, &acked_a), ("b", layout.b, &acked_b), ("c", layout.c, &acked_c)]
    {
        let versions = history(&dir, &ns_of(path), name);
        let missing: Vec<u64> = acked.iter().filter(|v| !versions.contains(v)).copied().collect();
        assert!(
            missing.is_empty(),
            "acknowledged writes of {name} missing from its history: {missing:?}"
        );
        assert!(
            versions.windows(2).all(|w| w[0] <= w[1]),
            "{name} never moves backwards: {versions:?}"
        );
    }
    let d_versions = history(&dir, &ns_of(layout.d), "d");
    assert!(d_versions.windows(2).all(|w| w[0] <= w[1]), "d never moves backwards: {d_versions:?}");
    assert_eq!(drafts.as_array().map(Vec::len), Some(0), "no conflict, so no draft: {drafts}");
    eprintln!(
        "soak: acknowledged a {} (refused {refused_a}), b {} (refused {refused_b}), mount c {} \
         (refused {refused_c}); sed d {SED_ROUNDS} writes, {} versions; {} CLI reads",
        acked_a.len(),
        acked_b.len(),
        acked_c.len(),
        d_versions.len(),
        reads.load(Ordering::Relaxed)
    );
    daemon.stop();
}
