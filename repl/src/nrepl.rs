//! The nREPL protocol: bencoded dictionaries over TCP, one session per connection.
//!
//! A request is a dictionary with an `op` and an `id`; the server answers with any number of
//! dictionaries carrying that `id` (`value`, `out`, `err`, `ex`, …) and ends with one whose
//! `status` holds `done`. Every read has a deadline: an evaluation that runs past its timeout is
//! sent `interrupt`, and a server that stops answering is reported dead, never waited on.

use std::collections::BTreeMap;
use std::io::{BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use bt_bencode::Value;
use serde::Deserialize;

use crate::ReplError;

/// One message from the server: string fields, and the `status` list.
#[derive(Debug, Default, Clone)]
pub struct Reply {
    pub fields: BTreeMap<String, String>,
    pub status: Vec<String>,
}

impl Reply {
    pub fn get(&self, key: &str) -> Option<&str> {
        self.fields.get(key).map(String::as_str)
    }

    pub fn done(&self) -> bool {
        self.status.iter().any(|s| s == "done")
    }

    fn from_value(v: Value) -> Option<Reply> {
        let Value::Dict(d) = v else { return None };
        let mut r = Reply::default();
        for (k, v) in d {
            let k = String::from_utf8_lossy(&k).into_owned();
            match v {
                Value::ByteStr(b) => {
                    r.fields.insert(k, String::from_utf8_lossy(&b).into_owned());
                }
                Value::Int(i) => {
                    r.fields.insert(k, i.to_string());
                }
                Value::List(items) if k == "status" => {
                    r.status = items
                        .into_iter()
                        .filter_map(|i| match i {
                            Value::ByteStr(b) => Some(String::from_utf8_lossy(&b).into_owned()),
                            _ => None,
                        })
                        .collect();
                }
                _ => {}
            }
        }
        Some(r)
    }
}

/// A request: string and integer fields.
#[derive(Debug, Clone, Default)]
pub struct Request(BTreeMap<String, Field>);

#[derive(Debug, Clone)]
enum Field {
    Str(String),
    Int(i64),
}

impl Request {
    pub fn op(op: &str) -> Request {
        Request::default().with("op", op)
    }

    pub fn with(mut self, key: &str, value: &str) -> Request {
        self.0.insert(key.to_string(), Field::Str(value.to_string()));
        self
    }

    pub fn with_int(mut self, key: &str, value: i64) -> Request {
        self.0.insert(key.to_string(), Field::Int(value));
        self
    }

    fn encode(&self) -> Result<Vec<u8>, ReplError> {
        let mut map = BTreeMap::new();
        for (k, v) in &self.0 {
            let v = match v {
                Field::Str(s) => Value::ByteStr(s.as_bytes().to_vec().into()),
                Field::Int(i) => Value::Int((*i).into()),
            };
            map.insert(k.as_bytes().to_vec().into(), v);
        }
        bt_bencode::to_vec(&Value::Dict(map)).map_err(|e| ReplError::Protocol(e.to_string()))
    }
}

/// One TCP connection to an nREPL server, with its session. A thread reads whole messages off
/// the socket and hands them over a channel, so a deadline never cuts a message in half.
pub struct Connection {
    addr: SocketAddr,
    writer: TcpStream,
    replies: Receiver<Result<Reply, String>>,
    session: String,
    next_id: u64,
}

impl Connection {
    /// Connect to `addr` (loopback only) and clone a session of our own.
    pub fn open(addr: &str, deadline: Duration) -> Result<Connection, ReplError> {
        let addr = addr
            .to_socket_addrs()
            .map_err(|e| ReplError::Unreachable(format!("{addr}: {e}")))?
            .next()
            .ok_or_else(|| ReplError::Unreachable(format!("{addr}: no address")))?;
        if !addr.ip().is_loopback() {
            return Err(ReplError::NotLocal(addr.to_string()));
        }
        let stream = TcpStream::connect_timeout(&addr, deadline)
            .map_err(|e| ReplError::Unreachable(format!("{addr}: {e}")))?;
        stream.set_nodelay(true).ok();
        let read_half = stream.try_clone().map_err(ReplError::io)?;
        let (tx, replies) = mpsc::channel();
        std::thread::Builder::new()
            .name("nrepl-reader".into())
            .spawn(move || read_messages(read_half, tx))
            .map_err(ReplError::io)?;
        let mut conn =
            Connection { addr, writer: stream, replies, session: String::new(), next_id: 0 };
        let id = conn.send(Request::op("clone"))?;
        let until = Instant::now() + deadline;
        loop {
            let r = conn.read_until(until)?;
            if r.get("id") == Some(id.as_str()) {
                if let Some(s) = r.get("new-session") {
                    conn.session = s.to_string();
                }
                if r.done() {
                    break;
                }
            }
        }
        if conn.session.is_empty() {
            return Err(ReplError::Protocol(format!("{addr} did not clone a session")));
        }
        Ok(conn)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Send a request in this connection's session; its id.
    pub fn send(&mut self, req: Request) -> Result<String, ReplError> {
        self.next_id += 1;
        let id = format!("formdb-{}", self.next_id);
        let mut req = req.with("id", &id);
        if !self.session.is_empty() && !req.0.contains_key("session") {
            let session = self.session.clone();
            req = req.with("session", &session);
        }
        let bytes = req.encode()?;
        self.writer
            .write_all(&bytes)
            .map_err(|e| ReplError::Dead(format!("{}: {e}", self.addr)))?;
        self.writer.flush().map_err(|e| ReplError::Dead(format!("{}: {e}", self.addr)))?;
        Ok(id)
    }

    /// The next message, or `Timeout` once `until` passes.
    pub fn read_until(&mut self, until: Instant) -> Result<Reply, ReplError> {
        let left = until.saturating_duration_since(Instant::now());
        match self.replies.recv_timeout(left) {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(e)) => Err(ReplError::Dead(format!("{}: {e}", self.addr))),
            Err(RecvTimeoutError::Timeout) => Err(ReplError::Timeout),
            Err(RecvTimeoutError::Disconnected) => {
                Err(ReplError::Dead(format!("{}: the connection closed", self.addr)))
            }
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        // Ends the reader thread's blocking read.
        let _ = self.writer.shutdown(std::net::Shutdown::Both);
    }
}

/// The socket as the reader thread reads it: what it read is acknowledged at once. nREPL
/// writes a reply's messages apart (a value, then `done`) with Nagle's algorithm on, so its
/// second write waits for the first one's acknowledgement, which Linux delays up to 40 ms
/// once a connection looks interactive: without this, most evaluations took 40 ms more.
struct AckAtOnce(TcpStream);

impl Read for AckAtOnce {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.0.read(buf)?;
        quick_ack(&self.0);
        Ok(n)
    }
}

/// Send the acknowledgement of what was read now (`TCP_QUICKACK`; it does not stick, so it is
/// set after every read).
fn quick_ack(stream: &TcpStream) {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::io::AsRawFd;
        let on: libc::c_int = 1;
        // SAFETY: a valid socket descriptor and an int option of the size given. A failure
        // only leaves the kernel's delayed acknowledgement in place.
        unsafe {
            libc::setsockopt(
                stream.as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_QUICKACK,
                (&on as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = stream;
}

fn read_messages(stream: TcpStream, tx: mpsc::Sender<Result<Reply, String>>) {
    let mut reader = BufReader::new(AckAtOnce(stream));
    loop {
        let mut de = bt_bencode::Deserializer::from_reader(&mut reader);
        let msg = match Value::deserialize(&mut de) {
            Ok(v) => {
                Reply::from_value(v).ok_or_else(|| "a message that is not a dictionary".to_string())
            }
            Err(e) => Err(e.to_string()),
        };
        let failed = msg.is_err();
        if tx.send(msg).is_err() || failed {
            return;
        }
    }
}
