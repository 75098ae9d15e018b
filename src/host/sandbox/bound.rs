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

mod places;
pub use places::*;

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A ruleset, and the walls, made for one call (cheap to clone).
#[derive(Clone, Debug)]
pub struct Bound(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    ruleset: OwnedFd,
    /// The kernel's Landlock ABI the ruleset was made for.
    abi: i64,
    /// The mount namespace (`None`: where mount namespaces do not work here).
    walls: Option<super::walls::Walls>,
    /// The unix-socket filter, installed last.
    seccomp: Option<Arc<crate::host::platform::SeccompFilter>>,
    /// The run's own temporary directory, removed when the bound goes.
    tmpdir: Option<tempfile::TempDir>,
    /// The child's `CONDA_PKGS_DIRS`: the run's private package cache first, the
    /// operator's caches (read-only to the run) after it.
    pkgs_dirs: Option<std::ffi::OsString>,
}

/// What a bound is made with besides its places.
#[derive(Debug, Default)]
pub struct Setup {
    /// The server's `(uid, gid)` when mount namespaces work here (the read-only sandbox
    /// is active): the child gets the walls. `None`: Landlock, privileges and the filter.
    pub namespaces: Option<(u32, u32)>,
    pub(crate) seccomp: Option<Arc<crate::host::platform::SeccompFilter>>,
    /// The run's own temporary directory (also one of the places).
    pub tmpdir: Option<tempfile::TempDir>,
    /// The run's working directory (canonical).
    pub cwd: Option<PathBuf>,
    /// The child's `CONDA_PKGS_DIRS` ([`private_cache`]).
    pub pkgs_dirs: Option<std::ffi::OsString>,
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

/// The write-type accesses the bound handles, and their Landlock ABI
/// (include/uapi/linux/landlock.h): writing a file, removing a directory or a file,
/// making a character device, directory, regular file, socket, FIFO, block device or
/// symlink (ABI 1), reparenting (`REFER`, ABI 2), truncating (ABI 3). Reading and
/// executing are not handled, so they stay allowed everywhere.
#[cfg(target_os = "linux")]
mod access {
    pub(super) const WRITE_FILE: u64 = 1 << 1;
    pub(super) const REMOVE_DIR: u64 = 1 << 4;
    pub(super) const REMOVE_FILE: u64 = 1 << 5;
    pub(super) const MAKE_CHAR: u64 = 1 << 6;
    pub(super) const MAKE_DIR: u64 = 1 << 7;
    pub(super) const MAKE_REG: u64 = 1 << 8;
    pub(super) const MAKE_SOCK: u64 = 1 << 9;
    pub(super) const MAKE_FIFO: u64 = 1 << 10;
    pub(super) const MAKE_BLOCK: u64 = 1 << 11;
    pub(super) const MAKE_SYM: u64 = 1 << 12;
    pub(super) const REFER: u64 = 1 << 13;
    pub(super) const TRUNCATE: u64 = 1 << 14;

    /// Every write-type access the kernel's ABI `abi` knows.
    pub(super) fn all(abi: i64) -> u64 {
        let mut all = WRITE_FILE
            | REMOVE_DIR
            | REMOVE_FILE
            | MAKE_CHAR
            | MAKE_DIR
            | MAKE_REG
            | MAKE_SOCK
            | MAKE_FIFO
            | MAKE_BLOCK
            | MAKE_SYM;
        if abi >= 2 {
            all |= REFER;
        }
        if abi >= 3 {
            all |= TRUNCATE;
        }
        all
    }

    /// Those that apply to a file (a rule on a file may grant only these).
    pub(super) fn file(abi: i64) -> u64 {
        all(abi) & (WRITE_FILE | TRUNCATE)
    }
}

/// `struct landlock_ruleset_attr` (include/uapi/linux/landlock.h; `scoped` from ABI 6,
/// where the size given says the kernel knows the field).
#[cfg(target_os = "linux")]
#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
    scoped: u64,
}

/// `struct landlock_path_beneath_attr` (packed).
#[cfg(target_os = "linux")]
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// `LANDLOCK_RULE_PATH_BENEATH`.
#[cfg(target_os = "linux")]
const RULE_PATH_BENEATH: u32 = 1;

/// Whether the kernel can bound writes (its Landlock ABI), or why not.
pub fn support() -> Result<i64, String> {
    #[cfg(target_os = "linux")]
    {
        if off_for_tests() {
            return Err("turned off for a test (CCM_TEST_NO_WRITE_BOUND)".into());
        }
        match super::scope::abi() {
            0 => Err("the kernel has no Landlock (Linux < 5.13, or not enabled at boot)".into()),
            abi => Ok(abi),
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        Err("Landlock is Linux's".into())
    }
}

/// Debug builds only: `CCM_TEST_NO_WRITE_BOUND=1` makes the server behave as on a kernel
/// without Landlock, so that tests show what the bound stops. Release builds ignore it.
#[cfg(target_os = "linux")]
fn off_for_tests() -> bool {
    cfg!(debug_assertions) && std::env::var_os("CCM_TEST_NO_WRITE_BOUND").is_some_and(|v| v == "1")
}

impl Bound {
    /// The ruleset granting write-type access beneath `writable` only (`abi` from
    /// [`support`]), and the walls of `setup`. Made in the server, before the fork.
    #[cfg(target_os = "linux")]
    pub fn make(abi: i64, writable: &[Writable], setup: Setup) -> Result<Bound, std::io::Error> {
        // Kernels before ABI 6 take the larger attribute as long as what they do not
        // know is zero.
        let ruleset = super::scope::create(&RulesetAttr {
            handled_access_fs: access::all(abi),
            handled_access_net: 0,
            scoped: super::scope::scopes(),
        })?;
        let mut mounts = Vec::new();
        for place in writable {
            let opened = if place.judged {
                Some(open_judged(&place.path)?)
            } else {
                open_operators(&place.path)
            };
            if let Some((dir, is_dir, at)) = opened {
                let allowed = if is_dir {
                    access::all(abi)
                } else {
                    access::file(abi)
                };
                add_rule(&ruleset, &dir, allowed)?;
                let stat = rustix::fs::fstat(&dir)?;
                mounts.push((at, place.judged, stat.st_dev, stat.st_ino));
            }
        }
        // A place that is `/` (`--allow-paths /`) leaves nothing read-only to wall off,
        // and a clone attached over the root would not be seen below it.
        let everything = mounts.iter().any(|m| m.0 == Path::new("/"));
        let walls = match setup.namespaces.filter(|_| !everything) {
            Some(ids) => Some(
                super::walls::Walls::new(ids, &mounts, setup.cwd.as_deref())
                    .ok_or_else(|| std::io::Error::other("too many places to bound"))?,
            ),
            None => None,
        };
        Ok(Bound(Arc::new(Inner {
            ruleset,
            abi,
            walls,
            seccomp: setup.seccomp,
            tmpdir: setup.tmpdir,
            pkgs_dirs: setup.pkgs_dirs,
        })))
    }

    #[cfg(not(target_os = "linux"))]
    pub fn make(_abi: i64, _writable: &[Writable], _setup: Setup) -> Result<Bound, std::io::Error> {
        Err(std::io::Error::other("Landlock is Linux's"))
    }

    /// Whether the run gets the mount namespace (else Landlock, privileges and filter).
    pub fn walled(&self) -> bool {
        self.0.walls.is_some()
    }
}

/// One path-beneath rule.
#[cfg(target_os = "linux")]
fn add_rule(ruleset: &OwnedFd, place: &OwnedFd, allowed: u64) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let attr = PathBeneathAttr {
        allowed_access: allowed,
        parent_fd: place.as_raw_fd(),
    };
    // SAFETY: valid descriptors and a valid attribute of the rule type given.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset.as_raw_fd(),
            RULE_PATH_BENEATH,
            &attr as *const PathBeneathAttr,
            0u32,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// A judged (canonical) place, opened without following any symlink on the way; one that
/// does not exist yet, its nearest existing ancestor. A symlink anywhere on the way means
/// the path changed since it was judged.
#[cfg(target_os = "linux")]
fn open_judged(path: &Path) -> Result<(OwnedFd, bool, PathBuf), std::io::Error> {
    use rustix::fs::{Mode, OFlags, ResolveFlags, openat2};
    let flags = OFlags::PATH | OFlags::CLOEXEC | OFlags::NOFOLLOW;
    let mut at = path;
    loop {
        match openat2(
            rustix::fs::CWD,
            at,
            flags,
            Mode::empty(),
            ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
        ) {
            Ok(fd) => {
                let stat = rustix::fs::fstat(&fd)?;
                let kind = rustix::fs::FileType::from_raw_mode(stat.st_mode);
                if kind == rustix::fs::FileType::Symlink {
                    return Err(Changed.into_io());
                }
                return Ok((
                    fd,
                    kind == rustix::fs::FileType::Directory,
                    at.to_path_buf(),
                ));
            }
            Err(rustix::io::Errno::NOENT) => match at.parent() {
                Some(parent) => at = parent,
                None => return Err(Changed.into_io()),
            },
            Err(rustix::io::Errno::LOOP | rustix::io::Errno::XDEV | rustix::io::Errno::NOTDIR) => {
                return Err(Changed.into_io());
            }
            Err(other) => return Err(other.into()),
        }
    }
}

/// One of the operator's own places, as conda opens it; `None` when missing.
#[cfg(target_os = "linux")]
fn open_operators(path: &Path) -> Option<(OwnedFd, bool, PathBuf)> {
    use rustix::fs::{Mode, OFlags, open};
    let fd = open(path, OFlags::PATH | OFlags::CLOEXEC, Mode::empty()).ok()?;
    let stat = rustix::fs::fstat(&fd).ok()?;
    let kind = rustix::fs::FileType::from_raw_mode(stat.st_mode);
    Some((
        fd,
        kind == rustix::fs::FileType::Directory,
        path.to_path_buf(),
    ))
}

impl Changed {
    fn into_io(self) -> std::io::Error {
        std::io::Error::other(self)
    }
}

/// Whether `error` (from [`Bound::make`]) says a judged path changed.
pub fn changed(error: &std::io::Error) -> bool {
    error.get_ref().is_some_and(|e| e.is::<Changed>())
}

/// Put the child of `command` under `bound`: its own `TMPDIR`; in the `pre_exec` hook the
/// walls (or, without them, no capability for a root child), `no_new_privs` (which
/// Landlock needs of an unprivileged process; nothing it starts gains a privilege through
/// `exec` either), a new domain of the ruleset, then the unix-socket filter. Only system
/// calls in the hook.
#[cfg(target_os = "linux")]
pub fn install(command: &mut tokio::process::Command, bound: &Bound) {
    if let Some(tmpdir) = &bound.0.tmpdir {
        command.env(super::TMPDIR, tmpdir.path());
        command.env("XDG_CACHE_HOME", tmpdir.path().join(USER_CACHE));
    }
    if let Some(pkgs_dirs) = &bound.0.pkgs_dirs {
        command.env(PKGS_DIRS, pkgs_dirs);
    }
    // A confirmed run's wrapper un-shares its targets again before each transaction
    // (host/bind/program/shared.py `unshare`).
    command.env("CCM_WRITE_BOUND", "1");
    let inner = Arc::clone(&bound.0);
    // SAFETY: the hook only makes system calls on data and descriptors made before the
    // fork (no allocation, no locks).
    unsafe {
        command.pre_exec(move || {
            use std::os::fd::AsFd;
            match &inner.walls {
                Some(walls) => {
                    super::walls::enter(walls)?;
                    // The run's private `/dev/shm` (a tmpfs the walls mounted) is another
                    // directory than the host's the ruleset grants: grant it too.
                    let shm = rustix::fs::open(
                        c"/dev/shm",
                        rustix::fs::OFlags::PATH
                            | rustix::fs::OFlags::DIRECTORY
                            | rustix::fs::OFlags::NOFOLLOW
                            | rustix::fs::OFlags::CLOEXEC,
                        rustix::fs::Mode::empty(),
                    )?;
                    add_rule(&inner.ruleset, &shm, access::all(inner.abi))?;
                }
                None if rustix::process::getuid().is_root() => {
                    super::enter::drop_privileges()?;
                }
                None => {}
            }
            rustix::thread::set_no_new_privs(true)?;
            super::scope::restrict(inner.ruleset.as_fd())?;
            match &inner.seccomp {
                Some(filter) => filter.install(),
                None => Ok(()),
            }
        });
    }
}

#[cfg(not(target_os = "linux"))]
pub fn install(_command: &mut tokio::process::Command, _bound: &Bound) {}

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
            .or_else(|| crate::host::platform::SeccompFilter::new().map(Arc::new));
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
