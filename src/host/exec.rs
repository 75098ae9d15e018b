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
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

mod capture;
mod cgroup;
pub(crate) mod environ;
mod leader;
pub mod limits;
mod pty;
mod queue;
pub mod reap;
mod spawn;
mod supervise;
pub(crate) mod warm;
pub(crate) mod watch;

pub use limits::{Limit, LimitSettings, Limits};
pub use queue::{Executor, QueueFull, Slot};
pub use spawn::plain_os_error;
pub use watch::{Seen, Watch};

/// Time between SIGTERM and SIGKILL.
pub const TERMINATION_GRACE: Duration = Duration::from_secs(2);

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
    /// ([`Executions::limits`] for every child the server starts).
    pub limits: Limits,
    /// Run the child in this read-only sandbox ([`crate::host::sandbox`]).
    pub sandbox: Option<crate::host::sandbox::Plan>,
    /// Bound the child's writes ([`crate::host::sandbox::bound`]); such a run is always
    /// started cold.
    pub write_bound: Option<crate::host::sandbox::bound::Bound>,
}

/// How a child's environment differs from the server's (what `--confirm-writes` shows):
/// the variables ccm sets (name, value as shown) and the server's variables it withholds
/// (names only).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EnvironmentChanges {
    pub set: Vec<(String, String)>,
    pub withheld: Vec<String>,
}

/// What starting `spec` changes in its environment: the execution marker, `NO_COLOR` on a
/// terminal (progress), `TMPDIR` in the sandbox, the variables that say where code may come
/// from (`environ`); the variables withheld from every child (the server wiped their
/// values from its own environment at startup).
pub fn environment_changes(spec: &Spec) -> EnvironmentChanges {
    let mut set = vec![(
        reap::MARKER_VAR.to_owned(),
        "<this execution's marker>".to_owned(),
    )];
    set.push((
        "NO_COLOR".to_owned(),
        "1 (only when progress is reported on a terminal)".to_owned(),
    ));
    if spec.sandbox.is_some() {
        set.push((
            crate::host::sandbox::TMPDIR.to_owned(),
            "<a private tmpfs of the sandbox>".to_owned(),
        ));
    }
    let mut withheld: Vec<String> = spec
        .env_remove
        .iter()
        .map(|n| (*n).to_owned())
        .chain(spec.limits.env_remove.iter().cloned())
        .collect();
    // Where code may come from (`environ`): set, or removed when only relative entries
    // were left.
    let changes = environ::changes(|name| self::withheld(spec, name));
    for (name, value) in changes {
        match value {
            Some(value) => set.push((name.to_owned(), value.to_string_lossy().into_owned())),
            None => withheld.push(name.to_owned()),
        }
    }
    withheld.sort();
    withheld.dedup();
    EnvironmentChanges { set, withheld }
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
    let mut env: std::collections::BTreeMap<OsString, OsString> = std::env::vars_os()
        .filter(|(k, _)| !spec.env_remove.iter().any(|r| k.as_bytes() == r.as_bytes()))
        .collect();
    environ::apply(&mut env, &environ::changes(|name| withheld(spec, name)));
    let env: usize = env.iter().map(|(k, v)| k.len() + v.len() + 2).sum();
    let total = argv + env;
    if total > MAX_COMMAND_BYTES {
        Err(TooLarge::Total(total))
    } else {
        Ok(())
    }
}

/// Whether `spec`'s child goes without the variable `name` (`env_remove`, or withheld
/// from every child).
fn withheld(spec: &Spec, name: &str) -> bool {
    spec.env_remove.contains(&name) || spec.limits.env_remove.iter().any(|n| n == name)
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
    /// Whether the run was forked from the read zygote (`None`: warm reads are off on
    /// this server).
    pub warm: Option<bool>,
}

/// The executions of one server (cheap to clone; clones share one state): the limits
/// every child runs under, the `--warm` state once it is started, the executions being
/// supervised and the shutdown that ends them. The server owns one (in
/// [`crate::host::Host`]); a one-shot command or a test makes its own.
#[derive(Clone)]
pub struct Executions(Arc<State>);

struct State {
    limits: Limits,
    /// The warm path, once [`Executions::start_warm`] turned it on.
    warm: OnceLock<Arc<warm::Warm>>,
    /// Why warm reads are off though the operator left them on (no sandbox).
    warm_off: OnceLock<String>,
    /// Executions being supervised; [`Executions::shutdown`] waits for them.
    running: AtomicUsize,
    idle: tokio::sync::Notify,
    shutdown: CancellationToken,
}

/// The marker of an execution's descendants is `<server pid>.<n>`: unique within the
/// process whichever [`Executions`] starts the run, so `n` is counted process-wide.
static NEXT_EXECUTION: AtomicU64 = AtomicU64::new(0);

impl Executions {
    /// A new set of executions whose children run under `limits`.
    pub fn new(limits: Limits) -> Executions {
        Executions(Arc::new(State {
            limits,
            warm: OnceLock::new(),
            warm_off: OnceLock::new(),
            running: AtomicUsize::new(0),
            idle: tokio::sync::Notify::new(),
            shutdown: CancellationToken::new(),
        }))
    }

    /// The limits and withheld environment of every child ([`Spec::limits`]).
    pub fn limits(&self) -> &Limits {
        &self.0.limits
    }

    /// Run a child to completion, timeout or cancellation.
    ///
    /// Only a failure to start the process is an error; everything after that is an
    /// [`Outcome`]. The run is supervised by a task of its own: when the caller stops
    /// waiting (its future is dropped), that counts as cancellation, and the termination
    /// sweep still runs to completion. Once [`Executions::shutdown`] has begun, nothing new
    /// starts.
    pub async fn run(&self, spec: &Spec, cancel: &CancellationToken) -> std::io::Result<Outcome> {
        self.run_watched(spec, cancel, None).await
    }

    /// The sandbox's trial run: `program args` under `plan`, bounded like every child, its
    /// exit code (the sandbox probe decides what it means).
    pub async fn trial(
        &self,
        program: &std::path::Path,
        args: &[&str],
        plan: crate::host::sandbox::Plan,
    ) -> std::io::Result<Option<i32>> {
        let spec = Spec {
            program: program.to_path_buf(),
            args: args.iter().map(Into::into).collect(),
            cwd: None,
            stdin: None,
            timeout: Duration::from_secs(30),
            stdout_limit: 4096,
            stderr_limit: 4096,
            env_remove: Vec::new(),
            limits: self.limits().clone(),
            sandbox: Some(plan),
            write_bound: None,
        };
        Ok(self.run(&spec, &CancellationToken::new()).await?.exit_code)
    }

    /// [`Executions::run`], with the run's readers reporting to `watch` (fetch records,
    /// the last stderr line) while it goes; with [`Watch::terminal`], stdout is a
    /// pseudo-terminal.
    pub async fn run_watched(
        &self,
        spec: &Spec,
        cancel: &CancellationToken,
        watch: Option<Watch>,
    ) -> std::io::Result<Outcome> {
        // Counted before the shutdown check, so that [`Executions::shutdown`] (which
        // cancels, then waits for the count to reach zero, then removes the cgroups) either
        // sees this run or this run sees the shutdown; never a run that starts after the
        // cgroups are gone.
        let running = Running::enter(&self.0);
        if self.0.shutdown.is_cancelled() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::Interrupted,
                "the server is shutting down",
            ));
        }
        reap::start_orphan_reaper();
        let linked = cancel.child_token();
        let stop_when_dropped = linked.clone().drop_guard();
        let spec = spec.clone();
        let executions = self.clone();
        let task = tokio::spawn(async move {
            let _running = running;
            supervise::supervise(&executions, &spec, &linked, watch.as_ref()).await
        });
        let result = task
            .await
            .unwrap_or_else(|_| Err(std::io::Error::other("the execution task failed")));
        stop_when_dropped.disarm();
        result
    }

    /// Turn the warm path on for `entry`'s `conda` and start its zygote in the background
    /// (`--warm`; the zygote's environment withholds what [`Executions::limits`] does).
    pub fn start_warm(&self, entry: warm::Entry) {
        let warm = self
            .0
            .warm
            .get_or_init(|| warm::Warm::new(entry, self.0.limits.clone()));
        warm::launch(Arc::clone(warm));
    }

    /// Warm reads stay off, for `why`: said once in the log, and in the capabilities.
    pub fn warm_off(&self, why: String) {
        tracing::warn!("warm reads are off: {why}; every call starts a new interpreter");
        let _ = self.0.warm_off.set(why);
    }

    /// The capabilities document's `warm` entry (`null` after `--no-warm`).
    pub fn describe_warm(&self) -> serde_json::Value {
        match (self.0.warm.get(), self.0.warm_off.get()) {
            (None, Some(why)) => serde_json::json!({
                "enabled": false,
                "state": "off",
                "reason": why,
                "warm_calls": 0,
                "cold_calls": 0,
            }),
            (warm, _) => warm::describe(warm.map(Arc::as_ref)),
        }
    }

    /// The warm path, when it is on.
    fn warm(&self) -> Option<&Arc<warm::Warm>> {
        self.0.warm.get()
    }

    /// Cancel every execution (running ones get SIGTERM, the grace period, then SIGKILL)
    /// and refuse new ones; nothing waits for them.
    pub fn begin_shutdown(&self) {
        self.0.shutdown.cancel();
    }

    /// Whether [`Executions::begin_shutdown`] has been called: a run that ends from now on
    /// may have been ended by the shutdown, so what it found says nothing about the target
    /// or the host.
    pub fn shutting_down(&self) -> bool {
        self.0.shutdown.is_cancelled()
    }

    /// [`Executions::begin_shutdown`], then wait (at most `bound`) until every execution's
    /// termination sweep has finished and its descendants are reaped; remove the cgroups.
    pub async fn shutdown(&self, bound: Duration) {
        self.begin_shutdown();
        let end = tokio::time::Instant::now() + bound;
        loop {
            let notified = self.0.idle.notified();
            if self.0.running.load(Ordering::SeqCst) == 0 {
                break;
            }
            if tokio::time::timeout_at(end, notified).await.is_err() {
                tracing::warn!("executions still running at exit");
                break;
            }
        }
        if let Some(warm) = self.warm() {
            warm::stop(warm).await;
        }
        reap::reap_orphans();
        if let Some(cgroups) = &self.0.limits.cgroups {
            cgroups.remove();
        }
    }
}

struct Running(Arc<State>);

impl Running {
    fn enter(state: &Arc<State>) -> Running {
        state.running.fetch_add(1, Ordering::SeqCst);
        Running(Arc::clone(state))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.0.running.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

/// How long [`Executions::shutdown`] may take: the termination grace, the readers' grace and the
/// sweep, with room to spare.
pub const SHUTDOWN_BOUND: Duration = Duration::from_secs(5);

#[cfg(test)]
mod tests;
