//! `--confirm-writes` with the official Python SDK as the client (its elicitation
//! callback): accept runs the planned argv, decline and cancel run nothing, a client
//! without elicitation is refused and is listed no write tools.

use serde_json::Value;

use crate::clients::{run_script, sdk_python};
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
    let ran = dir.path().join("ran").exists();
    (seen, ran)
}

fn text(seen: &Value, call: &str) -> String {
    seen[call]["text"].as_str().unwrap_or_default().to_owned()
}

#[test]
#[ignore = "needs CCM_TEST_MCP_PYTHON"]
fn python_sdk_accept_runs_the_planned_argv() {
    let (seen, ran) = session("legacy", "accept", true);
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
        asked[0].contains("\nCommand: conda install fixture-pkg=1.0 --name=t1 --json\n"),
        "{seen}"
    );
    assert!(asked[0].contains("Dry run"), "{seen}");
    assert!(
        asked[1].contains("Command: conda behave --pid-file"),
        "{seen}"
    );
    assert!(!asked[1].contains("Dry run"), "{seen}");
    // Read-only calls are not asked about.
    assert_eq!(seen["info"]["is_error"], false, "{seen}");
}

#[test]
#[ignore = "needs CCM_TEST_MCP_PYTHON"]
fn python_sdk_decline_and_cancel_run_nothing() {
    for answer in ["decline", "cancel"] {
        let (seen, ran) = session("legacy", answer, true);
        assert!(!ran, "{answer}: {seen}");
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
