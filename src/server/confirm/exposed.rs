//! Whether a confirmed write's target environment lies where the agent, or another user,
//! can change files (attacks 23 and 24): inside one of the client's roots, inside the
//! server's working directory (the project a stdio server is started in; not `/`), or
//! beneath a directory that a user other than the server's (and root) owns or that
//! others may write.
//!
//! conda runs such an environment's own code while it changes it — its activation
//! scripts, the programs in its `bin/` (first on the link scripts' `PATH`), its Python
//! (to compile `noarch: python` packages) — and the binding program checks only its
//! packages' link scripts and records (docs/security.md, "What is not bound"). The
//! question says so on the line after the target, so that the person does not read
//! "install pkga from conda-forge" as the only code that runs.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use super::plan::shown_long;

/// Where the agent can change files, and who runs what is found there.
pub(super) struct Places {
    /// The client's roots, canonical.
    roots: Vec<PathBuf>,
    /// The server's working directory, canonical (`None` when it is `/`).
    workdir: Option<PathBuf>,
    uid: u32,
    gid: u32,
    /// The run is held to its write bound (`--allow-paths`/`--write-envs` with Landlock).
    bounded: bool,
}

impl Places {
    /// The places of this server and call: the client's `roots`, the server's working
    /// directory, the server's user; `bounded` when the run writes only in its places.
    pub(super) fn new(roots: &[PathBuf], bounded: bool) -> Places {
        let workdir = std::env::current_dir()
            .and_then(std::fs::canonicalize)
            .ok()
            .filter(|dir| dir.parent().is_some());
        Places {
            roots: roots.to_vec(),
            workdir,
            uid: rustix::process::geteuid().as_raw(),
            gid: rustix::process::getegid().as_raw(),
            bounded,
        }
    }

    /// The caution shown under `target`'s line, when the target lies where the agent or
    /// another user can change files.
    pub(super) fn caution(&self, target: &str) -> Option<String> {
        let (path, missing) = resolved(Path::new(target))?;
        let place = if let Some(root) = self.roots.iter().find(|r| path.starts_with(r)) {
            format!(
                "lies inside the client's root {}, where the agent can change files",
                shown_long(&root.to_string_lossy())
            )
        } else if let Some(dir) = self.workdir.as_ref().filter(|d| path.starts_with(d)) {
            format!(
                "lies inside the server's working directory {}, where the agent can change files",
                shown_long(&dir.to_string_lossy())
            )
        } else {
            self.others(&path, missing)?
        };
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

    /// The first directory from `path` up to `/` that a user other than the server's
    /// (or root) can change: one such a user owns, one every user may write without
    /// the sticky bit, one the server's group is not the group of that its group may
    /// write. The nearest existing directory of a target that does not exist yet
    /// (`missing`) counts even with the sticky bit: anyone may make the target first.
    fn others(&self, path: &Path, missing: bool) -> Option<String> {
        let mut nearest = missing;
        for dir in path.ancestors() {
            let Ok(meta) = std::fs::metadata(dir) else {
                continue;
            };
            let mode = meta.permissions().mode();
            let sticky = mode & 0o1000 != 0 && !nearest;
            nearest = false;
            let shown = shown_long(&dir.to_string_lossy());
            if meta.uid() != self.uid && meta.uid() != 0 {
                return Some(format!("lies in {shown}, which uid {} owns", meta.uid()));
            }
            if mode & 0o002 != 0 && !sticky {
                return Some(format!("lies in {shown}, which every user may write"));
            }
            if mode & 0o020 != 0 && !sticky && meta.gid() != self.gid && meta.gid() != 0 {
                return Some(format!(
                    "lies in {shown}, which group {} may write",
                    meta.gid()
                ));
            }
        }
        None
    }
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
