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
pub(crate) mod lines;

/// Why serving stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeFailure {
    /// The operator's configuration cannot be served (exit status 2): the server's reason.
    #[error(transparent)]
    Config(crate::server::startup::Fatal),
    /// The transport failed (exit status 1).
    #[error(transparent)]
    Io(#[from] TransportError),
}

/// How a transport failed.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    #[error("MCP session failed to start: {0}")]
    Start(Box<rmcp::service::ServerInitializeError>),
    #[error("MCP session ended with an error: {0}")]
    Ended(tokio::task::JoinError),
    #[error("cannot listen on {addr}: {error}")]
    Listen {
        addr: std::net::SocketAddr,
        error: std::io::Error,
    },
    #[error("cannot generate a token: {0}")]
    Token(std::io::Error),
}

/// Serve one MCP session over stdin/stdout until the client goes away (stdin EOF) or
/// SIGINT/SIGTERM; `main` then cancels every execution and waits for its sweep.
pub async fn stdio(server: Server) -> Result<(), ServeFailure> {
    let watch = server.clone();
    let running = tokio::select! {
        started = server.clone().serve(lines::Lines::new(
            EofCancels(tokio::io::stdin(), server.clone()),
            tokio::io::stdout(),
            server.max_frame(),
        )) => match started {
            Ok(running) => running,
            // The client closed stdin before initializing: nothing to serve.
            Err(rmcp::service::ServerInitializeError::ConnectionClosed(_)) => return Ok(()),
            Err(error) => return Err(TransportError::Start(Box::new(error)).into()),
        },
        reason = watch.failed() => return Err(ServeFailure::Config(reason)),
        () = signalled() => return Ok(()),
    };
    tokio::select! {
        ended = running.waiting() => ended
            .map(|_| ())
            .map_err(|error| TransportError::Ended(error).into()),
        reason = watch.failed() => Err(ServeFailure::Config(reason)),
        () = signalled() => {
            tracing::info!("shutting down");
            watch.begin_shutdown();
            Ok(())
        }
    }
}

/// stdin that cancels every execution when it reaches EOF: the client is gone, so the
/// in-flight calls end (SIGTERM, grace, SIGKILL) instead of running to their timeout
/// while the session drains.
struct EofCancels<R>(R, Server);

impl<R: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for EofCancels<R> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = std::pin::Pin::new(&mut self.0).poll_read(cx, buf);
        if let std::task::Poll::Ready(Ok(())) = &polled
            && buf.filled().len() == before
            && buf.remaining() > 0
        {
            tracing::info!("stdin closed: ending every execution");
            self.1.begin_shutdown();
        }
        polled
    }
}

/// SIGINT or SIGTERM.
pub(crate) async fn signalled() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) {
            (Ok(mut term), Ok(mut int)) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = int.recv() => {}
                }
            }
            _ => std::future::pending().await,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_say_what_failed() {
        let listen = ServeFailure::from(TransportError::Listen {
            addr: "127.0.0.1:9".parse().unwrap(),
            error: std::io::Error::other("address in use"),
        });
        assert_eq!(
            listen.to_string(),
            "cannot listen on 127.0.0.1:9: address in use"
        );
        assert!(matches!(listen, ServeFailure::Io(_)));
        let token = ServeFailure::from(TransportError::Token(std::io::Error::other("no entropy")));
        assert_eq!(token.to_string(), "cannot generate a token: no entropy");
        let not_conda = crate::server::startup::Fatal::NotAConda("no conda here".into());
        assert_eq!(ServeFailure::Config(not_conda).to_string(), "no conda here");
    }
}
