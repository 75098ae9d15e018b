//! Capacity over stdio: the server-wide queue (`no_capacity`) and the per-session limit
//! (`session_busy`) refuse at once with an `isError` result and run nothing; requests that
//! execute nothing are never refused.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::kit::classify;
use crate::mcp::Session;
use crate::support;

/// Send three slow executions at once (each writing its pids to its own file), plus
/// non-executing requests while they run; return the three responses in order.
fn three_slow_calls(s: &mut Session, dir: &Path) -> Vec<Value> {
    s.tools();
    let ids: Vec<i64> = (0..3)
        .map(|i| {
            let pid_file = dir.join(format!("call-{i}"));
            s.send(
                "tools/call",
                json!({"name": "conda_behave",
                       "arguments": {"sleep": 2, "pid_file": pid_file.to_str().unwrap()}}),
            )
        })
        .collect();
    // Listing, reading, pinging and refused calls run nothing and are never refused.
    for (method, params) in [
        ("ping", json!({})),
        ("tools/list", json!({})),
        ("resources/read", json!({"uri": "conda://capabilities"})),
    ] {
        let response = s.request(method, params);
        assert!(response.get("result").is_some(), "{method}: {response}");
    }
    let (code, _) = s.call_error("conda_run", json!({"executable_call": ["x"]}));
    assert_eq!(code, -32600);
    ids.into_iter()
        .map(|id| {
            s.wait(id, Duration::from_secs(60))
                .unwrap_or_else(|| panic!("no response to call {id}"))
        })
        .collect()
}

/// Exactly one of the responses is the refusal `code`, and its call ran nothing; the
/// others ran and succeeded.
fn one_refused(responses: &[Value], dir: &Path, code: &str) {
    let mut refused = 0;
    for (i, response) in responses.iter().enumerate() {
        let result = &response["result"];
        let text = result["content"][0]["text"].as_str().unwrap_or_default();
        if text.starts_with(&format!("{code}: ")) {
            refused += 1;
            assert_eq!(result["isError"], true, "{response}");
            assert!(result.get("structuredContent").is_none());
            assert!(
                !dir.join(format!("call-{i}")).exists(),
                "the refused call ran"
            );
        } else {
            assert_eq!(result["structuredContent"]["exit_code"], 0, "{response}");
            assert!(dir.join(format!("call-{i}")).exists());
        }
    }
    assert_eq!(refused, 1, "{responses:?}");
}

/// A server with `BEHAVE_TUNE_WRITE` and `limit`, sent three slow calls: one is refused
/// with `code`.
fn one_of_three_refused(limit: &[&str], code: &str) -> Session {
    let flags = classify::with(&classify::BEHAVE_TUNE_WRITE, limit);
    let mut s = Session::start(&support::fixture().conda, &flags);
    let dir = tempfile::tempdir().unwrap();
    let responses = three_slow_calls(&mut s, dir.path());
    one_refused(&responses, dir.path(), code);
    s
}

#[test]
fn a_full_queue_answers_no_capacity() {
    // One running and one waiting fill a queue of one; a session may have four.
    one_of_three_refused(&["--max-queue", "1"], "no_capacity");
}

#[test]
fn a_busy_session_answers_session_busy() {
    // The queue has room; the session may have two running or waiting.
    let mut s = one_of_three_refused(&["--max-session-calls", "2"], "session_busy");
    // The places are given back: the session can execute again.
    let again = s.call("conda_info", json!({"json": true}));
    assert_eq!(again["structuredContent"]["exit_code"], 0);
}
