//! The front layer of `--http`, in front of rmcp: `/.well-known` `404`, the Origin check,
//! the token check ([`Auth`]), then for `POST /mcp` the body judged by [`frame`], the
//! in-flight ids per session and the session and session-less caps; the answers it gives
//! itself (`401`, `403`, `408`, `413`, `503`, JSON-RPC errors) and the echo rule on
//! rmcp's refusals.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::header::{
    ALLOW, CONTENT_LENGTH, CONTENT_TYPE, ORIGIN, RETRY_AFTER, WWW_AUTHENTICATE,
};
use axum::http::{HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use rmcp::model::{ClientRequest, JsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use serde_json::{Value, json};
use tokio::sync::Semaphore;

use super::PATH;
use super::auth::{Auth, Denied};
use crate::transport::frame;

/// Shared state of the front layer.
pub(super) struct Gate {
    pub(super) auth: Auth,
    /// Extra allowed origins (lower-case).
    pub(super) origins: Vec<String>,
    pub(super) max_frame: usize,
    pub(super) idle: Duration,
    pub(super) sessions: Arc<LocalSessionManager>,
    pub(super) max_sessions: usize,
    /// Held while an `initialize` is checked against the session cap and served, so
    /// concurrent ones cannot overshoot it.
    pub(super) creating: tokio::sync::Mutex<()>,
    pub(super) stateless: Arc<Semaphore>,
    /// (session id, request id as JSON) of requests in progress.
    pub(super) in_flight: Arc<Mutex<HashSet<(String, String)>>>,
}

/// A request id in flight in a session; removed when the answer's body ends or is dropped.
struct InFlight {
    key: (String, String),
    set: Arc<Mutex<HashSet<(String, String)>>>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Ok(mut set) = self.set.lock() {
            set.remove(&self.key);
        }
    }
}

fn json_response(status: StatusCode, body: &Value) -> Response {
    (
        status,
        [(CONTENT_TYPE, HeaderValue::from_static("application/json"))],
        body.to_string(),
    )
        .into_response()
}

fn unauthorized(why: &Denied) -> Response {
    if *why == Denied::Repeated {
        return invalid_request();
    }
    let description = match why {
        Denied::Missing => {
            "No bearer token: send 'Authorization: Bearer <token>' (the token ccm was started with)"
        }
        Denied::Wrong | Denied::Repeated => {
            "The bearer token is wrong: use the token ccm was started with"
        }
    };
    let mut response = json_response(
        StatusCode::UNAUTHORIZED,
        &json!({"error": "invalid_token", "error_description": description}),
    );
    response.headers_mut().insert(
        WWW_AUTHENTICATE,
        HeaderValue::from_static(r#"Bearer error="invalid_token""#),
    );
    response
}

/// A request with more than one `Authorization` header: `400` with RFC 6750 §3.1's
/// `invalid_request` (a repeated parameter), echoing neither value.
fn invalid_request() -> Response {
    let mut response = json_response(
        StatusCode::BAD_REQUEST,
        &json!({"error": "invalid_request",
                "error_description": "More than one Authorization header: send 'Authorization: Bearer <token>' once"}),
    );
    response.headers_mut().insert(
        WWW_AUTHENTICATE,
        HeaderValue::from_static(r#"Bearer error="invalid_request""#),
    );
    response
}

/// A loopback origin: `http(s)://localhost|127.0.0.1|[::1]` with any port.
fn loopback_origin(origin: &str) -> bool {
    let Some((scheme, rest)) = origin.split_once("://") else {
        return false;
    };
    if !matches!(scheme, "http" | "https") {
        return false;
    }
    let host = if let Some(v6) = rest.strip_prefix('[') {
        match v6.split_once(']') {
            Some((host, port)) if port.is_empty() || port.starts_with(':') => host,
            _ => return false,
        }
    } else {
        rest.split_once(':').map_or(rest, |(host, _)| host)
    };
    matches!(host, "localhost" | "127.0.0.1" | "::1")
}

/// A JSON-RPC error answered over HTTP: `400` without an id, else `200`.
fn rpc_answer(answer: &Value) -> Response {
    let anonymous = answer.get("id").is_some_and(Value::is_null);
    json_response(
        if anonymous {
            StatusCode::BAD_REQUEST
        } else {
            StatusCode::OK
        },
        answer,
    )
}

fn busy(id: Value, message: &str) -> Response {
    let mut response = json_response(
        StatusCode::SERVICE_UNAVAILABLE,
        &frame::error(id, -32000, message, None),
    );
    response
        .headers_mut()
        .insert(RETRY_AFTER, HeaderValue::from_static("5"));
    response
}

pub(super) async fn front(
    State(gate): State<Arc<Gate>>,
    mut request: Request,
    next: Next,
) -> Response {
    let method = request.method().clone();
    // The path only: the query may carry the token.
    let path = request.uri().path().to_owned();
    if path.starts_with("/.well-known/") {
        // No OAuth here: say so before the token check, so clients do not start a flow.
        return not_found().await;
    }
    if let Some(origin) = request.headers().get(ORIGIN) {
        let origin = origin.to_str().unwrap_or("").to_ascii_lowercase();
        if !loopback_origin(&origin) && !gate.origins.contains(&origin) {
            tracing::debug!(%method, %path, "HTTP request refused: Origin not allowed");
            return json_response(
                StatusCode::FORBIDDEN,
                &json!({"error": "origin_not_allowed",
                        "error_description": "This Origin is not allowed (see --allowed-origin)"}),
            );
        }
    }
    if let Err(why) = gate.auth.admit(&mut request) {
        tracing::debug!(%method, %path, "HTTP request refused: missing or wrong token");
        return unauthorized(&why);
    }
    tracing::debug!(%method, %path, "HTTP request");
    if path != PATH {
        return next.run(request).await;
    }
    sanitized(mcp(&gate, method, request, next).await).await
}

/// What rmcp refuses (a 4xx/5xx body) may quote request headers: the same echo rule as
/// every error (JSON-RPC errors sanitized, text cut, control characters escaped).
async fn sanitized(response: Response) -> Response {
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, 1 << 20)
        .await
        .unwrap_or_default();
    let body = match serde_json::from_slice::<Value>(&bytes) {
        Ok(mut value) => {
            frame::sanitize_json(&mut value);
            value.to_string()
        }
        Err(_) => crate::tools::schema::clip(&String::from_utf8_lossy(&bytes), 240),
    };
    parts.headers.remove(CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(body))
}

/// `/mcp`, once admitted.
async fn mcp(gate: &Gate, method: Method, request: Request, next: Next) -> Response {
    if method == Method::DELETE {
        let mut response = next.run(request).await;
        if response.status() == StatusCode::ACCEPTED {
            *response.status_mut() = StatusCode::NO_CONTENT;
            *response.body_mut() = Body::empty();
        }
        return response;
    }
    if method != Method::POST {
        return next.run(request).await;
    }
    mcp_post(gate, request, next).await
}

/// A `POST /mcp`: the body judged like a stdio line, then the session and request caps.
async fn mcp_post(gate: &Gate, request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    let bytes = match read_body(gate, &parts, body).await {
        Ok(bytes) => bytes,
        Err(refused) => return refused,
    };
    let message = match frame::inspect(&bytes) {
        frame::Verdict::Skip => {
            return rpc_answer(&frame::error(
                Value::Null,
                frame::PARSE_ERROR,
                "Parse error: the body is empty",
                None,
            ));
        }
        frame::Verdict::Answer(answer) => return rpc_answer(&answer),
        frame::Verdict::Drop => return StatusCode::ACCEPTED.into_response(),
        frame::Verdict::Forward(message) => message,
    };
    let session = parts
        .headers
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let (id, initialize) = match message.as_ref() {
        JsonRpcMessage::Request(r) => (
            Some(serde_json::to_value(&r.id).unwrap_or(Value::Null)),
            matches!(r.request, ClientRequest::InitializeRequest(_)),
        ),
        _ => (None, false),
    };
    let request = Request::from_parts(parts, Body::from(bytes));
    let Some(id) = id else {
        return next.run(request).await;
    };
    capped(gate, session, id, initialize, request, next).await
}

/// A request with an id: refused when its id is in flight in its session, when it is an
/// `initialize` beyond the session cap, or session-less beyond the session-less cap.
async fn capped(
    gate: &Gate,
    session: Option<String>,
    id: Value,
    initialize: bool,
    request: Request,
    next: Next,
) -> Response {
    match session {
        Some(session) => {
            let key = (session, id.to_string());
            let fresh = gate
                .in_flight
                .lock()
                .map(|mut set| set.insert(key.clone()))
                .unwrap_or(true);
            if !fresh {
                return rpc_answer(&frame::error(
                    id,
                    frame::INVALID_REQUEST,
                    "Invalid request: this id is already used by a request in progress",
                    None,
                ));
            }
            let guard = InFlight {
                key,
                set: Arc::clone(&gate.in_flight),
            };
            hold(next.run(request).await, guard)
        }
        None if initialize => {
            let _creating = gate.creating.lock().await;
            if gate.sessions.sessions.read().await.len() >= gate.max_sessions {
                tracing::debug!(limit = gate.max_sessions, "initialize refused: session cap");
                return busy(
                    id,
                    "Server busy: as many MCP sessions are open as the server allows \
                     (--http-max-sessions); end one (DELETE) or wait for one to expire",
                );
            }
            next.run(request).await
        }
        None => {
            let Ok(permit) = Arc::clone(&gate.stateless).try_acquire_owned() else {
                tracing::debug!("session-less request refused: cap");
                return busy(
                    id,
                    "Server busy: as many session-less requests are in progress as the server \
                     allows (--http-max-stateless); try again later",
                );
            };
            hold(next.run(request).await, permit)
        }
    }
}

/// The body of a `POST /mcp`: at most [`Gate::max_frame`] bytes (else `413`), arriving
/// within the idle timeout (else `408`).
async fn read_body(
    gate: &Gate,
    parts: &axum::http::request::Parts,
    body: Body,
) -> Result<axum::body::Bytes, Response> {
    let too_long = || {
        let answer = frame::error(
            Value::Null,
            frame::INVALID_REQUEST,
            &format!(
                "Invalid request: the message is longer than {} bytes",
                gate.max_frame
            ),
            None,
        );
        json_response(StatusCode::PAYLOAD_TOO_LARGE, &answer)
    };
    if parts
        .headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok())
        .is_some_and(|n| n > gate.max_frame)
    {
        return Err(too_long());
    }
    let bytes =
        match tokio::time::timeout(gate.idle, axum::body::to_bytes(body, gate.max_frame)).await {
            Ok(Ok(bytes)) => bytes,
            Ok(Err(_)) => return Err(too_long()),
            Err(_) => return Err(StatusCode::REQUEST_TIMEOUT.into_response()),
        };
    Ok(bytes)
}

/// Keep `guard` alive until the response's body has been sent or dropped.
pub(super) fn hold<G: Send + 'static>(response: Response, guard: G) -> Response {
    let (parts, body) = response.into_parts();
    let stream = body.into_data_stream().map(move |chunk| {
        let _ = &guard;
        chunk
    });
    Response::from_parts(parts, Body::from_stream(stream))
}

pub(super) async fn method_not_allowed() -> Response {
    (StatusCode::METHOD_NOT_ALLOWED, [(ALLOW, "POST, DELETE")]).into_response()
}

pub(super) async fn not_found() -> Response {
    StatusCode::NOT_FOUND.into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_origins() {
        for ok in [
            "http://localhost",
            "http://localhost:6274",
            "https://127.0.0.1:1",
            "http://[::1]:8080",
            "http://[::1]",
        ] {
            assert!(loopback_origin(ok), "{ok}");
        }
        for bad in [
            "null",
            "http://localhost.evil.example",
            "http://127.0.0.1.evil.example:80",
            "file://localhost",
            "http://[::1]x",
            "https://app.example",
        ] {
            assert!(!loopback_origin(bad), "{bad}");
        }
    }
}
