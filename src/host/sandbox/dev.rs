//! The call's own `/dev`: a tmpfs with the few device nodes conda, Python and the shells
//! of `conda run` use, bind-mounted from the host's, and nothing else; and no device
//! node anywhere else in the child's tree opens (`nodev` on every mount).
//!
//! Device nodes ignore read-only mounts and need only their mode: a root child (with no
//! capability) could attach `/dev/loop0` to a file of its own (the loop device outlived
//! the call) and write the kernel log (`/dev/kmsg`); `/dev/kvm`, `/dev/userfaultfd`,
//! `/dev/fuse` and the host's terminals opened for writing. The list, each with who
//! opens it:
//!
//! - `null`: `subprocess.DEVNULL` and `os.devnull` (Python's `subprocess.py`, `os.py`),
//!   conda's shell hooks (`conda/core/initialize.py` L1704, `2>/dev/null`), conda-completion's
//!   scripts (`conda_completion/shell/bash.py` L38), every activation script's redirections;
//! - `urandom`, `random`: `os.urandom`'s and OpenSSL's fallbacks when `getrandom` is
//!   unavailable (conda-package-streaming reads `/dev/urandom`, `create.py` L54);
//! - `zero`, `full`: the usual companions (`dd`, `mmap` of `/dev/zero` in old allocators);
//! - `tty`: kept so that a program asking for a terminal is told it has none: the child
//!   gives up the server's controlling terminal ([`detach_terminal`]), so it opens with
//!   `ENXIO` (`getpass` then falls back to standard input);
//! - `pts` (a new devpts instance, private to the call) and `ptmx` → `pts/ptmx`: Python's
//!   `pty.openpty`, a program that wants a terminal of its own; not the host's terminals;
//! - `shm`: where the call's tmpfs goes (POSIX shared memory, multiprocessing's semaphores);
//! - `fd` → `/proc/self/fd`, `stdin`, `stdout`, `stderr`: bash's process substitution and
//!   scripts that name `/dev/stdout`.
//!
//! Built in the forked child before `exec` (the warm holder builds it with the same code):
//! the nodes are cloned (`open_tree`) before `/` is remounted `nodev`, made read-only
//! (a root child, their owner, cannot `chmod` them) and moved onto empty files of the
//! new tmpfs. Only system calls; no allocation.

use std::ffi::CStr;

/// The host's nodes bind-mounted into the call's `/dev` (source and target alike).
const NODES: [&CStr; 6] = [
    c"/dev/null",
    c"/dev/zero",
    c"/dev/full",
    c"/dev/random",
    c"/dev/urandom",
    c"/dev/tty",
];

/// Symbolic links of the call's `/dev`: (target, link).
const LINKS: [(&CStr, &CStr); 5] = [
    (c"pts/ptmx", c"/dev/ptmx"),
    (c"/proc/self/fd", c"/dev/fd"),
    (c"/proc/self/fd/0", c"/dev/stdin"),
    (c"/proc/self/fd/1", c"/dev/stdout"),
    (c"/proc/self/fd/2", c"/dev/stderr"),
];

/// Clones of the host's nodes, taken before `/` goes `nodev` (a missing node: `None`).
pub(super) type Clones = [Option<rustix::fd::OwnedFd>; NODES.len()];

/// Clone the host's nodes (detached mounts, read-only). Only system calls.
pub(super) fn clone_nodes() -> Clones {
    use rustix::fs::CWD;
    use rustix::mount::{OpenTreeFlags, open_tree};
    let mut clones: Clones = [const { None }; NODES.len()];
    let flags = OpenTreeFlags::OPEN_TREE_CLONE
        | OpenTreeFlags::OPEN_TREE_CLOEXEC
        | OpenTreeFlags::AT_SYMLINK_NOFOLLOW;
    for (slot, node) in clones.iter_mut().zip(NODES) {
        *slot = open_tree(CWD, node, flags).ok().filter(|fd| {
            use std::os::fd::AsRawFd;
            super::mount::mount_setattr(
                fd.as_raw_fd(),
                c"",
                libc::AT_EMPTY_PATH,
                super::mount::MOUNT_ATTR_RDONLY,
                0,
            )
            .is_ok()
        });
    }
    clones
}

/// Cover `/dev` with the call's tmpfs and put `clones`, a private devpts, `shm` and the
/// links in it; then make the tmpfs read-only. Only system calls.
pub(super) fn build(clones: Clones) -> std::io::Result<()> {
    use rustix::fs::{CWD, Mode, OFlags, mkdir, open, symlink};
    use rustix::mount::{MountFlags, MoveMountFlags, mount, move_mount};
    let flags = MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC;
    mount(c"tmpfs", c"/dev", c"tmpfs", flags, c"mode=0755,size=64k")?;
    for (clone, node) in clones.into_iter().zip(NODES) {
        let Some(clone) = clone else { continue };
        let file = OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::CLOEXEC;
        drop(open(node, file, Mode::from_raw_mode(0o644))?);
        move_mount(
            &clone,
            c"",
            CWD,
            node,
            MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH,
        )?;
    }
    mkdir(c"/dev/pts", Mode::from_raw_mode(0o755))?;
    mkdir(c"/dev/shm", Mode::from_raw_mode(0o1777))?;
    // Best effort: without it, a program finds no pseudo-terminal to open.
    let _ = mount(
        c"devpts",
        c"/dev/pts",
        c"devpts",
        MountFlags::NOSUID | MountFlags::NOEXEC,
        c"newinstance,ptmxmode=0666,mode=0620",
    );
    for (target, link) in LINKS {
        symlink(target, link)?;
    }
    super::mount::mount_setattr(
        libc::AT_FDCWD,
        c"/dev",
        0,
        super::mount::MOUNT_ATTR_RDONLY,
        0,
    )
}

/// Give up the controlling terminal the child inherited (a server started from a
/// terminal, whose children keep its session): afterwards `/dev/tty` opens nothing
/// (`ENXIO`), so a sandboxed program can neither write the person's terminal nor push
/// input into it (`TIOCSTI`). Not a session leader, the child detaches itself alone.
/// Only system calls.
pub(super) fn detach_terminal() {
    use rustix::fs::{Mode, OFlags, open};
    use std::os::fd::AsRawFd;
    let flags = OFlags::RDWR | OFlags::NOCTTY | OFlags::CLOEXEC;
    if let Ok(fd) = open(c"/dev/tty", flags, Mode::empty()) {
        // SAFETY: an ioctl without argument on a descriptor this function owns.
        unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCNOTTY) };
    }
}
