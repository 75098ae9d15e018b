//! The target stamp: conda's version and its `conda` entry points, digested. A baked
//! snapshot records the stamp of the conda it was captured from; `host::site_scan` computes a
//! target's stamp from its files.

use serde::{Deserialize, Serialize};

/// conda's version and its entry points, digested.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stamp {
    pub conda_version: String,
    /// SHA-256 of the canonical JSON of the version and the sorted entry points.
    pub digest: String,
}

/// ccm's own launcher: the `[conda]` entry point of the `ccm-mcp` wheel
/// (`pyproject.toml`, `python/ccm_conda_plugin`), which adds `conda ccm` (and `conda mcp`
/// where no other plugin provides it) and nothing a tool could use. Installing the wheel
/// must not make a conda look different from the one a snapshot was captured from: the
/// stamp leaves this entry point out, and confirmation leaves out what it registers
/// ([`OWN_LAUNCHER_COMMANDS`], as long as it implements nothing but subcommands).
pub const OWN_LAUNCHER_DISTRIBUTION: &str = "ccm-mcp";
/// The launcher's entry point name (`ccm = ccm_conda_plugin.plugin`).
pub const OWN_LAUNCHER_ENTRY_POINT: &str = "ccm";
/// The launcher's entry point value.
pub const OWN_LAUNCHER_VALUE: &str = "ccm_conda_plugin.plugin";
/// The commands the launcher registers (`mcp` only where it is free).
pub const OWN_LAUNCHER_COMMANDS: [&str; 2] = ["ccm", "mcp"];
/// The only hook the launcher implements.
pub const OWN_LAUNCHER_HOOKS: [&str; 1] = ["conda_subcommands"];

/// Whether an entry point (its distribution, normalized or not, its name and value) is
/// ccm's own launcher.
pub fn is_own_launcher(distribution: &str, entry_point: &str, value: &str) -> bool {
    crate::model::catalog::normalize_distribution(distribution) == OWN_LAUNCHER_DISTRIBUTION
        && entry_point == OWN_LAUNCHER_ENTRY_POINT
        && value == OWN_LAUNCHER_VALUE
}
