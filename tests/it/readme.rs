//! The README's client configurations, started as pasted (the placeholder paths replaced
//! by this build's `ccm` and a conda): each one serves, and those for clients with tool
//! limits stay within them.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use crate::mcp::Session;
use crate::support;

const CCM_PLACEHOLDER: &str = "/home/you/.cargo/bin/ccm";
const CONDA_PLACEHOLDER: &str = "/opt/conda/bin/conda";

/// One server entry of a README configuration.
struct Configuration {
    /// The bold label before the block (`**Cursor** (at most 40 tools; …)`).
    label: String,
    /// The server's key (`conda`): clients prefix tool names with it.
    key: String,
    server: Value,
}

/// Every server entry of every JSON block that configures a client.
fn configurations() -> Vec<Configuration> {
    let text = std::fs::read_to_string(support::repo().join("README.md")).unwrap();
    let mut out = Vec::new();
    let mut label = String::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line.starts_with("**") {
            label = line.to_owned();
        }
        if line != "```json" {
            continue;
        }
        let block: String = lines
            .by_ref()
            .take_while(|l| *l != "```")
            .collect::<Vec<_>>()
            .join("\n");
        let Ok(document) = serde_json::from_str::<Value>(&block) else {
            continue; // an example result with elisions, not a configuration
        };
        let servers = document.get("mcpServers").or(document.get("servers"));
        for (key, server) in servers.and_then(Value::as_object).into_iter().flatten() {
            out.push(Configuration {
                label: label.clone(),
                key: key.clone(),
                server: server.clone(),
            });
        }
    }
    out
}

/// `at most N tools` in a label.
fn tool_limit(label: &str) -> Option<usize> {
    let at = label.find("at most ")? + "at most ".len();
    let rest = &label[at..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    rest[digits.len()..]
        .starts_with(" tools")
        .then(|| digits.parse().ok())?
}

/// Start one configuration against `conda` and list its tools.
fn start(configuration: &Configuration, conda: &Path, ccm_bin: &Path) -> Vec<Value> {
    let replace = |text: &str| {
        text.replace(CCM_PLACEHOLDER, ccm_bin.to_str().unwrap())
            .replace(CONDA_PLACEHOLDER, conda.to_str().unwrap())
    };
    let server = &configuration.server;
    let program = replace(server["command"].as_str().expect("a command"));
    let mut command = Command::new(program);
    for arg in server["args"].as_array().into_iter().flatten() {
        command.arg(replace(arg.as_str().expect("string arguments")));
    }
    command
        .env_remove("CONDA_EXE")
        .env_remove("CCM_LOG")
        .env_remove("CCM_TOOLS");
    // The launcher variant finds this build's ccm.
    command.env("CCM_BIN", ccm_bin);
    for (name, value) in server["env"].as_object().into_iter().flatten() {
        command.env(name, replace(value.as_str().unwrap()));
    }
    let mut session = Session::spawn_initialized(command);
    session.tools()
}

fn check(conda: &Path) -> usize {
    let ccm_bin = Path::new(env!("CARGO_BIN_EXE_ccm"));
    let configurations = configurations();
    let mut limited = 0;
    for configuration in &configurations {
        let tools = start(configuration, conda, ccm_bin);
        let label = &configuration.label;
        assert!(
            tools.iter().any(|t| t["name"] == "conda_info"),
            "{label}: {}",
            json!(tools.iter().map(|t| &t["name"]).collect::<Vec<_>>())
        );
        if let Some(limit) = tool_limit(label) {
            limited += 1;
            assert!(tools.len() <= limit, "{label}: {} tools", tools.len());
        }
        if label.contains("60 characters") {
            for tool in &tools {
                let name = tool["name"].as_str().unwrap();
                assert!(
                    configuration.key.len() + 1 + name.len() <= 60,
                    "{label}: {name}"
                );
            }
        }
    }
    assert!(configurations.len() >= 9, "the README's configurations");
    limited
}

#[test]
fn readme_configurations_start_as_pasted() {
    // A private fixture with the launcher installed, for `conda ccm`.
    let fixture = support::build_fixture(&[]);
    crate::launcher::install_plugin(&fixture);
    assert_eq!(
        check(&fixture.conda),
        3,
        "Cursor, Windsurf and VS Code state limits"
    );
}

#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_readme_configurations_fit_their_clients() {
    // The launcher variant needs the plugin in the conda: a private copy is not worth it
    // here (the launcher module proves `conda ccm` on a real conda); the others start.
    let conda = support::real_conda();
    let ccm_bin = Path::new(env!("CARGO_BIN_EXE_ccm"));
    let mut checked = 0;
    for configuration in configurations()
        .iter()
        .filter(|c| c.server["command"] == CCM_PLACEHOLDER)
    {
        let tools = start(configuration, &conda, ccm_bin);
        if let Some(limit) = tool_limit(&configuration.label) {
            assert!(
                tools.len() <= limit,
                "{}: {} tools",
                configuration.label,
                tools.len()
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 3);
}
