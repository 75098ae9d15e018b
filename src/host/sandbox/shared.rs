//! Nothing a bounded write may write is a file shared with anything outside its places.
//!
//! A hard link is a name, not a place: Landlock and the walls' mounts judge the name, so a
//! write through a name inside a place reaches the file's other names, wherever they lie.
//! conda hard-links an environment's files from its package cache (an environment made
//! by plain conda is all hard links, shared with the cache and every other environment
//! linked from it), and an agent with file tools can plant a hard link to any file it may
//! link anywhere in an allowed directory. So before a bounded run starts (after the last
//! check, right before the bound is made), every regular file with more than one link in a
//! place the run may write is either
//!
//! - **un-shared** ([`Rule::Unshare`], the places the call's gates judged: its targets, or
//!   the allowed directories): copied beside itself (mode kept) and the copy renamed over
//!   the name, so the name is a file of its own; under the walls conda copies package
//!   files anyway (`link(2)` across mounts is `EXDEV`), so the environment ends as it would
//!   have, at the cost of one copy of what was shared, once; or
//! - **refused** ([`Rule::Refuse`], the operator's places a command without targets keeps
//!   under `--allow-paths` alone: the root prefix, the envs directories): copying every
//!   environment there is not what the call asked for; the refusal names the file relative
//!   to its place, never its contents.
//!
//! The walk goes by directory descriptors (`openat`, never following a symlink), so depth
//! is not bounded by `PATH_MAX` and a directory swapped for a symlink meanwhile leads the
//! copy nowhere. Anything it cannot see (a directory it cannot list or open) fails closed.
//! Symlinks are skipped (their bytes are never written through); another non-directory
//! with more than one link (a FIFO, a socket, a device node) is refused.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use crate::host::platform;

/// Whether the kernel refuses a hard link to a file its maker may not both read and write
/// (`fs.protected_hardlinks = 1`: fs/namei.c `may_linkat`, the default of most
/// distributions). Un-sharing covers the links a place holds when the run starts; a link
/// the agent's own file tools plant *during* the run (a link script can wait for it) is
/// written through. With the protection on, such a link leads the run only to a file the
/// agent could already write itself, and the run's child holds no `CAP_FSETID` (a write
/// through it keeps no set-user-ID bit): it gains the agent nothing. With it off, a link
/// could lead the run to any file of the server's file system, so bounded writes are
/// refused. Debug builds read the file `CCM_TEST_PROTECTED_HARDLINKS` names instead.
pub(crate) fn links_protected() -> bool {
    let sysctl = match std::env::var_os("CCM_TEST_PROTECTED_HARDLINKS") {
        Some(path) if cfg!(debug_assertions) => PathBuf::from(path),
        _ => PathBuf::from("/proc/sys/fs/protected_hardlinks"),
    };
    std::fs::read_to_string(sysctl).is_ok_and(|value| value.trim() == "1")
}

/// The deepest directory the walk descends to below a place (one descriptor is held per
/// level): deeper is refused, never followed on a stack that could overflow. No conda
/// environment comes near it.
pub const MAX_DEPTH: usize = 512;

/// The most bytes of file data one call may un-share (over all its places): more is
/// refused before anything is copied past it. Holes are kept, not counted.
pub const MAX_BYTES: u64 = 1 << 30;

/// What to do with a shared file of a place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// Replace it by a private copy.
    Unshare,
    /// Refuse the call.
    Refuse,
}

/// Why a place could not be made free of shared files.
#[derive(Debug, thiserror::Error)]
pub enum Shared {
    /// A file with other links, relative to its place.
    #[error("the file {0} has other links (a hard link to a file elsewhere)")]
    File(PathBuf),
    /// Something the walk could not see or copy, relative to its place.
    #[error("{0} could not be read whole")]
    Unseen(PathBuf),
    /// A directory deeper than [`MAX_DEPTH`] below its place, relative to it.
    #[error("{0} is nested too deep to be read whole (more than {MAX_DEPTH} levels)")]
    TooDeep(PathBuf),
    /// More shared data than [`MAX_BYTES`]; the file that went past it.
    #[error("too much shared data to copy: {0} would go past {MAX_BYTES} bytes")]
    TooMuch(PathBuf),
    /// A shared file owned by another user that the server cannot copy as theirs.
    #[error("the file {0} has other links and belongs to another user")]
    Foreign(PathBuf),
    /// A place's path holds a symlink (swapped in after the gates judged it).
    #[error("a place changed after it was judged")]
    Changed,
}

/// What was done: the files un-shared, and the bytes copied.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Unshared {
    pub files: u64,
    pub bytes: u64,
}

/// Apply `rule` to every regular file with more than one link below `place` (a directory;
/// a regular file is judged itself). A place that does not exist holds nothing. The
/// place's own path is resolved as the operator gave it (the operator's places).
pub fn settle(place: &Path, rule: Rule, done: &mut Unshared) -> Result<(), Shared> {
    use rustix::fs::{AtFlags, CWD, FileType, Mode, OFlags, statat};
    let Ok(stat) = statat(CWD, place, AtFlags::SYMLINK_NOFOLLOW) else {
        return Ok(());
    };
    match FileType::from_raw_mode(stat.st_mode) {
        FileType::Directory => {
            let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::NOFOLLOW;
            let dir = rustix::fs::open(place, flags, Mode::empty())
                .map_err(|_| Shared::Unseen(PathBuf::from(".")))?;
            walk(dir, rule, done)
        }
        FileType::RegularFile if stat.st_nlink > 1 => {
            let (Some(parent), Some(name)) = (place.parent(), place.file_name()) else {
                return Err(Shared::Unseen(place.to_path_buf()));
            };
            let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
            let dir = rustix::fs::open(parent, flags, Mode::empty())
                .map_err(|_| Shared::Unseen(place.to_path_buf()))?;
            one(&dir, name, Path::new(name), rule, done)
        }
        _ => Ok(()),
    }
}

/// [`settle`] a place the gates judged (a caller may name it, so may swap a symlink into
/// its path): no component of its path is followed as a symlink
/// ([`platform::open_strict`]), a missing place is settled at its nearest existing directory,
/// and a symlink anywhere in the way refuses the call ([`Shared::Changed`]).
pub fn settle_judged(place: &Path, done: &mut Unshared) -> Result<(), Shared> {
    use rustix::fs::{AtFlags, FileType, Mode, OFlags, fstat, openat, statat};
    let mut at = place;
    let (fd, kind) = loop {
        match platform::open_strict(at, false) {
            Ok(fd) => {
                let stat = fstat(&fd).map_err(|_| Shared::Unseen(PathBuf::from(".")))?;
                break (fd, FileType::from_raw_mode(stat.st_mode));
            }
            Err(rustix::io::Errno::NOENT) => match at.parent() {
                Some(parent) => at = parent,
                None => return Ok(()),
            },
            Err(_) => return Err(Shared::Changed),
        }
    };
    match kind {
        FileType::Directory => {
            let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::NOFOLLOW;
            let dir = openat(&fd, ".", flags, Mode::empty())
                .map_err(|_| Shared::Unseen(PathBuf::from(".")))?;
            walk(dir, Rule::Unshare, done)
        }
        FileType::RegularFile => {
            let (Some(parent), Some(name)) = (at.parent(), at.file_name()) else {
                return Err(Shared::Unseen(at.to_path_buf()));
            };
            let dir = platform::open_strict(parent, true).map_err(|_| Shared::Changed)?;
            let stat = statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW)
                .map_err(|_| Shared::Unseen(PathBuf::from(name)))?;
            if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
                return Err(Shared::Changed);
            }
            if stat.st_nlink > 1 {
                one(&dir, name, Path::new(name), Rule::Unshare, done)?;
            }
            Ok(())
        }
        FileType::Symlink => Err(Shared::Changed),
        _ => Ok(()),
    }
}

/// One directory being walked: its descriptor, its path below the place, and the names
/// it holds that are still to be seen.
struct Level {
    dir: OwnedFd,
    rel: PathBuf,
    names: Vec<std::ffi::OsString>,
}

/// The names of the directory `dir` (at `rel` below the place).
fn list(dir: &OwnedFd, rel: &Path) -> Result<Vec<std::ffi::OsString>, Shared> {
    let here = if rel.as_os_str().is_empty() {
        Path::new(".")
    } else {
        rel
    };
    let unseen = || Shared::Unseen(here.to_path_buf());
    let entries = rustix::fs::Dir::read_from(dir).map_err(|_| unseen())?;
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|_| unseen())?;
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        let name: &std::ffi::OsStr = std::os::unix::ffi::OsStrExt::from_bytes(name);
        names.push(name.to_os_string());
    }
    // Seen in order when popped from the end.
    names.reverse();
    Ok(names)
}

/// Every entry below the directory `top`, depth first, on an explicit stack (at most
/// [`MAX_DEPTH`] levels, one descriptor each).
fn walk(top: OwnedFd, rule: Rule, done: &mut Unshared) -> Result<(), Shared> {
    use rustix::fs::{AtFlags, FileType, Mode, OFlags, openat, statat};
    let names = list(&top, Path::new(""))?;
    let mut stack = vec![Level {
        dir: top,
        rel: PathBuf::new(),
        names,
    }];
    loop {
        let depth = stack.len();
        let Some(level) = stack.last_mut() else {
            break;
        };
        let Some(name) = level.names.pop() else {
            stack.pop();
            continue;
        };
        let path = level.rel.join(&name);
        let unseen = |path: &Path| Shared::Unseen(path.to_path_buf());
        let stat = statat(&level.dir, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW)
            .map_err(|_| unseen(&path))?;
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::Directory => {
                if depth >= MAX_DEPTH {
                    return Err(Shared::TooDeep(path));
                }
                let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::NOFOLLOW;
                let sub = openat(&level.dir, name.as_os_str(), flags, Mode::empty())
                    .map_err(|_| unseen(&path))?;
                let names = list(&sub, &path)?;
                stack.push(Level {
                    dir: sub,
                    rel: path,
                    names,
                });
            }
            FileType::Symlink => {}
            FileType::RegularFile if stat.st_nlink > 1 => {
                one(&level.dir, name.as_os_str(), &path, rule, done)?;
            }
            _ if stat.st_nlink > 1 => return Err(Shared::File(path)),
            _ => {}
        }
    }
    Ok(())
}

/// The regular file `name` of `dir` (at `rel`), which has other links: refused, or copied
/// beside itself and the copy renamed over it. The copy keeps the permission bits only
/// (never set-user-ID, set-group-ID or sticky: the server's copy must grant no right the
/// original did not) and the original's owner and group (a file of another user that the
/// server cannot give them, because it is not root, is refused). Holes are kept; the
/// data copied counts against [`MAX_BYTES`].
fn one(
    dir: &OwnedFd,
    name: &std::ffi::OsStr,
    rel: &Path,
    rule: Rule,
    done: &mut Unshared,
) -> Result<(), Shared> {
    use rustix::fs::{FileType, Mode, OFlags, fchmod, fchown, fstat, openat, renameat, unlinkat};
    if rule == Rule::Refuse {
        return Err(Shared::File(rel.to_path_buf()));
    }
    let unseen = || Shared::Unseen(rel.to_path_buf());
    let source = openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NONBLOCK,
        Mode::empty(),
    )
    .map_err(|_| unseen())?;
    let stat = fstat(&source).map_err(|_| unseen())?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
        return Err(Shared::File(rel.to_path_buf()));
    }
    if stat.st_nlink <= 1 {
        return Ok(());
    }
    // At most this much data, counted before the copy (holes are not data).
    let blocks = u64::try_from(stat.st_blocks).unwrap_or(u64::MAX);
    let size = u64::try_from(stat.st_size).map_err(|_| unseen())?;
    let data = size.min(blocks.saturating_mul(512));
    if done.bytes.saturating_add(data) > MAX_BYTES {
        return Err(Shared::TooMuch(rel.to_path_buf()));
    }
    let mode = Mode::from_raw_mode(stat.st_mode & 0o777);
    let mut temp_name = name.to_os_string();
    temp_name.push(format!(".ccm-unshare-{}", std::process::id()));
    let copy = openat(
        dir,
        temp_name.as_os_str(),
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )
    .map_err(|_| unseen())?;
    let copied = (|| {
        // Another user's file stays theirs; a server that cannot make it so refuses.
        let uid = rustix::process::geteuid();
        if stat.st_uid != uid.as_raw() || stat.st_gid != rustix::process::getegid().as_raw() {
            let owner = Some(rustix::fs::Uid::from_raw(stat.st_uid));
            let group = Some(rustix::fs::Gid::from_raw(stat.st_gid));
            if fchown(&copy, owner, group).is_err() {
                return Err(Shared::Foreign(rel.to_path_buf()));
            }
        }
        let bytes = copy_data(&source, &copy, size, MAX_BYTES - done.bytes).ok_or_else(unseen)?;
        fchmod(&copy, mode).map_err(|_| unseen())?;
        Ok(bytes)
    })();
    let renamed = copied.and_then(|bytes| {
        renameat(dir, temp_name.as_os_str(), dir, name)
            .map(|()| bytes)
            .map_err(|_| unseen())
    });
    match renamed {
        Ok(bytes) => {
            done.files += 1;
            done.bytes += bytes;
            Ok(())
        }
        Err(error) => {
            let _ = unlinkat(dir, temp_name.as_os_str(), rustix::fs::AtFlags::empty());
            Err(error)
        }
    }
}

/// Copy the data of `from` (`size` bytes long) into `to`, keeping holes (`SEEK_DATA` /
/// `SEEK_HOLE`); the bytes of data copied, `None` on an error or past `budget`.
fn copy_data(from: &OwnedFd, to: &OwnedFd, size: u64, budget: u64) -> Option<u64> {
    use rustix::fs::{SeekFrom, ftruncate, seek};
    use rustix::io::{pread, pwrite};
    let mut copied = 0u64;
    let mut at = 0u64;
    let mut buffer = vec![0u8; 1 << 20];
    while at < size {
        let start = match seek(from, SeekFrom::Data(at)) {
            Ok(start) => start,
            Err(rustix::io::Errno::NXIO) => break,
            Err(_) => return None,
        };
        let end = seek(from, SeekFrom::Hole(start)).ok()?.min(size);
        let mut offset = start;
        while offset < end {
            let want = usize::try_from((end - offset).min(buffer.len() as u64)).ok()?;
            let read = pread(from, &mut buffer[..want], offset).ok()?;
            if read == 0 {
                break;
            }
            copied += read as u64;
            if copied > budget {
                return None;
            }
            let mut written = 0;
            while written < read {
                let n = pwrite(to, &buffer[written..read], offset + written as u64).ok()?;
                if n == 0 {
                    return None;
                }
                written += n;
            }
            offset += read as u64;
        }
        at = end.max(offset);
        if at == start {
            // No progress (the file shrank meanwhile): stop.
            break;
        }
    }
    ftruncate(to, size).ok()?;
    Some(copied)
}

#[cfg(test)]
pub(crate) mod tests;
