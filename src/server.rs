//! The MCP server: rmcp handler, tool routing, results, resources, restart detection.
//!
//! `initialize` is answered at once; discovery runs in the background and every request
//! that needs the catalog waits for it. The tool list and the capabilities document are
//! built once. A tool call goes validate → compile → policy → queue → execute → result;
//! requests that run no process (lists, reads, ping, refused calls) never wait behind a
//! running execution. Processes are started only through [`crate::exec`] and
//! [`crate::discovery`].
//!
//! The served list applies the operator's [`Surface`] (hidden tools, overrides) once;
//! calls are routed by served name and validated against the full schema. Capacity: one
//! execution at a time server-wide behind a bounded queue (`no_capacity`), and at most
//! `--max-session-calls` executions running or waiting per session (`session_busy`); a
//! session is one [`Server`] value made by [`Server::for_session`] (one stdio connection,
//! one HTTP MCP session).

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, ProtocolVersion,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
    ResourceContents, ServerCapabilities, ServerConfig, Tool as McpTool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::catalog::{self, canonical_json};
use crate::cli::Config;
use crate::confine::Confinement;
use crate::discovery::{self, Discovery, Target, stamp};
use crate::exec::{self, Executor};
use crate::policy::{self, Classification, Grants, Origin};
use crate::sandbox::{self, Sandbox};
use crate::surface::Surface;
use crate::toolset::{COMPLETION_TOOL, Compiler, EXECUTE_TOOL, Settings, Toolset};
use crate::{argv, completion};

pub const SERVER_NAME: &str = "conda-cli-mcp";
pub const CAPABILITIES_URI: &str = "conda://capabilities";
/// The protocol revisions offered.
pub const SUPPORTED_VERSIONS: &[ProtocolVersion] = &[
    ProtocolVersion::V_2024_11_05,
    ProtocolVersion::V_2025_06_18,
    ProtocolVersion::V_2025_11_25,
    ProtocolVersion::V_2026_07_28,
];
const RESTART_SUFFIX: &str = ". Restart the MCP server to refresh conda tools";

/// Everything that exists once discovery has finished.
pub struct Ready {
    pub discovery: Discovery,
    pub toolset: Toolset,
    /// The listed tools, built once.
    tools: Vec<McpTool>,
    /// Hidden tools (served form): callable, never listed.
    unlisted: Vec<McpTool>,
    /// Served name → canonical name.
    routes: HashMap<String, String>,
    /// The fixed parts of the capabilities document, as JSON text; the catalog (hundreds
    /// of kilobytes as text) is written from the typed catalog on each read.
    capabilities: BTreeMap<&'static str, Box<RawValue>>,
    /// Where paths in calls that do not need `--allow-exec` may point.
    confinement: Confinement,
}

/// Restart detection state (sticky once set), and how the server started.
#[derive(Debug, Default)]
struct Restart {
    required: bool,
    reason: Option<String>,
    current_fingerprint: Option<String>,
    /// What the target's plugin distributions looked like when last checked.
    baseline: Option<stamp::Scan>,
    /// `snapshot` or `live`, and why.
    start_path: &'static str,
    start_reason: String,
    /// For a snapshot start: `pending` until live discovery confirms or contradicts it.
    confirmation: Option<&'static str>,
}

struct CompletionCache {
    /// The helper's converted manifest, shared by every answer while it is current.
    document: Arc<Value>,
    manifest_path: Option<PathBuf>,
    identity: Option<Value>,
    scan: stamp::Scan,
}

struct Shared {
    config: Config,
    executor: Arc<Executor>,
    ready: watch::Receiver<Option<Arc<Ready>>>,
    restart: Mutex<Restart>,
    completion: tokio::sync::Mutex<Option<CompletionCache>>,
    /// Set when the tool list cannot be served (an override collision): the server stops.
    fatal: watch::Sender<Option<String>>,
    /// The read-only sandbox, probed once before the tools are served.
    sandbox: std::sync::OnceLock<Sandbox>,
}

/// The MCP server (cheap to clone; clones share one state, including the session's).
#[derive(Clone)]
pub struct Server {
    shared: Arc<Shared>,
    /// Executions of this session running or waiting.
    session_calls: Arc<AtomicUsize>,
}

/// How a tool call ends when it is not a result.
enum Refusal {
    Protocol(ErrorData),
    /// Over a capacity limit: an `isError` result with the code; nothing ran.
    Busy(CallToolResult),
    /// The client cancelled: no response is sent.
    Cancelled,
}

/// One admitted execution of a session; dropping it frees the session's place.
struct SessionCall(Arc<AtomicUsize>);

impl Drop for SessionCall {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl From<ErrorData> for Refusal {
    fn from(error: ErrorData) -> Self {
        Refusal::Protocol(error)
    }
}

fn invalid_params(message: impl Into<Cow<'static, str>>) -> ErrorData {
    ErrorData::invalid_params(message, None)
}

fn invalid_arguments(error: &crate::schema::Invalid) -> ErrorData {
    ErrorData::invalid_params(
        error.to_string(),
        Some(json!({"path": error.path, "keyword": error.keyword})),
    )
}

fn internal() -> ErrorData {
    ErrorData::internal_error("Internal error", None)
}

impl Shared {
    /// The tool list, or `None` after reporting why it cannot be served.
    fn serveable(&self, built: Result<Ready, String>) -> Option<Ready> {
        match built {
            Ok(ready) => Some(ready),
            Err(reason) => {
                tracing::error!(%reason, "the tool list cannot be served");
                self.fatal.send_replace(Some(reason));
                None
            }
        }
    }

    fn record_start(
        &self,
        path: &'static str,
        reason: String,
        confirmation: Option<&'static str>,
        ready: &Ready,
    ) {
        if let Ok(mut status) = self.restart.lock() {
            status.start_path = path;
            status.start_reason = reason;
            status.confirmation = confirmation;
            status.baseline = Some(stamp::scan(&ready.discovery.site_dirs));
            status.current_fingerprint = Some(ready.discovery.fingerprint());
        }
    }

    /// Live discovery finished after a snapshot start.
    fn record_confirmation(&self, verdict: Result<(), String>, live: &Discovery) {
        let Ok(mut status) = self.restart.lock() else {
            return;
        };
        match verdict {
            Ok(()) => {
                tracing::debug!("live discovery confirms the baked snapshot");
                status.confirmation = Some("confirmed");
            }
            Err(reason) => {
                tracing::warn!(%reason, "live discovery differs from the baked snapshot; restart the server");
                status.confirmation = Some("differs");
                status.current_fingerprint = Some(live.fingerprint());
                if !status.required {
                    status.required = true;
                    status.reason = Some(reason);
                }
            }
        }
    }
}

impl Server {
    /// Start discovery in the background and return the server at once (as the first
    /// session's handler).
    pub fn start(config: Config) -> Server {
        let (sender, ready) = watch::channel(None);
        let (fatal, _) = watch::channel(None);
        let target = Target {
            conda_exe: config.conda_exe.clone(),
            timeout: config.timeout,
        };
        let shared = Arc::new(Shared {
            executor: Executor::new(config.max_queue),
            ready,
            restart: Mutex::new(Restart::default()),
            completion: tokio::sync::Mutex::new(None),
            fatal,
            sandbox: std::sync::OnceLock::new(),
            config,
        });
        let probe = tokio::spawn(probe_sandbox(shared.config.no_sandbox));
        let settings = Settings {
            allow_exec: shared.config.allow_exec,
            classify: shared.config.classify.clone(),
            timeout: shared.config.timeout,
        };
        let conda_exe = shared.config.conda_exe.clone();
        let no_snapshot = shared.config.no_snapshot;
        let state = Arc::clone(&shared);
        tokio::spawn(async move {
            let started = std::time::Instant::now();
            let sandbox = probe
                .await
                .unwrap_or_else(|_| Sandbox::unavailable("the sandbox probe failed"));
            let _ = state.sandbox.set(sandbox);
            match crate::startup::fast_start(&conda_exe, no_snapshot) {
                Ok(fast) => {
                    let snapshot = fast.snapshot;
                    let Some(ready) = state.serveable(build_ready(
                        fast.discovery,
                        &settings,
                        &conda_exe,
                        &state.config.surface,
                        &state.config,
                    )) else {
                        return;
                    };
                    tracing::info!(
                        tools = ready.toolset.generated.len(),
                        elapsed_ms = started.elapsed().as_millis() as u64,
                        snapshot = snapshot.file,
                        "serving tools from the baked snapshot; live discovery confirms in the background"
                    );
                    state.record_start("snapshot", fast.reason, Some("pending"), &ready);
                    let ready = Arc::new(ready);
                    let _ = sender.send(Some(Arc::clone(&ready)));
                    let found = discovery::discover(&target).await;
                    let verdict =
                        crate::startup::confirm(snapshot, &ready.discovery.catalog, &found);
                    state.record_confirmation(verdict, &found);
                }
                Err(reason) => {
                    let found = discovery::discover(&target).await;
                    // Not a conda at all: stop (exit status 2) rather than serve no tools.
                    if let Some(line) = found.not_a_conda(&conda_exe) {
                        state.fatal.send_replace(Some(line));
                        return;
                    }
                    let Some(ready) = state.serveable(build_ready(
                        found,
                        &settings,
                        &conda_exe,
                        &state.config.surface,
                        &state.config,
                    )) else {
                        return;
                    };
                    tracing::info!(
                        tools = ready.toolset.generated.len(),
                        elapsed_ms = started.elapsed().as_millis() as u64,
                        conda = %ready.discovery.catalog.conda_version,
                        why = %reason,
                        "discovery finished"
                    );
                    for d in &ready.discovery.catalog.diagnostics {
                        tracing::warn!(path = ?d.path, reason = %d.reason, "discovery diagnostic");
                    }
                    state.record_start("live", reason, None, &ready);
                    let _ = sender.send(Some(Arc::new(ready)));
                }
            }
        });
        Server {
            shared,
            session_calls: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// A handler for a new session: same server, its own per-session execution count.
    pub fn for_session(&self) -> Server {
        Server {
            shared: Arc::clone(&self.shared),
            session_calls: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// The longest frame (stdio line, HTTP body) the server reads: room for the largest
    /// command that may run ([`exec::MAX_COMMAND_BYTES`]) and the largest stdin, each byte
    /// JSON-escaped at worst (`\u00XX`, 6 bytes), plus the envelope.
    pub fn max_frame(&self) -> usize {
        6 * (exec::MAX_COMMAND_BYTES + self.shared.config.stdin_limit) + 64 * 1024
    }

    /// Resolves when the server cannot serve its tools (the reason, one line); the
    /// transport then stops and `ccm` exits with status 2.
    pub async fn failed(&self) -> String {
        let mut receiver = self.shared.fatal.subscribe();
        loop {
            if let Some(reason) = receiver.borrow_and_update().clone() {
                return reason;
            }
            if receiver.changed().await.is_err() {
                return std::future::pending().await;
            }
        }
    }

    /// Wait for discovery.
    pub async fn ready(&self) -> Arc<Ready> {
        let mut receiver = self.shared.ready.clone();
        loop {
            if let Some(ready) = receiver.borrow_and_update().clone() {
                return ready;
            }
            if receiver.changed().await.is_err() {
                if self.shared.fatal.borrow().is_some() {
                    // The list cannot be served: the transport is stopping the server.
                    return std::future::pending().await;
                }
                // The discovery task died (it cannot, short of a panic): report an empty
                // catalog rather than hanging every request.
                let found = Discovery {
                    catalog: catalog::Catalog::unavailable(
                        "conda",
                        "unknown",
                        "conda catalog discovery failed",
                    ),
                    plugins: Vec::new(),
                    interpreter: None,
                    prefix: None,
                    python_version: None,
                    site_dirs: Vec::new(),
                    processes: 0,
                };
                let settings = Settings {
                    allow_exec: self.shared.config.allow_exec,
                    classify: Vec::new(),
                    timeout: self.shared.config.timeout,
                };
                let conda_exe = &self.shared.config.conda_exe;
                let ready = build_ready(
                    found,
                    &settings,
                    conda_exe,
                    &Surface::default(),
                    &self.shared.config,
                )
                .expect("an empty surface always applies");
                return Arc::new(ready);
            }
        }
    }

    fn instructions(&self) -> String {
        let c = &self.shared.config;
        let mut text = String::from(
            "Each conda command is one tool named conda_<command path> (for example conda_info, \
             conda_env_list); its input schema mirrors conda's own options. Prefer `json: true` \
             where a tool offers it: stdout is then parsed into `parsed_json`. Every call runs conda \
             once in a fresh process and returns exit_code, stdout, stderr and flags for timeouts \
             and truncated output; a non-zero exit is an error result. The resource \
             conda://capabilities describes the discovered catalog.",
        );
        text.push_str(if c.allow_write {
            " Operations that change environments or files are allowed (--allow-write)."
        } else {
            " The server is read-only: operations that change environments or files are refused \
             (the operator can start it with --allow-write); dry runs (`dry_run: true`) are allowed."
        });
        text.push_str(if c.allow_exec {
            " `conda run`, plugin passthrough and the raw conda_execute tool are allowed (--allow-exec)."
        } else {
            " `conda run` and plugin passthrough are refused (the operator can start it with --allow-exec)."
        });
        text.push_str(
            " If a result says restart_required, the installed plugins changed: the tool list is \
             stale until the server restarts.",
        );
        text
    }

    fn restart_required(&self) -> bool {
        self.shared
            .restart
            .lock()
            .map(|r| r.required)
            .unwrap_or(true)
    }

    /// The capabilities document as served now.
    fn capabilities_text(&self, ready: &Ready) -> String {
        let mut document: BTreeMap<&str, Part> = ready
            .capabilities
            .iter()
            .map(|(k, v)| (*k, Part::Raw(v)))
            .collect();
        let (restart, startup) = match self.shared.restart.lock() {
            Ok(status) => (
                json!({
                    "required": status.required,
                    "reason": status.reason,
                    "current_fingerprint": status.current_fingerprint,
                }),
                json!({
                    "path": status.start_path,
                    "reason": status.start_reason,
                    "confirmation": status.confirmation,
                }),
            ),
            Err(_) => (json!({"required": true}), Value::Null),
        };
        let restart = raw(&restart);
        let startup = raw(&startup);
        let limits = raw(&exec::Limits::current().describe());
        let catalog = catalog_view(&ready.discovery.catalog, &ready.toolset);
        document.insert("catalog", Part::Catalog(catalog));
        let sandbox = raw(&match self.shared.sandbox.get() {
            Some(sandbox) => sandbox.describe(ready.discovery.prefix.as_deref()),
            None => Value::Null,
        });
        document.insert("sandbox", Part::Raw(&sandbox));
        document.insert("restart", Part::Raw(&restart));
        document.insert("startup", Part::Raw(&startup));
        document.insert("limits", Part::Raw(&limits));
        serde_json::to_string(&document).expect("raw JSON parts serialize")
    }

    async fn call(
        &self,
        request: CallToolRequestParams,
        ct: CancellationToken,
    ) -> Result<CallToolResult, Refusal> {
        let ready = self.ready().await;
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        let Some(name) = ready.routes.get(request.name.as_ref()) else {
            return Err(invalid_params("Unknown tool").into());
        };
        let name = name.as_str();
        if name == EXECUTE_TOOL && ready.toolset.execute.is_some() {
            return self.call_execute(&ready, &arguments, ct).await;
        }
        if name == COMPLETION_TOOL && ready.toolset.completion.is_some() {
            return self.call_completion(&ready, &arguments, ct).await;
        }
        let Some(tool) = ready.toolset.get(name) else {
            return Err(invalid_params("Unknown tool").into());
        };
        tool.validate(&arguments)
            .map_err(|e| invalid_arguments(&e))?;
        let input = arguments.as_object().expect("validated as an object");
        let argv = match tool.compiler {
            Compiler::Generic => argv::compile(&tool.layout, input),
            Compiler::Baked(baked) => (baked.compile)(input),
        }
        .map_err(|e| invalid_arguments(&e))?;
        let root = ready.discovery.catalog.root.as_ref();
        let mut class = policy::classify(
            &ready.toolset.rules,
            root,
            &argv,
            Origin::Generated {
                opaque: tool.opaque,
            },
        );
        if sandbox::forced_read_only(name) {
            class.read_only = true;
            class.requires_write = false;
            class.requires_exec = false;
        }
        self.enforce(&class)?;
        self.confine(&ready, &class, &argv, None)?;
        self.execute(
            &ready,
            argv,
            None,
            None,
            self.shared.config.timeout,
            class,
            ct,
        )
        .await
    }

    fn enforce(&self, class: &Classification) -> Result<(), Refusal> {
        let config = &self.shared.config;
        let missing = class.missing(Grants {
            write: config.allow_write,
            exec: config.allow_exec,
            credentials: config.allow_credentials,
        });
        if missing.is_empty() {
            Ok(())
        } else {
            Err(ErrorData::invalid_request(Classification::refusal(&missing), None).into())
        }
    }

    /// Path confinement for calls that do not need `--allow-exec` (those may run any
    /// program, which can read anything anyway).
    fn confine(
        &self,
        ready: &Ready,
        class: &Classification,
        argv: &[String],
        cwd: Option<&Path>,
    ) -> Result<(), Refusal> {
        if class.requires_exec || ready.confinement.is_unrestricted() {
            return Ok(());
        }
        let here = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        let home = std::env::var_os("HOME").map(PathBuf::from);
        // An explicit working directory is a path the call names too.
        let named_cwd = cwd.map(|c| here.join(c));
        let cwd_outside = named_cwd.as_ref().is_some_and(|c| {
            let token = [c.to_string_lossy().into_owned()];
            ready.confinement.check(&token, &here, None).is_err()
        });
        let cwd = named_cwd.unwrap_or(here);
        if cwd_outside
            || ready
                .confinement
                .check(argv, &cwd, home.as_deref())
                .is_err()
        {
            return Err(ErrorData::invalid_request(
                "Operation names a path outside the allowed directories (see --allow-paths)",
                None,
            )
            .into());
        }
        Ok(())
    }

    async fn call_execute(
        &self,
        ready: &Ready,
        arguments: &Value,
        ct: CancellationToken,
    ) -> Result<CallToolResult, Refusal> {
        ready
            .toolset
            .validate_execute(arguments)
            .map_err(|e| invalid_arguments(&e))?;
        let invalid_options = || Refusal::from(invalid_params("Invalid execution options"));
        let argv = strings(arguments.get("argv"));
        let cwd = match arguments.get("cwd").and_then(Value::as_str) {
            None => None,
            Some(text) => {
                let path = if text.is_empty() {
                    PathBuf::from(".")
                } else {
                    PathBuf::from(text)
                };
                if !path.is_dir() {
                    return Err(invalid_options());
                }
                Some(path)
            }
        };
        let stdin = match arguments.get("stdin").and_then(Value::as_str) {
            None => None,
            Some(text) if text.len() > self.shared.config.stdin_limit => {
                return Err(invalid_options());
            }
            Some(text) => Some(text.as_bytes().to_vec()),
        };
        let timeout = match arguments.get("timeout_seconds").and_then(Value::as_f64) {
            None => self.shared.config.timeout,
            Some(seconds) => Duration::try_from_secs_f64(seconds)
                .map_err(|_| invalid_options())?
                .min(self.shared.config.timeout),
        };
        let class = policy::classify(
            &ready.toolset.rules,
            ready.discovery.catalog.root.as_ref(),
            &argv,
            Origin::Raw,
        );
        self.enforce(&class)?;
        self.confine(ready, &class, &argv, cwd.as_deref())?;
        self.execute(ready, argv, cwd, stdin, timeout, class, ct)
            .await
    }

    #[allow(clippy::too_many_arguments)]
    async fn execute(
        &self,
        ready: &Ready,
        argv: Vec<String>,
        cwd: Option<PathBuf>,
        stdin: Option<Vec<u8>>,
        timeout: Duration,
        class: Classification,
        ct: CancellationToken,
    ) -> Result<CallToolResult, Refusal> {
        let sandbox = match self.shared.sandbox.get() {
            Some(sandbox)
                if sandbox::applies(&class, self.shared.config.allow_write)
                    && *sandbox.state() == sandbox::State::Active =>
            {
                // Fail closed: an active sandbox that cannot be planned runs nothing.
                let plan = sandbox.plan(ready.discovery.prefix.as_deref());
                if plan.is_none() {
                    tracing::error!("the sandbox could not be prepared for a read-only call");
                    return Err(internal().into());
                }
                plan
            }
            _ => None,
        };
        let spec = exec::Spec {
            program: self.shared.config.conda_exe.clone(),
            args: argv.into_iter().map(Into::into).collect(),
            cwd,
            stdin,
            timeout,
            stdout_limit: self.shared.config.output_limit,
            stderr_limit: self.shared.config.output_limit,
            env_remove: Vec::new(),
            limits: exec::Limits::current(),
            sandbox,
        };
        // Refused before anything spawns (and before it takes a place in the queue).
        exec::check_size(&spec).map_err(|why| {
            let message = match why {
                exec::TooLarge::Argument => format!(
                    "Invalid arguments: one argument is longer than {} bytes",
                    exec::MAX_ARG_BYTES
                ),
                exec::TooLarge::Total(_) => format!(
                    "Invalid arguments: the command line and environment would exceed {} bytes",
                    exec::MAX_COMMAND_BYTES
                ),
            };
            ErrorData::invalid_params(message, Some(json!({"limit": exec::MAX_COMMAND_BYTES})))
        })?;
        let _admitted = self.admit(&ct).await?;
        let outcome = match exec::run(&spec, &ct).await {
            Ok(outcome) => outcome,
            Err(error) => {
                let why = exec::plain_os_error(&error);
                tracing::error!(%why, "conda could not be started");
                return Err(ErrorData::internal_error("conda could not be started", None).into());
            }
        };
        if outcome.cancelled {
            return Err(Refusal::Cancelled);
        }
        let succeeded = outcome.exit_code == Some(0) && !outcome.timed_out;
        if succeeded && !class.read_only && !self.restart_required() {
            self.check_restart(ready).await;
        }
        Ok(execution_result(&outcome, self.restart_required()))
    }

    /// Wait for this execution's turn: refused at once (nothing runs) when the session
    /// already has `--max-session-calls` executions running or waiting, or when the
    /// server's queue is full.
    async fn admit(&self, ct: &CancellationToken) -> Result<(SessionCall, exec::Slot), Refusal> {
        let limit = self.shared.config.max_session_calls;
        let admitted = self
            .session_calls
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < limit).then_some(n + 1)
            });
        if admitted.is_err() {
            tracing::debug!(limit, "execution refused: session_busy");
            return Err(Refusal::Busy(capacity_result(
                "session_busy",
                "This session already has as many conda executions running or waiting as the \
                 server allows (--max-session-calls); wait for one to finish.",
            )));
        }
        let call = SessionCall(Arc::clone(&self.session_calls));
        let slot = tokio::select! {
            slot = self.shared.executor.acquire() => slot,
            _ = ct.cancelled() => return Err(Refusal::Cancelled),
        };
        match slot {
            Ok(slot) => Ok((call, slot)),
            Err(exec::QueueFull) => {
                tracing::debug!("execution refused: no_capacity");
                Err(Refusal::Busy(capacity_result(
                    "no_capacity",
                    "The server's execution queue is full; try again later.",
                )))
            }
        }
    }

    /// After a successful operation that may have changed the plugin set: compare the
    /// target's plugin distributions on disk, and only when they changed ask the helper
    /// for the plugin inventory and compare fingerprints. Runs inside the execution slot.
    async fn check_restart(&self, ready: &Ready) {
        let scan = stamp::scan(&ready.discovery.site_dirs);
        let unchanged = self
            .shared
            .restart
            .lock()
            .map(|r| r.baseline.as_ref() == Some(&scan))
            .unwrap_or(false);
        if unchanged {
            return;
        }
        let verdict = match ready.discovery.interpreter.as_deref() {
            None => Err("conda plugin discovery failed: no target interpreter".to_owned()),
            Some(interpreter) => discovery::plugins(interpreter, self.shared.config.timeout)
                .await
                .map_err(|f| f.0),
        };
        let Ok(mut restart) = self.shared.restart.lock() else {
            return;
        };
        match verdict {
            Ok((version, plugins)) => {
                let fingerprint = catalog::discovery_fingerprint(&version, &plugins);
                restart.current_fingerprint = Some(fingerprint.clone());
                if fingerprint != ready.discovery.fingerprint() {
                    restart.required = true;
                    restart.reason = Some(format!(
                        "conda version or plugin inventory changed (fingerprint {} at startup, {} now)",
                        ready.discovery.fingerprint(),
                        fingerprint
                    ));
                    tracing::warn!(
                        "the installed conda plugins changed; restart the server to refresh its tools"
                    );
                } else {
                    restart.baseline = Some(scan);
                }
            }
            Err(reason) => {
                restart.required = true;
                restart.reason = Some(reason);
            }
        }
    }

    async fn call_completion(
        &self,
        ready: &Ready,
        arguments: &Value,
        ct: CancellationToken,
    ) -> Result<CallToolResult, Refusal> {
        ready
            .toolset
            .validate_completion(arguments)
            .map_err(|e| invalid_arguments(&e))?;
        let requested = strings(arguments.get("command_path"));
        let document = self.completion_document(ready, &ct).await?;
        let payload = completion::answer(&document, &requested).map_err(|e| match e {
            completion::QueryError::UnknownCommand => invalid_params("Unknown conda command path"),
            completion::QueryError::InvalidMetadata => {
                ErrorData::invalid_request("Conda completion returned invalid metadata", None)
            }
        })?;
        let text = canonical_json(&payload);
        let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
        result.structured_content = Some(payload);
        Ok(result)
    }

    /// The helper's completion document: from the cache while the manifest file and the
    /// plugin distributions are unchanged, else fresh.
    async fn completion_document(
        &self,
        ready: &Ready,
        ct: &CancellationToken,
    ) -> Result<Arc<Value>, Refusal> {
        let unavailable =
            || ErrorData::invalid_request("Conda completion metadata is unavailable", None);
        let scan = stamp::scan(&ready.discovery.site_dirs);
        let mut cache = self.shared.completion.lock().await;
        if let Some(cached) = cache.as_ref()
            && cached.scan == scan
            && manifest_identity(cached.manifest_path.as_deref()) == cached.identity
        {
            return Ok(Arc::clone(&cached.document));
        }
        let interpreter = ready
            .discovery
            .interpreter
            .as_deref()
            .ok_or_else(unavailable)?;
        let document = {
            let _admitted = self.admit(ct).await?;
            discovery::run_helper::<Value>(
                interpreter,
                "completion",
                &[],
                self.shared.config.timeout,
                None,
            )
            .await
            .map_err(|f| {
                tracing::warn!(reason = %f.0, "completion helper failed");
                unavailable()
            })?
        };
        let manifest_path = document
            .get("manifest_path")
            .and_then(Value::as_str)
            .map(PathBuf::from);
        let document = Arc::new(document);
        *cache = Some(CompletionCache {
            identity: manifest_identity(manifest_path.as_deref()),
            manifest_path,
            scan,
            document: Arc::clone(&document),
        });
        Ok(document)
    }
}

/// The strings of a (validated) JSON array; empty when absent.
fn strings(value: Option<&Value>) -> Vec<String> {
    value
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// (device, inode, size, mtime ns) of the manifest file, `null` when absent.
fn manifest_identity(path: Option<&Path>) -> Option<Value> {
    let path = path?;
    match std::fs::metadata(path) {
        Ok(meta) => {
            #[cfg(unix)]
            {
                use std::os::unix::fs::MetadataExt;
                Some(json!([
                    meta.dev(),
                    meta.ino(),
                    meta.size(),
                    meta.mtime(),
                    meta.mtime_nsec()
                ]))
            }
            #[cfg(not(unix))]
            {
                Some(json!([meta.len(), format!("{:?}", meta.modified().ok())]))
            }
        }
        Err(_) => Some(Value::Null),
    }
}

/// Probe the read-only sandbox once (a trial run of this executable's `--version`) and
/// say at startup what the children of read-only calls get.
async fn probe_sandbox(disabled: bool) -> Sandbox {
    if disabled {
        tracing::warn!("--no-sandbox: read-only calls run without the read-only sandbox");
        return Sandbox::disabled();
    }
    let program = std::env::current_exe()
        .ok()
        .filter(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("/bin/true"));
    let args: &[&str] = if program.ends_with("true") {
        &[]
    } else {
        &["--version"]
    };
    let sandbox = Sandbox::probe(&sandbox::Inputs::from_process(), &program, args).await;
    match sandbox.state() {
        sandbox::State::Active => {
            tracing::debug!("read-only calls run in a read-only sandbox (private mount namespace)")
        }
        sandbox::State::Unavailable(reason) => tracing::warn!(
            %reason,
            "the read-only sandbox is unavailable; read-only calls run without it"
        ),
        sandbox::State::Disabled => {}
    }
    sandbox
}

/// Canonical JSON text as a raw value.
fn raw(value: &impl serde::Serialize) -> Box<RawValue> {
    RawValue::from_string(canonical_json(value)).expect("canonical JSON is valid JSON")
}

/// Everything served once discovery is done; `Err` when the operator's surface settings
/// cannot apply to these tools (a name collision).
fn build_ready(
    found: Discovery,
    settings: &Settings,
    conda_exe: &Path,
    surface: &Surface,
    config: &Config,
) -> Result<Ready, String> {
    let mut toolset = Toolset::build_baked(&found.catalog, &found.plugins, settings);
    if let Some(unknown) = toolset.unknown_classified.first() {
        return Err(format!(
            "--classify names no tool of this conda: {unknown} (see 'ccm tools' for the names)"
        ));
    }
    // The descriptors move into the served list: one copy of every schema, not two.
    let applied = surface.apply(toolset.take_descriptors())?;
    for warning in &applied.warnings {
        tracing::warn!(%warning, "tool surface setting ignored");
    }
    // Every generated tool has the same output schema: the served tools share one copy.
    let mut outputs: Vec<Arc<rmcp::model::JsonObject>> = Vec::new();
    let mut convert = |list: Vec<Value>| -> Vec<McpTool> {
        list.into_iter()
            .filter_map(|d| serde_json::from_value::<McpTool>(d).ok())
            .map(|mut tool| {
                if let Some(output) = &mut tool.output_schema {
                    match outputs.iter().find(|o| *o == output) {
                        Some(shared) => *output = Arc::clone(shared),
                        None => outputs.push(Arc::clone(output)),
                    }
                }
                tool
            })
            .collect()
    };
    let tools = convert(applied.listed);
    let unlisted = convert(applied.unlisted);
    let routes = applied.routes;
    let compilers: BTreeMap<&str, &str> = toolset
        .generated
        .iter()
        .map(|t| (t.name.as_str(), t.compiler.label()))
        .collect();
    let mut capabilities: BTreeMap<&'static str, Box<RawValue>> = BTreeMap::new();
    capabilities.insert("conda_version", raw(&found.catalog.conda_version));
    capabilities.insert("discovery_fingerprint", raw(&found.fingerprint()));
    capabilities.insert("generated_tools", raw(&toolset.generated_names()));
    capabilities.insert("plugins", raw(&found.plugins));
    capabilities.insert("target_executable", raw(&conda_exe));
    capabilities.insert("compilers", raw(&compilers));
    capabilities.insert("snapshot", raw(&snapshot_status(&found)));
    let confinement = match (&config.allow_paths, config.http.is_some()) {
        (Some(dirs), _) => Confinement::to(dirs),
        (None, true) => Confinement::default_scope(found.prefix.as_deref()),
        (None, false) => Confinement::unrestricted(),
    };
    capabilities.insert(
        "paths",
        raw(&serde_json::json!({
            "confined": !confinement.is_unrestricted(),
            "allowed": confinement.dirs(),
        })),
    );
    Ok(Ready {
        confinement,
        discovery: found,
        toolset,
        tools,
        unlisted,
        routes,
        capabilities,
    })
}

/// One field of the capabilities document: JSON text, or the catalog, which is written
/// straight into the document (hundreds of kilobytes: never held as a tree, nor as text
/// of its own).
#[derive(serde::Serialize)]
#[serde(untagged)]
enum Part<'a> {
    Raw(&'a RawValue),
    Catalog(CatalogView<'a>),
}

/// The capabilities `catalog` field. The catalog's structs serialize to canonical JSON
/// directly (fields are declared in sorted order).
#[derive(serde::Serialize)]
struct CatalogView<'a> {
    conda_version: &'a str,
    diagnostics: Vec<&'a crate::catalog::Diagnostic>,
    prog: &'a str,
    root: &'a Option<crate::catalog::Command>,
}

/// The catalog with the toolset's own diagnostics joined to discovery's.
fn catalog_view<'a>(catalog: &'a catalog::Catalog, toolset: &'a Toolset) -> CatalogView<'a> {
    CatalogView {
        conda_version: &catalog.conda_version,
        diagnostics: catalog
            .diagnostics
            .iter()
            .chain(&toolset.diagnostics)
            .collect(),
        prog: &catalog.prog,
        root: &catalog.root,
    }
}

/// The baked snapshot of the live conda version, compared with the live catalog.
fn snapshot_status(found: &Discovery) -> Value {
    let live_version = &found.catalog.conda_version;
    let live_fingerprint = found.fingerprint();
    let Some(snapshot) = crate::baked::snapshots()
        .iter()
        .find(|s| s.conda_version == live_version)
    else {
        return Value::Null;
    };
    let stale = snapshot.fingerprint != live_fingerprint;
    if stale {
        // Expected whenever optional plugins are installed, hence not a warning.
        tracing::info!(
            snapshot = snapshot.file,
            "the live conda's plugins differ from the baked snapshot of the same version; \
             commands whose signature changed use the generic interpreter"
        );
    }
    json!({
        "file": snapshot.file,
        "conda_version": snapshot.conda_version,
        "fingerprint": snapshot.fingerprint,
        "live_conda_version": live_version,
        "live_fingerprint": live_fingerprint,
        "snapshot_stale": stale,
    })
}

/// The 10-field result, its summary and its serialized copy.
pub fn execution_result(outcome: &exec::Outcome, restart_required: bool) -> CallToolResult {
    let stdout = decode(&outcome.stdout, outcome.stdout_truncated);
    let stderr = decode(&outcome.stderr, outcome.stderr_truncated);
    let parsed_json = if outcome.stdout_truncated || stdout.trim().is_empty() {
        Value::Null
    } else {
        // serde_json rejects NaN/Infinity literals and numbers out of f64 range.
        serde_json::from_str::<Value>(&stdout).unwrap_or(Value::Null)
    };
    let structured = json!({
        "exit_code": outcome.exit_code,
        "stdout": stdout,
        "stderr": stderr,
        "duration_ms": outcome.duration.as_millis() as u64,
        "parsed_json": parsed_json,
        "timed_out": outcome.timed_out,
        "cancelled": outcome.cancelled,
        "stdout_truncated": outcome.stdout_truncated,
        "stderr_truncated": outcome.stderr_truncated,
        "restart_required": restart_required,
    });
    let declined = declined_prompt(outcome);
    let mut summary = if declined {
        NOT_CONFIRMED.to_owned()
    } else if outcome.timed_out {
        "conda command timed out".to_owned()
    } else if outcome.cancelled {
        "conda command was cancelled".to_owned()
    } else {
        format!(
            "conda command exited with {}",
            outcome.exit_code.unwrap_or(-1)
        )
    };
    let failed = outcome.exit_code != Some(0) || outcome.timed_out || outcome.cancelled || declined;
    if let Some(limit) = outcome.limit.as_deref().filter(|_| failed) {
        summary.push_str(&format!(" ({limit})"));
    }
    if restart_required && !outcome.timed_out && !outcome.cancelled {
        summary.push_str(RESTART_SUFFIX);
    }
    let content = vec![
        ContentBlock::text(summary),
        ContentBlock::text(canonical_json(&structured)),
    ];
    let mut result = if failed {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    };
    result.structured_content = Some(structured);
    result
}

/// The summary of a run that ended at a declined confirmation prompt (stable code first).
pub const NOT_CONFIRMED: &str = "not_confirmed: conda asked for confirmation, read no answer \
     and declined (its default is no), so nothing was done. Call the tool again with \
     `yes: true` (conda's --yes) to confirm";

/// conda's abort at a default-no confirmation prompt: `confirm_yn` raises
/// `CondaSystemExit("Exiting.")` when the answer (end of input here: stdin is empty) is
/// "no", and conda prints it as `CondaSystemExit: Exiting.` on stderr and exits 0.
fn declined_prompt(outcome: &exec::Outcome) -> bool {
    outcome.exit_code == Some(0)
        && !outcome.timed_out
        && !outcome.cancelled
        && !outcome.stderr_truncated
        && outcome
            .stderr
            .split(|b| *b == b'\n')
            .map(|line| line.trim_ascii())
            .rfind(|line| !line.is_empty())
            == Some(b"CondaSystemExit: Exiting.".as_slice())
}

fn capacity_result(code: &str, message: &str) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(format!("{code}: {message}"))])
}

/// UTF-8 with replacement; a multi-byte sequence cut by truncation is dropped.
fn decode(bytes: &[u8], truncated: bool) -> String {
    if truncated
        && let Err(error) = std::str::from_utf8(bytes)
        && error.error_len().is_none()
    {
        return String::from_utf8_lossy(&bytes[..error.valid_up_to()]).into_owned();
    }
    String::from_utf8_lossy(bytes).into_owned()
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        let capabilities: ServerCapabilities = serde_json::from_value(json!({
            "tools": {"listChanged": false},
            "resources": {"listChanged": false, "subscribe": false},
        }))
        .expect("fixed capabilities deserialize");
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new(SERVER_NAME, env!("CARGO_PKG_VERSION")))
            .with_instructions(self.instructions())
    }

    /// Every revision rmcp knows except 2025-03-26, the only one with JSON-RPC batches
    /// (which `ccm` does not implement; a batch is answered element by element with
    /// `-32600`). A client asking for it is offered the newest revision with a handshake.
    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(SUPPORTED_VERSIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let ready = self.ready().await;
        Ok(ListToolsResult::with_all_items(ready.tools.clone()))
    }

    fn get_tool(&self, name: &str) -> Option<McpTool> {
        let ready = self.shared.ready.borrow().clone()?;
        ready
            .tools
            .iter()
            .chain(&ready.unlisted)
            .find(|t| t.name == name)
            .cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let ct = context.ct.clone();
        let outcome = std::panic::AssertUnwindSafe(self.call(request, ct))
            .catch_unwind()
            .await;
        match outcome {
            Ok(Ok(result)) | Ok(Err(Refusal::Busy(result))) => Ok(result.into()),
            Ok(Err(Refusal::Protocol(error))) => Err(error),
            // The client cancelled: rmcp drops whatever is returned for this request.
            Ok(Err(Refusal::Cancelled)) => {
                Err(ErrorData::internal_error("Request cancelled", None))
            }
            Err(_) => {
                tracing::error!("a tool call panicked");
                Err(internal())
            }
        }
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let ready = self.ready().await;
        let text = self.capabilities_text(&ready);
        let resource = Resource::new(CAPABILITIES_URI, "conda_capabilities")
            .with_title("Conda CLI capabilities")
            .with_description("Startup command catalog and external plugin metadata.")
            .with_mime_type("application/json")
            .with_size(text.len() as u64);
        Ok(ListResourcesResult::with_all_items(vec![resource]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        if request.uri != CAPABILITIES_URI {
            return Err(invalid_params("Unknown resource"));
        }
        let ready = self.ready().await;
        let text = self.capabilities_text(&ready);
        Ok(ReadResourceResult::new(vec![
            ResourceContents::text(text, CAPABILITIES_URI).with_mime_type("application/json"),
        ])
        .into())
    }
}
