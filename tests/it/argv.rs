//! The generic argv interpreter (pure): exact argv for given inputs, order safety, and
//! never a panic on any JSON.

use ccm::model::catalog::{ActionKind, Argument, Nargs};
use ccm::tools::toolset::Toolset;
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::support::{self, FIXTURE, REAL, argument, command};

fn tools(stem: &str) -> Toolset {
    let snapshot = support::snapshot(stem);
    support::toolset(&snapshot.catalog, &snapshot.plugins, true)
}

/// Validate then compile; the argv joined by spaces, or the error message.
fn compile(tools: &Toolset, name: &str, input: Value) -> String {
    let tool = tools.get(name).unwrap_or_else(|| panic!("no tool {name}"));
    if let Err(e) = tool.validate(&input) {
        return format!("invalid: {e}");
    }
    match ccm::tools::argv::compile(&tool.layout, input.as_object().unwrap()) {
        Ok(argv) => argv.join(" "),
        Err(e) => format!("error: {e}"),
    }
}

fn check(stem: &str, cases: &[(&str, Value, &str)]) {
    let tools = tools(stem);
    for (name, input, expected) in cases {
        assert_eq!(
            compile(&tools, name, input.clone()),
            *expected,
            "{name} {input}"
        );
    }
}

#[test]
fn real_conda_argv() {
    check(
        REAL,
        &[
            ("conda_info", json!({"json": true}), "info --json"),
            ("conda_info", json!({"json": false}), "info"),
            // Root options come before the command name; the per-command form keeps the
            // plain id.
            (
                "conda_info",
                json!({"verbose_2": 2, "verbose": 1}),
                "--verbose --verbose info --verbose",
            ),
            // Long flags are preferred; multi-value appends keep their values together.
            (
                "conda_config",
                json!({"set": [["a", "b"]]}),
                "config --set a b",
            ),
            (
                "conda_config",
                json!({"show": ["channels", "solver"], "json": true}),
                "config --json --show channels solver",
            ),
            // BooleanOptionalAction.
            (
                "conda_install",
                json!({"repodata_use_zst": false}),
                "install --no-repodata-use-zst",
            ),
            (
                "conda_install",
                json!({"repodata_use_zst": true}),
                "install --repodata-use-zst",
            ),
            // store_false emits its flag for false.
            ("conda_list", json!({"no_pip": false}), "list --no-pip"),
            ("conda_list", json!({"no_pip": true}), "list"),
            // Single values are attached, so they may start with '-'.
            (
                "conda_list",
                json!({"name": "-weird"}),
                "list --name=-weird",
            ),
            (
                "conda_list",
                json!({"name": "t1", "regex": "py"}),
                "list py --name=t1",
            ),
            ("conda_list", json!({"regex": null}), "list"),
            // extend_const with no values: the bare flag.
            ("conda_clean", json!({"tempfiles": []}), "clean --tempfiles"),
            (
                "conda_clean",
                json!({"tempfiles": ["a", "b"], "yes": true}),
                "clean --yes --tempfiles a b",
            ),
            // Positionals first, then options.
            (
                "conda_install",
                json!({"name": "t1", "packages": ["numpy", "scipy>=1"], "dry_run": true}),
                "install numpy scipy>=1 --name=t1 --dry-run",
            ),
            (
                "conda_install",
                json!({"channel": ["c1", "c2"]}),
                "install --channel=c1 --channel=c2",
            ),
            // Remainder: options first, the remainder last and verbatim.
            (
                "conda_run",
                json!({"name": "t1", "executable_call": ["python", "-c", "print(1)", "--"]}),
                "run --name=t1 python -c print(1) --",
            ),
            // Hidden positional exposed.
            (
                "conda_search",
                json!({"match_spec": "numpy", "json": true}),
                "search numpy --json",
            ),
            // Open-ended option values are followed by another option or end the argv.
            (
                "conda_package",
                json!({"which": ["/a", "/b"], "name": "t1"}),
                "package --name=t1 --which /a /b",
            ),
            (
                "conda_doctor",
                json!({"checks": ["a", "b"], "fix": true}),
                "doctor a b --fix",
            ),
            // Schema violations never reach the compiler.
            (
                "conda_install",
                json!({"packages": ["-x"]}),
                "invalid: Invalid arguments at $.packages[0]: must not start with '-' (option-like values need conda_execute)",
            ),
        ],
    );
}

#[test]
fn fixture_argv() {
    check(
        FIXTURE,
        &[
            // Integers written as 2.0 are emitted as 2; numbers keep their value.
            (
                "conda_tune",
                json!({"target": "t", "pair": ["a", "b"], "level": 2.0, "ratio": 0.25}),
                "tune a b --level=2 --ratio=0.25 --target=t",
            ),
            (
                "conda_tune",
                json!({"target": "t", "pair": ["a", "b"], "color": null, "fast": true}),
                "tune a b --fast --target=t --color",
            ),
            (
                "conda_tune",
                json!({"target": "t", "pair": ["a", "b"], "color": "always", "tag_a": 2}),
                "tune a b --tag-a --tag-a --color=always --target=t",
            ),
            (
                "conda_tune",
                json!({"target": "-t", "pair": ["a", "b"], "letters": ["xy", "-z"], "items": ["i", "j"], "size": ["1", "2"], "names": ["n"]}),
                "tune a b --letters=xy --letters=-z --size 1 2 --target=-t --items i j --names n",
            ),
            (
                "conda_passthru",
                json!({"args": ["--anything", "-x", "y"]}),
                "passthru --anything -x y",
            ),
            (
                "conda_shell-in",
                json!({"environment": "e", "command": ["ls", "x"]}),
                "shell-in e ls x",
            ),
            (
                "conda_shell-in",
                json!({}),
                "invalid: Invalid arguments at $: missing required property 'environment'",
            ),
            (
                "conda_pkg_install",
                json!({"packages": ["a"], "verbose": 2, "name": "n"}),
                "pkg install a --name=n --verbose --verbose",
            ),
            (
                "conda_rename",
                json!({"destination": "d"}),
                "invalid: Invalid arguments at $: one of 'name', 'prefix' is required",
            ),
            (
                "conda_rename",
                json!({"destination": "d", "name": "n"}),
                "rename d --name=n",
            ),
            (
                "conda_env_config_vars_set",
                json!({"vars": ["A=1"], "name": "t1"}),
                "env config vars set A=1 --name=t1",
            ),
        ],
    );
}

fn synthetic(parent_args: Vec<Argument>, child_args: Vec<Argument>) -> Toolset {
    let child = command(Some("child"), child_args, vec![]);
    let parent = command(Some("parent"), parent_args, vec![child]);
    support::toolset(&support::catalog(vec![parent]), &[], false)
}

#[test]
fn order_safety() {
    // Two optional positionals: the later one needs the earlier one.
    let tools = synthetic(
        vec![],
        vec![
            argument("first", &[], ActionKind::Store, Nargs::Optional),
            argument("second", &[], ActionKind::Store, Nargs::Optional),
        ],
    );
    assert_eq!(
        compile(
            &tools,
            "conda_parent_child",
            json!({"first": "a", "second": "b"})
        ),
        "parent child a b"
    );
    assert_eq!(
        compile(&tools, "conda_parent_child", json!({"second": "b"})),
        "error: Invalid arguments at $.second: a later positional argument needs the earlier one"
    );
    assert_eq!(
        compile(
            &tools,
            "conda_parent_child",
            json!({"first": null, "second": "b"})
        ),
        "error: Invalid arguments at $.second: a later positional argument needs the earlier one"
    );
    // An open-ended option on a parent level needs a bounded option after it, because the
    // child's name follows.
    let tools = synthetic(
        vec![
            argument("many", &["--many"], ActionKind::Store, Nargs::ZeroOrMore),
            argument(
                "flag",
                &["--flag"],
                ActionKind::StoreTrue,
                Nargs::Exactly(0),
            ),
        ],
        vec![],
    );
    assert_eq!(
        compile(
            &tools,
            "conda_parent_child",
            json!({"many": ["a"], "flag": true})
        ),
        "parent --many a --flag child"
    );
    assert_eq!(
        compile(&tools, "conda_parent_child", json!({"many": ["a"]})),
        "error: Invalid arguments at $.many: cannot be expressed as conda arguments (use conda_execute)"
    );
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        rng_seed: proptest::test_runner::RngSeed::Fixed(crate::inputs::seed("interpreter fuzz")),
        ..ProptestConfig::default()
    })]

    /// Whatever JSON arrives (valid or not), the interpreter returns instead of panicking.
    /// Keys are mostly the tool's own properties, so the interpreter gets past its
    /// unknown-key check and into every action's value handling.
    #[test]
    fn interpreter_never_panics((tool_index, input) in tool_and_object()) {
        let tools = fixture_tools();
        let tool = &tools.generated[tool_index];
        let _ = ccm::tools::argv::compile(&tool.layout, &input);
    }
}

fn fixture_tools() -> &'static Toolset {
    static TOOLS: std::sync::OnceLock<Toolset> = std::sync::OnceLock::new();
    TOOLS.get_or_init(|| tools(FIXTURE))
}

fn arbitrary_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        "[-a-z0-9= \u{0}]{0,8}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_0-9]{1,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A fixture tool and a JSON object whose keys are drawn from that tool's input
/// properties (and sometimes not).
fn tool_and_object() -> impl Strategy<Value = (usize, serde_json::Map<String, Value>)> {
    let count = fixture_tools().generated.len();
    (0..count).prop_flat_map(|index| {
        let names: Vec<String> =
            fixture_tools().generated[index].descriptor["inputSchema"]["properties"]
                .as_object()
                .map(|p| p.keys().cloned().collect())
                .unwrap_or_default();
        let key = if names.is_empty() {
            "[a-z_]{1,10}".boxed()
        } else {
            prop_oneof![4 => prop::sample::select(names), 1 => "[a-z_]{1,10}"].boxed()
        };
        let object = prop::collection::btree_map(key, arbitrary_value(), 0..6)
            .prop_map(|m| m.into_iter().collect());
        (Just(index), object)
    })
}
