//! The safety policy on final argv (pure): generated and raw argv, argparse-aware option
//! matching, dry runs, and the strict verdict for argv argparse would not accept.

use ccm::tools::policy::{self, Access, Classification, Grants, Origin, Rules};
use serde_json::json;

use crate::support::{self, REAL};

fn root() -> ccm::model::catalog::Command {
    support::snapshot(REAL).catalog.root.unwrap()
}

fn strings(argv: &[&str]) -> Vec<String> {
    argv.iter().map(|s| s.to_string()).collect()
}

fn raw(argv: &[&str]) -> Classification {
    policy::classify(
        &Rules::default(),
        Some(&root()),
        &strings(argv),
        Origin::Raw,
    )
}

/// What a generated tool's argv gets (no `--allow-exec` needed for the argv itself).
fn tool_argv(argv: &[&str]) -> Classification {
    policy::classify(
        &Rules::default(),
        Some(&root()),
        &strings(argv),
        Origin::Generated { opaque: false },
    )
}

fn grants(write: bool, exec: bool) -> Grants {
    Grants {
        write,
        exec,
        credentials: false,
    }
}

/// What a server started with `flags` says about a raw argv: `None` = allowed.
fn raw_refusal(argv: &[&str], allow_write: bool, allow_exec: bool) -> Option<String> {
    let missing = raw(argv).missing(grants(allow_write, allow_exec));
    (!missing.is_empty()).then(|| Classification::refusal(&missing))
}

fn generated(tool: &str, input: serde_json::Value) -> Classification {
    let snapshot = support::snapshot(REAL);
    let tools = support::toolset(&snapshot.catalog, &snapshot.plugins, true);
    let tool = tools.get(tool).unwrap();
    tool.validate(&input).unwrap();
    let argv = ccm::tools::argv::compile(&tool.layout, input.as_object().unwrap()).unwrap();
    policy::classify(
        &tools.rules,
        snapshot.catalog.root.as_ref(),
        &argv,
        Origin::Generated {
            opaque: tool.opaque,
        },
    )
}

#[test]
fn generated_calls() {
    let install = generated("conda_install", json!({"packages": ["x"]}));
    assert_eq!(
        Classification::refusal(&install.missing(grants(false, false))),
        "Operation requires --allow-write"
    );
    assert!(
        generated("conda_install", json!({"packages": ["x"], "dry_run": true}))
            .missing(grants(false, false))
            .is_empty()
    );
    let run = generated("conda_run", json!({"executable_call": ["true"]}));
    assert_eq!(
        Classification::refusal(&run.missing(grants(false, false))),
        "Operation requires --allow-exec"
    );
    assert!(
        run.missing(grants(false, true)).is_empty(),
        "conda run needs only --allow-exec"
    );
    assert!(generated("conda_info", json!({"json": true})).read_only);
    assert!(generated("conda_config", json!({"show": ["channels"]})).read_only);
    assert!(generated("conda_config", json!({"set": [["a", "b"]]})).requires_write);
    assert!(generated("conda_doctor", json!({})).read_only);
    assert!(generated("conda_doctor", json!({"fix": true})).requires_write);
    assert!(generated("conda_export", json!({"file": "env.yml"})).requires_write);
    assert!(!generated("conda_export", json!({})).requires_write);
}

#[test]
fn raw_argv_always_needs_exec() {
    assert_eq!(
        raw_refusal(&["info"], true, false).as_deref(),
        Some("Operation requires --allow-exec")
    );
    assert_eq!(raw_refusal(&["info"], false, true), None);
    assert_eq!(
        raw_refusal(&["install", "x"], false, false).as_deref(),
        Some("Operation requires --allow-write and --allow-exec")
    );
}

/// `init --dev` makes the working directory conda's source for every later conda process
/// (attack 38 T3): it needs `--allow-exec` whoever built the argv, abbreviated too; a
/// plain `init` is a write, its dry run a read.
#[test]
fn init_dev_runs_code() {
    for argv in [&["init", "--dev", "bash"][..], &["init", "--de", "bash"]] {
        let c = tool_argv(argv);
        assert!(c.requires_exec, "{argv:?}: {c:?}");
    }
    let c = tool_argv(&["init", "bash"]);
    assert!(c.requires_write && !c.requires_exec, "{c:?}");
    assert!(tool_argv(&["init", "--dry-run", "bash"]).read_only);
}

#[test]
fn abbreviations_clusters_and_aliases() {
    for argv in [
        &["config", "--se", "a", "b"][..],
        &["export", "-fx"],
        &["--json", "config", "--add", "channels", "x"],
        &["config", "--json", "--prep", "channels", "x"],
        &["uninstall", "x"],
        &["check", "--heal"],
        &["check", "--he"],
        &["package", "-u", "-r"],
        &["package", "-ur"],
        &["env", "export", "--fi=out.yml"],
    ] {
        assert!(raw(argv).requires_write, "{argv:?} must need --allow-write");
    }
    for argv in [
        &["check"][..],
        &["doctor", "--list"],
        &["package", "-w", "/x"],
        &["config", "--show", "channels"],
        &["info", "--envs"],
        &["-v", "-v", "list", "--json"],
        &["list", "--", "-x"],
        &["env", "list"],
        &["env", "config", "vars", "list"],
    ] {
        let c = raw(argv);
        assert!(
            c.read_only && !c.requires_write,
            "{argv:?} is read-only: {c:?}"
        );
    }
}

#[test]
fn unknown_paths_and_unparsable_argv_get_the_strict_verdict() {
    for argv in [
        &["--version"][..],
        &[],
        &["completion", "status"],
        &["info", "--bogus"],
        &["env", "--name", "x", "create", "-d"],
        &["instal", "x"],
        &["install", "-f", "--dry-run"],
        &["install", "--dry-run=yes", "x"],
    ] {
        let c = raw(argv);
        assert!(c.requires_write && !c.read_only, "{argv:?}: {c:?}");
    }
    // Without a catalog (discovery failed) everything is strict.
    let c = policy::classify(&Rules::default(), None, &strings(&["info"]), Origin::Raw);
    assert!(c.requires_write && c.requires_exec);
}

#[test]
fn dry_run_exemption_needs_the_exact_option() {
    for argv in [
        &["install", "--dry-run", "x"][..],
        &["install", "-d", "x"],
        &["update", "-d", "--all"],
        &["create", "-n", "t", "--dry-run"],
        &["create", "-p", "/tmp/new", "--dry-run", "x"],
        &["remove", "-n", "t", "--dry-run", "x"],
        &["env", "remove", "-n", "t", "-d"],
        &["clean", "--all", "--dry-run"],
        &["rename", "-n", "t", "u", "--dry-run"],
    ] {
        assert!(!raw(argv).requires_write, "{argv:?} is a dry run");
    }
    for argv in [
        &["install", "-yd", "x"][..],
        &["install", "--dry", "x"],
        &["install", "--file=--dry-run"],
        &["install", "x", "--", "--dry-run"],
        &["config", "--set", "a", "b", "--dry-run"],
        // conda ignores --dry-run for explicit environments and packages, and
        // --revision deletes the prefix's trash before it solves.
        &["env", "create", "-d"],
        &["env", "update", "-d", "-f", "env.yml"],
        &["install", "--dry-run", "--file", "explicit.txt"],
        &["create", "-n", "t", "--dry-run", "--file=spec.txt"],
        &["install", "--dry-run", "./pkg-1.0-0.conda"],
        &[
            "install",
            "--dry-run",
            "https://example.invalid/x-1-0.tar.bz2",
        ],
        &["install", "-d", "pkg-1.0-py3-none-any.whl"],
        &["install", "--dry-run", "--revision", "1"],
        &["create", "-n", "t", "--dry-run", "--clone", "base"],
        &["doctor", "--fix", "--dry-run"],
        // install/update delete trash files in a target that is not an environment
        // before they solve: only the default target is exempt.
        &["install", "--dry-run", "-p", "/tmp/not-an-env", "x"],
        &["install", "--dry-run", "--prefix=/tmp/not-an-env", "x"],
        &["update", "-d", "-n", "some-dir", "x"],
    ] {
        assert!(raw(argv).requires_write, "{argv:?} is not a dry run");
    }
}

/// Where read-only calls run in the read-only sandbox, a dry run of install or update that
/// names its target (`-n`, `-p`) is read-only: conda empties that directory's trash
/// before it solves, and the sandbox keeps the deletion from having effect. Nothing else
/// changes: the forms that write for another reason stay writes, and without the sandbox
/// the named target still needs --allow-write.
#[test]
fn naming_the_target_of_a_dry_run_is_read_only_only_in_the_sandbox() {
    let mut sandboxed = Rules::default();
    sandboxed.set_sandboxed(true);
    let judge = |rules: &Rules, argv: &[&str]| {
        policy::classify(rules, Some(&root()), &strings(argv), Origin::Raw)
    };
    for argv in [
        &["install", "--dry-run", "-p", "/tmp/not-an-env", "x"][..],
        &["install", "--dry-run", "--prefix=/tmp/not-an-env", "x"],
        &["update", "-d", "-n", "some-dir", "x"],
        &["install", "-d", "--name", "t1", "numpy=1.26"],
    ] {
        assert!(judge(&Rules::default(), argv).requires_write, "{argv:?}");
        let c = judge(&sandboxed, argv);
        assert!(c.read_only && !c.requires_write, "{argv:?}: {c:?}");
    }
    for argv in [
        &["install", "-p", "/tmp/not-an-env", "x"][..],
        &["install", "--dry-run", "-n", "t", "--file", "explicit.txt"],
        &["install", "--dry-run", "-n", "t", "./pkg-1.0-0.conda"],
        &["update", "--dry-run", "-n", "t", "--revision", "1"],
        &["install", "-yd", "-n", "t", "x"],
        &["env", "update", "-d", "-n", "t"],
    ] {
        assert!(judge(&sandboxed, argv).requires_write, "{argv:?}");
    }
    // The listing follows: install's read-only form offers name and prefix only here.
    let snapshot = support::snapshot(REAL);
    for (sandbox, offered) in [(false, false), (true, true)] {
        let mut tools = support::toolset_in(&snapshot.catalog, &snapshot.plugins, false, sandbox);
        let shaped = ccm::tools::listing::shape(&mut tools, Grants::default());
        let install = &shaped.restricted["conda_install"];
        let properties = install.schema["properties"].as_object().unwrap();
        assert_eq!(properties.contains_key("name"), offered);
        assert_eq!(properties.contains_key("prefix"), offered);
        assert_eq!(install.why.is_some(), !sandbox, "{:?}", install.why);
    }
}

#[test]
fn remainder_swallows_the_rest() {
    // conda run: everything after the command belongs to it, so `--set` is not a config
    // option and `-d` is not a dry run; `conda run` itself needs only --allow-exec.
    let c = raw(&["run", "-n", "t1", "conda", "config", "--set", "a", "b"]);
    assert!(!c.requires_write && c.requires_exec && c.open_world);
}

#[test]
fn tool_annotations_follow_the_same_rules() {
    let path = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let rules = Rules::default();
    let info = policy::describe(&rules, &path(&["info"]), false);
    assert!(info.read_only && !info.open_world);
    let search = policy::describe(&rules, &path(&["search"]), false);
    assert!(search.read_only && search.open_world);
    for forced in [
        &["config"][..],
        &["doctor"],
        &["check"],
        &["export"],
        &["env", "export"],
    ] {
        assert!(
            policy::describe(&rules, &path(forced), false).requires_write,
            "{forced:?}"
        );
    }
    let plugin = policy::describe(&rules, &path(&["completion", "status"]), false);
    assert!(
        plugin.requires_write && plugin.requires_exec && plugin.open_world,
        "unknown plugin commands need --allow-write and --allow-exec"
    );
    let opaque = policy::describe(&rules, &path(&["mcp"]), true);
    assert!(opaque.requires_write && opaque.requires_exec);
}

#[test]
fn config_is_read_only_only_where_conda_returns_early() {
    // conda/cli/main_config.py writes the rc file (creating it) unless it returns early.
    for argv in [
        &["config"][..],
        &["config", "--json"],
        &["config", "--file", "/tmp/any.yml"],
        &["config", "--system"],
        &["config", "--env"],
        &["config", "-n", "base"],
        &["config", "--get"],
        &["config", "--get", "a", "--get"],
        &["config", "--get=a", "--get"],
        &["config", "--write-default"],
        &["config", "--write-default", "--get", "x"],
        &["config", "--wr"],
        &["config", "--force"],
        &["config", "--get", "channels", "--set", "a", "b"],
        &["config", "--stdin"],
        &["config", "--remove-key", "x"],
        &["config", "--rem", "channels", "x"],
        &["config", "--sh"], // ambiguous (--show, --show-sources): argparse refuses
    ] {
        let c = tool_argv(argv);
        assert!(c.requires_write && !c.read_only, "{argv:?} writes: {c:?}");
    }
    for argv in [
        &["config", "--show"][..],
        &["config", "--show", "channels"],
        &["config", "--show-sources"],
        &["config", "--show-s"],
        &["config", "--describe"],
        &["config", "--desc", "channels"],
        &["config", "--validate"],
        &["config", "--get", "channels"],
        &["config", "--get=channels"],
        &["config", "--get", "--get", "channels"],
        &["config", "--file", "/tmp/any.yml", "--show"],
        &["config", "--system", "--get", "a", "b"],
        &["config", "--json", "--show", "--write-default"],
        // --show returns (main_config.py:538) before any modifier is applied.
        &["config", "--show", "--set", "a", "b"],
    ] {
        let c = tool_argv(argv);
        assert!(
            c.read_only && !c.requires_write,
            "{argv:?} is read-only: {c:?}"
        );
    }
}

#[test]
fn credentials_need_their_own_grant() {
    let c = tool_argv(&["info", "--unsafe-channels"]);
    assert!(c.read_only && c.reveals_credentials);
    assert_eq!(
        Classification::refusal(&c.missing(grants(true, true))),
        "Operation requires --allow-credentials"
    );
    let granted = Grants {
        write: false,
        exec: false,
        credentials: true,
    };
    assert!(c.missing(granted).is_empty());
    assert!(!tool_argv(&["info", "--json"]).reveals_credentials);
    assert!(
        tool_argv(&["info", "--unsafe"]).reveals_credentials,
        "abbreviation"
    );
}

#[test]
fn operator_classification_replaces_the_tables() {
    let mut rules = Rules::default();
    rules.classify_as(strings(&["completion", "status"]), Access::Read);
    rules.classify_as(strings(&["list"]), Access::Exec);
    let judge = |argv: &[&str]| {
        policy::classify(
            &rules,
            Some(&root()),
            &strings(argv),
            Origin::Generated { opaque: false },
        )
    };
    // `completion status` is no command of the stock snapshot: argparse fails, strict.
    assert!(judge(&["completion", "status"]).requires_exec);
    let list = judge(&["list"]);
    assert!(list.requires_write && list.requires_exec);
    assert!(judge(&["info"]).read_only);
}

/// The attacks that broke read-only mode, tried on real conda through the server: a
/// default (read-only) server refuses every form of `conda config` that writes, the
/// forms it admits write nothing, credentials need their grant, and with `--allow-write`
/// alone no plugin command that runs programs is admitted.
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_read_only_attacks_are_refused() {
    let conda = support::real_conda();
    let has = |distribution: &str| {
        support::real_discovery()
            .plugins
            .iter()
            .any(|p| ccm::model::catalog::normalize_distribution(&p.distribution) == distribution)
    };
    let home = tempfile::tempdir().unwrap();
    let home_path = home.path().to_str().unwrap().to_owned();
    let condarc = home.path().join(".condarc");
    let victim = home.path().join("victim.json");
    std::fs::write(&victim, "{\"keep\": [1, 2]}\n").unwrap();
    let env = [
        ("HOME", home_path.as_str()),
        ("XDG_CONFIG_HOME", home_path.as_str()),
        ("XDG_CACHE_HOME", home_path.as_str()),
        ("XDG_DATA_HOME", home_path.as_str()),
    ];
    let mut s = crate::mcp::Session::start_with(&conda, &[], &env);
    // With --list-all every input reaches the policy, which refuses it; the default
    // listing's refusal also says what the form it showed offers.
    let mut all = crate::mcp::Session::start_with(&conda, &["--list-all"], &env);
    let write_refusal = (
        -32600,
        crate::support::refused("Operation requires --allow-write", "--allow-write"),
    );
    for input in [
        json!({}),
        json!({"json": true}),
        json!({"file": victim.to_str().unwrap()}),
        json!({"system": true}),
        json!({"env": true}),
        json!({"get": []}),
        json!({"write_default": true}),
        json!({"set": [["changeps1", "false"]]}),
    ] {
        assert_eq!(
            all.call_error("conda_config", input.clone()),
            write_refusal,
            "conda_config {input}"
        );
        let (code, message) = s.call_error("conda_config", input.clone());
        assert!(
            code == -32600
                && message.starts_with("Operation requires --allow-write. Here: ")
                && message.ends_with(
                    "Anything else needs --allow-write. The operator sets --allow-write in the \
                     client's MCP server configuration."
                ),
            "conda_config {input}: {code} {message}"
        );
    }
    for input in [
        json!({"show": ["channels"]}),
        json!({"show_sources": true}),
        json!({"get": ["channels"]}),
        json!({"describe": ["channels"], "json": true}),
        json!({"validate": true}),
    ] {
        let result = s.call("conda_config", input.clone());
        assert_eq!(
            result["structuredContent"]["exit_code"], 0,
            "conda_config {input}: {result}"
        );
    }
    assert!(
        !condarc.exists(),
        "an admitted conda config call wrote ~/.condarc"
    );
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "{\"keep\": [1, 2]}\n"
    );
    assert_eq!(
        all.call_error("conda_info", json!({"unsafe_channels": true})),
        (
            -32600,
            crate::support::refused(
                "Operation requires --allow-credentials",
                "--allow-credentials"
            )
        )
    );
    let (code, message) = s.call_error("conda_info", json!({"unsafe_channels": true}));
    assert!(
        code == -32600
            && message.ends_with(
                "Anything else needs --allow-credentials. The operator sets \
                 --allow-credentials in the client's MCP server configuration."
            ),
        "{code} {message}"
    );
    let explicit = json!({"packages": ["./pkg-1.0-0.conda"], "dry_run": true});
    assert_eq!(
        all.call_error("conda_install", explicit.clone()),
        write_refusal
    );
    let (code, message) = s.call_error("conda_install", explicit);
    assert!(
        code == -32600
            && message.starts_with("Operation requires --allow-write. Here: only dry runs")
            && message.contains("plain match specs"),
        "{code} {message}"
    );
    drop(s);
    drop(all);

    // --allow-write alone never runs a program the caller chooses.
    let mut s = crate::mcp::Session::start_with(&conda, &["--allow-write"], &env);
    let exec_refusal = |missing: &str| {
        (
            -32600,
            crate::support::refused(&format!("Operation requires {missing}"), missing),
        )
    };
    assert_eq!(
        s.call_error(
            "conda_run",
            json!({"executable_call": ["true"], "name": "base"})
        ),
        exec_refusal("--allow-exec")
    );
    if has("conda-spawn") {
        assert_eq!(
            s.call_error(
                "conda_spawn",
                json!({"environment": "base", "command": ["true"]})
            ),
            exec_refusal("--allow-exec")
        );
    }
    if has("conda-workspaces") {
        assert_eq!(
            s.call_error("conda_task_run", json!({"task_name": "anything"})),
            exec_refusal("--allow-exec")
        );
    }
    if has("conda-pypi") {
        assert_eq!(
            s.call_error(
                "conda_pypi_install",
                json!({"packages": ["x"], "dry_run": true})
            ),
            exec_refusal("--allow-exec")
        );
    }
    drop(s);
    // A default server refuses the plugin commands that write, dry run or not.
    if has("conda-pypi") {
        let mut s = crate::mcp::Session::start_with(&conda, &[], &env);
        assert_eq!(
            s.call_error(
                "conda_pypi_install",
                json!({"packages": ["x"], "dry_run": true})
            ),
            exec_refusal("--allow-write and --allow-exec")
        );
    }
}
