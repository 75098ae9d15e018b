//! The result of every executing tool: one type, [`ExecutionResult`], from which both the
//! tools' `outputSchema` ([`output_schema`]) and the structured result a call returns are
//! derived. Pure.

use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::tools::schema::{MAX_INTEGER, MAX_SAFE_INTEGER, MIN_INTEGER};

/// The 10-field execution result (`structuredContent`, and its text copy).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct ExecutionResult {
    /// Exit status; negative signal number when killed by a signal; `null` after a timeout
    /// or cancellation.
    pub exit_code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub duration_ms: u64,
    /// stdout parsed as JSON, `null` when it is empty, truncated or not JSON.
    pub parsed_json: Value,
    pub timed_out: bool,
    pub cancelled: bool,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    pub restart_required: bool,
}

impl ExecutionResult {
    /// The result as a JSON object.
    pub(crate) fn to_value(&self) -> Value {
        serde_json::to_value(self).expect("execution results serialize")
    }
}

/// The output schema shared by every executing tool: one property per field of
/// [`ExecutionResult`], all required, nothing else.
pub(crate) fn output_schema() -> Map<String, Value> {
    let schema = json!({
        "type": "object",
        "properties": {
            "exit_code": {"type": ["integer", "null"], "minimum": MIN_INTEGER, "maximum": MAX_INTEGER},
            "stdout": {"type": "string"},
            "stderr": {"type": "string"},
            "duration_ms": {"type": "integer", "minimum": 0, "maximum": MAX_SAFE_INTEGER},
            "parsed_json": {},
            "timed_out": {"type": "boolean"},
            "cancelled": {"type": "boolean"},
            "stdout_truncated": {"type": "boolean"},
            "stderr_truncated": {"type": "boolean"},
            "restart_required": {"type": "boolean"},
        },
        "required": [
            "exit_code", "stdout", "stderr", "duration_ms", "parsed_json", "timed_out",
            "cancelled", "stdout_truncated", "stderr_truncated", "restart_required"
        ],
        "additionalProperties": false,
    });
    match schema {
        Value::Object(map) => map,
        _ => unreachable!("literal object"),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::tools::schema::Validator;

    fn sample(exit_code: Option<i32>, parsed_json: Value) -> ExecutionResult {
        ExecutionResult {
            exit_code,
            stdout: "{}".into(),
            stderr: String::new(),
            duration_ms: MAX_SAFE_INTEGER,
            parsed_json,
            timed_out: false,
            cancelled: true,
            stdout_truncated: false,
            stderr_truncated: true,
            restart_required: false,
        }
    }

    fn keys(value: &Value) -> BTreeSet<String> {
        value
            .as_object()
            .expect("an object")
            .keys()
            .cloned()
            .collect()
    }

    #[test]
    fn every_field_is_in_the_schema_and_every_property_is_a_field() {
        let schema = Value::Object(output_schema());
        let fields = keys(&sample(Some(0), Value::Null).to_value());
        assert_eq!(fields.len(), 10);
        assert_eq!(keys(&schema["properties"]), fields);
        let required: BTreeSet<String> = schema["required"]
            .as_array()
            .expect("required is a list")
            .iter()
            .map(|v| v.as_str().expect("names").to_owned())
            .collect();
        assert_eq!(required, fields);
        assert_eq!(schema["required"].as_array().map(Vec::len), Some(10));
    }

    #[test]
    fn results_satisfy_the_schema() {
        let validator = Validator::new(&Value::Object(output_schema())).expect("a valid schema");
        for result in [
            sample(Some(0), Value::Null),
            sample(None, json!({"a": [1, 2]})),
            sample(Some(i32::MIN), json!("text")),
            sample(Some(i32::MAX), json!(1.5)),
        ] {
            let value = result.to_value();
            assert!(validator.validate(&value).is_ok(), "{value}");
        }
        let mut extra = sample(Some(0), Value::Null).to_value();
        extra["unknown"] = json!(true);
        assert!(validator.validate(&extra).is_err());
    }
}
