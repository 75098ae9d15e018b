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
pub mod schema;
pub mod server;
pub mod snapshot;
pub mod startup;
pub mod surface;
pub mod toolset;
pub mod transport;
