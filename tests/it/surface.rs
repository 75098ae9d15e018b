//! The operator's tool surface over stdio: hidden tools, every override kind, collisions.

use serde_json::{Value, json};

use crate::mcp::{Session, structured};
use crate::support;

fn names(tools: &[Value]) -> Vec<String> {
    tools
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn hidden_tools_are_unlisted_but_callable() {
    let mut s = Session::start_with(
        &support::fixture().conda,
        &[],
        &[(
            "CCM_HIDDEN_TOOLS",
            "conda_info, conda_install,conda_not_a_tool",
        )],
    );
    let listed = names(&s.tools());
    assert!(
        !listed
            .iter()
            .any(|n| n == "conda_info" || n == "conda_install")
    );
    assert!(listed.iter().any(|n| n == "conda_list"), "{listed:?}");
    // Callable by name, validated, and judged by the policy as before.
    let info = s.call("conda_info", json!({"json": true}));
    assert_eq!(structured(&info)["exit_code"], 0);
    assert_eq!(s.call_error("conda_info", json!({"bogus": 1})).0, -32602);
    // A hidden tool keeps its policy-shaped schema: only dry runs without --allow-write;
    // a call outside it is the policy's refusal, saying what the form offers.
    let (code, message) = s.call_error("conda_install", json!({"packages": ["x"]}));
    assert_eq!(code, -32600);
    assert!(
        message.starts_with("Operation requires --allow-write. Here: only dry runs")
            && message.ends_with(
                "The operator sets --allow-write in the client's MCP server configuration."
            ),
        "{message}"
    );
    let stderr = s.stderr.lock().unwrap().clone();
    assert!(
        stderr.contains("CCM_HIDDEN_TOOLS: no tool named 'conda_not_a_tool'"),
        "{stderr}"
    );
}

#[test]
fn every_override_kind() {
    let mut s = Session::start_with(
        &support::fixture().conda,
        &["--list-all"],
        &[
            ("CCM_MCP_TOOL_CONDA_INFO_NAME", "about_conda"),
            ("CCM_MCP_TOOL_CONDA_INFO_TITLE", "About this conda"),
            (
                "CCM_MCP_TOOL_CONDA_INFO_DESCRIPTION",
                "Describes the conda install.",
            ),
            (
                "CCM_MCP_TOOL_CONDA_INFO_PARAM_JSON_DESCRIPTION",
                "Answer in JSON.",
            ),
            ("CCM_MCP_TOOL_CONDA_INFO_PARAM_ENVS_DESCRIPTION", ""),
            // A tool name with '-': every character outside [A-Za-z0-9] becomes '_'.
            ("CCM_MCP_TOOL_CONDA_SHELL_IN_TITLE", "Shell in"),
            ("CCM_MCP_TOOL_CONDA_LIST_DESCRIPTION", ""),
        ],
    );
    let tools = s.tools();
    let listed = names(&tools);
    assert!(!listed.iter().any(|n| n == "conda_info"), "{listed:?}");
    let info = tools.iter().find(|t| t["name"] == "about_conda").unwrap();
    assert_eq!(info["title"], "About this conda");
    assert_eq!(info["description"], "Describes the conda install.");
    let schema = &info["inputSchema"];
    assert_eq!(
        schema["properties"]["json"]["description"],
        "Answer in JSON."
    );
    assert!(schema["properties"].get("envs").is_none(), "{schema}");
    assert!(schema["properties"].get("base").is_some());
    assert_eq!(schema["additionalProperties"], true);
    let shell = tools
        .iter()
        .find(|t| t["name"] == "conda_shell-in")
        .unwrap();
    assert_eq!(shell["title"], "Shell in");
    let list = tools.iter().find(|t| t["name"] == "conda_list").unwrap();
    assert!(list.get("description").is_none(), "{list}");
    assert_eq!(list["inputSchema"]["additionalProperties"], false);
    // The served name routes; the canonical one no longer does.
    let result = s.call("about_conda", json!({"json": true}));
    assert_eq!(structured(&result)["exit_code"], 0);
    support::assert_unknown_tool(s.call_error("conda_info", json!({})), "conda_info", &[]);
    // The hidden parameter is still accepted, and compiled: `info --envs --json` prints
    // the environments instead of the info document.
    let result = s.call("about_conda", json!({"envs": true, "json": true}));
    let parsed = &structured(&result)["parsed_json"];
    assert!(
        parsed.get("envs_details").is_some() && parsed.get("conda_version").is_none(),
        "{result}"
    );
    // The listed schema admits more than the server accepts: unknown fields stay -32602.
    let (code, message) = s.call_error("about_conda", json!({"bogus": 1}));
    assert_eq!(code, -32602);
    assert!(message.contains("bogus"), "{message}");
}

/// Run ccm over stdio with `env`, keep stdin open, and wait (bounded) for it to exit:
/// (status, stderr); it prints nothing on stdout.
fn run_until_exit(env: &[(&str, &str)]) -> (Option<i32>, String) {
    let mut command = support::ccm();
    command
        .arg("--conda-exe")
        .arg(&support::fixture().conda)
        .envs(env.iter().copied());
    let (code, stdout, stderr) = crate::kit::exit::serve_until_exit(command);
    assert!(stdout.is_empty(), "{stdout}");
    (code, stderr)
}

#[test]
fn a_name_colliding_with_a_discovered_tool_stops_the_server() {
    let (code, stderr) = run_until_exit(&[("CCM_MCP_TOOL_CONDA_ENV_LIST_NAME", "conda_info")]);
    assert_eq!(code, Some(2), "{stderr}");
    let line = stderr
        .lines()
        .find(|l| l.starts_with("ccm: error:"))
        .unwrap_or_else(|| panic!("{stderr}"));
    assert_eq!(
        line,
        "ccm: error: tool name collision: conda_env_list (renamed by \
         CCM_MCP_TOOL_CONDA_ENV_LIST_NAME) and the tool conda_info would both be served as \
         'conda_info'; choose another name"
    );
    // Swapping two names is no collision.
    let mut s = Session::start_with(
        &support::fixture().conda,
        &[],
        &[
            ("CCM_MCP_TOOL_CONDA_ENV_LIST_NAME", "conda_info"),
            ("CCM_MCP_TOOL_CONDA_INFO_NAME", "conda_env_list"),
        ],
    );
    let listed = s.call("conda_info", json!({"json": true}));
    assert!(
        structured(&listed)["parsed_json"].get("envs").is_some(),
        "conda_info now runs `conda env list`: {listed}"
    );
}

#[test]
fn override_errors_known_at_startup_exit_at_once() {
    for (env, expected) in [
        (
            vec![
                ("CCM_MCP_TOOL_CONDA_INFO_NAME", "same"),
                ("CCM_MCP_TOOL_CONDA_LIST_NAME", "same"),
            ],
            "ccm: error: CCM_MCP_TOOL_CONDA_INFO_NAME and CCM_MCP_TOOL_CONDA_LIST_NAME give two \
             tools the same name 'same'",
        ),
        (
            vec![("CCM_MCP_TOOL_CONDA_INFO_NAME", "conda_execute")],
            "ccm: error: CCM_MCP_TOOL_CONDA_INFO_NAME: 'conda_execute' is reserved for the \
             server's own tool",
        ),
        (
            vec![("CCM_MCP_TOOL_CONDA_INFO_NAME", "has space")],
            "ccm: error: CCM_MCP_TOOL_CONDA_INFO_NAME: a tool name must be 1 to 48 characters \
             of A-Z, a-z, 0-9, '_', '-'",
        ),
        (
            vec![("CCM_MCP_TOOL_CONDA_INFO_NAME", "conda.info")],
            "ccm: error: CCM_MCP_TOOL_CONDA_INFO_NAME: a tool name must be 1 to 48 characters \
             of A-Z, a-z, 0-9, '_', '-'",
        ),
        (
            vec![(
                "CCM_MCP_TOOL_CONDA_INFO_NAME",
                "a_name_of_forty_nine_characters_is_one_too_many__",
            )],
            "ccm: error: CCM_MCP_TOOL_CONDA_INFO_NAME: a tool name must be 1 to 48 characters \
             of A-Z, a-z, 0-9, '_', '-'",
        ),
        (
            vec![("CCM_MCP_TOOL_CONDA_INFO_SUMMARY", "x")],
            "ccm: error: CCM_MCP_TOOL_CONDA_INFO_SUMMARY: unknown tool override; use \
             CCM_MCP_TOOL_<TOOL>_NAME, _TITLE, _DESCRIPTION or _PARAM_<PARAM>_DESCRIPTION",
        ),
    ] {
        let output = support::ccm()
            .arg("--conda-exe")
            .arg(&support::fixture().conda)
            .envs(env.iter().copied())
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2));
        assert_eq!(
            String::from_utf8(output.stderr).unwrap(),
            format!("{expected}\n")
        );
    }
}
