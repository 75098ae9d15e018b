//! Real MCP clients drive the server: the official Python SDK (`CCM_TEST_MCP_PYTHON` names a
//! Python with `mcp` installed; `.ci/run` creates one and runs these ignored tests).

use std::process::Command;

use serde_json::Value;

use crate::support;

/// The Python with the `mcp` SDK; the tests that need it are ignored by default and fail
/// without it.
pub(crate) fn sdk_python() -> String {
    match std::env::var("CCM_TEST_MCP_PYTHON") {
        Ok(p) if !p.is_empty() => p,
        _ => panic!(
            "this test needs CCM_TEST_MCP_PYTHON: a Python with the `mcp` SDK (.ci/run makes one)"
        ),
    }
}

fn run_sdk(python: &str, args: &[&str]) -> Value {
    run_sdk_with(python, args, &[])
}

/// Run the SDK client with extra environment variables; what it printed.
pub(crate) fn run_sdk_with(python: &str, args: &[&str], env: &[(&str, &str)]) -> Value {
    let output = Command::new(python)
        .envs(env.iter().copied())
        .arg(support::repo().join("tests/clients/sdk_client.py"))
        .args(args)
        .output()
        .expect("run the SDK client");
    assert!(
        output.status.success(),
        "SDK client failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("the SDK client prints JSON")
}

#[test]
#[ignore = "needs CCM_TEST_MCP_PYTHON"]
fn python_sdk_over_stdio() {
    let python = sdk_python();
    let ccm = env!("CARGO_BIN_EXE_ccm");
    let conda = support::fixture().conda.to_str().unwrap().to_owned();
    // Both the handshake era (initialize) and the 2026-07-28 per-request era.
    for mode in ["legacy", "auto"] {
        let seen = run_sdk(&python, &["stdio", ccm, &conda, mode]);
        let tools = seen["tools"].as_array().unwrap();
        assert!(tools.iter().any(|t| t == "conda_info"), "{mode}: {seen}");
        assert_eq!(
            seen["resources"],
            serde_json::json!(["conda://capabilities"])
        );
        assert!(
            seen["capabilities_keys"]
                .as_array()
                .unwrap()
                .iter()
                .any(|k| k == "discovery_fingerprint")
        );
        assert_eq!(seen["info_is_error"], false);
        assert_eq!(seen["info_exit_code"], 0);
        assert_eq!(seen["info_conda_version"], "0.99.0");
        assert_eq!(seen["invalid"]["code"], -32602, "{mode}: {seen}");
        // The policy-shaped listing: `conda_run` needs --allow-exec and is not listed;
        // conda_install is listed for dry runs, and a call without dry_run says how to
        // apply for real.
        assert!(!tools.iter().any(|t| t == "conda_run"), "{mode}: {seen}");
        let message = seen["dry_run_only"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("$")
                && message.contains("dry_run")
                && message.contains("--allow-write"),
            "{mode}: {seen}"
        );
        // With --list-all, the full listing.
        let all = run_sdk(&python, &["stdio", ccm, &conda, mode, "--list-all"]);
        assert!(
            all["tools"]
                .as_array()
                .unwrap()
                .iter()
                .any(|t| t == "conda_run"),
            "{mode}: {all}"
        );
    }
}
