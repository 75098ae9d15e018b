//! The fixed bounds and names that several parts of the tool surface state alike: the
//! most repetitions of a flag, the longest string value and tool name, the names
//! generated tools never take, and the prefix of the operator's per-tool variables. They
//! sit below `error`, `argv`, `schema` and `surface`, which quote them, so that none of
//! those needs another for a constant. Pure.

/// Most repetitions of a count or append_const flag.
pub const MAX_REPEAT: u64 = 16;
/// Longest accepted string value.
pub const MAX_STRING: u64 = 32 * 1024;
/// The longest tool name served: 60 characters (the most some clients allow for a server
/// prefix and a tool name together) minus a typical `mcp__<server>__` prefix.
pub const MAX_NAME: usize = 48;
/// Names generated tools may never take.
pub const RESERVED_NAMES: [&str; 2] = ["conda_execute", "conda_cli_command"];
/// The prefix of the operator's per-tool override variables (`CCM_MCP_TOOL_<TOOL>_NAME`, …).
pub const TOOL_VAR_PREFIX: &str = "CCM_MCP_TOOL_";
