//! Output capture: each stream keeps its first bytes up to a cap and drains the rest, so
//! a child never blocks on a full pipe; stdin gets its bytes from a task of its own.

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

use super::watch::Tap;

const CHUNK: usize = 64 * 1024;

#[derive(Default)]
pub(super) struct Captured {
    pub(super) bytes: Vec<u8>,
    pub(super) truncated: bool,
}

/// Keep the first `limit` bytes of what `tap` passes on, drain the rest. Stopped early,
/// the capture counts as truncated: output may have been lost.
pub(super) async fn capture<R: AsyncRead + Unpin>(
    stream: Option<R>,
    limit: usize,
    stop: CancellationToken,
    mut tap: Tap,
) -> Captured {
    let mut captured = Captured::default();
    let Some(mut stream) = stream else {
        return captured;
    };
    let mut chunk = vec![0u8; CHUNK];
    // What the tap passes on of each chunk (fetch records taken out).
    let mut passed = Vec::new();
    loop {
        let read = tokio::select! {
            read = stream.read(&mut chunk) => read,
            _ = stop.cancelled() => {
                captured.truncated = true;
                return captured;
            }
        };
        passed.clear();
        match read {
            Ok(0) | Err(_) => {
                tap.finish(&mut passed);
                keep(&mut captured, &passed, limit);
                return captured;
            }
            Ok(n) if matches!(tap, Tap::None) => keep(&mut captured, &chunk[..n], limit),
            Ok(n) => {
                tap.pass(&chunk[..n], &mut passed);
                keep(&mut captured, &passed, limit);
            }
        }
    }
}

/// Keep what fits under `limit`.
fn keep(captured: &mut Captured, bytes: &[u8], limit: usize) {
    let room = limit.saturating_sub(captured.bytes.len());
    if bytes.len() > room {
        captured.truncated = true;
    }
    captured
        .bytes
        .extend_from_slice(&bytes[..bytes.len().min(room)]);
}

/// Write `bytes` to the child's stdin and close it. A child that exits without reading its
/// input is not an error.
pub(super) fn feed<W: AsyncWrite + Unpin + Send + 'static>(mut writer: W, bytes: Vec<u8>) {
    tokio::spawn(async move {
        let _ = writer.write_all(&bytes).await;
        let _ = writer.shutdown().await;
    });
}
