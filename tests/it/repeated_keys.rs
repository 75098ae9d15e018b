//! A request with a key repeated in one of its objects is refused whole (-32600 naming the
//! key's path, never a value) before anything runs, over stdio and HTTP, under every
//! revision offered: serde would take the last occurrence (the tool name included) while a
//! log or a client's view may show the first.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::http::{HttpServer, TOKEN, open_session_at, post_raw};
use crate::mcp::Session;
use crate::support;

/// Grants under which the hidden call (`conda_behave`, writing `pid_file`) would run.
const GRANTS: [&str; 3] = crate::kit::classify::BEHAVE_WRITE;

/// A `tools/call` whose name is given twice: `conda_info` first, then `conda_behave`
/// (which writes `pid`), and whose `pid_file` argument is given twice as well.
fn call_frame(id: i64, pid: &Path, meta: Option<&Value>) -> String {
    let pid = serde_json::to_string(pid.to_str().unwrap()).unwrap();
    let meta = meta.map(|m| format!(",\"_meta\":{m}")).unwrap_or_default();
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"conda_info","name":"conda_behave","arguments":{{"pid_file":{pid},"pid_file":{pid}}}{meta}}}}}"#
    )
}

/// The refusal: -32600 with the request's id, the path of the first repeated key.
fn assert_refused(answer: &Value, id: i64, what: &str) {
    assert_eq!(answer["id"], id, "{what}: {answer}");
    assert_eq!(answer["error"]["code"], -32600, "{what}: {answer}");
    assert_eq!(
        answer["error"]["data"]["path"], "$.params.name",
        "{what}: {answer}"
    );
    assert!(
        !answer.to_string().contains("conda_behave"),
        "{what}: a value was echoed: {answer}"
    );
}

/// The audit log and the file the hidden call would write: both untouched.
fn assert_nothing_ran(log: &Path, pid: &Path, what: &str) {
    assert!(!pid.exists(), "{what}: the hidden call ran");
    let lines = std::fs::read_to_string(log).unwrap_or_default();
    assert!(
        lines.is_empty(),
        "{what}: the call reached the policy: {lines}"
    );
}

#[test]
fn a_repeated_key_is_refused_over_stdio_under_every_revision() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.log");
    let conda = &support::fixture().conda;
    let start = || {
        let mut command = support::ccm();
        command
            .arg("--conda-exe")
            .arg(conda)
            .args(GRANTS)
            .arg("--audit-log")
            .arg(&log);
        Session::spawn(command)
    };
    for revision in ["2024-11-05", "2025-06-18", "2025-11-25"] {
        let pid = dir.path().join(format!("pid-{revision}"));
        let mut s = start();
        s.handshake(revision);
        s.write_raw(format!("{}\n", call_frame(7, &pid, None)).as_bytes());
        let answer = s.wait(7, Duration::from_secs(30)).expect("an answer");
        assert_refused(&answer, 7, revision);
        // The connection goes on: the same call without the repeat runs.
        let ran = s.request(
            "tools/call",
            json!({"name": "conda_behave", "arguments": {"pid_file": pid}}),
        );
        assert_eq!(ran["result"]["isError"], false, "{revision}: {ran}");
        assert!(pid.exists(), "{revision}: the control call did not run");
        std::fs::remove_file(&pid).unwrap();
        std::fs::write(&log, "").unwrap();
        s.write_raw(format!("{}\n", call_frame(8, &pid, None)).as_bytes());
        let answer = s.wait(8, Duration::from_secs(30)).expect("an answer");
        assert_refused(&answer, 8, revision);
        assert_nothing_ran(&log, &pid, revision);
    }
    // Session-less 2026-07-28 (no initialize).
    let pid = dir.path().join("pid-2026-07-28");
    let mut s = start();
    let meta = crate::mcp::session_less_meta();
    s.write_raw(format!("{}\n", call_frame(9, &pid, Some(&meta))).as_bytes());
    let answer = s.wait(9, Duration::from_secs(30)).expect("an answer");
    assert_refused(&answer, 9, "2026-07-28");
    assert_nothing_ran(&log, &pid, "2026-07-28");
}

#[test]
fn a_repeated_key_is_refused_over_http_under_every_revision() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.log");
    let mut args = GRANTS.to_vec();
    args.extend(["--audit-log", log.to_str().unwrap()]);
    let server = HttpServer::start(&args, &[("CCM_MCP_TOKEN", TOKEN)]);
    let url = server.url.as_str();
    for (id, revision) in [(2, "2024-11-05"), (3, "2025-06-18"), (4, "2025-11-25")] {
        let pid = dir.path().join(format!("pid-{revision}"));
        let session = open_session_at(url, revision);
        let headers = [("MCP-Protocol-Version", revision)];
        let answer = post_raw(
            url,
            Some(&session),
            &headers,
            call_frame(id, &pid, None).as_bytes(),
        );
        assert_refused(&answer.response(), id, revision);
        assert_nothing_ran(&log, &pid, revision);
    }
    let pid = dir.path().join("pid-2026-07-28");
    let meta = crate::mcp::session_less_meta();
    let headers = [
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "conda_info"),
    ];
    let answer = post_raw(
        url,
        None,
        &headers,
        call_frame(5, &pid, Some(&meta)).as_bytes(),
    );
    assert_refused(&answer.response(), 5, "2026-07-28");
    assert_nothing_ran(&log, &pid, "2026-07-28");
}

/// A `tools/call` whose arguments hold a key with a NUL beside the real one: refused whole
/// (-32600, the path of the object holding it), never ignored, over stdio under every
/// revision and over HTTP; nothing runs.
#[test]
fn a_key_with_a_control_character_is_refused_not_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.log");
    let frame = |id: i64, pid: &Path, meta: Option<&Value>| {
        let pid = serde_json::to_string(pid.to_str().unwrap()).unwrap();
        let meta = meta.map(|m| format!(",\"_meta\":{m}")).unwrap_or_default();
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"conda_behave","arguments":{{"pid_file":{pid},"pid_file\u0000":"SECRET"}}{meta}}}}}"#
        )
    };
    let refused = |answer: &Value, id: i64, what: &str| {
        assert_eq!(answer["id"], id, "{what}: {answer}");
        assert_eq!(answer["error"]["code"], -32600, "{what}: {answer}");
        assert_eq!(
            answer["error"]["data"]["path"], "$.params.arguments",
            "{what}: {answer}"
        );
        assert!(!answer.to_string().contains("SECRET"), "{what}: {answer}");
    };
    let mut command = support::ccm();
    command
        .arg("--conda-exe")
        .arg(&support::fixture().conda)
        .args(GRANTS)
        .arg("--audit-log")
        .arg(&log);
    let mut s = Session::spawn(command);
    s.handshake("2025-11-25");
    let pid = dir.path().join("pid");
    s.write_raw(format!("{}\n", frame(7, &pid, None)).as_bytes());
    refused(
        &s.wait(7, Duration::from_secs(30)).expect("an answer"),
        7,
        "stdio",
    );
    assert_nothing_ran(&log, &pid, "stdio");
    let mut args = GRANTS.to_vec();
    args.extend(["--audit-log", log.to_str().unwrap()]);
    let server = HttpServer::start(&args, &[("CCM_MCP_TOKEN", TOKEN)]);
    let meta = crate::mcp::session_less_meta();
    let headers = [
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "conda_behave"),
    ];
    let answer = post_raw(
        &server.url,
        None,
        &headers,
        frame(5, &pid, Some(&meta)).as_bytes(),
    );
    refused(&answer.response(), 5, "http");
    assert_nothing_ran(&log, &pid, "http");
}
