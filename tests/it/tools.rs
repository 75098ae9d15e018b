//! The tool surface built from catalogs (pure): names, schemas, annotations, `_meta`,
//! validation errors, and the golden tool lists of the checked-in snapshots.

use ccm::model::catalog::{ActionKind, ExclusiveGroup, Nargs};
use ccm::tools::toolset::Toolset;
use serde_json::{Value, json};

use crate::support::{self, FIXTURE, REAL, argument, catalog, command};

fn real() -> Toolset {
    let snapshot = support::snapshot(REAL);
    support::toolset(&snapshot.catalog, &snapshot.plugins, true)
}

fn descriptor<'a>(tools: &'a Toolset, name: &str) -> &'a Value {
    &tools
        .get(name)
        .unwrap_or_else(|| panic!("no tool {name}"))
        .descriptor
}

fn schema<'a>(tools: &'a Toolset, name: &str) -> &'a Value {
    &descriptor(tools, name)["inputSchema"]
}

/// Validate an input against a tool; the error message or `Ok`.
pub(crate) fn validate(tools: &Toolset, name: &str, input: Value) -> Result<(), String> {
    tools
        .get(name)
        .unwrap()
        .validate(&input)
        .map_err(|e| e.to_string())
}

/// The tool lists, reviewed: `tools-<snapshot>.json` is the full listing (`--list-all`
/// with `--allow-exec`), `tools-<snapshot>-default.json` what a server with the default
/// policy lists, `tools-<snapshot>-core.json` the same under `--tools @core`.
#[test]
fn golden_tool_lists() {
    for stem in [REAL, FIXTURE] {
        let snapshot = support::snapshot(stem);
        let tools = support::toolset(&snapshot.catalog, &snapshot.plugins, true);
        let mut text = serde_json::to_string_pretty(&tools.descriptors()).unwrap();
        text.push('\n');
        support::golden(&format!("tools-{stem}.json"), &text);
        let listed = support::listed(
            &snapshot.catalog,
            &snapshot.plugins,
            Default::default(),
            false,
        );
        let mut text = serde_json::to_string_pretty(&listed).unwrap();
        text.push('\n');
        support::golden(&format!("tools-{stem}-default.json"), &text);
        let core = support::selected(
            &snapshot.catalog,
            &snapshot.plugins,
            Default::default(),
            false,
            Some("@core"),
        );
        let mut text = serde_json::to_string_pretty(&core).unwrap();
        text.push('\n');
        support::golden(&format!("tools-{stem}-core.json"), &text);
    }
}

/// Validators are compiled on a tool's first call, so nothing at startup proves that a
/// generated schema compiles: this does, for every tool of both snapshots, and shows that
/// the lazily compiled validator answers exactly as one compiled from the listed schema.
#[test]
fn every_schema_compiles_and_lazy_validation_matches() {
    use ccm::tools::schema::Validator;
    let inputs = [
        json!({}),
        json!({"no_such_property": true}),
        json!({"json": "yes"}),
        json!({"name": 7, "packages": ["-x"], "json": true}),
        json!({"argv": [1]}),
        json!({"argv": ["info"], "timeout_seconds": 1e9}),
        json!({"command_path": ["-x"]}),
        json!({"command_path": ["env", "list"]}),
    ];
    for stem in [REAL, FIXTURE] {
        let snapshot = support::snapshot(stem);
        let mut plugins = snapshot.plugins.clone();
        plugins.push(ccm::model::catalog::Plugin {
            distribution: "conda-completion".into(),
            entry_point: "completion".into(),
            hooks: vec!["conda_subcommands".into()],
            value: "conda_completion.plugin".into(),
            version: "0.3.2".into(),
        });
        let tools = support::toolset(&snapshot.catalog, &plugins, true);
        assert!(tools.generated.len() > 20, "{stem}");
        for tool in &tools.generated {
            let eager = Validator::new(&tool.descriptor["inputSchema"])
                .unwrap_or_else(|e| panic!("{stem} {}: {e}", tool.name));
            for input in &inputs {
                assert_eq!(tool.validate(input), eager.validate(input), "{}", tool.name);
            }
        }
        let execute = tools
            .execute
            .as_ref()
            .expect("allow_exec lists conda_execute");
        let eager = Validator::new(&execute["inputSchema"]).expect("conda_execute compiles");
        for input in &inputs {
            assert_eq!(tools.validate_execute(input), eager.validate(input));
        }
        let completion = tools
            .completion
            .as_ref()
            .expect("conda-completion is installed");
        let eager = Validator::new(&completion["inputSchema"]).expect("conda_cli_command compiles");
        for input in &inputs {
            assert_eq!(tools.validate_completion(input), eager.validate(input));
        }
    }
    assert!(
        validate(&real(), "conda_info", json!({"json": "yes"})).is_err(),
        "a wrong type is refused"
    );
}

#[test]
fn stock_conda_tool_names() {
    let tools = real();
    let names = tools.generated_names();
    for expected in [
        "conda_info",
        "conda_list",
        "conda_env_list",
        "conda_env_config_vars_set",
        "conda_install",
        "conda_run",
        "conda_check",
        "conda_doctor",
        "conda_remove",
        "conda_env_create",
        "conda_menuinst",
    ] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} missing from {names:?}"
        );
    }
    for absent in [
        "conda_uninstall",
        "conda_upgrade",
        "conda_execute",
        "conda_cli_command",
    ] {
        assert!(
            !names.iter().any(|n| n == absent),
            "{absent} must not be generated"
        );
    }
    // 33 terminal commands in stock conda 26.7.1 (with its required menuinst plugin).
    assert_eq!(names.len(), 33, "{names:?}");
    // conda_execute is listed first with --allow-exec, not at all without.
    assert_eq!(tools.descriptors()[0]["name"], "conda_execute");
    let snapshot = support::snapshot(REAL);
    let closed = support::toolset(&snapshot.catalog, &snapshot.plugins, false);
    assert!(
        closed
            .descriptors()
            .iter()
            .all(|d| d["name"] != "conda_execute")
    );
    assert_eq!(closed.descriptors().len(), names.len());
}

#[test]
fn titles_meta_and_descriptions() {
    let tools = real();
    assert_eq!(
        descriptor(&tools, "conda_env_create")["title"],
        "conda env create"
    );
    assert_eq!(
        descriptor(&tools, "conda_remove")["_meta"],
        json!({"conda-cli-mcp/path": ["remove"], "conda-cli-mcp/aliases": [{"command": "remove", "aliases": ["uninstall"]}]})
    );
    assert_eq!(
        descriptor(&tools, "conda_search")["_meta"]["conda-cli-mcp/hidden_arguments"],
        json!(["match_spec"])
    );
    for name in [
        "conda_install",
        "conda_create",
        "conda_update",
        "conda_env_create",
        "conda_env_update",
    ] {
        let d = descriptor(&tools, name);
        assert!(
            d["description"]
                .as_str()
                .unwrap()
                .ends_with(" May modify environments or files."),
            "{name}"
        );
        assert_eq!(
            d["annotations"],
            json!({"readOnlyHint": false, "destructiveHint": true, "idempotentHint": false, "openWorldHint": true}),
            "{name}"
        );
    }
    let run = descriptor(&tools, "conda_run")["description"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        run.ends_with(" Runs an arbitrary subprocess command.") && !run.contains("May modify"),
        "{run}"
    );
}

#[test]
fn annotations() {
    let tools = real();
    assert_eq!(
        descriptor(&tools, "conda_info")["annotations"],
        json!({"readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false})
    );
    for name in ["conda_search", "conda_notices"] {
        let a = &descriptor(&tools, name)["annotations"];
        assert_eq!(
            (a["readOnlyHint"].as_bool(), a["openWorldHint"].as_bool()),
            (Some(true), Some(true)),
            "{name}"
        );
    }
    for name in [
        "conda_config",
        "conda_doctor",
        "conda_check",
        "conda_export",
        "conda_env_export",
    ] {
        assert_eq!(
            descriptor(&tools, name)["annotations"]["destructiveHint"],
            true,
            "{name}"
        );
    }
    for d in tools.descriptors() {
        assert_eq!(d["outputSchema"]["required"].as_array().unwrap().len(), 10);
        assert_eq!(d["inputSchema"]["type"], "object");
        assert_eq!(d["inputSchema"]["additionalProperties"], false);
    }
}

#[test]
fn schema_properties_follow_argparse() {
    let tools = real();
    for tool in &tools.generated {
        let props = &tool.descriptor["inputSchema"]["properties"];
        assert_eq!(props["verbose"]["type"], "integer", "{}", tool.name);
        assert_eq!(props["verbose"]["minimum"], 0);
        assert_eq!(props["no_plugins"]["type"], "boolean", "{}", tool.name);
        for hidden in ["debug", "trace"] {
            assert!(
                props.get(hidden).is_none(),
                "{} exposes {hidden}",
                tool.name
            );
        }
    }
    let info = &schema(&tools, "conda_info")["properties"];
    assert_eq!(
        info["json"]["type"], "boolean",
        "the hidden root --json takes no id"
    );
    assert!(info.get("json_2").is_none());
    assert_eq!(
        info["verbose_2"]["type"], "integer",
        "a subcommand's own -v is verbose_2"
    );
    // Hidden positional carrying the main input is exposed.
    let search = &schema(&tools, "conda_search")["properties"]["match_spec"];
    assert_eq!(search["anyOf"][0]["type"], "string");
    assert_eq!(search["anyOf"][0]["pattern"], "^(?!-)");
    // REMAINDER: no pattern, required.
    let run = schema(&tools, "conda_run");
    assert_eq!(run["properties"]["executable_call"]["type"], "array");
    assert!(
        run["properties"]["executable_call"]["items"]
            .get("pattern")
            .is_none()
    );
    assert!(
        run["required"]
            .as_array()
            .unwrap()
            .contains(&json!("executable_call"))
    );
    // nargs='*' positionals are optional; their items reject option-like values.
    let install = schema(&tools, "conda_install");
    assert_eq!(
        install["properties"]["packages"]["items"]["pattern"],
        "^(?!-)"
    );
    assert!(install.get("required").is_none(), "{install}");
    // Counts and arrays are bounded.
    assert_eq!(info["verbose"]["maximum"], 16);
    assert_eq!(install["properties"]["channel"]["maxItems"], 1024);
    assert_eq!(
        install["properties"]["channel"]["items"]["maxLength"],
        32768
    );
}

#[test]
fn validation_errors_name_path_and_keyword_never_the_value() {
    let tools = real();
    let cases = [
        (
            "conda_info",
            json!({"bogus": 1}),
            "Invalid arguments at $: unexpected property 'bogus'",
        ),
        (
            "conda_info",
            json!({"json": "yes"}),
            "Invalid arguments at $.json: must be of type boolean",
        ),
        (
            "conda_list",
            json!({"regex": "-secret"}),
            "Invalid arguments at $.regex: must not start with '-'",
        ),
        (
            "conda_list",
            json!({"name": "a", "prefix": "/x"}),
            "Invalid arguments at $: 'name' conflicts with 'prefix' (conda allows only one of them)",
        ),
        (
            "conda_info",
            json!({"verbose": 100000000}),
            "Invalid arguments at $.verbose: must be at most 16",
        ),
        (
            "conda_info",
            json!({"verbose": -1}),
            "Invalid arguments at $.verbose: must be at least 0",
        ),
        (
            "conda_install",
            json!({"packages": ["ok", "bad\u{0}secret"]}),
            "Invalid arguments at $.packages[1]: NUL characters are not allowed",
        ),
        (
            "conda_run",
            json!({}),
            "Invalid arguments at $: missing required property 'executable_call'",
        ),
        (
            "conda_info",
            json!({"console": "secret"}),
            "Invalid arguments at $.console: must be one of: classic, json",
        ),
        (
            "conda_menuinst",
            json!({}),
            "Invalid arguments at $: one of 'install', 'remove' is required",
        ),
        (
            "conda_list",
            json!({"regex": "x".repeat(40000)}),
            "Invalid arguments at $.regex: must have at most 32768 characters",
        ),
    ];
    for (tool, input, expected) in cases {
        let error = validate(&tools, tool, input).unwrap_err();
        assert!(error.starts_with(expected), "{tool}: {error}");
        assert!(
            !error.contains("secret") && !error.contains("/x"),
            "{error}"
        );
    }
    assert_eq!(
        validate(&tools, "conda_info", json!({"json": true, "verbose": 2})),
        Ok(())
    );
    assert_eq!(
        validate(&tools, "conda_install", json!({"name": "t1"})),
        Ok(()),
        "packages may be omitted"
    );
}

// ---------------------------------------------------------------------------------------
// Synthetic catalogs

#[test]
fn required_group_with_only_hidden_members_is_raw_only_not_an_invalid_schema() {
    let mut a = argument("a", &["--a"], ActionKind::StoreTrue, Nargs::Exactly(0));
    a.hidden = true;
    let mut b = argument("b", &["--b"], ActionKind::StoreTrue, Nargs::Exactly(0));
    b.hidden = true;
    let mut broken = command(Some("broken"), vec![a, b], vec![]);
    broken.exclusive_groups = vec![ExclusiveGroup {
        members: vec!["a".into(), "b".into()],
        required: true,
    }];
    let fine = command(Some("fine"), vec![], vec![]);
    let tools = support::toolset(&catalog(vec![broken, fine]), &[], false);
    assert_eq!(tools.generated_names(), ["conda_fine"]);
    assert_eq!(tools.diagnostics.len(), 1);
    assert_eq!(tools.diagnostics[0].path, ["broken"]);
    assert_eq!(
        tools.diagnostics[0].reason,
        "required exclusive group has no visible members"
    );
}

#[test]
fn reserved_and_colliding_names_are_disambiguated() {
    let execute = command(Some("execute"), vec![], vec![]);
    let env_list = command(Some("env_list"), vec![], vec![]);
    let mut env = command(
        Some("env"),
        vec![],
        vec![command(Some("list"), vec![], vec![])],
    );
    env.terminal = false;
    let tools = support::toolset(&catalog(vec![execute, env_list, env]), &[], true);
    let names = tools.generated_names();
    assert!(
        names[0].starts_with("conda_execute_") && names[0].len() == "conda_execute_".len() + 10
    );
    assert_eq!(
        names[1..],
        ["conda_env_list_721d4da264", "conda_env_list_80a49d854a"]
    );
    let listed: Vec<_> = tools
        .descriptors()
        .iter()
        .map(|d| d["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(listed.iter().filter(|n| *n == "conda_execute").count(), 1);
}

#[test]
fn greedy_plugin_parsers_get_a_passthrough_array_and_need_exec() {
    let mut mcp = command(Some("mcp"), vec![], vec![]);
    mcp.passthrough = true;
    let tools = support::toolset(&catalog(vec![mcp]), &[], false);
    let d = descriptor(&tools, "conda_mcp");
    assert_eq!(
        d["inputSchema"]["properties"]["args"]["description"],
        "Arguments passed unchanged to the plugin command."
    );
    assert_eq!(
        d["inputSchema"]["properties"]["args"]["items"]["type"],
        "string"
    );
    let class = tools.get("conda_mcp").unwrap().class;
    assert!(class.requires_write && class.requires_exec);
}

#[test]
fn unsupported_commands_and_their_descendants_get_no_tool() {
    let mut parent = command(
        Some("legacy"),
        vec![],
        vec![command(Some("child"), vec![], vec![])],
    );
    parent.raw_only = true;
    let tools = support::toolset(
        &catalog(vec![parent, command(Some("ok"), vec![], vec![])]),
        &[],
        false,
    );
    assert_eq!(tools.generated_names(), ["conda_ok"]);
}

#[test]
fn completion_tool_is_listed_for_any_spelling_of_conda_completion() {
    let plugin = |name: &str| ccm::model::catalog::Plugin {
        distribution: name.into(),
        version: "0.3.2".into(),
        entry_point: "conda-completion".into(),
        value: "conda_completion.plugin".into(),
        hooks: vec![],
    };
    for name in ["conda-completion", "conda_completion", "Conda.Completion"] {
        let tools = support::toolset(&catalog(vec![]), &[plugin(name)], true);
        let names: Vec<_> = tools
            .descriptors()
            .iter()
            .map(|d| d["name"].clone())
            .collect();
        assert_eq!(
            names,
            [json!("conda_execute"), json!("conda_cli_command")],
            "{name}"
        );
    }
    let tools = support::toolset(&catalog(vec![]), &[plugin("conda-completer")], false);
    assert!(tools.descriptors().is_empty());
}

/// JSON paths of integer schemas without both a `minimum` and a `maximum`.
fn unbounded_integers(value: &Value, path: &str, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            let integer = match map.get("type") {
                Some(Value::String(t)) => t == "integer",
                Some(Value::Array(types)) => types.iter().any(|t| t == "integer"),
                _ => false,
            };
            if integer && !(map.contains_key("minimum") && map.contains_key("maximum")) {
                out.push(path.to_owned());
            }
            for (key, v) in map {
                unbounded_integers(v, &format!("{path}/{key}"), out);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                unbounded_integers(v, &format!("{path}/{i}"), out);
            }
        }
        _ => {}
    }
}

fn assert_integers_bounded(toolset: &Toolset) {
    let descriptors = Value::Array(toolset.descriptors());
    let mut out = Vec::new();
    unbounded_integers(&descriptors, "", &mut out);
    assert!(out.is_empty(), "unbounded integers: {out:?}");
    // The check sees integers at all: argument values, counts and the output schema.
    let text = descriptors.to_string();
    assert!(text.contains("\"exit_code\""));
    assert!(text.contains("\"duration_ms\""));
}

#[test]
fn every_integer_in_every_listed_schema_is_bounded() {
    for stem in [REAL, FIXTURE] {
        let snapshot = support::snapshot(stem);
        assert_integers_bounded(&support::toolset(
            &snapshot.catalog,
            &snapshot.plugins,
            true,
        ));
    }
    // The fixture's `tune --level` (type=int with choices) and `extra --level` (type=int).
    let fixture = support::snapshot(FIXTURE);
    let tools = support::toolset(&fixture.catalog, &fixture.plugins, true).descriptors();
    let tune = tools.iter().find(|t| t["name"] == "conda_tune").unwrap();
    let level = &tune["inputSchema"]["properties"]["level"];
    assert_eq!(level["type"], "integer", "{level}");
    assert_eq!(level["minimum"], json!(ccm::tools::schema::MIN_INTEGER));
    assert_eq!(level["maximum"], json!(ccm::tools::schema::MAX_INTEGER));
}

/// With plugins (`conda index --threads` is a plain `type=int`), too.
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_every_integer_is_bounded() {
    let found = support::real_discovery();
    assert_integers_bounded(&support::toolset(&found.catalog, &found.plugins, true));
}
