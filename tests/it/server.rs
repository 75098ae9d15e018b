//! The MCP server end to end: the real `ccm` binary over stdio against the fixture conda.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::kit::classify;
use crate::kit::proc::alive;
use crate::mcp::{Session, reported_argv, structured};
use crate::support;

fn conda() -> &'static Path {
    &support::fixture().conda
}

fn pids(file: &Path) -> Vec<i32> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

fn wait_for(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn kill_all(pids: &[i32]) {
    for pid in pids {
        let _ = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status();
    }
}

#[test]
fn initialize_and_listing() {
    let mut s = Session::start(conda(), &[]);
    let init = &s.initialize["result"];
    assert_eq!(init["serverInfo"]["name"], "conda-cli-mcp");
    assert_eq!(init["serverInfo"]["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(
        init["capabilities"],
        json!({"tools": {"listChanged": false}, "resources": {"listChanged": false, "subscribe": false}})
    );
    assert!(
        init["instructions"]
            .as_str()
            .unwrap()
            .contains("--allow-write")
    );
    let tools = s.tools();
    let names: Vec<String> = tools
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    assert!(
        !names.contains(&"conda_execute"),
        "conda_execute needs --allow-exec"
    );
    // The policy-shaped listing: a command no call of which the default policy admits is
    // left out; --list-all lists it.
    assert!(names.contains(&"conda_info") && !names.contains(&"conda_env_config_vars_set"));
    // Listing is stable and equals the toolset built from the same catalog.
    assert_eq!(s.tools(), tools);
    let found = support::fixture_discovery();
    let sandboxed = s.sandboxed();
    let expected = support::listed(
        &found.catalog,
        &found.plugins,
        Default::default(),
        sandboxed,
    );
    assert_eq!(Value::Array(tools.clone()), Value::Array(expected));
    // The capabilities resource, once the snapshot start is confirmed (the document, and
    // so the size resources/list reports, changes when it is).
    crate::startup::settled(&mut s);
    // The document is live (the warm zygote's resident size among its parts), so the
    // listing is compared with a read on each side of it that served the same text.
    let mut attempts = 0;
    let (list, text) = loop {
        let read = |s: &mut Session| {
            let read = s.request("resources/read", json!({"uri": "conda://capabilities"}));
            read["result"]["contents"][0]["text"]
                .as_str()
                .unwrap()
                .to_owned()
        };
        let before = read(&mut s);
        let list = s.request("resources/list", json!({}));
        if read(&mut s) == before {
            break (list, before);
        }
        attempts += 1;
        assert!(attempts < 50, "the capabilities document never held still");
        std::thread::sleep(Duration::from_millis(100));
    };
    let resources = list["result"]["resources"].as_array().unwrap();
    assert_eq!(resources.len(), 1);
    let r = &resources[0];
    assert_eq!(
        (
            r["uri"].as_str(),
            r["name"].as_str(),
            r["mimeType"].as_str()
        ),
        (
            Some("conda://capabilities"),
            Some("conda_capabilities"),
            Some("application/json")
        )
    );
    assert_eq!(r["size"].as_u64(), Some(text.len() as u64));
    let caps: Value = serde_json::from_str(&text).unwrap();
    for key in [
        "catalog",
        "conda_version",
        "discovery_fingerprint",
        "generated_tools",
        "plugins",
        "target_executable",
    ] {
        assert!(caps.get(key).is_some(), "{key}");
    }
    // docs/compatibility.md lists every key of the document, and no other.
    let compatibility = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/compatibility.md"
    ))
    .unwrap();
    let section = compatibility
        .split("### The `conda://capabilities` document")
        .nth(1)
        .expect("docs/compatibility.md has the capabilities section");
    let section = section.split("\n## ").next().unwrap();
    let mut documented: Vec<&str> = section
        .lines()
        .filter_map(|line| line.strip_prefix("| `")?.split('`').next())
        .collect();
    documented.sort_unstable();
    let mut served: Vec<&str> = caps
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    served.sort_unstable();
    assert_eq!(served, documented);
    assert_eq!(caps["target_executable"], json!(conda()));
    assert_eq!(caps["discovery_fingerprint"], json!(found.fingerprint()));
    assert_eq!(caps["conda_version"], "0.99.0");
    // The capabilities keep the whole catalog, listed or not.
    let all = support::toolset(&found.catalog, &found.plugins, false).generated_names();
    assert_eq!(caps["generated_tools"], json!(all));
    assert_eq!(caps["restart"]["required"], false);
    assert!(
        !text.contains("PATH=") && !text.contains("\"env\":"),
        "no environment in capabilities"
    );
    // Unknown resource, unknown method.
    let unknown = s.request("resources/read", json!({"uri": "conda://nope"}));
    assert_eq!(
        unknown["error"],
        json!({"code": -32602, "message": "Unknown resource"})
    );
    let templates = s.request("prompts/list", json!({}));
    assert_eq!(templates["error"]["code"], -32601);
    assert_eq!(s.request("ping", json!({}))["result"], json!({}));
}

#[test]
fn generated_call_result_shape() {
    // --no-warm: the result's whole `_meta` is pinned; a warm server's also says how the
    // call ran (tested in warm_contained).
    let mut s = Session::start(conda(), &["--no-warm"]);
    // `verbose` is the per-command form; the root's is `verbose_2`.
    let result = s.call("conda_list", json!({"json": true, "verbose": 2}));
    assert_eq!(
        reported_argv(&result),
        ["list", "--json", "--verbose", "--verbose"]
    );
    let content = result["content"].as_array().unwrap();
    assert_eq!(content.len(), 2);
    assert_eq!(content[0]["text"], "conda command exited with 0");
    let sc = structured(&result);
    assert_eq!(
        content[1]["text"].as_str().unwrap(),
        ccm::model::catalog::canonical_json(sc)
    );
    let keys: Vec<&String> = sc.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "cancelled",
            "duration_ms",
            "exit_code",
            "parsed_json",
            "restart_required",
            "stderr",
            "stderr_truncated",
            "stdout",
            "stdout_truncated",
            "timed_out"
        ]
    );
    assert_eq!(sc["exit_code"], 0);
    assert_eq!(sc["cancelled"], false);
    assert_eq!(sc["timed_out"], false);
    // The JSON document is carried once: in parsed_json, with stdout empty and a marker.
    assert_eq!(sc["stdout"], "", "{result}");
    assert!(sc["parsed_json"]["argv"].is_array(), "{result}");
    assert_eq!(
        result["_meta"],
        json!({"conda-cli-mcp/stdout": "moved-to-parsed_json"})
    );
    assert_ne!(result["isError"], true);
    // Read-only calls need no flag; mutations are refused before anything runs: the
    // policy's refusal says what the listed form of a dry-run-only tool offers (a named
    // environment only where the read-only sandbox is active) and where the flag is set.
    let (code, message) = s.call_error("conda_install", json!({"packages": ["x"]}));
    let not_offered = if s.sandboxed() {
        "revision, file"
    } else {
        "revision, name, prefix, file"
    };
    assert_eq!(
        (code, message),
        (
            -32600,
            support::refused(
                &format!(
                    "Operation requires --allow-write. Here: only dry runs (dry_run: true); \
                     package specs must be plain match specs (no files or URLs); not offered: \
                     {not_offered}. Anything else needs --allow-write."
                ),
                "--allow-write"
            )
        )
    );
    let dry = s.call("conda_install", json!({"packages": ["x"], "dry_run": true}));
    assert_eq!(reported_argv(&dry), ["install", "x", "--dry-run"]);
    let (code, message) = s.call_error("conda_run", json!({"executable_call": ["true"]}));
    assert_eq!(
        (code, message),
        (
            -32600,
            support::refused("Operation requires --allow-exec", "--allow-exec")
        )
    );
    let (code, message) = s.call_error("conda_passthru", json!({"args": ["x"]}));
    assert_eq!(
        (code, message),
        (
            -32600,
            support::refused(
                "Operation requires --allow-write and --allow-exec",
                "--allow-write and --allow-exec"
            )
        )
    );
    // Unknown and unlisted tools look alike.
    for tool in ["conda_nope", "conda_execute", "conda_cli_command"] {
        support::assert_unknown_tool(s.call_error(tool, json!({})), tool, &[]);
    }
    // Schema errors name path and keyword, never the value.
    let (code, message) = s.call_error("conda_list", json!({"regex": "-secret-value"}));
    assert_eq!(code, -32602);
    assert!(
        message.starts_with("Invalid arguments at $.regex") && !message.contains("secret"),
        "{message}"
    );
    let (code, message) = s.call_error("conda_info", json!({"verbose": 100000000}));
    assert_eq!(
        (code, message.as_str()),
        (-32602, "Invalid arguments at $.verbose: must be at most 16")
    );
    let (code, message) = s.call_error(
        "conda_tune",
        json!({"target": "a\u{0}b", "pair": ["a", "b"]}),
    );
    assert_eq!(
        (code, message.as_str()),
        (
            -32602,
            "Invalid arguments at $.target: NUL characters are not allowed"
        )
    );
    // The server keeps serving after all that.
    assert_eq!(s.request("ping", json!({}))["result"], json!({}));
}

#[test]
fn exit_codes_output_limits_and_json_parsing() {
    let mut s = Session::start(
        conda(),
        &classify::with(
            &classify::BEHAVE_TUNE_WRITE,
            // --no-warm: the result's whole `_meta` is pinned (see above).
            &["--output-limit-bytes", "1000", "--no-warm"],
        ),
    );
    // Integers sent as 2.0 compile to 2.
    let tune = s.call(
        "conda_tune",
        json!({"target": "t", "pair": ["a", "b"], "level": 2.0}),
    );
    assert_eq!(
        reported_argv(&tune),
        ["tune", "a", "b", "--level=2", "--target=t"]
    );
    let failed = s.call("conda_behave", json!({"json_doc": true, "exit_code": 3}));
    assert_eq!(failed["isError"], true);
    assert_eq!(failed["content"][0]["text"], "conda command exited with 3");
    assert_eq!(
        structured(&failed)["parsed_json"],
        json!({"ok": true, "n": 1}),
        "JSON is parsed also for failures"
    );
    let flood = s.call(
        "conda_behave",
        json!({"stdout_bytes": 5_000_000, "stderr_bytes": 10}),
    );
    let sc = structured(&flood);
    assert_eq!(sc["stdout"].as_str().unwrap().len(), 1000);
    assert_eq!(
        (
            sc["stdout_truncated"].as_bool(),
            sc["stderr_truncated"].as_bool()
        ),
        (Some(true), Some(false))
    );
    assert_eq!(sc["parsed_json"], Value::Null);
    // Truncated stdout is not moved: it stays where it is, with no marker.
    assert_eq!(flood.get("_meta"), None, "{flood}");
    for flag in ["nonfinite", "overflow"] {
        let r = s.call("conda_behave", json!({flag: true}));
        assert_eq!(structured(&r)["parsed_json"], Value::Null, "{flag}");
        assert_ne!(r["isError"], true, "{flag}: conda succeeded");
        // stdout that does not parse stays too.
        assert_ne!(structured(&r)["stdout"], "", "{flag}");
        assert_eq!(r.get("_meta"), None, "{flag}");
    }
    let text = s.call("conda_behave", json!({"text": "42"}));
    assert_eq!(structured(&text)["parsed_json"], 42);
    assert_eq!(structured(&text)["stdout"], "");
    assert_eq!(
        text["_meta"]["conda-cli-mcp/stdout"],
        "moved-to-parsed_json"
    );
}

#[test]
fn output_flood_keeps_memory_bounded() {
    let mut s = Session::start(conda(), &classify::BEHAVE_TUNE_WRITE);
    s.call("conda_info", json!({}));
    let before = s.peak_rss_kb();
    // 200 MB on each stream, 1 MiB retained of each.
    let flood = s.call(
        "conda_behave",
        json!({"stdout_bytes": 200_000_000, "stderr_bytes": 200_000_000}),
    );
    assert_eq!(structured(&flood)["stdout_truncated"], true);
    let after = s.peak_rss_kb();
    assert!(
        after < before + 64 * 1024,
        "peak RSS grew from {before} kB to {after} kB"
    );
}

#[test]
fn timeouts_are_hard_even_with_a_detached_grandchild() {
    let mut s = Session::start(
        conda(),
        &classify::with(&classify::BEHAVE_TUNE_WRITE, &["--timeout", "2"]),
    );
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pids");
    let started = Instant::now();
    let result = s.call(
        "conda_behave",
        json!({"sleep": 60, "children": 2, "detached_grandchild": true, "child_sleep": 60, "ignore_term": true,
               "pid_file": pid_file.to_str().unwrap()}),
    );
    let elapsed = started.elapsed();
    let pids = pids(&pid_file);
    assert_eq!(pids.len(), 4, "self, two children, grandchild");
    let grandchild = pids[3];
    // It escaped the process group on purpose; the execution's sweep still ends it.
    let deadline = Instant::now() + Duration::from_secs(2);
    while alive(grandchild) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let escaped = alive(grandchild);
    kill_all(&[grandchild]);
    assert!(!escaped, "the detached grandchild {grandchild} survived");
    assert!(
        elapsed < Duration::from_secs(10),
        "took {elapsed:?} for a 2 s timeout"
    );
    let sc = structured(&result);
    assert_eq!(
        (sc["timed_out"].as_bool(), sc["exit_code"].is_null()),
        (Some(true), true)
    );
    assert_eq!(result["isError"], true);
    let first = result["content"][0]["text"].as_str().unwrap();
    assert!(
        first.starts_with("conda command timed out after ") && first.contains("--timeout"),
        "{first}"
    );
    for pid in &pids[..3] {
        assert!(!alive(*pid), "process {pid} of the group survived");
    }
    // The queue is free again.
    let next = s.call("conda_info", json!({}));
    assert_eq!(structured(&next)["exit_code"], 0);
}

#[test]
fn cancellation_kills_the_tree_and_sends_no_result() {
    let mut s = Session::start(conda(), &classify::BEHAVE_TUNE_WRITE);
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pids");
    let id = s.send(
        "tools/call",
        json!({"name": "conda_behave", "arguments": {"sleep": 60, "children": 2, "child_sleep": 60, "pid_file": pid_file.to_str().unwrap()}}),
    );
    wait_for("the child processes", Duration::from_secs(20), || {
        pids(&pid_file).len() == 3
    });
    let pids = pids(&pid_file);
    s.notify(
        "notifications/cancelled",
        json!({"requestId": id, "reason": "test"}),
    );
    wait_for("the tree to die", Duration::from_secs(10), || {
        pids.iter().all(|p| !alive(*p))
    });
    assert!(
        s.wait(id, Duration::from_secs(2)).is_none(),
        "a cancelled request gets no response"
    );
    assert_eq!(structured(&s.call("conda_info", json!({})))["exit_code"], 0);
}

#[test]
fn non_executing_requests_are_not_held_up() {
    let mut s = Session::start(conda(), &classify::BEHAVE_TUNE_WRITE);
    s.tools();
    let started = Instant::now();
    let slow = s.send(
        "tools/call",
        json!({"name": "conda_behave", "arguments": {"sleep": 3}}),
    );
    let queued = s.send(
        "tools/call",
        json!({"name": "conda_behave", "arguments": {"sleep": 1}}),
    );
    std::thread::sleep(Duration::from_millis(300));
    for (method, params) in [
        ("ping", json!({})),
        ("tools/list", json!({})),
        ("resources/read", json!({"uri": "conda://capabilities"})),
    ] {
        let id = s.send(method, params);
        let response = s
            .wait(id, Duration::from_secs(2))
            .unwrap_or_else(|| panic!("{method} waited"));
        assert!(response.get("result").is_some(), "{method}");
    }
    // Refused calls do not queue either.
    let refused = s.send(
        "tools/call",
        json!({"name": "conda_run", "arguments": {"executable_call": ["x"]}}),
    );
    assert!(
        s.wait(refused, Duration::from_secs(2))
            .unwrap()
            .get("error")
            .is_some()
    );
    assert!(started.elapsed() < Duration::from_secs(3));
    // Executions run one after the other, in order; durations exclude the wait.
    let first = s.wait(slow, Duration::from_secs(30)).unwrap();
    let second = s.wait(queued, Duration::from_secs(30)).unwrap();
    let total = started.elapsed();
    assert!(
        total >= Duration::from_secs(4),
        "{total:?}: the calls overlapped"
    );
    let d2 = second["result"]["structuredContent"]["duration_ms"]
        .as_u64()
        .unwrap();
    assert!(d2 < 2500, "duration {d2} ms includes queue time");
    assert!(
        first["result"]["structuredContent"]["duration_ms"]
            .as_u64()
            .unwrap()
            >= 3000
    );
}

#[test]
fn raw_execution() {
    let mut s = Session::start(conda(), &["--allow-exec", "--stdin-limit-bytes", "10"]);
    let tools = s.tools();
    assert_eq!(tools[0]["name"], "conda_execute");
    let echoed = s.call("conda_execute", json!({"argv": ["info", "--json"]}));
    assert_eq!(reported_argv_or_info(&echoed), "info");
    // Raw mutations still need --allow-write.
    let (code, message) = s.call_error("conda_execute", json!({"argv": ["install", "x"]}));
    assert_eq!(
        (code, message),
        (
            -32600,
            support::refused("Operation requires --allow-write", "--allow-write")
        )
    );
    let (code, message) = s.call_error("conda_execute", json!({"argv": ["--version"]}));
    assert_eq!(
        (code, message),
        (
            -32600,
            support::refused("Operation requires --allow-write", "--allow-write")
        )
    );
    for bad in [
        json!({"argv": ["info"], "cwd": "/nonexistent/dir"}),
        json!({"argv": ["info"], "stdin": "more than ten bytes"}),
    ] {
        assert_eq!(
            s.call_error("conda_execute", bad),
            (-32602, "Invalid execution options".to_owned())
        );
    }
    let (code, message) = s.call_error(
        "conda_execute",
        json!({"argv": ["info"], "timeout_seconds": 0}),
    );
    assert_eq!(code, -32602);
    assert!(
        message.starts_with("Invalid arguments at $.timeout_seconds"),
        "{message}"
    );
    let (_, message) = s.call_error("conda_execute", json!({"argv": ["info"], "extra": 1}));
    assert!(message.contains("unexpected property 'extra'"));
    // conda run with --allow-exec only.
    let run = s.call("conda_run", json!({"executable_call": ["echo", "hi"]}));
    assert_eq!(structured(&run)["stdout"].as_str().unwrap().trim(), "hi");
}

fn reported_argv_or_info(result: &Value) -> &str {
    // `info --json` prints conda's info document, not the argv report.
    structured(result)["parsed_json"]["conda_version"]
        .as_str()
        .map(|_| "info")
        .unwrap_or("")
}

#[test]
fn raw_execution_with_stdin_and_cwd() {
    let mut s = Session::start(conda(), &["--allow-exec", "--allow-write"]);
    let dir = tempfile::tempdir().unwrap();
    let r = s.call(
        "conda_execute",
        json!({"argv": ["behave", "--stdin-echo"], "stdin": "hello"}),
    );
    assert_eq!(structured(&r)["stdout"], "hello");
    let r = s.call(
        "conda_execute",
        json!({"argv": ["behave", "--cwd"], "cwd": dir.path().to_str().unwrap()}),
    );
    let cwd = std::fs::canonicalize(dir.path()).unwrap();
    assert_eq!(
        structured(&r)["stdout"].as_str().unwrap().trim(),
        cwd.to_str().unwrap()
    );
    let started = Instant::now();
    let r = s.call(
        "conda_execute",
        json!({"argv": ["behave", "--sleep", "30"], "timeout_seconds": 0.5}),
    );
    assert_eq!(structured(&r)["timed_out"], true);
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn restart_required_after_a_plugin_change() {
    let fixture = support::build_fixture(&[]);
    let mut s = Session::start(&fixture.conda, &["--allow-write", "--allow-exec"]);
    let tools_before = s.tools();
    let caps_before = s.capabilities();
    // Read-only and dry-run calls never look.
    let r = s.call(
        "conda_install",
        json!({"packages": ["fixture-plugin-extra"], "dry_run": true}),
    );
    assert_eq!(structured(&r)["restart_required"], false);
    // A failed mutating call that changed the plugins does not flip the flag.
    let r = s.call(
        "conda_execute",
        json!({"argv": ["behave", "--add-plugin", "extra", "--exit-code", "1"]}),
    );
    assert_eq!(structured(&r)["restart_required"], false);
    let _ = s.call(
        "conda_execute",
        json!({"argv": ["remove", "fixture-plugin-extra"]}),
    );
    // A successful mutating call that leaves the plugins alone does not either.
    let r = s.call("conda_install", json!({"packages": ["numpy"]}));
    assert_eq!(structured(&r)["restart_required"], false);
    // Installing a plugin does.
    let r = s.call(
        "conda_install",
        json!({"packages": ["fixture-plugin-extra"]}),
    );
    assert_eq!(structured(&r)["restart_required"], true);
    assert_eq!(
        r["content"][0]["text"],
        "conda command exited with 0. Restart the MCP server to refresh conda tools"
    );
    // Sticky, also on read-only results; the tool list and catalog stay as they were.
    let r = s.call("conda_info", json!({}));
    assert_eq!(structured(&r)["restart_required"], true);
    assert_eq!(s.tools(), tools_before);
    let caps = s.capabilities();
    assert_eq!(caps["catalog"], caps_before["catalog"]);
    assert_eq!(
        caps["discovery_fingerprint"],
        caps_before["discovery_fingerprint"]
    );
    assert_eq!(caps["restart"]["required"], true);
    assert!(
        caps["restart"]["reason"]
            .as_str()
            .unwrap()
            .contains("plugin")
    );
    assert_ne!(
        caps["restart"]["current_fingerprint"],
        caps["discovery_fingerprint"]
    );
}

/// A target whose discovery finds no parser at all is not served with an empty tool
/// list: the server stops with status 2 and says why on stderr, even while the client
/// keeps its end open.
#[test]
fn discovery_failure_stops_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("conda");
    std::fs::write(&fake, "#!/bin/sh\nexit 9\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut command = support::ccm();
    command.arg("--conda-exe").arg(&fake);
    let mut s = Session::spawn(command);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let status = loop {
        if let Some(status) = s.try_wait() {
            break status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the server kept running"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(2));
    // The stderr reader may still be draining the pipe.
    let err = loop {
        let err = s.stderr.lock().unwrap().clone();
        if err.ends_with('\n') || std::time::Instant::now() > deadline {
            break err;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert_eq!(
        err,
        format!(
            "ccm: error: {} is not a working conda (conda info exited with status 9). Point \
             --conda-exe (or CONDA_EXE) at an installed conda's executable (<prefix>/bin/conda; \
             `conda info` must run there)\n",
            fake.display()
        )
    );
}

#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_end_to_end() {
    let conda = support::real_conda();
    let mut s = Session::start(&conda, &[]);
    let tools = s.tools();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    eprintln!("real conda: {} tools listed", names.len());
    for expected in [
        "conda_info",
        "conda_list",
        "conda_env_list",
        "conda_install",
    ] {
        assert!(names.contains(&expected), "{expected}");
    }
    // `conda run` needs --allow-exec: the default policy admits no call of it.
    assert!(!names.contains(&"conda_run"), "{names:?}");
    let info = s.call("conda_info", json!({"json": true}));
    assert_eq!(structured(&info)["exit_code"], 0);
    assert!(
        structured(&info)["parsed_json"]["conda_version"]
            .as_str()
            .unwrap()
            .starts_with("26.")
    );
    let envs = s.call("conda_env_list", json!({"json": true}));
    assert!(structured(&envs)["parsed_json"]["envs"].is_array());
    let config = s.call(
        "conda_config",
        json!({"show": ["channels", "solver"], "json": true}),
    );
    assert_eq!(structured(&config)["exit_code"], 0);
    let dry = s.call(
        "conda_create",
        json!({"name": "ccm-dry", "dry_run": true, "offline": true, "json": true}),
    );
    assert_eq!(structured(&dry)["parsed_json"]["dry_run"], true, "{dry}");
    // Listed in its dry-run form: anything else is the policy's refusal, which says what
    // the form offers and where the operator sets the flag.
    let (code, message) = s.call_error(
        "conda_create",
        json!({"name": "ccm-dry", "offline": true, "yes": true}),
    );
    assert_eq!(code, -32600);
    assert!(
        message.ends_with(
            "Anything else needs --allow-write. The operator sets --allow-write in the \
             client's MCP server configuration."
        ),
        "{message}"
    );
    let caps = s.capabilities();
    // Every generated tool is listed, or folded into another, left out with a reason or
    // withheld by the policy (some are several of these).
    let toolset = &caps["toolset"];
    let mut unlisted: std::collections::BTreeSet<&str> = toolset["folded"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    for entry in toolset["left_out"].as_array().unwrap() {
        unlisted.insert(entry["tool"].as_str().unwrap());
    }
    for name in toolset["withheld"].as_array().unwrap() {
        unlisted.insert(name.as_str().unwrap());
    }
    assert_eq!(
        caps["generated_tools"].as_array().unwrap().len(),
        names.iter().filter(|n| **n != "conda_cli_command").count() + unlisted.len(),
        "{toolset}"
    );
    assert!(unlisted.contains("conda_run"), "{toolset}");
}

#[test]
fn completion_metadata() {
    let fixture = support::build_fixture(&["--with-plugin", "completion"]);
    let cache = tempfile::tempdir().unwrap();
    let cache_dir = cache.path().to_str().unwrap();
    let mut s = Session::start_with(
        &fixture.conda,
        &[],
        &[("CONDA_COMPLETION_CACHE_DIR", cache_dir)],
    );
    let tools = s.tools();
    assert_eq!(tools[0]["name"], "conda_cli_command");
    assert_eq!(
        tools[0]["annotations"],
        json!({"readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false})
    );
    let r = s.call(
        "conda_cli_command",
        json!({"command_path": ["env", "list"]}),
    );
    assert_ne!(r["isError"], true);
    let sc = structured(&r);
    assert_eq!(sc["availability"], "not_generated");
    assert_eq!(
        sc["hint"],
        "Run 'conda completion generate' in the target environment."
    );
    assert_eq!(r["content"].as_array().unwrap().len(), 1);
    assert_eq!(
        r["content"][0]["text"].as_str().unwrap(),
        ccm::model::catalog::canonical_json(sc)
    );
    let (code, message) = s.call_error("conda_cli_command", json!({"command_path": ["-x"]}));
    assert_eq!(code, -32602);
    assert!(
        message.starts_with("Invalid arguments at $.command_path[0]"),
        "{message}"
    );

    let generate = std::process::Command::new(&fixture.conda)
        .args(["completion", "generate"])
        .env("CONDA_COMPLETION_CACHE_DIR", cache_dir)
        .output()
        .unwrap();
    assert!(generate.status.success());
    let r = s.call(
        "conda_cli_command",
        json!({"command_path": ["env", "list"]}),
    );
    let sc = structured(&r);
    assert_eq!(sc["availability"], "available", "{r}");
    assert_eq!(sc["resolved_command_path"], json!(["env", "list"]));
    assert_eq!(sc["alias_target"], Value::Null);
    assert!(
        sc["command"]["options"]
            .as_array()
            .unwrap()
            .iter()
            .any(|o| o["name"] == "--json")
    );
    assert_eq!(sc["manifest"]["stale"], false);
    assert_eq!(sc["manifest"]["conda_completion_version"], "0.3.2");
    assert_eq!(sc["hint"], Value::Null);
    let root = s.call("conda_cli_command", json!({}));
    assert!(
        structured(&root)["command"]["subcommands"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["name"] == "install")
    );
    let alias = s.call(
        "conda_cli_command",
        json!({"command_path": ["cenv", "list"]}),
    );
    assert_eq!(structured(&alias)["alias_target"], json!(["env"]));
    assert_eq!(
        structured(&alias)["resolved_command_path"],
        json!(["env", "list"])
    );
    assert_eq!(
        s.call_error("conda_cli_command", json!({"command_path": ["nonexist"]})),
        (-32602, "Unknown conda command path".to_owned())
    );
    // A changed manifest is read again.
    let manifest = cache.path().join("completion.msgpack");
    let mut doc: Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest).unwrap()).unwrap();
    doc["commands"]["env"]["subcommands"]["list"]["summary"] = json!("Changed summary.");
    std::fs::write(&manifest, serde_json::to_string(&doc).unwrap()).unwrap();
    let r = s.call(
        "conda_cli_command",
        json!({"command_path": ["env", "list"]}),
    );
    assert_eq!(structured(&r)["command"]["summary"], "Changed summary.");
    // A new plugin entry point makes the manifest stale.
    let install = std::process::Command::new(&fixture.conda)
        .args(["install", "fixture-plugin-extra"])
        .output()
        .unwrap();
    assert!(install.status.success());
    let r = s.call(
        "conda_cli_command",
        json!({"command_path": ["env", "list"]}),
    );
    assert_eq!(structured(&r)["manifest"]["stale"], true);
}

#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_completion_metadata() {
    let conda = support::real_conda();
    let has_completion = support::real_discovery().plugins.iter().any(|p| {
        ccm::model::catalog::normalize_distribution(&p.distribution) == "conda-completion"
    });
    let mut s = Session::start(&conda, &[]);
    let listed = s.tools().iter().any(|t| t["name"] == "conda_cli_command");
    // The tool exists exactly when the target has conda-completion (stock conda: absent).
    assert_eq!(listed, has_completion, "conda_cli_command listed: {listed}");
    if !has_completion {
        return;
    }
    let r = s.call(
        "conda_cli_command",
        json!({"command_path": ["env", "list"]}),
    );
    let sc = structured(&r);
    assert!(
        ["available", "not_generated"].contains(&sc["availability"].as_str().unwrap()),
        "{r}"
    );
    if sc["availability"] == "available" {
        assert_eq!(sc["resolved_command_path"], json!(["env", "list"]));
        assert!(sc["manifest"]["stale"].is_boolean());
        assert_eq!(
            s.call_error(
                "conda_cli_command",
                json!({"command_path": ["definitely-not-a-command"]})
            ),
            (-32602, "Unknown conda command path".to_owned())
        );
    }
}

/// conda's default-no prompt (removing a whole environment) reads end of input as "no",
/// prints `CondaSystemExit: Exiting.` and exits 0: an error result with a stable code and
/// the way out, not a success.
#[test]
fn a_declined_confirmation_prompt_is_an_error() {
    let fixture = support::build_fixture(&[]);
    let mut s = Session::start(&fixture.conda, &["--allow-write", "--allow-exec"]);
    let r = s.call("conda_remove", json!({"all": true, "name": "t1"}));
    assert_eq!(r["isError"], true, "{r}");
    let text = r["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("not_confirmed: "), "{text}");
    assert!(text.contains("`yes: true`"), "{text}");
    assert_eq!(structured(&r)["exit_code"], 0);
    assert!(
        structured(&r)["stderr"]
            .as_str()
            .unwrap()
            .contains("CondaSystemExit: Exiting.")
    );
    // Confirmed, it runs.
    let r = s.call(
        "conda_remove",
        json!({"all": true, "name": "t1", "yes": true}),
    );
    assert_ne!(r["isError"], true, "{r}");
    assert_eq!(reported_argv(&r), ["remove", "--name=t1", "--yes", "--all"]);
    // A successful run that merely mentions the text elsewhere is not a declined prompt.
    let r = s.call("conda_behave", json!({"text": "CondaSystemExit: Exiting."}));
    assert_ne!(r["isError"], true, "{r}");
}

/// Real conda: `conda create -p <an existing directory that is not an environment>` asks
/// "Continue creating environment (y/[n])?" and reads end of input as no.
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_declined_prompt_is_not_confirmed() {
    let conda = support::real_conda();
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("not-an-env");
    std::fs::create_dir(&target).unwrap();
    let mut s = Session::start(&conda, &["--allow-write"]);
    let r = s.call("conda_create", json!({"prefix": target}));
    assert_eq!(r["isError"], true, "{r}");
    let text = r["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("not_confirmed: "), "{text}");
    assert_eq!(structured(&r)["exit_code"], 0);
    assert!(
        structured(&r)["stdout"]
            .as_str()
            .unwrap()
            .contains("Continue creating environment (y/[n])?"),
        "{r}"
    );
    // Nothing was created.
    assert_eq!(std::fs::read_dir(&target).unwrap().count(), 0);
}

#[test]
fn paths_outside_the_allowed_directories_are_refused() {
    // What an agent would send to read a secret through a file option, however spelled.
    let scope = tempfile::tempdir().unwrap();
    let inside = scope.path().join("env");
    std::fs::create_dir_all(&inside).unwrap();
    std::os::unix::fs::symlink("/etc", scope.path().join("etc-link")).unwrap();
    let scope_text = scope.path().to_str().unwrap().to_owned();
    let mut s = Session::start(conda(), &["--allow-paths", &scope_text]);
    let refusal = (
        -32600,
        support::refused(
            "Operation names a path outside the allowed directories (see --allow-paths)",
            "--allow-paths",
        ),
    );
    let link = format!("{scope_text}/etc-link/passwd");
    let dotdot = format!("{scope_text}/env/../../../etc/passwd");
    for prefix in [
        "/etc",
        "/proc/self",
        link.as_str(),
        dotdot.as_str(),
        "~",
        "file:///etc",
        "$HOME",
        "${OLDPWD}/x",
    ] {
        assert_eq!(
            s.call_error("conda_list", json!({"prefix": prefix})),
            refusal,
            "{prefix}"
        );
    }
    let ok = s.call("conda_list", json!({"prefix": inside.to_str().unwrap()}));
    assert!(ok["structuredContent"]["exit_code"].is_i64(), "{ok}");
    // Calls that need --allow-exec may run any program anyway: not confined.
    drop(s);
    let mut s = Session::start(conda(), &["--allow-exec", "--allow-paths", &scope_text]);
    let raw = s.call("conda_execute", json!({"argv": ["list", "-p", "/etc"]}));
    assert!(raw["structuredContent"]["exit_code"].is_i64(), "{raw}");
    let caps = s.capabilities();
    assert_eq!(caps["paths"]["confined"], true);
    // Unrestricted by default over stdio.
    drop(s);
    let mut s = Session::start(conda(), &[]);
    assert_eq!(s.capabilities()["paths"]["confined"], false);
    let etc = s.call("conda_list", json!({"prefix": "/etc"}));
    assert!(etc["structuredContent"]["exit_code"].is_i64(), "{etc}");
}

/// stdout that parses as JSON moves to `parsed_json` for conda's own documents only: a
/// call that needs --allow-exec (a program's output, here raw argv) keeps the text as
/// printed, since parsing may lose what JSON does not promise to keep.
#[test]
fn program_output_keeps_its_text() {
    let mut s = Session::start(conda(), &["--allow-exec"]);
    let own = s.call("conda_info", json!({"json": true}));
    assert_eq!(structured(&own)["stdout"], "", "{own}");
    assert_eq!(own["_meta"]["conda-cli-mcp/stdout"], "moved-to-parsed_json");
    let raw = s.call("conda_execute", json!({"argv": ["info", "--json"]}));
    let sc = structured(&raw);
    assert!(sc["parsed_json"].is_object(), "{raw}");
    assert_eq!(
        serde_json::from_str::<Value>(sc["stdout"].as_str().unwrap()).unwrap(),
        sc["parsed_json"],
        "{raw}"
    );
    assert!(
        raw.get("_meta")
            .is_none_or(|m| m.get("conda-cli-mcp/stdout").is_none()),
        "{raw}"
    );
}
