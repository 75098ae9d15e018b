//! `--write-envs` at call time: after the policy admitted a write (or a `conda run`), the
//! environments the final argv targets are resolved by conda's own context and each must
//! lie in the operator's scope. Refusals name the flag and the target's kind, never its
//! value. Also path confinement (`--allow-paths`, the audit log), and both judged again
//! right before the child starts.

use std::path::{Path, PathBuf};

use tokio_util::sync::CancellationToken;

use super::call::OUTSIDE_ALLOWED;
use super::roots::Caller;
use super::{Ready, Refusal, Server, audit, refuse};
use crate::host::exec;
use crate::host::targets;
use crate::tools::policy::scope::{self, NO_TARGET, Scope};
use crate::tools::policy::{self, Classification};

impl Server {
    /// Check a call admitted by the policy against `--write-envs` (nothing to check
    /// without a scope, or for a call that neither writes nor runs in an environment).
    pub(super) async fn scope(
        &self,
        ready: &Ready,
        class: &Classification,
        argv: &[String],
        cwd: Option<&Path>,
    ) -> Result<(), Refusal> {
        let Some(scope) = &self.shared.config.write_envs else {
            return Ok(());
        };
        let refuse = |text: String| {
            super::audit::refused(&text);
            Err(super::refuse::policy(
                super::refuse::Reason::OutsideWriteEnvs,
                &text,
            ))
        };
        let path = policy::command_path(ready.discovery.catalog.root.as_ref(), argv);
        let runs = path.as_deref() == Some(&["run".to_owned()][..]);
        if !class.requires_write && !runs {
            return Ok(());
        }
        let Some(rule) = path.as_deref().and_then(scope::rule) else {
            return refuse(NO_TARGET.into());
        };
        let Some(interpreter) = ready.discovery.interpreter.as_deref() else {
            return refuse(scope::UNRESOLVED.into());
        };
        let timeout = self.shared.config.timeout;
        let resolved = targets::resolve(interpreter, argv, cwd, rule, timeout).await;
        let found = match resolved {
            Ok(found) => found,
            Err(why) => return refuse(why.to_string()),
        };
        let canonical = targets::canonical_all(scope.paths()).await;
        match found.iter().find(|t| !scope.admits(t, &canonical)) {
            Some(outside) => refuse(Scope::refusal(outside.kind())),
            None => Ok(()),
        }
    }
}

impl Server {
    /// Path confinement for calls that do not need `--allow-exec` (those may run any
    /// program, which can read anything anyway).
    pub(super) fn confine(
        &self,
        ready: &Ready,
        class: &Classification,
        argv: &[String],
        cwd: Option<&Path>,
    ) -> Result<(), Refusal> {
        let here = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let here_cwd = here.join(cwd.unwrap_or(&here));
        if audit::names_log(argv, &here_cwd, home.as_deref(), class.requires_write) {
            audit::refused(audit::NAMES_LOG);
            return Err(refuse::policy(
                refuse::Reason::NamesAuditLog,
                audit::NAMES_LOG,
            ));
        }
        if class.requires_exec || ready.confinement.is_unrestricted() {
            return Ok(());
        }
        // An explicit working directory is a path the call names too.
        let named_cwd = cwd.map(|c| here.join(c));
        let cwd_outside = named_cwd.as_ref().is_some_and(|c| {
            let token = [c.to_string_lossy().into_owned()];
            ready.confinement.check(&token, &here, None).is_err()
        });
        let cwd = named_cwd.unwrap_or(here);
        if cwd_outside
            || ready
                .confinement
                .check(argv, &cwd, home.as_deref())
                .is_err()
        {
            audit::refused(OUTSIDE_ALLOWED);
            return Err(refuse::policy(
                refuse::Reason::OutsideAllowedPaths,
                OUTSIDE_ALLOWED,
            ));
        }
        Ok(())
    }

    /// The last look before the child starts: after the question and the queue, a
    /// directory of a judged path may have been swapped for a symlink, so the paths (and
    /// the audit log) are judged where they lead now, and `--write-envs` again for a call
    /// that was asked about (a bound run's wrapper checks once more, later).
    /// A place in the queue (see `admit`), then [`Server::judge_again`]: the admission,
    /// held for the run.
    pub(super) async fn admitted(
        &self,
        ready: &Ready,
        class: &Classification,
        spec: &exec::Spec,
        caller: &Caller,
        ct: &CancellationToken,
    ) -> Result<impl Sized, Refusal> {
        let admitted = super::progress::waiting(caller, ct, self.admit(ct)).await?;
        self.judge_again(ready, class, spec).await?;
        Ok(admitted)
    }

    async fn judge_again(
        &self,
        ready: &Ready,
        class: &Classification,
        spec: &exec::Spec,
    ) -> Result<(), Refusal> {
        let argv: Vec<String> = spec
            .args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let (argv, cwd) = (&argv[..], spec.cwd.as_deref());
        let config = &self.shared.config;
        if config.confirm_writes && (class.requires_write || class.requires_exec) {
            self.scope(ready, class, argv, cwd).await?;
        }
        self.confine(ready, class, argv, cwd)
    }
}
