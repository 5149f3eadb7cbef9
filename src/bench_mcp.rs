//! `formdb bench mcp`: round-trip latency of MCP tool calls over stdio (a real rmcp client
//! driving a real `formdb mcp` child process) next to the same operations called directly on
//! the tool functions in process: one store, the same forms on both sides, interleaved.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use formdb_engine::import::{self, Quiet};
use formdb_engine::store::{Store, STORE_DIR};
use formdb_mcp::tools::{self, FormArgs, GraphArgs, ReplaceArgs};
use rmcp::model::CallToolRequestParams;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::ServiceExt;
use serde_json::{json, Value};

/// The forms sampled: (id, fqn, source).
fn sample(store: &Store, n: usize) -> Result<Vec<(String, String, String)>> {
    let defns = formdb_engine::read::forms::top_level_defns(store)?;
    if defns.is_empty() {
        bail!("the tree has no defn forms to sample");
    }
    // Spread the sample over the store (ids are random, so this is a random sample).
    let step = (defns.len() / n).max(1);
    Ok(defns.into_iter().step_by(step).take(n).map(|d| (d.id, d.fqn, d.source)).collect())
}

/// A changed but still parsing version of a form: one more element before its last bracket.
fn edited(source: &str, i: usize) -> String {
    let cut = source.rfind(')').unwrap_or(source.len());
    format!("{} :bench-{i}{}", &source[..cut], &source[cut..])
}

/// Latencies in milliseconds.
#[derive(Default)]
struct Series(Vec<f64>);

impl Series {
    fn p(&self, q: f64) -> f64 {
        let mut v = self.0.clone();
        v.sort_by(f64::total_cmp);
        if v.is_empty() {
            return 0.0;
        }
        v[((v.len() - 1) as f64 * q).round() as usize]
    }
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1000.0
}

/// One tool's figures: each side, and the overhead as the median of the per-form differences
/// (MCP minus direct on the same form, back to back), so the forms' own costs cancel out.
struct Figures {
    direct: Series,
    mcp: Series,
    overhead: Series,
}

pub(crate) fn run(dir: PathBuf, samples: usize, json_out: bool) -> Result<()> {
    let tmp = tempfile::tempdir()?;
    let db = tmp.path().join(STORE_DIR);
    let samples = samples.max(5);
    {
        let store = Store::open(&db)?;
        eprintln!("importing {} ...", dir.display());
        import::import_dir(&store, &dir, "bench", &Quiet)?;
    }
    let store = Arc::new(Store::open(&db)?);
    let forms = sample(&store, samples)?;
    if forms.len() < samples {
        bail!("the tree has only {} defn forms; need {samples}", forms.len());
    }
    // Direct: the tool functions on an in-process handle of the store the child serves.
    let session = formdb_mcp::session(
        store,
        &formdb_mcp::ServeOptions { user: "bench".into(), read_only: false, repl: None },
    )?;

    let names = ["get_form", "find_usages", "replace_form"];
    let mut figures: Vec<Figures> = names
        .iter()
        .map(|_| Figures {
            direct: Series::default(),
            mcp: Series::default(),
            overhead: Series::default(),
        })
        .collect();
    let exe = std::env::current_exe()?;
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(async {
        let transport =
            TokioChildProcess::new(tokio::process::Command::new(&exe).configure(|c| {
                // The scratch store records no directory, so every edit's reply notes that
                // nothing was written back (the corpus must stay as it is): not news here.
                c.arg("--db").arg(&db).arg("mcp").arg("--user").arg("bench");
                c.stderr(std::process::Stdio::null());
            }))?;
        let client = ().serve(transport).await.context("start formdb mcp")?;
        let call = |name: &'static str, args: Value| {
            let client = &client;
            async move {
                let t = Instant::now();
                let r = client
                    .call_tool(
                        CallToolRequestParams::new(name)
                            .with_arguments(args.as_object().cloned().unwrap_or_default()),
                    )
                    .await?;
                let took = ms(t);
                if r.is_error == Some(true) {
                    bail!("{name} failed: {:?}", r.content);
                }
                anyhow::Ok(took)
            }
        };
        let err = |e: tools::ToolError| anyhow::anyhow!(e.error);
        // One call first so process start-up is not measured.
        call("list_namespaces", json!({})).await?;
        for (i, (id, fqn, source)) in forms.iter().enumerate() {
            // Each tool runs on the same form on both sides, back to back; which side goes
            // first alternates, so neither always finds the caches warmed by the other.
            for first_direct in [i % 2 == 0, i % 2 != 0] {
                if first_direct {
                    let t = Instant::now();
                    tools::get_form(
                        &session,
                        FormArgs { id: Some(id.clone()), symbol: None, text_offset: None },
                    )
                    .map_err(err)?;
                    figures[0].direct.0.push(ms(t));
                    let t = Instant::now();
                    tools::find_usages(
                        &session,
                        GraphArgs { symbol: fqn.clone(), depth: None, offset: None, limit: None },
                    )
                    .map_err(err)?;
                    figures[1].direct.0.push(ms(t));
                    let t = Instant::now();
                    tools::replace_form(
                        &session,
                        ReplaceArgs {
                            id: id.clone(),
                            source: edited(source, 2 * i),
                            expected_hash: None,
                            repair: false,
                            full_diagnostics: false,
                            eval: false,
                            test: false,
                        },
                    )
                    .map_err(|e| anyhow::anyhow!("replace {fqn}: {}", e.error))?;
                    figures[2].direct.0.push(ms(t));
                } else {
                    figures[0].mcp.0.push(call("get_form", json!({ "id": id })).await?);
                    figures[1].mcp.0.push(call("find_usages", json!({ "symbol": fqn })).await?);
                    let args = json!({ "id": id, "source": edited(source, 2 * i + 1) });
                    figures[2].mcp.0.push(call("replace_form", args).await?);
                }
            }
            for f in &mut figures {
                let (d, m) = (f.direct.0[i], f.mcp.0[i]);
                f.overhead.0.push(m - d);
            }
        }
        client.cancel().await?;
        anyhow::Ok(())
    })?;

    let ratio = |f: &Figures| f.mcp.p(0.5) / f.direct.p(0.5).max(1e-9);
    if json_out {
        let rows: Vec<Value> = names
            .iter()
            .zip(&figures)
            .map(|(n, f)| {
                json!({
                    "tool": n,
                    "direct_p50_ms": f.direct.p(0.5), "direct_p99_ms": f.direct.p(0.99),
                    "mcp_p50_ms": f.mcp.p(0.5), "mcp_p99_ms": f.mcp.p(0.99),
                    "overhead_p50_ms": f.overhead.p(0.5), "overhead_p99_ms": f.overhead.p(0.99),
                    "ratio_p50": ratio(f),
                })
            })
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({ "samples": samples, "tools": rows }))?
        );
        return Ok(());
    }
    println!(
        "MCP round trip vs direct tool call, the same {samples} forms on both sides ({})",
        dir.display()
    );
    println!(
        "{:<13} {:>11} {:>11} {:>11} {:>11} {:>13} {:>13} {:>6}",
        "tool",
        "direct p50",
        "direct p99",
        "mcp p50",
        "mcp p99",
        "overhead p50",
        "overhead p99",
        "ratio"
    );
    for (n, f) in names.iter().zip(&figures) {
        println!(
            "{:<13} {:>8.2} ms {:>8.2} ms {:>8.2} ms {:>8.2} ms {:>10.2} ms {:>10.2} ms {:>5.2}x",
            n,
            f.direct.p(0.5),
            f.direct.p(0.99),
            f.mcp.p(0.5),
            f.mcp.p(0.99),
            f.overhead.p(0.5),
            f.overhead.p(0.99),
            ratio(f)
        );
    }
    println!("overhead: MCP minus direct on the same form, back to back (median and p99 of those differences); ratio: mcp p50 / direct p50");
    Ok(())
}
