//! Supervising one run: wait for the leader, the deadline or cancellation; on the way out
//! end the whole tree (SIGTERM, the grace period, SIGKILL, the sweep), give the output
//! readers a bounded time to finish, and name the limit a failed run probably hit.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::capture::{Captured, capture, feed};
use super::leader::{self, Leader};
use super::watch::{Tap, Watch};
use super::{Executions, Outcome, Spec, TERMINATION_GRACE, cgroup, limits, pty, reap};

/// How long output readers may still run once the process group is gone.
const READER_GRACE: Duration = Duration::from_millis(250);
/// How long to keep draining after a normal exit (only processes that escaped the
/// group can still hold the pipes by then).
const DRAIN_AFTER_EXIT: Duration = Duration::from_secs(1);

/// Why the wait for the leader ended.
enum End {
    Exited(std::process::ExitStatus),
    TimedOut,
    Cancelled,
}

/// The output readers of one run.
struct Readers {
    stdout: JoinHandle<Captured>,
    stderr: JoinHandle<Captured>,
    stop: CancellationToken,
}

pub(super) async fn supervise(
    executions: &Executions,
    spec: &Spec,
    cancel: &CancellationToken,
    watch: Option<&Watch>,
) -> std::io::Result<Outcome> {
    let started = Instant::now();
    let deadline = tokio::time::Instant::now() + spec.timeout;
    let marker = format!(
        "{}.{}",
        std::process::id(),
        super::NEXT_EXECUTION.fetch_add(1, Ordering::Relaxed)
    );
    // A terminal as stdout only where the caller watches for conda's fetch records.
    let pty = match watch {
        Some(watch) if watch.terminal => Some(pty::open()?),
        _ => None,
    };
    let (terminal, master) = match pty {
        Some(pty) => (Some(pty.terminal), Some(pty.master)),
        None => (None, None),
    };
    // The server's copy of the terminal is closed once the child has it (a run on a
    // terminal starts cold).
    let (mut child, prepared) = leader::start(executions.warm(), spec, &marker, terminal).await?;
    let leader = child.id().map(|id| id as i32);
    let tree = Tree {
        pgid: leader,
        group: prepared.group.as_ref(),
        marker: &marker,
    };
    let readers = read_output(&mut child, spec, master, watch)?;
    // The tree's peak address space, sampled while it runs: a program that catches its
    // MemoryError still shows how close it came to the limit.
    let peak_vm = Arc::new(AtomicU64::new(0));
    let sampler = spec
        .limits
        .memory
        .map(|_| sample_peak_vm(Arc::clone(&peak_vm), Arc::clone(&prepared), leader));
    let end = tokio::select! {
        status = child.wait() => match status {
            Ok(status) => End::Exited(status),
            // Waiting failed (should not happen): treat like a timeout so the tree dies.
            Err(_) => End::TimedOut,
        },
        _ = tokio::time::sleep_until(deadline) => End::TimedOut,
        _ = cancel.cancelled() => End::Cancelled,
        _ = executions.0.shutdown.cancelled() => End::Cancelled,
    };
    if let Some(sampler) = sampler {
        sampler.abort();
    }
    let mut outcome = child.outcome(executions);
    let reader_deadline = end_tree(end, &mut child, &tree, deadline, &mut outcome).await;
    // The leader is reaped by now.
    let _ = child.wait().await;
    if let Some(pid) = leader {
        reap::registry().remove(&pid);
    }
    collect(readers, reader_deadline, &mut outcome).await;
    let pids_max_hit = prepared.group.as_ref().is_some_and(|g| g.pids_max_hit());
    if outcome.exit_code != Some(0) && !outcome.cancelled {
        outcome.limit = limits::diagnose(
            &spec.limits,
            &limits::Evidence {
                exit_code: outcome.exit_code,
                stderr: &outcome.stderr,
                pids_max_hit,
                peak_vm: peak_vm.load(Ordering::Relaxed),
            },
        );
    }
    if let Some(group) = &prepared.group {
        group.remove();
    }
    outcome.duration = started.elapsed();
    Ok(outcome)
}

/// Feed stdin (when the spec has bytes for it) and start capturing both output streams
/// (stdout from the terminal's other side when there is one), tapped for `watch`.
fn read_output(
    child: &mut Leader,
    spec: &Spec,
    master: Option<std::os::fd::OwnedFd>,
    watch: Option<&Watch>,
) -> std::io::Result<Readers> {
    if let (Some(writer), Some(bytes)) = (child.take_stdin(), spec.stdin.clone()) {
        feed(writer, bytes);
    }
    let stop = CancellationToken::new();
    let (stdout_tap, stderr_tap) = match watch {
        Some(watch) => (watch.stdout_tap(), watch.stderr_tap()),
        None => (Tap::None, Tap::None),
    };
    let stdout = match master {
        Some(master) => tokio::spawn(capture(
            Some(pty::reader(master)?),
            spec.stdout_limit,
            stop.clone(),
            stdout_tap,
        )),
        None => tokio::spawn(capture(
            child.take_stdout(),
            spec.stdout_limit,
            stop.clone(),
            stdout_tap,
        )),
    };
    let stderr = tokio::spawn(capture(
        child.take_stderr(),
        spec.stderr_limit,
        stop.clone(),
        stderr_tap,
    ));
    Ok(Readers {
        stdout,
        stderr,
        stop,
    })
}

/// Sample the tree's peak address space (cgroup members and the leader) until aborted.
fn sample_peak_vm(
    peak: Arc<AtomicU64>,
    prepared: Arc<limits::Prepared>,
    leader: Option<i32>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let mut pids = prepared
                .group
                .as_ref()
                .map(|g| g.members())
                .unwrap_or_default();
            pids.extend(leader);
            let vm = pids
                .into_iter()
                .filter_map(reap::peak_vm)
                .max()
                .unwrap_or(0);
            peak.fetch_max(vm, Ordering::Relaxed);
            tokio::time::sleep(VM_SAMPLE).await;
        }
    })
}

/// End whatever is left of the tree after `end`; records how the run ended in `outcome`
/// and returns until when the output readers may still run.
async fn end_tree(
    end: End,
    child: &mut Leader,
    tree: &Tree<'_>,
    deadline: tokio::time::Instant,
    outcome: &mut Outcome,
) -> tokio::time::Instant {
    match end {
        End::Exited(status) => {
            outcome.exit_code = Some(crate::host::platform::exit_code(status));
            // Whatever the leader left behind would keep the pipes open: end it all.
            tree.sweep().await;
            std::cmp::min(deadline, tokio::time::Instant::now() + DRAIN_AFTER_EXIT)
        }
        End::TimedOut | End::Cancelled => {
            outcome.timed_out = matches!(end, End::TimedOut);
            outcome.cancelled = matches!(end, End::Cancelled);
            tree.signal(Signal::Term);
            let grace_end = tokio::time::Instant::now() + TERMINATION_GRACE;
            let _ = tokio::time::timeout_at(grace_end, child.wait()).await;
            // The leader is gone (or ignores SIGTERM): give the rest of the tree the rest
            // of the grace period.
            while tokio::time::Instant::now() < grace_end && tree.alive() {
                tokio::time::sleep(SWEEP_POLL).await;
            }
            tree.signal(Signal::Kill);
            child.kill();
            let _ = child.wait().await;
            tree.sweep().await;
            tokio::time::Instant::now() + READER_GRACE
        }
    }
}

/// Wait for both readers, stopping them at `reader_deadline`; their bytes go to `outcome`.
async fn collect(readers: Readers, reader_deadline: tokio::time::Instant, outcome: &mut Outcome) {
    let stopper = readers.stop.clone();
    let stop_at = tokio::spawn(async move {
        tokio::time::sleep_until(reader_deadline).await;
        stopper.cancel();
    });
    let (out, err) = (readers.stdout.await, readers.stderr.await);
    stop_at.abort();
    let out = out.unwrap_or_default();
    let err = err.unwrap_or_default();
    outcome.stdout = out.bytes;
    outcome.stdout_truncated = out.truncated;
    outcome.stderr = err.bytes;
    outcome.stderr_truncated = err.truncated;
}

/// How often the tree's peak address space is sampled.
const VM_SAMPLE: Duration = Duration::from_millis(200);
/// How often the sweep looks again.
const SWEEP_POLL: Duration = Duration::from_millis(20);
/// The sweep gives up after this long (a process in uninterruptible sleep).
const SWEEP_BOUND: Duration = Duration::from_secs(2);

/// An execution's processes: the leader's process group, the execution's cgroup (every
/// descendant, whatever its session) and the environment marker (where there is no
/// cgroup, or a child could not join it).
struct Tree<'a> {
    pgid: Option<i32>,
    group: Option<&'a cgroup::ExecutionGroup>,
    marker: &'a str,
}

impl Tree<'_> {
    fn signal(&self, signal: Signal) {
        signal_group(self.pgid, signal);
        let number = signal.number();
        match (self.group, signal) {
            (Some(group), Signal::Kill) => group.kill(),
            (Some(group), Signal::Term) => group.signal(number),
            (None, _) => {}
        }
        reap::signal_marked(self.marker, number);
    }

    fn alive(&self) -> bool {
        self.group.is_some_and(|g| !g.members().is_empty()) || !reap::marked(self.marker).is_empty()
    }

    /// SIGKILL the whole tree until nothing is left, reaping orphans by pid.
    async fn sweep(&self) {
        let end = tokio::time::Instant::now() + SWEEP_BOUND;
        loop {
            self.signal(Signal::Kill);
            reap::reap_orphans();
            if !self.alive() {
                break;
            }
            if tokio::time::Instant::now() >= end {
                tracing::warn!("processes of an execution survived SIGKILL");
                break;
            }
            tokio::time::sleep(SWEEP_POLL).await;
        }
        // Orphans killed last may only now have become zombies.
        reap::reap_orphans();
    }
}

#[derive(Clone, Copy)]
enum Signal {
    Term,
    Kill,
}

impl Signal {
    fn number(self) -> rustix::process::Signal {
        match self {
            Signal::Term => rustix::process::Signal::TERM,
            Signal::Kill => rustix::process::Signal::KILL,
        }
    }
}

/// Signal the leader's process group (errors, ESRCH once it is empty, ignored).
fn signal_group(pgid: Option<i32>, signal: Signal) {
    let Some(pgid) = pgid
        .filter(|p| *p > 1)
        .and_then(rustix::process::Pid::from_raw)
    else {
        return;
    };
    let _ = rustix::process::kill_process_group(pgid, signal.number());
}
