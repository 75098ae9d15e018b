//! The write bound: a write nobody confirms writes only where the call may write, for
//! the run's whole life, enforced by the kernel.
//!
//! A write admitted under `--allow-paths` or `--write-envs` is judged on its argv, and
//! judged again right before the child starts; but conda opens the paths seconds later
//! (start-up, solve), and an agent with file tools in an allowed directory can swap a
//! directory of a judged path for a symlink meanwhile. So the server makes, right after
//! that last check and before the fork, a Landlock ruleset that handles every
//! write-type access (writing and truncating files, making and removing entries of every
//! kind, reparenting) and grants them only beneath the directories the call may write
//! ([`Writable`]): each opened then (a path the gates judged without following a symlink,
//! `RESOLVE_NO_SYMLINKS`, so the rule holds the very directory that was judged). The same
//! ruleset scopes signals and abstract unix sockets to the run (Landlock ABI 6). Landlock
//! does not see metadata (mode, owner, times, extended attributes) nor what a device node
//! opens, so the child also gets the walls of `walls.rs` where mount namespaces work (the
//! read-only sandbox is active): every mount read-only, `nodev`, `nosuid` but the places,
//! the call's own `/dev`, no capability; and the read-only sandbox's unix-socket filter.
//! Each run writes its temporary files in a directory of its own, made by the server and
//! removed with the bound. Everything the child starts inherits all of it: reads,
//! execution and the network stay allowed, a write anywhere else fails (`EACCES`,
//! `EROFS`), whatever symlink leads there. Hand-written like `scope.rs`: the restriction
//! must be raw system calls in the forked child.

#[cfg(target_os = "linux")]
pub(crate) mod landlock;
mod places;
pub use places::*;

use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::Arc;

use crate::host::platform;

/// A ruleset, and the walls, made for one call (cheap to clone).
#[derive(Clone, Debug)]
pub struct Bound(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    ruleset: OwnedFd,
    /// The kernel's Landlock ABI the ruleset was made for.
    abi: i64,
    /// The mount namespace (`None`: where mount namespaces do not work here).
    walls: Option<platform::Walls>,
    /// The unix-socket filter, installed last.
    seccomp: Option<Arc<platform::SeccompFilter>>,
    /// The run's own temporary directory, removed when the bound goes.
    tmpdir: Option<crate::host::scratch::Scratch>,
    /// The child's `CONDA_PKGS_DIRS`: the run's private package cache first, the
    /// operator's caches (read-only to the run) after it.
    pkgs_dirs: Option<std::ffi::OsString>,
    /// The new targets the server made empty for the run ([`NEW_TARGETS`]).
    new_targets: Vec<PathBuf>,
    /// Every directory the server made for the run, outermost first.
    made: Vec<PathBuf>,
}

/// The child's variable naming (a JSON list) the new targets the server made empty right
/// before the run: a confirmed run's wrapper takes such a directory, still empty, for
/// the absent target the question saw (host/bind/program/plan.py `_state`).
pub const NEW_TARGETS: &str = "CCM_NEW_TARGETS";

/// What a bound is made with besides its places.
#[derive(Debug, Default)]
pub struct Setup {
    /// The server's `(uid, gid)` when mount namespaces work here (the read-only sandbox
    /// is active): the child gets the walls. `None`: Landlock, privileges and the filter.
    pub namespaces: Option<(u32, u32)>,
    pub(crate) seccomp: Option<Arc<platform::SeccompFilter>>,
    /// The run's own temporary directory (also one of the places).
    pub tmpdir: Option<crate::host::scratch::Scratch>,
    /// The run's working directory (canonical).
    pub cwd: Option<PathBuf>,
    /// The child's `CONDA_PKGS_DIRS` ([`private_cache`]).
    pub pkgs_dirs: Option<std::ffi::OsString>,
    /// The new targets made empty for the run ([`make_new_target`]).
    pub new_targets: Vec<PathBuf>,
    /// Every directory made for the run ([`make_new_target`]), outermost first.
    pub made: Vec<PathBuf>,
}

/// One place a bounded call may write beneath.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Writable {
    pub path: PathBuf,
    /// Judged by the gates (canonical): opened without following any symlink, and a
    /// place that does not exist yet is bounded by its nearest existing directory. Else
    /// one of the operator's own places, opened as conda would open it (symlinks
    /// followed), skipped when missing.
    pub judged: bool,
}

/// A judged place could not be opened as it was judged (a directory of it is a symlink
/// now, or it vanished): the call does not run.
#[derive(Debug, thiserror::Error)]
#[error("a path of the call changed after it was judged")]
pub struct Changed;

/// Whether the kernel can bound writes (its Landlock ABI), or why not.
pub fn support() -> Result<i64, String> {
    if off_for_tests() {
        return Err("turned off for a test (CCM_TEST_NO_WRITE_BOUND)".into());
    }
    platform::write_bound_support()
}

/// Debug builds only: `CCM_TEST_NO_WRITE_BOUND=1` makes the server behave as on a kernel
/// without Landlock, so that tests show what the bound stops. Release builds ignore it.
fn off_for_tests() -> bool {
    cfg!(debug_assertions) && std::env::var_os("CCM_TEST_NO_WRITE_BOUND").is_some_and(|v| v == "1")
}

impl Bound {
    /// The ruleset granting write-type access beneath `writable` only (`abi` from
    /// [`support`]), and the walls of `setup`. Made in the server, before the fork.
    pub fn make(abi: i64, writable: &[Writable], setup: Setup) -> Result<Bound, std::io::Error> {
        platform::make_write_bound(abi, writable, setup)
    }

    /// Whether the run gets the mount namespace (else Landlock, privileges and filter).
    pub fn walled(&self) -> bool {
        self.0.walls.is_some()
    }

    /// Every directory the server made for the run (new targets and the directories
    /// above them), outermost first.
    pub fn made(&self) -> &[PathBuf] {
        &self.0.made
    }
}

/// Make the new target `target` (judged, canonical), empty, with the missing directories
/// above it, as conda's `create` would, never through a symlink: the directories made
/// here, outermost first ([`Changed`] when a symlink is on the way).
pub fn make_new_target(target: &std::path::Path) -> Result<Vec<PathBuf>, std::io::Error> {
    platform::make_new_target(target)
}

/// Remove `target`, a directory [`make_new_target`] made, when it is still empty,
/// not through a symlink.
pub fn remove_unused_target(target: &std::path::Path) {
    platform::remove_unused_target(target)
}

/// Whether `error` (from [`Bound::make`]) says a judged path changed.
pub fn changed(error: &std::io::Error) -> bool {
    error.get_ref().is_some_and(|e| e.is::<Changed>())
}

impl super::Sandbox {
    /// What a write bound takes from the read-only sandbox: the server's ids when the
    /// sandbox is active (mount namespaces work here), and its unix-socket filter (one is
    /// built when the sandbox has none).
    pub fn bound_setup(&self) -> Setup {
        let facts = self.facts.as_ref();
        let namespaces = (self.state == super::State::Active && !unwalled_for_tests())
            .then(|| facts.map(|f| f.ids))
            .flatten();
        let seccomp = facts
            .and_then(|f| f.seccomp.clone())
            .or_else(|| platform::SeccompFilter::new().map(Arc::new));
        Setup {
            namespaces,
            seccomp,
            ..Setup::default()
        }
    }
}

/// Debug builds only: `CCM_TEST_NO_BOUND_WALLS=1` makes bounded writes run without the
/// walls (Landlock, the capability drop and the filter only), as where mount namespaces
/// do not work, so that the benchmark measures what the walls cost. Release builds
/// ignore it.
fn unwalled_for_tests() -> bool {
    cfg!(debug_assertions) && std::env::var_os("CCM_TEST_NO_BOUND_WALLS").is_some_and(|v| v == "1")
}
