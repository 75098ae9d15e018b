//! The leader of one execution: a child the server started (cold), or one the warm
//! zygote forked ([`super::warm`]). The supervisor treats both alike.

use std::pin::Pin;
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::process::Child;

use super::{Spec, limits, spawn, warm};

pub(super) type Reader = Pin<Box<dyn AsyncRead + Send>>;
pub(super) type Writer = Pin<Box<dyn AsyncWrite + Send>>;

pub(super) enum Leader {
    Cold(Child),
    Warm(warm::WarmChild),
}

/// Start `spec`'s leader: forked from the `warm` zygote when `spec` runs the warm target
/// in the read-only sandbox and the zygote takes it, else started cold (always cold
/// outside the sandbox — writes —, with a terminal as stdout, and with a write bound).
pub(super) async fn start(
    warm: Option<&Arc<warm::Warm>>,
    spec: &Spec,
    marker: &str,
    terminal: Option<std::os::fd::OwnedFd>,
) -> std::io::Result<(Leader, Arc<limits::Prepared>)> {
    let cold_only = terminal.is_some() || spec.write_bound.is_some() || spec.sandbox.is_none();
    if let Some(warm) = warm.filter(|w| !cold_only && w.applies(&spec.program)) {
        let prepared = Arc::new(spec.limits.prepare());
        match warm::fork(warm, spec, marker, &prepared).await {
            Ok(child) => return Ok((Leader::Warm(child), prepared)),
            Err(_) => {
                if let Some(group) = &prepared.group {
                    group.remove();
                }
            }
        }
    }
    let (child, prepared) = spawn::start(spec, marker, terminal)?;
    Ok((Leader::Cold(child), prepared))
}

impl Leader {
    pub(super) fn id(&self) -> Option<u32> {
        match self {
            Leader::Cold(child) => child.id(),
            Leader::Warm(child) => Some(child.id()),
        }
    }

    pub(super) async fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        match self {
            Leader::Cold(child) => child.wait().await,
            Leader::Warm(child) => child.wait().await,
        }
    }

    pub(super) fn take_stdin(&mut self) -> Option<Writer> {
        match self {
            Leader::Cold(child) => child.stdin.take().map(|w| Box::pin(w) as Writer),
            Leader::Warm(child) => child.stdin.take().map(|w| Box::pin(w) as Writer),
        }
    }

    pub(super) fn take_stdout(&mut self) -> Option<Reader> {
        match self {
            Leader::Cold(child) => child.stdout.take().map(|r| Box::pin(r) as Reader),
            Leader::Warm(child) => child.stdout.take().map(|r| Box::pin(r) as Reader),
        }
    }

    pub(super) fn take_stderr(&mut self) -> Option<Reader> {
        match self {
            Leader::Cold(child) => child.stderr.take().map(|r| Box::pin(r) as Reader),
            Leader::Warm(child) => child.stderr.take().map(|r| Box::pin(r) as Reader),
        }
    }

    /// A new outcome saying whether it was forked from the zygote (`None`: warm reads
    /// are off on the server of `executions`).
    pub(super) fn outcome(&self, executions: &super::Executions) -> super::Outcome {
        let warm = executions.warm().map(|_| matches!(self, Leader::Warm(_)));
        super::Outcome {
            warm,
            ..super::Outcome::default()
        }
    }

    /// SIGKILL the leader itself (a warm leader through its pidfd).
    pub(super) fn kill(&mut self) {
        match self {
            Leader::Cold(child) => {
                let _ = child.start_kill();
            }
            Leader::Warm(child) => child.kill(),
        }
    }
}
