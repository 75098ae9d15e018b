//! The sandbox of a warm call: a short-lived child forked from the server builds the
//! call's sandbox with the cold path's own code (only system calls after `fork`), sends
//! back descriptors of its user, mount and IPC namespaces, and exits. The warm child joins
//! those namespaces with `setns`, so the sandbox is built by one implementation for both
//! paths. Namespace descriptors (not a pidfd of the holder) are used because joining by
//! pidfd needs ptrace access to the holder, which an undumpable process does not give a
//! non-root caller.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use super::super::reap;
use crate::host::sandbox::Plan;

/// The namespaces of one call's sandbox: its user namespace (absent only on a root
/// server whose kernel refused one), its mount and its IPC namespace.
pub(super) struct Namespaces {
    pub(super) user: Option<OwnedFd>,
    pub(super) mount: OwnedFd,
    pub(super) ipc: OwnedFd,
}

/// Room for three descriptors in one control message.
const FDS: usize = 3;

/// Build `plan`'s sandbox in a forked child and return its namespaces.
pub(super) fn build(plan: &Plan) -> std::io::Result<Namespaces> {
    let mut ends = [0i32; 2];
    // SAFETY: socketpair fills two descriptors.
    if unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            0,
            ends.as_mut_ptr(),
        )
    } != 0
    {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned here.
    let (ours, theirs) = unsafe { (OwnedFd::from_raw_fd(ends[0]), OwnedFd::from_raw_fd(ends[1])) };
    let user = plan.user_namespace();
    // Everything the child writes into is allocated before the fork.
    // SAFETY: CMSG_SPACE is a pure computation.
    let space = unsafe { libc::CMSG_SPACE((FDS * std::mem::size_of::<RawFd>()) as u32) } as usize;
    let mut control = vec![0u8; space];
    let pid = {
        // Registered before anything can reap it.
        let mut registry = reap::registry();
        // SAFETY: the child only makes system calls on data prepared before the fork
        // (`enter_forked` is the cold path's `pre_exec` hook), then exits.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            in_child(plan, user, theirs.as_raw_fd(), &mut control);
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
    let received = receive(&ours, &mut control);
    let mut status = 0;
    // SAFETY: waitpid on our own child, which exits right after sending.
    unsafe {
        libc::waitpid(pid, &mut status, 0);
    }
    reap::registry().remove(&pid);
    let mut fds = received?.into_iter();
    let user = if user { fds.next() } else { None };
    let mut next = || {
        fds.next()
            .ok_or_else(|| std::io::Error::other("no namespace"))
    };
    let (mount, ipc) = (next()?, next()?);
    if plan.user_namespace() && user.is_none() {
        return Err(std::io::Error::other("no user namespace"));
    }
    Ok(Namespaces { user, mount, ipc })
}

/// The descriptors of one message (none when the holder failed).
fn receive(socket: &OwnedFd, control: &mut [u8]) -> std::io::Result<Vec<OwnedFd>> {
    let mut byte = [1u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    // SAFETY: msghdr is plain data; the pointers set below are valid for the call.
    let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
    message.msg_iov = &mut iov;
    message.msg_iovlen = 1;
    message.msg_control = control.as_mut_ptr().cast();
    message.msg_controllen = control.len() as _;
    // SAFETY: a valid socket and message.
    let n = unsafe { libc::recvmsg(socket.as_raw_fd(), &mut message, libc::MSG_CMSG_CLOEXEC) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut fds = Vec::new();
    // SAFETY: walking the control messages the kernel wrote into `control`.
    unsafe {
        let mut header = libc::CMSG_FIRSTHDR(&message);
        while !header.is_null() {
            if (*header).cmsg_level == libc::SOL_SOCKET && (*header).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(header).cast::<RawFd>();
                let count = ((*header).cmsg_len as usize - libc::CMSG_LEN(0) as usize)
                    / std::mem::size_of::<RawFd>();
                for i in 0..count {
                    fds.push(OwnedFd::from_raw_fd(data.add(i).read_unaligned()));
                }
            }
            header = libc::CMSG_NXTHDR(&message, header);
        }
    }
    if n != 1 || byte[0] != 0 {
        return Err(std::io::Error::other("the sandbox could not be set up"));
    }
    Ok(fds)
}

/// In the forked child: build the sandbox, send its namespaces (or a failure), exit.
fn in_child(plan: &Plan, user: bool, socket: RawFd, control: &mut [u8]) -> ! {
    // SAFETY: system calls only, on data prepared before the fork.
    unsafe {
        let mut status: u8 = 1;
        let mut fds = [-1 as RawFd; FDS];
        let mut count = 0;
        if crate::host::sandbox::enter_forked(plan).is_ok() {
            let paths: &[&std::ffi::CStr] = if user {
                &[
                    c"/proc/self/ns/user",
                    c"/proc/self/ns/mnt",
                    c"/proc/self/ns/ipc",
                ]
            } else {
                &[c"/proc/self/ns/mnt", c"/proc/self/ns/ipc"]
            };
            for path in paths {
                let fd = libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
                if fd >= 0 {
                    fds[count] = fd;
                    count += 1;
                }
            }
            if count == paths.len() {
                status = 0;
            }
        }
        send(socket, status, &fds[..count], control);
        libc::_exit(0);
    }
}

/// One message: `status` and `fds` (async-signal-safe: `control` is preallocated).
unsafe fn send(socket: RawFd, status: u8, fds: &[RawFd], control: &mut [u8]) {
    let mut byte = status;
    let mut iov = libc::iovec {
        iov_base: (&mut byte as *mut u8).cast(),
        iov_len: 1,
    };
    // SAFETY: plain data, valid pointers for the call; the control buffer has room for
    // FDS descriptors.
    unsafe {
        let mut message: libc::msghdr = std::mem::zeroed();
        message.msg_iov = &mut iov;
        message.msg_iovlen = 1;
        if !fds.is_empty() {
            let bytes = std::mem::size_of_val(fds);
            message.msg_control = control.as_mut_ptr().cast();
            message.msg_controllen = libc::CMSG_SPACE(bytes as u32) as _;
            let header = libc::CMSG_FIRSTHDR(&message);
            (*header).cmsg_level = libc::SOL_SOCKET;
            (*header).cmsg_type = libc::SCM_RIGHTS;
            (*header).cmsg_len = libc::CMSG_LEN(bytes as u32) as _;
            std::ptr::copy_nonoverlapping(
                fds.as_ptr().cast::<u8>(),
                libc::CMSG_DATA(header),
                bytes,
            );
        }
        libc::sendmsg(socket, &message, libc::MSG_NOSIGNAL);
    }
}
