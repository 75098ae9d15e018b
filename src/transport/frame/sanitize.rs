//! The echo rule for every error the server sends: messages one bounded line, `data` an
//! object whose strings echo at most [`CLIP`] characters of client text.

use rmcp::model::ErrorData;
use serde_json::{Value, json};

use super::CLIP;
use crate::tools::schema::clip;

/// Most characters of an error message the server sends (client text in it is cut to
/// [`CLIP`] characters per run; the server's own texts, such as a schema error with what a
/// listed form offers, fit).
const MESSAGE_LIMIT: usize = 1000;

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
        || message.chars().any(crate::tools::schema::invisible)
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
