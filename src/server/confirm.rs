//! `--confirm-writes`: the user confirms every write and exec call through MCP
//! elicitation (form mode) before it runs.
//!
//! The question shows the plan: for a command conda can dry-run (its parser has
//! `--dry-run`), the same argv is first run with `--dry-run --json` under the same limits
//! and the plan is read from conda's answer (target prefix, packages to link and unlink,
//! download size; [`plan`]); a dry run that fails is the call's result and nothing is
//! asked. Otherwise the plan is the exact argv and the working directory. Every line is
//! escaped (control and bidi characters). Accept runs the exact argv that was planned;
//! decline or cancel is an `isError` result starting with `declined_by_user`; no answer
//! within `--confirm-timeout` is `confirmation_timed_out`; a client that cannot be asked
//! (no elicitation capability in form mode, or the session-less revision, which has no
//! server-to-client requests) is refused with `confirmation_unavailable`. Nothing runs in
//! those cases. The question is asked before the execution slot is taken, so waiting for
//! the person holds no slot and is not part of the execution timeout; the call's
//! cancellation withdraws it (`notifications/cancelled` for the question).

use std::collections::BTreeMap;

use rmcp::RoleServer;
use rmcp::model::{
    CallToolResult, ClientResult, ContentBlock, ElicitRequest, ElicitRequestParams,
    ElicitationAction, ElicitationSchema, ProtocolVersion, ServerRequest,
};
use rmcp::service::{ElicitationMode, Peer, PeerRequestOptions, RequestContext};
use tokio_util::sync::CancellationToken;

use super::result::execution_result;
use super::{Ready, Refusal, Server, audit};
use crate::host::{exec, sandbox};
use crate::tools::policy::{self, Classification, Origin};

mod parked;
mod plan;

pub use parked::{Parked, Parking};

pub use plan::{DECLINED, TIMED_OUT, UNAVAILABLE};

tokio::task_local! {
    static ASKER: Asker;
}

/// Whom a call's confirmation is asked of.
#[derive(Clone)]
pub struct Asker {
    /// The peer, when the client declared elicitation in form mode in a handshake.
    peer: Option<Peer<RoleServer>>,
    /// A session-less (2026-07-28) request whose client declared elicitation in form
    /// mode: asked with an input-required result.
    input_required: bool,
    /// The plan was confirmed already (the retry of an input-required result).
    confirmed: bool,
}

impl Asker {
    pub fn of(context: &RequestContext<RoleServer>) -> Asker {
        // A handshake session (stdio, or an HTTP session) is asked only as its
        // `initialize` declared, whatever a request's own `_meta` claims: the revision
        // that decides is the one the peer runs under (negotiated, or for a session-less
        // request its own), never one a request in a handshake session claims.
        let revision = |v: &ProtocolVersion| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str();
        let session_less = context
            .peer
            .peer_info()
            .is_none_or(|info| revision(&info.protocol_version))
            && context.protocol_version().is_some_and(|v| revision(&v));
        let form = !session_less
            && context
                .peer
                .supported_elicitation_modes()
                .contains(&ElicitationMode::Form);
        // In the request's own capabilities (the revision puts them in `_meta`): no form
        // and no url means form.
        let declared = context
            .client_capabilities()
            .and_then(|c| c.elicitation)
            .is_some_and(|e| e.form.is_some() || e.url.is_none());
        Asker {
            peer: (form && !session_less).then(|| context.peer.clone()),
            input_required: session_less && declared,
            confirmed: false,
        }
    }

    /// Whether this client can be asked (the listing shows it writes only then).
    pub fn can_ask(&self) -> bool {
        self.peer.is_some() || self.input_required
    }

    /// Run a call with this asker in scope.
    pub async fn scope<F: Future>(self, call: F) -> F::Output {
        ASKER.scope(self, call).await
    }
}

/// The listed tools a client that cannot be asked may use under `--confirm-writes`:
/// those whose every call is read-only.
pub fn read_only(tools: &[rmcp::model::Tool]) -> Vec<rmcp::model::Tool> {
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
    /// Ask the user to confirm `spec` when `--confirm-writes` applies to this call;
    /// `Ok` means run it.
    pub(super) async fn confirm(
        &self,
        ready: &Ready,
        spec: &exec::Spec,
        class: &Classification,
        ct: &CancellationToken,
    ) -> Result<(), Refusal> {
        let config = &self.shared.config;
        if !config.confirm_writes || !(class.requires_write || class.requires_exec) {
            return Ok(());
        }
        let asker = ASKER.try_with(Asker::clone).ok();
        if asker.as_ref().is_some_and(|a| a.confirmed) {
            return Ok(());
        }
        let Some(asker) = asker.filter(Asker::can_ask) else {
            audit::confirmation("unavailable");
            return Err(refusal(UNAVAILABLE));
        };
        let argv: Vec<String> = spec
            .args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let Some(command) = plan::command_line(&argv) else {
            audit::confirmation("unavailable");
            return Err(refusal(plan::TOO_LONG));
        };
        let dry = self.preview(ready, spec, class, &argv, ct).await?;
        let message = plan::message(&command, spec.cwd.as_deref(), dry.as_ref());
        let Some(peer) = asker.peer else {
            audit::confirmation("input_required");
            let parked = Parked::new(argv, spec, class, config.confirm_timeout);
            return Err(Refusal::InputRequired(
                self.shared.parked.park(parked, form(message)),
            ));
        };
        let answer = ask(&peer, message, config.confirm_timeout, ct).await;
        match answer {
            Answer::Accepted => {
                audit::confirmation("accepted");
                Ok(())
            }
            Answer::Declined | Answer::Cancelled => {
                audit::confirmation(if matches!(answer, Answer::Declined) {
                    "declined"
                } else {
                    "cancelled"
                });
                Err(refusal(DECLINED))
            }
            Answer::TimedOut => {
                audit::confirmation("timed_out");
                Err(refusal(TIMED_OUT))
            }
            Answer::Withdrawn => {
                audit::confirmation("withdrawn");
                Err(Refusal::Cancelled)
            }
            Answer::Failed => {
                audit::confirmation("unavailable");
                Err(refusal(UNAVAILABLE))
            }
        }
    }

    /// conda's `--dry-run --json` plan of the call, when there is one to show. The preview
    /// runs before anyone is asked, so it must write nothing: in the read-only sandbox
    /// where it is active, else only where the policy proves conda's dry run of this argv
    /// writes nothing (not for -n/-p targets of install/update, --file, --revision,
    /// explicit packages, plugins…).
    async fn preview(
        &self,
        ready: &Ready,
        spec: &exec::Spec,
        class: &Classification,
        argv: &[String],
        ct: &CancellationToken,
    ) -> Result<Option<serde_json::Value>, Refusal> {
        let root = ready.discovery.catalog.root.as_ref();
        let sandbox = self.preview_sandbox(ready);
        let previewable = !class.requires_exec
            && plan::dry_runnable(root, argv)
            && (sandbox.is_some()
                || policy::classify(
                    &ready.toolset.rules,
                    root,
                    &[argv, &["--dry-run".to_owned()]].concat(),
                    Origin::Generated { opaque: false },
                )
                .read_only);
        if !previewable {
            return Ok(None);
        }
        self.dry_run(spec, sandbox, ct).await.map(Some)
    }

    /// The read-only sandbox's plan for a preview, when the sandbox is active.
    fn preview_sandbox(&self, ready: &Ready) -> Option<sandbox::Plan> {
        let sandbox = self.shared.sandbox.get()?;
        if *sandbox.state() != sandbox::State::Active {
            return None;
        }
        sandbox.plan(ready.discovery.prefix.as_deref())
    }

    /// The same argv with `--dry-run --json`, under the same limits (and in the queue
    /// like any execution); its JSON document, or the failed run as the call's result.
    async fn dry_run(
        &self,
        spec: &exec::Spec,
        sandbox: Option<sandbox::Plan>,
        ct: &CancellationToken,
    ) -> Result<serde_json::Value, Refusal> {
        let mut dry = spec.clone();
        dry.args.extend(["--dry-run".into(), "--json".into()]);
        if sandbox.is_some() {
            dry.sandbox = sandbox;
        }
        let outcome = {
            let _admitted = self.admit(ct).await?;
            exec::run(&dry, ct).await.map_err(|error| {
                let why = exec::plain_os_error(&error);
                tracing::error!(%why, "conda could not be started for the dry run");
                Refusal::from(rmcp::ErrorData::internal_error(
                    "conda could not be started",
                    None,
                ))
            })?
        };
        if outcome.cancelled {
            return Err(Refusal::Cancelled);
        }
        if outcome.exit_code != Some(0) || outcome.timed_out {
            audit::outcome(&outcome);
            return Err(Refusal::Busy(execution_result(
                &outcome,
                self.restart_required(),
                true,
            )));
        }
        Ok(serde_json::from_slice(&outcome.stdout).unwrap_or(serde_json::Value::Null))
    }
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
