//! The namespace holder of a warm call in the sandbox: a child forked from the server
//! that builds the call's sandbox with the cold path's own code (only system calls after
//! `fork`) and then waits to be killed. The warm child joins its namespaces by pidfd
//! (`setns`), so the sandbox is built once, by one implementation, for both paths.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use super::super::reap;
use super::pidfd;
use crate::host::sandbox::Plan;

/// A running holder; killed and reaped on drop.
pub(super) struct Holder {
    pid: i32,
    pub(super) pidfd: OwnedFd,
}

/// Fork a holder that enters `plan`'s sandbox; returns once the sandbox is built.
pub(super) fn start(plan: &Plan) -> std::io::Result<Holder> {
    let mut ends = [0i32; 2];
    // SAFETY: pipe2 fills two descriptors.
    if unsafe { libc::pipe2(ends.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned here.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(ends[0]), OwnedFd::from_raw_fd(ends[1])) };
    let pid = {
        // Registered before anything can reap it.
        let mut registry = reap::registry();
        // SAFETY: the child only makes system calls on data prepared before the fork
        // (`enter_forked` is the cold path's `pre_exec` hook), then waits to be killed.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            in_child(plan, write.as_raw_fd());
        }
        if pid > 0 {
            registry.insert(pid);
        }
        pid
    };
    if pid < 0 {
        return Err(std::io::Error::last_os_error());
    }
    drop(write);
    let mut byte = [1u8; 1];
    // SAFETY: a valid descriptor and a 1-byte buffer; the child answers at once.
    let n = unsafe { libc::read(read.as_raw_fd(), byte.as_mut_ptr().cast(), 1) };
    let pidfd = pidfd::open(pid);
    let holder = pidfd.map(|pidfd| Holder { pid, pidfd });
    match (n, byte[0], holder) {
        (1, 0, Ok(holder)) => Ok(holder),
        (_, _, Ok(holder)) => {
            drop(holder);
            Err(std::io::Error::other("the sandbox could not be set up"))
        }
        (_, _, Err(error)) => {
            kill_and_reap(pid, None);
            Err(error)
        }
    }
}

/// In the forked child: build the sandbox, say whether it worked, wait to be killed.
fn in_child(plan: &Plan, answer: i32) -> ! {
    // SAFETY: system calls only on data prepared before the fork.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
        let byte: u8 = if crate::host::sandbox::enter_forked(plan).is_ok() {
            0
        } else {
            1
        };
        libc::write(answer, (&byte as *const u8).cast(), 1);
        loop {
            libc::pause();
        }
    }
}

fn kill_and_reap(pid: i32, fd: Option<&OwnedFd>) {
    match fd {
        Some(fd) => pidfd::kill(fd, libc::SIGKILL),
        // SAFETY: `pid` is our unreaped child (registered), so it cannot be reused.
        None => unsafe {
            libc::kill(pid, libc::SIGKILL);
        },
    }
    let mut status = 0;
    // SAFETY: waitpid on our own child; SIGKILL ends it promptly.
    unsafe {
        libc::waitpid(pid, &mut status, 0);
    }
    reap::registry().remove(&pid);
}

impl Drop for Holder {
    fn drop(&mut self) {
        kill_and_reap(self.pid, Some(&self.pidfd));
    }
}
