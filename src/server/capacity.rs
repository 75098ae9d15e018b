//! Capacity: one execution at a time server-wide behind a bounded queue (`no_capacity`),
//! and at most `--max-session-calls` executions running or waiting per session
//! (`session_busy`). Either refusal is an `isError` result with the code; nothing runs.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use rmcp::model::{CallToolResult, ContentBlock};
use tokio_util::sync::CancellationToken;

use super::refuse::Refusal;
use crate::host::exec::{self, Executor};

/// One admitted execution of a session; dropping it frees the session's place.
pub(super) struct SessionCall(Arc<AtomicUsize>);

impl Drop for SessionCall {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One session's capacity: its executions running or waiting (at most `limit`), and
/// the server's queue, which every session shares.
pub(super) struct Capacity {
    session_calls: Arc<AtomicUsize>,
    executor: Arc<Executor>,
    limit: usize,
}

impl Capacity {
    /// A new session's capacity in the server's queue.
    pub(super) fn new(executor: &Arc<Executor>, limit: usize) -> Capacity {
        Capacity {
            session_calls: Arc::default(),
            executor: Arc::clone(executor),
            limit,
        }
    }

    /// Wait for this execution's turn: refused at once (nothing runs) when the session
    /// already has `--max-session-calls` executions running or waiting, or when the
    /// server's queue is full.
    pub(super) async fn admit(
        &self,
        ct: &CancellationToken,
    ) -> Result<(SessionCall, exec::Slot), Refusal> {
        let limit = self.limit;
        let admitted = self
            .session_calls
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < limit).then_some(n + 1)
            });
        if admitted.is_err() {
            tracing::debug!(limit, "execution refused: session_busy");
            return Err(Refusal::Busy(capacity_result(
                "session_busy",
                "This session already has as many conda executions running or waiting as the \
                 server allows (--max-session-calls); wait for one to finish.",
            )));
        }
        let call = SessionCall(Arc::clone(&self.session_calls));
        let slot = tokio::select! {
            slot = self.executor.acquire() => slot,
            _ = ct.cancelled() => return Err(Refusal::Cancelled),
        };
        match slot {
            Ok(slot) => Ok((call, slot)),
            Err(exec::QueueFull) => {
                tracing::debug!("execution refused: no_capacity");
                Err(Refusal::Busy(capacity_result(
                    "no_capacity",
                    "The server's execution queue is full; try again later.",
                )))
            }
        }
    }
}

fn capacity_result(code: &str, message: &str) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(format!("{code}: {message}"))])
}
