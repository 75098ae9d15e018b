//! No survivors: the server as child subreaper, finding an execution's descendants, and
//! reaping orphans by pid.
//!
//! With `PR_SET_CHILD_SUBREAPER`, a descendant whose parent dies (the intermediate of a
//! `setsid` double fork, say) becomes the server's child instead of init's, so it can be
//! reaped once it is killed. Reaping is by pid only: `waitpid(-1)` would steal the async
//! runtime's children. The runtime's own children (every execution's leader) are listed
//! in a registry while they run, and orphan reaping skips them.
//!
//! Descendants are found by cgroup membership where per-execution cgroups exist, and
//! otherwise by an inherited environment marker (`CCM_EXECUTION=<server pid>.<n>`) read
//! from each process's environment (`host::platform`'s process table): a helper run overlapping a tool run has its own marker,
//! so neither kills the other's processes.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use crate::host::platform;

/// The environment variable that marks an execution's descendants.
pub const MARKER_VAR: &str = "CCM_EXECUTION";

/// Set once this process is a subreaper: only then are orphans its children, and only then
/// does it reap children it did not start through `exec`. A process that merely uses the
/// library (a test harness with children of its own) never has its children taken.
/// Process-wide: being a subreaper is a property of the process, not of a server.
static SUBREAPER: AtomicBool = AtomicBool::new(false);

/// Become a child subreaper (`host::platform`), and reap orphans from now on. Returns whether it
/// worked. Only for a process whose every child is started by `exec` (the `ccm` binary).
pub fn become_subreaper() -> bool {
    let done = platform::set_child_subreaper();
    SUBREAPER.store(done, Ordering::SeqCst);
    done
}

/// Pids of the runtime's own children (execution leaders) that are not reaped yet.
pub(super) fn registry() -> MutexGuard<'static, HashSet<i32>> {
    // Process-wide: the process's children, whichever server started them; orphan reaping
    // must skip every one.
    static REGISTRY: OnceLock<Mutex<HashSet<i32>>> = OnceLock::new();
    REGISTRY
        .get_or_init(|| Mutex::new(HashSet::new()))
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// On every SIGCHLD, reap orphans (once per process, on the first runtime that asks): a
/// killed descendant leaves its cgroup before it becomes a zombie, so the sweep's own
/// reaping can come a moment too early.
pub(crate) fn start_orphan_reaper() {
    if !SUBREAPER.load(Ordering::SeqCst) {
        return;
    }
    // Process-wide: SIGCHLD goes to the process, so one reaper serves every server.
    static STARTED: std::sync::Once = std::sync::Once::new();
    STARTED.call_once(|| {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::child()) {
            Ok(mut children) => {
                tokio::spawn(async move {
                    while children.recv().await.is_some() {
                        reap_orphans();
                    }
                });
            }
            Err(error) => {
                tracing::debug!(%error, "no SIGCHLD stream: orphans are reaped by the sweeps")
            }
        }
    });
}

/// Reap every exited child of this process that is not a registered leader (by pid).
pub(super) fn reap_orphans() {
    if !SUBREAPER.load(Ordering::SeqCst) {
        return;
    }
    let me = std::process::id() as i32;
    let registry = registry();
    for platform::Process {
        pid,
        parent,
        zombie,
    } in platform::processes()
    {
        if parent == me && zombie && !registry.contains(&pid) {
            // One pid (> 0, never -1), without blocking.
            if let Some(pid) = rustix::process::Pid::from_raw(pid) {
                let _ = rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::NOHANG);
            }
        }
    }
}

/// Live processes whose environment carries `marker` (`CCM_EXECUTION=<id>`).
pub(super) fn marked(marker: &str) -> Vec<i32> {
    let needle = format!("{MARKER_VAR}={marker}");
    let me = std::process::id() as i32;
    platform::processes()
        .into_iter()
        .filter(|p| p.pid != me && !p.zombie)
        .filter(|p| {
            platform::environ(p.pid)
                .is_some_and(|env| env.split(|b| *b == 0).any(|v| v == needle.as_bytes()))
        })
        .map(|p| p.pid)
        .collect()
}

/// Send `signal` to every process carrying `marker`.
pub(super) fn signal_marked(marker: &str, signal: rustix::process::Signal) -> usize {
    let pids = marked(marker);
    for pid in pids
        .iter()
        .filter_map(|pid| rustix::process::Pid::from_raw(*pid))
    {
        let _ = rustix::process::kill_process(pid, signal);
    }
    pids.len()
}

/// A live process's peak address space in bytes (`VmPeak`); `None` once it is gone.
pub(super) fn peak_vm(pid: i32) -> Option<u64> {
    platform::memory(pid, platform::Memory::PeakVirtual)
}
