//! Unit tests of the command line: defaults, flags and variables, and every message.

use std::time::Duration;

use super::*;
use crate::config::{HttpLimits, Secret};

fn fake_conda() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("conda");
    std::fs::write(&path, "#!/bin/sh\n").unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let text = path.to_str().unwrap().to_owned();
    (dir, text)
}

fn err(args: &[&str]) -> String {
    let (_dir, conda) = fake_conda();
    let mut argv = vec!["ccm", "--conda-exe", &conda];
    argv.extend_from_slice(args);
    parse(argv, &Environment::default())
        .unwrap_err()
        .to_string()
}

#[test]
fn defaults() {
    let (_dir, conda) = fake_conda();
    let Action::Serve(config) =
        parse(["ccm", "--conda-exe", &conda], &Environment::default()).unwrap()
    else {
        panic!("expected serve")
    };
    assert_eq!(config.timeout, Duration::from_secs(900));
    assert_eq!(config.output_limit, 1 << 20);
    assert_eq!(config.stdin_limit, 1 << 20);
    assert!(!config.allow_write && !config.allow_exec);
}

#[test]
fn bad_values_are_one_line_usage_errors() {
    for value in ["0", "-1", "nan", "inf", "-inf"] {
        assert_eq!(
            err(&["--timeout", value]),
            "ccm: error: argument --timeout: must be finite and greater than zero"
        );
    }
    assert!(err(&["--timeout", "abc"]).contains("is not a number"));
    assert_eq!(
        err(&["--output-limit-bytes", "0"]),
        "ccm: error: argument --output-limit-bytes: must be greater than zero"
    );
    assert_eq!(
        err(&["--stdin-limit-bytes", "0"]),
        "ccm: error: argument --stdin-limit-bytes: must be greater than zero"
    );
    assert!(err(&["--output-limit-bytes", "1.5"]).contains("not a whole number"));
    let unknown = err(&["--bogus"]);
    assert!(!unknown.contains('\n'), "{unknown}");
    assert!(unknown.contains("--bogus") && unknown.ends_with("(see 'ccm --help')"));
}

#[test]
fn conda_resolution_errors() {
    let message = parse(
        ["ccm", "--conda-exe", "/nonexistent"],
        &Environment::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        message.starts_with("ccm: error: could not find conda"),
        "{message}"
    );
    assert!(message.contains("Use --conda-exe PATH, set CONDA_EXE, or add conda to PATH"));
    let (_dir, conda) = fake_conda();
    assert!(matches!(
        parse(
            ["ccm"],
            &Environment::from_pairs([("CONDA_EXE", conda.as_str())])
        )
        .unwrap(),
        Action::Serve(_)
    ));
}

#[test]
fn version_and_help() {
    let Action::Print(text) = parse(["ccm", "--version"], &Environment::default()).unwrap() else {
        panic!()
    };
    assert_eq!(text, format!("{}\n", crate::VERSION_TEXT));
    assert!(text.starts_with(concat!(env!("CARGO_PKG_VERSION"), " (")));
    let Action::Print(help) = parse(["ccm", "--help"], &Environment::default()).unwrap() else {
        panic!()
    };
    for flag in [
        "--conda-exe",
        "--timeout",
        "--output-limit-bytes",
        "--stdin-limit-bytes",
        "--allow-write",
        "--allow-exec",
    ] {
        assert!(help.contains(flag), "{flag} missing from help");
    }
}

#[test]
fn discover_subcommand_takes_global_options() {
    let (_dir, conda) = fake_conda();
    let action = parse(
        ["ccm", "discover", "--pretty", "--conda-exe", &conda],
        &Environment::default(),
    )
    .unwrap();
    assert!(matches!(action, Action::Discover { pretty: true, .. }));
}

fn serve(args: &[&str], env: &[(&str, &str)]) -> Result<Config, UsageError> {
    let (_dir, conda) = fake_conda();
    let mut argv = vec!["ccm", "--conda-exe", &conda];
    argv.extend_from_slice(args);
    match parse(argv, &Environment::from_pairs(env.iter().copied())) {
        Ok(Action::Serve(config)) => Ok(config),
        Ok(other) => panic!("expected serve, got {other:?}"),
        Err(e) => Err(e),
    }
}

#[test]
fn limit_flags_and_variables() {
    use crate::host::exec::Limit;
    let config = serve(&[], &[]).unwrap();
    assert_eq!(config.limits, crate::host::exec::LimitSettings::default());
    let config = serve(
        &[
            "--memory-limit",
            "2GiB",
            "--file-size-limit",
            "1048576",
            "--process-limit",
            "64",
            "--child-env-remove",
            "AWS_SECRET_ACCESS_KEY",
        ],
        &[(CHILD_ENV_REMOVE_VAR, "A, B,,A")],
    )
    .unwrap();
    assert_eq!(config.limits.memory, Limit::At(2 << 30));
    assert_eq!(config.limits.file_size, Limit::At(1 << 20));
    assert_eq!(config.limits.processes, Limit::At(64));
    assert_eq!(
        config.limits.child_env_remove,
        ["AWS_SECRET_ACCESS_KEY", "A", "B"]
    );
    // Variables apply when the flag is absent; the flag wins.
    let config = serve(
        &["--memory-limit", "512M"],
        &[
            (MEMORY_LIMIT_VAR, "1GiB"),
            (FILE_SIZE_LIMIT_VAR, "unlimited"),
            (PROCESS_LIMIT_VAR, "unlimited"),
        ],
    )
    .unwrap();
    assert_eq!(config.limits.memory, Limit::At(512 << 20));
    assert_eq!(config.limits.file_size, Limit::Unlimited);
    assert_eq!(config.limits.processes, Limit::Unlimited);
    assert_eq!(parse_size("1.5GiB"), Ok(Limit::At(3 << 29)));
    for bad in ["", "-1", "4XB", "12", "0.5KiB", "NaN", "1e400"] {
        assert!(parse_size(bad).is_err(), "{bad}");
    }
    assert_eq!(
        serve(&["--memory-limit", "lots"], &[])
            .unwrap_err()
            .to_string(),
        "ccm: error: argument --memory-limit: 'lots' is not a size; give bytes, a number \
         with KiB, MiB, GiB or TiB, or 'unlimited'"
    );
    assert!(
        serve(&[], &[(FILE_SIZE_LIMIT_VAR, "10")])
            .unwrap_err()
            .to_string()
            .contains("CCM_FILE_SIZE_LIMIT: must be at least 1MiB")
    );
    assert!(serve(&["--process-limit", "0"], &[]).is_err());
    assert!(serve(&["--child-env-remove", "A=B"], &[]).is_err());
}

#[test]
fn capacity_flags() {
    let config = serve(&[], &[]).unwrap();
    assert_eq!((config.max_queue, config.max_session_calls), (16, 4));
    let config = serve(&["--max-queue", "0", "--max-session-calls", "1"], &[]).unwrap();
    assert_eq!((config.max_queue, config.max_session_calls), (0, 1));
    assert_eq!(
        serve(&["--max-session-calls", "0"], &[])
            .unwrap_err()
            .to_string(),
        "ccm: error: argument --max-session-calls: must be greater than zero"
    );
    assert!(
        serve(&["--max-queue", "-1"], &[])
            .unwrap_err()
            .to_string()
            .contains("not a whole number")
    );
}

#[test]
fn http_defaults() {
    assert!(serve(&[], &[]).unwrap().http.is_none());
    let http = serve(&["--http"], &[]).unwrap().http.unwrap();
    assert_eq!(http.addr, DEFAULT_HTTP_ADDR.parse().unwrap());
    assert_eq!(http.token, None);
    assert_eq!(http.query_param, "token");
    assert!(http.allowed_hosts.is_empty());
    assert!(http.allowed_origins.is_empty());
    assert_eq!(
        http.limits,
        HttpLimits {
            max_connections: 256,
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_sessions: 64,
            session_idle: Duration::from_secs(600),
            max_stateless: 16,
        }
    );
}

#[test]
fn http_limits_and_origins() {
    let http = serve(
        &[
            "--http",
            "--http-max-sessions",
            "3",
            "--allowed-origin",
            "HTTPS://App.Example",
        ],
        &[
            ("CCM_HTTP_MAX_SESSIONS", "9"),
            ("CCM_HTTP_MAX_CONNECTIONS", "7"),
            ("CCM_HTTP_ALLOWED_ORIGINS", "http://a.example:8080, ,"),
        ],
    )
    .unwrap()
    .http
    .unwrap();
    assert_eq!(
        (http.limits.max_sessions, http.limits.max_connections),
        (3, 7),
        "the flag wins over the environment"
    );
    assert_eq!(
        http.allowed_origins,
        ["https://app.example", "http://a.example:8080"]
    );
    for (flag, value) in [
        ("--http-max-connections", "0"),
        ("--http-header-timeout", "-1"),
        ("--http-idle-timeout", "nan"),
        ("--http-max-stateless", "x"),
        ("--allowed-origin", "app.example"),
    ] {
        assert!(
            serve(&["--http", flag, value], &[]).is_err(),
            "{flag} {value}"
        );
    }
}

#[test]
fn http_addresses_and_hosts() {
    let http = serve(&["--http", "[::1]:0"], &[]).unwrap().http.unwrap();
    assert_eq!(http.addr, "[::1]:0".parse().unwrap());
    let http = serve(&["--http", "localhost:9"], &[])
        .unwrap()
        .http
        .unwrap();
    assert_eq!(http.addr, "127.0.0.1:9".parse().unwrap());
    assert!(
        serve(&["--http", "nowhere"], &[])
            .unwrap_err()
            .to_string()
            .contains("is not an address")
    );
    let remote = serve(&["--http", "0.0.0.0:8089"], &[])
        .unwrap_err()
        .to_string();
    assert!(remote.contains("--allow-remote"), "{remote}");
    let http = serve(
        &[
            "--http",
            "192.0.2.1:8089",
            "--allow-remote",
            "--allowed-host",
            "mcp.example",
        ],
        &[],
    )
    .unwrap()
    .http
    .unwrap();
    assert_eq!(http.allowed_hosts, ["mcp.example", "192.0.2.1"]);
    for flag in [
        &["--allow-remote"][..],
        &["--token-file", "/x"],
        &["--allowed-host", "h"],
    ] {
        assert!(
            serve(flag, &[])
                .unwrap_err()
                .to_string()
                .contains("applies only with --http"),
            "{flag:?}"
        );
    }
}

#[test]
fn tokens_from_environment_and_file() {
    let token = "0123456789abcdef-token";
    let http = serve(&["--http"], &[(TOKEN_VAR, token), (QUERY_PARAM_VAR, "key")])
        .unwrap()
        .http
        .unwrap();
    assert_eq!(http.token.as_ref().map(Secret::expose), Some(token));
    assert_eq!(http.query_param, "key");
    assert_eq!(
        format!("{http:?}").matches(token).count(),
        0,
        "Debug hides it"
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    std::fs::write(&file, "from-the-file-0123456789\n").unwrap();
    let file = file.to_str().unwrap();
    let http = serve(&["--http", "--token-file", file], &[(TOKEN_VAR, token)])
        .unwrap()
        .http
        .unwrap();
    assert_eq!(http.token.unwrap().expose(), "from-the-file-0123456789");
    for bad in [
        "short",
        "",
        "has a space in the middle",
        "tab\tinside-0123456789",
    ] {
        let message = serve(&["--http"], &[(TOKEN_VAR, bad)])
            .unwrap_err()
            .to_string();
        assert!(message.contains("visible ASCII"), "{message}");
        assert!(bad.is_empty() || !message.contains(bad));
    }
    assert!(
        serve(&["--http", "--token-file", "/nonexistent/t"], &[])
            .unwrap_err()
            .to_string()
            .contains("cannot read")
    );
    assert!(
        serve(&["--http"], &[(QUERY_PARAM_VAR, "a&b")])
            .unwrap_err()
            .to_string()
            .contains(QUERY_PARAM_VAR)
    );
    // Without --http the token variables are not consulted.
    assert!(serve(&[], &[(TOKEN_VAR, "short")]).is_ok());
}

#[test]
fn surface_errors_are_usage_errors() {
    let message = serve(&[], &[("CCM_MCP_TOOL_CONDA_INFO_COLOUR", "x")])
        .unwrap_err()
        .to_string();
    assert!(
        message.starts_with("ccm: error: CCM_MCP_TOOL_CONDA_INFO_COLOUR: unknown tool override")
    );
    assert!(!message.contains('\n'));
    let (_dir, conda) = fake_conda();
    let discover = parse(
        [
            "ccm",
            "--conda-exe",
            &conda,
            "--http",
            "127.0.0.1:1",
            "discover",
        ],
        &Environment::default(),
    );
    assert!(discover.is_err());
}

#[test]
fn tools_flag_and_variable() {
    use crate::tools::select::{Group, Item};
    let none = serve(&[], &[]).unwrap();
    assert_eq!(none.tools, None);
    assert!(!none.list_all);
    let items = |config: Config| config.tools.expect("a selection").texts();
    assert_eq!(
        items(
            serve(
                &["--tools", "@core,conda_env_*", "--tools", "conda_info"],
                &[]
            )
            .unwrap()
        ),
        ["@core", "conda_env_*", "conda_info"]
    );
    assert_eq!(
        items(serve(&[], &[("CCM_TOOLS", "@read, conda_execute")]).unwrap()),
        ["@read", "conda_execute"]
    );
    // The flag replaces the variable (it is not merged).
    let flag_wins = serve(&["--tools", "@all"], &[("CCM_TOOLS", "@nope")]).unwrap();
    assert_eq!(flag_wins.tools.unwrap().items, [Item::Group(Group::All)]);
    assert_eq!(
        serve(&["--tools", "@everything"], &[])
            .unwrap_err()
            .to_string(),
        "ccm: error: --tools: unknown group '@everything' (groups: @core, @read, @envs, @packages, @config, @plugin:NAME, @all)"
    );
    assert!(
        serve(&[], &[("CCM_TOOLS", "conda info")])
            .unwrap_err()
            .to_string()
            .starts_with("ccm: error: CCM_TOOLS: 'conda info' is not a tool name")
    );
    assert!(serve(&["--tools", ","], &[]).is_err());
    assert!(serve(&["--list-all"], &[]).unwrap().list_all);
    assert!(serve(&[], &[("CCM_LIST_ALL", "1")]).unwrap().list_all);
    assert!(!serve(&[], &[("CCM_LIST_ALL", "0")]).unwrap().list_all);
}

#[test]
fn audit_log_and_confirmation_settings() {
    let none = serve(&[], &[]).unwrap();
    assert_eq!(none.audit_log, None);
    assert!(!none.confirm_writes);
    assert_eq!(none.confirm_timeout, Duration::from_secs(300));
    let flag = serve(&["--audit-log", "/var/log/ccm.jsonl"], &[]).unwrap();
    assert_eq!(flag.audit_log, Some(PathBuf::from("/var/log/ccm.jsonl")));
    // The flag wins over the variable; a relative path is made absolute.
    let both = serve(&["--audit-log", "/a"], &[("CCM_AUDIT_LOG", "/b")]).unwrap();
    assert_eq!(both.audit_log, Some(PathBuf::from("/a")));
    let relative = serve(&[], &[("CCM_AUDIT_LOG", "audit.jsonl")]).unwrap();
    let path = relative.audit_log.unwrap();
    assert!(
        path.is_absolute() && path.ends_with("audit.jsonl"),
        "{path:?}"
    );
    assert_eq!(
        serve(&[], &[("CCM_AUDIT_LOG", "")]).unwrap().audit_log,
        None
    );
    assert!(serve(&["--audit-log", ""], &[]).is_err());
    assert!(serve(&["--confirm-writes"], &[]).unwrap().confirm_writes);
    assert!(
        serve(&[], &[("CCM_CONFIRM_WRITES", "yes")])
            .unwrap()
            .confirm_writes
    );
    let timeout = serve(&["--confirm-timeout", "1.5"], &[]).unwrap();
    assert_eq!(timeout.confirm_timeout, Duration::from_millis(1500));
    let zero = serve(&["--confirm-timeout", "0"], &[])
        .unwrap_err()
        .to_string();
    assert!(zero.contains("--confirm-timeout"), "{zero}");
}
