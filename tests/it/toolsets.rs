//! Toolsets (`--tools`, `CCM_TOOLS`), folded commands and tools left out of the listing,
//! over stdio with the fixture conda (and a real conda with plugins).

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};

use crate::mcp::{Session, structured};
use crate::support;

/// `conda_execute` with an argv whose command is not selected.
const NOT_SELECTED: &str = "Operation names a command whose tool is not selected (see --tools)";

fn not_selected() -> String {
    support::refused(NOT_SELECTED, "--tools")
}
const GROUPS: &str = "@core, @read, @envs, @packages, @config, @plugin:NAME, @all";

fn names(tools: &[Value]) -> Vec<String> {
    let mut names: Vec<String> = tools
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    names
}

fn sorted(names: &[&str]) -> Vec<String> {
    let mut out: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
    out.sort();
    out
}

/// `@core` on the fixture conda (it has no `conda env export`).
const FIXTURE_CORE: &[&str] = &[
    "conda_clean",
    "conda_config",
    "conda_create",
    "conda_env_create",
    "conda_env_list",
    "conda_env_remove",
    "conda_info",
    "conda_install",
    "conda_list",
    "conda_remove",
    "conda_run",
    "conda_search",
    "conda_update",
];

/// `@core` minus what the default policy admits no call of (`env create`, `run`), sorted.
pub(crate) fn core_by_default() -> Vec<&'static str> {
    FIXTURE_CORE
        .iter()
        .copied()
        .filter(|n| !["conda_env_create", "conda_run"].contains(n))
        .collect()
}

#[test]
fn core_lists_only_its_tools_and_nothing_else_is_callable() {
    let mut all = Session::start(
        &support::fixture().conda,
        &["--tools", "@core", "--allow-write", "--allow-exec"],
    );
    assert_eq!(names(&all.tools()), sorted(FIXTURE_CORE));
    // With the default policy, the selected tools it admits no call of are not listed,
    // yet routed: a call gets the policy's refusal.
    let mut s = Session::start(&support::fixture().conda, &["--tools", "@core"]);
    assert_eq!(names(&s.tools()), sorted(&core_by_default()));
    assert_eq!(
        s.call_error(
            "conda_run",
            json!({"name": "base", "executable_call": ["true"]})
        ),
        (
            -32600,
            support::refused("Operation requires --allow-exec", "--allow-exec")
        )
    );
    let info = s.call("conda_info", json!({"json": true}));
    assert_eq!(structured(&info)["exit_code"], 0);
    // An unselected tool does not exist for the client, whatever it sends.
    for tool in [
        "conda_rename",
        "conda_tune",
        "conda_behave",
        "conda_execute",
    ] {
        support::assert_unknown_tool(s.call_error(tool, json!({})), tool, &[]);
    }
    // The policy still applies to the selected ones.
    let (code, message) = s.call_error("conda_install", json!({"packages": ["x"]}));
    assert_eq!(code, -32600);
    assert!(
        message.ends_with(
            "Anything else needs --allow-write. The operator sets --allow-write in the client's \
             MCP server configuration."
        ),
        "{message}"
    );
    let toolset = &s.capabilities()["toolset"];
    assert_eq!(toolset["tools"], json!(["@core"]), "{toolset}");
    assert_eq!(toolset["list_all"], false);
}

#[test]
fn the_variable_selects_when_the_flag_is_absent() {
    let mut s = Session::start_with(
        &support::fixture().conda,
        &[],
        &[("CCM_TOOLS", "conda_env_*, conda_info")],
    );
    let listed = names(&s.tools());
    assert!(listed.contains(&"conda_info".to_owned()), "{listed:?}");
    assert!(
        listed
            .iter()
            .all(|n| n == "conda_info" || n.starts_with("conda_env_")),
        "{listed:?}"
    );
    let mut s = Session::start_with(
        &support::fixture().conda,
        &["--tools", "conda_list"],
        &[("CCM_TOOLS", "conda_env_*, conda_info")],
    );
    assert_eq!(names(&s.tools()), ["conda_list"], "the flag wins");
}

#[test]
fn raw_argv_reaches_only_selected_commands() {
    let mut s = Session::start(
        &support::fixture().conda,
        &[
            "--allow-exec",
            "--tools",
            "conda_info,conda_env_list,conda_execute",
        ],
    );
    assert_eq!(
        names(&s.tools()),
        ["conda_env_list", "conda_execute", "conda_info"]
    );
    let run = |s: &mut Session, argv: &[&str]| s.call("conda_execute", json!({"argv": argv}));
    assert_eq!(
        structured(&run(&mut s, &["info", "--json"]))["exit_code"],
        0
    );
    assert_eq!(
        structured(&run(&mut s, &["--no-plugins", "env", "list", "--json"]))["exit_code"],
        0
    );
    // What an agent would try: other commands, abbreviations, aliases, options before
    // the command, a greedy plugin, nothing at all. Never echoed back.
    for argv in [
        vec!["env", "remove", "-n", "victim", "--yes"],
        vec!["env", "remov", "-n", "victim"],
        vec!["uninstall", "-n", "victim", "--all"],
        vec!["upgrade", "--all"],
        vec!["--no-plugins", "rename", "-n", "victim", "other"],
        vec!["-v", "--json", "tune"],
        vec!["sh-in"],
        vec!["passthru", "info"],
        vec!["env"],
        vec!["--version"],
        vec![],
    ] {
        assert_eq!(
            s.call_error("conda_execute", json!({"argv": argv})),
            (-32600, not_selected()),
            "{argv:?}"
        );
    }
}

/// Run `ccm` with these arguments until it exits (stdin kept open): (status, stderr).
fn exit_of(args: &[&str]) -> (Option<i32>, String) {
    let mut child = support::ccm()
        .arg("--conda-exe")
        .arg(&support::fixture().conda)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _stdin = child.stdin.take();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("ccm did not exit");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let output = child.wait_with_output().unwrap();
    assert!(output.stdout.is_empty() || args.contains(&"tools"));
    (
        status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn error_line(stderr: &str) -> &str {
    stderr
        .lines()
        .find(|l| l.starts_with("ccm: error:"))
        .unwrap_or_else(|| panic!("{stderr}"))
}

#[test]
fn unknown_groups_and_names_exit_2_with_the_groups() {
    // Syntax and unknown groups: at once, before discovery.
    let (code, stderr) = exit_of(&["--tools", "@core,@nope"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert_eq!(
        error_line(&stderr),
        format!("ccm: error: --tools: unknown group '@nope' (groups: {GROUPS})")
    );
    // Names are known after discovery: the server stops with status 2.
    for (spec, line) in [
        (
            "@core,conda_nope",
            format!(
                "ccm: error: --tools: 'conda_nope' selects no tool of this conda (see 'ccm tools' for the names; groups: {GROUPS})"
            ),
        ),
        (
            "conda_zz*",
            format!(
                "ccm: error: --tools: 'conda_zz*' selects no tool of this conda (see 'ccm tools' for the names; groups: {GROUPS})"
            ),
        ),
        (
            "@plugin:not-installed",
            format!(
                "ccm: error: --tools: @plugin:not-installed names no installed plugin distribution (installed: conda-fixture-hooks, conda-fixture-tools; groups: {GROUPS})"
            ),
        ),
        (
            "@plugin:conda_fixture_tools",
            format!(
                "ccm: error: --tools: @plugin:conda_fixture_tools: which commands this plugin adds is not in the policy's reviewed tables; select its tools by name or glob (groups: {GROUPS})"
            ),
        ),
    ] {
        for command in [&["--no-snapshot"][..], &[], &["tools"]] {
            let mut args = vec!["--tools", spec];
            args.extend_from_slice(command);
            let (code, stderr) = exit_of(&args);
            assert_eq!(code, Some(2), "{spec} {command:?}: {stderr}");
            assert_eq!(error_line(&stderr), line, "{spec} {command:?}");
        }
    }
}

#[test]
fn ccm_tools_shows_the_selection() {
    let output = support::ccm()
        .arg("--conda-exe")
        .arg(&support::fixture().conda)
        .args(["tools", "--json", "--tools", "@core"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let rows = report["tools"].as_array().unwrap();
    // Every selected tool has a row; those the default policy admits no call of are not
    // listed, and the total counts the listed ones.
    assert_eq!(names(rows), sorted(FIXTURE_CORE));
    let listed: Vec<Value> = rows
        .iter()
        .filter(|r| r["listed"] == true)
        .cloned()
        .collect();
    assert_eq!(names(&listed), sorted(&core_by_default()));
    assert_eq!(report["total"]["tools"], listed.len());
}

/// A plugin that registers one command under two names, and a launcher command.
const TWIN_PLUGIN: &str = "\
from conda.plugins import hookimpl
from conda.plugins.types import CondaSubcommand

def configure(parser):
    sub = parser.add_subparsers(dest='cmd', required=True)
    show = sub.add_parser('show', help='Show a thing.')
    show.add_argument('--json', action='store_true', help='Print JSON.')
    show.add_argument('name', help='The thing.')
    drop = sub.add_parser('drop', help='Drop a thing.')
    drop.add_argument('name', help='The thing.')

def run(args):
    print('twin', args.cmd, args.name)
    return 0

@hookimpl
def conda_subcommands():
    yield CondaSubcommand(name='twinset', summary='Manage twins.', action=run, configure_parser=configure)
    yield CondaSubcommand(name='tw', summary=\"Shorthand for 'conda twinset'.\", action=run, configure_parser=configure)
    yield CondaSubcommand(name='mcp', summary='Start an MCP server.', action=lambda args: 0)
";

#[test]
fn commands_under_two_names_are_listed_once_and_launchers_not_at_all() {
    let fixture = support::build_fixture(&[]);
    fixture.add_plugin("twin-plugin", TWIN_PLUGIN);
    let mut s = Session::start(
        &fixture.conda,
        &[
            "--classify",
            "conda_tw_show=read",
            "--classify",
            "conda_twinset_show=read",
        ],
    );
    let tools = s.tools();
    let listed = names(&tools);
    assert!(
        listed.contains(&"conda_twinset_show".to_owned()),
        "{listed:?}"
    );
    for unlisted in ["conda_tw_show", "conda_tw_drop", "conda_mcp"] {
        assert!(
            !listed.contains(&unlisted.to_owned()),
            "{unlisted} in {listed:?}"
        );
    }
    let show = tools
        .iter()
        .find(|t| t["name"] == "conda_twinset_show")
        .unwrap();
    assert_eq!(
        show["_meta"]["conda-cli-mcp/alias_tools"],
        json!(["conda_tw_show"])
    );
    // The folded name is still callable, and runs its own command.
    let result = s.call("conda_tw_show", json!({"name": "x"}));
    assert_eq!(structured(&result)["exit_code"], 0, "{result}");
    assert_eq!(structured(&result)["stdout"], "twin show x\n");
    let capabilities = s.capabilities();
    let toolset = &capabilities["toolset"];
    assert_eq!(
        toolset["folded"]["conda_tw_drop"], "conda_twinset_drop",
        "{toolset}"
    );
    let mcp = toolset["left_out"]
        .as_array()
        .unwrap()
        .iter()
        .find(|entry| entry["tool"] == "conda_mcp")
        .unwrap_or_else(|| panic!("{toolset}"));
    assert!(mcp["reason"].as_str().unwrap().contains("launcher"));

    // Selecting either name selects both; the listing shows the longer one.
    // (An unreviewed plugin's commands need every flag to be listed.)
    let mut s = Session::start(
        &fixture.conda,
        &["--tools", "conda_tw_*", "--allow-write", "--allow-exec"],
    );
    assert_eq!(
        names(&s.tools()),
        ["conda_twinset_drop", "conda_twinset_show"]
    );
    assert_eq!(s.call_error("conda_info", json!({})).0, -32602);

    // --list-all: today's full listing.
    let mut s = Session::start(&fixture.conda, &["--list-all"]);
    let listed = names(&s.tools());
    for name in ["conda_tw_show", "conda_twinset_show", "conda_mcp"] {
        assert!(
            listed.contains(&name.to_owned()),
            "{name} not in {listed:?}"
        );
    }
    let show = s
        .tools()
        .into_iter()
        .find(|t| t["name"] == "conda_twinset_show")
        .unwrap();
    assert!(
        show["_meta"].get("conda-cli-mcp/alias_tools").is_none(),
        "{show}"
    );
    assert_eq!(s.capabilities()["toolset"]["folded"], json!({}));
}

#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_toolsets_folding_and_left_out_tools() {
    let conda = support::real_conda();
    let found = support::real_discovery();
    let has = |name: &str| {
        found
            .plugins
            .iter()
            .any(|p| ccm::model::catalog::normalize_distribution(&p.distribution) == name)
    };
    // With every grant, the policy lists every tool: what is left unlisted is folding's
    // and leaving out's doing.
    let mut s = Session::start(&conda, &["--allow-write", "--allow-exec"]);
    let listed = names(&s.tools());
    let toolset = s.capabilities()["toolset"].clone();
    let left_out: Vec<&str> = toolset["left_out"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["tool"].as_str().unwrap())
        .collect();
    for name in ["conda_activate", "conda_deactivate", "conda_init"] {
        assert!(!listed.contains(&name.to_owned()), "{name} listed");
        assert!(left_out.contains(&name), "{name}: {toolset}");
    }
    // Left out, yet callable; the policy still decides.
    let result = s.call("conda_deactivate", json!({}));
    assert!(structured(&result).get("exit_code").is_some(), "{result}");

    // Raw argv reaches only the selected commands, however it is spelled.
    let mut raw = Session::start(
        &conda,
        &[
            "--allow-exec",
            "--allow-write",
            "--tools",
            "conda_info,conda_execute",
        ],
    );
    let ok = raw.call("conda_execute", json!({"argv": ["info", "--json"]}));
    assert_eq!(structured(&ok)["exit_code"], 0, "{ok}");
    for argv in [
        vec!["env", "remove", "-n", "victim", "--yes"],
        vec!["env", "remov", "-n", "victim", "--yes"],
        vec!["uninstall", "-n", "victim", "--all", "--yes"],
        vec!["--no-plugins", "remove", "-n", "victim", "--all", "--yes"],
        vec!["-v", "config", "--set", "channel_priority", "strict"],
        vec!["run", "-n", "base", "true"],
        vec![],
    ] {
        assert_eq!(
            raw.call_error("conda_execute", json!({"argv": argv})),
            (-32600, not_selected()),
            "{argv:?}"
        );
    }
    drop(raw);

    let mut core = Session::start(
        &conda,
        &["--tools", "@core", "--allow-write", "--allow-exec"],
    );
    let mut expected = FIXTURE_CORE.to_vec();
    expected.push("conda_env_export");
    assert_eq!(names(&core.tools()), sorted(&expected));
    drop(core);

    if has("conda-cli-mcp") {
        assert!(!listed.contains(&"conda_mcp".to_owned()), "{listed:?}");
        assert!(left_out.contains(&"conda_mcp"), "{toolset}");
    }
    if has("conda-workspaces") {
        let tools = s.tools();
        assert!(
            !listed.iter().any(|n| n.starts_with("conda_ws_")),
            "{listed:?}"
        );
        let init = tools
            .iter()
            .find(|t| t["name"] == "conda_workspace_init")
            .expect("conda_workspace_init listed");
        assert_eq!(
            init["_meta"]["conda-cli-mcp/alias_tools"],
            json!(["conda_ws_init"])
        );
        let folded = toolset["folded"].as_object().unwrap();
        let ws_tools = support::toolset(&found.catalog, &found.plugins, false)
            .generated_names()
            .into_iter()
            .filter(|n| n == "conda_ws" || n.starts_with("conda_ws_"))
            .count();
        assert_eq!(folded.len(), ws_tools, "every ws tool: {toolset}");
        assert!(
            folded
                .iter()
                .all(|(alias, listed)| alias.starts_with("conda_ws")
                    && *listed == alias.replacen("conda_ws", "conda_workspace", 1)),
            "{toolset}"
        );
        // The folded name still routes (and reaches its own command).
        let result = s.call("conda_ws_list", json!({}));
        assert!(structured(&result).get("exit_code").is_some(), "{result}");
        let mut plugin = Session::start(&conda, &["--tools", "@plugin:conda-workspaces"]);
        let selected = names(&plugin.tools());
        assert!(!selected.is_empty());
        assert!(
            selected
                .iter()
                .all(|n| n.starts_with("conda_workspace") || n.starts_with("conda_task")),
            "{selected:?}"
        );
        assert!(
            selected.contains(&"conda_task_list".to_owned()),
            "{selected:?}"
        );
        support::assert_unknown_tool(
            plugin.call_error("conda_info", json!({})),
            "conda_info",
            &[],
        );
        // Both names callable under the selection.
        let result = plugin.call("conda_ws_list", json!({}));
        assert!(structured(&result).get("exit_code").is_some(), "{result}");
    }
}

/// Every offered protocol revision sees the same selection: the handshake revisions after
/// `initialize`, and 2026-07-28 with the revision in each request's `_meta`.
#[test]
fn the_selection_is_the_same_under_every_revision() {
    let args = ["--allow-exec", "--tools", "@core,conda_execute"];
    // `env create` needs --allow-write: not listed under --allow-exec alone.
    let mut expected: Vec<&str> = FIXTURE_CORE
        .iter()
        .copied()
        .filter(|n| *n != "conda_env_create")
        .collect();
    expected.push("conda_execute");
    for revision in ["2024-11-05", "2025-06-18", "2025-11-25", "2026-07-28"] {
        let (mut s, meta) = Session::at_revision(&support::fixture().conda, revision, &args);
        let listed = s.request("tools/list", json!({"_meta": meta}));
        let tools = listed["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("{revision}: {listed}"));
        assert_eq!(names(tools), sorted(&expected), "{revision}");
        let call = |s: &mut Session, name: &str, arguments: Value| {
            s.request(
                "tools/call",
                json!({"name": name, "arguments": arguments, "_meta": meta}),
            )
        };
        let unselected = call(&mut s, "conda_rename", json!({}));
        assert_eq!(
            unselected["error"]["code"], -32602,
            "{revision}: {unselected}"
        );
        // The closest listed tools, never an unselected one.
        let unknown = unselected["error"]["message"].as_str().unwrap();
        assert!(
            unknown.starts_with("Unknown tool; ") && unknown.contains("conda_remove"),
            "{revision}: {unknown}"
        );
        assert!(!unknown.contains("conda_rename"), "{revision}: {unknown}");
        let raw = call(&mut s, "conda_execute", json!({"argv": ["tune"]}));
        if revision < "2025-11-25" {
            assert_eq!(raw["error"]["code"], -32600, "{revision}: {raw}");
            assert_eq!(raw["error"]["message"], not_selected());
            assert_eq!(raw["error"]["data"]["reason"], "tool_not_selected");
        } else {
            assert_eq!(raw["result"]["isError"], true, "{revision}: {raw}");
            assert_eq!(
                raw["result"]["content"][0]["text"],
                format!("tool_not_selected: {}", not_selected()),
                "{revision}: {raw}"
            );
            assert_eq!(
                raw["result"]["_meta"]["conda-cli-mcp/refused"]["reason"],
                "tool_not_selected"
            );
            assert_eq!(raw["result"].get("structuredContent"), None);
        }
        let info = call(&mut s, "conda_info", json!({"json": true}));
        assert_eq!(
            info["result"]["structuredContent"]["exit_code"], 0,
            "{revision}: {info}"
        );
    }
}
