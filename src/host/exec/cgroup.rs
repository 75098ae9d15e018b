//! Per-execution cgroups: exact descendant tracking, `cgroup.kill`, and the pids
//! controller's process-count limit (which, unlike `RLIMIT_NPROC`, holds for root).
//!
//! At startup the server creates `ccm-<pid>` under its own cgroup v2 directory; each
//! execution gets a child `<n>` of it, which the child joins between `fork` and `exec`
//! (it writes `0` to a `cgroup.procs` opened before `fork`), so every descendant, including
//! one that called `setsid`, is a member, and a helper run that overlaps a tool run has a
//! cgroup of its own. The process-count limit uses the v2 pids controller when the
//! server's cgroup delegates it, else the v1 pids hierarchy when one is mounted and
//! writable; otherwise it does not hold, and the server says so.

use std::fs;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Why the server has no per-execution cgroups.
#[derive(Debug, thiserror::Error)]
pub enum NoCgroups {
    #[error("cannot read /proc/self/mountinfo: {0}")]
    Mountinfo(std::io::ErrorKind),
    #[error("cannot read /proc/self/cgroup: {0}")]
    Membership(std::io::ErrorKind),
    #[error("no cgroup v2 hierarchy is mounted")]
    NoV2,
    #[error("this process is not in a cgroup v2 hierarchy")]
    NotInV2,
    #[error("cannot create a cgroup under {}: {kind}", base.display())]
    Create {
        base: PathBuf,
        kind: std::io::ErrorKind,
    },
}

/// Why the process-count limit does not hold.
#[derive(Clone, Debug, thiserror::Error)]
pub enum NoProcessLimit {
    #[error("disabled")]
    Disabled,
    #[error(
        "the pids controller is not delegated to the server's cgroup v2 and no v1 pids \
         hierarchy is mounted"
    )]
    NoV1,
    #[error(
        "the pids controller is not delegated to the server's cgroup v2, and creating a v1 \
         pids cgroup under {} failed: {kind}",
        base.display()
    )]
    CreateV1 {
        base: PathBuf,
        kind: std::io::ErrorKind,
    },
}

/// The server's cgroup containers.
#[derive(Debug)]
pub struct Cgroups {
    /// `<own v2 cgroup>/ccm-<pid>`.
    v2: PathBuf,
    /// The v2 pids controller is enabled for the execution cgroups.
    v2_pids: bool,
    /// `<own v1 pids cgroup>/ccm-<pid>`, used when the v2 controller is not delegated.
    v1_pids: Option<PathBuf>,
    process_limit: Result<&'static str, NoProcessLimit>,
    next: AtomicU64,
}

/// One execution's cgroup(s).
#[derive(Debug)]
pub struct ExecutionGroup {
    v2: PathBuf,
    /// Where `pids.max` and `pids.events` live.
    pids: Option<PathBuf>,
    v1: Option<PathBuf>,
}

/// What `/proc/self` says about the server's cgroups.
struct Own {
    mountinfo: String,
    membership: String,
}

impl Cgroups {
    /// Find the server's own cgroups and create its containers.
    pub fn detect(want_process_limit: bool) -> Result<Cgroups, NoCgroups> {
        let own = Own {
            mountinfo: fs::read_to_string("/proc/self/mountinfo")
                .map_err(|e| NoCgroups::Mountinfo(e.kind()))?,
            membership: fs::read_to_string("/proc/self/cgroup")
                .map_err(|e| NoCgroups::Membership(e.kind()))?,
        };
        let (v2_mount, v2_root) =
            find_mount(&own.mountinfo, |fstype, _| fstype == "cgroup2").ok_or(NoCgroups::NoV2)?;
        let v2_own = own_path(&own.membership, |hid, controllers| {
            hid == "0" && controllers.is_empty()
        })
        .ok_or(NoCgroups::NotInV2)?;
        let base = join(&v2_mount, &v2_root, &v2_own);
        let v2 = base.join(format!("ccm-{}", std::process::id()));
        remove_stale(&base);
        match fs::create_dir(&v2) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                return Err(NoCgroups::Create {
                    base,
                    kind: e.kind(),
                });
            }
        }
        let mut cgroups = Cgroups {
            v2,
            v2_pids: false,
            v1_pids: None,
            process_limit: Err(NoProcessLimit::Disabled),
            next: AtomicU64::new(0),
        };
        if want_process_limit {
            cgroups.enable_process_limit(&base, &own);
        }
        Ok(cgroups)
    }

    /// The pids controller: delegated v2 where the server's cgroup allows it, else a v1
    /// pids hierarchy; records which one holds, or why none does.
    fn enable_process_limit(&mut self, base: &Path, own: &Own) {
        // Delegate the pids controller down to the container, when the server's cgroup
        // allows it (it fails with EBUSY where the server's cgroup has other members).
        let _ = write_file(&base.join("cgroup.subtree_control"), "+pids");
        let delegated = fs::read_to_string(self.v2.join("cgroup.controllers"))
            .map(|c| c.split_whitespace().any(|c| c == "pids"))
            .unwrap_or(false);
        if delegated && write_file(&self.v2.join("cgroup.subtree_control"), "+pids").is_ok() {
            self.v2_pids = true;
            self.process_limit = Ok("cgroup v2 pids controller");
            return;
        }
        let v1 = find_mount(&own.mountinfo, |fstype, options| {
            fstype == "cgroup" && options.split(',').any(|o| o == "pids")
        })
        .and_then(|(mount, root)| {
            let own = own_path(&own.membership, |_, controllers| {
                controllers.split(',').any(|c| c == "pids")
            })?;
            Some(join(&mount, &root, &own))
        });
        self.process_limit = match v1 {
            None => Err(NoProcessLimit::NoV1),
            Some(base1) => {
                remove_stale(&base1);
                let container = base1.join(format!("ccm-{}", std::process::id()));
                match fs::create_dir(&container) {
                    Ok(()) => {
                        self.v1_pids = Some(container);
                        Ok("cgroup v1 pids controller")
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                        self.v1_pids = Some(container);
                        Ok("cgroup v1 pids controller")
                    }
                    Err(e) => Err(NoProcessLimit::CreateV1 {
                        base: base1,
                        kind: e.kind(),
                    }),
                }
            }
        };
    }

    /// How the process-count limit is enforced, or why it is not.
    pub fn process_limit(&self) -> Result<&'static str, NoProcessLimit> {
        self.process_limit.clone()
    }

    /// A fresh cgroup for one execution; `None` (logged) when it cannot be made.
    pub fn create(&self, processes: Option<u64>) -> Option<ExecutionGroup> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let v2 = self.v2.join(n.to_string());
        if let Err(error) = fs::create_dir(&v2) {
            tracing::warn!(kind = %error.kind(), "cannot create an execution cgroup");
            return None;
        }
        let mut group = ExecutionGroup {
            v2,
            pids: None,
            v1: None,
        };
        if let Some(max) = processes {
            if self.v2_pids {
                if write_file(&group.v2.join("pids.max"), &max.to_string()).is_ok() {
                    group.pids = Some(group.v2.clone());
                }
            } else if let Some(container) = &self.v1_pids {
                let v1 = container.join(n.to_string());
                if fs::create_dir(&v1).is_ok() {
                    if write_file(&v1.join("pids.max"), &max.to_string()).is_ok() {
                        group.pids = Some(v1.clone());
                    }
                    group.v1 = Some(v1);
                }
            }
            if group.pids.is_none() {
                tracing::warn!("cannot set the process-count limit of an execution cgroup");
            }
        }
        Some(group)
    }

    /// Remove the containers (at exit; they are empty by then).
    pub fn remove(&self) {
        remove_tree(&self.v2);
        if let Some(v1) = &self.v1_pids {
            remove_tree(v1);
        }
    }
}

impl ExecutionGroup {
    /// `cgroup.procs` of each cgroup, opened for the child to join.
    pub fn procs_fds(&self) -> Vec<OwnedFd> {
        [Some(&self.v2), self.v1.as_ref()]
            .into_iter()
            .flatten()
            .filter_map(|dir| {
                fs::OpenOptions::new()
                    .write(true)
                    .open(dir.join("cgroup.procs"))
                    .ok()
                    .map(OwnedFd::from)
            })
            .collect()
    }

    /// The members now.
    pub fn members(&self) -> Vec<i32> {
        fs::read_to_string(self.v2.join("cgroup.procs"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }

    /// Send `signal` to every member.
    pub fn signal(&self, signal: rustix::process::Signal) {
        for pid in self.members() {
            if let Some(pid) = rustix::process::Pid::from_raw(pid) {
                let _ = rustix::process::kill_process(pid, signal);
            }
        }
    }

    /// SIGKILL every member (`cgroup.kill`, which also catches processes forked meanwhile;
    /// member by member where the kernel lacks it).
    pub fn kill(&self) {
        if write_file(&self.v2.join("cgroup.kill"), "1").is_err() {
            self.signal(rustix::process::Signal::KILL);
        }
    }

    /// The pids controller refused a fork at least once.
    pub fn pids_max_hit(&self) -> bool {
        let Some(dir) = &self.pids else { return false };
        fs::read_to_string(dir.join("pids.events"))
            .unwrap_or_default()
            .lines()
            .any(|l| l.strip_prefix("max ").is_some_and(|n| n.trim() != "0"))
    }

    /// Remove the cgroup(s); they must be empty.
    pub fn remove(&self) {
        let _ = fs::remove_dir(&self.v2);
        if let Some(v1) = &self.v1 {
            let _ = fs::remove_dir(v1);
        }
    }
}

fn write_file(path: &Path, text: &str) -> std::io::Result<()> {
    fs::OpenOptions::new()
        .write(true)
        .open(path)?
        .write_all(text.as_bytes())
}

/// The mount point and root of the first mount matching `(fstype, super options)`.
fn find_mount(mountinfo: &str, matches: impl Fn(&str, &str) -> bool) -> Option<(PathBuf, String)> {
    mountinfo.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let left: Vec<&str> = left.split(' ').collect();
        let mut right = right.split(' ');
        let fstype = right.next()?;
        let _source = right.next()?;
        let options = right.next().unwrap_or("");
        if !matches(fstype, options) {
            return None;
        }
        Some((
            PathBuf::from(unescape(left.get(4)?)),
            unescape(left.get(3)?),
        ))
    })
}

/// `/proc/self/cgroup`: the path of the first line whose (hierarchy id, controllers)
/// match.
fn own_path(membership: &str, matches: impl Fn(&str, &str) -> bool) -> Option<String> {
    membership.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (hid, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        matches(hid, controllers).then(|| path.to_owned())
    })
}

/// The directory of cgroup `own` in a hierarchy mounted at `mount` with root `root`.
fn join(mount: &Path, root: &str, own: &str) -> PathBuf {
    let relative = own.strip_prefix(root.trim_end_matches('/')).unwrap_or(own);
    let mut path = mount.to_path_buf();
    for part in relative.split('/').filter(|p| !p.is_empty() && *p != "..") {
        path.push(part);
    }
    path
}

/// mountinfo escapes space, tab, newline and backslash as octal.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && let Ok(v) = u8::from_str_radix(&field[i + 1..i + 4], 8)
        {
            out.push(v);
            i += 4;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Containers of servers that are gone (`ccm-<pid>` with no such process).
fn remove_stale(base: &Path) {
    let Ok(entries) = fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.strip_prefix("ccm-")) else {
            continue;
        };
        if pid
            .parse::<u32>()
            .is_ok_and(|pid| !crate::host::platform::process_exists(pid))
        {
            remove_tree(&entry.path());
        }
    }
}

/// rmdir the execution cgroups in `dir`, then `dir` (cgroup directories only hold
/// interface files, which rmdir takes with them).
fn remove_tree(dir: &Path) {
    if let Ok(entries) = fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                let _ = fs::remove_dir(entry.path());
            }
        }
    }
    let _ = fs::remove_dir(dir);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_mountinfo_and_membership() {
        let mountinfo = "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n\
                         39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n\
                         41 31 0:38 /sub /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
        let (mount, root) = find_mount(mountinfo, |t, _| t == "cgroup2").unwrap();
        assert_eq!(
            (mount.to_str().unwrap(), root.as_str()),
            ("/sys/fs/cgroup/unified", "/sub")
        );
        let (mount, _) = find_mount(mountinfo, |t, o| {
            t == "cgroup" && o.split(',').any(|o| o == "pids")
        })
        .unwrap();
        assert_eq!(mount, Path::new("/sys/fs/cgroup/pids"));
        let membership = "8:pids:/a\n4:memory:/x/y\n0::/sub/svc.scope\n";
        let own = own_path(membership, |h, c| h == "0" && c.is_empty()).unwrap();
        assert_eq!(own, "/sub/svc.scope");
        assert_eq!(
            join(Path::new("/sys/fs/cgroup/unified"), "/sub", &own),
            Path::new("/sys/fs/cgroup/unified/svc.scope")
        );
        assert_eq!(
            own_path(membership, |_, c| c.split(',').any(|c| c == "pids")).unwrap(),
            "/a"
        );
        assert_eq!(unescape("/a\\040b"), "/a b");
    }
}
