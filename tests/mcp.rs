//! The MCP server, driven over stdio by a real MCP client (rmcp's client side) against the real
//! `formdb` binary and a real store imported from `examples/shop`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientConfig, ProtocolVersion,
    ReadResourceRequestParams, ResourceUpdatedNotificationParam, SubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_formdb");

struct Project {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    db: PathBuf,
}

fn project() -> Project {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("shop");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/shop");
    copy_dir(&src, &root);
    let db = tmp.path().join("store");
    let out = Command::new(BIN).arg("--db").arg(&db).arg("import").arg(&root).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    Project { _tmp: tmp, root, db }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let p = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &p);
        } else {
            std::fs::copy(e.path(), p).unwrap();
        }
    }
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

/// The error answer of a refused call, with its text.
async fn refused(
    c: &RunningService<RoleClient, Client>,
    tool: &str,
    args: Value,
) -> (Value, String) {
    let r = call(c, tool, args.clone()).await;
    assert_eq!(r.is_error, Some(true), "{tool} {args} should be refused: {:?}", r.content);
    let text = r.content.first().and_then(|c| c.as_text()).map(|t| t.text.clone()).unwrap();
    (r.structured_content.unwrap_or(Value::Null), text)
}

fn view(p: &Project, ns: &str) -> String {
    let out = Command::new(BIN).arg("--db").arg(&p.db).args(["view", ns]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
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
        let instructions = info.instructions.clone().unwrap_or_default();
        assert!(instructions.contains("find_usages") && instructions.contains("id"));
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
    // The newest, stateless era.
    let c = connect_as(&p, Client::default(), &[]).await;
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
    assert!(r["diagnostics_before"].is_array() && r["diagnostics_after"].is_array());
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
