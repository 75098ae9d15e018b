//! The Linux side of the seam: the mechanisms themselves, re-exported from the Linux
//! rooms where they live (beside the data they serve, so that `super::` reaches it) or
//! (the small ones) written here. Nothing here names a module that names the seam: the
//! house test finds no cycle through it.

use std::os::fd::OwnedFd;

use rustix::process::{Pid, PidfdFlags, Signal};

pub(crate) use crate::host::sandbox::bound::landlock::{
    install as install_write_bound, make as make_write_bound, support as write_bound_support,
};
pub(crate) use crate::host::sandbox::enter::{
    enter_forked, install as install_sandbox, install_joined,
};
pub(crate) use crate::host::sandbox::scope::ruleset as scope_ruleset;
pub(crate) use crate::host::sandbox::seccomp::Filter as SeccompFilter;
pub(crate) use crate::host::sandbox::walls::Walls;

/// The read-only sandbox can be built here (namespaces, Landlock, seccomp); the startup
/// probe still tries it.
pub(crate) const SANDBOX: bool = true;

/// The file name of conda's entry point, looked for on `PATH`.
pub(crate) const CONDA: &str = "conda";

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

/// The total RAM in bytes (`sysinfo(2)`).
pub(crate) fn total_ram() -> u64 {
    let info = rustix::system::sysinfo();
    (info.totalram as u64).saturating_mul(u64::from(info.mem_unit.max(1)))
}

/// The terminal side of the pseudo-terminal `master` (`TIOCGPTPEER`: the very peer, not
/// whatever a path names by then).
pub(crate) fn pty_peer(
    master: &OwnedFd,
    flags: rustix::pty::OpenptFlags,
) -> std::io::Result<OwnedFd> {
    Ok(rustix::pty::ioctl_tiocgptpeer(master, flags)?)
}

/// A close-on-exec pipe made in one call (`pipe2`): (read end, write end).
pub(crate) fn pipe_cloexec() -> std::io::Result<(OwnedFd, OwnedFd)> {
    Ok(rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?)
}

/// A child's exit code, or minus the signal that ended it.
pub(crate) fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|s| -s))
        .unwrap_or(-1)
}
