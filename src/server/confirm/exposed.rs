//! Whether a confirmed write's target environment lies where the agent, or another user,
//! can change files (attacks 23 to 25): inside one of the client's roots, inside the
//! server's working directory (the project a stdio server is started in; not `/`) — by
//! path or as the same directory reached another way (a bind mount) —, beneath a
//! directory that a user other than the server's (and root) owns or that others may
//! write (mode bits or an access ACL), or holding such a directory or file where conda
//! finds code (`bin/`, `etc/conda/activate.d/`, its Python's `lib/`). The target is
//! judged both as named (a symlink in the project that leads to an environment elsewhere
//! is the agent's to turn) and as it resolves.
//!
//! conda runs such an environment's own code while it changes it — its activation
//! scripts, the programs in its `bin/` (first on the link scripts' `PATH`), its Python
//! (to compile `noarch: python` packages) — and the binding program checks only its
//! packages' link scripts, menu files, records and paths (docs/security.md, "What is
//! not bound"). The question says so on the line after the target, so that the person
//! does not read "install pkga from conda-forge" as the only code that runs.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use super::plan::shown_long;

/// The caution under a target that could not be judged (fail closed).
pub(super) const UNJUDGED: &str = "  Caution: whether the agent or another user can change \
    this environment's files could not be judged; its own programs and scripts run as the \
    server's user during this change.";

/// A directory the agent can change files in: its path (canonical), its device and
/// inode (the same directory reached another way), and what it is.
struct Place {
    path: PathBuf,
    id: Option<(u64, u64)>,
    what: &'static str,
}

/// Where the agent can change files, and who runs what is found there.
pub(super) struct Places {
    /// The client's roots, then the server's working directory (not `/`).
    places: Vec<Place>,
    uid: u32,
    gid: u32,
    /// The run is held to its write bound (`--allow-paths`/`--write-envs` with Landlock).
    bounded: bool,
}

/// The directories of a target where conda finds code to run, whose entries count too
/// when `true`: its programs and activation scripts (conda/core/link.py `run_script`,
/// `activate=True`), the variables activation sets, its records, its libraries, and its
/// Python's library (`lib/python3.*`, searched below).
const CODE_DIRS: &[(&str, bool)] = &[
    ("bin", true),
    ("etc", false),
    ("etc/conda", false),
    ("etc/conda/activate.d", true),
    ("etc/conda/deactivate.d", true),
    // Variables activation exports as written (`conda-meta/state`, `env_vars.d`: a
    // value that closes its quote runs as code, attack 26 G5), and the records.
    ("etc/conda/env_vars.d", true),
    ("conda-meta", true),
    // Shared libraries the target's programs load.
    ("lib", true),
];

impl Places {
    /// The places of this server and call: the client's `roots`, the server's working
    /// directory, the server's user; `bounded` when the run writes only in its places.
    pub(super) fn new(roots: &[PathBuf], bounded: bool) -> Places {
        let workdir = std::env::current_dir()
            .and_then(std::fs::canonicalize)
            .ok()
            .filter(|dir| dir.parent().is_some());
        let roots = roots.iter().map(|r| (r.clone(), "the client's root"));
        let places = roots
            .chain(workdir.map(|d| (d, "the server's working directory")))
            .map(|(path, what)| Place {
                id: identity(&path),
                path,
                what,
            })
            .collect();
        Places {
            places,
            uid: rustix::process::geteuid().as_raw(),
            gid: rustix::process::getegid().as_raw(),
            bounded,
        }
    }

    /// The caution shown under `target`'s line, when the target lies where the agent or
    /// another user can change files.
    pub(super) fn caution(&self, target: &str) -> Option<String> {
        let named = Path::new(target);
        let (path, missing) = resolved(named)?;
        let place = self
            .agents(named)
            .or_else(|| self.agents(&path))
            .or_else(|| self.others(named, missing))
            .or_else(|| self.others(&path, missing))
            .or_else(|| self.code(&path))?;
        let user = match self.uid {
            0 => "root".to_owned(),
            uid => format!("uid {uid}, the server's user"),
        };
        let limit = if self.bounded {
            "their writes stay within the places this call may write"
        } else {
            "nothing limits what they read or write"
        };
        Some(format!(
            "  Caution: this environment {place}. Its own programs and scripts (bin/, \
             etc/conda/activate.d/, its Python) run as {user} during this change, and only \
             its packages' link scripts and records are checked: {limit}."
        ))
    }

    /// The agent's place `path` lies in: a place, or a directory above `path` that is
    /// the same directory as a place (device and inode).
    fn agents(&self, path: &Path) -> Option<String> {
        let place = self.places.iter().find(|place| {
            path.starts_with(&place.path)
                || path
                    .ancestors()
                    .any(|dir| place.id.is_some() && identity(dir) == place.id)
        })?;
        Some(format!(
            "lies inside {} {}, where the agent can change files",
            place.what,
            shown_long(&place.path.to_string_lossy())
        ))
    }

    /// The first directory from `path` up to `/` that a user other than the server's
    /// (or root) can change ([`Places::writer`]). The nearest existing directory of a
    /// target that does not exist yet (`missing`) counts even with the sticky bit:
    /// anyone may make the target first.
    fn others(&self, path: &Path, missing: bool) -> Option<String> {
        let mut nearest = missing;
        for dir in path.ancestors() {
            let Ok(meta) = std::fs::metadata(dir) else {
                continue;
            };
            let sticky_counts = !nearest;
            nearest = false;
            if let Some(who) = self.writer(dir, &meta, sticky_counts) {
                return Some(format!(
                    "lies in {}, {who}",
                    shown_long(&dir.to_string_lossy())
                ));
            }
        }
        None
    }

    /// A directory or file of the target where conda finds code ([`CODE_DIRS`], and
    /// `lib/python3.*` with its `site-packages`) that another user can change.
    fn code(&self, target: &Path) -> Option<String> {
        let mut dirs: Vec<(PathBuf, bool)> = CODE_DIRS
            .iter()
            .map(|(dir, entries)| (target.join(dir), *entries))
            .collect();
        let pythons = std::fs::read_dir(target.join("lib")).into_iter().flatten();
        for entry in pythons.flatten() {
            if entry.file_name().to_string_lossy().starts_with("python3") {
                dirs.push((entry.path(), false));
                dirs.push((entry.path().join("site-packages"), true));
            }
        }
        for (dir, entries) in dirs {
            // Through symlinks: what a link leads to is what runs.
            let Ok(meta) = std::fs::metadata(&dir) else {
                continue;
            };
            let mut found = vec![(dir.clone(), meta)];
            if entries {
                let listed = std::fs::read_dir(&dir).into_iter().flatten().flatten();
                found.extend(listed.filter_map(|e| {
                    let path = e.path();
                    let meta = std::fs::metadata(&path).ok()?;
                    Some((path, meta))
                }));
            }
            for (path, meta) in found {
                if let Some(who) = self.writer(&path, &meta, true) {
                    return Some(format!(
                        "holds {}, {who}",
                        shown_long(&path.to_string_lossy())
                    ));
                }
            }
        }
        None
    }

    /// Who other than the server's user (and root) can change `path` (`meta`, its
    /// metadata): its owner; every user, by its mode (a directory's sticky bit keeps
    /// others from replacing what they do not own, where `sticky_counts`); a group
    /// other than the server's, by its mode; a user or group its access ACL names.
    fn writer(&self, path: &Path, meta: &std::fs::Metadata, sticky_counts: bool) -> Option<String> {
        let mode = meta.permissions().mode();
        let sticky = meta.is_dir() && mode & 0o1000 != 0 && sticky_counts;
        if meta.uid() != self.uid && meta.uid() != 0 {
            return Some(format!("which uid {} owns", meta.uid()));
        }
        if mode & 0o002 != 0 && !sticky {
            return Some("which every user may write".to_owned());
        }
        if mode & 0o020 != 0 && !sticky && meta.gid() != self.gid {
            return Some(format!("which group {} may write", meta.gid()));
        }
        if sticky {
            return None;
        }
        acl_writer(path, self.uid, self.gid).map(|who| format!("which {who} may write (an ACL)"))
    }
}

/// A directory's device and inode (through symlinks).
fn identity(path: &Path) -> Option<(u64, u64)> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.dev(), meta.ino()))
}

/// A user or group other than `uid`/`gid` (and root) that `path`'s access ACL
/// (`system.posix_acl_access`: a version, then entries of tag, permissions and id, each
/// little-endian) lets write, where its mask allows writing.
fn acl_writer(path: &Path, uid: u32, gid: u32) -> Option<String> {
    let mut buf = [0u8; 4096];
    let length = rustix::fs::getxattr(path, "system.posix_acl_access", &mut buf[..]).ok()?;
    let entries = buf.get(4..length)?;
    let mut mask_writes = true;
    let mut writer = None;
    for entry in entries.chunks_exact(8) {
        let tag = u16::from_le_bytes([entry[0], entry[1]]);
        let writes = u16::from_le_bytes([entry[2], entry[3]]) & 2 != 0;
        let id = u32::from_le_bytes([entry[4], entry[5], entry[6], entry[7]]);
        match tag {
            0x10 => mask_writes = writes,
            0x02 if writes && id != uid && id != 0 => writer = writer.or(Some(format!("uid {id}"))),
            0x08 if writes && id != gid && id != 0 => {
                writer = writer.or(Some(format!("group {id}")));
            }
            _ => {}
        }
    }
    writer.filter(|_| mask_writes)
}

/// `target` as the run will meet it: its nearest existing directory canonical, with the
/// rest joined (`true` when some of it does not exist yet). `None` for a relative path or
/// one with `..` after the existing part.
fn resolved(target: &Path) -> Option<(PathBuf, bool)> {
    if !target.is_absolute() {
        return None;
    }
    let mut existing = target;
    let mut rest = Vec::new();
    loop {
        if let Ok(canonical) = std::fs::canonicalize(existing) {
            let mut path = canonical;
            for part in rest.iter().rev() {
                path.push(part);
            }
            return Some((path, !rest.is_empty()));
        }
        let name = existing.file_name()?;
        if existing.components().next_back() != Some(Component::Normal(name)) {
            return None;
        }
        rest.push(name.to_owned());
        existing = existing.parent()?;
    }
}

#[cfg(test)]
mod tests;
