//! ccm: an MCP server that puts an installed conda's whole command line in front of MCP
//! clients as typed, policy-checked tools.
//!
//! The modules are layers, lowest first; a module uses only its own layer and the ones
//! below (`tests/it/house.rs` checks every `crate::` path). See `ARCHITECTURE.md` for the
//! code map and the invariants each module keeps.

pub mod baked;
pub mod cli;
pub mod config;
pub mod host;
pub mod model;
pub mod server;
pub mod tools;
pub mod transport;

/// Bytes every `ccm` binary contains, so the `conda ccm` launcher (`python/`) can
/// tell this program from another executable named `ccm` (conda-cli-mcp installs a
/// Python script of that name) without running it. Keep in step with
/// `python/ccm_conda_plugin/plugin.py`.
pub const IDENTITY: &str = "ccm-identity:rust-mcp-server-for-the-conda-command-line:v1";

/// The environment variable that carries the HTTP bearer token: read by `cli`, always
/// withheld from child processes by `host::exec`.
pub const TOKEN_VAR: &str = "CCM_MCP_TOKEN";

/// What `ccm --version` prints for a binary no distribution installed (a cargo build):
/// the version, then `source` and which build (a `git describe` of the commit) it is. An
/// installed binary names its distribution instead (`host::install::version_text`).
pub const VERSION_TEXT: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("CCM_DISTRIBUTION"),
    "; ",
    env!("CCM_BUILD"),
    ")"
);
