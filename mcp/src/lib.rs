//! The MCP server: agents read, query and edit forms by id over the Model Context Protocol,
//! with the official Rust SDK (`rmcp`) on stdio.
//!
//! Owns the tool surface (`tools`: arguments, answers, errors an agent can act on, paging) and
//! its protocol glue (`server`: schemas, structured results, resources, subscriptions), the
//! transports: stdio, Streamable HTTP for the `formdb up` daemon (`http`), and the stdio relay
//! to a running daemon (`relay`). Reads
//! go through the engine's queries and the projector's views; every edit goes through
//! `formdb-edit`, so it is one transaction with history. Must not parse, resolve or write the
//! store itself, and logs to stderr only (stdout is the protocol).

pub mod http;
pub mod relay;
pub mod repl;
pub mod server;
pub mod tools;

use std::sync::Arc;

use formdb_edit::save::Writer;
use formdb_engine::store::Store;
use rmcp::ServiceExt;

pub use server::FormdbServer;
pub use tools::Session;

/// Who the server acts for.
#[derive(Clone, Debug, Default)]
pub struct ServeOptions {
    pub user: String,
    pub read_only: bool,
    /// The project's REPL, shared by every session.
    pub repl: Option<Arc<formdb_repl::Repl>>,
}

/// A session on `store` for `opts.user` (their alias map from the store).
pub fn session(store: Arc<Store>, opts: &ServeOptions) -> anyhow::Result<Session> {
    let aliases = formdb_projector::aliases::load(&store, &opts.user)?;
    Ok(Session {
        store,
        writer: Writer::new(&opts.user, aliases),
        read_only: opts.read_only,
        repl: opts.repl.clone(),
    })
}

/// Serve MCP on stdin/stdout until the client closes stdin.
pub async fn serve_stdio(store: Arc<Store>, opts: ServeOptions) -> anyhow::Result<()> {
    let server = FormdbServer::new(session(store, &opts)?);
    let running = match server.serve(rmcp::transport::stdio()).await {
        Ok(r) => r,
        // stdin closed before a client said anything: nothing to serve, not a failure.
        Err(rmcp::service::ServerInitializeError::ConnectionClosed(_)) => return Ok(()),
        Err(e) => return Err(e.into()),
    };
    running.waiting().await?;
    Ok(())
}
