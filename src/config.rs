//! The server's validated settings: what `cli` builds from flags and environment
//! variables, and what the server and the transports read. Plain data.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::host::exec;
use crate::tools::policy::Access;
use crate::tools::policy::write_envs::Scope;
use crate::tools::select::Selection;
use crate::tools::surface::Surface;

/// A secret that never shows in `Debug` output.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(text: String) -> Self {
        Secret(text)
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

/// `--http` settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpConfig {
    pub addr: SocketAddr,
    /// The configured token; `None`: generate one at startup.
    pub token: Option<Secret>,
    /// The URL query parameter that may carry the token.
    pub query_param: String,
    /// Host header values accepted besides loopback names.
    pub allowed_hosts: Vec<String>,
    /// `--token-file`, whose path children must not see either.
    pub token_file: Option<PathBuf>,
    /// Origin header values accepted besides loopback origins (lower-case).
    pub allowed_origins: Vec<String>,
    pub limits: HttpLimits,
}

/// Connection, session and request limits of `--http`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpLimits {
    pub max_connections: usize,
    pub header_timeout: Duration,
    pub idle_timeout: Duration,
    pub max_sessions: usize,
    pub session_idle: Duration,
    pub max_stateless: usize,
}

/// Validated settings.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub conda_exe: PathBuf,
    pub timeout: Duration,
    pub output_limit: usize,
    pub stdin_limit: usize,
    pub allow_write: bool,
    pub allow_exec: bool,
    pub allow_credentials: bool,
    /// `--list-all` / `CCM_LIST_ALL`: list every tool with its full schema, whatever the
    /// policy admits (no folding, nothing left out).
    pub list_all: bool,
    /// The operator's `--classify` entries, by canonical tool name.
    pub classify: Vec<(String, Access)>,
    /// `--allow-paths` directories (absolute); `None`: the transport's default scope.
    pub allow_paths: Option<Vec<PathBuf>>,
    /// `--write-envs` / `CCM_WRITE_ENVS`: writes (and `conda run`) only into these
    /// environments; `None`: `--allow-write` unscoped.
    pub write_envs: Option<Scope>,
    pub no_snapshot: bool,
    /// Run read-only calls without the read-only sandbox.
    pub no_sandbox: bool,
    /// Fork conda calls from a warm zygote (`--warm`).
    pub warm: bool,
    pub max_queue: usize,
    pub max_session_calls: usize,
    /// Hidden tools and overrides.
    pub surface: Surface,
    /// `--tools` / `CCM_TOOLS`: the selected tools; `None`: every tool.
    pub tools: Option<Selection>,
    /// `--audit-log` / `CCM_AUDIT_LOG` (absolute): opened at startup by `main`.
    pub audit_log: Option<PathBuf>,
    /// `--confirm-writes` / `CCM_CONFIRM_WRITES`: ask the user before writes and execs.
    pub confirm_writes: bool,
    /// How long a confirmation question waits for the user.
    pub confirm_timeout: Duration,
    /// Serve over HTTP instead of stdio.
    pub http: Option<HttpConfig>,
    /// Limits and withheld environment of every child process.
    pub limits: exec::LimitSettings,
}
