//! Starting a child: the command line and environment, the child-side confinement hooks
//! (cgroup membership and rlimits first, then the sandbox), and the registration of the
//! leader before anything can reap it.

use std::process::Stdio;
use std::sync::Arc;

use tokio::process::{Child, Command};

use super::{Spec, limits, reap};
use crate::host::platform;

/// Why a process could not be started, in plain words (`std::io::ErrorKind`'s debug names,
/// such as `Uncategorized` for `ENOEXEC`, say nothing to an operator).
pub fn plain_os_error(error: &std::io::Error) -> String {
    if let Some(code) = error.raw_os_error() {
        let words = match code {
            libc::ENOENT => {
                Some("it does not exist, or the interpreter its #! line names does not exist")
            }
            libc::EACCES => Some(
                "permission denied: it is not executable, or a directory on its path (or its \
                 #! interpreter) is not accessible",
            ),
            libc::ENOEXEC => Some(
                "it is not a program this system can run (exec format error: not a binary for \
                 this machine, nor a script with a #! line)",
            ),
            libc::E2BIG => Some("its arguments and environment are too long"),
            libc::ETXTBSY => Some("it is being written by another process (text file busy)"),
            libc::ELOOP => Some("its path has too many symbolic links"),
            libc::ENOTDIR => Some("a component of its path is not a directory"),
            libc::EISDIR => Some("it is a directory"),
            libc::ENOMEM | libc::EAGAIN => Some("the system is out of memory or processes"),
            libc::EMFILE | libc::ENFILE => Some("too many open files"),
            // mount.rs `working_directory_walled`: the sandbox does not cover the directory.
            libc::EXDEV => Some(
                "its working directory lies on a mount the sandbox does not cover (a mount of \
                 another mount namespace)",
            ),
            _ => None,
        };
        if let Some(words) = words {
            return words.to_owned();
        }
    }
    // The system's own message, without Rust's "(os error N)" suffix.
    let text = error.to_string();
    match text.rfind(" (os error ") {
        Some(at) => text[..at].to_owned(),
        None => text,
    }
}

/// Register the child-side confinement: join the execution's cgroups, set the rlimits.
/// Everything was prepared before `fork`; the hook only makes async-signal-safe calls.
/// A call's child and the warm zygote are contained alike.
pub(super) fn contain(command: &mut Command, prepared: Arc<limits::Prepared>) {
    // SAFETY: the hook only calls write(2) and setrlimit(2) on data prepared before fork.
    unsafe {
        command.pre_exec(move || prepared.apply_in_child());
    }
}

/// Start `spec`'s program under its limits (what the child needs after `fork` is
/// prepared here, returned with the child); the child carries `marker`; its stdout is
/// `terminal` when given (a pseudo-terminal, see [`super::pty`]), else a pipe. On failure
/// the execution's cgroup is removed again.
pub(super) fn start(
    spec: &Spec,
    marker: &str,
    terminal: Option<std::os::fd::OwnedFd>,
) -> std::io::Result<(Child, Arc<limits::Prepared>)> {
    not_a_script_or_binary(&spec.program)?;
    let spec_uses_terminal = terminal.is_some();
    // Opened before anything needs undoing (the cgroup below).
    let own_dir = match &spec.cwd {
        Some(cwd) if spec.sandbox.is_some() || spec.write_bound.is_some() => {
            Some(crate::host::sandbox::open_own_directory(cwd)?)
        }
        _ => None,
    };
    let prepared = Arc::new(spec.limits.prepare());
    let mut command = Command::new(&spec.program);
    command
        .args(&spec.args)
        .stdin(if spec.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(terminal.map_or_else(Stdio::piped, Stdio::from))
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    command.process_group(0);
    if let Some(cwd) = &spec.cwd {
        enter(&mut command, cwd, own_dir);
    }
    for name in &spec.env_remove {
        command.env_remove(name);
    }
    for name in spec.limits.env_remove.iter() {
        command.env_remove(name);
    }
    // Nothing a child starts takes code from the working directory (`environ`).
    for (name, value) in super::environ::changes(|name| super::withheld(spec, name)) {
        match value {
            Some(value) => command.env(name, value),
            None => command.env_remove(name),
        };
    }
    command.env(reap::MARKER_VAR, marker);
    if spec_uses_terminal {
        // Nothing but conda's progress records is to change on a terminal.
        command.env("NO_COLOR", "1");
    }
    // Join the cgroup and set the limits first: the sandbox's namespaces come after.
    contain(&mut command, Arc::clone(&prepared));
    let spawned = confine(&mut command, spec).and_then(|()| {
        // Registered before anything can reap it: orphan reaping skips registered pids.
        let mut registry = reap::registry();
        let spawned = command.spawn();
        if let Some(pid) = spawned.as_ref().ok().and_then(|c| c.id()) {
            registry.insert(pid as i32);
        }
        spawned
    });
    match spawned {
        Ok(child) => Ok((child, prepared)),
        Err(error) => {
            if let Some(group) = &prepared.group {
                group.remove();
            }
            Err(error)
        }
    }
}

/// Give the child its working directory. A sandboxed or walled child enters `own_dir`,
/// the directory the server opened and found on a mount of its own namespace
/// ([`crate::host::sandbox::open_own_directory`]; `fchdir`, first of its hooks; the
/// namespace then moves it to its copy of that mount): by path, a symlink swapped after
/// the server's look (to `/proc/<pid>/root/…` of a process in another mount namespace,
/// whose mounts no sandbox of this one covers) led the child there (attacks 16 A16-1 and
/// 18 A18-1).
fn enter(command: &mut Command, cwd: &std::path::Path, own_dir: Option<std::os::fd::OwnedFd>) {
    let Some(dir) = own_dir else {
        command.current_dir(cwd);
        return;
    };
    // SAFETY: the hook only calls fchdir(2) on a descriptor opened before the fork.
    unsafe {
        command.pre_exec(move || rustix::process::fchdir(&dir).map_err(Into::into));
    }
}

/// The child's sandbox and write bound, through the platform seam (which refuses them,
/// and so the start, where they do not exist).
fn confine(command: &mut Command, spec: &Spec) -> std::io::Result<()> {
    if let Some(plan) = &spec.sandbox {
        platform::install_sandbox(command, plan)?;
    }
    if let Some(bound) = &spec.write_bound {
        platform::install_write_bound(command, bound)?;
    }
    Ok(())
}

/// A child with a `pre_exec` hook is started with `execvp`, which runs a file the kernel
/// refuses (`ENOEXEC`: no `#!`, no binary format) with `/bin/sh` instead. Refuse such a file
/// as the kernel does, so nothing that is not a program is ever run as a shell script.
fn not_a_script_or_binary(program: &std::path::Path) -> std::io::Result<()> {
    use std::io::Read;
    let mut head = [0u8; 4];
    let Ok(mut file) = std::fs::File::open(program) else {
        // Not readable (or not there): let the spawn say why.
        return Ok(());
    };
    let Ok(n) = file.read(&mut head) else {
        return Ok(());
    };
    let head = &head[..n];
    if head.starts_with(b"#!") || head == b"\x7fELF" || file.metadata().is_ok_and(|m| m.is_dir()) {
        return Ok(());
    }
    Err(std::io::Error::from_raw_os_error(libc::ENOEXEC))
}
