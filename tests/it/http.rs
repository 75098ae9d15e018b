//! `ccm --http`: the real binary on a free loopback port, driven by a real HTTP client
//! (`ureq`) and by the official Python SDK's Streamable HTTP client.

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::clients::{run_sdk_with, sdk_python};
use crate::support;

const TOKEN: &str = "test-token-7f3a9c2e5b1d";
const ACCEPT: &str = "application/json, text/event-stream";

/// A running `ccm --http 127.0.0.1:0`.
struct HttpServer {
    child: Child,
    /// `http://127.0.0.1:PORT/mcp`, from the line ccm prints once listening.
    url: String,
    stderr: Arc<Mutex<String>>,
}

impl HttpServer {
    fn start(args: &[&str], env: &[(&str, &str)]) -> HttpServer {
        Self::start_at("127.0.0.1:0", args, env)
    }

    fn start_at(addr: &str, args: &[&str], env: &[(&str, &str)]) -> HttpServer {
        let mut command = support::ccm();
        command
            .arg("--conda-exe")
            .arg(&support::fixture().conda)
            .args(["--http", addr])
            .args(args)
            .env_remove("CCM_MCP_TOKEN")
            .env_remove("CCM_MCP_TOKEN_QUERY_PARAM")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("start ccm --http");
        let stderr = Arc::new(Mutex::new(String::new()));
        let (sender, listening) = std::sync::mpsc::channel();
        let pipe = child.stderr.take().unwrap();
        let sink = Arc::clone(&stderr);
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                if let Some(url) = line.strip_prefix("ccm: listening on ") {
                    let _ = sender.send(url.to_owned());
                }
                let mut text = sink.lock().unwrap();
                text.push_str(&line);
                text.push('\n');
            }
        });
        let url = listening
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("ccm did not listen: {}", stderr.lock().unwrap()));
        let port = addr.rsplit(':').next().unwrap();
        assert!(url.starts_with("http://") && url.ends_with("/mcp"), "{url}");
        assert!(port == "0" || url.contains(&format!(":{port}/")), "{url}");
        HttpServer { child, url, stderr }
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Stop the server (SIGTERM: a graceful shutdown); its exit status and stdout.
    fn stop(mut self) -> (Option<i32>, String) {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(60);
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(Instant::now() < deadline, "ccm did not stop on SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut stdout = String::new();
        std::io::Read::read_to_string(&mut self.child.stdout.take().unwrap(), &mut stdout).unwrap();
        (status.code(), stdout)
    }

    /// `http://127.0.0.1:PORT` + `path`.
    fn at(&self, path: &str) -> String {
        format!("{}{path}", self.url.trim_end_matches("/mcp"))
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(120)))
        .build()
        .into()
}

/// An HTTP answer: status, headers (lower-case names) and body.
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The JSON-RPC messages of the body (an SSE stream or one JSON document).
    fn messages(&self) -> Vec<Value> {
        if self.header("content-type") == Some("application/json") {
            return vec![serde_json::from_str(&self.body).unwrap()];
        }
        self.body
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str(d.trim()).ok())
            .collect()
    }

    /// The one JSON-RPC response of the body.
    fn response(&self) -> Value {
        let messages = self.messages();
        messages
            .into_iter()
            .find(|m| m.get("id").is_some())
            .unwrap_or_else(|| panic!("no response in {} {}", self.status, self.body))
    }
}

fn answer(mut response: ureq::http::Response<ureq::Body>) -> Answer {
    let status = response.status().as_u16();
    let headers = response
        .headers()
        .iter()
        .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or("").to_owned()))
        .collect();
    let body = response.body_mut().read_to_string().unwrap_or_default();
    Answer {
        status,
        headers,
        body,
    }
}

/// POST a JSON-RPC message to `url` with the MCP headers, `bearer` and `session` when given.
fn post(url: &str, bearer: Option<&str>, session: Option<&str>, message: &Value) -> Answer {
    let mut request = agent()
        .post(url)
        .header("Content-Type", "application/json")
        .header("Accept", ACCEPT);
    if let Some(token) = bearer {
        request = request.header("Authorization", &format!("Bearer {token}"));
    }
    if let Some(id) = session {
        request = request.header("Mcp-Session-Id", id);
    }
    answer(request.send(message.to_string()).expect("POST"))
}

fn initialize(id: i64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "ccm-http-tests", "version": "1"}}})
}

fn request(id: i64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// Initialize a session with the header token; its `Mcp-Session-Id`.
fn open_session(url: &str, token: &str) -> String {
    let init = post(url, Some(token), None, &initialize(1));
    assert_eq!(init.status, 200, "{}", init.body);
    let session = init
        .header("mcp-session-id")
        .expect("a session id")
        .to_owned();
    let done = post(
        url,
        Some(token),
        Some(&session),
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    assert_eq!(done.status, 202);
    session
}

/// Wait (bounded) until `stderr` satisfies `ok`.
fn wait_for(server: &HttpServer, what: &str, ok: impl Fn(&str) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ok(&server.stderr()) {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {}",
            server.stderr()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// rmcp logs this (at info) for every `initialize` that reaches the MCP layer.
const SESSION_CREATED: &str = "create new session";

#[test]
fn tokens_are_checked_before_the_mcp_layer() {
    let server = HttpServer::start(
        &[],
        &[
            ("CCM_MCP_TOKEN", TOKEN),
            ("CCM_MCP_TOKEN_QUERY_PARAM", "key"),
            ("CCM_LOG", "debug"),
        ],
    );
    let url = server.url.clone();
    let wrong = "wrong-token-0000000000";
    let refused = [
        post(&url, None, None, &initialize(1)),
        post(&url, Some(wrong), None, &initialize(1)),
        // The default parameter name is not the configured one.
        post(&format!("{url}?token={TOKEN}"), None, None, &initialize(1)),
        post(&format!("{url}?key={wrong}"), None, None, &initialize(1)),
        // No Accept or Content-Type: the MCP layer would answer 406; the token check
        // answers first.
        answer(agent().post(&url).send("not json").unwrap()),
        answer(agent().get(&url).call().unwrap()),
        answer(agent().get(server.at("/elsewhere")).call().unwrap()),
    ];
    for (i, a) in refused.iter().enumerate() {
        assert_eq!(a.status, 401, "request {i}: {}", a.body);
        assert_eq!(a.header("www-authenticate"), Some("Bearer"), "request {i}");
        assert_eq!(a.body, "", "request {i}: no details");
    }
    wait_for(&server, "the refusals to be logged", |e| {
        e.matches("missing or wrong token").count() == refused.len()
    });
    assert!(
        !server.stderr().contains(SESSION_CREATED),
        "a refused initialize reached the MCP layer: {}",
        server.stderr()
    );

    // With the header token, then with the query token under its configured name.
    let session = open_session(&url, TOKEN);
    wait_for(&server, "a session", |e| {
        e.matches(SESSION_CREATED).count() == 1
    });
    let by_query = post(&format!("{url}?key={TOKEN}"), None, None, &initialize(1));
    assert_eq!(by_query.status, 200, "{}", by_query.body);
    assert_eq!(
        by_query.response()["result"]["serverInfo"]["name"],
        "conda-cli-mcp"
    );
    wait_for(&server, "a second session", |e| {
        e.matches(SESSION_CREATED).count() == 2
    });

    // A session works end to end.
    let tools = post(
        &url,
        Some(TOKEN),
        Some(&session),
        &request(2, "tools/list", json!({})),
    );
    assert_eq!(tools.status, 200);
    let names: Vec<String> = tools.response()["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(names.iter().any(|n| n == "conda_info"), "{names:?}");
    let info = post(
        &url,
        Some(TOKEN),
        Some(&session),
        &request(
            3,
            "tools/call",
            json!({"name": "conda_info", "arguments": {"json": true}}),
        ),
    );
    let result = &info.response()["result"];
    assert_eq!(result["structuredContent"]["exit_code"], 0, "{result}");
    assert_eq!(
        result["structuredContent"]["parsed_json"]["conda_version"],
        "0.99.0"
    );

    // Methods and paths, once authenticated.
    let get = answer(
        agent()
            .get(&url)
            .header("Authorization", &format!("Bearer {TOKEN}"))
            .header("Accept", "text/event-stream")
            .call()
            .unwrap(),
    );
    assert_eq!((get.status, get.header("allow")), (405, Some("POST")));
    let put = answer(
        agent()
            .put(format!("{url}?key={TOKEN}"))
            .send("{}")
            .unwrap(),
    );
    assert_eq!((put.status, put.header("allow")), (405, Some("POST")));
    for path in ["/", "/mcp/x", "/other"] {
        let missing = post(&server.at(path), Some(TOKEN), None, &initialize(1));
        assert_eq!(missing.status, 404, "{path}");
    }
    // rmcp's DNS-rebinding check: a foreign Host is refused even with the token.
    let foreign = answer(
        agent()
            .post(&url)
            .header("Host", "evil.example")
            .header("Authorization", &format!("Bearer {TOKEN}"))
            .header("Content-Type", "application/json")
            .header("Accept", ACCEPT)
            .send(initialize(1).to_string())
            .unwrap(),
    );
    assert_eq!(foreign.status, 403, "{}", foreign.body);

    // SIGTERM stops it cleanly; stdout stayed empty throughout.
    let logs = server.stderr();
    assert_eq!(server.stop(), (Some(0), String::new()));
    // Neither token, nor query strings, nor the header appear in the debug logs.
    assert!(
        logs.contains("HTTP request method=POST path=/mcp"),
        "{logs}"
    );
    for secret in [TOKEN, wrong, "key=", "Bearer", "authorization"] {
        assert!(
            !logs
                .to_ascii_lowercase()
                .contains(&secret.to_ascii_lowercase()),
            "{secret} in logs: {logs}"
        );
    }
}

#[test]
fn a_generated_token_is_printed_once_with_the_url() {
    let server = HttpServer::start(&[], &[("CCM_LOG", "debug")]);
    let logs = server.stderr();
    let line = logs
        .lines()
        .find(|l| l.contains("no token configured"))
        .unwrap_or_else(|| panic!("no token line: {logs}"));
    assert!(line.contains(&server.url), "{line}");
    let token = line.rsplit(' ').next().unwrap().to_owned();
    assert_eq!(token.len(), 64, "{line}");
    assert!(token.bytes().all(|b| b.is_ascii_hexdigit()));
    assert_eq!(post(&server.url, None, None, &initialize(1)).status, 401);
    let session = open_session(&server.url, &token);
    let ping = post(
        &server.url,
        Some(&token),
        Some(&session),
        &request(2, "ping", json!({})),
    );
    assert_eq!(ping.response()["result"], json!({}));
    let by_query = post(
        &format!("{}?token={token}", server.url),
        None,
        None,
        &initialize(1),
    );
    assert_eq!(by_query.status, 200);
    wait_for(&server, "request logs", |e| {
        e.matches("HTTP request method=POST").count() >= 4
    });
    assert_eq!(server.stderr().matches(&token).count(), 1, "printed once");
}

#[test]
fn listening_beyond_loopback_needs_a_flag() {
    let output = support::ccm()
        .arg("--conda-exe")
        .arg(&support::fixture().conda)
        .args(["--http", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let err = String::from_utf8(output.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("--allow-remote"), "{err}");
    assert!(output.stdout.is_empty());

    let server = HttpServer::start_at(
        "0.0.0.0:0",
        &["--allow-remote"],
        &[("CCM_MCP_TOKEN", TOKEN)],
    );
    wait_for(&server, "the warning", |e| {
        e.contains("listening beyond loopback")
    });
    // Reached through loopback, the Host check accepts it.
    let session = open_session(&server.url.replace("0.0.0.0", "127.0.0.1"), TOKEN);
    assert!(!session.is_empty());
}

#[test]
fn sessions_have_their_own_execution_limit() {
    let server = HttpServer::start(
        &[
            "--allow-write",
            "--classify",
            "conda_behave=write",
            "--classify",
            "conda_tune=write",
            "--max-session-calls",
            "1",
        ],
        &[("CCM_MCP_TOKEN", TOKEN)],
    );
    let url = server.url.clone();
    let first = open_session(&url, TOKEN);
    let second = open_session(&url, TOKEN);
    // Inside the working directory: over HTTP paths outside it are refused (--allow-paths).
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let pid_file = |name: &str| dir.path().join(name).to_str().unwrap().to_owned();
    let call = |id: i64, pid: String| {
        request(
            id,
            "tools/call",
            json!({"name": "conda_behave", "arguments": {"sleep": 3, "pid_file": pid}}),
        )
    };
    let slow = {
        let (url, first, message) = (url.clone(), first.clone(), call(2, pid_file("slow")));
        std::thread::spawn(move || post(&url, Some(TOKEN), Some(&first), &message))
    };
    let running = dir.path().join("slow");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !running.exists() {
        assert!(Instant::now() < deadline, "the first call never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The same session is at its limit: refused at once, nothing runs.
    let busy = post(&url, Some(TOKEN), Some(&first), &call(3, pid_file("busy")));
    let result = &busy.response()["result"];
    assert_eq!(result["isError"], true, "{result}");
    assert!(
        result["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("session_busy:"),
        "{result}"
    );
    // Another session is not: its call waits for the first and then runs.
    let other = post(
        &url,
        Some(TOKEN),
        Some(&second),
        &call(4, pid_file("other")),
    );
    let result = &other.response()["result"];
    assert_eq!(result["structuredContent"]["exit_code"], 0, "{result}");
    let slow = slow.join().unwrap();
    assert_eq!(
        slow.response()["result"]["structuredContent"]["exit_code"],
        0
    );
    assert!(!dir.path().join("busy").exists(), "the refused call ran");
    assert!(dir.path().join("other").exists());
}

#[test]
fn python_sdk_over_http() {
    let Some(python) = sdk_python("python_sdk_over_http") else {
        return;
    };
    let server = HttpServer::start(
        &[],
        &[
            ("CCM_MCP_TOKEN", TOKEN),
            ("CCM_MCP_TOKEN_QUERY_PARAM", "key"),
        ],
    );
    let with_query = format!("{}?key={TOKEN}", server.url);
    // Both the handshake era (initialize, Mcp-Session-Id) and the 2026-07-28 per-request
    // era; the token in the header, then in the URL.
    for (mode, url, bearer) in [
        ("legacy", server.url.as_str(), TOKEN),
        ("auto", server.url.as_str(), TOKEN),
        ("legacy", with_query.as_str(), ""),
        ("auto", with_query.as_str(), ""),
    ] {
        let seen = run_sdk_with(
            &python,
            &["http", url, mode],
            &[("CCM_TEST_BEARER", bearer)],
        );
        let tools = seen["tools"].as_array().unwrap();
        assert!(tools.iter().any(|t| t == "conda_info"), "{mode}: {seen}");
        assert_eq!(seen["resources"], json!(["conda://capabilities"]));
        assert_eq!(seen["info_is_error"], false, "{mode}: {seen}");
        assert_eq!(seen["info_exit_code"], 0);
        assert_eq!(seen["info_conda_version"], "0.99.0");
        assert_eq!(seen["invalid"]["code"], -32602, "{mode}: {seen}");
    }
    assert!(!server.stderr().contains(TOKEN));
}
