//! The audit record of one tool call (`--audit-log`), written through
//! [`crate::host::audit`] when the call ends, however it ends (a result, a refusal, a
//! cancellation that drops the call): one line per call that reached the policy.
//!
//! The call's steps fill the record through the [`Record`] handle the call's
//! [`Caller`](super::caller::Caller) carries ([`Record::reached`], [`Record::refused`],
//! [`Record::confirmation`], [`Record::outcome`]); without an audit log the handle is
//! inert and they do nothing.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use rmcp::model::Implementation;
use serde_json::{Value, json};

use crate::host::audit;
use crate::host::exec::Outcome;
use crate::model::catalog::Command;

/// What a call's record holds until it is written.
#[derive(Default)]
struct Entry {
    /// Set when the call reached the policy: only those calls are logged.
    canonical: Option<String>,
    argv: Vec<String>,
    /// How conda's parser reads the argv's options (for the redaction).
    readings: Vec<Option<Vec<String>>>,
    refusal: Option<String>,
    confirmation: Option<&'static str>,
    exit_code: Option<i32>,
    timed_out: bool,
    cancelled: bool,
    truncated: bool,
    finished: bool,
}

/// One call's audit trail: begun when the call arrives, written when it is dropped.
pub(super) struct Trail {
    audit: Arc<audit::Audit>,
    record: Arc<Mutex<Entry>>,
    started: Instant,
    session: Arc<str>,
    client: Option<Implementation>,
    served: String,
}

impl Trail {
    /// A trail when the audit log is open.
    pub(super) fn begin(
        audit: &Arc<audit::Audit>,
        session: &Arc<str>,
        client: Option<Implementation>,
        served: &str,
    ) -> Option<Self> {
        audit.enabled().then(|| Trail {
            audit: Arc::clone(audit),
            record: Arc::default(),
            started: Instant::now(),
            session: Arc::clone(session),
            client,
            served: served.to_owned(),
        })
    }

    /// The handle the call's steps fill this trail's record through.
    pub(super) fn record(&self) -> Record {
        Record(Some(Arc::clone(&self.record)))
    }

    /// The call ended (a result or a refusal): it was not cancelled by being dropped.
    pub(super) fn finish(&self) {
        if let Ok(mut record) = self.record.lock() {
            record.finished = true;
        }
    }

    fn line(&self, record: &Entry, canonical: &str) -> Value {
        let time = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        let verdict = if record.refusal.is_some() {
            "refused"
        } else {
            "allowed"
        };
        json!({
            "time": time,
            "session": &*self.session,
            "client": self.client.as_ref().map(|c| json!({"name": c.name, "version": c.version})),
            "tool": self.served,
            "canonical_tool": canonical,
            "argv": self.audit.redacted_read(&record.argv, &record.readings),
            "verdict": verdict,
            "refusal": record.refusal,
            "confirmation": record.confirmation.unwrap_or("not_required"),
            "exit_code": record.exit_code,
            "duration_ms": u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX),
            "timed_out": record.timed_out,
            "cancelled": record.cancelled || !record.finished,
            "truncated": record.truncated,
        })
    }
}

impl Drop for Trail {
    fn drop(&mut self) {
        let Ok(record) = self.record.lock() else {
            return;
        };
        if let Some(canonical) = record.canonical.as_deref() {
            self.audit.append(&self.line(&record, canonical));
        }
    }
}

/// One call's record, as its steps fill it: inert (the default) without an audit log.
#[derive(Clone, Default)]
pub(super) struct Record(Option<Arc<Mutex<Entry>>>);

impl Record {
    fn with(&self, update: impl FnOnce(&mut Entry)) {
        if let Some(slot) = &self.0
            && let Ok(mut record) = slot.lock()
        {
            update(&mut record);
        }
    }

    /// The call reached the policy with this final argv (its canonical tool name), read
    /// against the catalog's `root` parser (so the redaction reads options as conda does).
    pub(super) fn reached(&self, canonical: &str, argv: &[String], root: Option<&Command>) {
        self.with(|r| {
            r.canonical = Some(canonical.to_owned());
            r.argv = argv.to_vec();
            r.readings = crate::tools::policy::option_readings(root, argv);
        });
    }

    /// The policy (or path confinement) refused the call; `why` is the refusal's fixed
    /// text.
    pub(super) fn refused(&self, why: &str) {
        self.with(|r| r.refusal = Some(why.to_owned()));
    }

    /// What the user answered (`accepted`, `declined`, `cancelled`, `timed_out`,
    /// `unavailable`).
    pub(super) fn confirmation(&self, answer: &'static str) {
        self.with(|r| r.confirmation = Some(answer));
    }

    /// How the execution ended.
    pub(super) fn outcome(&self, outcome: &Outcome) {
        self.with(|r| {
            r.exit_code = outcome.exit_code;
            r.timed_out = outcome.timed_out;
            r.cancelled = outcome.cancelled;
            r.truncated = outcome.stdout_truncated || outcome.stderr_truncated;
        });
    }
}

/// The refusal of a call that names the audit log (never the path).
pub(super) const NAMES_LOG: &str = "Operation names the audit log (see --audit-log)";

/// Whether any path the argv names (relative ones from `cwd`) is the audit log, or, for
/// a call that writes, a directory that holds it. A `~user` spelling (which conda expands
/// and the server does not resolve) counts as naming it.
pub(super) fn names_log(
    audit: &audit::Audit,
    argv: &[String],
    cwd: &std::path::Path,
    home: Option<&std::path::Path>,
    writes: bool,
) -> bool {
    audit.enabled()
        && (crate::host::confine::names_other_home(argv)
            || crate::host::confine::names_file(argv, cwd, home, |path| {
                audit.is_log(path) || (writes && audit.holds_log(path))
            }))
}
