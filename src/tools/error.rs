//! The errors of the tool surface: an input that failed validation or compilation
//! ([`Invalid`], with the failed rule as a [`Keyword`]), a schema the validator rejected
//! ([`SchemaError`]), and the operator's surface settings ([`SurfaceError`]). Messages are
//! fixed texts naming paths, keywords and variables, never a submitted value. Pure.

use std::fmt;

use jsonschema::error::ValidationErrorKind;
use serde::{Serialize, Serializer};

use crate::tools::schema::MAX_STRING;
use crate::tools::surface::{MAX_NAME, TOOL_VAR_PREFIX};

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

    /// What the rule means, for the error message (`at` is the failure's JSON path,
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
            Keyword::MaxLength => format!("string longer than {MAX_STRING} characters"),
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
#[error("Invalid arguments at {path}: {}", self.keyword.explain(&self.path, self.property.as_deref()))]
pub struct Invalid {
    /// JSONPath-style location (`$`, `$.packages[1]`).
    pub path: String,
    /// The failed rule.
    pub keyword: Keyword,
    /// For object-level failures: the property concerned (a name, never a value).
    pub property: Option<String>,
}

impl Invalid {
    /// A failure at `path` that concerns no single property.
    pub fn at(path: &str, keyword: Keyword) -> Invalid {
        Invalid {
            path: path.to_owned(),
            keyword,
            property: None,
        }
    }
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
    #[error(
        "{var}: a tool name must be 1 to {MAX_NAME} characters of A-Z, a-z, 0-9, '_', '.', '-'"
    )]
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
