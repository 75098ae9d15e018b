//! The Linux side of the seam: the mechanisms themselves, re-exported from where they
//! live or (the small ones) written here.

use std::os::fd::OwnedFd;

use rustix::process::{Pid, PidfdFlags, Signal};

pub(crate) use crate::host::sandbox::scope::ruleset as scope_ruleset;
pub(crate) use crate::host::sandbox::seccomp::Filter as SeccompFilter;

/// Make this process a child subreaper (`prctl(PR_SET_CHILD_SUBREAPER)`): orphaned
/// descendants become its children. Returns whether it worked.
pub(crate) fn set_child_subreaper() -> bool {
    // Any pid sets the flag; `None` would clear it.
    rustix::process::set_child_subreaper(Some(Pid::INIT)).is_ok()
}

/// A pidfd for `pid` (a positive pid; anything else is `EINVAL`): a process signalled
/// through it is never another process that reused its pid.
pub(crate) fn pidfd_open(pid: i32) -> std::io::Result<OwnedFd> {
    let pid = Pid::from_raw(pid.max(0)).ok_or(rustix::io::Errno::INVAL)?;
    Ok(rustix::process::pidfd_open(pid, PidfdFlags::empty())?)
}

/// Send `signal` to the process of `fd` (errors, such as ESRCH once it is gone, ignored).
pub(crate) fn pidfd_kill(fd: &OwnedFd, signal: Signal) {
    let _ = rustix::process::pidfd_send_signal(fd, signal);
}

/// A child's exit code, or minus the signal that ended it.
pub(crate) fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|s| -s))
        .unwrap_or(-1)
}
