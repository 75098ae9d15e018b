//! A minimal MCP client for tests: drives the real `ccm` binary over stdio with
//! newline-delimited JSON-RPC, matching responses by id.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support;

/// The `_meta` of a request of the session-less 2026-07-28 lifecycle.
pub(crate) fn session_less_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "ccm-tests", "version": "1"},
    })
}

pub(crate) struct Session {
    child: Child,
    stdin: Option<ChildStdin>,
    responses: Receiver<Value>,
    pending: HashMap<i64, Value>,
    next_id: i64,
    pub stderr: Arc<Mutex<String>>,
    pub initialize: Value,
}

impl Session {
    /// Start `ccm --conda-exe <conda> <args>` and initialize.
    pub(crate) fn start(conda: &Path, args: &[&str]) -> Session {
        Self::start_with(conda, args, &[])
    }

    pub(crate) fn start_with(conda: &Path, args: &[&str], env: &[(&str, &str)]) -> Session {
        let mut command: Command = support::ccm();
        command.arg("--conda-exe").arg(conda).args(args);
        for (k, v) in env {
            command.env(k, v);
        }
        Self::spawn_initialized(command)
    }

    /// Start `ccm --conda-exe <conda> <args>`, not initialized yet.
    pub(crate) fn spawn_on(conda: &Path, args: &[&str]) -> Session {
        let mut command: Command = support::ccm();
        command.arg("--conda-exe").arg(conda).args(args);
        Self::spawn(command)
    }

    /// A session of `revision` on `conda` with `args`: the lifecycle's handshake, or none
    /// for the session-less 2026-07-28; and the `_meta` its requests carry.
    pub(crate) fn at_revision(conda: &Path, revision: &str, args: &[&str]) -> (Session, Value) {
        let mut s = Self::spawn_on(conda, args);
        if revision == "2026-07-28" {
            return (s, session_less_meta());
        }
        s.handshake(revision);
        (s, json!({}))
    }

    /// Spawn `command` (a `ccm` server) and initialize.
    pub(crate) fn spawn_initialized(command: Command) -> Session {
        let mut session = Self::spawn(command);
        session.initialize_at("2025-06-18");
        session
    }

    /// `initialize` at `revision` (the response kept in `initialize`), then
    /// `notifications/initialized`.
    fn initialize_at(&mut self, revision: &str) {
        self.initialize = self.request(
            "initialize",
            json!({"protocolVersion": revision, "capabilities": {},
                   "clientInfo": {"name": "ccm-tests", "version": "1"}}),
        );
        self.notify("notifications/initialized", json!({}));
    }

    /// The lifecycle's handshake at `revision`, which the server must agree to; returns
    /// the `initialize` response.
    pub(crate) fn handshake(&mut self, revision: &str) -> Value {
        self.initialize_at(revision);
        let init = &self.initialize;
        assert_eq!(init["result"]["protocolVersion"], revision, "{init}");
        init.clone()
    }

    pub(crate) fn spawn(mut command: Command) -> Session {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start ccm");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let stderr_pipe = child.stderr.take().unwrap();
        let (sender, responses) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let value: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("stdout carried a non-JSON line ({e}): {line}"));
                if sender.send(value).is_err() {
                    break;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = Arc::clone(&stderr);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr_pipe).lines() {
                let Ok(line) = line else { break };
                sink.lock().unwrap().push_str(&line);
                sink.lock().unwrap().push('\n');
            }
        });
        Session {
            child,
            stdin: Some(stdin),
            responses,
            pending: HashMap::new(),
            next_id: 1,
            stderr,
            initialize: Value::Null,
        }
    }

    /// The server's exit status, if it has ended.
    pub(crate) fn try_wait(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().unwrap()
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Wait up to `timeout` for the server to exit; its exit code (`None`: still running
    /// or killed by a signal).
    pub(crate) fn wait_exit(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Close the server's stdin (EOF) and wait up to `timeout` for it to exit.
    pub(crate) fn close_stdin_and_wait(
        &mut self,
        timeout: Duration,
    ) -> Option<std::process::ExitStatus> {
        self.stdin = None;
        self.wait_exit(timeout)
    }

    fn write(&mut self, message: &Value) {
        let mut line = serde_json::to_string(message).unwrap();
        line.push('\n');
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.flush().unwrap();
    }

    /// Write raw bytes (a frame, with or without its newline).
    pub(crate) fn write_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
    }

    /// The next message on stdout, in order (answers to `wait` are not consumed here
    /// unless they come first), waiting up to `timeout`.
    pub(crate) fn next(&mut self, timeout: Duration) -> Option<Value> {
        self.responses.recv_timeout(timeout).ok()
    }

    pub(crate) fn notify(&mut self, method: &str, params: Value) {
        self.write(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// Send a request without waiting; its id.
    pub(crate) fn send(&mut self, method: &str, params: Value) -> i64 {
        let id = self.next_id;
        self.next_id += 1;
        self.write(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// The response to `id`, waiting up to `timeout`.
    pub(crate) fn wait(&mut self, id: i64, timeout: Duration) -> Option<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(v) = self.pending.remove(&id) {
                return Some(v);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.responses.recv_timeout(left) {
                Ok(message) => {
                    if let Some(rid) = message.get("id").and_then(Value::as_i64) {
                        self.pending.insert(rid, message);
                    }
                }
                Err(RecvTimeoutError::Timeout) => return None,
                Err(RecvTimeoutError::Disconnected) => {
                    return None;
                }
            }
        }
    }

    /// Request and wait (60 s); the whole JSON-RPC response.
    pub(crate) fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.send(method, params);
        self.wait(id, Duration::from_secs(60)).unwrap_or_else(|| {
            panic!(
                "no response to {method} (stderr: {})",
                self.stderr.lock().unwrap()
            )
        })
    }

    /// tools/call; the `result` (panics on a protocol error).
    pub(crate) fn call(&mut self, tool: &str, arguments: Value) -> Value {
        let response = self.request("tools/call", json!({"name": tool, "arguments": arguments}));
        match response.get("result") {
            Some(result) => result.clone(),
            None => panic!("{tool} failed: {response}"),
        }
    }

    /// tools/call expected to fail; (code, message).
    pub(crate) fn call_error(&mut self, tool: &str, arguments: Value) -> (i64, String) {
        let response = self.request("tools/call", json!({"name": tool, "arguments": arguments}));
        let error = response
            .get("error")
            .unwrap_or_else(|| panic!("{tool} did not fail: {response}"));
        (
            error["code"].as_i64().unwrap(),
            error["message"].as_str().unwrap().to_owned(),
        )
    }

    pub(crate) fn tools(&mut self) -> Vec<Value> {
        self.request("tools/list", json!({}))["result"]["tools"]
            .as_array()
            .unwrap()
            .clone()
    }

    pub(crate) fn capabilities(&mut self) -> Value {
        let read = self.request("resources/read", json!({"uri": "conda://capabilities"}));
        serde_json::from_str(read["result"]["contents"][0]["text"].as_str().unwrap()).unwrap()
    }

    /// Whether the server's read-only calls run in the read-only sandbox (its listing
    /// depends on it).
    pub(crate) fn sandboxed(&mut self) -> bool {
        self.capabilities()["sandbox"]["state"] == "active"
    }

    /// Peak resident memory of the server process (kB), from /proc.
    pub(crate) fn peak_rss_kb(&self) -> u64 {
        crate::kit::proc::status_kb(self.pid(), "VmHWM")
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // EOF first: the server ends its executions and their descendants, then exits.
        if self.close_stdin_and_wait(Duration::from_secs(5)).is_none() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// The structured result of a tool call.
pub(crate) fn structured(result: &Value) -> &Value {
    &result["structuredContent"]
}

/// The fixture's report of the argv it received.
pub(crate) fn reported_argv(result: &Value) -> Vec<String> {
    let parsed = &structured(result)["parsed_json"];
    serde_json::from_value(parsed["argv"].clone())
        .unwrap_or_else(|_| panic!("no argv report in {result}"))
}
