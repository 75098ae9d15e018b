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
        expected: expected(error, &path),
        path,
        keyword: Keyword::of(error.kind()),
        property,
    }
}

/// Most characters of an expectation made from the schema (allowed values, names).
const EXPECTED_LIMIT: usize = 256;

/// What the failed rule expected, in words made from the schema alone: a type, a limit,
/// the allowed values, or the names of the properties that conflict or of which one is
/// required. `None` leaves the keyword's generic text.
fn expected(error: &jsonschema::ValidationError<'_>, path: &str) -> Option<String> {
    use jsonschema::error::{TypeKind, ValidationErrorKind as K};
    let text = match error.kind() {
        K::Type { kind } => {
            let types: Vec<String> = match kind {
                TypeKind::Single(one) => vec![one.to_string()],
                TypeKind::Multiple(set) => set.iter().map(|t| t.to_string()).collect(),
            };
            format!("must be of type {}", types.join(" or "))
        }
        K::Enum { options } => format!("must be one of: {}", values(options)),
        K::Constant { expected_value } => format!("must be {}", value_text(expected_value)),
        K::Maximum { limit } => format!("must be at most {limit}"),
        K::ExclusiveMaximum { limit } => format!("must be less than {limit}"),
        K::Minimum { limit } => format!("must be at least {limit}"),
        K::ExclusiveMinimum { limit } => format!("must be greater than {limit}"),
        K::Pattern { pattern } if pattern == crate::tools::policy::PLAIN_SPEC => {
            "must be a plain match spec (no path, URL, package file or url=/fn= key)".into()
        }
        K::MaxLength { limit } => format!("must have at most {limit} characters"),
        K::MinLength { limit } => format!("must have at least {limit} characters"),
        K::MaxItems { limit } => format!("must have at most {limit} items"),
        K::MinItems { limit } => format!("must have at least {limit} items"),
        K::Not { schema } => {
            let names = conflicting(schema, error.instance());
            let (first, rest) = names.split_first()?;
            if rest.is_empty() {
                return None;
            }
            format!(
                "'{first}' conflicts with {} (conda allows only one of them)",
                quoted(rest)
            )
        }
        K::AnyOf { context } | K::OneOfNotValid { context } if path == "$" => {
            let names = group_names(context);
            if names.is_empty() {
                return None;
            }
            format!("one of {} is required", quoted(&names))
        }
        _ => return None,
    };
    Some(clip(&text, EXPECTED_LIMIT))
}

/// The members of a required group, from the errors of its branches: the property a
/// branch requires (missing), or the property whose value the branch rejected (a schema
/// property: the input has no others at this point).
fn group_names(context: &[Vec<jsonschema::ValidationError<'static>>]) -> Vec<String> {
    use jsonschema::error::ValidationErrorKind as K;
    let mut names: Vec<String> = Vec::new();
    for error in context.iter().filter_map(|errors| errors.first()) {
        let name = match error.kind() {
            K::Required { property } => property.as_str().map(str::to_owned),
            _ => error
                .instance_path()
                .as_str()
                .split('/')
                .nth(1)
                .map(|t| t.replace("~1", "/").replace("~0", "~")),
        };
        if let Some(name) = name.filter(|n| !names.contains(n)) {
            names.push(name);
        }
    }
    names
}

/// Property names the schema requires anywhere below it (each once, in order).
fn required_names(schema: &Value, names: &mut Vec<String>) {
    match schema {
        Value::Object(map) => {
            for (key, value) in map {
                if key == "required" {
                    for name in value.as_array().into_iter().flatten() {
                        if let Some(name) = name.as_str()
                            && !names.iter().any(|n| n == name)
                        {
                            names.push(name.to_owned());
                        }
                    }
                } else {
                    required_names(value, names);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| required_names(v, names)),
        _ => {}
    }
}

/// The names of an exclusive group's members that the input uses: the branch of the
/// `not` schema the input matched (a pair under `anyOf`, or the whole schema), then the
/// names that branch requires. Names come from the schema, never from the input.
fn conflicting(schema: &Value, instance: &Value) -> Vec<String> {
    let branches: Vec<&Value> = match schema.get("anyOf").and_then(Value::as_array) {
        Some(branches) => branches.iter().collect(),
        None => vec![schema],
    };
    let matched = branches
        .into_iter()
        .find(|branch| jsonschema::draft202012::is_valid(branch, instance));
    let mut names = Vec::new();
    if let Some(branch) = matched {
        required_names(branch, &mut names);
    }
    names
}

fn quoted(names: &[String]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("'{n}'")).collect();
    quoted.join(", ")
}

/// Allowed values from the schema: strings bare, anything else as JSON.
fn values(options: &Value) -> String {
    match options {
        Value::Array(items) => items.iter().map(value_text).collect::<Vec<_>>().join(", "),
        other => value_text(other),
    }
}

fn value_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
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
        if invisible(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// Characters escaped when client text is echoed: controls; every format character
/// (Unicode category Cf: soft hyphen, Arabic and Syriac number signs, bidi marks and
/// isolates, zero-width characters, invisible operators, the BOM, interlinear
/// annotation, Egyptian and shorthand format controls, musical formatting, tags) and the
/// other characters that hide or reorder text (variation selectors, the combining
/// grapheme joiner, Khmer inherent vowels); every space but U+0020 (category Zs: no-break,
/// Ogham, en to hair, narrow, mathematical and ideographic spaces) and the characters
/// that render blank (Braille pattern blank, Hangul fillers, ideographic half fill
/// space); and the line and paragraph separators (U+2028, U+2029) that start a new line.
/// (Unicode 16 `DerivedGeneralCategory.txt` for Cf and Zs.)
pub fn invisible(c: char) -> bool {
    c.is_control()
        || matches!(
            u32::from(c),
            0xA0 | 0xAD
                | 0x34F
                | 0x600..=0x605
                | 0x61C
                | 0x6DD
                | 0x70F
                | 0x890..=0x891
                | 0x8E2
                | 0x115F..=0x1160
                | 0x1680
                | 0x17B4..=0x17B5
                | 0x180B..=0x180F
                | 0x2000..=0x200F
                | 0x2028..=0x202F
                | 0x205F..=0x206F
                | 0x2800
                | 0x3000
                | 0x303F
                | 0x3164
                | 0xFE00..=0xFE0F
                | 0xFEFF
                | 0xFFA0
                | 0xFFF0..=0xFFFB
                | 0x110BD
                | 0x110CD
                | 0x13430..=0x1343F
                | 0x1BCA0..=0x1BCA3
                | 0x1D173..=0x1D17A
                | 0xE0000..=0xE0FFF
        )
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn message(schema: Value, input: Value) -> String {
        Validator::new(&schema)
            .unwrap()
            .validate(&input)
            .unwrap_err()
            .to_string()
    }

    /// Hostile property names: bidi overrides, zero-width and tag characters are escaped
    /// like controls (a model reads them; a person does not see them).
    #[test]
    fn invisible_characters_are_escaped() {
        let schema = json!({"type": "object", "properties": {}, "additionalProperties": false});
        let name = "\u{202e}evil\u{202c}\u{200b}\u{2066}x\u{61c}\u{feff}\u{ad}\u{e0041}\n";
        let text = message(schema, json!({name: 1}));
        assert!(!text.chars().any(invisible), "{text:?}");
        assert!(
            text.contains("\\u{202e}evil") && text.contains("\\u{e0041}"),
            "{text}"
        );
    }

    /// Every non-ASCII space (Zs), every format character (Cf) and the blank-rendering
    /// letters are escaped; printable text, U+0020 and ordinary non-ASCII letters stay.
    #[test]
    fn blank_looking_characters_are_escaped() {
        for c in [
            '\u{a0}',
            '\u{1680}',
            '\u{2000}',
            '\u{2007}',
            '\u{200a}',
            '\u{202f}',
            '\u{205f}',
            '\u{3000}',
            '\u{2800}',
            '\u{3164}',
            '\u{115f}',
            '\u{1160}',
            '\u{ffa0}',
            '\u{303f}',
            '\u{600}',
            '\u{6dd}',
            '\u{70f}',
            '\u{890}',
            '\u{8e2}',
            '\u{110bd}',
            '\u{13430}',
            '\u{1bca0}',
            '\u{2064}',
            '\u{e0001}',
        ] {
            assert!(invisible(c), "U+{:04X}", u32::from(c));
            assert_eq!(clip(&c.to_string(), 9), c.escape_default().to_string());
        }
        for c in [' ', 'a', 'é', '⟨', '中', '\u{2423}'] {
            assert!(!invisible(c), "{c}");
        }
    }

    /// A package spec refused by the plain-spec pattern says which rule, not the
    /// option-like one.
    #[test]
    fn the_plain_spec_pattern_names_its_rule() {
        let schema = json!({"type": "string", "pattern": crate::tools::policy::PLAIN_SPEC});
        assert_eq!(
            message(schema, json!("SECRET/VALUE")),
            "Invalid arguments at $: must be a plain match spec (no path, URL, package file or url=/fn= key)"
        );
    }

    /// Exclusive groups in both encodings (pairs under `anyOf`, or one `required` list)
    /// name the members the input uses; allowed values and limits come from the schema.
    #[test]
    fn expectations_come_from_the_schema() {
        let pairs = json!({
            "type": "object",
            "properties": {"a": {"type": "boolean"}, "b": {"type": "string"}, "c": {}},
            "allOf": [{"not": {"anyOf": [
                {"allOf": [{"required": ["a"], "properties": {"a": {"const": true}}}, {"required": ["b"]}]},
                {"allOf": [{"required": ["a"], "properties": {"a": {"const": true}}}, {"required": ["c"]}]},
                {"allOf": [{"required": ["b"]}, {"required": ["c"]}]},
            ]}}],
        });
        assert_eq!(
            message(pairs.clone(), json!({"b": "SECRET", "c": 1})),
            "Invalid arguments at $: 'b' conflicts with 'c' (conda allows only one of them)"
        );
        assert!(
            Validator::new(&pairs)
                .unwrap()
                .validate(&json!({"a": false, "b": "x"}))
                .is_ok()
        );
        let compact = json!({"type": "object", "not": {"required": ["x", "y"]}});
        assert_eq!(
            message(compact, json!({"x": "SECRET", "y": 2})),
            "Invalid arguments at $: 'x' conflicts with 'y' (conda allows only one of them)"
        );
        let values = json!({"type": "object", "properties": {
            "e": {"enum": [1, "two", null]},
            "n": {"type": ["integer", "null"]},
            "k": {"const": false},
            "l": {"type": "array", "minItems": 2},
        }});
        for (input, expected) in [
            (json!({"e": "SECRET"}), "$.e: must be one of: 1, two, null"),
            (
                json!({"n": "SECRET"}),
                "$.n: must be of type null or integer",
            ),
            (json!({"k": true}), "$.k: must be false"),
            (json!({"l": ["SECRET"]}), "$.l: must have at least 2 items"),
        ] {
            let text = message(values.clone(), input);
            assert_eq!(text, format!("Invalid arguments at {expected}"));
            assert!(!text.contains("SECRET"));
        }
        let long = json!({"enum": (0..200).map(|i| format!("value-{i}")).collect::<Vec<_>>()});
        let text = message(json!({"properties": {"v": long}}), json!({"v": 0}));
        assert!(text.ends_with('…') && text.len() < 400, "{text}");
    }
}
