//! The sandbox of a warm call: a short-lived child forked from the server builds the
//! call's sandbox with the cold path's own code (only system calls after `fork`), sends
//! back descriptors of its user, mount and IPC namespaces and of the call's Landlock
//! ruleset (its mounts granted), and exits. The warm child joins
//! those namespaces with `setns`, so the sandbox is built by one implementation for both
//! paths. Namespace descriptors (not a pidfd of the holder) are used because joining by
//! pidfd needs ptrace access to the holder, which an undumpable process does not give a
//! non-root caller.

use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use super::super::reap;
use super::rights;
use crate::host::sandbox::Plan;

/// The namespaces of one call's sandbox: its user namespace (absent only on a root
/// server whose kernel refused one), its mount and its IPC namespace; and the call's own
/// Landlock ruleset, which grants opening files for writing beneath the writable mounts
/// of that mount namespace alone (absent where the kernel has no Landlock).
pub(super) struct Namespaces {
    pub(super) user: Option<OwnedFd>,
    pub(super) mount: OwnedFd,
    pub(super) ipc: OwnedFd,
    pub(super) ruleset: Option<OwnedFd>,
}

/// Room for four descriptors in one control message.
const FDS: usize = 4;

/// Build `plan`'s sandbox in a forked child and return its namespaces; with `parent`,
/// the call's user namespace is made inside that one (the read zygote's: its children
/// may join only namespaces nested in its own).
pub(super) fn build(plan: &Plan, parent: Option<BorrowedFd<'_>>) -> std::io::Result<Namespaces> {
    use rustix::net::{AddressFamily, SocketFlags, SocketType, socketpair};
    use rustix::process::{Pid, WaitOptions, waitpid};
    let (ours, theirs) = socketpair(
        AddressFamily::UNIX,
        SocketType::DGRAM,
        SocketFlags::CLOEXEC,
        None,
    )?;
    let user = plan.user_namespace();
    let pid = {
        // Registered before anything can reap it.
        let mut registry = reap::registry();
        // SAFETY: the child only makes system calls on data prepared before the fork
        // (`enter_forked` is the cold path's `pre_exec` hook; `in_child` allocates
        // nothing and takes no lock), then exits without returning.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            in_child(plan, parent, user, theirs.as_fd());
        }
        if pid > 0 {
            registry.insert(pid);
        }
        pid
    };
    if pid < 0 {
        return Err(std::io::Error::last_os_error());
    }
    drop(theirs);
    let mut byte = [1u8; 1];
    let received = rights::receive(ours.as_fd(), &mut byte, FDS);
    // Our own child (pid > 0), which exits right after sending; never `waitpid(-1)`.
    if let Some(child) = Pid::from_raw(pid) {
        let _ = waitpid(Some(child), WaitOptions::empty());
    }
    reap::registry().remove(&pid);
    let (n, fds) = received?;
    if n != 1 || byte[0] != 0 {
        return Err(std::io::Error::other("the sandbox could not be set up"));
    }
    let mut fds = fds.into_iter();
    let user = if user { fds.next() } else { None };
    let mut next = || {
        fds.next()
            .ok_or_else(|| std::io::Error::other("no namespace"))
    };
    let (mount, ipc) = (next()?, next()?);
    if plan.user_namespace() && user.is_none() {
        return Err(std::io::Error::other("no user namespace"));
    }
    Ok(Namespaces {
        user,
        mount,
        ipc,
        ruleset: fds.next().filter(|_| !ruleset_lost_for_tests()),
    })
}

/// Debug builds only: `CCM_TEST_HOLDER_RULESET_LOST=1` drops the ruleset the holder sent,
/// as a lost descriptor would, so that tests prove a warm call then runs cold (with the
/// ruleset its cold child makes). Release builds ignore the variable.
fn ruleset_lost_for_tests() -> bool {
    cfg!(debug_assertions)
        && std::env::var_os("CCM_TEST_HOLDER_RULESET_LOST").is_some_and(|v| v == "1")
}

/// In the forked child: build the sandbox, send its namespaces (status 0) or a failure
/// (status 1, no descriptors), exit. System calls only, on the stack and on data prepared
/// before the fork.
fn in_child(plan: &Plan, parent: Option<BorrowedFd<'_>>, user: bool, socket: BorrowedFd<'_>) -> ! {
    use rustix::fs::{Mode, OFlags, open};
    let open = |path: &std::ffi::CStr| open(path, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty());
    let entered = crate::host::platform::enter_forked(plan, parent);
    let ruleset = entered.as_ref().ok().and_then(Option::as_ref);
    let namespaces = match (entered.is_ok(), user) {
        (false, _) => None,
        (true, true) => open(c"/proc/self/ns/user").ok().map(Some),
        (true, false) => Some(None),
    };
    let (mount, ipc) = match namespaces {
        Some(_) => (
            open(c"/proc/self/ns/mnt").ok(),
            open(c"/proc/self/ns/ipc").ok(),
        ),
        None => (None, None),
    };
    let mut control = [MaybeUninit::uninit(); rights::space(FDS)];
    // On the stack: the namespaces, then the ruleset when there is one.
    let mut fds = [socket; FDS];
    let mut n = 0;
    let status = match (&namespaces, &mount, &ipc) {
        (Some(u), Some(m), Some(i)) => {
            let held = [u.as_ref(), Some(m), Some(i), ruleset];
            for fd in held.into_iter().flatten() {
                fds[n] = fd.as_fd();
                n += 1;
            }
            0
        }
        _ => 1,
    };
    let _ = rights::send(socket, &[status], &fds[..n], &mut control);
    // SAFETY: `_exit` ends this forked child at once, running no handler and flushing no
    // buffer of the parent's.
    unsafe { libc::_exit(0) }
}
