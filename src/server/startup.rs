//! How the server gets its tools, and who confirms them: from a baked snapshot at once, or
//! from live discovery.
//!
//! When the target's stamp (conda's version and `conda` entry points, read from disk in a
//! few milliseconds) equals a baked snapshot's, the tools are built from that snapshot
//! and served immediately; live discovery still runs and confirms afterwards
//! ([`confirm`]: a contradiction requires a restart). Otherwise (no snapshot for this
//! version, different plugins, `--no-snapshot`: a [`LiveReason`]) tools wait for live
//! discovery. The state is a [`Start`]; the capabilities document's `startup` object is
//! derived from it. Reads files only through [`crate::host::target`] and
//! [`crate::host::site_scan`]; processes start only through [`crate::host::discovery`] and
//! the sandbox probe's trial run.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use serde_json::{Value, json};
use tokio::sync::watch;

use super::compare::{Mismatch, surface_difference};
use super::ready::{self, BuildError, Ready};
use super::restart::Restart;
use crate::baked::{self, BakedSnapshot};
use crate::config::Config;
use crate::host::Host;
use crate::host::discovery::{self, Discovery};
use crate::host::exec;
use crate::host::sandbox::{self, Sandbox};
use crate::host::site_scan;
use crate::host::target::Conda;
use crate::model::catalog::Catalog;
use crate::model::snapshot::Snapshot;
use crate::tools::toolset::ToolsetSettings;

/// How the tools were obtained.
#[derive(Clone, Debug, Default)]
pub enum Start {
    /// Not served yet.
    #[default]
    Waiting,
    /// From a baked snapshot whose stamp matched; live discovery confirms.
    Snapshot {
        snapshot: &'static BakedSnapshot,
        confirmation: Confirmation,
    },
    /// From live discovery, and why.
    Live(LiveReason),
}

/// Live discovery's verdict on a snapshot start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Confirmation {
    Pending,
    Confirmed,
    Differs,
}

/// Why the tools wait for live discovery.
#[derive(Clone, Debug, thiserror::Error)]
pub enum LiveReason {
    #[error("--no-snapshot")]
    NoSnapshotFlag,
    #[error("the target's site-packages were not found")]
    NoSitePackages,
    #[error("the target's conda metadata was not found")]
    NoMetadata,
    #[error("plugins differ from the baked snapshot {0}")]
    PluginsDiffer(&'static str),
    #[error("no baked snapshot for conda {0}")]
    NoSnapshot(String),
    #[error("the baked snapshot {0} does not parse")]
    Unparseable(&'static str),
    #[error("--list-all lists the commands of ccm's own launcher, which no baked snapshot has")]
    OwnLauncherListed,
}

/// Why the server cannot serve its tools and stops (exit status 2).
#[derive(Clone, Debug, thiserror::Error)]
pub enum Fatal {
    /// The target is not a conda (discovery's one-line reason).
    #[error("{0}")]
    NotAConda(String),
    #[error(transparent)]
    Unserveable(#[from] BuildError),
}

impl Confirmation {
    fn as_str(self) -> &'static str {
        match self {
            Confirmation::Pending => "pending",
            Confirmation::Confirmed => "confirmed",
            Confirmation::Differs => "differs",
        }
    }
}

impl Start {
    /// The capabilities document's `startup` object.
    pub fn describe(&self) -> Value {
        let (path, reason, confirmation) = match self {
            Start::Waiting => ("", String::new(), None),
            Start::Snapshot {
                snapshot,
                confirmation,
            } => (
                "snapshot",
                format!("stamp matched the baked snapshot {}", snapshot.file),
                Some(confirmation.as_str()),
            ),
            Start::Live(reason) => ("live", reason.to_string(), None),
        };
        json!({"path": path, "reason": reason, "confirmation": confirmation})
    }
}

/// How the server started and whether it must restart, read and written together.
#[derive(Default)]
pub(super) struct Status {
    pub(super) start: Start,
    pub(super) restart: Restart,
}

/// What obtaining the tools writes, shared with the server: its [`Status`], the sandbox
/// (probed once before the tools are served) and, when the tool list cannot be served,
/// why the server stops.
pub(super) struct State {
    pub(super) status: Mutex<Status>,
    pub(super) sandbox: OnceLock<Sandbox>,
    pub(super) fatal: watch::Sender<Option<Fatal>>,
}

impl Default for State {
    fn default() -> State {
        State {
            status: Mutex::default(),
            sandbox: OnceLock::new(),
            fatal: watch::channel(None).0,
        }
    }
}

/// Warm reads: the read zygote runs inside the read-only sandbox, so only where it is
/// active with a user namespace per call; else they are off, said once and in capabilities.
fn start_warm(host: &Host, state: Arc<State>, prefix: Option<std::path::PathBuf>) {
    let unfit = state.sandbox.get().map(Sandbox::warm_unfit);
    match unfit.unwrap_or(Some("no sandbox".into())) {
        Some(why) => host.exec.warm_off(why),
        None => host.start_warm(Box::new(move || {
            state.sandbox.get()?.plan(prefix.as_deref())
        })),
    }
}

/// One startup: the target, the operator's settings, where it writes, and the sender
/// that publishes the tools.
struct Job {
    state: Arc<State>,
    config: Config,
    /// The target conda, the executions that start its processes, the audit log.
    host: Host,
    sender: watch::Sender<Option<Arc<Ready>>>,
}

/// Probe the sandbox and obtain the tools of `host`'s conda in the background, writing
/// to `state`; `sender` publishes them.
pub(super) fn spawn(
    state: Arc<State>,
    config: Config,
    host: Host,
    sender: watch::Sender<Option<Arc<Ready>>>,
) {
    let probe = tokio::spawn(probe_sandbox(host.exec.clone(), config.no_sandbox));
    if config.warm {
        // The zygote starts once the tools are served: it never delays them.
        let mut served = sender.subscribe();
        let host = host.clone();
        let state = Arc::clone(&state);
        tokio::spawn(async move {
            let prefix = match served.wait_for(Option::is_some).await {
                Ok(ready) => ready.as_ref().and_then(|r| r.discovery.prefix.clone()),
                Err(_) => return,
            };
            start_warm(&host, state, prefix);
        });
    }
    let job = Job {
        state,
        config,
        host,
        sender,
    };
    tokio::spawn(async move {
        let started = Instant::now();
        let sandbox = probe
            .await
            .unwrap_or_else(|_| Sandbox::unavailable("the sandbox probe failed"));
        let sandboxed = *sandbox.state() == sandbox::State::Active;
        let _ = job.state.sandbox.set(sandbox);
        let settings = ready::settings(&job.config, sandboxed);
        let config = &job.config;
        match fast_start(&job.host.conda, config.no_snapshot, config.list_all) {
            Ok(fast) => job.serve_snapshot(fast, &settings, started).await,
            Err(reason) => job.serve_live(reason, &settings, started).await,
        }
    });
}

impl Job {
    async fn discover(&self) -> Discovery {
        let host = &self.host;
        discovery::discover(&host.exec, &host.conda, self.config.timeout).await
    }

    /// Serve the snapshot's tools now, then confirm them by live discovery.
    async fn serve_snapshot(&self, fast: Fast, settings: &ToolsetSettings, started: Instant) {
        let snapshot = fast.snapshot;
        let config = &self.config;
        let built = ready::build(fast.discovery, settings, &config.surface, config);
        let Some(ready) = self.state.serveable(built) else {
            return;
        };
        tracing::info!(
            tools = ready.toolset.generated.len(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            snapshot = snapshot.file,
            "serving tools from the baked snapshot; live discovery confirms in the background"
        );
        let start = Start::Snapshot {
            snapshot,
            confirmation: Confirmation::Pending,
        };
        self.state.record_start(start, &ready);
        let ready = Arc::new(ready);
        let _ = self.sender.send(Some(Arc::clone(&ready)));
        let found = self.discover().await;
        let verdict = confirm(snapshot, &ready.discovery.catalog, &found);
        let ended = self.host.exec.shutting_down();
        self.state.record_confirmation(verdict, &found, ended);
    }

    /// Serve the tools live discovery finds.
    async fn serve_live(&self, reason: LiveReason, settings: &ToolsetSettings, started: Instant) {
        let found = self.discover().await;
        if self.host.exec.shutting_down() {
            // Ended by the shutdown (a session closed at once): nothing was found out.
            tracing::debug!("live discovery was ended by the shutdown");
            return;
        }
        // Not a conda at all: stop (exit status 2) rather than serve no tools.
        if let Some(line) = found.not_a_conda(&self.config.conda_exe) {
            self.state.fatal.send_replace(Some(Fatal::NotAConda(line)));
            return;
        }
        let config = &self.config;
        let built = ready::build(found, settings, &config.surface, config);
        let Some(ready) = self.state.serveable(built) else {
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
            tracing::warn!(path = %d.path.join(" "), reason = %d.reason, "discovery diagnostic");
        }
        self.state.record_start(Start::Live(reason), &ready);
        let _ = self.sender.send(Some(Arc::new(ready)));
    }
}

impl State {
    /// The tool list, or `None` after reporting why it cannot be served.
    fn serveable(&self, built: Result<Ready, BuildError>) -> Option<Ready> {
        match built {
            Ok(ready) => Some(ready),
            Err(reason) => {
                tracing::error!(%reason, "the tool list cannot be served");
                self.fatal.send_replace(Some(reason.into()));
                None
            }
        }
    }

    fn record_start(&self, start: Start, ready: &Ready) {
        if let Ok(mut status) = self.status.lock() {
            status.start = start;
            status.restart.started(ready);
        }
    }

    /// Live discovery finished after a snapshot start.
    /// `ended`: the shutdown has begun (the discovery may have been ended by it).
    fn record_confirmation(&self, verdict: Result<(), Mismatch>, live: &Discovery, ended: bool) {
        let Ok(mut status) = self.status.lock() else {
            return;
        };
        let confirmation = match verdict {
            Ok(()) => {
                tracing::debug!("live discovery confirms the baked snapshot");
                Confirmation::Confirmed
            }
            // Ended by the shutdown (a session closed at once): no verdict, no warning.
            Err(reason) if ended => {
                tracing::debug!(%reason, "live discovery was ended by the shutdown");
                return;
            }
            Err(reason) => {
                tracing::warn!(%reason, "live discovery differs from the baked snapshot; restart the server");
                status.restart.contradicted(reason, live.fingerprint());
                Confirmation::Differs
            }
        };
        if let Start::Snapshot {
            confirmation: state,
            ..
        } = &mut status.start
        {
            *state = confirmation;
        }
    }
}

/// Probe the read-only sandbox once (a trial run of this executable's `--version`, one of
/// `exec`'s executions) and say at startup what the children of read-only calls get.
pub async fn probe_sandbox(exec: exec::Executions, disabled: bool) -> Sandbox {
    if disabled {
        tracing::warn!("--no-sandbox: read-only calls run without the read-only sandbox");
        return Sandbox::disabled();
    }
    let program = std::env::current_exe()
        .ok()
        .filter(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("/bin/true"));
    let args: &'static [&'static str] = if program.ends_with("true") {
        &[]
    } else {
        &["--version"]
    };
    let trial = |plan| {
        let program = program.clone();
        let exec = exec.clone();
        async move { exec.trial(&program, args, plan).await }
    };
    let sandbox = Sandbox::probe(&sandbox::Inputs::from_process(), trial).await;
    match sandbox.state() {
        sandbox::State::Active => {
            tracing::debug!("read-only calls run in a read-only sandbox (private mount namespace)")
        }
        // Ended by the shutdown (a session closed at once), the trial says nothing.
        sandbox::State::Unavailable(reason) if exec.shutting_down() => {
            tracing::debug!(%reason, "the sandbox probe was ended by the shutdown")
        }
        sandbox::State::Unavailable(reason) => tracing::warn!(
            %reason,
            "the read-only sandbox is unavailable; read-only calls run without it"
        ),
        sandbox::State::Disabled => {}
    }
    sandbox
}

/// A start from a baked snapshot.
pub struct Fast {
    pub snapshot: &'static BakedSnapshot,
    /// The snapshot's discovery, localized to this target.
    pub discovery: Discovery,
}

/// Decide the start; `Err(reason)` means: wait for live discovery. `list_all`: every
/// command is listed, ccm's own launcher's too (which the stamp does not count and no
/// snapshot has), so a target that has it waits for live discovery.
pub fn fast_start(conda: &Conda, no_snapshot: bool, list_all: bool) -> Result<Fast, LiveReason> {
    if no_snapshot {
        return Err(LiveReason::NoSnapshotFlag);
    }
    let located = conda.locate().ok_or(LiveReason::NoSitePackages)?;
    if list_all && site_scan::has_own_launcher(&located.site_dirs) {
        return Err(LiveReason::OwnLauncherListed);
    }
    let stamp = site_scan::stamp(&located.site_dirs).ok_or(LiveReason::NoMetadata)?;
    let Some(snapshot) = baked::snapshots()
        .iter()
        .find(|s| s.stamp == Some(stamp.digest.as_str()))
    else {
        return Err(
            match baked::snapshots()
                .iter()
                .find(|s| s.conda_version == stamp.conda_version)
            {
                Some(s) => LiveReason::PluginsDiffer(s.file),
                None => LiveReason::NoSnapshot(stamp.conda_version),
            },
        );
    };
    let parsed = Snapshot::from_text(&localize(snapshot.json, &located.prefix))
        .map_err(|_| LiveReason::Unparseable(snapshot.file))?;
    let catalog = parsed.catalog;
    Ok(Fast {
        snapshot,
        discovery: Discovery {
            catalog,
            plugins: parsed.plugins,
            interpreter: Some(located.interpreter),
            prefix: Some(located.prefix),
            python_version: None,
            site_dirs: located.site_dirs,
            processes: 0,
        },
    })
}

/// Put this target's prefix back where the snapshot's text says `<prefix>` (only ever
/// inside a JSON string), so the document is parsed once, straight into the typed model.
fn localize(text: &str, prefix: &Path) -> String {
    let quoted = serde_json::to_string(&prefix.to_string_lossy()).expect("strings serialize");
    text.replace(crate::model::snapshot::PREFIX, &quoted[1..quoted.len() - 1])
}

/// Live discovery as if ccm's own launcher were not installed: its plugin entry (when it
/// implements nothing but subcommands) and the commands it registers that the served
/// catalog lacks (`ccm`, and `mcp` where it took that name) left out. Anything else the
/// launcher's distribution changed still shows.
fn without_own_launcher<'a>(
    live: &'a Discovery,
    served: &Catalog,
) -> std::borrow::Cow<'a, Discovery> {
    use crate::model::stamp::{OWN_LAUNCHER_COMMANDS, OWN_LAUNCHER_HOOKS, is_own_launcher};
    let launcher = |p: &crate::model::catalog::Plugin| {
        is_own_launcher(&p.distribution, &p.entry_point, &p.value) && p.hooks == OWN_LAUNCHER_HOOKS
    };
    if !live.plugins.iter().any(launcher) {
        return std::borrow::Cow::Borrowed(live);
    }
    let mut trimmed = live.clone();
    trimmed.plugins.retain(|p| !launcher(p));
    let served_has = |name: &str| {
        served.root.as_ref().is_some_and(|root| {
            root.children
                .iter()
                .any(|c| c.name.as_deref() == Some(name))
        })
    };
    if let Some(root) = trimmed.catalog.root.as_mut() {
        root.children.retain(|c| {
            c.name
                .as_deref()
                .is_none_or(|name| !OWN_LAUNCHER_COMMANDS.contains(&name) || served_has(name))
        });
    }
    std::borrow::Cow::Owned(trimmed)
}

/// Compare live discovery with the snapshot that served the tools (`served`: its catalog,
/// as localized at startup). `Err` when they
/// differ in what decides the tool surface (the served tools may not match the target: a
/// restart is required); the reason names the command, argument and field.
///
/// Compared: the plugin inventory (fingerprint), the program name, the command tree and,
/// per command, everything its signature covers (aliases, greediness, terminality,
/// raw-only, exclusive groups; per argument: id, order, flags, action, nargs, type,
/// required, hidden, static choices) and which commands a blocking diagnostic takes out.
/// Not compared: help texts, defaults and dynamic choice values — they differ between
/// machines (home directory, working directory, installed solvers) without changing a
/// tool's shape or its argv.
pub fn confirm(
    snapshot: &BakedSnapshot,
    served: &Catalog,
    live: &Discovery,
) -> Result<(), Mismatch> {
    if live.catalog.root.is_none() {
        let reason = live
            .catalog
            .diagnostics
            .first()
            .map_or("", |d| d.reason.as_str());
        return Err(Mismatch::LiveFailed(reason.to_owned()));
    }
    let live = &without_own_launcher(live, served);
    if live.fingerprint() != snapshot.fingerprint {
        return Err(Mismatch::Plugins {
            file: snapshot.file,
            live: live.fingerprint(),
            baked: snapshot.fingerprint,
        });
    }
    match surface_difference(served, &live.catalog) {
        None => Ok(()),
        Some(difference) => Err(Mismatch::Catalog {
            file: snapshot.file,
            difference,
        }),
    }
}

#[cfg(test)]
mod tests;
