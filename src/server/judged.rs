//! A tool call as a value: what validation and compilation made of the request (the
//! final argv, the working directory asked for, stdin, the timeout) and, once judged,
//! the policy's verdict on that argv; each gate reads the value and adds what it decides
//! (the resolved working directory, the sandbox plan, the confirmation), and the run
//! starts from it. A parked plan (`--confirm-writes`, session-less revision) is one.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::config::Config;
use crate::host::bind::Binding;
use crate::host::exec;
use crate::host::sandbox;
use crate::tools::policy::Classification;

/// One tool call after the policy judged its final argv.
#[derive(Clone)]
pub(super) struct Judged {
    /// The canonical tool name (for the audit log).
    pub tool: String,
    /// The final argv (after `conda`).
    pub argv: Vec<String>,
    /// The policy's verdict on [`Self::argv`].
    pub class: Classification,
    /// Where the child runs.
    pub workdir: Workdir,
    pub stdin: Option<Vec<u8>>,
    pub timeout: Duration,
    /// conda would write fetch records on a terminal (decided when the call was judged,
    /// only when the request asked for progress).
    pub fetch_records: bool,
    /// The read-only sandbox's plan, when the sandbox gate gave it one.
    pub sandbox: Option<sandbox::Plan>,
    /// The canonical environments a write targets, when the `--write-envs` gate resolved
    /// them (under `--write-envs`, or `--allow-paths`): their in-place files are looked at
    /// again right before the child starts, and under `--write-envs` they are the write
    /// bound's places.
    pub targets: Vec<PathBuf>,
    /// The envs directories each condarc file names, by file, as the same resolution
    /// found them (`--allow-paths` writes trust some: `server::call::gates`).
    pub envs_dirs: Vec<(PathBuf, Vec<PathBuf>)>,
    pub confirmation: Confirmation,
}

/// The working directory of a call.
#[derive(Clone)]
pub(super) enum Workdir {
    /// A generated tool's `ccm_cwd` (or none), resolved by the working-directory gate.
    Requested(Option<String>),
    /// The child's working directory (`None`: the server's).
    Resolved(Option<PathBuf>),
}

/// Where a call stands with `--confirm-writes`.
#[derive(Clone, Default)]
pub(super) enum Confirmation {
    /// Not asked yet (the confirmation gate asks when the call needs it).
    #[default]
    Pending,
    /// The person accepted this plan: it runs bound to the binding, when there is one.
    Accepted(Option<Arc<Binding>>),
}

impl Judged {
    /// The resolved working directory (`None`: the server's, or not resolved yet).
    pub(super) fn cwd(&self) -> Option<&std::path::Path> {
        match &self.workdir {
            Workdir::Resolved(cwd) => cwd.as_deref(),
            Workdir::Requested(_) => None,
        }
    }

    /// The confirmed plan's binding, when the call was confirmed with one.
    pub(super) fn binding(&self) -> Option<&Arc<Binding>> {
        match &self.confirmation {
            Confirmation::Accepted(binding) => binding.as_ref(),
            Confirmation::Pending => None,
        }
    }

    /// The child's specification under the server's settings and child `limits`.
    pub(super) fn spec(&self, config: &Config, limits: &exec::Limits) -> exec::Spec {
        exec::Spec {
            program: config.conda_exe.clone(),
            args: self.argv.iter().map(OsString::from).collect(),
            cwd: self.cwd().map(PathBuf::from),
            stdin: self.stdin.clone(),
            timeout: self.timeout,
            stdout_limit: config.output_limit,
            stderr_limit: config.output_limit,
            env_remove: Vec::new(),
            limits: limits.clone(),
            sandbox: self.sandbox.clone(),
            write_bound: None,
        }
    }
}
