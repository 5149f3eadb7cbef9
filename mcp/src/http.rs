//! MCP over Streamable HTTP on 127.0.0.1, for the `formdb up` daemon: many agent sessions on
//! one store at once, each naming its user.
//!
//! Owns the listener, who may talk to it (a per-start bearer token, loopback `Host` and `Origin`
//! only, bodies up to 4 MiB) and which user a request acts for (`X-Formdb-User` or `?user=`,
//! else the daemon's default). rmcp's `StreamableHttpService` does the protocol; there is one
//! per user, created on first use, because a session's user (alias map, history author) is
//! fixed when rmcp's factory builds its handler and the factory sees no request. Also the
//! `.formdb/server.json` file that tells `formdb mcp` and a second `formdb up` that a daemon
//! serves the store.
//!
//! Must not touch the store except through the tools (`crate::tools`) that each session runs.

use std::collections::HashMap;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use formdb_engine::store::Store;
use rmcp::transport::common::http_header::HEADER_SESSION_ID as SESSION_HEADER;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::{SessionId, SessionManager};
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde::{Deserialize, Serialize};
use subtle::ConstantTimeEq;
use tokio_util::sync::CancellationToken;

use crate::{FormdbServer, ServeOptions};

/// The file, in the store directory, that names the running daemon.
pub const SERVER_JSON: &str = "server.json";
/// Largest request body accepted.
pub const MAX_BODY: usize = 4 * 1024 * 1024;
/// The header a client names its user with.
pub const USER_HEADER: &str = "x-formdb-user";
/// How long a completed request's reply stays available to a client resuming its stream.
const RESUME_WINDOW: std::time::Duration = std::time::Duration::from_secs(10);

/// How the daemon serves MCP.
#[derive(Clone, Debug)]
pub struct HttpOptions {
    /// The user of sessions that name none.
    pub default_user: String,
    pub read_only: bool,
    /// 0 for an ephemeral port.
    pub port: u16,
    /// The project's REPL, shared by every session.
    pub repl: Option<Arc<formdb_repl::Repl>>,
}

/// What `.formdb/server.json` holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerInfo {
    pub pid: u32,
    pub url: String,
    pub token: String,
    /// Seconds since the Unix epoch.
    pub started: String,
}

/// One user's MCP service, and its sessions (to tell a known session from an unknown one).
struct Service {
    mcp: StreamableHttpService<FormdbServer, LocalSessionManager>,
    sessions: Arc<LocalSessionManager>,
}

struct Shared {
    store: Arc<Store>,
    opts: HttpOptions,
    token: String,
    cancel: CancellationToken,
    services: Mutex<HashMap<String, Arc<Service>>>,
}

/// A running server. Dropping it without [`HttpServer::shutdown`] leaves it running until the
/// runtime ends.
pub struct HttpServer {
    url: String,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl HttpServer {
    /// Bind 127.0.0.1:`opts.port` with a fresh token and serve on the current runtime.
    pub async fn start(store: Arc<Store>, opts: HttpOptions) -> anyhow::Result<HttpServer> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", opts.port)).await?;
        let addr = listener.local_addr()?;
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).map_err(|e| anyhow::anyhow!("no OS randomness: {e}"))?;
        let token = bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
        let cancel = CancellationToken::new();
        let shared = Arc::new(Shared {
            store,
            opts,
            token,
            cancel: cancel.clone(),
            services: Mutex::new(HashMap::new()),
        });
        let app =
            axum::Router::new().route("/mcp", axum::routing::any(route)).with_state(shared.clone());
        let task = tokio::spawn(async move {
            let serve = axum::serve(listener, app).with_graceful_shutdown(cancel.cancelled_owned());
            if let Err(e) = serve.await {
                tracing::error!("formdb: the MCP HTTP server stopped: {e}");
            }
        });
        Ok(HttpServer { url: format!("http://{addr}/mcp"), shared, task })
    }

    pub fn url(&self) -> String {
        self.url.clone()
    }

    pub fn token(&self) -> &str {
        &self.shared.token
    }

    /// Stop accepting requests and end every session.
    pub async fn shutdown(self) {
        self.shared.cancel.cancel();
        let _ = tokio::time::timeout(std::time::Duration::from_secs(3), self.task).await;
    }
}

fn refuse(status: StatusCode, message: &str) -> Response {
    let body = serde_json::json!({ "error": message }).to_string();
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// A 401 that names the scheme (RFC 6750): a client that finds no `WWW-Authenticate` takes the
/// server for an OAuth one and starts an authorization flow the daemon does not have.
fn unauthorized() -> Response {
    let mut r = refuse(
        StatusCode::UNAUTHORIZED,
        "missing or wrong bearer token: send `Authorization: Bearer <token>` with the token from .formdb/server.json",
    );
    r.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        header::HeaderValue::from_static("Bearer realm=\"formdb\""),
    );
    r
}

/// Equal tokens, compared in constant time (no timing leak of the prefix that matched).
fn same_token(given: &[u8], want: &[u8]) -> bool {
    bool::from(given.ct_eq(want))
}

/// The user a request names: the header, else `?user=`, else `None`.
fn named_user(req: &Request) -> Option<String> {
    if let Some(v) = req.headers().get(USER_HEADER) {
        return Some(v.to_str().unwrap_or("\u{0}").to_string());
    }
    req.uri().query()?.split('&').find_map(|kv| kv.strip_prefix("user=")).map(str::to_string)
}

fn valid_user(u: &str) -> bool {
    !u.is_empty()
        && u.len() <= 64
        && u.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

async fn route(State(shared): State<Arc<Shared>>, req: Request) -> Response {
    let authorized = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|t| same_token(t.trim().as_bytes(), shared.token.as_bytes()));
    if !authorized {
        return unauthorized();
    }
    let user = named_user(&req).unwrap_or_else(|| shared.opts.default_user.clone());
    if !valid_user(&user) {
        return refuse(
            StatusCode::BAD_REQUEST,
            "bad user name: 1 to 64 characters of A-Z, a-z, 0-9, `.`, `_`, `-`",
        );
    }
    let service = match service_for(&shared, &user) {
        Ok(s) => s,
        Err(e) => return refuse(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    };
    if req.method() == Method::DELETE {
        return end_session(&service, req).await;
    }
    service.mcp.handle(req).await.map(Body::new)
}

/// A client ending its session, as the Streamable HTTP transport says: 200 once it is
/// terminated, 404 for a session this server does not have (rmcp answers 202 to both).
async fn end_session(service: &Service, req: Request) -> Response {
    let session = req.headers().get(SESSION_HEADER).and_then(|v| v.to_str().ok());
    if let Some(id) = session {
        let known = service.sessions.has_session(&SessionId::from(id)).await.unwrap_or(false);
        if !known {
            return refuse(
                StatusCode::NOT_FOUND,
                "no such session: it ended or was never opened; initialize a new one",
            );
        }
    }
    let mut r = service.mcp.handle(req).await.map(Body::new);
    if r.status() == StatusCode::ACCEPTED {
        *r.status_mut() = StatusCode::OK;
    }
    r
}

/// The user's service, made on first use.
fn service_for(shared: &Arc<Shared>, user: &str) -> anyhow::Result<Arc<Service>> {
    let mut services = shared.services.lock().map_err(|_| anyhow::anyhow!("poisoned lock"))?;
    if let Some(s) = services.get(user) {
        return Ok(s.clone());
    }
    let opts = ServeOptions {
        user: user.to_string(),
        read_only: shared.opts.read_only,
        repl: shared.opts.repl.clone(),
    };
    // Fail here, not in every session, if the user's alias map cannot be read.
    crate::session(shared.store.clone(), &opts)?;
    let store = shared.store.clone();
    let factory = move || {
        crate::session(store.clone(), &opts)
            .map(FormdbServer::new)
            .map_err(|e| io::Error::other(e.to_string()))
    };
    let mut config =
        StreamableHttpServerConfig::default().with_allowed_hosts(["localhost", "127.0.0.1", "::1"]);
    // Browsers send Origin; only pages served from this machine may talk to us.
    config.allowed_origins =
        vec!["http://127.0.0.1:*".into(), "http://localhost:*".into(), "http://[::1]:*".into()];
    config.max_request_body_bytes = MAX_BODY;
    config.cancellation_token = shared.cancel.child_token();
    let mut sessions = LocalSessionManager::default();
    // rmcp keeps each request's reply stream for a late resume (`Last-Event-ID`) for 60 s
    // after it completed: every reply of the last minute stays in memory, at 40 edits a
    // second 2,400 of them, and an agent reading files (replies up to `MAX_TEXT`) can keep
    // hundreds of MB. Clients retry after the 3 s the priming event asks for.
    sessions.session_config.completed_cache_ttl = RESUME_WINDOW;
    let sessions = Arc::new(sessions);
    let mcp = StreamableHttpService::new(factory, sessions.clone(), config);
    let service = Arc::new(Service { mcp, sessions });
    services.insert(user.to_string(), service.clone());
    Ok(service)
}

fn server_json(store_dir: &Path) -> PathBuf {
    store_dir.join(SERVER_JSON)
}

/// Write `server.json` atomically (temporary file, then rename), readable by its owner only
/// from the moment it exists: it holds the token.
pub fn write_server_info(store_dir: &Path, info: &ServerInfo) -> io::Result<()> {
    let tmp = store_dir.join(format!(".{SERVER_JSON}.{}", std::process::id()));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(serde_json::to_string_pretty(info)?.as_bytes())?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, server_json(store_dir))
}

/// What `server.json` says, if it is there and reads.
pub fn read_server_info(store_dir: &Path) -> Option<ServerInfo> {
    serde_json::from_slice(&std::fs::read(server_json(store_dir)).ok()?).ok()
}

/// Remove `server.json` if it still names `pid` (a newer daemon's file is left alone).
pub fn remove_server_info(store_dir: &Path, pid: u32) {
    if read_server_info(store_dir).is_some_and(|i| i.pid == pid) {
        let _ = std::fs::remove_file(server_json(store_dir));
    }
}

fn pid_alive(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else { return false };
    // SAFETY: signal 0 only checks that the process exists.
    pid > 0 && unsafe { libc::kill(pid, 0) } == 0
}

/// The daemon serving this store, if one runs: `server.json` names a live process that accepts
/// connections at its URL. A stale file (its process gone) is removed.
pub fn live_server(store_dir: &Path) -> Option<ServerInfo> {
    let info = read_server_info(store_dir)?;
    if !pid_alive(info.pid) {
        let _ = std::fs::remove_file(server_json(store_dir));
        return None;
    }
    let authority = info.url.strip_prefix("http://")?.split('/').next()?;
    let addr: std::net::SocketAddr = authority.parse().ok()?;
    std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_secs(1)).ok()?;
    Some(info)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_whole() {
        assert!(same_token(b"abc", b"abc"));
        assert!(!same_token(b"abd", b"abc"));
        assert!(!same_token(b"ab", b"abc"));
        assert!(!same_token(b"", b"abc"));
    }

    #[test]
    fn user_names_are_checked() {
        assert!(valid_user("alice"));
        assert!(valid_user("a.b_c-9"));
        assert!(!valid_user(""));
        assert!(!valid_user("a b"));
        assert!(!valid_user("../x"));
        assert!(!valid_user(&"x".repeat(65)));
    }

    #[test]
    fn server_json_is_private_and_a_stale_one_is_removed() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let info = ServerInfo {
            pid: std::process::id(),
            url: "http://127.0.0.1:1/mcp".into(),
            token: "t".into(),
            started: "0".into(),
        };
        write_server_info(dir.path(), &info).unwrap();
        let mode = std::fs::metadata(server_json(dir.path())).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(read_server_info(dir.path()), Some(info.clone()));
        // Our pid is alive but nothing listens on port 1: not live, but not removed either.
        assert_eq!(live_server(dir.path()), None);
        assert!(server_json(dir.path()).exists());
        // A pid that cannot exist: stale, removed.
        let dead = ServerInfo { pid: i32::MAX as u32, ..info };
        write_server_info(dir.path(), &dead).unwrap();
        assert_eq!(live_server(dir.path()), None);
        assert!(!server_json(dir.path()).exists());
    }
}
