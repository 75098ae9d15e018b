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

use crate::tools::bounds::RESERVED_NAMES;
pub use crate::tools::bounds::{MAX_NAME, TOOL_VAR_PREFIX};
use crate::tools::error::SurfaceError;

pub const HIDDEN_TOOLS_VAR: &str = "CCM_HIDDEN_TOOLS";

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

/// A variable matched to its tool: the override, and the parameter it describes.
type Setting<'a> = (&'a Override, Option<String>);

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

/// Whether `name` is a tool name every client accepts (1–48 characters of `[A-Za-z0-9_-]`).
pub fn valid_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
}

impl Surface {
    /// Read and check the configuration. `vars` are the process's environment variables;
    /// only `CCM_HIDDEN_TOOLS` and `CCM_MCP_TOOL_*` are looked at. Errors are one line
    /// and name variables, never tokens.
    pub fn from_env<'a>(
        vars: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, SurfaceError> {
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
                return Err(SurfaceError::UnknownField {
                    var: var.to_owned(),
                });
            };
            if target.is_empty() {
                return Err(SurfaceError::NoTool {
                    var: var.to_owned(),
                });
            }
            if field == Field::Name && !valid_tool_name(value) {
                return Err(SurfaceError::BadName {
                    var: var.to_owned(),
                });
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
                return Err(SurfaceError::SameName {
                    first: (*other).to_owned(),
                    second: o.var.clone(),
                    name: o.value.clone(),
                });
            }
            if let Some(reserved) = RESERVED_NAMES.iter().find(|r| **r == o.value)
                && env_key(reserved) != o.target
            {
                return Err(SurfaceError::Reserved {
                    var: o.var.clone(),
                    name: reserved,
                });
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
    pub fn apply(&self, descriptors: Vec<Value>) -> Result<Applied, SurfaceError> {
        self.apply_withholding(descriptors, &HashSet::new())
    }

    /// [`Surface::apply`], with the tools named in `withheld` (canonical names) unlisted
    /// as hidden tools are: routed and callable, never listed.
    pub fn apply_withholding(
        &self,
        descriptors: Vec<Value>,
        withheld: &HashSet<String>,
    ) -> Result<Applied, SurfaceError> {
        let mut applied = Applied::default();
        let canonical: Vec<String> = descriptors
            .iter()
            .map(|d| d["name"].as_str().unwrap_or_default().to_owned())
            .collect();
        let settings = self.settings(&descriptors, &canonical, &mut applied.warnings)?;
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
            let renamed_by = override_descriptor(&mut descriptor, overrides);
            let served = descriptor["name"].as_str().unwrap_or_default().to_owned();
            if let Some((other, other_var)) = served_by.get(&served) {
                let mut ours = describe(&canonical[index], renamed_by);
                let mut theirs = describe(&canonical[*other], *other_var);
                // The renamed tool first: its variable is what to change.
                if renamed_by.is_none() {
                    std::mem::swap(&mut ours, &mut theirs);
                }
                return Err(SurfaceError::Collision {
                    ours,
                    theirs,
                    served,
                });
            }
            served_by.insert(served.clone(), (index, renamed_by));
            applied.routes.insert(served, canonical[index].clone());
            if hidden.contains(canonical[index].as_str()) || withheld.contains(&canonical[index]) {
                applied.unlisted.push(descriptor);
            } else {
                applied.listed.push(descriptor);
            }
        }
        Ok(applied)
    }

    /// Match every variable to one (tool, parameter) — the only step that needs the
    /// tools: the settings of each tool, in list order.
    fn settings(
        &self,
        descriptors: &[Value],
        canonical: &[String],
        warnings: &mut Vec<String>,
    ) -> Result<Vec<Vec<Setting<'_>>>, SurfaceError> {
        let mut by_key: HashMap<String, Vec<usize>> = HashMap::new();
        for (index, name) in canonical.iter().enumerate() {
            by_key.entry(env_key(name)).or_default().push(index);
        }
        let mut settings: Vec<Vec<Setting>> = vec![Vec::new(); descriptors.len()];
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
                0 => warnings.push(format!(
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
                    return Err(SurfaceError::Ambiguous {
                        var: o.var.clone(),
                        which: which.join(", "),
                    });
                }
            }
        }
        Ok(settings)
    }
}

/// Apply one tool's settings to its descriptor; the variable that renamed it, if any.
fn override_descriptor<'o>(descriptor: &mut Value, overrides: Vec<Setting<'o>>) -> Option<&'o str> {
    let mut hidden_params = Vec::new();
    let mut renamed_by = None;
    for (o, param) in overrides {
        match (&o.field, param) {
            (Field::Name, None) => {
                descriptor["name"] = Value::String(o.value.clone());
                renamed_by = Some(o.var.as_str());
            }
            (Field::Title, None) => set_or_remove(descriptor, "title", &o.value),
            (Field::Description, None) => set_or_remove(descriptor, "description", &o.value),
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
        hide_parameters(descriptor, &hidden_params);
    }
    renamed_by
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
mod tests;
