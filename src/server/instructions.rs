//! The server's `instructions` (`initialize`, and `server/discover` for session-less
//! clients): for clients that defer tools and find them by name, description and these
//! lines. What the tools do (naming only tools this client is listed), the policy in
//! force, `ccm_cwd` for project-relative paths, and how to ask the operator for more — at
//! most [`LIMIT`] bytes: sentences are added in order of need while they fit.

use rmcp::model::Tool as McpTool;

use crate::config::Config;
use crate::tools::layout::WORKDIR;
use crate::tools::schema::clip;
use crate::tools::toolset::EXECUTE_TOOL;

/// Most bytes of the instructions.
pub(super) const LIMIT: usize = 1024;

/// Tools worth naming first, with what an agent asks them (named only when listed).
const STARTING_POINTS: &[(&str, &str)] = &[
    ("conda_info", "this conda"),
    ("conda_env_list", "its environments"),
    ("conda_list", "the packages of one"),
    ("conda_search", "packages in channels"),
];

/// The instructions for a client listed `listed`.
pub(super) fn text(config: &Config, listed: &[McpTool]) -> String {
    let names: Vec<&str> = listed.iter().map(|t| t.name.as_ref()).collect();
    let mut parts: Vec<String> = Vec::new();
    parts.push(format!(
        "Each conda command is one tool, conda_<command path>, whose parameters are conda's \
         options ({} listed).",
        names.len()
    ));
    parts.push(policy(config, names.contains(&EXECUTE_TOOL)));
    parts.push(format!(
        "Relative paths (an environment.yml, a prefix) resolve in {WORKDIR}: the working \
         directory, by default the client's first root, else the server's."
    ));
    parts.push(
        "A result that starts with needs_allow_write, needs_allow_exec, outside_write_envs or \
         another such word is the operator's setting: ask the user to change this server's \
         configuration in the client; retrying will not help."
            .to_owned(),
    );
    let starting: Vec<String> = STARTING_POINTS
        .iter()
        .filter(|(name, _)| names.contains(name))
        .map(|(name, what)| format!("{name} ({what})"))
        .collect();
    if !starting.is_empty() {
        parts.push(format!("Start with {}.", starting.join(", ")));
    }
    let planning: Vec<&str> = listed
        .iter()
        .filter(|t| dry_run_only(t))
        .map(|t| t.name.as_ref())
        .collect();
    if !planning.is_empty() {
        parts.push(format!(
            "{} plan without changing anything (dry_run: true).",
            planning.join(", ")
        ));
    }
    parts.push("Prefer json: true; conda's document is then in parsed_json.".to_owned());
    parts.push(
        "restart_required: true means the tool list is stale until the server restarts.".to_owned(),
    );
    let mut out = String::new();
    for part in parts {
        let extra = usize::from(!out.is_empty()) + part.len();
        if out.len() + extra > LIMIT {
            continue;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(&part);
    }
    out
}

/// The policy in force, in one or two sentences (`raw`: `conda_execute` is listed).
fn policy(config: &Config, raw: bool) -> String {
    let raw = if raw { ", conda_execute" } else { "" };
    let mut text = match (config.allow_write, config.allow_exec) {
        (false, false) => "Read-only server: writes (dry runs excepted) need --allow-write, \
                           conda run --allow-exec."
            .to_owned(),
        (true, false) => {
            "Writes are allowed; conda run and plugin passthrough need --allow-exec.".to_owned()
        }
        (false, true) => format!(
            "conda run{raw} and plugin passthrough are allowed; writes (dry runs excepted) \
             need --allow-write."
        ),
        (true, true) => format!(
            "Writes, conda run{raw} and plugin passthrough are allowed (--allow-write, \
             --allow-exec)."
        ),
    };
    if config.confirm_writes {
        text.push_str(
            " The user confirms each write first; declined_by_user means nothing ran, \
             plan_changed that the plan changed after they saw it and nothing ran (call again).",
        );
    }
    if let Some(scope) = &config.write_envs {
        let patterns = clip(&scope.patterns().join(", "), 200);
        text.push_str(&format!(
            " Writes and conda run only in environments matching {patterns} (--write-envs)."
        ));
    }
    text
}

/// Whether a listed tool admits only dry runs (its listed `dry_run` is the constant true).
fn dry_run_only(tool: &McpTool) -> bool {
    tool.input_schema
        .get("properties")
        .and_then(|p| p.get("dry_run"))
        .and_then(|d| d.get("const"))
        == Some(&serde_json::Value::Bool(true))
}
