//! The plan shown to the person (pure): from conda's `--dry-run --json` document when
//! there is one (target prefix, packages to link and unlink, download size), and always
//! the exact command and working directory. Every piece of text that comes from the call
//! or from conda is escaped and clipped, so that a package or path name cannot disguise
//! the plan with control or bidi characters.

use std::path::Path;

use serde_json::Value;

use crate::model::catalog::Command;
use crate::tools::schema::clip;

/// The refusal when the client cannot be asked (fail closed).
pub const UNAVAILABLE: &str = "confirmation_unavailable: this server asks the user to confirm \
    every write and exec call (--confirm-writes), and this client cannot be asked (it did not \
    declare the elicitation capability in form mode, or the request is session-less); \
    nothing ran.";
/// The result when the person declined or cancelled.
pub const DECLINED: &str = "declined_by_user: the user did not confirm the plan; nothing ran.";
/// The result when nobody answered in time.
pub const TIMED_OUT: &str = "confirmation_timed_out: the user did not answer within \
    --confirm-timeout; nothing ran.";

/// Most characters of one shown item (a package, a path, an argument).
const ITEM: usize = 200;
/// Most packages listed per action.
const LIST: usize = 50;

/// Whether the plan comes from a dry run: the command has `--dry-run` and the argv has
/// no `--` (after which appended options would be arguments).
pub fn dry_runnable(root: Option<&Command>, argv: &[String]) -> bool {
    !argv.iter().any(|t| t == "--") && super::has_dry_run(root, argv)
}

/// The question's text.
pub fn message(argv: &[String], cwd: Option<&Path>, dry: Option<&Value>) -> String {
    let mut lines = vec!["Allow conda to run this? Nothing runs unless you accept.".to_owned()];
    let command: Vec<String> = argv.iter().map(|a| shown(a)).collect();
    lines.push(format!("Command: conda {}", command.join(" ")));
    if let Some(cwd) = cwd {
        lines.push(format!(
            "Working directory: {}",
            shown(&cwd.to_string_lossy())
        ));
    }
    if let Some(dry) = dry {
        lines.extend(dry_lines(dry));
    }
    lines.join("\n")
}

fn shown(text: &str) -> String {
    clip(text, ITEM)
}

/// The lines a dry run's JSON document gives (conda's `actions` object; `PREFIX`,
/// `LINK`, `UNLINK`, `FETCH`).
fn dry_lines(dry: &Value) -> Vec<String> {
    let actions: Vec<&Value> = match dry.get("actions") {
        Some(Value::Array(items)) => items.iter().collect(),
        Some(object @ Value::Object(_)) => vec![object],
        _ => Vec::new(),
    };
    let prefix = actions
        .iter()
        .find_map(|a| a.get("PREFIX").and_then(Value::as_str))
        .or_else(|| dry.get("prefix").and_then(Value::as_str));
    let mut lines = Vec::new();
    if actions.is_empty() {
        lines.push("Dry run: conda reported no package actions.".to_owned());
    }
    if let Some(prefix) = prefix {
        lines.push(format!("Target environment: {}", shown(prefix)));
    }
    for (key, title) in [("UNLINK", "Remove"), ("LINK", "Install")] {
        let items: Vec<&Value> = actions
            .iter()
            .filter_map(|a| a.get(key).and_then(Value::as_array))
            .flatten()
            .collect();
        if items.is_empty() {
            continue;
        }
        lines.push(format!("{title} ({}):", items.len()));
        lines.extend(items.iter().take(LIST).map(|p| format!("  {}", package(p))));
        if items.len() > LIST {
            lines.push(format!("  … and {} more", items.len() - LIST));
        }
    }
    let download: u64 = actions
        .iter()
        .filter_map(|a| a.get("FETCH").and_then(Value::as_array))
        .flatten()
        .filter_map(|p| p.get("size").and_then(Value::as_u64))
        .sum();
    if download > 0 {
        lines.push(format!("Download: {}", size(download)));
    }
    lines
}

/// `name version (channel)` of a package record, or the record's string form.
fn package(record: &Value) -> String {
    if let Some(text) = record.as_str() {
        return shown(text);
    }
    let field = |key: &str| record.get(key).and_then(Value::as_str).unwrap_or("?");
    let channel = record
        .get("channel")
        .and_then(Value::as_str)
        .or_else(|| record.get("base_url").and_then(Value::as_str))
        .unwrap_or("?");
    format!(
        "{} {} {} ({})",
        shown(field("name")),
        shown(field("version")),
        shown(field("build_string")),
        shown(channel)
    )
}

fn size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_dry_run_plan_lists_packages_escaped() {
        let dry = json!({"actions": {
            "PREFIX": "/envs/demo",
            "LINK": [
                {"name": "numpy", "version": "2.0", "build_string": "py_0", "channel": "local", "size": 1},
                {"name": "evil\u{202e}gpj.exe", "version": "1\n2", "build_string": "0", "channel": "x"},
            ],
            "UNLINK": ["local::old-1.0-0"],
            "FETCH": [{"size": 2048}, {"size": 1024}],
        }, "dry_run": true});
        let argv = vec![
            "install".to_owned(),
            "-n".to_owned(),
            "demo\u{1b}[2J".to_owned(),
        ];
        let text = message(&argv, None, Some(&dry));
        assert!(text.contains("Target environment: /envs/demo"), "{text}");
        assert!(
            text.contains("Install (2):\n  numpy 2.0 py_0 (local)"),
            "{text}"
        );
        assert!(text.contains("Remove (1):\n  local::old-1.0-0"), "{text}");
        assert!(text.contains("Download: 3.0 KiB"), "{text}");
        assert!(
            !text.contains('\u{202e}') && !text.contains('\u{1b}'),
            "{text}"
        );
        assert!(text.contains("1\\n2"), "{text}");
        // Only the line breaks the plan puts there.
        assert_eq!(text.lines().count(), 9, "{text}");
    }

    #[test]
    fn without_a_dry_run_the_command_is_the_plan() {
        let argv = vec![
            "run".to_owned(),
            "-n".to_owned(),
            "x".to_owned(),
            "rm".to_owned(),
        ];
        let text = message(&argv, Some(Path::new("/work")), None);
        assert_eq!(
            text,
            "Allow conda to run this? Nothing runs unless you accept.\n\
             Command: conda run -n x rm\nWorking directory: /work"
        );
    }
}
