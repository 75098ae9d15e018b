//! The flags: clap's definition of the command line, with the `--help` texts by topic.
//!
//! `-h` is the short help (one line per common flag, under a heading per topic);
//! `--help` has every flag with its details. A flag's variable is written `[env: NAME]`
//! and its default `[default: VALUE]`, everywhere. Every flag is defined once (on `ccm`
//! itself, which serves); `ccm tools` and `ccm discover` take only the flags they use
//! (`topics::TOOLS_USES`, `topics::DISCOVER_USES`): their help shows only those, and
//! `cli::parse` refuses the others wherever they are written.

use std::path::PathBuf;

use clap::{Args, CommandFactory, Parser, Subcommand};

use super::DEFAULT_HTTP_ADDR;
use super::topics::{
    ABOUT, AFTER_HELP, AFTER_LONG_HELP, CONFIRMATION, DISCOVER_USES, HTTP, LIMITS, LONG_ABOUT,
    PERFORMANCE, POLICY, TARGET, TOOLS, TOOLS_USES,
};

#[derive(Debug, Parser)]
#[command(
    name = "ccm",
    about = ABOUT,
    long_about = LONG_ABOUT,
    after_help = AFTER_HELP,
    after_long_help = AFTER_LONG_HELP,
    disable_version_flag = true,
    max_term_width = 100,
    args_conflicts_with_subcommands = false
)]
pub struct Cli {
    #[command(flatten)]
    pub options: Options,

    /// Print the version, the distribution and the build, and exit.
    #[arg(short = 'V', long = "version", global = true)]
    pub version: bool,

    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve MCP over stdio, or Streamable HTTP with --http (the default command).
    Serve,
    /// Discover the target conda and print its catalog as JSON (sorted keys).
    Discover {
        /// Indent the JSON.
        #[arg(long)]
        pretty: bool,
    },
    /// List the tools a client will get: access level, compiler, size, summary.
    Tools {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
}

/// clap's command with the subcommands' help cut to the flags each uses. Every flag is
/// global, so that it may stand before or after a command; each command gets its own
/// copy of every flag, in `ccm`'s order (clap then propagates none over them), hidden
/// where the command does not use it — `cli::parse` refuses those.
pub(super) fn command() -> clap::Command {
    let command = Cli::command();
    let globals: Vec<clap::Arg> = command
        .get_arguments()
        .filter(|a| a.is_global_set() && a.get_id() != "version")
        .cloned()
        .collect();
    [("tools", TOOLS_USES), ("discover", DISCOVER_USES)]
        .into_iter()
        .fold(command, |command, (name, uses)| {
            command.mut_subcommand(name, |sub| {
                globals.iter().fold(sub, |sub, a| {
                    sub.arg(a.clone().hide(!uses.contains(&a.get_id().as_str())))
                })
            })
        })
}

#[derive(Debug, Args)]
pub struct Options {
    /// The conda to serve [env: CONDA_EXE] [default: conda on PATH]
    #[arg(long, value_name = "PATH", global = true, help_heading = TARGET)]
    pub conda_exe: Option<String>,

    #[arg(
        long = "tools",
        value_name = "SPECS",
        global = true,
        help_heading = TOOLS,
        help = "Offer only these tools: names, globs, groups such as @core [env: CCM_TOOLS]",
        long_help = "Offer only these tools (repeatable or comma-separated; the flag replaces the \
            variable): canonical tool names, globs such as 'conda_env_*', and groups @core, @read, \
            @envs, @packages, @config, @plugin:NAME, @all. Unselected tools are neither listed nor \
            callable, not even as raw argv through conda_execute [env: CCM_TOOLS]"
    )]
    pub tools: Vec<String>,

    #[arg(
        long,
        global = true,
        help_heading = TOOLS,
        help = "List every tool with its full schema, as conda has it [env: CCM_LIST_ALL]",
        long_help = "List every tool with its full schema, as conda's CLI has it. By default \
            tools/list shows only what the policy admits: tools no call of which it admits are \
            left out, tools it admits only in some forms (dry runs, read-only options) are listed \
            with those forms, commands registered under two names are listed once, and tools that \
            cannot work for an agent (activate, deactivate, init, the mcp/ccm launchers) are left \
            out. The policy judges every call either way [env: CCM_LIST_ALL]"
    )]
    pub list_all: bool,

    /// Allow commands that change environments or files.
    #[arg(
        long_help = "Allow commands that change environments, packages, configuration or files",long, global = true, help_heading = POLICY)]
    pub allow_write: bool,

    /// Allow `conda run`, plugins that run programs, raw argv.
    #[arg(
        long_help = "Allow `conda run`, plugin commands that run programs (with --allow-write), \
            opaque plugin passthrough, and list the raw-argv tool conda_execute",long, global = true, help_heading = POLICY)]
    pub allow_exec: bool,

    #[arg(
        long = "write-envs",
        value_name = "PATTERNS",
        global = true,
        help_heading = POLICY,
        help = "Narrow --allow-write to these environments [env: CCM_WRITE_ENVS]",
        long_help = "Narrow --allow-write to these environments (repeatable or comma-separated): \
            name globs ('proj-*') and absolute prefix paths. A write (or conda run) runs only when \
            every environment it targets, as conda resolves it, matches; base only when named. \
            Commands with no single target environment (config, clean, init, ...) need \
            --allow-write without --write-envs [env: CCM_WRITE_ENVS]"
    )]
    pub write_envs: Vec<String>,

    #[arg(
        long = "allow-paths",
        value_name = "DIRS",
        global = true,
        help_heading = POLICY,
        help = "Confine paths in calls to these directories [env: CCM_ALLOW_PATHS]",
        long_help = "Confine paths in calls that do not need --allow-exec to these directories \
            (repeatable or comma-separated). `--allow-paths /` lifts the confinement [env: \
            CCM_ALLOW_PATHS] [default: unrestricted over stdio; with --http the working directory, \
            conda's root prefix and ~/.conda/envs]"
    )]
    pub allow_paths: Vec<String>,

    #[arg(
        long = "classify",
        value_name = "TOOL=ACCESS",
        global = true,
        help_heading = POLICY,
        help = "Classify a command as read, write or exec [env: CCM_CLASSIFY]",
        long_help = "Classify a command the policy's tables do not know, or override them: \
            TOOL=read|write|exec by canonical tool name (repeatable; the variable is \
            comma-separated). Governs the command through conda_execute too [env: CCM_CLASSIFY]"
    )]
    pub classify: Vec<String>,

    #[arg(
        long,
        global = true,
        hide_short_help = true,
        help_heading = POLICY,
        help = "Allow options that print credentials [env: CCM_ALLOW_CREDENTIALS]",
        long_help = "Allow options that print credentials (`conda info --unsafe-channels`) [env: \
            CCM_ALLOW_CREDENTIALS]"
    )]
    pub allow_credentials: bool,

    /// Run read-only calls without the sandbox [env: CCM_NO_SANDBOX]
    #[arg(long, global = true, help_heading = POLICY)]
    pub no_sandbox: bool,

    #[arg(
        long,
        global = true,
        help_heading = CONFIRMATION,
        help = "Ask the user before every write or exec call [env: CCM_CONFIRM_WRITES]",
        long_help = "Ask the user to confirm every write and exec call through MCP elicitation, \
            showing the plan (a dry run's packages where conda can dry-run the command), before it \
            runs. A client that cannot be asked gets those calls refused [env: CCM_CONFIRM_WRITES]"
    )]
    pub confirm_writes: bool,

    /// How long --confirm-writes waits for the user's answer, in seconds.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value = "300",
        global = true,
        allow_hyphen_values = true,
        hide_short_help = true,
        help_heading = CONFIRMATION
    )]
    pub confirm_timeout: String,

    #[arg(
        long,
        value_name = "FILE",
        global = true,
        help_heading = CONFIRMATION,
        help = "Append one JSON line per call to FILE [env: CCM_AUDIT_LOG]",
        long_help = "Append one JSON line per tool call that reached the policy to FILE: time, \
            session, client, tool, the final argv with secret-looking values redacted, verdict, \
            confirmation, exit code, duration. Opened append-only at startup; a path that cannot \
            be opened stops the server [env: CCM_AUDIT_LOG]"
    )]
    pub audit_log: Option<PathBuf>,

    /// Longest a conda command or discovery may run (seconds).
    #[arg(
        long,
        value_name = "SECONDS",
        default_value = "900",
        global = true,
        allow_hyphen_values = true,
        help_heading = LIMITS
    )]
    pub timeout: String,

    /// Executions that may wait behind the running one.
    #[arg(
        long_help = "Most conda executions that may wait behind the running one; a call beyond \
            them gets no_capacity at once (0: none wait)",
        long,
        value_name = "N",
        default_value = "16",
        global = true,
        allow_hyphen_values = true,
        help_heading = LIMITS
    )]
    pub max_queue: String,

    /// Executions one session may have running or waiting.
    #[arg(
        long_help = "Most conda executions one MCP session may have running or waiting; a call \
            beyond them gets session_busy",
        long,
        value_name = "N",
        default_value = "4",
        global = true,
        allow_hyphen_values = true,
        help_heading = LIMITS
    )]
    pub max_session_calls: String,

    /// Bytes kept from each output stream of a conda command.
    #[arg(
        long,
        value_name = "N",
        default_value = "1048576",
        global = true,
        allow_hyphen_values = true,
        hide_short_help = true,
        help_heading = LIMITS
    )]
    pub output_limit_bytes: String,

    /// Bytes accepted as a command's standard input (conda_execute's stdin).
    #[arg(
        long,
        value_name = "N",
        default_value = "1048576",
        global = true,
        allow_hyphen_values = true,
        hide_short_help = true,
        help_heading = LIMITS
    )]
    pub stdin_limit_bytes: String,

    #[arg(
        long,
        value_name = "SIZE",
        global = true,
        allow_hyphen_values = true,
        help_heading = LIMITS,
        help = "Address-space limit of every child process [env: CCM_MEMORY_LIMIT]",
        long_help = "Address-space limit of every child process (RLIMIT_AS): bytes, a size such as \
            2GiB or 512MiB, or 'unlimited' [env: CCM_MEMORY_LIMIT] [default: the smaller of 4 GiB \
            and half the RAM]"
    )]
    pub memory_limit: Option<String>,

    /// Largest file a child process may write (RLIMIT_FSIZE): bytes, a size such as 8GiB,
    /// or 'unlimited' [env: CCM_FILE_SIZE_LIMIT] [default: 8GiB]
    #[arg(
        long,
        value_name = "SIZE",
        global = true,
        allow_hyphen_values = true,
        hide_short_help = true,
        help_heading = LIMITS
    )]
    pub file_size_limit: Option<String>,

    /// Most processes and threads one child process tree (a conda command or a discovery
    /// run) may have at once (cgroup pids controller, also for root), or 'unlimited'
    /// [env: CCM_PROCESS_LIMIT] [default: 1024]
    #[arg(
        long,
        value_name = "N",
        global = true,
        allow_hyphen_values = true,
        hide_short_help = true,
        help_heading = LIMITS
    )]
    pub process_limit: Option<String>,

    /// Withhold the environment variable NAME from every child process (repeatable; the
    /// variable is comma-separated). CCM_MCP_TOKEN is always withheld
    /// [env: CCM_CHILD_ENV_REMOVE]
    #[arg(
        long = "child-env-remove",
        value_name = "NAME",
        global = true,
        hide_short_help = true,
        help_heading = LIMITS
    )]
    pub child_env_remove: Vec<String>,

    #[arg(
        long,
        value_name = "ADDR",
        num_args = 0..=1,
        default_missing_value = DEFAULT_HTTP_ADDR,
        global = true,
        help_heading = HTTP,
        help = "Serve HTTP at http://ADDR/mcp, not stdio [default: 127.0.0.1:8089]",
        long_help = "Serve MCP over Streamable HTTP at http://ADDR/mcp instead of stdio; port 0 \
            picks a free port. A bearer token is always required (see --token-file) [default: \
            127.0.0.1:8089]"
    )]
    pub http: Option<String>,

    #[arg(
        long,
        value_name = "PATH",
        global = true,
        help_heading = HTTP,
        help = "Read the bearer token from PATH [env: CCM_MCP_TOKEN, the token itself]",
        long_help = "Read the HTTP bearer token from this file. Without it and without the \
            variable, a random token is printed once to stderr [env: CCM_MCP_TOKEN, the token \
            itself]"
    )]
    pub token_file: Option<PathBuf>,

    /// Allow --http to listen on an address other than loopback.
    #[arg(long, global = true, help_heading = HTTP)]
    pub allow_remote: bool,

    /// Also accept requests whose Host header names HOST (repeatable; loopback names are
    /// always accepted). Needed behind a reverse proxy that keeps the public host name.
    #[arg(
        long = "allowed-host",
        value_name = "HOST",
        global = true,
        hide_short_help = true,
        help_heading = HTTP
    )]
    pub allowed_hosts: Vec<String>,

    /// Also accept requests whose Origin header is ORIGIN (scheme://host[:port];
    /// repeatable, the variable comma-separated; loopback origins are always accepted,
    /// requests without Origin too) [env: CCM_HTTP_ALLOWED_ORIGINS]
    #[arg(
        long = "allowed-origin",
        value_name = "ORIGIN",
        global = true,
        hide_short_help = true,
        help_heading = HTTP
    )]
    pub allowed_origins: Vec<String>,

    /// Most open HTTP connections; more are closed at once
    /// [env: CCM_HTTP_MAX_CONNECTIONS] [default: 256]
    #[arg(
        long,
        value_name = "N",
        global = true,
        allow_hyphen_values = true,
        hide_short_help = true,
        help_heading = HTTP
    )]
    pub http_max_connections: Option<String>,

    /// Seconds a connection gets to send a request's headers, counted from its opening or
    /// its previous response (idle keep-alive connections close then)
    /// [env: CCM_HTTP_HEADER_TIMEOUT] [default: 10]
    #[arg(
        long,
        value_name = "SECONDS",
        global = true,
        allow_hyphen_values = true,
        hide_short_help = true,
        help_heading = HTTP
    )]
    pub http_header_timeout: Option<String>,

    /// Seconds a connection with no request being answered may move no byte either way
    /// before it is closed; also the time a request body may take
    /// [env: CCM_HTTP_IDLE_TIMEOUT] [default: 60]
    #[arg(
        long,
        value_name = "SECONDS",
        global = true,
        allow_hyphen_values = true,
        hide_short_help = true,
        help_heading = HTTP
    )]
    pub http_idle_timeout: Option<String>,

    /// Most MCP sessions (handshake revisions) open at once for the token; more
    /// `initialize` requests get 503 [env: CCM_HTTP_MAX_SESSIONS] [default: 64]
    #[arg(
        long,
        value_name = "N",
        global = true,
        allow_hyphen_values = true,
        hide_short_help = true,
        help_heading = HTTP
    )]
    pub http_max_sessions: Option<String>,

    /// Seconds after which an MCP session with no traffic ends
    /// [env: CCM_HTTP_SESSION_IDLE] [default: 600]
    #[arg(
        long,
        value_name = "SECONDS",
        global = true,
        allow_hyphen_values = true,
        hide_short_help = true,
        help_heading = HTTP
    )]
    pub http_session_idle: Option<String>,

    /// Most session-less (2026-07-28) requests in progress at once for the token; more
    /// get 503 [env: CCM_HTTP_MAX_STATELESS] [default: 16]
    #[arg(
        long,
        value_name = "N",
        global = true,
        allow_hyphen_values = true,
        hide_short_help = true,
        help_heading = HTTP
    )]
    pub http_max_stateless: Option<String>,

    /// Accepted for compatibility: warm reads are the default [env: CCM_WARM]
    #[arg(long, global = true, hide_short_help = true, help_heading = PERFORMANCE)]
    pub warm: bool,

    #[arg(
        long,
        global = true,
        help_heading = PERFORMANCE,
        help = "Start every read-only call as a new interpreter [env: CCM_WARM=0]",
        long_help = "Start every read-only call as a new interpreter. By default, where the \
            read-only sandbox is active, read-only calls are forked from a Python process that \
            has already imported conda (the read zygote, itself inside the sandbox): measured, \
            read calls take 0.16-0.55x of their cold time (docs/performance.md). Writes and calls \
            outside the sandbox always start cold [env: CCM_WARM=0]"
    )]
    pub no_warm: bool,

    /// Always wait for live discovery, even when a baked snapshot matches.
    #[arg(long, global = true, help_heading = PERFORMANCE)]
    pub no_snapshot: bool,
}
