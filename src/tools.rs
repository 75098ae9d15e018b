//! From a catalog to the tools an agent calls: which arguments become input properties
//! (`layout`), their JSON Schemas and validation (`schema`), the argv compilers (`argv`),
//! the policy on the final argv (`policy`), the assembled toolset (`toolset`), the
//! policy-shaped listing (`listing`), the operator's surface (`surface`), `ccm tools` (`report`) and `conda_cli_command`
//! payloads (`completion`), and the execution result every executing tool returns
//! (`execution_result`, its output schema derived from the same type). Pure: no I/O, no environment.

pub mod argv;
pub(crate) mod bounds;
pub(crate) mod completion;
pub(crate) mod error;
pub(crate) mod execution_result;
pub mod layout;
pub mod listing;
pub mod policy;
pub(crate) mod records;
pub mod report;
pub mod schema;
pub mod select;
pub(crate) mod suggest;
pub mod surface;
pub mod toolset;
