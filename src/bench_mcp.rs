//! `formdb bench mcp`: round-trip latency of MCP tool calls over stdio (a real rmcp client
//! driving a real `formdb mcp` child process) next to the same operations called directly on
//! the tool functions in process, on one store, in one run.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use formdb_engine::import::{self, Quiet};
use formdb_engine::store::{str_at, Params, Store, STORE_DIR};
use formdb_mcp::tools::{self, FormArgs, GraphArgs, ReplaceArgs};
use rmcp::model::CallToolRequestParams;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::ServiceExt;
use serde_json::{json, Value};

/// The forms sampled: (id, fqn, source).
fn sample(store: &Store, n: usize) -> Result<Vec<(String, String, String)>> {
    let rows = store.query(
        "?[id, fqn, source] := *form{id, fqn, source, kind, parent}, kind == 'defn', parent == '', fqn != ''
         :order id",
        Params::new(),
    )?;
    if rows.rows.is_empty() {
        bail!("the tree has no defn forms to sample");
    }
    // Spread the sample over the store (ids are random, so this is a random sample).
    let step = (rows.rows.len() / n).max(1);
    Ok(rows
        .rows
        .iter()
        .step_by(step)
        .take(n)
        .map(|r| (str_at(r, 0), str_at(r, 1), str_at(r, 2)))
        .collect())
}

/// A changed but still parsing version of a form: one more element before its last bracket.
fn edited(source: &str, i: usize) -> String {
    let cut = source.rfind(')').unwrap_or(source.len());
    format!("{} :bench-{i}{}", &source[..cut], &source[cut..])
}

#[derive(Default)]
struct Series(Vec<Duration>);

impl Series {
    fn p(&self, q: f64) -> f64 {
        let mut v = self.0.clone();
        v.sort();
        if v.is_empty() {
            return 0.0;
        }
        let i = ((v.len() - 1) as f64 * q).round() as usize;
        v[i].as_secs_f64() * 1000.0
    }
}

pub fn run(dir: PathBuf, samples: usize, json_out: bool) -> Result<()> {
    let tmp = tempfile::tempdir()?;
    let db = tmp.path().join(STORE_DIR);
    let samples = samples.max(5);
    let forms = {
        let store = Store::open(&db)?;
        eprintln!("importing {} ...", dir.display());
        import::import_dir(&store, &dir, "bench", &Quiet)?;
        sample(&store, samples * 2)?
    };
    if forms.len() < samples * 2 {
        bail!("the tree has only {} defn forms; need {}", forms.len(), samples * 2);
    }
    let (direct_forms, mcp_forms) = forms.split_at(samples);

    // Direct: the tool functions on an in-process store.
    let mut direct: [Series; 3] = Default::default();
    {
        let store = Arc::new(Store::open(&db)?);
        let session = formdb_mcp::session(
            store,
            &formdb_mcp::ServeOptions { user: "bench".into(), read_only: false },
        )?;
        for (i, (id, fqn, source)) in direct_forms.iter().enumerate() {
            let t = Instant::now();
            tools::get_form(&session, FormArgs { id: Some(id.clone()), symbol: None })
                .map_err(|e| anyhow::anyhow!(e.error))?;
            direct[0].0.push(t.elapsed());
            let t = Instant::now();
            tools::find_usages(
                &session,
                GraphArgs { symbol: fqn.clone(), depth: None, offset: None, limit: None },
            )
            .map_err(|e| anyhow::anyhow!(e.error))?;
            direct[1].0.push(t.elapsed());
            let t = Instant::now();
            tools::replace_form(
                &session,
                ReplaceArgs {
                    id: id.clone(),
                    source: edited(source, i),
                    expected_hash: None,
                    repair: false,
                },
            )
            .map_err(|e| anyhow::anyhow!("replace {fqn}: {}", e.error))?;
            direct[2].0.push(t.elapsed());
        }
    }

    // Over MCP: a real client and a `formdb mcp` child process on the same store.
    let mut over: [Series; 3] = Default::default();
    let exe = std::env::current_exe()?;
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(async {
        let transport =
            TokioChildProcess::new(tokio::process::Command::new(&exe).configure(|c| {
                c.arg("--db").arg(&db).arg("mcp").arg("--user").arg("bench");
            }))?;
        let client = ().serve(transport).await.context("start formdb mcp")?;
        let call = |name: &'static str, args: Value| {
            let client = &client;
            async move {
                let r = client
                    .call_tool(
                        CallToolRequestParams::new(name)
                            .with_arguments(args.as_object().cloned().unwrap_or_default()),
                    )
                    .await?;
                if r.is_error == Some(true) {
                    bail!("{name} failed: {:?}", r.content);
                }
                anyhow::Ok(())
            }
        };
        // One call first so process start-up is not measured.
        call("list_namespaces", json!({})).await?;
        for (i, (id, fqn, source)) in mcp_forms.iter().enumerate() {
            let t = Instant::now();
            call("get_form", json!({ "id": id })).await?;
            over[0].0.push(t.elapsed());
            let t = Instant::now();
            call("find_usages", json!({ "symbol": fqn })).await?;
            over[1].0.push(t.elapsed());
            let t = Instant::now();
            call("replace_form", json!({ "id": id, "source": edited(source, i) })).await?;
            over[2].0.push(t.elapsed());
        }
        client.cancel().await?;
        anyhow::Ok(())
    })?;

    let names = ["get_form", "find_usages", "replace_form"];
    if json_out {
        let rows: Vec<Value> = names
            .iter()
            .enumerate()
            .map(|(k, n)| {
                json!({
                    "tool": n,
                    "direct_p50_ms": direct[k].p(0.5), "direct_p99_ms": direct[k].p(0.99),
                    "mcp_p50_ms": over[k].p(0.5), "mcp_p99_ms": over[k].p(0.99),
                    "overhead_p50_ms": over[k].p(0.5) - direct[k].p(0.5),
                })
            })
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({ "samples": samples, "tools": rows }))?
        );
        return Ok(());
    }
    println!("MCP round trip vs direct tool call, {samples} samples each ({})", dir.display());
    println!(
        "{:<14} {:>11} {:>11} {:>11} {:>11} {:>13}",
        "tool", "direct p50", "direct p99", "mcp p50", "mcp p99", "overhead p50"
    );
    for (k, n) in names.iter().enumerate() {
        println!(
            "{:<14} {:>8.2} ms {:>8.2} ms {:>8.2} ms {:>8.2} ms {:>10.2} ms",
            n,
            direct[k].p(0.5),
            direct[k].p(0.99),
            over[k].p(0.5),
            over[k].p(0.99),
            over[k].p(0.5) - direct[k].p(0.5)
        );
    }
    Ok(())
}
