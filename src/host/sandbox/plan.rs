//! One call's plan, made in the parent before the fork: the tmpfs, the overlays whose
//! upper layers live in it and the caches bound writable, from what exists now.

use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{Base, MAX_KEEPS, Overlay, Plan, Prepared, Sandbox, State};

impl Sandbox {
    /// This call's plan; `None` unless the sandbox is active.
    pub fn plan(&self, root_prefix: Option<&Path>) -> Option<Plan> {
        if self.state != State::Active {
            return None;
        }
        let facts = self.facts.as_ref()?;
        let areas = self.areas(root_prefix);
        let base = facts.base.path().to_path_buf();
        let cstring = |path: &Path| CString::new(path.as_os_str().as_encoded_bytes()).ok();
        let tmpdir = base.join("tmp");
        let mut mkdirs = vec![cstring(&tmpdir)?];
        let mut overlays = Vec::new();
        for (index, target) in areas.overlays.iter().enumerate() {
            let Some(text) = target.to_str() else {
                continue;
            };
            // Overlay options are comma-separated and use ':' between lower layers.
            if text.contains([',', ':', '\\']) {
                continue;
            }
            let layer = base.join(format!("o{index}"));
            let (upper, work) = (layer.join("u"), layer.join("w"));
            let options = format!(
                "lowerdir={text},upperdir={},workdir={}",
                upper.display(),
                work.display()
            );
            let keeps: Vec<CString> = areas
                .caches
                .iter()
                .filter(|c| c.starts_with(target) && !holds_audit_log(c))
                .take(MAX_KEEPS)
                .map(|c| cstring(c))
                .collect::<Option<_>>()?;
            mkdirs.extend([cstring(&layer)?, cstring(&upper)?, cstring(&work)?]);
            overlays.push(Overlay {
                target: cstring(target)?,
                options_userxattr: CString::new(format!("{options},userxattr")).ok()?,
                options: CString::new(options).ok()?,
                keeps,
            });
        }
        let mut writable = Vec::new();
        for dir in areas
            .caches
            .iter()
            .filter(|c| !areas.overlays.iter().any(|o| c.starts_with(o)))
            .chain(&facts.notices)
            .filter(|dir| !holds_audit_log(dir))
        {
            writable.push(cstring(dir)?);
        }
        let ids = facts.ids.map(|(uid, gid)| {
            (
                format!("{uid} {uid} 1\n").into_bytes(),
                format!("{gid} {gid} 1\n").into_bytes(),
            )
        });
        let base_options = match facts.base {
            Base::Shm => c"mode=1777",
            Base::Dir(_) => c"mode=0700",
        };
        Some(Plan(Arc::new(Prepared {
            ids,
            base: cstring(&base)?,
            base_options: base_options.to_owned(),
            mkdirs,
            tmpdir,
            overlays,
            writable,
        })))
    }

    /// The directories that get overlays and writable binds for a call, from what exists
    /// now.
    pub(super) fn areas(&self, root_prefix: Option<&Path>) -> Areas {
        let mut areas = Areas::default();
        let Some(facts) = &self.facts else {
            return areas;
        };
        let dot_conda = facts.home.as_ref().map(|h| h.join(".conda"));
        // Package cache directories: conda's defaults and CONDA_PKGS_DIRS.
        let mut pkgs: Vec<PathBuf> = facts.pkgs_dirs.clone();
        pkgs.extend(root_prefix.map(|r| r.join("pkgs")));
        pkgs.extend(dot_conda.as_ref().map(|d| d.join("pkgs")));
        // Environments: the root prefix, every directory of the envs dirs, environments.txt.
        let mut envs: Vec<PathBuf> = root_prefix.map(Path::to_path_buf).into_iter().collect();
        let mut envs_dirs = facts.envs_dirs.clone();
        envs_dirs.extend(root_prefix.map(|r| r.join("envs")));
        envs_dirs.extend(dot_conda.as_ref().map(|d| d.join("envs")));
        for dir in &envs_dirs {
            if let Ok(entries) = std::fs::read_dir(dir) {
                envs.extend(entries.flatten().map(|e| e.path()));
            }
        }
        // conda reads every user's environments.txt when it runs as root
        // (list_all_known_prefixes), only its own otherwise.
        let mut homes: Vec<PathBuf> = facts.home.iter().cloned().collect();
        if facts.ids.is_none() {
            homes.extend(password_homes());
        }
        for home in homes {
            if let Ok(text) = std::fs::read_to_string(home.join(".conda/environments.txt")) {
                envs.extend(
                    text.lines()
                        .map(str::trim)
                        .filter(|l| l.starts_with('/'))
                        .map(PathBuf::from),
                );
            }
        }
        // Only real directories (a symlink would be followed by the mount).
        let is_dir = |path: &Path| {
            std::fs::symlink_metadata(path)
                .map(|m| m.is_dir())
                .unwrap_or(false)
        };
        // Overlays never nest: a directory inside a chosen one is covered by it.
        let mut add = |path: PathBuf| {
            if is_dir(&path) && !areas.overlays.iter().any(|t| path.starts_with(t)) {
                areas.overlays.retain(|t| !t.starts_with(&path));
                areas.overlays.push(path);
            }
        };
        // ~/.conda (its envs, pkgs and environments.txt), every envs and pkgs directory
        // (envs directory probes, package cache probes), every environment's conda-meta
        // (the conda-meta/history probe).
        dot_conda.into_iter().for_each(&mut add);
        envs_dirs.into_iter().for_each(&mut add);
        pkgs.iter().cloned().for_each(&mut add);
        envs.into_iter()
            .map(|e| e.join("conda-meta"))
            .for_each(&mut add);
        for dir in pkgs {
            let cache = dir.join("cache");
            if is_dir(&cache) && !areas.caches.contains(&cache) {
                areas.caches.push(cache);
            }
        }
        areas
    }
}

#[derive(Debug, Default)]
pub(super) struct Areas {
    /// Copy-on-write overlays (writes discarded).
    pub(super) overlays: Vec<PathBuf>,
    /// Repodata caches, bound writable.
    pub(super) caches: Vec<PathBuf>,
}

/// The home directories of `/etc/passwd`.
fn password_homes() -> Vec<PathBuf> {
    let text = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let mut homes: Vec<PathBuf> = text
        .lines()
        .filter_map(|line| line.split(':').nth(5))
        .filter(|home| home.starts_with('/') && *home != "/")
        .map(PathBuf::from)
        .collect();
    homes.dedup();
    homes
}

/// Whether the audit log lies in `dir`: such a directory stays read-only in the sandbox
/// (no child may write the log).
fn holds_audit_log(dir: &Path) -> bool {
    crate::host::audit::path().is_some_and(|log| log.starts_with(dir))
}
