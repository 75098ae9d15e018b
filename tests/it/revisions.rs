//! What a tool call answers under each protocol revision ccm offers: invalid arguments
//! are JSON-RPC -32602 errors before 2025-11-25 and `isError` results the model can read
//! from 2025-11-25 on (the session-less 2026-07-28 requests included); unknown tools are
//! -32602 errors in every revision; a JSON document on stdout is carried once.

use serde_json::{Value, json};

use crate::mcp::Session;
use crate::support;

const INVALID: &str = "Invalid arguments at $.verbose: must be at most 16";

/// The `_meta` of a request of the session-less 2026-07-28 lifecycle.
pub fn session_less_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "ccm-tests", "version": "1"},
    })
}

/// The answer to an invalid `conda_info` call, as a revision must give it.
pub fn assert_invalid_answer(answer: &Value, as_result: bool, revision: &str) {
    if as_result {
        let result = &answer["result"];
        assert_eq!(result["isError"], true, "{revision}: {answer}");
        assert_eq!(
            result["content"],
            json!([{"type": "text", "text": INVALID}]),
            "{revision}: {answer}"
        );
        assert_eq!(
            result["_meta"]["conda-cli-mcp/invalid_arguments"],
            json!({"path": "$.verbose", "keyword": "maximum"}),
            "{revision}: {answer}"
        );
        assert_eq!(result.get("structuredContent"), None, "{revision}");
        assert_eq!(answer.get("error"), None, "{revision}");
    } else {
        assert_eq!(
            answer["error"],
            json!({"code": -32602, "message": INVALID,
                   "data": {"path": "$.verbose", "keyword": "maximum"}}),
            "{revision}: {answer}"
        );
    }
}

/// The answer to a call of a tool that does not exist (`conda_nothing`): a protocol error
/// in every revision, naming the closest listed tools.
pub fn assert_unknown_answer(answer: &Value, revision: &str) {
    assert_eq!(answer["error"]["code"], -32602, "{revision}: {answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("Unknown tool; listed tools: conda_"),
        "{revision}: {answer}"
    );
    assert!(!message.contains("did you mean"), "{revision}: {answer}");
    assert!(!message.contains("conda_nothing"), "{revision}: {answer}");
}

/// A `conda_info {json: true}` result: stdout moved to `parsed_json`, in every revision.
pub fn assert_moved(answer: &Value, revision: &str) {
    let result = &answer["result"];
    assert_eq!(result["structuredContent"]["stdout"], "", "{revision}");
    assert_eq!(
        result["structuredContent"]["parsed_json"]["conda_version"], "0.99.0",
        "{revision}"
    );
    assert_eq!(
        result["_meta"]["conda-cli-mcp/stdout"], "moved-to-parsed_json",
        "{revision}: {answer}"
    );
    // The text copy follows the structured content.
    assert_eq!(
        result["content"][1]["text"].as_str().unwrap(),
        ccm::model::catalog::canonical_json(&result["structuredContent"]),
        "{revision}"
    );
}

#[test]
fn invalid_arguments_follow_the_negotiated_revision_over_stdio() {
    let conda = &support::fixture().conda;
    for (revision, as_result) in [
        ("2024-11-05", false),
        ("2025-06-18", false),
        ("2025-11-25", true),
    ] {
        let mut s = Session::spawn({
            let mut command = support::ccm();
            command.arg("--conda-exe").arg(conda);
            command
        });
        let init = s.request(
            "initialize",
            json!({"protocolVersion": revision, "capabilities": {},
                   "clientInfo": {"name": "ccm-tests", "version": "1"}}),
        );
        assert_eq!(init["result"]["protocolVersion"], revision, "{init}");
        s.notify("notifications/initialized", json!({}));
        let call = |s: &mut Session, name: &str, arguments: Value| {
            s.request("tools/call", json!({"name": name, "arguments": arguments}))
        };
        let answer = call(&mut s, "conda_info", json!({"verbose": 17}));
        assert_invalid_answer(&answer, as_result, revision);
        let answer = call(&mut s, "conda_nothing", json!({}));
        assert_unknown_answer(&answer, revision);
        let answer = call(&mut s, "conda_info", json!({"json": true}));
        assert_moved(&answer, revision);
    }
    // Session-less 2026-07-28 requests over stdio (no initialize).
    let mut s = Session::spawn({
        let mut command = support::ccm();
        command.arg("--conda-exe").arg(conda);
        command
    });
    let call = |s: &mut Session, name: &str, arguments: Value| {
        s.request(
            "tools/call",
            json!({"name": name, "arguments": arguments, "_meta": session_less_meta()}),
        )
    };
    let answer = call(&mut s, "conda_info", json!({"verbose": 17}));
    assert_invalid_answer(&answer, true, "2026-07-28");
    let answer = call(&mut s, "conda_nothing", json!({}));
    assert_unknown_answer(&answer, "2026-07-28");
    let answer = call(&mut s, "conda_info", json!({"json": true}));
    assert_moved(&answer, "2026-07-28");
}

/// On a real conda, `conda_info {json: true}` carries its document once; text output
/// stays where it is.
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_json_stdout_is_carried_once() {
    let conda = support::real_conda();
    let mut s = Session::start(&conda, &[]);
    let answer = s.request(
        "tools/call",
        json!({"name": "conda_info", "arguments": {"json": true}}),
    );
    let result = &answer["result"];
    assert_eq!(result["structuredContent"]["stdout"], "", "{answer}");
    assert!(
        result["structuredContent"]["parsed_json"]["conda_version"].is_string(),
        "{answer}"
    );
    assert_eq!(
        result["_meta"]["conda-cli-mcp/stdout"], "moved-to-parsed_json",
        "{answer}"
    );
    // Without `json`, conda prints text: nothing moves.
    let answer = s.request("tools/call", json!({"name": "conda_info", "arguments": {}}));
    assert_ne!(
        answer["result"]["structuredContent"]["stdout"], "",
        "{answer}"
    );
    assert_eq!(answer["result"].get("_meta"), None, "{answer}");
}
