//! Valid tool inputs generated from a tool's layout (proptest strategies), shared by the
//! round-trip and the differential tests. Inputs are drawn per property from the action
//! kind, nargs, type and choices; callers keep the ones the tool's schema accepts.

use ccm::model::catalog::{ActionKind, Argument, Nargs, ValueType};
use ccm::tools::layout::Property;
use ccm::tools::toolset::Tool;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde_json::{Map, Value, json};

const TRICKY: &[&str] = &[
    "",
    "x",
    "a b",
    "a=b",
    "=x",
    "-x",
    "--x",
    "--",
    "-",
    "-1",
    "1.5",
    "é",
    "两个",
    "\"q\"",
    "'s'",
    "a,b",
    "*",
    "py>=3.8",
    "conda-forge::numpy",
    "path/with spaces",
    "\\",
    "-n",
    "--name=x",
];

pub(crate) fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => "[a-zA-Z0-9_.:/@+,=-]{0,10}",
        1 => prop::sample::select(TRICKY).prop_map(str::to_owned),
        1 => "[ -~]{0,6}",
    ]
}

/// A value argparse may receive as one item of this argument.
fn scalar(argument: &Argument, option_like_ok: bool) -> BoxedStrategy<Value> {
    if !argument.choices.is_empty() {
        let choices: Vec<Value> = argument
            .choices
            .iter()
            .filter_map(|c| match argument.value_type {
                ValueType::String => Some(json!(c)),
                ValueType::Integer => c.parse::<i64>().ok().map(|n| json!(n)),
                ValueType::Number => c.parse::<f64>().ok().map(|n| json!(n)),
            })
            .collect();
        if !choices.is_empty() {
            return prop::sample::select(choices).boxed();
        }
    }
    match argument.value_type {
        ValueType::Integer => prop_oneof![
            (-5i64..1000).prop_map(|n| json!(n)),
            (0i64..50).prop_map(|n| json!(n as f64)), // 2.0 must compile to 2
        ]
        .boxed(),
        ValueType::Number => prop_oneof![
            (-1000i64..1000).prop_map(|n| json!(n)),
            (-1.0e6f64..1.0e6).prop_map(|f| json!(f)),
        ]
        .boxed(),
        ValueType::String => text()
            .prop_map(move |s| {
                if option_like_ok {
                    json!(s)
                } else {
                    json!(s.trim_start_matches('-'))
                }
            })
            .boxed(),
    }
}

fn list(argument: &Argument, min: usize, max: usize) -> BoxedStrategy<Value> {
    prop::collection::vec(scalar(argument, false), min..=max)
        .prop_map(Value::Array)
        .boxed()
}

/// One occurrence of a value-taking argument.
fn occurrence(argument: &Argument) -> BoxedStrategy<Value> {
    let attached = !argument.is_positional();
    match argument.nargs {
        Nargs::One => scalar(argument, attached),
        Nargs::Optional => prop_oneof![Just(Value::Null), scalar(argument, attached)].boxed(),
        Nargs::Exactly(n) => list(argument, n as usize, n as usize),
        Nargs::ZeroOrMore => list(argument, 0, 3),
        Nargs::OneOrMore => list(argument, 1, 3),
        Nargs::Remainder | Nargs::Parser => prop::collection::vec(text(), 0..4)
            .prop_map(|v| Value::Array(v.into_iter().map(Value::from).collect()))
            .boxed(),
    }
}

fn value(property: &Property) -> BoxedStrategy<Value> {
    let a = &property.argument;
    match a.action {
        ActionKind::StoreTrue
        | ActionKind::StoreConst
        | ActionKind::StoreFalse
        | ActionKind::Boolean => any::<bool>().prop_map(Value::from).boxed(),
        ActionKind::Count | ActionKind::AppendConst => (0u64..4).prop_map(Value::from).boxed(),
        ActionKind::Store => occurrence(a),
        ActionKind::Append => prop::collection::vec(occurrence(a), 0..3)
            .prop_map(Value::Array)
            .boxed(),
        ActionKind::Extend => match a.nargs {
            Nargs::One | Nargs::Optional => prop::collection::vec(occurrence(a), 0..3)
                .prop_map(Value::Array)
                .boxed(),
            _ => occurrence(a),
        },
        ActionKind::ExtendConst => list(a, 0, 3),
    }
}

pub(crate) fn input_strategy(tool: &Tool) -> BoxedStrategy<Map<String, Value>> {
    let mut parts: Vec<BoxedStrategy<Option<(String, Value)>>> = Vec::new();
    for property in &tool.layout.properties {
        let id = property.id.clone();
        let present = if ccm::tools::schema::is_required(&property.argument) {
            0.999_999
        } else {
            0.3
        };
        parts.push(
            prop::option::weighted(present, value(property))
                .prop_map(move |v| v.map(|v| (id.clone(), v)))
                .boxed(),
        );
    }
    if let Some(id) = tool.layout.passthrough.clone() {
        parts.push(
            prop::option::weighted(0.7, prop::collection::vec(text(), 0..4))
                .prop_map(move |v| v.map(|v| (id.clone(), json!(v))))
                .boxed(),
        );
    }
    parts
        .prop_map(|entries| {
            entries
                .into_iter()
                .flatten()
                .collect::<Map<String, Value>>()
        })
        .boxed()
}

/// The seed of a randomized test: `CCM_PROPTEST_SEED`, else a fresh one; printed on every
/// run, passing or not (straight to stderr: the test harness captures only `eprintln!`),
/// so a failure can be reproduced.
pub(crate) fn seed(label: &str) -> u64 {
    let seed = match std::env::var("CCM_PROPTEST_SEED") {
        Ok(text) => text
            .trim()
            .parse()
            .expect("CCM_PROPTEST_SEED must be an unsigned integer"),
        Err(_) => {
            let mut bytes = [0u8; 8];
            getrandom::fill(&mut bytes).expect("random seed");
            u64::from_le_bytes(bytes)
        }
    };
    print_seed(label, seed);
    seed
}

/// One line on the real stderr, which the harness does not capture.
pub(crate) fn print_seed(label: &str, seed: u64) {
    use std::io::Write;
    let line = format!("{label}: seed {seed} (rerun with CCM_PROPTEST_SEED={seed})\n");
    let _ = std::io::stderr().write_all(line.as_bytes());
}

/// A test runner whose randomness is a function of `seed`.
pub(crate) fn seeded_runner(seed: u64) -> TestRunner {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &bytes),
    )
}

/// A seeded runner for drawing inputs outside `proptest!` (the seed is printed).
pub(crate) fn runner(label: &str) -> TestRunner {
    seeded_runner(seed(label))
}

/// Up to `count` inputs the tool's schema accepts (drawing at most 20 times as many).
pub(crate) fn valid_inputs(
    tool: &Tool,
    runner: &mut TestRunner,
    count: usize,
) -> Vec<Map<String, Value>> {
    let strategy = input_strategy(tool);
    let mut out = Vec::with_capacity(count);
    for _ in 0..count * 20 {
        if out.len() == count {
            break;
        }
        let input = strategy
            .new_tree(runner)
            .expect("strategies draw")
            .current();
        if tool.validate(&Value::Object(input.clone())).is_ok() {
            out.push(input);
        }
    }
    out
}
