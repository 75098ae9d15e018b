//! Landlock scoping: a sandboxed call may signal, and connect to abstract unix sockets
//! of, only processes of its own call.
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
//! Hand-written (three system calls, a struct of three integers): the restriction must
//! be a raw system call in the forked child, which no Landlock crate offers.

use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// `struct landlock_ruleset_attr` (include/uapi/linux/landlock.h).
#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
    scoped: u64,
}

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
    // descriptor (close-on-exec) or -1.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            attr as *const T,
            std::mem::size_of::<T>(),
            0u32,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a descriptor the kernel just made, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
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
