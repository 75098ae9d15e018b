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

use std::ops::Range;

use rmcp::model::{ClientJsonRpcMessage, ClientRequest, ErrorData, JsonRpcMessage};
use serde_json::{Map, Value, json};

use crate::tools::schema::clip;

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
/// Most characters of client text an error may echo.
pub const CLIP: usize = 64;
/// Most characters of an error message the server sends.
const MESSAGE_LIMIT: usize = 240;

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

/// Make an outgoing error keep the echo rule: the message is one bounded line, `data` is
/// an object whose strings echo at most [`CLIP`] characters.
pub fn sanitize(error: &mut ErrorData) {
    if needs_clipping(&error.message) {
        error.message = clip_message(&error.message).into();
    }
    error.data = match error.data.take() {
        None => None,
        Some(Value::Object(object)) => Some(clip_strings(Value::Object(object))),
        Some(other) => Some(json!({"detail": clip_strings(other)})),
    };
}

fn needs_clipping(message: &str) -> bool {
    message.chars().count() > MESSAGE_LIMIT
        || message.chars().any(char::is_control)
        || message
            .split(|c: char| c.is_whitespace() || QUOTES.contains(&c))
            .any(|run| run.chars().count() > CLIP)
}

/// Characters that delimit quoted client text in messages (rmcp writes `` `value` `` and
/// `(value)`).
const QUOTES: [char; 5] = ['`', '(', ')', '\'', '"'];

/// An error message whose quoted parts and unbroken runs (where client text hides) are cut
/// to [`CLIP`] characters, and the whole to a bounded line.
fn clip_message(message: &str) -> String {
    let mut out = String::new();
    let mut run = String::new();
    let flush = |run: &mut String, out: &mut String| {
        out.push_str(&clip(run, CLIP));
        run.clear();
    };
    for c in message.chars() {
        if c.is_whitespace() || QUOTES.contains(&c) {
            flush(&mut run, &mut out);
            out.push(if c.is_whitespace() { ' ' } else { c });
        } else {
            run.push(c);
        }
    }
    flush(&mut run, &mut out);
    clip(&out, MESSAGE_LIMIT)
}

/// [`sanitize`] for a JSON-RPC answer (or an array of them) as JSON.
pub fn sanitize_json(value: &mut Value) {
    match value {
        Value::Array(items) => items.iter_mut().for_each(sanitize_json),
        Value::Object(object) => {
            if let Some(Value::Object(error)) = object.get_mut("error") {
                if let Some(Value::String(message)) = error.get_mut("message")
                    && needs_clipping(message)
                {
                    *message = clip_message(message);
                }
                if let Some(data) = error.remove("data") {
                    let data = match data {
                        Value::Object(_) => clip_strings(data),
                        other => json!({"detail": clip_strings(other)}),
                    };
                    error.insert("data".into(), data);
                }
            }
        }
        _ => {}
    }
}

fn clip_strings(value: Value) -> Value {
    match value {
        Value::String(text) => Value::String(clip(&text, CLIP)),
        Value::Array(items) => Value::Array(items.into_iter().map(clip_strings).collect()),
        Value::Object(object) => Value::Object(
            object
                .into_iter()
                .map(|(k, v)| (clip(&k, CLIP), clip_strings(v)))
                .collect(),
        ),
        other => other,
    }
}

/// Where a syntactically valid JSON text keeps its top-level `id` and `params`.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Scanned {
    pub id: Option<Range<usize>>,
    pub params: Option<Range<usize>>,
}

/// Check RFC 8259 syntax without depth or number limits (iteratively: any nesting), and
/// find the spans of the top-level object's `id` and `params`. `None`: not JSON.
pub fn scan(b: &[u8]) -> Option<Scanned> {
    #[derive(Clone, Copy, PartialEq)]
    enum Want {
        Value,
        ValueOrClose,
        Key,
        KeyOrClose,
        CommaOrClose,
    }
    let mut found = Scanned::default();
    // true: object, false: array.
    let mut stack: Vec<bool> = Vec::new();
    let mut want = Want::Value;
    let mut i = 0;
    let mut key: Option<String> = None;
    let mut value_start = 0;
    let ws = |i: &mut usize| {
        while *i < b.len() && matches!(b[*i], b' ' | b'\t' | b'\n' | b'\r') {
            *i += 1;
        }
    };
    loop {
        ws(&mut i);
        let c = *b.get(i)?;
        match want {
            Want::Value | Want::ValueOrClose => {
                if want == Want::ValueOrClose && c == b']' {
                    i += 1;
                    stack.pop();
                } else {
                    if stack.len() == 1 && stack[0] {
                        value_start = i;
                    }
                    match c {
                        b'{' => {
                            i += 1;
                            stack.push(true);
                            want = Want::KeyOrClose;
                            continue;
                        }
                        b'[' => {
                            i += 1;
                            stack.push(false);
                            want = Want::ValueOrClose;
                            continue;
                        }
                        b'"' => i = string(b, i)?,
                        b'-' | b'0'..=b'9' => i = number(b, i)?,
                        b't' => i = literal(b, i, b"true")?,
                        b'f' => i = literal(b, i, b"false")?,
                        b'n' => i = literal(b, i, b"null")?,
                        _ => return None,
                    }
                }
            }
            Want::Key | Want::KeyOrClose => {
                if want == Want::KeyOrClose && c == b'}' {
                    i += 1;
                    stack.pop();
                } else {
                    if c != b'"' {
                        return None;
                    }
                    let end = string(b, i)?;
                    if stack.len() == 1 {
                        key = serde_json::from_slice::<String>(&b[i..end]).ok();
                    }
                    i = end;
                    ws(&mut i);
                    if b.get(i) != Some(&b':') {
                        return None;
                    }
                    i += 1;
                    want = Want::Value;
                    continue;
                }
            }
            Want::CommaOrClose => {
                let object = *stack.last()?;
                match (c, object) {
                    (b',', true) => {
                        i += 1;
                        want = Want::Key;
                        continue;
                    }
                    (b',', false) => {
                        i += 1;
                        want = Want::Value;
                        continue;
                    }
                    (b'}', true) | (b']', false) => {
                        i += 1;
                        stack.pop();
                    }
                    _ => return None,
                }
            }
        }
        // A value ended at `i`.
        if stack.len() == 1 && stack[0] {
            match key.as_deref() {
                Some("id") => found.id = Some(value_start..i),
                Some("params") => found.params = Some(value_start..i),
                _ => {}
            }
        }
        if stack.is_empty() {
            ws(&mut i);
            return (i == b.len()).then_some(found);
        }
        want = Want::CommaOrClose;
    }
}

/// The end of the string that starts at `i` (a `"`).
fn string(b: &[u8], mut i: usize) -> Option<usize> {
    i += 1;
    loop {
        match *b.get(i)? {
            b'"' => return Some(i + 1),
            b'\\' => match *b.get(i + 1)? {
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => i += 2,
                b'u' => {
                    let hex = b.get(i + 2..i + 6)?;
                    if !hex.iter().all(u8::is_ascii_hexdigit) {
                        return None;
                    }
                    i += 6;
                }
                _ => return None,
            },
            0..=0x1f => return None,
            _ => i += 1,
        }
    }
}

/// The end of the number that starts at `i`.
fn number(b: &[u8], mut i: usize) -> Option<usize> {
    let digits = |i: &mut usize| {
        let start = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i > start
    };
    if b.get(i) == Some(&b'-') {
        i += 1;
    }
    match b.get(i)? {
        b'0' => i += 1,
        b'1'..=b'9' => {
            digits(&mut i);
        }
        _ => return None,
    }
    if b.get(i) == Some(&b'.') {
        i += 1;
        if !digits(&mut i) {
            return None;
        }
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if !digits(&mut i) {
            return None;
        }
    }
    Some(i)
}

fn literal(b: &[u8], i: usize, word: &[u8]) -> Option<usize> {
    (b.get(i..i + word.len())? == word).then_some(i + word.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(frame: &str) -> Value {
        match inspect(frame.as_bytes()) {
            Verdict::Answer(v) => v,
            other => panic!("{frame}: {other:?}"),
        }
    }

    #[test]
    fn scanner_accepts_json_and_rejects_the_rest() {
        for ok in [
            "0",
            "-1.5e+10",
            "\"a\\u00e9\\n\"",
            "[]",
            "{}",
            "[1,[2,{\"a\":[true,false,null]}]]",
            " {\"id\" : 7 , \"params\":{\"x\":[1e400]}} ",
        ] {
            assert!(scan(ok.as_bytes()).is_some(), "{ok}");
        }
        for bad in [
            "",
            "NaN",
            "Infinity",
            "-Infinity",
            "{\"a\":NaN}",
            "[1,]",
            "{\"a\":1,}",
            "01",
            "1.",
            "\"\\x\"",
            "\"a\tb\"",
            "{\"a\" 1}",
            "[1] 2",
            "{",
            "tru",
        ] {
            assert!(scan(bad.as_bytes()).is_none(), "{bad}");
        }
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(scan(deep.as_bytes()).is_some());
        let text = r#"{"jsonrpc":"2.0","params":{"a":[1]},"id":"x"}"#;
        let found = scan(text.as_bytes()).unwrap();
        assert_eq!(&text[found.id.unwrap()], "\"x\"");
        assert_eq!(&text[found.params.unwrap()], "{\"a\":[1]}");
    }

    #[test]
    fn not_json_is_a_parse_error_with_a_null_id() {
        for frame in [
            &b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"x\":NaN}"[..],
            b"Infinity",
            b"{\"id\":1,\"method\":\"ping\"\xff}",
            b"{\"jsonrpc\":\"2.0\",\"id\":1",
        ] {
            let v = match inspect(frame) {
                Verdict::Answer(v) => v,
                other => panic!("{other:?}"),
            };
            assert_eq!(v["id"], Value::Null);
            assert_eq!(v["error"]["code"], PARSE_ERROR);
        }
    }

    #[test]
    fn valid_json_serde_cannot_take_keeps_its_id() {
        let v = answer(r#"{"jsonrpc":"2.0","id":5,"method":"ping","params":{"x":1e400}}"#);
        assert_eq!(
            (v["id"].clone(), v["error"]["code"].clone()),
            (json!(5), json!(INVALID_PARAMS))
        );
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":"d","method":"tools/call","params":{{"name":"x","arguments":{{"a":{}{}}}}}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        let v = answer(&deep);
        assert_eq!(
            (v["id"].clone(), v["error"]["code"].clone()),
            (json!("d"), json!(INVALID_PARAMS))
        );
        let v = answer(r#"{"jsonrpc":"2.0","id":6,"method":"ping","x":-1e999}"#);
        assert_eq!(
            (v["id"].clone(), v["error"]["code"].clone()),
            (json!(6), json!(INVALID_REQUEST))
        );
        let v = answer(r#"{"jsonrpc":"2.0","id":1e400,"method":"ping"}"#);
        assert_eq!(v["id"], Value::Null);
    }

    #[test]
    fn invalid_requests_keep_their_id() {
        for (frame, id, code) in [
            (r#"{"id":1,"method":"ping"}"#, json!(1), INVALID_REQUEST),
            (
                r#"{"jsonrpc":"1.0","id":"a","method":"ping"}"#,
                json!("a"),
                INVALID_REQUEST,
            ),
            (
                r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#,
                json!(1.5),
                INVALID_REQUEST,
            ),
            (
                r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
                Value::Null,
                INVALID_REQUEST,
            ),
            (
                r#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#,
                Value::Null,
                INVALID_REQUEST,
            ),
            (
                r#"{"jsonrpc":"2.0","id":2,"method":7}"#,
                json!(2),
                INVALID_REQUEST,
            ),
            (r#"{"jsonrpc":"2.0","id":3}"#, json!(3), INVALID_REQUEST),
            (r#"[1]"#, Value::Null, INVALID_REQUEST),
            (r#"7"#, Value::Null, INVALID_REQUEST),
            (
                r#"{"jsonrpc":"2.0","id":4,"method":"tools/list","params":[1]}"#,
                json!(4),
                INVALID_PARAMS,
            ),
            (
                r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"x","arguments":[1,2]}}"#,
                json!(5),
                INVALID_PARAMS,
            ),
            (
                r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{}}"#,
                json!(6),
                INVALID_PARAMS,
            ),
            (
                r#"{"jsonrpc":"2.0","id":7,"method":"nope"}"#,
                json!(7),
                METHOD_NOT_FOUND,
            ),
        ] {
            let v = if frame.starts_with('[') {
                answer(frame)[0].clone()
            } else {
                answer(frame)
            };
            assert_eq!(v["id"], id, "{frame}");
            assert_eq!(v["error"]["code"], code, "{frame}");
            assert!(
                v["error"].get("data").is_none_or(Value::is_object),
                "{frame}"
            );
        }
    }

    #[test]
    fn batches_are_answered_element_by_element() {
        let v = answer(
            r#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":"b","method":"tools/list"},3]"#,
        );
        let ids: Vec<Value> = v
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["id"].clone())
            .collect();
        assert_eq!(ids, [json!(1), json!("b"), Value::Null]);
        assert_eq!(answer("[]")["error"]["code"], INVALID_REQUEST);
        assert!(matches!(
            inspect(br#"[{"jsonrpc":"2.0","method":"notifications/initialized"}]"#),
            Verdict::Drop
        ));
    }

    #[test]
    fn good_frames_are_forwarded_and_bad_notifications_dropped() {
        for frame in [
            r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"conda_info","arguments":{}}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            "\u{feff}{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\r",
        ] {
            assert!(
                matches!(inspect(frame.trim_end().as_bytes()), Verdict::Forward(_)),
                "{frame}"
            );
        }
        assert!(matches!(inspect(b"  \t"), Verdict::Skip));
        assert!(matches!(
            inspect(br#"{"jsonrpc":"2.0","method":"nope","params":[1]}"#),
            Verdict::Drop
        ));
    }

    #[test]
    fn nothing_long_is_echoed() {
        let method = format!("m\n{}", "x".repeat(10_000));
        let frame = json!({"jsonrpc": "2.0", "id": 1, "method": method}).to_string();
        let v = answer(&frame);
        let text = v.to_string();
        assert!(text.len() < 400, "{text}");
        assert!(!text.contains('\n'));
        let mut e = ErrorData::invalid_params(
            format!("bad {}", "y\u{1b}".repeat(5000)),
            Some(json!("z".repeat(1000))),
        );
        sanitize(&mut e);
        assert!(e.message.len() < 2000 && !e.message.contains('\u{1b}'));
        let data = e.data.unwrap();
        assert!(data.is_object() && data.to_string().len() < 200);
        let mut v = json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32020,
            "message": format!("header `{}`", "x".repeat(5000)), "data": [1, "y".repeat(100)]}});
        sanitize_json(&mut v);
        assert!(v.to_string().len() < 500, "{v}");
        assert!(v["error"]["data"].is_object());
    }
}
