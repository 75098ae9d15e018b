//! The read-only sandbox: children of calls that need no `--allow-write` cannot write
//! anything a later call reads.
//!
//! Every execution the policy judges read-only, every one admitted by `--allow-exec`
//! without `--allow-write`, and the dry-run preview of a confirmed write run in a private
//! mount namespace, inside a user namespace and an IPC namespace of the call's own (a
//! root server's children too; see `enter.rs`), in which every mount is read-only,
//! except:
//!
//! - a private tmpfs, fresh for each call, over `/dev/shm` (POSIX shared memory and
//!   semaphores; where there is none, over an empty directory the server makes): the
//!   child's `TMPDIR` points into it, and it holds the upper layers below;
//! - copy-on-write overlays whose upper layer lies in the call's tmpfs (writes succeed,
//!   then vanish with the call) on `~/.conda`, every envs and package cache directory
//!   (with its repodata cache `<pkgs_dir>/cache`), every other known environment's
//!   `conda-meta` and the notices cache (`$XDG_CACHE_HOME/conda/notices`, else
//!   `~/.cache/conda/notices`) (`areas.rs`), so that conda's writability probes
//!   (`conda-meta/history`, `<pkgs_dir>/urls.txt`, `<envs_dir>/.conda_envs_dir_test`) see
//!   what they see outside, with the caller's own permissions, and the caches conda
//!   updates on reads work: a call reads the operator's caches as they are, and what it
//!   writes there (repodata under any cache key, state files, symlinks) is gone when it
//!   ends. No later call, of any trust, and no unsandboxed conda ever reads it: write
//!   calls use the operator's caches exactly as conda does.
//! - where the package cache or envs directory conda would create on a read does not
//!   exist yet, a tmpfs of the call in its place, added to the nearest existing directory
//!   by a read-only union (when the server's user may write there, it is not `/` and no
//!   mount point lies below it): conda creates it there, never in the operator's tree, and
//!   everything else in that directory stays read-only.
//!
//! The namespace is set up in the forked child before `exec` ([`install`]): everything
//! is prepared in the parent ([`Sandbox::plan`]), the child only makes raw system calls.
//! Setting up the namespaces, the read-only remount and the tmpfs are mandatory (the child
//! does not start when one fails); overlays and unions are best effort (a failure leaves
//! that directory read-only). A child cannot undo the sandbox: as root or in a user
//! namespace, it gives up every capability in every set (the bounding set included) and
//! sets `no_new_privs` and root-is-not-special securebits (locked) before `exec`, so
//! nothing it runs holds or regains one; a user namespace it makes locks the read-only
//! mounts. Its own user namespace keeps every other call's child (in a sibling one) and
//! every process outside the calls from `ptrace` and `/proc/<pid>/` access to it and
//! back; its IPC namespace keeps SysV and POSIX IPC objects per call; where the kernel
//! scopes signals (Landlock ABI 6) a domain of its own keeps its signals within the call
//! (`scope.rs`). At startup [`Sandbox::probe`] runs one trivial child in the sandbox;
//! when that fails the server says why and runs children as before (a root server whose
//! kernel refuses per-call user namespaces runs them in one shared namespace, and says
//! so in the capabilities' `isolation`).
//!
//! Linux ≥ 5.12 (`mount_setattr`); overlays in user namespaces need Linux ≥ 5.11.

use std::ffi::{CString, OsString};
use std::os::fd::{BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};

use crate::host::platform;
use crate::tools::policy::Classification;

mod areas;
pub(crate) use areas::{of_this_namespace, open_own_directory};
pub mod bound;
mod plan;
mod probe;
mod registries;
pub mod shared;

// The Linux rooms: compiled on Linux only, reached only through `host::platform` (and
// each other); ARCHITECTURE.md, "Platform seam".
#[cfg(target_os = "linux")]
mod dev;
#[cfg(target_os = "linux")]
pub(crate) mod enter;
#[cfg(target_os = "linux")]
mod mount;
#[cfg(target_os = "linux")]
pub(crate) mod scope;
#[cfg(target_os = "linux")]
pub(crate) mod seccomp;
#[cfg(all(test, target_os = "linux"))]
mod tests;
#[cfg(target_os = "linux")]
pub(crate) mod walls;

pub use probe::Unavailable;

/// The size of a sandboxed call's tmpfs (its `TMPDIR`, the upper layers of its overlays)
/// and of each entry a union adds (`mount::tmpfs`): at most 2 GiB and 262 144 files.
/// The kernel's default, half the memory, let one call (`conda run` of a program that
/// fills `TMPDIR`) pin 12 GiB of a 24 GiB host, outside any process's limits, for its
/// whole run (attack 5 V1). 2 GiB holds a large channel's repodata written into the
/// repodata cache's overlay (conda-forge's `linux-64` is about 300 MB) several times over.
/// Only one execution runs at a time, so this bounds the sandbox's memory server-wide.
pub(crate) const CALL_TMPFS_SIZE: &std::ffi::CStr = c"2g";
/// The number of files of a call's tmpfs (see [`CALL_TMPFS_SIZE`]).
pub(crate) const CALL_TMPFS_INODES: &std::ffi::CStr = c"262144";

/// Most overlays a union carries over (those inside the directory it goes on).
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
    /// The server's `(uid, gid)`, mapped to themselves in each call's user namespace.
    ids: (u32, u32),
    /// Whether each call gets a user namespace of its own: always when the server is not
    /// root; for a root server unless the kernel refused one at startup (then the reason).
    shared_user_namespace: Option<String>,
    /// The Landlock ruleset that scopes a call's signals and abstract unix sockets to the
    /// call (`None`: the kernel has no Landlock scoping, ABI < 6).
    scope: Option<Arc<OwnedFd>>,
    /// Whether each call's own Landlock ruleset rules which files it opens for writing
    /// (the kernel has Landlock): only those of its own mounts.
    rules_writes: bool,
    /// The unix-socket filter every child installs last (`None`: it could not be built).
    seccomp: Option<Arc<platform::SeccompFilter>>,
    home: Option<PathBuf>,
    /// Extra package cache directories (`CONDA_PKGS_DIRS`).
    pkgs_dirs: Vec<PathBuf>,
    /// Extra environment directories (`CONDA_ENVS_PATH`, `CONDA_ENVS_DIRS`).
    envs_dirs: Vec<PathBuf>,
    /// The notices cache (made at startup when it can be).
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

/// The namespaces of a sandbox built by a holder (`platform::enter_forked`), for a
/// process that joins it whole: the read zygote, before it runs anything.
pub struct Joined {
    pub user: OwnedFd,
    pub mount: OwnedFd,
    pub ipc: OwnedFd,
}

#[derive(Debug)]
struct Prepared {
    /// `uid_map`, `gid_map` contents of the call's user namespace (`None`: a root server
    /// whose kernel refused one).
    maps: Option<(Vec<u8>, Vec<u8>)>,
    /// The server is root: the mounts are made first, as root, then the call's user
    /// namespace with a new mount namespace in it (copies of the mounts, locked). Else
    /// the user namespace comes first and the mounts are made inside it.
    mounts_first: bool,
    /// The Landlock ruleset that scopes signals and abstract sockets (a child with no
    /// ruleset of its own restricts itself with it: the read zygote).
    scope: Option<Arc<OwnedFd>>,
    /// Whether the child's own ruleset (`scope::call_ruleset`) rules which files it opens
    /// for writing.
    rules_writes: bool,
    /// Debug builds only: a FIFO the tests read, granted too (`scope::test_report`).
    test_report: Option<CString>,
    /// The unix-socket filter, installed last.
    seccomp: Option<Arc<platform::SeccompFilter>>,
    base: CString,
    /// The mode of the base's tmpfs.
    base_mode: CString,
    /// Directories to make in the tmpfs, parents first.
    mkdirs: Vec<CString>,
    tmpdir: PathBuf,
    overlays: Vec<Overlay>,
    unions: Vec<UnionMount>,
    /// Every registry of environments conda reads, replaced by the server's copy.
    registries: registries::Registries,
    /// Other users' homes, each under a read-only overlay that shows the copy of its
    /// registry (mounted before `overlays`).
    homes: Vec<Overlay>,
}

#[derive(Debug)]
pub(super) struct Overlay {
    /// The directory overlaid. The child opens it once and uses that descriptor as the
    /// mount point and the lower layer alike (`/proc/self/fd/<n>`): two resolutions of the
    /// path, one for each, let a symlink swapped between them put another directory's
    /// contents in its place (attack 10 A10-2). A symlink in its place is not followed.
    target: CString,
    /// The lower layers above the directory, each followed by `:` (a home's registry
    /// copy, `registries.rs`), or nothing.
    above: CString,
    /// The upper and work directories (a copy-on-write overlay, whose files the call
    /// may open for writing), or none (a read-only overlay).
    layers: Option<(CString, CString)>,
    /// `index=off` (a home's read-only overlay, `registries.rs`).
    index_off: bool,
}

/// A read-only union that adds missing entries to an existing directory.
#[derive(Debug)]
struct UnionMount {
    target: CString,
    /// `lowerdir=<target>:<layer with the new entries>` (the target on top, so that the
    /// directory keeps its own owner and mode).
    options: CString,
    options_userxattr: CString,
    /// Overlays inside `target`, cloned before the union covers them and attached again
    /// over it (at most [`MAX_KEEPS`]).
    keeps: Vec<CString>,
    /// The new entries: each gets a tmpfs of its own.
    created: Vec<CString>,
}

impl Plan {
    /// The same sandbox without its overlays, unions and registry copies: every mount read-only but the
    /// tmpfs. The read zygote's own: it only imports modules (its survey children run
    /// `--help`), and it sees the target's files as they are, so that what it compares
    /// before each fork (module files, mapped libraries) is the files themselves, never
    /// an overlay's view of them.
    pub fn bare(&self) -> Plan {
        let p = &self.0;
        Plan(Arc::new(Prepared {
            maps: p.maps.clone(),
            mounts_first: p.mounts_first,
            scope: p.scope.clone(),
            rules_writes: p.rules_writes,
            test_report: p.test_report.clone(),
            seccomp: p.seccomp.clone(),
            base: p.base.clone(),
            base_mode: p.base_mode.clone(),
            mkdirs: p.mkdirs.iter().take(1).cloned().collect(),
            tmpdir: p.tmpdir.clone(),
            overlays: Vec::new(),
            unions: Vec::new(),
            registries: registries::Registries::default(),
            homes: Vec::new(),
        }))
    }

    /// The child's `TMPDIR`.
    pub fn tmpdir(&self) -> &Path {
        &self.0.tmpdir
    }

    /// Whether the sandbox includes a user namespace of the call's own.
    pub fn user_namespace(&self) -> bool {
        self.0.maps.is_some()
    }

    /// Whether the call's child restricts itself with a Landlock ruleset of the call's
    /// own (`scope::call_ruleset`: it rules which files the child opens for writing, or
    /// carries the scopes). A warm child whose holder sent none is not run.
    pub fn has_own_ruleset(&self) -> bool {
        self.0.rules_writes || self.0.scope.is_some()
    }

    /// The memfd holding the unix-socket filter a warm child installs last.
    pub fn seccomp(&self) -> Option<BorrowedFd<'_>> {
        self.0
            .seccomp
            .as_deref()
            .map(platform::SeccompFilter::memfd)
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

    pub fn state(&self) -> &State {
        &self.state
    }

    /// Why the read zygote cannot run inside this sandbox (`None`: it can): it needs
    /// the sandbox active with a user namespace per call, inside which each call's own
    /// is made.
    pub fn warm_unfit(&self) -> Option<String> {
        match (&self.state, &self.facts) {
            (State::Active, Some(facts)) => facts.shared_user_namespace.as_ref().map(|why| {
                format!("the kernel refused the sandbox a user namespace per call ({why})")
            }),
            (State::Active, None) => Some("the sandbox is not prepared".to_owned()),
            (State::Unavailable(why), _) => {
                format!("the read-only sandbox is unavailable ({why})").into()
            }
            (State::Disabled, _) => Some("the read-only sandbox is off (--no-sandbox)".to_owned()),
        }
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
                let notices = self.facts.as_ref().and_then(|f| f.notices.as_ref());
                for dir in &areas.caches {
                    let what = if Some(dir) == notices {
                        "notices cache"
                    } else {
                        "repodata cache"
                    };
                    writable.push(json!({"path": dir, "kind": "overlay",
                        "why": format!("{what}: the call reads the operator's cache as it is; \
                                what it writes there is discarded with it (no later call \
                                and no unsandboxed conda reads it)")}));
                }
                for dir in areas.overlays.iter().filter(|o| !areas.caches.contains(o)) {
                    writable.push(json!({"path": dir, "kind": "overlay",
                        "why": "writes land in the call's tmpfs and are discarded; conda's \
                                writability probes see the caller's permissions"}));
                }
                for dir in areas.unions.iter().flat_map(|u| &u.created) {
                    writable.push(json!({"path": dir, "kind": "tmpfs",
                        "why": "does not exist yet, and conda creates it on reads (its \
                                package cache or envs directory): made for the call, \
                                discarded with it"}));
                }
                json!({"state": "active", "writable": writable, "isolation": self.isolation()})
            }
            State::Unavailable(reason) => json!({"state": "unavailable", "reason": reason}),
            State::Disabled => json!({"state": "disabled", "reason": "--no-sandbox"}),
        }
    }
}

impl Sandbox {
    /// What keeps concurrent sandboxed calls apart from each other and from every other
    /// process (the `isolation` field of the capabilities' `sandbox`).
    fn isolation(&self) -> Value {
        let Some(facts) = self.facts.as_ref() else {
            return Value::Null;
        };
        let scoped = if facts.scope.is_some() {
            "scoped"
        } else {
            "by_uid"
        };
        let filtered = facts.seccomp.is_some();
        let mut isolation = json!({
            "user_namespace": if facts.shared_user_namespace.is_some() { "shared" } else { "per_call" },
            "ipc_namespace": "per_call",
            "signals": scoped,
            "abstract_unix_sockets": if facts.scope.is_some() { "scoped" } else { "shared" },
            "unix_sockets": if filtered { "refused" } else { "open" },
            "devices": "minimal",
            "fifos": if facts.rules_writes { "refused" } else { "open" },
        });
        if let Some(reason) = &facts.shared_user_namespace {
            isolation["user_namespace_refused"] = json!(reason);
        }
        isolation
    }
}
