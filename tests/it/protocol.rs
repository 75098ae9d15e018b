//! Hostile JSON-RPC frames over stdio: every frame with an id is answered within a
//! second, per JSON-RPC 2.0, nothing the client sent is echoed at length, and the
//! server keeps serving.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::mcp::Session;
use crate::support;

const ANSWER_WITHIN: Duration = Duration::from_secs(1);

fn conda() -> &'static Path {
    &support::fixture().conda
}

/// Send one frame (a newline is appended) and return the next message.
fn exchange(s: &mut Session, frame: &[u8]) -> Value {
    let mut bytes = frame.to_vec();
    bytes.push(b'\n');
    s.write_raw(&bytes);
    s.next(ANSWER_WITHIN).unwrap_or_else(|| {
        panic!(
            "no answer within {ANSWER_WITHIN:?} to {}",
            String::from_utf8_lossy(&frame[..frame.len().min(200)])
        )
    })
}

fn assert_error(answer: &Value, id: Value, code: i64, case: &str) {
    assert_eq!(answer["jsonrpc"], "2.0", "{case}: {answer}");
    assert_eq!(answer["id"], id, "{case}: {answer}");
    assert_eq!(answer["error"]["code"], code, "{case}: {answer}");
    if let Some(data) = answer["error"].get("data") {
        assert!(
            data.is_object(),
            "{case}: error.data must be an object: {answer}"
        );
    }
}

/// The server still answers a ping (its own id).
fn assert_alive(s: &mut Session, id: i64) {
    let answer = exchange(
        s,
        json!({"jsonrpc": "2.0", "id": id, "method": "ping"})
            .to_string()
            .as_bytes(),
    );
    assert_eq!(answer["id"], id, "{answer}");
    assert!(answer.get("result").is_some(), "{answer}");
}

#[test]
fn hostile_frames_are_all_answered() {
    let mut s = Session::start(conda(), &[]);
    let deep = |levels: usize| {
        format!(
            r#"{{"jsonrpc":"2.0","id":"deep","method":"tools/call","params":{{"name":"conda_info","arguments":{{"x":{}{}}}}}}}"#,
            "[".repeat(levels),
            "]".repeat(levels)
        )
    };
    let long_method = format!("x\n{}", "m".repeat(10 * 1024));
    let cases: Vec<(&str, Vec<u8>, Value, i64)> = vec![
        (
            "NaN literal",
            br#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":NaN}}"#.to_vec(),
            Value::Null,
            -32700,
        ),
        ("Infinity", b"Infinity".to_vec(), Value::Null, -32700),
        (
            "-Infinity in params",
            br#"{"jsonrpc":"2.0","id":2,"method":"ping","params":{"x":-Infinity}}"#.to_vec(),
            Value::Null,
            -32700,
        ),
        (
            "invalid UTF-8",
            b"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\",\"params\":{\"x\":\"\xff\xfe\"}}"
                .to_vec(),
            Value::Null,
            -32700,
        ),
        ("truncated JSON", br#"{"jsonrpc":"2.0","id":4,"#.to_vec(), Value::Null, -32700),
        ("plain text", b"hello".to_vec(), Value::Null, -32700),
        (
            "1e400 in params",
            br#"{"jsonrpc":"2.0","id":5,"method":"ping","params":{"x":1e400}}"#.to_vec(),
            json!(5),
            -32602,
        ),
        (
            "1e400 outside params",
            br#"{"jsonrpc":"2.0","id":6,"method":"ping","x":1e400}"#.to_vec(),
            json!(6),
            -32600,
        ),
        ("nesting 200 deep", deep(200).into_bytes(), json!("deep"), -32602),
        (
            "nesting 100000 deep",
            deep(100_000).into_bytes(),
            json!("deep"),
            -32602,
        ),
        ("empty batch", b"[]".to_vec(), Value::Null, -32600),
        ("a number", b"42".to_vec(), Value::Null, -32600),
        (
            "jsonrpc 1.0",
            br#"{"jsonrpc":"1.0","id":7,"method":"ping"}"#.to_vec(),
            json!(7),
            -32600,
        ),
        (
            "no jsonrpc",
            br#"{"id":8,"method":"ping"}"#.to_vec(),
            json!(8),
            -32600,
        ),
        (
            "null id",
            br#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#.to_vec(),
            Value::Null,
            -32600,
        ),
        (
            "object id",
            br#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#.to_vec(),
            Value::Null,
            -32600,
        ),
        (
            "fractional id",
            br#"{"jsonrpc":"2.0","id":9.5,"method":"ping"}"#.to_vec(),
            json!(9.5),
            -32600,
        ),
        (
            "method not a string",
            br#"{"jsonrpc":"2.0","id":10,"method":["ping"]}"#.to_vec(),
            json!(10),
            -32600,
        ),
        (
            "no method",
            br#"{"jsonrpc":"2.0","id":11}"#.to_vec(),
            json!(11),
            -32600,
        ),
        (
            "params an array",
            br#"{"jsonrpc":"2.0","id":12,"method":"tools/list","params":[1]}"#.to_vec(),
            json!(12),
            -32602,
        ),
        (
            "tools/call arguments an array",
            br#"{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"conda_info","arguments":[1,2]}}"#
                .to_vec(),
            json!(13),
            -32602,
        ),
        (
            "tools/call without a name",
            br#"{"jsonrpc":"2.0","id":14,"method":"tools/call","params":{}}"#.to_vec(),
            json!(14),
            -32602,
        ),
        (
            "unknown method, 10 KB with a newline",
            json!({"jsonrpc": "2.0", "id": 15, "method": long_method})
                .to_string()
                .into_bytes(),
            json!(15),
            -32601,
        ),
        (
            // A key with a control character is refused before the tool sees it.
            "a property name of 100 KB with a newline",
            json!({"jsonrpc": "2.0", "id": 16, "method": "tools/call",
                   "params": {"name": "conda_info", "arguments": {format!("k\n{}", "p".repeat(100 * 1024)): true}}})
            .to_string()
            .into_bytes(),
            json!(16),
            -32600,
        ),
        (
            "unknown tool, 10 KB name",
            json!({"jsonrpc": "2.0", "id": 17, "method": "tools/call",
                   "params": {"name": "n".repeat(10 * 1024), "arguments": {}}})
            .to_string()
            .into_bytes(),
            json!(17),
            -32602,
        ),
        (
            "a second initialize, with a 10 KB version",
            json!({"jsonrpc": "2.0", "id": 18, "method": "initialize",
                   "params": {"protocolVersion": "v".repeat(10 * 1024), "capabilities": {},
                              "clientInfo": {"name": "x", "version": "1"}}})
            .to_string()
            .into_bytes(),
            json!(18),
            -32600,
        ),
    ];
    for (n, (case, frame, id, code)) in cases.into_iter().enumerate() {
        let answer = exchange(&mut s, &frame);
        assert_error(&answer, id, code, case);
        let text = answer.to_string();
        assert!(
            text.len() < 1024,
            "{case}: the answer echoes too much ({} bytes)",
            text.len()
        );
        for letter in ["m", "p", "n", "v"] {
            assert!(
                !text.contains(&letter.repeat(65)),
                "{case}: more than 64 characters echoed: {text}"
            );
        }
        assert_alive(&mut s, 1000 + n as i64);
    }
    // A batch is answered element by element (an array), notifications excepted.
    let answer = exchange(
        &mut s,
        br#"[{"jsonrpc":"2.0","id":"a","method":"ping"},{"jsonrpc":"2.0","method":"notifications/progress","params":{}},{"jsonrpc":"2.0","id":"b","method":"tools/list"}]"#,
    );
    let answers = answer.as_array().unwrap_or_else(|| panic!("{answer}"));
    assert_eq!(answers.len(), 2, "{answer}");
    assert_error(&answers[0], json!("a"), -32600, "batch");
    assert_error(&answers[1], json!("b"), -32600, "batch");
    assert_alive(&mut s, 2000);
    // Blank lines and malformed notifications get no answer and change nothing.
    s.write_raw(b"\n  \r\n{\"jsonrpc\":\"2.0\",\"method\":\"nope\",\"params\":7}\n");
    assert_alive(&mut s, 2001);
}

#[test]
fn an_overlong_line_is_refused_and_the_connection_keeps_working() {
    let mut s = Session::start(conda(), &[]);
    // Over the limit for the default --stdin-limit-bytes (about 9.3 MB).
    let filler = "a".repeat(12 * 1024 * 1024);
    let frame = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"conda_info","arguments":{{"x":"{filler}"}}}}}}"#
    );
    let answer = exchange(&mut s, frame.as_bytes());
    assert_error(&answer, Value::Null, -32600, "overlong line");
    assert!(answer.to_string().len() < 400);
    assert_alive(&mut s, 2);
    // Also when the overlong line is the last thing before more frames in one write.
    let mut burst = frame.into_bytes();
    burst.extend_from_slice(b"\n{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}\n");
    s.write_raw(&burst);
    let first = s.next(Duration::from_secs(5)).expect("an answer");
    assert_error(&first, Value::Null, -32600, "overlong line in a burst");
    let second = s.next(ANSWER_WITHIN).expect("the ping's answer");
    assert_eq!(second["id"], 3, "{second}");
}

#[test]
fn oversized_commands_are_refused_before_anything_spawns() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.log");
    let log_text = log.to_str().unwrap();
    let mut s = Session::start(
        conda(),
        &["--allow-exec", "--allow-write", "--audit-log", log_text],
    );
    // 24 arguments of 32 KiB (schema-valid) exceed the 512 KiB command cap.
    let mut argv = vec!["info".to_owned()];
    argv.extend((0..24).map(|i| format!("{i}{}", "a".repeat(32 * 1024 - 3))));
    let (code, message) = s.call_error("conda_execute", json!({"argv": argv}));
    assert_eq!(code, -32602, "{message}");
    assert!(message.contains("would exceed"), "{message}");
    // The queue and the connection are fine.
    assert_alive(&mut s, 99);
    let result = s.call("conda_info", json!({}));
    assert_eq!(result["structuredContent"]["exit_code"], 0);
    // Nothing spawned for the refused call: its audit line has no outcome, where the
    // call that ran has one.
    let entries = crate::audit::lines(&log);
    assert_eq!(entries.len(), 2, "{entries:?}");
    assert_eq!(entries[0]["tool"], "conda_execute", "{}", entries[0]);
    assert_eq!(entries[0]["exit_code"], Value::Null, "{}", entries[0]);
    assert_eq!(entries[1]["exit_code"], 0, "{}", entries[1]);
}

#[test]
fn a_request_id_in_flight_is_refused_and_a_cancelled_id_is_free() {
    let mut s = Session::start(conda(), &crate::kit::classify::BEHAVE_WRITE);
    let call = |id: &str, sleep: u64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": "conda_behave", "arguments": {"sleep": sleep}}})
        .to_string()
    };
    s.write_raw(format!("{}\n", call("same", 30)).as_bytes());
    // The duplicate is refused at once, with its id.
    let answer = exchange(&mut s, call("same", 0).as_bytes());
    assert_error(&answer, json!("same"), -32600, "duplicate id");
    // Cancel the first; the id can be used again at once, and the new call is not
    // cancelled or answered by the end of the old one.
    s.write_raw(
        format!(
            "{}\n",
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                   "params": {"requestId": "same", "reason": "test"}})
        )
        .as_bytes(),
    );
    s.write_raw(format!("{}\n", call("same", 1)).as_bytes());
    let answer = s.next(Duration::from_secs(30)).expect("an answer");
    assert_eq!(answer["id"], "same", "{answer}");
    let result = &answer["result"];
    assert_eq!(
        result["structuredContent"]["exit_code"], 0,
        "the second call ran to its end: {answer}"
    );
    assert!(
        s.next(Duration::from_secs(3)).is_none(),
        "one answer for the id"
    );
}

#[test]
fn the_batch_revision_is_not_offered_and_early_frames_do_not_end_the_session() {
    let mut command = support::ccm();
    command.arg("--conda-exe").arg(conda());
    let mut s = Session::spawn(command);
    // Before initialize: garbage, a notification, a response and a ping. rmcp would end
    // the session on the notification or the response; none of them may.
    s.write_raw(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n");
    s.write_raw(b"{\"jsonrpc\":\"2.0\",\"id\":99,\"result\":{}}\n");
    let answer = exchange(&mut s, b"NaN");
    assert_error(&answer, Value::Null, -32700, "NaN before initialize");
    assert_alive(&mut s, 1);
    // A client asking for 2025-03-26 (batches) is offered the newest handshake revision.
    let answer = exchange(
        &mut s,
        json!({"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {
            "protocolVersion": "2025-03-26", "capabilities": {},
            "clientInfo": {"name": "ccm-tests", "version": "1"}}})
        .to_string()
        .as_bytes(),
    );
    assert_eq!(answer["id"], 2, "{answer}");
    assert_eq!(
        answer["result"]["protocolVersion"], "2025-11-25",
        "{answer}"
    );
    s.write_raw(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n");
    // (tools/list waits for discovery: a generous bound.)
    s.write_raw(b"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/list\",\"params\":{}}\n");
    let answer = s.next(Duration::from_secs(60)).expect("tools/list answer");
    assert_eq!(answer["id"], 3, "{answer}");
    assert!(answer["result"]["tools"].is_array(), "{answer}");
}
