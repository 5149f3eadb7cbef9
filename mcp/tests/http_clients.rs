//! The daemon's MCP over Streamable HTTP against good and bad clients: a real `HttpServer` on
//! 127.0.0.1, real rmcp clients, raw HTTP for what no well-behaved client sends, a real store.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use formdb_engine::store::{params, str_at, Store};
use formdb_mcp::http::{HttpOptions, HttpServer};
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn server() -> (HttpServer, Arc<Store>) {
    let store = Arc::new(formdb_testkit::shop());
    let opts = HttpOptions { default_user: "agent".into(), read_only: false, port: 0, repl: None };
    (HttpServer::start(store.clone(), opts).await.unwrap(), store)
}

async fn client(s: &HttpServer, user: &str) -> RunningService<RoleClient, ()> {
    let headers = HashMap::from([(
        http::HeaderName::from_static("x-formdb-user"),
        http::HeaderValue::from_str(user).unwrap(),
    )]);
    let config = StreamableHttpClientTransportConfig::with_uri(s.url())
        .auth_header(s.token().to_string())
        .custom_headers(headers);
    ().serve(StreamableHttpClientTransport::from_config(config)).await.expect("connects")
}

async fn call(c: &RunningService<RoleClient, ()>, tool: &str, args: Value) -> Value {
    let r = c
        .call_tool(
            CallToolRequestParams::new(tool.to_string())
                .with_arguments(args.as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    assert_ne!(r.is_error, Some(true), "{tool}: {:?}", r.content);
    r.structured_content.unwrap()
}

/// One raw HTTP/1.1 POST; returns the status code and the body.
async fn raw(s: &HttpServer, headers: &[(&str, &str)], body: &[u8]) -> (u16, String) {
    let (status, _, body) = exchange(s, "POST", headers, body).await;
    (status, body)
}

/// One raw HTTP/1.1 exchange; returns the status code, the headers (names in lower case) and
/// the body.
async fn exchange(
    s: &HttpServer,
    method: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, HashMap<String, String>, String) {
    let authority = s.url().trim_start_matches("http://").split('/').next().unwrap().to_string();
    let mut conn = tokio::net::TcpStream::connect(&authority).await.unwrap();
    let mut req = format!(
        "{method} /mcp HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    conn.write_all(req.as_bytes()).await.unwrap();
    // A server may answer (and close) before reading an oversized body: that is fine.
    let _ = conn.write_all(body).await;
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), conn.read_to_end(&mut out)).await;
    let text = String::from_utf8_lossy(&out).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let headers = head
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    (status, headers, body.to_string())
}

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_without_the_token_from_foreign_origins_or_too_big_are_refused() {
    let (s, _store) = server().await;
    let bearer = format!("Bearer {}", s.token());
    let (status, headers, body) = exchange(&s, "POST", &[], INIT.as_bytes()).await;
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("bearer token"), "{body}");
    // The scheme is named: a client that finds none starts an OAuth flow.
    let challenge = headers.get("www-authenticate").map(String::as_str).unwrap_or("");
    assert!(challenge.starts_with("Bearer"), "{headers:?}");
    let (status, _) = raw(&s, &[("Authorization", "Bearer 00")], INIT.as_bytes()).await;
    assert_eq!(status, 401);
    let wrong = format!("Bearer {}", "0".repeat(s.token().len()));
    assert_eq!(raw(&s, &[("Authorization", &wrong)], INIT.as_bytes()).await.0, 401);
    let (status, _) =
        raw(&s, &[("Authorization", &bearer), ("Origin", "http://evil.example")], INIT.as_bytes())
            .await;
    assert_eq!(status, 403, "a foreign Origin (DNS rebinding) is refused");
    let (status, _) = raw(
        &s,
        &[("Authorization", &bearer), ("Origin", "http://localhost:8080")],
        INIT.as_bytes(),
    )
    .await;
    assert_eq!(status, 200, "a loopback Origin is served");
    let (status, body) =
        raw(&s, &[("Authorization", &bearer), ("X-Formdb-User", "a b")], INIT.as_bytes()).await;
    assert_eq!(status, 400, "{body}");
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"x":"{}"}}}}"#,
        "x".repeat(5 << 20)
    );
    let (status, _) = raw(&s, &[("Authorization", &bearer)], big.as_bytes()).await;
    assert_eq!(status, 413, "bodies over 4 MiB are refused");
    // After all that, a good client is served.
    let c = client(&s, "agent").await;
    assert!(
        call(&c, "list_namespaces", json!({})).await["namespaces"].as_array().unwrap().len() >= 2
    );
    c.cancel().await.unwrap();
    s.shutdown().await;
}

/// Ending a session as the Streamable HTTP transport says: 200 once it is terminated, 404 for
/// one the server does not have (then or any more).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_session_ends_it_and_an_unknown_one_is_not_found() {
    let (s, _store) = server().await;
    let bearer = format!("Bearer {}", s.token());
    let auth = ("Authorization", bearer.as_str());
    let (status, headers, body) = exchange(&s, "POST", &[auth], INIT.as_bytes()).await;
    assert_eq!(status, 200, "{body}");
    let session = headers.get("mcp-session-id").expect("a session id").clone();
    let with_session = [auth, ("Mcp-Session-Id", session.as_str())];
    let (status, _, body) = exchange(&s, "DELETE", &with_session, b"").await;
    assert_eq!(status, 200, "{body}");
    let (status, _, body) = exchange(&s, "DELETE", &with_session, b"").await;
    assert_eq!(status, 404, "an ended session: {body}");
    let unknown = [auth, ("Mcp-Session-Id", "no-such-session")];
    let (status, _, body) = exchange(&s, "DELETE", &unknown, b"").await;
    assert_eq!(status, 404, "{body}");
    // Without the token, nothing is ended or told.
    let (status, _, _) = exchange(&s, "DELETE", &with_session[1..], b"").await;
    assert_eq!(status, 401);
    // A real client disconnecting ends its session the same way, and the next one is served.
    let c = client(&s, "agent").await;
    c.cancel().await.unwrap();
    let c = client(&s, "agent").await;
    assert!(call(&c, "list_namespaces", json!({})).await["namespaces"].is_array());
    c.cancel().await.unwrap();
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_json_and_clients_that_vanish_mid_request_hurt_nobody_else() {
    let (s, _store) = server().await;
    let bearer = format!("Bearer {}", s.token());
    let good = client(&s, "agent").await;
    let (status, _) =
        raw(&s, &[("Authorization", &bearer)], b"{\"jsonrpc\": \"2.0\", \"id\": ").await;
    assert!((400..500).contains(&status), "malformed JSON gets a client error, not {status}");
    let (status, _) = raw(&s, &[("Authorization", &bearer)], b"[1, 2, 3]").await;
    assert!((400..500).contains(&status), "a non-message gets a client error, not {status}");
    // Headers promising a body that never comes, then the connection drops.
    let authority = s.url().trim_start_matches("http://").split('/').next().unwrap().to_string();
    for _ in 0..5 {
        let mut conn = tokio::net::TcpStream::connect(&authority).await.unwrap();
        let req = format!(
            "POST /mcp HTTP/1.1\r\nHost: {authority}\r\nAuthorization: {bearer}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{\"jsonrpc\""
        );
        conn.write_all(req.as_bytes()).await.unwrap();
        drop(conn);
    }
    // A client that leaves while its call runs.
    let leaving = client(&s, "leaver").await;
    let pending = tokio::spawn(async move {
        leaving
            .call_tool(
                CallToolRequestParams::new("search")
                    .with_arguments(json!({"query": "cart total"}).as_object().unwrap().clone()),
            )
            .await
    });
    tokio::time::sleep(Duration::from_millis(5)).await;
    pending.abort();
    // The session that was there all along still works, and so does a new one.
    let f = call(&good, "get_form", json!({"symbol": "shop.cart/total"})).await;
    assert_eq!(f["name"], "total");
    let fresh = client(&s, "agent").await;
    let u = call(&fresh, "find_usages", json!({"symbol": "shop.cart/subtotal"})).await;
    assert!(u.to_string().contains("shop.cart/total"), "{u}");
    good.cancel().await.unwrap();
    fresh.cancel().await.unwrap();
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_concurrent_sessions_each_with_its_own_user() {
    let (s, store) = server().await;
    let s = Arc::new(s);
    let mut tasks = Vec::new();
    for n in 0..100 {
        let s = s.clone();
        tasks.push(tokio::spawn(async move {
            let c = client(&s, &format!("user-{}", n % 7)).await;
            let tools = c.list_tools(None).await.unwrap();
            assert!(tools.tools.iter().any(|t| t.name == "replace_form"));
            let f = call(&c, "get_form", json!({"symbol": "shop.money/cents"})).await;
            c.cancel().await.unwrap();
            f["id"].as_str().unwrap().to_string()
        }));
    }
    let mut ids = Vec::new();
    for t in tasks {
        ids.push(t.await.expect("every session is served"));
    }
    ids.dedup();
    assert_eq!(ids.len(), 1, "all saw the same form");

    // Each session edits as its own user: the history names them.
    let (alice, bob) = (client(&s, "alice").await, client(&s, "bob").await);
    let f = call(&alice, "get_form", json!({"symbol": "shop.money/cents"})).await;
    let src = f["source"].as_str().unwrap().replace("(+ (* 100 units) c)", "(+ c (* 100 units))");
    call(&alice, "replace_form", json!({"id": f["id"], "source": src})).await;
    let g = call(&bob, "get_form", json!({"symbol": "shop.money/format-cents"})).await;
    let src = g["source"].as_str().unwrap().replace("(rem c 100)", "(mod c 100)");
    call(&bob, "replace_form", json!({"id": g["id"], "source": src})).await;
    let author = |id: &Value| {
        let rows = store
            .query(
                "?[v, author] := *version{id: $id, v, author} :order -v :limit 1",
                params([("id", id.as_str().unwrap().into())]),
            )
            .unwrap();
        str_at(&rows.rows[0], 1)
    };
    assert_eq!(author(&f["id"]), "alice");
    assert_eq!(author(&g["id"]), "bob");
    alice.cancel().await.unwrap();
    bob.cancel().await.unwrap();
}
