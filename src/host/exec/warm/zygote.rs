//! The zygote process: started under the target's interpreter with the flags of the
//! `conda` entry script's `#!` line, talking to the server over an inherited socket
//! (descriptor 3 in the zygote; no path anywhere), and the wire format of its requests.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::process::{Child, Command};

use super::super::reap;
use super::Unfit;
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
    /// Start a zygote for `entry` (the target `conda`) and wait until it has imported
    /// conda. Its environment is the server's less every `withheld` variable.
    pub(super) async fn start(
        entry: &Path,
        script: Option<&Script>,
        stamp: String,
        withheld: &[String],
    ) -> Result<Zygote, Unfit> {
        let started = Instant::now();
        let Script {
            interpreter,
            argument,
        } = script.ok_or(Unfit::NotAScript)?;
        let (ours, theirs) = std::os::unix::net::UnixStream::pair().map_err(|_| Unfit::Start)?;
        let theirs: OwnedFd = theirs.into();
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
        let fd = theirs.as_raw_fd();
        // SAFETY: dup2 and fcntl only, on a descriptor opened before the fork.
        unsafe {
            command.pre_exec(move || inherit_as_3(fd));
        }
        let mut child = {
            let mut registry = reap::registry();
            let child = command.spawn().map_err(|_| Unfit::Start)?;
            registry.extend(child.id().map(|p| p as i32));
            child
        };
        drop(theirs);
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
        };
        match tokio::time::timeout(READY_TIMEOUT, zygote.line()).await {
            Ok(Ok(line)) => zygote.preloaded = ready_counts(&line).ok_or(Unfit::NotReady)?,
            _ => return Err(Unfit::NotReady),
        }
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
    pub(super) async fn send(&mut self, fields: &[&[u8]], fds: &[RawFd]) -> std::io::Result<()> {
        let body = fields.join(&0u8);
        let length = u32::try_from(body.len()).map_err(|_| std::io::Error::other("too long"))?;
        send_with_fds(self.conn.as_raw_fd(), &length.to_be_bytes(), fds)?;
        self.conn.write_all(&body).await
    }

    /// Write a short message without waiting (the socket buffer always has room for it).
    pub(super) fn send_now(&self, bytes: &[u8]) {
        // SAFETY: a valid socket and buffer.
        unsafe {
            libc::send(
                self.conn.as_raw_fd(),
                bytes.as_ptr().cast(),
                bytes.len(),
                libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
            );
        }
    }

    /// The zygote's resident set size in bytes.
    pub(super) fn rss(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid)).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib * 1024)
    }

    /// Kill the zygote (its calls' children are not its to end: their executions are).
    pub(super) fn stop(mut self) {
        let _ = self.child.start_kill();
        let pid = self.pid as i32;
        tokio::spawn(async move {
            let _ = self.child.wait().await;
            reap::registry().remove(&pid);
        });
    }
}

/// The counts of a `ready PRELOADED REFUSED` line.
fn ready_counts(line: &str) -> Option<(u32, u32)> {
    let mut words = line.strip_prefix("ready ")?.split(' ');
    let preloaded = words.next()?.parse().ok()?;
    let refused = words.next()?.parse().ok()?;
    words.next().is_none().then_some((preloaded, refused))
}

/// Make `fd` descriptor 3 of the new process, inherited across exec.
fn inherit_as_3(fd: RawFd) -> std::io::Result<()> {
    // SAFETY: plain system calls on descriptors open in this process.
    unsafe {
        if fd == 3 {
            let flags = libc::fcntl(3, libc::F_GETFD);
            if flags < 0 || libc::fcntl(3, libc::F_SETFD, flags & !libc::FD_CLOEXEC) < 0 {
                return Err(std::io::Error::last_os_error());
            }
        } else if libc::dup2(fd, 3) < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// One `sendmsg` of `bytes` with `fds` as SCM_RIGHTS.
fn send_with_fds(socket: RawFd, bytes: &[u8], fds: &[RawFd]) -> std::io::Result<()> {
    let fd_bytes = std::mem::size_of_val(fds);
    // SAFETY: CMSG_SPACE is a pure computation.
    let space = unsafe { libc::CMSG_SPACE(fd_bytes as u32) } as usize;
    let mut control = vec![0u8; space];
    let mut iov = libc::iovec {
        iov_base: bytes.as_ptr() as *mut libc::c_void,
        iov_len: bytes.len(),
    };
    // SAFETY: msghdr is plain data; every pointer set below is valid for the call.
    let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
    message.msg_iov = &mut iov;
    message.msg_iovlen = 1;
    message.msg_control = control.as_mut_ptr().cast();
    message.msg_controllen = space as _;
    // SAFETY: the control buffer holds one header of CMSG_SPACE(fd_bytes) bytes.
    unsafe {
        let header = libc::CMSG_FIRSTHDR(&message);
        (*header).cmsg_level = libc::SOL_SOCKET;
        (*header).cmsg_type = libc::SCM_RIGHTS;
        (*header).cmsg_len = libc::CMSG_LEN(fd_bytes as u32) as _;
        std::ptr::copy_nonoverlapping(fds.as_ptr().cast::<u8>(), libc::CMSG_DATA(header), fd_bytes);
    }
    // SAFETY: a valid socket and message.
    let sent = unsafe { libc::sendmsg(socket, &message, libc::MSG_NOSIGNAL) };
    if sent == bytes.len() as isize {
        Ok(())
    } else if sent < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Err(std::io::Error::other("short write"))
    }
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
