//! The startup probe: the facts fixed at startup (the per-call tmpfs's base, the ids to
//! map, the directories conda uses) and one trial child in the sandbox, or why the sandbox
//! is unavailable here.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::{Base, Facts, Inputs, Plan, SHM, Sandbox, State};

/// Why the sandbox is unavailable on this machine.
#[derive(Debug, thiserror::Error)]
pub enum Unavailable {
    #[error("the sandbox needs Linux mount namespaces")]
    NotLinux,
    #[error("no random numbers")]
    NoRandom,
    #[error("cannot make a directory in {}: {kind}", dir.display())]
    MakeDir {
        dir: PathBuf,
        kind: std::io::ErrorKind,
    },
    #[error("cannot make a sandbox directory")]
    NoFreeName,
    #[error("the sandbox could not be prepared")]
    NotPrepared,
    #[error("a trial child in the sandbox exited with {}", ExitStatus(*.0))]
    TrialFailed(Option<i32>),
    #[error("the sandbox could not be set up: {0}{hint}", hint = hint(.0))]
    SetUp(std::io::Error),
}

/// A trial child's exit status as the reason has always shown it (`Some(1)`, `None`).
struct ExitStatus(Option<i32>);

impl std::fmt::Display for ExitStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(code) => write!(f, "Some({code})"),
            None => f.write_str("None"),
        }
    }
}

impl Sandbox {
    /// Prepare the sandbox and check that it works by running one trial child in it
    /// (`trial` runs it under the plan and gives its exit code; it must exit 0; a root
    /// server whose kernel refuses a user namespace per call tries once more with one shared). Makes the
    /// base directory and the notices cache directory. The caller starts the child: the
    /// sandbox knows nothing of how children run.
    pub async fn probe<F, Fut>(inputs: &Inputs, trial: F) -> Sandbox
    where
        F: Fn(Plan) -> Fut,
        Fut: Future<Output = std::io::Result<Option<i32>>>,
    {
        if !crate::host::platform::SANDBOX {
            return Sandbox::unavailable(Unavailable::NotLinux.to_string());
        }
        let facts = match Facts::new(inputs) {
            Ok(facts) => facts,
            Err(reason) => return Sandbox::unavailable(reason.to_string()),
        };
        let mut sandbox = Sandbox {
            state: State::Active,
            facts: Some(facts),
        };
        let mut result = sandbox.trial(&trial).await;
        let root = sandbox.facts.as_ref().is_some_and(|f| f.ids.0 == 0);
        if let (Err(refused), true) = (&result, root) {
            // A root server whose kernel refuses it a user namespace (user namespaces
            // disabled, a seccomp filter): the calls share one, and say so.
            let reason = refused.to_string();
            if let Some(facts) = sandbox.facts.as_mut() {
                facts.shared_user_namespace = Some(reason.clone());
            }
            result = sandbox.trial(&trial).await;
            if result.is_ok() {
                tracing::warn!(
                    %reason,
                    "sandboxed calls share one user namespace: running at once, they can \
                     reach into each other (ptrace, /proc/<pid>/root)"
                );
            }
        }
        match result {
            Ok(()) => sandbox,
            Err(reason) => Sandbox::unavailable(reason.to_string()),
        }
    }

    /// Run the trial child once in this sandbox: it must exit 0.
    async fn trial<F, Fut>(&self, trial: &F) -> Result<(), Unavailable>
    where
        F: Fn(Plan) -> Fut,
        Fut: Future<Output = std::io::Result<Option<i32>>>,
    {
        let plan = self.plan(None).ok_or(Unavailable::NotPrepared)?;
        match trial(plan).await {
            Ok(Some(0)) => Ok(()),
            Ok(exit_code) => Err(Unavailable::TrialFailed(exit_code)),
            Err(error) => Err(Unavailable::SetUp(error)),
        }
    }
}

impl Facts {
    fn new(inputs: &Inputs) -> Result<Facts, Unavailable> {
        let base = make_base(&inputs.temp_dir)?;
        let uid = rustix::process::geteuid().as_raw();
        let gid = rustix::process::getegid().as_raw();
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
            ids: (uid, gid),
            shared_user_namespace: None,
            scope: crate::host::platform::scope_ruleset().map(std::sync::Arc::new),
            rules_writes: crate::host::platform::sandbox_rules_writes(),
            seccomp: crate::host::platform::SeccompFilter::new().map(std::sync::Arc::new),
            home: inputs.home.clone(),
            pkgs_dirs: inputs.conda_pkgs_dirs.iter().flat_map(split).collect(),
            envs_dirs: inputs.conda_envs_dirs.iter().flat_map(split).collect(),
            notices,
        })
    }
}

/// A new private, empty directory under `temp_dir` (mode 0700).
fn make_base(temp_dir: &Path) -> Result<Base, Unavailable> {
    use std::os::unix::fs::DirBuilderExt;
    let shm_is_dir = std::fs::symlink_metadata(SHM)
        .map(|m| m.is_dir())
        .unwrap_or(false);
    if shm_is_dir {
        return Ok(Base::Shm);
    }
    for _ in 0..16 {
        let mut random = [0u8; 8];
        getrandom::fill(&mut random).map_err(|_| Unavailable::NoRandom)?;
        let name: String = random.iter().map(|b| format!("{b:02x}")).collect();
        let path = temp_dir.join(format!("ccm-sandbox-{name}"));
        match std::fs::DirBuilder::new().mode(0o700).create(&path) {
            Ok(()) => return Ok(Base::Dir(path)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(Unavailable::MakeDir {
                    dir: temp_dir.to_path_buf(),
                    kind: e.kind(),
                });
            }
        }
    }
    Err(Unavailable::NoFreeName)
}

/// What a failed trial run's error probably means (appended to its reason).
fn hint(error: &std::io::Error) -> &'static str {
    match error.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => {
            " (namespaces are not permitted here: user namespaces disabled, a seccomp \
             filter, or a container without CAP_SYS_ADMIN)"
        }
        Some(libc::ENOSYS) => " (the kernel lacks mount_setattr, Linux >= 5.12)",
        Some(libc::EINVAL) => " (the kernel does not support these namespace operations)",
        Some(libc::ENOSPC) => " (user.max_user_namespaces or mount limits reached)",
        _ => "",
    }
}
