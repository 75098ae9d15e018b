//! `ccm --http`: the real binary on a free loopback port, driven by a real HTTP client
//! (`ureq`) and by the official Python SDK's Streamable HTTP client.

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::clients::{run_sdk_with, sdk_python};
use crate::kit::classify;
use crate::kit::proc::status_kb;
use crate::support;

pub(crate) const TOKEN: &str = "test-token-7f3a9c2e5b1d";
const ACCEPT: &str = "application/json, text/event-stream";

/// A running `ccm --http 127.0.0.1:0`.
pub(crate) struct HttpServer {
    child: Child,
    /// `http://127.0.0.1:PORT/mcp`, from the line ccm prints once listening.
    pub(crate) url: String,
    stderr: Arc<Mutex<String>>,
}

impl HttpServer {
    pub(crate) fn start(args: &[&str], env: &[(&str, &str)]) -> HttpServer {
        Self::start_at("127.0.0.1:0", args, env)
    }

    fn start_at(addr: &str, args: &[&str], env: &[(&str, &str)]) -> HttpServer {
        Self::start_for(&support::fixture().conda, addr, args, env)
    }

    /// `ccm --http ADDR` for `conda` (the fixture's, or a real one).
    pub(crate) fn start_for(
        conda: &std::path::Path,
        addr: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> HttpServer {
        HttpServer::start_for_in(conda, addr, args, env, None)
    }

    /// `start_for`, the server working in `cwd` (the HTTP transport's default
    /// `--allow-paths` scope is the working directory).
    pub(crate) fn start_for_in(
        conda: &std::path::Path,
        addr: &str,
        args: &[&str],
        env: &[(&str, &str)],
        cwd: Option<&std::path::Path>,
    ) -> HttpServer {
        let mut command = support::ccm();
        if let Some(cwd) = cwd {
            command.current_dir(cwd);
        }
        command
            .arg("--conda-exe")
            .arg(conda)
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

    pub(crate) fn stderr(&self) -> String {
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
pub(crate) struct Answer {
    pub(crate) status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Answer {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
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
    pub(crate) fn response(&self) -> Value {
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
pub(crate) fn post(
    url: &str,
    bearer: Option<&str>,
    session: Option<&str>,
    message: &Value,
) -> Answer {
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

pub(crate) fn request(id: i64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// Initialize a session with the header token; its `Mcp-Session-Id`.
pub(crate) fn open_session(url: &str, token: &str) -> String {
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

/// A session opened at `revision` (which the server must agree to) with [`TOKEN`], and
/// `notifications/initialized` sent with that revision's header: the session's id.
pub(crate) fn open_session_at(url: &str, revision: &str) -> String {
    let init = post(
        url,
        Some(TOKEN),
        None,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": revision, "capabilities": {},
            "clientInfo": {"name": "ccm-http-tests", "version": "1"}}}),
    );
    assert_eq!(init.response()["result"]["protocolVersion"], revision);
    let session = init.header("mcp-session-id").unwrap().to_owned();
    let done = post_raw(
        url,
        Some(&session),
        &[("MCP-Protocol-Version", revision)],
        br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    );
    assert_eq!(done.status, 202, "{revision}");
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
        assert_eq!(
            a.header("www-authenticate"),
            Some(r#"Bearer error="invalid_token""#),
            "request {i}"
        );
        let body: Value = serde_json::from_str(&a.body).unwrap_or_else(|e| panic!("{i}: {e}"));
        assert_eq!(body["error"], "invalid_token", "request {i}");
        let wrong_token = matches!(i, 1 | 3);
        let said = body["error_description"].as_str().unwrap();
        assert_eq!(
            said.contains("is wrong"),
            wrong_token,
            "request {i}: {said}"
        );
        assert_eq!(
            said.contains("No bearer token"),
            !wrong_token,
            "request {i}: {said}"
        );
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
    assert_eq!(
        (get.status, get.header("allow")),
        (405, Some("POST, DELETE"))
    );
    let put = answer(
        agent()
            .put(format!("{url}?key={TOKEN}"))
            .send("{}")
            .unwrap(),
    );
    assert_eq!(
        (put.status, put.header("allow")),
        (405, Some("POST, DELETE"))
    );
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
fn an_address_in_use_is_a_one_line_error() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let output = support::ccm()
        .arg("--conda-exe")
        .arg(&support::fixture().conda)
        .args(["--http", &addr])
        .env("CCM_MCP_TOKEN", TOKEN)
        .env_remove("CCM_LOG")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let err = String::from_utf8(output.stderr).unwrap();
    let prefix = format!("ccm: error: cannot listen on {addr}: ");
    assert!(err.lines().any(|line| line.starts_with(&prefix)), "{err}");
    assert!(!err.contains("listening on"), "{err}");
    assert!(output.stdout.is_empty());
    drop(taken);
}

#[test]
fn sessions_have_their_own_execution_limit() {
    let server = HttpServer::start(
        // The pid files live in a temporary directory, outside the default HTTP scope.
        &classify::with(
            &classify::BEHAVE_TUNE_WRITE,
            &["--allow-paths", "/", "--max-session-calls", "1"],
        ),
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
        0,
        "{}",
        slow.body
    );
    assert!(!dir.path().join("busy").exists(), "the refused call ran");
    assert!(dir.path().join("other").exists());
}

#[test]
#[ignore = "needs CCM_TEST_MCP_PYTHON"]
fn python_sdk_over_http() {
    let python = sdk_python();
    // --no-warm: the session's answers pin a result's whole `_meta`, which on a warm
    // server also says whether the call ran warm (as over stdio, clients.rs).
    let server = HttpServer::start(
        &["--no-warm"],
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
        crate::clients::assert_session_answers(&seen, mode);
    }
    assert!(!server.stderr().contains(TOKEN));
}

/// The `127.0.0.1:PORT` of a server URL.
fn authority(url: &str) -> String {
    url.trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned()
}

/// Write raw bytes on a fresh connection and read the reply (up to 5 s or close).
fn raw_exchange(url: &str, bytes: &[u8]) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(authority(url)).unwrap();
    stream.write_all(bytes).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut reply = Vec::new();
    let mut chunk = [0u8; 4096];
    while let Ok(n) = stream.read(&mut chunk) {
        if n == 0 {
            break;
        }
        reply.extend_from_slice(&chunk[..n]);
        if reply.windows(4).any(|w| w == b"\r\n\r\n") && reply.ends_with(b"}") {
            break;
        }
    }
    String::from_utf8_lossy(&reply).into_owned()
}

pub(crate) fn post_raw(
    url: &str,
    session: Option<&str>,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Answer {
    let mut request = agent()
        .post(url)
        .header("Content-Type", "application/json")
        .header("Accept", ACCEPT)
        .header("Authorization", &format!("Bearer {TOKEN}"));
    if let Some(id) = session {
        request = request.header("Mcp-Session-Id", id);
    }
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    answer(request.send(body).expect("POST"))
}

/// A session-less (2026-07-28) request: the revision in the header and in `_meta`.
fn stateless(id: i64, method: &str, params: Value) -> (Vec<(&'static str, String)>, Value) {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "ccm-http-tests", "version": "1"},
    });
    let mut headers = vec![
        ("MCP-Protocol-Version", "2026-07-28".to_owned()),
        ("Mcp-Method", method.to_owned()),
    ];
    if let Some(name) = params.get("name").and_then(Value::as_str) {
        headers.push(("Mcp-Name", name.to_owned()));
    }
    (headers, request(id, method, params))
}

pub(crate) fn post_stateless(url: &str, id: i64, method: &str, params: Value) -> Answer {
    let (headers, body) = stateless(id, method, params);
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    post_raw(url, None, &headers, body.to_string().as_bytes())
}

#[test]
fn hostile_bodies_are_answered_like_stdio_lines() {
    let server = HttpServer::start(&classify::BEHAVE_WRITE, &[("CCM_MCP_TOKEN", TOKEN)]);
    let url = server.url.clone();
    let session = open_session(&url, TOKEN);
    let long_method = format!("x\n{}", "m".repeat(10 * 1024));
    for (case, body, status, id, code) in [
        ("NaN", br#"{"jsonrpc":"2.0","id":1,"method":"ping","x":NaN}"#.to_vec(), 400, Value::Null, -32700),
        ("not UTF-8", b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\"}".to_vec(), 400, Value::Null, -32700),
        ("empty", Vec::new(), 400, Value::Null, -32700),
        ("1e400", br#"{"jsonrpc":"2.0","id":2,"method":"ping","params":{"x":1e400}}"#.to_vec(), 200, json!(2), -32602),
        (
            "deep",
            format!(r#"{{"jsonrpc":"2.0","id":3,"method":"ping","params":{{"x":{}{}}}}}"#, "[".repeat(5000), "]".repeat(5000)).into_bytes(),
            200,
            json!(3),
            -32602,
        ),
        ("empty batch", b"[]".to_vec(), 400, Value::Null, -32600),
        ("null id", br#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#.to_vec(), 400, Value::Null, -32600),
        (
            "arguments an array",
            br#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"conda_info","arguments":[1,2]}}"#.to_vec(),
            200,
            json!(4),
            -32602,
        ),
        (
            "unknown method",
            json!({"jsonrpc": "2.0", "id": 5, "method": long_method}).to_string().into_bytes(),
            200,
            json!(5),
            -32601,
        ),
    ] {
        let started = Instant::now();
        let a = post_raw(&url, Some(&session), &[], &body);
        assert!(started.elapsed() < Duration::from_secs(1), "{case}: slow answer");
        assert_eq!(a.status, status, "{case}: {}", a.body);
        let v: Value = serde_json::from_str(&a.body).unwrap_or_else(|e| panic!("{case}: {e}: {}", a.body));
        assert_eq!((v["id"].clone(), v["error"]["code"].clone()), (id, json!(code)), "{case}: {v}");
        assert!(a.body.len() < 512, "{case}: echoes too much: {}", a.body);
    }
    // A batch: one error per request, with its id.
    let a = post_raw(
        &url,
        Some(&session),
        &[],
        br#"[{"jsonrpc":"2.0","id":"a","method":"ping"},{"jsonrpc":"2.0","id":"b","method":"ping"}]"#,
    );
    let v: Value = serde_json::from_str(&a.body).unwrap();
    assert_eq!(v[0]["id"], "a", "{v}");
    assert_eq!(v[1]["id"], "b", "{v}");
    assert_eq!(v[1]["error"]["code"], -32600, "{v}");
    // Too long: 413, and the next request is served.
    // (Announced by Content-Length: refused before the body is read.)
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\nAccept: {ACCEPT}\r\nMcp-Session-Id: {session}\r\n\
         Content-Length: {}\r\n\r\n{{\"jsonrpc\":",
        12 * 1024 * 1024
    );
    let reply = raw_exchange(&url, head.as_bytes());
    assert!(reply.starts_with("HTTP/1.1 413"), "{reply}");
    assert!(reply.contains("-32600"), "{reply}");
    let a = post(
        &url,
        Some(TOKEN),
        Some(&session),
        &request(6, "ping", json!({})),
    );
    assert!(a.response().get("result").is_some(), "{}", a.body);
    // An id in flight in the session is refused; another session may use it.
    let slow_url = url.clone();
    let slow_session = session.clone();
    let slow = std::thread::spawn(move || {
        post(
            &slow_url,
            Some(TOKEN),
            Some(&slow_session),
            &request(
                77,
                "tools/call",
                json!({"name": "conda_behave", "arguments": {"sleep": 3}}),
            ),
        )
    });
    std::thread::sleep(Duration::from_millis(500));
    let dup = post(
        &url,
        Some(TOKEN),
        Some(&session),
        &request(77, "ping", json!({})),
    );
    let v = dup.response();
    assert_eq!(
        (v["id"].clone(), v["error"]["code"].clone()),
        (json!(77), json!(-32600)),
        "{v}"
    );
    let slow = slow.join().unwrap();
    assert_eq!(
        slow.response()["result"]["structuredContent"]["exit_code"],
        0
    );
    // Once answered, the id is free again.
    let again = post(
        &url,
        Some(TOKEN),
        Some(&session),
        &request(77, "ping", json!({})),
    );
    assert!(again.response().get("result").is_some(), "{}", again.body);
    // rmcp's own refusals quote request headers: cut to the echo limit.
    let (_, body) = stateless(8, "tools/list", json!({}));
    let long = "x".repeat(3000);
    for headers in [
        [
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", long.as_str()),
        ],
        [
            ("MCP-Protocol-Version", long.as_str()),
            ("Mcp-Method", "tools/list"),
        ],
    ] {
        let a = post_raw(&url, None, &headers, body.to_string().as_bytes());
        assert_eq!(a.status, 400, "{}", a.body);
        assert!(!a.body.contains(&"x".repeat(65)), "echoed: {}", a.body);
        let v: Value = serde_json::from_str(&a.body).unwrap();
        assert_eq!(v["id"], 8, "{v}");
    }
    // DELETE ends the session with 204.
    let deleted = answer(
        agent()
            .delete(&url)
            .header("Authorization", &format!("Bearer {TOKEN}"))
            .header("Mcp-Session-Id", &session)
            .call()
            .unwrap(),
    );
    assert_eq!(deleted.status, 204, "{}", deleted.body);
}

#[test]
fn well_known_origin_and_token_answers() {
    let server = HttpServer::start(
        &["--allowed-origin", "https://app.example"],
        &[("CCM_MCP_TOKEN", TOKEN)],
    );
    for path in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-authorization-server",
    ] {
        let a = answer(agent().get(server.at(path)).call().unwrap());
        assert_eq!(
            a.status, 404,
            "{path}: no token needed to learn there is no OAuth"
        );
    }
    let with_origin = |origin: &str| {
        answer(
            agent()
                .post(&server.url)
                .header("Origin", origin)
                .header("Authorization", &format!("Bearer {TOKEN}"))
                .header("Content-Type", "application/json")
                .header("Accept", ACCEPT)
                .send(initialize(1).to_string())
                .unwrap(),
        )
    };
    for origin in [
        "http://localhost:6274",
        "http://127.0.0.1",
        "https://APP.example",
    ] {
        let a = with_origin(origin);
        assert_eq!(a.status, 200, "{origin}: {}", a.body);
    }
    for origin in [
        "https://evil.example",
        "null",
        "http://localhost.evil.example",
    ] {
        let a = with_origin(origin);
        assert_eq!(a.status, 403, "{origin}: {}", a.body);
        assert!(a.body.contains("origin_not_allowed"), "{}", a.body);
    }
}

/// Two `Authorization` headers are ambiguous (a proxy may check or log the other one):
/// refused as RFC 6750 §3.1's `invalid_request` whichever carries the token, and the
/// answer echoes neither value. Both revisions' lifecycles pass the same gate.
#[test]
fn a_repeated_authorization_header_is_refused() {
    let server = HttpServer::start(&[], &[("CCM_MCP_TOKEN", TOKEN)]);
    let body = initialize(1).to_string();
    let host = authority(&server.url);
    for (first, second) in [
        ("Bearer wrong-value-1", &*format!("Bearer {TOKEN}")),
        (&*format!("Bearer {TOKEN}"), "Bearer wrong-value-1"),
        (&*format!("Bearer {TOKEN}"), &*format!("Bearer {TOKEN}")),
    ] {
        for revision in ["2025-06-18", "2026-07-28"] {
            let head = format!(
                "POST /mcp HTTP/1.1\r\nHost: {host}\r\nAuthorization: {first}\r\n\
                 Authorization: {second}\r\nContent-Type: application/json\r\n\
                 Accept: {ACCEPT}\r\nMCP-Protocol-Version: {revision}\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let reply = raw_exchange(&server.url, head.as_bytes());
            assert!(
                reply.starts_with("HTTP/1.1 400"),
                "{first} / {second}: {reply}"
            );
            assert!(reply.contains("invalid_request"), "{reply}");
            assert!(
                reply.contains(r#"WWW-Authenticate: Bearer error="invalid_request""#)
                    || reply.contains(r#"www-authenticate: Bearer error="invalid_request""#),
                "{reply}"
            );
            for secret in [TOKEN, "wrong-value-1"] {
                assert!(!reply.contains(secret), "echoes {secret}: {reply}");
            }
        }
    }
    // One header with the token still opens a session.
    let single = post(&server.url, Some(TOKEN), None, &initialize(2));
    assert_eq!(single.status, 200, "{}", single.body);
}

#[test]
fn sessions_and_session_less_requests_are_capped() {
    let server = HttpServer::start(
        &classify::with(
            &classify::BEHAVE_WRITE,
            &["--http-max-sessions", "2", "--http-max-stateless", "1"],
        ),
        &[("CCM_MCP_TOKEN", TOKEN)],
    );
    let url = server.url.clone();
    let first = open_session(&url, TOKEN);
    let _second = open_session(&url, TOKEN);
    let third = post(&url, Some(TOKEN), None, &initialize(9));
    assert_eq!(third.status, 503, "{}", third.body);
    let v: Value = serde_json::from_str(&third.body).unwrap();
    assert_eq!(
        (v["id"].clone(), v["error"]["code"].clone()),
        (json!(9), json!(-32000)),
        "{v}"
    );
    // Ending one makes room.
    let deleted = answer(
        agent()
            .delete(&url)
            .header("Authorization", &format!("Bearer {TOKEN}"))
            .header("Mcp-Session-Id", &first)
            .call()
            .unwrap(),
    );
    assert_eq!(deleted.status, 204);
    let _third = open_session(&url, TOKEN);

    // Session-less: one in progress at a time.
    let ok = post_stateless(&url, 1, "tools/list", json!({}));
    assert_eq!(ok.status, 200, "{}", ok.body);
    assert!(ok.response().get("result").is_some(), "{}", ok.body);
    let slow_url = url.clone();
    let slow = std::thread::spawn(move || {
        post_stateless(
            &slow_url,
            2,
            "tools/call",
            json!({"name": "conda_behave", "arguments": {"sleep": 3}}),
        )
    });
    std::thread::sleep(Duration::from_millis(700));
    let refused = post_stateless(&url, 3, "tools/list", json!({}));
    assert_eq!(refused.status, 503, "{}", refused.body);
    let v: Value = serde_json::from_str(&refused.body).unwrap();
    assert_eq!(
        (v["id"].clone(), v["error"]["code"].clone()),
        (json!(3), json!(-32000)),
        "{v}"
    );
    let slow = slow.join().unwrap();
    assert_eq!(slow.status, 200, "{}", slow.body);
    let after = post_stateless(&url, 4, "tools/list", json!({}));
    assert_eq!(after.status, 200, "{}", after.body);
}

/// Raise this process's open-file limit to at least `want` (up to the hard limit).
fn raise_nofile(want: libc::rlim_t) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit write/read the struct we pass.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit), 0);
    }
    assert!(
        limit.rlim_max >= want,
        "the hard RLIMIT_NOFILE ({}) is below the {want} descriptors this test needs",
        limit.rlim_max
    );
    if limit.rlim_cur < want {
        limit.rlim_cur = want;
        // SAFETY: as above.
        unsafe {
            assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &limit), 0);
        }
    }
}

fn current_hard_nofile() -> libc::rlim_t {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct we pass.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit), 0);
    }
    limit.rlim_max
}

#[test]
fn idle_and_half_sent_connections_cannot_starve_a_client() {
    raise_nofile(4096);
    let server = HttpServer::start(
        &["--http-header-timeout", "2", "--http-idle-timeout", "4"],
        &[("CCM_MCP_TOKEN", TOKEN)],
    );
    // The server gets the common default of 1,024 descriptors: without the connection
    // cap and the timeouts, the flood would hold all of them and no new client could
    // connect afterwards.
    let server_limit = libc::rlimit {
        rlim_cur: 1024,
        rlim_max: 20_000.min(current_hard_nofile()),
    };
    // SAFETY: prlimit reads the struct we pass; the old value is not requested.
    let set = unsafe {
        libc::prlimit(
            server.child.id() as libc::pid_t,
            libc::RLIMIT_NOFILE,
            &server_limit,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(set, 0, "prlimit on the server");
    let url = server.url.clone();
    // The pinging client connects first and keeps its connection (ureq pools it).
    let client = agent();
    let session = {
        let init = answer(
            client
                .post(&url)
                .header("Authorization", &format!("Bearer {TOKEN}"))
                .header("Content-Type", "application/json")
                .header("Accept", ACCEPT)
                .send(initialize(1).to_string())
                .unwrap(),
        );
        init.header("mcp-session-id").unwrap().to_owned()
    };
    let ping = |id: i64| {
        let started = Instant::now();
        let a = answer(
            client
                .post(&url)
                .header("Authorization", &format!("Bearer {TOKEN}"))
                .header("Content-Type", "application/json")
                .header("Accept", ACCEPT)
                .header("Mcp-Session-Id", &session)
                .send(request(id, "ping", json!({})).to_string())
                .expect("ping"),
        );
        let took = started.elapsed();
        assert!(a.response().get("result").is_some(), "{}", a.body);
        took
    };
    ping(2);
    // 2,000 idle connections and 200 requests cut off in their headers.
    let attacker = std::thread::spawn({
        let address = authority(&url);
        move || {
            use std::io::Write;
            let mut held = Vec::new();
            for _ in 0..2000 {
                if let Ok(stream) = std::net::TcpStream::connect(&address) {
                    held.push(stream);
                }
            }
            for _ in 0..200 {
                if let Ok(mut stream) = std::net::TcpStream::connect(&address) {
                    let _ = stream.write_all(
                        format!("POST /mcp HTTP/1.1\r\nHost: {address}\r\nContent-Ty").as_bytes(),
                    );
                    held.push(stream);
                }
            }
            held
        }
    });
    let mut worst = Duration::ZERO;
    let mut pings = 0;
    let until = Instant::now() + Duration::from_secs(8);
    let mut id = 10;
    while Instant::now() < until {
        let took = ping(id);
        worst = worst.max(took);
        pings += 1;
        id += 1;
        assert!(
            took < Duration::from_secs(1),
            "ping {id} took {took:?} under the connection flood"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let held = attacker.join().unwrap();
    eprintln!(
        "{pings} pings under {} flood connections: worst {worst:?}",
        held.len()
    );
    // Once the flood's last connections have timed out (the idle timeout, 4 s), new
    // clients get in again.
    std::thread::sleep(Duration::from_secs(5));
    let fresh = post(
        &url,
        Some(TOKEN),
        Some(&session),
        &request(9999, "ping", json!({})),
    );
    assert!(fresh.response().get("result").is_some(), "{}", fresh.body);
    drop(held);
}

/// The most resident memory an open, idle session may add (kB).
const MEMORY_PER_SESSION_KB: u64 = 256;

#[test]
fn memory_per_session() {
    let server = HttpServer::start(&["--http-max-sessions", "500"], &[("CCM_MCP_TOKEN", TOKEN)]);
    let url = server.url.clone();
    let warm = open_session(&url, TOKEN);
    let _ = post(
        &url,
        Some(TOKEN),
        Some(&warm),
        &request(2, "tools/list", json!({})),
    );
    let before = status_kb(server.child.id(), "VmRSS");
    let sessions: Vec<String> = (0..200).map(|_| open_session(&url, TOKEN)).collect();
    let after = status_kb(server.child.id(), "VmRSS");
    let per_session = after.saturating_sub(before) / sessions.len() as u64;
    eprintln!(
        "{} sessions: RSS {before} kB → {after} kB, about {per_session} kB per session",
        sessions.len(),
    );
    // About 100 kB a session (measured on this test's fixture server); the bound leaves
    // 2.5 times that for allocator noise. More means each session keeps its own copy of
    // what the server should share.
    assert!(
        per_session <= MEMORY_PER_SESSION_KB,
        "{per_session} kB per session (at most {MEMORY_PER_SESSION_KB})"
    );
    // The cap holds at its value.
    let refused = (0..400)
        .map(|i| post(&url, Some(TOKEN), None, &initialize(i)).status)
        .filter(|s| *s == 503)
        .count();
    assert_eq!(refused, 400 - (500 - 201), "sessions beyond 500 refused");
}

#[test]
fn a_long_call_outlives_the_idle_timeout() {
    // Event streams carry keep-alive comments within the idle timeout (here 2 s), so a
    // 5 s conda run is answered on its connection.
    let server = HttpServer::start(
        &classify::with(&classify::BEHAVE_WRITE, &["--http-idle-timeout", "2"]),
        &[("CCM_MCP_TOKEN", TOKEN)],
    );
    let session = open_session(&server.url, TOKEN);
    let slow = post(
        &server.url,
        Some(TOKEN),
        Some(&session),
        &request(
            2,
            "tools/call",
            json!({"name": "conda_behave", "arguments": {"sleep": 5}}),
        ),
    );
    assert_eq!(
        slow.response()["result"]["structuredContent"]["exit_code"],
        0,
        "{}",
        slow.body
    );
    // A request body that stalls gets 408 once the idle timeout has passed.
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\nAccept: {ACCEPT}\r\nContent-Length: 100\r\n\r\n{{\"json"
    );
    let started = Instant::now();
    let reply = raw_exchange(&server.url, head.as_bytes());
    assert!(reply.starts_with("HTTP/1.1 408"), "{reply}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let stateless = post_stateless(
        &server.url,
        3,
        "tools/call",
        json!({"name": "conda_behave", "arguments": {"sleep": 5}}),
    );
    assert_eq!(
        stateless.response()["result"]["structuredContent"]["exit_code"],
        0,
        "{}",
        stateless.body
    );
}

/// Over HTTP, as over stdio: invalid arguments are -32602 before 2025-11-25 and an
/// `isError` result from 2025-11-25 on, per session (and per session-less request).
#[test]
fn invalid_arguments_follow_the_negotiated_revision_over_http() {
    use crate::revisions::{assert_invalid_answer, assert_moved, assert_unknown_answer};
    let server = HttpServer::start(&[], &[("CCM_MCP_TOKEN", TOKEN)]);
    let url = server.url.as_str();
    for (revision, as_result) in [
        ("2024-11-05", false),
        ("2025-06-18", false),
        ("2025-11-25", true),
    ] {
        let session = open_session_at(url, revision);
        let headers = [("MCP-Protocol-Version", revision)];
        let send = |message: &Value| {
            post_raw(
                url,
                Some(&session),
                &headers,
                message.to_string().as_bytes(),
            )
        };
        let call = |id: i64, name: &str, arguments: Value| {
            send(&request(
                id,
                "tools/call",
                json!({"name": name, "arguments": arguments}),
            ))
            .response()
        };
        assert_invalid_answer(
            &call(2, "conda_info", json!({"verbose": 17})),
            as_result,
            revision,
        );
        assert_unknown_answer(&call(3, "conda_nothing", json!({})), revision);
        assert_moved(&call(4, "conda_info", json!({"json": true})), revision);
    }
    let call = |id: i64, name: &str, arguments: Value| {
        post_stateless(
            url,
            id,
            "tools/call",
            json!({"name": name, "arguments": arguments}),
        )
        .response()
    };
    assert_invalid_answer(
        &call(5, "conda_info", json!({"verbose": 17})),
        true,
        "2026-07-28",
    );
    assert_unknown_answer(&call(6, "conda_nothing", json!({})), "2026-07-28");
    assert_moved(&call(7, "conda_info", json!({"json": true})), "2026-07-28");
}

/// MCP roots over HTTP: the server asks the client's `roots/list` on the session's stream
/// and honours it as over stdio (the Python SDK, handshake mode).
#[test]
#[ignore = "needs CCM_TEST_MCP_PYTHON"]
fn python_sdk_roots_over_http() {
    use crate::clients::{assert_roots_honoured, root_dirs, roots, run_roots};
    let python = sdk_python();
    let server = HttpServer::start(
        &classify::with(&classify::BEHAVE_WRITE, &["--allow-paths", "/"]),
        &[("CCM_MCP_TOKEN", TOKEN)],
    );
    let dirs = root_dirs();
    let paths = roots(&dirs);
    let mut args = vec!["http", server.url.as_str(), "legacy"];
    args.extend(paths.iter().map(String::as_str));
    let seen = run_roots(&python, &args, &[("CCM_TEST_BEARER", TOKEN)]);
    assert_roots_honoured(&seen, &paths);
}

/// Progress over HTTP: in a handshake session and for a session-less 2026-07-28 request,
/// the notifications of a call with a `progressToken` arrive on that request's event
/// stream, before its response.
#[test]
fn progress_notifications_arrive_on_the_request_stream() {
    use crate::progress::{check_create_result, check_packages, check_progress, create_arguments};
    let server = HttpServer::start(
        &classify::BEHAVE_WRITE,
        &[
            ("CCM_MCP_TOKEN", TOKEN),
            ("CONDA_FIXTURE_FETCH_SECONDS", "0.4"),
        ],
    );
    let url = server.url.as_str();
    let token = json!("over-http");
    let mut params = json!({"name": "conda_create", "arguments": create_arguments()});
    params["_meta"] = json!({"progressToken": token});
    // A handshake session (2025-11-25).
    let init = post(
        url,
        Some(TOKEN),
        None,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "ccm-http-tests", "version": "1"}}}),
    );
    let session = init.header("mcp-session-id").unwrap().to_owned();
    let headers = [("MCP-Protocol-Version", "2025-11-25")];
    let send = |message: &Value| {
        post_raw(
            url,
            Some(&session),
            &headers,
            message.to_string().as_bytes(),
        )
    };
    assert_eq!(
        send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).status,
        202
    );
    let answer = send(&request(2, "tools/call", params.clone()));
    // Session-less (2026-07-28): the revision in the headers and in `_meta`.
    let (headers, mut body) = stateless(3, "tools/call", params);
    body["params"]["_meta"]["progressToken"] = token.clone();
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let session_less = post_raw(url, None, &headers, body.to_string().as_bytes());
    for (mode, answer) in [("2025-11-25", answer), ("2026-07-28", session_less)] {
        assert_eq!(answer.status, 200, "{mode}: {}", answer.body);
        assert_eq!(
            answer.header("content-type"),
            Some("text/event-stream"),
            "{mode}"
        );
        let messages = answer.messages();
        let (last, notifications) = messages.split_last().expect("messages");
        check_create_result(last, mode);
        let texts = check_progress(notifications, &token, true);
        check_packages(&texts, mode);
    }
}
