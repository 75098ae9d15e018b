//! MCP over Streamable HTTP (`ccm --http`): `POST /mcp`, behind a bearer-token check.
//!
//! Requests pass an authentication layer first: the token comes from
//! `Authorization: Bearer <token>`, or from the URL query parameter named by
//! `CCM_MCP_TOKEN_QUERY_PARAM` (default `token`). It is compared in constant time (SHA-256
//! digests of both sides, compared with `subtle`, so neither content nor length leaks
//! through timing). A request without a valid token gets `401` with
//! `WWW-Authenticate: Bearer` and an empty body, whatever its method or path, and never
//! reaches the MCP layer. Accepted requests lose the `Authorization` header and the token
//! parameter before they are passed on, and logs name only the method and path, so
//! tokens and query strings never appear in logs.
//!
//! Behind the layer: `POST /mcp` (and `DELETE /mcp` with an `Mcp-Session-Id`, which ends
//! that session) go to rmcp's Streamable HTTP service in its session mode: each
//! `initialize` creates a session and a handler of its own ([`Server::for_session`]), so
//! `--max-session-calls` counts per `Mcp-Session-Id`. Requests of the session-less
//! 2026-07-28 lifecycle are served one handler per request. Any other method on `/mcp` is
//! `405` with `Allow: POST` (the server offers no GET event stream); other paths are `404`.
//! rmcp also refuses a `Host` header outside loopback names and `--allowed-host` (`403`,
//! against DNS rebinding).
//!
//! Once listening, `ccm: listening on http://ADDR/mcp` goes to stderr (with the actual port
//! when ADDR's port was 0). Without a configured token a random one is generated and
//! printed once, on the next line.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::header::{ALLOW, AUTHORIZATION, WWW_AUTHENTICATE};
use axum::http::{HeaderValue, StatusCode, Uri};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::post_service;
use axum::serve::ListenerExt;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tokio_util::sync::CancellationToken;

use super::Failure;
use crate::cli::{HttpConfig, Secret};
use crate::server::Server;

/// The MCP endpoint.
pub const PATH: &str = "/mcp";
/// Host names always accepted (rmcp's DNS-rebinding check).
const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];
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

    /// Whether the request carries the token (header or query parameter). Either way the
    /// credentials are removed from the request.
    fn admit(&self, request: &mut Request) -> bool {
        let mut ok = false;
        for value in request.headers().get_all(AUTHORIZATION) {
            if let Some(token) = bearer(value) {
                ok |= self.matches(token);
            }
        }
        request.headers_mut().remove(AUTHORIZATION);
        if let Some(query) = request.uri().query() {
            let (token, rest) = take_param(query, &self.query_param);
            if let Some(token) = token {
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
        ok
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
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            let hex = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Some(out)
}

/// A fresh random token: 32 bytes from the operating system, as 64 hex digits.
fn generate_token() -> std::io::Result<Secret> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(std::io::Error::other)?;
    Ok(Secret::new(
        bytes.iter().map(|b| format!("{b:02x}")).collect(),
    ))
}

async fn require_token(
    State(auth): State<Arc<Auth>>,
    mut request: Request,
    next: Next,
) -> Response {
    let method = request.method().clone();
    // The path only: the query may carry the token.
    let path = request.uri().path().to_owned();
    if !auth.admit(&mut request) {
        tracing::debug!(%method, %path, "HTTP request refused: missing or wrong token");
        return (StatusCode::UNAUTHORIZED, [(WWW_AUTHENTICATE, "Bearer")]).into_response();
    }
    tracing::debug!(%method, %path, "HTTP request");
    next.run(request).await
}

async fn method_not_allowed() -> Response {
    (StatusCode::METHOD_NOT_ALLOWED, [(ALLOW, "POST")]).into_response()
}

async fn not_found() -> Response {
    StatusCode::NOT_FOUND.into_response()
}

/// The application: authentication, then the MCP endpoint.
fn app(server: &Server, config: &HttpConfig, token: &Secret, cancel: CancellationToken) -> Router {
    let mcp_config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(
            LOOPBACK_HOSTS
                .iter()
                .map(|h| (*h).to_owned())
                .chain(config.allowed_hosts.iter().cloned()),
        )
        .with_cancellation_token(cancel);
    let sessions = server.clone();
    let service = StreamableHttpService::new(
        move || Ok(sessions.for_session()),
        Arc::new(LocalSessionManager::default()),
        mcp_config,
    );
    let endpoint = post_service(service.clone())
        .delete_service(service)
        .fallback(method_not_allowed);
    let auth = Arc::new(Auth::new(token, &config.query_param));
    Router::new()
        .route(PATH, endpoint)
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(auth, require_token))
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

    let stop: Arc<Mutex<Option<Failure>>> = Arc::new(Mutex::new(None));
    let reason = Arc::clone(&stop);
    let stopping = cancel.clone();
    let shutdown = async move {
        tokio::select! {
            () = super::signalled() => {
                tracing::info!("shutting down");
                // In-flight calls end now (SIGTERM, grace, SIGKILL), so their connections
                // can close; `main` waits for the sweeps.
                crate::exec::begin_shutdown();
            }
            failure = server.failed() => {
                if let Ok(mut slot) = reason.lock() {
                    *slot = Some(Failure::Config(failure));
                }
            }
        }
        // Ends sessions and their event streams, so open connections can close.
        stopping.cancel();
    };
    // Answers are streamed in several small writes (an event-stream priming event, the
    // message, the end): without TCP_NODELAY each small answer waits for the client's
    // delayed acknowledgement.
    let listener = listener.tap_io(|stream| {
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%error, "could not set TCP_NODELAY");
        }
    });
    let serving = axum::serve(listener, router).with_graceful_shutdown(shutdown);
    let served = async move { serving.await };
    tokio::pin!(served);
    tokio::select! {
        result = &mut served => result.map_err(|e| Failure::Io(format!("HTTP server failed: {e}")))?,
        () = async {
            cancel.cancelled().await;
            tokio::time::sleep(SHUTDOWN_GRACE).await;
        } => tracing::warn!("connections still open after the shutdown grace period; closing them"),
    }
    match stop.lock().ok().and_then(|mut slot| slot.take()) {
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
            assert_eq!(a.admit(&mut r), ok, "{value}");
            assert!(
                r.headers().get(AUTHORIZATION).is_none(),
                "the header is removed"
            );
        }
        assert!(!a.admit(&mut request("/mcp", None)));
    }

    #[test]
    fn query_token_is_checked_and_stripped() {
        let a = auth();
        let mut r = request("/mcp?a=1&key=s3cret-token-0123456789&b=2", None);
        assert!(a.admit(&mut r));
        assert_eq!(r.uri().to_string(), "/mcp?a=1&b=2");
        let mut r = request("/mcp?key=s3cret%2Dtoken-0123456789", None);
        assert!(a.admit(&mut r));
        assert_eq!(r.uri().to_string(), "/mcp");
        // The default parameter name is not the configured one.
        let mut r = request("/mcp?token=s3cret-token-0123456789", None);
        assert!(!a.admit(&mut r));
        let mut r = request("/mcp?key=wrong&key=s3cret-token-0123456789", None);
        assert!(!a.admit(&mut r), "the first occurrence counts");
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
