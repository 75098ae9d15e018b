//! The client configurations of README.md and docs/clients.md, started as pasted (the
//! placeholder paths replaced by this build's `ccm` and a conda): each one serves, and
//! those for clients with tool limits stay within them. And README's "What an agent
//! sees", generated from a real call: stale, it fails; `UPDATE_GOLDEN=1` rewrites it.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use crate::mcp::Session;
use crate::support;

const CCM_PLACEHOLDER: &str = "/home/you/.cargo/bin/ccm";
const CONDA_PLACEHOLDER: &str = "/opt/conda/bin/conda";
/// The files with client configurations.
const FILES: [&str; 2] = ["README.md", "docs/clients.md"];

/// One server entry of a configuration.
struct Configuration {
    /// The bold label before the block (`**Cursor** (at most 40 tools; …)`).
    label: String,
    /// The server's key (`conda`): clients prefix tool names with it.
    key: String,
    server: Value,
}

/// Every server entry of every JSON block that configures a client (the TOML ones are
/// started by `tests/clients/readme.py`).
fn configurations() -> Vec<Configuration> {
    let mut out = Vec::new();
    for file in FILES {
        let text = std::fs::read_to_string(support::repo().join(file)).unwrap();
        let mut label = String::new();
        let mut lines = text.lines();
        while let Some(line) = lines.next() {
            if line.starts_with("**") || line.starts_with("## ") {
                label = format!("{file}: {line}");
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
    // README's one, and each client's two forms in docs/clients.md.
    assert!(configurations.len() >= 13, "the configurations");
    limited
}

#[test]
fn readme_configurations_start_as_pasted() {
    // A private fixture with the launcher installed, for `conda ccm`.
    let fixture = support::build_fixture(&[]);
    crate::launcher::install_plugin(&fixture);
    assert_eq!(
        check(&fixture.conda),
        6,
        "Cursor, Windsurf and VS Code state limits, each in two forms"
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

/// README's "What an agent sees" lies between these lines.
const SEES_BEGIN: &str =
    "<!-- what-an-agent-sees: generated by tests/it/readme.rs (UPDATE_GOLDEN=1 rewrites it) -->";
const SEES_END: &str = "<!-- end of what-an-agent-sees -->";
/// The call it shows: one that fails, offline, the same on every real conda 26.7.1.
const SEES_TOOL: &str = "conda_list";

/// JSON on as few lines as reads well: a value whose compact form fits in `width` is on
/// one line, otherwise one member per line.
fn render(value: &Value, indent: usize, width: usize) -> String {
    let compact = |v: &Value| {
        let text = serde_json::to_string(v).unwrap();
        // `{"a":1}` → `{"a": 1}`: the spacing of a pretty print, on one line.
        serde_json::to_string_pretty(v)
            .map(|pretty| {
                pretty
                    .lines()
                    .map(str::trim)
                    .collect::<Vec<_>>()
                    .join(" ")
                    .replace("[ ", "[")
                    .replace(" ]", "]")
                    .replace("{ ", "{")
                    .replace(" }", "}")
            })
            .unwrap_or(text)
    };
    let one_line = compact(value);
    if indent + one_line.len() <= width || !(value.is_object() || value.is_array()) {
        return one_line;
    }
    let pad = " ".repeat(indent + 2);
    let items: Vec<String> = match value {
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| {
                let key = serde_json::to_string(k).unwrap();
                format!("{pad}{key}: {}", render(v, indent + 2, width))
            })
            .collect(),
        Value::Array(items) => items
            .iter()
            .map(|v| format!("{pad}{}", render(v, indent + 2, width)))
            .collect(),
        _ => unreachable!(),
    };
    let (open, close) = if value.is_object() {
        ("{", "}")
    } else {
        ("[", "]")
    };
    format!(
        "{open}\n{}\n{}{close}",
        items.join(",\n"),
        " ".repeat(indent)
    )
}

/// The section as the call made it: the call, the argv conda got, the result with the
/// target's prefix written `/opt/conda` (and a text block that is `structuredContent`
/// as JSON shown as such, not twice).
fn what_an_agent_sees(arguments: &Value, argv: &[String], result: &Value, prefix: &str) -> String {
    let mut result = result.clone();
    let structured = result["structuredContent"].clone();
    for block in result["content"].as_array_mut().into_iter().flatten() {
        let text = block["text"].as_str().unwrap_or_default();
        if serde_json::from_str::<Value>(text).ok().as_ref() == Some(&structured) {
            block["text"] = json!("<structuredContent, as JSON text>");
        }
    }
    // The members in the order they come on the wire, then any others.
    let order = ["content", "structuredContent", "isError", "_meta"];
    let members: Vec<String> = order
        .iter()
        .filter(|k| result.get(**k).is_some())
        .map(|k| k.to_string())
        .chain(
            result
                .as_object()
                .unwrap()
                .keys()
                .filter(|k| !order.contains(&k.as_str()))
                .cloned(),
        )
        .map(|k| format!("  {}: {}", json!(k), render(&result[&k], 2, 90)))
        .collect();
    let text = format!("{{\n{}\n}}", members.join(",\n")).replace(prefix, "/opt/conda");
    format!(
        "{SEES_BEGIN}\n`{SEES_TOOL}` with `{}` runs `conda {}`:\n\n```json\n{text}\n```\n{SEES_END}",
        serde_json::to_string(arguments)
            .unwrap()
            .replace(',', ", ")
            .replace(':', ": "),
        argv.join(" ")
    )
}

/// `duration_ms` of a section's result, as the only part two runs may differ in.
fn masked(section: &str) -> String {
    section
        .lines()
        .map(|line| match line.find("\"duration_ms\": ") {
            Some(at) => format!("{}\"duration_ms\": N,", &line[..at]),
            None => line.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_readme_shows_what_an_agent_sees() {
    let conda = support::real_conda();
    let prefix = conda.parent().unwrap().parent().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let mut session = Session::start(&conda, &["--audit-log", audit.to_str().unwrap()]);
    // As an agent mostly meets the server: once its read zygote is ready (a call before
    // that runs cold and says so in `_meta`), so the section does not depend on timing.
    for _ in 0..900 {
        if session.capabilities()["warm"]["state"] == "ready" {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let arguments = json!({"name": "missing", "json": true});
    let result = session.call(SEES_TOOL, arguments.clone());
    drop(session);
    let line = std::fs::read_to_string(&audit).unwrap();
    let argv: Vec<String> =
        serde_json::from_value(serde_json::from_str::<Value>(&line).unwrap()["argv"].clone())
            .unwrap();
    let section = what_an_agent_sees(&arguments, &argv, &result, prefix.to_str().unwrap());
    let path = support::repo().join("README.md");
    let readme = std::fs::read_to_string(&path).unwrap();
    let (Some(begin), Some(end)) = (readme.find(SEES_BEGIN), readme.find(SEES_END)) else {
        panic!("README.md has no {SEES_BEGIN} … {SEES_END} section");
    };
    let shown = &readme[begin..end + SEES_END.len()];
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        let updated = readme.replacen(shown, &section, 1);
        std::fs::write(&path, updated).unwrap();
        return;
    }
    let (shown, section) = (masked(shown), masked(&section));
    if shown != section {
        let diff = similar::TextDiff::from_lines(&shown, &section)
            .unified_diff()
            .to_string();
        panic!(
            "README.md's \"What an agent sees\" is stale (README -> this run):\n{diff}\n\
             Review it, then regenerate it: UPDATE_GOLDEN=1 CCM_TEST_CONDA=… cargo test \
             --test integration -- --include-ignored real_conda_readme_shows"
        );
    }
}

/// The commands of README's first screen (its first `sh` block), without their comments.
fn first_screen_commands() -> Vec<String> {
    let text = std::fs::read_to_string(support::repo().join("README.md")).unwrap();
    let block = text
        .split("```sh\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("README.md has an sh block");
    block
        .lines()
        .map(|line| line.split(" # ").next().unwrap().trim().to_owned())
        .filter(|line| !line.is_empty())
        .collect()
}

/// The first screen installs, runs and tests: the install and the test are what CI runs
/// (`cargo test --workspace`; `scripts/build-dist` builds the release binary with
/// `--locked`), and the run works as pasted — here with the fixture as the conda on PATH.
#[test]
fn readme_first_screen_works_as_pasted() {
    let commands = first_screen_commands();
    assert_eq!(
        commands,
        [
            "cargo install --locked --path .",
            r#"ccm --conda-exe "$(command -v conda)" tools"#,
            "cargo test --workspace",
        ]
    );
    let fixture = support::fixture();
    let bin = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_ccm"), bin.path().join("ccm")).unwrap();
    let path = format!(
        "{}:{}:/usr/bin:/bin",
        bin.path().display(),
        fixture.conda.parent().unwrap().display()
    );
    let output = Command::new("sh")
        .args(["-c", &commands[1]])
        .env("PATH", path)
        .env_remove("CONDA_EXE")
        .env_remove("CCM_TOOLS")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{output:?}");
    assert!(
        stdout.lines().any(|l| l.starts_with("conda_info ")) && stdout.contains("total: "),
        "{stdout}"
    );
}
