//! `formdb mcp` when `formdb up` already serves the store: an MCP server on stdio that relays
//! every request to the daemon over Streamable HTTP, and the daemon's notifications back.
//!
//! Agent hosts launch MCP servers as stdio child processes; the store, though, belongs to the
//! one daemon. So this side only forwards: the tool list, instructions and capabilities are the
//! daemon's, as are the answers. Owns nothing else; must not open the store.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ClientConfig, Implementation,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ResourceUpdatedNotificationParam,
    ServerConfig, SubscribeRequestParams, UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext, RunningService, ServiceError};
use rmcp::transport::common::client_side_sse::ExponentialBackoff;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{
    ClientHandler, ErrorData as McpError, Peer, RoleClient, RoleServer, ServerHandler, ServiceExt,
};

use crate::http::{ServerInfo, USER_HEADER};

/// The stdio client's peer, once it has initialized: where the daemon's notifications go.
type Downstream = Arc<Mutex<Option<Peer<RoleServer>>>>;

/// The HTTP side: a client of the daemon that passes its notifications on.
#[derive(Clone)]
struct Upstream {
    downstream: Downstream,
}

impl Upstream {
    fn peer(&self) -> Option<Peer<RoleServer>> {
        self.downstream.lock().ok().and_then(|p| p.clone())
    }
}

impl ClientHandler for Upstream {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("formdb-relay", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        if let Some(p) = self.peer() {
            let _ = p.notify_resource_updated(params).await;
        }
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        if let Some(p) = self.peer() {
            let _ = p.notify_resource_list_changed().await;
        }
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        if let Some(p) = self.peer() {
            let _ = p.notify_tool_list_changed().await;
        }
    }
}

/// The stdio side: a server whose every answer is the daemon's.
struct Relay {
    daemon: Peer<RoleClient>,
    info: ServerConfig,
    downstream: Downstream,
}

/// A failure to reach the daemon, as the agent sees it.
fn unreachable(e: ServiceError) -> McpError {
    McpError::internal_error(
        format!("the formdb daemon did not answer ({e}); is `formdb up` still running?"),
        None,
    )
}

impl ServerHandler for Relay {
    fn get_info(&self) -> ServerConfig {
        self.info.clone()
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        if let Ok(mut p) = self.downstream.lock() {
            *p = Some(context.peer);
        }
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        self.daemon.list_tools(request).await.map_err(unreachable)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        self.daemon.call_tool_once(request).await.map_err(unreachable)
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        self.daemon.list_resources(request).await.map_err(unreachable)
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        self.daemon.list_resource_templates(request).await.map_err(unreachable)
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        self.daemon.read_resource_once(request).await.map_err(unreachable)
    }

    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.daemon.subscribe(request).await.map_err(unreachable)
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.daemon.unsubscribe(request).await.map_err(unreachable)
    }
}

/// How often a reply stream broken by the daemon is resumed before the request fails.
///
/// rmcp's default retries for ever, waiting twice as long each time: a request in flight when
/// the daemon died never got an answer, and the agent hung. The daemon asks for 3 s between
/// retries (its streams' priming event), so three retries give a restarting daemon about 9 s
/// before the agent is told that the daemon did not answer.
fn reconnects() -> ExponentialBackoff {
    let mut retry = ExponentialBackoff::default();
    retry.max_times = Some(3);
    retry.base_duration = std::time::Duration::from_millis(500);
    retry.max_delay = Some(std::time::Duration::from_secs(3));
    retry
}

/// Relay MCP on stdin/stdout to the daemon `info` names, as `user`, until stdin closes.
pub async fn relay_stdio(info: ServerInfo, user: &str) -> anyhow::Result<()> {
    relay(rmcp::transport::stdio(), info, user).await
}

/// Relay MCP on `transport` to the daemon `info` names, as `user`, until the client leaves.
pub async fn relay<T, E, A>(transport: T, info: ServerInfo, user: &str) -> anyhow::Result<()>
where
    T: rmcp::transport::IntoTransport<RoleServer, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let headers = HashMap::from([(
        http::HeaderName::from_static(USER_HEADER),
        http::HeaderValue::from_str(user)?,
    )]);
    let mut config = StreamableHttpClientTransportConfig::with_uri(info.url.clone())
        .auth_header(info.token.clone())
        .custom_headers(headers);
    config.retry_config = Arc::new(reconnects());
    let downstream = Downstream::default();
    let daemon = Upstream { downstream: downstream.clone() }
        .serve(StreamableHttpClientTransport::from_config(config))
        .await
        .map_err(|e| anyhow::anyhow!("cannot reach the formdb daemon at {}: {e}", info.url))?;
    let peer = daemon.peer_info().ok_or_else(|| anyhow::anyhow!("the daemon sent no info"))?;
    let mut server_info = ServerConfig::new(peer.capabilities.clone());
    if let Some(i) = &peer.server_info {
        server_info = server_info.with_server_info(i.clone());
    }
    if let Some(i) = &peer.instructions {
        server_info = server_info.with_instructions(i.clone());
    }
    let relay = Relay { daemon: daemon.peer().clone(), info: server_info, downstream };
    let served = match relay.serve(transport).await {
        Ok(running) => running.waiting().await.map(drop).map_err(anyhow::Error::from),
        // The client left before saying anything: nothing to relay, not a failure.
        Err(rmcp::service::ServerInitializeError::ConnectionClosed(_)) => Ok(()),
        Err(e) => Err(e.into()),
    };
    hang_up(daemon).await;
    served
}

/// How long the relay waits for its session with the daemon to close when its client leaves.
const HANG_UP_WITHIN: std::time::Duration = std::time::Duration::from_secs(3);

/// Close the session with the daemon and wait for it: its transport ends its streams and asks
/// the daemon to drop the session. Left to the runtime's shutdown, that work was cut off
/// mid-way, and rmcp logged an error for a normal exit (`fail to close sink`, `fail to delete
/// session`).
async fn hang_up(mut daemon: RunningService<RoleClient, Upstream>) {
    // A daemon that does not answer in time changes nothing for the client, which has left.
    let _ = daemon.close_with_timeout(HANG_UP_WITHIN).await;
}
