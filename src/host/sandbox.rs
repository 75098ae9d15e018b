//! The read-only sandbox: children of calls that need no `--allow-write` cannot write.
//!
//! Every execution the policy judges read-only, and every one admitted by `--allow-exec`
//! without `--allow-write`, runs in a private mount namespace (plus a user namespace when
//! the server is not root) in which every mount is read-only, except:
//!
//! - a private tmpfs, fresh for each call, over `/dev/shm` (POSIX shared memory and
//!   semaphores; where there is none, over an empty directory the server makes): the
//!   child's `TMPDIR` points into it, and it holds the upper layers below;
//! - the caches conda legitimately updates on reads, bound writable from the real
//!   filesystem so that they keep working across calls: the repodata cache
//!   `<pkgs_dir>/cache` of every package cache directory, and the notices cache
//!   (`$XDG_CACHE_HOME/conda/notices`, else `~/.cache/conda/notices`);
//! - copy-on-write overlays whose upper layer lies in the call's tmpfs (writes succeed,
//!   then vanish with the call) on `~/.conda`, every envs and package cache directory and
//!   every other known environment's `conda-meta`, so that conda's writability probes
//!   (`conda-meta/history`, `<pkgs_dir>/urls.txt`, `<envs_dir>/.conda_envs_dir_test`)
//!   see what they see outside, with the caller's own permissions.
//!
//! The namespace is set up in the forked child before `exec` ([`install`]): everything
//! is prepared in the parent ([`Sandbox::plan`]), the child only makes raw system calls.
//! Setting up the namespaces, the read-only remount and the tmpfs are mandatory (the child
//! does not start when one fails); overlays and writable binds are best effort (a failure
//! leaves that directory read-only). A child cannot undo the sandbox: a non-root child has
//! no capabilities after `exec`, a root child loses the dangerous ones from its bounding
//! set, and a user namespace either makes locks the read-only mounts. At startup [`Sandbox::probe`] runs one trivial child
//! in the sandbox; when that fails the server says why and runs children as before.
//!
//! Linux ≥ 5.12 (`mount_setattr`); overlays in user namespaces need Linux ≥ 5.11.

use std::ffi::{CString, OsString};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};

use crate::tools::policy::Classification;

/// Most writable directories inside one overlay.
const MAX_KEEPS: usize = 8;

/// The environment variable that selects where children's `TMPDIR` points.
pub const TMPDIR: &str = "TMPDIR";

/// Where the sandbox stands on this machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum State {
    /// Read-only calls run sandboxed.
    Active,
    /// Namespaces are unavailable here (the reason, one line); children run unsandboxed.
    Unavailable(String),
    /// The operator turned the sandbox off (`--no-sandbox`).
    Disabled,
}

/// Does this verdict run sandboxed? Every read-only verdict, and, on a server without
/// `--allow-write`, every other call that needs no `--allow-write` (admitted by
/// `--allow-exec` alone: it may run programs, not write).
pub fn applies(class: &Classification, allow_write: bool) -> bool {
    class.read_only || (!class.requires_write && !allow_write)
}

/// The server's sandbox: its state, and what it needs to plan a call.
#[derive(Debug)]
pub struct Sandbox {
    state: State,
    facts: Option<Facts>,
}

/// Everything fixed at startup.
#[derive(Debug)]
struct Facts {
    /// Where the per-call tmpfs is mounted.
    base: Base,
    /// `(uid, gid)` to map in a user namespace; `None` when the server is root.
    ids: Option<(u32, u32)>,
    home: Option<PathBuf>,
    /// Extra package cache directories (`CONDA_PKGS_DIRS`).
    pkgs_dirs: Vec<PathBuf>,
    /// Extra environment directories (`CONDA_ENVS_PATH`, `CONDA_ENVS_DIRS`).
    envs_dirs: Vec<PathBuf>,
    /// The notices cache, when it exists.
    notices: Option<PathBuf>,
}

/// Where the per-call tmpfs goes: over `/dev/shm` (which then also serves as the
/// call's private shared memory), or, where there is none, over an empty directory the
/// server makes (and removes again when its sandbox goes away).
#[derive(Debug)]
enum Base {
    Shm,
    Dir(PathBuf),
}

const SHM: &str = "/dev/shm";

impl Base {
    fn path(&self) -> &Path {
        match self {
            Base::Shm => Path::new(SHM),
            Base::Dir(path) => path,
        }
    }
}

impl Drop for Base {
    fn drop(&mut self) {
        if let Base::Dir(path) = self {
            let _ = std::fs::remove_dir(path);
        }
    }
}

/// What the probe and the plans read from the server's environment (the children inherit
/// the same environment, so they see the same directories).
#[derive(Clone, Debug, Default)]
pub struct Inputs {
    pub home: Option<PathBuf>,
    pub xdg_cache_home: Option<PathBuf>,
    pub conda_pkgs_dirs: Option<OsString>,
    pub conda_envs_dirs: Vec<OsString>,
    pub temp_dir: PathBuf,
}

impl Inputs {
    /// From this process's environment.
    pub fn from_process() -> Self {
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        Inputs {
            home: var("HOME").map(PathBuf::from),
            xdg_cache_home: var("XDG_CACHE_HOME").map(PathBuf::from),
            conda_pkgs_dirs: var("CONDA_PKGS_DIRS"),
            conda_envs_dirs: ["CONDA_ENVS_PATH", "CONDA_ENVS_DIRS"]
                .into_iter()
                .filter_map(var)
                .collect(),
            temp_dir: std::env::temp_dir(),
        }
    }
}

/// One call's sandbox, prepared before the fork (cheap to clone).
#[derive(Clone, Debug)]
pub struct Plan(Arc<Prepared>);

#[derive(Debug)]
struct Prepared {
    /// `setgroups`, `uid_map`, `gid_map` contents when a user namespace is needed.
    ids: Option<(Vec<u8>, Vec<u8>)>,
    base: CString,
    /// tmpfs options of the base.
    base_options: CString,
    /// Directories to make in the tmpfs, parents first.
    mkdirs: Vec<CString>,
    tmpdir: PathBuf,
    overlays: Vec<Overlay>,
    writable: Vec<CString>,
}

#[derive(Debug)]
struct Overlay {
    target: CString,
    options: CString,
    /// The same with `userxattr` (needed for overlays inside a user namespace).
    options_userxattr: CString,
    /// Subdirectories of `target` that stay the real, writable directories (at most
    /// [`MAX_KEEPS`]).
    keeps: Vec<CString>,
}

impl Plan {
    /// The child's `TMPDIR`.
    pub fn tmpdir(&self) -> &Path {
        &self.0.tmpdir
    }
}

impl Sandbox {
    /// A sandbox the operator turned off.
    pub fn disabled() -> Sandbox {
        Sandbox {
            state: State::Disabled,
            facts: None,
        }
    }

    /// An unavailable sandbox.
    pub fn unavailable(reason: impl Into<String>) -> Sandbox {
        Sandbox {
            state: State::Unavailable(reason.into()),
            facts: None,
        }
    }

    /// Prepare the sandbox and check that it works by running `program args` in it once
    /// (it must exit 0). Makes the base directory and the notices cache directory.
    pub async fn probe(inputs: &Inputs, program: &Path, args: &[&str]) -> Sandbox {
        if !cfg!(target_os = "linux") {
            return Sandbox::unavailable("the sandbox needs Linux mount namespaces");
        }
        let facts = match Facts::new(inputs) {
            Ok(facts) => facts,
            Err(reason) => return Sandbox::unavailable(reason),
        };
        let mut sandbox = Sandbox {
            state: State::Active,
            facts: Some(facts),
        };
        let Some(plan) = sandbox.plan(None) else {
            return Sandbox::unavailable("the sandbox could not be prepared");
        };
        let spec = crate::host::exec::Spec {
            program: program.to_path_buf(),
            args: args.iter().map(Into::into).collect(),
            cwd: None,
            stdin: None,
            timeout: std::time::Duration::from_secs(30),
            stdout_limit: 4096,
            stderr_limit: 4096,
            env_remove: Vec::new(),
            limits: crate::host::exec::Limits::current(),
            sandbox: Some(plan),
        };
        let cancel = tokio_util::sync::CancellationToken::new();
        match crate::host::exec::run(&spec, &cancel).await {
            Ok(outcome) if outcome.exit_code == Some(0) => sandbox,
            Ok(outcome) => {
                sandbox.state = State::Unavailable(format!(
                    "a trial child in the sandbox exited with {:?}",
                    outcome.exit_code
                ));
                sandbox.facts = None;
                sandbox
            }
            Err(error) => Sandbox::unavailable(explain(&error)),
        }
    }

    pub fn state(&self) -> &State {
        &self.state
    }

    /// The `sandbox` field of the capabilities document.
    pub fn describe(&self, root_prefix: Option<&Path>) -> Value {
        match &self.state {
            State::Active => {
                let mut writable = vec![
                    json!({"path": self.facts.as_ref().map(|f| f.base.path().join("tmp")),
                           "kind": "tmpfs", "why": "TMPDIR: a private tmpfs, new for each call"}),
                ];
                if matches!(self.facts.as_ref().map(|f| &f.base), Some(Base::Shm)) {
                    writable.push(json!({"path": SHM, "kind": "tmpfs",
                        "why": "POSIX shared memory and semaphores, private to the call \
                                (the same tmpfs as TMPDIR)"}));
                }
                let areas = self.areas(root_prefix);
                for dir in &areas.caches {
                    writable.push(json!({"path": dir, "kind": "bind",
                        "why": "repodata cache (conda writes it on reads: create_cache_dir)"}));
                }
                if let Some(notices) = self.facts.as_ref().and_then(|f| f.notices.as_ref()) {
                    writable.push(json!({"path": notices, "kind": "bind",
                        "why": "notices cache (conda writes it on reads: get_notices_cache_dir)"}));
                }
                for dir in &areas.overlays {
                    writable.push(json!({"path": dir, "kind": "overlay",
                        "why": "writes land in the call's tmpfs and are discarded; conda's \
                                writability probes see the caller's permissions"}));
                }
                json!({"state": "active", "writable": writable})
            }
            State::Unavailable(reason) => json!({"state": "unavailable", "reason": reason}),
            State::Disabled => json!({"state": "disabled", "reason": "--no-sandbox"}),
        }
    }

    /// This call's plan; `None` unless the sandbox is active.
    pub fn plan(&self, root_prefix: Option<&Path>) -> Option<Plan> {
        if self.state != State::Active {
            return None;
        }
        let facts = self.facts.as_ref()?;
        let areas = self.areas(root_prefix);
        let base = facts.base.path().to_path_buf();
        let cstring = |path: &Path| CString::new(path.as_os_str().as_encoded_bytes()).ok();
        let tmpdir = base.join("tmp");
        let mut mkdirs = vec![cstring(&tmpdir)?];
        let mut overlays = Vec::new();
        for (index, target) in areas.overlays.iter().enumerate() {
            let Some(text) = target.to_str() else {
                continue;
            };
            // Overlay options are comma-separated and use ':' between lower layers.
            if text.contains([',', ':', '\\']) {
                continue;
            }
            let layer = base.join(format!("o{index}"));
            let (upper, work) = (layer.join("u"), layer.join("w"));
            let options = format!(
                "lowerdir={text},upperdir={},workdir={}",
                upper.display(),
                work.display()
            );
            let keeps: Vec<CString> = areas
                .caches
                .iter()
                .filter(|c| c.starts_with(target))
                .take(MAX_KEEPS)
                .map(|c| cstring(c))
                .collect::<Option<_>>()?;
            mkdirs.extend([cstring(&layer)?, cstring(&upper)?, cstring(&work)?]);
            overlays.push(Overlay {
                target: cstring(target)?,
                options_userxattr: CString::new(format!("{options},userxattr")).ok()?,
                options: CString::new(options).ok()?,
                keeps,
            });
        }
        let mut writable = Vec::new();
        for dir in areas
            .caches
            .iter()
            .filter(|c| !areas.overlays.iter().any(|o| c.starts_with(o)))
            .chain(&facts.notices)
        {
            writable.push(cstring(dir)?);
        }
        let ids = facts.ids.map(|(uid, gid)| {
            (
                format!("{uid} {uid} 1\n").into_bytes(),
                format!("{gid} {gid} 1\n").into_bytes(),
            )
        });
        let base_options = match facts.base {
            Base::Shm => c"mode=1777",
            Base::Dir(_) => c"mode=0700",
        };
        Some(Plan(Arc::new(Prepared {
            ids,
            base: cstring(&base)?,
            base_options: base_options.to_owned(),
            mkdirs,
            tmpdir,
            overlays,
            writable,
        })))
    }

    /// The directories that get overlays and writable binds for a call, from what exists
    /// now.
    fn areas(&self, root_prefix: Option<&Path>) -> Areas {
        let mut areas = Areas::default();
        let Some(facts) = &self.facts else {
            return areas;
        };
        let dot_conda = facts.home.as_ref().map(|h| h.join(".conda"));
        // Package cache directories: conda's defaults and CONDA_PKGS_DIRS.
        let mut pkgs: Vec<PathBuf> = facts.pkgs_dirs.clone();
        pkgs.extend(root_prefix.map(|r| r.join("pkgs")));
        pkgs.extend(dot_conda.as_ref().map(|d| d.join("pkgs")));
        // Environments: the root prefix, every directory of the envs dirs, environments.txt.
        let mut envs: Vec<PathBuf> = root_prefix.map(Path::to_path_buf).into_iter().collect();
        let mut envs_dirs = facts.envs_dirs.clone();
        envs_dirs.extend(root_prefix.map(|r| r.join("envs")));
        envs_dirs.extend(dot_conda.as_ref().map(|d| d.join("envs")));
        for dir in &envs_dirs {
            if let Ok(entries) = std::fs::read_dir(dir) {
                envs.extend(entries.flatten().map(|e| e.path()));
            }
        }
        // conda reads every user's environments.txt when it runs as root
        // (list_all_known_prefixes), only its own otherwise.
        let mut homes: Vec<PathBuf> = facts.home.iter().cloned().collect();
        if facts.ids.is_none() {
            homes.extend(password_homes());
        }
        for home in homes {
            if let Ok(text) = std::fs::read_to_string(home.join(".conda/environments.txt")) {
                envs.extend(
                    text.lines()
                        .map(str::trim)
                        .filter(|l| l.starts_with('/'))
                        .map(PathBuf::from),
                );
            }
        }
        // Only real directories (a symlink would be followed by the mount).
        let is_dir = |path: &Path| {
            std::fs::symlink_metadata(path)
                .map(|m| m.is_dir())
                .unwrap_or(false)
        };
        // Overlays never nest: a directory inside a chosen one is covered by it.
        let mut add = |path: PathBuf| {
            if is_dir(&path) && !areas.overlays.iter().any(|t| path.starts_with(t)) {
                areas.overlays.retain(|t| !t.starts_with(&path));
                areas.overlays.push(path);
            }
        };
        // ~/.conda (its envs, pkgs and environments.txt), every envs and pkgs directory
        // (envs directory probes, package cache probes), every environment's conda-meta
        // (the conda-meta/history probe).
        dot_conda.into_iter().for_each(&mut add);
        envs_dirs.into_iter().for_each(&mut add);
        pkgs.iter().cloned().for_each(&mut add);
        envs.into_iter()
            .map(|e| e.join("conda-meta"))
            .for_each(&mut add);
        for dir in pkgs {
            let cache = dir.join("cache");
            if is_dir(&cache) && !areas.caches.contains(&cache) {
                areas.caches.push(cache);
            }
        }
        areas
    }
}

#[derive(Debug, Default)]
struct Areas {
    /// Copy-on-write overlays (writes discarded).
    overlays: Vec<PathBuf>,
    /// Repodata caches, bound writable.
    caches: Vec<PathBuf>,
}

impl Facts {
    fn new(inputs: &Inputs) -> Result<Facts, String> {
        let base = make_base(&inputs.temp_dir)?;
        // SAFETY: geteuid/getegid have no preconditions.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        let split = |value: &OsString| -> Vec<PathBuf> {
            value
                .to_string_lossy()
                .split([',', ':'])
                .filter(|s| !s.is_empty())
                .map(PathBuf::from)
                .collect()
        };
        let cache_home = inputs
            .xdg_cache_home
            .clone()
            .filter(|p| p.is_absolute())
            .or_else(|| inputs.home.as_ref().map(|h| h.join(".cache")));
        // conda makes this directory on first use, and fails a read-only `conda notices`
        // when it cannot; make it now so that the sandbox can keep it writable.
        let notices = cache_home
            .map(|c| c.join("conda").join("notices"))
            .filter(|n| {
                std::fs::create_dir_all(n).is_ok()
                    && std::fs::symlink_metadata(n)
                        .map(|m| m.is_dir())
                        .unwrap_or(false)
            });
        Ok(Facts {
            base,
            ids: (uid != 0).then_some((uid, gid)),
            home: inputs.home.clone(),
            pkgs_dirs: inputs.conda_pkgs_dirs.iter().flat_map(split).collect(),
            envs_dirs: inputs.conda_envs_dirs.iter().flat_map(split).collect(),
            notices,
        })
    }
}

/// The home directories of `/etc/passwd`.
fn password_homes() -> Vec<PathBuf> {
    let text = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let mut homes: Vec<PathBuf> = text
        .lines()
        .filter_map(|line| line.split(':').nth(5))
        .filter(|home| home.starts_with('/') && *home != "/")
        .map(PathBuf::from)
        .collect();
    homes.dedup();
    homes
}

/// A new private, empty directory under `temp_dir` (mode 0700).
fn make_base(temp_dir: &Path) -> Result<Base, String> {
    use std::os::unix::fs::DirBuilderExt;
    let shm_is_dir = std::fs::symlink_metadata(SHM)
        .map(|m| m.is_dir())
        .unwrap_or(false);
    if shm_is_dir {
        return Ok(Base::Shm);
    }
    for _ in 0..16 {
        let mut random = [0u8; 8];
        getrandom::fill(&mut random).map_err(|_| "no random numbers".to_owned())?;
        let name: String = random.iter().map(|b| format!("{b:02x}")).collect();
        let path = temp_dir.join(format!("ccm-sandbox-{name}"));
        match std::fs::DirBuilder::new().mode(0o700).create(&path) {
            Ok(()) => return Ok(Base::Dir(path)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(format!(
                    "cannot make a directory in {}: {}",
                    temp_dir.display(),
                    e.kind()
                ));
            }
        }
    }
    Err("cannot make a sandbox directory".to_owned())
}

/// A one-line reason for a failed trial run.
fn explain(error: &std::io::Error) -> String {
    let hint = match error.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => {
            " (namespaces are not permitted here: user namespaces disabled, a seccomp \
             filter, or a container without CAP_SYS_ADMIN)"
        }
        Some(libc::ENOSYS) => " (the kernel lacks mount_setattr, Linux >= 5.12)",
        Some(libc::EINVAL) => " (the kernel does not support these namespace operations)",
        Some(libc::ENOSPC) => " (user.max_user_namespaces or mount limits reached)",
        _ => "",
    };
    format!("the sandbox could not be set up: {error}{hint}")
}

/// Debug builds only: the canonical tool names listed in `CCM_TEST_FORCE_READ_ONLY`
/// (comma-separated) are treated as read-only by the policy, so that tests can prove the
/// sandbox stops a writing command. Release builds ignore the variable.
pub fn forced_read_only(tool: &str) -> bool {
    #[cfg(debug_assertions)]
    {
        static NAMES: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
        NAMES
            .get_or_init(|| {
                std::env::var("CCM_TEST_FORCE_READ_ONLY")
                    .map(|v| v.split(',').map(str::to_owned).collect())
                    .unwrap_or_default()
            })
            .iter()
            .any(|n| n == tool)
    }
    #[cfg(not(debug_assertions))]
    {
        let _ = tool;
        false
    }
}

/// Put the child of `command` into the sandbox of `plan` (sets `TMPDIR`, and a
/// `pre_exec` hook that builds the namespace).
#[cfg(target_os = "linux")]
pub fn install(command: &mut tokio::process::Command, plan: &Plan) {
    command.env(TMPDIR, &plan.0.tmpdir);
    let prepared = Arc::clone(&plan.0);
    // SAFETY: the hook only makes system calls (no allocation, no locks) on data prepared
    // before the fork, as required between fork and exec.
    unsafe {
        command.pre_exec(move || enter(&prepared));
    }
}

#[cfg(not(target_os = "linux"))]
pub fn install(_command: &mut tokio::process::Command, _plan: &Plan) {}

#[cfg(target_os = "linux")]
const MOUNT_ATTR_RDONLY: u64 = 0x1;

#[cfg(target_os = "linux")]
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// `mount_setattr(dirfd, path, flags, {set, clear})`.
#[cfg(target_os = "linux")]
fn mount_setattr(
    dirfd: libc::c_int,
    path: &std::ffi::CStr,
    flags: libc::c_int,
    set: u64,
    clear: u64,
) -> std::io::Result<()> {
    let attr = MountAttr {
        attr_set: set,
        attr_clr: clear,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: the pointers are valid for the call; the size is the struct's.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            dirfd,
            path.as_ptr(),
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Write a whole small file (async-signal-safe).
#[cfg(target_os = "linux")]
fn write_file(path: &std::ffi::CStr, bytes: &[u8]) -> std::io::Result<()> {
    use rustix::fs::{Mode, OFlags, open};
    let fd = open(path, OFlags::WRONLY | OFlags::CLOEXEC, Mode::empty())?;
    let written = rustix::io::write(&fd, bytes)?;
    if written == bytes.len() {
        Ok(())
    } else {
        Err(std::io::Error::from_raw_os_error(libc::EIO))
    }
}

/// A writable copy of the real directory `path` mounted over `path` (best effort). The
/// clone is taken before anything is mounted over `path`'s parents.
#[cfg(target_os = "linux")]
fn writable_clone(path: &std::ffi::CStr) -> Option<rustix::fd::OwnedFd> {
    use rustix::mount::{OpenTreeFlags, open_tree};
    let fd = open_tree(
        rustix::fs::CWD,
        path,
        // A symlink put in the directory's place is not followed (the clone then fails).
        OpenTreeFlags::OPEN_TREE_CLONE
            | OpenTreeFlags::OPEN_TREE_CLOEXEC
            | OpenTreeFlags::AT_SYMLINK_NOFOLLOW,
    )
    .ok()?;
    use std::os::fd::AsRawFd;
    mount_setattr(
        fd.as_raw_fd(),
        c"",
        libc::AT_EMPTY_PATH,
        0,
        MOUNT_ATTR_RDONLY,
    )
    .ok()?;
    Some(fd)
}

#[cfg(target_os = "linux")]
/// Mount a detached clone at `path` (best effort; a symlink at `path` is not followed).
fn attach(fd: rustix::fd::OwnedFd, path: &std::ffi::CStr) {
    use rustix::mount::{MoveMountFlags, move_mount};
    let _ = move_mount(
        &fd,
        c"",
        rustix::fs::CWD,
        path,
        MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH,
    );
}

/// In the child, between fork and exec: build the sandbox. Only system calls.
#[cfg(target_os = "linux")]
fn enter(plan: &Prepared) -> std::io::Result<()> {
    use rustix::fs::{Mode, mkdir};
    use rustix::mount::{MountFlags, MountPropagationFlags, mount, mount_change};
    use rustix::thread::{UnshareFlags, unshare_unsafe};

    // SAFETY: the child is single-threaded; no file table is unshared.
    match &plan.ids {
        Some((uid_map, gid_map)) => {
            unsafe { unshare_unsafe(UnshareFlags::NEWUSER | UnshareFlags::NEWNS) }?;
            // A non-dumpable process's /proc files belong to root, so it could not write
            // its own maps: be dumpable for these three writes only (exec resets the flag
            // anyway).
            // SAFETY: prctl with integer arguments only.
            let dumpable = unsafe { libc::prctl(libc::PR_GET_DUMPABLE, 0, 0, 0, 0) };
            if dumpable != 1 {
                // SAFETY: as above.
                unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0) };
            }
            let written = write_file(c"/proc/self/setgroups", b"deny")
                .and_then(|()| write_file(c"/proc/self/uid_map", uid_map))
                .and_then(|()| write_file(c"/proc/self/gid_map", gid_map));
            if dumpable != 1 {
                // SAFETY: as above.
                unsafe { libc::prctl(libc::PR_SET_DUMPABLE, dumpable.max(0), 0, 0, 0) };
            }
            written?;
        }
        None => unsafe { unshare_unsafe(UnshareFlags::NEWNS) }?,
    }
    mount_change(
        c"/",
        MountPropagationFlags::REC | MountPropagationFlags::PRIVATE,
    )?;
    mount_setattr(
        libc::AT_FDCWD,
        c"/",
        libc::AT_RECURSIVE,
        MOUNT_ATTR_RDONLY,
        0,
    )?;
    let private = MountFlags::NOSUID | MountFlags::NODEV;
    mount(
        c"tmpfs",
        &*plan.base,
        c"tmpfs",
        private,
        &*plan.base_options,
    )?;
    for dir in &plan.mkdirs {
        mkdir(&**dir, Mode::from_raw_mode(0o700))?;
    }
    for overlay in &plan.overlays {
        // Clones of the real directories that stay writable, taken before the overlay
        // covers them.
        let mut kept: [Option<rustix::fd::OwnedFd>; MAX_KEEPS] = [const { None }; MAX_KEEPS];
        for (slot, keep) in kept.iter_mut().zip(&overlay.keeps) {
            *slot = writable_clone(keep);
        }
        let user = plan.ids.is_some();
        let first = if user {
            &overlay.options_userxattr
        } else {
            &overlay.options
        };
        if mount(c"overlay", &*overlay.target, c"overlay", private, &**first).is_err() {
            let second = if user {
                &overlay.options
            } else {
                &overlay.options_userxattr
            };
            let _ = mount(c"overlay", &*overlay.target, c"overlay", private, &**second);
        }
        for (slot, keep) in kept.iter_mut().zip(&overlay.keeps) {
            if let Some(fd) = slot.take() {
                attach(fd, keep);
            }
        }
    }
    for dir in &plan.writable {
        if let Some(fd) = writable_clone(dir) {
            attach(fd, dir);
        }
    }
    if plan.ids.is_none() {
        // A root child keeps root's capabilities: take away those that would undo the
        // sandbox (remount, unmount), reach the server (ptrace) or the kernel. It and its
        // descendants can never regain them; a user namespace it makes locks the mounts.
        for cap in DROPPED_CAPABILITIES {
            // SAFETY: prctl with integer arguments only.
            if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
    }
    Ok(())
}

/// Capabilities a root server's sandboxed children lose (bounding set).
#[cfg(target_os = "linux")]
const DROPPED_CAPABILITIES: [libc::c_ulong; 6] = [
    21, // CAP_SYS_ADMIN: mount, remount, unmount, namespaces
    19, // CAP_SYS_PTRACE: the server's memory
    16, // CAP_SYS_MODULE: kernel modules
    17, // CAP_SYS_RAWIO: ioperm, /dev/mem
    27, // CAP_MKNOD: new device nodes
    22, // CAP_SYS_BOOT: reboot
];

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio_util::sync::CancellationToken;

    fn inputs(home: &Path, temp: &Path) -> Inputs {
        Inputs {
            home: Some(home.to_path_buf()),
            xdg_cache_home: None,
            conda_pkgs_dirs: None,
            conda_envs_dirs: Vec::new(),
            temp_dir: temp.to_path_buf(),
        }
    }

    fn sh(script: &str, plan: Option<Plan>) -> crate::host::exec::Spec {
        crate::host::exec::Spec {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), script.into()],
            cwd: None,
            stdin: None,
            timeout: Duration::from_secs(30),
            stdout_limit: 1 << 16,
            stderr_limit: 1 << 16,
            env_remove: Vec::new(),
            limits: crate::host::exec::Limits::none(),
            sandbox: plan,
        }
    }

    #[test]
    fn applies_to_reads_and_exec_without_write() {
        let class = |read_only, requires_write, requires_exec| Classification {
            read_only,
            open_world: false,
            requires_write,
            requires_exec,
            reveals_credentials: false,
        };
        for allow_write in [false, true] {
            assert!(applies(&class(true, false, false), allow_write));
            assert!(!applies(&class(false, true, false), allow_write));
            assert!(!applies(&class(false, true, true), allow_write));
        }
        assert!(applies(&class(false, false, true), false));
        assert!(!applies(&class(false, false, true), true));
    }

    #[tokio::test]
    async fn writes_fail_except_in_the_declared_places() {
        let temp = tempfile::tempdir().unwrap();
        let home = temp.path().join("home");
        let root = temp.path().join("root");
        std::fs::create_dir_all(root.join("conda-meta")).unwrap();
        std::fs::write(root.join("conda-meta/history"), "old\n").unwrap();
        std::fs::create_dir_all(root.join("pkgs/cache")).unwrap();
        std::fs::create_dir_all(home.join(".conda")).unwrap();
        std::fs::write(home.join(".conda/environments.txt"), "").unwrap();
        let sandbox =
            Sandbox::probe(&inputs(&home, temp.path()), Path::new("/bin/true"), &[]).await;
        assert_eq!(sandbox.state(), &State::Active, "{sandbox:?}");
        let plan = sandbox.plan(Some(&root)).unwrap();
        let script = format!(
            "set -u
             touch {home}/x && echo home-written
             echo t > \"$TMPDIR/t\" && echo tmp-ok
             echo new >> {root}/conda-meta/history && echo meta-ok
             echo r > {root}/pkgs/cache/r.json && echo cache-ok
             echo n > {home}/.cache/conda/notices/n && echo notices-ok
             touch {root}/pkgs/urls.txt && echo pkgs-ok
             echo {root} >> {home}/.conda/environments.txt && echo registry-ok
             echo done",
            home = home.display(),
            root = root.display()
        );
        let out = crate::host::exec::run(&sh(&script, Some(plan)), &CancellationToken::new())
            .await
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            stdout,
            "tmp-ok\nmeta-ok\ncache-ok\nnotices-ok\npkgs-ok\nregistry-ok\ndone\n",
            "stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stderr).contains("Read-only file system"));
        // The home write failed, the overlay writes vanished, the caches persisted.
        assert!(!home.join("x").exists());
        assert_eq!(
            std::fs::read_to_string(root.join("conda-meta/history")).unwrap(),
            "old\n"
        );
        assert!(!root.join("pkgs/urls.txt").exists());
        assert_eq!(
            std::fs::read_to_string(home.join(".conda/environments.txt")).unwrap(),
            ""
        );
        assert!(root.join("pkgs/cache/r.json").exists());
        assert!(home.join(".cache/conda/notices/n").exists());
        // The per-call tmpfs left nothing behind.
        let tmpdir = sandbox.plan(Some(&root)).unwrap().tmpdir().to_path_buf();
        assert!(!tmpdir.join("t").exists());
    }

    /// What a program run by `conda run` under `--allow-exec` alone might try: undo the
    /// read-only mounts, directly or from a user namespace of its own, then write.
    #[tokio::test]
    async fn a_child_cannot_undo_the_sandbox() {
        let temp = tempfile::tempdir().unwrap();
        let home = temp.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let sandbox =
            Sandbox::probe(&inputs(&home, temp.path()), Path::new("/bin/true"), &[]).await;
        assert_eq!(sandbox.state(), &State::Active, "{sandbox:?}");
        let target = home.join("escaped");
        let script = format!(
            "t={target}
             mount -o remount,rw / ; echo a >> $t
             mount -o remount,bind,rw / ; echo b >> $t
             mount -o remount,rw {home} ; echo c >> $t
             umount -l /dev/shm ; echo d >> $t
             mount -t tmpfs tmpfs {home} ; echo e >> $t
             unshare -rm sh -c 'mount -o remount,rw /; mount -o remount,bind,rw /; echo f >> $0' $t
             unshare -rm sh -c 'umount -l /; echo g >> $0' $t
             echo done",
            target = target.display(),
            home = home.display()
        );
        let out =
            crate::host::exec::run(&sh(&script, sandbox.plan(None)), &CancellationToken::new())
                .await
                .unwrap();
        assert_eq!(
            out.stdout,
            b"done\n",
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!target.exists(), "{:?}", std::fs::read_to_string(&target));
        // Without the sandbox the same script writes (so the check above can fail).
        let out = crate::host::exec::run(
            &sh(&format!("echo x >> {}", target.display()), None),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
        assert_eq!(out.exit_code, Some(0));
        assert!(target.exists());
    }

    #[tokio::test]
    async fn without_a_plan_nothing_changes() {
        let temp = tempfile::tempdir().unwrap();
        let file = temp.path().join("x");
        let script = format!("touch {}", file.display());
        let out = crate::host::exec::run(&sh(&script, None), &CancellationToken::new())
            .await
            .unwrap();
        assert_eq!(out.exit_code, Some(0));
        assert!(file.exists());
    }

    #[test]
    fn an_unavailable_or_disabled_sandbox_plans_nothing() {
        let unavailable = Sandbox::unavailable("no namespaces here");
        assert!(unavailable.plan(Some(Path::new("/"))).is_none());
        assert_eq!(
            unavailable.describe(None),
            json!({"state": "unavailable", "reason": "no namespaces here"})
        );
        let disabled = Sandbox::disabled();
        assert!(disabled.plan(None).is_none());
        assert_eq!(disabled.describe(None)["state"], "disabled");
    }

    #[test]
    fn explanations_name_the_cause() {
        let text = explain(&std::io::Error::from_raw_os_error(libc::EPERM));
        assert!(text.contains("not permitted"), "{text}");
        let text = explain(&std::io::Error::from_raw_os_error(libc::ENOSYS));
        assert!(text.contains("5.12"), "{text}");
    }

    /// A server that protects its memory (`PR_SET_DUMPABLE` 0) passes that on to the forked
    /// child, whose /proc files then belong to root: writing its own uid_map must still
    /// work (it matters when the server is not root).
    #[tokio::test]
    async fn works_when_the_server_is_not_dumpable() {
        // SAFETY: prctl with integer arguments only; affects this test process alone.
        assert_eq!(unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) }, 0);
        let temp = tempfile::tempdir().unwrap();
        let sandbox = Sandbox::probe(
            &inputs(temp.path(), temp.path()),
            Path::new("/bin/true"),
            &[],
        )
        .await;
        assert_eq!(sandbox.state(), &State::Active, "{sandbox:?}");
        let out = crate::host::exec::run(
            &sh("echo ok", sandbox.plan(None)),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
        assert_eq!(out.stdout, b"ok\n");
    }

    #[test]
    fn forced_read_only_is_off_by_default() {
        assert!(!forced_read_only("conda_behave"));
    }
}
