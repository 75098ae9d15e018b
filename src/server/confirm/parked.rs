//! The session-less revision (2026-07-28) has no server-to-client requests: the question
//! goes back as the revision's input-required result, and the plan stays on the server,
//! parked under a random, single-use reference (the result's `requestState`). The retry
//! is judged by that reference alone: the plan it names runs (exactly the argv that was
//! planned, bound to the plan that was shown), whatever the retry's own arguments say, and
//! the reference is gone once taken (with its binding's directory). A reference expires
//! after `--confirm-timeout`; at most [`MAX_PARKED`] plans wait at once (the oldest goes
//! first).

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rmcp::ErrorData;
use rmcp::model::{
    ElicitRequest, ElicitResult, ElicitationAction, InputRequest, InputRequiredResult,
    InputResponses,
};

use super::super::judged::Judged;
use super::super::{Refusal, audit};
use super::{DECLINED, refusal};

/// Most plans waiting for an answer at once.
pub const MAX_PARKED: usize = 256;
/// The key of the question in `inputRequests` / `inputResponses`.
pub const QUESTION: &str = "confirm";
/// The answer to a retry whose reference is unknown, used or expired (never echoes it).
pub const UNKNOWN_REFERENCE: &str =
    "The confirmation reference (requestState) is unknown, used or expired";

/// One plan waiting for the person's answer: the judged call, which runs (bound to the
/// plan that was shown) when the person accepts.
struct Parked {
    call: Judged,
    expires: Instant,
}

/// The parked plans, by reference.
#[derive(Default)]
pub struct Parking(Mutex<HashMap<String, Parked>>);

impl Parking {
    /// Park a plan for at most `wait`; the input-required result that asks `question`
    /// and names it.
    pub fn park(
        &self,
        call: Judged,
        wait: Duration,
        question: ElicitRequest,
    ) -> InputRequiredResult {
        let reference = reference();
        let parked = Parked {
            call,
            expires: Instant::now() + wait,
        };
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

/// The retry of an input-required result: the parked plan, to run, when the person
/// accepted; nothing runs otherwise.
pub fn resume(
    parking: &Parking,
    reference: &str,
    responses: Option<&InputResponses>,
    audit: &audit::Record,
    root: Option<&crate::model::catalog::Command>,
) -> Result<Judged, Refusal> {
    let Some(parked) = parking.take(reference) else {
        return Err(ErrorData::invalid_params(UNKNOWN_REFERENCE, None).into());
    };
    let call = parked.call;
    audit.reached(&call.tool, &call.argv, root);
    let answer = responses
        .and_then(|r| r.get(QUESTION))
        .and_then(|v| serde_json::from_value::<ElicitResult>(v.clone()).ok());
    match answer.map(|a| a.action) {
        Some(ElicitationAction::Accept) => {
            audit.confirmation("accepted");
            Ok(call)
        }
        Some(ElicitationAction::Cancel) => {
            audit.confirmation("cancelled");
            Err(refusal(DECLINED))
        }
        _ => {
            audit.confirmation("declined");
            Err(refusal(DECLINED))
        }
    }
}
