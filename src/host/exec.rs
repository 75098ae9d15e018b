//! Every child process the server starts: helper runs and conda tool runs alike.
//!
//! One code path enforces every limit: argv only (never a shell), the child in its own
//! process group and its own cgroup, resource limits ([`limits`]: address space, file
//! size, process count), withheld secrets, bounded stdin, per-stream byte caps on retained
//! output (the rest is drained), and a hard wall-clock deadline. At the deadline, on
//! cancellation or at shutdown, the whole tree (the group, the cgroup, the marked
//! processes: [`reap`]) gets SIGTERM, a grace period, then SIGKILL; when the leader exits
//! normally, whatever it left behind is killed. Every descendant is reaped by pid (the
//! server is a child subreaper), so nothing outlives its execution. Output readers are
//! given a short, bounded time to finish, so a descendant that still holds the pipes
//! cannot hold the call (or the execution queue) past its deadline.
//!
//! Built on `tokio::process` rather than duct: calls must be cancellable from async code,
//! both streams need byte-capped capture with draining, and the deadline must not depend on
//! pipe EOF. Using one executor for helper runs too means every limit is implemented once.
//!
//! [`Executor`] serializes conda executions in FIFO order and bounds the queue.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;
use tokio_util::sync::CancellationToken;

mod cgroup;
pub mod limits;
pub mod reap;

pub use limits::{Limit, Limits, Settings};

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
    /// Resource limits, descendant tracking and the withheld environment
    /// ([`Limits::current`] for every child the server starts).
    pub limits: Limits,
    /// Run the child in this read-only sandbox ([`crate::host::sandbox`]).
    pub sandbox: Option<crate::host::sandbox::Plan>,
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
    /// Which limit the run probably hit ("memory limit 4 GiB may have been exceeded").
    pub limit: Option<String>,
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
/// [`Outcome`]. The run is supervised by a task of its own: when the caller stops waiting
/// (its future is dropped), that counts as cancellation, and the termination sweep still
/// runs to completion. Once [`shutdown`] has begun, nothing new starts.
pub async fn run(spec: &Spec, cancel: &CancellationToken) -> std::io::Result<Outcome> {
    if shutdown_token().is_cancelled() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::Interrupted,
            "the server is shutting down",
        ));
    }
    #[cfg(unix)]
    reap::start_orphan_reaper();
    let linked = cancel.child_token();
    let stop_when_dropped = linked.clone().drop_guard();
    let spec = spec.clone();
    let running = Running::enter();
    let task = tokio::spawn(async move {
        let _running = running;
        supervise(&spec, &linked).await
    });
    let result = task
        .await
        .unwrap_or_else(|_| Err(std::io::Error::other("the execution task failed")));
    stop_when_dropped.disarm();
    result
}

/// Executions being supervised; [`shutdown`] waits for them.
static RUNNING: AtomicUsize = AtomicUsize::new(0);
static NEXT_EXECUTION: AtomicU64 = AtomicU64::new(0);

fn idle() -> &'static tokio::sync::Notify {
    static IDLE: OnceLock<tokio::sync::Notify> = OnceLock::new();
    IDLE.get_or_init(tokio::sync::Notify::new)
}

fn shutdown_token() -> &'static CancellationToken {
    static SHUTDOWN: OnceLock<CancellationToken> = OnceLock::new();
    SHUTDOWN.get_or_init(CancellationToken::new)
}

struct Running;

impl Running {
    fn enter() -> Running {
        RUNNING.fetch_add(1, Ordering::SeqCst);
        Running
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if RUNNING.fetch_sub(1, Ordering::SeqCst) == 1 {
            idle().notify_waiters();
        }
    }
}

/// Cancel every execution (running ones get SIGTERM, the grace period, then SIGKILL) and
/// refuse new ones; nothing waits for them.
pub fn begin_shutdown() {
    shutdown_token().cancel();
}

/// [`begin_shutdown`], then wait (at most `bound`) until every execution's termination
/// sweep has finished and its descendants are reaped; remove the server's cgroups.
pub async fn shutdown(bound: Duration) {
    begin_shutdown();
    let end = tokio::time::Instant::now() + bound;
    loop {
        let notified = idle().notified();
        if RUNNING.load(Ordering::SeqCst) == 0 {
            break;
        }
        if tokio::time::timeout_at(end, notified).await.is_err() {
            tracing::warn!("executions still running at exit");
            break;
        }
    }
    reap::reap_orphans();
    if let Some(cgroups) = Limits::current().cgroups {
        cgroups.remove();
    }
}

/// How long [`shutdown`] may take: the termination grace, the readers' grace and the
/// sweep, with room to spare.
pub const SHUTDOWN_BOUND: Duration = Duration::from_secs(5);

/// Register the child-side confinement: join the execution's cgroups, set the rlimits.
/// Everything was prepared before `fork`; the hook only makes async-signal-safe calls.
#[cfg(unix)]
fn contain(command: &mut Command, prepared: Arc<limits::Prepared>) {
    // SAFETY: the hook only calls write(2) and setrlimit(2) on data prepared before fork.
    unsafe {
        command.pre_exec(move || prepared.apply_in_child());
    }
}

async fn supervise(spec: &Spec, cancel: &CancellationToken) -> std::io::Result<Outcome> {
    let started = Instant::now();
    let deadline = tokio::time::Instant::now() + spec.timeout;
    let marker = format!(
        "{}.{}",
        std::process::id(),
        NEXT_EXECUTION.fetch_add(1, Ordering::Relaxed)
    );
    not_a_script_or_binary(&spec.program)?;
    let prepared = Arc::new(spec.limits.prepare());
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
    for name in spec.limits.env_remove.iter() {
        command.env_remove(name);
    }
    command.env(reap::MARKER_VAR, &marker);
    // Join the cgroup and set the limits first: the sandbox's namespaces come after.
    #[cfg(unix)]
    contain(&mut command, Arc::clone(&prepared));
    if let Some(plan) = &spec.sandbox {
        crate::host::sandbox::install(&mut command, plan);
    }
    let spawned = {
        // Registered before anything can reap it: orphan reaping skips registered pids.
        let mut registry = reap::registry();
        let spawned = command.spawn();
        if let Some(pid) = spawned.as_ref().ok().and_then(|c| c.id()) {
            registry.insert(pid as i32);
        }
        spawned
    };
    let mut child = match spawned {
        Ok(child) => child,
        Err(error) => {
            if let Some(group) = &prepared.group {
                group.remove();
            }
            return Err(error);
        }
    };
    let leader = child.id().map(|id| id as i32);
    let tree = Tree {
        pgid: leader,
        group: prepared.group.as_ref(),
        marker: &marker,
    };

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
    // The tree's peak address space, sampled while it runs: a program that catches its
    // MemoryError still shows how close it came to the limit.
    let peak_vm = Arc::new(AtomicU64::new(0));
    let sampler = spec.limits.memory.map(|_| {
        let peak = Arc::clone(&peak_vm);
        let prepared = Arc::clone(&prepared);
        tokio::spawn(async move {
            loop {
                let mut pids = prepared
                    .group
                    .as_ref()
                    .map(|g| g.members())
                    .unwrap_or_default();
                pids.extend(leader);
                let vm = pids
                    .into_iter()
                    .filter_map(reap::peak_vm)
                    .max()
                    .unwrap_or(0);
                peak.fetch_max(vm, Ordering::Relaxed);
                tokio::time::sleep(VM_SAMPLE).await;
            }
        })
    });
    let end = tokio::select! {
        status = child.wait() => match status {
            Ok(status) => End::Exited(status),
            // Waiting failed (should not happen): treat like a timeout so the tree dies.
            Err(_) => End::TimedOut,
        },
        _ = tokio::time::sleep_until(deadline) => End::TimedOut,
        _ = cancel.cancelled() => End::Cancelled,
        _ = shutdown_token().cancelled() => End::Cancelled,
    };

    if let Some(sampler) = sampler {
        sampler.abort();
    }
    let mut outcome = Outcome::default();
    let reader_deadline = match end {
        End::Exited(status) => {
            outcome.exit_code = Some(exit_code(status));
            // Whatever the leader left behind would keep the pipes open: end it all.
            tree.sweep().await;
            std::cmp::min(deadline, tokio::time::Instant::now() + DRAIN_AFTER_EXIT)
        }
        End::TimedOut | End::Cancelled => {
            outcome.timed_out = matches!(end, End::TimedOut);
            outcome.cancelled = matches!(end, End::Cancelled);
            tree.signal(Signal::Term);
            let grace_end = tokio::time::Instant::now() + TERMINATION_GRACE;
            let _ = tokio::time::timeout_at(grace_end, child.wait()).await;
            // The leader is gone (or ignores SIGTERM): give the rest of the tree the rest
            // of the grace period.
            while tokio::time::Instant::now() < grace_end && tree.alive() {
                tokio::time::sleep(SWEEP_POLL).await;
            }
            tree.signal(Signal::Kill);
            let _ = child.wait().await;
            tree.sweep().await;
            tokio::time::Instant::now() + READER_GRACE
        }
    };
    // The leader is reaped by now.
    let _ = child.wait().await;
    if let Some(pid) = leader {
        reap::registry().remove(&pid);
    }

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
    let pids_max_hit = prepared.group.as_ref().is_some_and(|g| g.pids_max_hit());
    if outcome.exit_code != Some(0) && !outcome.cancelled {
        outcome.limit = limits::diagnose(
            &spec.limits,
            &limits::Evidence {
                exit_code: outcome.exit_code,
                stderr: &outcome.stderr,
                pids_max_hit,
                peak_vm: peak_vm.load(Ordering::Relaxed),
            },
        );
    }
    if let Some(group) = &prepared.group {
        group.remove();
    }
    outcome.duration = started.elapsed();
    Ok(outcome)
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

/// How often the tree's peak address space is sampled.
const VM_SAMPLE: Duration = Duration::from_millis(200);
/// How often the sweep looks again.
const SWEEP_POLL: Duration = Duration::from_millis(20);
/// The sweep gives up after this long (a process in uninterruptible sleep).
const SWEEP_BOUND: Duration = Duration::from_secs(2);

/// An execution's processes: the leader's process group, the execution's cgroup (every
/// descendant, whatever its session) and the environment marker (where there is no
/// cgroup, or a child could not join it).
struct Tree<'a> {
    pgid: Option<i32>,
    group: Option<&'a cgroup::ExecutionGroup>,
    marker: &'a str,
}

impl Tree<'_> {
    fn signal(&self, signal: Signal) {
        signal_group(self.pgid, signal);
        let number = match signal {
            Signal::Term => libc::SIGTERM,
            Signal::Kill => libc::SIGKILL,
        };
        match (self.group, signal) {
            (Some(group), Signal::Kill) => group.kill(),
            (Some(group), Signal::Term) => group.signal(number),
            (None, _) => {}
        }
        reap::signal_marked(self.marker, number);
    }

    fn alive(&self) -> bool {
        self.group.is_some_and(|g| !g.members().is_empty()) || !reap::marked(self.marker).is_empty()
    }

    /// SIGKILL the whole tree until nothing is left, reaping orphans by pid.
    async fn sweep(&self) {
        let end = tokio::time::Instant::now() + SWEEP_BOUND;
        loop {
            self.signal(Signal::Kill);
            reap::reap_orphans();
            if !self.alive() {
                break;
            }
            if tokio::time::Instant::now() >= end {
                tracing::warn!("processes of an execution survived SIGKILL");
                break;
            }
            tokio::time::sleep(SWEEP_POLL).await;
        }
        // Orphans killed last may only now have become zombies.
        reap::reap_orphans();
    }
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

#[derive(Clone, Copy)]
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
            limits: Limits::none(),
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

    /// Live processes whose command line contains `marker` (zombies count as gone).
    fn survivors(marker: &str) -> Vec<i32> {
        let mut found = Vec::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<i32>().ok())
            else {
                continue;
            };
            let mut cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            for byte in &mut cmdline {
                if *byte == 0 {
                    *byte = b' ';
                }
            }
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let zombie = stat
                .rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
            if !zombie && String::from_utf8_lossy(&cmdline).contains(marker) {
                found.push(pid);
            }
        }
        found
    }

    /// A sleep whose argv is unique to this test (so the check cannot see other tests).
    fn unique_sleep() -> String {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        format!(
            "6{}{:03}.{}",
            std::process::id() % 1000,
            NEXT.fetch_add(1, Ordering::Relaxed),
            std::process::id()
        )
    }

    fn kill_pids(pids: &[i32]) {
        for pid in pids {
            // SAFETY: kill has no memory-safety preconditions.
            unsafe {
                libc::kill(*pid, libc::SIGKILL);
            }
        }
    }

    #[tokio::test]
    async fn escaped_descendant_cannot_hold_the_call_and_dies() {
        // setsid puts the sleeper outside the group; it keeps stdout open. Without cgroups
        // the environment marker still finds it.
        let seconds = unique_sleep();
        let started = Instant::now();
        let out = run(
            &sh(
                &format!("setsid sh -c 'echo up; exec sleep {seconds}' & sleep {seconds}"),
                1000,
                1024,
            ),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
        assert!(out.timed_out);
        assert!(started.elapsed() < Duration::from_secs(10));
        // The sleepers did start: the escaped one wrote to the pipe the call kept.
        assert_eq!(out.stdout, b"up\n", "{out:?}");
        let left = survivors(&format!("sleep {seconds}"));
        kill_pids(&left);
        assert!(left.is_empty(), "survivors: {left:?}");
    }

    #[tokio::test]
    async fn leftovers_of_a_normal_exit_die() {
        let seconds = unique_sleep();
        let out = run(
            &sh(
                &format!("setsid sh -c 'echo started; exec sleep {seconds}' & sleep 0.3"),
                10_000,
                1024,
            ),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
        assert_eq!(out.exit_code, Some(0));
        assert_eq!(out.stdout, b"started\n", "the escaped sleeper ran");
        let left = survivors(&format!("sleep {seconds}"));
        kill_pids(&left);
        assert!(left.is_empty(), "survivors: {left:?}");
    }

    #[tokio::test]
    async fn a_dropped_call_still_ends_its_tree() {
        let seconds = unique_sleep();
        let spec = sh(
            &format!("trap '' TERM; setsid sleep {seconds} & sleep {seconds}"),
            60_000,
            1024,
        );
        let call = tokio::spawn(async move { run(&spec, &CancellationToken::new()).await });
        let probe = format!("sleep {seconds}");
        let until = Instant::now() + Duration::from_secs(10);
        while survivors(&probe).len() < 2 && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let started: Vec<String> = survivors(&probe)
            .iter()
            .map(|p| std::fs::read_to_string(format!("/proc/{p}/cmdline")).unwrap_or_default())
            .collect();
        assert!(started.len() >= 2, "both sleepers started: {started:?}");
        call.abort();
        let until = Instant::now() + TERMINATION_GRACE + Duration::from_secs(3);
        while !survivors(&probe).is_empty() && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let left = survivors(&probe);
        kill_pids(&left);
        assert!(left.is_empty(), "survivors: {left:?}");
    }

    /// Two runs overlap (a helper run during a tool run): the first one's sweep kills its
    /// own escaped descendant and nothing of the second one.
    async fn overlapping_runs_sweep_only_their_own(limits: Limits) {
        let (mine, theirs) = (unique_sleep(), unique_sleep());
        let mut long = sh(
            &format!("setsid sleep {theirs} & sleep {theirs}"),
            60_000,
            1024,
        );
        long.limits = limits.clone();
        let cancel = CancellationToken::new();
        let stop = cancel.clone();
        let long = tokio::spawn(async move { run(&long, &stop).await });
        let probe = format!("sleep {theirs}");
        let until = Instant::now() + Duration::from_secs(10);
        while survivors(&probe).len() < 2 && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let mut short = sh(
            &format!("setsid sh -c 'echo up; exec sleep {mine}' & sleep 0.3"),
            10_000,
            1024,
        );
        short.limits = limits;
        let out = run(&short, &CancellationToken::new()).await.unwrap();
        assert_eq!(
            (out.exit_code, out.stdout.as_slice()),
            (Some(0), &b"up\n"[..])
        );
        let left = survivors(&format!("sleep {mine}"));
        kill_pids(&left);
        assert!(
            left.is_empty(),
            "the short run's descendant survived: {left:?}"
        );
        let theirs_alive = survivors(&probe);
        cancel.cancel();
        let out = long.await.unwrap().unwrap();
        assert!(out.cancelled);
        assert!(
            theirs_alive.len() >= 2,
            "the short run's sweep killed the other run's processes: {theirs_alive:?}"
        );
        let left = survivors(&probe);
        kill_pids(&left);
        assert!(left.is_empty(), "survivors: {left:?}");
    }

    #[tokio::test]
    async fn overlapping_runs_by_marker() {
        overlapping_runs_sweep_only_their_own(Limits::none()).await;
    }

    #[tokio::test]
    async fn overlapping_runs_by_cgroup() {
        // Where this process cannot create cgroups (not root, no delegation) the marker
        // variant above still covers attribution.
        match cgroup::Cgroups::detect(false) {
            Ok(cgroups) => {
                let cgroups = Arc::new(cgroups);
                let limits = Limits {
                    cgroups: Some(Arc::clone(&cgroups)),
                    ..Limits::none()
                };
                overlapping_runs_sweep_only_their_own(limits).await;
                cgroups.remove();
            }
            Err(reason) => eprintln!("cgroups unavailable here: {reason}"),
        }
    }

    #[tokio::test]
    async fn file_size_limit_is_named() {
        let mut spec = sh(
            "head -c 3000000 /dev/zero > \"$0\"; echo \"head: $?\" >&2; exit 1",
            10_000,
            1024,
        );
        let dir = std::env::temp_dir().join(format!("ccm-fsize-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        spec.args.push(dir.join("big").into());
        spec.limits.file_size = Some(1 << 20);
        let out = run(&spec, &CancellationToken::new()).await.unwrap();
        let size = std::fs::metadata(dir.join("big"))
            .map(|m| m.len())
            .unwrap_or(0);
        let _ = std::fs::remove_dir_all(&dir);
        assert!(size <= 1 << 20, "wrote {size} bytes past the limit");
        assert_eq!(
            out.limit.as_deref(),
            Some("file-size limit 1 MiB may have been exceeded"),
            "{out:?}"
        );
    }

    #[tokio::test]
    async fn memory_limit_is_enforced_and_named() {
        // python3 reports MemoryError when the address-space limit refuses the allocation.
        let mut spec = sh(
            "exec python3 -c 'b = bytearray(512 * 1024 * 1024)'",
            30_000,
            64 * 1024,
        );
        spec.limits.memory = Some(256 << 20);
        let out = run(&spec, &CancellationToken::new()).await.unwrap();
        assert_ne!(out.exit_code, Some(0), "{out:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("MemoryError"),
            "{out:?}"
        );
        assert_eq!(
            out.limit.as_deref(),
            Some("memory limit 256 MiB may have been exceeded")
        );
    }

    #[tokio::test]
    async fn withheld_variables_do_not_reach_the_child() {
        let mut spec = sh("env", 5000, 1 << 20);
        spec.limits.env_remove = Arc::from(vec!["PATH".to_owned(), "HOME".to_owned()]);
        let out = run(&spec, &CancellationToken::new()).await.unwrap();
        let env = String::from_utf8_lossy(&out.stdout);
        assert!(
            !env.lines()
                .any(|l| l.starts_with("PATH=") || l.starts_with("HOME=")),
            "{env}"
        );
        assert!(env.contains(&format!("{}=", reap::MARKER_VAR)), "{env}");
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
        let executor = Executor::new(3);
        let first = executor.acquire().await.unwrap();
        let order = Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut waiters = Vec::new();
        for n in 1..=3 {
            let e = Arc::clone(&executor);
            let order = Arc::clone(&order);
            waiters.push(tokio::spawn(async move {
                let _slot = e.acquire().await.unwrap();
                order.lock().unwrap().push(n);
                // Hold the slot a moment so a later waiter could overtake if it were not FIFO.
                tokio::task::yield_now().await;
            }));
            // Each waiter is queued before the next one asks.
            while executor.load() < n + 1 {
                tokio::task::yield_now().await;
            }
        }
        assert!(matches!(executor.acquire().await, Err(QueueFull)));
        drop(first);
        for waiter in waiters {
            waiter.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), vec![1, 2, 3]);
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
