//! The `ccm` binary's command line: exit codes and one-line messages.

use crate::support;

fn run(args: &[&str]) -> (i32, String, String) {
    let output = support::ccm()
        .args(args)
        .env("PATH", "/nonexistent-path")
        .output()
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
    )
}

/// `ccm --conda-exe <the fixture> ARGS`, as [`run`].
fn run_on_fixture(args: &[&str]) -> (i32, String, String) {
    let conda = support::fixture().conda.to_str().unwrap();
    let mut argv = vec!["--conda-exe", conda];
    argv.extend(args);
    run(&argv)
}

#[test]
fn missing_conda_exits_2_with_what_to_do() {
    let (code, out, err) = run(&["--conda-exe", "/nonexistent"]);
    assert_eq!(code, 2);
    assert!(out.is_empty());
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("ccm: error: could not find conda"), "{err}");
    assert!(err.contains("Use --conda-exe PATH, set CONDA_EXE, or add conda to PATH"));
    // Nothing on PATH and no CONDA_EXE: same advice.
    let (code, _, err) = run(&[]);
    assert_eq!(code, 2);
    assert!(err.contains("no conda executable on PATH"), "{err}");
}

#[test]
fn conda_exe_environment_variable_is_used() {
    let output = support::ccm()
        .arg("discover")
        .env("CONDA_EXE", &support::fixture().conda)
        .env("PATH", "/nonexistent-path")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        doc["target_executable"],
        serde_json::json!(support::fixture().conda)
    );
}

#[test]
fn bad_values_exit_2() {
    for (args, message) in [
        (
            vec!["--timeout", "0"],
            "argument --timeout: must be finite and greater than zero",
        ),
        (
            vec!["--timeout", "nan"],
            "argument --timeout: must be finite and greater than zero",
        ),
        (
            vec!["--timeout", "inf"],
            "argument --timeout: must be finite and greater than zero",
        ),
        (
            vec!["--output-limit-bytes", "0"],
            "argument --output-limit-bytes: must be greater than zero",
        ),
        (
            vec!["--stdin-limit-bytes", "0"],
            "argument --stdin-limit-bytes: must be greater than zero",
        ),
        (
            vec!["--classify", "conda_behave=root"],
            "--classify: 'conda_behave=root' is not TOOL=read|write|exec (TOOL: a canonical tool name such as conda_spawn)",
        ),
        (
            vec!["--classify", "=read"],
            "--classify: '=read' is not TOOL=read|write|exec (TOOL: a canonical tool name such as conda_spawn)",
        ),
        (
            vec!["tools", "--classify", "conda_nothing=read"],
            "--classify names no tool of this conda: conda_nothing (see 'ccm tools' for the names)",
        ),
    ] {
        let (code, _, err) = run_on_fixture(&args);
        assert_eq!(code, 2, "{args:?}");
        // `tools` may print discovery diagnostics (`ccm: <command>: …`) first.
        assert_eq!(
            err.trim_end().lines().last(),
            Some(format!("ccm: error: {message}").as_str()),
            "{err}"
        );
    }
    let bat = tempfile::Builder::new().suffix(".bat").tempfile().unwrap();
    let (code, _, err) = run(&["--conda-exe", bat.path().to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(
        err.contains("conda batch launchers are not supported"),
        "{err}"
    );
}

#[test]
fn version_prints_the_version_distribution_and_build() {
    let (code, out, _) = run(&["--version"]);
    assert_eq!(code, 0);
    // The version, then the distribution and the build `build.rs` recorded (`source` and
    // the checkout's commit for a plain cargo build).
    assert_eq!(
        out,
        format!(
            "{} ({}; {})\n",
            env!("CARGO_PKG_VERSION"),
            env!("CCM_DISTRIBUTION"),
            env!("CCM_BUILD")
        )
    );
    let (code, out, _) = run(&["--help"]);
    assert_eq!(code, 0);
    assert!(out.contains("--allow-write") && out.contains("CONDA_EXE"));
}

#[test]
fn conda_on_path_is_found_and_symlinks_are_resolved() {
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(&support::fixture().conda, dir.path().join("conda")).unwrap();
    let output = support::ccm()
        .arg("discover")
        .env("PATH", dir.path())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    // The symlink on PATH resolves to the fixture's real executable.
    assert_eq!(
        doc["target_executable"],
        serde_json::json!(support::fixture().conda)
    );
    assert_eq!(doc["conda_version"], "0.99.0");
}

#[test]
fn tools_lists_what_an_agent_gets() {
    let run = |args: &[&str], env: &[(&str, &str)]| {
        let mut command = support::ccm();
        command
            .arg("--conda-exe")
            .arg(&support::fixture().conda)
            .arg("tools")
            .args(args);
        for (k, v) in env {
            command.env(k, v);
        }
        let output = command.output().unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    };
    let table = run(&[], &[]);
    assert!(table.starts_with("tool "), "{table}");
    let info = table
        .lines()
        .find(|l| l.starts_with("conda_info "))
        .unwrap();
    assert!(
        info.contains("read-only")
            && info.contains("baked")
            && info.contains("Display information"),
        "{info}"
    );
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("conda_run ") && l.contains(" exec "))
    );
    assert!(
        !table.contains("conda_execute"),
        "not listed without --allow-exec"
    );
    let report: serde_json::Value = serde_json::from_str(&run(
        &["--json", "--allow-exec"],
        &[
            ("CCM_HIDDEN_TOOLS", "conda_tune"),
            ("CCM_MCP_TOOL_CONDA_INFO_NAME", "info"),
        ],
    ))
    .unwrap();
    let rows = report["tools"].as_array().unwrap();
    // The budget: each tool's bytes, of which what the model reads (name, description and
    // inputSchema) and the rest, and the tokens of what the model reads (bytes / 4,
    // rounded up); the totals cover the listed tools only.
    let listed: Vec<&serde_json::Value> = rows.iter().filter(|r| r["listed"] == true).collect();
    let number = |v: &serde_json::Value, key: &str| v[key].as_u64().unwrap();
    for row in rows {
        let bytes = number(row, "bytes");
        assert!(bytes > 100, "{row}");
        assert_eq!(
            number(row, "model_bytes") + number(row, "other_bytes"),
            bytes,
            "{row}"
        );
        assert!(
            number(row, "other_bytes") > 200,
            "outputSchema and more: {row}"
        );
        assert_eq!(
            number(row, "tokens"),
            number(row, "model_bytes").div_ceil(4),
            "{row}"
        );
    }
    let total = &report["total"];
    let sum = |key: &str| listed.iter().map(|r| number(r, key)).sum::<u64>();
    assert_eq!(number(total, "tools"), listed.len() as u64);
    assert_eq!(
        number(total, "bytes"),
        sum("bytes") + listed.len() as u64 + 1
    );
    assert_eq!(number(total, "model_bytes"), sum("model_bytes"));
    assert_eq!(number(total, "other_bytes"), sum("other_bytes"));
    assert_eq!(
        number(total, "largest_model_bytes"),
        listed
            .iter()
            .map(|r| number(r, "model_bytes"))
            .max()
            .unwrap()
    );
    assert_eq!(
        number(total, "tokens"),
        number(total, "model_bytes").div_ceil(4)
    );
    assert_eq!(total["estimator"], "bytes / 4, rounded up");
    assert!(
        listed.len() < rows.len(),
        "the hidden tool is not in the total"
    );
    assert!(
        table.lines().last().unwrap().starts_with("total: ") && table.contains("the model reads"),
        "{table}"
    );
    // What the model reads, counted from what a server serves with the same settings: the
    // compact JSON of each listed tool's name, description and inputSchema.
    let mut session = crate::mcp::Session::start_with(
        &support::fixture().conda,
        &["--allow-exec"],
        &[
            ("CCM_HIDDEN_TOOLS", "conda_tune"),
            ("CCM_MCP_TOOL_CONDA_INFO_NAME", "info"),
        ],
    );
    let served = session.tools();
    assert_eq!(served.len(), listed.len());
    for tool in &served {
        let seen = serde_json::json!({
            "name": tool["name"],
            "description": tool["description"],
            "inputSchema": tool["inputSchema"],
        });
        let row = listed.iter().find(|r| r["name"] == tool["name"]).unwrap();
        // `ccm tools` probes the sandbox as a server does: the same listing.
        assert_eq!(
            number(row, "model_bytes"),
            serde_json::to_vec(&seen).unwrap().len() as u64,
            "{}",
            tool["name"]
        );
    }
    let find = |name: &str| {
        rows.iter()
            .find(|r| r["name"] == name)
            .unwrap_or_else(|| panic!("{name}"))
    };
    assert_eq!(find("conda_execute")["compiler"], "builtin");
    assert_eq!(find("info")["canonical"], "conda_info");
    assert_eq!(find("conda_tune")["listed"], false);
    assert_eq!(find("conda_install")["access"], "write");
    assert_eq!(find("conda_passthru")["access"], "write+exec");
    // The fixture's plugin commands are in no policy table: write+exec, unless the
    // operator classifies them, which `ccm tools` shows with the reason.
    assert_eq!(find("conda_behave")["access"], "write+exec");
    assert!(
        find("conda_behave")["policy"]
            .as_str()
            .unwrap()
            .starts_with("not in the policy's tables")
    );
    let report: serde_json::Value = serde_json::from_str(&run(
        &["--json", "--classify", "conda_behave=read"],
        &[("CCM_CLASSIFY", "conda_tune=exec")],
    ))
    .unwrap();
    let row = |name: &str| {
        report["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(row("conda_behave")["access"], "read-only");
    assert_eq!(
        row("conda_behave")["policy"],
        "classified by the operator (--classify)"
    );
    assert_eq!(row("conda_tune")["access"], "write+exec");
    assert_eq!(row("conda_info")["access"], "read-only");
}

/// Executables that are not a working conda: a real program that is not conda, a file
/// that is no program at all (ENOEXEC), and a script whose interpreter does not exist.
fn not_conda_targets(dir: &std::path::Path) -> Vec<(std::path::PathBuf, &'static str)> {
    use std::os::unix::fs::PermissionsExt;
    let write = |name: &str, bytes: &[u8]| {
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    };
    vec![
        (
            std::fs::canonicalize("/bin/ls").unwrap(),
            "conda info exited with status 2",
        ),
        (
            write("garbage", b"\x00\x01\x02 not a program"),
            "conda info could not start: it is not a program this system can run",
        ),
        (
            write("bad-interpreter", b"#!/nonexistent/python\n"),
            "conda info could not start: it does not exist, or the interpreter its #! line names does not exist",
        ),
    ]
}

#[test]
fn a_target_that_is_not_conda_exits_2_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    for (target, why) in not_conda_targets(dir.path()) {
        let target_text = target.to_str().unwrap();
        for command in [&["tools"][..], &["discover"][..], &["tools", "--json"][..]] {
            let mut args = vec!["--conda-exe", target_text];
            args.extend_from_slice(command);
            let (code, out, err) = run(&args);
            let context = format!("{target_text} {command:?}: {err}");
            assert_eq!(code, 2, "{context}");
            assert!(out.is_empty(), "{context}: {out}");
            assert_eq!(err.lines().count(), 1, "{context}");
            assert!(
                err.starts_with(&format!(
                    "ccm: error: {target_text} is not a working conda ({why}"
                )),
                "{context}"
            );
            assert!(
                err.contains("Point --conda-exe (or CONDA_EXE) at"),
                "{context}"
            );
            assert!(!err.contains("Uncategorized"), "{context}");
        }
    }
}

/// The stdio server fails fast on the same targets (a client shows the server's stderr),
/// instead of serving an empty tool list.
#[test]
fn the_server_refuses_a_target_that_is_not_conda() {
    let dir = tempfile::tempdir().unwrap();
    for (target, why) in not_conda_targets(dir.path()) {
        let mut command = support::ccm();
        command.arg("--conda-exe").arg(&target);
        // stdin stays open: the server must end on its own.
        let (code, out, err) = crate::kit::exit::serve_until_exit(command);
        assert_eq!(code, Some(2), "{err}");
        assert!(out.is_empty(), "{out}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("is not a working conda"), "{err}");
        assert!(err.contains(why), "{err}");
    }
}

/// `ccm ARGS` with a width-independent help (no terminal, no COLUMNS: 100 columns).
fn help(args: &[&str]) -> String {
    let output = support::ccm()
        .args(args)
        .env_remove("COLUMNS")
        .output()
        .unwrap();
    assert!(output.status.success(), "{args:?}: {output:?}");
    String::from_utf8(output.stdout).unwrap()
}

/// The headings of a help text, in order.
fn headings(text: &str) -> Vec<&str> {
    text.lines()
        .filter(|l| !l.starts_with(' ') && l.ends_with(':') && l.len() <= 30)
        .filter(|l| !l.contains(['(', ',', '.']) && !l.starts_with("Usage"))
        .collect()
}

/// The long flags a help text lists (`      --name` at the start of a line).
fn listed_flags(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            l.trim_start()
                .strip_prefix("--")
                .or_else(|| l.split_once(", --").map(|(_, r)| r))
        })
        .map(|rest| format!("--{}", rest.split([' ', '\n']).next().unwrap()))
        .collect()
}

#[test]
fn help_is_by_topic_short_with_h_and_whole_with_help() {
    let short = help(&["-h"]);
    let long = help(&["--help"]);
    assert!(
        short.lines().count() <= 50,
        "-h: {} lines\n{short}",
        short.lines().count()
    );
    let topics = [
        "Options:",
        "Target:",
        "Tools:",
        "Policy:",
        "Confirmation and audit:",
        "Limits:",
        "HTTP:",
        "Performance:",
    ];
    assert_eq!(headings(&short)[1..], topics, "{short}");
    assert_eq!(headings(&long)[1..], topics, "{long}");
    // -h leaves the rarely needed flags to --help, and says so; --help has every flag.
    let (short_flags, long_flags) = (listed_flags(&short), listed_flags(&long));
    assert!(short_flags.len() < long_flags.len() && short_flags.len() >= 20);
    for flag in [
        "--http-max-sessions",
        "--file-size-limit",
        "--confirm-timeout",
    ] {
        assert!(!short_flags.iter().any(|f| f == flag), "{flag} in -h");
    }
    assert!(short.contains("'ccm --help'"), "{short}");
    let command = <ccm::cli::Cli as clap::CommandFactory>::command();
    for arg in command.get_arguments() {
        let flag = format!("--{}", arg.get_long().unwrap());
        assert!(long_flags.contains(&flag), "{flag} missing from --help");
    }
}

#[test]
fn help_writes_every_variable_one_way() {
    let long = help(&["--help"]);
    // Every variable the flags have, as `[env: NAME]` (clap's own notation for defaults).
    for var in [
        "CONDA_EXE",
        "CCM_TOOLS",
        "CCM_LIST_ALL",
        "CCM_WRITE_ENVS",
        "CCM_ALLOW_PATHS",
        "CCM_CLASSIFY",
        "CCM_ALLOW_CREDENTIALS",
        "CCM_NO_SANDBOX",
        "CCM_CONFIRM_WRITES",
        "CCM_AUDIT_LOG",
        "CCM_MEMORY_LIMIT",
        "CCM_FILE_SIZE_LIMIT",
        "CCM_PROCESS_LIMIT",
        "CCM_CHILD_ENV_REMOVE",
        "CCM_MCP_TOKEN",
        "CCM_HTTP_ALLOWED_ORIGINS",
        "CCM_HTTP_MAX_CONNECTIONS",
        "CCM_HTTP_HEADER_TIMEOUT",
        "CCM_HTTP_IDLE_TIMEOUT",
        "CCM_HTTP_MAX_SESSIONS",
        "CCM_HTTP_SESSION_IDLE",
        "CCM_HTTP_MAX_STATELESS",
        "CCM_WARM",
    ] {
        // clap may wrap between `[env:` and the name.
        let flat = long.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(flat.contains(&format!("[env: {var}")), "{var}");
    }
    // No other notation: every `env` mention is the bracketed one, or the closing note.
    let flat = long.split_whitespace().collect::<Vec<_>>().join(" ");
    assert_eq!(
        flat.matches("env:").count(),
        flat.matches("[env: ").count(),
        "{long}"
    );
    assert!(!flat.contains("(also CCM_") && !flat.contains("(also CONDA_"));
}

#[test]
fn help_quotes_only_measured_figures() {
    // Ratios quoted in the help (`0.16-0.55x`) are figures docs/performance.md measures.
    let long = help(&["--help"]);
    let performance = std::fs::read_to_string(support::repo().join("docs/performance.md"))
        .unwrap()
        .replace(['–', '−'], "-")
        .replace('×', "x");
    let flat = long.split_whitespace().collect::<Vec<_>>().join(" ");
    let figures: Vec<&str> = flat
        .split([' ', '(', ')', ',', ';'])
        .filter(|w| {
            w.ends_with('x')
                && w.len() > 1
                && w[..w.len() - 1]
                    .chars()
                    .all(|c| c.is_ascii_digit() || c == '.' || c == '-')
        })
        .collect();
    assert!(!figures.is_empty(), "the --warm figure");
    for figure in figures {
        assert!(
            performance.contains(figure),
            "{figure} is not measured in docs/performance.md"
        );
    }
}

#[test]
fn commands_take_only_the_flags_they_use() {
    let tools = help(&["tools", "--help"]);
    let mut flags = listed_flags(&tools);
    flags.sort();
    assert_eq!(
        flags,
        [
            "--allow-credentials",
            "--allow-exec",
            "--allow-write",
            "--classify",
            "--conda-exe",
            "--help",
            "--json",
            "--list-all",
            "--timeout",
            "--tools",
            "--version"
        ],
        "{tools}"
    );
    let discover = help(&["discover", "--help"]);
    let mut flags = listed_flags(&discover);
    flags.sort();
    assert_eq!(
        flags,
        [
            "--conda-exe",
            "--help",
            "--pretty",
            "--timeout",
            "--version"
        ],
        "{discover}"
    );
    // Refused before or after the command, with what to read.
    for (args, line) in [
        (
            vec!["tools", "--http"],
            "--http applies to serving, not to 'tools' (see 'ccm tools --help')",
        ),
        (
            vec!["--warm", "tools"],
            "--warm applies to serving, not to 'tools' (see 'ccm tools --help')",
        ),
        (
            vec!["tools", "--confirm-writes"],
            "--confirm-writes applies to serving, not to 'tools' (see 'ccm tools --help')",
        ),
        (
            vec!["discover", "--allow-write"],
            "--allow-write applies to serving, not to 'discover' (see 'ccm discover --help')",
        ),
        (
            vec!["--tools", "@core", "discover"],
            "--tools applies to serving, not to 'discover' (see 'ccm discover --help')",
        ),
    ] {
        let (code, out, err) = run_on_fixture(&args);
        assert_eq!((code, out.as_str()), (2, ""), "{args:?}");
        assert_eq!(err, format!("ccm: error: {line}\n"), "{args:?}");
    }
    // Even with no conda to be found, the flag is what is wrong.
    let (code, _, err) = run(&["tools", "--http"]);
    assert_eq!(code, 2);
    assert!(err.contains("--http applies to serving"), "{err}");
}

#[test]
fn misspelled_flags_and_commands_get_a_suggestion() {
    for (args, line) in [
        (
            &["--allow-wrte"][..],
            "ccm: error: unexpected argument '--allow-wrte' found; did you mean '--allow-write'? (see 'ccm --help')",
        ),
        (
            &["tools", "--jsn"][..],
            "ccm: error: unexpected argument '--jsn' found; did you mean '--json'? (see 'ccm --help')",
        ),
        // Not a flag the command refuses: `tools` takes no --http.
        (
            &["tools", "--htp"][..],
            "ccm: error: unexpected argument '--htp' found (see 'ccm --help')",
        ),
        (
            &["tool"][..],
            "ccm: error: unrecognized subcommand 'tool'; did you mean 'tools'? (see 'ccm --help')",
        ),
    ] {
        let (code, out, err) = run(args);
        assert_eq!((code, out.as_str()), (2, ""), "{args:?}");
        assert_eq!(err, format!("{line}\n"), "{args:?}");
    }
}
