//! The server's own directories in the temporary directory — a bounded write's
//! `ccm-write-*` (its `TMPDIR` and private package cache) and a bound plan's `ccm-plan-*`
//! (the plan and copies of its input files) — and the removal of those a dead server
//! left behind.
//!
//! Each is named by the process that made it, `<kind>-<pid>.<start>-<random>` (`start`:
//! the process's start time in clock ticks since boot, `/proc/<pid>/stat` field 22, so a
//! reused pid does not pass for its old owner), and locked by it (`flock(LOCK_SH)` on the
//! directory, held by a descriptor until it is removed). A server killed mid-call
//! (SIGKILL: nothing runs its `Drop`) leaves its directories; the next server to start
//! removes those ([`sweep`]) that: are named so, are directories (never a symlink, which
//! is not followed), are owned by the server's user, name a process that is not running
//! with that start time, and whose lock it can take (a live owner in another PID
//! namespace still holds its lock). The removal follows no symlink inside
//! (`std::fs::remove_dir_all`). Directories of the old unnamed form (`ccm-write-XXXXXX`)
//! are left alone: no owner can be told.

use std::fs::File;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The kinds of directories a server makes here.
pub(crate) const KINDS: [&str; 2] = ["ccm-write", "ccm-plan"];

/// A directory of the server's own: removed (and unlocked) when dropped.
#[derive(Debug)]
pub struct Scratch {
    // Dropped first: the directory goes, then its lock.
    dir: tempfile::TempDir,
    _lock: File,
}

impl Scratch {
    /// A new directory `<kind>-<pid>.<start>-<random>` in `parent`, mode 0700, locked.
    pub(crate) fn new(kind: &str, parent: &Path) -> io::Result<Scratch> {
        let pid = std::process::id();
        let start = start_time(pid).unwrap_or(0);
        let dir = tempfile::Builder::new()
            .prefix(&format!("{kind}-{pid}.{start}-"))
            .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .tempdir_in(parent)?;
        let lock = File::open(dir.path())?;
        rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockShared)?;
        Ok(Scratch { dir, _lock: lock })
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// Remove from `parent` the directories of servers that are gone (see the module); the
/// number removed. Best effort: what cannot be removed is left (logged).
pub fn sweep(parent: &Path) -> usize {
    // Without /proc no owner can be told alive or dead: nothing is removed.
    if start_time(std::process::id()).is_none() {
        return 0;
    }
    let Ok(entries) = std::fs::read_dir(parent) else {
        return 0;
    };
    let uid = rustix::process::geteuid().as_raw();
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some((pid, start)) = name.to_str().and_then(owner) else {
            continue;
        };
        let path = entry.path();
        let ours = std::fs::symlink_metadata(&path)
            .is_ok_and(|m| m.file_type().is_dir() && m.uid() == uid);
        if !ours || start_time(pid) == Some(start) {
            continue;
        }
        match remove_unlocked(&path) {
            Ok(true) => removed += 1,
            Ok(false) => {}
            Err(error) => {
                tracing::warn!(%error, path = %path.display(), "a dead server's directory could not be removed");
            }
        }
    }
    removed
}

/// Remove `path` when nobody holds its lock (`false`: somebody does).
fn remove_unlocked(path: &Path) -> io::Result<bool> {
    use rustix::fs::{Mode, OFlags};
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let dir = rustix::fs::open(path, flags, Mode::empty())?;
    match rustix::fs::flock(&dir, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => {}
        Err(rustix::io::Errno::WOULDBLOCK) => return Ok(false),
        Err(error) => return Err(error.into()),
    }
    match std::fs::remove_dir_all(path) {
        Ok(()) => Ok(true),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(error) => Err(error),
    }
}

/// The owner a name records: `<kind>-<pid>.<start>-<random>`.
fn owner(name: &str) -> Option<(u32, u64)> {
    let rest = KINDS
        .iter()
        .find_map(|kind| name.strip_prefix(kind)?.strip_prefix('-'))?;
    let (owner, random) = rest.split_once('-')?;
    let (pid, start) = owner.split_once('.')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(pid) || !digits(start) || random.is_empty() {
        return None;
    }
    Some((pid.parse().ok()?, start.parse().ok()?))
}

/// A process's start time (`host::platform`), `None` when it is not running (or there
/// is no process table).
fn start_time(pid: u32) -> Option<u64> {
    crate::host::platform::start_time(pid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_record_their_owner() {
        assert_eq!(owner("ccm-write-12.345-abcDEF"), Some((12, 345)));
        assert_eq!(owner("ccm-plan-1.0-x"), Some((1, 0)));
        for other in [
            "ccm-write-abcdef",
            "ccm-write-12.345-",
            "ccm-write-12-345-x",
            "ccm-writer-1.2-x",
            "ccm-sandbox-1.2-x",
            "ccm-write-1.2x-y",
        ] {
            assert_eq!(owner(other), None, "{other}");
        }
        let own = start_time(std::process::id());
        assert!(own.is_some());
        assert_eq!(start_time(u32::MAX), None);
    }

    /// A live owner's directory stays; a dead owner's goes; a symlink named like one is
    /// not followed; a directory locked by a live owner elsewhere stays.
    #[test]
    fn only_dead_servers_directories_are_removed() {
        let parent = tempfile::tempdir().unwrap();
        let live = Scratch::new("ccm-write", parent.path()).unwrap();
        // A pid that is running, with another start time: its old owner is gone.
        let pid = std::process::id();
        let dead = parent.path().join(format!("ccm-write-{pid}.1-dead"));
        std::fs::create_dir_all(dead.join("pkgs/cache")).unwrap();
        std::fs::write(dead.join("pkgs/cache/x.json"), "{}").unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("keep"), "").unwrap();
        let link = parent.path().join(format!("ccm-plan-{pid}.2-link"));
        std::os::unix::fs::symlink(outside.path(), &link).unwrap();
        let held = parent.path().join(format!("ccm-plan-{pid}.3-held"));
        std::fs::create_dir(&held).unwrap();
        let lock = File::open(&held).unwrap();
        rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockShared).unwrap();
        assert_eq!(sweep(parent.path()), 1);
        assert!(live.path().is_dir());
        assert!(!dead.exists());
        assert!(link.is_symlink() && outside.path().join("keep").exists());
        assert!(held.is_dir());
        drop(lock);
        assert_eq!(sweep(parent.path()), 1);
        assert!(!held.exists());
        let path = live.path().to_path_buf();
        drop(live);
        assert!(!path.exists());
    }
}
