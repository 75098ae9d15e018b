//! Live discovery: the fixture conda's catalog field by field, failure diagnostics,
//! isolation of the helper, and the same suite against a real conda (CCM_TEST_CONDA).

use std::path::Path;

use ccm::model::catalog::{ActionKind, Argument, Command, Nargs, ValueType};
use serde_json::json;

use crate::support;

fn child<'a>(node: &'a Command, path: &[&str]) -> &'a Command {
    let mut node = node;
    for part in path {
        node = node
            .children
            .iter()
            .find(|c| c.name.as_deref() == Some(*part))
            .unwrap_or_else(|| panic!("no command {part} in {path:?}"));
    }
    node
}

fn fixture_root() -> &'static Command {
    support::fixture_discovery()
        .catalog
        .root
        .as_ref()
        .expect("fixture catalog has a root")
}

/// (id, flags, action, nargs, value_type, required, hidden, choices)
type Row<'a> = (
    &'a str,
    &'a [&'a str],
    ActionKind,
    Nargs,
    ValueType,
    bool,
    bool,
    &'a [&'a str],
);

type Projection = (
    String,
    Vec<String>,
    ActionKind,
    Nargs,
    ValueType,
    bool,
    bool,
    Vec<String>,
);

fn rows(command: &Command) -> Vec<Projection> {
    command
        .arguments
        .iter()
        .map(|a| {
            (
                a.id.clone(),
                a.flags.clone(),
                a.action,
                a.nargs,
                a.value_type,
                a.required,
                a.hidden,
                a.choices.clone(),
            )
        })
        .collect()
}

fn expect_rows(command: &Command, expected: &[Row]) {
    let expected: Vec<_> = expected
        .iter()
        .map(|(id, flags, action, nargs, vt, req, hidden, choices)| {
            (
                id.to_string(),
                flags.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
                *action,
                *nargs,
                *vt,
                *req,
                *hidden,
                choices.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            )
        })
        .collect();
    assert_eq!(rows(command), expected, "arguments of {:?}", command.name);
}

use ActionKind::*;
use ValueType::{Integer, Number, String as Str};

#[test]
fn fixture_is_discovered_with_one_helper_process() {
    let found = support::fixture_discovery();
    assert_eq!(
        found.processes, 1,
        "the shebang interpreter should be used directly"
    );
    assert_eq!(found.catalog.conda_version, "0.99.0");
    assert_eq!(found.catalog.prog, "conda");
    let interpreter = found.interpreter.as_ref().unwrap();
    assert!(
        interpreter.starts_with(&support::fixture().prefix),
        "{interpreter:?}"
    );
}

#[test]
fn fixture_root_and_command_tree() {
    let root = fixture_root();
    assert_eq!(root.name, None);
    assert!(!root.terminal, "the root's subparsers are required");
    expect_rows(
        root,
        &[
            (
                "verbose",
                &["-v", "--verbose"],
                Count,
                Nargs::Exactly(0),
                Str,
                false,
                false,
                &[],
            ),
            (
                "debug",
                &["--debug"],
                StoreTrue,
                Nargs::Exactly(0),
                Str,
                false,
                true,
                &[],
            ),
            (
                "trace",
                &["--trace"],
                StoreTrue,
                Nargs::Exactly(0),
                Str,
                false,
                true,
                &[],
            ),
            (
                "json",
                &["--json"],
                StoreTrue,
                Nargs::Exactly(0),
                Str,
                false,
                true,
                &[],
            ),
            (
                "no_plugins",
                &["--no-plugins"],
                StoreTrue,
                Nargs::Exactly(0),
                Str,
                false,
                false,
                &[],
            ),
        ],
    );
    let names: Vec<_> = root
        .children
        .iter()
        .map(|c| c.name.clone().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "clean", "config", "create", "env", "info", "install", "legacy", "list", "remove",
            "rename", "run", "search", "tune", "update", "doctor", "behave", "passthru", "pkg",
            "shell-in"
        ]
    );
    // Aliases are metadata of the canonical command.
    assert_eq!(child(root, &["remove"]).aliases, ["uninstall"]);
    assert_eq!(child(root, &["update"]).aliases, ["upgrade"]);
    assert_eq!(child(root, &["shell-in"]).aliases, ["sh-in"]);
    // One-line help from the parent, long description from the parser.
    let rename = child(root, &["rename"]);
    assert_eq!(
        rename.help.as_deref(),
        Some("Rename an existing environment.")
    );
    assert!(rename.summary.is_some());
    // Optional subparsers keep a command terminal; required ones do not.
    for path in [&["env"][..], &["env", "config"], &["env", "config", "vars"]] {
        assert!(
            child(root, path).terminal,
            "{path:?} has optional subcommands"
        );
    }
    assert!(!child(root, &["pkg"]).terminal);
    let set = child(root, &["env", "config", "vars", "set"]);
    assert!(set.terminal && set.children.is_empty());
    expect_rows(
        set,
        &[
            ("vars", &[], Store, Nargs::ZeroOrMore, Str, true, false, &[]),
            (
                "name",
                &["-n", "--name"],
                Store,
                Nargs::One,
                Str,
                false,
                false,
                &[],
            ),
            (
                "prefix",
                &["-p", "--prefix"],
                Store,
                Nargs::One,
                Str,
                false,
                false,
                &[],
            ),
        ],
    );
    assert_eq!(set.exclusive_groups.len(), 1);
    assert_eq!(set.exclusive_groups[0].members, ["name", "prefix"]);
    assert!(!set.exclusive_groups[0].required);
    // A greedy plugin parser.
    let passthru = child(root, &["passthru"]);
    assert!(passthru.passthrough && passthru.arguments.is_empty() && passthru.terminal);
}

#[test]
fn fixture_every_action_kind() {
    let tune = child(fixture_root(), &["tune"]);
    expect_rows(
        tune,
        &[
            (
                "fast",
                &["--fast"],
                StoreConst,
                Nargs::Exactly(0),
                Str,
                false,
                false,
                &[],
            ),
            (
                "safe",
                &["--safe"],
                StoreConst,
                Nargs::Exactly(0),
                Str,
                false,
                false,
                &[],
            ),
            (
                "tag_a",
                &["--tag-a"],
                AppendConst,
                Nargs::Exactly(0),
                Str,
                false,
                false,
                &[],
            ),
            (
                "tag_b",
                &["--tag-b"],
                AppendConst,
                Nargs::Exactly(0),
                Str,
                false,
                false,
                &[],
            ),
            (
                "letters",
                &["--letters"],
                Extend,
                Nargs::One,
                Str,
                false,
                false,
                &[],
            ),
            (
                "items",
                &["--items"],
                Extend,
                Nargs::OneOrMore,
                Str,
                false,
                false,
                &[],
            ),
            (
                "size",
                &["--size"],
                Store,
                Nargs::Exactly(2),
                Str,
                false,
                false,
                &[],
            ),
            (
                "names",
                &["--names"],
                Store,
                Nargs::OneOrMore,
                Str,
                false,
                false,
                &[],
            ),
            (
                "color",
                &["--color"],
                Store,
                Nargs::Optional,
                Str,
                false,
                false,
                &["auto", "always", "never"],
            ),
            (
                "format",
                &["--format"],
                Store,
                Nargs::One,
                Str,
                false,
                false,
                &["json", "yaml", "text"],
            ),
            (
                "level",
                &["--level"],
                Store,
                Nargs::One,
                Integer,
                false,
                false,
                &["0", "1", "2", "3"],
            ),
            (
                "ratio",
                &["--ratio"],
                Store,
                Nargs::One,
                Number,
                false,
                false,
                &[],
            ),
            (
                "target",
                &["--target"],
                Store,
                Nargs::One,
                Str,
                true,
                false,
                &[],
            ),
            (
                "secret",
                &["--secret"],
                Store,
                Nargs::One,
                Str,
                false,
                true,
                &[],
            ),
            (
                "label",
                &["--label"],
                Store,
                Nargs::One,
                Str,
                false,
                false,
                &[],
            ),
            ("pair", &[], Store, Nargs::Exactly(2), Str, true, false, &[]),
        ],
    );
    let color = &tune.arguments[8];
    assert_eq!(color.const_value, json!("auto"));
    assert_eq!(color.default, json!("never"));
    assert_eq!(tune.arguments[10].default, json!(1));
    assert_eq!(tune.arguments[6].metavar, ["WIDTH", "HEIGHT"]);
    assert_eq!(
        tune.arguments[13].help, None,
        "hidden arguments carry no help"
    );
    // BooleanOptionalAction, lazy choices, extend_const, remainder, hidden positional.
    let list = child(fixture_root(), &["list"]);
    let urls = list
        .arguments
        .iter()
        .find(|a| a.id == "show_channel_urls")
        .unwrap();
    assert_eq!(urls.action, Boolean);
    assert_eq!(
        urls.flags,
        ["--show-channel-urls", "--no-show-channel-urls"]
    );
    let install = child(fixture_root(), &["install"]);
    let solver = install.arguments.iter().find(|a| a.id == "solver").unwrap();
    assert_eq!(
        (
            solver.action,
            solver.choices.clone(),
            solver.dynamic_choices
        ),
        (Store, vec!["classic".to_owned()], true)
    );
    let packages = install
        .arguments
        .iter()
        .find(|a| a.id == "packages")
        .unwrap();
    assert_eq!(
        (packages.action, packages.nargs, packages.required),
        (Store, Nargs::ZeroOrMore, true)
    );
    let clean = child(fixture_root(), &["clean"]);
    let tempfiles = clean
        .arguments
        .iter()
        .find(|a| a.id == "tempfiles")
        .unwrap();
    assert_eq!(
        (tempfiles.action, tempfiles.nargs),
        (ExtendConst, Nargs::ZeroOrMore)
    );
    let run = child(fixture_root(), &["run"]);
    let call = run
        .arguments
        .iter()
        .find(|a| a.id == "executable_call")
        .unwrap();
    assert_eq!((call.nargs, call.required), (Nargs::Remainder, true));
    let search = child(fixture_root(), &["search"]);
    let spec = search
        .arguments
        .iter()
        .find(|a| a.id == "match_spec")
        .unwrap();
    assert!(spec.hidden && spec.is_positional() && spec.nargs == Nargs::Optional);
    assert_eq!(spec.default, json!("*"));
    // A required exclusive group.
    let rename = child(fixture_root(), &["rename"]);
    assert_eq!(rename.exclusive_groups.len(), 1);
    assert!(rename.exclusive_groups[0].required);
    // A plugin parser that re-declares options: ids are unique per parser.
    let pkg_install = child(fixture_root(), &["pkg", "install"]);
    let ids: Vec<_> = pkg_install
        .arguments
        .iter()
        .map(|a| a.id.as_str())
        .collect();
    assert_eq!(
        ids,
        ["name", "prefix", "json", "verbose", "dry_run", "packages"]
    );
}

#[test]
fn fixture_unsupported_action_is_a_diagnostic_not_a_drop() {
    let found = support::fixture_discovery();
    let legacy = child(fixture_root(), &["legacy"]);
    assert!(legacy.raw_only);
    // The supported arguments are still recorded.
    assert!(legacy.arguments.iter().any(|a| a.id == "quick"));
    assert_eq!(
        found.catalog.diagnostics.len(),
        1,
        "{:?}",
        found.catalog.diagnostics
    );
    let d = &found.catalog.diagnostics[0];
    assert_eq!(d.path, ["legacy"]);
    assert_eq!(d.reason, "unsupported argparse action");
    assert_eq!(
        d.action_type.as_deref(),
        Some("conda.cli.main_legacy.DefineAction")
    );
    assert!(d.blocking);
}

#[test]
fn fixture_plugin_inventory_and_fingerprint() {
    let found = support::fixture_discovery();
    let plugins: Vec<_> = found
        .plugins
        .iter()
        .map(|p| {
            (
                p.distribution.as_str(),
                p.version.as_str(),
                p.entry_point.as_str(),
                p.value.as_str(),
                p.hooks.clone(),
            )
        })
        .collect();
    assert_eq!(
        plugins,
        [
            (
                "conda-fixture-tools",
                "1.0.0",
                "fixture-tools",
                "conda_fixture_tools.plugin",
                vec![
                    "conda_post_commands".to_owned(),
                    "conda_settings".into(),
                    "conda_subcommands".into()
                ]
            ),
            (
                "conda_fixture_hooks",
                "0.3.1",
                "fixture-hooks",
                "conda_fixture_hooks.plugin",
                vec!["conda_pre_commands".to_owned(), "conda_settings".into()]
            ),
        ]
    );
    assert_eq!(
        found.fingerprint(),
        ccm::model::catalog::discovery_fingerprint("0.99.0", &found.plugins)
    );
    // Discovery is deterministic.
    let again = support::discover(&support::fixture().conda);
    assert_eq!(again.catalog, found.catalog);
    assert_eq!(again.fingerprint(), found.fingerprint());
}

#[test]
fn a_plugin_printing_to_stdout_cannot_break_discovery() {
    let fixture = support::build_fixture(&[]);
    fixture.add_plugin(
        "noisy-plugin",
        "import os, sys\nprint('{\"not\": \"the catalog\"}')\nsys.stdout.flush()\nos.write(1, b'raw bytes on fd 1\\n')\n\
         from conda.plugins import hookimpl\nfrom conda.plugins.types import CondaSubcommand\n\
         @hookimpl\ndef conda_subcommands():\n    yield CondaSubcommand(name='noisy', summary='Noisy.', action=lambda args: 0)\n",
    );
    let found = support::discover(&fixture.conda);
    assert!(
        found
            .catalog
            .diagnostics
            .iter()
            .all(|d| d.path != Vec::<String>::new()),
        "{:?}",
        found.catalog.diagnostics
    );
    let root = found.catalog.root.as_ref().unwrap();
    assert!(
        root.children
            .iter()
            .any(|c| c.name.as_deref() == Some("noisy"))
    );
    assert!(
        found
            .plugins
            .iter()
            .any(|p| p.distribution == "noisy-plugin")
    );
}

#[test]
fn a_large_plugin_set_is_discovered_intact() {
    // 30 plugins, each adding a command with 40 options: far more than 1 MiB of catalog.
    let fixture = support::build_fixture(&["--no-plugins"]);
    for i in 0..30 {
        let options: String = (0..40)
            .map(|j| {
                format!(
                    "    p.add_argument('--option-{j}-{}', help='{}')\n",
                    "x".repeat(20),
                    "Help text. ".repeat(60)
                )
            })
            .collect();
        fixture.add_plugin(&format!("bulk-plugin-{i}"),
            &format!(
                "from conda.plugins import hookimpl\nfrom conda.plugins.types import CondaSubcommand\n\
                 def configure(p):\n{options}\
                 @hookimpl\ndef conda_subcommands():\n    yield CondaSubcommand(name='bulk{i}', summary='Bulk {i}.', action=lambda a: 0, configure_parser=configure)\n"
            ),
        );
    }
    let found = support::discover(&fixture.conda);
    let size = serde_json::to_string(&found.catalog).unwrap().len();
    assert!(size > 1 << 20, "catalog is only {size} bytes");
    let root = found.catalog.root.as_ref().unwrap();
    let bulk = root
        .children
        .iter()
        .filter(|c| c.name.as_deref().is_some_and(|n| n.starts_with("bulk")))
        .count();
    assert_eq!(bulk, 30);
    assert_eq!(found.plugins.len(), 30);
}

fn write_script(path: &Path, body: &str) {
    std::fs::write(path, body).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn reasons(found: &ccm::host::discovery::Discovery) -> Vec<String> {
    found
        .catalog
        .diagnostics
        .iter()
        .map(|d| d.reason.clone())
        .collect()
}

#[test]
fn failures_become_fixed_diagnostics() {
    let dir = tempfile::tempdir().unwrap();
    // Interpreter missing: the entry script names a python that does not exist.
    let conda = dir.path().join("bin/conda");
    std::fs::create_dir_all(conda.parent().unwrap()).unwrap();
    write_script(&conda, "#!/nonexistent/python\nimport sys\n");
    let found = support::discover(&conda);
    assert_eq!(
        reasons(&found),
        [
            "conda info could not start: it does not exist, or the interpreter its #! line names does not exist"
        ]
    );
    assert!(found.catalog.root.is_none());
    assert_eq!(found.catalog.conda_version, "unknown");
    assert_eq!(found.catalog.diagnostics[0].path, Vec::<String>::new());
    assert_eq!(
        found.fingerprint(),
        "6f80ebe3e1cef5d43607204bc92ca714b0ddd72ce3d1e884be25609c1460f1b4"
    );

    // A conda that exits non-zero for `info --json` and an interpreter that cannot import it.
    let fake = dir.path().join("bin/python");
    write_script(&fake, "#!/bin/sh\nexit 4\n");
    write_script(&conda, &format!("#!{}\n", fake.display()));
    let found = support::discover(&conda);
    assert_eq!(reasons(&found), ["conda info exited with status 4"]);
}

#[test]
fn invalid_output_and_version_mismatch_are_diagnostics() {
    let fixture = support::build_fixture(&[]);
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let fake = bin.join("python");
    let conda = bin.join("conda");
    write_script(&conda, &format!("#!{}\n", fake.display()));
    // Helper runs (`-I ...`) print garbage; `conda info --json` names this interpreter.
    write_script(
        &fake,
        &format!(
            "#!/bin/sh\nif [ \"$1\" = -I ]; then echo 'garbage'; exit 0; fi\n\
             echo '{{\"conda_version\": \"0.99.0\", \"sys.executable\": \"{}\"}}'\n",
            fake.display()
        ),
    );
    let found = support::discover(&conda);
    assert_eq!(
        reasons(&found),
        ["conda catalog discovery returned invalid JSON: SyntaxError"]
    );
    assert_eq!(found.catalog.conda_version, "0.99.0");

    // The helper crashes (a traceback on stderr, exit 1); conda info works.
    write_script(
        &fake,
        &format!(
            "#!/bin/sh\nif [ \"$1\" = -I ]; then echo 'Traceback (most recent call last):' >&2; exit 1; fi\n\
             echo '{{\"conda_version\": \"0.99.0\", \"sys.executable\": \"{}\"}}'\n",
            fake.display()
        ),
    );
    let found = support::discover(&conda);
    assert_eq!(
        reasons(&found),
        ["conda catalog discovery exited with status 1"]
    );

    // The helper reports 0.99.0 (the real fixture interpreter), conda info says 9.9.9.
    let real_python = fixture.prefix.join("bin/python");
    write_script(
        &fake,
        &format!(
            "#!/bin/sh\nif [ \"$1\" = -I ]; then exec {} \"$@\"; fi\n\
             echo '{{\"conda_version\": \"9.9.9\", \"sys.executable\": \"{}\"}}'\n",
            real_python.display(),
            fake.display()
        ),
    );
    let found = support::discover(&conda);
    assert_eq!(
        reasons(&found),
        ["conda catalog discovery reported a different conda version"]
    );
}

#[test]
fn helper_timeout_is_a_diagnostic() {
    let fixture = support::build_fixture(&[]);
    fixture.add_plugin("slow-plugin", "import time\ntime.sleep(60)\n");
    let target = ccm::host::target::Conda::resolve(fixture.conda.clone());
    let started = std::time::Instant::now();
    let found = support::runtime().block_on(ccm::host::discovery::discover(
        &support::executions(),
        &target,
        std::time::Duration::from_secs(2),
    ));
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
    let reasons = reasons(&found);
    assert_eq!(reasons.len(), 1, "{reasons:?}");
    assert!(
        reasons[0] == "conda catalog discovery timed out" || reasons[0] == "conda info timed out",
        "{reasons:?}"
    );
}

#[test]
fn helper_ignores_the_servers_python_environment() {
    // A PYTHONPATH with a module named like conda's must not shadow the target's.
    let shadow = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(shadow.path().join("conda")).unwrap();
    std::fs::write(
        shadow.path().join("conda/__init__.py"),
        "raise ImportError('shadowed')\n",
    )
    .unwrap();
    let output = support::ccm()
        .args(["discover", "--conda-exe"])
        .arg(&support::fixture().conda)
        .env("PYTHONPATH", shadow.path())
        .current_dir(shadow.path())
        .output()
        .unwrap();
    assert!(output.status.success());
    let doc: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        doc["catalog"]["diagnostics"].as_array().unwrap().len(),
        1,
        "only the fixture's own diagnostic"
    );
    assert_eq!(doc["conda_version"], "0.99.0");
}

#[test]
fn discover_command_prints_sorted_deterministic_json() {
    let run = || {
        support::ccm()
            .args(["discover", "--conda-exe"])
            .arg(&support::fixture().conda)
            .output()
            .unwrap()
    };
    let first = run();
    assert!(first.status.success());
    assert_eq!(first.stdout, run().stdout, "two runs print the same bytes");
    let doc: serde_json::Value = serde_json::from_slice(&first.stdout).unwrap();
    let keys: Vec<_> = doc.as_object().unwrap().keys().cloned().collect();
    assert_eq!(
        keys,
        [
            "catalog",
            "conda_version",
            "discovery_fingerprint",
            "plugins",
            "target_executable"
        ]
    );
    assert_eq!(doc["target_executable"], json!(support::fixture().conda));
    let pretty = support::ccm()
        .args(["discover", "--pretty", "--conda-exe"])
        .arg(&support::fixture().conda)
        .output()
        .unwrap();
    let reparsed: serde_json::Value = serde_json::from_slice(&pretty.stdout).unwrap();
    assert_eq!(reparsed, doc);
    assert!(pretty.stdout.len() > first.stdout.len());
}

// ---------------------------------------------------------------------------------------
// Real conda (CCM_TEST_CONDA)

#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_catalog() {
    let conda = support::real_conda();
    let found = support::real_discovery();
    assert!(
        found.catalog.conda_version.starts_with("26."),
        "{}",
        found.catalog.conda_version
    );
    assert!(
        found.catalog.diagnostics.is_empty(),
        "{:?}",
        found.catalog.diagnostics
    );
    let commands: Vec<String> = found
        .catalog
        .commands()
        .into_iter()
        .map(|(_, p)| p.join(" "))
        .collect();
    assert!(commands.len() >= 30, "{commands:?}");
    for expected in [
        "info",
        "list",
        "create",
        "install",
        "env create",
        "env config vars set",
    ] {
        assert!(commands.iter().any(|c| c == expected), "{expected} missing");
    }
    assert_eq!(found.processes, 1, "one helper process in the common case");
    let again = support::discover(&conda);
    assert_eq!(again.fingerprint(), found.fingerprint());
    assert_eq!(again.catalog, found.catalog);
}

#[test]
fn argument_exposure_rule() {
    let hidden_option = Argument {
        id: "debug".into(),
        dest: "debug".into(),
        flags: vec!["--debug".into()],
        action: StoreTrue,
        nargs: Nargs::Exactly(0),
        value_type: Str,
        required: false,
        choices: vec![],
        dynamic_choices: false,
        metavar: vec![],
        help: None,
        hidden: true,
        default: json!(null),
        const_value: json!(true),
    };
    assert!(!hidden_option.is_exposed());
    let required = Argument {
        required: true,
        ..hidden_option.clone()
    };
    assert!(required.is_exposed());
    let positional = Argument {
        flags: vec![],
        ..hidden_option
    };
    assert!(positional.is_exposed());
}
