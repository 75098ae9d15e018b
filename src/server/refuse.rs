//! Refusals an agent fixes in one step.
//!
//! The operator's settings refuse a call (a grant it lacks, `--allow-paths`,
//! `--write-envs`, `--tools`, the audit log) with one shape per revision: from 2025-11-25
//! on (the revisions where input errors are tool results) an `isError` tool result whose
//! text starts with a stable word ([`Reason`]: `needs_allow_write`, `outside_write_envs`,
//! …), the word also in `_meta["conda-cli-mcp/refused"]`; before, the JSON-RPC error
//! -32600 with the fixed message (and the word in its `data`). Every message says that the
//! operator sets the flag in the client's configuration of this MCP server. Generated
//! tools and `conda_execute` refuse alike; a restricted tool's call outside the form it was
//! listed with is a grant refusal when the policy refuses its argv.
//!
//! Names an agent got wrong are answered with the closest valid ones
//! ([`crate::tools::suggest`]): an unexpected property with the closest property of the
//! schema the session was shown and up to ten valid names, an unknown tool with the
//! closest listed tools. Only names of the server's own are written; the wrong name is
//! echoed only where the echo rule allows it (a property name, clipped and escaped).

use std::borrow::Cow;

use rmcp::ErrorData;
use rmcp::model::{CallToolResult, ContentBlock, MetaObject, Tool as McpTool};
use serde_json::{Value, json};

use crate::tools::layout::Layout;
use crate::tools::schema::{Invalid, Keyword};
use crate::tools::suggest;

/// The result `_meta` key of a policy refusal: `{"reason": <stable word>}`.
pub(super) const META_REFUSED: &str = "conda-cli-mcp/refused";

/// How a tool call ends when it is not a result.
pub(super) enum Refusal {
    Protocol(ErrorData),
    /// Invalid arguments (-32602): a JSON-RPC error before 2025-11-25, an `isError`
    /// result the model can read from 2025-11-25 on.
    Arguments(ErrorData),
    /// An `isError` result whose text starts with a stable code, or a failed dry run's
    /// result: over a capacity limit, or not confirmed (`--confirm-writes`); nothing ran.
    Busy(CallToolResult),
    /// The client cancelled: no response is sent.
    Cancelled,
    /// The person must confirm first (session-less revision): the question goes back.
    InputRequired(rmcp::model::InputRequiredResult),
    /// The operator's settings refuse the call ([`policy`]): the JSON-RPC error -32600
    /// before 2025-11-25, an `isError` result starting with the stable `reason` from
    /// 2025-11-25 on.
    Policy {
        reason: String,
        error: ErrorData,
    },
}

impl From<ErrorData> for Refusal {
    fn from(error: ErrorData) -> Self {
        Refusal::Protocol(error)
    }
}

/// Invalid params (-32602) with a fixed message.
pub(super) fn invalid_params(message: impl Into<Cow<'static, str>>) -> ErrorData {
    ErrorData::invalid_params(message, None)
}

/// A validation error as invalid arguments: its message, `data.path` and `data.keyword`.
pub(super) fn invalid_arguments(error: &Invalid) -> Refusal {
    Refusal::Arguments(ErrorData::invalid_params(
        error.to_string(),
        Some(json!({"path": error.path, "keyword": error.keyword})),
    ))
}

/// The fixed answer to anything unexpected (-32603).
pub(super) fn internal() -> ErrorData {
    ErrorData::internal_error("Internal error", None)
}

/// The stable word a policy refusal starts with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Reason {
    /// Grants the call needs: `needs_allow_write`, `needs_allow_write_and_allow_exec`, …
    Needs(Vec<&'static str>),
    /// A path outside `--allow-paths`.
    OutsideAllowedPaths,
    /// A target outside `--write-envs` (or none it can check).
    OutsideWriteEnvs,
    /// `conda_execute` with a command whose tool `--tools` does not select.
    NotSelected,
    /// A path that is the audit log.
    NamesAuditLog,
    /// A bounded write on a kernel without `fs.protected_hardlinks`.
    LinksUnprotected,
    /// A path that is a FIFO, socket, device or `/proc` entry conda could wait on.
    SpecialFile,
}

impl Reason {
    /// The stable word.
    pub(super) fn word(&self) -> String {
        match self {
            Reason::Needs(flags) => {
                let flags: Vec<String> = flags
                    .iter()
                    .map(|f| f.trim_start_matches('-').replace('-', "_"))
                    .collect();
                format!("needs_{}", flags.join("_and_"))
            }
            Reason::OutsideAllowedPaths => "outside_allowed_paths".into(),
            Reason::OutsideWriteEnvs => "outside_write_envs".into(),
            Reason::NotSelected => "tool_not_selected".into(),
            Reason::NamesAuditLog => "names_audit_log".into(),
            Reason::LinksUnprotected => "hardlinks_unprotected".into(),
            Reason::SpecialFile => "names_special_file".into(),
        }
    }

    /// Where the operator changes what refused the call (`None`: nothing to change).
    fn hint(&self) -> Option<String> {
        let flags = match self {
            Reason::Needs(flags) => flags.join(" and "),
            Reason::OutsideAllowedPaths => "--allow-paths".into(),
            Reason::OutsideWriteEnvs => "--write-envs".into(),
            Reason::NotSelected => "--tools".into(),
            Reason::NamesAuditLog | Reason::LinksUnprotected | Reason::SpecialFile => {
                return None;
            }
        };
        Some(hint(&flags))
    }
}

/// Where the operator sets `flags`: the sentence every policy refusal ends with.
pub(super) fn hint(flags: &str) -> String {
    format!("The operator sets {flags} in the client's MCP server configuration.")
}

/// A policy refusal: `message` is the fixed text (it names the flag), completed with where
/// the operator sets it.
pub(super) fn policy(reason: Reason, message: &str) -> Refusal {
    let text = match reason.hint() {
        Some(hint) if message.ends_with('.') => format!("{message} {hint}"),
        Some(hint) => format!("{message}. {hint}"),
        None => message.to_owned(),
    };
    let word = reason.word();
    Refusal::Policy {
        error: ErrorData::invalid_request(text, Some(json!({"reason": word}))),
        reason: word,
    }
}

/// The tool result of a policy refusal (2025-11-25 and later): `isError`, the stable word
/// and the message as the only text, the word in `_meta`; nothing ran, so no
/// `structuredContent`.
pub(super) fn as_result(reason: &str, error: ErrorData) -> CallToolResult {
    let text = format!("{reason}: {}", error.message);
    let mut result = CallToolResult::error(vec![ContentBlock::text(text)]);
    let mut meta = MetaObject::default();
    meta.0
        .insert(META_REFUSED.into(), json!({"reason": reason}));
    result.meta = Some(meta);
    result
}

/// An unexpected property, with the closest property of the schema the session was shown
/// (`listed`: its `inputSchema`) and up to ten valid names.
pub(super) fn suggest_property(
    invalid: Invalid,
    listed: Option<&Value>,
    layout: Option<&Layout>,
) -> Invalid {
    if invalid.keyword != Keyword::AdditionalProperties || invalid.path != "$" {
        return invalid;
    }
    let (Some(schema), Some(wrong)) = (listed, invalid.property.clone()) else {
        return invalid;
    };
    let candidates = suggest::properties(schema, layout);
    let names = suggest::closest(&wrong, &candidates, "valid properties");
    if names.is_empty() {
        return invalid;
    }
    let rule = invalid.rule();
    invalid.expecting(format!("{rule}; {names}"))
}

/// "Unknown tool" with the closest listed tools.
pub(super) fn unknown_tool(requested: &str, listed: &[McpTool]) -> Refusal {
    let candidates = suggest::tools(listed.iter().map(|t| t.name.as_ref()));
    let names = suggest::closest(requested, &candidates, "listed tools");
    let message = if names.is_empty() {
        "Unknown tool".to_owned()
    } else {
        format!("Unknown tool; {names}")
    };
    Refusal::Protocol(ErrorData::invalid_params(message, None))
}
