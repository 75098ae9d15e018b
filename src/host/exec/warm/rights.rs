//! Descriptors passed over a unix socket (`SCM_RIGHTS`), written once for the warm path:
//! the zygote's requests (stdio, namespaces, Landlock and seccomp descriptors,
//! `cgroup.procs`) and the sandbox holder's answer (its namespaces). rustix's `sendmsg`
//! and `recvmsg` build the control messages; sending allocates nothing and makes one
//! system call, so the holder's forked child may send.

use std::mem::MaybeUninit;
use std::os::fd::{BorrowedFd, OwnedFd};

use rustix::io::Errno;
use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags, recvmsg, sendmsg,
};

/// The control buffer's size for `fds` descriptors in one message.
pub(super) const fn space(fds: usize) -> usize {
    rustix::cmsg_space!(ScmRights(fds))
}

/// Send `bytes` with `fds` attached (none: no control message) in one `sendmsg`
/// (`MSG_NOSIGNAL`), `control` holding at least [`space`]`(fds.len())` bytes. Returns the
/// bytes sent. No allocation (async-signal-safe): a full `control` is `ENOBUFS`.
pub(super) fn send(
    socket: BorrowedFd<'_>,
    bytes: &[u8],
    fds: &[BorrowedFd<'_>],
    control: &mut [MaybeUninit<u8>],
) -> rustix::io::Result<usize> {
    let mut buffer = SendAncillaryBuffer::new(control);
    if !fds.is_empty() && !buffer.push(SendAncillaryMessage::ScmRights(fds)) {
        return Err(Errno::NOBUFS);
    }
    sendmsg(
        socket,
        &[std::io::IoSlice::new(bytes)],
        &mut buffer,
        SendFlags::NOSIGNAL,
    )
}

/// Receive one message into `bytes` with at most `max_fds` descriptors (close-on-exec):
/// the byte count and every descriptor that came with it.
pub(super) fn receive(
    socket: BorrowedFd<'_>,
    bytes: &mut [u8],
    max_fds: usize,
) -> rustix::io::Result<(usize, Vec<OwnedFd>)> {
    let mut control = vec![MaybeUninit::uninit(); space(max_fds)];
    let mut buffer = RecvAncillaryBuffer::new(&mut control);
    let received = recvmsg(
        socket,
        &mut [std::io::IoSliceMut::new(bytes)],
        &mut buffer,
        RecvFlags::CMSG_CLOEXEC,
    )?;
    let mut fds = Vec::new();
    for message in buffer.drain() {
        if let RecvAncillaryMessage::ScmRights(rights) = message {
            fds.extend(rights);
        }
    }
    Ok((received.bytes, fds))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn descriptors_arrive_with_their_bytes() {
        use rustix::net::{AddressFamily, SocketFlags, SocketType, socketpair};
        let (a, b) = socketpair(
            AddressFamily::UNIX,
            SocketType::DGRAM,
            SocketFlags::CLOEXEC,
            None,
        )
        .unwrap();
        let (read, write) = rustix::pipe::pipe().unwrap();
        let mut control = [MaybeUninit::uninit(); space(2)];
        let sent = send(
            a.as_fd(),
            b"xy",
            &[read.as_fd(), write.as_fd()],
            &mut control,
        );
        assert_eq!(sent, Ok(2));
        let mut bytes = [0u8; 4];
        let (n, fds) = receive(b.as_fd(), &mut bytes, 2).unwrap();
        assert_eq!((n, &bytes[..2], fds.len()), (2, &b"xy"[..], 2));
        // The received pair is the same pipe: what goes in one end comes out the other.
        assert_eq!(rustix::io::write(&fds[1], b"z"), Ok(1));
        let mut out = [0u8; 1];
        assert_eq!(rustix::io::read(&read, &mut out), Ok(1));
        assert_eq!(&out, b"z");
        // Close-on-exec, as the receiver asked.
        let flags = rustix::io::fcntl_getfd(&fds[0]).unwrap();
        assert!(flags.contains(rustix::io::FdFlags::CLOEXEC));
        // No descriptors: a plain message.
        assert_eq!(send(a.as_fd(), b"q", &[], &mut []), Ok(1));
        let (n, fds) = receive(b.as_fd(), &mut bytes, 2).unwrap();
        assert_eq!((n, fds.len()), (1, 0));
        // Too small a buffer is refused before anything is sent.
        let mut small = [MaybeUninit::uninit(); 8];
        assert_eq!(
            send(a.as_fd(), b"x", &[read.as_fd()], &mut small),
            Err(Errno::NOBUFS)
        );
    }
}
