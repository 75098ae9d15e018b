//! Watching a run while it goes: conda's fetch records, taken out of its stdout as they
//! complete (on a terminal, where conda writes them), and the last non-empty line of its
//! stderr. The caller gets a [`Seen`]; the readers of the run feed it through a [`Tap`].

use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;

use crate::tools::records::{self, FetchRecord, Filter};

/// How many fetch records may wait for the caller; more are dropped (the caller is behind).
const RECORDS_WAITING: usize = 1024;
/// The longest stderr line kept (characters, after control characters are dropped).
pub(crate) const LINE_MAX: usize = 160;
/// The longest partial stderr line looked at (bytes); the rest of a longer line is skipped.
const PARTIAL_MAX: usize = 4096;

/// What the run's readers report to.
pub struct Watch {
    /// Give the child a pseudo-terminal as stdout, so conda's JSON reporter writes fetch
    /// records (taken out of stdout before it is captured).
    pub terminal: bool,
    records: mpsc::Sender<FetchRecord>,
    last_line: Arc<Mutex<String>>,
}

/// What the caller reads while the run goes.
pub struct Seen {
    records: mpsc::Receiver<FetchRecord>,
    last_line: Arc<Mutex<String>>,
}

/// A watch for one run and what the caller reads from it.
pub(crate) fn watch(terminal: bool) -> (Watch, Seen) {
    let (sender, receiver) = mpsc::channel(RECORDS_WAITING);
    let last_line = Arc::new(Mutex::new(String::new()));
    (
        Watch {
            terminal,
            records: sender,
            last_line: Arc::clone(&last_line),
        },
        Seen {
            records: receiver,
            last_line,
        },
    )
}

impl Seen {
    /// The next fetch record; `None` once the run's stdout is closed (pending forever when
    /// there is none: select it against something else).
    pub async fn record(&mut self) -> Option<FetchRecord> {
        self.records.recv().await
    }

    /// The last non-empty line the child wrote to stderr so far (bounded, no control
    /// characters).
    pub fn last_line(&self) -> Option<String> {
        let line = self.last_line.lock().map(|l| l.clone()).unwrap_or_default();
        (!line.is_empty()).then_some(line)
    }
}

impl Watch {
    pub(super) fn stdout_tap(&self) -> Tap {
        if self.terminal {
            Tap::Records(Filter::default(), self.records.clone())
        } else {
            Tap::None
        }
    }

    pub(super) fn stderr_tap(&self) -> Tap {
        Tap::Lines(Vec::new(), Arc::clone(&self.last_line))
    }
}

/// What a reader does with each chunk besides keeping it.
pub(super) enum Tap {
    None,
    /// Take fetch records out, send them on.
    Records(Filter, mpsc::Sender<FetchRecord>),
    /// Note the last non-empty line (the partial line so far, the shared last line).
    Lines(Vec<u8>, Arc<Mutex<String>>),
}

impl Tap {
    /// Pass `chunk` on: what is to be kept goes to `out`.
    pub(super) fn pass(&mut self, chunk: &[u8], out: &mut Vec<u8>) {
        match self {
            Tap::None => out.extend_from_slice(chunk),
            Tap::Records(filter, sender) => filter.push(chunk, out, &mut |record| {
                let _ = sender.try_send(record);
            }),
            Tap::Lines(partial, last) => {
                out.extend_from_slice(chunk);
                for piece in chunk.split_inclusive(|b| *b == b'\n' || *b == b'\r') {
                    let ended = piece.ends_with(b"\n") || piece.ends_with(b"\r");
                    let room = PARTIAL_MAX.saturating_sub(partial.len());
                    partial.extend_from_slice(&piece[..piece.len().min(room)]);
                    if ended {
                        note_line(partial, last);
                        partial.clear();
                    }
                }
            }
        }
    }

    /// The end of the stream.
    pub(super) fn finish(&mut self, out: &mut Vec<u8>) {
        match self {
            Tap::None => {}
            Tap::Records(filter, _) => filter.finish(out),
            Tap::Lines(partial, last) => {
                note_line(partial, last);
                partial.clear();
            }
        }
    }
}

fn note_line(line: &[u8], last: &Mutex<String>) {
    let text = records::clean(&String::from_utf8_lossy(line), LINE_MAX);
    if !text.is_empty()
        && let Ok(mut last) = last.lock()
    {
        *last = text;
    }
}
