//! Transports: MCP over stdio (and, with `--http`, Streamable HTTP).

use rmcp::ServiceExt;

use crate::server::Server;

/// Serve one MCP session over stdin/stdout until the client goes away.
pub async fn stdio(server: Server) -> Result<(), String> {
    let running = match server.serve(rmcp::transport::stdio()).await {
        Ok(running) => running,
        // The client closed stdin before initializing: nothing to serve.
        Err(rmcp::service::ServerInitializeError::ConnectionClosed(_)) => return Ok(()),
        Err(error) => return Err(format!("MCP session failed to start: {error}")),
    };
    running
        .waiting()
        .await
        .map(|_| ())
        .map_err(|error| format!("MCP session ended with an error: {error}"))
}
