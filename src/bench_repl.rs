//! `formdb bench repl`: the REPL loop's costs side by side with what they add to, on a copy of
//! the embedded example and a real nREPL server started for it: an evaluation through the loop
//! (store log included) against a raw nREPL round trip of the same code; the selection of the
//! tests a `clojure.core` form reaches on a store of the corpus; `replace_form` with
//! `eval: true` against `replace_form` and a separate `load` of the form.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use formdb_engine::reach;
use formdb_engine::store::Store;
use formdb_mcp::tools::{self, ReplaceArgs};
use formdb_repl::nrepl::{Connection, Request};
use formdb_repl::session::Loop;
use formdb_repl::{server, Repl};
use serde_json::json;

#[derive(clap::Args)]
pub(crate) struct BenchArgs {
    /// Samples per figure.
    #[arg(long, default_value_t = 200)]
    pub samples: usize,
    /// The corpus tree for the selection figure (default: $FORMDB_CORPUS).
    #[arg(long)]
    pub corpus: Option<PathBuf>,
    /// The `clojure.core` var whose reaching tests are selected.
    #[arg(long, default_value = "clojure.core/assoc-in")]
    pub var: String,
}

fn p50(mut v: Vec<Duration>) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64() * 1000.0
}

fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    fs_err::create_dir_all(to)?;
    for e in fs_err::read_dir(from)? {
        let e = e?;
        let (src, dst) = (e.path(), to.join(e.file_name()));
        if e.file_name() == ".formdb" {
            continue;
        }
        if e.file_type()?.is_dir() {
            copy_tree(&src, &dst)?;
        } else if e.file_type()?.is_file() {
            fs_err::copy(&src, &dst)?;
        }
    }
    Ok(())
}

fn scratch_store(tree: &Path, into: &Path) -> Result<Arc<Store>> {
    copy_tree(tree, into)?;
    let store = Arc::new(Store::open(&into.join(".formdb"))?);
    formdb_engine::import::import_dir(&store, into, "bench", &formdb_engine::import::Quiet)?;
    Ok(store)
}

pub(crate) fn run(a: BenchArgs, json_out: bool) -> Result<()> {
    let samples = a.samples.max(5);
    let tmp = tempfile::tempdir()?;
    let shop = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/shop");
    let root = tmp.path().join("shop");
    let store = scratch_store(&shop, &root)?;
    let endpoint = server::start(&root, None, Duration::from_secs(180))?;
    let addr = endpoint.addr()?;
    let repl = Arc::new(Repl::new(endpoint));

    // 1. Raw nREPL round trip against the loop's eval, same code, interleaved: through a REPL
    // named by its address (`--nrepl`, `.nrepl-port`), and through the one formdb started
    // (`--repl`).
    let code = "(+ 1 2)";
    let mut raw = Connection::open(&addr, Duration::from_secs(10))?;
    let named = Repl::new(server::Endpoint::Addr(addr.clone()));
    let l = Loop { store: &store, repl: &named, user: "bench", timeout: Duration::from_secs(10) };
    let started =
        Loop { store: &store, repl: &repl, user: "bench", timeout: Duration::from_secs(10) };
    let aliases = Default::default();
    let (mut raw_t, mut loop_t, mut started_t) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..samples {
        let t = Instant::now();
        let id = raw.send(Request::op("eval").with("code", code))?;
        loop {
            let r = raw.read_until(Instant::now() + Duration::from_secs(10))?;
            if r.get("id") == Some(id.as_str()) && r.done() {
                break;
            }
        }
        raw_t.push(t.elapsed());
        let t = Instant::now();
        l.eval(code, None, &aliases)?;
        loop_t.push(t.elapsed());
        let t = Instant::now();
        started.eval(code, None, &aliases)?;
        started_t.push(t.elapsed());
    }
    let started_ms = p50(started_t);
    let (raw_ms, loop_ms) = (p50(raw_t), p50(loop_t));

    // 2. replace_form with eval: true against replace_form then load of the same form.
    let session = formdb_mcp::session(
        store.clone(),
        &formdb_mcp::ServeOptions {
            user: "bench".into(),
            read_only: false,
            repl: Some(repl.clone()),
        },
    )?;
    let id = reach::form_by_key(&store, "shop.money/cents")?.context("shop.money/cents")?.id;
    let source = |n: usize| format!("(defn cents [units c] (+ (* 100 units) c {n} (- {n})))");
    let replace = |n: usize, eval: bool| {
        tools::replace_form(
            &session,
            ReplaceArgs {
                id: id.clone(),
                source: source(n),
                expected_hash: None,
                repair: false,
                full_diagnostics: false,
                eval,
                test: false,
            },
        )
        .map_err(|e| anyhow::anyhow!("replace_form: {}", e.error))
    };
    let edits = samples.min(50);
    let (mut with_eval, mut separate) = (Vec::new(), Vec::new());
    for i in 0..edits {
        let t = Instant::now();
        replace(2 * i, true)?;
        with_eval.push(t.elapsed());
        let t = Instant::now();
        replace(2 * i + 1, false)?;
        let args = formdb_mcp::repl::LoadArgs { ids: vec![id.clone()], ns: None, timeout_ms: None };
        formdb_mcp::repl::load(&session, args).map_err(|e| anyhow::anyhow!("load: {}", e.error))?;
        separate.push(t.elapsed());
    }
    let (with_eval_ms, separate_ms) = (p50(with_eval), p50(separate));

    // 3. The tests a clojure.core form reaches, on a store of the corpus.
    let corpus = a.corpus.or_else(|| std::env::var_os("FORMDB_CORPUS").map(PathBuf::from));
    let selection = match corpus {
        Some(corpus) => {
            let store = scratch_store(&corpus, &tmp.path().join("corpus"))?;
            let form = reach::form_by_key(&store, &a.var)?
                .with_context(|| format!("no {} in the corpus store", a.var))?;
            let keys = [form.id.clone()];
            let mut t_sel = Vec::new();
            let mut found = 0;
            for _ in 0..samples {
                let t = Instant::now();
                found =
                    formdb_engine::store::on_worker(|| reach::tests_reaching(&store, &keys))?.len();
                t_sel.push(t.elapsed());
            }
            Some((p50(t_sel), found))
        }
        None => None,
    };

    if json_out {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "samples": samples,
                "eval": {"raw_nrepl_p50_ms": raw_ms, "loop_p50_ms": loop_ms, "overhead_p50_ms": loop_ms - raw_ms, "started_repl_loop_p50_ms": started_ms},
                "replace_form": {"with_eval_p50_ms": with_eval_ms, "then_load_p50_ms": separate_ms},
                "selection": selection.map(|(ms, n)| json!({"var": a.var, "p50_ms": ms, "tests": n})),
            }))?
        );
    } else {
        println!("{:<44} {:>10} {:>10}", "figure (p50)", "formdb", "baseline");
        println!(
            "{:<44} {:>8.3}ms {:>8.3}ms   overhead {:.3} ms (goal < 1 ms)",
            "eval (+ 1 2): loop vs raw nREPL",
            loop_ms,
            raw_ms,
            loop_ms - raw_ms
        );
        println!(
            "{:<44} {:>8.3}ms {:>8.3}ms   overhead {:.3} ms (the REPL `--repl` started)",
            "eval (+ 1 2): loop (--repl) vs raw nREPL",
            started_ms,
            raw_ms,
            started_ms - raw_ms
        );
        println!(
            "{:<44} {:>8.3}ms {:>8.3}ms   (goal: no slower)",
            "replace_form eval:true vs replace + load", with_eval_ms, separate_ms
        );
        match selection {
            Some((ms, n)) => println!(
                "{:<44} {:>8.3}ms {:>10}   {n} tests (goal < 10 ms)",
                format!("tests reaching {}", a.var),
                ms,
                "-"
            ),
            None => println!("tests reaching {}: skipped (set FORMDB_CORPUS or --corpus)", a.var),
        }
    }
    Ok(())
}
