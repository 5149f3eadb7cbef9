//! `formdb up`: the one process that owns a store and serves it to everyone at once — the
//! working directory (kept in step both ways by `formdb-sync`), a FUSE mount (`formdb-fuse`)
//! and MCP over Streamable HTTP on 127.0.0.1 (`formdb-mcp::http`), whose address and bearer
//! token go to `.formdb/server.json` (mode 0600) so `formdb mcp` can relay to it.
//!
//! This module only wires those parts together and reports; each part owns its own rules.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use formdb_engine::store::{Store, STORE_DIR};
use formdb_mcp::http::{self, HttpOptions, HttpServer, ServerInfo};
use serde_json::json;

#[derive(clap::Args)]
pub(crate) struct UpArgs {
    /// The working directory: an ordinary (git) tree of Clojure sources (default: the current
    /// directory). Its store is `DIR/.formdb`, imported on first start.
    pub dir: Option<PathBuf>,
    /// Where to mount the virtual source tree (an empty directory; created if missing).
    /// Default: a directory of its own under $XDG_RUNTIME_DIR or /tmp, printed at start.
    #[arg(long, value_name = "MNT")]
    pub mount: Option<PathBuf>,
    /// Serve no mount (MCP and the directory sync only).
    #[arg(long, conflicts_with = "mount")]
    pub no_mount: bool,
    /// Whose alias map the mount renders with, and the default MCP user (each MCP session may
    /// name its own with the `X-Formdb-User` header).
    #[arg(long)]
    pub user: Option<String>,
    /// The MCP port on 127.0.0.1 (default: an ephemeral one).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// On first start, import the tree's git history (every form gets a version per commit
    /// that changed it), as `formdb import --history` does.
    #[arg(long)]
    pub history: bool,
    #[command(flatten)]
    pub connect: crate::repl::ReplArgs,
}

/// The default mount point of a working directory: one per directory, outside it (so editors
/// and indexers that open `DIR` never see the tree twice).
fn default_mountpoint(dir: &Path) -> PathBuf {
    let base = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|p| p.is_dir())
        // SAFETY: getuid has no preconditions.
        .unwrap_or_else(|| {
            std::env::temp_dir().join(format!("formdb-{}", unsafe { libc::getuid() }))
        });
    let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tag = &blake3::hash(dir.as_os_str().as_encoded_bytes()).to_hex()[..8];
    base.join("formdb").join(format!("{name}-{tag}"))
}

pub(crate) fn up(db: &Option<PathBuf>, args: UpArgs, json_out: bool) -> Result<()> {
    // Before any thread starts, so SIGINT/SIGTERM reach the thread that waits for them.
    formdb_fuse::block_signals();
    let dir = args.dir.clone().unwrap_or(std::env::current_dir()?);
    if !dir.is_dir() {
        bail!("{}: not a directory", dir.display());
    }
    let dir = dir.canonicalize().with_context(|| format!("{}", dir.display()))?;
    let store_dir = db.clone().unwrap_or_else(|| dir.join(STORE_DIR));
    if let Some(running) = http::live_server(&store_dir) {
        bail!(
            "formdb up already serves {} (pid {}, {}); stop it first or use `formdb mcp` to reach it",
            store_dir.display(),
            running.pid,
            running.url
        );
    }
    let user = crate::mount::default_user(args.user);
    let store = Arc::new(
        Store::open(&store_dir).with_context(|| format!("opening {}", store_dir.display()))?,
    );
    // A new store is imported with a progress bar; a known one is brought in step by the sync.
    if formdb_engine::query::paths(&store)?.is_empty() && args.history {
        crate::history::import_into(&store, &dir, &user, json_out)?;
    } else if formdb_engine::query::paths(&store)?.is_empty() {
        let bar = crate::progress::Bar::new(!json_out && std::io::stderr().is_terminal());
        let s = formdb_engine::import::import_dir(&store, &dir, &user, &bar)?;
        if !json_out {
            eprintln!(
                "imported {}: {} files, {} forms{}",
                dir.display(),
                s.files_added,
                s.forms.added,
                if s.errors.is_empty() {
                    String::new()
                } else {
                    format!(", {} files kept raw (do not parse)", s.errors.len())
                }
            );
        }
    }

    // The sync first: its start re-syncs both ways (crash recovery), so the mount and MCP never
    // serve a store that is behind the directory.
    let sync_opts = formdb_sync::Options { log: true, ..formdb_sync::Options::new(&user) };
    let sync = formdb_sync::DirSync::start_with(store.clone(), &dir, sync_opts)
        .with_context(|| format!("syncing {}", dir.display()))?;

    let mounted = if args.no_mount {
        None
    } else {
        let at = args.mount.clone().unwrap_or_else(|| default_mountpoint(&dir));
        // A dead mount left by a crash is in the way of `exists()` (ENOTCONN): only a path
        // that is really missing is created; formdb-fuse detaches a dead one.
        if std::fs::symlink_metadata(&at).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) {
            std::fs::create_dir_all(&at).with_context(|| format!("creating {}", at.display()))?;
        }
        let opts = formdb_fuse::Options {
            user: user.clone(),
            read_only: false,
            verbose: !json_out,
            ..Default::default()
        };
        let m = formdb_fuse::spawn(store.clone(), &at, &opts)
            .with_context(|| format!("cannot mount at {}", at.display()))?;
        if let Some(n) = &m.note {
            eprintln!("formdb up: {n}");
        }
        Some(m)
    };

    let repl = args.connect.open(&dir)?;
    // Connected now if a server is there; otherwise at the first REPL request.
    let _ = repl.connect();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let server = runtime.block_on(HttpServer::start(
        store.clone(),
        HttpOptions {
            default_user: user.clone(),
            read_only: false,
            port: args.port,
            repl: Some(repl.clone()),
        },
    ))?;
    let info = ServerInfo {
        pid: std::process::id(),
        url: server.url(),
        token: server.token().to_string(),
        started: now_secs(),
    };
    http::write_server_info(&store_dir, &info)
        .with_context(|| format!("writing {}", store_dir.join("server.json").display()))?;

    let mount_at = mounted.as_ref().map(|m| m.mountpoint().display().to_string());
    if json_out {
        println!(
            "{}",
            json!({"event": "up", "dir": dir.display().to_string(), "store": store_dir.display().to_string(),
                   "mount": mount_at, "url": info.url, "server_json": store_dir.join("server.json").display().to_string(),
                   "user": user, "pid": info.pid, "repl": repl.status()})
        );
    } else {
        println!("formdb up: {} (store {})", dir.display(), store_dir.display());
        match &mount_at {
            Some(m) => println!("  mount  {m}   (edit files here with any editor)"),
            None => println!("  mount  none (--no-mount)"),
        }
        println!(
            "  mcp    {}   (bearer token in {})",
            info.url,
            store_dir.join("server.json").display()
        );
        println!("  agents `formdb mcp` in {} relays stdio to this server", dir.display());
        println!("  sync   {} <-> store, both ways; Ctrl-C stops", dir.display());
        println!("  repl   {}", crate::repl::status_line(&repl));
    }
    std::io::stdout().flush()?;
    watch_repl(repl.clone(), json_out);

    let signal = formdb_fuse::wait_for_signal_or(|| mounted.as_ref().is_some_and(|m| m.ended()))?;
    // Stop taking work in the order it arrives: MCP, then the mount, then the sync (which
    // writes what the last edits changed to DIR before it stops).
    http::remove_server_info(&store_dir, info.pid);
    runtime.block_on(server.shutdown());
    runtime.shutdown_timeout(Duration::from_secs(2));
    // A REPL formdb started stops with it.
    drop(repl);
    let note = match mounted {
        Some(m) => m.unmount()?,
        None => None,
    };
    sync.wait_idle(Duration::from_secs(5));
    drop(sync);
    if let Some(n) = &note {
        eprintln!("formdb up: {n}");
    }
    if json_out {
        println!("{}", json!({"event": "down", "signal": signal, "note": note}));
    } else {
        println!(
            "formdb up: stopped ({})",
            signal.unwrap_or("the mount was unmounted from outside")
        );
    }
    Ok(())
}

/// Print each change of the REPL connection (connected, lost, reconnected) as it happens.
fn watch_repl(repl: Arc<formdb_repl::Repl>, json_out: bool) {
    // A weak handle: the REPL formdb started stops when `up` drops its own.
    let weak = Arc::downgrade(&repl);
    let mut was = repl.status().connected;
    drop(repl);
    let _ = std::thread::Builder::new().name("repl-status".into()).spawn(move || loop {
        std::thread::sleep(Duration::from_secs(2));
        let Some(repl) = weak.upgrade() else { return };
        let now = repl.ping();
        if now != was {
            was = now;
            if json_out {
                println!("{}", json!({"event": "repl", "repl": repl.status()}));
            } else {
                println!("formdb up: repl {}", crate::repl::status_line(&repl));
            }
        }
    });
}

fn now_secs() -> String {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs().to_string())
        .unwrap_or_default()
}
