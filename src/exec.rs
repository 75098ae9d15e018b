//! Every child process the server starts: helper runs and conda tool runs alike.
//!
//! One code path enforces every limit: argv only (never a shell), the child in its own
//! process group, bounded stdin, per-stream byte caps on retained output (the rest is
//! drained), and a hard wall-clock deadline. At the deadline, or on cancellation, the group
//! gets SIGTERM, a grace period, then SIGKILL, and the leader is reaped; output readers are
//! given a short, bounded time to finish, so a descendant that escaped the group and still
//! holds the pipes cannot hold the call (or the execution queue) past its deadline.
//!
//! Built on `tokio::process` rather than duct: calls must be cancellable from async code,
//! both streams need byte-capped capture with draining, and the deadline must not depend on
//! pipe EOF. Using one executor for helper runs too means every limit is implemented once.
//!
//! [`Executor`] serializes conda executions in FIFO order and bounds the queue.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;
use tokio_util::sync::CancellationToken;

/// Time between SIGTERM and SIGKILL.
pub const TERMINATION_GRACE: Duration = Duration::from_secs(2);
/// How long output readers may still run once the process group is gone.
const READER_GRACE: Duration = Duration::from_millis(250);
/// How long to keep draining after a normal exit (only processes that escaped the
/// group can still hold the pipes by then).
const DRAIN_AFTER_EXIT: Duration = Duration::from_secs(1);
const CHUNK: usize = 64 * 1024;

/// What to run and within which bounds.
#[derive(Clone, Debug)]
pub struct Spec {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    /// Working directory; the server's own when `None`.
    pub cwd: Option<PathBuf>,
    /// Bytes for stdin; `/dev/null` when `None`.
    pub stdin: Option<Vec<u8>>,
    pub timeout: Duration,
    pub stdout_limit: usize,
    pub stderr_limit: usize,
    /// Environment variables removed from the inherited environment.
    pub env_remove: Vec<&'static str>,
    /// Run the child in this read-only sandbox ([`crate::sandbox`]).
    pub sandbox: Option<crate::sandbox::Plan>,
}

/// Most bytes a tool run's argv plus environment may take (each string with its NUL, as
/// the kernel counts them): well below Linux's `ARG_MAX` (2 MiB with the default stack),
/// so a run that passes this check cannot fail to start for its size.
pub const MAX_COMMAND_BYTES: usize = 512 * 1024;
/// Most bytes of one argument (the kernel's `MAX_ARG_STRLEN` is 128 KiB with its NUL).
pub const MAX_ARG_BYTES: usize = 128 * 1024 - 1;

/// Why a command would be too large to start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TooLarge {
    /// One argument is longer than [`MAX_ARG_BYTES`].
    Argument,
    /// argv plus environment exceed [`MAX_COMMAND_BYTES`] (the total).
    Total(usize),
}

/// Check a command's size before anything spawns: argv (program included) plus the
/// environment the child inherits (minus `env_remove`).
pub fn check_size(spec: &Spec) -> Result<(), TooLarge> {
    use std::os::unix::ffi::OsStrExt;
    if spec.args.iter().any(|a| a.len() > MAX_ARG_BYTES) {
        return Err(TooLarge::Argument);
    }
    let argv: usize =
        spec.program.as_os_str().len() + 1 + spec.args.iter().map(|a| a.len() + 1).sum::<usize>();
    let env: usize = std::env::vars_os()
        .filter(|(k, _)| !spec.env_remove.iter().any(|r| k.as_bytes() == r.as_bytes()))
        .map(|(k, v)| k.len() + v.len() + 2)
        .sum();
    let total = argv + env;
    if total > MAX_COMMAND_BYTES {
        Err(TooLarge::Total(total))
    } else {
        Ok(())
    }
}

/// How a run ended.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Exit status; negative signal number when killed by a signal; `None` after a
    /// timeout or cancellation.
    pub exit_code: Option<i32>,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    pub timed_out: bool,
    pub cancelled: bool,
    pub duration: Duration,
}

/// Why a process could not be started, in plain words (`std::io::ErrorKind`'s debug names,
/// such as `Uncategorized` for `ENOEXEC`, say nothing to an operator).
pub fn plain_os_error(error: &std::io::Error) -> String {
    #[cfg(unix)]
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

/// Run a child to completion, timeout or cancellation.
///
/// Only a failure to start the process is an error; everything after that is an
/// [`Outcome`].
pub async fn run(spec: &Spec, cancel: &CancellationToken) -> std::io::Result<Outcome> {
    let started = Instant::now();
    let deadline = tokio::time::Instant::now() + spec.timeout;
    let mut command = Command::new(&spec.program);
    command
        .args(&spec.args)
        .stdin(if spec.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    #[cfg(unix)]
    command.process_group(0);
    if let Some(cwd) = &spec.cwd {
        command.current_dir(cwd);
    }
    for name in &spec.env_remove {
        command.env_remove(name);
    }
    if let Some(plan) = &spec.sandbox {
        crate::sandbox::install(&mut command, plan);
    }
    let mut child = command.spawn()?;
    let pgid = child.id().map(|id| id as i32);

    if let (Some(mut writer), Some(bytes)) = (child.stdin.take(), spec.stdin.clone()) {
        // A child that exits without reading its input is not an error.
        tokio::spawn(async move {
            let _ = writer.write_all(&bytes).await;
            let _ = writer.shutdown().await;
        });
    }
    let stop_readers = CancellationToken::new();
    let stdout = tokio::spawn(capture(
        child.stdout.take(),
        spec.stdout_limit,
        stop_readers.clone(),
    ));
    let stderr = tokio::spawn(capture(
        child.stderr.take(),
        spec.stderr_limit,
        stop_readers.clone(),
    ));

    enum End {
        Exited(std::process::ExitStatus),
        TimedOut,
        Cancelled,
    }
    let end = tokio::select! {
        status = child.wait() => match status {
            Ok(status) => End::Exited(status),
            // Waiting failed (should not happen): treat like a timeout so the group dies.
            Err(_) => End::TimedOut,
        },
        _ = tokio::time::sleep_until(deadline) => End::TimedOut,
        _ = cancel.cancelled() => End::Cancelled,
    };

    let mut outcome = Outcome::default();
    let reader_deadline = match end {
        End::Exited(status) => {
            outcome.exit_code = Some(exit_code(status));
            // Leftover members of the group would keep the pipes open: end them.
            signal_group(pgid, Signal::Kill);
            std::cmp::min(deadline, tokio::time::Instant::now() + DRAIN_AFTER_EXIT)
        }
        End::TimedOut | End::Cancelled => {
            outcome.timed_out = matches!(end, End::TimedOut);
            outcome.cancelled = matches!(end, End::Cancelled);
            signal_group(pgid, Signal::Term);
            if tokio::time::timeout(TERMINATION_GRACE, child.wait())
                .await
                .is_err()
            {
                signal_group(pgid, Signal::Kill);
            }
            // The leader is gone or SIGKILLed: reap it, then sweep the group once more.
            let _ = child.wait().await;
            signal_group(pgid, Signal::Kill);
            tokio::time::Instant::now() + READER_GRACE
        }
    };

    let stopper = stop_readers.clone();
    let stop_at = tokio::spawn(async move {
        tokio::time::sleep_until(reader_deadline).await;
        stopper.cancel();
    });
    let (out, err) = (stdout.await, stderr.await);
    stop_at.abort();
    let out = out.unwrap_or_default();
    let err = err.unwrap_or_default();
    outcome.stdout = out.bytes;
    outcome.stdout_truncated = out.truncated;
    outcome.stderr = err.bytes;
    outcome.stderr_truncated = err.truncated;
    outcome.duration = started.elapsed();
    Ok(outcome)
}

#[derive(Default)]
struct Captured {
    bytes: Vec<u8>,
    truncated: bool,
}

/// Keep the first `limit` bytes, drain the rest. Stopped early, the capture counts as
/// truncated: output may have been lost.
async fn capture<R: AsyncRead + Unpin>(
    stream: Option<R>,
    limit: usize,
    stop: CancellationToken,
) -> Captured {
    let mut captured = Captured::default();
    let Some(mut stream) = stream else {
        return captured;
    };
    let mut chunk = vec![0u8; CHUNK];
    loop {
        let read = tokio::select! {
            read = stream.read(&mut chunk) => read,
            _ = stop.cancelled() => {
                captured.truncated = true;
                return captured;
            }
        };
        match read {
            Ok(0) | Err(_) => return captured,
            Ok(n) => {
                let room = limit.saturating_sub(captured.bytes.len());
                if n > room {
                    captured.truncated = true;
                }
                captured.bytes.extend_from_slice(&chunk[..n.min(room)]);
            }
        }
    }
}

#[cfg(unix)]
fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|s| -s))
        .unwrap_or(-1)
}

#[cfg(not(unix))]
fn exit_code(status: std::process::ExitStatus) -> i32 {
    status.code().unwrap_or(-1)
}

enum Signal {
    Term,
    Kill,
}

#[cfg(unix)]
fn signal_group(pgid: Option<i32>, signal: Signal) {
    let Some(pgid) = pgid.filter(|p| *p > 1) else {
        return;
    };
    let signal = match signal {
        Signal::Term => libc::SIGTERM,
        Signal::Kill => libc::SIGKILL,
    };
    // SAFETY: killpg has no memory-safety preconditions; errors (ESRCH once the group is
    // empty) are expected and ignored.
    unsafe {
        libc::killpg(pgid, signal);
    }
}

#[cfg(not(unix))]
fn signal_group(_pgid: Option<i32>, _signal: Signal) {}

/// Serializes conda executions (FIFO) with a bounded queue.
#[derive(Debug)]
pub struct Executor {
    gate: Arc<tokio::sync::Mutex<()>>,
    /// Calls admitted: running or waiting.
    admitted: AtomicUsize,
    /// Most calls that may wait behind the running one.
    max_queue: usize,
}

/// Held while a call may run; dropping it admits the next one.
pub struct Slot {
    _guard: tokio::sync::OwnedMutexGuard<()>,
    _admission: Admission,
}

struct Admission(Arc<Executor>);

impl Drop for Admission {
    fn drop(&mut self) {
        self.0.admitted.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The queue is full.
#[derive(Debug, PartialEq, Eq)]
pub struct QueueFull;

impl Executor {
    pub fn new(max_queue: usize) -> Arc<Self> {
        Arc::new(Executor {
            gate: Arc::new(tokio::sync::Mutex::new(())),
            admitted: AtomicUsize::new(0),
            max_queue,
        })
    }

    /// Wait for this call's turn (FIFO). Refused at once when `max_queue` calls are
    /// already waiting behind a running one.
    pub async fn acquire(self: &Arc<Self>) -> Result<Slot, QueueFull> {
        let limit = self.max_queue.saturating_add(1);
        let admitted = self
            .admitted
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < limit).then_some(n + 1)
            });
        if admitted.is_err() {
            return Err(QueueFull);
        }
        let admission = Admission(Arc::clone(self));
        let guard = Arc::clone(&self.gate).lock_owned().await;
        Ok(Slot {
            _guard: guard,
            _admission: admission,
        })
    }

    /// Calls running or waiting right now.
    pub fn load(&self) -> usize {
        self.admitted.load(Ordering::SeqCst)
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn sh(script: &str, timeout_ms: u64, limit: usize) -> Spec {
        Spec {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), script.into()],
            cwd: None,
            stdin: None,
            timeout: Duration::from_millis(timeout_ms),
            stdout_limit: limit,
            stderr_limit: limit,
            env_remove: Vec::new(),
            sandbox: None,
        }
    }

    #[tokio::test]
    async fn captures_exit_code_and_streams() {
        let out = run(
            &sh("echo out; echo err >&2; exit 3", 5000, 1024),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
        assert_eq!(out.exit_code, Some(3));
        assert_eq!(out.stdout, b"out\n");
        assert_eq!(out.stderr, b"err\n");
        assert!(!out.timed_out && !out.cancelled && !out.stdout_truncated);
    }

    #[tokio::test]
    async fn output_is_capped_and_drained() {
        let out = run(
            &sh("head -c 1000000 /dev/zero; echo done >&2", 10_000, 4096),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
        assert_eq!(out.exit_code, Some(0));
        assert_eq!(out.stdout.len(), 4096);
        assert!(out.stdout_truncated);
        assert_eq!(out.stderr, b"done\n");
        assert!(!out.stderr_truncated);
    }

    #[tokio::test]
    async fn exactly_at_the_limit_is_not_truncated() {
        let out = run(&sh("printf 12345678", 5000, 8), &CancellationToken::new())
            .await
            .unwrap();
        assert_eq!(out.stdout, b"12345678");
        assert!(!out.stdout_truncated);
    }

    #[tokio::test]
    async fn stdin_is_delivered() {
        let mut spec = sh("cat", 5000, 1024);
        spec.stdin = Some(b"hello".to_vec());
        let out = run(&spec, &CancellationToken::new()).await.unwrap();
        assert_eq!(out.stdout, b"hello");
    }

    #[tokio::test]
    async fn timeout_kills_a_term_ignoring_group() {
        let started = Instant::now();
        let out = run(
            &sh("trap '' TERM; sleep 30 & sleep 30 & wait", 300, 1024),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
        assert!(out.timed_out);
        assert_eq!(out.exit_code, None);
        let elapsed = started.elapsed();
        assert!(elapsed < Duration::from_secs(10), "took {elapsed:?}");
    }

    #[tokio::test]
    async fn escaped_descendant_cannot_hold_the_call() {
        // setsid puts the sleeper outside the group; it keeps stdout open for 30 s.
        let started = Instant::now();
        let out = run(
            &sh("setsid sleep 30 & sleep 30", 300, 1024),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
        assert!(out.timed_out);
        assert!(started.elapsed() < Duration::from_secs(10));
        let _ = std::process::Command::new("pkill")
            .args(["-f", "^sleep 30$"])
            .status();
    }

    #[tokio::test]
    async fn cancellation_ends_the_run() {
        let cancel = CancellationToken::new();
        let trigger = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            trigger.cancel();
        });
        let out = run(&sh("sleep 30", 20_000, 1024), &cancel).await.unwrap();
        assert!(out.cancelled && !out.timed_out);
        assert!(out.duration < Duration::from_secs(10));
    }

    #[tokio::test]
    async fn spawn_failure_is_an_error() {
        let mut spec = sh("true", 1000, 10);
        spec.program = "/nonexistent/conda".into();
        assert!(run(&spec, &CancellationToken::new()).await.is_err());
    }

    #[tokio::test]
    async fn queue_is_fifo_and_bounded() {
        let executor = Executor::new(1);
        let first = executor.acquire().await.unwrap();
        let e2 = Arc::clone(&executor);
        let waiter = tokio::spawn(async move {
            let _slot = e2.acquire().await.unwrap();
        });
        while executor.load() < 2 {
            tokio::task::yield_now().await;
        }
        assert!(matches!(executor.acquire().await, Err(QueueFull)));
        drop(first);
        waiter.await.unwrap();
        assert_eq!(executor.load(), 0);
    }

    #[test]
    fn os_errors_are_plain_words() {
        let plain = |code| plain_os_error(&std::io::Error::from_raw_os_error(code));
        assert!(plain(libc::ENOEXEC).starts_with("it is not a program this system can run"));
        assert!(plain(libc::EACCES).starts_with("permission denied"));
        assert!(plain(libc::ENOENT).contains("#! line"));
        assert!(!plain(libc::EROFS).contains("os error"));
        assert!(!plain(libc::EROFS).is_empty());
    }
}
