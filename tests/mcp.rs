//! The MCP server, driven over stdio by a real MCP client (rmcp's client side) against the real
//! `formdb` binary and a real store imported from `examples/shop`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientConfig, ProtocolVersion,
    ReadResourceRequestParams, ResourceContents, ResourceUpdatedNotificationParam,
    SubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt, RoleClient, ServiceExt};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_formdb");

struct Project {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    db: PathBuf,
}

fn project() -> Project {
    project_with(formdb_testkit::copy_shop)
}

/// A store imported from a tree that `write` fills.
fn project_with(write: impl FnOnce(&Path)) -> Project {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("shop");
    write(&root);
    let db = tmp.path().join("store");
    let out = Command::new(BIN).arg("--db").arg(&db).arg("import").arg(&root).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    Project { _tmp: tmp, root, db }
}

fn cli(p: &Project, args: &[&str]) -> String {
    let out = Command::new(BIN).arg("--db").arg(&p.db).args(args).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// A client that records resource-updated notifications.
#[derive(Clone, Default)]
struct Client {
    version: Option<ProtocolVersion>,
    updated: Arc<Mutex<Vec<String>>>,
}

impl ClientHandler for Client {
    fn get_info(&self) -> ClientConfig {
        let mut info = ClientConfig::default();
        if let Some(v) = &self.version {
            info.protocol_version = v.clone();
        }
        info
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.updated.lock().unwrap().push(params.uri);
    }
}

async fn connect_as(
    p: &Project,
    client: Client,
    extra: &[&str],
) -> RunningService<RoleClient, Client> {
    let db = p.db.clone();
    let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
    let transport = TokioChildProcess::new(tokio::process::Command::new(BIN).configure(|cmd| {
        cmd.arg("--db").arg(&db).arg("mcp").args(&extra);
    }))
    .unwrap();
    client.serve(transport).await.expect("the server initializes")
}

async fn connect(p: &Project) -> RunningService<RoleClient, Client> {
    connect_as(p, Client { version: Some(ProtocolVersion::V_2025_06_18), ..Client::default() }, &[])
        .await
}

async fn call(c: &RunningService<RoleClient, Client>, tool: &str, args: Value) -> CallToolResult {
    let args = args.as_object().cloned().unwrap_or_default();
    c.call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(args))
        .await
        .unwrap_or_else(|e| panic!("{tool}: protocol error {e}"))
}

/// The structured answer of a successful call.
async fn ok(c: &RunningService<RoleClient, Client>, tool: &str, args: Value) -> Value {
    let r = call(c, tool, args.clone()).await;
    assert_ne!(r.is_error, Some(true), "{tool} {args} failed: {:?}", r.content);
    let v = r.structured_content.clone().expect("structured content");
    // The same answer as text.
    let text = r.content.first().and_then(|c| c.as_text()).map(|t| t.text.clone()).unwrap();
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), v);
    v
}

/// The error answer of a refused call: its details (the JSON after the message, or `null`) and
/// its text. An error carries no structured content: strict clients check that against the
/// tool's output schema, which describes the answer.
async fn refused(
    c: &RunningService<RoleClient, Client>,
    tool: &str,
    args: Value,
) -> (Value, String) {
    let r = call(c, tool, args.clone()).await;
    assert_eq!(r.is_error, Some(true), "{tool} {args} should be refused: {:?}", r.content);
    assert_eq!(r.structured_content, None, "{tool} {args}: an error has no structured content");
    let texts: Vec<String> =
        r.content.iter().filter_map(|c| c.as_text()).map(|t| t.text.clone()).collect();
    let details = match texts.get(1) {
        Some(json) => serde_json::from_str(json).expect("the details are JSON"),
        None => Value::Null,
    };
    if let Some(error) = details.get("error") {
        assert!(texts[0].starts_with(error.as_str().unwrap()), "{texts:?}");
    }
    (details, texts[0].clone())
}

fn view(p: &Project, ns: &str) -> String {
    cli(p, &["view", ns])
}

/// The instructions must steer an agent to the way formdb is meant to be used.
fn assert_instructions(instructions: &str) {
    for want in [
        "Work by id",
        "read them with `get_form` (not whole files)",
        "check `find_usages` before changing what a function takes or returns",
        "prefer structured edits",
    ] {
        assert!(instructions.contains(want), "instructions say `{want}`: {instructions}");
    }
}

#[tokio::test]
async fn negotiates_every_protocol_era_and_describes_its_tools() {
    let p = project();
    for v in [
        ProtocolVersion::V_2024_11_05,
        ProtocolVersion::V_2025_06_18,
        ProtocolVersion::V_2025_11_25,
    ] {
        let c = connect_as(&p, Client { version: Some(v.clone()), ..Client::default() }, &[]).await;
        let info = c.peer_info().expect("initialize answered");
        assert_eq!(info.protocol_version, v);
        assert_instructions(&info.instructions.clone().unwrap_or_default());
        let tools = c.list_all_tools().await.unwrap();
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        for want in [
            "list_namespaces",
            "explore_namespace",
            "get_form",
            "find_usages",
            "find_callees",
            "search",
            "query",
            "form_history",
            "diagnostics",
            "replace_form",
            "insert_form",
            "delete_form",
            "rename_symbol",
            "move_form",
            "create_namespace",
            "insert_comment",
            "replace_top_level_form",
            "batch",
        ] {
            let t = tools
                .iter()
                .find(|t| t.name == want)
                .unwrap_or_else(|| panic!("{want} in {names:?}"));
            assert!(t.output_schema.is_some(), "{want} has an output schema");
            assert_eq!(t.input_schema.get("type"), Some(&json!("object")), "{want}");
        }
        c.cancel().await.unwrap();
    }
    // A client asking for the stateless era over the initialize handshake gets the newest
    // version that still has one.
    let c = connect_as(&p, Client::default(), &[]).await;
    assert_eq!(c.peer_info().unwrap().protocol_version, ProtocolVersion::V_2025_11_25);
    c.cancel().await.unwrap();
    // The stateless era itself: no handshake, the client discovers the server and every
    // request carries its own metadata.
    let transport = TokioChildProcess::new(tokio::process::Command::new(BIN).configure(|cmd| {
        cmd.arg("--db").arg(&p.db).arg("mcp");
    }))
    .unwrap();
    let lifecycle =
        ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] };
    let c = Client::default().serve_with_lifecycle(transport, lifecycle).await.expect("discovers");
    let info = c.peer_info().expect("discovery answered");
    assert_eq!(info.protocol_version, ProtocolVersion::V_2026_07_28);
    assert_instructions(&info.instructions.clone().unwrap_or_default());
    let v = ok(&c, "list_namespaces", json!({})).await;
    assert!(v["namespaces"].as_array().unwrap().iter().any(|n| n["ns"] == "shop.cart"));
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn read_tools_answer_and_refuse_bad_arguments() {
    let p = project();
    let c = connect(&p).await;
    let ns = ok(&c, "explore_namespace", json!({"ns": "shop.cart"})).await;
    let names: Vec<&str> =
        ns["vars"].as_array().unwrap().iter().map(|v| v["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["*tax-rate*", "line-total", "subtotal", "total", "receipt", "print-receipt!"]
    );
    assert_eq!(ns["doc"], "A shopping cart: items, totals and a receipt.");

    let f = ok(&c, "get_form", json!({"symbol": "shop.cart/total"})).await;
    assert_eq!(f["kind"], "defn");
    assert!(f["source"].as_str().unwrap().starts_with("(defn total"));
    assert!(f["calls"].as_array().unwrap().contains(&json!("shop.cart/subtotal")));
    let by_id = ok(&c, "get_form", json!({"id": f["id"]})).await;
    assert_eq!(by_id, f);

    let (_, text) = refused(&c, "get_form", json!({"id": "zzzzzzzz"})).await;
    assert!(text.contains("no form with id"), "{text}");
    let (_, text) = refused(&c, "get_form", json!({})).await;
    assert!(text.contains("send `id`"), "{text}");

    let u = ok(&c, "find_usages", json!({"symbol": "shop.cart/line-total"})).await;
    let users: Vec<&str> =
        u["entries"].as_array().unwrap().iter().map(|e| e["fqn"].as_str().unwrap()).collect();
    assert!(
        users.contains(&"shop.cart/subtotal") && users.contains(&"shop.cart/receipt"),
        "{users:?}"
    );
    let deep = ok(&c, "find_usages", json!({"symbol": "shop.cart/line-total", "depth": 3})).await;
    assert!(deep["entries"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["fqn"] == "shop.cart/print-receipt!"));
    let (_, text) = refused(&c, "find_usages", json!({"symbol": "no.such/var"})).await;
    assert!(text.contains("no var `no.such/var`"), "{text}");
    for depth in [0, 11] {
        let (_, text) =
            refused(&c, "find_usages", json!({"symbol": "shop.cart/line-total", "depth": depth}))
                .await;
        assert!(text.contains(&format!("depth {depth}: send a depth from 1 to 10")), "{text}");
    }
    let (_, text) = refused(&c, "explore_namespace", json!({"ns": "shop.nope"})).await;
    assert!(
        text.contains("no namespace `shop.nope`") && text.contains("list_namespaces"),
        "{text}"
    );
    let (_, text) = refused(&c, "form_history", json!({"id": "zzzzzzzz"})).await;
    assert!(text.contains("no history for `zzzzzzzz`"), "{text}");

    // Arguments of the wrong type or missing are error results naming the tool and the
    // argument, and the server goes on serving.
    let (_, text) = refused(&c, "get_form", json!({"id": 42})).await;
    assert!(
        text.contains("bad arguments for `get_form`") && text.contains("integer `42`"),
        "{text}"
    );
    let (_, text) = refused(&c, "explore_namespace", json!({})).await;
    assert!(text.contains("missing field `ns`"), "{text}");
    let (_, text) =
        refused(&c, "find_usages", json!({"symbol": "shop.cart/total", "depth": "deep"})).await;
    assert!(text.contains("bad arguments for `find_usages`") && text.contains("deep"), "{text}");
    let (_, text) = refused(&c, "batch", json!({"ops": "replace everything"})).await;
    assert!(text.contains("bad arguments for `batch`"), "{text}");
    ok(&c, "get_form", json!({"symbol": "shop.cart/total"})).await;

    let callees = ok(&c, "find_callees", json!({"symbol": "shop.cart/total"})).await;
    assert!(callees["entries"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["fqn"] == "shop.cart/subtotal"));

    let hits = ok(&c, "search", json!({"query": "receipt"})).await;
    assert!(hits["hits"][0]["fqn"].as_str().unwrap().contains("receipt"));

    let q = ok(&c, "query", json!({"script": "?[fqn] := *form{fqn, ns: $ns}, fqn != '' :order fqn", "params": {"ns": "shop.money"}})).await;
    assert_eq!(q["rows"].as_array().unwrap().len(), 3);
    let (_, text) = refused(
        &c,
        "query",
        json!({"script": "?[key, value] <- [['x', 'y']] :put meta {key => value}"}),
    )
    .await;
    assert!(text.contains("read-only"), "{text}");
    let (_, text) = refused(&c, "query", json!({"script": "::remove form"})).await;
    assert!(text.contains("not allowed"), "{text}");
    // A huge result is cut into pages with a stated continuation.
    let big = ok(&c, "query", json!({"script": "?[x] := x in int_range(1000)"})).await;
    assert_eq!(big["rows"].as_array().unwrap().len(), 200);
    assert_eq!(big["page"]["total"], 1000);
    assert_eq!(big["page"]["next_offset"], 200);
    let last =
        ok(&c, "query", json!({"script": "?[x] := x in int_range(1000)", "offset": 800})).await;
    assert!(last["page"].get("next_offset").is_none());

    let guide = c.read_resource(ReadResourceRequestParams::new("formdb://guide")).await.unwrap();
    assert!(format!("{guide:?}").contains("replace_form"));
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn edits_by_id_reach_the_store_history_and_files() {
    let p = project();
    let c = connect_as(
        &p,
        Client { version: Some(ProtocolVersion::V_2025_11_25), ..Client::default() },
        &["--user", "claude"],
    )
    .await;
    let f = ok(&c, "get_form", json!({"symbol": "shop.cart/subtotal"})).await;
    let id = f["id"].as_str().unwrap().to_string();

    // A stale hash is refused with the current source.
    let (err, text) = refused(
        &c,
        "replace_form",
        json!({"id": id, "source": "(defn subtotal [items] 0)", "expected_hash": "stale"}),
    )
    .await;
    assert_eq!(err["current_hash"], f["hash"]);
    assert!(text.contains("(defn subtotal [items]"), "{text}");

    // A good replace keeps the id, is laid out, and is recorded with this user as author.
    let r = ok(&c, "replace_form", json!({"id": id, "source": "(defn subtotal [items] (reduce + 0 (map line-total items)))", "expected_hash": f["hash"]})).await;
    assert_eq!(r["results"][0]["id"], json!(id));
    assert_ne!(r["results"][0]["hash"], f["hash"]);
    assert!(view(&p, "shop.cart")
        .contains("(defn subtotal [items] (reduce + 0 (map line-total items)))"));
    let h = ok(&c, "form_history", json!({"id": id})).await;
    let last = h["versions"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["author"], "claude");
    assert_eq!(last["op"], "replace_form");
    assert!(
        last["diff"].as_str().unwrap().contains("+(defn subtotal [items] (reduce + 0"),
        "{last}"
    );

    // Unbalanced source is refused, nothing stored.
    let before = view(&p, "shop.cart");
    let (_, text) = refused(
        &c,
        "replace_form",
        json!({"id": id, "source": "(defn subtotal [items]\n  (reduce + items)"}),
    )
    .await;
    assert!(text.contains("nothing was stored"), "{text}");
    assert_eq!(view(&p, "shop.cart"), before);
    // The refusal carries indent mode's repair; `repair: true` accepts it in one step.
    let (err, text) = refused(
        &c,
        "replace_form",
        json!({"id": id, "source": "(defn subtotal [items]\n  (reduce + (map line-total items))"}),
    )
    .await;
    assert_eq!(err["suggestion"], "(defn subtotal [items]\n  (reduce + (map line-total items)))");
    assert!(text.contains("+2 |   (reduce + (map line-total items)))"), "{text}");
    let r = ok(&c, "replace_form", json!({"id": id, "source": "(defn subtotal [items]\n  (reduce + (map line-total items))", "repair": true})).await;
    assert!(r["results"][0]["repaired"].as_str().unwrap().contains("(map line-total items)))"));
    // Laid out cljfmt-style: it fits on one line.
    assert!(
        view(&p, "shop.cart").contains("(defn subtotal [items] (reduce + (map line-total items)))")
    );

    // Insert without a position lands before its first user.
    ok(
        &c,
        "replace_form",
        json!({"id": id, "source": "(defn subtotal [items] (reduce + 0 (map discounted items)))"}),
    )
    .await;
    let ins = ok(&c, "insert_form", json!({"ns": "shop.cart", "source": "(defn discounted [item] (quot (* 9 (line-total item)) 10))"})).await;
    let new_id = ins["results"][0]["id"].as_str().unwrap().to_string();
    assert_eq!(new_id.len(), 8);
    let t = view(&p, "shop.cart");
    assert!(t.find("(defn discounted").unwrap() < t.find("(defn subtotal").unwrap(), "{t}");

    // Comments, line-anchored replacement, create_namespace, delete.
    ok(
        &c,
        "insert_comment",
        json!({"anchor_id": new_id, "text": "Ten percent off.", "position": "before"}),
    )
    .await;
    assert!(view(&p, "shop.cart").contains(";; Ten percent off.\n(defn discounted"));
    let (_, text) = refused(
        &c,
        "replace_top_level_form",
        json!({"file": "../../etc/passwd", "line": 1, "new_form": "(def x 1)"}),
    )
    .await;
    assert!(text.contains("not a path inside the tree"), "{text}");
    let (_, text) = refused(&c, "replace_top_level_form", json!({"file": "src/shop/money.clj", "line": 4, "target_line": "(defn nope", "new_form": "(def x 1)"})).await;
    assert!(text.contains("(defn cents"), "shows the nearby lines: {text}");
    ok(&c, "replace_top_level_form", json!({"file": "src/shop/money.clj", "line": 5, "target_line": "(defn cents", "new_form": "(defn cents \"Whole units and cents to cents.\" [units c] (+ c (* 100 units)))"})).await;
    assert!(view(&p, "shop.money").contains("(+ c (* 100 units))"));
    let created = ok(
        &c,
        "create_namespace",
        json!({"ns": "shop.tax", "doc": "Tax.", "requires": ["shop.money :as money"]}),
    )
    .await;
    assert_eq!(created["files"], json!(["src/shop/tax.clj"]));
    ok(&c, "delete_form", json!({"id": new_id})).await;
    let (_, text) = refused(&c, "delete_form", json!({"id": new_id})).await;
    assert!(text.contains("no form with id"), "{text}");

    // A batch is all-or-nothing.
    let before = view(&p, "shop.cart");
    let (_, text) = refused(
        &c,
        "batch",
        json!({"ops": [
            {"op": "replace", "id": id, "source": "(defn subtotal [items] 1)"},
            {"op": "delete", "id": "nosuchid"}
        ]}),
    )
    .await;
    assert!(text.contains("op 2"), "{text}");
    assert_eq!(view(&p, "shop.cart"), before);
    c.cancel().await.unwrap();
}

/// An unknown id is worded for an agent: the tools that find ids, never a CLI command, alone
/// and inside a batch.
#[tokio::test]
async fn an_unknown_id_names_the_tools_that_find_ids() {
    let p = project();
    let c = connect(&p).await;
    let (_, alone) = refused(&c, "delete_form", json!({"id": "zzzzzzzz"})).await;
    let (_, batched) = refused(
        &c,
        "batch",
        json!({"ops": [
            {"op": "insert", "ns": "shop.money", "source": "(def unknown-id-test 1)"},
            {"op": "delete", "id": "zzzzzzzz"}
        ]}),
    )
    .await;
    assert!(batched.starts_with("op 2 (delete_form): "), "{batched}");
    for text in [alone, batched] {
        assert!(text.contains("no form with id `zzzzzzzz`"), "{text}");
        assert!(text.contains("`get_form`") && text.contains("`search`"), "{text}");
        assert!(!text.contains("formdb "), "no CLI command: {text}");
    }
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn read_only_servers_refuse_edits_and_resources_notify_subscribers() {
    let p = project();
    let ro = connect_as(
        &p,
        Client { version: Some(ProtocolVersion::V_2025_06_18), ..Client::default() },
        &["--read-only"],
    )
    .await;
    let f = ok(&ro, "get_form", json!({"symbol": "shop.money/cents"})).await;
    let (_, text) = refused(&ro, "delete_form", json!({"id": f["id"]})).await;
    assert!(text.contains("read-only"), "{text}");
    ro.cancel().await.unwrap();

    let client = Client { version: Some(ProtocolVersion::V_2025_06_18), ..Client::default() };
    let updated = client.updated.clone();
    let c = connect_as(&p, client, &[]).await;
    let text =
        c.read_resource(ReadResourceRequestParams::new("formdb://ns/shop.money")).await.unwrap();
    assert!(format!("{text:?}").contains("(defn format-cents"));
    #[allow(deprecated)]
    c.subscribe(SubscribeRequestParams::new("formdb://ns/shop.money")).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    ok(
        &c,
        "replace_form",
        json!({"id": f["id"], "source": "(defn cents [units c] (+ c (* 100 units)))"}),
    )
    .await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while updated.lock().unwrap().is_empty() && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(updated.lock().unwrap().first().map(String::as_str), Some("formdb://ns/shop.money"));
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn the_server_exits_when_stdin_closes() {
    let p = project();
    let mut child = Command::new(BIN)
        .arg("--db")
        .arg(&p.db)
        .arg("mcp")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdin.take());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "{status}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "still running after stdin closed");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let _ = p.root;
}

/// Export the store with `formdb export` and evaluate `expr` in Debian's Clojure runtime with
/// the exported `src` and `test` on the classpath; returns stdout.
fn run_clojure(p: &Project, expr: &str) -> String {
    let out_dir = p.root.parent().unwrap().join(format!("export-{}", expr.len()));
    let out =
        Command::new(BIN).arg("--db").arg(&p.db).arg("export").arg(&out_dir).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut cp = vec!["/usr/share/java/clojure.jar".to_string()];
    for extra in ["/usr/share/java/spec.alpha.jar", "/usr/share/java/core.specs.alpha.jar"] {
        if Path::new(extra).exists() {
            cp.push(extra.to_string());
        }
    }
    cp.push(out_dir.join("src").display().to_string());
    cp.push(out_dir.join("test").display().to_string());
    let run = Command::new("java")
        .args(["-cp", &cp.join(":"), "clojure.main", "-e", expr])
        .output()
        .expect("java runs");
    assert!(
        run.status.success(),
        "clojure failed on `{expr}`:\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    String::from_utf8_lossy(&run.stdout).into_owned()
}

#[tokio::test]
async fn rename_and_move_across_namespaces_load_in_clojure_and_diagnostics_find_problems() {
    let p = project();
    let c = connect(&p).await;

    // rename_symbol: the definition and every use, unqualified and through aliases.
    let before = ok(&c, "get_form", json!({"symbol": "shop.cart/line-total"})).await;
    let r = ok(
        &c,
        "rename_symbol",
        json!({"symbol": "shop.cart/line-total", "new_name": "item-total"}),
    )
    .await;
    assert!(r["files"].as_array().unwrap().iter().any(|f| f == "src/shop/cart.clj"), "{r}");
    let cart = view(&p, "shop.cart");
    assert!(cart.contains("(defn item-total") && !cart.contains("line-total"), "{cart}");
    let after = ok(&c, "get_form", json!({"symbol": "shop.cart/item-total"})).await;
    assert_eq!(after["id"], before["id"], "the renamed form keeps its id");
    let users = ok(&c, "find_usages", json!({"symbol": "shop.cart/item-total"})).await;
    for caller in ["shop.cart/subtotal", "shop.cart/receipt"] {
        assert!(users.to_string().contains(caller), "{caller} calls the new name: {users}");
    }
    let (_, msg) = refused(&c, "find_usages", json!({"symbol": "shop.cart/line-total"})).await;
    assert!(msg.contains("no var `shop.cart/line-total`"), "the old name is gone: {msg}");
    let h = ok(&c, "form_history", json!({"id": before["id"]})).await;
    let last = h["versions"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["author"], "agent");

    // Refused renames change nothing.
    let snapshot = view(&p, "shop.cart");
    let (_, msg) = refused(
        &c,
        "rename_symbol",
        json!({"symbol": "shop.cart/item-total", "new_name": "subtotal"}),
    )
    .await;
    assert!(msg.contains("subtotal"), "{msg}");
    let (_, msg) =
        refused(&c, "rename_symbol", json!({"symbol": "shop.cart/item-total", "new_name": "a b"}))
            .await;
    assert!(msg.contains("a b"), "{msg}");
    let (_, msg) =
        refused(&c, "rename_symbol", json!({"symbol": "shop.nope/x", "new_name": "y"})).await;
    assert!(msg.contains("shop.nope/x"), "{msg}");
    assert_eq!(view(&p, "shop.cart"), snapshot);

    // move_form: `cents` goes to a new namespace; its caller (in a comment block) follows.
    ok(&c, "create_namespace", json!({"ns": "shop.units", "doc": "Units of money."})).await;
    let cents = ok(&c, "get_form", json!({"symbol": "shop.money/cents"})).await;
    ok(&c, "move_form", json!({"id": cents["id"], "to_ns": "shop.units"})).await;
    let moved = ok(&c, "get_form", json!({"symbol": "shop.units/cents"})).await;
    assert_eq!(moved["id"], cents["id"], "the moved form keeps its id");
    assert!(!view(&p, "shop.money").contains("(defn cents"));
    assert!(view(&p, "shop.units").contains("(defn cents"));

    // A move that would make namespaces require each other is refused, naming the cycle.
    let print = ok(&c, "get_form", json!({"symbol": "shop.cart/print-receipt!"})).await;
    let (_, msg) =
        refused(&c, "move_form", json!({"id": print["id"], "to_ns": "shop.money"})).await;
    assert!(msg.contains("shop.cart") && msg.contains("shop.money"), "{msg}");
    let (_, msg) = refused(&c, "move_form", json!({"id": "zzzzzzzz", "to_ns": "shop.money"})).await;
    assert!(msg.contains("zzzzzzzz"), "{msg}");

    // The edited code loads and runs in Clojure, tests included.
    let out = run_clojure(
        &p,
        "(require 'shop.cart 'shop.units 'shop.cart-test 'clojure.test)
         (println (shop.units/cents 3 50) (shop.cart/item-total {:price 350 :qty 2}))
         (let [r (clojure.test/run-tests 'shop.cart-test)] (println :fail (+ (:fail r) (:error r))))",
    );
    assert!(out.contains("350 700"), "{out}");
    assert!(out.contains(":fail 0"), "{out}");

    // diagnostics: an arity mismatch, a top-level side effect and an unresolved symbol.
    ok(
        &c,
        "insert_form",
        json!({"ns": "shop.units", "source": "(defn twice [c] (shop.money/format-cents c c))"}),
    )
    .await;
    ok(&c, "insert_form", json!({"ns": "shop.units", "source": "(println \"loading units\")"}))
        .await;
    ok(&c, "insert_form", json!({"ns": "shop.units", "source": "(defn lost [] (no-such-fn 1))"}))
        .await;
    let d = ok(&c, "diagnostics", json!({"ns": "shop.units"})).await;
    let kinds: Vec<&str> =
        d["diagnostics"].as_array().unwrap().iter().map(|x| x["kind"].as_str().unwrap()).collect();
    for k in ["arity", "side_effect", "unresolved"] {
        assert!(kinds.contains(&k), "{k} reported: {d}");
    }
    for x in d["diagnostics"].as_array().unwrap() {
        assert_eq!(x["ns"], "shop.units");
        assert!(x["line"].as_u64().unwrap() > 1, "{x}");
    }
    let lost = ok(&c, "get_form", json!({"symbol": "shop.units/lost"})).await;
    let one = ok(&c, "diagnostics", json!({"id": lost["id"]})).await;
    let only = one["diagnostics"].as_array().unwrap();
    assert!(!only.is_empty() && only.iter().all(|x| x["id"] == lost["id"]), "{one}");
    let clean = ok(&c, "diagnostics", json!({"ns": "shop.cart"})).await;
    assert!(
        clean["diagnostics"].as_array().unwrap().iter().all(|x| x["kind"] != "arity"),
        "{clean}"
    );
    c.cancel().await.unwrap();
}

/// Every `format` in a schema, wherever it is nested.
fn formats(schema: &Value, out: &mut Vec<String>) {
    match schema {
        Value::Object(m) => {
            if let Some(Value::String(f)) = m.get("format") {
                out.push(f.clone());
            }
            m.values().for_each(|v| formats(v, out));
        }
        Value::Array(a) => a.iter().for_each(|v| formats(v, out)),
        _ => {}
    }
}

#[tokio::test]
async fn tools_declare_their_effects_and_only_standard_schema_formats() {
    let p = project();
    let c = connect(&p).await;
    let tools = c.list_all_tools().await.unwrap();
    let reads = [
        "list_namespaces",
        "explore_namespace",
        "get_form",
        "find_usages",
        "find_callees",
        "search",
        "query",
        "form_history",
        "diagnostics",
        "repl_log",
    ];
    for t in &tools {
        let a = t.annotations.as_ref().unwrap_or_else(|| panic!("{} has annotations", t.name));
        let read = reads.contains(&t.name.as_ref());
        assert_eq!(a.read_only_hint, Some(read), "{}", t.name);
        assert!(a.destructive_hint.is_some() && a.idempotent_hint.is_some(), "{}", t.name);
        // The REPL tools run code in the project's REPL, outside the store.
        let runs_code = matches!(t.name.as_ref(), "eval" | "load" | "run_tests");
        assert_eq!(a.open_world_hint, Some(runs_code), "{}", t.name);
        if read {
            assert_eq!((a.destructive_hint, a.idempotent_hint), (Some(false), Some(true)));
        }
        // Standard JSON Schema formats only (schemars' `uint`, `int64`, `double` are not).
        let mut found = Vec::new();
        formats(&Value::Object(t.input_schema.as_ref().clone()), &mut found);
        formats(&Value::Object(t.output_schema.as_ref().unwrap().as_ref().clone()), &mut found);
        assert_eq!(found, Vec::<String>::new(), "{}", t.name);
    }
    let by_name = |n: &str| tools.iter().find(|t| t.name == n).unwrap();
    let hints = |n: &str| {
        let a = by_name(n).annotations.clone().unwrap();
        (a.destructive_hint.unwrap(), a.idempotent_hint.unwrap())
    };
    assert_eq!(hints("delete_form"), (true, true));
    assert_eq!(hints("insert_form"), (false, false), "a second insert adds a second form");
    // An unsigned argument still says it cannot be negative.
    let limit = &by_name("list_namespaces").input_schema["properties"]["limit"];
    assert_eq!(limit["minimum"], json!(0), "{limit}");
    let total = serde_json::to_string(by_name("search").output_schema.as_ref().unwrap()).unwrap();
    assert!(total.contains("\"minimum\":0"), "{total}");
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn edit_replies_lead_with_what_they_introduced_and_fixed() {
    let p = project();
    let c = connect(&p).await;
    let sub = ok(&c, "get_form", json!({"symbol": "shop.cart/subtotal"})).await;
    let no_price = |ds: &Value| {
        ds.as_array()
            .unwrap()
            .iter()
            .filter(|d| {
                d["kind"] == "unresolved"
                    && d["message"].as_str().unwrap().contains("no-such-price")
            })
            .count()
    };
    let args = json!({"id": sub["id"], "source": "(defn subtotal [items] (reduce + (map no-such-price items)))"});
    let r = call(&c, "replace_form", args).await;
    // The text an agent reads starts with what changed; the full lists are not sent.
    let text = r.content[0].as_text().unwrap().text.clone();
    assert!(text.starts_with("{\"introduced\":[{"), "{text}");
    assert!(text.find("\"fixed\"").unwrap() < text.find("\"results\"").unwrap(), "{text}");
    let broken = r.structured_content.unwrap();
    assert_eq!(no_price(&broken["introduced"]), 1, "{broken}");
    assert_eq!(broken["fixed"], json!([]), "{broken}");
    assert!(
        broken.get("diagnostics_before").is_none() && broken.get("diagnostics_after").is_none()
    );

    // An edit that moves the problem down a line neither introduces nor fixes it.
    let args =
        json!({"ns": "shop.cart", "source": "(defn half [x] (quot x 2))", "before": sub["id"]});
    let moved = ok(&c, "insert_form", args).await;
    assert_eq!((&moved["introduced"], &moved["fixed"]), (&json!([]), &json!([])), "{moved}");
    // Asked for, the full lists come too: the problem is in both, on another line after.
    let args = json!({"ns": "shop.cart", "source": "(defn third [x] (quot x 3))", "before": sub["id"], "full_diagnostics": true});
    let full = ok(&c, "insert_form", args).await;
    assert_eq!((&full["introduced"], &full["fixed"]), (&json!([]), &json!([])), "{full}");
    let line = |side: &str| {
        full[side].as_array().unwrap().iter().find(|d| d["kind"] == "unresolved").unwrap()["line"]
            .clone()
    };
    assert_ne!(line("diagnostics_before"), line("diagnostics_after"), "{full}");

    // The same problem in another form is a new one.
    let total = ok(&c, "get_form", json!({"symbol": "shop.cart/total"})).await;
    let args = json!({"id": total["id"], "source": "(defn total [items] (no-such-price (subtotal items)))"});
    let again = ok(&c, "replace_form", args).await;
    assert_eq!(no_price(&again["introduced"]), 1, "{again}");
    assert_eq!(again["introduced"][0]["id"], total["id"], "{again}");
    assert_eq!(again["fixed"], json!([]), "{again}");

    // A batch that takes both out fixes both.
    let args = json!({"ops": [
        {"op": "replace", "id": sub["id"], "source": "(defn subtotal [items] (reduce + (map line-total items)))"},
        {"op": "replace", "id": total["id"], "source": total["source"]}
    ]});
    let fixed = ok(&c, "batch", args).await;
    assert_eq!(no_price(&fixed["fixed"]), 2, "{fixed}");
    assert_eq!(fixed["introduced"], json!([]), "{fixed}");
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn edit_diagnostics_cover_the_same_namespaces_before_and_after() {
    let p = project();
    let c = connect(&p).await;
    // Every diagnostic of an edit's answer lies in the namespaces it says both lists cover.
    async fn edit(c: &RunningService<RoleClient, Client>, tool: &str, mut args: Value) -> Value {
        args["full_diagnostics"] = json!(true);
        let r = ok(c, tool, args).await;
        let nss = r["diagnostics_namespaces"].as_array().unwrap().clone();
        for side in ["diagnostics_before", "diagnostics_after"] {
            for d in r[side].as_array().unwrap() {
                assert!(nss.contains(&d["ns"]), "{side} {d} outside {nss:?}");
            }
        }
        r
    }
    let unresolved = |r: &Value, side: &str, sym: &str| {
        r[side]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["kind"] == "unresolved" && d["message"].as_str().unwrap().contains(sym))
    };

    // An edit that introduces an unresolved symbol shows it after, not before ...
    let sub = ok(&c, "get_form", json!({"symbol": "shop.cart/subtotal"})).await;
    let broken = edit(&c, "replace_form", json!({"id": sub["id"], "source": "(defn subtotal [items] (reduce + (map no-such-price items)))"})).await;
    assert!(unresolved(&broken, "diagnostics_after", "no-such-price"), "{broken}");
    assert!(!unresolved(&broken, "diagnostics_before", "no-such-price"), "{broken}");
    // ... and the edit that fixes it shows the reverse.
    let fixed = edit(&c, "replace_form", json!({"id": sub["id"], "source": "(defn subtotal [items] (reduce + (map line-total items)))"})).await;
    assert!(unresolved(&fixed, "diagnostics_before", "no-such-price"), "{fixed}");
    assert!(!unresolved(&fixed, "diagnostics_after", "no-such-price"), "{fixed}");

    // Changing what a function takes covers its callers' namespaces too: the call in shop.cart
    // now passes the wrong number of arguments.
    let fmt = ok(&c, "get_form", json!({"symbol": "shop.money/format-cents"})).await;
    let r = edit(&c, "replace_form", json!({"id": fmt["id"], "source": "(defn format-cents [c sep] (str (quot c 100) sep (rem c 100)))"})).await;
    assert_eq!(r["diagnostics_namespaces"], json!(["shop.cart", "shop.money"]));
    let arity_in_cart = |side: &str| {
        r[side].as_array().unwrap().iter().any(|d| d["kind"] == "arity" && d["ns"] == "shop.cart")
    };
    assert!(arity_in_cart("diagnostics_after") && !arity_in_cart("diagnostics_before"), "{r}");

    // A rename reaches every namespace that uses the var, before as after.
    let r = edit(
        &c,
        "rename_symbol",
        json!({"symbol": "shop.money/format-cents", "new_name": "cents->str"}),
    )
    .await;
    assert_eq!(r["diagnostics_namespaces"], json!(["shop.cart", "shop.money"]));
    let arity =
        |side: &str| r[side].as_array().unwrap().iter().filter(|d| d["kind"] == "arity").count();
    assert!(arity("diagnostics_before") > 0, "{r}");
    assert_eq!(arity("diagnostics_before"), arity("diagnostics_after"), "{r}");

    // A new namespace is covered before (it had nothing) and after.
    let r = edit(&c, "create_namespace", json!({"ns": "shop.tax", "doc": "Tax."})).await;
    assert_eq!(r["diagnostics_namespaces"], json!(["shop.tax"]));
    assert_eq!(r["diagnostics_before"], json!([]));

    // Every op of a batch contributes its namespaces.
    let cents = ok(&c, "get_form", json!({"symbol": "shop.money/cents"})).await;
    let r = edit(
        &c,
        "batch",
        json!({"ops": [
            {"op": "insert", "ns": "shop.tax", "source": "(defn rate [] (undefined-rate))"},
            {"op": "insert_comment", "file": "src/shop/cart.clj", "line": 1, "text": "Carts.", "position": "before"},
            {"op": "replace", "id": cents["id"], "source": "(defn cents [units c] (+ c (* 100 units)))"}
        ]}),
    )
    .await;
    assert_eq!(
        r["diagnostics_namespaces"],
        json!(["shop.cart", "shop.cart-test", "shop.money", "shop.tax"])
    );
    assert!(unresolved(&r, "diagnostics_after", "undefined-rate"), "{r}");
    assert!(!unresolved(&r, "diagnostics_before", "undefined-rate"), "{r}");

    // Namespace cycles: one made by an edit shows after it; an edit inside the cycle shows it
    // before and after; the edit that breaks it shows it before only.
    let cycle = |r: &Value, side: &str| {
        r[side].as_array().unwrap().iter().any(|d| d["kind"] == "cycle" && d["ns"] == "shop.cart")
    };
    let tax_ns = "(ns shop.tax\n  \"Tax.\"\n  (:require [shop.cart :as cart]))";
    let args = json!({"file": "src/shop/tax.clj", "line": 1, "new_form": tax_ns});
    let r = edit(&c, "replace_top_level_form", args).await;
    assert!(!cycle(&r, "diagnostics_after"), "{r}");
    let r =
        edit(&c, "insert_form", json!({"ns": "shop.cart", "source": "(require 'shop.tax)"})).await;
    assert!(cycle(&r, "diagnostics_after") && !cycle(&r, "diagnostics_before"), "{r}");
    let require_id = r["results"][0]["id"].clone();
    let r = edit(&c, "replace_form", json!({"id": sub["id"], "source": "(defn subtotal [items] (reduce + 0 (map line-total items)))"})).await;
    assert!(cycle(&r, "diagnostics_before") && cycle(&r, "diagnostics_after"), "{r}");
    let r = edit(&c, "delete_form", json!({"id": require_id})).await;
    assert!(cycle(&r, "diagnostics_before") && !cycle(&r, "diagnostics_after"), "{r}");

    // Without the whole lists, a replace of a definition by a definition leaves the require
    // graph alone and skips walking it; any other replace still reports the cycles it makes or
    // breaks: a definition made a `require`, and a `require` made a definition.
    let cycles_in = |r: &Value, side: &str| {
        r[side].as_array().unwrap().iter().filter(|d| d["kind"] == "cycle").count()
    };
    let r = ok(&c, "insert_form", json!({"ns": "shop.cart", "source": "(def scratch 0)"})).await;
    let scratch = r["results"][0]["id"].clone();
    let r = ok(&c, "replace_form", json!({"id": scratch, "source": "(require 'shop.tax)"})).await;
    assert_eq!((cycles_in(&r, "introduced"), cycles_in(&r, "fixed")), (1, 0), "{r}");
    let scratch = r["results"][0]["id"].clone();
    let source = "(defn subtotal [items] (reduce + (map line-total items)))";
    let r = ok(&c, "replace_form", json!({"id": sub["id"], "source": source})).await;
    assert_eq!((cycles_in(&r, "introduced"), cycles_in(&r, "fixed")), (0, 0), "{r}");
    let r = ok(&c, "replace_form", json!({"id": scratch, "source": "(def scratch 1)"})).await;
    assert_eq!((cycles_in(&r, "introduced"), cycles_in(&r, "fixed")), (0, 1), "{r}");
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn placement_comments_paths_and_unparseable_source_over_mcp() {
    let p = project();
    let c = connect(&p).await;
    let total = ok(&c, "get_form", json!({"symbol": "shop.cart/total"})).await;

    // insert_form before and after a given form.
    ok(
        &c,
        "insert_form",
        json!({"ns": "shop.cart", "source": "(def tip 0)", "before": total["id"]}),
    )
    .await;
    ok(
        &c,
        "insert_form",
        json!({"ns": "shop.cart", "source": "(def fee 0)", "after": total["id"]}),
    )
    .await;
    let t = view(&p, "shop.cart");
    let (tip, tot, fee) = (
        t.find("(def tip 0)").unwrap(),
        t.find("(defn total").unwrap(),
        t.find("(def fee 0)").unwrap(),
    );
    assert!(tip < tot && tot < fee, "{t}");
    assert!(
        !t[tip + 1..tot].contains("(def") && !t[tot + 1..fee].contains("(def"),
        "next to it: {t}"
    );
    let (_, text) =
        refused(&c, "insert_form", json!({"ns": "shop.nope", "source": "(def x 1)"})).await;
    assert!(
        text.contains("no namespace `shop.nope`") && text.contains("create_namespace"),
        "{text}"
    );

    // insert_comment at a file line, and refused positions.
    ok(&c, "insert_comment", json!({"file": "src/shop/money.clj", "line": 9, "text": "Formatting.", "position": "before"})).await;
    assert!(
        view(&p, "shop.money").contains(";; Formatting.\n(defn format-cents"),
        "{}",
        view(&p, "shop.money")
    );
    let (_, text) = refused(
        &c,
        "insert_comment",
        json!({"file": "src/shop/money.clj", "line": 9, "text": "x", "position": "middle"}),
    )
    .await;
    assert!(text.contains("position `middle`: send `before` or `after`"), "{text}");
    let (_, text) = refused(
        &c,
        "insert_comment",
        json!({"file": "src/shop/money.clj", "line": 999, "text": "x"}),
    )
    .await;
    assert!(text.contains("no form at or after line 999"), "{text}");

    // create_namespace refuses a path outside the tree and writes nothing.
    let (_, text) =
        refused(&c, "create_namespace", json!({"ns": "evil", "path": "../../evil.clj"})).await;
    assert!(text.contains("not a path inside the tree"), "{text}");
    assert!(!p.root.parent().unwrap().parent().unwrap().join("evil.clj").exists());
    let (_, text) = refused(&c, "explore_namespace", json!({"ns": "evil"})).await;
    assert!(text.contains("no namespace `evil`"), "{text}");

    // Source no repair can fix (balanced, but `#:` is no token): a numbered window of 21
    // lines with an arrow on the bad line.
    let mut src = "(defn big []\n  [\n".to_string();
    for i in 0..15 {
        src.push_str(&format!("   {i}\n"));
    }
    src.push_str("   #:\n");
    for i in 0..15 {
        src.push_str(&format!("   {i}\n"));
    }
    src.push_str("   ])\n");
    let before = view(&p, "shop.cart");
    let (err, text) = refused(&c, "replace_form", json!({"id": total["id"], "source": src})).await;
    assert!(err.get("suggestion").is_none(), "{err}");
    let window = err["window"].as_str().unwrap();
    assert_eq!(window.lines().count(), 21, "{window}");
    let arrows: Vec<&str> = window.lines().filter(|l| l.starts_with("->")).collect();
    assert_eq!(arrows, ["-> 18 |    #:"], "{window}");
    assert!(
        window.lines().all(|l| l[2..]
            .trim_start()
            .split(" | ")
            .next()
            .unwrap()
            .parse::<u32>()
            .is_ok()),
        "{window}"
    );
    assert!(text.contains("window:") && text.contains(arrows[0]), "{text}");
    assert!(text.contains("nothing was stored"), "{text}");
    assert_eq!(view(&p, "shop.cart"), before);
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn the_namespace_resource_is_in_the_users_aliases() {
    let p = project();
    cli(&p, &["alias", "set", "reader", "clojure.string", "s"]);
    let c = connect_as(
        &p,
        Client { version: Some(ProtocolVersion::V_2025_06_18), ..Client::default() },
        &["--user", "reader"],
    )
    .await;
    let text =
        c.read_resource(ReadResourceRequestParams::new("formdb://ns/shop.cart")).await.unwrap();
    let mime = |r: &rmcp::model::ReadResourceResult| match &r.contents[0] {
        ResourceContents::TextResourceContents { mime_type, .. } => mime_type.clone(),
        other => panic!("a text resource: {other:?}"),
    };
    assert_eq!(mime(&text).as_deref(), Some("text/x-clojure"));
    let text = format!("{text:?}");
    assert!(text.contains("(s/join") && !text.contains("str/join"), "{text}");
    let guide = c.read_resource(ReadResourceRequestParams::new("formdb://guide")).await.unwrap();
    assert_eq!(mime(&guide).as_deref(), Some("text/markdown"));
    // Every resource says what it holds.
    let listed = c.list_all_resources().await.unwrap();
    assert!(listed.len() > 3);
    for r in &listed {
        let want = if r.uri == "formdb://guide" { "text/markdown" } else { "text/x-clojure" };
        assert_eq!(r.mime_type.as_deref(), Some(want), "{}", r.uri);
    }
    // The same user reads forms in those aliases too; the store and the file keep `str`.
    let f = ok(&c, "get_form", json!({"symbol": "shop.cart/receipt"})).await;
    assert!(f["source"].as_str().unwrap().contains("(s/join"), "{f}");
    c.cancel().await.unwrap();
    assert!(view(&p, "shop.cart").contains("(str/join"));
    let plain = connect(&p).await;
    let text =
        plain.read_resource(ReadResourceRequestParams::new("formdb://ns/shop.cart")).await.unwrap();
    assert!(format!("{text:?}").contains("(str/join"), "{text:?}");
    plain.cancel().await.unwrap();
}

/// A tree long enough for every list to need pages: 230 namespaces with a widget each, one
/// namespace with 300 public vars, and one form of 450 KB.
fn long_tree(root: &Path) {
    let dir = root.join("src/gen");
    std::fs::create_dir_all(&dir).unwrap();
    for n in 0..230 {
        std::fs::write(
            dir.join(format!("n{n:03}.clj")),
            format!("(ns gen.n{n:03} \"Generated.\")\n\n(defn widget-{n:03} \"A widget.\" [x] (inc x))\n"),
        )
        .unwrap();
    }
    let mut big = "(ns gen.big)\n".to_string();
    for n in 0..300 {
        big.push_str(&format!("\n(defn f{n:03} [x] (* x {n}))\n"));
    }
    std::fs::write(dir.join("big.clj"), big).unwrap();
    std::fs::write(
        dir.join("blob.clj"),
        format!("(ns gen.blob)\n\n(def blob \"{}\")\n", "ab".repeat(225_000)),
    )
    .unwrap();
}

/// Every page of a paged tool's list, following `next_offset` until it is absent.
async fn all_pages(
    c: &RunningService<RoleClient, Client>,
    tool: &str,
    args: Value,
    list: &str,
) -> (Vec<Value>, Vec<usize>) {
    let (mut rows, mut sizes, mut offset) = (Vec::new(), Vec::new(), 0);
    loop {
        let mut a = args.clone();
        a["offset"] = json!(offset);
        let r = ok(c, tool, a).await;
        let page = r[list].as_array().unwrap().clone();
        sizes.push(page.len());
        rows.extend(page);
        match r["page"]["next_offset"].as_u64() {
            Some(n) => {
                assert_eq!(n as usize, rows.len(), "the next page starts where this one ends");
                offset = n as usize;
            }
            None => {
                assert_eq!(r["page"]["total"].as_u64().unwrap() as usize, rows.len());
                return (rows, sizes);
            }
        }
    }
}

#[tokio::test]
async fn long_answers_come_in_pages_with_a_stated_continuation() {
    let p = project_with(long_tree);
    let c = connect(&p).await;

    let first = ok(&c, "list_namespaces", json!({})).await;
    assert_eq!(first["namespaces"].as_array().unwrap().len(), 200);
    assert_eq!(first["page"], json!({"total": 232, "next_offset": 200}));
    let (nss, sizes) = all_pages(&c, "list_namespaces", json!({}), "namespaces").await;
    assert_eq!(sizes, [200, 32]);
    let mut names: Vec<&str> = nss.iter().map(|n| n["ns"].as_str().unwrap()).collect();
    names.dedup();
    assert_eq!(names.len(), 232);

    let (hits, sizes) =
        all_pages(&c, "search", json!({"query": "widget", "limit": 50}), "hits").await;
    assert_eq!(sizes, [50, 50, 50, 50, 30]);
    let mut ids: Vec<&str> = hits.iter().map(|h| h["id"].as_str().unwrap()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 230, "every widget once");
    assert!(ok(&c, "search", json!({"query": "widget"})).await.get("note").is_none());
    // 530 forms take an `x`: the ranking stops at 500, and says so.
    let (hits, _) = all_pages(&c, "search", json!({"query": "x", "limit": 200}), "hits").await;
    assert_eq!(hits.len(), 500);
    let last = ok(&c, "search", json!({"query": "x", "offset": 480})).await;
    assert!(last["note"].as_str().unwrap().contains("more than 500 forms match"), "{last}");

    let (vars, sizes) = all_pages(&c, "explore_namespace", json!({"ns": "gen.big"}), "vars").await;
    assert_eq!(sizes, [200, 100]);
    assert_eq!(vars[299]["name"], "f299");

    // A form edited many times: its versions in pages.
    let f = ok(&c, "get_form", json!({"symbol": "gen.n007/widget-007"})).await;
    for k in 1..=5 {
        ok(&c, "replace_form", json!({"id": f["id"], "source": format!("(defn widget-007 \"A widget.\" [x] (+ x {k}))")})).await;
    }
    let (versions, sizes) =
        all_pages(&c, "form_history", json!({"id": f["id"], "limit": 2}), "versions").await;
    assert_eq!(sizes, [2, 2, 2]);
    let vs: Vec<u64> = versions.iter().map(|v| v["v"].as_u64().unwrap()).collect();
    assert!(vs.windows(2).all(|w| w[0] < w[1]), "oldest first: {vs:?}");
    assert!(versions[5]["diff"]
        .as_str()
        .unwrap()
        .contains("+(defn widget-007 \"A widget.\" [x] (+ x 5))"));

    // A source longer than one answer: pieces that put together give the whole form.
    let whole = format!("(def blob \"{}\")", "ab".repeat(225_000));
    let (mut source, mut offset, mut pieces) = (String::new(), None::<u64>, 0);
    loop {
        let r = ok(&c, "get_form", json!({"symbol": "gen.blob/blob", "text_offset": offset})).await;
        source.push_str(r["source"].as_str().unwrap());
        pieces += 1;
        offset = r["source_next_offset"].as_u64();
        if offset.is_none() {
            break;
        }
        assert_eq!(offset.unwrap() as usize, source.len());
    }
    assert_eq!(pieces, 3);
    assert_eq!(source, whole);

    // Its history: two huge diffs do not share an answer; each reads on with `text_offset`.
    let blob = ok(&c, "get_form", json!({"symbol": "gen.blob/blob"})).await;
    ok(
        &c,
        "replace_form",
        json!({"id": blob["id"], "source": format!("(def blob \"{}\")", "cd".repeat(225_000))}),
    )
    .await;
    let h = ok(&c, "form_history", json!({"id": blob["id"]})).await;
    assert_eq!(h["versions"].as_array().unwrap().len(), 1, "one huge diff per answer");
    assert_eq!(h["page"], json!({"total": 2, "next_offset": 1}));
    let mut diff = h["versions"][0]["diff"].as_str().unwrap().to_string();
    let mut next = h["versions"][0]["diff_next_offset"].as_u64();
    assert!(next.is_some(), "the diff goes on");
    while let Some(cut) = next {
        assert_eq!(cut as usize, diff.len());
        let r =
            ok(&c, "form_history", json!({"id": blob["id"], "limit": 1, "text_offset": cut})).await;
        diff.push_str(r["versions"][0]["diff"].as_str().unwrap());
        next = r["versions"][0]["diff_next_offset"].as_u64();
    }
    assert!(
        diff.starts_with("--- before") && diff.contains(&format!("\n+{whole}\n")),
        "the pieces make the whole diff"
    );
    c.cancel().await.unwrap();
}

/// A query's refusal text, and how long it took.
async fn timed_refusal(c: &RunningService<RoleClient, Client>, script: &str) -> (String, f64) {
    let t = std::time::Instant::now();
    let (_, text) = refused(c, "query", json!({ "script": script })).await;
    (text, t.elapsed().as_secs_f64())
}

#[tokio::test]
async fn a_query_cannot_raise_or_escape_the_time_limit() {
    let p = project();
    let c = connect(&p).await;
    // A recursion that never ends, with its own huge timeout: the server's limit still holds.
    let (text, secs) = timed_refusal(
        &c,
        "r[n] := n = 0\nr[m] := r[n], m = n + 1\n?[count(n)] := r[n]\n:timeout 100000",
    )
    .await;
    // It grows without end: stopped at the time limit, or sooner at the memory limit (on a
    // fast machine), never later.
    if text.contains("MB of memory") {
        assert!(secs < 20.0, "stopped after {secs} s");
    } else {
        assert!(text.contains("10 s time limit"), "{text}");
        assert!((9.0..20.0).contains(&secs), "stopped at the limit, after {secs} s");
    }
    // It was stopped (the script's timeout did not win): nothing is left running, so the next
    // query runs.
    ok(&c, "query", json!({"script": "?[x] := x = 1"})).await;
    // Scripts whose parts would escape the limit are refused outright.
    let (text, secs) = timed_refusal(&c, "{?[x] := x = 1} {?[y] := y = 2}").await;
    assert!(text.contains("send one query") && secs < 5.0, "{text}");
    let (text, _) = timed_refusal(&c, "%loop %end").await;
    assert!(text.contains("send one query"), "{text}");
    let (text, _) = timed_refusal(&c, "?[x] := x = 1\n:sleep 100").await;
    assert!(text.contains("`:sleep` is not allowed"), "{text}");
    // The same words inside strings and comments are only text; a final comment is fine.
    let q =
        ok(&c, "query", json!({"script": "?[x] := x = ':sleep 5 {' # :sleep\n/* %loop */"})).await;
    assert_eq!(q["rows"], json!([{"x": ":sleep 5 {"}]));
    let q = ok(&c, "query", json!({"script": "?[x] := x = __\"say \"_:sleep 1\"_\"__"})).await;
    assert_eq!(q["rows"], json!([{"x": "say \"_:sleep 1\"_"}]));
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn a_runaway_rule_is_answered_at_the_time_limit() {
    let p = project();
    let c = connect(&p).await;
    // One rule pairing every row with every row: Cozo's own timeout cannot stop it midway, so
    // the process evaluating it is killed.
    let (text, secs) = timed_refusal(
        &c,
        "?[x] := a in int_range(100000), b in int_range(100000), c in int_range(100000), x = a + b + c, x < 0",
    )
    .await;
    assert!(text.contains("10 s time limit"), "{text}");
    assert!((9.0..20.0).contains(&secs), "answered at the limit, after {secs} s");
    // It was stopped (its process killed): the next query and the other tools answer.
    ok(&c, "query", json!({"script": "?[x] := x = 1"})).await;
    ok(&c, "get_form", json!({"symbol": "shop.cart/total"})).await;
    c.cancel().await.unwrap();
}
