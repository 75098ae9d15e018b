//! The `conda_cli_command` cache: conda-completion's converted manifest, asked of the
//! helper once and reused while the manifest file and the target's plugin distributions
//! (a disk scan, no process) are unchanged.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rmcp::ErrorData;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::capacity::Capacity;
use super::ready::Ready;
use super::refuse::Refusal;
use crate::host::exec::Executions;
use crate::host::{discovery, site_scan};

/// The server's `conda_cli_command` cache (empty until first asked).
#[derive(Default)]
pub(super) struct Completion(tokio::sync::Mutex<Option<CompletionCache>>);

/// The last completion document and what it was read from.
struct CompletionCache {
    /// The helper's converted manifest, shared by every answer while it is current.
    document: Arc<Value>,
    manifest_path: Option<PathBuf>,
    identity: Option<Value>,
    scan: site_scan::Scan,
}

impl Completion {
    /// The helper's completion document: from the cache while the manifest file and the
    /// plugin distributions are unchanged, else fresh (asked in the queue, in the
    /// session's `capacity`, within `timeout`, started by `exec`).
    pub(super) async fn document(
        &self,
        exec: &Executions,
        ready: &Ready,
        capacity: &Capacity,
        ct: &CancellationToken,
        timeout: Duration,
    ) -> Result<Arc<Value>, Refusal> {
        let unavailable =
            || ErrorData::invalid_request("Conda completion metadata is unavailable", None);
        let scan = site_scan::scan(&ready.discovery.site_dirs);
        let mut cache = self.0.lock().await;
        if let Some(cached) = cache.as_ref()
            && cached.scan == scan
            && manifest_identity(cached.manifest_path.as_deref()) == cached.identity
        {
            return Ok(Arc::clone(&cached.document));
        }
        let interpreter = ready
            .discovery
            .interpreter
            .as_deref()
            .ok_or_else(unavailable)?;
        let document = {
            let _admitted = capacity.admit(ct).await?;
            discovery::run_helper::<Value>(exec, interpreter, "completion", &[], timeout, None)
                .await
                .map_err(|f| {
                    tracing::warn!(reason = %f.0, "completion helper failed");
                    unavailable()
                })?
        };
        let manifest_path = document
            .get("manifest_path")
            .and_then(Value::as_str)
            .map(PathBuf::from);
        let document = Arc::new(document);
        *cache = Some(CompletionCache {
            identity: manifest_identity(manifest_path.as_deref()),
            manifest_path,
            scan,
            document: Arc::clone(&document),
        });
        Ok(document)
    }
}

/// (device, inode, size, mtime ns) of the manifest file, `null` when absent.
fn manifest_identity(path: Option<&Path>) -> Option<Value> {
    let path = path?;
    match std::fs::metadata(path) {
        Ok(meta) => {
            #[cfg(unix)]
            {
                use std::os::unix::fs::MetadataExt;
                Some(json!([
                    meta.dev(),
                    meta.ino(),
                    meta.size(),
                    meta.mtime(),
                    meta.mtime_nsec()
                ]))
            }
            #[cfg(not(unix))]
            {
                Some(json!([meta.len(), format!("{:?}", meta.modified().ok())]))
            }
        }
        Err(_) => Some(Value::Null),
    }
}
