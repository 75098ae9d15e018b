//! The server's state: what every session shares ([`Shared`]: the settings, the queue,
//! the tools once obtained, what startup wrote, the caches) and one session's
//! handle on it ([`Server`], whose methods are the handler's and the call's steps), with
//! the live parts read together (whether a restart is required, the capabilities
//! document).

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::watch;

use super::capabilities;
use super::capacity::Capacity;
use super::completion_cache::Completion;
use super::parking::Parking;
use super::ready::Ready;
use super::restart;
use super::roots::Roots;
use super::startup;
use crate::config::Config;
use crate::host::Host;
use crate::host::exec::Executor;

/// What every session of the server shares.
pub(super) struct Shared {
    pub(super) config: Config,
    /// The target conda, the executions, the audit log: built once by `main`.
    pub(super) host: Host,
    pub(super) executor: Arc<Executor>,
    pub(super) ready: watch::Receiver<Option<Arc<Ready>>>,
    /// What startup wrote: how the tools were obtained, whether a restart is required,
    /// the read-only sandbox, and why the server stops when the tool list cannot be
    /// served.
    pub(super) start: Arc<startup::State>,
    pub(super) completion: Completion,
    /// Plans waiting for a session-less client's confirmation (`--confirm-writes`).
    pub(super) parked: Parking,
    /// One sandbox plan made at a time ([`Server::sandbox_plan`]).
    pub(super) planning: Arc<tokio::sync::Semaphore>,
}

impl Shared {
    /// Whether a restart is required (sticky once set).
    pub(super) fn restart_required(&self) -> bool {
        self.start
            .status
            .lock()
            .map(|s| s.restart.required())
            .unwrap_or(true)
    }

    /// After a successful operation that may have changed the plugin set: compare the
    /// target's plugin distributions on disk, and only when they changed ask the helper
    /// for the plugin inventory and compare fingerprints ([`restart`]). Runs inside the
    /// execution slot.
    pub(super) async fn check_restart(&self, ready: &Ready) {
        let scan = crate::host::site_scan::scan(&ready.discovery.site_dirs);
        let unchanged = self
            .start
            .status
            .lock()
            .is_ok_and(|s| s.restart.unchanged(&scan));
        if unchanged {
            return;
        }
        let verdict = restart::inventory(&self.host.exec, ready, self.config.timeout).await;
        if let Ok(mut status) = self.start.status.lock() {
            status.restart.judge(scan, verdict, ready);
        }
    }

    /// The capabilities document as served now, with the live parts read together.
    pub(super) fn capabilities_text(&self, ready: &Ready) -> String {
        let (restart, startup) = match self.start.status.lock() {
            Ok(status) => (status.restart.describe(), status.start.describe()),
            Err(_) => (json!({"required": true}), Value::Null),
        };
        let sandbox = self.start.sandbox.get();
        let live = capabilities::Live {
            restart,
            startup,
            sandbox,
            exec: &self.host.exec,
        };
        capabilities::text(&ready.capabilities, &ready.discovery, &ready.toolset, live)
    }
}

/// The MCP server (cheap to clone; clones share one state, including the session's).
#[derive(Clone)]
pub struct Server {
    pub(super) shared: Arc<Shared>,
    /// This session's executions running or waiting, in the server's queue.
    pub(super) capacity: Arc<Capacity>,
    /// The client's roots (handshake sessions that declared them).
    pub(super) roots: Arc<Roots>,
    /// This session's id in the audit log (random; never the MCP session id).
    pub(super) session_id: Arc<str>,
}

impl Server {
    /// The sandbox's plan for a call (a read, a preview), made off the async workers: it
    /// reads every registry of environments and enumerates the password database (a
    /// directory service, a user's own FUSE home may take long), and the server's other
    /// requests go on meanwhile (attack 13 L3). `None` when it cannot be made, or not
    /// within the call's `timeout` (a lookup a stalled file system holds; its thread is
    /// left to finish: attack 14 L4). One plan is made at a time, its thread holding the
    /// permit: a plan stuck in a stalled lookup fails later calls at their timeout
    /// without a thread each (600 calls behind one filled the blocking pool, which the
    /// stdio transport shares, and the server answered nothing more: attack 15 A15-1).
    pub(super) async fn sandbox_plan(
        &self,
        ready: &Ready,
        timeout: std::time::Duration,
    ) -> Option<crate::host::sandbox::Plan> {
        let (shared, prefix) = (self.shared.clone(), ready.discovery.prefix.clone());
        let plan = async {
            let permit = shared.planning.clone().acquire_owned().await.ok()?;
            tokio::task::spawn_blocking(move || {
                let _permit = permit;
                shared.start.sandbox.get()?.plan(prefix.as_deref())
            })
            .await
            .ok()
            .flatten()
        };
        match tokio::time::timeout(timeout, plan).await {
            Ok(made) => made,
            Err(_) => {
                tracing::error!("the sandbox's plan was not made within the call's timeout");
                None
            }
        }
    }
}

/// A random session id for the audit log (`s-` and 16 hex digits).
pub(super) fn session_id() -> Arc<str> {
    let mut bytes = [0u8; 8];
    if getrandom::fill(&mut bytes).is_err() {
        bytes = std::process::id()
            .to_le_bytes()
            .repeat(2)
            .try_into()
            .unwrap_or_default();
    }
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    Arc::from(format!("s-{hex}"))
}
