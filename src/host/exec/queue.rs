//! The execution queue: conda executions run one at a time, in FIFO order, behind a
//! bounded number of waiting calls.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Serializes conda executions (FIFO) with a bounded queue.
#[derive(Debug)]
pub struct Executor {
    gate: Arc<tokio::sync::Mutex<()>>,
    /// Calls admitted: running or waiting.
    admitted: AtomicUsize,
    /// Most calls that may wait behind the running one.
    max_queue: usize,
}

/// Held while a call may run; dropping it admits the next one.
pub struct Slot {
    _guard: tokio::sync::OwnedMutexGuard<()>,
    _admission: Admission,
}

struct Admission(Arc<Executor>);

impl Drop for Admission {
    fn drop(&mut self) {
        self.0.admitted.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The queue is full.
#[derive(Debug, PartialEq, Eq)]
pub struct QueueFull;

impl Executor {
    pub fn new(max_queue: usize) -> Arc<Self> {
        Arc::new(Executor {
            gate: Arc::new(tokio::sync::Mutex::new(())),
            admitted: AtomicUsize::new(0),
            max_queue,
        })
    }

    /// Wait for this call's turn (FIFO). Refused at once when `max_queue` calls are
    /// already waiting behind a running one.
    pub async fn acquire(self: &Arc<Self>) -> Result<Slot, QueueFull> {
        let limit = self.max_queue.saturating_add(1);
        let admitted = self
            .admitted
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < limit).then_some(n + 1)
            });
        if admitted.is_err() {
            return Err(QueueFull);
        }
        let admission = Admission(Arc::clone(self));
        let guard = Arc::clone(&self.gate).lock_owned().await;
        Ok(Slot {
            _guard: guard,
            _admission: admission,
        })
    }

    /// Calls running or waiting right now.
    pub fn load(&self) -> usize {
        self.admitted.load(Ordering::SeqCst)
    }
}
