//! The `ccm` binary: parse the command line, then serve or run a one-shot command.

use std::io::Write;
use std::process::ExitCode;

use ccm::cli::{self, Action};
use ccm::host::audit::Audit;
use ccm::host::exec::Limits;
use ccm::host::{Host, discovery};
use ccm::transport::ServeFailure;

fn main() -> ExitCode {
    // Keep the identity bytes in the binary, whatever the optimizer thinks of them.
    std::hint::black_box(ccm::IDENTITY.as_bytes());
    one_malloc_arena();
    let env = cli::Environment::from_process();
    let action = match cli::parse(std::env::args_os(), &env) {
        Ok(action) => action,
        Err(error) => {
            eprintln!("{error}");
            return exit(cli::EXIT_USAGE);
        }
    };
    init_logging();
    let config = match &action {
        Action::Print(_) => None,
        Action::Serve(config) | Action::Discover { config, .. } | Action::Tools { config, .. } => {
            Some(config)
        }
    };
    // The children's limits and the values withheld from them and from the audit log.
    let (limits, secrets) = config.map(protect_secrets).unwrap_or_default();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("ccm: error: could not start the async runtime: {error}");
            return exit(cli::EXIT_FAILURE);
        }
    };
    match action {
        Action::Print(text) => print_stdout(&text),
        Action::Discover { config, pretty } => {
            let host = one_shot_host(&config, limits);
            discover(&runtime, &config, &host, pretty)
        }
        Action::Tools { config, json } => {
            let host = one_shot_host(&config, limits);
            tools(&runtime, &config, &host, json)
        }
        Action::Serve(config) => match open_audit_log(&config, &secrets) {
            Ok(audit) => {
                // What servers killed mid-call (SIGKILL) left in the temporary directory.
                let removed = ccm::host::scratch::sweep(&std::env::temp_dir());
                if removed > 0 {
                    tracing::info!(removed, "removed directories of servers that are gone");
                }
                let conda = ccm::host::target::Conda::resolve(config.conda_exe.clone());
                serve(runtime, config, Host::new(conda, limits, audit))
            }
            Err(code) => code,
        },
    }
}

/// The host of a one-shot command (`ccm discover`, `ccm tools`): the target resolved, its
/// children under `limits`, no audit log.
fn one_shot_host(config: &ccm::config::Config, limits: Limits) -> Host {
    let conda = ccm::host::target::Conda::resolve(config.conda_exe.clone());
    Host::new(conda, limits, Audit::none())
}

/// Live discovery of the target for a one-shot command, with every execution ended
/// afterwards; the exit code when the target is not a working conda.
fn discover_target(
    runtime: &tokio::runtime::Runtime,
    config: &ccm::config::Config,
    host: &Host,
) -> Result<discovery::Discovery, ExitCode> {
    let found = runtime.block_on(discovery::discover(&host.exec, &host.conda, config.timeout));
    runtime.block_on(host.exec.shutdown(ccm::host::exec::SHUTDOWN_BOUND));
    if let Some(line) = found.not_a_conda(&config.conda_exe) {
        eprintln!("ccm: error: {line}");
        return Err(exit(cli::EXIT_USAGE));
    }
    Ok(found)
}

/// `ccm discover`: the catalog as JSON.
fn discover(
    runtime: &tokio::runtime::Runtime,
    config: &ccm::config::Config,
    host: &Host,
    pretty: bool,
) -> ExitCode {
    let found = match discover_target(runtime, config, host) {
        Ok(found) => found,
        Err(code) => return code,
    };
    let document = serde_json::json!({
        "catalog": found.catalog,
        "conda_version": found.catalog.conda_version,
        "discovery_fingerprint": found.fingerprint(),
        "plugins": found.plugins,
        "target_executable": config.conda_exe,
    });
    let text = if pretty {
        serde_json::to_string_pretty(&document)
    } else {
        serde_json::to_string(&document)
    }
    .expect("a JSON value always serializes");
    print_stdout(&format!("{text}\n"))
}

/// `ccm tools`: the tools an agent will get, as a table or JSON.
fn tools(
    runtime: &tokio::runtime::Runtime,
    config: &ccm::config::Config,
    host: &Host,
    json: bool,
) -> ExitCode {
    // The listing depends on whether read-only calls would run in the read-only sandbox:
    // probed as a server probes it (before discovery, which ends with the executor's
    // shutdown).
    let sandbox = runtime.block_on(ccm::server::startup::probe_sandbox(
        host.exec.clone(),
        config.no_sandbox,
    ));
    let found = match discover_target(runtime, config, host) {
        Ok(found) => found,
        Err(code) => return code,
    };
    for d in found.catalog.diagnostics.iter().filter(|d| d.blocking) {
        eprintln!(
            "ccm: {}: {}",
            if d.path.is_empty() {
                "conda".to_owned()
            } else {
                d.path.join(" ")
            },
            d.reason
        );
    }
    // What a server with these settings serves: the policy-shaped listing (unless
    // --list-all), `--tools`, folded and left-out tools, the operator's surface.
    let sandboxed = *sandbox.state() == ccm::host::sandbox::State::Active;
    let settings = ccm::server::settings(config, sandboxed);
    let served = ccm::server::served(
        &found.catalog,
        &found.plugins,
        &settings,
        &config.surface,
        config,
    );
    let ccm::server::Served {
        toolset, applied, ..
    } = match served {
        Ok(served) => served,
        Err(message) => {
            eprintln!("ccm: error: {message}");
            return exit(cli::EXIT_USAGE);
        }
    };
    let report = ccm::tools::report::report(&toolset, &applied);
    let text = if json {
        format!(
            "{}\n",
            serde_json::to_string_pretty(&report).expect("the report serializes")
        )
    } else {
        ccm::tools::report::table(&report)
    };
    print_stdout(&text)
}

/// `--audit-log`: opened before serving; a path that cannot be opened stops the server.
/// `secrets` are never written to it.
fn open_audit_log(config: &ccm::config::Config, secrets: &[String]) -> Result<Audit, ExitCode> {
    let audit = match &config.audit_log {
        None => Audit::none(),
        Some(path) => Audit::open(path).map_err(|error| {
            eprintln!("ccm: error: {error}");
            exit(cli::EXIT_USAGE)
        })?,
    };
    for secret in secrets {
        audit.withhold(secret);
    }
    Ok(audit)
}

/// Serve MCP over stdio or HTTP until the transport stops, then end every execution.
fn serve(runtime: tokio::runtime::Runtime, config: ccm::config::Config, host: Host) -> ExitCode {
    let http = config.http.clone();
    let executions = host.exec.clone();
    let served = runtime.block_on(async move {
        let server = ccm::server::Server::start(config, host);
        match http {
            None => ccm::transport::stdio(server).await,
            Some(http) => ccm::transport::http::serve(server, http).await,
        }
    });
    // Cancel every execution still running (a session that went away) and let its
    // termination sweep finish: nothing the server started outlives it.
    runtime.block_on(executions.shutdown(ccm::host::exec::SHUTDOWN_BOUND));
    // Only the blocking stdin reader can be left (it cannot be cancelled): do not wait for it.
    runtime.shutdown_timeout(std::time::Duration::from_millis(20));
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(ServeFailure::Config(message)) => {
            eprintln!("ccm: error: {message}");
            exit(cli::EXIT_USAGE)
        }
        Err(ServeFailure::Io(message)) => {
            eprintln!("ccm: error: {message}");
            exit(cli::EXIT_FAILURE)
        }
    }
}

/// Before any thread starts: let every thread allocate from glibc's main arena. By default
/// each thread that allocates may get an arena of its own, each keeping its own free pages
/// and fragments; the server's threads mostly wait, so sharing one costs no contention
/// that shows, and lowers the peak resident memory (see docs/performance.md).
fn one_malloc_arena() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt with integer arguments, called before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

/// Before any thread starts: make this process a child subreaper (orphaned descendants are
/// reaped here, not by init), undumpable (same-user children cannot read its
/// `/proc/<pid>/environ`, `cmdline` or memory), resolve the children's limits and withheld
/// variables, and wipe the token from this process's own environment block. Returns the
/// limits and the secret values (the token, its file's path) the audit log withholds.
fn protect_secrets(config: &ccm::config::Config) -> (Limits, Vec<String>) {
    if config.write_envs.is_some() && config.allow_exec {
        tracing::warn!(
            "--write-envs with --allow-exec: programs that conda run or plugin commands start are not contained by the scope"
        );
    }
    let confined =
        config.write_envs.is_some() || config.allow_paths.is_some() || config.http.is_some();
    if config.allow_write
        && confined
        && let Err(reason) = ccm::host::sandbox::bound::support()
    {
        tracing::warn!(
            %reason,
            "no write bound: a write nobody confirms can be redirected by a symlink swapped \
             in after its last check (docs/security.md, \"When paths are judged\")"
        );
    }
    if !ccm::host::exec::reap::become_subreaper() {
        tracing::warn!("cannot become a child subreaper: orphaned descendants go to init");
    }
    if !ccm::host::make_undumpable() {
        tracing::warn!("cannot mark the server undumpable");
    }
    let token = config.http.as_ref().and_then(|h| h.token.as_ref());
    let token_file = config
        .http
        .as_ref()
        .and_then(|h| h.token_file.as_ref())
        .and_then(|p| p.to_str());
    let secrets: Vec<&str> = token
        .map(|t| t.expose())
        .into_iter()
        .chain(token_file)
        .collect();
    let limits = ccm::host::exec::limits::configure(&config.limits, &secrets);
    // Withheld from children, so not needed here either: a child running as the same user
    // as root (whom PR_SET_DUMPABLE does not stop) finds nothing in /proc/<server>.
    for name in limits.env_remove.iter() {
        wipe_env(name);
    }
    wipe_arg_value("--token-file");
    let secrets = secrets.iter().map(|s| (*s).to_owned()).collect();
    (limits, secrets)
}

/// Overwrite the value of `flag` (`--flag VALUE` or `--flag=VALUE`) in this process's
/// argument block, which `/proc/self/cmdline` shows; parsing is done by now.
fn wipe_arg_value(flag: &str) {
    let (Ok(cmdline), Ok(stat)) = (
        std::fs::read("/proc/self/cmdline"),
        std::fs::read_to_string("/proc/self/stat"),
    ) else {
        return;
    };
    // Fields 48 and 49 of stat (counting from 1; the first after the command's ')' is 3).
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let (Some(Ok(start)), Some(Ok(end))) = (
        fields.get(45).map(|f| f.parse::<usize>()),
        fields.get(46).map(|f| f.parse::<usize>()),
    ) else {
        return;
    };
    if start == 0 || end < start || end - start != cmdline.len() {
        return;
    }
    let mut offset = 0;
    let mut wipe_next = false;
    for arg in cmdline.split(|b| *b == 0) {
        let range = if wipe_next {
            Some((offset, arg.len()))
        } else {
            arg.strip_prefix(flag.as_bytes())
                .and_then(|rest| rest.strip_prefix(b"="))
                .map(|value| (offset + arg.len() - value.len(), value.len()))
        };
        wipe_next = arg == flag.as_bytes();
        if let Some((at, len)) = range {
            // SAFETY: [start, end) is this process's own argument block (checked against
            // /proc/self/cmdline above); the write stays inside one argument.
            unsafe {
                std::ptr::write_bytes((start + at) as *mut u8, b'*', len);
            }
        }
        offset += arg.len() + 1;
    }
}

/// Overwrite the variable's value where the kernel shows it (`/proc/self/environ` reads
/// the original environment block), then remove it. The parsed configuration has its own
/// copy.
fn wipe_env(name: &str) {
    let Ok(c_name) = std::ffi::CString::new(name) else {
        return;
    };
    // SAFETY: single-threaded at this point (no runtime yet); getenv returns a pointer to
    // a NUL-terminated value inside the environment, overwritten within its length.
    unsafe {
        let value = libc::getenv(c_name.as_ptr());
        if !value.is_null() {
            let len = libc::strlen(value);
            std::ptr::write_bytes(value, 0, len);
        }
        std::env::remove_var(name);
    }
}

fn print_stdout(text: &str) -> ExitCode {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        // A closed pipe (`ccm discover | head`) is not worth a message.
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(_) => exit(cli::EXIT_FAILURE),
    }
}

fn exit(code: i32) -> ExitCode {
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("CCM_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,ccm=info,rmcp=error"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
}
