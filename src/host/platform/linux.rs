//! The Linux side of the seam: the mechanisms themselves, re-exported from the Linux
//! rooms where they live (beside the data they serve, so that `super::` reaches it) or
//! (the small ones) written here. Nothing here names a module that names the seam: the
//! house test finds no cycle through it.

use std::os::fd::OwnedFd;

use rustix::process::{Pid, PidfdFlags, Signal};

pub(crate) use crate::host::sandbox::bound::landlock::{
    install as install_write_bound, make as make_write_bound, make_new_target,
    remove_unused_target, support as write_bound_support,
};
pub(crate) use crate::host::sandbox::enter::{
    enter_forked, install as install_sandbox, install_joined,
};
pub(crate) use crate::host::sandbox::scope::{
    rules_writes as sandbox_rules_writes, ruleset as scope_ruleset,
};
pub(crate) use crate::host::sandbox::seccomp::Filter as SeccompFilter;
pub(crate) use crate::host::sandbox::walls::Walls;

/// The read-only sandbox can be built here (namespaces, Landlock, seccomp); the startup
/// probe still tries it.
pub(crate) const SANDBOX: bool = true;

/// The file name of conda's entry point, looked for on `PATH`.
pub(crate) const CONDA: &str = "conda";

/// Make this process a child subreaper (`prctl(PR_SET_CHILD_SUBREAPER)`): orphaned
/// descendants become its children. Returns whether it worked.
pub(crate) fn set_child_subreaper() -> bool {
    // Any pid sets the flag; `None` would clear it.
    rustix::process::set_child_subreaper(Some(Pid::INIT)).is_ok()
}

/// A pidfd for `pid` (a positive pid; anything else is `EINVAL`): a process signalled
/// through it is never another process that reused its pid.
pub(crate) fn pidfd_open(pid: i32) -> std::io::Result<OwnedFd> {
    let pid = Pid::from_raw(pid.max(0)).ok_or(rustix::io::Errno::INVAL)?;
    Ok(rustix::process::pidfd_open(pid, PidfdFlags::empty())?)
}

/// Send `signal` to the process of `fd` (errors, such as ESRCH once it is gone, ignored).
pub(crate) fn pidfd_kill(fd: &OwnedFd, signal: Signal) {
    let _ = rustix::process::pidfd_send_signal(fd, signal);
}

/// The total RAM in bytes (`sysinfo(2)`).
pub(crate) fn total_ram() -> u64 {
    let info = rustix::system::sysinfo();
    (info.totalram as u64).saturating_mul(u64::from(info.mem_unit.max(1)))
}

/// The terminal side of the pseudo-terminal `master` (`TIOCGPTPEER`: the very peer, not
/// whatever a path names by then).
pub(crate) fn pty_peer(
    master: &OwnedFd,
    flags: rustix::pty::OpenptFlags,
) -> std::io::Result<OwnedFd> {
    Ok(rustix::pty::ioctl_tiocgptpeer(master, flags)?)
}

/// A close-on-exec pipe made in one call (`pipe2`): (read end, write end).
pub(crate) fn pipe_cloexec() -> std::io::Result<(OwnedFd, OwnedFd)> {
    Ok(rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?)
}

/// A child's exit code, or minus the signal that ended it.
pub(crate) fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|s| -s))
        .unwrap_or(-1)
}

/// One live process as the process table shows it.
pub(crate) struct Process {
    pub(crate) pid: i32,
    pub(crate) parent: i32,
    /// Ended, not yet waited for (state `Z`).
    pub(crate) zombie: bool,
}

/// Every live process, from `/proc/<pid>/stat` (a process gone while it is read is left
/// out).
pub(crate) fn processes() -> Vec<Process> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| {
            let (state, parent) = stat(pid)?;
            Some(Process {
                pid,
                parent,
                zombie: state == 'Z',
            })
        })
        .collect()
}

/// A process's state and parent pid (`/proc/<pid>/stat`, after the command's closing
/// parenthesis: a command may hold spaces and parentheses).
fn stat(pid: i32) -> Option<(char, i32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.rsplit_once(')')?.1;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    Some((state, fields.next()?.parse().ok()?))
}

/// The parent pid of a live process.
pub(crate) fn parent_of(pid: i32) -> Option<i32> {
    stat(pid).map(|(_, parent)| parent)
}

/// Whether a process with this pid exists (a zombie too).
pub(crate) fn process_exists(pid: u32) -> bool {
    std::path::Path::new("/proc").join(pid.to_string()).exists()
}

/// A process's environment block (`NAME=value` entries separated by NUL), when this
/// process may read it.
pub(crate) fn environ(pid: i32) -> Option<Vec<u8>> {
    std::fs::read(format!("/proc/{pid}/environ")).ok()
}

/// Which of a process's memory figures [`memory`] reads.
#[derive(Clone, Copy)]
pub(crate) enum Memory {
    /// The peak address space (`VmPeak`).
    PeakVirtual,
    /// The resident set (`VmRSS`).
    Resident,
}

/// A live process's memory figure in bytes (`/proc/<pid>/status`); `None` once it is gone.
pub(crate) fn memory(pid: i32, which: Memory) -> Option<u64> {
    let key = match which {
        Memory::PeakVirtual => "VmPeak:",
        Memory::Resident => "VmRSS:",
    };
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with(key))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Make this process undumpable (`PR_SET_DUMPABLE` 0): processes of the same user cannot
/// read its `/proc/<pid>/environ`, `cmdline` or memory. Returns whether it worked.
pub(crate) fn set_undumpable() -> bool {
    use rustix::process::{DumpableBehavior, set_dumpable_behavior};
    set_dumpable_behavior(DumpableBehavior::NotDumpable).is_ok()
}

/// `path` opened following no symlink in any component (`openat2` `RESOLVE_NO_SYMLINKS`,
/// no magic links either): as a directory to read when `directory`, else as a bare
/// handle (`O_PATH`) whatever it names.
pub(crate) fn open_strict(path: &std::path::Path, directory: bool) -> rustix::io::Result<OwnedFd> {
    use rustix::fs::{CWD, Mode, OFlags, ResolveFlags, openat2};
    let how = if directory {
        OFlags::RDONLY | OFlags::DIRECTORY
    } else {
        OFlags::PATH
    };
    openat2(
        CWD,
        path,
        how | OFlags::CLOEXEC | OFlags::NOFOLLOW,
        Mode::empty(),
        ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
    )
}

/// A process's start time in clock ticks since boot (`/proc/<pid>/stat` field 22): with
/// the pid, it names one process, not another that reused its pid. `None` when it is not
/// running.
pub(crate) fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold anything: count after
    // its last `)`, where field 3 is the first.
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(22 - 3)?.parse().ok()
}
