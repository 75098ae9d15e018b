//! The argv round trip: for every tool, inputs generated from its layout (proptest), kept
//! when its schema accepts them, compiled to argv, then parsed back by the target's own
//! parser (the helper's `parse` mode, one batched process per test). What argparse hands
//! each action must be exactly what the input said. Zero mismatches.

use std::collections::BTreeMap;
use std::path::Path;

use ccm::model::catalog::{ActionKind, Argument, Nargs, ValueType};
use ccm::tools::schema::boolean_flags;
use ccm::tools::toolset::{Tool, Toolset};
use serde_json::{Map, Value, json};

use crate::inputs;
use crate::support;

/// Cases per tool: `CCM_ROUNDTRIP_CASES`, default 200.
fn cases_per_tool() -> usize {
    std::env::var("CCM_ROUNDTRIP_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200)
}

/// One recorded action invocation.
#[derive(Clone, Debug)]
struct Call {
    option: Option<String>,
    values: Expected,
}

#[derive(Clone, Debug)]
enum Expected {
    Exact(Value),
    /// A number-typed value: compared numerically.
    Number(f64),
    List(Vec<Expected>),
    /// The argument's `const` that the catalog could not represent: anything.
    Any,
}

fn typed(argument: &Argument, v: &Value) -> Expected {
    match argument.value_type {
        ValueType::Number => Expected::Number(v.as_f64().unwrap()),
        ValueType::Integer => Expected::Exact(json!(v.as_f64().map(|f| f as i64).unwrap())),
        ValueType::String => Expected::Exact(v.clone()),
    }
}

fn typed_list(argument: &Argument, v: &Value) -> Expected {
    Expected::List(
        v.as_array()
            .unwrap()
            .iter()
            .map(|i| typed(argument, i))
            .collect(),
    )
}

fn const_of(argument: &Argument) -> Expected {
    if argument.const_value.is_null() {
        Expected::Any
    } else {
        Expected::Exact(argument.const_value.clone())
    }
}

fn calls_for(argument: &Argument, v: &Value) -> Vec<Call> {
    let flag = argument.preferred_flag().map(str::to_owned);
    let call = |values: Expected| Call {
        option: flag.clone(),
        values,
    };
    let empty = || Expected::List(vec![]);
    let one = |v: &Value| -> Expected {
        match argument.nargs {
            Nargs::One => typed(argument, v),
            Nargs::Optional if v.is_null() => const_of(argument),
            Nargs::Optional => typed(argument, v),
            Nargs::Remainder | Nargs::Parser => Expected::Exact(v.clone()),
            _ => typed_list(argument, v),
        }
    };
    if argument.is_positional() {
        let absent = v.is_null()
            || (argument.nargs == Nargs::ZeroOrMore && v.as_array().is_some_and(|a| a.is_empty()));
        return if absent {
            vec![]
        } else {
            vec![Call {
                option: None,
                values: one(v),
            }]
        };
    }
    match argument.action {
        ActionKind::StoreTrue | ActionKind::StoreConst => {
            if v.as_bool().unwrap() {
                vec![call(empty())]
            } else {
                vec![]
            }
        }
        ActionKind::StoreFalse => {
            if v.as_bool().unwrap() {
                vec![]
            } else {
                vec![call(empty())]
            }
        }
        ActionKind::Boolean => {
            let (pos, neg) = boolean_flags(argument);
            let chosen = if v.as_bool().unwrap() { pos } else { neg };
            vec![Call {
                option: chosen.map(str::to_owned),
                values: empty(),
            }]
        }
        ActionKind::Count | ActionKind::AppendConst => (0..v.as_f64().unwrap() as usize)
            .map(|_| call(empty()))
            .collect(),
        ActionKind::Store => vec![call(one(v))],
        ActionKind::Append => v.as_array().unwrap().iter().map(|o| call(one(o))).collect(),
        ActionKind::Extend => match argument.nargs {
            Nargs::One | Nargs::Optional => {
                v.as_array().unwrap().iter().map(|o| call(one(o))).collect()
            }
            _ => vec![call(one(v))],
        },
        ActionKind::ExtendConst => vec![call(typed_list(argument, v))],
    }
}

fn matches(expected: &Expected, actual: &Value) -> bool {
    match (expected, actual) {
        (Expected::Any, _) => true,
        (Expected::Exact(e), a) => e == a,
        (Expected::Number(e), a) => a
            .as_f64()
            .is_some_and(|a| a == *e || (a - e).abs() <= e.abs() * 1e-12),
        (Expected::List(items), Value::Array(actual)) => {
            items.len() == actual.len() && items.iter().zip(actual).all(|(e, a)| matches(e, a))
        }
        _ => false,
    }
}

/// The calls the parse must record for this input, keyed like the helper's keys.
fn expected_calls(tool: &Tool, input: &Map<String, Value>) -> BTreeMap<String, Vec<Call>> {
    let mut out: BTreeMap<String, Vec<Call>> = BTreeMap::new();
    for property in &tool.layout.properties {
        let Some(v) = input.get(&property.id) else {
            continue;
        };
        let calls = calls_for(&property.argument, v);
        if calls.is_empty() {
            continue;
        }
        let a = &property.argument;
        let key = format!(
            "{}|{}|{}|{}",
            property.level,
            tool.path[..property.level].join(" "),
            a.flags.join(","),
            a.dest
        );
        out.entry(key).or_default().extend(calls);
    }
    out
}

struct Case {
    tool: usize,
    input: Map<String, Value>,
    argv: Vec<String>,
}

/// Generate cases for every tool, parse them all in one helper run, report mismatches.
fn round_trip(tools: &Toolset, interpreter: &Path, per_tool: usize) -> (usize, Vec<String>) {
    let mut runner = inputs::runner("round trip");
    let mut cases = Vec::new();
    for (index, tool) in tools.generated.iter().enumerate() {
        let mut kept = 0;
        for input in inputs::valid_inputs(tool, &mut runner, per_tool) {
            // An order the interpreter refuses (argparse could not read it) is not a case.
            if let Ok(argv) = ccm::tools::argv::compile(&tool.layout, &input) {
                kept += 1;
                cases.push(Case {
                    tool: index,
                    input,
                    argv,
                });
            }
        }
        assert!(kept > 0, "{}: no valid input generated", tool.name);
    }
    let batch = json!({"argvs": cases.iter().map(|c| &c.argv).collect::<Vec<_>>()});
    let doc = support::runtime()
        .block_on(ccm::host::discovery::run_helper::<Value>(
            &support::executions(),
            interpreter,
            "parse",
            &[],
            std::time::Duration::from_secs(600),
            Some(serde_json::to_vec(&batch).unwrap()),
        ))
        .expect("the parse helper runs");
    let results = doc["results"].as_array().expect("results");
    assert_eq!(results.len(), cases.len());
    let mut mismatches = Vec::new();
    for (case, result) in cases.iter().zip(results) {
        let tool = &tools.generated[case.tool];
        let report = |why: String| {
            format!(
                "{}: input {} argv {:?}: {why}",
                tool.name,
                Value::Object(case.input.clone()),
                case.argv
            )
        };
        if let Some(error) = result.get("error") {
            mismatches.push(report(format!("argparse rejected it: {error}")));
            continue;
        }
        if result["path"] != json!(tool.path) {
            mismatches.push(report(format!("parsed as path {}", result["path"])));
            continue;
        }
        let actual = result["calls"].as_object().unwrap();
        let expected = expected_calls(tool, &case.input);
        let mut keys: Vec<&String> = actual.keys().filter(|k| *k != "passthrough").collect();
        keys.extend(expected.keys());
        keys.sort();
        keys.dedup();
        for key in keys {
            let want = expected.get(key).cloned().unwrap_or_default();
            let got = actual
                .get(key)
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let same = want.len() == got.len()
                && want.iter().zip(&got).all(|(w, g)| {
                    g["option"] == json!(w.option) && matches(&w.values, &g["values"])
                });
            if !same {
                mismatches.push(report(format!(
                    "{key}: expected {want:?}, argparse gave {got:?}"
                )));
            }
        }
        if let Some(id) = &tool.layout.passthrough {
            let want = case.input.get(id).cloned().unwrap_or(json!([]));
            if actual.get("passthrough") != Some(&want) {
                mismatches.push(report(format!(
                    "passthrough {:?}",
                    actual.get("passthrough")
                )));
            }
        }
    }
    (cases.len(), mismatches)
}

fn assert_round_trip(tools: &Toolset, interpreter: &Path, label: &str) {
    let (cases, mismatches) = round_trip(tools, interpreter, cases_per_tool());
    eprintln!(
        "round trip on {label}: {} tools, {cases} cases, {} mismatches",
        tools.generated.len(),
        mismatches.len()
    );
    assert!(
        mismatches.is_empty(),
        "{} of {cases} cases did not round-trip; first ones:\n{}",
        mismatches.len(),
        mismatches
            .iter()
            .take(8)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn fixture_round_trip() {
    let found = support::fixture_discovery();
    let tools = support::toolset(&found.catalog, &found.plugins, false);
    assert_round_trip(
        &tools,
        found.interpreter.as_ref().unwrap(),
        "the fixture conda",
    );
}

#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_round_trip() {
    let found = support::real_discovery();
    let tools = support::toolset(&found.catalog, &found.plugins, false);
    assert_round_trip(&tools, found.interpreter.as_ref().unwrap(), "real conda");
}

#[test]
fn fixture_round_trip_with_tools_from_the_baked_snapshot() {
    // The instant-start path serves tools built from the checked-in snapshot.
    let snapshot = support::snapshot(support::FIXTURE);
    let tools = support::toolset(&snapshot.catalog, &snapshot.plugins, false);
    let found = support::fixture_discovery();
    assert_round_trip(
        &tools,
        found.interpreter.as_ref().unwrap(),
        "the fixture conda (snapshot tools)",
    );
}
