//! The write bound on Linux: the Landlock ruleset made in the server before the fork
//! ([`make`]) and the `pre_exec` hook that enters it ([`install`]), with the walls of
//! `walls.rs` where mount namespaces work. Reached through `host::platform`.

use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{Bound, Changed, Inner, PKGS_DIRS, Setup, USER_CACHE, Writable};
use crate::host::sandbox::{TMPDIR, enter, scope, walls};

/// The write-type accesses the bound handles, and their Landlock ABI
/// (include/uapi/linux/landlock.h): writing a file, removing a directory or a file,
/// making a character device, directory, regular file, socket, FIFO, block device or
/// symlink (ABI 1), reparenting (`REFER`, ABI 2), truncating (ABI 3). Reading and
/// executing are not handled, so they stay allowed everywhere.
mod access {
    pub(super) use crate::host::sandbox::scope::WRITE_FILE;
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
#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
    scoped: u64,
}

/// Whether the kernel can bound writes (its Landlock ABI), or why not.
pub(crate) fn support() -> Result<i64, String> {
    match scope::abi() {
        0 => Err("the kernel has no Landlock (Linux < 5.13, or not enabled at boot)".into()),
        abi => Ok(abi),
    }
}

/// The ruleset granting write-type access beneath `writable` only (`abi` from
/// [`support`]), and the walls of `setup`. Made in the server, before the fork.
pub(crate) fn make(abi: i64, writable: &[Writable], setup: Setup) -> Result<Bound, std::io::Error> {
    // Kernels before ABI 6 take the larger attribute as long as what they do not
    // know is zero.
    let ruleset = scope::create(&RulesetAttr {
        handled_access_fs: access::all(abi),
        handled_access_net: 0,
        scoped: scope::scopes(),
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
            scope::add_rule(ruleset.as_fd(), dir.as_fd(), allowed)?;
            // A new target the server made is gone: its directory is not granted instead.
            if at != place.path && setup.new_targets.contains(&place.path) {
                return Err(Changed.into_io());
            }
            let stat = rustix::fs::fstat(&dir)?;
            mounts.push((at, place.judged, stat.st_dev, stat.st_ino));
        }
    }
    // A place that is `/` (`--allow-paths /`) leaves nothing read-only to wall off,
    // and a clone attached over the root would not be seen below it.
    let everything = mounts.iter().any(|m| m.0 == Path::new("/"));
    let walls = match setup.namespaces.filter(|_| !everything) {
        Some(ids) => Some(
            walls::Walls::new(ids, &mounts, setup.cwd.as_deref())
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
        new_targets: setup.new_targets,
        made: setup.made,
    })))
}

/// A judged (canonical) place, opened without following any symlink on the way; one that
/// does not exist yet, its nearest existing ancestor. A symlink anywhere on the way means
/// the path changed since it was judged.
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

/// Make the new target `target` (judged, canonical), empty, with the missing directories
/// above it, as conda's `create` would, without following a symlink on the way: the
/// directories made here, outermost first (the target last when it was made here);
/// [`super::Changed`] when a symlink is on the way.
pub(crate) fn make_new_target(target: &Path) -> Result<Vec<PathBuf>, std::io::Error> {
    use rustix::fs::{CWD, Mode, OFlags, ResolveFlags, mkdirat, openat2};
    let mut missing = Vec::new();
    let mut at = target;
    loop {
        match std::fs::symlink_metadata(at) {
            Ok(meta) if meta.is_dir() => break,
            Ok(_) => return Err(Changed.into_io()),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                let (Some(name), Some(up)) = (at.file_name(), at.parent()) else {
                    return Err(error);
                };
                missing.push(name);
                at = up;
            }
            Err(error) => return Err(error),
        }
    }
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::NOFOLLOW;
    let resolve = ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
    let changed = |error: rustix::io::Errno| match error {
        rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR | rustix::io::Errno::XDEV => {
            Changed.into_io()
        }
        other => other.into(),
    };
    let mut dir = openat2(CWD, at, flags, Mode::empty(), resolve).map_err(changed)?;
    let (mut made, mut path) = (Vec::new(), at.to_path_buf());
    for name in missing.into_iter().rev() {
        path.push(name);
        match mkdirat(&dir, name, Mode::from_raw_mode(0o777)) {
            Ok(()) => made.push(path.clone()),
            Err(rustix::io::Errno::EXIST) => {}
            Err(error) => return Err(error.into()),
        }
        dir = openat2(&dir, name, flags, Mode::empty(), resolve).map_err(changed)?;
    }
    Ok(made)
}

/// Remove `target`, a directory [`make_new_target`] made, when it is still an empty
/// directory (the run failed before conda wrote it), not through a symlink.
pub(crate) fn remove_unused_target(target: &Path) {
    use rustix::fs::{AtFlags, CWD, Mode, OFlags, ResolveFlags, openat2, unlinkat};
    let (Some(parent), Some(name)) = (target.parent(), target.file_name()) else {
        return;
    };
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::NOFOLLOW;
    let resolve = ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
    if let Ok(dir) = openat2(CWD, parent, flags, Mode::empty(), resolve) {
        // `ENOTEMPTY` when conda wrote it; `ENOTDIR` when it is another file now.
        let _ = unlinkat(&dir, name, AtFlags::REMOVEDIR);
    }
}

/// One of the operator's own places, as conda opens it; `None` when missing.
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

/// Put the child of `command` under `bound`: its own `TMPDIR`; in the `pre_exec` hook the
/// walls (or, without them, no capability for a root child), `no_new_privs` (which
/// Landlock needs of an unprivileged process; nothing it starts gains a privilege through
/// `exec` either), a new domain of the ruleset, then the unix-socket filter. Only system
/// calls in the hook.
pub(crate) fn install(command: &mut tokio::process::Command, bound: &Bound) -> std::io::Result<()> {
    if let Some(tmpdir) = &bound.0.tmpdir {
        command.env(TMPDIR, tmpdir.path());
        command.env("XDG_CACHE_HOME", tmpdir.path().join(USER_CACHE));
    }
    if let Some(pkgs_dirs) = &bound.0.pkgs_dirs {
        command.env(PKGS_DIRS, pkgs_dirs);
    }
    if !bound.0.new_targets.is_empty()
        && let Ok(list) = serde_json::to_string(&bound.0.new_targets)
    {
        command.env(super::NEW_TARGETS, list);
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
                    walls::enter(walls)?;
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
                    scope::add_rule(inner.ruleset.as_fd(), shm.as_fd(), access::all(inner.abi))?;
                }
                None if rustix::process::getuid().is_root() => {
                    enter::drop_privileges()?;
                }
                None => {}
            }
            rustix::thread::set_no_new_privs(true)?;
            scope::restrict(inner.ruleset.as_fd())?;
            match &inner.seccomp {
                Some(filter) => filter.install(),
                None => Ok(()),
            }
        });
    }
    Ok(())
}

impl Changed {
    fn into_io(self) -> std::io::Error {
        std::io::Error::other(self)
    }
}
