//! The session-less revision (2026-07-28) has no server-to-client requests: the question
//! goes back as the revision's input-required result, and the plan stays on the server,
//! parked under a random, single-use reference (the result's `requestState`). The retry
//! is judged by that reference alone: the plan it names runs (exactly the argv that was
//! planned, bound to the plan that was shown), whatever the retry's own arguments say, and
//! the reference is gone once taken (with its binding's directory). A reference expires
//! after `--confirm-timeout`; at most [`MAX_PARKED`] plans wait at once (the oldest goes
//! first).

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::ErrorData;
use rmcp::model::{
    CallToolResult, ElicitRequest, ElicitResult, ElicitationAction, InputRequest,
    InputRequiredResult, InputResponses,
};
use tokio_util::sync::CancellationToken;

use super::super::roots::Caller;
use super::super::{Ready, Refusal, Server, audit};
use super::{ASKER, Asker, DECLINED, refusal};
use crate::host::bind::Binding;
use crate::host::exec;
use crate::tools::policy::Classification;

/// Most plans waiting for an answer at once.
pub const MAX_PARKED: usize = 256;
/// The key of the question in `inputRequests` / `inputResponses`.
pub const QUESTION: &str = "confirm";
/// The answer to a retry whose reference is unknown, used or expired (never echoes it).
pub const UNKNOWN_REFERENCE: &str =
    "The confirmation reference (requestState) is unknown, used or expired";

/// One plan waiting for the person's answer.
pub struct Parked {
    /// The canonical tool of the call that was planned (for the audit log: a retry may
    /// name another tool, the plan's runs).
    tool: Option<String>,
    argv: Vec<String>,
    cwd: Option<PathBuf>,
    stdin: Option<Vec<u8>>,
    timeout: Duration,
    class: Classification,
    expires: Instant,
    binding: Option<Arc<Binding>>,
}

impl Parked {
    pub fn new(
        argv: Vec<String>,
        spec: &exec::Spec,
        class: &Classification,
        wait: Duration,
        binding: Option<Arc<Binding>>,
    ) -> Parked {
        Parked {
            tool: audit::current_tool(),
            argv,
            cwd: spec.cwd.clone(),
            stdin: spec.stdin.clone(),
            timeout: spec.timeout,
            class: *class,
            expires: Instant::now() + wait,
            binding,
        }
    }
}

/// The parked plans, by reference.
#[derive(Default)]
pub struct Parking(Mutex<HashMap<String, Parked>>);

impl Parking {
    /// Park a plan; the input-required result that asks `question` and names it.
    pub fn park(&self, parked: Parked, question: ElicitRequest) -> InputRequiredResult {
        let reference = reference();
        if let Ok(mut plans) = self.0.lock() {
            let now = Instant::now();
            plans.retain(|_, p| p.expires > now);
            while plans.len() >= MAX_PARKED {
                let Some(oldest) = plans
                    .iter()
                    .min_by_key(|(_, p)| p.expires)
                    .map(|(k, _)| k.clone())
                else {
                    break;
                };
                plans.remove(&oldest);
            }
            plans.insert(reference.clone(), parked);
        }
        let requests = BTreeMap::from([(QUESTION.to_owned(), InputRequest::Elicitation(question))]);
        InputRequiredResult::new(Some(requests), Some(reference))
    }

    /// Take (and so use up) the plan a reference names, unless it expired.
    fn take(&self, reference: &str) -> Option<Parked> {
        let parked = self.0.lock().ok()?.remove(reference)?;
        (parked.expires > Instant::now()).then_some(parked)
    }
}

/// 32 random bytes, hex.
fn reference() -> String {
    let mut bytes = [0u8; 32];
    // Without randomness no reference is issued that could be guessed: the plan is
    // parked under a value no retry can name.
    if getrandom::fill(&mut bytes).is_err() {
        return "unavailable".to_owned();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Server {
    /// The retry of an input-required result: the parked plan runs when the person
    /// accepted; nothing runs otherwise.
    pub(in crate::server) async fn resume(
        &self,
        ready: &Ready,
        canonical: &str,
        reference: &str,
        responses: Option<&InputResponses>,
        caller: &Caller,
        ct: CancellationToken,
    ) -> Result<CallToolResult, Refusal> {
        let Some(parked) = self.shared.parked.take(reference) else {
            return Err(ErrorData::invalid_params(UNKNOWN_REFERENCE, None).into());
        };
        let root = ready.discovery.catalog.root.as_ref();
        audit::reached(
            parked.tool.as_deref().unwrap_or(canonical),
            &parked.argv,
            root,
        );
        let answer = responses
            .and_then(|r| r.get(QUESTION))
            .and_then(|v| serde_json::from_value::<ElicitResult>(v.clone()).ok());
        match answer.map(|a| a.action) {
            Some(ElicitationAction::Accept) => {
                audit::confirmation("accepted");
                let asker = Asker {
                    peer: None,
                    input_required: false,
                    confirmed: true,
                    binding: parked.binding,
                };
                let run = self.execute(
                    ready,
                    parked.argv,
                    parked.cwd,
                    parked.stdin,
                    parked.timeout,
                    parked.class,
                    caller,
                    ct,
                );
                ASKER.scope(asker, run).await
            }
            Some(ElicitationAction::Cancel) => {
                audit::confirmation("cancelled");
                Err(refusal(DECLINED))
            }
            _ => {
                audit::confirmation("declined");
                Err(refusal(DECLINED))
            }
        }
    }
}
