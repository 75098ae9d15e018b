//! `--confirm-writes` with the official Python SDK as the client (its elicitation
//! callback): accept runs the planned argv, decline and cancel run nothing, a client
//! without elicitation is refused and is listed no write tools.

use serde_json::Value;

use crate::clients::{run_script, sdk_python};
use crate::kit::classify;
use crate::kit::confirm::{cancel_and_see_withdrawn, next_with};
use crate::support;

/// One SDK session: (what it saw, whether `conda_behave` ran).
fn session(mode: &str, answer: &str, elicit: bool) -> (Value, bool) {
    let python = sdk_python();
    let dir = tempfile::tempdir().unwrap();
    let conda = support::fixture().conda.to_str().unwrap().to_owned();
    let mut args = vec![
        env!("CARGO_BIN_EXE_ccm"),
        conda.as_str(),
        mode,
        answer,
        dir.path().to_str().unwrap(),
    ];
    if !elicit {
        args.push("no");
    }
    let seen = run_script(&python, "sdk_confirm.py", &args, &[]);
    let revision = seen["protocol"].as_str().unwrap_or_default();
    assert_eq!(revision == "2026-07-28", mode == "auto", "{mode}: {seen}");
    let ran = dir.path().join("ran").exists();
    (seen, ran)
}

fn text(seen: &Value, call: &str) -> String {
    seen[call]["text"].as_str().unwrap_or_default().to_owned()
}

/// Handshake revisions: `elicitation/create`; 2026-07-28: the input-required result and
/// the retry with the server's reference (the SDK drives both rounds).
#[test]
#[ignore = "needs CCM_TEST_MCP_PYTHON"]
fn python_sdk_accept_runs_the_planned_argv() {
    for mode in ["legacy", "auto"] {
        accept_runs_the_planned_argv(mode);
    }
}

fn accept_runs_the_planned_argv(mode: &str) {
    let (seen, ran) = session(mode, "accept", true);
    assert!(ran, "{seen}");
    let install = &seen["install"];
    assert_eq!(install["is_error"], false, "{seen}");
    // The fixture's invocation report records the argv that ran: the planned one, without
    // the dry run's options.
    let argv = &install["parsed_json"]["argv"];
    assert_eq!(
        argv,
        &serde_json::json!(["install", "fixture-pkg=1.0", "--name=t1", "--json"]),
        "{seen}"
    );
    let asked: Vec<&str> = seen["asked"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap())
        .collect();
    assert_eq!(asked.len(), 2, "{seen}");
    // The question showed exactly that argv.
    assert!(
        asked[0].contains(
            "\nCommand: conda \"install\" \"fixture-pkg=1.0\" \"--name=t1\" \"--json\"\n"
        ),
        "{seen}"
    );
    // The dry run's plan, bound: the package with its channel URL and hash.
    assert!(
        asked[0].contains(
            "\nInstall (1):\n  fixture-pkg 1.0 0 (https://fixture.invalid/fixture-channel/noarch, md5 "
        ),
        "{seen}"
    );
    assert!(
        asked[0].contains("\nBound: accepting runs exactly this plan"),
        "{seen}"
    );
    assert!(
        asked[1].contains("Command: conda \"behave\" \"--pid-file"),
        "{seen}"
    );
    assert!(asked[1].contains("\nNo package preview: "), "{seen}");
    // Read-only calls are not asked about.
    assert_eq!(seen["info"]["is_error"], false, "{seen}");
}

#[test]
#[ignore = "needs CCM_TEST_MCP_PYTHON"]
fn python_sdk_decline_and_cancel_run_nothing() {
    for (mode, answer) in [
        ("legacy", "decline"),
        ("legacy", "cancel"),
        ("auto", "decline"),
        ("auto", "cancel"),
    ] {
        let (seen, ran) = session(mode, answer, true);
        assert!(!ran, "{mode} {answer}: {seen}");
        for call in ["install", "behave"] {
            assert_eq!(seen[call]["is_error"], true, "{answer}: {seen}");
            assert!(
                text(&seen, call).starts_with("declined_by_user"),
                "{answer}: {seen}"
            );
        }
        assert_eq!(seen["asked"].as_array().unwrap().len(), 2, "{seen}");
    }
}

#[test]
#[ignore = "needs CCM_TEST_MCP_PYTHON"]
fn python_sdk_without_elicitation_is_refused() {
    for mode in ["legacy", "auto"] {
        let (seen, ran) = session(mode, "accept", false);
        assert!(!ran, "{mode}: {seen}");
        for call in ["install", "behave"] {
            assert!(
                text(&seen, call).starts_with("confirmation_unavailable"),
                "{mode}: {seen}"
            );
            assert!(text(&seen, call).contains("--confirm-writes"), "{seen}");
        }
        assert_eq!(seen["info"]["is_error"], false, "{seen}");
        let listed = seen["listed"].as_array().unwrap();
        assert!(listed.iter().any(|n| n == "conda_info"), "{seen}");
        for write in [
            "conda_install",
            "conda_behave",
            "conda_create",
            "conda_remove",
        ] {
            assert!(
                !listed.iter().any(|n| n == write),
                "{mode}: {write} listed: {seen}"
            );
        }
    }
}

/// A session-less (2026-07-28) `tools/call` from a client that declares elicitation.
pub(crate) fn stateless_call(url: &str, id: i64, params: serde_json::Value) -> serde_json::Value {
    let mut params = params;
    params["_meta"] = serde_json::json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
        "io.modelcontextprotocol/clientInfo": {"name": "ccm-confirm-tests", "version": "1"},
    });
    let name = params["name"].as_str().unwrap().to_owned();
    let headers = [
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", name.as_str()),
    ];
    let body = crate::http::request(id, "tools/call", params).to_string();
    crate::http::post_raw(url, None, &headers, body.as_bytes()).response()
}

/// What a session-less client echoes back is untrusted: only the server's reference is
/// accepted, once; a forged one runs nothing, and the retry's own arguments are ignored
/// (the parked plan runs).
#[test]
fn session_less_references_are_single_use_and_unforgeable() {
    let server = crate::http::HttpServer::start(
        &classify::with(
            &classify::BEHAVE_WRITE,
            &["--allow-paths", "/", "--confirm-writes"],
        ),
        &[("CCM_MCP_TOKEN", crate::http::TOKEN)],
    );
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let planned = dir.path().join("planned");
    let other = dir.path().join("other");
    let call = |pid: &std::path::Path| serde_json::json!({"name": "conda_behave", "arguments": {"pid_file": pid.to_str().unwrap()}});
    let first = stateless_call(&server.url, 1, call(&planned));
    let result = &first["result"];
    assert_eq!(result["resultType"], "input_required", "{first}");
    let question = &result["inputRequests"]["confirm"];
    assert_eq!(question["method"], "elicitation/create", "{first}");
    assert!(
        question["params"]["message"]
            .as_str()
            .unwrap()
            .contains("Command: conda \"behave\" \"--pid-file="),
        "{first}"
    );
    let reference = result["requestState"].as_str().unwrap().to_owned();
    assert!(reference.len() >= 64, "{first}");
    assert!(!planned.exists(), "ran before the answer");
    let accept = serde_json::json!({"confirm": {"action": "accept", "content": {}}});
    // A forged reference: refused, nothing runs.
    let mut forged = call(&other);
    forged["requestState"] = serde_json::json!("0".repeat(64));
    forged["inputResponses"] = accept.clone();
    let answer = stateless_call(&server.url, 2, forged);
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert!(!other.exists() && !planned.exists());
    // The server's reference with other arguments: the parked plan runs, not the retry's.
    let mut retry = call(&other);
    retry["requestState"] = serde_json::json!(reference);
    retry["inputResponses"] = accept.clone();
    let answer = stateless_call(&server.url, 3, retry.clone());
    assert_eq!(
        answer["result"]["structuredContent"]["exit_code"], 0,
        "{answer}"
    );
    assert!(planned.exists(), "{answer}");
    assert!(!other.exists(), "{answer}");
    // Used once: the same reference again runs nothing.
    std::fs::remove_file(&planned).unwrap();
    let again = stateless_call(&server.url, 4, retry);
    assert_eq!(again["error"]["code"], -32602, "{again}");
    assert!(!planned.exists() && !other.exists());
    // A declined plan runs nothing.
    let first = stateless_call(&server.url, 5, call(&planned));
    let mut retry = call(&planned);
    retry["requestState"] = first["result"]["requestState"].clone();
    retry["inputResponses"] = serde_json::json!({"confirm": {"action": "decline"}});
    let answer = stateless_call(&server.url, 6, retry);
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    let text = answer["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("declined_by_user"), "{answer}");
    assert!(!planned.exists());
}

/// A stdio handshake session whose client declares elicitation (form mode).
fn eliciting_session(
    conda: &std::path::Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> crate::mcp::Session {
    let mut command = support::ccm();
    command.arg("--conda-exe").arg(conda).args(args);
    command.envs(env.iter().copied());
    let mut session = crate::mcp::Session::spawn(command);
    session.initialize = session.request(
        "initialize",
        serde_json::json!({"protocolVersion": "2025-11-25",
            "capabilities": {"elicitation": {"form": {}}},
            "clientInfo": {"name": "ccm-confirm-tests", "version": "1"}}),
    );
    session.notify("notifications/initialized", serde_json::json!({}));
    session
}

/// A server that asks before `conda_behave` (classified a write) runs, with this
/// `--confirm-timeout`; the directory and the file the call's `pid_file` would create.
fn behave_under_confirmation(
    timeout: &str,
) -> (tempfile::TempDir, std::path::PathBuf, crate::mcp::Session) {
    let dir = tempfile::tempdir().unwrap();
    let ran = dir.path().join("ran");
    let args = classify::with(
        &classify::BEHAVE_WRITE,
        &["--confirm-writes", "--confirm-timeout", timeout],
    );
    let session = eliciting_session(&support::fixture().conda, &args, &[]);
    (dir, ran, session)
}

/// Cancelling the call while the question is open withdraws the question; a question
/// nobody answers within --confirm-timeout runs nothing.
#[test]
fn cancelling_withdraws_and_silence_times_out() {
    let (_dir, ran, mut session) = behave_under_confirmation("2");
    let arguments = serde_json::json!({"pid_file": ran.to_str().unwrap()});
    let call = session.send(
        "tools/call",
        serde_json::json!({"name": "conda_behave", "arguments": arguments}),
    );
    let question = next_with(&mut session, "elicitation/create");
    cancel_and_see_withdrawn(&mut session, call, &question);
    assert!(!ran.exists());
    // Unanswered: refused after the timeout, nothing runs.
    let result = session.call("conda_behave", arguments);
    assert_eq!(result["isError"], true, "{result}");
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("confirmation_timed_out"), "{result}");
    assert!(!ran.exists());
}

/// On a real conda the plan of a `conda_create` from a local channel lists its packages.
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_create_plan_lists_the_packages() {
    let conda = support::real_conda();
    let home = crate::oracle::Throwaway::new("confirm");
    let env = home.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut session = eliciting_session(
        &conda,
        &["--allow-write", "--allow-paths", "/", "--confirm-writes"],
        &env,
    );
    let call = session.send(
        "tools/call",
        serde_json::json!({"name": "conda_create",
            "arguments": {"name": "ccm-confirm-demo", "packages": ["demo"]}}),
    );
    let question = next_with(&mut session, "elicitation/create");
    let message = question["params"]["message"].as_str().unwrap();
    assert!(message.contains("Target environment: "), "{message}");
    assert!(message.contains("ccm-confirm-demo"), "{message}");
    assert!(
        message.contains("Install (1):\n  demo 1.0 0 ("),
        "{message}"
    );
    let reply = serde_json::json!({"jsonrpc": "2.0", "id": question["id"],
        "result": {"action": "decline"}});
    session.write_raw(format!("{reply}\n").as_bytes());
    let answer = session
        .wait(call, std::time::Duration::from_secs(60))
        .unwrap();
    let text = answer["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("declined_by_user"), "{answer}");
}

/// A handshake session whose client declared no elicitation cannot get itself asked (and
/// answer for the person) by claiming the session-less revision and the capability in a
/// request's `_meta`: it is refused, and nothing runs.
#[test]
fn a_request_cannot_claim_what_its_session_did_not_declare() {
    let conda = &support::fixture().conda;
    let dir = tempfile::tempdir().unwrap();
    let planned = dir.path().join("ran");
    let mut session = crate::mcp::Session::start(
        conda,
        &["--allow-write", "--allow-exec", "--confirm-writes"],
    );
    let params = serde_json::json!({
        "name": "conda_behave",
        "arguments": {"pid_file": planned.to_str().unwrap()},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
        },
    });
    let response = session.request("tools/call", params);
    let result = &response["result"];
    assert_ne!(result["resultType"], "input_required", "{response}");
    assert_eq!(result["isError"], true, "{response}");
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("confirmation_unavailable"), "{response}");
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(!planned.exists(), "ran without consent");
}

/// While the question is open, a request that asked for progress gets heartbeats (its
/// client's timeout keeps running otherwise).
#[test]
fn heartbeats_while_the_question_is_open() {
    let (_dir, ran, mut session) = behave_under_confirmation("20");
    let arguments = serde_json::json!({"pid_file": ran.to_str().unwrap()});
    let call = session.send(
        "tools/call",
        serde_json::json!({"name": "conda_behave", "arguments": arguments,
            "_meta": {"progressToken": "confirm-1"}}),
    );
    let question = next_with(&mut session, "elicitation/create");
    let beat = next_with(&mut session, "notifications/progress");
    assert_eq!(beat["params"]["progressToken"], "confirm-1", "{beat}");
    assert_eq!(
        beat["params"]["message"], "Waiting for the user to confirm",
        "{beat}"
    );
    assert!(!ran.exists(), "ran before the answer");
    cancel_and_see_withdrawn(&mut session, call, &question);
    assert!(!ran.exists());
}
