//! A finished execution as a tool result: the [`ExecutionResult`] (the type the tools'
//! output schema is derived from) as `structuredContent` and as text, after a one-line
//! summary; `isError` when conda failed, timed out, was cancelled or declined a prompt.

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::Value;

use crate::host::exec;
use crate::model::catalog::canonical_json;
use crate::tools::result::ExecutionResult;

const RESTART_SUFFIX: &str = ". Restart the MCP server to refresh conda tools";

/// The 10-field result, its summary and its serialized copy.
pub fn execution_result(outcome: &exec::Outcome, restart_required: bool) -> CallToolResult {
    let stdout = decode(&outcome.stdout, outcome.stdout_truncated);
    let stderr = decode(&outcome.stderr, outcome.stderr_truncated);
    let parsed_json = if outcome.stdout_truncated || stdout.trim().is_empty() {
        Value::Null
    } else {
        // serde_json rejects NaN/Infinity literals and numbers out of f64 range.
        serde_json::from_str::<Value>(&stdout).unwrap_or(Value::Null)
    };
    let structured = ExecutionResult {
        exit_code: outcome.exit_code,
        stdout,
        stderr,
        duration_ms: outcome.duration.as_millis() as u64,
        parsed_json,
        timed_out: outcome.timed_out,
        cancelled: outcome.cancelled,
        stdout_truncated: outcome.stdout_truncated,
        stderr_truncated: outcome.stderr_truncated,
        restart_required,
    }
    .to_value();
    let declined = declined_prompt(outcome);
    let mut summary = if declined {
        NOT_CONFIRMED.to_owned()
    } else if outcome.timed_out {
        "conda command timed out".to_owned()
    } else if outcome.cancelled {
        "conda command was cancelled".to_owned()
    } else {
        format!(
            "conda command exited with {}",
            outcome.exit_code.unwrap_or(-1)
        )
    };
    let failed = outcome.exit_code != Some(0) || outcome.timed_out || outcome.cancelled || declined;
    if let Some(limit) = outcome.limit.as_deref().filter(|_| failed) {
        summary.push_str(&format!(" ({limit})"));
    }
    if restart_required && !outcome.timed_out && !outcome.cancelled {
        summary.push_str(RESTART_SUFFIX);
    }
    let content = vec![
        ContentBlock::text(summary),
        ContentBlock::text(canonical_json(&structured)),
    ];
    let mut result = if failed {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    };
    result.structured_content = Some(structured);
    result
}

/// The summary of a run that ended at a declined confirmation prompt (stable code first).
pub const NOT_CONFIRMED: &str = "not_confirmed: conda asked for confirmation, read no answer \
     and declined (its default is no), so nothing was done. Call the tool again with \
     `yes: true` (conda's --yes) to confirm";

/// conda's abort at a default-no confirmation prompt: `confirm_yn` raises
/// `CondaSystemExit("Exiting.")` when the answer (end of input here: stdin is empty) is
/// "no", and conda prints it as `CondaSystemExit: Exiting.` on stderr and exits 0.
fn declined_prompt(outcome: &exec::Outcome) -> bool {
    outcome.exit_code == Some(0)
        && !outcome.timed_out
        && !outcome.cancelled
        && !outcome.stderr_truncated
        && outcome
            .stderr
            .split(|b| *b == b'\n')
            .map(|line| line.trim_ascii())
            .rfind(|line| !line.is_empty())
            == Some(b"CondaSystemExit: Exiting.".as_slice())
}

/// UTF-8 with replacement; a multi-byte sequence cut by truncation is dropped.
fn decode(bytes: &[u8], truncated: bool) -> String {
    if truncated
        && let Err(error) = std::str::from_utf8(bytes)
        && error.error_len().is_none()
    {
        return String::from_utf8_lossy(&bytes[..error.valid_up_to()]).into_owned();
    }
    String::from_utf8_lossy(bytes).into_owned()
}
