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
}

/// What was done: the files un-shared, and the bytes copied.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Unshared {
    pub files: u64,
    pub bytes: u64,
}

/// Apply `rule` to every regular file with more than one link below `place` (a directory;
/// a regular file is judged itself). A place that does not exist holds nothing.
pub fn settle(place: &Path, rule: Rule) -> Result<Unshared, Shared> {
    use rustix::fs::{AtFlags, CWD, FileType, Mode, OFlags, statat};
    let mut done = Unshared::default();
    let Ok(stat) = statat(CWD, place, AtFlags::SYMLINK_NOFOLLOW) else {
        return Ok(done);
    };
    let unseen = |rel: &Path| Shared::Unseen(rel.to_path_buf());
    match FileType::from_raw_mode(stat.st_mode) {
        FileType::Directory => {
            let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::NOFOLLOW;
            let dir = rustix::fs::open(place, flags, Mode::empty())
                .map_err(|_| unseen(Path::new(".")))?;
            walk(&dir, Path::new(""), rule, &mut done)?;
        }
        FileType::RegularFile if stat.st_nlink > 1 => {
            let (Some(parent), Some(name)) = (place.parent(), place.file_name()) else {
                return Err(unseen(place));
            };
            let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
            let dir = rustix::fs::open(parent, flags, Mode::empty()).map_err(|_| unseen(place))?;
            one(&dir, name, Path::new(name), rule, &mut done)?;
        }
        _ => {}
    }
    Ok(done)
}

/// Every entry of the directory `dir` (at `rel` below the place), depth first.
fn walk(dir: &OwnedFd, rel: &Path, rule: Rule, done: &mut Unshared) -> Result<(), Shared> {
    use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags, openat, statat};
    let unseen = |rel: &Path| Shared::Unseen(rel.to_path_buf());
    let here = if rel.as_os_str().is_empty() {
        Path::new(".")
    } else {
        rel
    };
    let entries = Dir::read_from(dir).map_err(|_| unseen(here))?;
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|_| unseen(here))?;
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        let name: &std::ffi::OsStr = std::os::unix::ffi::OsStrExt::from_bytes(name);
        names.push(name.to_os_string());
    }
    for name in names {
        let path = rel.join(&name);
        let stat =
            statat(dir, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW).map_err(|_| unseen(&path))?;
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::Directory => {
                let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::NOFOLLOW;
                let sub = openat(dir, name.as_os_str(), flags, Mode::empty())
                    .map_err(|_| unseen(&path))?;
                walk(&sub, &path, rule, done)?;
            }
            FileType::Symlink => {}
            FileType::RegularFile if stat.st_nlink > 1 => {
                one(dir, name.as_os_str(), &path, rule, done)?;
            }
            _ if stat.st_nlink > 1 => return Err(Shared::File(path)),
            _ => {}
        }
    }
    Ok(())
}

/// The regular file `name` of `dir` (at `rel`), which has other links: refused, or copied
/// beside itself and the copy renamed over it.
fn one(
    dir: &OwnedFd,
    name: &std::ffi::OsStr,
    rel: &Path,
    rule: Rule,
    done: &mut Unshared,
) -> Result<(), Shared> {
    use rustix::fs::{FileType, Mode, OFlags, fchmod, fstat, openat, renameat, unlinkat};
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
    let mode = Mode::from_raw_mode(stat.st_mode & 0o7777);
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
        let mut from = std::fs::File::from(source);
        let mut to = std::fs::File::from(copy);
        let bytes = std::io::copy(&mut from, &mut to).ok()?;
        fchmod(&to, mode).ok()?;
        Some(bytes)
    })();
    let renamed = copied.filter(|_| renameat(dir, temp_name.as_os_str(), dir, name).is_ok());
    match renamed {
        Some(bytes) => {
            done.files += 1;
            done.bytes += bytes;
            Ok(())
        }
        None => {
            let _ = unlinkat(dir, temp_name.as_os_str(), rustix::fs::AtFlags::empty());
            Err(unseen())
        }
    }
}

#[cfg(test)]
mod tests {
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
        match settle(&place, Rule::Refuse) {
            Err(Shared::File(rel)) => assert_eq!(rel, Path::new("bin/deep/evil")),
            other => panic!("{other:?}"),
        }
        let done = settle(&place, Rule::Unshare).unwrap();
        assert_eq!(done, Unshared { files: 1, bytes: 3 });
        let meta = std::fs::metadata(place.join("bin/deep/evil")).unwrap();
        assert_eq!((meta.nlink(), meta.mode() & 0o7777), (1, 0o751));
        std::fs::write(place.join("bin/deep/evil"), b"changed\n").unwrap();
        assert_eq!(std::fs::read(outside.join("bashrc")).unwrap(), b"rc\n");
        assert_eq!(
            std::fs::metadata(outside.join("bashrc")).unwrap().nlink(),
            1
        );
        assert_eq!(settle(&place, Rule::Refuse).unwrap(), Unshared::default());
        assert!(settle(&root.path().join("missing"), Rule::Refuse).is_ok());
        // A place that is itself a shared file.
        std::fs::hard_link(outside.join("bashrc"), root.path().join("registry")).unwrap();
        assert!(settle(&root.path().join("registry"), Rule::Refuse).is_err());
        settle(&root.path().join("registry"), Rule::Unshare).unwrap();
        assert_eq!(
            std::fs::metadata(outside.join("bashrc")).unwrap().nlink(),
            1
        );
    }
}
