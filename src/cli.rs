//! The command line: flags, environment variables, validation and exit codes.
//!
//! Parsing never spawns anything. Every bad value becomes a one-line `ccm: error: …`
//! message that says what to do, with exit status 2; `--help` and `--version` exit 0.
//! Parsing is a function of argv and [`Environment`], except `--version`, which reads
//! which distribution installed this binary (`host::install`).

use std::path::PathBuf;

use crate::host::discovery::{self, ResolveError};
use crate::tools::surface::Surface;

use crate::config::Config;

mod flags;
mod http;
mod numbers;
mod settings;
#[cfg(test)]
mod tests;
mod topics;

use http::http_config;
use numbers::{positive_int, positive_seconds, whole};
use settings::{allowed_paths, classifications, limit_settings, selection, write_scope};

pub use flags::{Cli, Command, Options};
pub use settings::{
    CHILD_ENV_REMOVE_VAR, FILE_SIZE_LIMIT_VAR, MEMORY_LIMIT_VAR, PROCESS_LIMIT_VAR, SizeError,
    parse_size,
};

/// Exit status for usage errors (bad flags, no conda).
pub const EXIT_USAGE: i32 = 2;
/// Exit status for runtime failures (I/O on the transport, a server that could not start).
pub const EXIT_FAILURE: i32 = 1;
/// The default `--http` address.
pub const DEFAULT_HTTP_ADDR: &str = "127.0.0.1:8089";
/// Environment variables read besides `CONDA_EXE`.
pub use crate::TOKEN_VAR;
pub const QUERY_PARAM_VAR: &str = "CCM_MCP_TOKEN_QUERY_PARAM";
pub const CLASSIFY_VAR: &str = "CCM_CLASSIFY";
pub const ALLOW_PATHS_VAR: &str = "CCM_ALLOW_PATHS";
/// The scope of writes when `--write-envs` is not given.
pub const WRITE_ENVS_VAR: &str = "CCM_WRITE_ENVS";
/// The tools selected when `--tools` is not given.
pub const TOOLS_VAR: &str = "CCM_TOOLS";
/// Set to 1/true/yes/on: same as `--list-all`.
pub const LIST_ALL_VAR: &str = "CCM_LIST_ALL";
/// Set to 0/false/no/off: same as `--no-warm`.
pub const WARM_VAR: &str = "CCM_WARM";
/// Set to 1/true/yes/on: same as `--no-sandbox`.
pub const NO_SANDBOX_VAR: &str = "CCM_NO_SANDBOX";
/// The audit log's path when `--audit-log` is not given.
pub const AUDIT_LOG_VAR: &str = "CCM_AUDIT_LOG";
/// Set to 1/true/yes/on: same as `--confirm-writes`.
pub const CONFIRM_WRITES_VAR: &str = "CCM_CONFIRM_WRITES";
/// Shortest accepted bearer token.
pub const MIN_TOKEN_LEN: usize = 16;
const MAX_TOKEN_LEN: usize = 4096;

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
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("ccm: error: {0}")]
pub struct UsageError(pub String);

/// Parse argv (including the program name) and the relevant environment.
pub fn parse<I, T>(args: I, env: &Environment) -> Result<Action, UsageError>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    use clap::FromArgMatches;
    let args: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
    let matches = match flags::command().try_get_matches_from(&args) {
        Ok(matches) => matches,
        Err(error) => {
            use clap::error::ErrorKind;
            return match error.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
                    Ok(Action::Print(error.render().to_string()))
                }
                _ => Err(UsageError(one_line(&error, command_uses(&args)))),
            };
        }
    };
    let cli =
        Cli::from_arg_matches(&matches).map_err(|error| UsageError(one_line(&error, None)))?;
    if cli.version {
        return Ok(Action::Print(format!(
            "{}\n",
            crate::host::install::version_text()
        )));
    }
    let config = validate(&cli.options, env, || applies(&matches))?;
    Ok(match cli.command {
        None | Some(Command::Serve) => Action::Serve(config),
        Some(Command::Discover { pretty }) => Action::Discover { config, pretty },
        Some(Command::Tools { json }) => Action::Tools { config, json },
    })
}

/// `Err` when a flag is given to a command that does not use it (`ccm tools --http`).
fn applies(matches: &clap::ArgMatches) -> Result<(), UsageError> {
    let Some((name, sub)) = matches.subcommand() else {
        return Ok(());
    };
    let Some(uses) = topics::uses(name) else {
        return Ok(());
    };
    match unused_flag(sub, uses) {
        Some(flag) => Err(UsageError(format!(
            "{flag} applies to serving, not to '{name}' (see 'ccm {name} --help')"
        ))),
        None => Ok(()),
    }
}

/// The first flag given on the command line (before or after the command) that the
/// command does not use, as written in `--help`.
fn unused_flag(matches: &clap::ArgMatches, uses: &[&str]) -> Option<String> {
    let command = flags::command();
    command
        .get_arguments()
        .filter(|arg| arg.is_global_set() && arg.get_id() != "version")
        .filter(|arg| !uses.contains(&arg.get_id().as_str()))
        .find(|arg| {
            matches.value_source(arg.get_id().as_str())
                == Some(clap::parser::ValueSource::CommandLine)
        })
        .and_then(|arg| arg.get_long().map(|long| format!("--{long}")))
}

/// The flags the command in `args` takes, when it is one that does not take them all.
fn command_uses(args: &[std::ffi::OsString]) -> Option<&'static [&'static str]> {
    let matches = flags::command()
        .ignore_errors(true)
        .try_get_matches_from(args)
        .ok()?;
    topics::uses(matches.subcommand_name()?)
}

/// clap's first line, without its `error: ` prefix, with clap's suggestion when it has
/// one (a misspelled flag or command) that the command takes (`uses`: its flags, when it
/// does not take them all), plus where to look.
fn one_line(error: &clap::Error, uses: Option<&[&str]>) -> String {
    use clap::error::{ContextKind, ContextValue};
    let text = error.to_string();
    let first = text.lines().next().unwrap_or("invalid arguments");
    let first = first.strip_prefix("error: ").unwrap_or(first);
    let suggested = [ContextKind::SuggestedArg, ContextKind::SuggestedSubcommand]
        .into_iter()
        .find_map(|kind| match error.get(kind)? {
            ContextValue::String(one) => Some(one.clone()),
            ContextValue::Strings(many) => many.first().cloned(),
            _ => None,
        })
        .filter(|suggested| {
            // `ccm tools --htp`: not `--http`, which `tools` refuses.
            let id = suggested.trim_start_matches('-').replace('-', "_");
            !suggested.starts_with("--")
                || uses.is_none_or(|uses| uses.contains(&id.as_str()) || topics::own(&id))
        });
    match suggested {
        Some(suggested) => format!("{first}; did you mean '{suggested}'? (see 'ccm --help')"),
        None => format!("{first} (see 'ccm --help')"),
    }
}

/// The configuration from the flags and variables; `applies` is checked once every value
/// is, before the target is resolved.
fn validate(
    options: &Options,
    env: &Environment,
    applies: impl FnOnce() -> Result<(), UsageError>,
) -> Result<Config, UsageError> {
    let timeout = positive_seconds("--timeout", &options.timeout)?;
    let output_limit = positive_int("--output-limit-bytes", &options.output_limit_bytes)?;
    let stdin_limit = positive_int("--stdin-limit-bytes", &options.stdin_limit_bytes)?;
    let max_queue = whole("--max-queue", &options.max_queue)?;
    let max_session_calls = positive_int("--max-session-calls", &options.max_session_calls)?;
    let surface = Surface::from_env(env.pairs()).map_err(|e| UsageError(e.to_string()))?;
    let http = http_config(options, env)?;
    let limits = limit_settings(options, env)?;
    let classify = classifications(options, env)?;
    let allow_paths = allowed_paths(options, env)?;
    let write_envs = write_scope(options, env)?;
    let tools = selection(options, env)?;
    let audit_log = audit_log(options, env)?;
    let confirm_timeout = positive_seconds("--confirm-timeout", &options.confirm_timeout)?;
    applies()?;
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
        write_envs,
        no_snapshot: options.no_snapshot,
        no_sandbox: options.no_sandbox
            || env
                .get(NO_SANDBOX_VAR)
                .is_some_and(|v| matches!(v, "1" | "true" | "yes" | "on")),
        warm: warm(options, env),
        max_queue,
        max_session_calls,
        surface,
        tools,
        list_all: options.list_all || env.get(LIST_ALL_VAR).is_some_and(truthy),
        audit_log,
        confirm_writes: options.confirm_writes || env.get(CONFIRM_WRITES_VAR).is_some_and(truthy),
        confirm_timeout,
        http,
        limits,
    })
}

/// Warm reads: on unless `--no-warm`, or `CCM_WARM` set to a false value without
/// `--warm` (kept for compatibility: on is the default).
fn warm(options: &Options, env: &Environment) -> bool {
    let off = |v: &str| {
        matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "0" | "false" | "no" | "off"
        )
    };
    !options.no_warm && (options.warm || !env.get(WARM_VAR).is_some_and(off))
}

/// `--audit-log`, else `CCM_AUDIT_LOG` (an empty value is none), made absolute.
fn audit_log(options: &Options, env: &Environment) -> Result<Option<PathBuf>, UsageError> {
    let path = match (&options.audit_log, env.get(AUDIT_LOG_VAR)) {
        (Some(path), _) => path.clone(),
        (None, Some(text)) if !text.is_empty() => PathBuf::from(text),
        _ => return Ok(None),
    };
    if path.as_os_str().is_empty() {
        return Err(UsageError("argument --audit-log: the path is empty".into()));
    }
    Ok(Some(std::path::absolute(&path).unwrap_or(path)))
}

/// `1`, `true`, `yes`, `on` (any case).
fn truthy(value: &str) -> bool {
    matches!(
        value.trim().to_ascii_lowercase().as_str(),
        "1" | "true" | "yes" | "on"
    )
}
