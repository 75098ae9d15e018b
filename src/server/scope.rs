//! `--write-envs` at call time: after the policy admitted a write (or a `conda run`), the
//! environments the final argv targets are resolved by conda's own context and each must
//! lie in the operator's scope. Refusals name the flag and the target's kind, never its
//! value.

use std::path::Path;

use super::{Ready, Refusal, Server};
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
