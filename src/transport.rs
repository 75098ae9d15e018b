//! Transports: MCP over stdio ([`lines`], `ccm`'s own framing in front of rmcp), or
//! Streamable HTTP with `--http` ([`http`]). Both judge every incoming frame with
//! [`frame`] first, so every frame with an id is answered.
//!
//! Either way the transport also watches [`Server::failed`]: when the tool list cannot be
//! served (an override collision found once discovery has run), it stops and `ccm` exits
//! with status 2.

use rmcp::ServiceExt;

use crate::server::Server;

pub mod frame;
pub mod http;
pub mod lines;

/// Why serving stopped.
#[derive(Debug)]
pub enum Failure {
    /// The operator's configuration cannot be served (exit status 2).
    Config(String),
    /// The transport failed (exit status 1).
    Io(String),
}

/// Serve one MCP session over stdin/stdout until the client goes away.
pub async fn stdio(server: Server) -> Result<(), Failure> {
    let watch = server.clone();
    let running = tokio::select! {
        started = server.clone().serve(lines::Lines::new(
            tokio::io::stdin(),
            tokio::io::stdout(),
            server.max_frame(),
        )) => match started {
            Ok(running) => running,
            // The client closed stdin before initializing: nothing to serve.
            Err(rmcp::service::ServerInitializeError::ConnectionClosed(_)) => return Ok(()),
            Err(error) => return Err(Failure::Io(format!("MCP session failed to start: {error}"))),
        },
        reason = watch.failed() => return Err(Failure::Config(reason)),
    };
    tokio::select! {
        ended = running.waiting() => ended
            .map(|_| ())
            .map_err(|error| Failure::Io(format!("MCP session ended with an error: {error}"))),
        reason = watch.failed() => Err(Failure::Config(reason)),
    }
}
