//! The connections of `--http`: each accepted one served while at most
//! `--http-max-connections` are open (more are closed before any byte is read), as
//! HTTP/1.1 with the header-read timeout, closed when idle (no request being answered and
//! no byte moving either way), shut down gracefully when asked.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpStream;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::front::hold;
use crate::config::HttpLimits;

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

/// One accepted connection: served on a task of its own while under the cap, else closed
/// at once (before any byte is read).
pub(super) async fn admit(
    accepted: std::io::Result<(TcpStream, SocketAddr)>,
    connections: &Arc<Semaphore>,
    router: &Router,
    limits: &HttpLimits,
    cancel: &CancellationToken,
) {
    let stream = match accepted {
        Ok((stream, _)) => stream,
        Err(error) => {
            // Out of descriptors and the like: back off, keep serving.
            tracing::warn!(%error, "could not accept a connection");
            tokio::time::sleep(Duration::from_millis(50)).await;
            return;
        }
    };
    let Ok(permit) = Arc::clone(connections).try_acquire_owned() else {
        tracing::debug!(limit = limits.max_connections, "connection refused: cap");
        drop(stream);
        return;
    };
    let router = router.clone();
    let limits = limits.clone();
    let stop = cancel.clone();
    tokio::spawn(async move {
        connection(stream, router, limits, stop).await;
        drop(permit);
    });
}
