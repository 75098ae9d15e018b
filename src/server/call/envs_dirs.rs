//! Where a bounded write's targets may lie besides the directories it writes whole: the
//! envs directories the operator named, never those a lower-trust call could have named
//! for it (attack 7: a relative `envs_dirs` entry the agent appended to `~/.condarc` sent
//! `create -n` outside every scope directory).

use std::path::{Path, PathBuf};

use super::super::judged::Judged;
use super::super::ready::Ready;
use crate::host::{sandbox, targets};

/// Whether a bounded write's target, not judged by `--write-envs` (whose scope admitted
/// it), lies outside every place the operator named: the directories it writes whole
/// ([`Confinement::write_dirs`](crate::host::confine::Confinement::write_dirs)), or
/// strictly inside one of conda's envs directories (conda/base/context.py:787
/// `envs_dirs`) as the operator named them: conda's defaults (`<root>/envs`,
/// `~/.conda/envs`), the server's own `CONDA_ENVS_PATH`/`CONDA_ENVS_DIRS`, and the
/// absolute entries of a condarc file no bounded write can write. A bounded `conda
/// config` writes `~/.condarc` (and `--system` the root prefix's), and a relative
/// `envs_dirs` entry there (judged from one working directory, expanded by conda from
/// another) sent `create -n` anywhere, the target's nearest existing directory becoming a
/// place (attack 7).
pub(super) fn target_outside(ready: &Ready, call: &Judged, target: &Path) -> bool {
    let written = ready.confinement.write_dirs();
    if written.iter().any(|d| target.starts_with(d)) {
        return false;
    }
    // What the bound refuses in its own words (`bound::refuse_root_prefix`): a target
    // whose nearest existing directory is in conda's root prefix or holds it, or (under
    // the default scope) is the home directory or holds it.
    let at = nearest(target);
    let root = ready.discovery.prefix.as_deref().map(canonical);
    let home = ready.confinement.default_home();
    if root.is_some_and(|r| at.starts_with(&r) || r.starts_with(&at))
        || home.is_some_and(|h| h.starts_with(&at))
    {
        return false;
    }
    !operator_envs_dirs(ready, call, false)
        .iter()
        .any(|d| target.starts_with(d) && target != d)
}

/// conda's envs directories as the operator named them ([`target_outside`]), canonical
/// (one that does not exist yet too); with `all`, also the entries of condarc files a
/// bounded write can write.
pub(super) fn operator_envs_dirs(ready: &Ready, call: &Judged, all: bool) -> Vec<PathBuf> {
    let inputs = sandbox::Inputs::from_process();
    let root = ready.discovery.prefix.as_deref();
    let written = ready.confinement.write_dirs();
    let named: Vec<PathBuf> = sandbox::bound::named_places(&inputs, root)
        .into_iter()
        .map(|w| w.path)
        .collect();
    // A condarc file a bounded write can write: a named place, or in a place written
    // whole (its path as given and as it resolves).
    let writable = |file: &Path| {
        let resolved = canonical(file);
        [file, resolved.as_path()].iter().any(|f| {
            named.iter().any(|n| f.starts_with(n)) || written.iter().any(|d| f.starts_with(d))
        })
    };
    let from_files = call
        .envs_dirs
        .iter()
        .filter(|(file, _)| all || (file.is_absolute() && !writable(file)))
        .flat_map(|(_, dirs)| dirs.iter().cloned());
    inputs
        .conda_envs_dirs
        .iter()
        .flat_map(std::env::split_paths)
        .chain(root.map(|r| r.join("envs")))
        .chain(inputs.home.as_ref().map(|h| h.join(".conda").join("envs")))
        .chain(from_files)
        .filter(|d| d.is_absolute())
        .filter_map(|d| targets::canonical(&d))
        .collect()
}

pub(super) fn canonical(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or(p.to_path_buf())
}

/// The target, or its nearest existing directory, canonical.
pub(super) fn nearest(target: &Path) -> PathBuf {
    let mut at = target;
    while std::fs::symlink_metadata(at).is_err() {
        match at.parent() {
            Some(parent) => at = parent,
            None => break,
        }
    }
    canonical(at)
}
