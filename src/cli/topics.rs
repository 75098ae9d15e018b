//! The help's topics and texts, and which flags each command takes: what `cli::flags`
//! builds the command line from and `cli::parse` checks a command's flags against.

pub(super) const ABOUT: &str =
    "Serve an installed conda's command line to AI agents as typed, policy-checked MCP tools.";
pub(super) const LONG_ABOUT: &str = "\
Serve an installed conda's whole command line (built-in and plugin commands) to MCP \
clients as typed, policy-checked tools, over stdio (or Streamable HTTP with --http).

The target conda is --conda-exe, else $CONDA_EXE, else `conda` on PATH. Read-only by \
default: --allow-write permits commands that change environments or files, --allow-exec \
`conda run`, plugin commands that run programs and the raw conda_execute tool.";
pub(super) const AFTER_HELP: &str = "\
Read-only by default. 'ccm --help': every flag in detail; 'ccm tools': what a client gets.";
pub(super) const AFTER_LONG_HELP: &str = "\
Environment: boolean variables take 1, true, yes or on; a flag wins over its variable. \
CCM_LOG filters the logs, which go to stderr (e.g. CCM_LOG=debug); stdout carries the \
protocol. CCM_HIDDEN_TOOLS (comma-separated tool names) leaves tools out of tools/list; \
they stay callable. CCM_MCP_TOOL_<TOOL>_NAME, _TITLE, _DESCRIPTION and \
_PARAM_<PARAM>_DESCRIPTION change what clients see (<TOOL>/<PARAM>: the canonical name \
upper-cased, other characters as _). Over HTTP: CCM_MCP_TOKEN is the bearer token (else \
--token-file, else a random one printed once to stderr); clients that cannot send headers \
put it in the URL, ?token=… (the parameter's name: CCM_MCP_TOKEN_QUERY_PARAM).

Every flag and variable: docs/configuration.md.";

/// Help headings, one per topic.
pub(super) const TARGET: &str = "Target";
pub(super) const TOOLS: &str = "Tools";
pub(super) const POLICY: &str = "Policy";
pub(super) const CONFIRMATION: &str = "Confirmation and audit";
pub(super) const LIMITS: &str = "Limits";
pub(super) const HTTP: &str = "HTTP";
pub(super) const PERFORMANCE: &str = "Performance";

/// The flags `ccm tools` uses (clap ids): what decides the listing.
pub(super) const TOOLS_USES: &[&str] = &[
    "conda_exe",
    "timeout",
    "tools",
    "list_all",
    "allow_write",
    "allow_exec",
    "allow_credentials",
    "classify",
];
/// The flags `ccm discover` uses (clap ids).
pub(super) const DISCOVER_USES: &[&str] = &["conda_exe", "timeout"];

/// The flags a command uses, when it does not use them all (`tools`, `discover`).
pub(super) fn uses(command: &str) -> Option<&'static [&'static str]> {
    match command {
        "tools" => Some(TOOLS_USES),
        "discover" => Some(DISCOVER_USES),
        _ => None,
    }
}

/// A flag of a command's own (`--json`, `--pretty`) or every command's (`--help`,
/// `--version`), by clap id.
pub(super) fn own(id: &str) -> bool {
    matches!(id, "json" | "pretty" | "help" | "version")
}
