//! The write bound of a call about to run (`host::sandbox::bound`): a write admitted
//! under `--allow-paths` or `--write-envs` writes, for its whole life, only beneath the
//! places its gates admitted and what conda itself writes, whatever a symlink swapped in
//! after the last check says.

use std::path::PathBuf;

use rmcp::ErrorData;

use super::super::judged::Judged;
use super::super::ready::Ready;
use super::super::refuse::{self, Refusal};
use super::super::state::Server;
use super::envs_dirs::{canonical, nearest, operator_envs_dirs};
use super::gates::{OUTSIDE_ALLOWED, TARGET_CHANGED};
use super::new_targets;
use crate::host::exec;
use crate::host::sandbox::{self, bound, shared};
use crate::host::scratch::Scratch;

/// The refusal of a bounded write one of whose places holds a file shared with
/// something outside it that cannot be made its own (the file named relative to its
/// place, never its contents).
const SHARED: &str = "Operation may write a place holding a file with other links";

/// The refusal of a bounded write one of whose places could not be made free of shared
/// files (unreadable, too deep, too much to copy).
const UNCHECKED: &str = "Operation may write a place that could not be made free of shared files";

/// The refusal of a bounded write that would write conda's root prefix as a whole (a
/// target that is it, or a missing target whose nearest existing directory holds it)
/// where the operator's scope does not contain it.
const ROOT_PREFIX: &str = "Operation would write conda's root prefix or the home directory, \
                           which the operator's scope does not contain";

/// The refusal of a bounded write on a kernel that lets anyone hard-link any file they
/// can name (`fs.protected_hardlinks` off): a link planted during the run could lead it
/// anywhere ([`shared::links_protected`]).
const LINKS_UNPROTECTED: &str = "Operation would run a bounded write on a kernel whose \
                                 fs.protected_hardlinks is off; the operator can turn it on \
                                 (sysctl fs.protected_hardlinks=1)";

/// What a failed bounded run's summary adds when a write was refused.
pub(super) const REFUSED_WRITE: &str = "a write outside the places this call may write was refused: \
                                 the allowed directories (--allow-paths) or the target \
                                 environments (--write-envs), and conda's own caches";

impl Server {
    /// Whether `call` runs under a write bound: an unsandboxed call that writes and runs
    /// no program of the caller's (`--allow-exec` calls are not confined: they can run
    /// anything), on a server that confines writes (`--allow-paths` or `--write-envs`).
    /// Confirmed runs included: the bound holds past the plan's last check.
    pub(in crate::server) fn bounded(&self, ready: &Ready, call: &Judged) -> bool {
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
        make_envs_dirs(ready, call, self.shared.config.write_envs.is_some());
        let (mut places, scoped, narrow) = self.judged_places(ready, call);
        if !narrow {
            make_condarc(ready, call);
        }
        let root = ready.discovery.prefix.as_deref();
        self.refuse_root_prefix(ready, call, root, scoped)?;
        if !shared::links_protected() {
            let reason = refuse::Reason::LinksUnprotected;
            return Err(refuse::policy(reason, LINKS_UNPROTECTED));
        }
        let (new, ungranted) = new_targets::new_targets(ready, call, scoped);
        places.retain(|p| !ungranted.contains(&p.path));
        let mut inputs = sandbox::Inputs::from_process();
        let mut setup = match self.shared.start.sandbox.get() {
            Some(sandbox) => sandbox.bound_setup(),
            None => bound::Setup::default(),
        };
        if let Ok(abi) = bound::support() {
            // The run's own temporary directory, in the server's; removed with the bound.
            let failed = |error: std::io::Error| {
                tracing::error!(%error, "the write bound's temporary directory could not be made");
                Refusal::from(ErrorData::internal_error("the write bound failed", None))
            };
            let tmpdir = Scratch::new("ccm-write", &inputs.temp_dir).map_err(failed)?;
            // Its own package cache there, the operator's read-only behind it.
            let (_, pkgs_dirs) =
                bound::private_cache(tmpdir.path(), &inputs, root).map_err(failed)?;
            setup.pkgs_dirs = Some(pkgs_dirs);
            inputs.temp_dir = tmpdir.path().to_path_buf();
            setup.tmpdir = Some(tmpdir);
            setup.cwd = match &run.cwd {
                Some(cwd) => Some(cwd.clone()),
                None => std::env::current_dir().ok(),
            };
            let judged_places = places.clone();
            let conda = bound::conda_places(&inputs, root, false);
            let named = if narrow {
                Vec::new()
            } else {
                bound::named_places(&inputs, root)
            };
            places.extend(conda.iter().chain(&named).cloned());
            // A confirmed run's wrapper writes `changed.json` into its plan's directory.
            places.extend(call.binding().map(|b| bound::Writable {
                path: b.dir().to_path_buf(),
                judged: false,
            }));
            // Nothing the run may write is a file shared with anything outside it.
            let private = [inputs.temp_dir.clone()]
                .into_iter()
                .chain(call.binding().map(|b| b.dir().to_path_buf()))
                .collect::<Vec<_>>();
            let made = new_targets::make(new, scoped).await?;
            setup.new_targets = made.targets;
            setup.made = made.dirs.clone();
            let shared = unshare(judged_places, conda, named, private, scoped);
            let bound = match shared.await {
                Ok(()) => make(abi, places, setup, scoped).await,
                Err(refused) => Err(refused),
            };
            if bound.is_err() {
                new_targets::remove_unused(&made.dirs);
            }
            run.write_bound = Some(bound?);
        }
        hold_for_tests().await;
        Ok(())
    }
}

impl Server {
    /// The places the gates judged, whether `--write-envs` scopes the call, and whether the
    /// places a call names by name are left out. Under `--write-envs` the run writes its
    /// targets only. Under `--allow-paths` alone it writes the allowed directories (what
    /// the call's paths may name; every file there shared with elsewhere is un-shared
    /// first) and the targets the gate resolved (a missing one outside them: made, see
    /// `new_targets`); the places a call names by name (the envs directories, `~/.condarc`,
    /// `<root>/.condarc`) only for `conda config` without targets: then they are what it
    /// may write, and files shared there are refused. Any other command gets the allowed
    /// directories alone: one whose gate resolved no target (its environment named in a
    /// file: attack 20 G1) or that has none in the gate's table but installs into one
    /// (`doctor --fix`, `check --fix`: attack 21 H1) got every envs directory and both
    /// condarc files, where its link scripts wrote other environments' `activate.d`.
    fn judged_places(&self, ready: &Ready, call: &Judged) -> (Vec<bound::Writable>, bool, bool) {
        let scoped = self.shared.config.write_envs.is_some();
        let places = if scoped {
            judged(&call.targets)
        } else {
            judged(&ready.confinement.write_dirs())
                .into_iter()
                .chain(judged(&call.targets))
                .collect()
        };
        let root = ready.discovery.catalog.root.as_ref();
        let path = crate::tools::policy::command_path(root, &call.argv);
        let config = path.as_deref() == Some(&["config".to_owned()][..]);
        (
            places,
            scoped,
            scoped || !config || !call.targets.is_empty(),
        )
    }

    /// conda's root prefix as a whole is never a place of a bounded write unless the
    /// operator's scope contains it (an allowed directory, a `--write-envs` entry): code
    /// planted there (a `.pth` file) runs in the server's own helpers, unsandboxed. A
    /// target that is it, or a missing target whose nearest existing directory holds it,
    /// refuses the call.
    fn refuse_root_prefix(
        &self,
        ready: &Ready,
        call: &Judged,
        root: Option<&std::path::Path>,
        scoped: bool,
    ) -> Result<(), Refusal> {
        let Some(root) = root else {
            return Ok(());
        };
        let scope: Vec<PathBuf> = match &self.shared.config.write_envs {
            Some(scope) => scope.paths().to_vec(),
            None => ready.confinement.write_dirs(),
        };
        // An existing target `--write-envs` admitted is in its scope (`base` named).
        let admitted = |t: &PathBuf| scoped && t.is_dir();
        // Under the default scope the home directory is no place whole either.
        let home = ready.confinement.default_home();
        if !call.targets.iter().any(|t| {
            !admitted(t)
                && (holds_root(t, root, &scope) || home.is_some_and(|h| holds_home(t, h, &scope)))
        }) {
            return Ok(());
        }
        let reason = if scoped {
            refuse::Reason::OutsideWriteEnvs
        } else {
            refuse::Reason::OutsideAllowedPaths
        };
        Err(refuse::policy(reason, ROOT_PREFIX))
    }
}

/// Nothing the run may write is a file shared with anything outside it ([`settle`]);
/// nothing is outside `/` (`--allow-paths /`).
async fn unshare(
    judged: Vec<bound::Writable>,
    conda: Vec<bound::Writable>,
    named: Vec<bound::Writable>,
    private: Vec<PathBuf>,
    scoped: bool,
) -> Result<(), Refusal> {
    let everything = judged.iter().any(|p| p.path.parent().is_none());
    let settled = tokio::task::spawn_blocking(move || {
        if everything {
            return Ok(());
        }
        settle(&judged, &conda, &named, &private)
    })
    .await
    .map_err(|_| ErrorData::internal_error("the write bound failed", None))?;
    match settled {
        Ok(()) => Ok(()),
        Err(shared) => {
            let reason = if scoped {
                refuse::Reason::OutsideWriteEnvs
            } else {
                refuse::Reason::OutsideAllowedPaths
            };
            // A symlink swapped into a judged place's path: as `Bound::make` says it.
            if matches!(shared, shared::Shared::Changed) {
                let text = if scoped {
                    TARGET_CHANGED
                } else {
                    OUTSIDE_ALLOWED
                };
                return Err(refuse::policy(reason, text));
            }
            let text = match shared {
                shared::Shared::File(_) | shared::Shared::Foreign(_) => {
                    format!("{SHARED}: {shared}")
                }
                _ => format!("{UNCHECKED}: {shared}"),
            };
            Err(refuse::policy(reason, &text))
        }
    }
}

/// The bound of `places` and `setup`, made off the async workers.
async fn make(
    abi: i64,
    places: Vec<bound::Writable>,
    setup: bound::Setup,
    scoped: bool,
) -> Result<bound::Bound, Refusal> {
    let made = tokio::task::spawn_blocking(move || bound::Bound::make(abi, &places, setup))
        .await
        .map_err(|_| ErrorData::internal_error("the write bound failed", None))?;
    made_or_refused(made, scoped)
}

/// The bound made, or the refusal of a judged path that changed (never the path).
fn made_or_refused(
    made: Result<bound::Bound, std::io::Error>,
    scoped: bool,
) -> Result<bound::Bound, Refusal> {
    match made {
        Ok(bound) => Ok(bound),
        Err(error) if bound::changed(&error) && scoped => Err(refuse::policy(
            refuse::Reason::OutsideWriteEnvs,
            TARGET_CHANGED,
        )),
        Err(error) if bound::changed(&error) => Err(refuse::policy(
            refuse::Reason::OutsideAllowedPaths,
            OUTSIDE_ALLOWED,
        )),
        Err(error) => {
            tracing::error!(%error, "the write bound could not be made");
            Err(ErrorData::internal_error("the write bound failed", None).into())
        }
    }
}

/// A target that names an environment in an envs directory that does not exist yet gets
/// that directory made first, empty, as conda's first `create -n` would (conda/gateways/
/// disk/create.py:500-523): else the run's place would be the directory's nearest
/// existing ancestor, the home directory or the root prefix, which the bound refuses.
/// Only an envs directory the operator named (under `--write-envs`, whose scope admitted
/// the target, any conda names); the target resolution itself creates nothing.
fn make_envs_dirs(ready: &Ready, call: &Judged, narrow: bool) {
    let envs_dirs = operator_envs_dirs(ready, call, narrow);
    for target in &call.targets {
        let Some(parent) = target.parent() else {
            continue;
        };
        let missing = std::fs::symlink_metadata(parent).is_err();
        if missing
            && envs_dirs.iter().any(|d| d == parent)
            && let Err(error) = std::fs::create_dir_all(parent)
        {
            tracing::debug!(%error, "an envs directory could not be made");
        }
    }
}

/// The condarc file a bounded `conda config` writes, made empty when it does not exist
/// yet: the bound grants it by name (`named_places`), and Landlock can grant only a file
/// that exists, so a first `conda config --add` failed with conda's "Cannot write to
/// condarc file" (attack 8). conda writes `~/.condarc` (conda/base/context.py:135
/// `user_rc_path`) unless the argv names another file (`--file`, `--env`, `--prefix`,
/// `--name`, judged as paths or targets) or `--system` (`<root>/.condarc`, `sys_rc_path`).
/// Made only in an existing directory, never through a symlink; an empty condarc sets
/// nothing.
fn make_condarc(ready: &Ready, call: &Judged) {
    let root = ready.discovery.catalog.root.as_ref();
    let path = crate::tools::policy::command_path(root, &call.argv);
    if path.as_deref() != Some(&["config".to_owned()][..]) {
        return;
    }
    let names = |flags: &[&str]| {
        call.argv.iter().any(|t| {
            flags
                .iter()
                .any(|f| t == f || t.starts_with(&format!("{f}=")))
        })
    };
    if names(&["--file", "--env", "--prefix", "-p", "--name", "-n"]) {
        return;
    }
    let file = if names(&["--system"]) {
        ready.discovery.prefix.as_ref().map(|r| r.join(".condarc"))
    } else {
        crate::host::sandbox::Inputs::from_process()
            .home
            .map(|h| h.join(".condarc"))
    };
    let Some(file) = file else {
        return;
    };
    if std::fs::symlink_metadata(&file).is_err()
        && file.parent().is_some_and(std::path::Path::is_dir)
    {
        use rustix::fs::{CWD, Mode, OFlags, openat};
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW;
        if let Err(error) = openat(
            CWD,
            &file,
            flags | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o644),
        ) {
            tracing::debug!(%error, "the condarc file could not be made");
        }
    }
}

/// Whether the run would write `root` (conda's root prefix) through `target`: the
/// directory it may write for the target (the target, or its nearest existing directory)
/// is `root`, holds it, or lies inside it but not in its `envs/` (its `site-packages`,
/// where a `.pth` file runs in every later conda process: attack 6), and no directory of
/// the operator's `scope` holds that directory.
fn holds_root(target: &std::path::Path, root: &std::path::Path, scope: &[PathBuf]) -> bool {
    let (at, root) = (nearest(target), canonical(root));
    let inside = at.starts_with(&root) && !at.starts_with(root.join("envs"));
    (root.starts_with(&at) || inside) && !scope.iter().any(|s| at.starts_with(canonical(s)))
}

/// Whether the run would write the home directory whole through `target` (its nearest
/// existing directory is the home directory or holds it) outside the `scope`.
fn holds_home(target: &std::path::Path, home: &std::path::Path, scope: &[PathBuf]) -> bool {
    let at = nearest(target);
    home.starts_with(&at) && !scope.iter().any(|s| at.starts_with(canonical(s)))
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

/// Make every place of a run free of files shared with anything outside it
/// ([`shared::settle`]): the places the gates judged (the targets, else the allowed
/// directories; a place that does not exist yet, its nearest existing directory, which
/// the run may write whole) and conda's other places outside the run's own get private
/// copies; the root prefix and the envs directories, which a command
/// without targets keeps under `--allow-paths` alone, are refused (they hold other
/// environments: copying them is not what the call asked). The run's private places
/// (its temporary directory and package cache, the plan's directory) and `/dev` are
/// skipped. Logs what was copied.
fn settle(
    judged: &[bound::Writable],
    conda: &[bound::Writable],
    named: &[bound::Writable],
    private: &[PathBuf],
) -> Result<(), shared::Shared> {
    let mut copied = shared::Unshared::default();
    for place in judged {
        shared::settle_judged(&place.path, &mut copied)?;
    }
    for place in conda {
        let path = place.path.as_path();
        if !path.starts_with("/dev") && !private.iter().any(|p| path.starts_with(p)) {
            shared::settle(path, shared::Rule::Unshare, &mut copied)?;
        }
    }
    for place in named {
        shared::settle(&place.path, shared::Rule::Refuse, &mut copied)?;
    }
    if copied.files > 0 {
        tracing::info!(
            files = copied.files,
            bytes = copied.bytes,
            "files shared with elsewhere in the places of a bounded write were made its own"
        );
    }
    Ok(())
}
