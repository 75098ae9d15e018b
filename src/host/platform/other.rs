//! Elsewhere than Linux: the honest absence of each mechanism, so that the rest of
//! `host/` builds and says what it cannot do (no seccomp filter, no subreaper, no pidfds
//! and so no `--warm`). The sandbox's probe reports it unavailable.

use std::os::fd::{BorrowedFd, OwnedFd};

/// No seccomp here: the filter is never built (`new` is `None`), so no value exists.
#[derive(Debug)]
pub(crate) enum SeccompFilter {}

impl SeccompFilter {
    /// Always `None`: there is no filter to build.
    pub(crate) fn new() -> Option<SeccompFilter> {
        None
    }

    /// Unreachable: no `SeccompFilter` exists.
    pub(crate) fn memfd(&self) -> BorrowedFd<'_> {
        match *self {}
    }
}

/// No Landlock: no ruleset scopes a call's signals and abstract unix sockets.
pub(crate) fn scope_ruleset() -> Option<OwnedFd> {
    None
}

/// No child subreaper: orphans go to init; the marker sweep still ends those it sees.
pub(crate) fn set_child_subreaper() -> bool {
    false
}

/// No pidfds: a warm child cannot be held, so `--warm` runs every call cold.
pub(crate) fn pidfd_open(_pid: i32) -> std::io::Result<OwnedFd> {
    Err(std::io::ErrorKind::Unsupported.into())
}

/// Nothing to signal: no pidfd is ever opened.
pub(crate) fn pidfd_kill(_fd: &OwnedFd, _signal: rustix::process::Signal) {}

/// A child's exit code, or minus the signal that ended it where there are signals.
#[cfg(unix)]
pub(crate) fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|s| -s))
        .unwrap_or(-1)
}

/// A child's exit code.
#[cfg(not(unix))]
pub(crate) fn exit_code(status: std::process::ExitStatus) -> i32 {
    status.code().unwrap_or(-1)
}
