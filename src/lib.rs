//! ccm: an MCP server that puts an installed conda's whole command line in front of MCP
//! clients as typed, policy-checked tools.
//!
//! See `ARCHITECTURE.md` for the code map and the invariants each module keeps.

pub mod argv;
pub mod baked;
pub mod catalog;
pub mod cli;
pub mod completion;
pub mod confine;
pub mod discovery;
pub mod exec;
pub mod layout;
pub mod policy;
pub mod report;
pub mod sandbox;
pub mod schema;
pub mod server;
pub mod snapshot;
pub mod startup;
pub mod surface;
pub mod toolset;
pub mod transport;

/// Bytes every `ccm` binary contains, so the `conda ccm` launcher (`python/`) can
/// tell this program from another executable named `ccm` (conda-cli-mcp installs a
/// Python script of that name) without running it. Keep in step with
/// `python/ccm_conda_plugin/plugin.py`.
pub const IDENTITY: &str = "ccm-identity:rust-mcp-server-for-the-conda-command-line:v1";

/// What `ccm --version` prints: the version, then which distribution (`wheel`, `conda`,
/// `source`) and which build (a `git describe` of the commit) this binary is.
pub const VERSION_TEXT: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("CCM_DISTRIBUTION"),
    "; ",
    env!("CCM_BUILD"),
    ")"
);
