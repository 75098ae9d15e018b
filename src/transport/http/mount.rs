//! rmcp's Streamable HTTP service mounted in axum behind the front layer: the session
//! manager and its idle expiry, the allowed `Host` names, the body limit, the event
//! streams' keep-alive, `405`/`404`.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::middleware;
use axum::routing::post_service;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::PATH;
use super::auth::Auth;
use super::front::{Gate, front, method_not_allowed, not_found};
use crate::config::{HttpConfig, Secret};
use crate::server::Server;

/// Host names always accepted (rmcp's DNS-rebinding check).
const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];
/// The longest gap between keep-alive comments of an event stream.
const SSE_KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The application: the front layer, then the MCP endpoint.
pub(super) fn app(
    server: &Server,
    config: &HttpConfig,
    token: &Secret,
    cancel: CancellationToken,
) -> Router {
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
