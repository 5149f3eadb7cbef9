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
    /// The port in this directory's `.nrepl-port` (or, when there is none, in
    /// `.formdb/repl/.nrepl-port`, where the server `formdb up --repl` started writes it).
    PortFile(PathBuf),
    /// A named `host:port`.
    Addr(String),
    /// A server formdb started; started again when it died, killed when this is dropped.
    Started(Started),
}

/// A server formdb runs: its tree, the command template, and the running process.
pub struct Started {
    dir: PathBuf,
    template: String,
    wait: Duration,
    running: Mutex<Running>,
}

struct Running {
    port: u16,
    command: String,
    child: Child,
    /// The death of the last one was reported: the next request starts a new one.
    reported_dead: bool,
}

impl Endpoint {
    /// The address to connect to now. A started server that died is reported once; the next
    /// call starts a new one.
    pub fn addr(&self) -> Result<String> {
        match self {
            Endpoint::PortFile(dir) => {
                let file = port_file(dir);
                let text = read_port_file(&file).map_err(|_| {
                    ReplError::NotConnected(format!(
                        "no nREPL server wrote its port to {}; {}",
                        dir.join(".nrepl-port").display(),
                        crate::HOW_TO_START
                    ))
                })?;
                let port: u16 = text.trim().parse().map_err(|_| {
                    ReplError::NotConnected(format!(
                        "{} does not hold a port: {text:?}",
                        file.display()
                    ))
                })?;
                Ok(format!("127.0.0.1:{port}"))
            }
            Endpoint::Addr(a) => Ok(a.clone()),
            Endpoint::Started(s) => {
                let mut r = s.running.lock().unwrap_or_else(|p| p.into_inner());
                if let Ok(Some(status)) = r.child.try_wait() {
                    if !r.reported_dead {
                        r.reported_dead = true;
                        return Err(ReplError::Dead(format!(
                            "the REPL formdb started exited ({status}); the next request starts a new one"
                        )));
                    }
                    *r = spawn(&s.dir, &s.template, s.wait)?;
                }
                Ok(format!("127.0.0.1:{}", r.port))
            }
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Endpoint::PortFile(dir) => format!("{}", port_file(dir).display()),
            Endpoint::Addr(a) => format!("--nrepl {a}"),
            Endpoint::Started(s) => {
                let r = s.running.lock().unwrap_or_else(|p| p.into_inner());
                format!("started by formdb (pid {}): {}", r.child.id(), r.command)
            }
        }
    }

    /// The process id of the server formdb started.
    pub fn pid(&self) -> Option<u32> {
        match self {
            Endpoint::Started(s) => {
                Some(s.running.lock().unwrap_or_else(|p| p.into_inner()).child.id())
            }
            _ => None,
        }
    }
}

/// `DIR/.nrepl-port`, else the one under `.formdb/repl` when only that exists.
/// The text of a port file. nREPL creates `.nrepl-port` and then writes the port into it, so a
/// reader racing a starting server can find it empty: an empty file is read again for up to a
/// second before it counts as holding no port.
fn read_port_file(file: &Path) -> std::io::Result<String> {
    let until = Instant::now() + Duration::from_secs(1);
    loop {
        let text = std::fs::read_to_string(file)?;
        if !text.trim().is_empty() || Instant::now() >= until {
            return Ok(text);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn port_file(dir: &Path) -> PathBuf {
    let own = dir.join(".nrepl-port");
    let started = dir.join(".formdb").join("repl").join(".nrepl-port");
    if !own.exists() && started.exists() {
        started
    } else {
        own
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        if let Endpoint::Started(s) = self {
            let mut r = s.running.lock().unwrap_or_else(|p| p.into_inner());
            let _ = r.child.kill();
            let _ = r.child.wait();
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
/// `command` (default [`DEFAULT_COMMAND`]) has `{port}` and `{classpath}` filled in.
pub fn start(dir: &Path, command: Option<&str>, wait: Duration) -> Result<Endpoint> {
    let template = command.unwrap_or(DEFAULT_COMMAND).to_string();
    let running = spawn(dir, &template, wait)?;
    Ok(Endpoint::Started(Started {
        dir: dir.to_path_buf(),
        template,
        wait,
        running: Mutex::new(running),
    }))
}

fn spawn(dir: &Path, template: &str, wait: Duration) -> Result<Running> {
    let port = free_port()?;
    let mut classpath: Vec<String> = vec![NREPL_JAR.to_string()];
    classpath.extend(source_paths(dir).iter().map(|p| p.display().to_string()));
    let command =
        template.replace("{port}", &port.to_string()).replace("{classpath}", &classpath.join(":"));
    let home = dir.join(".formdb").join("repl");
    std::fs::create_dir_all(&home).map_err(ReplError::io)?;
    let log_path = home.join("repl.log");
    let log = std::fs::File::create(&log_path).map_err(ReplError::io)?;
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!("exec {command}"))
        .current_dir(&home)
        .stdin(Stdio::null())
        .stdout(log.try_clone().map_err(ReplError::io)?)
        .stderr(log)
        .spawn()
        .map_err(|e| ReplError::Unreachable(format!("starting `{command}`: {e}")))?;
    let addr: std::net::SocketAddr = ([127, 0, 0, 1], port).into();
    let until = Instant::now() + wait;
    loop {
        if std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return Ok(Running { port, command, child, reported_dead: false });
        }
        let exited = child.try_wait().ok().flatten();
        if exited.is_some() || Instant::now() >= until {
            let _ = child.kill();
            let _ = child.wait();
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            let why = match exited {
                Some(status) => format!("exited ({status})"),
                None => format!("did not listen on port {port} within {}s", wait.as_secs()),
            };
            return Err(ReplError::Unreachable(format!(
                "`{command}` {why}: {} (log: {})",
                log.lines().last().unwrap_or("no output"),
                log_path.display()
            )));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn free_port() -> Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(ReplError::io)?;
    Ok(l.local_addr().map_err(ReplError::io)?.port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_file_caught_between_create_and_write_is_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(".nrepl-port");
        std::fs::write(&file, "").unwrap();
        let writer = {
            let file = file.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(200));
                std::fs::write(file, "45678").unwrap();
            })
        };
        let addr = Endpoint::PortFile(dir.path().to_path_buf()).addr().unwrap();
        writer.join().unwrap();
        assert_eq!(addr, "127.0.0.1:45678");
    }

    #[test]
    fn a_port_file_that_stays_empty_is_reported_by_name() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(".nrepl-port"), "").unwrap();
        let e = Endpoint::PortFile(dir.path().to_path_buf()).addr().unwrap_err();
        assert!(e.to_string().contains(".nrepl-port does not hold a port"), "{e}");
    }
}
