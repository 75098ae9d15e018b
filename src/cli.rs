//! The command line: flags, environment variables, validation and exit codes.
//!
//! Parsing never spawns anything. Every bad value becomes a one-line `ccm: error: …`
//! message that says what to do, with exit status 2; `--help` and `--version` exit 0.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::discovery::{self, ResolveError};

/// Exit status for usage errors (bad flags, no conda).
pub const EXIT_USAGE: i32 = 2;
/// Exit status for runtime failures (I/O on the transport, a server that could not start).
pub const EXIT_FAILURE: i32 = 1;

const ABOUT: &str = "Expose an installed conda CLI through MCP.";
const LONG_ABOUT: &str = "\
Expose an installed conda's whole command line (built-in and plugin commands) to MCP \
clients as typed, policy-checked tools, over stdio.

The target conda is --conda-exe, else $CONDA_EXE, else `conda` on PATH. The server is \
read-only by default: --allow-write permits operations that change environments or files, \
--allow-exec permits `conda run`, opaque plugin passthrough and the raw conda_execute tool.

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
    /// Serve MCP over stdio (the default when no command is given).
    Serve,
    /// Discover the target conda and print its catalog as JSON (sorted keys).
    Discover {
        /// Indent the JSON.
        #[arg(long)]
        pretty: bool,
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

    /// Expose raw argv execution and allow conda run.
    #[arg(long, global = true)]
    pub allow_exec: bool,

    /// Always wait for live discovery, even when the target matches a baked snapshot.
    #[arg(long, global = true)]
    pub no_snapshot: bool,
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
    pub no_snapshot: bool,
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
pub fn parse<I, T>(args: I, conda_exe_env: Option<&str>) -> Result<Action, UsageError>
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
        return Ok(Action::Print(format!("{}\n", env!("CARGO_PKG_VERSION"))));
    }
    let config = validate(&cli.options, conda_exe_env)?;
    Ok(match cli.command {
        None | Some(Command::Serve) => Action::Serve(config),
        Some(Command::Discover { pretty }) => Action::Discover { config, pretty },
    })
}

/// clap's first line, without its `error: ` prefix, plus where to look.
fn one_line(text: &str) -> String {
    let first = text.lines().next().unwrap_or("invalid arguments");
    let first = first.strip_prefix("error: ").unwrap_or(first);
    format!("{first} (see 'ccm --help')")
}

fn validate(options: &Options, conda_exe_env: Option<&str>) -> Result<Config, UsageError> {
    let timeout = positive_seconds("--timeout", &options.timeout)?;
    let output_limit = positive_int("--output-limit-bytes", &options.output_limit_bytes)?;
    let stdin_limit = positive_int("--stdin-limit-bytes", &options.stdin_limit_bytes)?;
    let conda_exe = discovery::resolve_executable(options.conda_exe.as_deref(), conda_exe_env)
        .map_err(|error| match error {
            ResolveError::NotFound(why) => UsageError(format!(
                "could not find conda ({why}). Use --conda-exe PATH, set CONDA_EXE, or add conda to PATH"
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
        no_snapshot: options.no_snapshot,
    })
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
            "argument {flag}: '{text}' is not a whole number; give a byte count greater than zero"
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
        parse(argv, None).unwrap_err().to_string()
    }

    #[test]
    fn defaults() {
        let (_dir, conda) = fake_conda();
        let Action::Serve(config) = parse(["ccm", "--conda-exe", &conda], None).unwrap() else {
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
        let message = parse(["ccm", "--conda-exe", "/nonexistent"], None)
            .unwrap_err()
            .to_string();
        assert!(
            message.starts_with("ccm: error: could not find conda"),
            "{message}"
        );
        assert!(message.contains("Use --conda-exe PATH, set CONDA_EXE, or add conda to PATH"));
        let (_dir, conda) = fake_conda();
        assert!(matches!(
            parse(["ccm"], Some(conda.as_str())).unwrap(),
            Action::Serve(_)
        ));
    }

    #[test]
    fn version_and_help() {
        let Action::Print(text) = parse(["ccm", "--version"], None).unwrap() else {
            panic!()
        };
        assert_eq!(text, format!("{}\n", env!("CARGO_PKG_VERSION")));
        let Action::Print(help) = parse(["ccm", "--help"], None).unwrap() else {
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
        let action = parse(["ccm", "discover", "--pretty", "--conda-exe", &conda], None).unwrap();
        assert!(matches!(action, Action::Discover { pretty: true, .. }));
    }
}
