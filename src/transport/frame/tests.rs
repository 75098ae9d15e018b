use super::*;
use rmcp::model::ErrorData;

fn answer(frame: &str) -> Value {
    match inspect(frame.as_bytes()) {
        Verdict::Answer(v) => v,
        other => panic!("{frame}: {other:?}"),
    }
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

/// The path a refusal for a repeated key names, if the frame got one.
fn repeated_path(frame: &str) -> Option<String> {
    match inspect(frame.as_bytes()) {
        Verdict::Answer(v) => v["error"]["data"]["path"].as_str().map(str::to_owned),
        _ => None,
    }
}

#[test]
fn a_repeated_key_anywhere_is_refused_with_its_path_never_its_value() {
    for (frame, id, path) in [
        // The tool name: a log or a client UI shows the first, serde keeps the last.
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"conda_info","name":"conda_run","arguments":{}}}"#,
            json!(1),
            "$.params.name",
        ),
        // Deep inside the arguments, compared after unescaping.
        (
            r#"{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"t","arguments":{"a":[{"b":1},{"k":"SECRET1","\u006b":"SECRET2"}]}}}"#,
            json!("x"),
            "$.params.arguments.a[1].k",
        ),
        // The method, at the top.
        (
            r#"{"jsonrpc":"2.0","id":2,"method":"ping","method":"tools/list"}"#,
            json!(2),
            "$.method",
        ),
        // A repeated id is answered without one.
        (
            r#"{"jsonrpc":"2.0","id":3,"id":4,"method":"ping"}"#,
            Value::Null,
            "$.id",
        ),
        // In _meta.
        (
            r#"{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{"_meta":{"p":1,"p":2}}}"#,
            json!(5),
            "$.params._meta.p",
        ),
    ] {
        let v = answer(frame);
        assert_eq!(v["id"], id, "{frame}");
        assert_eq!(v["error"]["code"], INVALID_REQUEST, "{frame}");
        assert_eq!(v["error"]["data"]["path"], path, "{frame}");
        let text = v.to_string();
        for value in ["SECRET", "conda_run", "tools/list"] {
            assert!(!text.contains(value), "{frame} echoed {value}: {text}");
        }
    }
    // The same keys in different objects, and different keys, are fine.
    for frame in [
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"name":"x","a":{"name":1},"b":[{"a":1},{"a":2}]}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":1,"A":2,"a ":3,"\u00e9":4,"e\u0301":5}}"#,
    ] {
        assert_eq!(repeated_path(frame), None, "{frame}");
    }
    // A notification with a repeated key is dropped (never answered, never forwarded).
    assert!(matches!(
        inspect(br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"requestId":2}}"#),
        Verdict::Drop
    ));
    // A long key is echoed at most CLIP characters long.
    let long = "k".repeat(500);
    let v = answer(&format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"{long}":1,"{long}":2}}}}"#
    ));
    assert!(v["error"]["data"]["path"].as_str().unwrap().chars().count() <= CLIP + 1);
}

#[test]
fn repeated_keys_are_found_at_any_depth_serde_takes_without_recursion() {
    let nested = |depth: usize| {
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"x":[0,{}{{"a":1,"a":2}}{}]}}}}"#,
            "[".repeat(depth),
            "]".repeat(depth)
        )
    };
    // As deep as serde takes: found, with its path.
    let v = answer(&nested(120));
    assert_eq!(v["error"]["code"], INVALID_REQUEST);
    let path = v["error"]["data"]["path"].as_str().unwrap();
    assert!(path.starts_with("$.params.x[1][0][0]"), "{v}");
    // Far deeper: refused for its depth (serde's limit), nothing forwarded; the scanner
    // keeps one byte per level beyond the tracked ones.
    let v = answer(&nested(50_000));
    assert_eq!(v["error"]["code"], INVALID_PARAMS, "{v}");
    // Past the first keys an object's keys go into a set: a repeat is still found there.
    let members: Vec<String> = (0..20).map(|i| format!("\"k{i}\":{i}")).collect();
    let frame = |extra: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"o":{{{},{extra}}},"k3":0}}}}"#,
            members.join(",")
        )
    };
    assert_eq!(
        repeated_path(&frame(r#""\u006b3":1"#)).as_deref(),
        Some("$.params.o.k3")
    );
    assert_eq!(repeated_path(&frame(r#""k20":1"#)), None);
    // Many keys in one object: each compared once (a hash), not with every other.
    let mut members: Vec<String> = (0..100_000).map(|i| format!("\"k{i}\":{i}")).collect();
    let unique = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{{}}}}}"#,
        members.join(",")
    );
    assert_eq!(repeated_path(&unique), None);
    members.push("\"k99999\":0".into());
    let repeated = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{{}}}}}"#,
        members.join(",")
    );
    assert_eq!(
        answer(&repeated)["error"]["data"]["path"],
        "$.params.k99999"
    );
}

/// A key with a control character (`"name\u0000"`): serde keeps it as a key of its own
/// (ignored by rmcp), while a log or a viewer that reads C strings shows `name` twice.
/// Refused whole with the path of the object that holds it, never the key or a value.
#[test]
fn a_key_with_a_control_character_is_refused_naming_no_value() {
    for (frame, path) in [
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"conda_info","arguments":{},"name\u0000":"conda_run"}}"#,
            "$.params",
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"prefix":"/p","pre\u001bfix":"SECRET"}}}"#,
            "$.params.arguments",
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"a":[{"\u007f":"SECRET"}]}}}"#,
            "$.params.arguments.a[0]",
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","id\u0000":2}"#,
            "$",
        ),
    ] {
        let v = answer(frame);
        assert_eq!(v["id"], 1, "{frame}");
        assert_eq!(v["error"]["code"], INVALID_REQUEST, "{frame}");
        assert_eq!(v["error"]["data"]["path"], path, "{frame}");
        let message = v["error"]["message"].as_str().unwrap();
        assert_eq!(
            message,
            format!("Invalid request: a key with a control character in {path}")
        );
        let text = v.to_string();
        for value in ["SECRET", "conda_run", "u0000", "pre"] {
            assert!(!text.contains(value), "{frame} echoed {value}: {text}");
        }
    }
    // Escapes that are no control character stay keys like any other.
    let frame =
        r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"\u00e9":1,"a\"b":2,"\u2028":3}}"#;
    assert_eq!(repeated_path(frame), None, "{frame}");
    // A notification is dropped.
    assert!(matches!(
        inspect(
            br#"{"jsonrpc":"2.0","method":"notifications/initialized","params":{"x\u0000":1}}"#
        ),
        Verdict::Drop
    ));
}
