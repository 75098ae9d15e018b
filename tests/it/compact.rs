//! The compact tool surface (pure): exclusive groups encoded as small `not`/`required`
//! schemas that accept exactly what the verbose encoding accepted, descriptions in
//! parameter names with deprecations marked, and served names every client accepts.

use ccm::model::catalog::ActionKind;
use ccm::tools::layout::Layout;
use ccm::tools::schema::{Validator, active_schema};
use ccm::tools::toolset::Toolset;
use proptest::strategy::{Strategy, ValueTree};
use serde_json::{Map, Value, json};

use crate::inputs;
use crate::support::{self, FIXTURE, REAL};

fn snapshot_toolset(stem: &str) -> Toolset {
    let snapshot = support::snapshot(stem);
    support::toolset(&snapshot.catalog, &snapshot.plugins, true)
}

/// The verbose encoding this one replaced, kept as the oracle: every exclusive group as
/// `not: {anyOf: [{allOf: [A, B]} for each pair]}`, a required group as `anyOf` of its
/// members' active schemas.
fn verbose_constraints(layout: &Layout) -> Vec<Value> {
    let mut constraints = Vec::new();
    for level in &layout.levels {
        for group in &level.groups {
            let active: Vec<Value> = group
                .members
                .iter()
                .filter_map(|id| layout.property(id))
                .map(active_schema)
                .collect();
            if active.len() >= 2 {
                let mut pairs = Vec::new();
                for (i, a) in active.iter().enumerate() {
                    for b in &active[i + 1..] {
                        pairs.push(json!({"allOf": [a, b]}));
                    }
                }
                constraints.push(json!({"not": {"anyOf": pairs}}));
            }
            if group.required {
                constraints.push(json!({"anyOf": active}));
            }
        }
    }
    constraints
}

/// A string schema with an `enum` gets back the `maxLength` it used to carry.
fn with_enum_lengths(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            if map.get("type") == Some(&json!("string")) && map.contains_key("enum") {
                map.entry("maxLength")
                    .or_insert(json!(ccm::tools::schema::MAX_STRING));
            }
            map.values_mut().for_each(with_enum_lengths);
        }
        Value::Array(items) => items.iter_mut().for_each(with_enum_lengths),
        _ => {}
    }
}

fn verbose_schema(compact: &Value, layout: &Layout) -> Value {
    let mut schema = compact.clone();
    let object = schema.as_object_mut().unwrap();
    object.remove("allOf");
    let constraints = verbose_constraints(layout);
    if !constraints.is_empty() {
        object.insert("allOf".into(), Value::Array(constraints));
    }
    with_enum_lengths(&mut schema);
    schema
}

/// Inputs that set every member of every group at once (with an active value), so each
/// group's constraint is exercised even where random draws rarely collide.
fn colliding(layout: &Layout) -> Vec<Value> {
    let mut out = Vec::new();
    for group in layout.levels.iter().flat_map(|l| &l.groups) {
        let mut input = Map::new();
        for id in &group.members {
            let Some(property) = layout.property(id) else {
                continue;
            };
            let argument = &property.argument;
            let value = match argument.action {
                ActionKind::StoreTrue | ActionKind::StoreConst | ActionKind::Boolean => json!(true),
                ActionKind::StoreFalse => json!(false),
                ActionKind::Count | ActionKind::AppendConst => json!(1),
                _ if argument.choices.is_empty() && !argument.nargs.is_list() => json!("x"),
                _ => continue,
            };
            input.insert(id.clone(), value);
        }
        out.push(Value::Object(input));
    }
    out
}

/// Compare the compact and the verbose encoding over every tool of `toolsets`: generated
/// inputs (seeded; valid and invalid for the group constraints alike), and inputs that
/// activate whole groups at once. Returns (schemas that differ, inputs compared, inputs
/// the group constraints refuse).
fn compare_encodings(toolsets: &[Toolset], label: &str) -> (usize, usize, usize) {
    let mut runner = inputs::runner(label);
    let (mut differing, mut compared, mut refused_by_groups) = (0usize, 0usize, 0usize);
    for tool in toolsets.iter().flat_map(|t| &t.generated) {
        let compact = &tool.descriptor["inputSchema"];
        let verbose = verbose_schema(compact, &tool.layout);
        differing += usize::from(verbose != *compact);
        let new = Validator::new(compact).unwrap();
        let old = Validator::new(&verbose).unwrap();
        let mut without_groups = verbose.clone();
        without_groups.as_object_mut().unwrap().remove("allOf");
        let plain = Validator::new(&without_groups).unwrap();
        let strategy = inputs::input_strategy(tool);
        let mut drawn: Vec<Value> = (0..200)
            .map(|_| Value::Object(strategy.new_tree(&mut runner).unwrap().current()))
            .collect();
        drawn.extend(colliding(&tool.layout));
        for input in drawn {
            let (a, b) = (old.validate(&input).is_ok(), new.validate(&input).is_ok());
            assert_eq!(a, b, "{}: {input} old {a}, compact {b}", tool.name);
            compared += 1;
            refused_by_groups += usize::from(plain.validate(&input).is_ok() && !a);
        }
    }
    (differing, compared, refused_by_groups)
}

/// For every tool of both snapshots, the compact schema and the verbose one accept and
/// reject exactly the same inputs.
#[test]
fn compact_exclusive_groups_accept_exactly_what_the_verbose_encoding_did() {
    let toolsets = [snapshot_toolset(REAL), snapshot_toolset(FIXTURE)];
    let (differing, compared, refused) = compare_encodings(&toolsets, "compact groups");
    // The comparison saw different encodings, and inputs the group constraints refuse.
    assert!(differing > 20, "only {differing} schemas changed");
    assert!(refused > 100, "{refused} of {compared}");
}

/// The same over the live real conda's tools (plugins included with a plugin conda).
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_compact_exclusive_groups_accept_exactly_what_the_verbose_encoding_did() {
    let found = support::real_discovery();
    let toolsets = [support::toolset(&found.catalog, &found.plugins, true)];
    let (differing, compared, refused) = compare_encodings(&toolsets, "compact groups (real)");
    assert!(differing > 10, "only {differing} schemas changed");
    assert!(refused > 50, "{refused} of {compared}");
}

/// The group constraints are the smallest exact form: one `not: {required: [a, b]}` for a
/// pair of plain members, no `allOf` inside a pair.
#[test]
fn exclusive_pairs_are_spelled_with_required() {
    let tools = snapshot_toolset(REAL);
    let install = &tools.get("conda_install").unwrap().descriptor["inputSchema"];
    let groups = install["allOf"].as_array().unwrap();
    assert!(
        groups.contains(&json!({"not": {"required": ["name", "prefix"]}})),
        "{groups:?}"
    );
    assert!(groups.contains(&json!({"not": {
        "required": ["no_deps", "only_deps"],
        "properties": {"no_deps": {"const": true}, "only_deps": {"const": true}},
    }})));
    for tool in &tools.generated {
        let text = tool.descriptor["inputSchema"].to_string();
        assert!(!text.contains("\"allOf\":[{\"required\""), "{}", tool.name);
    }
}

/// Every name a client sees: ≤ 48 characters of `[A-Za-z0-9_-]`.
fn assert_names_fit(tools: &Toolset) {
    let descriptors = tools.descriptors();
    assert!(descriptors.len() > 10);
    for descriptor in descriptors {
        let name = descriptor["name"].as_str().unwrap();
        assert!(
            !name.is_empty()
                && name.len() <= 48
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'),
            "{name} does not fit every client"
        );
        assert!(ccm::tools::surface::valid_tool_name(name), "{name}");
    }
}

#[test]
fn served_names_fit_every_client() {
    for stem in [REAL, FIXTURE] {
        assert_names_fit(&snapshot_toolset(stem));
    }
}

#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_served_names_fit_every_client() {
    let found = support::real_discovery();
    assert_names_fit(&support::toolset(&found.catalog, &found.plugins, true));
}

/// Descriptions name the tool's parameters, not only its flags; conda's deprecated options
/// carry `deprecated: true`; boilerplate the schema says is gone (what survives is
/// `fit.rs`'s to check).
#[test]
fn descriptions_speak_in_parameter_names_and_mark_deprecations() {
    let tools = snapshot_toolset(REAL);
    let install = &tools.get("conda_install").unwrap().descriptor;
    let description = install["description"].as_str().unwrap();
    assert!(
        description.contains("use the `no_deps` option"),
        "{description}"
    );
    assert!(!description.contains("--no-deps") && !description.contains("-n/-p"));
    let properties = &install["inputSchema"]["properties"];
    assert_eq!(
        properties["environment_specifier"]["deprecated"],
        json!(true)
    );
    assert_eq!(properties["experimental"]["deprecated"], json!(true));
    // The deprecation notice is what `deprecated` says; the pointer to the replacement
    // stays.
    assert_eq!(
        properties["environment_specifier"]["description"],
        "Use the `format` flag instead."
    );
    assert_eq!(properties["name"].get("deprecated"), None);
    assert_eq!(
        properties["verbose"]["description"],
        "1 for detailed output, 2 for INFO logging, 3 for DEBUG logging, 4 for TRACE logging."
    );
    assert_eq!(
        properties["verbose_2"]["description"],
        "Same as `verbose`, given before `install`."
    );
    let override_channels = properties["override_channels"]["description"]
        .as_str()
        .unwrap();
    assert_eq!(
        override_channels,
        "Do not search default or .condarc channels. Requires `channel`."
    );
}
