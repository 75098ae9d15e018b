//! `conda_cli_command`: answers from conda-completion's metadata.
//!
//! The helper reads the manifest through conda-completion's public API (this crate never
//! decodes MessagePack or rebuilds cache paths) and returns it converted to JSON together
//! with the manifest file's identity. [`Answer`] turns that document into the tool's
//! payload for one command path; the server caches the document and reuses it while the
//! manifest file and the target's plugin distributions are unchanged. Pure; no I/O.

use serde_json::{Map, Value, json};

/// Why a query could not be answered with a payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum QueryError {
    /// The path names no command of the manifest (-32602 "Unknown conda command path").
    UnknownCommand,
    /// The helper's document is not what it should be.
    InvalidMetadata,
}

/// The availability states of the completion metadata.
pub(crate) const AVAILABILITIES: [&str; 4] =
    ["available", "not_installed", "not_generated", "unavailable"];

/// Build the payload for `requested` from a helper document.
pub(crate) fn answer(document: &Value, requested: &[String]) -> Result<Value, QueryError> {
    let doc = document.as_object().ok_or(QueryError::InvalidMetadata)?;
    let availability = doc
        .get("availability")
        .and_then(Value::as_str)
        .filter(|a| AVAILABILITIES.contains(a))
        .ok_or(QueryError::InvalidMetadata)?;
    let hint = doc.get("hint").cloned().unwrap_or(Value::Null);
    if !(hint.is_null() || hint.is_string()) {
        return Err(QueryError::InvalidMetadata);
    }
    if availability != "available" {
        return Ok(json!({
            "availability": availability,
            "requested_command_path": requested,
            "resolved_command_path": null,
            "alias_target": null,
            "command": null,
            "manifest": null,
            "hint": hint,
        }));
    }
    let manifest = doc
        .get("manifest")
        .and_then(Value::as_object)
        .ok_or(QueryError::InvalidMetadata)?;
    let (resolved, alias_target) = resolve(manifest, requested)?;
    let command = command(manifest, &resolved)?;
    Ok(json!({
        "availability": "available",
        "requested_command_path": requested,
        "resolved_command_path": resolved,
        "alias_target": alias_target,
        "command": command,
        "manifest": manifest_info(doc, manifest),
        "hint": null,
    }))
}

/// The command path after conda-completion's aliases (`e` → `env`), and the alias's
/// target (null when the first part is no alias).
fn resolve(
    manifest: &Map<String, Value>,
    requested: &[String],
) -> Result<(Vec<String>, Value), QueryError> {
    let mut resolved: Vec<String> = requested.to_vec();
    let mut alias_target = Value::Null;
    if let Some(first) = requested.first()
        && let Some(target) = manifest.get("aliases").and_then(|a| a.get(first))
    {
        let target: Vec<String> = target
            .as_array()
            .ok_or(QueryError::InvalidMetadata)?
            .iter()
            .map(|t| {
                t.as_str()
                    .map(str::to_owned)
                    .ok_or(QueryError::InvalidMetadata)
            })
            .collect::<Result<_, _>>()?;
        resolved = target
            .iter()
            .cloned()
            .chain(requested[1..].iter().cloned())
            .collect();
        alias_target = json!(target);
    }
    Ok((resolved, alias_target))
}

/// The manifest's entry for a resolved command path.
fn command(manifest: &Map<String, Value>, resolved: &[String]) -> Result<Value, QueryError> {
    let empty = Map::new();
    let mut summary = Value::Null;
    let mut options = manifest.get("root_options").cloned().unwrap_or(json!([]));
    let mut positionals = json!([]);
    let mut exclusive_groups = json!([]);
    let mut subcommands = manifest
        .get("commands")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    for part in resolved {
        let command = subcommands
            .get(part)
            .and_then(Value::as_object)
            .ok_or(QueryError::UnknownCommand)?;
        summary = command.get("summary").cloned().unwrap_or(Value::Null);
        options = command.get("options").cloned().unwrap_or(json!([]));
        positionals = command.get("positionals").cloned().unwrap_or(json!([]));
        exclusive_groups = command
            .get("exclusive_groups")
            .cloned()
            .unwrap_or(json!([]));
        subcommands = command
            .get("subcommands")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
    }
    let subcommand_list: Vec<Value> = subcommands
        .iter()
        .map(|(name, c)| json!({"name": name, "summary": c.get("summary").cloned().unwrap_or(Value::Null)}))
        .collect();
    Ok(json!({
        "summary": summary,
        "options": options,
        "positionals": positionals,
        "subcommands": subcommand_list,
        "exclusive_groups": exclusive_groups,
    }))
}

/// What the payload says about the manifest itself (version, plugin hashes, staleness).
fn manifest_info(doc: &Map<String, Value>, manifest: &Map<String, Value>) -> Value {
    let stored = manifest
        .get("plugin_hash")
        .cloned()
        .filter(|h| h.as_str().is_some_and(|s| !s.is_empty()));
    let stored = stored.unwrap_or(Value::Null);
    let current = doc
        .get("current_plugin_hash")
        .cloned()
        .unwrap_or(Value::Null);
    let stale = match (&stored, &current) {
        (Value::String(a), Value::String(b)) => json!(a != b),
        _ => Value::Null,
    };
    json!({
        "version": manifest.get("version").cloned().unwrap_or(Value::Null),
        "generated_at": manifest.get("generated_at").cloned().unwrap_or(Value::Null),
        "stored_plugin_hash": stored,
        "current_plugin_hash": current,
        "stale": stale,
        "conda_completion_version": doc.get("conda_completion_version").cloned().unwrap_or(Value::Null),
        "runtime_sources": manifest.get("runtime_sources").cloned().unwrap_or(json!({})),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc() -> Value {
        json!({
            "availability": "available",
            "hint": null,
            "conda_completion_version": "0.3.2",
            "current_plugin_hash": "abc",
            "manifest": {
                "version": 1,
                "generated_at": "2026-11-30T00:00:00Z",
                "plugin_hash": "abd",
                "aliases": {"e": ["env"]},
                "root_options": [{"name": "--json"}],
                "commands": {
                    "env": {"summary": "Envs.", "options": [], "positionals": [], "exclusive_groups": [],
                        "subcommands": {"list": {"summary": "List.", "options": [{"name": "--json", "takes_value": false}],
                            "positionals": [], "exclusive_groups": [["-n", "-p"]], "subcommands": {}}}},
                    "uninstall": {"summary": "Remove.", "options": [], "positionals": [], "exclusive_groups": [], "subcommands": {}}
                },
                "runtime_sources": {"envs": {"kind": "x"}},
            },
        })
    }

    fn path(p: &[&str]) -> Vec<String> {
        p.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn resolves_commands_aliases_and_staleness() {
        let a = answer(&doc(), &path(&["env", "list"])).unwrap();
        assert_eq!(a["resolved_command_path"], json!(["env", "list"]));
        assert_eq!(a["alias_target"], Value::Null);
        assert_eq!(a["command"]["summary"], "List.");
        assert_eq!(a["command"]["exclusive_groups"], json!([["-n", "-p"]]));
        assert_eq!(a["manifest"]["stale"], true);
        let alias = answer(&doc(), &path(&["e", "list"])).unwrap();
        assert_eq!(alias["resolved_command_path"], json!(["env", "list"]));
        assert_eq!(alias["alias_target"], json!(["env"]));
        let root = answer(&doc(), &[]).unwrap();
        assert_eq!(root["command"]["summary"], Value::Null);
        assert_eq!(root["command"]["options"], json!([{"name": "--json"}]));
        assert_eq!(root["command"]["subcommands"].as_array().unwrap().len(), 2);
        // argparse aliases are commands of their own in the manifest.
        assert_eq!(
            answer(&doc(), &path(&["uninstall"])).unwrap()["resolved_command_path"],
            json!(["uninstall"])
        );
        assert_eq!(
            answer(&doc(), &path(&["nope"])),
            Err(QueryError::UnknownCommand)
        );
        assert_eq!(
            answer(&json!({"availability": "bogus"}), &[]),
            Err(QueryError::InvalidMetadata)
        );
    }

    #[test]
    fn unavailable_states_keep_the_seven_keys() {
        let a = answer(
            &json!({"availability": "not_generated", "hint": "Run it."}),
            &path(&["nope"]),
        )
        .unwrap();
        assert_eq!(a.as_object().unwrap().len(), 7);
        assert_eq!(a["hint"], "Run it.");
        assert_eq!(a["requested_command_path"], json!(["nope"]));
        assert_eq!(a["command"], Value::Null);
    }
}
