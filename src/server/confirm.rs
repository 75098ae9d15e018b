//! `--confirm-writes`: the user confirms every write and exec call through MCP
//! elicitation (form mode) before it runs, and the confirmed plan is what runs.
//!
//! The question shows what decides the run: the exact command, the working directory, the
//! environment the child gets, `conda_execute`'s stdin, and the plan ([`preview`]): for a
//! call that needs no `--allow-exec`, conda's entry point runs first through the binding
//! wrapper ([`crate::host::bind`]) — as conda's `--dry-run --json` where it can, else only
//! as far as conda's parse — and the question lists the input files conda reads, the
//! target (whether it is deleted, and a caution when it lies where the agent or another
//! user can change files: [`exposed`]), and each package with its full channel URL
//! (credentials redacted) and hash ([`plan`]). Accept runs the argv that was shown through
//! the same wrapper, bound to that plan: the input files are read from the copies the
//! preview read, and if the configuration, the target, an input file or any package
//! record differs, nothing is fetched, linked or run, and the result is an `isError`
//! starting with `plan_changed` that names the change. A dry run that fails is the call's
//! result; a plan that cannot be bound is refused (`confirmation_unavailable`); nothing is
//! asked then. Every line is escaped (control and bidi characters). Decline or cancel is
//! an `isError` result starting with `declined_by_user`; no answer within
//! `--confirm-timeout` is `confirmation_timed_out`; a client that cannot be asked (no
//! elicitation capability in form mode; a session-less request that did not declare it)
//! is refused with `confirmation_unavailable`. Nothing runs in those cases. The question
//! is asked before the execution slot is taken, so waiting for the person holds no slot
//! and is not part of the execution timeout; the call's cancellation withdraws it
//! (`notifications/cancelled` for the question).

use std::collections::BTreeMap;

use rmcp::RoleServer;
use rmcp::model::{
    CallToolResult, ClientResult, ContentBlock, ElicitRequest, ElicitRequestParams,
    ElicitationAction, ElicitationSchema, ServerRequest,
};
use rmcp::service::{Peer, PeerRequestOptions};
use tokio_util::sync::CancellationToken;

use std::sync::Arc;

use super::caller::Caller;
use super::judged::{Confirmation, Judged};
use super::ready::Ready;
use super::refuse::Refusal;
use super::state::Server;
use super::trail;
use crate::host::exec;
use crate::host::sandbox::bound;
use crate::tools::policy;

mod exposed;
mod parked;
mod plan;
mod preview;

pub(super) use parked::resume;

pub(super) use plan::{DECLINED, PLAN_CHANGED, TIMED_OUT, UNAVAILABLE};

/// The listed tools a client that cannot be asked may use under `--confirm-writes`:
/// those whose every call is read-only.
pub(super) fn read_only(tools: &[rmcp::model::Tool]) -> Vec<rmcp::model::Tool> {
    tools
        .iter()
        .filter(|t| {
            t.annotations
                .as_ref()
                .is_some_and(|a| a.read_only_hint == Some(true))
        })
        .cloned()
        .collect()
}

/// What the person answered.
enum Answer {
    Accepted,
    Declined,
    Cancelled,
    TimedOut,
    /// The call was cancelled while the question was open.
    Withdrawn,
    /// The question could not be asked (the client answered with an error).
    Failed,
}

impl Server {
    /// The confirmation gate: ask the user to confirm the call when `--confirm-writes`
    /// applies to it; `Ok` means run it, bound to the plan that was shown when the call
    /// now carries a binding.
    pub(super) async fn confirm(
        &self,
        ready: &Ready,
        call: &mut Judged,
        caller: &Caller,
    ) -> Result<(), Refusal> {
        let config = &self.shared.config;
        let class = &call.class;
        if !config.confirm_writes || !(class.requires_write || class.requires_exec) {
            return Ok(());
        }
        if let Confirmation::Accepted(_) = call.confirmation {
            return Ok(());
        }
        let audit = &caller.audit;
        if !caller.asker.can_ask() {
            audit.confirmation("unavailable");
            return Err(refusal(UNAVAILABLE));
        }
        let Some(command) = plan::command_line(&call.argv) else {
            audit.confirmation("unavailable");
            return Err(refusal(plan::TOO_LONG));
        };
        let spec = call.spec(config, self.shared.host.exec.limits());
        let previewed = self.preview(ready, &spec, call, caller).await?;
        let here = std::env::current_dir().unwrap_or_default();
        let cautions = match previewed.binding.as_ref() {
            Some(binding) => self.cautions(ready, call, caller, &binding.plan).await,
            None => Vec::new(),
        };
        let shown = plan::Shown {
            command: &command,
            cwd: &here.join(spec.cwd.as_deref().unwrap_or(&here)),
            stdin: spec.stdin.as_deref(),
            environment: exec::environment_changes(&spec),
            withheld: &self.shared.host.audit.withheld(),
            dry: previewed.dry.as_ref(),
            plan: previewed.binding.as_ref().map(|b| &b.plan),
            cautions: &cautions,
        };
        let Ok(message) = plan::message(&shown) else {
            audit.confirmation("unavailable");
            return Err(refusal(plan::TOO_LONG_PLAN));
        };
        let binding = previewed.binding.map(|mut b| {
            b.forget_contents();
            Arc::new(b)
        });
        let Some(peer) = &caller.asker.peer else {
            audit.confirmation("input_required");
            let mut parked = call.clone();
            parked.confirmation = Confirmation::Accepted(binding);
            // The retry plans its own sandbox (the run's gates): none is held while parked.
            parked.sandbox = None;
            let question = form(message);
            let parked = self
                .shared
                .parked
                .park(parked, config.confirm_timeout, question);
            return Err(Refusal::InputRequired(parked));
        };
        let answer = ask(peer, message, config.confirm_timeout, &caller.ct).await;
        let (word, result) = match answer {
            Answer::Accepted => ("accepted", Ok(())),
            Answer::Declined => ("declined", Err(refusal(DECLINED))),
            Answer::Cancelled => ("cancelled", Err(refusal(DECLINED))),
            Answer::TimedOut => ("timed_out", Err(refusal(TIMED_OUT))),
            Answer::Withdrawn => ("withdrawn", Err(Refusal::Cancelled)),
            Answer::Failed => ("unavailable", Err(refusal(UNAVAILABLE))),
        };
        audit.confirmation(word);
        if result.is_ok() {
            call.confirmation = Confirmation::Accepted(binding);
        }
        result
    }
}

impl Server {
    /// The caution for each of the plan's targets that lies where the agent or another
    /// user can change files ([`exposed`]).
    async fn cautions(
        &self,
        ready: &Ready,
        call: &Judged,
        caller: &Caller,
        plan: &crate::host::bind::Plan,
    ) -> Vec<(String, String)> {
        let roots = self.roots.get(caller.roots_peer.as_ref()).await;
        let bounded = self.bounded(ready, call) && bound::support().is_ok();
        let targets: Vec<String> = plan::targets(plan).into_iter().map(str::to_owned).collect();
        let judging = targets.clone();
        // Stats and directory listings of the targets: off the runtime's threads.
        let judged = tokio::task::spawn_blocking(move || {
            let places = exposed::Places::new(&roots, bounded);
            judging
                .into_iter()
                .filter_map(|t| {
                    let caution = places.caution(&t)?;
                    Some((t, caution))
                })
                .collect()
        });
        judged.await.unwrap_or_else(|error| {
            // Fail closed: a target that could not be judged is named as such.
            tracing::error!(%error, "the targets could not be judged for the question");
            targets
                .into_iter()
                .map(|t| (t, exposed::UNJUDGED.to_owned()))
                .collect()
        })
    }
}

/// The result of a confirmed run that stopped because it would differ from the plan that
/// was shown (`why` from the wrapper, escaped and with credentials redacted).
pub(super) fn plan_changed(
    log: &crate::host::audit::Audit,
    stopped: &crate::host::bind::Stopped,
    audit: &trail::Record,
) -> CallToolResult {
    audit.refused(PLAN_CHANGED);
    let redacted = log
        .redacted(
            &stopped
                .why
                .split(' ')
                .map(str::to_owned)
                .collect::<Vec<_>>(),
        )
        .join(" ");
    let text = format!(
        "{PLAN_CHANGED}: {}; {}. Call again to ask the user about the new plan.",
        plan::shown_long(&redacted),
        stopped.reached.done()
    );
    CallToolResult::error(vec![ContentBlock::text(text)])
}

/// An `isError` result with a code; nothing ran.
fn refusal(text: &str) -> Refusal {
    Refusal::Busy(CallToolResult::error(vec![ContentBlock::text(text)]))
}

/// The question: a form with no fields (accept is the consent).
fn form(message: String) -> ElicitRequest {
    ElicitRequest::new(ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema: ElicitationSchema::new(BTreeMap::new()),
    })
}

/// Send the question and wait for the answer, the timeout or the call's cancellation
/// (which withdraws the question).
async fn ask(
    peer: &Peer<RoleServer>,
    message: String,
    timeout: std::time::Duration,
    ct: &CancellationToken,
) -> Answer {
    let request = ServerRequest::ElicitRequest(form(message));
    let mut handle = match peer
        .send_cancellable_request(request, PeerRequestOptions::no_options())
        .await
    {
        Ok(handle) => handle,
        Err(error) => {
            tracing::debug!(%error, "elicitation/create could not be sent");
            return Answer::Failed;
        }
    };
    let answered = tokio::select! {
        answer = &mut handle.rx => Some(answer),
        _ = tokio::time::sleep(timeout) => None,
        _ = ct.cancelled() => {
            let _ = handle.cancel(Some("the tool call was cancelled".into())).await;
            return Answer::Withdrawn;
        }
    };
    let Some(answer) = answered else {
        let _ = handle.cancel(Some("not answered in time".into())).await;
        return Answer::TimedOut;
    };
    match answer {
        Ok(Ok(ClientResult::ElicitResult(result))) => match result.action {
            ElicitationAction::Accept => Answer::Accepted,
            ElicitationAction::Decline => Answer::Declined,
            ElicitationAction::Cancel => Answer::Cancelled,
            // An action this revision does not know is not consent.
            _ => Answer::Declined,
        },
        Ok(Ok(_)) | Ok(Err(_)) | Err(_) => Answer::Failed,
    }
}

/// Whether `argv` names a command the catalog gives `--dry-run` (for [`plan`]).
fn has_dry_run(root: Option<&crate::model::catalog::Command>, argv: &[String]) -> bool {
    let Some(root) = root else {
        return false;
    };
    let Some(path) = policy::command_path(Some(root), argv) else {
        return false;
    };
    let mut command = root;
    for name in &path {
        match command
            .children
            .iter()
            .find(|c| c.name.as_deref() == Some(name.as_str()))
        {
            Some(child) => command = child,
            None => return false,
        }
    }
    command
        .arguments
        .iter()
        .any(|a| a.flags.iter().any(|f| f == "--dry-run"))
}
