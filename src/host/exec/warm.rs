//! `--warm`: conda calls forked from a zygote that has already imported conda's CLI.
//!
//! One zygote per server (the target's `conda`), started in the background once the tools
//! are served ([`super::Executions::start_warm`], which holds the [`Warm`] state). A run
//! whose program is the target `conda` is forked from it ([`fork`]): the server sends
//! the call's argv, environment (exactly what a cold child would get, in the same order),
//! working directory, limits and descriptors (stdin, stdout, stderr, the execution's
//! `cgroup.procs` files, and the namespaces of the call's sandbox) over the inherited
//! socket; the zygote forks; the child applies everything a cold child gets between
//! `fork` and `exec`, then runs conda's `main` as the entry script does. The supervisor
//! treats it like any other leader.
//!
//! Until the zygote is ready, while another warm call runs, when the target's stamp has
//! changed (the zygote is replaced), or when anything fails before the fork, the call
//! runs cold; capabilities count both.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

mod child;
mod holder;
mod rights;
mod zygote;

pub(super) use child::WarmChild;
use zygote::Zygote;

use crate::host::target::Script;

/// Why a call runs cold, or why there is no zygote.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Unfit {
    #[error("the target conda is not a #! script")]
    NotAScript,
    #[error("the zygote could not be started")]
    Start,
    #[error("the zygote did not become ready")]
    NotReady,
    #[error("the zygote is starting")]
    Starting,
    #[error("another warm call is running")]
    Busy,
    #[error("the target conda changed; the zygote is being replaced")]
    Changed,
    #[error("the zygote exited; it is being replaced")]
    Exited,
    #[error("the call's sandbox could not be prepared for a warm child")]
    Sandbox,
    #[error("the zygote did not accept the call")]
    Refused,
    #[error("the call runs without plugins (the zygote has their modules imported)")]
    NoPlugins,
    #[error("the read-only sandbox is not active, and the zygote runs only inside it")]
    NoSandbox,
}

/// Whether a run of `args` under the environment value `no_plugins_env`
/// (`CONDA_NO_PLUGINS`) may load no plugins: `--no-plugins` (or an abbreviation argparse
/// would accept) before `--`, or the variable set to anything but a false value. Such a
/// call runs cold: a warm child would carry the import-time effects of the plugins'
/// preloaded modules that a cold run without plugins never has.
fn disables_plugins(args: &[std::ffi::OsString], no_plugins_env: Option<&std::ffi::OsStr>) -> bool {
    let flag = args
        .iter()
        .map(|a| a.to_string_lossy())
        .take_while(|a| a != "--")
        .any(|a| {
            let name = a.split('=').next().unwrap_or_default();
            // The pre-parser's other options are -v/--verbose, --debug, --trace and
            // --json: every prefix of --no-plugins from `--n` on is that option.
            name.len() >= "--n".len() && "--no-plugins".starts_with(name)
        });
    let env = no_plugins_env.is_some_and(|v| {
        let v = v.to_string_lossy().trim().to_ascii_lowercase();
        !matches!(v.as_str(), "" | "0" | "false" | "no" | "off" | "n" | "f")
    });
    flag || env
}

/// What the warm path needs of the target, resolved by its caller: the `conda` entry
/// script, its `#!` line, how to take the target's stamp now (a changed stamp
/// replaces the zygote), and how to plan a read-only call's sandbox now (the zygote's
/// own: it runs only inside one).
pub struct Entry {
    pub program: PathBuf,
    pub script: Option<Script>,
    pub restamp: Box<dyn Fn() -> Option<String> + Send + Sync>,
    pub plan: Box<dyn Fn() -> Option<crate::host::sandbox::Plan> + Send + Sync>,
}

/// The warm state of one server (held by its [`super::Executions`]).
pub(super) struct Warm {
    entry: PathBuf,
    /// The limits and withheld variables of every child, so of the zygote too.
    limits: super::Limits,
    script: Option<Script>,
    restamp: Box<dyn Fn() -> Option<String> + Send + Sync>,
    plan: Box<dyn Fn() -> Option<crate::host::sandbox::Plan> + Send + Sync>,
    zygote: Arc<tokio::sync::Mutex<Option<Zygote>>>,
    /// The task starting a zygote (it holds `zygote` meanwhile): aborted at shutdown,
    /// which kills the zygote it was waiting for.
    starting: Mutex<Option<tokio::task::AbortHandle>>,
    status: Mutex<Status>,
    warm_calls: AtomicU64,
    cold_calls: AtomicU64,
}

#[derive(Clone)]
struct Status {
    state: &'static str,
    reason: Option<Unfit>,
    last_cold: Option<Unfit>,
    pid: Option<u32>,
    start_ms: Option<u64>,
    preloaded: Option<(u32, u32)>,
}

impl Warm {
    /// The warm path for the target's `conda`, its zygote not started yet ([`launch`]).
    pub(super) fn new(entry: Entry, limits: super::Limits) -> Arc<Warm> {
        Arc::new(Warm {
            entry: entry.program,
            limits,
            script: entry.script,
            restamp: entry.restamp,
            plan: entry.plan,
            zygote: Arc::new(tokio::sync::Mutex::new(None)),
            starting: Mutex::new(None),
            status: Mutex::new(Status {
                state: "starting",
                reason: None,
                last_cold: None,
                pid: None,
                start_ms: None,
                preloaded: None,
            }),
            warm_calls: AtomicU64::new(0),
            cold_calls: AtomicU64::new(0),
        })
    }

    /// Whether `program` is the warm target (then [`fork`] is tried first).
    pub(super) fn applies(&self, program: &Path) -> bool {
        self.entry == program
    }
}

fn set_status(warm: &Warm, update: impl FnOnce(&mut Status)) {
    if let Ok(mut status) = warm.status.lock() {
        update(&mut status);
    }
}

/// Start a (new) zygote in the background.
pub(super) fn launch(warm: Arc<Warm>) {
    set_status(&warm, |s| {
        s.state = "starting";
        s.pid = None;
    });
    let task_warm = Arc::clone(&warm);
    let task = tokio::spawn(async move {
        let warm = task_warm;
        let mut slot = warm.zygote.lock().await;
        if let Some(old) = slot.take() {
            old.stop();
        }
        let result = match ((warm.restamp)(), (warm.plan)()) {
            (Some(stamp), Some(plan)) => {
                let script = warm.script.as_ref();
                Zygote::start(&warm.entry, script, stamp, &warm.limits, &plan.bare()).await
            }
            (None, _) => Err(Unfit::NotAScript),
            (_, None) => Err(Unfit::NoSandbox),
        };
        match result {
            Ok(zygote) => {
                tracing::info!(
                    pid = zygote.pid,
                    preloaded = zygote.preloaded.0,
                    refused = zygote.preloaded.1,
                    start_ms = zygote.started_in.as_millis() as u64,
                    "warm zygote ready"
                );
                set_status(&warm, |s| {
                    s.state = "ready";
                    s.reason = None;
                    s.pid = Some(zygote.pid);
                    s.start_ms = Some(zygote.started_in.as_millis() as u64);
                    s.preloaded = Some(zygote.preloaded);
                });
                *slot = Some(zygote);
            }
            Err(reason) => {
                tracing::warn!(%reason, "no warm zygote: calls run cold");
                set_status(&warm, |s| {
                    s.state = "unavailable";
                    s.reason = Some(reason);
                });
            }
        }
    });
    if let Ok(mut starting) = warm.starting.lock() {
        *starting = Some(task.abort_handle());
    }
}

/// Fork `spec`'s run from the zygote, or say why it runs cold (logged and counted).
pub(super) async fn fork(
    warm: &Arc<Warm>,
    spec: &super::Spec,
    marker: &str,
    prepared: &super::limits::Prepared,
) -> Result<WarmChild, Unfit> {
    let no_plugins_env = std::env::var_os("CONDA_NO_PLUGINS")
        .filter(|_| !spec.env_remove.contains(&"CONDA_NO_PLUGINS"));
    let result = if disables_plugins(&spec.args, no_plugins_env.as_deref()) {
        Err(Unfit::NoPlugins)
    } else {
        try_fork(warm, spec, marker, prepared).await
    };
    match &result {
        Ok(_) => {
            warm.warm_calls.fetch_add(1, Ordering::Relaxed);
        }
        Err(reason) => {
            warm.cold_calls.fetch_add(1, Ordering::Relaxed);
            tracing::info!(%reason, "call runs cold");
            set_status(warm, |s| s.last_cold = Some(*reason));
        }
    }
    result
}

async fn try_fork(
    warm: &Arc<Warm>,
    spec: &super::Spec,
    marker: &str,
    prepared: &super::limits::Prepared,
) -> Result<WarmChild, Unfit> {
    let starting = || {
        warm.status
            .lock()
            .is_ok_and(|status| status.state == "starting")
    };
    let mut slot = Arc::clone(&warm.zygote).try_lock_owned().map_err(|_| {
        // A zygote being started holds the slot too.
        if starting() {
            Unfit::Starting
        } else {
            Unfit::Busy
        }
    })?;
    let Some(zygote) = slot.as_mut() else {
        return Err(Unfit::Starting);
    };
    if !zygote.alive() {
        drop(slot);
        launch(Arc::clone(warm));
        return Err(Unfit::Exited);
    }
    if (warm.restamp)().as_deref() != Some(zygote.stamp.as_str()) {
        drop(slot);
        launch(Arc::clone(warm));
        return Err(Unfit::Changed);
    }
    let result = child::start(slot, spec, marker, prepared).await;
    if result.as_ref().err() == Some(&Unfit::Changed) {
        // A module file changed under the zygote (the slot is free again).
        launch(Arc::clone(warm));
    }
    result
}

/// The capabilities document's `warm` entry (`null` without `--warm`).
pub(super) fn describe(warm: Option<&Warm>) -> serde_json::Value {
    let Some(warm) = warm else {
        return serde_json::Value::Null;
    };
    let status = warm.status.lock().map(|s| s.clone()).ok();
    let rss = warm
        .zygote
        .try_lock()
        .ok()
        .and_then(|z| z.as_ref().and_then(|z| z.rss()));
    serde_json::json!({
        "enabled": true,
        "state": status.as_ref().map(|s| s.state),
        "reason": status.as_ref().and_then(|s| s.reason).map(|r| r.to_string()),
        "zygote_pid": status.as_ref().and_then(|s| s.pid),
        "zygote_start_ms": status.as_ref().and_then(|s| s.start_ms),
        "zygote_rss_bytes": rss,
        "zygote_preloaded_modules": status.as_ref().and_then(|s| s.preloaded).map(|p| p.0),
        "zygote_refused_modules": status.as_ref().and_then(|s| s.preloaded).map(|p| p.1),
        "warm_calls": warm.warm_calls.load(Ordering::Relaxed),
        "cold_calls": warm.cold_calls.load(Ordering::Relaxed),
        "last_cold_reason": status.as_ref().and_then(|s| s.last_cold).map(|r| r.to_string()),
    })
}

/// Stop the zygote (server exit), a starting one too: its start is aborted, which kills
/// the process it was waiting for (and its cgroup, with what its survey started).
pub(super) async fn stop(warm: &Warm) {
    if let Some(task) = warm.starting.lock().ok().and_then(|mut s| s.take()) {
        task.abort();
    }
    if let Some(zygote) = warm.zygote.lock().await.take() {
        zygote.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_without_plugins_is_recognised_as_conda_parses_it() {
        let args = |list: &[&str]| list.iter().map(|a| a.into()).collect::<Vec<_>>();
        for disabling in [
            &["--no-plugins", "list"][..],
            &["list", "--no-plugins", "--json"],
            &["--no-plug", "info"],
            &["--no-p", "info"],
            &["--no-plugins=", "info"],
            &["--n", "info"],
            &["--no", "info"],
            &["--no-", "info"],
        ] {
            assert!(disables_plugins(&args(disabling), None), "{disabling:?}");
        }
        for keeping in [
            &["list", "--json"][..],
            &["run", "-n", "x", "--", "tool", "--no-plugins"],
            &["--", "--no"],
            &["--no-pin", "install"],
            &["--no-pluginsx", "info"],
        ] {
            assert!(!disables_plugins(&args(keeping), None), "{keeping:?}");
        }
        for value in ["1", "true", "YES", "on", "anything"] {
            assert!(
                disables_plugins(&args(&["list"]), Some(value.as_ref())),
                "{value}"
            );
        }
        for value in ["", "0", "false", "No", "off"] {
            assert!(
                !disables_plugins(&args(&["list"]), Some(value.as_ref())),
                "{value}"
            );
        }
    }
}
