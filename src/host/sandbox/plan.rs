//! One call's plan, made in the parent before the fork: the tmpfs, the copy-on-write
//! overlays whose upper layers live in it and the read-only unions that add what conda
//! would create, from what exists now ([`Sandbox::areas`]).

use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::areas::Areas;
use super::registries::Registries;
use super::{Base, Overlay, Plan, Prepared, Sandbox, State, UnionMount};

impl Sandbox {
    /// This call's plan; `None` unless the sandbox is active. Every sandboxed call gets
    /// the same kind of plan, whatever its verdict (read-only, exec without write, the
    /// dry-run preview of a confirmed write): it reads the operator's directories as they
    /// are and everything it writes is discarded with its tmpfs.
    pub fn plan(&self, root_prefix: Option<&Path>) -> Option<Plan> {
        if self.state != State::Active {
            return None;
        }
        let facts = self.facts.as_ref()?;
        let mut areas = self.areas(root_prefix);
        let base = facts.base.path().to_path_buf();
        let tmpdir = base.join("tmp");
        let mut mkdirs = vec![cstring(&tmpdir)?];
        let overlays = overlays(&areas, &base, &mut mkdirs)?;
        let unions = unions(&areas, &base, &mut mkdirs)?;
        let keep_clear: Vec<&Path> = [root_prefix, facts.home.as_deref(), Some(base.as_path())]
            .into_iter()
            .flatten()
            .chain(
                facts
                    .pkgs_dirs
                    .iter()
                    .chain(&facts.envs_dirs)
                    .map(PathBuf::as_path),
            )
            .collect();
        let read = std::mem::take(&mut areas.registries);
        let planned = Registries::plan(read, &base, &keep_clear)?;
        mkdirs.extend(planned.mkdirs);
        // Each call's user namespace maps the server's ids to themselves (root: 0 to 0),
        // the one mapping a process may write for itself (with `setgroups` denied).
        let (uid, gid) = facts.ids;
        let maps = facts.shared_user_namespace.is_none().then(|| {
            (
                format!("{uid} {uid} 1\n").into_bytes(),
                format!("{gid} {gid} 1\n").into_bytes(),
            )
        });
        let mode = match facts.base {
            Base::Shm => "1777",
            Base::Dir(_) => "0700",
        };
        Some(Plan(Arc::new(Prepared {
            maps,
            mounts_first: uid == 0,
            scope: facts.scope.clone(),
            rules_writes: facts.rules_writes,
            test_report: test_report(),
            seccomp: facts.seccomp.clone(),
            base: cstring(&base)?,
            base_mode: CString::new(mode).ok()?,
            mkdirs,
            tmpdir,
            overlays,
            unions,
            registries: planned.registries,
            homes: planned.homes,
        })))
    }
}

/// Debug builds only: `CCM_TEST_REPORT_FIFO=PATH` names a FIFO every sandboxed child may
/// also open for writing, the channel through which a test's program inside the sandbox
/// reports to the test (a planted module that ran, a victim's pid): the call's ruleset
/// grants opening files for writing only beneath its own mounts, so no other FIFO opens.
/// Release builds ignore the variable.
fn test_report() -> Option<CString> {
    if !cfg!(debug_assertions) {
        return None;
    }
    let path = std::env::var_os("CCM_TEST_REPORT_FIFO")?;
    CString::new(path.into_encoded_bytes()).ok()
}

fn cstring(path: &Path) -> Option<CString> {
    CString::new(path.as_os_str().as_encoded_bytes()).ok()
}

/// Overlay options are comma-separated and use ':' between lower layers: a path with one
/// of those (or an escape) gets no mount.
fn usable(path: &Path) -> Option<&str> {
    path.to_str().filter(|t| !t.contains([',', ':', '\\']))
}

/// The copy-on-write overlays, their upper and work directories added to `mkdirs`.
fn overlays(areas: &Areas, base: &Path, mkdirs: &mut Vec<CString>) -> Option<Vec<Overlay>> {
    let mut overlays = Vec::new();
    for (index, target) in areas.overlays.iter().enumerate() {
        if usable(target).is_none() {
            continue;
        }
        let layer = base.join(format!("o{index}"));
        let (upper, work) = (cstring(&layer.join("u"))?, cstring(&layer.join("w"))?);
        mkdirs.extend([cstring(&layer)?, upper.clone(), work.clone()]);
        overlays.push(Overlay {
            target: cstring(target)?,
            above: CString::default(),
            layers: Some((upper, work)),
            index_off: false,
        });
    }
    Some(overlays)
}

/// The read-only unions, their lower layer with the new entries added to `mkdirs`.
fn unions(areas: &Areas, base: &Path, mkdirs: &mut Vec<CString>) -> Option<Vec<UnionMount>> {
    let mut unions = Vec::new();
    for (index, union) in areas.unions.iter().enumerate() {
        let layer = base.join(format!("n{index}"));
        let (Some(target), Some(lower)) = (usable(&union.target), usable(&layer)) else {
            continue;
        };
        mkdirs.push(cstring(&layer)?);
        for entry in &union.created {
            mkdirs.push(cstring(&layer.join(entry.file_name()?))?);
        }
        let options = format!("lowerdir={target}:{lower}");
        let all = |paths: &[PathBuf]| paths.iter().map(|p| cstring(p)).collect::<Option<_>>();
        unions.push(UnionMount {
            target: cstring(&union.target)?,
            options_userxattr: CString::new(format!("{options},userxattr")).ok()?,
            options: CString::new(options).ok()?,
            keeps: all(&union.keeps)?,
            created: all(&union.created)?,
        });
    }
    Some(unions)
}
