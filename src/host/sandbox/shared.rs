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
/// its path): no component of its path is followed as a symlink (`openat2`
/// `RESOLVE_NO_SYMLINKS`), a missing place is settled at its nearest existing directory,
/// and a symlink anywhere in the way refuses the call ([`Shared::Changed`]).
pub fn settle_judged(place: &Path, done: &mut Unshared) -> Result<(), Shared> {
    use rustix::fs::{AtFlags, FileType, Mode, OFlags, fstat, openat, statat};
    let mut at = place;
    let (fd, kind) = loop {
        match open_strict(at, OFlags::PATH) {
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
            let dir = open_strict(parent, OFlags::RDONLY | OFlags::DIRECTORY)
                .map_err(|_| Shared::Changed)?;
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

/// `path` opened with `flags`, following no symlink in any component.
fn open_strict(path: &Path, flags: rustix::fs::OFlags) -> rustix::io::Result<OwnedFd> {
    use rustix::fs::{CWD, Mode, OFlags, ResolveFlags, openat2};
    openat2(
        CWD,
        path,
        flags | OFlags::CLOEXEC | OFlags::NOFOLLOW,
        Mode::empty(),
        ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
    )
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
pub(crate) mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    /// A file of the place hard-linked to a file outside becomes a copy of its own (bytes
    /// and mode kept, the outside file untouched by a later write); under `Refuse` the
    /// same place is refused naming the file relative to it; a symlink is left alone.
    #[test]
    fn shared_files_are_copied_or_refused() {
        let root = tempfile::tempdir().unwrap();
        let (place, outside) = (root.path().join("env"), root.path().join("outside"));
        std::fs::create_dir_all(place.join("bin/deep")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("bashrc"), b"rc\n").unwrap();
        std::fs::set_permissions(
            outside.join("bashrc"),
            std::fs::Permissions::from_mode(0o751),
        )
        .unwrap();
        std::fs::hard_link(outside.join("bashrc"), place.join("bin/deep/evil")).unwrap();
        std::os::unix::fs::symlink(outside.join("bashrc"), place.join("bin/link")).unwrap();
        std::fs::write(place.join("plain"), b"x").unwrap();
        let mut done = Unshared::default();
        match settle(&place, Rule::Refuse, &mut done) {
            Err(Shared::File(rel)) => assert_eq!(rel, Path::new("bin/deep/evil")),
            other => panic!("{other:?}"),
        }
        settle(&place, Rule::Unshare, &mut done).unwrap();
        assert_eq!(done, Unshared { files: 1, bytes: 3 });
        let meta = std::fs::metadata(place.join("bin/deep/evil")).unwrap();
        assert_eq!((meta.nlink(), meta.mode() & 0o7777), (1, 0o751));
        std::fs::write(place.join("bin/deep/evil"), b"changed\n").unwrap();
        assert_eq!(std::fs::read(outside.join("bashrc")).unwrap(), b"rc\n");
        assert_eq!(
            std::fs::metadata(outside.join("bashrc")).unwrap().nlink(),
            1
        );
        let mut again = Unshared::default();
        settle(&place, Rule::Refuse, &mut again).unwrap();
        assert_eq!(again, Unshared::default());
        assert!(settle(&root.path().join("missing"), Rule::Refuse, &mut again).is_ok());
        // A place that is itself a shared file.
        std::fs::hard_link(outside.join("bashrc"), root.path().join("registry")).unwrap();
        assert!(settle(&root.path().join("registry"), Rule::Refuse, &mut again).is_err());
        settle(&root.path().join("registry"), Rule::Unshare, &mut again).unwrap();
        assert_eq!(
            std::fs::metadata(outside.join("bashrc")).unwrap().nlink(),
            1
        );
    }
    /// Two names of one file in `dir`: `name` and `name.bak`.
    fn twice(dir: &Path, name: &str, bytes: &[u8], mode: u32) -> PathBuf {
        let file = dir.join(name);
        std::fs::write(&file, bytes).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
        std::fs::hard_link(&file, dir.join(format!("{name}.bak"))).unwrap();
        file
    }

    /// A chain of `depth` directories `d/d/…` below `dir`, made by descriptors (deeper
    /// than `PATH_MAX`).
    pub(crate) fn chain(dir: &Path, depth: usize) {
        use rustix::fs::{Mode, OFlags, mkdirat, open, openat};
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let mut at = open(dir, flags, Mode::empty()).unwrap();
        for _ in 0..depth {
            mkdirat(&at, "d", Mode::from_raw_mode(0o755)).unwrap();
            at = openat(&at, "d", flags, Mode::empty()).unwrap();
        }
    }

    /// Remove a chain made by [`chain`], one level at a time from the top.
    pub(crate) fn unchain(dir: &Path) {
        use rustix::fs::{AtFlags, Mode, OFlags, open, renameat, unlinkat};
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let at = open(dir, flags, Mode::empty()).unwrap();
        while renameat(&at, "d/d", &at, "x").is_ok() {
            unlinkat(&at, "d", AtFlags::REMOVEDIR).unwrap();
            renameat(&at, "x", &at, "d").unwrap();
        }
        let _ = unlinkat(&at, "d", AtFlags::REMOVEDIR);
    }

    /// Attack 4 U1: a set-user-ID file of another user with two links in a place is
    /// copied without its set-user-ID/set-group-ID/sticky bits and stays its owner's (a
    /// root server's copy of it would otherwise be a set-user-ID-root program).
    #[test]
    fn an_unshared_copy_keeps_no_special_bits_and_its_owner() {
        let root = tempfile::tempdir().unwrap();
        let place = root.path().join("proj");
        std::fs::create_dir(&place).unwrap();
        let tool = twice(&place, "tool", b"#!/bin/sh\n", 0o755);
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o6755)).unwrap();
        let root_server = rustix::process::geteuid().is_root();
        if root_server {
            std::os::unix::fs::chown(&tool, Some(65534), Some(65534)).unwrap();
            std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o6755)).unwrap();
        }
        let mut done = Unshared::default();
        settle_judged(&place, &mut done).unwrap();
        assert_eq!(done.files, 1, "{done:?}");
        for name in ["tool", "tool.bak"] {
            let meta = std::fs::metadata(place.join(name)).unwrap();
            assert_eq!(meta.nlink(), 1, "{name}");
            if root_server {
                assert_eq!((meta.uid(), meta.gid()), (65534, 65534), "{name}");
            }
        }
        // The copy (whichever name it took) has no special bit.
        let modes: Vec<u32> = ["tool", "tool.bak"]
            .iter()
            .map(|n| std::fs::metadata(place.join(n)).unwrap().mode() & 0o7777)
            .collect();
        assert!(modes.contains(&0o755), "{modes:?}");
    }

    /// Attack 4 U4: a judged place whose missing parent is a symlink to elsewhere (swapped
    /// in after the gates' check) is refused, and nothing elsewhere is rewritten.
    #[test]
    fn a_symlink_in_a_judged_places_path_is_never_followed() {
        let root = tempfile::tempdir().unwrap();
        let (proj, outside) = (root.path().join("proj"), root.path().join("outside"));
        std::fs::create_dir_all(outside.join("openv")).unwrap();
        std::fs::create_dir(&proj).unwrap();
        let data = twice(&outside.join("openv"), "data.txt", b"data\n", 0o644);
        let before = std::fs::metadata(&data).unwrap().ino();
        std::os::unix::fs::symlink(&outside, proj.join("a")).unwrap();
        let mut done = Unshared::default();
        let refused = settle_judged(&proj.join("a/openv"), &mut done);
        assert!(matches!(refused, Err(Shared::Changed)), "{refused:?}");
        let refused = settle_judged(&proj.join("a/openv/data.txt"), &mut done);
        assert!(matches!(refused, Err(Shared::Changed)), "{refused:?}");
        let refused = settle_judged(&proj.join("a/missing/env"), &mut done);
        assert!(matches!(refused, Err(Shared::Changed)), "{refused:?}");
        let meta = std::fs::metadata(&data).unwrap();
        assert_eq!((meta.ino(), meta.nlink()), (before, 2));
        assert_eq!(done, Unshared::default());
        // The place itself, un-shared; a missing one settles at its nearest directory.
        let inside = twice(&proj, "x", b"x", 0o644);
        settle_judged(&proj.join("new/env"), &mut done).unwrap();
        assert_eq!(std::fs::metadata(&inside).unwrap().nlink(), 1);
    }

    /// Attack 4 U2: a chain of 10 000 directories in a place is refused (too deep), on a
    /// test thread's ordinary stack, never overflowing it; `MAX_DEPTH` levels are read.
    #[test]
    fn a_deep_chain_is_refused_without_overflowing_the_stack() {
        let root = tempfile::tempdir().unwrap();
        let place = root.path().join("proj");
        std::fs::create_dir(&place).unwrap();
        chain(&place, 10_000);
        let mut done = Unshared::default();
        let refused = settle_judged(&place, &mut done);
        assert!(matches!(refused, Err(Shared::TooDeep(_))), "{refused:?}");
        assert!(refused.unwrap_err().to_string().contains("nested too deep"));
        unchain(&place);
        chain(&place, MAX_DEPTH - 1);
        settle_judged(&place, &mut done).unwrap();
        unchain(&place);
    }

    /// Attack 4 U5: a 2 GiB sparse file with two links is copied with its holes (no more
    /// blocks than before); shared data past [`MAX_BYTES`] per call is refused.
    #[test]
    fn unsharing_keeps_holes_and_copies_at_most_its_budget() {
        let root = tempfile::tempdir().unwrap();
        let place = root.path().join("proj");
        std::fs::create_dir(&place).unwrap();
        let big = place.join("big");
        let file = std::fs::File::create(&big).unwrap();
        file.set_len(2 << 30).unwrap();
        std::os::unix::fs::FileExt::write_at(&file, b"tail", (2 << 30) - 4).unwrap();
        drop(file);
        std::fs::hard_link(&big, place.join("big2")).unwrap();
        let blocks = std::fs::metadata(&big).unwrap().blocks();
        let mut done = Unshared::default();
        settle_judged(&place, &mut done).unwrap();
        let meta = std::fs::metadata(&big).unwrap();
        assert_eq!((meta.nlink(), meta.len()), (1, 2 << 30));
        assert!(meta.blocks() <= blocks + 8, "{} > {blocks}", meta.blocks());
        assert!(done.bytes < 1 << 20, "{done:?}");
        let mut tail = [0u8; 4];
        std::os::unix::fs::FileExt::read_exact_at(
            &std::fs::File::open(place.join("big2")).unwrap(),
            &mut tail,
            (2 << 30) - 4,
        )
        .unwrap();
        assert_eq!(&tail, b"tail");
        // Over the budget: refused, the file still shared.
        twice(&place, "more", &[7u8; 100], 0o644);
        let mut spent = Unshared {
            files: 0,
            bytes: MAX_BYTES - 10,
        };
        let refused = settle_judged(&place, &mut spent);
        assert!(matches!(refused, Err(Shared::TooMuch(_))), "{refused:?}");
        assert!(
            refused
                .unwrap_err()
                .to_string()
                .contains("too much shared data")
        );
        assert_eq!(std::fs::metadata(place.join("more")).unwrap().nlink(), 2);
    }
}
