//! The errors of the tool surface: an input that failed validation or compilation
//! ([`Invalid`], with the failed rule as a [`Keyword`]), a command without a schema
//! ([`Unrepresentable`]), a schema the validator rejected ([`SchemaError`]), and the
//! operator's surface settings ([`SurfaceError`]). Messages are fixed texts naming paths,
//! keywords and variables, never a submitted value. Pure.

use std::fmt;

use jsonschema::error::ValidationErrorKind;
use serde::{Serialize, Serializer};

use crate::tools::bounds::{MAX_NAME, MAX_STRING, TOOL_VAR_PREFIX};

/// The rule an input broke: a JSON Schema keyword the validator reported, or one of the
/// checks ccm makes itself (`nul`, `order`, `unrepresentable`). [`Keyword::as_str`] is the
/// `keyword` of the -32602 error data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Keyword {
    AdditionalProperties,
    Required,
    Type,
    Enum,
    Const,
    Pattern,
    MaxLength,
    MinLength,
    MinItems,
    MaxItems,
    Minimum,
    ExclusiveMinimum,
    Maximum,
    ExclusiveMaximum,
    Not,
    AnyOf,
    OneOf,
    /// A string or object key contains a NUL character (checked before the schema).
    Nul,
    /// A positional value is given while an earlier positional it needs is not.
    Order,
    /// The input is valid but cannot be written as conda arguments.
    Unrepresentable,
    /// A working directory that is not an existing directory.
    Directory,
    /// Any other JSON Schema keyword (none of ccm's schemas uses one; kept so the message
    /// still names it).
    Other(String),
}

impl Keyword {
    /// The keyword's wire text (`additionalProperties`, `nul`, …).
    pub fn as_str(&self) -> &str {
        match self {
            Keyword::AdditionalProperties => "additionalProperties",
            Keyword::Required => "required",
            Keyword::Type => "type",
            Keyword::Enum => "enum",
            Keyword::Const => "const",
            Keyword::Pattern => "pattern",
            Keyword::MaxLength => "maxLength",
            Keyword::MinLength => "minLength",
            Keyword::MinItems => "minItems",
            Keyword::MaxItems => "maxItems",
            Keyword::Minimum => "minimum",
            Keyword::ExclusiveMinimum => "exclusiveMinimum",
            Keyword::Maximum => "maximum",
            Keyword::ExclusiveMaximum => "exclusiveMaximum",
            Keyword::Not => "not",
            Keyword::AnyOf => "anyOf",
            Keyword::OneOf => "oneOf",
            Keyword::Nul => "nul",
            Keyword::Order => "order",
            Keyword::Unrepresentable => "unrepresentable",
            Keyword::Directory => "directory",
            Keyword::Other(other) => other,
        }
    }

    /// The keyword of a validator error.
    pub fn of(kind: &ValidationErrorKind) -> Keyword {
        use ValidationErrorKind as K;
        match kind {
            K::AdditionalProperties { .. } => Keyword::AdditionalProperties,
            K::Required { .. } => Keyword::Required,
            K::Type { .. } => Keyword::Type,
            K::Enum { .. } => Keyword::Enum,
            K::Constant { .. } => Keyword::Const,
            K::Pattern { .. } | K::BacktrackLimitExceeded { .. } | K::RegexEngineFailure { .. } => {
                Keyword::Pattern
            }
            K::MaxLength { .. } => Keyword::MaxLength,
            K::MinLength { .. } => Keyword::MinLength,
            K::MinItems { .. } => Keyword::MinItems,
            K::MaxItems { .. } => Keyword::MaxItems,
            K::Minimum { .. } => Keyword::Minimum,
            K::ExclusiveMinimum { .. } => Keyword::ExclusiveMinimum,
            K::Maximum { .. } => Keyword::Maximum,
            K::ExclusiveMaximum { .. } => Keyword::ExclusiveMaximum,
            K::Not { .. } => Keyword::Not,
            K::AnyOf { .. } => Keyword::AnyOf,
            K::OneOfMultipleValid { .. } | K::OneOfNotValid { .. } => Keyword::OneOf,
            other => Keyword::Other(other.keyword().to_owned()),
        }
    }

    /// What the rule means when the schema says no more (`at` is the failure's JSON path,
    /// `property` the property an object-level failure concerns).
    fn explain(&self, at: &str, property: Option<&str>) -> String {
        let property = property.unwrap_or("?");
        match self {
            Keyword::AdditionalProperties => format!("unexpected property '{property}'"),
            Keyword::Required => format!("missing required property '{property}'"),
            Keyword::Type => "wrong type".into(),
            Keyword::Enum => "not one of the allowed values".into(),
            Keyword::Const => "not the only allowed value".into(),
            Keyword::Pattern => {
                "must not start with '-' (option-like values need conda_execute)".into()
            }
            Keyword::MaxLength => format!("must have at most {MAX_STRING} characters"),
            Keyword::MinItems => "too few items".into(),
            Keyword::MaxItems => "too many items".into(),
            Keyword::Minimum | Keyword::ExclusiveMinimum => "number too small".into(),
            Keyword::Maximum | Keyword::ExclusiveMaximum => "number too large".into(),
            Keyword::Not => "arguments that conda does not allow together".into(),
            Keyword::AnyOf | Keyword::OneOf if at == "$" => {
                "one of the arguments of a required group is missing".into()
            }
            Keyword::AnyOf | Keyword::OneOf => "no allowed form of the value matches".into(),
            Keyword::Nul => "NUL characters are not allowed".into(),
            Keyword::Order => "a later positional argument needs the earlier one".into(),
            Keyword::Unrepresentable => {
                "cannot be expressed as conda arguments (use conda_execute)".into()
            }
            Keyword::Directory => "must name an existing directory".into(),
            Keyword::MinLength | Keyword::Other(_) => format!("violates '{}'", self.as_str()),
        }
    }
}

impl fmt::Display for Keyword {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Keyword {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// An input that failed validation: where and which rule, never the value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("Invalid arguments at {path}: {}", self.rule())]
pub struct Invalid {
    /// JSONPath-style location (`$`, `$.packages[1]`).
    pub path: String,
    /// The failed rule.
    pub keyword: Keyword,
    /// For object-level failures: the property concerned (a name, never a value).
    pub property: Option<String>,
    /// What the schema expected, in words made from the schema alone (a type, a limit,
    /// the allowed values, the names of conflicting properties); the keyword's generic
    /// text when `None`.
    pub expected: Option<String>,
}

impl Invalid {
    /// A failure at `path` that concerns no single property.
    pub fn at(path: &str, keyword: Keyword) -> Invalid {
        Invalid {
            path: path.to_owned(),
            keyword,
            property: None,
            expected: None,
        }
    }

    /// The failure with what was expected, in words.
    pub fn expecting(mut self, expected: impl Into<String>) -> Invalid {
        self.expected = Some(expected.into());
        self
    }

    /// The rule, in words: what was expected, else the keyword's generic text.
    pub fn rule(&self) -> String {
        match &self.expected {
            Some(expected) => expected.clone(),
            None => self.keyword.explain(&self.path, self.property.as_deref()),
        }
    }
}

/// Why a command cannot have an input schema (it becomes a blocking diagnostic).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unrepresentable {
    /// A required mutually exclusive group none of whose members is exposed.
    #[error("required exclusive group has no visible members")]
    EmptyRequiredGroup,
}

/// A schema the validator could not compile (ccm's own schemas never are; a tool whose
/// schema is rejected is left out with a diagnostic).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    /// The validator's reason, with the schema's values masked.
    #[error("{0}")]
    Rejected(String),
    #[error("validator compilation panicked")]
    Panicked,
}

/// The operator's tool surface settings (`CCM_HIDDEN_TOOLS`, `CCM_MCP_TOOL_*`) are not
/// usable: one line naming variables and tools, never a token.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SurfaceError {
    #[error(
        "{var}: unknown tool override; use {TOOL_VAR_PREFIX}<TOOL>_NAME, _TITLE, _DESCRIPTION or _PARAM_<PARAM>_DESCRIPTION"
    )]
    UnknownField { var: String },
    #[error("{var}: the variable names no tool")]
    NoTool { var: String },
    #[error("{var}: a tool name must be 1 to {MAX_NAME} characters of A-Z, a-z, 0-9, '_', '-'")]
    BadName { var: String },
    #[error("{first} and {second} give two tools the same name '{name}'")]
    SameName {
        first: String,
        second: String,
        name: String,
    },
    #[error("{var}: '{name}' is reserved for the server's own tool")]
    Reserved { var: String, name: &'static str },
    #[error("{var} matches more than one tool or parameter: {which}")]
    Ambiguous { var: String, which: String },
    #[error(
        "tool name collision: {ours} and {theirs} would both be served as '{served}'; choose another name"
    )]
    Collision {
        ours: String,
        theirs: String,
        served: String,
    },
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Every keyword ccm's schemas can fail on, with its wire text and message.
    fn cases() -> [(Keyword, &'static str, &'static str); 22] {
        [
            (
                Keyword::AdditionalProperties,
                "additionalProperties",
                "unexpected property 'p'",
            ),
            (
                Keyword::Required,
                "required",
                "missing required property 'p'",
            ),
            (Keyword::Type, "type", "wrong type"),
            (Keyword::Enum, "enum", "not one of the allowed values"),
            (Keyword::Const, "const", "not the only allowed value"),
            (
                Keyword::Pattern,
                "pattern",
                "must not start with '-' (option-like values need conda_execute)",
            ),
            (
                Keyword::MaxLength,
                "maxLength",
                "must have at most 32768 characters",
            ),
            (Keyword::MinLength, "minLength", "violates 'minLength'"),
            (Keyword::MinItems, "minItems", "too few items"),
            (Keyword::MaxItems, "maxItems", "too many items"),
            (Keyword::Minimum, "minimum", "number too small"),
            (
                Keyword::ExclusiveMinimum,
                "exclusiveMinimum",
                "number too small",
            ),
            (Keyword::Maximum, "maximum", "number too large"),
            (
                Keyword::ExclusiveMaximum,
                "exclusiveMaximum",
                "number too large",
            ),
            (
                Keyword::Not,
                "not",
                "arguments that conda does not allow together",
            ),
            (
                Keyword::AnyOf,
                "anyOf",
                "no allowed form of the value matches",
            ),
            (
                Keyword::OneOf,
                "oneOf",
                "no allowed form of the value matches",
            ),
            (Keyword::Nul, "nul", "NUL characters are not allowed"),
            (
                Keyword::Order,
                "order",
                "a later positional argument needs the earlier one",
            ),
            (
                Keyword::Unrepresentable,
                "unrepresentable",
                "cannot be expressed as conda arguments (use conda_execute)",
            ),
            (
                Keyword::Directory,
                "directory",
                "must name an existing directory",
            ),
            (
                Keyword::Other("uniqueItems".into()),
                "uniqueItems",
                "violates 'uniqueItems'",
            ),
        ]
    }

    #[test]
    fn wire_texts_and_messages() {
        for (keyword, wire, explanation) in cases() {
            assert_eq!(keyword.as_str(), wire);
            assert_eq!(keyword.to_string(), wire);
            assert_eq!(json!({"keyword": keyword}), json!({"keyword": wire}));
            let invalid = Invalid {
                path: "$.x".into(),
                keyword,
                property: Some("p".into()),
                expected: None,
            };
            assert_eq!(
                invalid.to_string(),
                format!("Invalid arguments at $.x: {explanation}")
            );
        }
        let group = Invalid::at("$", Keyword::AnyOf);
        assert_eq!(
            group.to_string(),
            "Invalid arguments at $: one of the arguments of a required group is missing"
        );
        let unnamed = Invalid::at("$", Keyword::Required);
        assert_eq!(
            unnamed.to_string(),
            "Invalid arguments at $: missing required property '?'"
        );
    }

    /// The keyword of a validator error has the validator's own text.
    #[test]
    fn validator_keywords_keep_their_text() {
        let schema = json!({
            "type": "object",
            "properties": {
                "s": {"type": "string", "minLength": 2, "maxLength": 3, "pattern": "^a"},
                "n": {"type": "number", "exclusiveMinimum": 0},
                "i": {"type": "integer", "minimum": 1, "maximum": 2},
                "e": {"enum": ["x"]},
                "c": {"const": true},
                "a": {"type": "array", "minItems": 1, "maxItems": 1, "uniqueItems": true},
                "o": {"oneOf": [{"type": "string"}, {"type": "string"}]},
                "y": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                "z": {"not": {"type": "null"}},
                "t": {"type": "string", "minLength": 2},
                "m": {"minimum": 1},
                "x": {"exclusiveMaximum": 5},
                "b": {"type": "array", "minItems": 1},
                "w": {"type": "string"},
            },
            "required": ["r"],
            "additionalProperties": false,
        });
        let validator = jsonschema::draft202012::new(&schema).unwrap();
        let input = json!({
            "s": "bcdef", "n": 0, "i": 3, "e": "y", "c": false, "a": [1, 1],
            "o": "x", "y": 1, "z": null, "extra": 1, "t": "b", "m": 0, "b": [], "w": 1, "x": 5,
        });
        let mut seen = Vec::new();
        for error in validator.iter_errors(&input) {
            let keyword = Keyword::of(error.kind());
            assert_eq!(keyword.as_str(), error.kind().keyword());
            seen.push(keyword);
        }
        for expected in [
            Keyword::AdditionalProperties,
            Keyword::Required,
            Keyword::MinLength,
            Keyword::MaxLength,
            Keyword::Pattern,
            Keyword::ExclusiveMinimum,
            Keyword::Minimum,
            Keyword::Maximum,
            Keyword::ExclusiveMaximum,
            Keyword::Type,
            Keyword::MinItems,
            Keyword::Enum,
            Keyword::Const,
            Keyword::MaxItems,
            Keyword::OneOf,
            Keyword::AnyOf,
            Keyword::Not,
            Keyword::Other("uniqueItems".into()),
        ] {
            assert!(seen.contains(&expected), "{expected} not reported");
        }
    }
}
