//! The flags: clap's definition of the command line, with the `--help` texts.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use super::DEFAULT_HTTP_ADDR;

const ABOUT: &str = "Expose an installed conda CLI through MCP.";
const LONG_ABOUT: &str = "\
Expose an installed conda's whole command line (built-in and plugin commands) to MCP \
clients as typed, policy-checked tools, over stdio (or Streamable HTTP with --http).

The target conda is --conda-exe, else $CONDA_EXE, else `conda` on PATH. The server is \
read-only by default: --allow-write permits operations that change environments or files, \
--allow-exec permits `conda run`, opaque plugin passthrough and the raw conda_execute tool.

Over HTTP a bearer token is always required: CCM_MCP_TOKEN or --token-file, else a \
random one printed once to stderr. Clients that cannot send headers may put it in the URL \
(?token=…; the parameter name is CCM_MCP_TOKEN_QUERY_PARAM).

--tools (or CCM_TOOLS) selects the tools a server offers, for clients that cap the number \
of tools: e.g. --tools @core, --tools @read,conda_env_*; unselected tools cannot be called. \
CCM_HIDDEN_TOOLS (comma-separated tool names) leaves tools out of tools/list; they stay \
callable. CCM_MCP_TOOL_<TOOL>_NAME, _TITLE, _DESCRIPTION and _PARAM_<PARAM>_DESCRIPTION \
override what clients see (<TOOL>/<PARAM>: the canonical name upper-cased, other \
characters as _).

Logs go to stderr (filter with CCM_LOG, e.g. CCM_LOG=debug); stdout carries the protocol.";

#[derive(Debug, Parser)]
#[command(
    name = "ccm",
    about = ABOUT,
    long_about = LONG_ABOUT,
    disable_version_flag = true,
    args_conflicts_with_subcommands = false
)]
pub struct Cli {
    #[command(flatten)]
    pub options: Options,

    /// Print the version and exit.
    #[arg(short = 'V', long = "version", global = true)]
    pub version: bool,

    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve MCP over stdio, or Streamable HTTP with --http (the default when no command is given).
    Serve,
    /// Discover the target conda and print its catalog as JSON (sorted keys).
    Discover {
        /// Indent the JSON.
        #[arg(long)]
        pretty: bool,
    },
    /// List the tools an agent will get from the target: access level, compiler, summary.
    Tools {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Args)]
pub struct Options {
    /// Path to conda. Defaults to CONDA_EXE or the executable on PATH.
    #[arg(long, value_name = "PATH", global = true)]
    pub conda_exe: Option<String>,

    /// Maximum discovery and command timeout in seconds.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value = "900",
        global = true,
        allow_hyphen_values = true
    )]
    pub timeout: String,

    /// Maximum bytes retained from each output stream of a conda command.
    #[arg(
        long,
        value_name = "N",
        default_value = "1048576",
        global = true,
        allow_hyphen_values = true
    )]
    pub output_limit_bytes: String,

    /// Maximum bytes accepted as non-interactive input.
    #[arg(
        long,
        value_name = "N",
        default_value = "1048576",
        global = true,
        allow_hyphen_values = true
    )]
    pub stdin_limit_bytes: String,

    /// Allow conda operations that mutate environments or files.
    #[arg(long, global = true)]
    pub allow_write: bool,

    /// Expose raw argv execution and allow conda run and plugin commands that run programs.
    #[arg(long, global = true)]
    pub allow_exec: bool,

    /// Allow options that print credentials (`conda info --unsafe-channels`; also
    /// CCM_ALLOW_CREDENTIALS=1).
    #[arg(long, global = true)]
    pub allow_credentials: bool,

    /// List every tool with its full schema, as conda's CLI has it (also CCM_LIST_ALL=1).
    /// By default tools/list shows only what the policy admits: tools no call of which it
    /// admits are left out, tools it admits only in some forms (dry runs, read-only
    /// options) are listed with those forms, commands registered under two names are
    /// listed once, and tools that cannot work for an agent (activate, deactivate, init,
    /// the mcp/ccm launchers) are left out. The policy judges every call either way.
    #[arg(long, global = true)]
    pub list_all: bool,

    /// Confine paths in calls that do not need --allow-exec to these directories
    /// (repeatable or comma-separated; also CCM_ALLOW_PATHS). Default: unrestricted over
    /// stdio; with --http the working directory, conda's root prefix and ~/.conda/envs.
    /// `--allow-paths /` lifts the confinement.
    #[arg(long = "allow-paths", value_name = "DIR[,DIR...]", global = true)]
    pub allow_paths: Vec<String>,

    /// Narrow --allow-write to these environments (repeatable or comma-separated; also
    /// CCM_WRITE_ENVS): name globs ('proj-*') and absolute prefix paths. A write (or
    /// conda run) runs only when every environment it targets, as conda resolves it,
    /// matches; base only when named. Commands with no single target environment
    /// (config, clean, init, ...) need --allow-write without --write-envs.
    #[arg(
        long = "write-envs",
        value_name = "PATTERN[,PATTERN...]",
        global = true
    )]
    pub write_envs: Vec<String>,

    /// Classify a command the policy's tables do not know, or override them:
    /// TOOL=read|write|exec by canonical tool name (repeatable; also CCM_CLASSIFY,
    /// comma-separated). Governs the command through conda_execute too.
    #[arg(long = "classify", value_name = "TOOL=ACCESS", global = true)]
    pub classify: Vec<String>,
    /// Offer only these tools (repeatable or comma-separated; also CCM_TOOLS, which the
    /// flag replaces): canonical tool names, globs such as 'conda_env_*', and groups
    /// @core, @read, @envs, @packages, @config, @plugin:NAME, @all. Unselected tools are
    /// neither listed nor callable, not even as raw argv through conda_execute.
    #[arg(long = "tools", value_name = "SPEC[,SPEC...]", global = true)]
    pub tools: Vec<String>,

    /// Append one JSON line per tool call that reached the policy to FILE (also
    /// CCM_AUDIT_LOG): time, session, client, tool, the final argv with secret-looking
    /// values redacted, verdict, confirmation, exit code, duration. Opened append-only at
    /// startup; a path that cannot be opened stops the server.
    #[arg(long, value_name = "FILE", global = true)]
    pub audit_log: Option<PathBuf>,

    /// Ask the user to confirm every write and exec call through MCP elicitation, showing
    /// the plan (a dry run's packages where conda can dry-run the command), before it runs
    /// (also CCM_CONFIRM_WRITES=1). A client that cannot be asked gets those calls refused.
    #[arg(long, global = true)]
    pub confirm_writes: bool,

    /// How long --confirm-writes waits for the user's answer, in seconds.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value = "300",
        global = true,
        allow_hyphen_values = true
    )]
    pub confirm_timeout: String,

    /// Run read-only calls without the read-only sandbox (also CCM_NO_SANDBOX=1).
    #[arg(long, global = true)]
    pub no_sandbox: bool,

    /// Always wait for live discovery, even when the target matches a baked snapshot.
    #[arg(long, global = true)]
    pub no_snapshot: bool,

    /// Fork each conda call from a Python process that has already imported conda and
    /// the plugins' modules that read nothing of a call (3-5x faster reads; calls run cold
    /// until it is ready, without plugins, or after conda changed) (also CCM_WARM=1).
    #[arg(long, global = true)]
    pub warm: bool,

    /// Most conda executions that may wait behind the running one (0: none wait).
    #[arg(
        long,
        value_name = "N",
        default_value = "16",
        global = true,
        allow_hyphen_values = true
    )]
    pub max_queue: String,

    /// Most conda executions one MCP session may have running or waiting.
    #[arg(
        long,
        value_name = "N",
        default_value = "4",
        global = true,
        allow_hyphen_values = true
    )]
    pub max_session_calls: String,

    /// Serve MCP over Streamable HTTP at http://ADDR/mcp instead of stdio
    /// [default ADDR: 127.0.0.1:8089; port 0 picks a free port].
    #[arg(
        long,
        value_name = "ADDR",
        num_args = 0..=1,
        default_missing_value = DEFAULT_HTTP_ADDR,
        global = true
    )]
    pub http: Option<String>,

    /// Allow --http to listen on an address other than loopback.
    #[arg(long, global = true)]
    pub allow_remote: bool,

    /// Read the HTTP bearer token from this file (instead of CCM_MCP_TOKEN).
    #[arg(long, value_name = "PATH", global = true)]
    pub token_file: Option<PathBuf>,

    /// Also accept requests whose Host header names HOST (repeatable; loopback names are
    /// always accepted). Needed behind a reverse proxy that keeps the public host name.
    #[arg(long = "allowed-host", value_name = "HOST", global = true)]
    pub allowed_hosts: Vec<String>,

    /// Address-space limit of every child process (RLIMIT_AS): bytes, a size such as 2GiB
    /// or 512MiB, or 'unlimited' [env: CCM_MEMORY_LIMIT; default: the smaller of 4 GiB and
    /// half the RAM].
    #[arg(long, value_name = "SIZE", global = true, allow_hyphen_values = true)]
    pub memory_limit: Option<String>,

    /// Largest file a child process may write (RLIMIT_FSIZE): bytes, a size such as 8GiB,
    /// or 'unlimited' [env: CCM_FILE_SIZE_LIMIT; default: 8GiB].
    #[arg(long, value_name = "SIZE", global = true, allow_hyphen_values = true)]
    pub file_size_limit: Option<String>,

    /// Most processes and threads one child process tree (a conda command or a discovery
    /// run) may have at once (cgroup pids controller, also for root), or 'unlimited'
    /// [env: CCM_PROCESS_LIMIT; default: 1024].
    #[arg(long, value_name = "N", global = true, allow_hyphen_values = true)]
    pub process_limit: Option<String>,

    /// Withhold the environment variable NAME from every child process (repeatable;
    /// env: CCM_CHILD_ENV_REMOVE, comma-separated). CCM_MCP_TOKEN is always withheld.
    #[arg(long = "child-env-remove", value_name = "NAME", global = true)]
    pub child_env_remove: Vec<String>,
    /// Also accept requests whose Origin header is ORIGIN (scheme://host[:port];
    /// repeatable; loopback origins are always accepted, requests without Origin too)
    /// [env: CCM_HTTP_ALLOWED_ORIGINS, comma-separated].
    #[arg(long = "allowed-origin", value_name = "ORIGIN", global = true)]
    pub allowed_origins: Vec<String>,

    /// Most open HTTP connections; more are closed at once
    /// [default: 256] [env: CCM_HTTP_MAX_CONNECTIONS].
    #[arg(long, value_name = "N", global = true, allow_hyphen_values = true)]
    pub http_max_connections: Option<String>,

    /// Seconds a connection gets to send a request's headers, counted from its opening or
    /// its previous response (idle keep-alive connections close then)
    /// [default: 10] [env: CCM_HTTP_HEADER_TIMEOUT].
    #[arg(
        long,
        value_name = "SECONDS",
        global = true,
        allow_hyphen_values = true
    )]
    pub http_header_timeout: Option<String>,

    /// Seconds a connection with no request being answered may move no byte either way
    /// before it is closed; also the time a request body may take
    /// [default: 60] [env: CCM_HTTP_IDLE_TIMEOUT].
    #[arg(
        long,
        value_name = "SECONDS",
        global = true,
        allow_hyphen_values = true
    )]
    pub http_idle_timeout: Option<String>,

    /// Most MCP sessions (handshake revisions) open at once for the token; more
    /// `initialize` requests get 503 [default: 64] [env: CCM_HTTP_MAX_SESSIONS].
    #[arg(long, value_name = "N", global = true, allow_hyphen_values = true)]
    pub http_max_sessions: Option<String>,

    /// Seconds after which an MCP session with no traffic ends
    /// [default: 600] [env: CCM_HTTP_SESSION_IDLE].
    #[arg(
        long,
        value_name = "SECONDS",
        global = true,
        allow_hyphen_values = true
    )]
    pub http_session_idle: Option<String>,

    /// Most session-less (2026-07-28) requests in progress at once for the token; more
    /// get 503 [default: 16] [env: CCM_HTTP_MAX_STATELESS].
    #[arg(long, value_name = "N", global = true, allow_hyphen_values = true)]
    pub http_max_stateless: Option<String>,
}
