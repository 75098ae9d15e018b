//! The preview behind a question, and the binding of its plan to the run
//! ([`crate::host::bind`]). A call that needs `--allow-exec` is previewed by its argv alone
//! (it may run any program: binding conda's inputs would bind nothing). Every other call
//! runs conda's entry point through the binding wrapper: as conda's `--dry-run --json`
//! where conda has a dry run and the preview cannot write (the read-only sandbox, or a
//! dry run the policy proves writes nothing), else only as far as conda's parse
//! (`inspect`: configuration, target and input files bound, packages not previewed). A
//! dry run that fails is the call's result; a preview that cannot be bound refuses the
//! call; nothing is asked in either case.

use rmcp::ErrorData;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::super::caller::Caller;
use super::super::judged::Judged;
use super::super::ready::Ready;
use super::super::refuse::Refusal;
use super::super::result::execution_result;
use super::super::state::Server;
use super::plan;
use crate::host::bind::{self, Binding};
use crate::host::{exec, sandbox};
use crate::tools::policy::{self, Origin};

/// What the preview found: conda's dry-run document, when there was a dry run, and the
/// bound plan, when the call is bound.
#[derive(Default)]
pub(super) struct Previewed {
    pub dry: Option<Value>,
    pub binding: Option<Binding>,
}

impl Server {
    /// The preview of the call (see the module's doc).
    pub(super) async fn preview(
        &self,
        ready: &Ready,
        spec: &exec::Spec,
        call: &Judged,
        caller: &Caller,
    ) -> Result<Previewed, Refusal> {
        let (argv, audit, ct): (&[String], _, _) = (&call.argv, &caller.audit, &caller.ct);
        if call.class.requires_exec {
            return Ok(Previewed::default());
        }
        let Some(interpreter) = ready.discovery.interpreter.as_deref() else {
            audit.confirmation("unavailable");
            return Err(unbound(&bind::Unbound::NoInterpreter));
        };
        let root = ready.discovery.catalog.root.as_ref();
        let sandbox = self.preview_sandbox(ready, call).await?;
        let dry_run = plan::dry_runnable(root, argv)
            && (sandbox.is_some()
                || policy::classify(
                    &ready.toolset.rules,
                    root,
                    &[argv, &["--dry-run".to_owned()]].concat(),
                    Origin::Generated { opaque: false },
                )
                .read_only);
        let mut preview = spec.clone();
        let how = if dry_run {
            preview.args.extend(["--dry-run".into(), "--json".into()]);
            bind::Preview::DryRun
        } else {
            bind::Preview::Inspect
        };
        if sandbox.is_some() {
            preview.sandbox = sandbox;
        }
        let nonce = bind::nonce();
        let preview = bind::preview_spec(&preview, interpreter, how, &nonce);
        let mut outcome = self.preview_run(&preview, ct).await?;
        let found = bind::split_preview(&mut outcome, &nonce);
        // conda's own failure (a dry run that fails, a command conda cannot parse) is the
        // call's result; a wrapper that could not bind says why instead.
        let refused = matches!(found, Err(bind::Unbound::Refused(_)));
        if (outcome.exit_code != Some(0) || outcome.timed_out) && !refused {
            audit.outcome(&outcome);
            return Err(Refusal::Busy(execution_result(
                &outcome,
                self.shared.restart_required(),
                true,
            )));
        }
        let plan = found.map_err(|why| {
            audit.confirmation("unavailable");
            unbound(&why)
        })?;
        let dry = (how == bind::Preview::DryRun)
            .then(|| serde_json::from_slice(&outcome.stdout).unwrap_or(Value::Null));
        let log = self.shared.host.audit.identity();
        let binding = Binding::new(plan, interpreter, log).map_err(|why| {
            audit.confirmation("unavailable");
            unbound(&why)
        })?;
        Ok(Previewed {
            dry,
            binding: Some(binding),
        })
    }

    /// The read-only sandbox's plan for a preview, when the sandbox is active. Fail
    /// closed, as a read-only call does (`call::gates`): an active sandbox that cannot be
    /// planned previews nothing (the preview ran unsandboxed, attack 13 L1).
    async fn preview_sandbox(
        &self,
        ready: &Ready,
        call: &Judged,
    ) -> Result<Option<sandbox::Plan>, Refusal> {
        let Some(sandbox) = self.shared.start.sandbox.get() else {
            return Ok(None);
        };
        if *sandbox.state() != sandbox::State::Active {
            return Ok(None);
        }
        match self.sandbox_plan(ready, call.timeout).await {
            Some(plan) => Ok(Some(plan)),
            None => {
                tracing::error!("the sandbox could not be prepared for a preview");
                let error = ErrorData::internal_error("the sandbox could not be prepared", None);
                Err(Refusal::from(error))
            }
        }
    }

    /// Run the preview under the call's limits (and in the queue like any execution).
    async fn preview_run(
        &self,
        preview: &exec::Spec,
        ct: &CancellationToken,
    ) -> Result<exec::Outcome, Refusal> {
        exec::check_size(preview).map_err(|_| unbound(&bind::Unbound::TooLarge))?;
        let outcome = {
            let _admitted = self.capacity.admit(ct).await?;
            self.shared
                .host
                .exec
                .run(preview, ct)
                .await
                .map_err(|error| {
                    let why = exec::plain_os_error(&error);
                    tracing::error!(%why, "conda could not be started for the preview");
                    Refusal::from(ErrorData::internal_error(
                        "conda could not be started",
                        None,
                    ))
                })?
        };
        if outcome.cancelled {
            return Err(Refusal::Cancelled);
        }
        Ok(outcome)
    }
}

/// The refusal of a call whose plan cannot be bound to its run.
fn unbound(why: &bind::Unbound) -> Refusal {
    let text = format!(
        "{} ({}); nothing ran.",
        plan::UNBOUND,
        plan::shown(&why.to_string())
    );
    super::refusal(&text)
}
