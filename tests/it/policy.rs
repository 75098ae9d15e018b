//! The safety policy on final argv (pure): generated and raw argv, argparse-aware option
//! matching, dry runs, and the strict verdict for argv argparse would not accept.

use ccm::policy::{self, Classification, Origin};
use serde_json::json;

use crate::support::{self, REAL};

fn root() -> ccm::catalog::Command {
    support::snapshot(REAL).catalog.root.unwrap()
}

fn raw(argv: &[&str]) -> Classification {
    let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
    policy::classify(Some(&root()), &argv, Origin::Raw)
}

/// What a server started with `flags` says about a raw argv: `None` = allowed.
fn raw_refusal(argv: &[&str], allow_write: bool, allow_exec: bool) -> Option<String> {
    let missing = raw(argv).missing(allow_write, allow_exec);
    (!missing.is_empty()).then(|| Classification::refusal(&missing))
}

fn generated(tool: &str, input: serde_json::Value) -> Classification {
    let snapshot = support::snapshot(REAL);
    let tools = support::toolset(&snapshot.catalog, &snapshot.plugins, true);
    let tool = tools.get(tool).unwrap();
    tool.validator.validate(&input).unwrap();
    let argv = ccm::argv::compile(&tool.layout, input.as_object().unwrap()).unwrap();
    policy::classify(
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
        Classification::refusal(&install.missing(false, false)),
        "Operation requires --allow-write"
    );
    assert!(
        generated("conda_install", json!({"packages": ["x"], "dry_run": true}))
            .missing(false, false)
            .is_empty()
    );
    let run = generated("conda_run", json!({"executable_call": ["true"]}));
    assert_eq!(
        Classification::refusal(&run.missing(false, false)),
        "Operation requires --allow-exec"
    );
    assert!(
        run.missing(false, true).is_empty(),
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

#[test]
fn abbreviations_clusters_and_aliases() {
    for argv in [
        &["config", "--se", "a", "b"][..],
        &["export", "-fx"],
        &["config", "--show", "--set", "a", "b"],
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
    let c = policy::classify(None, &["info".to_owned()], Origin::Raw);
    assert!(c.requires_write && c.requires_exec);
}

#[test]
fn dry_run_exemption_needs_the_exact_option() {
    for argv in [
        &["install", "--dry-run", "x"][..],
        &["install", "-d", "x"],
        &["create", "-n", "t", "--dry-run"],
        &["env", "create", "-d"],
    ] {
        assert!(!raw(argv).requires_write, "{argv:?} is a dry run");
    }
    for argv in [
        &["install", "-yd", "x"][..],
        &["install", "--dry", "x"],
        &["install", "--file=--dry-run"],
        &["install", "x", "--", "--dry-run"],
        &["config", "--set", "a", "b", "--dry-run"],
    ] {
        assert!(raw(argv).requires_write, "{argv:?} is not a dry run");
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
    let info = policy::describe(&path(&["info"]), false);
    assert!(info.read_only && !info.open_world);
    let search = policy::describe(&path(&["search"]), false);
    assert!(search.read_only && search.open_world);
    for forced in [
        &["config"][..],
        &["doctor"],
        &["check"],
        &["export"],
        &["env", "export"],
    ] {
        assert!(
            policy::describe(&path(forced), false).requires_write,
            "{forced:?}"
        );
    }
    let plugin = policy::describe(&path(&["completion", "status"]), false);
    assert!(
        plugin.requires_write && plugin.open_world,
        "unknown plugin commands need --allow-write"
    );
    let opaque = policy::describe(&path(&["mcp"]), true);
    assert!(opaque.requires_write && opaque.requires_exec);
}
