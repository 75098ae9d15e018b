//! The client's MCP roots, per session: asked with `roots/list` the first time a
//! generated tool's call needs them, kept until `notifications/roots/list_changed`.
//!
//! Only handshake sessions whose client declared the `roots` capability are asked (the
//! session-less 2026-07-28 requests cannot be asked anything: they behave as without
//! roots). Roots are `file://` URIs; each is read as a directory and canonicalized, and
//! one that is not a local, existing directory is left out. A client that does not
//! answer within [`ASK_TIMEOUT`], or answers with an error, counts as having no roots
//! until it says they changed.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::service::Peer;

/// How long a client may take to answer `roots/list`.
pub(super) const ASK_TIMEOUT: Duration = Duration::from_secs(10);

/// The roots of one session: `None` until asked (and after a change notification).
#[derive(Default)]
pub(super) struct Roots(tokio::sync::Mutex<Option<Arc<Vec<PathBuf>>>>);

impl Roots {
    /// Forget the roots (the client said they changed).
    pub(super) async fn forget(&self) {
        *self.0.lock().await = None;
    }

    /// The session's roots as canonical directories, asking the client (`peer`, when it
    /// declared roots and can be asked) once; empty when it cannot be asked, declared none, or did not answer.
    // Roots are deprecated from 2026-07-28 on (SEP-2577), which is never asked here; the
    // handshake revisions still define them.
    #[allow(deprecated)]
    pub(super) async fn get(&self, peer: Option<&Peer<RoleServer>>) -> Arc<Vec<PathBuf>> {
        let Some(peer) = peer else {
            return Arc::default();
        };
        let mut cached = self.0.lock().await;
        if let Some(roots) = cached.as_ref() {
            return Arc::clone(roots);
        }
        let roots: Vec<PathBuf> = match tokio::time::timeout(ASK_TIMEOUT, peer.list_roots()).await {
            Ok(Ok(answer)) => answer
                .roots
                .iter()
                .filter_map(|root| directory(&root.uri))
                .collect(),
            Ok(Err(error)) => {
                tracing::debug!(%error, "roots/list failed");
                Vec::new()
            }
            Err(_) => {
                tracing::debug!("roots/list was not answered in time");
                Vec::new()
            }
        };
        // Kept either way: a client that cannot answer is not asked on every call.
        let roots = Arc::new(roots);
        *cached = Some(Arc::clone(&roots));
        roots
    }
}

/// The canonical directory of a `file:` root URI (RFC 8089: the scheme and the host
/// `localhost` in any case, an empty host, or none — `file:/path`); `None` otherwise
/// (another host, a relative path, a query or fragment, not an existing directory).
pub(super) fn directory(uri: &str) -> Option<PathBuf> {
    let (scheme, rest) = uri.split_at_checked(5)?;
    if !scheme.eq_ignore_ascii_case("file:") {
        return None;
    }
    let path = match rest.strip_prefix("//") {
        Some(authority) => {
            let host_end = authority.find('/').unwrap_or(authority.len());
            let host = &authority[..host_end];
            if !(host.is_empty() || host.eq_ignore_ascii_case("localhost")) {
                return None;
            }
            &authority[host_end..]
        }
        None => rest,
    };
    if !path.starts_with('/') || path.starts_with("//") || path.contains(['?', '#']) {
        return None;
    }
    let bytes: Vec<u8> = percent_encoding::percent_decode_str(path).collect();
    let path = PathBuf::from(OsString::from_vec(bytes));
    let canonical = std::fs::canonicalize(path).ok()?;
    canonical.is_dir().then_some(canonical)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_uris() {
        let dir = tempfile::tempdir().unwrap();
        let spaced = dir.path().join("a b");
        std::fs::create_dir(&spaced).unwrap();
        let canonical = std::fs::canonicalize(&spaced).unwrap();
        let encoded = format!("file://{}", canonical.to_str().unwrap().replace(' ', "%20"));
        assert_eq!(directory(&encoded), Some(canonical.clone()));
        let shown = canonical.to_str().unwrap();
        for local in [
            format!("file://localhost{shown}"),
            format!("FILE://LocalHost{shown}"),
            format!("File://{shown}"),
            format!("file:{shown}"),
        ] {
            assert_eq!(directory(&local), Some(canonical.clone()), "{local}");
        }
        for refused in [
            "https://example.com/x",
            "file://otherhost/tmp",
            "file://127.0.0.1/tmp",
            "file:////tmp",
            "file:",
            "file:relative",
            "file:///does/not/exist/at/all",
            "/tmp",
        ] {
            assert_eq!(directory(refused), None, "{refused}");
        }
        let file = dir.path().join("f");
        std::fs::write(&file, "").unwrap();
        assert_eq!(directory(&format!("file://{}", file.display())), None);
    }
}
