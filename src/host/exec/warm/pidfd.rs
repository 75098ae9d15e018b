//! Process descriptors: a process signalled through its pidfd is never another process
//! that reused its pid.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// A pidfd for `pid`.
pub(crate) fn open(pid: i32) -> std::io::Result<OwnedFd> {
    // SAFETY: pidfd_open with integer arguments.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a new descriptor owned here.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Send `signal` to the process of `fd` (errors, such as ESRCH once it is gone, ignored).
pub(crate) fn kill(fd: &OwnedFd, signal: i32) {
    // SAFETY: pidfd_send_signal with a valid descriptor and no siginfo.
    unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            fd.as_raw_fd(),
            signal,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        );
    }
}
