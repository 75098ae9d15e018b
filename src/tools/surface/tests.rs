use super::*;
use serde_json::{Map, json};

fn tool(name: &str, params: &[&str], required: &[&str]) -> Value {
    let properties: Map<String, Value> = params
        .iter()
        .map(|p| {
            (
                (*p).to_owned(),
                json!({"type": "string", "description": format!("{p} help")}),
            )
        })
        .collect();
    json!({
        "name": name,
        "title": format!("title of {name}"),
        "description": format!("about {name}"),
        "inputSchema": {"type": "object", "properties": properties, "required": required,
                        "additionalProperties": false},
    })
}

fn tools() -> Vec<Value> {
    vec![
        tool("conda_execute", &["argv"], &["argv"]),
        tool("conda_info", &["json", "envs"], &[]),
        tool("conda_shell-in", &["shell"], &[]),
        tool("conda_env_list", &["json"], &[]),
        tool("conda_install", &["packages", "dry_run"], &["packages"]),
    ]
}

fn surface(vars: &[(&str, &str)]) -> Result<Surface, String> {
    Surface::from_env(vars.iter().copied()).map_err(|e| e.to_string())
}

fn names(list: &[Value]) -> Vec<&str> {
    list.iter().map(|d| d["name"].as_str().unwrap()).collect()
}

#[test]
fn env_keys() {
    assert_eq!(env_key("conda_shell-in"), "CONDA_SHELL_IN");
    assert_eq!(env_key("conda_a.b"), "CONDA_A_B");
    assert_eq!(env_key("dry_run"), "DRY_RUN");
}

#[test]
fn nothing_configured_changes_nothing() {
    let s = surface(&[("PATH", "/bin"), ("CCM_LOG", "debug")]).unwrap();
    assert!(s.is_empty());
    let applied = s.apply(tools()).unwrap();
    assert_eq!(Value::Array(applied.listed), Value::Array(tools()));
    assert!(applied.unlisted.is_empty() && applied.warnings.is_empty());
    assert_eq!(applied.routes["conda_info"], "conda_info");
}

#[test]
fn hidden_tools_are_routed_but_not_listed() {
    let s = surface(&[(HIDDEN_TOOLS_VAR, " conda_info, ,conda_nope,conda_shell-in")]).unwrap();
    let applied = s.apply(tools()).unwrap();
    assert_eq!(
        names(&applied.listed),
        ["conda_execute", "conda_env_list", "conda_install"]
    );
    assert_eq!(names(&applied.unlisted), ["conda_info", "conda_shell-in"]);
    assert_eq!(applied.routes["conda_info"], "conda_info");
    assert_eq!(applied.warnings.len(), 1);
    assert!(
        applied.warnings[0].contains("conda_nope"),
        "{:?}",
        applied.warnings
    );
}

#[test]
fn every_override_kind() {
    let s = surface(&[
        ("CCM_MCP_TOOL_CONDA_INFO_NAME", "about_conda"),
        ("CCM_MCP_TOOL_CONDA_INFO_TITLE", "About"),
        ("CCM_MCP_TOOL_CONDA_INFO_DESCRIPTION", "Says what conda is."),
        (
            "CCM_MCP_TOOL_CONDA_INFO_PARAM_JSON_DESCRIPTION",
            "Answer in JSON.",
        ),
        ("CCM_MCP_TOOL_CONDA_INFO_PARAM_ENVS_DESCRIPTION", ""),
        ("CCM_MCP_TOOL_CONDA_SHELL_IN_TITLE", ""),
        (HIDDEN_TOOLS_VAR, "conda_info"),
    ])
    .unwrap();
    let applied = s.apply(tools()).unwrap();
    assert!(applied.warnings.is_empty(), "{:?}", applied.warnings);
    let info = &applied.unlisted[0];
    assert_eq!(info["name"], "about_conda");
    assert_eq!(info["title"], "About");
    assert_eq!(info["description"], "Says what conda is.");
    let schema = &info["inputSchema"];
    assert_eq!(
        schema["properties"]["json"]["description"],
        "Answer in JSON."
    );
    assert!(schema["properties"].get("envs").is_none());
    assert_eq!(schema["additionalProperties"], true);
    assert_eq!(applied.routes["about_conda"], "conda_info");
    assert!(!applied.routes.contains_key("conda_info"));
    let shell = applied
        .listed
        .iter()
        .find(|d| d["name"] == "conda_shell-in")
        .unwrap();
    assert!(shell.get("title").is_none());
    // Untouched tools keep additionalProperties: false.
    assert_eq!(
        applied.listed[0]["inputSchema"]["additionalProperties"],
        false
    );
}

#[test]
fn hiding_a_required_parameter_drops_it_from_required() {
    let s = surface(&[("CCM_MCP_TOOL_CONDA_INSTALL_PARAM_PACKAGES_DESCRIPTION", "")]).unwrap();
    let applied = s.apply(tools()).unwrap();
    let install = applied
        .listed
        .iter()
        .find(|d| d["name"] == "conda_install")
        .unwrap();
    assert!(install["inputSchema"].get("required").is_none());
    assert_eq!(
        install["inputSchema"]["properties"],
        json!({"dry_run": {"type": "string", "description": "dry_run help"}})
    );
}

#[test]
fn startup_errors() {
    let err = |vars: &[(&str, &str)]| surface(vars).unwrap_err();
    assert!(err(&[("CCM_MCP_TOOL_CONDA_INFO_COLOR", "x")]).contains("unknown tool override"));
    assert!(err(&[("CCM_MCP_TOOL__NAME", "x")]).contains("names no tool"));
    assert!(err(&[("CCM_MCP_TOOL_CONDA_INFO_NAME", "")]).contains("1 to 48"));
    assert!(err(&[("CCM_MCP_TOOL_CONDA_INFO_NAME", "a b")]).contains("1 to 48"));
    // A dot or a 49th character would break some clients.
    assert!(err(&[("CCM_MCP_TOOL_CONDA_INFO_NAME", "conda.info")]).contains("1 to 48"));
    let long = "x".repeat(49);
    assert!(err(&[("CCM_MCP_TOOL_CONDA_INFO_NAME", &long)]).contains("1 to 48"));
    assert!(surface(&[("CCM_MCP_TOOL_CONDA_INFO_NAME", &long[..48])]).is_ok());
    let twice = err(&[
        ("CCM_MCP_TOOL_CONDA_INFO_NAME", "same"),
        ("CCM_MCP_TOOL_CONDA_LIST_NAME", "same"),
    ]);
    assert_eq!(
        twice,
        "CCM_MCP_TOOL_CONDA_INFO_NAME and CCM_MCP_TOOL_CONDA_LIST_NAME give two tools the same name 'same'"
    );
    assert!(err(&[("CCM_MCP_TOOL_CONDA_INFO_NAME", "conda_execute")]).contains("reserved"));
    // Renaming a reserved tool to its own name is fine.
    surface(&[("CCM_MCP_TOOL_CONDA_EXECUTE_NAME", "conda_execute")]).unwrap();
}

#[test]
fn collisions_with_discovered_tools() {
    let s = surface(&[("CCM_MCP_TOOL_CONDA_ENV_LIST_NAME", "conda_info")]).unwrap();
    let message = s.apply(tools()).unwrap_err().to_string();
    assert_eq!(
        message,
        "tool name collision: conda_env_list (renamed by CCM_MCP_TOOL_CONDA_ENV_LIST_NAME) and \
         the tool conda_info would both be served as 'conda_info'; choose another name"
    );
    // Swapping two names is fine.
    let s = surface(&[
        ("CCM_MCP_TOOL_CONDA_ENV_LIST_NAME", "conda_info"),
        ("CCM_MCP_TOOL_CONDA_INFO_NAME", "conda_env_list"),
    ])
    .unwrap();
    let applied = s.apply(tools()).unwrap();
    assert_eq!(applied.routes["conda_info"], "conda_env_list");
    assert_eq!(applied.routes["conda_env_list"], "conda_info");
}

#[test]
fn ambiguous_and_unknown_variables() {
    let mut list = tools();
    list.push(tool("conda_shell_in", &[], &[]));
    let s = surface(&[("CCM_MCP_TOOL_CONDA_SHELL_IN_TITLE", "x")]).unwrap();
    let message = s.apply(list).unwrap_err().to_string();
    assert!(message.contains("matches more than one"), "{message}");
    assert!(message.contains("conda_shell-in") && message.contains("conda_shell_in"));
    let s = surface(&[
        ("CCM_MCP_TOOL_CONDA_NOPE_TITLE", "x"),
        ("CCM_MCP_TOOL_CONDA_INFO_PARAM_NOPE_DESCRIPTION", "x"),
    ])
    .unwrap();
    let applied = s.apply(tools()).unwrap();
    assert_eq!(applied.warnings.len(), 2, "{:?}", applied.warnings);
}

#[test]
fn a_tool_named_like_a_parameter_override_is_ambiguous() {
    let mut list = tools();
    list.push(tool("conda_info_param_json", &[], &[]));
    let s = surface(&[("CCM_MCP_TOOL_CONDA_INFO_PARAM_JSON_DESCRIPTION", "x")]).unwrap();
    assert!(
        s.apply(list)
            .unwrap_err()
            .to_string()
            .contains("matches more than one")
    );
}
