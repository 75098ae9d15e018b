//! The targets of a bounded write that do not exist yet: made empty by the server right
//! before the run, so that the bound grants each alone (`super::bound`).

use std::path::PathBuf;

use rmcp::ErrorData;

use super::super::judged::Judged;
use super::super::ready::Ready;
use super::super::refuse::{self, Refusal};
use super::gates::{OUTSIDE_ALLOWED, TARGET_CHANGED};
use crate::host::exec;
use crate::host::sandbox::bound;

/// The targets that do not exist yet and that no place grants whole (every one under
/// `--write-envs`; under `--allow-paths` one outside the allowed directories), split in
/// those the server makes, empty, right before the run ([`make`]), which the bound then
/// grants alone, and those it grants nothing at all: never their nearest existing
/// directory whole, where a link script wrote beside the new environment (attack 17
/// A17-1, A17-2; attack 19 F1, F2: files made in the home directory, symlinked
/// environments replaced, the directory's mode changed). Made only for a command that
/// makes its target: `create`, `env create` (conda/cli/main_env_create.py:110 runs
/// `main_create.execute`, which takes an existing plain directory for its new
/// environment, conda/cli/main_create.py:199-205) and `env update`
/// (conda/cli/main_env_update.py:130-165 installs into a directory that is not an
/// environment); another (`install`, which conda refuses on a missing target; `rename` to
/// a new name, whose clone there the bound then refuses) writes nowhere there.
pub(super) fn new_targets(
    ready: &Ready,
    call: &Judged,
    scoped: bool,
) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let root = ready.discovery.catalog.root.as_ref();
    let path = crate::tools::policy::command_path(root, &call.argv);
    let makes = match path.as_deref() {
        Some([one]) => one == "create",
        Some([env, one]) => env == "env" && (one == "create" || one == "update"),
        _ => false,
    };
    let whole = if scoped {
        Vec::new()
    } else {
        ready.confinement.write_dirs()
    };
    let new: Vec<PathBuf> = call
        .targets
        .iter()
        .filter(|t| std::fs::symlink_metadata(t).is_err())
        .filter(|t| !whole.iter().any(|w| t.starts_with(w)))
        .cloned()
        .collect();
    if makes {
        (new, Vec::new())
    } else {
        (Vec::new(), new)
    }
}

/// Make each new target, empty, with the missing directories above it
/// (`bound::make_new_target`, never through a symlink). A symlink on the way refuses the
/// call as a changed path; a target that cannot be made fails it.
pub(super) async fn make(new: Vec<PathBuf>, scoped: bool) -> Result<Made, Refusal> {
    if new.is_empty() {
        return Ok(Made::default());
    }
    let made = tokio::task::spawn_blocking(move || {
        let mut made = Made::default();
        for target in &new {
            match bound::make_new_target(target) {
                Ok(dirs) => {
                    if dirs.last() == Some(target) {
                        made.targets.push(target.clone());
                    }
                    made.dirs.extend(dirs);
                }
                Err(error) => {
                    remove_unused(&made.dirs);
                    return Err(error);
                }
            }
        }
        Ok(made)
    })
    .await
    .map_err(|_| ErrorData::internal_error("the write bound failed", None))?;
    match made {
        Ok(made) => Ok(made),
        Err(error) if bound::changed(&error) => {
            let (reason, text) = if scoped {
                (refuse::Reason::OutsideWriteEnvs, TARGET_CHANGED)
            } else {
                (refuse::Reason::OutsideAllowedPaths, OUTSIDE_ALLOWED)
            };
            Err(refuse::policy(reason, text))
        }
        Err(error) => {
            let why = exec::plain_os_error(&error);
            tracing::error!(%why, "a new target environment could not be made");
            Err(ErrorData::internal_error("the write bound failed", None).into())
        }
    }
}

/// Remove the directories made for a run that did not start or wrote nothing there,
/// innermost first, each while empty.
pub(super) fn remove_unused(made: &[PathBuf]) {
    made.iter()
        .rev()
        .for_each(|d| bound::remove_unused_target(d));
}

/// What [`make`] made: the new targets, and every directory (outermost first).
#[derive(Default)]
pub(super) struct Made {
    pub(super) targets: Vec<PathBuf>,
    pub(super) dirs: Vec<PathBuf>,
}
