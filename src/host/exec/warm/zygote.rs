//! The zygote process: started under the target's interpreter with the flags of the
//! `conda` entry script's `#!` line, inside the read-only sandbox (the namespaces of a
//! read-only call's plan, built by a holder and joined before `exec`, every privilege
//! given up, the call limits), talking to the server over an inherited socket
//! (descriptor 3 in the zygote; no path anywhere), and the wire format of its requests.

use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::process::{Child, Command};

use super::super::{Limits, limits, reap};
use super::{Unfit, rights};
use crate::host::platform;
use crate::host::sandbox::Plan;
use crate::host::target::Script;

/// The zygote's program, run with `python -c`: one program from the parts in `zygote/`, in
/// this order (`start.py`, whose path fix precedes every other import, first; `serve.py`,
/// which runs it, last).
const SCRIPT: &str = concat!(
    include_str!("zygote/start.py"),
    include_str!("zygote/watch.py"),
    include_str!("zygote/preload.py"),
    include_str!("zygote/sources.py"),
    include_str!("zygote/contain.py"),
    include_str!("zygote/child.py"),
    include_str!("zygote/wire.py"),
    include_str!("zygote/serve.py"),
);
/// How long the zygote may take to import conda.
const READY_TIMEOUT: Duration = Duration::from_secs(120);

/// A ready zygote.
pub(super) struct Zygote {
    child: Child,
    conn: UnixStream,
    /// Bytes read from `conn` after the last full line.
    pending: Vec<u8>,
    /// The target's stamp when the zygote started.
    pub(super) stamp: String,
    pub(super) started_in: Duration,
    pub(super) pid: u32,
    /// Modules imported ahead of any call beyond conda's CLI (admitted by the survey),
    /// and modules the survey refused.
    pub(super) preloaded: (u32, u32),
    /// Its answers may be out of step with the calls: replace it.
    pub(super) broken: bool,
    /// The zygote's user namespace: each call's sandbox is built inside it, so that the
    /// zygote's children (which hold no capability) may join it.
    pub(super) user_ns: OwnedFd,
    /// Its limits (its cgroup, removed once it is gone).
    prepared: Arc<limits::Prepared>,
}

/// A zygote being started: killed with everything in its cgroup when dropped before it
/// is ready (a start aborted at shutdown).
struct Starting(Option<Arc<limits::Prepared>>);

impl Drop for Starting {
    fn drop(&mut self) {
        if let Some(group) = self.0.as_ref().and_then(|p| p.group.as_ref()) {
            group.kill();
            group.remove();
        }
    }
}

/// The directory a cold run puts first on `sys.path`: the script's, after following
/// symbolic links to the script itself.
fn script_dir(entry: &Path) -> PathBuf {
    let mut path = entry.to_path_buf();
    for _ in 0..40 {
        match std::fs::read_link(&path) {
            Ok(target) if target.is_absolute() => path = target,
            Ok(target) => path = path.parent().unwrap_or(Path::new("/")).join(target),
            Err(_) => break,
        }
    }
    path.parent().unwrap_or(Path::new("/")).to_path_buf()
}

impl Zygote {
    /// Start a zygote for `entry` (the target `conda`) in the sandbox of `plan` (a
    /// read-only call's) under `limits`, and wait until it has imported conda. Its
    /// environment is a sandboxed cold child's: the server's less every withheld
    /// variable, with the sandbox's `TMPDIR`.
    pub(super) async fn start(
        entry: &Path,
        script: Option<&Script>,
        stamp: String,
        limits: &Limits,
        plan: &Plan,
    ) -> Result<Zygote, Unfit> {
        let started = Instant::now();
        let withheld = &limits.env_remove;
        let Script {
            interpreter,
            argument,
        } = script.ok_or(Unfit::NotAScript)?;
        let (joined, user_ns) = sandbox_of(plan)?;
        let prepared = Arc::new(limits.prepare());
        let (ours, theirs) = std::os::unix::net::UnixStream::pair().map_err(|_| Unfit::Start)?;
        let mut command = command(interpreter, argument.as_deref(), entry, withheld);
        let theirs: OwnedFd = theirs.into();
        // SAFETY: the hook makes two system calls (`dup2`, or `fcntl` when the socket is
        // descriptor 3 already) on a descriptor opened before the fork: no allocation,
        // no lock, as required between fork and exec.
        unsafe {
            command.pre_exec(move || inherit_as_3(&theirs));
        }
        // Its cgroup and rlimits, as a call's, then the sandbox.
        super::super::spawn::contain(&mut command, Arc::clone(&prepared));
        let spawned = platform::install_joined(&mut command, plan, joined).and_then(|()| {
            let mut registry = reap::registry();
            let child = command.spawn();
            if let Some(pid) = child.as_ref().ok().and_then(Child::id) {
                registry.insert(pid as i32);
            }
            child
        });
        let Ok(mut child) = spawned else {
            if let Some(group) = &prepared.group {
                group.remove();
            }
            return Err(Unfit::Start);
        };
        // The hook, and with it our copy of the zygote's end.
        drop(command);
        let pid = child.id().unwrap_or(0);
        if let Some(stderr) = child.stderr.take() {
            tokio::spawn(log_stderr(stderr));
        }
        ours.set_nonblocking(true).map_err(|_| Unfit::Start)?;
        let conn = UnixStream::from_std(ours).map_err(|_| Unfit::Start)?;
        let mut zygote = Zygote {
            child,
            conn,
            pending: Vec::new(),
            stamp,
            started_in: Duration::ZERO,
            pid,
            preloaded: (0, 0),
            broken: false,
            user_ns,
            prepared,
        };
        let mut starting = Starting(Some(Arc::clone(&zygote.prepared)));
        match tokio::time::timeout(READY_TIMEOUT, zygote.line()).await {
            Ok(Ok(line)) => zygote.preloaded = ready_counts(&line).ok_or(Unfit::NotReady)?,
            _ => return Err(Unfit::NotReady),
        }
        starting.0 = None;
        zygote.started_in = started.elapsed();
        Ok(zygote)
    }

    /// Whether the process is still running.
    pub(super) fn alive(&mut self) -> bool {
        !self.broken && matches!(self.child.try_wait(), Ok(None))
    }

    /// The next line the zygote wrote.
    pub(super) async fn line(&mut self) -> std::io::Result<String> {
        loop {
            if let Some(at) = self.pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.pending.drain(..=at).collect();
                return Ok(String::from_utf8_lossy(&line[..at]).into_owned());
            }
            let mut chunk = [0u8; 256];
            let n = self.conn.read(&mut chunk).await?;
            if n == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            self.pending.extend_from_slice(&chunk[..n]);
        }
    }

    /// Send one request: its fields NUL-separated, `fds` attached to the first bytes.
    pub(super) async fn send(
        &mut self,
        fields: &[&[u8]],
        fds: &[BorrowedFd<'_>],
    ) -> std::io::Result<()> {
        let body = fields.join(&0u8);
        let length = u32::try_from(body.len()).map_err(|_| std::io::Error::other("too long"))?;
        let head = length.to_be_bytes();
        let mut control = vec![MaybeUninit::uninit(); rights::space(fds.len())];
        if rights::send(self.conn.as_fd(), &head, fds, &mut control)? != head.len() {
            return Err(std::io::Error::other("short write"));
        }
        self.conn.write_all(&body).await
    }

    /// Write a short message without waiting (the socket buffer always has room for it).
    pub(super) fn send_now(&self, bytes: &[u8]) {
        use rustix::net::SendFlags;
        let _ = rustix::net::send(&self.conn, bytes, SendFlags::NOSIGNAL | SendFlags::DONTWAIT);
    }

    /// The zygote's resident set size in bytes.
    pub(super) fn rss(&self) -> Option<u64> {
        crate::host::platform::memory(self.pid as i32, crate::host::platform::Memory::Resident)
    }

    /// Kill the zygote (its calls' children are not its to end: their executions are).
    pub(super) fn stop(mut self) {
        let _ = self.child.start_kill();
        let pid = self.pid as i32;
        tokio::spawn(async move {
            let _ = self.child.wait().await;
            reap::registry().remove(&pid);
            if let Some(group) = &self.prepared.group {
                group.remove();
            }
        });
    }
}

/// The zygote's sandbox: a read-only call's namespaces, built by a holder, and a copy of
/// its user namespace's descriptor (each call's is made inside it). Only with a user
/// namespace of its own.
fn sandbox_of(plan: &Plan) -> Result<(crate::host::sandbox::Joined, OwnedFd), Unfit> {
    let built = super::holder::build(plan, None).map_err(|_| Unfit::Sandbox)?;
    let user = built.user.ok_or(Unfit::Sandbox)?;
    let kept = user.try_clone().map_err(|_| Unfit::Sandbox)?;
    let joined = crate::host::sandbox::Joined {
        user,
        mount: built.mount,
        ipc: built.ipc,
    };
    Ok((joined, kept))
}

/// The zygote's command: `interpreter [argument] -c SCRIPT entry <sys.path[0]>` in `/`,
/// with the environment of a cold child less the `withheld` variables and the marker.
fn command(
    interpreter: &Path,
    argument: Option<&std::ffi::OsStr>,
    entry: &Path,
    withheld: &[String],
) -> Command {
    let mut command = Command::new(interpreter);
    if let Some(argument) = argument {
        command.arg(argument);
    }
    command
        .arg("-c")
        .arg(SCRIPT)
        .arg(entry)
        .arg(script_dir(entry))
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .process_group(0);
    for name in withheld.iter() {
        command.env_remove(name);
    }
    command.env_remove(reap::MARKER_VAR);
    // As every child: its interpreter (and so each warm child's `sys.flags` and
    // `sys.path`) takes nothing from a working directory or the user site.
    for (name, value) in super::super::environ::changes(|n| withheld.iter().any(|w| w == n)) {
        match value {
            Some(value) => command.env(name, value),
            None => command.env_remove(name),
        };
    }
    command
}

/// The counts of a `ready PRELOADED REFUSED` line.
fn ready_counts(line: &str) -> Option<(u32, u32)> {
    let mut words = line.strip_prefix("ready ")?.split(' ');
    let preloaded = words.next()?.parse().ok()?;
    let refused = words.next()?.parse().ok()?;
    words.next().is_none().then_some((preloaded, refused))
}

/// Make `fd` descriptor 3 of the new process, inherited across exec (between fork and
/// exec: system calls only).
fn inherit_as_3(fd: &OwnedFd) -> std::io::Result<()> {
    if fd.as_raw_fd() == 3 {
        return Ok(rustix::io::fcntl_setfd(fd, rustix::io::FdFlags::empty())?);
    }
    // SAFETY: dup2 takes two integers and replaces descriptor 3 of this forked process
    // atomically; no Rust value in it owns descriptor 3 (rustix's `dup2` would need one).
    if unsafe { libc::dup2(fd.as_raw_fd(), 3) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The zygote's stderr (its own failures, never a call's output) goes to the log.
async fn log_stderr(stderr: tokio::process::ChildStderr) {
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::debug!(line = %line.chars().take(200).collect::<String>(), "warm zygote");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn script(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn only_a_whole_ready_line_is_ready() {
        assert_eq!(ready_counts("ready 12 3"), Some((12, 3)));
        for bad in [
            "ready",
            "ready 1",
            "ready 1 2 3",
            "ready x 2",
            "pid 4",
            "stale",
        ] {
            assert_eq!(ready_counts(bad), None, "{bad}");
        }
    }

    #[test]
    fn sys_path_0_is_the_directory_of_the_script_behind_its_links() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("real/bin")).unwrap();
        let target = script(&dir.path().join("real/bin"), "conda", "#!/x/python\n");
        let link = dir.path().join("conda");
        std::os::unix::fs::symlink("real/bin/conda", &link).unwrap();
        assert_eq!(script_dir(&link), dir.path().join("real/bin"));
        assert_eq!(script_dir(&target), dir.path().join("real/bin"));
    }
}
