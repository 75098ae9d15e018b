//! One incoming JSON-RPC frame (a stdio line or an HTTP POST body) judged before rmcp
//! sees it, so that every frame with an id gets an answer (JSON-RPC 2.0 §5, §6).
//!
//! - Not UTF-8, or not JSON (a `NaN` literal, a truncated text): `-32700`, `id: null`.
//! - JSON that serde cannot take (a number beyond `f64`, nesting deeper than 128, a lone
//!   surrogate escape): `-32602` with the frame's id when the problem lies in `params`,
//!   else `-32600` with it. The id is found by a scanner that has no depth or number
//!   limits ([`scan`]).
//! - A batch (a JSON array): MCP allowed batches only in the 2025-03-26 revision, which
//!   `ccm` does not offer; each element that is a request is answered with `-32600` and its
//!   id (an array of errors, as JSON-RPC 2.0 answers batches), an empty batch with one
//!   `-32600`, `id: null`.
//! - Not a request object (`jsonrpc` not `"2.0"`, an id that is not a string or an
//!   integer, a method that is not a string): `-32600` with the id, or `null`.
//! - A method the server does not serve: `-32601`; a known method whose `params` do not
//!   fit (`tools/call` with `arguments: [1,2]`): `-32602`.
//!
//! Errors never echo more than [`CLIP`] characters of anything the client sent (control
//! characters escaped, see [`crate::tools::schema::clip`]) and never a value; `error.data` is
//! always an object. [`sanitize`] applies the same rule to every error the server sends.

use rmcp::model::{ClientJsonRpcMessage, ClientRequest, JsonRpcMessage};
use serde_json::{Map, Value, json};

use crate::tools::schema::clip;

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
/// Most characters of client text an error may echo.
pub const CLIP: usize = 64;

/// Methods a client may call (rmcp's typed client requests).
const METHODS: &[&str] = &[
    "ping",
    "initialize",
    "server/discover",
    "completion/complete",
    "logging/setLevel",
    "prompts/get",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/directory/read",
    "subscriptions/listen",
    "resources/subscribe",
    "resources/unsubscribe",
    "tools/call",
    "tools/list",
    "tasks/get",
    "tasks/update",
    "tasks/cancel",
    "skills/list",
    "skills/get",
];

/// What to do with one frame.
#[derive(Debug)]
pub enum Verdict {
    /// A blank line: nothing to do.
    Skip,
    /// A well-formed message for rmcp.
    Forward(Box<ClientJsonRpcMessage>),
    /// Send this answer (an error response, or an array of them); forward nothing.
    Answer(Value),
    /// Nothing to forward and nothing to answer (a malformed notification or response).
    Drop,
}

/// A JSON-RPC error response.
pub fn error(id: Value, code: i64, message: &str, data: Option<Value>) -> Value {
    let mut error = json!({"code": code, "message": message});
    if let Some(data) = data {
        error["data"] = data;
    }
    json!({"jsonrpc": "2.0", "id": id, "error": error})
}

/// Judge one frame (without its line terminator).
pub fn inspect(frame: &[u8]) -> Verdict {
    let frame = frame.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(frame);
    if frame.iter().all(u8::is_ascii_whitespace) {
        return Verdict::Skip;
    }
    let Ok(text) = std::str::from_utf8(frame) else {
        return Verdict::Answer(error(
            Value::Null,
            PARSE_ERROR,
            "Parse error: the message is not UTF-8",
            None,
        ));
    };
    let Some(scanned) = scan(text.as_bytes()) else {
        return Verdict::Answer(error(
            Value::Null,
            PARSE_ERROR,
            "Parse error: the message is not JSON",
            None,
        ));
    };
    if let Some(path) = &scanned.repeated
        && text.trim_start().starts_with('{')
    {
        return repeated(text, &scanned, path, "a repeated key at");
    }
    if let Some(path) = &scanned.control
        && text.trim_start().starts_with('{')
    {
        return repeated(text, &scanned, path, "a key with a control character in");
    }
    let value: Value = match serde_json::from_str(text) {
        Ok(value) => value,
        Err(e) => {
            // Valid JSON that serde cannot represent. The id, when the scanner found a
            // usable one, is answered; the error says where, never what.
            let id = scanned
                .id
                .as_ref()
                .and_then(|span| serde_json::from_str::<Value>(&text[span.clone()]).ok())
                .filter(usable_id)
                .unwrap_or(Value::Null);
            let offset = offset_of(text, e.line(), e.column());
            let in_params = scanned
                .params
                .as_ref()
                .is_some_and(|span| span.contains(&offset));
            let why = if e.to_string().contains("recursion limit") {
                "nesting deeper than 128 levels"
            } else if e.to_string().contains("number out of range") {
                "a number beyond the range of a double"
            } else {
                "a value the server cannot represent"
            };
            return Verdict::Answer(if in_params {
                error(id, INVALID_PARAMS, &format!("Invalid params: {why}"), None)
            } else {
                error(
                    id,
                    INVALID_REQUEST,
                    &format!("Invalid request: {why}"),
                    None,
                )
            });
        }
    };
    match value {
        Value::Array(items) => batch(&items),
        Value::Object(object) => single(object),
        _ => Verdict::Answer(error(
            Value::Null,
            INVALID_REQUEST,
            "Invalid request: a message must be a JSON object",
            None,
        )),
    }
}

/// A message with a key repeated in one of its objects (serde would keep the last
/// occurrence while a log or a client's view may show the first: the tool name, an
/// argument), or a key with a control character (`"name\u0000"`, which serde keeps as a
/// key of its own while a viewer reading C strings shows `name` twice): refused whole,
/// nothing runs. A request gets `-32600` saying `what` and naming the path (the repeated
/// key's, or the object holding the key with a control character — never that key nor a
/// value), with its id unless the id itself is repeated; a notification or a response is
/// dropped.
fn repeated(text: &str, scanned: &Scanned, path: &str, what: &str) -> Verdict {
    let id = scanned.id.as_ref().filter(|_| path != "$.id").map(|span| {
        serde_json::from_str::<Value>(&text[span.clone()])
            .ok()
            .filter(usable_id)
            .unwrap_or(Value::Null)
    });
    let id = match (scanned.method, id) {
        (false, _) => return Verdict::Drop,
        (true, None) if scanned.id.is_none() => return Verdict::Drop,
        (true, id) => id.unwrap_or(Value::Null),
    };
    let path = clip(path, CLIP);
    Verdict::Answer(error(
        id,
        INVALID_REQUEST,
        &format!("Invalid request: {what} {path}"),
        Some(json!({"path": path})),
    ))
}

/// Where serde's 1-based line/column points, as a byte offset.
fn offset_of(text: &str, line: usize, column: usize) -> usize {
    let mut start = 0;
    for _ in 1..line {
        match text[start..].find('\n') {
            Some(n) => start += n + 1,
            None => break,
        }
    }
    (start + column).saturating_sub(1)
}

/// Ids rmcp can carry: strings and 64-bit integers.
fn usable_id(id: &Value) -> bool {
    id.is_string() || id.as_i64().is_some()
}

/// Answer a batch element by element: no revision `ccm` offers allows batches.
fn batch(items: &[Value]) -> Verdict {
    if items.is_empty() {
        return Verdict::Answer(error(
            Value::Null,
            INVALID_REQUEST,
            "Invalid request: an empty batch",
            None,
        ));
    }
    let answers: Vec<Value> = items
        .iter()
        .filter_map(|item| {
            let object = item.as_object();
            let id = object.and_then(|o| o.get("id"));
            let is_request = object.is_some_and(|o| o.contains_key("method"));
            match (object, id) {
                // Notifications and responses get no answer.
                (Some(_), None) => None,
                (Some(_), Some(_)) if !is_request => None,
                (Some(_), Some(id)) => Some(error(
                    echoable_id(id),
                    INVALID_REQUEST,
                    "Invalid request: batches are not supported; send one message at a time",
                    None,
                )),
                (None, _) => Some(error(
                    Value::Null,
                    INVALID_REQUEST,
                    "Invalid request: a message must be a JSON object",
                    None,
                )),
            }
        })
        .collect();
    if answers.is_empty() {
        Verdict::Drop
    } else {
        Verdict::Answer(Value::Array(answers))
    }
}

/// The id as answered when the request is refused: strings and numbers as sent, anything
/// else `null`.
fn echoable_id(id: &Value) -> Value {
    if id.is_string() || id.is_number() {
        id.clone()
    } else {
        Value::Null
    }
}

fn single(object: Map<String, Value>) -> Verdict {
    let id = object.get("id").cloned();
    let has_method = object.contains_key("method");
    let is_response = object.contains_key("result") || object.contains_key("error");
    let refuse = |message: &str| match &id {
        // A notification (no id) is never answered.
        None if has_method => Verdict::Drop,
        None if is_response => Verdict::Drop,
        None => Verdict::Answer(error(Value::Null, INVALID_REQUEST, message, None)),
        Some(id) => Verdict::Answer(error(echoable_id(id), INVALID_REQUEST, message, None)),
    };
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return refuse("Invalid request: \"jsonrpc\" must be \"2.0\"");
    }
    if let Some(id) = &id
        && !usable_id(id)
    {
        return refuse("Invalid request: \"id\" must be a string or an integer");
    }
    if !has_method {
        if is_response && id.is_some() {
            return match serde_json::from_value::<ClientJsonRpcMessage>(Value::Object(object)) {
                Ok(message) => Verdict::Forward(Box::new(message)),
                Err(_) => Verdict::Drop,
            };
        }
        return refuse("Invalid request: no \"method\"");
    }
    let Some(method) = object.get("method").and_then(Value::as_str) else {
        return refuse("Invalid request: \"method\" must be a string");
    };
    let method = method.to_owned();
    if let Some(params) = object.get("params")
        && !params.is_object()
    {
        return match &id {
            None => Verdict::Drop,
            Some(id) => Verdict::Answer(error(
                id.clone(),
                INVALID_PARAMS,
                "Invalid params: \"params\" must be an object",
                None,
            )),
        };
    }
    let Some(id) = id else {
        // A notification: forwarded when it parses, else dropped.
        return match serde_json::from_value::<ClientJsonRpcMessage>(Value::Object(object)) {
            Ok(message @ JsonRpcMessage::Notification(_)) => Verdict::Forward(Box::new(message)),
            _ => Verdict::Drop,
        };
    };
    let known = METHODS.contains(&method.as_str());
    if !known {
        return Verdict::Answer(error(
            id,
            METHOD_NOT_FOUND,
            "Method not found",
            Some(json!({"method": clip(&method, CLIP)})),
        ));
    }
    match serde_json::from_value::<ClientJsonRpcMessage>(Value::Object(object)) {
        Ok(JsonRpcMessage::Request(request))
            if !matches!(request.request, ClientRequest::CustomRequest(_)) =>
        {
            Verdict::Forward(Box::new(JsonRpcMessage::Request(request)))
        }
        _ => Verdict::Answer(error(
            id,
            INVALID_PARAMS,
            "Invalid params",
            Some(json!({"method": method})),
        )),
    }
}

mod sanitize;
mod scan;

pub use sanitize::{sanitize, sanitize_json};
pub use scan::{Scanned, scan};

#[cfg(test)]
mod tests;
