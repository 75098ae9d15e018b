//! The operator's configuration of the served tool surface: hidden tools and name, title
//! and description overrides, read from environment variables. Pure; no I/O.
//!
//! - `CCM_HIDDEN_TOOLS` — comma-separated canonical tool names left out of `tools/list`.
//!   Hidden tools stay callable (the policy still applies): hiding is cosmetic, never a
//!   security control.
//! - `CCM_MCP_TOOL_<TOOL>_NAME`, `_TITLE`, `_DESCRIPTION` and
//!   `_PARAM_<PARAM>_DESCRIPTION`, where `<TOOL>` and `<PARAM>` are the canonical tool and
//!   parameter names upper-cased with every character outside `[A-Za-z0-9]` replaced by `_`
//!   (`conda_shell-in` → `CONDA_SHELL_IN`). `_NAME` changes the name clients see and call;
//!   an empty `_TITLE` or `_DESCRIPTION` removes the field; an empty parameter description
//!   hides the parameter from the listed schema, which then allows additional properties
//!   (calls are still validated against the full schema).
//!
//! Checks happen in two steps because the tools are only known after discovery:
//! [`Surface::from_env`] (at startup) refuses malformed variables, invalid names,
//! two overrides giving the same name and reserved names; [`Surface::apply`] (when the
//! tool list is built) refuses a name that collides with another tool's served name and a
//! variable that matches two tools.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::Value;

use crate::tools::schema::RESERVED_NAMES;

pub const HIDDEN_TOOLS_VAR: &str = "CCM_HIDDEN_TOOLS";
pub const TOOL_VAR_PREFIX: &str = "CCM_MCP_TOOL_";
/// The longest tool name MCP allows.
const MAX_NAME: usize = 128;

/// What an override variable sets.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Field {
    Name,
    Title,
    Description,
}

/// One `CCM_MCP_TOOL_*` variable, not yet matched to a tool.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Override {
    var: String,
    /// Between the prefix and the field suffix: `<TOOL>` or `<TOOL>_PARAM_<PARAM>`.
    target: String,
    field: Field,
    value: String,
}

/// The validated configuration (from the environment at startup).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Surface {
    hidden: Vec<String>,
    overrides: Vec<Override>,
}

/// The served tool list.
#[derive(Debug, Default)]
pub struct Applied {
    /// Descriptors of listed tools, in order, with overrides applied.
    pub listed: Vec<Value>,
    /// Descriptors of hidden tools, with overrides applied (callable, never listed).
    pub unlisted: Vec<Value>,
    /// Served name → canonical name, for every tool.
    pub routes: HashMap<String, String>,
    /// Settings that matched nothing (a plugin that is not installed, a typo); logged.
    pub warnings: Vec<String>,
}

/// The environment-variable form of a tool or parameter name.
pub fn env_key(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect()
}

/// Whether `name` is a valid MCP tool name (1–128 characters of `[A-Za-z0-9_.-]`).
pub fn valid_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

impl Surface {
    /// Read and check the configuration. `vars` are the process's environment variables;
    /// only `CCM_HIDDEN_TOOLS` and `CCM_MCP_TOOL_*` are looked at. Errors are one line
    /// and name variables, never tokens.
    pub fn from_env<'a>(
        vars: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, String> {
        let mut surface = Surface::default();
        for (var, value) in vars {
            if var == HIDDEN_TOOLS_VAR {
                surface.hidden = value
                    .split(',')
                    .map(str::trim)
                    .filter(|n| !n.is_empty())
                    .map(str::to_owned)
                    .collect();
                continue;
            }
            let Some(rest) = var.strip_prefix(TOOL_VAR_PREFIX) else {
                continue;
            };
            let (target, field) = if let Some(t) = rest.strip_suffix("_NAME") {
                (t, Field::Name)
            } else if let Some(t) = rest.strip_suffix("_TITLE") {
                (t, Field::Title)
            } else if let Some(t) = rest.strip_suffix("_DESCRIPTION") {
                (t, Field::Description)
            } else {
                return Err(format!(
                    "{var}: unknown tool override; use {TOOL_VAR_PREFIX}<TOOL>_NAME, _TITLE, \
                     _DESCRIPTION or _PARAM_<PARAM>_DESCRIPTION"
                ));
            };
            if target.is_empty() {
                return Err(format!("{var}: the variable names no tool"));
            }
            if field == Field::Name && !valid_tool_name(value) {
                return Err(format!(
                    "{var}: a tool name must be 1 to {MAX_NAME} characters of A-Z, a-z, 0-9, '_', '.', '-'"
                ));
            }
            surface.overrides.push(Override {
                var: var.to_owned(),
                target: target.to_owned(),
                field,
                value: value.to_owned(),
            });
        }
        surface.overrides.sort_by(|a, b| a.var.cmp(&b.var));
        let mut names: BTreeMap<&str, &str> = BTreeMap::new();
        for o in surface.overrides.iter().filter(|o| o.field == Field::Name) {
            if let Some(other) = names.insert(&o.value, &o.var) {
                return Err(format!(
                    "{other} and {} give two tools the same name '{}'",
                    o.var, o.value
                ));
            }
            if let Some(reserved) = RESERVED_NAMES.iter().find(|r| **r == o.value)
                && env_key(reserved) != o.target
            {
                return Err(format!(
                    "{}: '{reserved}' is reserved for the server's own tool",
                    o.var
                ));
            }
        }
        Ok(surface)
    }

    /// Whether any setting is present.
    pub fn is_empty(&self) -> bool {
        self.hidden.is_empty() && self.overrides.is_empty()
    }

    /// Apply the configuration to the tool descriptors (in list order). Fails when a
    /// served name collides with another tool's, or a variable matches two tools.
    pub fn apply(&self, descriptors: Vec<Value>) -> Result<Applied, String> {
        let mut applied = Applied::default();
        let canonical: Vec<String> = descriptors
            .iter()
            .map(|d| d["name"].as_str().unwrap_or_default().to_owned())
            .collect();
        let mut by_key: HashMap<String, Vec<usize>> = HashMap::new();
        for (index, name) in canonical.iter().enumerate() {
            by_key.entry(env_key(name)).or_default().push(index);
        }
        // Match every variable to one (tool, parameter) — the only step that needs the tools.
        let mut settings: Vec<Vec<(&Override, Option<String>)>> =
            vec![Vec::new(); descriptors.len()];
        for o in &self.overrides {
            let mut matches: Vec<(usize, Option<String>)> = Vec::new();
            for (tool, param) in candidates(o) {
                let Some(indices) = by_key.get(&tool) else {
                    continue;
                };
                for &index in indices {
                    match &param {
                        None => matches.push((index, None)),
                        Some(key) => {
                            let properties = descriptors[index]["inputSchema"]["properties"]
                                .as_object()
                                .map(|p| p.keys().filter(|k| env_key(k) == *key).cloned());
                            for id in properties.into_iter().flatten() {
                                matches.push((index, Some(id)));
                            }
                        }
                    }
                }
            }
            match matches.len() {
                0 => applied.warnings.push(format!(
                    "{}: no such tool or parameter; the setting is ignored",
                    o.var
                )),
                1 => {
                    let (index, param) = matches.pop().expect("one match");
                    settings[index].push((o, param));
                }
                _ => {
                    let mut which: Vec<String> = matches
                        .iter()
                        .map(|(i, p)| match p {
                            None => canonical[*i].clone(),
                            Some(p) => format!("{} (parameter {p})", canonical[*i]),
                        })
                        .collect();
                    which.dedup();
                    return Err(format!(
                        "{} matches more than one tool or parameter: {}",
                        o.var,
                        which.join(", ")
                    ));
                }
            }
        }
        let hidden: HashSet<&str> = self.hidden.iter().map(String::as_str).collect();
        for name in &self.hidden {
            if !canonical.contains(name) {
                applied.warnings.push(format!(
                    "{HIDDEN_TOOLS_VAR}: no tool named '{name}'; the entry is ignored"
                ));
            }
        }
        let mut served_by: HashMap<String, (usize, Option<&str>)> = HashMap::new();
        for (index, (mut descriptor, overrides)) in
            descriptors.into_iter().zip(settings).enumerate()
        {
            let mut hidden_params = Vec::new();
            let mut renamed_by = None;
            for (o, param) in overrides {
                match (&o.field, param) {
                    (Field::Name, None) => {
                        descriptor["name"] = Value::String(o.value.clone());
                        renamed_by = Some(o.var.as_str());
                    }
                    (Field::Title, None) => set_or_remove(&mut descriptor, "title", &o.value),
                    (Field::Description, None) => {
                        set_or_remove(&mut descriptor, "description", &o.value)
                    }
                    (Field::Description, Some(param)) => {
                        let properties = descriptor["inputSchema"]["properties"]
                            .as_object_mut()
                            .expect("matched parameters exist");
                        if o.value.is_empty() {
                            properties.remove(&param);
                            hidden_params.push(param);
                        } else if let Some(Value::Object(property)) = properties.get_mut(&param) {
                            property.insert("description".into(), Value::String(o.value.clone()));
                        }
                    }
                    (_, Some(_)) => unreachable!("only descriptions have a parameter form"),
                }
            }
            if !hidden_params.is_empty() {
                hide_parameters(&mut descriptor, &hidden_params);
            }
            let served = descriptor["name"].as_str().unwrap_or_default().to_owned();
            if let Some((other, other_var)) = served_by.get(&served) {
                let mut ours = describe(&canonical[index], renamed_by);
                let mut theirs = describe(&canonical[*other], *other_var);
                // The renamed tool first: its variable is what to change.
                if renamed_by.is_none() {
                    std::mem::swap(&mut ours, &mut theirs);
                }
                return Err(format!(
                    "tool name collision: {ours} and {theirs} would both be served as '{served}'; \
                     choose another name"
                ));
            }
            served_by.insert(served.clone(), (index, renamed_by));
            applied.routes.insert(served, canonical[index].clone());
            if hidden.contains(canonical[index].as_str()) {
                applied.unlisted.push(descriptor);
            } else {
                applied.listed.push(descriptor);
            }
        }
        Ok(applied)
    }
}

/// How a collision names a tool: its canonical name, and the variable that renamed it.
fn describe(canonical: &str, renamed_by: Option<&str>) -> String {
    match renamed_by {
        Some(var) => format!("{canonical} (renamed by {var})"),
        None => format!("the tool {canonical}"),
    }
}

/// The (tool key, parameter key) pairs a variable can mean.
fn candidates(o: &Override) -> Vec<(String, Option<String>)> {
    let mut out = vec![(o.target.clone(), None)];
    if o.field == Field::Description {
        let mut from = 0;
        while let Some(at) = o.target[from..].find("_PARAM_") {
            let split = from + at;
            let (tool, param) = (&o.target[..split], &o.target[split + "_PARAM_".len()..]);
            if !tool.is_empty() && !param.is_empty() {
                out.push((tool.to_owned(), Some(param.to_owned())));
            }
            from = split + 1;
        }
    }
    out
}

fn set_or_remove(descriptor: &mut Value, field: &str, value: &str) {
    if let Some(map) = descriptor.as_object_mut() {
        if value.is_empty() {
            map.remove(field);
        } else {
            map.insert(field.to_owned(), Value::String(value.to_owned()));
        }
    }
}

/// The listed schema without these properties: they leave `required` too, and the schema
/// admits additional properties so that listing it does not forbid what the server
/// accepts.
fn hide_parameters(descriptor: &mut Value, params: &[String]) {
    let Some(schema) = descriptor["inputSchema"].as_object_mut() else {
        return;
    };
    schema.insert("additionalProperties".into(), Value::Bool(true));
    if let Some(Value::Array(required)) = schema.get_mut("required") {
        required.retain(|r| !params.iter().any(|p| r == p));
        if required.is_empty() {
            schema.remove("required");
        }
    }
    // Group constraints that name a hidden property would describe an input the client
    // cannot see; the server still enforces them.
    if let Some(Value::Array(constraints)) = schema.get_mut("allOf") {
        constraints.retain(|c| !mentions(c, params));
        if constraints.is_empty() {
            schema.remove("allOf");
        }
    }
}

fn mentions(value: &Value, params: &[String]) -> bool {
    match value {
        Value::String(s) => params.iter().any(|p| p == s),
        Value::Array(items) => items.iter().any(|v| mentions(v, params)),
        Value::Object(map) => map
            .iter()
            .any(|(k, v)| params.iter().any(|p| p == k) || mentions(v, params)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Map, json};

    fn tool(name: &str, params: &[&str], required: &[&str]) -> Value {
        let properties: Map<String, Value> = params
            .iter()
            .map(|p| {
                (
                    (*p).to_owned(),
                    json!({"type": "string", "description": format!("{p} help")}),
                )
            })
            .collect();
        json!({
            "name": name,
            "title": format!("title of {name}"),
            "description": format!("about {name}"),
            "inputSchema": {"type": "object", "properties": properties, "required": required,
                            "additionalProperties": false},
        })
    }

    fn tools() -> Vec<Value> {
        vec![
            tool("conda_execute", &["argv"], &["argv"]),
            tool("conda_info", &["json", "envs"], &[]),
            tool("conda_shell-in", &["shell"], &[]),
            tool("conda_env_list", &["json"], &[]),
            tool("conda_install", &["packages", "dry_run"], &["packages"]),
        ]
    }

    fn surface(vars: &[(&str, &str)]) -> Result<Surface, String> {
        Surface::from_env(vars.iter().copied())
    }

    fn names(list: &[Value]) -> Vec<&str> {
        list.iter().map(|d| d["name"].as_str().unwrap()).collect()
    }

    #[test]
    fn env_keys() {
        assert_eq!(env_key("conda_shell-in"), "CONDA_SHELL_IN");
        assert_eq!(env_key("conda_a.b"), "CONDA_A_B");
        assert_eq!(env_key("dry_run"), "DRY_RUN");
    }

    #[test]
    fn nothing_configured_changes_nothing() {
        let s = surface(&[("PATH", "/bin"), ("CCM_LOG", "debug")]).unwrap();
        assert!(s.is_empty());
        let applied = s.apply(tools()).unwrap();
        assert_eq!(Value::Array(applied.listed), Value::Array(tools()));
        assert!(applied.unlisted.is_empty() && applied.warnings.is_empty());
        assert_eq!(applied.routes["conda_info"], "conda_info");
    }

    #[test]
    fn hidden_tools_are_routed_but_not_listed() {
        let s = surface(&[(HIDDEN_TOOLS_VAR, " conda_info, ,conda_nope,conda_shell-in")]).unwrap();
        let applied = s.apply(tools()).unwrap();
        assert_eq!(
            names(&applied.listed),
            ["conda_execute", "conda_env_list", "conda_install"]
        );
        assert_eq!(names(&applied.unlisted), ["conda_info", "conda_shell-in"]);
        assert_eq!(applied.routes["conda_info"], "conda_info");
        assert_eq!(applied.warnings.len(), 1);
        assert!(
            applied.warnings[0].contains("conda_nope"),
            "{:?}",
            applied.warnings
        );
    }

    #[test]
    fn every_override_kind() {
        let s = surface(&[
            ("CCM_MCP_TOOL_CONDA_INFO_NAME", "about_conda"),
            ("CCM_MCP_TOOL_CONDA_INFO_TITLE", "About"),
            ("CCM_MCP_TOOL_CONDA_INFO_DESCRIPTION", "Says what conda is."),
            (
                "CCM_MCP_TOOL_CONDA_INFO_PARAM_JSON_DESCRIPTION",
                "Answer in JSON.",
            ),
            ("CCM_MCP_TOOL_CONDA_INFO_PARAM_ENVS_DESCRIPTION", ""),
            ("CCM_MCP_TOOL_CONDA_SHELL_IN_TITLE", ""),
            (HIDDEN_TOOLS_VAR, "conda_info"),
        ])
        .unwrap();
        let applied = s.apply(tools()).unwrap();
        assert!(applied.warnings.is_empty(), "{:?}", applied.warnings);
        let info = &applied.unlisted[0];
        assert_eq!(info["name"], "about_conda");
        assert_eq!(info["title"], "About");
        assert_eq!(info["description"], "Says what conda is.");
        let schema = &info["inputSchema"];
        assert_eq!(
            schema["properties"]["json"]["description"],
            "Answer in JSON."
        );
        assert!(schema["properties"].get("envs").is_none());
        assert_eq!(schema["additionalProperties"], true);
        assert_eq!(applied.routes["about_conda"], "conda_info");
        assert!(!applied.routes.contains_key("conda_info"));
        let shell = applied
            .listed
            .iter()
            .find(|d| d["name"] == "conda_shell-in")
            .unwrap();
        assert!(shell.get("title").is_none());
        // Untouched tools keep additionalProperties: false.
        assert_eq!(
            applied.listed[0]["inputSchema"]["additionalProperties"],
            false
        );
    }

    #[test]
    fn hiding_a_required_parameter_drops_it_from_required() {
        let s = surface(&[("CCM_MCP_TOOL_CONDA_INSTALL_PARAM_PACKAGES_DESCRIPTION", "")]).unwrap();
        let applied = s.apply(tools()).unwrap();
        let install = applied
            .listed
            .iter()
            .find(|d| d["name"] == "conda_install")
            .unwrap();
        assert!(install["inputSchema"].get("required").is_none());
        assert_eq!(
            install["inputSchema"]["properties"],
            json!({"dry_run": {"type": "string", "description": "dry_run help"}})
        );
    }

    #[test]
    fn startup_errors() {
        let err = |vars: &[(&str, &str)]| surface(vars).unwrap_err();
        assert!(err(&[("CCM_MCP_TOOL_CONDA_INFO_COLOR", "x")]).contains("unknown tool override"));
        assert!(err(&[("CCM_MCP_TOOL__NAME", "x")]).contains("names no tool"));
        assert!(err(&[("CCM_MCP_TOOL_CONDA_INFO_NAME", "")]).contains("1 to 128"));
        assert!(err(&[("CCM_MCP_TOOL_CONDA_INFO_NAME", "a b")]).contains("1 to 128"));
        let twice = err(&[
            ("CCM_MCP_TOOL_CONDA_INFO_NAME", "same"),
            ("CCM_MCP_TOOL_CONDA_LIST_NAME", "same"),
        ]);
        assert_eq!(
            twice,
            "CCM_MCP_TOOL_CONDA_INFO_NAME and CCM_MCP_TOOL_CONDA_LIST_NAME give two tools the same name 'same'"
        );
        assert!(err(&[("CCM_MCP_TOOL_CONDA_INFO_NAME", "conda_execute")]).contains("reserved"));
        // Renaming a reserved tool to its own name is fine.
        surface(&[("CCM_MCP_TOOL_CONDA_EXECUTE_NAME", "conda_execute")]).unwrap();
    }

    #[test]
    fn collisions_with_discovered_tools() {
        let s = surface(&[("CCM_MCP_TOOL_CONDA_ENV_LIST_NAME", "conda_info")]).unwrap();
        let message = s.apply(tools()).unwrap_err();
        assert_eq!(
            message,
            "tool name collision: conda_env_list (renamed by CCM_MCP_TOOL_CONDA_ENV_LIST_NAME) and \
             the tool conda_info would both be served as 'conda_info'; choose another name"
        );
        // Swapping two names is fine.
        let s = surface(&[
            ("CCM_MCP_TOOL_CONDA_ENV_LIST_NAME", "conda_info"),
            ("CCM_MCP_TOOL_CONDA_INFO_NAME", "conda_env_list"),
        ])
        .unwrap();
        let applied = s.apply(tools()).unwrap();
        assert_eq!(applied.routes["conda_info"], "conda_env_list");
        assert_eq!(applied.routes["conda_env_list"], "conda_info");
    }

    #[test]
    fn ambiguous_and_unknown_variables() {
        let mut list = tools();
        list.push(tool("conda_shell_in", &[], &[]));
        let s = surface(&[("CCM_MCP_TOOL_CONDA_SHELL_IN_TITLE", "x")]).unwrap();
        let message = s.apply(list).unwrap_err();
        assert!(message.contains("matches more than one"), "{message}");
        assert!(message.contains("conda_shell-in") && message.contains("conda_shell_in"));
        let s = surface(&[
            ("CCM_MCP_TOOL_CONDA_NOPE_TITLE", "x"),
            ("CCM_MCP_TOOL_CONDA_INFO_PARAM_NOPE_DESCRIPTION", "x"),
        ])
        .unwrap();
        let applied = s.apply(tools()).unwrap();
        assert_eq!(applied.warnings.len(), 2, "{:?}", applied.warnings);
    }

    #[test]
    fn a_tool_named_like_a_parameter_override_is_ambiguous() {
        let mut list = tools();
        list.push(tool("conda_info_param_json", &[], &[]));
        let s = surface(&[("CCM_MCP_TOOL_CONDA_INFO_PARAM_JSON_DESCRIPTION", "x")]).unwrap();
        assert!(s.apply(list).unwrap_err().contains("matches more than one"));
    }
}
