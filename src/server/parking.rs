//! Plans waiting for a session-less client's confirmation (`--confirm-writes` under the
//! 2026-07-28 revision, which has no server-to-client requests): each parked under a
//! random, single-use reference (the input-required result's `requestState`) until
//! `--confirm-timeout`; at most [`MAX_PARKED`] at once (the oldest goes first). What a
//! retry's answer does is [`super::confirm`]'s.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rmcp::model::{ElicitRequest, InputRequest, InputRequiredResult};

use super::judged::Judged;

/// Most plans waiting for an answer at once.
pub(super) const MAX_PARKED: usize = 256;
/// The key of the question in `inputRequests` / `inputResponses`.
pub(super) const QUESTION: &str = "confirm";

/// One plan waiting for the person's answer: the judged call, which runs (bound to the
/// plan that was shown) when the person accepts.
pub(super) struct Parked {
    pub(super) call: Judged,
    expires: Instant,
}

/// The parked plans, by reference.
#[derive(Default)]
pub(super) struct Parking(Mutex<HashMap<String, Parked>>);

impl Parking {
    /// Park a plan for at most `wait`; the input-required result that asks `question`
    /// and names it.
    pub(super) fn park(
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
    pub(super) fn take(&self, reference: &str) -> Option<Parked> {
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
