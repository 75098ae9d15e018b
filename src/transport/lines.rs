//! The stdio framing: newline-delimited JSON-RPC in front of rmcp's service loop.
//!
//! rmcp's own stdio transport drops frames it cannot parse; this one reads bounded lines
//! itself and judges each with [`frame::inspect`]: well-formed messages go to rmcp, every
//! other frame with an id is answered here. A line longer than the limit is answered with
//! `-32600` (`id: null`) and skipped to its end; the connection keeps working.
//!
//! Request ids: a request whose id is already in flight on this connection is refused
//! with `-32600` and that id. Every forwarded request gets a fresh internal id (restored on
//! its response), so rmcp never sees two requests with one id, and a cancelled request's
//! id may be reused at once: the late end of the cancelled call cannot cancel or answer
//! the new one.
//!
//! Once the lifecycle has started, another `initialize` is refused with `-32600`.
//! Before the lifecycle has started (the first successful answer to a request other than
//! `ping` or `server/discover`), notifications and responses from the client are dropped:
//! rmcp ends the session on anything but a request at that point.
//!
//! Writes go through one writer task, so an answer is never cut by a cancelled read, and
//! every outgoing error passes [`frame::sanitize`] (and carries `id: null` when it has no
//! id).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rmcp::RoleServer;
use rmcp::model::{
    ClientJsonRpcMessage, ClientNotification, ClientRequest, JsonRpcMessage, RequestId,
    ServerJsonRpcMessage,
};
use rmcp::transport::Transport;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use super::frame::{self, Verdict};

/// How many frames may wait for the writer.
const WRITE_QUEUE: usize = 64;

#[derive(Default)]
struct Ids {
    next: i64,
    /// Client id → internal id, for requests in flight.
    by_client: HashMap<RequestId, RequestId>,
    /// Internal id → (client id, whether a success answer starts the lifecycle).
    by_internal: HashMap<RequestId, (RequestId, bool)>,
    started: bool,
}

/// A [`Transport`] over any byte streams (stdin/stdout in `ccm`).
pub(crate) struct Lines<R> {
    read: BufReader<R>,
    line: Vec<u8>,
    discarding: bool,
    max_line: usize,
    pending: Option<Vec<u8>>,
    out: mpsc::Sender<Vec<u8>>,
    ids: Arc<Mutex<Ids>>,
}

impl<R: AsyncRead + Unpin + Send> Lines<R> {
    /// Read frames from `read`, write answers to `write` (from a task of its own).
    pub(crate) fn new<W: AsyncWrite + Unpin + Send + 'static>(
        read: R,
        write: W,
        max_line: usize,
    ) -> Self {
        let (out, mut queue) = mpsc::channel::<Vec<u8>>(WRITE_QUEUE);
        tokio::spawn(async move {
            let mut write = write;
            while let Some(frame) = queue.recv().await {
                if write.write_all(&frame).await.is_err() || write.flush().await.is_err() {
                    tracing::debug!("stdout closed; dropping answers");
                    break;
                }
            }
        });
        Lines {
            read: BufReader::new(read),
            line: Vec::new(),
            discarding: false,
            max_line,
            pending: None,
            out,
            ids: Arc::new(Mutex::new(Ids::default())),
        }
    }

    /// One line into `self.line`; `Ok(false)` at EOF, `Err(())` for an oversized line
    /// (dropped; its tail is skipped). Cancel-safe: state lives in `self`.
    async fn read_line(&mut self) -> std::io::Result<Result<bool, ()>> {
        loop {
            let available = self.read.fill_buf().await?;
            if available.is_empty() {
                return Ok(Ok(false));
            }
            let newline = available.iter().position(|b| *b == b'\n');
            let take = newline.map_or(available.len(), |n| n + 1);
            if self.discarding {
                self.read.consume(take);
                if newline.is_some() {
                    self.discarding = false;
                }
                continue;
            }
            if self.line.len() + take > self.max_line.saturating_add(1) {
                self.line.clear();
                self.discarding = newline.is_none();
                self.read.consume(take);
                return Ok(Err(()));
            }
            self.line.extend_from_slice(&available[..take]);
            self.read.consume(take);
            if newline.is_some() {
                return Ok(Ok(true));
            }
        }
    }

    fn queue_answer(&mut self, answer: &Value) {
        let mut bytes = serde_json::to_vec(answer).expect("JSON values serialize");
        bytes.push(b'\n');
        self.pending = Some(bytes);
    }

    /// Map a forwarded message's ids; `None` when it is refused (answer queued) or dropped.
    fn admit(&mut self, message: ClientJsonRpcMessage) -> Option<ClientJsonRpcMessage> {
        let mut ids = self.ids.lock().unwrap_or_else(|e| e.into_inner());
        match message {
            JsonRpcMessage::Request(mut request) => {
                let refusal = if ids.by_client.contains_key(&request.id) {
                    Some("Invalid request: this id is already used by a request in progress")
                } else if ids.started
                    && matches!(request.request, ClientRequest::InitializeRequest(_))
                {
                    Some("Invalid request: the session is already initialized")
                } else {
                    None
                };
                if let Some(message) = refusal {
                    let id = serde_json::to_value(&request.id).unwrap_or(Value::Null);
                    drop(ids);
                    self.queue_answer(&frame::error(id, frame::INVALID_REQUEST, message, None));
                    return None;
                }
                let starts = !matches!(
                    request.request,
                    ClientRequest::PingRequest(_) | ClientRequest::DiscoverRequest(_)
                );
                ids.next += 1;
                let internal = RequestId::Number(ids.next);
                let client = std::mem::replace(&mut request.id, internal.clone());
                ids.by_client.insert(client.clone(), internal.clone());
                ids.by_internal.insert(internal, (client, starts));
                Some(JsonRpcMessage::Request(request))
            }
            JsonRpcMessage::Notification(mut notification) => {
                if !ids.started {
                    tracing::debug!("notification before the lifecycle started: dropped");
                    return None;
                }
                if let ClientNotification::CancelledNotification(cancelled) =
                    &mut notification.notification
                    && let Some(client) = cancelled.params.request_id.take()
                {
                    // The id is free again: the late end of the call is dropped by rmcp
                    // (and by `send`, which no longer knows its internal id).
                    cancelled.params.request_id = match ids.by_client.remove(&client) {
                        Some(internal) => {
                            ids.by_internal.remove(&internal);
                            Some(internal)
                        }
                        None => Some(client),
                    };
                }
                Some(JsonRpcMessage::Notification(notification))
            }
            other => {
                if !ids.started {
                    return None;
                }
                Some(other)
            }
        }
    }
}

/// The bytes of an outgoing message, ids restored; `None`: drop it (the answer of a
/// cancelled request).
fn outgoing(ids: &Mutex<Ids>, mut message: ServerJsonRpcMessage) -> Option<Vec<u8>> {
    let mut ids = ids.lock().unwrap_or_else(|e| e.into_inner());
    let internal = match &message {
        JsonRpcMessage::Response(response) => Some(response.id.clone()),
        JsonRpcMessage::Error(error) => error.id.clone(),
        _ => None,
    };
    if let Some(internal) = internal {
        let (client, starts) = ids.by_internal.remove(&internal)?;
        ids.by_client.remove(&client);
        match &mut message {
            JsonRpcMessage::Response(response) => {
                response.id = client;
                if starts {
                    ids.started = true;
                }
            }
            JsonRpcMessage::Error(error) => error.id = Some(client),
            _ => {}
        }
    }
    drop(ids);
    if let JsonRpcMessage::Error(error) = &mut message {
        frame::sanitize(&mut error.error);
    }
    // Only an error may need its id added; anything else (a tools/list result is hundreds
    // of kilobytes) is written straight to bytes, without an intermediate JSON tree.
    let mut bytes = match message {
        JsonRpcMessage::Error(_) => {
            let mut value = serde_json::to_value(&message).ok()?;
            if let Some(object) = value.as_object_mut() {
                object.entry("id").or_insert(Value::Null);
            }
            serde_json::to_vec(&value).ok()?
        }
        _ => serde_json::to_vec(&message).ok()?,
    };
    bytes.push(b'\n');
    Some(bytes)
}

impl<R: AsyncRead + Unpin + Send + 'static> Transport<RoleServer> for Lines<R> {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let out = self.out.clone();
        let bytes = outgoing(&self.ids, item);
        async move {
            match bytes {
                None => Ok(()),
                Some(bytes) => out
                    .send(bytes)
                    .await
                    .map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "closed")),
            }
        }
    }

    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        loop {
            if let Some(answer) = self.pending.take() {
                match self.out.reserve().await {
                    Ok(permit) => permit.send(answer),
                    Err(_) => return None,
                }
            }
            match self.read_line().await {
                Ok(Ok(true)) => {}
                Ok(Ok(false)) => return None,
                Ok(Err(())) => {
                    tracing::debug!(limit = self.max_line, "line over the limit refused");
                    let message = format!(
                        "Invalid request: the message is longer than {} bytes",
                        self.max_line
                    );
                    self.queue_answer(&frame::error(
                        Value::Null,
                        frame::INVALID_REQUEST,
                        &message,
                        None,
                    ));
                    continue;
                }
                Err(error) => {
                    tracing::debug!(%error, "reading stdin failed");
                    return None;
                }
            }
            let line = std::mem::take(&mut self.line);
            let body = line.strip_suffix(b"\n").unwrap_or(&line);
            let body = body.strip_suffix(b"\r").unwrap_or(body);
            let verdict = frame::inspect(body);
            // Keep the buffer's capacity for the next line.
            self.line = line;
            self.line.clear();
            match verdict {
                Verdict::Skip | Verdict::Drop => {}
                Verdict::Answer(answer) => self.queue_answer(&answer),
                Verdict::Forward(message) => {
                    if let Some(message) = self.admit(*message) {
                        return Some(message);
                    }
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
}
