//! `ccm tools`: what an agent will get from this target, for a human to check before
//! wiring it up — every tool under its served name, whether it is listed, the startup
//! options it needs, its compiler, a one-line summary, and what it costs in context: the
//! bytes of its descriptor as `tools/list` sends it (compact JSON), of which the
//! model-visible bytes (name, description and inputSchema: what clients show a model;
//! [`model_bytes`]) and the rest (title, outputSchema, annotations, `_meta`: read by
//! clients, not shown to the model), and an estimated token count of the model-visible
//! bytes ([`tokens`]: bytes / 4, rounded up), with the totals of the listed tools. Pure;
//! no I/O.

use serde::Serialize;
use serde_json::Value;

use crate::tools::surface::Applied;
use crate::tools::toolset::{
    COMPLETION_TOOL, EXEC_SENTENCE, EXECUTE_TOOL, Toolset, WRITE_SENTENCE,
};

/// One tool as an agent will see it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Row {
    /// The name clients see and call (after `CCM_MCP_TOOL_*_NAME`).
    pub name: String,
    /// The canonical name (`conda_<path>`).
    pub canonical: String,
    /// Listed by `tools/list` (false for `CCM_HIDDEN_TOOLS`).
    pub listed: bool,
    /// `read-only`, `write`, `exec` or `write+exec`: the startup options the tool needs for
    /// what it is for (a dry run or a read-only option may need less; see the policy).
    pub access: &'static str,
    /// `baked` or `generic` (`builtin` for the server's own tools).
    pub compiler: &'static str,
    pub summary: String,
    /// Where the policy's verdict for this command comes from (the table entry's reason
    /// with its source line, the operator's `--classify`, or the strict default).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<&'static str>,
    /// Bytes of the descriptor as `tools/list` sends it (compact JSON, operator's surface
    /// applied).
    pub bytes: usize,
    /// Of those, what clients show the model ([`model_bytes`]).
    pub model_bytes: usize,
    /// The rest (`title`, `outputSchema`, `annotations`, `_meta`): `bytes - model_bytes`.
    pub other_bytes: usize,
    /// Estimated tokens of the model-visible bytes ([`tokens`]).
    pub tokens: usize,
}

/// What the listed tools cost together.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Total {
    /// Listed tools.
    pub tools: usize,
    /// Bytes of the `tools` array of a `tools/list` result (compact JSON): every listed
    /// descriptor, the commas and brackets between them.
    pub bytes: usize,
    /// What clients show the model of the listed tools: the sum of their [`Row::model_bytes`].
    pub model_bytes: usize,
    /// The rest of the listed descriptors: the sum of their [`Row::other_bytes`].
    pub other_bytes: usize,
    /// The largest model-visible size of one listed tool.
    pub largest_model_bytes: usize,
    /// Estimated tokens of the model-visible bytes ([`tokens`]).
    pub tokens: usize,
    /// How `tokens` is estimated.
    pub estimator: &'static str,
}

/// The `ccm tools --json` document.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Report {
    pub tools: Vec<Row>,
    pub total: Total,
}

/// The stated token estimate: one token per 4 bytes, rounded up (JSON of English text and
/// identifiers runs at about 3.5–4.5 bytes per token in common tokenizers).
pub const ESTIMATOR: &str = "bytes / 4, rounded up";

/// Estimated tokens of `bytes` bytes ([`ESTIMATOR`]).
pub fn tokens(bytes: usize) -> usize {
    bytes.div_ceil(4)
}

/// Bytes of a value as compact JSON.
fn compact_bytes(value: &Value) -> usize {
    serde_json::to_vec(value).map_or(0, |bytes| bytes.len())
}

/// The descriptor keys clients show a model (Claude Code, VS Code, Codex, Gemini CLI and
/// Goose show neither `title`, `outputSchema`, `annotations` nor `_meta`).
pub const MODEL_KEYS: [&str; 3] = ["name", "description", "inputSchema"];

/// What clients show the model of one descriptor: the compact JSON of an object holding
/// only its [`MODEL_KEYS`], in the descriptor's order.
pub fn model_bytes(descriptor: &Value) -> usize {
    let Some(map) = descriptor.as_object() else {
        return compact_bytes(descriptor);
    };
    let seen: serde_json::Map<String, Value> = map
        .iter()
        .filter(|(key, _)| MODEL_KEYS.contains(&key.as_str()))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    compact_bytes(&Value::Object(seen))
}

/// The rows and their total, from the served tool list (`applied`: the selected tools
/// through the policy-shaped listing, folding and the operator's surface).
pub fn report(toolset: &Toolset, applied: &Applied) -> Report {
    let tools = rows(toolset, applied);
    let listed: Vec<&Row> = tools.iter().filter(|r| r.listed).collect();
    // `[` + descriptors joined by `,` + `]`.
    let bytes = 2 + listed.iter().map(|r| r.bytes).sum::<usize>() + listed.len().saturating_sub(1);
    let model_bytes = listed.iter().map(|r| r.model_bytes).sum::<usize>();
    let total = Total {
        tools: listed.len(),
        bytes,
        model_bytes,
        other_bytes: listed.iter().map(|r| r.other_bytes).sum(),
        largest_model_bytes: listed.iter().map(|r| r.model_bytes).max().unwrap_or(0),
        tokens: tokens(model_bytes),
        estimator: ESTIMATOR,
    };
    Report { tools, total }
}

/// The rows of the served tool list.
pub fn rows(toolset: &Toolset, applied: &Applied) -> Vec<Row> {
    let mut rows = Vec::new();
    for (descriptors, listed) in [(&applied.listed, true), (&applied.unlisted, false)] {
        for descriptor in descriptors {
            let name = descriptor["name"].as_str().unwrap_or_default().to_owned();
            let canonical = applied
                .routes
                .get(&name)
                .cloned()
                .unwrap_or_else(|| name.clone());
            let (access, compiler, policy) = match toolset.get(&canonical) {
                Some(tool) => (
                    access(tool.class.requires_write, tool.class.requires_exec),
                    tool.compiler.label(),
                    Some(toolset.rules.source(&tool.path)),
                ),
                None if canonical == EXECUTE_TOOL => ("exec", "builtin", None),
                None if canonical == COMPLETION_TOOL => ("read-only", "builtin", None),
                None => ("write", "generic", None),
            };
            let bytes = compact_bytes(descriptor);
            let model = model_bytes(descriptor);
            rows.push(Row {
                name,
                canonical,
                listed,
                access,
                compiler,
                summary: summary(descriptor),
                policy,
                bytes,
                model_bytes: model,
                other_bytes: bytes.saturating_sub(model),
                tokens: tokens(model),
            });
        }
    }
    rows
}

fn access(write: bool, exec: bool) -> &'static str {
    match (write, exec) {
        (false, false) => "read-only",
        (true, false) => "write",
        (false, true) => "exec",
        (true, true) => "write+exec",
    }
}

/// The description's first line, without the policy sentences.
fn summary(descriptor: &Value) -> String {
    let text = descriptor["description"].as_str().unwrap_or_default();
    let first = text.trim().lines().next().unwrap_or("");
    first
        .replace(WRITE_SENTENCE.trim(), "")
        .replace(EXEC_SENTENCE.trim(), "")
        .trim()
        .to_owned()
}

/// The report as an aligned text table, the total last.
pub fn table(report: &Report) -> String {
    let rows = &report.tools;
    let width = |f: fn(&Row) -> usize, header: &str| {
        rows.iter().map(f).max().unwrap_or(0).max(header.len())
    };
    let name_w = width(|r| r.name.len() + usize::from(!r.listed) * 9, "tool");
    let access_w = width(|r| r.access.len(), "access");
    let compiler_w = width(|r| r.compiler.len(), "compiler");
    let model_w = report
        .total
        .model_bytes
        .to_string()
        .len()
        .max("model".len());
    let other_w = report.total.other_bytes.to_string().len().max("rest".len());
    let tokens_w = report.total.tokens.to_string().len().max("tokens".len());
    let mut out = format!(
        "{:name_w$}  {:access_w$}  {:compiler_w$}  {:>model_w$}  {:>tokens_w$}  {:>other_w$}  summary\n",
        "tool", "access", "compiler", "model", "tokens", "rest"
    );
    for row in rows {
        let name = if row.listed {
            row.name.clone()
        } else {
            format!("{} (hidden)", row.name)
        };
        let summary: String = row.summary.chars().take(100).collect();
        out.push_str(&format!(
            "{name:name_w$}  {:access_w$}  {:compiler_w$}  {:>model_w$}  {:>tokens_w$}  {:>other_w$}  {summary}\n",
            row.access, row.compiler, row.model_bytes, row.tokens, row.other_bytes
        ));
    }
    let total = &report.total;
    out.push_str(&format!(
        "total: {} listed tools; the model reads {} bytes (name, description, inputSchema; ~{} tokens, {}; largest tool {} bytes); the rest (title, outputSchema, annotations, _meta) {} bytes; tools/list {} bytes\n",
        total.tools,
        total.model_bytes,
        total.tokens,
        total.estimator,
        total.largest_model_bytes,
        total.other_bytes,
        total.bytes
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_bytes_count_only_what_the_model_reads() {
        let descriptor = serde_json::json!({
            "name": "conda_x",
            "title": "conda x",
            "description": "Do x.",
            "inputSchema": {"type": "object"},
            "outputSchema": {"type": "object", "properties": {}},
            "annotations": {"readOnlyHint": true},
            "_meta": {"k": [1, 2]},
        });
        let seen = r#"{"description":"Do x.","inputSchema":{"type":"object"},"name":"conda_x"}"#;
        assert_eq!(model_bytes(&descriptor), seen.len());
        assert!(compact_bytes(&descriptor) > seen.len() + 60);
    }

    #[test]
    fn tokens_are_bytes_over_four_rounded_up() {
        assert_eq!([0, 1, 4, 5, 8, 1001].map(tokens), [0, 1, 1, 2, 2, 251]);
    }
}
