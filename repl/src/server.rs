//! Finding the project's nREPL server, or starting one.
//!
//! Three ways, as Clojure tools do: the port in `DIR/.nrepl-port` (what every nREPL server
//! writes and every editor reads; read again at each reconnect, so a restarted REPL is found),
//! an address named with `--nrepl HOST:PORT`, or a server formdb starts itself. The started one
//! runs Debian's `clojure` with `nrepl.jar` on the tree's source paths (from `deps.edn`, else
//! `src` and `test`), from `DIR/.formdb/repl` so the `.nrepl-port` it writes stays out of the
//! tree; the command is configurable, with `{port}` and `{classpath}` filled in.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::{ReplError, Result};

/// Debian's nREPL (`libnrepl-clojure`).
pub const NREPL_JAR: &str = "/usr/share/java/nrepl.jar";

/// The start command used when none is configured.
pub const DEFAULT_COMMAND: &str =
    "clojure -cp {classpath} -m nrepl.cmdline --bind 127.0.0.1 --port {port}";

pub enum Endpoint {
    /// The port in this directory's `.nrepl-port`.
    PortFile(PathBuf),
    /// A named `host:port`.
    Addr(String),
    /// A server formdb started; killed when this is dropped.
    Started { port: u16, command: String, child: Mutex<Child> },
}

impl Endpoint {
    /// The address to connect to now.
    pub fn addr(&self) -> Result<String> {
        match self {
            Endpoint::PortFile(dir) => {
                let file = dir.join(".nrepl-port");
                let text = std::fs::read_to_string(&file).map_err(|_| {
                    ReplError::NotConnected(format!(
                        "no {} (no nREPL server wrote its port there); {}",
                        file.display(),
                        crate::HOW_TO_START
                    ))
                })?;
                let port: u16 = text.trim().parse().map_err(|_| {
                    ReplError::NotConnected(format!("{} does not hold a port: {text:?}", file.display()))
                })?;
                Ok(format!("127.0.0.1:{port}"))
            }
            Endpoint::Addr(a) => Ok(a.clone()),
            Endpoint::Started { port, child, .. } => {
                let mut c = child.lock().unwrap_or_else(|p| p.into_inner());
                if let Ok(Some(status)) = c.try_wait() {
                    return Err(ReplError::Dead(format!("the REPL formdb started exited ({status})")));
                }
                Ok(format!("127.0.0.1:{port}"))
            }
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Endpoint::PortFile(dir) => format!("{}", dir.join(".nrepl-port").display()),
            Endpoint::Addr(a) => format!("--nrepl {a}"),
            Endpoint::Started { command, .. } => format!("started by formdb: {command}"),
        }
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        if let Endpoint::Started { child, .. } = self {
            let mut c = child.lock().unwrap_or_else(|p| p.into_inner());
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The tree's source paths, absolute: `deps.edn`'s `:paths` and every alias's `:extra-paths`
/// (where tests usually live), else `src` and `test`; only those that exist.
pub fn source_paths(dir: &Path) -> Vec<PathBuf> {
    let mut rel: Vec<String> = Vec::new();
    if let Ok(text) = std::fs::read_to_string(dir.join("deps.edn")) {
        if let Ok(edn) = edn_format::parse_str(&text) {
            collect_paths(&edn, &mut rel);
        }
    }
    if rel.is_empty() {
        rel = vec!["src".into(), "test".into()];
    }
    let mut out: Vec<PathBuf> = Vec::new();
    for r in rel {
        let p = dir.join(&r);
        if p.is_dir() && !out.contains(&p) {
            out.push(p);
        }
    }
    out
}

fn collect_paths(v: &edn_format::Value, out: &mut Vec<String>) {
    use edn_format::Value;
    let Value::Map(m) = v else { return };
    for (k, v) in m {
        let Value::Keyword(k) = k else { continue };
        match (k.name(), v) {
            ("paths" | "extra-paths", Value::Vector(items)) => {
                out.extend(items.iter().filter_map(|i| match i {
                    Value::String(s) => Some(s.clone()),
                    _ => None,
                }));
            }
            ("aliases", Value::Map(aliases)) => {
                for a in aliases.values() {
                    collect_paths(a, out);
                }
            }
            _ => {}
        }
    }
}

/// Start an nREPL server for the tree in `dir` and wait until it answers (at most `wait`).
pub fn start(dir: &Path, command: Option<&str>, wait: Duration) -> Result<Endpoint> {
    let port = free_port()?;
    let mut classpath: Vec<String> = vec![NREPL_JAR.to_string()];
    classpath.extend(source_paths(dir).iter().map(|p| p.display().to_string()));
    let command = command
        .unwrap_or(DEFAULT_COMMAND)
        .replace("{port}", &port.to_string())
        .replace("{classpath}", &classpath.join(":"));
    let home = dir.join(".formdb").join("repl");
    std::fs::create_dir_all(&home).map_err(ReplError::io)?;
    let log = std::fs::File::create(home.join("repl.log")).map_err(ReplError::io)?;
    let child = Command::new("sh")
        .arg("-c")
        .arg(format!("exec {command}"))
        .current_dir(&home)
        .stdin(Stdio::null())
        .stdout(log.try_clone().map_err(ReplError::io)?)
        .stderr(log)
        .spawn()
        .map_err(|e| ReplError::Unreachable(format!("starting `{command}`: {e}")))?;
    let endpoint = Endpoint::Started { port, command: command.clone(), child: Mutex::new(child) };
    let until = Instant::now() + wait;
    loop {
        let addr = endpoint.addr()?;
        if std::net::TcpStream::connect_timeout(&addr.parse().expect("ip:port"), Duration::from_millis(200)).is_ok() {
            return Ok(endpoint);
        }
        if Instant::now() >= until {
            let log = std::fs::read_to_string(home.join("repl.log")).unwrap_or_default();
            return Err(ReplError::Unreachable(format!(
                "`{command}` did not listen on port {port} within {}s: {}",
                wait.as_secs(),
                log.lines().last().unwrap_or("no output")
            )));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn free_port() -> Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(ReplError::io)?;
    Ok(l.local_addr().map_err(ReplError::io)?.port())
}
