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
    pub const WRITE_FILE: u64 = 1 << 1;
    pub const REMOVE_DIR: u64 = 1 << 4;
    pub const REMOVE_FILE: u64 = 1 << 5;
    pub const MAKE_CHAR: u64 = 1 << 6;
    pub const MAKE_DIR: u64 = 1 << 7;
    pub const MAKE_REG: u64 = 1 << 8;
    pub const MAKE_SOCK: u64 = 1 << 9;
    pub const MAKE_FIFO: u64 = 1 << 10;
    pub const MAKE_BLOCK: u64 = 1 << 11;
    pub const MAKE_SYM: u64 = 1 << 12;
    pub const REFER: u64 = 1 << 13;
    pub const TRUNCATE: u64 = 1 << 14;

    /// Every write-type access the kernel's ABI `abi` knows.
    pub fn all(abi: i64) -> u64 {
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
    pub fn file(abi: i64) -> u64 {
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
    }
    if let Some(pkgs_dirs) = &bound.0.pkgs_dirs {
        command.env(PKGS_DIRS, pkgs_dirs);
    }
    // A confirmed run's wrapper un-shares its targets again before each transaction
    // (host/bind/program/records.py `unshare`).
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

/// conda's package caches by environment (conda/base/context.py:793-800 `pkgs_dirs`; the
/// variable's caches come first, before any a condarc file names).
pub const PKGS_DIRS: &str = "CONDA_PKGS_DIRS";

/// The run's own package cache, `pkgs/` in its temporary directory `tmpdir`, made with
/// the file by which conda knows a writable cache (`urls.txt`,
/// conda/core/package_cache_data.py:347-356 `_check_writable`), and the child's
/// `CONDA_PKGS_DIRS`: this cache first, then the operator's `caches`. No shared package
/// cache is a place of a bounded write (an environment made by conda is hard links to its
/// cache: a write there is a write to every environment linked from it, and the next
/// install of a changed extracted package runs what was added), so the operator's caches
/// are read-only to the run: conda links (under the walls: copies) from the packages
/// already extracted there and downloads and extracts the others into the first writable
/// cache, this one (:600-700 `make_actions_for_record`, :218-239 `first_writable`). Its
/// repodata cache (conda/gateways/repodata/__init__.py:988-991 `create_cache_dir`: the
/// first writable cache's `cache/`) is seeded with a copy of the first operator cache's
/// (its regular files; a copy, so nothing the run writes there reaches the operator's).
/// Removed with the temporary directory after the run.
pub fn private_cache(
    tmpdir: &Path,
    inputs: &super::Inputs,
    root_prefix: Option<&Path>,
) -> std::io::Result<(PathBuf, std::ffi::OsString)> {
    let caches = pkgs_dirs(inputs, root_prefix);
    let private = tmpdir.join("pkgs");
    std::fs::create_dir(&private)?;
    std::fs::write(private.join("urls.txt"), b"")?;
    let seeded = private.join("cache");
    std::fs::create_dir(&seeded)?;
    if let Some(Ok(entries)) = caches
        .iter()
        .find(|c| c.join("cache").is_dir())
        .map(|c| std::fs::read_dir(c.join("cache")))
    {
        for entry in entries.flatten() {
            // Regular files only, not followed through a symlink (`file_type` is lstat's).
            if entry.file_type().is_ok_and(|t| t.is_file()) {
                let _ = std::fs::copy(entry.path(), seeded.join(entry.file_name()));
            }
        }
    }
    // conda splits the variable at commas (a `SequenceParameter`'s `string_delimiter`,
    // conda/common/configuration.py:1104; conda/base/context.py:331-334).
    let mut joined = private.clone().into_os_string();
    if joined.as_encoded_bytes().contains(&b',') {
        return Err(std::io::Error::other("a package cache path holds a comma"));
    }
    // The operator's value as conda reads it (`~`, `$VAR`), else conda's defaults, which
    // the variable replaces (conda/base/context.py:793-800).
    match &inputs.conda_pkgs_dirs {
        Some(value) => {
            joined.push(",");
            joined.push(value);
        }
        None => {
            for cache in &caches {
                joined.push(",");
                joined.push(cache);
            }
        }
    }
    Ok((private, joined))
}

/// Package caches: tarballs, extracted packages, `urls.txt`, the repodata cache
/// `<pkgs_dir>/cache`, the trash. `CONDA_PKGS_DIRS` replaces `<root>/pkgs` and
/// `~/.conda/pkgs` (conda/base/context.py:793-800 `pkgs_dirs`;
/// conda/gateways/repodata/__init__.py `create_cache_dir`).
pub fn pkgs_dirs(inputs: &super::Inputs, root_prefix: Option<&Path>) -> Vec<PathBuf> {
    match &inputs.conda_pkgs_dirs {
        // Split at commas, as conda does (conda/common/configuration.py:1104, :234).
        Some(dirs) => dirs
            .to_string_lossy()
            .split(',')
            .map(|p| PathBuf::from(p.trim()))
            .filter(|p| p.is_absolute())
            .collect(),
        None => {
            let dot_conda = inputs.home.as_ref().map(|h| h.join(".conda"));
            root_prefix
                .map(|r| r.join("pkgs"))
                .into_iter()
                .chain(dot_conda.map(|d| d.join("pkgs")))
                .collect()
        }
    }
}

/// conda's user registry of environments, `~/.conda/environments.txt`
/// (conda/core/envs_manager.py:26 `get_user_environments_txt_file`), made empty when it
/// does not exist yet, as conda would make it when it registers an environment
/// (:69-81: `os.makedirs` of `~/.conda`, then `open(…, "a")`): a bounded write may
/// write the file but not create it (its directory holds the package cache and
/// environments), so without this a `create` could not register its environment.
/// Nothing is made when `HOME` is not a directory.
pub fn make_registry(inputs: &super::Inputs) {
    let Some(home) = inputs.home.as_ref().filter(|h| h.is_dir()) else {
        return;
    };
    let dot_conda = home.join(".conda");
    if std::fs::symlink_metadata(&dot_conda).is_err() && std::fs::create_dir(&dot_conda).is_err() {
        return;
    }
    let _ = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(dot_conda.join("environments.txt"));
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

/// What conda itself writes for a bounded write, besides the call's own places (conda
/// 26.7.1's source cited for each). `named`: the call was not narrowed to its target
/// environments by `--write-envs`, so the places a call may name by name rather than by
/// path stay writable too (`--allow-paths` judges paths only): the root prefix (the
/// default target, `base`), the envs directories (`-n NAME`) and the user's `.condarc`
/// (`conda config` without `--file`).
pub fn conda_places(
    inputs: &super::Inputs,
    root_prefix: Option<&Path>,
    named: bool,
) -> Vec<Writable> {
    let dot_conda = inputs.home.as_ref().map(|h| h.join(".conda"));
    // No package cache: the run has its own ([`private_cache`], in its temporary
    // directory), the operator's are read-only to it.
    let mut places: Vec<PathBuf> = Vec::new();
    // The environment registry, appended to when an environment is made
    // (conda/core/envs_manager.py:36 `get_user_environments_txt_file`, :81 `open(…, "a")`;
    // a registry it cannot write is a warning, :84-92).
    places.extend(dot_conda.as_ref().map(|d| d.join("environments.txt")));
    // conda's user cache: the notices cache (conda/notices/cache.py:83-86, platformdirs'
    // `user_cache_dir`: `$XDG_CACHE_HOME/conda`, else `~/.cache/conda`), also where
    // conda-completion keeps its manifest.
    let cache = inputs
        .xdg_cache_home
        .clone()
        .or_else(|| inputs.home.as_ref().map(|h| h.join(".cache")));
    places.extend(cache.map(|c| c.join("conda")));
    // Temporary files: link scripts run through a wrapper script (conda/utils.py:288
    // `Utf8NamedTemporaryFile`), `.pyc` compilation lists
    // (conda/gateways/disk/create.py:408 `tempfile.mkstemp`).
    places.push(inputs.temp_dir.clone());
    // `subprocess.DEVNULL` opens `/dev/null` for writing (conda/core/portability.py:149).
    places.push(PathBuf::from("/dev/null"));
    // POSIX semaphores of the extraction pool's `multiprocessing` queues
    // (conda/core/package_cache_data.py:874 `ProcessPoolExecutor`); under the walls a
    // private tmpfs, not the host's (`walls.rs`).
    places.push(PathBuf::from("/dev/shm"));
    if named {
        places.extend(
            named_places(inputs, root_prefix)
                .into_iter()
                .map(|w| w.path),
        );
    }
    places.dedup();
    places
        .into_iter()
        .map(|path| Writable {
            path,
            judged: false,
        })
        .collect()
}

/// The places a call names by name rather than by path, which `--allow-paths` does not
/// judge (conda 26.7.1), for a command without targets: the envs directories (`-n
/// NAME`), the user's `.condarc` (`conda config` without `--file`) and the root prefix's
/// `.condarc` (`--system`); never the root prefix as a whole.
pub fn named_places(inputs: &super::Inputs, root_prefix: Option<&Path>) -> Vec<Writable> {
    let dot_conda = inputs.home.as_ref().map(|h| h.join(".conda"));
    let mut places: Vec<PathBuf> = Vec::new();
    // Never the root prefix as a whole (code planted there, a `.pth` file, runs in the
    // server's helpers): its `.condarc`, which `conda config --system` writes
    // (conda/base/context.py `sys_rc_path`).
    places.extend(root_prefix.map(|r| r.join(".condarc")));
    // Environments named by `-n` (conda/base/context.py:787 `envs_dirs`: the
    // configured ones, `<root>/envs`, `~/.conda/envs`).
    places.extend(
        inputs
            .conda_envs_dirs
            .iter()
            .flat_map(std::env::split_paths),
    );
    places.extend(root_prefix.map(|r| r.join("envs")));
    places.extend(dot_conda.as_ref().map(|d| d.join("envs")));
    // `conda config` without `--file` (conda/base/context.py:135 `user_rc_path`).
    places.extend(inputs.home.as_ref().map(|h| h.join(".condarc")));
    places
        .into_iter()
        .map(|path| Writable {
            path,
            judged: false,
        })
        .collect()
}
