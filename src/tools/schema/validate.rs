//! Validation of call arguments against a tool's input schema: the first error, as a
//! path and a keyword ([`Invalid`]), with client text bounded and escaped. Pure; no I/O.

use serde_json::Value;

use crate::tools::error::{Invalid, Keyword, SchemaError};

/// A compiled input schema.
#[derive(Clone, Debug)]
pub struct Validator(jsonschema::Validator);

impl Validator {
    pub fn new(schema: &Value) -> Result<Self, SchemaError> {
        jsonschema::draft202012::options()
            .build(schema)
            .map(Validator)
            .map_err(|e| SchemaError::Rejected(e.masked().to_string()))
    }

    /// Check an input; the first (best) error otherwise.
    pub fn validate(&self, input: &Value) -> Result<(), Invalid> {
        if let Some(path) = find_nul(input, &mut String::from("$")) {
            return Err(Invalid::at(&clip(&path, ECHO_LIMIT), Keyword::Nul));
        }
        match self.0.iter_errors(input).next() {
            None => Ok(()),
            Some(error) => {
                // Paths and property names come from the client: bounded, escaped.
                let mut invalid = describe(&error);
                invalid.path = clip(&invalid.path, ECHO_LIMIT);
                invalid.property = invalid.property.map(|p| clip(&p, ECHO_LIMIT));
                Err(invalid)
            }
        }
    }
}

/// A validator compiled on first use: a session calls few of its tools, and a compiled
/// schema is far larger than the layout it is made from. The schema is rebuilt from its
/// source when needed (a pure function), so the checks and their errors are the ones an
/// eagerly compiled validator gives.
#[derive(Clone, Debug, Default)]
pub struct LazyValidator(std::sync::OnceLock<Option<Validator>>);

impl LazyValidator {
    /// Validate `input` against the schema `source` makes, compiling it the first time. A
    /// schema the validator rejects (never one this module generates; tested) refuses
    /// every input as unrepresentable.
    pub fn validate(&self, input: &Value, source: impl FnOnce() -> Value) -> Result<(), Invalid> {
        match self.0.get_or_init(|| Validator::new(&source()).ok()) {
            Some(validator) => validator.validate(input),
            None => Err(Invalid::at("$", Keyword::Unrepresentable)),
        }
    }
}

/// The error worth reporting: for a value that fails every branch of a property's `anyOf`
/// (`[S, null]`), the error of the branch whose type matched says more than "no branch
/// matched". Object-level `anyOf` (a required group) is reported as such.
fn describe(error: &jsonschema::ValidationError<'_>) -> Invalid {
    use jsonschema::error::ValidationErrorKind;
    let path = json_path(error.instance_path().as_str());
    match error.kind() {
        ValidationErrorKind::AnyOf { context } if path != "$" => {
            if let Some(inner) = context
                .iter()
                .filter_map(|errors| errors.first())
                .find(|e| !matches!(e.kind(), ValidationErrorKind::Type { .. }))
            {
                return describe(inner);
            }
        }
        _ => {}
    }
    let property = match error.kind() {
        ValidationErrorKind::AdditionalProperties { unexpected } => unexpected.first().cloned(),
        ValidationErrorKind::Required { property } => property.as_str().map(str::to_owned),
        _ => None,
    };
    Invalid {
        path,
        keyword: Keyword::of(error.kind()),
        property,
    }
}

/// Most characters of client text (a property name, a path) an error may echo.
pub const ECHO_LIMIT: usize = 64;

/// At most `limit` characters of client text, control characters escaped (`\n`,
/// `\u{1b}`), `…` appended when cut.
pub fn clip(text: &str, limit: usize) -> String {
    let mut out = String::new();
    for (n, c) in text.chars().enumerate() {
        if n == limit {
            out.push('…');
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// JSON Pointer → `$.a[0].b`.
pub fn json_path(pointer: &str) -> String {
    let mut out = String::from("$");
    for token in pointer.split('/').skip(1) {
        let token = token.replace("~1", "/").replace("~0", "~");
        if !token.is_empty() && token.bytes().all(|b| b.is_ascii_digit()) {
            out.push_str(&format!("[{token}]"));
        } else {
            out.push('.');
            out.push_str(&token);
        }
    }
    out
}

/// The path of the first string (or object key) containing a NUL character.
fn find_nul(value: &Value, path: &mut String) -> Option<String> {
    match value {
        Value::String(s) if s.contains('\0') => Some(path.clone()),
        Value::Array(items) => items.iter().enumerate().find_map(|(i, v)| {
            let len = path.len();
            path.push_str(&format!("[{i}]"));
            let found = find_nul(v, path);
            path.truncate(len);
            found
        }),
        Value::Object(map) => map.iter().find_map(|(k, v)| {
            if k.contains('\0') {
                return Some(path.clone());
            }
            let len = path.len();
            path.push('.');
            path.push_str(k);
            let found = find_nul(v, path);
            path.truncate(len);
            found
        }),
        _ => None,
    }
}
