//! Progress notifications of a tool call whose request carries a `progressToken`: while
//! the child runs, `notifications/progress` at least every [`HEARTBEAT`] (the phase when
//! one is known, else the last non-empty stderr line), and one per fetch record conda
//! writes for a package (its first record and its last, the ones between at most every
//! [`RECORD_GAP`]), and heartbeats while the call waits in the execution queue. One
//! counter per request, strictly increasing across all kinds;
//! `total` is left out (the number of packages is not known before conda solves, and ccm
//! does not solve ahead). Nothing is sent without a token, after the result, or once the
//! request is cancelled. Under 2024-11-05, which has no `message` field, none is sent.

use std::collections::HashSet;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::{ProgressNotificationParam, ProgressToken, ProtocolVersion};
use rmcp::service::{Peer, RequestContext};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::host::exec::{self, Seen};
use crate::tools::records::FetchRecord;

/// The longest time between two notifications while the child runs.
pub(super) const HEARTBEAT: Duration = Duration::from_secs(3);
/// The shortest time between two notifications of records that neither start nor finish
/// a package (a download's intermediate steps).
pub(super) const RECORD_GAP: Duration = Duration::from_millis(250);

/// Where a call's progress goes: the request's token and the peer to notify.
#[derive(Clone)]
pub(super) struct Progress {
    peer: Peer<RoleServer>,
    token: ProgressToken,
    /// The revision has the `message` field (2025-03-26 and later).
    messages: bool,
    /// The last `progress` value sent for this request (queue wait and run share it).
    counter: Arc<AtomicU64>,
}

impl Progress {
    /// The progress target of a request: `None` without a `progressToken`.
    pub(super) fn of(context: &RequestContext<RoleServer>) -> Option<Progress> {
        let token = context.meta.get_progress_token()?;
        let messages = context
            .protocol_version()
            .is_none_or(|v| v.as_str() > ProtocolVersion::V_2024_11_05.as_str());
        Some(Progress {
            peer: context.peer.clone(),
            token,
            messages,
            counter: Arc::default(),
        })
    }

    /// Run `spec` (on a terminal when `terminal`), notifying progress until it ends.
    pub(super) async fn run(
        &self,
        exec: &exec::Executions,
        spec: &exec::Spec,
        ct: &CancellationToken,
        terminal: bool,
    ) -> std::io::Result<exec::Outcome> {
        let (watch, seen) = exec::watch::watch(terminal);
        let run = exec.run_watched(spec, ct, Some(watch));
        let mut reporter = Reporter::new(self, ct);
        tokio::select! {
            outcome = run => outcome,
            // Never ends by itself: dropped (sending nothing more) when the run is over.
            never = reporter.report(seen) => match never {},
        }
    }
}

/// Run `spec` (conda directly or through the binding wrapper): with notifications when
/// the request asked for progress (on a terminal when `fetch_records`: the judged call
/// says conda would then write fetch records, only worth it when someone listens), else
/// exactly as without progress.
pub(super) async fn run(
    exec: &exec::Executions,
    progress: Option<&Progress>,
    spec: &exec::Spec,
    fetch_records: bool,
    ct: &CancellationToken,
) -> std::io::Result<exec::Outcome> {
    match progress {
        Some(progress) => progress.run(exec, spec, ct, fetch_records).await,
        None => exec.run(spec, ct).await,
    }
}

/// Wait for `admission` (a place in the execution queue), with heartbeats while it takes
/// long when the request asked for progress: a call queued behind a long install keeps
/// its client's timeout alive too.
pub(super) async fn waiting<T>(
    progress: Option<&Progress>,
    ct: &CancellationToken,
    admission: impl Future<Output = T>,
) -> T {
    waiting_for(
        progress,
        ct,
        "Waiting for the conda command before it to finish",
        admission,
    )
    .await
}

/// Wait for `step` with heartbeats saying `message` while it takes long, when the request
/// asked for progress (the queue, or the user's answer under `--confirm-writes`, whose
/// preview and question can take minutes).
pub(super) async fn waiting_for<T>(
    progress: Option<&Progress>,
    ct: &CancellationToken,
    message: &str,
    step: impl Future<Output = T>,
) -> T {
    let admission = step;
    let Some(progress) = progress else {
        return admission.await;
    };
    let mut admission = std::pin::pin!(admission);
    let mut reporter = Reporter::new(progress, ct);
    loop {
        tokio::select! {
            admitted = &mut admission => return admitted,
            () = tokio::time::sleep_until(reporter.last_sent + HEARTBEAT), if !ct.is_cancelled() => {
                reporter.send(message.into()).await;
            }
        }
    }
}

/// The state of one request's notifications.
struct Reporter<'a> {
    progress: &'a Progress,
    ct: &'a CancellationToken,
    started: Instant,
    last_sent: Instant,
    packages: Packages,
}

impl<'a> Reporter<'a> {
    fn new(progress: &'a Progress, ct: &'a CancellationToken) -> Self {
        let now = Instant::now();
        Reporter {
            progress,
            ct,
            started: now,
            last_sent: now,
            packages: Packages::default(),
        }
    }

    async fn report(&mut self, mut seen: Seen) -> Infallible {
        let mut records_open = true;
        loop {
            if self.ct.is_cancelled() {
                // Nothing after cancellation: wait for the run to end.
                return std::future::pending().await;
            }
            tokio::select! {
                record = seen.record(), if records_open => match record {
                    Some(record) => self.record(record).await,
                    None => records_open = false,
                },
                () = tokio::time::sleep_until(self.last_sent + HEARTBEAT) => {
                    let message = self.phase().or_else(|| seen.last_line()).unwrap_or_else(|| {
                        format!("conda is running ({} s)", self.started.elapsed().as_secs())
                    });
                    self.send(message).await;
                }
                () = self.ct.cancelled() => {}
            }
        }
    }

    fn phase(&self) -> Option<String> {
        self.packages.phase()
    }

    async fn record(&mut self, record: FetchRecord) {
        let due = self.last_sent.elapsed() >= RECORD_GAP;
        if let Some(message) = self.packages.note(&record, due) {
            self.send(message).await;
        }
    }

    async fn send(&mut self, message: String) {
        let counter = self.progress.counter.fetch_add(1, Ordering::SeqCst) + 1;
        self.last_sent = Instant::now();
        let mut params =
            ProgressNotificationParam::new(self.progress.token.clone(), counter as f64);
        if self.progress.messages {
            params = params.with_message(message);
        }
        tokio::select! {
            sent = self.progress.peer.notify_progress(params) => {
                if let Err(error) = sent {
                    tracing::debug!(%error, "a progress notification was not sent");
                }
            }
            () = self.ct.cancelled() => {}
        }
    }
}

/// The most packages tracked by name; records of others are only sent as steps (at most
/// every [`RECORD_GAP`]), so a flood of made-up names cannot grow memory or the
/// notifications without bound.
const MAX_PACKAGES: usize = 4096;

/// The packages fetch records named, and those finished.
#[derive(Default)]
struct Packages {
    seen: HashSet<String>,
    finished: HashSet<String>,
}

impl Packages {
    /// The phase, when fetch records told it.
    fn phase(&self) -> Option<String> {
        (!self.seen.is_empty()).then(|| {
            format!(
                "Downloading and extracting packages: {} of {} seen done",
                self.finished.len(),
                self.seen.len()
            )
        })
    }

    /// Note a record; the message to send for it: always when it starts or finishes a
    /// package, else only when a step is `due`.
    fn note(&mut self, record: &FetchRecord, due: bool) -> Option<String> {
        let known = self.seen.contains(&record.package);
        let new =
            !known && self.seen.len() < MAX_PACKAGES && self.seen.insert(record.package.clone());
        let finishes =
            record.finished && (known || new) && self.finished.insert(record.package.clone());
        if finishes {
            Some(format!(
                "Downloaded and extracted {} ({} done)",
                record.label(),
                self.finished.len()
            ))
        } else if new || due {
            Some(format!(
                "Downloading {} {:.0}%",
                record.label(),
                record.progress * 100.0
            ))
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(package: &str, progress: f64, finished: bool) -> FetchRecord {
        FetchRecord {
            package: package.into(),
            size: Some("1 KB".into()),
            progress,
            finished,
        }
    }

    #[test]
    fn starts_and_finishes_are_always_sent_steps_when_due() {
        let mut packages = Packages::default();
        assert_eq!(packages.phase(), None);
        assert_eq!(
            packages.note(&record("a-1", 0.0, false), false).as_deref(),
            Some("Downloading a-1 (1 KB) 0%")
        );
        assert_eq!(packages.note(&record("a-1", 0.5, false), false), None);
        assert_eq!(
            packages.note(&record("a-1", 0.5, false), true).as_deref(),
            Some("Downloading a-1 (1 KB) 50%")
        );
        assert_eq!(
            packages.note(&record("a-1", 1.0, true), false).as_deref(),
            Some("Downloaded and extracted a-1 (1 KB) (1 done)")
        );
        // A second close of the same bar is a step, not a second finish.
        assert_eq!(packages.note(&record("a-1", 1.0, true), false), None);
        assert_eq!(
            packages.phase().as_deref(),
            Some("Downloading and extracting packages: 1 of 1 seen done")
        );
    }

    #[test]
    fn a_flood_of_names_is_bounded() {
        let mut packages = Packages::default();
        let mut sent = 0;
        for n in 0..(MAX_PACKAGES + 1000) {
            let name = format!("p{n}");
            sent += usize::from(packages.note(&record(&name, 0.0, false), false).is_some());
            sent += usize::from(packages.note(&record(&name, 1.0, true), false).is_some());
        }
        assert_eq!(packages.seen.len(), MAX_PACKAGES);
        assert_eq!(sent, 2 * MAX_PACKAGES);
    }
}
