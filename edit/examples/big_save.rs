//! One big save through the mount's save path, on a fresh on-disk store: its peak extra memory
//! (VmHWM over the RSS before it) and what it keeps after. `cargo run -p formdb-edit --example
//! big_save -- small|tables|huge|unclosed|code [MB] [again|edit] [whole]` (`code` is the
//! corpus's real Clojure; `unclosed` is small forms after a first one left open, as a save
//! mid-edit is): `again` measures a second save of the text, one form added at its end, over its
//! stored forms; `edit` one with a comment added inside the first line of a `defn` in its middle
//! (an edit of one form); `whole` saves it through the whole-file path
//! (`Writer::saving_whole_files`). `FORMDB_TRACE=1` prints the save's phases.

use formdb_edit::save::{self, Writer};
use formdb_engine::store::Store;
use formdb_projector::aliases::AliasMap;

fn proc_bytes(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with(&format!("{field}:"))).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}

fn text(kind: &str, size: usize) -> String {
    if kind == "code" {
        // Real Clojure: the corpus (`scripts/corpus.sh`), from `FORMDB_CORPUS` or
        // `target/corpus`.
        let corpus = std::env::var("FORMDB_CORPUS").unwrap_or_else(|_| "target/corpus".into());
        return formdb_testkit::corpus_as_one_file(std::path::Path::new(&corpus), "shop.big", size);
    }
    let mut t = String::from("(ns shop.big)\n");
    if kind == "unclosed" {
        t.push_str("(defn being-written [x]\n  (let [y x]\n\n");
    }
    let mut n = 0;
    while t.len() < size {
        match kind {
            "small" | "unclosed" => {
                t.push_str(&format!("(defn f{n}\n  \"Doc {n}.\"\n  [x]\n  (+ x {n}))\n\n"))
            }
            "tables" => {
                t.push_str(&format!("(def table{n}\n  ["));
                for i in 0..400 {
                    t.push_str(&format!("{{:a {i} :b \"s{i}\"}} "));
                }
                t.push_str("])\n\n");
            }
            _ => {
                if n == 0 {
                    t.push_str("(def huge\n  [");
                }
                t.push_str(&format!("{{:a {n} :b \"s{n}\"}}\n   "));
            }
        }
        n += 1;
    }
    if kind == "huge" {
        t.push_str("])\n");
    }
    t
}

fn main() {
    // `FORMDB_TRACE=1` prints the save's phases, as the binary does.
    if let Some(d) = formdb_engine::trace::directive(std::env::var_os("FORMDB_TRACE").as_deref()) {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(d))
            .with_writer(std::io::stderr)
            .without_time()
            .with_target(false)
            .init();
    }
    let args: Vec<String> = std::env::args().collect();
    let kind = args.get(1).map(String::as_str).unwrap_or("small");
    let mb: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(5);
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let writer = Writer::new("bench", AliasMap::default());
    save::save(&store, &writer, "src/shop/small.clj", b"(ns shop.small)\n(defn g [] 1)\n", None)
        .unwrap();
    let mut t = text(kind, mb << 20);
    let second = args.get(3).map(String::as_str);
    if let Some(how @ ("again" | "edit")) = second {
        save::save(&store, &writer, "src/shop/big.clj", t.as_bytes(), None).unwrap();
        if how == "again" {
            t.push_str("(def edited 1)\n");
        } else {
            t = formdb_testkit::one_defn_edited(&t);
            // An editor read the file before it changed it: through a mount, from the cache
            // of stored texts that the save reads too.
            formdb_projector::views::stored_text_shared(&store, "src/shop/big.clj").unwrap();
        }
        // What the first save freed goes back to the system (glibc), so that the second
        // save's peak is its own, as in a mount (which trims after each save).
        trim();
    }
    // The bytes a mount's handle holds, which its save reads in place (`save_shared`), as the
    // mount does: `save` would copy them first.
    let t = std::sync::Arc::new(t.into_bytes());
    let rss = proc_bytes("VmRSS");
    std::fs::write("/proc/self/clear_refs", "5").unwrap();
    let started = std::time::Instant::now();
    let writer = match args.get(4).map(String::as_str) {
        Some("whole") => writer.saving_whole_files(),
        _ => writer,
    };
    let saved = save::save_shared(&store, &writer, "src/shop/big.clj", &t, None).unwrap();
    let took = started.elapsed();
    let peak = proc_bytes("VmHWM").saturating_sub(rss);
    let kept = proc_bytes("VmRSS").saturating_sub(rss);
    // What the save holds on to, once its freed pages are given back as a mount gives them.
    trim();
    let held = proc_bytes("VmRSS").saturating_sub(rss);
    let forms = match &saved {
        save::Saved::Committed { applied, .. } => {
            applied.added + applied.changed + applied.unchanged
        }
        other => {
            let what = format!("{other:?}");
            let base = what.find("error:").unwrap_or(0);
            eprintln!("not committed: {}", &what[base..what.len().min(base + 160)]);
            0
        }
    };
    println!(
        "{kind}: {} bytes, {forms} forms: peak +{} MB ({:.1}x), after +{} MB (+{} MB once trimmed), \
         in {took:.1?}",
        t.len(),
        peak >> 20,
        peak as f64 / t.len() as f64,
        kept >> 20,
        held >> 20
    );
}

/// Give glibc's free pages back to the system.
fn trim() {
    extern "C" {
        fn malloc_trim(pad: usize) -> i32;
    }
    // SAFETY: malloc_trim only releases free memory of glibc's arenas.
    unsafe { malloc_trim(0) };
}
