//! Resource limits and the withheld environment of every child.
//!
//! The operator's settings ([`LimitSettings`], from the command line) are resolved once at
//! startup into [`Limits`] ([`configure`]; the server's [`super::Executions`] hold them):
//! the address-space limit (`RLIMIT_AS`), the file-size limit (`RLIMIT_FSIZE`), the
//! process-count limit (the cgroup pids controller: `RLIMIT_NPROC` does not hold for
//! root), the per-execution cgroups that give exact descendant tracking, and the
//! environment variables no child may see.
//!
//! Everything a child needs is prepared before `fork` ([`Prepared`]); after `fork` the
//! child only makes async-signal-safe system calls ([`Prepared::apply_in_child`]).

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;

use super::cgroup::{Cgroups, ExecutionGroup};

/// The default file-size limit: conda writes package tarballs and caches.
pub const DEFAULT_FILE_SIZE: u64 = 8 << 30;
/// The default most processes (and threads) one execution may have at once.
pub const DEFAULT_PROCESSES: u64 = 1024;
/// The address-space limit never defaults above this.
pub const DEFAULT_MEMORY_CAP: u64 = 4 << 30;

/// One limit as the operator gave it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Limit {
    /// Not given: the documented default.
    #[default]
    Default,
    /// `unlimited`.
    Unlimited,
    /// This many bytes (or processes).
    At(u64),
}

/// The operator's settings, as parsed (pure data).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LimitSettings {
    pub memory: Limit,
    pub file_size: Limit,
    pub processes: Limit,
    /// Extra environment variables withheld from every child (`--child-env-remove`).
    pub child_env_remove: Vec<String>,
}

/// What every child runs under (cheap to clone).
#[derive(Clone, Debug, Default)]
pub struct Limits {
    /// `RLIMIT_AS` in bytes.
    pub memory: Option<u64>,
    /// `RLIMIT_FSIZE` in bytes.
    pub file_size: Option<u64>,
    /// `pids.max` of the execution's cgroup (applies only where cgroups are available).
    pub processes: Option<u64>,
    /// Per-execution cgroups; `None` where unavailable.
    pub cgroups: Option<Arc<Cgroups>>,
    /// Why [`Limits::cgroups`] is `None`, when detecting them failed.
    pub cgroups_unavailable: Option<Arc<str>>,
    /// Environment variables removed from every child.
    pub env_remove: Arc<[String]>,
}

impl Limits {
    /// The default rlimits without cgroups, withholding the token variable: what a
    /// process that uses the library without [`configure`] (a test) runs its children under.
    pub fn defaults() -> Limits {
        Limits {
            memory: Some(default_memory()),
            file_size: Some(DEFAULT_FILE_SIZE),
            processes: None,
            cgroups: None,
            cgroups_unavailable: None,
            env_remove: Arc::from(vec![crate::TOKEN_VAR.to_owned()]),
        }
    }

    /// No limits at all (tests).
    pub fn none() -> Limits {
        Limits::default()
    }

    /// Everything the child needs after `fork`, opened and computed now.
    pub(super) fn prepare(&self) -> Prepared {
        let group = self.cgroups.as_ref().and_then(|c| c.create(self.processes));
        let mut fds = Vec::new();
        if let Some(group) = &group {
            fds.extend(group.procs_fds());
        }
        Prepared {
            memory: self.memory,
            file_size: self.file_size,
            join: fds,
            group,
        }
    }

    /// The capabilities document's `limits` entry.
    pub fn describe(&self) -> serde_json::Value {
        let processes = match (&self.cgroups, self.processes) {
            (_, None) => {
                serde_json::json!({"enforced": false, "reason": "disabled (--process-limit unlimited)"})
            }
            (Some(c), Some(n)) if c.process_limit().is_ok() => serde_json::json!({
                "enforced": true,
                "max": n,
                "mechanism": c.process_limit().ok(),
            }),
            (Some(c), Some(_)) => serde_json::json!({
                "enforced": false,
                "reason": c.process_limit().err().map(|e| e.to_string()),
            }),
            (None, Some(_)) => serde_json::json!({
                "enforced": false,
                "reason": self.cgroups_unavailable.as_deref().unwrap_or("cgroups are not available"),
            }),
        };
        serde_json::json!({
            "memory_bytes": self.memory,
            "file_size_bytes": self.file_size,
            "processes": processes,
            "descendant_tracking": match &self.cgroups {
                Some(_) => "cgroup",
                None => "environment marker",
            },
            "withheld_env": self.env_remove.len(),
        })
    }
}

/// Prepared before `fork`.
pub(super) struct Prepared {
    memory: Option<u64>,
    file_size: Option<u64>,
    /// `cgroup.procs` files to write `0` into (joins the child to the cgroups), open
    /// until the child has started.
    join: Vec<OwnedFd>,
    pub(super) group: Option<ExecutionGroup>,
}

impl Prepared {
    /// The `cgroup.procs` descriptors a child writes `0` into (the warm path sends them
    /// to its child).
    pub(super) fn join_fds(&self) -> impl Iterator<Item = BorrowedFd<'_>> {
        self.join.iter().map(AsFd::as_fd)
    }

    /// In the child between `fork` and `exec`: async-signal-safe system calls only
    /// (`write`, `setrlimit`), no allocation, no locks.
    pub(super) fn apply_in_child(&self) -> std::io::Result<()> {
        use rustix::process::{Resource, Rlimit, setrlimit};
        for fd in &self.join {
            // "0" moves the writing process. A failure leaves the child untracked by the
            // cgroup; the environment marker still finds it.
            let _ = rustix::io::write(fd, b"0");
        }
        let limit = |value: u64| Rlimit {
            current: Some(value),
            maximum: Some(value),
        };
        if let Some(bytes) = self.memory {
            setrlimit(Resource::As, limit(bytes))?;
        }
        if let Some(bytes) = self.file_size {
            setrlimit(Resource::Fsize, limit(bytes))?;
        }
        Ok(())
    }
}

/// The smaller of 4 GiB and half the RAM.
pub fn default_memory() -> u64 {
    let ram = crate::host::platform::total_ram();
    if ram == 0 {
        DEFAULT_MEMORY_CAP
    } else {
        DEFAULT_MEMORY_CAP.min(ram / 2)
    }
}

/// Resolve the operator's settings once, detect cgroups, log what holds and what does not
/// (the server's [`super::Executions`] hold the result). `secrets` are values that no child's
/// environment may contain (the HTTP token, the token file's path): variables holding
/// them are withheld too.
pub fn configure(settings: &LimitSettings, secrets: &[&str]) -> Limits {
    let resolve = |limit: Limit, default: u64| match limit {
        Limit::Default => Some(default),
        Limit::Unlimited => None,
        Limit::At(n) => Some(n),
    };
    let processes = resolve(settings.processes, DEFAULT_PROCESSES);
    let (cgroups, cgroups_unavailable) = match Cgroups::detect(processes.is_some()) {
        Ok(cgroups) => (Some(Arc::new(cgroups)), None),
        Err(reason) => {
            tracing::warn!(
                %reason,
                "per-execution cgroups are unavailable: descendants are tracked by an \
                 environment marker and the process-count limit does not hold"
            );
            (None, Some(Arc::from(reason.to_string())))
        }
    };
    if let (Some(c), Some(_)) = (&cgroups, processes)
        && let Err(reason) = c.process_limit()
    {
        tracing::warn!(%reason, "the process-count limit does not hold");
    }
    let mut env_remove = vec![crate::TOKEN_VAR.to_owned()];
    env_remove.extend(settings.child_env_remove.iter().cloned());
    let secrets: Vec<&str> = secrets.iter().copied().filter(|s| !s.is_empty()).collect();
    for (name, value) in std::env::vars_os() {
        let (Some(name), Some(value)) = (name.to_str(), value.to_str()) else {
            continue;
        };
        if secrets.iter().any(|s| value.contains(s)) && !env_remove.iter().any(|n| n == name) {
            env_remove.push(name.to_owned());
        }
    }
    let limits = Limits {
        memory: resolve(settings.memory, default_memory()),
        file_size: resolve(settings.file_size, DEFAULT_FILE_SIZE),
        processes,
        cgroups,
        cgroups_unavailable,
        env_remove: Arc::from(env_remove),
    };
    tracing::debug!(
        memory = ?limits.memory,
        file_size = ?limits.file_size,
        processes = ?limits.processes,
        cgroups = limits.cgroups.is_some(),
        "child limits"
    );
    limits
}

/// `4 GiB`, `512 MiB`, `1000 bytes`.
pub fn human(bytes: u64) -> String {
    const UNITS: [(u64, &str); 4] = [
        (1 << 40, "TiB"),
        (1 << 30, "GiB"),
        (1 << 20, "MiB"),
        (1 << 10, "KiB"),
    ];
    for (size, unit) in UNITS {
        if bytes >= size && bytes.is_multiple_of(size) {
            return format!("{} {unit}", bytes / size);
        }
    }
    for (size, unit) in UNITS {
        if bytes >= size {
            return format!("{:.1} {unit}", bytes as f64 / size as f64);
        }
    }
    format!("{bytes} bytes")
}

/// What a finished run says about the limits.
pub(super) struct Evidence<'a> {
    pub exit_code: Option<i32>,
    pub stderr: &'a [u8],
    /// The cgroup's pids.events `max` counter went up.
    pub pids_max_hit: bool,
    /// The largest `VmPeak` sampled in the tree (bytes; 0: none sampled).
    pub peak_vm: u64,
}

/// A tree whose sampled peak came this close to the address-space limit probably hit it
/// (an allocation that fails is not mapped, so the peak stays just below the limit).
const NEAR_LIMIT: u64 = 256 << 20;

/// Which limit was (probably) hit, as a sentence for the result; `None` when nothing
/// points at one.
pub(super) fn diagnose(limits: &Limits, evidence: &Evidence<'_>) -> Option<String> {
    let tail = &evidence.stderr[evidence.stderr.len().saturating_sub(8192)..];
    let tail = String::from_utf8_lossy(tail);
    let mut found = Vec::new();
    if let Some(bytes) = limits.memory {
        let memory_signs = [
            "MemoryError",
            "Cannot allocate memory",
            "std::bad_alloc",
            "out of memory",
            "Out of memory",
        ];
        let near = evidence.peak_vm > 0 && evidence.peak_vm.saturating_add(NEAR_LIMIT) >= bytes;
        if near || memory_signs.iter().any(|s| tail.contains(s)) {
            found.push(format!(
                "memory limit {} may have been exceeded",
                human(bytes)
            ));
        }
    }
    if let Some(bytes) = limits.file_size
        && (evidence.exit_code == Some(-libc::SIGXFSZ)
            || tail.contains("File too large")
            || tail.contains("File size limit exceeded"))
    {
        found.push(format!(
            "file-size limit {} may have been exceeded",
            human(bytes)
        ));
    }
    if let Some(n) = limits.processes {
        let signs = [
            "Resource temporarily unavailable",
            "can't start new thread",
            "fork: retry",
        ];
        if evidence.pids_max_hit
            || (limits.cgroups.is_some() && signs.iter().any(|s| tail.contains(s)))
        {
            found.push(format!("process limit {n} may have been reached"));
        }
    }
    (!found.is_empty()).then(|| found.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_sizes() {
        assert_eq!(human(4 << 30), "4 GiB");
        assert_eq!(human(512 << 20), "512 MiB");
        assert_eq!(human(1000), "1000 bytes");
        assert_eq!(human((3 << 30) / 2), "1536 MiB");
        assert_eq!(human(1_500_000_000), "1.4 GiB");
    }

    #[test]
    fn default_memory_is_at_most_4_gib() {
        let m = default_memory();
        assert!(m > 0 && m <= 4 << 30, "{m}");
    }

    fn limits() -> Limits {
        Limits {
            memory: Some(1 << 30),
            file_size: Some(1 << 20),
            processes: Some(64),
            cgroups: None,
            cgroups_unavailable: None,
            env_remove: Arc::from(Vec::new()),
        }
    }

    #[test]
    fn diagnoses_name_the_limit() {
        let check = |exit_code, stderr: &str, pids_max_hit| {
            diagnose(
                &limits(),
                &Evidence {
                    exit_code,
                    stderr: stderr.as_bytes(),
                    pids_max_hit,
                    peak_vm: 0,
                },
            )
        };
        assert_eq!(
            check(Some(1), "Traceback…\nMemoryError\n", false).as_deref(),
            Some("memory limit 1 GiB may have been exceeded")
        );
        assert_eq!(
            check(Some(-libc::SIGXFSZ), "", false).as_deref(),
            Some("file-size limit 1 MiB may have been exceeded")
        );
        assert_eq!(
            check(Some(1), "OSError: [Errno 27] File too large\n", false).as_deref(),
            Some("file-size limit 1 MiB may have been exceeded")
        );
        assert_eq!(
            check(Some(1), "", true).as_deref(),
            Some("process limit 64 may have been reached")
        );
        assert_eq!(check(Some(1), "PackagesNotFoundError\n", false), None);
        // Without a limit there is nothing to name.
        let none = diagnose(
            &Limits::none(),
            &Evidence {
                exit_code: Some(1),
                stderr: b"MemoryError",
                pids_max_hit: false,
                peak_vm: 0,
            },
        );
        assert_eq!(none, None);
        // A caught MemoryError leaves no trace on stderr, but the sampled peak shows it.
        let caught = diagnose(
            &limits(),
            &Evidence {
                exit_code: Some(1),
                stderr: b"EnvironmentSpecPluginNotDetected",
                pids_max_hit: false,
                peak_vm: (1 << 30) - (20 << 20),
            },
        );
        assert_eq!(
            caught.as_deref(),
            Some("memory limit 1 GiB may have been exceeded")
        );
        let modest = diagnose(
            &limits(),
            &Evidence {
                exit_code: Some(1),
                stderr: b"",
                pids_max_hit: false,
                peak_vm: 300 << 20,
            },
        );
        assert_eq!(modest, None);
    }
}
