//! The session-less revision (2026-07-28) has no server-to-client requests: the question
//! goes back as the revision's input-required result, and the plan stays on the server,
//! parked under a random, single-use reference (the result's `requestState`). The retry
//! is judged by that reference alone: the plan it names runs (exactly the argv that was
//! planned, bound to the plan that was shown), whatever the retry's own arguments say, and
//! the reference is gone once taken (with its binding's directory). A reference expires
//! after `--confirm-timeout`; at most [`MAX_PARKED`](super::super::parking::MAX_PARKED) plans wait at once (the oldest goes
//! first): the [`Parking`] keeps them.

use rmcp::ErrorData;
use rmcp::model::{ElicitResult, ElicitationAction, InputResponses};

use super::super::judged::Judged;
use super::super::parking::{Parking, QUESTION};
use super::super::refuse::Refusal;
use super::super::trail;
use super::{DECLINED, refusal};

/// The answer to a retry whose reference is unknown, used or expired (never echoes it).
pub(super) const UNKNOWN_REFERENCE: &str =
    "The confirmation reference (requestState) is unknown, used or expired";

/// The retry of an input-required result: the parked plan, to run, when the person
/// accepted; nothing runs otherwise.
pub(crate) fn resume(
    parking: &Parking,
    reference: &str,
    responses: Option<&InputResponses>,
    audit: &trail::Record,
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
