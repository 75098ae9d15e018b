//! Which directories a call's sandbox overlays, from what exists now: the directories
//! conda writes on a read (its writability probes, the repodata and notices caches), and
//! the package cache or envs directory conda would create on a read
//! (`PackageCacheData.first_writable`, `first_writable_envs_dir`) when it does not exist
//! yet: a read-only union on its nearest existing ancestor adds the missing entry, and a
//! tmpfs of the call mounted on that entry takes what conda creates there, so nothing
//! appears in the operator's tree and everything else in the ancestor stays read-only.

use std::path::{Path, PathBuf};

use super::{Facts, MAX_KEEPS, Sandbox};

/// Most environments outside the envs directories whose `conda-meta` a call overlays
/// (the root prefix first, then `environments.txt` in its order): the rest stay read-only
/// to the call (conda's history probe finds them not writable; reads work). A write call
/// may append to `environments.txt`, and thousands of entries made every later sandboxed
/// call mount thousands of overlays, seconds to minutes each (attack 5 V4).
pub(super) const MAX_ENVIRONMENTS: usize = 64;

/// Most known environments looked at for those overlays (one `lstat` each): registries
/// full of entries that are no environment cost a call no more (attack 9 A9-3: 8 million
/// lines of `/` took ten seconds of a worker per call).
const MAX_EXAMINED: usize = 4 * super::registries::MAX_ENTRIES;

#[derive(Debug, Default)]
pub(super) struct Areas {
    /// Copy-on-write overlays: reads see the operator's directory as it is, writes land
    /// in the call's tmpfs and are discarded. Never nested.
    pub(super) overlays: Vec<PathBuf>,
    /// The caches conda writes on reads (each package cache's repodata cache, the
    /// notices cache) that exist; each lies inside one of `overlays`.
    pub(super) caches: Vec<PathBuf>,
    /// Directories that do not exist, made for the call inside a read-only union.
    pub(super) unions: Vec<Union>,
    /// Each home conda reads a registry of, with what the call sees there
    /// (`registries.rs`).
    pub(super) registries: Vec<super::registries::Read>,
}

/// A read-only union on an existing directory that adds entries it lacks.
#[derive(Debug)]
pub(super) struct Union {
    /// The existing directory (neither in nor over an overlay, no mount point below).
    pub(super) target: PathBuf,
    /// Its new entries (direct children), each a tmpfs of the call.
    pub(super) created: Vec<PathBuf>,
    /// The overlays inside `target`, re-attached over the union (at most [`MAX_KEEPS`]).
    pub(super) keeps: Vec<PathBuf>,
}

impl Sandbox {
    /// The overlays of a call, from what exists now.
    pub(super) fn areas(&self, root_prefix: Option<&Path>) -> Areas {
        let mut areas = Areas::default();
        let Some(facts) = &self.facts else {
            return areas;
        };
        let dot_conda = facts.home.as_ref().map(|h| h.join(".conda"));
        // Package cache directories in conda's order: CONDA_PKGS_DIRS replaces the
        // defaults, `<root>/pkgs` then `~/.conda/pkgs` (conda/base/context.py:793
        // `pkgs_dirs`).
        let pkgs: Vec<PathBuf> = if facts.pkgs_dirs.is_empty() {
            let defaults = [
                root_prefix.map(|r| r.join("pkgs")),
                dot_conda.as_ref().map(|d| d.join("pkgs")),
            ];
            defaults.into_iter().flatten().collect()
        } else {
            facts.pkgs_dirs.clone()
        };
        // Environments directories: the configured ones, then conda's defaults
        // (conda/base/context.py:787 `envs_dirs`).
        let mut envs_dirs = facts.envs_dirs.clone();
        envs_dirs.extend(root_prefix.map(|r| r.join("envs")));
        envs_dirs.extend(dot_conda.as_ref().map(|d| d.join("envs")));
        let (envs, registries) = environments(facts, root_prefix, &envs_dirs);
        areas.registries = registries;
        // Overlays never nest: a directory inside a chosen one is covered by it.
        let mut add = |path: PathBuf| -> bool {
            let added = is_dir(&path) && !areas.overlays.iter().any(|t| path.starts_with(t));
            if added {
                areas.overlays.retain(|t| !t.starts_with(&path));
                areas.overlays.push(path);
            }
            added
        };
        // ~/.conda (its envs, pkgs and environments.txt), every envs and pkgs directory
        // (envs directory probes, package cache probes and each repodata cache), the
        // conda-meta of the first [`MAX_ENVIRONMENTS`] environments outside them (the
        // conda-meta/history probe), the notices cache.
        for dir in dot_conda.into_iter().chain(envs_dirs.iter().cloned()) {
            add(dir);
        }
        for dir in pkgs.iter().cloned().chain(facts.notices.iter().cloned()) {
            add(dir);
        }
        let mut own = 0;
        for meta in envs
            .into_iter()
            .take(MAX_EXAMINED)
            .map(|e| e.join("conda-meta"))
        {
            if own == MAX_ENVIRONMENTS {
                break;
            }
            own += usize::from(add(meta));
        }
        // What conda would create on this read, where it could create it outside.
        let missing: Vec<PathBuf> = [first_missing(&pkgs), first_missing(&envs_dirs)]
            .into_iter()
            .flatten()
            .collect();
        if !missing.is_empty() {
            areas.unions = unions(&missing, &areas.overlays, facts.base.path());
        }
        let caches = pkgs
            .iter()
            .map(|p| p.join("cache"))
            .chain(facts.notices.clone());
        for cache in caches {
            if is_dir(&cache) && !areas.caches.contains(&cache) {
                areas.caches.push(cache);
            }
        }
        areas
    }
}

/// A real directory (a symlink is not: a mount would follow it).
fn is_dir(path: &Path) -> bool {
    std::fs::symlink_metadata(path)
        .map(|m| m.is_dir())
        .unwrap_or(false)
}

/// Every known environment: the root prefix, every entry of the envs directories, and
/// those of the registries (every user's when the server is root: conda reads them all
/// then, `list_all_known_prefixes`), read as `registries.rs` reads them; and each home
/// with its registry's copy.
fn environments(
    facts: &Facts,
    root_prefix: Option<&Path>,
    envs_dirs: &[PathBuf],
) -> (Vec<PathBuf>, Vec<super::registries::Read>) {
    let mut envs: Vec<PathBuf> = root_prefix.map(Path::to_path_buf).into_iter().collect();
    for dir in envs_dirs {
        if let Ok(entries) = std::fs::read_dir(dir) {
            envs.extend(entries.flatten().map(|e| e.path()));
        }
    }
    let (listed, copies) = super::registries::environments(facts.home.as_deref(), facts.ids.0 == 0);
    envs.extend(listed);
    (envs, copies)
}

/// The first of `candidates` (in conda's order) conda would use for writing, when it does
/// not exist yet: conda takes the first that exists and is writable, else creates the
/// first it can (`PackageCacheData.first_writable`, conda/core/package_cache_data.py:218;
/// `first_writable_envs_dir`, conda/gateways/disk/create.py:500).
fn first_missing(candidates: &[PathBuf]) -> Option<PathBuf> {
    use rustix::fs::{Access, access};
    for dir in candidates {
        match std::fs::metadata(dir) {
            Ok(meta) if meta.is_dir() && access(dir, Access::WRITE_OK).is_ok() => return None,
            Ok(_) => continue,
            Err(_)
                if nearest_existing(dir).is_some_and(|a| access(&a, Access::WRITE_OK).is_ok()) =>
            {
                return Some(dir.clone());
            }
            Err(_) => continue,
        }
    }
    None
}

/// The nearest existing ancestor of `dir`, when it is a real directory (a symlink or a
/// file on the way: none).
fn nearest_existing(dir: &Path) -> Option<PathBuf> {
    let mut ancestor = dir.parent()?;
    loop {
        match std::fs::symlink_metadata(ancestor) {
            Ok(meta) if meta.is_dir() => return Some(ancestor.to_path_buf()),
            Ok(_) => return None,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => ancestor = ancestor.parent()?,
            Err(_) => return None,
        }
    }
}

/// The unions that let conda create the `missing` directories, each on its nearest
/// existing ancestor. None where an overlay covers the ancestor (conda creates the
/// directory in that overlay's upper layer), where the ancestor does not fit
/// ([`fits_union`]), lies in or over another union, or holds more overlays than the child
/// can carry over.
fn unions(missing: &[PathBuf], overlays: &[PathBuf], base: &Path) -> Vec<Union> {
    let mounts = mount_points();
    let mut unions: Vec<Union> = Vec::new();
    for dir in missing {
        let Some(ancestor) = nearest_existing(dir) else {
            continue;
        };
        let Some(entry) = dir
            .strip_prefix(&ancestor)
            .ok()
            .and_then(|rest| rest.components().next())
            .map(|first| ancestor.join(first))
        else {
            continue;
        };
        if overlays.iter().any(|o| ancestor.starts_with(o)) {
            continue;
        }
        if let Some(union) = unions.iter_mut().find(|u| u.target == ancestor) {
            if !union.created.contains(&entry) {
                union.created.push(entry);
            }
            continue;
        }
        let keeps: Vec<PathBuf> = overlays
            .iter()
            .filter(|o| o.starts_with(&ancestor))
            .cloned()
            .collect();
        let nested = unions
            .iter()
            .any(|u| u.target.starts_with(&ancestor) || ancestor.starts_with(&u.target));
        if !nested && keeps.len() <= MAX_KEEPS && fits_union(&ancestor, &mounts, base) {
            unions.push(Union {
                target: ancestor,
                created: vec![entry],
                keeps,
            });
        }
    }
    unions
}

/// Whether a union may go on `ancestor`: the server's user may write there (so conda
/// could create the directory outside), it is not `/`, and it holds neither the sandbox's
/// own tmpfs nor any mount point (the union would hide them from the child).
pub(super) fn fits_union(ancestor: &Path, mounts: &[PathBuf], base: &Path) -> bool {
    use rustix::fs::{Access, access};
    ancestor != Path::new("/")
        && access(ancestor, Access::WRITE_OK).is_ok()
        && !base.starts_with(ancestor)
        && !mounts
            .iter()
            .any(|m| m != ancestor && m.starts_with(ancestor))
}

/// The mount points of this process's mount namespace (`/proc/self/mountinfo`, field 5,
/// octal escapes decoded).
pub(super) fn mount_points() -> Vec<PathBuf> {
    // Bytes: a mount point whose name is not UTF-8 must not empty the list (attack 13 L4).
    points(&std::fs::read("/proc/self/mountinfo").unwrap_or_default())
}

/// Whether the directory `path` leads to is a mount of this process's own mount
/// namespace: its mount ID (`statx`) is one of `/proc/self/mountinfo`'s (field 1). A
/// directory reached through `/proc/<pid>/root` of a process in another mount namespace
/// (a container, a service's private `/tmp`, another call's tmpfs) is not, and no
/// sandbox made from this namespace covers it (attack 16). `false` when `path` cannot be
/// looked at; `true` on a kernel without mount IDs (before 5.8: the child's own check,
/// `mount::working_directory_walled`, still holds).
pub(crate) fn of_this_namespace(path: &Path) -> bool {
    open_own_directory(path).is_ok()
}

/// The directory `path` leads to, opened (`O_PATH`), when it is a mount of this
/// process's own mount namespace (see [`of_this_namespace`]); `EXDEV` when it is not. A
/// child that enters its working directory through this descriptor enters what was
/// judged, whatever the path leads to by then (attack 18 A18-1: a symlink swapped for
/// one to `/proc/<pid>/root/…` after the server's look).
pub(crate) fn open_own_directory(path: &Path) -> std::io::Result<std::os::fd::OwnedFd> {
    use rustix::fs::{AtFlags, Mode, OFlags, StatxFlags, open, statx};
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let fd = open(path, flags, Mode::empty())?;
    let stat = statx(&fd, "", AtFlags::EMPTY_PATH, StatxFlags::MNT_ID)?;
    if !StatxFlags::from_bits_retain(stat.stx_mask).contains(StatxFlags::MNT_ID) {
        return Ok(fd);
    }
    let id = stat.stx_mnt_id.to_string();
    let text = std::fs::read("/proc/self/mountinfo")?;
    let own = text
        .split(|b| *b == b'\n')
        .filter_map(|line| line.split(|b| *b == b' ').next())
        .any(|field| field == id.as_bytes());
    if own {
        Ok(fd)
    } else {
        Err(rustix::io::Errno::XDEV.into())
    }
}

/// The mount points of a mountinfo text.
pub(super) fn points(text: &[u8]) -> Vec<PathBuf> {
    use std::os::unix::ffi::OsStringExt;
    text.split(|b| *b == b'\n')
        .filter_map(|line| line.split(|b| *b == b' ').nth(4))
        .map(|field| PathBuf::from(std::ffi::OsString::from_vec(unescape(field))))
        .collect()
}

/// `\ooo` octal escapes (space, tab, newline, backslash) decoded.
pub(super) fn unescape(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        let octal = bytes
            .get(at + 1..at + 4)
            .filter(|d| d.iter().all(|b| (b'0'..=b'7').contains(b)));
        match (bytes[at], octal) {
            (b'\\', Some(digits)) => {
                let value = digits.iter().fold(0u32, |v, d| v * 8 + u32::from(d - b'0'));
                out.push(u8::try_from(value).unwrap_or(b'?'));
                at += 4;
            }
            (byte, _) => {
                out.push(byte);
                at += 1;
            }
        }
    }
    out
}
