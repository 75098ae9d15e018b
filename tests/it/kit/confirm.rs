//! The steps of a `--confirm-writes` exchange seen from the client: waiting for a
//! message of one method, cancelling a call while its question is open.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::mcp::Session;

/// The next message of `method` the server sends (within 60 s; panics with the server's
/// stderr otherwise), skipping any other.
pub(crate) fn next_with(session: &mut Session, method: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if let Some(message) = session.next(Duration::from_secs(1))
            && message["method"] == method
        {
            return message;
        }
    }
    panic!("no {method}: {}", session.stderr.lock().unwrap());
}

/// Cancel `call` while its confirmation `question` is open, and assert that the server
/// withdraws the question (a `notifications/cancelled` naming the question's id).
pub(crate) fn cancel_and_see_withdrawn(session: &mut Session, call: i64, question: &Value) {
    session.notify(
        "notifications/cancelled",
        json!({"requestId": call, "reason": "test"}),
    );
    let withdrawn = next_with(session, "notifications/cancelled");
    assert_eq!(
        withdrawn["params"]["requestId"], question["id"],
        "{withdrawn}"
    );
}
