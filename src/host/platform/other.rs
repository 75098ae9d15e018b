//! Elsewhere than Linux: the honest absence of each mechanism, so that the rest of
//! `host/` builds and says what it cannot do. The sandbox's probe reports it unavailable
//! (`SANDBOX` is false) and the write bound's support is refused, so no plan or bound is
//! ever made here; were one handed in, installing it fails the spawn with a plain error
//! rather than running the child without it. No seccomp filter (the capabilities say
//! `unix_sockets: open`), no subreaper and no process table (a run's descendants are ended through its process
//! group alone: the marker sweep sees no process), no pidfds (so no `--warm`: every call
//! runs cold), and the server cannot make itself undumpable.
//!
//! The stubs name no type of the sandbox (they refuse whatever they are handed): the
//! sandbox's data names this seam, so the seam naming it back would be a cycle. A port
//! that builds a sandbox puts its mechanisms beside the sandbox's data, as Linux does
//! (`sandbox/enter.rs`), and re-exports them from its own file here.

use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};

use tokio::process::Command;

/// No namespaces, Landlock or seccomp: the read-only sandbox is unavailable here.
pub(crate) const SANDBOX: bool = false;

/// Why a sandbox or a write bound cannot be entered here.
fn unsupported(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::Unsupported, what)
}

/// The file name of conda's entry point, looked for on `PATH`.
pub(crate) const CONDA: &str = if cfg!(windows) { "conda.exe" } else { "conda" };

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

/// No mount namespaces: a write bound has no walls (no value exists).
#[derive(Debug)]
pub(crate) enum Walls {}

/// No Landlock: no ruleset scopes a call's signals and abstract unix sockets.
pub(crate) fn scope_ruleset() -> Option<OwnedFd> {
    None
}

/// No Landlock: a sandboxed call's writes are not ruled (there is no sandboxed call).
pub(crate) fn sandbox_rules_writes() -> bool {
    false
}

/// No read-only sandbox: the child is not started.
pub(crate) fn install_sandbox<Plan>(_command: &mut Command, _plan: &Plan) -> io::Result<()> {
    Err(unsupported(
        "the read-only sandbox needs Linux's namespaces",
    ))
}

/// No sandbox to build in a forked holder.
pub(crate) fn enter_forked<Plan>(
    _plan: &Plan,
    _parent: Option<BorrowedFd<'_>>,
) -> io::Result<Option<OwnedFd>> {
    Err(unsupported(
        "the read-only sandbox needs Linux's namespaces",
    ))
}

/// No namespaces to join: the zygote is not started.
pub(crate) fn install_joined<Plan, Joined>(
    _command: &mut Command,
    _plan: &Plan,
    _namespaces: Joined,
) -> io::Result<()> {
    Err(unsupported(
        "the read-only sandbox needs Linux's namespaces",
    ))
}

/// No Landlock: writes cannot be bounded (as on a Linux kernel without it).
pub(crate) fn write_bound_support() -> Result<i64, String> {
    Err("Landlock is Linux's".into())
}

/// No Landlock: no bound is made.
pub(crate) fn make_write_bound<Writable, Setup, Bound>(
    _abi: i64,
    _writable: &[Writable],
    _setup: Setup,
) -> io::Result<Bound> {
    Err(io::Error::other("Landlock is Linux's"))
}

/// No write bound: the server makes no new target (conda does).
pub(crate) fn make_new_target(_target: &std::path::Path) -> io::Result<Vec<std::path::PathBuf>> {
    Ok(Vec::new())
}

/// No write bound: no new target was made.
pub(crate) fn remove_unused_target(_target: &std::path::Path) {}

/// No Landlock: the child is not started.
pub(crate) fn install_write_bound<Bound>(_command: &mut Command, _bound: &Bound) -> io::Result<()> {
    Err(unsupported("the write bound needs Linux's Landlock"))
}

/// No child subreaper: orphans go to init.
pub(crate) fn set_child_subreaper() -> bool {
    false
}

/// No pidfds: a warm child cannot be held, so `--warm` runs every call cold.
pub(crate) fn pidfd_open(_pid: i32) -> io::Result<OwnedFd> {
    Err(io::ErrorKind::Unsupported.into())
}

/// Nothing to signal: no pidfd is ever opened.
pub(crate) fn pidfd_kill(_fd: &OwnedFd, _signal: rustix::process::Signal) {}

/// The total RAM is not asked here: 0, so the default memory limit is its 4 GiB cap.
pub(crate) fn total_ram() -> u64 {
    0
}

/// No `TIOCGPTPEER`: a port opens the peer by name (`ptsname`); until then a watched
/// run, whose stdout is a terminal, does not start.
pub(crate) fn pty_peer(_master: &OwnedFd, _flags: rustix::pty::OpenptFlags) -> io::Result<OwnedFd> {
    Err(unsupported(
        "no TIOCGPTPEER: the pseudo-terminal's peer is Linux's here",
    ))
}

/// No `pipe2` written here (the warm path, its only user, is off without pidfds).
pub(crate) fn pipe_cloexec() -> io::Result<(OwnedFd, OwnedFd)> {
    Err(unsupported("no pipe2 here"))
}

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

/// One live process as the process table shows it.
pub(crate) struct Process {
    pub(crate) pid: i32,
    pub(crate) parent: i32,
    pub(crate) zombie: bool,
}

/// No process table is read here (a port reads its own: `sysctl(KERN_PROC)`, the
/// toolhelp snapshot): no process is seen, so the marker sweep finds none.
pub(crate) fn processes() -> Vec<Process> {
    Vec::new()
}

/// Unknown without a process table.
pub(crate) fn parent_of(_pid: i32) -> Option<i32> {
    None
}

/// Unknown without a process table: taken to exist, so nothing of it is removed.
pub(crate) fn process_exists(_pid: u32) -> bool {
    true
}

/// Not readable here.
pub(crate) fn environ(_pid: i32) -> Option<Vec<u8>> {
    None
}

/// Which of a process's memory figures [`memory`] reads.
#[derive(Clone, Copy)]
pub(crate) enum Memory {
    PeakVirtual,
    Resident,
}

/// Not read here: the memory evidence of a run and the zygote's size are unknown.
pub(crate) fn memory(_pid: i32, _which: Memory) -> Option<u64> {
    None
}

/// No `PR_SET_DUMPABLE` here.
pub(crate) fn set_undumpable() -> bool {
    false
}

/// No `openat2` here: a path cannot be opened with the promise that no component is a
/// symlink, so it is not opened (the write bound that asks is unavailable here anyway).
pub(crate) fn open_strict(
    _path: &std::path::Path,
    _directory: bool,
) -> rustix::io::Result<OwnedFd> {
    Err(rustix::io::Errno::NOTSUP)
}

/// Unknown without a process table: no owner of a scratch directory can be told gone, so
/// none is removed.
pub(crate) fn start_time(_pid: u32) -> Option<u64> {
    None
}
