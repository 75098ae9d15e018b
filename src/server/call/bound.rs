//! The write bound of a call about to run (`host::sandbox::bound`): a write admitted
//! under `--allow-paths` or `--write-envs` writes, for its whole life, only beneath the
//! places its gates admitted and what conda itself writes, whatever a symlink swapped in
//! after the last check says.

use std::path::{Path, PathBuf};

use rmcp::ErrorData;

use super::super::judged::Judged;
use super::super::ready::Ready;
use super::super::refuse::{self, Refusal};
use super::super::state::Server;
use super::gates::OUTSIDE_ALLOWED;
use crate::host::exec;
use crate::host::sandbox::{self, bound};

/// The refusal of a call one of whose judged targets changed between the last check and
/// the bound (never the path).
const TARGET_CHANGED: &str =
    "Operation targets an environment whose path changed after it was judged";

/// What a failed bounded run's summary adds when a write was refused.
pub(super) const REFUSED_WRITE: &str = "a write outside the places this call may write was refused: \
                                 the allowed directories (--allow-paths) or the target \
                                 environments (--write-envs), and conda's own caches";

impl Server {
    /// Whether `call` runs under a write bound: an unsandboxed call that writes and runs
    /// no program of the caller's (`--allow-exec` calls are not confined: they can run
    /// anything), on a server that confines writes (`--allow-paths` or `--write-envs`).
    /// Confirmed runs included: the bound holds past the plan's last check.
    pub(super) fn bounded(&self, ready: &Ready, call: &Judged) -> bool {
        let config = &self.shared.config;
        call.sandbox.is_none()
            && call.class.requires_write
            && !call.class.requires_exec
            && (config.write_envs.is_some() || !ready.confinement.is_unrestricted())
    }

    /// Give `run` its write bound, made from the places as they are now (right after the
    /// last check, before the fork). Where the kernel has no Landlock the run goes as
    /// before (said once at startup and in the capabilities).
    pub(super) async fn bound(
        &self,
        ready: &Ready,
        call: &Judged,
        run: &mut exec::Spec,
    ) -> Result<(), Refusal> {
        if !self.bounded(ready, call) {
            return Ok(());
        }
        let narrow = self.shared.config.write_envs.is_some();
        let mut places: Vec<bound::Writable> = if narrow {
            judged(&call.targets)
        } else {
            judged(ready.confinement.dirs())
        };
        let mut inputs = sandbox::Inputs::from_process();
        let root = ready.discovery.prefix.as_deref();
        let mut setup = match self.shared.start.sandbox.get() {
            Some(sandbox) => sandbox.bound_setup(),
            None => bound::Setup::default(),
        };
        if let Ok(abi) = bound::support() {
            // The run's own temporary directory, in the server's; removed with the bound.
            let tmpdir = tempfile::Builder::new()
                .prefix("ccm-write-")
                .tempdir_in(&inputs.temp_dir)
                .map_err(|error| {
                    tracing::error!(%error, "the write bound's temporary directory could not be made");
                    ErrorData::internal_error("the write bound failed", None)
                })?;
            inputs.temp_dir = tmpdir.path().to_path_buf();
            setup.tmpdir = Some(tmpdir);
            setup.cwd = match &run.cwd {
                Some(cwd) => Some(cwd.clone()),
                None => std::env::current_dir().ok(),
            };
            bound::make_registry(&inputs);
            places.extend(bound::conda_places(&inputs, root, !narrow));
            let caches = trusted_caches(&call.caches, &places, ready.confinement.dirs());
            places.extend(caches);
            // A confirmed run's wrapper writes `changed.json` into its plan's directory.
            places.extend(call.binding().map(|b| bound::Writable {
                path: b.dir().to_path_buf(),
                judged: false,
            }));
            let made = tokio::task::spawn_blocking(move || bound::Bound::make(abi, &places, setup))
                .await
                .map_err(|_| ErrorData::internal_error("the write bound failed", None))?;
            run.write_bound = Some(match made {
                Ok(bound) => bound,
                Err(error) if bound::changed(&error) && narrow => {
                    return Err(refuse::policy(
                        refuse::Reason::OutsideWriteEnvs,
                        TARGET_CHANGED,
                    ));
                }
                Err(error) if bound::changed(&error) => {
                    return Err(refuse::policy(
                        refuse::Reason::OutsideAllowedPaths,
                        OUTSIDE_ALLOWED,
                    ));
                }
                Err(error) => {
                    tracing::error!(%error, "the write bound could not be made");
                    return Err(ErrorData::internal_error("the write bound failed", None).into());
                }
            });
        }
        hold_for_tests().await;
        Ok(())
    }
}

/// The package caches a condarc file names (`pkgs_dirs`, which conda reads from its whole
/// search path), for the files no bounded write could have written: the file, as named
/// and as its symlinks resolve, lies beneath none of the bound's places (`~/.condarc` and
/// `<root>/.condarc` under `--allow-paths` alone, a target's under `--write-envs`) nor an
/// allowed directory (the agent's file tools reach those). Else a write call could make
/// the next one's bound take any directory (`conda config --append pkgs_dirs ~/.ssh`);
/// the caches of such a file are left out, and a write there fails as before.
fn trusted_caches(
    caches: &[(PathBuf, Vec<PathBuf>)],
    places: &[bound::Writable],
    allowed: &[PathBuf],
) -> Vec<bound::Writable> {
    let writable: Vec<PathBuf> = places
        .iter()
        .map(|p| &p.path)
        .chain(allowed)
        .flat_map(|p| [Some(p.clone()), std::fs::canonicalize(p).ok()])
        .flatten()
        .collect();
    let beneath = |path: &Path| writable.iter().any(|w| path.starts_with(w));
    caches
        .iter()
        .filter(|(file, _)| {
            file.is_absolute()
                && !beneath(file)
                && std::fs::canonicalize(file).is_ok_and(|real| !beneath(&real))
        })
        .flat_map(|(_, dirs)| dirs.iter().filter(|d| d.is_absolute()))
        .map(|path| bound::Writable {
            path: path.clone(),
            judged: false,
        })
        .collect()
}

fn judged(paths: &[PathBuf]) -> Vec<bound::Writable> {
    paths
        .iter()
        .map(|path| bound::Writable {
            path: path.clone(),
            judged: true,
        })
        .collect()
}

/// Debug builds only: with `CCM_TEST_HOLD_BOUNDED_WRITES=DIR`, a bounded write, once its
/// bound is made (or would be), makes `DIR/held` and waits (at most 2 minutes) until
/// `DIR/go` exists, then removes both: a test swaps a directory meanwhile, after the last
/// check, as an agent would while conda starts. Release builds ignore the variable.
async fn hold_for_tests() {
    if !cfg!(debug_assertions) {
        return;
    }
    let Some(dir) = std::env::var_os("CCM_TEST_HOLD_BOUNDED_WRITES").map(PathBuf::from) else {
        return;
    };
    let (held, go) = (dir.join("held"), dir.join("go"));
    let _ = std::fs::write(&held, b"");
    for _ in 0..2400 {
        if go.exists() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let _ = std::fs::remove_file(&go);
    let _ = std::fs::remove_file(&held);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only a file outside every bound place and allowed directory, as named and as its
    /// symlinks resolve, gives its caches; relative names give none.
    #[test]
    fn caches_of_files_a_bounded_write_may_write_are_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        for sub in ["etc", "home", "proj"] {
            std::fs::create_dir(base.join(sub)).unwrap();
        }
        for file in ["etc/condarc", "home/.condarc", "proj/rc"] {
            std::fs::write(base.join(file), "pkgs_dirs: []\n").unwrap();
        }
        std::os::unix::fs::symlink(base.join("proj/rc"), base.join("etc/link")).unwrap();
        let cache = |name: &str| vec![PathBuf::from(format!("/caches/{name}"))];
        let caches = vec![
            (base.join("etc/condarc"), cache("operator")),
            (base.join("home/.condarc"), cache("home")),
            (base.join("proj/rc"), cache("project")),
            (base.join("etc/link"), cache("linked")),
            (PathBuf::from("etc/condarc"), cache("relative")),
            (
                base.join("etc/condarc"),
                vec![PathBuf::from("relative/pkgs")],
            ),
        ];
        let places = [bound::Writable {
            path: base.join("home"),
            judged: false,
        }];
        let kept: Vec<PathBuf> = trusted_caches(&caches, &places, &[base.join("proj")])
            .into_iter()
            .map(|w| w.path)
            .collect();
        assert_eq!(kept, cache("operator"));
    }
}
