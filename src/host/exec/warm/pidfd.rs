//! Process descriptors: a process signalled through its pidfd is never another process
//! that reused its pid.

use std::os::fd::OwnedFd;

use rustix::process::{Pid, PidfdFlags, Signal};

/// A pidfd for `pid` (a positive pid; anything else is `EINVAL`).
pub(crate) fn open(pid: i32) -> std::io::Result<OwnedFd> {
    let pid = Pid::from_raw(pid.max(0)).ok_or(rustix::io::Errno::INVAL)?;
    Ok(rustix::process::pidfd_open(pid, PidfdFlags::empty())?)
}

/// Send `signal` to the process of `fd` (errors, such as ESRCH once it is gone, ignored).
pub(crate) fn kill(fd: &OwnedFd, signal: Signal) {
    let _ = rustix::process::pidfd_send_signal(fd, signal);
}
