//! formdb's MCP against the official MCP Inspector (`@modelcontextprotocol/inspector`, its CLI
//! mode), a strict client: it checks every tool's structured content against the tool's output
//! schema, and compiles the schemas with Ajv, which warns about formats it does not know.
//! Every tool is called once with good arguments and once with bad ones, over stdio
//! (`formdb mcp`) and over HTTP (`formdb up DIR --no-mount`, with the bearer token).
//!
//! The Inspector is installed by `scripts/test.sh` (its pinned version, from the npm registry,
//! into `target/inspector`), which names it in `FORMDB_INSPECTOR`; without it the tests skip.

mod support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use support::BIN;

use serde_json::{json, Value};

/// The Inspector's command, as `scripts/test.sh` installed it; `None` (the test skips, and says
/// so) without `FORMDB_INSPECTOR`.
fn inspector() -> Option<PathBuf> {
    let Some(bin) = std::env::var_os("FORMDB_INSPECTOR").map(PathBuf::from) else {
        eprintln!("skipping: no MCP Inspector (set FORMDB_INSPECTOR, as scripts/test.sh does)");
        return None;
    };
    assert!(bin.is_file(), "FORMDB_INSPECTOR={}: no such file", bin.display());
    Some(bin)
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Where the Inspector connects: a command it starts (stdio) or a URL with headers (HTTP).
enum Target {
    Stdio(Vec<String>),
    Http { url: String, token: String },
}

/// One Inspector CLI run: `args` are its method options. Returns the JSON it printed; fails on
/// anything a strict client complains about.
fn run(inspector: &Path, target: &Target, args: &[String]) -> Value {
    let mut cmd = Command::new(inspector);
    cmd.arg("--cli");
    match target {
        Target::Stdio(command) => {
            cmd.args(command);
        }
        Target::Http { url, token } => {
            cmd.arg(url).args(["--transport", "http", "--header"]);
            cmd.arg(format!("Authorization: Bearer {token}"));
        }
    }
    let out = cmd.args(args).output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), stderr(&out));
    let what = format!("inspector {args:?}:\nstdout: {stdout}\nstderr: {stderr}");
    // A structured result that breaks its schema is a -32602 error; a schemars-only `format`
    // is a warning on every call.
    for complaint in ["-32602", "does not match", "unknown format"] {
        assert!(!stdout.contains(complaint) && !stderr.contains(complaint), "{what}");
    }
    assert!(out.status.success(), "{what}");
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {what}"))
}

/// `tools/call` of `tool` with `args` (each value sent as JSON, so an id stays a string).
fn call(inspector: &Path, target: &Target, tool: &str, args: Value) -> Value {
    let mut cli = vec!["--method".into(), "tools/call".into(), "--tool-name".into(), tool.into()];
    let pairs: Vec<String> =
        args.as_object().unwrap().iter().map(|(k, v)| format!("{k}={v}")).collect();
    if !pairs.is_empty() {
        cli.push("--tool-arg".into());
        cli.extend(pairs);
    }
    run(inspector, target, &cli)
}

fn good(inspector: &Path, target: &Target, tool: &str, args: Value) -> Value {
    let r = call(inspector, target, tool, args.clone());
    assert_ne!(r["isError"], json!(true), "{tool} {args}: {r}");
    assert!(r["structuredContent"].is_object(), "{tool} {args}: {r}");
    r["structuredContent"].clone()
}

fn bad(inspector: &Path, target: &Target, tool: &str, args: Value) {
    let r = call(inspector, target, tool, args.clone());
    assert_eq!(r["isError"], json!(true), "{tool} {args} should be refused: {r}");
    let text = r["content"][0]["text"].as_str().unwrap_or_default();
    assert!(!text.is_empty(), "{tool} {args}: the refusal says why: {r}");
}

/// Every tool, resource and list through the Inspector: each tool once with good arguments and
/// once with bad ones. Returns the tools it called, to check that none was left out.
fn every_tool(inspector: &Path, target: &Target) -> Vec<String> {
    let method = |m: &str| run(inspector, target, &["--method".into(), m.into()]);
    let tools = method("tools/list");
    let names: Vec<String> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    let resources = method("resources/list");
    for r in resources["resources"].as_array().unwrap() {
        assert!(r["mimeType"].is_string(), "{r}");
    }
    for uri in ["formdb://guide", "formdb://ns/shop.cart"] {
        let read = run(
            inspector,
            target,
            &["--method".into(), "resources/read".into(), "--uri".into(), uri.into()],
        );
        assert!(read["contents"][0]["text"].as_str().unwrap().len() > 100, "{read}");
    }

    let mut called = Vec::new();
    let mut both = |tool: &str, ok: Value, refused: Value| -> Value {
        called.push(tool.to_string());
        bad(inspector, target, tool, refused);
        good(inspector, target, tool, ok)
    };
    both("list_namespaces", json!({"limit": 1}), json!({"limit": "many"}));
    both("explore_namespace", json!({"ns": "shop.cart"}), json!({"ns": "no.such"}));
    let sub = both(
        "get_form",
        json!({"symbol": "shop.cart/subtotal"}),
        json!({"symbol": "shop.cart/nope"}),
    );
    let id = sub["id"].clone();
    both("find_usages", json!({"symbol": "shop.cart/line-total"}), json!({"symbol": "no.such/x"}));
    both("find_callees", json!({"symbol": id, "depth": 2}), json!({"symbol": id, "depth": 99}));
    both("search", json!({"query": "subtotal"}), json!({}));
    both(
        "query",
        json!({"script": "?[fqn] := *form{fqn, ns: $ns}", "params": {"ns": "shop.cart"}}),
        json!({"script": "?[x] <- [[1]] :put nope {x}"}),
    );
    both("form_history", json!({"id": id}), json!({"id": "nope0000"}));
    both("diagnostics", json!({"ns": "shop.cart"}), json!({"offset": -1}));
    let replaced = both(
        "replace_form",
        json!({"id": id, "source": "(defn subtotal [items] (reduce + 0 (map line-total items)))", "expected_hash": sub["hash"]}),
        json!({"id": id, "source": "(defn subtotal [items]\n  (reduce + (map line-total items))"}),
    );
    assert!(replaced["introduced"].is_array() && replaced["fixed"].is_array(), "{replaced}");
    let inserted = both(
        "insert_form",
        json!({"ns": "shop.cart", "source": "(defn twice [x] (* 2 x))"}),
        json!({"ns": "no.such", "source": "(defn twice [x] (* 2 x))"}),
    );
    let twice = inserted["results"][0]["id"].clone();
    both(
        "insert_comment",
        json!({"anchor_id": twice, "text": "Doubles.", "position": "before"}),
        json!({"anchor_id": "nope0000", "text": "x"}),
    );
    both(
        "rename_symbol",
        json!({"symbol": "shop.cart/twice", "new_name": "double-it"}),
        json!({"symbol": "shop.cart/twice", "new_name": "subtotal"}),
    );
    both("create_namespace", json!({"ns": "shop.tax", "doc": "Tax."}), json!({"ns": "shop.cart"}));
    // A rename or a move may give the form a new id: read it again.
    let id_of =
        |fqn: &str| good(inspector, target, "get_form", json!({"symbol": fqn}))["id"].clone();
    let double = id_of("shop.cart/double-it");
    both(
        "move_form",
        json!({"id": double, "to_ns": "shop.tax"}),
        json!({"id": double, "to_ns": "no.such"}),
    );
    let double = id_of("shop.tax/double-it");
    both("delete_form", json!({"id": double}), json!({"id": "nope0000"}));
    both(
        "replace_top_level_form",
        json!({"file": "src/shop/tax.clj", "line": 1, "target_line": "(ns shop.tax", "new_form": "(ns shop.tax \"Taxes.\")"}),
        json!({"file": "src/shop/tax.clj", "line": 1, "target_line": "(defn nope", "new_form": "(def x 1)"}),
    );
    both(
        "batch",
        json!({"ops": [{"op": "insert", "ns": "shop.tax", "source": "(defn rate [] 0)"}], "full_diagnostics": true}),
        json!({"ops": [{"op": "explode"}]}),
    );
    // The REPL loop, against the real nREPL server the test started.
    let ran = both("eval", json!({"code": "(+ 1 2)"}), json!({"code": "  "}));
    assert_eq!(ran["value"], json!("3"), "{ran}");
    both("load", json!({"ns": "shop.cart"}), json!({"ids": ["nope0000"]}));
    let report = both("run_tests", json!({"ns": ["shop.cart-test"]}), json!({}));
    assert!(report["fail"] == json!(0) && report["error"] == json!(0), "{report}");
    let log = both("repl_log", json!({"limit": 2}), json!({"seq": 1}));
    assert!(!log["entries"].as_array().unwrap().is_empty(), "{log}");
    called.sort();
    let mut listed = names;
    listed.sort();
    assert_eq!(called, listed, "every tool is called");
    called
}

/// A real nREPL server for the tree (Debian's `clojure` and `nrepl.jar`), stopped when the
/// endpoint is dropped, and its address.
fn nrepl(dir: &Path) -> (formdb_repl::server::Endpoint, String) {
    let endpoint = formdb_repl::server::start(dir, None, Duration::from_secs(180)).unwrap();
    let addr = endpoint.addr().unwrap();
    (endpoint, addr)
}

fn project(tmp: &Path) -> PathBuf {
    let dir = tmp.join("shop");
    formdb_testkit::copy_shop(&dir);
    dir
}

#[test]
fn the_inspector_accepts_every_tool_result_over_stdio() {
    let Some(inspector) = inspector() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = project(tmp.path());
    let db = tmp.path().join("store");
    let out = Command::new(BIN).arg("--db").arg(&db).arg("import").arg(&dir).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let (_nrepl, addr) = nrepl(&dir);
    let command = vec![
        BIN.to_string(),
        "--db".into(),
        db.display().to_string(),
        "mcp".into(),
        "--nrepl".into(),
        addr,
    ];
    let called = every_tool(&inspector, &Target::Stdio(command));
    assert!(called.len() >= 17, "{called:?}");
}

/// A running `formdb up DIR --no-mount`, stopped when dropped.
struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_inspector_accepts_every_tool_result_over_http() {
    let Some(inspector) = inspector() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = project(tmp.path());
    let (_nrepl, addr) = nrepl(&dir);
    let mut child = Command::new(BIN)
        .args(["--json", "up"])
        .arg(&dir)
        .args(["--no-mount", "--nrepl", &addr])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let daemon = Daemon(child);
    let up: Value = serde_json::from_str(&line)
        .unwrap_or_else(|e| panic!("formdb up did not start: {e}: {line:?}"));
    let info: Value =
        serde_json::from_slice(&std::fs::read(dir.join(".formdb/server.json")).unwrap()).unwrap();
    assert_eq!(info["url"], up["url"]);
    let target = Target::Http {
        url: info["url"].as_str().unwrap().to_string(),
        token: info["token"].as_str().unwrap().to_string(),
    };
    every_tool(&inspector, &target);
    drop(daemon);
}
