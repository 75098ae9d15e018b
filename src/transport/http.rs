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
//!   judged like a stdio line ([`frame::inspect`](super::frame::inspect)): what is not a well-formed message is
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
//!
//! Here: listening, the accept loop and shutdown; [`connection`] serves each connection
//! (the cap, the timeouts), [`front`] is the front layer, [`auth`] the token check, and
//! [`mount`] mounts rmcp's service behind them.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use self::auth::generate_token;
use super::{ServeFailure, TransportError};
use crate::config::HttpConfig;
use crate::server::Server;

mod auth;
mod connection;
mod front;
mod mount;

/// The MCP endpoint.
pub const PATH: &str = "/mcp";
/// How long open connections get to finish after a shutdown signal.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Serve until SIGINT/SIGTERM, or until the tool list turns out not to be servable.
pub async fn serve(server: Server, config: HttpConfig) -> Result<(), ServeFailure> {
    let (listener, local) = listen(config.addr).await?;
    let url = format!("http://{local}{PATH}");
    let (token, generated) = match &config.token {
        Some(token) => (token.clone(), false),
        None => (generate_token().map_err(TransportError::Token)?, true),
    };
    server.withhold(token.expose());
    let cancel = CancellationToken::new();
    let router = mount::app(&server, &config, &token, cancel.child_token());
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
                connection::admit(accepted, &connections, &router, &limits, &cancel).await;
            }
            () = super::signalled() => {
                tracing::info!("shutting down");
                // In-flight calls end now (SIGTERM, grace, SIGKILL), so their connections
                // can close; `main` waits for the sweeps.
                server.begin_shutdown();
                break None;
            }
            reason = server.failed() => break Some(ServeFailure::Config(reason)),
        }
    };
    drop(listener);
    shut_down(&cancel, &connections, limits.max_connections).await;
    match failure {
        Some(failure) => Err(failure),
        None => Ok(()),
    }
}

/// Bind the listening socket (warning when it is beyond loopback) and say where it is.
async fn listen(addr: SocketAddr) -> Result<(TcpListener, SocketAddr), TransportError> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|error| TransportError::Listen { addr, error })?;
    let local: SocketAddr = listener
        .local_addr()
        .map_err(|error| TransportError::Listen { addr, error })?;
    if !local.ip().is_loopback() {
        tracing::warn!(
            address = %local,
            "listening beyond loopback (--allow-remote): anyone who can reach this address and \
             holds the token can run conda here; put a TLS-terminating proxy in front"
        );
    }
    Ok((listener, local))
}

/// End sessions and their event streams, ask every connection to close, and wait for
/// them (at most [`SHUTDOWN_GRACE`]).
async fn shut_down(cancel: &CancellationToken, connections: &Semaphore, max_connections: usize) {
    cancel.cancel();
    let all = u32::try_from(max_connections).unwrap_or(u32::MAX);
    if tokio::time::timeout(SHUTDOWN_GRACE, connections.acquire_many(all))
        .await
        .is_err()
    {
        tracing::warn!("connections still open after the shutdown grace period; closing them");
    }
}
