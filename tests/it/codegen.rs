//! The baked typed compilers against the generic interpreter (pure, no processes): for
//! every command of every baked snapshot, identical argv for inputs generated from its
//! schema, the same schema, and typed deserialization that rejects what the schema rejects.

use ccm::baked::{self, BakedCommand, BakedSnapshot};
use ccm::model::snapshot::Snapshot;
use ccm::tools::toolset::{Compiler, Tool};
use serde_json::{Map, Value, json};

use crate::inputs;
use crate::support;

const CASES: usize = 100;

fn baked_command<'a>(snapshot: &'a BakedSnapshot, tool: &Tool) -> &'a BakedCommand {
    snapshot
        .commands
        .iter()
        .find(|c| c.path.iter().eq(tool.path.iter()))
        .unwrap_or_else(|| panic!("{} has no baked command in {}", tool.name, snapshot.file))
}

/// Inputs the schema rejects for reasons of shape: an unknown field, a value of the wrong
/// JSON type, a missing required property.
fn shape_violations(tool: &Tool, valid: &Map<String, Value>) -> Vec<Map<String, Value>> {
    let mut out = Vec::new();
    let mut unknown = valid.clone();
    unknown.insert("zz_not_a_property".into(), json!(1));
    out.push(unknown);
    for (key, value) in valid {
        let mut wrong = valid.clone();
        let replacement = if value.is_object() {
            json!("x")
        } else {
            json!({"wrong": "type"})
        };
        wrong.insert(key.clone(), replacement);
        out.push(wrong);
    }
    if let Some(required) = tool.descriptor["inputSchema"]["required"].as_array() {
        for key in required.iter().filter_map(Value::as_str) {
            let mut missing = valid.clone();
            missing.remove(key);
            out.push(missing);
        }
    }
    out
}

#[test]
fn typed_and_generic_compilers_agree() {
    let snapshots = baked::snapshots();
    let files: Vec<&str> = snapshots.iter().map(|s| s.file).collect();
    assert_eq!(
        files,
        ["conda-0.99.json", "conda-26.7.json"],
        "the baked snapshots"
    );
    let mut runner = inputs::runner("typed vs generic");
    let mut compared = 0;
    for baked in snapshots {
        let snapshot = Snapshot::from_text(baked.json).unwrap();
        assert_eq!(
            snapshot,
            support::snapshot(baked.file.trim_end_matches(".json")),
            "embedded = checked in"
        );
        let tools = support::toolset(&snapshot.catalog, &snapshot.plugins, false);
        assert_eq!(
            tools.generated.len(),
            baked.commands.len(),
            "{}",
            baked.file
        );
        for tool in &tools.generated {
            let command = baked_command(baked, tool);
            let branch = snapshot.catalog.branch(&tool.path).unwrap();
            assert_eq!(
                command.signature,
                ccm::model::snapshot::signature(&branch),
                "{}",
                tool.name
            );
            assert_eq!(
                command.schema,
                // The layout's schema (the listed one adds ccm's own per-call properties).
                ccm::model::catalog::canonical_json(&Value::Object(
                    ccm::tools::schema::input_schema(&tool.layout).unwrap()
                )),
                "{}: baked schema source",
                tool.name
            );
            let valid = inputs::valid_inputs(tool, &mut runner, CASES);
            for input in &valid {
                let generic = ccm::tools::argv::compile(&tool.layout, input);
                let typed = (command.compile)(input);
                // The same argv, or the same refusal: the same path (an item's `$.id[i]`)
                // and keyword.
                assert_eq!(
                    typed,
                    generic,
                    "{} in {}: input {}",
                    tool.name,
                    baked.file,
                    Value::Object(input.clone())
                );
                for invalid in shape_violations(tool, input) {
                    let text = Value::Object(invalid.clone());
                    assert!(
                        tool.validate(&text).is_err(),
                        "{}: schema accepts {text}",
                        tool.name
                    );
                    assert!(
                        (command.compile)(&invalid).is_err(),
                        "{}: typed accepts {text}",
                        tool.name
                    );
                }
            }
            let kept = valid.len();
            assert!(kept > 0, "{}: no valid input", tool.name);
            compared += kept;
        }
    }
    eprintln!("typed vs generic: {compared} inputs compared");
}

#[test]
fn live_commands_use_baked_compilers_when_signatures_match() {
    let found = support::fixture_discovery();
    let tools = ccm::baked::toolset(
        &found.catalog,
        &found.plugins,
        &ccm::tools::toolset::ToolsetSettings {
            allow_exec: false,
            classify: Vec::new(),
            timeout: std::time::Duration::from_secs(900),
            sandboxed: false,
        },
    );
    assert!(
        tools
            .generated
            .iter()
            .all(|t| matches!(t.compiler, Compiler::Baked(_)))
    );
    // A command whose live signature differs (one more option) falls back to generic.
    let mut catalog = found.catalog.clone();
    let root = catalog.root.as_mut().unwrap();
    let info = root
        .children
        .iter_mut()
        .find(|c| c.name.as_deref() == Some("info"))
        .unwrap();
    let mut extra = info.arguments[0].clone();
    extra.id = "brand_new".into();
    extra.flags = vec!["--brand-new".into()];
    info.arguments.push(extra);
    let tools = ccm::baked::toolset(
        &catalog,
        &found.plugins,
        &ccm::tools::toolset::ToolsetSettings {
            allow_exec: false,
            classify: Vec::new(),
            timeout: std::time::Duration::from_secs(900),
            sandboxed: false,
        },
    );
    assert!(matches!(
        tools.get("conda_info").unwrap().compiler,
        Compiler::Generic
    ));
    assert!(matches!(
        tools.get("conda_list").unwrap().compiler,
        Compiler::Baked(_)
    ));
}
