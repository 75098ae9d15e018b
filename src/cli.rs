//! The command line: flags, environment variables, validation and exit codes.
//!
//! Parsing never spawns anything. Every bad value becomes a one-line `ccm: error: …`
//! message that says what to do, with exit status 2; `--help` and `--version` exit 0.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::discovery::{self, ResolveError};
use crate::policy::Access;
use crate::surface::Surface;

/// Exit status for usage errors (bad flags, no conda).
pub const EXIT_USAGE: i32 = 2;
/// Exit status for runtime failures (I/O on the transport, a server that could not start).
pub const EXIT_FAILURE: i32 = 1;

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

CCM_HIDDEN_TOOLS (comma-separated tool names) leaves tools out of tools/list; they stay \
callable. CCM_MCP_TOOL_<TOOL>_NAME, _TITLE, _DESCRIPTION and _PARAM_<PARAM>_DESCRIPTION \
override what clients see (<TOOL>/<PARAM>: the canonical name upper-cased, other \
characters as _).

Logs go to stderr (filter with CCM_LOG, e.g. CCM_LOG=debug); stdout carries the protocol.";

/// The default `--http` address.
pub const DEFAULT_HTTP_ADDR: &str = "127.0.0.1:8089";
/// Environment variables read besides `CONDA_EXE`.
pub const TOKEN_VAR: &str = "CCM_MCP_TOKEN";
pub const QUERY_PARAM_VAR: &str = "CCM_MCP_TOKEN_QUERY_PARAM";
pub const CLASSIFY_VAR: &str = "CCM_CLASSIFY";
pub const ALLOW_PATHS_VAR: &str = "CCM_ALLOW_PATHS";
/// Set to 1/true/yes/on: same as `--no-sandbox`.
pub const NO_SANDBOX_VAR: &str = "CCM_NO_SANDBOX";
/// Shortest accepted bearer token.
pub const MIN_TOKEN_LEN: usize = 16;
const MAX_TOKEN_LEN: usize = 4096;

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

    /// Confine paths in calls that do not need --allow-exec to these directories
    /// (repeatable or comma-separated; also CCM_ALLOW_PATHS). Default: unrestricted over
    /// stdio; with --http the working directory, conda's root prefix and ~/.conda/envs.
    /// `--allow-paths /` lifts the confinement.
    #[arg(long = "allow-paths", value_name = "DIR[,DIR...]", global = true)]
    pub allow_paths: Vec<String>,

    /// Classify a command the policy's tables do not know, or override them:
    /// TOOL=read|write|exec by canonical tool name (repeatable; also CCM_CLASSIFY,
    /// comma-separated). Governs the command through conda_execute too.
    #[arg(long = "classify", value_name = "TOOL=ACCESS", global = true)]
    pub classify: Vec<String>,
    /// Run read-only calls without the read-only sandbox (also CCM_NO_SANDBOX=1).
    #[arg(long, global = true)]
    pub no_sandbox: bool,

    /// Always wait for live discovery, even when the target matches a baked snapshot.
    #[arg(long, global = true)]
    pub no_snapshot: bool,

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

/// HTTP limits: (flag, environment variable, default).
const HTTP_MAX_CONNECTIONS: (&str, &str, &str) =
    ("--http-max-connections", "CCM_HTTP_MAX_CONNECTIONS", "256");
const HTTP_HEADER_TIMEOUT: (&str, &str, &str) =
    ("--http-header-timeout", "CCM_HTTP_HEADER_TIMEOUT", "10");
const HTTP_IDLE_TIMEOUT: (&str, &str, &str) =
    ("--http-idle-timeout", "CCM_HTTP_IDLE_TIMEOUT", "60");
const HTTP_MAX_SESSIONS: (&str, &str, &str) =
    ("--http-max-sessions", "CCM_HTTP_MAX_SESSIONS", "64");
const HTTP_SESSION_IDLE: (&str, &str, &str) =
    ("--http-session-idle", "CCM_HTTP_SESSION_IDLE", "600");
const HTTP_MAX_STATELESS: (&str, &str, &str) =
    ("--http-max-stateless", "CCM_HTTP_MAX_STATELESS", "16");
const ALLOWED_ORIGINS_VAR: &str = "CCM_HTTP_ALLOWED_ORIGINS";

/// A flag's text, else its environment variable's, else the default.
fn setting<'a>(
    flag: &'a Option<String>,
    env: &'a Environment,
    (_, var, default): (&str, &str, &'a str),
) -> &'a str {
    flag.as_deref().or_else(|| env.get(var)).unwrap_or(default)
}

/// A secret that never shows in `Debug` output.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(text: String) -> Self {
        Secret(text)
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

/// `--http` settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpConfig {
    pub addr: SocketAddr,
    /// The configured token; `None`: generate one at startup.
    pub token: Option<Secret>,
    /// The URL query parameter that may carry the token.
    pub query_param: String,
    /// Host header values accepted besides loopback names.
    pub allowed_hosts: Vec<String>,
    /// `--token-file`, whose path children must not see either.
    pub token_file: Option<PathBuf>,
    /// Origin header values accepted besides loopback origins (lower-case).
    pub allowed_origins: Vec<String>,
    pub limits: HttpLimits,
}

/// Connection, session and request limits of `--http`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpLimits {
    pub max_connections: usize,
    pub header_timeout: Duration,
    pub idle_timeout: Duration,
    pub max_sessions: usize,
    pub session_idle: Duration,
    pub max_stateless: usize,
}

/// The environment variables `ccm` reads, captured once so parsing stays a pure function.
#[derive(Clone, Debug, Default)]
pub struct Environment {
    vars: Vec<(String, String)>,
}

impl Environment {
    /// This process's environment (variables that are not UTF-8 are skipped).
    pub fn from_process() -> Self {
        Environment {
            vars: std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
                .collect(),
        }
    }

    pub fn from_pairs<K: Into<String>, V: Into<String>>(
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        Environment {
            vars: pairs
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        }
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.vars
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    fn pairs(&self) -> impl Iterator<Item = (&str, &str)> {
        self.vars.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

/// Validated settings.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub conda_exe: PathBuf,
    pub timeout: Duration,
    pub output_limit: usize,
    pub stdin_limit: usize,
    pub allow_write: bool,
    pub allow_exec: bool,
    pub allow_credentials: bool,
    /// The operator's `--classify` entries, by canonical tool name.
    pub classify: Vec<(String, Access)>,
    /// `--allow-paths` directories (absolute); `None`: the transport's default scope.
    pub allow_paths: Option<Vec<PathBuf>>,
    pub no_snapshot: bool,
    /// Run read-only calls without the read-only sandbox.
    pub no_sandbox: bool,
    pub max_queue: usize,
    pub max_session_calls: usize,
    /// Hidden tools and overrides.
    pub surface: Surface,
    /// Serve over HTTP instead of stdio.
    pub http: Option<HttpConfig>,
    /// Limits and withheld environment of every child process.
    pub limits: crate::exec::Settings,
}

/// What `main` should do.
#[derive(Debug)]
pub enum Action {
    /// Print this text to stdout and exit 0 (help, version).
    Print(String),
    Serve(Config),
    Discover {
        config: Config,
        pretty: bool,
    },
    Tools {
        config: Config,
        json: bool,
    },
}

/// A usage error: print `ccm: error: <message>` and exit 2.
#[derive(Debug, PartialEq, Eq)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ccm: error: {}", self.0)
    }
}

/// Parse argv (including the program name) and the relevant environment.
pub fn parse<I, T>(args: I, env: &Environment) -> Result<Action, UsageError>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(error) => {
            use clap::error::ErrorKind;
            return match error.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
                    Ok(Action::Print(error.render().to_string()))
                }
                _ => Err(UsageError(one_line(&error.to_string()))),
            };
        }
    };
    if cli.version {
        return Ok(Action::Print(format!("{}\n", crate::VERSION_TEXT)));
    }
    let config = validate(&cli.options, env)?;
    Ok(match cli.command {
        None | Some(Command::Serve) => Action::Serve(config),
        Some(Command::Discover { .. }) if config.http.is_some() => {
            return Err(UsageError(
                "--http applies to serving, not to 'discover'".into(),
            ));
        }
        Some(Command::Discover { pretty }) => Action::Discover { config, pretty },
        Some(Command::Tools { json }) => Action::Tools { config, json },
    })
}

/// clap's first line, without its `error: ` prefix, plus where to look.
fn one_line(text: &str) -> String {
    let first = text.lines().next().unwrap_or("invalid arguments");
    let first = first.strip_prefix("error: ").unwrap_or(first);
    format!("{first} (see 'ccm --help')")
}

fn validate(options: &Options, env: &Environment) -> Result<Config, UsageError> {
    let timeout = positive_seconds("--timeout", &options.timeout)?;
    let output_limit = positive_int("--output-limit-bytes", &options.output_limit_bytes)?;
    let stdin_limit = positive_int("--stdin-limit-bytes", &options.stdin_limit_bytes)?;
    let max_queue = whole("--max-queue", &options.max_queue)?;
    let max_session_calls = positive_int("--max-session-calls", &options.max_session_calls)?;
    let surface = Surface::from_env(env.pairs()).map_err(UsageError)?;
    let http = http_config(options, env)?;
    let limits = limit_settings(options, env)?;
    let classify = classifications(options, env)?;
    let allow_paths = allowed_paths(options, env)?;
    let conda_exe = discovery::resolve_executable(
        options.conda_exe.as_deref(),
        env.get("CONDA_EXE"),
    )
    .map_err(|error| match error {
        ResolveError::NotFound(why) => UsageError(format!(
            "could not find conda: {why}. Use --conda-exe PATH, set CONDA_EXE, or add conda to PATH"
        )),
        ResolveError::BatchLauncher => UsageError(
            "conda batch launchers are not supported. Select conda.exe with --conda-exe".into(),
        ),
    })?;
    Ok(Config {
        conda_exe,
        timeout,
        output_limit,
        stdin_limit,
        allow_write: options.allow_write,
        allow_exec: options.allow_exec,
        allow_credentials: options.allow_credentials
            || env.get("CCM_ALLOW_CREDENTIALS").is_some_and(truthy),
        classify,
        allow_paths,
        no_snapshot: options.no_snapshot,
        no_sandbox: options.no_sandbox
            || env
                .get(NO_SANDBOX_VAR)
                .is_some_and(|v| matches!(v, "1" | "true" | "yes" | "on")),
        max_queue,
        max_session_calls,
        surface,
        http,
        limits,
    })
}

/// Environment variables of the limit flags.
pub const MEMORY_LIMIT_VAR: &str = "CCM_MEMORY_LIMIT";
pub const FILE_SIZE_LIMIT_VAR: &str = "CCM_FILE_SIZE_LIMIT";
pub const PROCESS_LIMIT_VAR: &str = "CCM_PROCESS_LIMIT";
pub const CHILD_ENV_REMOVE_VAR: &str = "CCM_CHILD_ENV_REMOVE";

fn limit_settings(
    options: &Options,
    env: &Environment,
) -> Result<crate::exec::Settings, UsageError> {
    use crate::exec::Limit;
    fn given<'a>(
        env: &'a Environment,
        flag: &'static str,
        value: &'a Option<String>,
        var: &'static str,
    ) -> Option<(&'static str, &'a str)> {
        value
            .as_deref()
            .map(|v| (flag, v))
            .or_else(|| env.get(var).map(|v| (var, v)))
    }
    let size = |given: Option<(&str, &str)>| -> Result<Limit, UsageError> {
        match given {
            None => Ok(Limit::Default),
            Some((source, text)) => {
                parse_size(text).map_err(|why| UsageError(format!("argument {source}: {why}")))
            }
        }
    };
    let memory = size(given(
        env,
        "--memory-limit",
        &options.memory_limit,
        MEMORY_LIMIT_VAR,
    ))?;
    let file_size = size(given(
        env,
        "--file-size-limit",
        &options.file_size_limit,
        FILE_SIZE_LIMIT_VAR,
    ))?;
    let processes = match given(
        env,
        "--process-limit",
        &options.process_limit,
        PROCESS_LIMIT_VAR,
    ) {
        None => Limit::Default,
        Some((_, text)) if text.trim() == "unlimited" => Limit::Unlimited,
        Some((source, text)) => Limit::At(positive_int(source, text)? as u64),
    };
    let mut child_env_remove = Vec::new();
    let from_env = env
        .get(CHILD_ENV_REMOVE_VAR)
        .map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    for name in options
        .child_env_remove
        .iter()
        .map(String::as_str)
        .chain(from_env)
    {
        if name.is_empty() || name.contains(['=', '\0']) {
            return Err(UsageError(
                "argument --child-env-remove: give an environment variable name (no '=')".into(),
            ));
        }
        if !child_env_remove.iter().any(|n| n == name) {
            child_env_remove.push(name.to_owned());
        }
    }
    Ok(crate::exec::Settings {
        memory,
        file_size,
        processes,
        child_env_remove,
    })
}

/// `1073741824`, `4GiB`, `4G`, `512MiB`, `64KiB`, `1.5GiB`, `unlimited`.
pub fn parse_size(text: &str) -> Result<crate::exec::Limit, String> {
    let text = text.trim();
    if text == "unlimited" {
        return Ok(crate::exec::Limit::Unlimited);
    }
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let multiplier: u64 = match unit.trim() {
        "" | "B" => 1,
        "K" | "KiB" | "k" => 1 << 10,
        "M" | "MiB" => 1 << 20,
        "G" | "GiB" => 1 << 30,
        "T" | "TiB" => 1 << 40,
        _ => {
            return Err(format!(
                "'{text}' is not a size; give bytes, a number with KiB, MiB, GiB or TiB, or 'unlimited'"
            ));
        }
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("'{text}' is not a size; give bytes, e.g. 4GiB, or 'unlimited'"))?;
    let bytes = value * multiplier as f64;
    if !bytes.is_finite() || bytes < 1.0 || bytes > u64::MAX as f64 {
        return Err("must be at least one byte".into());
    }
    // Below 1 MiB nothing (not even the dynamic loader) could run.
    if bytes < (1u64 << 20) as f64 {
        return Err("must be at least 1MiB".into());
    }
    Ok(crate::exec::Limit::At(bytes as u64))
}

/// `--classify` flags, then `CCM_CLASSIFY` (comma-separated); a later entry for the same
/// tool wins.
fn classifications(
    options: &Options,
    env: &Environment,
) -> Result<Vec<(String, Access)>, UsageError> {
    let from_env = env.get(CLASSIFY_VAR).unwrap_or("");
    let entries = options
        .classify
        .iter()
        .map(String::as_str)
        .chain(from_env.split(',').map(str::trim).filter(|e| !e.is_empty()));
    let mut out: Vec<(String, Access)> = Vec::new();
    for entry in entries {
        let parsed = entry
            .split_once('=')
            .and_then(|(tool, access)| Some((tool, Access::parse(access)?)))
            .filter(|(tool, _)| {
                !tool.is_empty()
                    && tool
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "_-".contains(c))
            });
        let Some((tool, access)) = parsed else {
            return Err(UsageError(format!(
                "--classify: '{}' is not TOOL=read|write|exec (TOOL: a canonical tool name such as conda_spawn)",
                entry.chars().take(64).collect::<String>().escape_default()
            )));
        };
        out.retain(|(t, _)| t != tool);
        out.push((tool.to_owned(), access));
    }
    Ok(out)
}

/// `--allow-paths` entries, then `CCM_ALLOW_PATHS`: absolute directories that exist.
fn allowed_paths(options: &Options, env: &Environment) -> Result<Option<Vec<PathBuf>>, UsageError> {
    let from_env = env.get(ALLOW_PATHS_VAR).unwrap_or("");
    let entries: Vec<&str> = options
        .allow_paths
        .iter()
        .flat_map(|e| e.split(','))
        .chain(from_env.split(','))
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .collect();
    if entries.is_empty() {
        return Ok(None);
    }
    let mut dirs = Vec::new();
    for entry in entries {
        let path = PathBuf::from(entry);
        if !path.is_absolute() || !path.is_dir() {
            return Err(UsageError(format!(
                "--allow-paths: '{}' is not an existing absolute directory",
                entry.chars().take(64).collect::<String>().escape_default()
            )));
        }
        dirs.push(path);
    }
    Ok(Some(dirs))
}

/// `1`, `true`, `yes`, `on` (any case).
fn truthy(value: &str) -> bool {
    matches!(
        value.trim().to_ascii_lowercase().as_str(),
        "1" | "true" | "yes" | "on"
    )
}

fn http_config(options: &Options, env: &Environment) -> Result<Option<HttpConfig>, UsageError> {
    let Some(addr) = &options.http else {
        let stray = if options.token_file.is_some() {
            Some("--token-file")
        } else if options.allow_remote {
            Some("--allow-remote")
        } else if !options.allowed_hosts.is_empty() {
            Some("--allowed-host")
        } else if !options.allowed_origins.is_empty() {
            Some("--allowed-origin")
        } else if options.http_max_connections.is_some() {
            Some(HTTP_MAX_CONNECTIONS.0)
        } else if options.http_header_timeout.is_some() {
            Some(HTTP_HEADER_TIMEOUT.0)
        } else if options.http_idle_timeout.is_some() {
            Some(HTTP_IDLE_TIMEOUT.0)
        } else if options.http_max_sessions.is_some() {
            Some(HTTP_MAX_SESSIONS.0)
        } else if options.http_session_idle.is_some() {
            Some(HTTP_SESSION_IDLE.0)
        } else if options.http_max_stateless.is_some() {
            Some(HTTP_MAX_STATELESS.0)
        } else {
            None
        };
        return match stray {
            Some(flag) => Err(UsageError(format!("{flag} applies only with --http"))),
            None => Ok(None),
        };
    };
    let addr = parse_addr(addr)?;
    if !addr.ip().is_loopback() && !options.allow_remote {
        return Err(UsageError(format!(
            "--http {addr} listens beyond this machine; add --allow-remote to do so (and put TLS in front, see docs/http.md)"
        )));
    }
    let token = match &options.token_file {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                UsageError(format!(
                    "--token-file: cannot read {}: {}",
                    path.display(),
                    e.kind()
                ))
            })?;
            Some(check_token(
                "--token-file",
                text.trim_end_matches(['\n', '\r']),
            )?)
        }
        None => match env.get(TOKEN_VAR) {
            Some(text) => Some(check_token(TOKEN_VAR, text)?),
            None => None,
        },
    };
    let query_param = env.get(QUERY_PARAM_VAR).unwrap_or("token").to_owned();
    if query_param.is_empty()
        || !query_param
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '~'))
    {
        return Err(UsageError(format!(
            "{QUERY_PARAM_VAR} must be a non-empty name of A-Z, a-z, 0-9, '_', '-', '.', '~'"
        )));
    }
    let mut allowed_hosts = Vec::new();
    for host in &options.allowed_hosts {
        if host.is_empty() || host.contains(['/', ' ', ',']) {
            return Err(UsageError(format!(
                "--allowed-host: '{host}' is not a host name (give HOST or HOST:PORT)"
            )));
        }
        allowed_hosts.push(host.clone());
    }
    if !addr.ip().is_unspecified() && !addr.ip().is_loopback() {
        allowed_hosts.push(addr.ip().to_string());
    }
    let mut allowed_origins = Vec::new();
    let from_env: Vec<String> = env
        .get(ALLOWED_ORIGINS_VAR)
        .map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|o| !o.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    for origin in options.allowed_origins.iter().chain(&from_env) {
        let valid = origin.split_once("://").is_some_and(|(scheme, rest)| {
            !scheme.is_empty() && !rest.is_empty() && !rest.contains(['/', ' ', ','])
        });
        if !valid {
            return Err(UsageError(format!(
                "--allowed-origin: '{origin}' is not an origin (give SCHEME://HOST[:PORT], e.g. https://app.example)"
            )));
        }
        allowed_origins.push(origin.to_ascii_lowercase());
    }
    let limits = HttpLimits {
        max_connections: positive_int(
            HTTP_MAX_CONNECTIONS.0,
            setting(&options.http_max_connections, env, HTTP_MAX_CONNECTIONS),
        )?,
        header_timeout: positive_seconds(
            HTTP_HEADER_TIMEOUT.0,
            setting(&options.http_header_timeout, env, HTTP_HEADER_TIMEOUT),
        )?,
        idle_timeout: positive_seconds(
            HTTP_IDLE_TIMEOUT.0,
            setting(&options.http_idle_timeout, env, HTTP_IDLE_TIMEOUT),
        )?,
        max_sessions: positive_int(
            HTTP_MAX_SESSIONS.0,
            setting(&options.http_max_sessions, env, HTTP_MAX_SESSIONS),
        )?,
        session_idle: positive_seconds(
            HTTP_SESSION_IDLE.0,
            setting(&options.http_session_idle, env, HTTP_SESSION_IDLE),
        )?,
        max_stateless: positive_int(
            HTTP_MAX_STATELESS.0,
            setting(&options.http_max_stateless, env, HTTP_MAX_STATELESS),
        )?,
    };
    Ok(Some(HttpConfig {
        addr,
        token,
        query_param,
        allowed_hosts,
        token_file: options.token_file.clone(),
        allowed_origins,
        limits,
    }))
}

/// `IP:PORT`, `[IPv6]:PORT` or `localhost:PORT`.
fn parse_addr(text: &str) -> Result<SocketAddr, UsageError> {
    if let Some(port) = text.strip_prefix("localhost:")
        && let Ok(port) = port.parse::<u16>()
    {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    text.parse().map_err(|_| {
        UsageError(format!(
            "argument --http: '{text}' is not an address; give IP:PORT, e.g. {DEFAULT_HTTP_ADDR}"
        ))
    })
}

/// A usable bearer token. The message never contains the token.
fn check_token(source: &str, text: &str) -> Result<Secret, UsageError> {
    if text.len() < MIN_TOKEN_LEN
        || text.len() > MAX_TOKEN_LEN
        || !text.bytes().all(|b| b.is_ascii_graphic())
    {
        return Err(UsageError(format!(
            "{source}: the token must be {MIN_TOKEN_LEN} to {MAX_TOKEN_LEN} visible ASCII characters (no spaces)"
        )));
    }
    Ok(Secret::new(text.to_owned()))
}

fn whole(flag: &str, text: &str) -> Result<usize, UsageError> {
    let value: u64 = text.trim().parse().map_err(|_| {
        UsageError(format!(
            "argument {flag}: '{text}' is not a whole number; give a count of zero or more"
        ))
    })?;
    usize::try_from(value).map_err(|_| UsageError(format!("argument {flag}: too large")))
}

fn positive_seconds(flag: &str, text: &str) -> Result<Duration, UsageError> {
    let value: f64 = text.trim().parse().map_err(|_| {
        UsageError(format!(
            "argument {flag}: '{text}' is not a number; give seconds as a finite number greater than zero"
        ))
    })?;
    if !value.is_finite() || value <= 0.0 {
        return Err(UsageError(format!(
            "argument {flag}: must be finite and greater than zero"
        )));
    }
    Duration::try_from_secs_f64(value)
        .map_err(|_| UsageError(format!("argument {flag}: too large")))
}

fn positive_int(flag: &str, text: &str) -> Result<usize, UsageError> {
    let value: u64 = text.trim().parse().map_err(|_| {
        UsageError(format!(
            "argument {flag}: '{text}' is not a whole number; give a {} greater than zero",
            if flag.ends_with("-bytes") {
                "byte count"
            } else {
                "count"
            }
        ))
    })?;
    if value == 0 {
        return Err(UsageError(format!(
            "argument {flag}: must be greater than zero"
        )));
    }
    usize::try_from(value).map_err(|_| UsageError(format!("argument {flag}: too large")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_conda() -> (tempfile::TempDir, String) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("conda");
        std::fs::write(&path, "#!/bin/sh\n").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let text = path.to_str().unwrap().to_owned();
        (dir, text)
    }

    fn err(args: &[&str]) -> String {
        let (_dir, conda) = fake_conda();
        let mut argv = vec!["ccm", "--conda-exe", &conda];
        argv.extend_from_slice(args);
        parse(argv, &Environment::default())
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn defaults() {
        let (_dir, conda) = fake_conda();
        let Action::Serve(config) =
            parse(["ccm", "--conda-exe", &conda], &Environment::default()).unwrap()
        else {
            panic!("expected serve")
        };
        assert_eq!(config.timeout, Duration::from_secs(900));
        assert_eq!(config.output_limit, 1 << 20);
        assert_eq!(config.stdin_limit, 1 << 20);
        assert!(!config.allow_write && !config.allow_exec);
    }

    #[test]
    fn bad_values_are_one_line_usage_errors() {
        for value in ["0", "-1", "nan", "inf", "-inf"] {
            assert_eq!(
                err(&["--timeout", value]),
                "ccm: error: argument --timeout: must be finite and greater than zero"
            );
        }
        assert!(err(&["--timeout", "abc"]).contains("is not a number"));
        assert_eq!(
            err(&["--output-limit-bytes", "0"]),
            "ccm: error: argument --output-limit-bytes: must be greater than zero"
        );
        assert_eq!(
            err(&["--stdin-limit-bytes", "0"]),
            "ccm: error: argument --stdin-limit-bytes: must be greater than zero"
        );
        assert!(err(&["--output-limit-bytes", "1.5"]).contains("not a whole number"));
        let unknown = err(&["--bogus"]);
        assert!(!unknown.contains('\n'), "{unknown}");
        assert!(unknown.contains("--bogus") && unknown.ends_with("(see 'ccm --help')"));
    }

    #[test]
    fn conda_resolution_errors() {
        let message = parse(
            ["ccm", "--conda-exe", "/nonexistent"],
            &Environment::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            message.starts_with("ccm: error: could not find conda"),
            "{message}"
        );
        assert!(message.contains("Use --conda-exe PATH, set CONDA_EXE, or add conda to PATH"));
        let (_dir, conda) = fake_conda();
        assert!(matches!(
            parse(
                ["ccm"],
                &Environment::from_pairs([("CONDA_EXE", conda.as_str())])
            )
            .unwrap(),
            Action::Serve(_)
        ));
    }

    #[test]
    fn version_and_help() {
        let Action::Print(text) = parse(["ccm", "--version"], &Environment::default()).unwrap()
        else {
            panic!()
        };
        assert_eq!(text, format!("{}\n", crate::VERSION_TEXT));
        assert!(text.starts_with(concat!(env!("CARGO_PKG_VERSION"), " (")));
        let Action::Print(help) = parse(["ccm", "--help"], &Environment::default()).unwrap() else {
            panic!()
        };
        for flag in [
            "--conda-exe",
            "--timeout",
            "--output-limit-bytes",
            "--stdin-limit-bytes",
            "--allow-write",
            "--allow-exec",
        ] {
            assert!(help.contains(flag), "{flag} missing from help");
        }
    }

    #[test]
    fn discover_subcommand_takes_global_options() {
        let (_dir, conda) = fake_conda();
        let action = parse(
            ["ccm", "discover", "--pretty", "--conda-exe", &conda],
            &Environment::default(),
        )
        .unwrap();
        assert!(matches!(action, Action::Discover { pretty: true, .. }));
    }

    fn serve(args: &[&str], env: &[(&str, &str)]) -> Result<Config, String> {
        let (_dir, conda) = fake_conda();
        let mut argv = vec!["ccm", "--conda-exe", &conda];
        argv.extend_from_slice(args);
        match parse(argv, &Environment::from_pairs(env.iter().copied())) {
            Ok(Action::Serve(config)) => Ok(config),
            Ok(other) => panic!("expected serve, got {other:?}"),
            Err(e) => Err(e.to_string()),
        }
    }

    #[test]
    fn limit_flags_and_variables() {
        use crate::exec::Limit;
        let config = serve(&[], &[]).unwrap();
        assert_eq!(config.limits, crate::exec::Settings::default());
        let config = serve(
            &[
                "--memory-limit",
                "2GiB",
                "--file-size-limit",
                "1048576",
                "--process-limit",
                "64",
                "--child-env-remove",
                "AWS_SECRET_ACCESS_KEY",
            ],
            &[(CHILD_ENV_REMOVE_VAR, "A, B,,A")],
        )
        .unwrap();
        assert_eq!(config.limits.memory, Limit::At(2 << 30));
        assert_eq!(config.limits.file_size, Limit::At(1 << 20));
        assert_eq!(config.limits.processes, Limit::At(64));
        assert_eq!(
            config.limits.child_env_remove,
            ["AWS_SECRET_ACCESS_KEY", "A", "B"]
        );
        // Variables apply when the flag is absent; the flag wins.
        let config = serve(
            &["--memory-limit", "512M"],
            &[
                (MEMORY_LIMIT_VAR, "1GiB"),
                (FILE_SIZE_LIMIT_VAR, "unlimited"),
                (PROCESS_LIMIT_VAR, "unlimited"),
            ],
        )
        .unwrap();
        assert_eq!(config.limits.memory, Limit::At(512 << 20));
        assert_eq!(config.limits.file_size, Limit::Unlimited);
        assert_eq!(config.limits.processes, Limit::Unlimited);
        assert_eq!(parse_size("1.5GiB"), Ok(Limit::At(3 << 29)));
        for bad in ["", "-1", "4XB", "12", "0.5KiB", "NaN", "1e400"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
        assert_eq!(
            serve(&["--memory-limit", "lots"], &[]).unwrap_err(),
            "ccm: error: argument --memory-limit: 'lots' is not a size; give bytes, a number \
             with KiB, MiB, GiB or TiB, or 'unlimited'"
        );
        assert!(
            serve(&[], &[(FILE_SIZE_LIMIT_VAR, "10")])
                .unwrap_err()
                .contains("CCM_FILE_SIZE_LIMIT: must be at least 1MiB")
        );
        assert!(serve(&["--process-limit", "0"], &[]).is_err());
        assert!(serve(&["--child-env-remove", "A=B"], &[]).is_err());
    }

    #[test]
    fn capacity_flags() {
        let config = serve(&[], &[]).unwrap();
        assert_eq!((config.max_queue, config.max_session_calls), (16, 4));
        let config = serve(&["--max-queue", "0", "--max-session-calls", "1"], &[]).unwrap();
        assert_eq!((config.max_queue, config.max_session_calls), (0, 1));
        assert_eq!(
            serve(&["--max-session-calls", "0"], &[]).unwrap_err(),
            "ccm: error: argument --max-session-calls: must be greater than zero"
        );
        assert!(
            serve(&["--max-queue", "-1"], &[])
                .unwrap_err()
                .contains("not a whole number")
        );
    }

    #[test]
    fn http_defaults_and_addresses() {
        assert!(serve(&[], &[]).unwrap().http.is_none());
        let http = serve(&["--http"], &[]).unwrap().http.unwrap();
        assert_eq!(http.addr, DEFAULT_HTTP_ADDR.parse().unwrap());
        assert_eq!(http.token, None);
        assert_eq!(http.query_param, "token");
        assert!(http.allowed_hosts.is_empty());
        assert!(http.allowed_origins.is_empty());
        assert_eq!(
            http.limits,
            HttpLimits {
                max_connections: 256,
                header_timeout: Duration::from_secs(10),
                idle_timeout: Duration::from_secs(60),
                max_sessions: 64,
                session_idle: Duration::from_secs(600),
                max_stateless: 16,
            }
        );
        let http = serve(
            &[
                "--http",
                "--http-max-sessions",
                "3",
                "--allowed-origin",
                "HTTPS://App.Example",
            ],
            &[
                ("CCM_HTTP_MAX_SESSIONS", "9"),
                ("CCM_HTTP_MAX_CONNECTIONS", "7"),
                ("CCM_HTTP_ALLOWED_ORIGINS", "http://a.example:8080, ,"),
            ],
        )
        .unwrap()
        .http
        .unwrap();
        assert_eq!(
            (http.limits.max_sessions, http.limits.max_connections),
            (3, 7),
            "the flag wins over the environment"
        );
        assert_eq!(
            http.allowed_origins,
            ["https://app.example", "http://a.example:8080"]
        );
        for (flag, value) in [
            ("--http-max-connections", "0"),
            ("--http-header-timeout", "-1"),
            ("--http-idle-timeout", "nan"),
            ("--http-max-stateless", "x"),
            ("--allowed-origin", "app.example"),
        ] {
            assert!(
                serve(&["--http", flag, value], &[]).is_err(),
                "{flag} {value}"
            );
        }
        let http = serve(&["--http", "[::1]:0"], &[]).unwrap().http.unwrap();
        assert_eq!(http.addr, "[::1]:0".parse().unwrap());
        let http = serve(&["--http", "localhost:9"], &[])
            .unwrap()
            .http
            .unwrap();
        assert_eq!(http.addr, "127.0.0.1:9".parse().unwrap());
        assert!(
            serve(&["--http", "nowhere"], &[])
                .unwrap_err()
                .contains("is not an address")
        );
        let remote = serve(&["--http", "0.0.0.0:8089"], &[]).unwrap_err();
        assert!(remote.contains("--allow-remote"), "{remote}");
        let http = serve(
            &[
                "--http",
                "192.0.2.1:8089",
                "--allow-remote",
                "--allowed-host",
                "mcp.example",
            ],
            &[],
        )
        .unwrap()
        .http
        .unwrap();
        assert_eq!(http.allowed_hosts, ["mcp.example", "192.0.2.1"]);
        for flag in [
            &["--allow-remote"][..],
            &["--token-file", "/x"],
            &["--allowed-host", "h"],
        ] {
            assert!(
                serve(flag, &[])
                    .unwrap_err()
                    .contains("applies only with --http"),
                "{flag:?}"
            );
        }
    }

    #[test]
    fn tokens_from_environment_and_file() {
        let token = "0123456789abcdef-token";
        let http = serve(&["--http"], &[(TOKEN_VAR, token), (QUERY_PARAM_VAR, "key")])
            .unwrap()
            .http
            .unwrap();
        assert_eq!(http.token.as_ref().map(Secret::expose), Some(token));
        assert_eq!(http.query_param, "key");
        assert_eq!(
            format!("{http:?}").matches(token).count(),
            0,
            "Debug hides it"
        );
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        std::fs::write(&file, "from-the-file-0123456789\n").unwrap();
        let file = file.to_str().unwrap();
        let http = serve(&["--http", "--token-file", file], &[(TOKEN_VAR, token)])
            .unwrap()
            .http
            .unwrap();
        assert_eq!(http.token.unwrap().expose(), "from-the-file-0123456789");
        for bad in [
            "short",
            "",
            "has a space in the middle",
            "tab\tinside-0123456789",
        ] {
            let message = serve(&["--http"], &[(TOKEN_VAR, bad)]).unwrap_err();
            assert!(message.contains("visible ASCII"), "{message}");
            assert!(bad.is_empty() || !message.contains(bad));
        }
        assert!(
            serve(&["--http", "--token-file", "/nonexistent/t"], &[])
                .unwrap_err()
                .contains("cannot read")
        );
        assert!(
            serve(&["--http"], &[(QUERY_PARAM_VAR, "a&b")])
                .unwrap_err()
                .contains(QUERY_PARAM_VAR)
        );
        // Without --http the token variables are not consulted.
        assert!(serve(&[], &[(TOKEN_VAR, "short")]).is_ok());
    }

    #[test]
    fn surface_errors_are_usage_errors() {
        let message = serve(&[], &[("CCM_MCP_TOOL_CONDA_INFO_COLOUR", "x")]).unwrap_err();
        assert!(
            message
                .starts_with("ccm: error: CCM_MCP_TOOL_CONDA_INFO_COLOUR: unknown tool override")
        );
        assert!(!message.contains('\n'));
        let (_dir, conda) = fake_conda();
        let discover = parse(
            [
                "ccm",
                "--conda-exe",
                &conda,
                "--http",
                "127.0.0.1:1",
                "discover",
            ],
            &Environment::default(),
        );
        assert!(discover.is_err());
    }
}
