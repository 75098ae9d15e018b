//! Restart detection. The tool list never changes in place: when the target's conda or
//! plugin inventory no longer matches the served tools, a sticky `restart_required` flag
//! is set (every later result carries it) with the reason.
//!
//! After a successful call that may have changed the plugin set, the target's plugin
//! distributions are scanned on disk first ([`site_scan::scan`], no process); only when they
//! differ from the last scan is the helper asked for the plugin inventory and its
//! fingerprint compared. A snapshot start contradicted by live discovery also sets the
//! flag ([`Restart::contradicted`]).

use serde_json::{Value, json};

use super::compare::Mismatch;
use super::ready::Ready;
use crate::host::exec::Executions;
use crate::host::{discovery, site_scan};
use crate::model::catalog;

/// Why a restart is required (the `reason` of the capabilities' `restart` object).
#[derive(Clone, Debug, thiserror::Error)]
pub(super) enum RestartReason {
    /// Live discovery contradicts the baked snapshot the tools were served from.
    #[error(transparent)]
    Snapshot(#[from] Mismatch),
    #[error(
        "conda version or plugin inventory changed (fingerprint {startup} at startup, {now} now)"
    )]
    Changed { startup: String, now: String },
    #[error("conda plugin discovery failed: no target interpreter")]
    NoInterpreter,
    /// The helper failed (its fixed reason text).
    #[error("{0}")]
    Plugins(String),
}

/// Restart detection state (sticky once set).
#[derive(Debug, Default)]
pub(super) struct Restart {
    required: bool,
    reason: Option<RestartReason>,
    current_fingerprint: Option<String>,
    /// What the target's plugin distributions looked like when last checked.
    baseline: Option<site_scan::Scan>,
}

impl Restart {
    /// The tools are served: remember what the target looked like.
    pub(super) fn started(&mut self, ready: &Ready) {
        self.baseline = Some(site_scan::scan(&ready.discovery.site_dirs));
        self.current_fingerprint = Some(ready.discovery.fingerprint());
    }

    /// Live discovery differs from the snapshot that served the tools.
    pub(super) fn contradicted(&mut self, mismatch: Mismatch, live_fingerprint: String) {
        self.current_fingerprint = Some(live_fingerprint);
        if !self.required {
            self.required = true;
            self.reason = Some(mismatch.into());
        }
    }

    /// The capabilities document's `restart` object.
    pub(super) fn describe(&self) -> Value {
        json!({
            "required": self.required,
            "reason": self.reason.as_ref().map(ToString::to_string),
            "current_fingerprint": self.current_fingerprint,
        })
    }
}

impl Restart {
    /// Whether a restart is required (sticky once set).
    pub(super) fn required(&self) -> bool {
        self.required
    }

    /// Whether the plugin distributions on disk (`scan`) are those last checked.
    pub(super) fn unchanged(&self, scan: &site_scan::Scan) -> bool {
        self.baseline.as_ref() == Some(scan)
    }

    /// Take the plugin inventory asked for after a changed `scan` ([`inventory`]): a
    /// fingerprint other than the served tools' (or no inventory) requires a restart.
    pub(super) fn judge(&mut self, scan: site_scan::Scan, verdict: Inventory, ready: &Ready) {
        match verdict {
            Ok((version, plugins)) => {
                let fingerprint = catalog::discovery_fingerprint(&version, &plugins);
                self.current_fingerprint = Some(fingerprint.clone());
                if fingerprint != ready.discovery.fingerprint() {
                    self.required = true;
                    self.reason = Some(RestartReason::Changed {
                        startup: ready.discovery.fingerprint(),
                        now: fingerprint,
                    });
                    tracing::warn!(
                        "the installed conda plugins changed; restart the server to refresh its tools"
                    );
                } else {
                    self.baseline = Some(scan);
                }
            }
            Err(reason) => {
                self.required = true;
                self.reason = Some(reason);
            }
        }
    }
}

/// The target's plugin inventory (conda's version and its plugins), or why it could not
/// be had.
pub(super) type Inventory = Result<(String, Vec<catalog::Plugin>), RestartReason>;

/// Ask the helper for the plugin inventory (after a successful operation that may have
/// changed the plugin set, and only when the disk scan changed: [`Restart::unchanged`]).
/// Runs inside the execution slot.
pub(super) async fn inventory(
    exec: &Executions,
    ready: &Ready,
    timeout: std::time::Duration,
) -> Inventory {
    match ready.discovery.interpreter.as_deref() {
        None => Err(RestartReason::NoInterpreter),
        Some(interpreter) => discovery::plugins(exec, interpreter, timeout)
            .await
            .map_err(|f| RestartReason::Plugins(f.0)),
    }
}
