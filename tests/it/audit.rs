//! `--audit-log`: one JSON line per tool call that reached the policy, under concurrent
//! HTTP clients, with secrets redacted; calls naming the log are refused; a log that
//! cannot be opened stops the server.

use std::collections::HashMap;

use serde_json::{Value, json};

use crate::http::{HttpServer, TOKEN, open_session, post, post_stateless, request};
use crate::support;

const CLIENTS: usize = 16;
const CALLS: usize = 4;
const USERINFO_SECRET: &str = "hunter2-userinfo";
const OPTION_SECRET: &str = "s3cr3t-proxy-pw";

pub(crate) fn lines(path: &std::path::Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.is_empty() || text.ends_with('\n'), "a torn last line");
    text.lines()
        .map(|line| {
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not one JSON line ({e}): {line}"))
        })
        .collect()
}

#[test]
fn one_line_per_call_under_concurrent_http_clients() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let log = dir.path().join("audit.jsonl");
    let log_text = log.to_str().unwrap().to_owned();
    let server = HttpServer::start(
        &[
            "--allow-write",
            "--allow-paths",
            "/",
            "--audit-log",
            &log_text,
        ],
        &[("CCM_MCP_TOKEN", TOKEN)],
    );
    let url = server.url.clone();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let url = url.clone();
            std::thread::spawn(move || {
                let session = open_session(&url, TOKEN);
                for call in 0..CALLS {
                    let id = i64::try_from(10 + call).unwrap();
                    let arguments = match call % 2 {
                        0 => json!({"json": true}),
                        _ => json!({
                            "packages": [format!("pkg{client}x{call}")],
                            "channel": [format!("https://user:{USERINFO_SECRET}@example.invalid/c")],
                            "dry_run": true,
                        }),
                    };
                    let name = if call % 2 == 0 { "conda_info" } else { "conda_install" };
                    let answer = post(
                        &url,
                        Some(TOKEN),
                        Some(&session),
                        &request(id, "tools/call", json!({"name": name, "arguments": arguments})),
                    );
                    let result = &answer.response()["result"];
                    assert_eq!(result["structuredContent"]["exit_code"], 0, "{result}");
                }
                // Invalid arguments never reach the policy: no line.
                let invalid = post(
                    &url,
                    Some(TOKEN),
                    Some(&session),
                    &request(99, "tools/call", json!({"name": "conda_info", "arguments": {"json": 3}})),
                );
                assert!(invalid.response().get("error").is_some() || invalid.response()["result"]["isError"] == true);
                session
            })
        })
        .collect();
    let sessions: Vec<String> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    assert_eq!(sessions.len(), CLIENTS);
    let entries = lines(&log);
    assert_eq!(entries.len(), CLIENTS * CALLS, "lost or extra lines");
    let mut per_session: HashMap<String, usize> = HashMap::new();
    for entry in &entries {
        *per_session
            .entry(entry["session"].as_str().unwrap().to_owned())
            .or_default() += 1;
        assert_eq!(entry["verdict"], "allowed", "{entry}");
        assert_eq!(entry["exit_code"], 0, "{entry}");
        assert_eq!(entry["client"]["name"], "ccm-http-tests", "{entry}");
        assert_eq!(entry["confirmation"], "not_required", "{entry}");
        for flag in ["timed_out", "cancelled", "truncated"] {
            assert_eq!(entry[flag], false, "{entry}");
        }
        assert!(entry["duration_ms"].is_u64(), "{entry}");
        assert!(entry["time"].as_str().unwrap().ends_with('Z'), "{entry}");
        let tool = entry["tool"].as_str().unwrap();
        assert_eq!(entry["canonical_tool"], tool, "{entry}");
        let argv: Vec<&str> = entry["argv"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap())
            .collect();
        assert_eq!(argv[0], &tool["conda_".len()..], "{entry}");
        if tool == "conda_install" {
            assert!(
                argv.contains(&"--channel=https://[redacted]@example.invalid/c"),
                "{entry}"
            );
        }
    }
    assert_eq!(per_session.len(), CLIENTS, "{per_session:?}");
    assert!(per_session.values().all(|n| *n == CALLS), "{per_session:?}");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.contains(USERINFO_SECRET));
    assert!(!text.contains(TOKEN));
    drop(server);
}

#[test]
fn refusals_and_secrets_and_the_log_itself() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let log = dir.path().join("audit.jsonl");
    let link = dir.path().join("link-to-log");
    std::os::unix::fs::symlink(&log, &link).unwrap();
    std::fs::write(&log, "").unwrap();
    let server = HttpServer::start(
        &["--allow-paths", "/", "--allow-write"],
        &[
            ("CCM_MCP_TOKEN", TOKEN),
            ("CCM_AUDIT_LOG", log.to_str().unwrap()),
        ],
    );
    let url = server.url.clone();
    let session = open_session(&url, TOKEN);
    let call = |id: i64, name: &str, arguments: Value| {
        post(
            &url,
            Some(TOKEN),
            Some(&session),
            &request(
                id,
                "tools/call",
                json!({"name": name, "arguments": arguments}),
            ),
        )
        .response()
    };
    // A program run without --allow-exec: refused by the policy, logged as refused.
    let refused = call(
        2,
        "conda_run",
        json!({"name": "t1", "executable_call": ["curl", format!("https://u:{USERINFO_SECRET}@proxy")]}),
    );
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    let refused = call(
        3,
        "conda_run",
        json!({"name": "t1", "executable_call": ["curl", "--password", OPTION_SECRET]}),
    );
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    // A dry run names the log through a symlink and through `..`: refused.
    let spelled = format!(
        "{}/../{}/audit.jsonl",
        dir.path().display(),
        dir.path().file_name().unwrap().to_str().unwrap()
    );
    for (id, path) in [(4, link.to_str().unwrap().to_owned()), (5, spelled)] {
        let named = call(id, "conda_install", json!({"file": [path]}));
        assert_eq!(
            named["error"]["message"], "Operation names the audit log (see --audit-log)",
            "{named}"
        );
    }
    // A session-less (2026-07-28) call is logged too.
    let stateless = post_stateless(
        &url,
        6,
        "tools/call",
        json!({"name": "conda_info", "arguments": {"json": true}}),
    );
    assert_eq!(stateless.response()["result"]["isError"], false);
    let entries = lines(&log);
    assert_eq!(entries.len(), 5, "{entries:?}");
    let text = std::fs::read_to_string(&log).unwrap();
    for secret in [USERINFO_SECRET, OPTION_SECRET, TOKEN] {
        assert!(!text.contains(secret), "{secret} in {text}");
    }
    assert_eq!(entries[0]["verdict"], "refused");
    assert_eq!(entries[0]["refusal"], "Operation requires --allow-exec");
    assert_eq!(entries[0]["exit_code"], Value::Null);
    assert_eq!(
        entries[2]["refusal"],
        "Operation names the audit log (see --audit-log)"
    );
    assert_eq!(entries[4]["verdict"], "allowed");
    assert_eq!(entries[4]["client"]["name"], "ccm-http-tests");
    assert_ne!(entries[4]["session"], entries[0]["session"]);
    assert_eq!(entries[0]["session"], entries[1]["session"]);
}

#[test]
fn an_unopenable_log_stops_the_server() {
    let dir = tempfile::tempdir().unwrap();
    for path in [
        dir.path().join("missing-dir/audit.jsonl"),
        dir.path().to_path_buf(),
    ] {
        let output = support::ccm()
            .arg("--conda-exe")
            .arg(&support::fixture().conda)
            .arg("--audit-log")
            .arg(&path)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{path:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("the audit log"), "{stderr}");
        assert!(output.stdout.is_empty());
    }
}

/// Spellings of the log that conda understands and a plain path check would miss: a
/// `file://` URL with a host or percent-escapes, another user's `~user`, and — for a
/// call that writes — the directory that holds the log (`remove --all` of it would delete
/// the log). A read that names the directory is not refused for that.
#[test]
fn other_spellings_of_the_log_and_its_directory() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let dir_path = std::fs::canonicalize(dir.path()).unwrap();
    let log = dir_path.join("audit.jsonl");
    let conda = &support::fixture().conda;
    let mut session = crate::mcp::Session::start(
        conda,
        &["--allow-write", "--audit-log", log.to_str().unwrap()],
    );
    let log_text = log.display().to_string();
    let encoded = log_text.replacen('/', "%2F", 2).replacen("%2F", "/", 1);
    let named = [
        (
            "conda_install",
            json!({"file": [format!("file://127.0.0.1{log_text}")], "dry_run": true}),
        ),
        (
            "conda_install",
            json!({"file": [format!("file://{encoded}")], "dry_run": true}),
        ),
        (
            "conda_install",
            json!({"file": ["~root/audit.jsonl"], "dry_run": true}),
        ),
        (
            "conda_remove",
            json!({"prefix": dir_path.display().to_string(), "all": true}),
        ),
    ];
    for (tool, arguments) in named {
        let (code, message) = session.call_error(tool, arguments.clone());
        assert_eq!(code, -32600, "{tool} {arguments}");
        assert_eq!(
            message, "Operation names the audit log (see --audit-log)",
            "{arguments}"
        );
    }
    let read = session.request(
        "tools/call",
        json!({"name": "conda_list", "arguments": {"prefix": dir_path.display().to_string()}}),
    );
    assert!(
        !read.to_string().contains("names the audit log"),
        "a read naming the log's directory was refused: {read}"
    );
    assert!(log.exists());
}

/// Credentials in URL query strings (and userinfo) never reach the log: a read-only call
/// whose channel carries `?token=…`, a signed URL's signature and an API key.
#[test]
fn query_string_credentials_are_redacted_in_the_log() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let log = dir.path().join("audit.jsonl");
    let mut s = crate::mcp::Session::start(
        &support::fixture().conda,
        &["--audit-log", log.to_str().unwrap()],
    );
    let secrets = ["Q-TOKEN-1", "Q-SIG-2", "Q-KEY-3", "Q-USERINFO-4"];
    let channel = format!(
        "https://bob:{}@h.invalid/c?Access_Token={}&X-Amz-Signature={};x-api-key={}&page=2",
        secrets[3], secrets[0], secrets[1], secrets[2]
    );
    s.call(
        "conda_search",
        json!({"channel": [channel], "match_spec": "numpy"}),
    );
    let entries = lines(&log);
    assert_eq!(entries.len(), 1, "{entries:?}");
    let text = std::fs::read_to_string(&log).unwrap();
    for secret in secrets {
        assert!(!text.contains(secret), "{secret} in {text}");
    }
    let argv: Vec<String> = serde_json::from_value(entries[0]["argv"].clone()).unwrap();
    assert!(
        argv.contains(
            &"--channel=https://[redacted]@h.invalid/c?Access_Token=[redacted]&X-Amz-Signature=[redacted]&page=2"
                .to_owned()
        ),
        "{argv:?}"
    );
}

/// The attack's probes (findings F4) through `conda_execute`: every spelling reaches the
/// log redacted, abbreviated `conda config` setters included — read as the catalog's
/// parser reads them (refused for want of `--allow-write`, logged all the same), and an
/// abbreviated option named like a secret.
#[test]
fn spellings_and_abbreviations_the_attack_found_are_redacted() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let log = dir.path().join("audit.jsonl");
    let mut s = crate::mcp::Session::start(
        &support::fixture().conda,
        &["--allow-exec", "--audit-log", log.to_str().unwrap()],
    );
    let probes: &[&[&str]] = &[
        &[
            "search",
            "-c",
            "https://h.example/chan?pass=HUNTER2a",
            "nopkg",
            "--offline",
        ],
        &[
            "search",
            "-c",
            "https://h.example/chan?pw=HUNTER2b",
            "nopkg",
            "--offline",
        ],
        &[
            "search",
            "-c",
            "https://h.example/chan?p=1&apitok=HUNTER2d",
            "nopkg",
            "--offline",
        ],
        &[
            "search",
            "-c",
            "https://h.example/chan#HUNTER2h",
            "nopkg",
            "--offline",
        ],
        &[
            "search",
            "-c",
            "https://h.example/c?sig%3DHUNTER2B",
            "nopkg",
            "--offline",
        ],
        &[
            "run",
            "-n",
            "base",
            "env",
            "MY_PASS=HUNTER2t",
            "DB_PWD=HUNTER2u",
            "true",
        ],
        &[
            "run",
            "-n",
            "base",
            "curl",
            "-H",
            "Authorization: token HUNTER2v",
        ],
        &[
            "run",
            "-n",
            "base",
            "sh",
            "-c",
            "export GITHUB_TOKEN=HUNTER2x",
        ],
        &[
            "run",
            "-n",
            "base",
            "x",
            "--passphrase",
            "HUNTER2z",
            "--pass",
            "HUNTER2A",
        ],
        &["config", "--se", "remote_password", "HUNTER2C"],
        &["config", "--app", "api_tokens", "HUNTER2D"],
        &["config", "--prep", "secret_list", "HUNTER2E"],
        // `--sec` is the fixture's `tune --secret` only as conda's parser reads it.
        &["tune", "--sec", "HUNTER2F"],
    ];
    for argv in probes {
        let arguments = json!({"argv": argv, "timeout_seconds": 20});
        s.request(
            "tools/call",
            json!({"name": "conda_execute", "arguments": arguments}),
        );
    }
    let entries = lines(&log);
    assert_eq!(entries.len(), probes.len(), "{entries:?}");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.contains("HUNTER2"), "{text}");
    let config: Vec<String> = serde_json::from_value(entries[9]["argv"].clone()).unwrap();
    assert_eq!(config, ["config", "--se", "remote_password", "[redacted]"]);
    assert_eq!(entries[9]["refusal"], "Operation requires --allow-write");
    let tune: Vec<String> = serde_json::from_value(entries[12]["argv"].clone()).unwrap();
    assert_eq!(tune, ["tune", "--sec", "[redacted]"]);
}

/// Credentials in URL paths with no name before them never reach the log (an API key
/// after `/api/conda/`, a Slack webhook's secret); ordinary channels are logged as given.
#[test]
fn credential_shaped_url_path_segments_are_redacted_in_the_log() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let log = dir.path().join("audit.jsonl");
    let mut s = crate::mcp::Session::start(
        &support::fixture().conda,
        &["--audit-log", log.to_str().unwrap()],
    );
    let secrets = [
        "AKCp8k7Q2mZx9TqL4vBn6WsRj3Hd5Fg",
        "aB3dE5gH7jK9mN1pQ2rS4tU6",
    ];
    let channels = [
        format!(
            "https://h.invalid/artifactory/api/conda/{}/conda-forge",
            secrets[0]
        ),
        format!(
            "https://hooks.slack.invalid/services/T0123ABCD/B0456EFGH/{}",
            secrets[1]
        ),
        "https://repo.anaconda.com/pkgs/main".to_owned(),
        "file:///home/u/channel".to_owned(),
        "conda-forge".to_owned(),
    ];
    s.call(
        "conda_search",
        json!({"channel": channels, "match_spec": "numpy", "offline": true}),
    );
    let entries = lines(&log);
    assert_eq!(entries.len(), 1, "{entries:?}");
    let text = std::fs::read_to_string(&log).unwrap();
    for secret in secrets {
        assert!(!text.contains(secret), "{secret} in {text}");
    }
    let argv: Vec<String> = serde_json::from_value(entries[0]["argv"].clone()).unwrap();
    for shown in [
        "--channel=https://h.invalid/artifactory/api/conda/[redacted]/conda-forge",
        "--channel=https://hooks.slack.invalid/services/T0123ABCD/B0456EFGH/[redacted]",
        "--channel=https://repo.anaconda.com/pkgs/main",
        "--channel=file:///home/u/channel",
        "--channel=conda-forge",
    ] {
        assert!(argv.contains(&shown.to_owned()), "{shown} not in {argv:?}");
    }
}
