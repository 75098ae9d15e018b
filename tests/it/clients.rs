//! Real MCP clients drive the server: the official Python SDK (`CCM_TEST_MCP_PYTHON` names a
//! Python with `mcp` installed; `.ci/run` creates one and runs these ignored tests).

use std::process::Command;

use serde_json::{Value, json};

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
    run_script(python, "sdk_client.py", args, env)
}

/// Run one of the SDK client scripts in `tests/clients`; the JSON it printed.
pub(crate) fn run_script(python: &str, script: &str, args: &[&str], env: &[(&str, &str)]) -> Value {
    let output = Command::new(python)
        .envs(env.iter().copied())
        .arg(support::repo().join("tests/clients").join(script))
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

/// What every SDK session (stdio or HTTP, either mode) sees of the fixture conda:
/// conda_info runs and its JSON is carried once; invalid arguments are a result the model
/// reads (both modes negotiate 2025-11-25 or later); an unknown tool stays a protocol
/// error.
pub(crate) fn assert_session_answers(seen: &Value, mode: &str) {
    assert_eq!(seen["info_is_error"], false, "{mode}: {seen}");
    assert_eq!(seen["info_exit_code"], 0, "{mode}: {seen}");
    assert_eq!(seen["info_conda_version"], "0.99.0", "{mode}: {seen}");
    // The closest valid properties follow (none is close to `bogus`).
    assert_eq!(seen["invalid"]["is_error"], true, "{mode}: {seen}");
    assert!(
        seen["invalid"]["text"]
            .as_str()
            .unwrap_or_default()
            .starts_with("Invalid arguments at $: unexpected property 'bogus'; valid properties: "),
        "{mode}: {seen}"
    );
    assert_eq!(
        seen["invalid"]["meta"],
        serde_json::json!({"conda-cli-mcp/invalid_arguments": {"path": "$", "keyword": "additionalProperties"}}),
        "{mode}: {seen}"
    );
    assert_eq!(seen["unknown"]["code"], -32602, "{mode}: {seen}");
    assert_eq!(seen["info_stdout"], "", "{mode}: {seen}");
    assert_eq!(
        seen["info_meta"],
        serde_json::json!({"conda-cli-mcp/stdout": "moved-to-parsed_json"}),
        "{mode}: {seen}"
    );
}

#[test]
#[ignore = "needs CCM_TEST_MCP_PYTHON"]
fn python_sdk_over_stdio() {
    let python = sdk_python();
    let ccm = env!("CARGO_BIN_EXE_ccm");
    let conda = support::fixture().conda.to_str().unwrap().to_owned();
    // Both the handshake era (initialize) and the 2026-07-28 per-request era.
    for mode in ["legacy", "auto"] {
        // --no-warm: the session's answers pin a result's whole `_meta`, which on a warm
        // server also says how the call ran (tested in warm_contained).
        let seen = run_sdk(&python, &["stdio", ccm, &conda, mode, "--no-warm"]);
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
        assert_session_answers(&seen, mode);
        // The policy-shaped listing: `conda_run` needs --allow-exec and is not listed;
        // conda_install is listed for dry runs, and a call without dry_run is the policy's
        // refusal (a result with its stable word), which says how to apply for real.
        assert!(!tools.iter().any(|t| t == "conda_run"), "{mode}: {seen}");
        let message = seen["dry_run_only"]["message"].as_str().unwrap_or_default();
        assert!(
            seen["dry_run_only"]["is_error"] == true
                && message.starts_with("needs_allow_write: ")
                && message.contains("dry_run")
                && message.contains("--allow-write in the client's MCP server configuration"),
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
        // Under --tools @core: only @core's tools the policy admits, conda_info callable,
        // and the dry-run-only conda_install still says how to apply for real.
        let core = run_sdk(&python, &["stdio", ccm, &conda, mode, "--tools", "@core"]);
        let mut listed: Vec<&str> = core["tools"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        listed.sort_unstable();
        assert_eq!(listed, crate::toolsets::core_by_default(), "{mode}: {core}");
        assert_eq!(core["info_exit_code"], 0, "{mode}: {core}");
        // A policy refusal: from 2025-11-25 on an isError result with the stable word.
        let message = core["dry_run_only"]["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with("needs_allow_write: Operation requires --allow-write. Here: ")
                && message.ends_with(
                    "The operator sets --allow-write in the client's MCP server configuration."
                ),
            "{mode}: {core}"
        );
    }
}

/// The Python SDK as a client with roots: in a handshake session the working directory
/// of a generated tool is in the first root by default, a relative one resolves there,
/// one outside every root is refused, and a change notification is honoured; in the
/// session-less 2026-07-28 era nobody is asked and the server's directory applies.
#[test]
#[ignore = "needs CCM_TEST_MCP_PYTHON"]
fn python_sdk_roots() {
    let python = sdk_python();
    let ccm = env!("CARGO_BIN_EXE_ccm");
    let conda = support::fixture().conda.to_str().unwrap().to_owned();
    let dirs = root_dirs();
    let paths = roots(&dirs);
    let run = |mode: &str| -> Value {
        let mut args = vec!["stdio", ccm, conda.as_str(), mode];
        args.extend(paths.iter().map(String::as_str));
        run_roots(&python, &args, &[])
    };
    assert_roots_honoured(&run("legacy"), &paths);
    // 2026-07-28: no server-to-client requests, so no roots.
    let [_, root2, outside] = &paths;
    let seen = run("auto");
    assert_eq!(seen["asked"], 0, "{seen}");
    assert_eq!(seen["default"]["ran_in"], outside.as_str(), "{seen}");
    assert_eq!(seen["default"]["named"], Value::Null, "{seen}");
    assert_eq!(seen["second_root"], ran(root2), "{seen}");
    assert_eq!(seen["outside"], ran(outside), "{seen}");
    assert_eq!(seen["missing"]["is_error"], true, "{seen}");
}

/// Three directories for the roots tests: two roots (the first with `sub` and a symbolic
/// link `link` to the third) and one outside both.
pub(crate) fn root_dirs() -> Vec<tempfile::TempDir> {
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let [root1, _, outside] = roots(&dirs);
    std::fs::create_dir(format!("{root1}/sub")).unwrap();
    std::os::unix::fs::symlink(&outside, format!("{root1}/link")).unwrap();
    dirs
}

/// The canonical paths of [`root_dirs`]: root1, root2, outside.
pub(crate) fn roots(dirs: &[tempfile::TempDir]) -> [String; 3] {
    [0, 1, 2].map(|i| {
        std::fs::canonicalize(dirs[i].path())
            .unwrap()
            .to_str()
            .unwrap()
            .to_owned()
    })
}

/// Run `tests/clients/sdk_roots.py`; what it printed.
pub(crate) fn run_roots(python: &str, args: &[&str], env: &[(&str, &str)]) -> Value {
    run_script(python, "sdk_roots.py", args, env)
}

/// A successful call that ran in `dir` and said so.
fn ran(dir: &str) -> Value {
    json!({"is_error": false, "ran_in": dir, "named": dir, "text": "conda command exited with 0"})
}

/// What a handshake session with roots must have seen (`sdk_roots.py`, legacy mode).
pub(crate) fn assert_roots_honoured(seen: &Value, roots: &[String; 3]) {
    let [root1, root2, _] = roots;
    let outside_roots = json!({"code": -32600,
        "message": "The working directory is not an existing directory inside the client's roots"});
    assert_eq!(seen["default"], ran(root1), "{seen}");
    assert_eq!(seen["relative"], ran(&format!("{root1}/sub")), "{seen}");
    assert_eq!(seen["second_root"], ran(root2), "{seen}");
    assert_eq!(seen["outside"], outside_roots, "{seen}");
    assert_eq!(seen["escape"], outside_roots, "{seen}");
    assert_eq!(seen["symlink"], outside_roots, "{seen}");
    // A missing directory gets the answer an outside one gets: no existence oracle.
    assert_eq!(seen["missing"], outside_roots, "{seen}");
    assert_eq!(seen["after_change"], ran(root2), "{seen}");
    assert_eq!(
        seen["asked"], 2,
        "asked once, then once after the change: {seen}"
    );
}
