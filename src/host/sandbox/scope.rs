//! Landlock scoping: a sandboxed call may signal, and connect to abstract unix sockets
//! of, only processes of its own call; and it opens for writing only files of its own
//! mounts.
//!
//! Permission to signal goes by user id, so a sandboxed child (root, or the server's
//! user) could signal the server, its zygote, another call and every other process of
//! that user. A Landlock domain with `LANDLOCK_SCOPE_SIGNAL` and
//! `LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET` (Landlock ABI 6, Linux 6.12) confines both to
//! processes in the same domain or one nested in it: each child calls
//! `landlock_restrict_self` once, which makes a domain of its own (every call of the
//! same ruleset makes a new one), so two calls are in sibling domains and the server,
//! outside any, is out of reach. The ruleset handles no file-system or network access:
//! it restricts nothing else. Landlock also refuses `ptrace` from a domain to a process
//! outside it, a second wall behind the per-call user namespace.
//!
//! The ruleset is made once in the server (`ruleset`); the child restricts itself with
//! one system call between `fork` and `exec` (`restrict`), after `no_new_privs`.
//!
//! A sandboxed call's own ruleset ([`call_ruleset`], made in the child before its mounts,
//! Landlock ABI 1) also handles opening a file for writing, granted beneath each writable
//! mount of the call as it is made ([`grant`]: its tmpfs, `/dev`, the copy-on-write
//! overlays, the tmpfs of a union's new entries, the registry copies, the call's
//! POSIX message queues): every other mount
//! of the child's tree is read-only, where a regular file does not open for writing
//! anyway (`EROFS`) and a device node does not open at all (`nodev`), but a FIFO does.
//! A host service's FIFO (`/run/initctl`) was written from a read-only call (attack 16
//! A16-3); now it does not open (`EACCES`). A FIFO seen through an overlay is the
//! overlay's own, which no host process reads.
//!
//! Hand-written (four system calls, structs of integers): the restriction must be a raw
//! system call in the forked child, which no Landlock crate offers.

use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// `struct landlock_ruleset_attr` (include/uapi/linux/landlock.h).
#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
    scoped: u64,
}

/// `struct landlock_path_beneath_attr` (packed).
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// `LANDLOCK_RULE_PATH_BENEATH`.
const RULE_PATH_BENEATH: u32 = 1;

/// `LANDLOCK_ACCESS_FS_WRITE_FILE` (ABI 1): open a file for writing.
pub(super) const WRITE_FILE: u64 = 1 << 1;

/// `LANDLOCK_CREATE_RULESET_VERSION`: ask for the ABI version.
const CREATE_RULESET_VERSION: u32 = 1;
/// `LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET` (ABI 6).
const SCOPE_ABSTRACT_UNIX_SOCKET: u64 = 1 << 0;
/// `LANDLOCK_SCOPE_SIGNAL` (ABI 6).
const SCOPE_SIGNAL: u64 = 1 << 1;
/// The first ABI with both scopes.
const SCOPES_ABI: i64 = 6;

/// The kernel's Landlock ABI version (0: none, or disabled at boot).
pub(super) fn abi() -> i64 {
    // SAFETY: with a null attribute, size 0 and the version flag the call reads nothing.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<RulesetAttr>(),
            0usize,
            CREATE_RULESET_VERSION,
        )
    };
    abi.max(0)
}

/// The ruleset that scopes signals and abstract unix sockets, when the kernel has both
/// scopes (`None` otherwise).
pub(crate) fn ruleset() -> Option<OwnedFd> {
    if abi() < SCOPES_ABI || unscoped_for_tests() {
        return None;
    }
    let attr = RulesetAttr {
        handled_access_fs: 0,
        handled_access_net: 0,
        scoped: SCOPE_SIGNAL | SCOPE_ABSTRACT_UNIX_SOCKET,
    };
    create(&attr).ok()
}

/// Whether a sandboxed call's ruleset can rule which files it opens for writing (the
/// kernel has Landlock).
pub(crate) fn rules_writes() -> bool {
    abi() >= 1
}

/// A sandboxed call's own ruleset, made in the child before its mounts (only system
/// calls): opening a file for writing handled when `writes` (granted by [`grant`]), the
/// signal and abstract-socket scopes when `scoped`; `None` when it would handle nothing.
pub(super) fn call_ruleset(writes: bool, scoped: bool) -> std::io::Result<Option<OwnedFd>> {
    if !writes && !scoped {
        return Ok(None);
    }
    // Kernels before ABI 6 take the larger attribute as long as what they do not know
    // is zero.
    let attr = RulesetAttr {
        handled_access_fs: if writes { WRITE_FILE } else { 0 },
        handled_access_net: 0,
        scoped: if scoped {
            SCOPE_SIGNAL | SCOPE_ABSTRACT_UNIX_SOCKET
        } else {
            0
        },
    };
    create(&attr).map(Some)
}

/// Grant opening files for writing beneath `place` (a mount root of the call's, or a
/// file) in `rules`, a ruleset of [`call_ruleset`] (none: nothing to do). Only a system
/// call.
pub(super) fn grant(rules: Option<BorrowedFd<'_>>, place: BorrowedFd<'_>) -> std::io::Result<()> {
    match rules {
        Some(rules) => add_rule(rules, place, WRITE_FILE),
        None => Ok(()),
    }
}

/// One path-beneath rule: `allowed` beneath `place` (a directory, or a file for the
/// accesses that apply to one). Only a system call.
pub(super) fn add_rule(
    ruleset: BorrowedFd<'_>,
    place: BorrowedFd<'_>,
    allowed: u64,
) -> std::io::Result<()> {
    let attr = PathBeneathAttr {
        allowed_access: allowed,
        parent_fd: place.as_raw_fd(),
    };
    // SAFETY: valid descriptors and a valid attribute of the rule type given.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset.as_raw_fd(),
            RULE_PATH_BENEATH,
            &attr as *const PathBeneathAttr,
            0u32,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The scopes a ruleset of this kernel can carry: signals and abstract unix sockets
/// where it has both (ABI 6), else none. The write bound's ruleset carries them too.
pub(super) fn scopes() -> u64 {
    if abi() < SCOPES_ABI || unscoped_for_tests() {
        return 0;
    }
    SCOPE_SIGNAL | SCOPE_ABSTRACT_UNIX_SOCKET
}

/// A new ruleset from `attr`: `struct landlock_ruleset_attr` or a `#[repr(C)]` prefix of
/// it without padding (the size given tells the kernel which fields it holds).
pub(super) fn create<T>(attr: &T) -> std::io::Result<OwnedFd> {
    // SAFETY: a valid reference, read by the kernel for the size given; it returns a new
    // descriptor (close-on-exec), owned by nobody else, or -1.
    unsafe {
        let fd = libc::syscall(
            libc::SYS_landlock_create_ruleset,
            attr as *const T,
            std::mem::size_of::<T>(),
            0u32,
        );
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(OwnedFd::from_raw_fd(fd as i32))
    }
}

/// Debug builds only: `CCM_TEST_NO_SIGNAL_SCOPE=1` makes the server behave as on a kernel
/// without Landlock scoping, so that tests prove what the per-call user and IPC
/// namespaces hold alone. Release builds ignore the variable.
fn unscoped_for_tests() -> bool {
    cfg!(debug_assertions) && std::env::var_os("CCM_TEST_NO_SIGNAL_SCOPE").is_some_and(|v| v == "1")
}

/// Put the calling process (and everything it starts) in a new domain of `ruleset`.
/// Needs `no_new_privs`. Only a system call (async-signal-safe).
pub(super) fn restrict(ruleset: BorrowedFd<'_>) -> std::io::Result<()> {
    // SAFETY: a valid ruleset descriptor and no flags.
    let rc = unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset.as_raw_fd(), 0u32) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}
