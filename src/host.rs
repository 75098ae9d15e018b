//! Everything that touches the host: child processes (`exec`), discovery through the
//! target's own interpreter (`discovery`), the Python-free scan of the target's
//! distributions (`site_scan`), the read-only sandbox (`sandbox`), `--allow-paths`
//! (`confine`), the target conda resolved once (`target`), the environments a write targets (`targets`, for `--write-envs`) and the
//! binding of a confirmed plan to its run (`bind`, for `--confirm-writes`), and the server's own directories in the temporary directory (`scratch`: made named by their server, a dead server's removed at start). Only this layer spawns processes or reads the target's files.

pub mod audit;
pub(crate) mod bind;
pub(crate) mod confine;
pub mod discovery;
pub mod exec;
pub(crate) mod files;
pub(crate) mod install;
pub(crate) mod platform;
pub mod sandbox;
pub mod scratch;
pub mod site_scan;
pub mod target;
pub(crate) mod targets;

use std::sync::Arc;

/// What one server holds of the host, built once by `main` from the resolved target and
/// owned by the server (a one-shot command builds its own): the executions (the children's
/// limits and withheld environment, `--warm`, the runs being supervised and their
/// shutdown), the audit log, and the target conda. Nothing of it is process-global.
#[derive(Clone)]
pub struct Host {
    pub exec: exec::Executions,
    pub audit: Arc<audit::Audit>,
    /// The target conda, resolved once (its `#!` line read at startup).
    pub conda: Arc<target::Conda>,
}

impl Host {
    /// The host of a server whose target is `conda`, its children under `limits`.
    pub fn new(conda: target::Conda, limits: exec::Limits, audit: audit::Audit) -> Host {
        Host {
            exec: exec::Executions::new(limits),
            audit: Arc::new(audit),
            conda: Arc::new(conda),
        }
    }

    /// Warm reads: turn the warm path on for the target's `conda` and start its read
    /// zygote in the background, inside the sandbox `plan` makes (a read-only call's).
    pub fn start_warm(&self, plan: Box<dyn Fn() -> Option<sandbox::Plan> + Send + Sync>) {
        self.exec
            .start_warm(warm_entry(Arc::clone(&self.conda), plan));
    }
}

/// Make this process undumpable (`host::platform`): processes of the same user cannot
/// read its environment, command line or memory. Returns whether it worked; only for the
/// `ccm` binary, before any thread starts.
pub fn make_undumpable() -> bool {
    platform::set_undumpable()
}

/// What the warm path needs of the target: its entry script, the `#!` line read at
/// startup, its stamp taken anew (a changed stamp replaces the zygote), and the plan of
/// the zygote's sandbox.
fn warm_entry(
    conda: Arc<target::Conda>,
    plan: Box<dyn Fn() -> Option<sandbox::Plan> + Send + Sync>,
) -> exec::warm::Entry {
    exec::warm::Entry {
        program: conda.exe().to_path_buf(),
        script: conda.script().cloned(),
        restamp: Box::new(move || Some(site_scan::stamp(&conda.locate()?.site_dirs)?.digest)),
        plan,
    }
}
