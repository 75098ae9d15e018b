//! Both result shapes complete alone: VS Code and Codex show a model only a result's
//! `structuredContent`, claude.ai connectors, Gemini CLI and Goose only its text content.
//! For each kind of result — JSON output, plain output, conda's error, a timeout,
//! truncated output — one check reads only the text content and another only
//! `structuredContent`, and each finds what the agent needs: whether it worked, the
//! output, conda's error in its own words, that (and when) it was stopped, that the
//! output was cut.

use std::path::Path;

use serde_json::Value;

use crate::mcp::Session;
use crate::support;

/// Every text block of a result, as a client that shows only text gives it to the model.
fn text_only(result: &Value) -> String {
    result["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|b| b["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The structured content alone.
fn structured_only(result: &Value) -> &Value {
    &result["structuredContent"]
}

/// What the agent needs from one result: whether it failed, and words it must find, in
/// the text content alone and in the structured content alone.
fn check(kind: &str, result: &Value, failed: bool, words: &[&str]) {
    // Text only: `isError`, and every word in some text block.
    let text = text_only(result);
    assert_eq!(result["isError"], failed, "{kind}: {result}");
    for word in words {
        assert!(
            text.contains(word),
            "{kind}: {word:?} not in the text: {text}"
        );
    }
    // Structured only: failure from its fields, and every word in them.
    let sc = structured_only(result);
    let ok = sc["exit_code"] == 0 && sc["timed_out"] == false && sc["cancelled"] == false;
    assert_eq!(!ok, failed, "{kind}: {sc}");
    let seen = sc.to_string();
    for word in words {
        assert!(
            seen.contains(word),
            "{kind}: {word:?} not in structuredContent: {sc}"
        );
    }
}

fn fixture() -> &'static Path {
    &support::fixture().conda
}

#[test]
fn each_result_kind_is_complete_in_text_and_in_structured_content() {
    let mut s = Session::start(
        fixture(),
        &crate::kit::classify::with(
            &crate::kit::classify::BEHAVE_READ,
            &["--output-limit-bytes", "1000"],
        ),
    );
    // JSON output: the document.
    let json = s.call("conda_info", serde_json::json!({"json": true}));
    check("JSON output", &json, false, &["0.99.0"]);
    // Plain output: the printed text.
    let plain = s.call(
        "conda_behave",
        serde_json::json!({"text": "hello from conda"}),
    );
    check("plain output", &plain, false, &["hello from conda"]);
    // conda's error: its name and first line, also in the first text block.
    let error = s.call("conda_info", serde_json::json!({"size": true}));
    check(
        "error",
        &error,
        true,
        &["ArgumentError", "--size can only be used with --envs"],
    );
    let first = error["content"][0]["text"].as_str().unwrap();
    assert_eq!(
        first,
        "conda command exited with 1: ArgumentError: --size can only be used with --envs"
    );
    // A timeout: that it was stopped, and when.
    let timeout = s.call(
        "conda_behave",
        serde_json::json!({"sleep": 30, "ccm_timeout_seconds": 1}),
    );
    check("timeout", &timeout, true, &[]);
    assert_eq!(structured_only(&timeout)["timed_out"], true);
    assert!(structured_only(&timeout)["duration_ms"].as_u64().unwrap() >= 1000);
    let first = timeout["content"][0]["text"].as_str().unwrap();
    assert!(
        first.starts_with("conda command timed out after ")
            && first.contains("ccm_timeout_seconds"),
        "{first}"
    );
    // Truncated output: that it was cut, and the part kept.
    let flood = s.call("conda_behave", serde_json::json!({"stdout_bytes": 100_000}));
    check(
        "truncated",
        &flood,
        false,
        &["0123456789abcdefghijklmnopqrstuvwxyz"],
    );
    let sc = structured_only(&flood);
    assert_eq!(sc["stdout_truncated"], true);
    assert_eq!(sc["stdout"].as_str().unwrap().len(), 1000);
    let first = flood["content"][0]["text"].as_str().unwrap();
    assert!(
        first.contains("stdout truncated to its first 1000 bytes"),
        "{first}"
    );
}

/// On a real conda: a package that does not exist is conda's `PackagesNotFoundInChannelsError`,
/// named in the first text block and found in both shapes.
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_errors_are_complete_in_both_shapes() {
    let conda = support::real_conda();
    let home = tempfile::tempdir().unwrap();
    let home_path = home.path().to_str().unwrap();
    let channel = crate::progress::local_channel(home.path());
    std::fs::create_dir_all(home.path().join("pkgs/cache")).unwrap();
    let mut s = Session::start_with(
        &conda,
        &[],
        &[
            ("HOME", home_path),
            ("CONDA_PKGS_DIRS", &format!("{home_path}/pkgs")),
        ],
    );
    let result = s.call(
        "conda_install",
        serde_json::json!({"packages": ["no-such-package-ccm"], "dry_run": true,
                           "channel": [channel], "override_channels": true}),
    );
    check(
        "real error",
        &result,
        true,
        &["PackagesNotFoundInChannelsError", "no-such-package-ccm"],
    );
    let first = result["content"][0]["text"].as_str().unwrap();
    assert!(
        first.starts_with("conda command exited with 1: PackagesNotFoundInChannelsError: "),
        "{first}"
    );
    // With `json: true` the error comes from conda's JSON document.
    let result = s.call(
        "conda_install",
        serde_json::json!({"packages": ["no-such-package-ccm"], "dry_run": true,
                           "channel": [channel], "override_channels": true, "json": true}),
    );
    check(
        "real JSON error",
        &result,
        true,
        &["PackagesNotFoundInChannelsError", "no-such-package-ccm"],
    );
    let first = result["content"][0]["text"].as_str().unwrap();
    assert!(
        first.contains(": PackagesNotFoundInChannelsError: "),
        "{first}"
    );
}
