//! The policy-shaped listing: no schema a session is shown admits a call the policy
//! refuses under that session's grants, and no tool withheld from the listing has a call
//! the policy admits (property tests over generated inputs; seeded, the seed printed).

use std::collections::BTreeMap;

use ccm::model::catalog::{Catalog, Plugin};
use ccm::tools::listing;
use ccm::tools::policy::{self, Grants, Origin};
use ccm::tools::schema::Validator;
use ccm::tools::toolset::Tool;
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::TestRunner;
use serde_json::{Map, Value};

use crate::inputs;
use crate::support::{self, FIXTURE, REAL};

/// Every combination of the grants that shape a listing.
fn all_grants() -> Vec<Grants> {
    let mut out = Vec::new();
    for write in [false, true] {
        for exec in [false, true] {
            for credentials in [false, true] {
                out.push(Grants {
                    write,
                    exec,
                    credentials,
                });
            }
        }
    }
    out
}

/// The options an input compiles to miss under `grants` (empty: admitted); `None` when
/// the input cannot be passed to conda at all (refused before the policy).
fn missing(
    tool: &Tool,
    catalog: &Catalog,
    rules: &policy::Rules,
    input: &Map<String, Value>,
    grants: Grants,
) -> Option<Vec<&'static str>> {
    let argv = ccm::tools::argv::compile(&tool.layout, input).ok()?;
    let verdict = policy::classify(
        rules,
        catalog.root.as_ref(),
        &argv,
        Origin::Generated {
            opaque: tool.opaque,
        },
    );
    Some(verdict.missing(grants))
}

/// A drawn input brought into a restricted form where it can be: properties the form
/// leaves out removed, its constants set. The listed schema still decides.
fn fit(mut input: Map<String, Value>, shown: &Value) -> Map<String, Value> {
    let properties = shown["properties"].as_object().expect("properties");
    input.retain(|key, _| properties.contains_key(key));
    for (key, schema) in properties {
        if let Some(constant) = schema.get("const") {
            input.insert(key.clone(), constant.clone());
        }
    }
    input
}

fn draw(tool: &Tool, runner: &mut TestRunner) -> Map<String, Value> {
    inputs::input_strategy(tool)
        .new_tree(runner)
        .expect("strategies draw")
        .current()
}

/// Checks one toolset's listing under every combination of grants; returns the number of
/// (grants, tool) pairs checked for each verdict.
fn check(catalog: &Catalog, plugins: &[Plugin], label: &str) -> BTreeMap<&'static str, usize> {
    let mut runner = inputs::runner(label);
    let mut counts = BTreeMap::new();
    for (grants, sandboxed) in all_grants()
        .into_iter()
        .flat_map(|g| [(g, false), (g, true)])
    {
        let mut toolset = support::toolset_in(catalog, plugins, grants.exec, sandboxed);
        let shaped = listing::shape(&mut toolset, grants);
        for tool in &toolset.generated {
            let shown = shaped.restricted.get(&tool.name);
            let withheld = shaped.withheld.contains(&tool.name);
            let validator =
                shown.map(|s| Validator::new(&s.schema).expect("listed schemas compile"));
            let (mut admitted, mut refused) = (0, 0);
            for _ in 0..600 {
                if admitted + refused == 40 {
                    break;
                }
                let mut input = draw(tool, &mut runner);
                if let Some(shown) = shown {
                    input = fit(input, &shown.schema);
                }
                let value = Value::Object(input.clone());
                let listed_ok = match &validator {
                    Some(v) => v.validate(&value).is_ok(),
                    None => tool.validate(&value).is_ok(),
                };
                if !listed_ok {
                    continue;
                }
                assert!(
                    tool.validate(&value).is_ok(),
                    "{label}: {} restricted schema admits what the full one refuses: {value}",
                    tool.name
                );
                let Some(missing) = missing(tool, catalog, &toolset.rules, &input, grants) else {
                    continue;
                };
                if withheld {
                    assert!(
                        !missing.is_empty(),
                        "{label} {grants:?} sandboxed {sandboxed}: {} is withheld but the policy admits {value}",
                        tool.name
                    );
                    refused += 1;
                } else {
                    assert!(
                        missing.is_empty(),
                        "{label} {grants:?} sandboxed {sandboxed}: the listed schema of {} admits {value}, which the policy refuses ({missing:?})",
                        tool.name
                    );
                    admitted += 1;
                }
            }
            assert!(
                admitted + refused >= 5,
                "{label} {grants:?} sandboxed {sandboxed}: only {} inputs of {} could be checked",
                admitted + refused,
                tool.name
            );
            let verdict = match (withheld, shown.is_some()) {
                (true, _) => "withheld",
                (false, true) => "restricted",
                (false, false) => "full",
            };
            *counts.entry(verdict).or_insert(0) += 1;
        }
    }
    counts
}

#[test]
fn listed_schemas_admit_only_what_the_policy_admits() {
    for stem in [REAL, FIXTURE] {
        let snapshot = support::snapshot(stem);
        let counts = check(
            &snapshot.catalog,
            &snapshot.plugins,
            &format!("listing {stem}"),
        );
        eprintln!("{stem}: {counts:?}");
        for verdict in ["withheld", "restricted", "full"] {
            assert!(
                counts.get(verdict).copied().unwrap_or(0) > 0,
                "{stem}: no {verdict} tool"
            );
        }
    }
}

#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_listed_schemas_admit_only_what_the_policy_admits() {
    let found = support::real_discovery();
    let counts = check(&found.catalog, &found.plugins, "listing real conda");
    eprintln!("real conda: {counts:?}");
    assert!(counts.get("restricted").copied().unwrap_or(0) > 0);
}

/// Under the default grants, the restricted forms are the ones conda's code proves
/// read-only: dry runs of the package commands, config's reading forms, export without
/// a file; the commands that need a grant for every call are withheld.
#[test]
fn default_listing_of_conda_26_7() {
    let snapshot = support::snapshot(REAL);
    let mut toolset = support::toolset(&snapshot.catalog, &snapshot.plugins, false);
    let shaped = listing::shape(&mut toolset, Grants::default());
    let mut withheld: Vec<&str> = shaped.withheld.iter().map(String::as_str).collect();
    withheld.sort();
    assert_eq!(
        withheld,
        [
            "conda_env_config_vars_set",
            "conda_env_config_vars_unset",
            "conda_env_create",
            "conda_env_update",
            "conda_menuinst",
            "conda_run",
        ]
    );
    let mut restricted: Vec<&str> = shaped.restricted.keys().map(String::as_str).collect();
    restricted.sort();
    assert_eq!(
        restricted,
        [
            "conda_check",
            "conda_clean",
            "conda_config",
            "conda_create",
            "conda_doctor",
            "conda_env_export",
            "conda_env_remove",
            "conda_export",
            "conda_info",
            "conda_init",
            "conda_install",
            "conda_package",
            "conda_remove",
            "conda_rename",
            "conda_update",
        ]
    );
    let install = &shaped.restricted["conda_install"];
    let properties = install.schema["properties"].as_object().unwrap();
    assert_eq!(install.schema["properties"]["dry_run"]["const"], true);
    assert!(
        install.schema["required"]
            .as_array()
            .unwrap()
            .contains(&"dry_run".into())
    );
    for gone in ["name", "prefix", "file", "revision"] {
        assert!(!properties.contains_key(gone), "{gone}");
    }
    assert_eq!(
        install.sentence,
        "Here: only dry runs (dry_run: true); package specs must be plain match specs (no files or URLs); not offered: revision, name, prefix, file. Anything else needs --allow-write."
    );
    let descriptor = toolset.get("conda_install").unwrap();
    assert!(
        descriptor.descriptor["description"]
            .as_str()
            .unwrap()
            .ends_with(&install.sentence)
    );
    assert_eq!(descriptor.descriptor["annotations"]["readOnlyHint"], true);
    let config = &shaped.restricted["conda_config"];
    for gone in [
        "set",
        "add",
        "append",
        "remove",
        "remove_key",
        "stdin",
        "write_default",
    ] {
        assert!(
            !config.schema["properties"]
                .as_object()
                .unwrap()
                .contains_key(gone),
            "{gone}"
        );
    }
    let info = &shaped.restricted["conda_info"];
    assert!(
        !info.schema["properties"]
            .as_object()
            .unwrap()
            .contains_key("unsafe_channels")
    );
    assert!(
        info.sentence.ends_with("needs --allow-credentials."),
        "{}",
        info.sentence
    );
}

/// The listing a session gets is the same under every protocol revision ccm offers (it
/// depends on the operator's grants only); `--list-all` restores the full listing, and the
/// policy still refuses there what it refused before: a call outside the listed form is a
/// schema error that says what needs which grant, and with `--list-all` the same call is
/// the policy's refusal.
#[test]
fn listing_under_every_revision_and_with_list_all() {
    use crate::mcp::Session;
    use serde_json::json;
    let conda = &support::fixture().conda;
    let found = support::fixture_discovery();
    let sandboxed = crate::mcp::Session::start(conda, &[]).sandboxed();
    let expected = support::listed(&found.catalog, &found.plugins, Grants::default(), sandboxed);
    for revision in ["2024-11-05", "2025-06-18", "2025-11-25"] {
        let mut command = support::ccm();
        command.arg("--conda-exe").arg(conda);
        let mut s = Session::spawn(command);
        s.initialize = s.request(
            "initialize",
            json!({"protocolVersion": revision, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
        );
        assert_eq!(s.initialize["result"]["protocolVersion"], revision);
        s.notify("notifications/initialized", json!({}));
        assert_eq!(s.tools(), expected, "{revision}");
    }
    // The session-less revision: the revision travels with each request.
    let mut command = support::ccm();
    command.arg("--conda-exe").arg(conda);
    let mut s = Session::spawn(command);
    let listed = s.request(
        "tools/list",
        json!({"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
        }}),
    );
    assert_eq!(listed["result"]["tools"], json!(expected), "2026-07-28");

    let set = json!({"set": [["channel_priority", "strict"]]});
    let mut shaped = Session::start(conda, &[]);
    // Outside the listed form, the policy's refusal, saying what the form offers.
    let (code, message) = shaped.call_error("conda_config", set.clone());
    assert_eq!(code, -32600);
    assert!(
        message.starts_with("Operation requires --allow-write. Here: ")
            && message.contains("not offered: ")
            && message.contains("set")
            && message.ends_with(
                "Anything else needs --allow-write. The operator sets --allow-write in the \
                 client's MCP server configuration."
            ),
        "{message}"
    );
    // A call outside the form that the policy admits (a form the listing shows once) is
    // the schema error, which says what the form offers.
    let (code, message) = shaped.call_error("conda_config", json!({"show": [], "verbose_2": 1}));
    assert_eq!(code, -32602);
    assert!(
        message.starts_with("Invalid arguments at $: unexpected property 'verbose_2'")
            && message.ends_with("Anything else needs --allow-write."),
        "{message}"
    );
    let mut all = Session::start(conda, &["--list-all"]);
    let full = support::toolset(&found.catalog, &found.plugins, false).descriptors();
    assert_eq!(all.tools(), full);
    for (tool, input) in [
        ("conda_config", set),
        ("conda_install", json!({"packages": ["x"]})),
        (
            "conda_install",
            json!({"packages": ["./x.conda"], "dry_run": true}),
        ),
        ("conda_env_config_vars_set", json!({"vars": ["A=1"]})),
    ] {
        assert_eq!(
            all.call_error(tool, input),
            (
                -32600,
                support::refused("Operation requires --allow-write", "--allow-write")
            ),
            "{tool}"
        );
    }
}
