//! A bare MCP client over the `formdb mcp` binary's stdio: newline-delimited JSON-RPC, one
//! call at a time, so a test can also watch the server process itself (its pid, its memory).

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{json, Value};

pub(crate) struct Server {
    pub child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
}

/// What a tool call answered: whether it was refused, and its text.
pub(crate) struct Answer {
    pub is_error: bool,
    pub text: String,
}

impl Server {
    /// Start `formdb --db DB mcp` and initialize the session.
    pub(crate) fn start(bin: &str, db: &Path) -> Server {
        let mut child = Command::new(bin)
            .arg("--db")
            .arg(db)
            .arg("mcp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut s = Server { child, stdin, stdout, next_id: 1 };
        s.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "bare", "version": "0"}}),
        );
        s.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        s
    }

    fn send(&mut self, msg: &Value) {
        let mut line = serde_json::to_vec(msg).unwrap();
        line.push(b'\n');
        self.stdin.write_all(&line).unwrap();
        self.stdin.flush().unwrap();
    }

    /// Send a request and return its result, skipping notifications; `None` when the server
    /// closed its output (it died).
    pub(crate) fn try_request(&mut self, method: &str, params: Value) -> Option<Value> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let mut line = String::new();
            if self.stdout.read_line(&mut line).ok()? == 0 {
                return None;
            }
            let msg: Value = serde_json::from_str(&line).unwrap();
            if msg["id"] == json!(id) {
                assert!(msg.get("error").is_none(), "{method}: {msg}");
                return Some(msg["result"].clone());
            }
        }
    }

    pub(crate) fn request(&mut self, method: &str, params: Value) -> Value {
        let status = self.child.try_wait().unwrap();
        self.try_request(method, params)
            .unwrap_or_else(|| panic!("the server died during {method} ({status:?})"))
    }

    /// Call a tool; the server must answer (refusals included).
    pub(crate) fn call(&mut self, tool: &str, args: Value) -> Answer {
        let r = self.request("tools/call", json!({"name": tool, "arguments": args}));
        Answer {
            is_error: r["isError"] == json!(true),
            text: r["content"][0]["text"].as_str().unwrap_or_default().to_string(),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
