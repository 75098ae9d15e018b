//! MCP over Streamable HTTP (`ccm --http`): `POST /mcp`, behind a bearer-token check.
//!
//! Connections are served here, not by `axum::serve`: at most `--http-max-connections`
//! are open (more are closed at once, before any byte is read), each must send a
//! request's headers within `--http-header-timeout` of opening or of its previous response
//! (so idle keep-alive connections close then too), one with no request being answered
//! that moves no byte either way for `--http-idle-timeout` is closed, and a request body
//! must arrive within that time (`408`).
//!
//! Every request then passes, in order:
//! - `/.well-known/…` is `404` before anything else, so clients do not start an OAuth
//!   flow.
//! - An `Origin` header, when present, must be a loopback origin
//!   (`http(s)://localhost|127.0.0.1|[::1][:port]`) or one given with `--allowed-origin`;
//!   else `403` (against browsers driven by other sites).
//! - The token, from `Authorization: Bearer <token>` or the URL query parameter named by
//!   `CCM_MCP_TOKEN_QUERY_PARAM` (default `token`), compared in constant time (SHA-256
//!   digests of both sides, compared with `subtle`). Without a valid token: `401` with
//!   `WWW-Authenticate: Bearer error="invalid_token"` and a JSON body saying whether the
//!   token was missing or wrong, whatever the method or path; nothing reaches the MCP
//!   layer. Accepted requests lose the `Authorization` header and the token parameter,
//!   and logs name only the method and path.
//! - A `POST /mcp` body is read (at most [`Server::max_frame`] bytes, else `413`) and
//!   judged like a stdio line ([`frame::inspect`]): what is not a well-formed message is
//!   answered here with the JSON-RPC error (`400` when it has no id, `200` with its id).
//!   A request whose id is already in flight in the same `Mcp-Session-Id` is `-32600`. An
//!   `initialize` beyond `--http-max-sessions` open sessions, and a session-less request
//!   beyond `--http-max-stateless` in progress, are `503` with a JSON-RPC error (`-32000`)
//!   and the id. (`ccm` has one token, so these per-token caps are server-wide.)
//!
//! Behind that, rmcp's Streamable HTTP service in its session mode: each `initialize`
//! creates a session and a handler of its own ([`Server::for_session`]), so
//! `--max-session-calls` counts per `Mcp-Session-Id`; a session with no traffic for
//! `--http-session-idle` ends. Requests of the session-less 2026-07-28 lifecycle are
//! served one handler per request. `DELETE /mcp` with an `Mcp-Session-Id` ends that
//! session (`204`). Any other method on `/mcp` is `405` with `Allow: POST, DELETE` (the
//! server offers no GET event stream); other paths are `404`. rmcp also refuses a `Host`
//! header outside loopback names and `--allowed-host` (`403`, against DNS rebinding).
//!
//! Once listening, `ccm: listening on http://ADDR/mcp` goes to stderr (with the actual port
//! when ADDR's port was 0). Without a configured token a random one is generated and
//! printed once, on the next line.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::header::{
    ALLOW, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, ORIGIN, RETRY_AFTER, WWW_AUTHENTICATE,
};
use axum::http::{HeaderValue, Method, StatusCode, Uri};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::post_service;
use futures::StreamExt;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use rmcp::model::{ClientRequest, JsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::{Failure, frame};
use crate::config::{HttpConfig, HttpLimits, Secret};
use crate::server::Server;

/// The MCP endpoint.
pub const PATH: &str = "/mcp";
/// Host names always accepted (rmcp's DNS-rebinding check).
const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];
/// The longest gap between keep-alive comments of an event stream.
const SSE_KEEP_ALIVE: Duration = Duration::from_secs(15);
/// How long open connections get to finish after a shutdown signal.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// The token check.
struct Auth {
    digest: [u8; 32],
    query_param: String,
}

impl Auth {
    fn new(token: &Secret, query_param: &str) -> Self {
        Auth {
            digest: Sha256::digest(token.expose().as_bytes()).into(),
            query_param: query_param.to_owned(),
        }
    }

    /// Constant-time comparison of a presented token with the configured one.
    fn matches(&self, presented: &[u8]) -> bool {
        let digest: [u8; 32] = Sha256::digest(presented).into();
        digest.ct_eq(&self.digest).into()
    }

    /// Whether the request carries the token (header or query parameter), else whether
    /// one was presented at all. Either way the credentials are removed from the request.
    fn admit(&self, request: &mut Request) -> Result<(), Denied> {
        let mut ok = false;
        let mut presented = false;
        for value in request.headers().get_all(AUTHORIZATION) {
            presented = true;
            if let Some(token) = bearer(value) {
                ok |= self.matches(token);
            }
        }
        request.headers_mut().remove(AUTHORIZATION);
        if let Some(query) = request.uri().query() {
            let (token, rest) = take_param(query, &self.query_param);
            if let Some(token) = token {
                presented = true;
                ok |= self.matches(&token);
                let uri = request.uri();
                let path_and_query = match rest {
                    Some(rest) => format!("{}?{rest}", uri.path()),
                    None => uri.path().to_owned(),
                };
                let mut parts = uri.clone().into_parts();
                parts.path_and_query = path_and_query.parse().ok();
                if let Ok(stripped) = Uri::from_parts(parts) {
                    *request.uri_mut() = stripped;
                }
            }
        }
        match (ok, presented) {
            (true, _) => Ok(()),
            (false, true) => Err(Denied::Wrong),
            (false, false) => Err(Denied::Missing),
        }
    }
}

/// The token of an `Authorization: Bearer <token>` value (scheme case-insensitive).
fn bearer(value: &HeaderValue) -> Option<&[u8]> {
    let bytes = value.as_bytes();
    let (scheme, rest) = bytes.split_at(bytes.iter().position(|b| *b == b' ')?);
    if !scheme.eq_ignore_ascii_case(b"bearer") {
        return None;
    }
    let token = rest.trim_ascii();
    (!token.is_empty()).then_some(token)
}

/// The percent-decoded value of the first `name=` parameter of a query, and the query
/// without every `name` parameter (`None` when nothing is left). `+` is kept as is: tokens
/// have no spaces, and base64 tokens pasted into a URL keep their `+`.
fn take_param(query: &str, name: &str) -> (Option<Vec<u8>>, Option<String>) {
    let mut value = None;
    let mut rest = Vec::new();
    for pair in query.split('&') {
        let (key, raw) = pair.split_once('=').unwrap_or((pair, ""));
        if percent_decode(key).as_deref() == Some(name.as_bytes()) {
            if value.is_none() {
                value = Some(percent_decode(raw).unwrap_or_default());
            }
        } else if !pair.is_empty() {
            rest.push(pair);
        }
    }
    let rest = (!rest.is_empty()).then(|| rest.join("&"));
    (value, rest)
}

/// RFC 3986 percent-decoding; `None` for a malformed escape.
fn percent_decode(text: &str) -> Option<Vec<u8>> {
    let escapes_ok = text
        .split('%')
        .skip(1)
        .all(|after| after.len() >= 2 && after.as_bytes()[..2].iter().all(u8::is_ascii_hexdigit));
    escapes_ok.then(|| percent_encoding::percent_decode_str(text).collect())
}

/// A fresh random token: 32 bytes from the operating system, as 64 hex digits.
fn generate_token() -> std::io::Result<Secret> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(std::io::Error::other)?;
    Ok(Secret::new(
        bytes.iter().map(|b| format!("{b:02x}")).collect(),
    ))
}

/// Shared state of the front layer.
struct Gate {
    auth: Auth,
    /// Extra allowed origins (lower-case).
    origins: Vec<String>,
    max_frame: usize,
    idle: Duration,
    sessions: Arc<LocalSessionManager>,
    max_sessions: usize,
    /// Held while an `initialize` is checked against the session cap and served, so
    /// concurrent ones cannot overshoot it.
    creating: tokio::sync::Mutex<()>,
    stateless: Arc<Semaphore>,
    /// (session id, request id as JSON) of requests in progress.
    in_flight: Arc<Mutex<HashSet<(String, String)>>>,
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

/// Why a request has no valid token.
#[derive(Debug, PartialEq, Eq)]
enum Denied {
    Missing,
    Wrong,
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
    let description = match why {
        Denied::Missing => {
            "No bearer token: send 'Authorization: Bearer <token>' (the token ccm was started with)"
        }
        Denied::Wrong => "The bearer token is wrong: use the token ccm was started with",
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

async fn front(State(gate): State<Arc<Gate>>, mut request: Request, next: Next) -> Response {
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
        return too_long();
    }
    let bytes =
        match tokio::time::timeout(gate.idle, axum::body::to_bytes(body, gate.max_frame)).await {
            Ok(Ok(bytes)) => bytes,
            Ok(Err(_)) => return too_long(),
            Err(_) => return StatusCode::REQUEST_TIMEOUT.into_response(),
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

/// Keep `guard` alive until the response's body has been sent or dropped.
fn hold<G: Send + 'static>(response: Response, guard: G) -> Response {
    let (parts, body) = response.into_parts();
    let stream = body.into_data_stream().map(move |chunk| {
        let _ = &guard;
        chunk
    });
    Response::from_parts(parts, Body::from_stream(stream))
}

async fn method_not_allowed() -> Response {
    (StatusCode::METHOD_NOT_ALLOWED, [(ALLOW, "POST, DELETE")]).into_response()
}

async fn not_found() -> Response {
    StatusCode::NOT_FOUND.into_response()
}

/// The application: the front layer, then the MCP endpoint.
fn app(server: &Server, config: &HttpConfig, token: &Secret, cancel: CancellationToken) -> Router {
    let max_frame = server.max_frame();
    let mcp_config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(
            LOOPBACK_HOSTS
                .iter()
                .map(|h| (*h).to_owned())
                .chain(config.allowed_hosts.iter().cloned()),
        )
        .with_max_request_body_bytes(max_frame)
        // Event streams carry a keep-alive comment well within the idle timeout, so a long
        // conda run keeps its connection.
        .with_sse_keep_alive(Some(SSE_KEEP_ALIVE.min(config.limits.idle_timeout / 2)))
        .with_cancellation_token(cancel);
    let mut manager = LocalSessionManager::default();
    manager.session_config.keep_alive = Some(config.limits.session_idle);
    let manager = Arc::new(manager);
    let sessions = server.clone();
    let service = StreamableHttpService::new(
        move || Ok(sessions.for_session()),
        Arc::clone(&manager),
        mcp_config,
    );
    let endpoint = post_service(service.clone())
        .delete_service(service)
        .fallback(method_not_allowed);
    let gate = Arc::new(Gate {
        auth: Auth::new(token, &config.query_param),
        origins: config.allowed_origins.clone(),
        max_frame,
        idle: config.limits.idle_timeout,
        sessions: manager,
        max_sessions: config.limits.max_sessions,
        creating: tokio::sync::Mutex::new(()),
        stateless: Arc::new(Semaphore::new(config.limits.max_stateless)),
        in_flight: Arc::new(Mutex::new(HashSet::new())),
    });
    Router::new()
        .route(PATH, endpoint)
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(gate, front))
}

/// What the idle check of one connection looks at.
struct Liveness {
    epoch: Instant,
    /// Milliseconds after `epoch` when a byte last moved either way.
    activity: AtomicU64,
    /// Requests being answered (from the head's arrival to the end of the answer's body).
    busy: AtomicUsize,
}

impl Liveness {
    fn touch(&self) {
        self.activity
            .store(self.epoch.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    /// Resolves once no request is being answered and no byte has moved for `idle`.
    async fn idle_for(&self, idle: Duration) {
        loop {
            if self.busy.load(Ordering::Relaxed) > 0 {
                tokio::time::sleep(idle).await;
                continue;
            }
            let last = Duration::from_millis(self.activity.load(Ordering::Relaxed));
            let quiet = self.epoch.elapsed().saturating_sub(last);
            if quiet >= idle {
                return;
            }
            tokio::time::sleep(idle - quiet).await;
        }
    }
}

/// One request being answered; the idle countdown restarts when it ends.
struct Busy(Arc<Liveness>);

impl Busy {
    fn new(live: &Arc<Liveness>) -> Self {
        live.busy.fetch_add(1, Ordering::Relaxed);
        Busy(Arc::clone(live))
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.touch();
        self.0.busy.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A TCP stream that records when a byte last moved either way.
struct Watched {
    stream: tokio::net::TcpStream,
    live: Arc<Liveness>,
}

impl tokio::io::AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.live.touch();
        }
        polled
    }
}

impl tokio::io::AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write(cx, data);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.live.touch();
        }
        polled
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// Serve one connection: HTTP/1.1 with the header-read timeout, closed when idle (no
/// request being answered and no byte moving), shut down gracefully when `stop` fires.
async fn connection(
    stream: tokio::net::TcpStream,
    router: Router,
    limits: HttpLimits,
    stop: CancellationToken,
) {
    if let Err(error) = stream.set_nodelay(true) {
        tracing::debug!(%error, "could not set TCP_NODELAY");
    }
    let live = Arc::new(Liveness {
        epoch: Instant::now(),
        activity: AtomicU64::new(0),
        busy: AtomicUsize::new(0),
    });
    let io = TokioIo::new(Watched {
        stream,
        live: Arc::clone(&live),
    });
    let inner = TowerToHyperService::new(router);
    let counted = Arc::clone(&live);
    let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
        let busy = Busy::new(&counted);
        let answer = hyper::service::Service::call(&inner, request);
        async move { answer.await.map(|response| hold(response, busy)) }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .keep_alive(true);
    let served = builder.serve_connection(io, service);
    tokio::pin!(served);
    let mut stopping = false;
    loop {
        tokio::select! {
            result = served.as_mut() => {
                if let Err(error) = result {
                    tracing::debug!(%error, "HTTP connection ended with an error");
                }
                return;
            }
            () = live.idle_for(limits.idle_timeout) => {
                tracing::debug!("HTTP connection idle: closed");
                return;
            }
            () = stop.cancelled(), if !stopping => {
                stopping = true;
                served.as_mut().graceful_shutdown();
            }
        }
    }
}

/// Serve until SIGINT/SIGTERM, or until the tool list turns out not to be servable.
pub async fn serve(server: Server, config: HttpConfig) -> Result<(), Failure> {
    let listener = tokio::net::TcpListener::bind(config.addr)
        .await
        .map_err(|e| Failure::Io(format!("cannot listen on {}: {e}", config.addr)))?;
    let local: SocketAddr = listener
        .local_addr()
        .map_err(|e| Failure::Io(format!("cannot listen on {}: {e}", config.addr)))?;
    if !local.ip().is_loopback() {
        tracing::warn!(
            address = %local,
            "listening beyond loopback (--allow-remote): anyone who can reach this address and \
             holds the token can run conda here; put a TLS-terminating proxy in front"
        );
    }
    let url = format!("http://{local}{PATH}");
    let (token, generated) = match &config.token {
        Some(token) => (token.clone(), false),
        None => (
            generate_token().map_err(|e| Failure::Io(format!("cannot generate a token: {e}")))?,
            true,
        ),
    };
    let cancel = CancellationToken::new();
    let router = app(&server, &config, &token, cancel.child_token());
    if generated {
        eprintln!(
            "ccm: no token configured (CCM_MCP_TOKEN or --token-file); this run's token, for the \
             header 'Authorization: Bearer <token>' to {url}: {}",
            token.expose()
        );
    }
    // Last: whoever waits for this line has everything printed before it.
    eprintln!("ccm: listening on {url}");
    drop(token);

    let limits = config.limits.clone();
    let connections = Arc::new(Semaphore::new(limits.max_connections));
    let failure = loop {
        tokio::select! {
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((stream, _)) => stream,
                    Err(error) => {
                        // Out of descriptors and the like: back off, keep serving.
                        tracing::warn!(%error, "could not accept a connection");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let Ok(permit) = Arc::clone(&connections).try_acquire_owned() else {
                    tracing::debug!(limit = limits.max_connections, "connection refused: cap");
                    drop(stream);
                    continue;
                };
                let router = router.clone();
                let limits = limits.clone();
                let stop = cancel.clone();
                tokio::spawn(async move {
                    connection(stream, router, limits, stop).await;
                    drop(permit);
                });
            }
            () = super::signalled() => {
                tracing::info!("shutting down");
                // In-flight calls end now (SIGTERM, grace, SIGKILL), so their connections
                // can close; `main` waits for the sweeps.
                crate::host::exec::begin_shutdown();
                break None;
            }
            reason = server.failed() => break Some(Failure::Config(reason)),
        }
    };
    drop(listener);
    // Ends sessions and their event streams, and asks every connection to close.
    cancel.cancel();
    let all = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    if tokio::time::timeout(SHUTDOWN_GRACE, connections.acquire_many(all))
        .await
        .is_err()
    {
        tracing::warn!("connections still open after the shutdown grace period; closing them");
    }
    match failure {
        Some(failure) => Err(failure),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn auth() -> Auth {
        Auth::new(&Secret::new("s3cret-token-0123456789".into()), "key")
    }

    fn request(uri: &str, authorization: Option<&str>) -> Request {
        let mut builder = axum::http::Request::builder().method("POST").uri(uri);
        if let Some(value) = authorization {
            builder = builder.header(AUTHORIZATION, value);
        }
        builder.body(axum::body::Body::empty()).unwrap()
    }

    #[test]
    fn bearer_header() {
        let a = auth();
        for (value, ok) in [
            ("Bearer s3cret-token-0123456789", true),
            ("bearer   s3cret-token-0123456789 ", true),
            ("Bearer s3cret-token-012345678", false),
            ("Bearer s3cret-token-01234567890", false),
            ("Basic s3cret-token-0123456789", false),
            ("s3cret-token-0123456789", false),
            ("Bearer ", false),
        ] {
            let mut r = request("/mcp", Some(value));
            assert_eq!(a.admit(&mut r).is_ok(), ok, "{value}");
            assert!(
                r.headers().get(AUTHORIZATION).is_none(),
                "the header is removed"
            );
        }
        assert_eq!(a.admit(&mut request("/mcp", None)), Err(Denied::Missing));
    }

    #[test]
    fn query_token_is_checked_and_stripped() {
        let a = auth();
        let mut r = request("/mcp?a=1&key=s3cret-token-0123456789&b=2", None);
        assert!(a.admit(&mut r).is_ok());
        assert_eq!(r.uri().to_string(), "/mcp?a=1&b=2");
        let mut r = request("/mcp?key=s3cret%2Dtoken-0123456789", None);
        assert!(a.admit(&mut r).is_ok());
        assert_eq!(r.uri().to_string(), "/mcp");
        // The default parameter name is not the configured one.
        let mut r = request("/mcp?token=s3cret-token-0123456789", None);
        assert_eq!(a.admit(&mut r), Err(Denied::Missing));
        let mut r = request("/mcp?key=wrong&key=s3cret-token-0123456789", None);
        assert_eq!(
            a.admit(&mut r),
            Err(Denied::Wrong),
            "the first occurrence counts"
        );
        assert_eq!(r.uri().to_string(), "/mcp");
    }

    #[test]
    fn query_parsing() {
        assert_eq!(
            take_param("token=a%2Bb+c&x", "token"),
            (Some(b"a+b+c".to_vec()), Some("x".to_owned()))
        );
        assert_eq!(take_param("x=1", "token"), (None, Some("x=1".to_owned())));
        assert_eq!(take_param("token=%zz", "token"), (Some(Vec::new()), None));
        assert_eq!(percent_decode("%41%62c"), Some(b"Abc".to_vec()));
        assert_eq!(percent_decode("%4"), None);
        assert_eq!(percent_decode("%+f"), None, "a sign is no hex digit");
    }

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

    #[test]
    fn generated_tokens_are_long_and_differ() {
        let a = generate_token().unwrap();
        let b = generate_token().unwrap();
        assert_eq!(a.expose().len(), 64);
        assert!(a.expose().bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }
}
