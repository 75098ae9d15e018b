//! The environment registries (`~/.conda/environments.txt`) a sandboxed child reads,
//! each replaced by the server's own bounded copy.
//!
//! conda lists every known environment from the registry of the server's home and, as
//! root, from that of every home of the password database (`list_all_known_prefixes`,
//! conda/core/envs_manager.py:117-160: `isfile()`, then every line through
//! `_clean_environments_txt` and `yield_lines`, unbounded). Any local user (or an agent
//! with file tools in the server's home) may plant that file: a sparse 64 GiB file pinned
//! each read-only call at the memory limit until conda failed (`CondaMemoryError`),
//! 8 million one-character lines held each for two minutes, a symlink to a kernel file
//! that blocks held it until `--timeout` (attack 9, A9-2 and A9-3).
//!
//! So the server reads each registry itself ([`environments`]: a regular file, not
//! through a symlink (`.conda` included), without blocking, at most [`MAX_REGISTRY`]
//! bytes, each absolute entry once, at most [`MAX_ENTRIES`] of them; anything else reads
//! as no entries) and every sandboxed child sees that reading in its place: a file of the
//! call's tmpfs holding the entries kept is attached over the registry, never following a
//! symlink in its place (a `.conda` that is not a directory gets an empty file attached
//! over it, so conda finds no registry there). A registry that does not exist when the
//! child starts gets nothing: one planted after that, or a registry removed and planted
//! again while the call runs (removing a mount point detaches it in every namespace), is
//! read by conda as it is — for that call only, within its `--timeout` and memory limit.

use std::collections::HashSet;
use std::ffi::{CStr, CString};
use std::path::{Path, PathBuf};

/// The largest registry read (a line per environment: 16 MiB is some hundred thousand).
const MAX_REGISTRY: u64 = 16 << 20;

/// The most entries kept of one registry (conda writes one line per environment): the
/// rest of a longer file is not read.
pub(super) const MAX_ENTRIES: usize = 4096;

/// The registries each child sees replaced: the copies to write in the call's tmpfs (the
/// first is always empty) and, for each home, which copy goes over its registry.
#[derive(Debug, Default)]
pub(super) struct Registries {
    pub(super) copies: Vec<Copy>,
    pub(super) homes: Vec<(CString, usize)>,
}

/// One copy, a file of the call's tmpfs.
#[derive(Debug)]
pub(super) struct Copy {
    pub(super) path: CString,
    pub(super) bytes: Vec<u8>,
}

/// The entries read from every registry conda reads (the server's home's; every user's
/// when the server is root), in conda's order, and each home with the text its copy holds.
pub(super) fn environments(
    home: Option<&Path>,
    root: bool,
) -> (Vec<PathBuf>, Vec<(PathBuf, Vec<u8>)>) {
    let mut homes: Vec<PathBuf> = home.map(Path::to_path_buf).into_iter().collect();
    if root {
        homes.extend(password_homes());
    }
    let mut envs = Vec::new();
    let mut read = Vec::new();
    for home in homes {
        let text = registry(&home).unwrap_or_default();
        let kept = entries(&text);
        let mut copy = Vec::new();
        for entry in &kept {
            copy.extend_from_slice(entry.as_bytes());
            copy.push(b'\n');
        }
        envs.extend(kept.into_iter().map(PathBuf::from));
        read.push((home, copy));
    }
    (envs, read)
}

/// The most lines of one registry looked at (conda writes one per environment): a
/// registry of millions of short lines costs no more than one of this many.
const MAX_LINES: usize = 16 * MAX_ENTRIES;

/// The absolute entries of a registry's text, each once, in order, at most
/// [`MAX_ENTRIES`] of its first [`MAX_LINES`] lines (conda's `yield_lines` strips each
/// line and skips comments).
fn entries(text: &[u8]) -> Vec<&str> {
    let mut seen = HashSet::new();
    let mut kept = Vec::new();
    for line in text.split(|b| *b == b'\n').take(MAX_LINES) {
        let Ok(line) = std::str::from_utf8(line).map(str::trim) else {
            continue;
        };
        if line.starts_with('/') && seen.insert(line) {
            kept.push(line);
            if kept.len() == MAX_ENTRIES {
                break;
            }
        }
    }
    kept
}

/// The bytes of `<home>/.conda/environments.txt`, read as [`crate::host::files`] reads
/// what others plant, and `.conda` not through a symlink either.
fn registry(home: &Path) -> Option<Vec<u8>> {
    use rustix::fs::{CWD, Mode, OFlags, openat};
    let dir = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let home = openat(CWD, home, dir, Mode::empty()).ok()?;
    let conda = openat(&home, ".conda", dir | OFlags::NOFOLLOW, Mode::empty()).ok()?;
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let file = openat(&conda, "environments.txt", flags, Mode::empty()).ok()?;
    crate::host::files::read_from(file, MAX_REGISTRY)
}

/// The home directories of `/etc/passwd`.
fn password_homes() -> Vec<PathBuf> {
    let text = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let mut seen = HashSet::new();
    text.lines()
        .filter_map(|line| line.split(':').nth(5))
        .filter(|home| home.starts_with('/') && *home != "/" && seen.insert(*home))
        .map(PathBuf::from)
        .collect()
}

impl Registries {
    /// The copies of `read` (see [`environments`]), as files `r<n>` of the call's tmpfs
    /// at `base`; `None` when a path cannot be passed to the kernel.
    pub(super) fn plan(read: Vec<(PathBuf, Vec<u8>)>, base: &Path) -> Option<Registries> {
        let cstring = |p: &Path| CString::new(p.as_os_str().as_encoded_bytes()).ok();
        let mut registries = Registries {
            copies: vec![Copy {
                path: cstring(&base.join("r0"))?,
                bytes: Vec::new(),
            }],
            homes: Vec::new(),
        };
        for (home, bytes) in read {
            let index = match registries.copies.iter().position(|c| c.bytes == bytes) {
                Some(index) => index,
                None => {
                    let path = base.join(format!("r{}", registries.copies.len()));
                    registries.copies.push(Copy {
                        path: cstring(&path)?,
                        bytes,
                    });
                    registries.copies.len() - 1
                }
            };
            registries.homes.push((cstring(&home)?, index));
        }
        Some(registries)
    }

    /// In the child, between fork and exec, after the call's tmpfs and overlays are
    /// mounted: write the copies and attach each over its registry (best effort: a home
    /// whose registry does not exist, or where attaching fails, keeps what it has). Only
    /// system calls.
    pub(super) fn attach(&self) {
        use rustix::fs::{CWD, Mode, OFlags, openat};
        for copy in &self.copies {
            let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC;
            if let Ok(fd) = openat(CWD, &*copy.path, flags, Mode::from_raw_mode(0o644)) {
                let _ = rustix::io::write(&fd, &copy.bytes);
            }
        }
        for (home, index) in &self.homes {
            let (Some(copy), Some(empty)) = (self.copies.get(*index), self.copies.first()) else {
                continue;
            };
            let _ = replace(home, &copy.path, &empty.path);
        }
    }
}

/// Attach `copy` over `<home>/.conda/environments.txt`, or `empty` over `<home>/.conda`
/// when that is not a directory (a symlink: conda would follow it). Neither final name is
/// followed. Only system calls.
fn replace(home: &CStr, copy: &CStr, empty: &CStr) -> rustix::io::Result<()> {
    use rustix::fs::{CWD, Mode, OFlags, openat};
    use rustix::io::Errno;
    let dir = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let home = openat(CWD, home, dir, Mode::empty())?;
    match openat(&home, c".conda", dir | OFlags::NOFOLLOW, Mode::empty()) {
        Ok(conda) => over(copy, &conda, c"environments.txt"),
        Err(Errno::NOTDIR | Errno::LOOP) => over(empty, &home, c".conda"),
        Err(error) => Err(error),
    }
}

/// A clone of the file `source` attached over `name` in `dir`, not following `name`.
fn over(source: &CStr, dir: &rustix::fd::OwnedFd, name: &CStr) -> rustix::io::Result<()> {
    use rustix::mount::{MoveMountFlags, OpenTreeFlags, move_mount, open_tree};
    let flags = OpenTreeFlags::OPEN_TREE_CLONE | OpenTreeFlags::OPEN_TREE_CLOEXEC;
    let tree = open_tree(rustix::fs::CWD, source, flags)?;
    move_mount(
        &tree,
        c"",
        dir,
        name,
        MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each absolute entry once, in order; relative lines and comments dropped; at most
    /// [`MAX_ENTRIES`] entries of the first [`MAX_LINES`] lines.
    #[test]
    fn entries_are_absolute_distinct_and_bounded() {
        let text = b"/a\n  /b \n# c\nrelative\n/a\n\n/c";
        assert_eq!(entries(text), ["/a", "/b", "/c"]);
        let many: Vec<u8> = (0..2 * MAX_ENTRIES)
            .flat_map(|i| format!("/e{i}\n").into_bytes())
            .collect();
        let kept = entries(&many);
        assert_eq!(kept.len(), MAX_ENTRIES);
        assert_eq!(
            kept.last().copied(),
            Some(&*format!("/e{}", MAX_ENTRIES - 1))
        );
        let mut late = b"/\n".repeat(MAX_LINES);
        late.extend(b"/late\n");
        assert_eq!(entries(&late), ["/"]);
    }
}
