//! Catalog → MCP tool surface: tool names and JSON Schemas (draft 2020-12), and the
//! validation of call arguments against them.
//!
//! Naming: `conda_` + the canonical path joined with `_`; characters outside
//! `[A-Za-z0-9_-]` are replaced, names are capped at [`MAX_NAME`] (48) characters, and a
//! 10-hex SHA-256 suffix of the path marks sanitised, over-long, colliding or reserved
//! names. Every name fits every client: 48 characters leave room for a `mcp__<server>__`
//! prefix under the 60 characters some clients allow, and no client rejects the alphabet.
//!
//! Schemas follow argparse exactly (every action kind, nargs and choice), and add bounds
//! argparse lacks: integers and repeat counts have a minimum and a maximum, strings a
//! `maxLength`, arrays a `maxItems`; string positionals and the items of multi-value options reject option-like
//! values (they could not be passed without being read as options). Validation errors name
//! the JSON path and the failed keyword, never the submitted value. Pure; no I/O.

use serde_json::{Map, Value, json};

use crate::model::catalog::{ActionKind, Argument, Nargs, ValueType, sha256_hex};
pub use crate::tools::bounds::{MAX_NAME, MAX_REPEAT, MAX_STRING, RESERVED_NAMES};
pub use crate::tools::layout::boolean_flags;
use crate::tools::layout::{Layout, Property};

mod describe;
mod names;
pub(crate) mod sentences;
mod validate;

pub use crate::tools::error::{Invalid, Keyword, Unrepresentable};
pub use describe::{
    COMMAND_TEXT_LIMIT, command as command_description, in_parameter_names, is_deprecated,
};
pub use validate::{ECHO_LIMIT, LazyValidator, Validator, clip, invisible, json_path};

/// Bounds of every integer value a tool accepts (a 32-bit signed range: argparse's `int`
/// has none, but nothing conda takes as an integer needs more, and a bound keeps values
/// out of the range where JSON parsers lose precision).
pub const MIN_INTEGER: i64 = i32::MIN as i64;
pub const MAX_INTEGER: i64 = i32::MAX as i64;
/// The largest integer JSON carries exactly (2^53 - 1): the bound of `duration_ms`.
pub const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;
/// Most items of an array value (and occurrences of a repeated option).
pub const MAX_ITEMS: u64 = 1024;
const NOT_OPTION_LIKE: &str = "^(?!-)";
pub const PASSTHROUGH_DESCRIPTION: &str = "Arguments passed unchanged to the plugin command.";

// ---------------------------------------------------------------------------------------
// Names

/// The tool name of a command path; `disambiguate` forces the hash suffix.
pub fn tool_name(path: &[String], disambiguate: bool) -> String {
    let mut changed = false;
    let parts: Vec<String> = path
        .iter()
        .map(|part| {
            let clean = sanitize(part);
            changed |= clean != *part;
            clean
        })
        .collect();
    let natural = format!("conda_{}", parts.join("_"));
    if !(changed || disambiguate || natural.len() > MAX_NAME) {
        return natural;
    }
    let path_json = serde_json::to_string(path).expect("strings always serialize");
    let suffix = &sha256_hex(path_json.as_bytes())[..10];
    let stem: String = natural.chars().take(MAX_NAME - 11).collect();
    let stem = stem.trim_end_matches(['_', '-']);
    let stem = if stem.is_empty() { "conda" } else { stem };
    format!("{stem}_{suffix}")
}

fn sanitize(part: &str) -> String {
    let mut out = String::with_capacity(part.len());
    let mut in_run = false;
    for c in part.chars() {
        if c.is_ascii_alphanumeric() || matches!(c, '_' | '-') {
            out.push(c);
            in_run = false;
        } else if !in_run {
            out.push('_');
            in_run = true;
        }
    }
    let trimmed = out.trim_matches('_');
    if trimmed.is_empty() {
        "command".to_owned()
    } else {
        trimmed.to_owned()
    }
}

/// Names for a list of paths: every path whose natural name is shared with another one,
/// or equals a reserved name, gets the hash suffix.
pub fn tool_names(paths: &[Vec<String>]) -> Vec<String> {
    let natural: Vec<String> = paths.iter().map(|p| tool_name(p, false)).collect();
    paths
        .iter()
        .zip(&natural)
        .map(|(path, name)| {
            let shared = natural.iter().filter(|n| *n == name).count() > 1;
            let reserved = RESERVED_NAMES.contains(&name.as_str());
            if shared || reserved {
                tool_name(path, true)
            } else {
                name.clone()
            }
        })
        .collect()
}

// ---------------------------------------------------------------------------------------
// Input schemas

/// The input schema of a tool.
pub fn input_schema(layout: &Layout) -> Result<Map<String, Value>, Unrepresentable> {
    if layout.unsatisfiable_group() {
        return Err(Unrepresentable::EmptyRequiredGroup);
    }
    let mut properties = Map::new();
    let mut required = Vec::new();
    for property in &layout.properties {
        properties.insert(property.id.clone(), property_schema(property, layout));
        if is_required(&property.argument) {
            required.push(Value::String(property.id.clone()));
        }
    }
    if let Some(id) = &layout.passthrough {
        properties.insert(
            id.clone(),
            json!({
                "type": "array",
                "items": {"type": "string", "maxLength": MAX_STRING},
                "maxItems": MAX_ITEMS,
                "description": PASSTHROUGH_DESCRIPTION,
            }),
        );
    }
    let mut constraints = Vec::new();
    for level in &layout.levels {
        for group in &level.groups {
            let active: Vec<Value> = group
                .members
                .iter()
                .filter_map(|id| layout.property(id))
                .map(active_schema)
                .collect();
            if let Some(exclusive) = exclusive(&active) {
                constraints.push(exclusive);
            }
            if group.required {
                constraints.push(json!({"anyOf": active}));
            }
        }
    }
    let mut schema = Map::new();
    schema.insert("type".into(), json!("object"));
    schema.insert("properties".into(), Value::Object(properties));
    schema.insert("additionalProperties".into(), json!(false));
    if !required.is_empty() {
        schema.insert("required".into(), Value::Array(required));
    }
    if !constraints.is_empty() {
        schema.insert("allOf".into(), Value::Array(constraints));
    }
    Ok(schema)
}

/// Whether the property must be present. A `nargs='*'` positional never is (an absent
/// value means none), whatever argparse's `required` says.
pub fn is_required(argument: &Argument) -> bool {
    argument.required && !(argument.is_positional() && argument.nargs == Nargs::ZeroOrMore)
}

/// Whether the compiler may emit `--opt=value` / `-Xvalue` for single values of this
/// argument (so values may start with `-`).
fn single_values_attached(argument: &Argument) -> bool {
    !argument.is_positional()
}

fn scalar(argument: &Argument, positional_item: bool) -> Value {
    let mut schema = Map::new();
    match argument.value_type {
        ValueType::String => {
            schema.insert("type".into(), json!("string"));
            schema.insert("maxLength".into(), json!(MAX_STRING));
            if positional_item {
                schema.insert("pattern".into(), json!(NOT_OPTION_LIKE));
            }
        }
        ValueType::Integer => {
            schema.insert("type".into(), json!("integer"));
            schema.insert("minimum".into(), json!(MIN_INTEGER));
            schema.insert("maximum".into(), json!(MAX_INTEGER));
        }
        ValueType::Number => {
            schema.insert("type".into(), json!("number"));
        }
    }
    if !argument.choices.is_empty() {
        let values: Vec<Value> = argument
            .choices
            .iter()
            .filter_map(|c| match argument.value_type {
                ValueType::String => Some(json!(c)),
                ValueType::Integer => c.trim().parse::<i64>().ok().map(|n| json!(n)),
                ValueType::Number => c
                    .trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|f| f.is_finite())
                    .map(|n| json!(n)),
            })
            .collect();
        if !values.is_empty() {
            // The enum bounds every value: a `maxLength` next to it adds nothing.
            if values.iter().all(|v| v.as_str().is_none_or(fits)) {
                schema.remove("maxLength");
            }
            schema.insert("enum".into(), Value::Array(values));
        }
    }
    Value::Object(schema)
}

/// Whether a string is within `maxLength` (which counts characters).
fn fits(text: &str) -> bool {
    text.chars().count() as u64 <= MAX_STRING
}

fn array(items: Value, min: u64, max: u64) -> Value {
    let mut schema = Map::new();
    schema.insert("type".into(), json!("array"));
    schema.insert("items".into(), items);
    if min > 0 {
        schema.insert("minItems".into(), json!(min));
    }
    schema.insert("maxItems".into(), json!(max));
    Value::Object(schema)
}

/// Schema of one occurrence's value(s).
fn occurrence(argument: &Argument) -> Value {
    let positional = argument.is_positional();
    match argument.nargs {
        Nargs::One => scalar(argument, positional),
        Nargs::Optional => {
            json!({"anyOf": [scalar(argument, positional), {"type": "null"}]})
        }
        Nargs::Exactly(n) => array(scalar(argument, true), u64::from(n), u64::from(n)),
        Nargs::OneOrMore => array(scalar(argument, true), 1, MAX_ITEMS),
        Nargs::ZeroOrMore => array(scalar(argument, true), 0, MAX_ITEMS),
        Nargs::Remainder | Nargs::Parser => {
            // Opaque: taken verbatim, options included — except the first value, which
            // argparse would read as an option of the command itself.
            let items = json!({"type": "string", "maxLength": MAX_STRING});
            let min = u64::from(argument.nargs == Nargs::Parser);
            let mut schema = array(items, min, MAX_ITEMS);
            schema["prefixItems"] = json!([{"type": "string", "pattern": NOT_OPTION_LIKE}]);
            schema
        }
    }
}

fn property_schema(property: &Property, layout: &Layout) -> Value {
    let argument = &property.argument;
    let required = argument.required;
    let mut schema = match argument.action {
        ActionKind::StoreTrue | ActionKind::StoreConst => {
            let mut s = json!({"type": "boolean"});
            if required {
                s["const"] = json!(true);
            }
            s
        }
        ActionKind::StoreFalse => {
            let mut s = json!({"type": "boolean"});
            if required {
                s["const"] = json!(false);
            }
            s
        }
        ActionKind::Boolean => {
            let (pos, neg) = boolean_flags(argument);
            match (pos.is_some(), neg.is_some()) {
                (true, true) => json!({"type": "boolean"}),
                (true, false) => json!({"type": "boolean", "const": true}),
                _ => json!({"type": "boolean", "const": false}),
            }
        }
        ActionKind::Count | ActionKind::AppendConst => {
            json!({"type": "integer", "minimum": u64::from(required), "maximum": MAX_REPEAT})
        }
        ActionKind::Append => array(occurrence(argument), u64::from(required), MAX_ITEMS),
        ActionKind::Extend => match argument.nargs {
            Nargs::One => array(
                scalar(argument, !single_values_attached(argument)),
                u64::from(required),
                MAX_ITEMS,
            ),
            Nargs::Optional => array(
                json!({"anyOf": [scalar(argument, false), {"type": "null"}]}),
                u64::from(required),
                MAX_ITEMS,
            ),
            _ => occurrence(argument),
        },
        ActionKind::ExtendConst => array(scalar(argument, true), 0, MAX_ITEMS),
        ActionKind::Store => occurrence(argument),
    };
    if let Some(text) = describe::argument(argument, layout, property.level) {
        schema["description"] = json!(text);
    }
    if describe::is_deprecated(argument) {
        schema["deprecated"] = json!(true);
    }
    schema
}

/// "At most one member active": `not` of the pairs of active members, each pair one
/// `{required: [a, b], properties: {…}}` (the conjunction of the two active schemas,
/// whose `required` and `properties` keywords combine by AND), a single pair without the
/// `anyOf`. `None` for fewer than two members.
fn exclusive(active: &[Value]) -> Option<Value> {
    let mut pairs = Vec::new();
    for (i, a) in active.iter().enumerate() {
        for b in &active[i + 1..] {
            pairs.push(conjunction(a, b));
        }
    }
    match pairs.len() {
        0 => None,
        1 => Some(json!({"not": pairs.pop()})),
        _ => Some(json!({"not": {"anyOf": pairs}})),
    }
}

/// One schema equal to `allOf: [a, b]` for two active schemas of distinct properties.
fn conjunction(a: &Value, b: &Value) -> Value {
    let mut required = Vec::new();
    let mut properties = Map::new();
    for side in [a, b] {
        if let Some(ids) = side["required"].as_array() {
            required.extend(ids.iter().cloned());
        }
        if let Some(conditions) = side["properties"].as_object() {
            properties.extend(conditions.clone());
        }
    }
    let mut out = Map::new();
    out.insert("required".into(), Value::Array(required));
    if !properties.is_empty() {
        out.insert("properties".into(), Value::Object(properties));
    }
    Value::Object(out)
}

/// The sub-schema a group member satisfies exactly when argparse would see it: either
/// `{required: [id]}` or `{required: [id], properties: {id: condition}}`.
pub fn active_schema(property: &Property) -> Value {
    let id = &property.id;
    let argument = &property.argument;
    let condition = match argument.action {
        ActionKind::StoreTrue | ActionKind::StoreConst => Some(json!({"const": true})),
        ActionKind::StoreFalse => Some(json!({"const": false})),
        ActionKind::Count | ActionKind::AppendConst => Some(json!({"minimum": 1})),
        ActionKind::Append => Some(json!({"minItems": 1})),
        ActionKind::Extend if matches!(argument.nargs, Nargs::One | Nargs::Optional) => {
            Some(json!({"minItems": 1}))
        }
        // A positional emits nothing for an empty list or a null.
        ActionKind::Store if argument.is_positional() && argument.nargs == Nargs::ZeroOrMore => {
            Some(json!({"minItems": 1}))
        }
        ActionKind::Store if argument.is_positional() && argument.nargs == Nargs::Optional => {
            Some(json!({"not": {"type": "null"}}))
        }
        _ => None,
    };
    match condition {
        Some(condition) => json!({"required": [id], "properties": {id: condition}}),
        None => json!({"required": [id]}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(parts: &[&str]) -> Vec<String> {
        parts.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn names_and_hash_suffixes() {
        assert_eq!(tool_name(&p(&["env", "create"]), false), "conda_env_create");
        assert_eq!(
            tool_name(&p(&["content-trust"]), false),
            "conda_content-trust"
        );
        assert_eq!(
            tool_name(&p(&["weird name!"]), false),
            "conda_weird_name_ae75e737e3"
        );
        assert_eq!(tool_name(&p(&["é"]), false), "conda_command_0b657be394");
        assert_eq!(tool_name(&p(&["a", "b"]), true), "conda_a_b_0473ef2dc0");
        let long = tool_name(&p(&[&"x".repeat(200)]), false);
        assert!(
            long.len() == MAX_NAME && long.starts_with("conda_xxx"),
            "{long}"
        );
        // A dot is not in every client's alphabet: replaced, and the name suffixed.
        let dotted = tool_name(&p(&["conda.lock"]), false);
        assert!(dotted.starts_with("conda_conda_lock_"), "{dotted}");
        assert_eq!(dotted.len(), "conda_conda_lock_".len() + 10);
        // 48 characters exactly keep the natural name; one more takes the suffix.
        let fits = "y".repeat(MAX_NAME - "conda_".len());
        assert_eq!(tool_name(&p(&[&fits]), false), format!("conda_{fits}"));
        let over = tool_name(&p(&[&format!("{fits}y")]), false);
        assert_eq!(over.len(), MAX_NAME);
        assert_ne!(over, format!("conda_{fits}"));
    }

    #[test]
    fn collisions_and_reserved_names() {
        let names = tool_names(&[p(&["env_list"]), p(&["env", "list"]), p(&["info"])]);
        assert_eq!(
            names,
            [
                "conda_env_list_721d4da264",
                "conda_env_list_80a49d854a",
                "conda_info"
            ]
        );
        let names = tool_names(&[p(&["execute"]), p(&["cli", "command"])]);
        assert!(names.iter().all(|n| !RESERVED_NAMES.contains(&n.as_str())));
        assert!(
            names[0].starts_with("conda_execute_") && names[1].starts_with("conda_cli_command_")
        );
    }

    #[test]
    fn json_paths() {
        assert_eq!(json_path(""), "$");
        assert_eq!(json_path("/regex"), "$.regex");
        assert_eq!(json_path("/set/0/1"), "$.set[0][1]");
        assert_eq!(json_path("/a~1b"), "$.a/b");
    }
}
