//! A finished execution as a tool result: the [`ExecutionResult`] (the type the tools'
//! output schema is derived from) as `structuredContent` and as text, after a one-line
//! summary; `isError` when conda failed, timed out, was cancelled or declined a prompt.
//! When stdout is the JSON document (`parsed_json` is set), it is carried once: `stdout`
//! is empty and the result's `_meta` says so ([`META_STDOUT`]). conda's fetch records
//! are taken out of stdout before it is parsed, and the summary of a transaction says what
//! it linked and unlinked where.

use rmcp::ErrorData;
use rmcp::model::{CallToolResult, ContentBlock, MetaObject};
use serde_json::Value;

use crate::host::exec;
use crate::model::catalog::canonical_json;
use crate::tools::execution_result::ExecutionResult;
use crate::tools::records;

/// The result `_meta` key that says where stdout went, and its one value.
pub(crate) const META_STDOUT: &str = "conda-cli-mcp/stdout";
pub(crate) const STDOUT_MOVED: &str = "moved-to-parsed_json";
/// The result `_meta` key saying whether the call was forked from the read zygote
/// (`true`) or started a new interpreter (`false`); absent when warm reads are off.
pub(crate) const META_WARM: &str = "conda-cli-mcp/warm";
/// The result `_meta` key naming the working directory a generated tool's call ran in,
/// when one was chosen (`ccm_cwd`, or the client's first root).
pub(crate) const META_WORKDIR: &str = "conda-cli-mcp/cwd";

const RESTART_SUFFIX: &str = ". Restart the MCP server to refresh conda tools";

/// The 10-field result, its summary and its serialized copy. With `move_json`, stdout
/// that parses as the JSON document is carried once, in `parsed_json`.
pub fn execution_result(
    outcome: &exec::Outcome,
    restart_required: bool,
    move_json: bool,
) -> CallToolResult {
    // conda's fetch records (NUL-terminated, before the document) are progress, not
    // output: taken out first, so that what remains is the document.
    let stdout = if move_json {
        decode(&records::strip(&outcome.stdout).0, outcome.stdout_truncated)
    } else {
        decode(&outcome.stdout, outcome.stdout_truncated)
    };
    let stderr = decode(&outcome.stderr, outcome.stderr_truncated);
    let parsed_json = if outcome.stdout_truncated || stdout.trim().is_empty() {
        Value::Null
    } else {
        // serde_json rejects NaN/Infinity literals and numbers out of f64 range.
        serde_json::from_str::<Value>(&stdout).unwrap_or(Value::Null)
    };
    // The document is carried once: a client that needs the text re-serializes it.
    let moved = move_json && !parsed_json.is_null();
    let transaction = records::transaction_summary(&parsed_json);
    let structured = ExecutionResult {
        exit_code: outcome.exit_code,
        stdout: if moved { String::new() } else { stdout },
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
    let failed = outcome.exit_code != Some(0) || outcome.timed_out || outcome.cancelled || declined;
    let summary = summary(
        outcome,
        &structured,
        transaction,
        declined,
        failed,
        restart_required,
    );
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
    if moved || outcome.warm.is_some() {
        let mut meta = MetaObject::default();
        if moved {
            meta.0.insert(META_STDOUT.into(), STDOUT_MOVED.into());
        }
        if let Some(warm) = outcome.warm {
            meta.0.insert(META_WARM.into(), warm.into());
        }
        result.meta = Some(meta);
    }
    result
}

/// The first text block: what happened, in a line — the stable code of a declined prompt,
/// the exit status, the timeout or the cancellation; a transaction's changes; conda's
/// error in its own words; truncation; the limit a failed run probably hit; that a restart
/// is required.
fn summary(
    outcome: &exec::Outcome,
    structured: &Value,
    transaction: Option<String>,
    declined: bool,
    failed: bool,
    restart_required: bool,
) -> String {
    let mut summary = if declined {
        NOT_CONFIRMED.to_owned()
    } else if outcome.timed_out {
        format!(
            "conda command timed out after {:.1} s and was stopped (the call's timeout: \
             ccm_timeout_seconds, at most the server's --timeout)",
            outcome.duration.as_secs_f64()
        )
    } else if outcome.cancelled {
        "conda command was cancelled".to_owned()
    } else {
        format!(
            "conda command exited with {}",
            outcome.exit_code.unwrap_or(-1)
        )
    };
    if let Some(transaction) = transaction {
        summary.push_str(": ");
        summary.push_str(&transaction);
    }
    // What went wrong, in conda's own words.
    if failed
        && !declined
        && let Some(error) = conda_error(&structured["parsed_json"], &structured["stderr"])
    {
        summary.push_str(": ");
        summary.push_str(&error);
    }
    for (stream, truncated, kept) in [
        ("stdout", outcome.stdout_truncated, outcome.stdout.len()),
        ("stderr", outcome.stderr_truncated, outcome.stderr.len()),
    ] {
        if truncated {
            summary.push_str(&format!(
                "; {stream} truncated to its first {kept} bytes (the server's --output-limit-bytes)"
            ));
        }
    }
    if let Some(limit) = outcome.limit.as_deref().filter(|_| failed) {
        summary.push_str(&format!(" ({limit})"));
    }
    if restart_required && !outcome.timed_out && !outcome.cancelled {
        summary.push_str(RESTART_SUFFIX);
    }
    summary
}

/// Most characters of conda's error line in a summary.
const ERROR_LIMIT: usize = 300;

/// conda's error in its own words, one line: the exception name and the first line of its
/// message from conda's JSON error document (`exception_name`, `message`), else the last
/// `SomeError: text` line of stderr (conda's report, or a traceback's last line), else
/// argparse's `conda: error: …` line. Clipped, control characters escaped.
fn conda_error(parsed: &Value, stderr: &Value) -> Option<String> {
    let from_json = || {
        let name = parsed.get("exception_name")?.as_str()?;
        let message = parsed
            .get("message")
            .or_else(|| parsed.get("error"))?
            .as_str()?;
        let first = message.lines().find(|l| !l.trim().is_empty())?.trim();
        let first = first
            .strip_prefix(name)
            .and_then(|rest| rest.strip_prefix(": "))
            .unwrap_or(first);
        Some(format!("{name}: {first}"))
    };
    let stderr = stderr.as_str().unwrap_or_default();
    let from_stderr = || {
        stderr
            .lines()
            .map(str::trim)
            .rfind(|line| {
                line.split_once(": ")
                    .is_some_and(|(name, text)| exception_name(name) && !text.trim().is_empty())
            })
            .map(str::to_owned)
    };
    let from_argparse = || {
        stderr
            .lines()
            .map(str::trim)
            .find(|line| {
                line.split_once(": error: ")
                    .is_some_and(|(prog, _)| !prog.is_empty() && !prog.contains(' '))
            })
            .map(str::to_owned)
    };
    let line = from_json().or_else(from_stderr).or_else(from_argparse)?;
    Some(crate::tools::schema::clip(&line, ERROR_LIMIT))
}

/// Whether a word is an exception's name as Python prints it: CamelCase (a capital first,
/// two or more capitals, a lower-case letter), letters, digits and dots only
/// (`PackagesNotFoundError`, `EnvironmentNameNotFound`, `json.JSONDecodeError`; not
/// `WARNING` or `Note`).
fn exception_name(word: &str) -> bool {
    let last = word.rsplit('.').next().unwrap_or(word);
    last.chars().next().is_some_and(char::is_uppercase)
        && last.chars().filter(|c| c.is_uppercase()).count() >= 2
        && last.chars().any(char::is_lowercase)
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
}

/// The result `_meta` key of an invalid-arguments result: the `path` and `keyword` a
/// JSON-RPC -32602 error carries in its `data`, so that clients can still match them.
pub(crate) const META_INVALID: &str = "conda-cli-mcp/invalid_arguments";

/// Invalid arguments as a tool result the model can read and correct from (protocol
/// revision 2025-11-25 and later): `isError`, the error's message as the only text, its
/// data under [`META_INVALID`]; no `structuredContent` (nothing ran).
pub(crate) fn invalid_arguments(error: ErrorData) -> CallToolResult {
    let mut result = CallToolResult::error(vec![ContentBlock::text(error.message.into_owned())]);
    let mut meta = MetaObject::default();
    meta.0
        .insert(META_INVALID.into(), error.data.unwrap_or(Value::Null));
    result.meta = Some(meta);
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn conda_errors_in_its_own_words() {
        let none = Value::Null;
        let stderr = |s: &str| Value::String(s.to_owned());
        assert_eq!(
            conda_error(
                &none,
                &stderr(
                    "\nPackagesNotFoundError: The following packages are not available from \
                     current channels:\n\n  - nope\n\nCurrent channels:\n\n  - x\n"
                )
            )
            .as_deref(),
            Some(
                "PackagesNotFoundError: The following packages are not available from current \
                 channels:"
            )
        );
        let document = json!({
            "exception_name": "EnvironmentLocationNotFound",
            "message": "Not a conda environment: /x\nmore",
            "error": "EnvironmentLocationNotFound: Not a conda environment: /x",
        });
        assert_eq!(
            conda_error(&document, &stderr("")).as_deref(),
            Some("EnvironmentLocationNotFound: Not a conda environment: /x")
        );
        // A traceback: its last line.
        let traceback = "# >>>>>>>> ERROR REPORT <<<<<<<<\nTraceback (most recent call last):\n  \
                         File \"x.py\", line 1\nKeyError: 'a'\nValueError: bad value\n";
        assert_eq!(
            conda_error(&none, &stderr(traceback)).as_deref(),
            Some("ValueError: bad value")
        );
        assert_eq!(
            conda_error(
                &none,
                &stderr("usage: conda\nconda: error: argument -x: bad\n")
            )
            .as_deref(),
            Some("conda: error: argument -x: bad")
        );
        for quiet in [
            "WARNING: something\n",
            "Note: x\n",
            "Current channels:\n",
            "",
        ] {
            assert_eq!(conda_error(&none, &stderr(quiet)), None, "{quiet}");
        }
        // Escaped, bounded.
        let long = format!("SomeError: {}\u{1b}", "x".repeat(400));
        let said = conda_error(&none, &stderr(&long)).unwrap();
        assert!(said.chars().count() <= ERROR_LIMIT + 1 && !said.contains('\u{1b}'));
    }
}
