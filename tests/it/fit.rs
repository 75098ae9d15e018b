//! Agent fit as the model sees it (pure, on the checked-in snapshots and, with
//! `CCM_TEST_CONDA`, a real conda): descriptions keep every sentence of conda's help that
//! names another option or states a constraint, and no command-line wording; tool
//! descriptions stay under 1 KB and say what the tool does; an option taken in two forms
//! is listed once, in its per-command form, and no option becomes unreachable.

use ccm::model::catalog::{Catalog, Plugin};
use ccm::tools::layout::{Layout, Property};
use ccm::tools::listing;
use ccm::tools::policy::Grants;
use ccm::tools::schema::in_parameter_names;
use ccm::tools::toolset::Toolset;
use serde_json::Value;

use crate::support::{self, FIXTURE, REAL};

/// Words and phrases that make a sentence a constraint (the "a constraint": what
/// an option requires, excludes, implies, ignores or risks). Written out here, apart from
/// the code's own list, so that the test does not take the code's word for it.
const CONSTRAINTS: &[&str] = &[
    " require",
    "requires ",
    "required",
    " must ",
    "cannot",
    "can't",
    "can not",
    " only ",
    "only ",
    "unless",
    "implies",
    "implied",
    "ignore",
    "incompatible",
    "conflicts",
    "exclusive",
    "warning",
    "dangerous",
    "not allowed",
    "not supported",
    "own risk",
    "with caution",
];

/// Sentences conda's help may have that a description drops on purpose: what the schema
/// says (repeat boilerplate, deprecation notices) or what speaks of conda's command line.
fn droppable(sentence: &str) -> bool {
    let lower = sentence.to_lowercase();
    lower.contains("epilog")
        || lower.contains("--help")
        || lower.contains("pending deprecation")
        || lower.contains("is deprecated")
        || lower.starts_with("can be used multiple times")
        || lower.starts_with("may be repeated")
}

/// Fragments of a help text, split at every `. ` (finer than any sentence rule: each
/// fragment of a kept sentence is a substring of the description).
fn fragments(text: &str) -> Vec<String> {
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    text.split(". ")
        .map(|f| f.trim().trim_end_matches('.').to_owned())
        .filter(|f| f.len() > 3)
        .collect()
}

/// Whether conda's text names one of the tool's parameters by a flag.
fn names_a_flag(fragment: &str, layout: &Layout) -> bool {
    layout.properties.iter().any(|p| {
        p.argument.flags.iter().any(|flag| {
            fragment.match_indices(flag.as_str()).any(|(at, _)| {
                let before = fragment[..at].chars().next_back();
                let after = fragment[at + flag.len()..].chars().next();
                // In a conda command line (`conda config --describe`) a flag is a
                // command's syntax, not a parameter of this tool.
                let in_command_line = fragment[..at]
                    .split_whitespace()
                    .rev()
                    .take(2)
                    .any(|w| w.trim_start_matches(['`', '\'', '"', '(']) == "conda");
                before.is_none_or(|c| !(c.is_alphanumeric() || c == '-'))
                    && after.is_none_or(|c| !(c.is_alphanumeric() || c == '-' || c == '='))
                    && !in_command_line
            })
        })
    })
}

fn is_constraint(fragment: &str) -> bool {
    let lower = format!(" {} ", fragment.to_lowercase());
    CONSTRAINTS.iter().any(|c| lower.contains(c))
}

/// Every fragment of a parameter's help that names a flag of the tool or states a
/// constraint survives (in parameter names) in its description.
fn assert_keepers_survive(tools: &Toolset, label: &str) -> usize {
    let mut checked = 0;
    for tool in &tools.generated {
        let properties = &tool.descriptor["inputSchema"]["properties"];
        for property in &tool.layout.properties {
            let Some(help) = property.argument.help.as_deref() else {
                continue;
            };
            let description = properties[&property.id]["description"]
                .as_str()
                .unwrap_or_default();
            if description.starts_with("Same as `") {
                continue;
            }
            for fragment in fragments(help) {
                if droppable(&fragment)
                    || !(names_a_flag(&fragment, &tool.layout) || is_constraint(&fragment))
                {
                    continue;
                }
                let said = in_parameter_names(&fragment, &tool.layout, property.level);
                assert!(
                    description.contains(&said),
                    "{label} {} {}: {said:?} is missing from {description:?}",
                    tool.name,
                    property.id
                );
                checked += 1;
            }
        }
    }
    checked
}

/// No listed text speaks of conda's command line: no epilog, no `-n NAME`, no flag of the
/// tool's own parameters outside a `conda …` command line.
fn assert_no_command_line_wording(descriptors: &[Value], tools: &Toolset, label: &str) {
    for descriptor in descriptors {
        let name = descriptor["name"].as_str().unwrap();
        let Some(tool) = tools.get(name) else {
            continue;
        };
        let mut texts = vec![descriptor["description"].as_str().unwrap_or("").to_owned()];
        if let Some(properties) = descriptor["inputSchema"]["properties"].as_object() {
            texts.extend(
                properties
                    .values()
                    .filter_map(|p| p["description"].as_str().map(str::to_owned)),
            );
        }
        for text in texts {
            for wording in [
                "epilog",
                "-n NAME",
                "-p PREFIX",
                "on the CLI",
                "-n/-p",
                "--help",
            ] {
                assert!(!text.contains(wording), "{label} {name}: {text}");
            }
            let without_command_lines: String = text
                .split('`')
                .filter(|part| !part.starts_with("conda "))
                .collect();
            for property in &tool.layout.properties {
                for flag in &property.argument.flags {
                    let raw = without_command_lines
                        .split(|c: char| c.is_whitespace() || "(),;'\"".contains(c))
                        .any(|word| word.trim_end_matches('.') == flag);
                    assert!(!raw, "{label} {name}: {flag} in {text}");
                }
            }
        }
    }
}

fn descriptors_of(catalog: &Catalog, plugins: &[Plugin]) -> (Toolset, Vec<Value>, Vec<Value>) {
    let tools = support::toolset(catalog, plugins, true);
    let full = tools.descriptors();
    let listed = support::listed(catalog, plugins, Grants::default(), true);
    (tools, full, listed)
}

fn check_descriptions(catalog: &Catalog, plugins: &[Plugin], label: &str) {
    let (tools, full, listed) = descriptors_of(catalog, plugins);
    let checked = assert_keepers_survive(&tools, label);
    eprintln!("{label}: {checked} sentences that name an option or a constraint survive");
    assert!(checked > 0, "{label}: nothing checked");
    assert_no_command_line_wording(&full, &tools, label);
    assert_no_command_line_wording(&listed, &tools, label);
    // Tool descriptions: under 1 KB, and a line saying what the tool does where conda
    // says nothing or next to nothing.
    for descriptor in full.iter().chain(&listed) {
        let name = descriptor["name"].as_str().unwrap();
        let description = descriptor["description"].as_str().unwrap_or("");
        assert!(description.len() < 1024, "{label} {name}: {description}");
        assert!(
            description.split_whitespace().count() >= 3,
            "{label} {name}: {description}"
        );
    }
}

#[test]
fn descriptions_keep_options_and_constraints_and_drop_command_line_wording() {
    for stem in [REAL, FIXTURE] {
        let snapshot = support::snapshot(stem);
        check_descriptions(&snapshot.catalog, &snapshot.plugins, stem);
    }
    let tools = support::toolset(&support::snapshot(REAL).catalog, &[], true);
    let create = tools.get("conda_create").unwrap().descriptor["description"]
        .as_str()
        .unwrap();
    assert!(
        create.contains(
            "This command requires either the `name` or `prefix` option unless `dry_run` or \
             `download_only` is specified."
        ),
        "{create}"
    );
}

#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_descriptions_keep_options_and_constraints() {
    let found = support::real_discovery();
    check_descriptions(&found.catalog, &found.plugins, "real conda");
    check_forms(&found.catalog, &found.plugins, "real conda");
}

/// Whether `other` is a listed form of the option `property` sets: the same flags, or a
/// replacement (same destination) of a deprecated spelling.
fn listed_form(property: &Property, other: &Property) -> bool {
    let (a, b) = (&property.argument, &other.argument);
    a.dest == b.dest
        && a.action == b.action
        && (a.flags == b.flags || ccm::tools::schema::is_deprecated(a))
        && other.level >= property.level
}

/// One form per option in the default listing (every grant combination, sandboxed or
/// not), every form with `--list-all`, and no option unreachable.
fn check_forms(catalog: &Catalog, plugins: &[Plugin], label: &str) {
    let mut left_out = 0;
    for sandboxed in [false, true] {
        for write in [false, true] {
            let mut tools = support::toolset_in(catalog, plugins, true, sandboxed);
            let full: Vec<Value> = tools.descriptors();
            let grants = Grants {
                write,
                exec: true,
                credentials: true,
            };
            let shaped = listing::shape(&mut tools, grants);
            for tool in &tools.generated {
                if shaped.withheld.contains(&tool.name) {
                    continue;
                }
                let before = full
                    .iter()
                    .find(|d| d["name"] == tool.name.as_str())
                    .unwrap();
                let listed = tool.descriptor["inputSchema"]["properties"]
                    .as_object()
                    .unwrap();
                let all = before["inputSchema"]["properties"].as_object().unwrap();
                let restricted = shaped.restricted.contains_key(&tool.name);
                for property in &tool.layout.properties {
                    assert!(all.contains_key(&property.id), "{label}: --list-all form");
                    if listed.contains_key(&property.id) {
                        continue;
                    }
                    // Left out: a restricted form's own choice, or another form is listed.
                    let other = tool.layout.properties.iter().find(|o| {
                        o.id != property.id
                            && listed.contains_key(&o.id)
                            && listed_form(property, o)
                    });
                    assert!(
                        other.is_some() || restricted,
                        "{label} {}: {} is unreachable (no listed form)",
                        tool.name,
                        property.id
                    );
                    left_out += usize::from(other.is_some());
                }
                // No option is listed twice.
                let mut settings: Vec<(&str, &Vec<String>)> = tool
                    .layout
                    .properties
                    .iter()
                    .filter(|p| listed.contains_key(&p.id) && !p.argument.is_positional())
                    .map(|p| (p.argument.dest.as_str(), &p.argument.flags))
                    .collect();
                let count = settings.len();
                settings.sort();
                settings.dedup();
                assert_eq!(settings.len(), count, "{label} {}: a form twice", tool.name);
            }
        }
    }
    assert!(left_out > 0, "{label}: no form was left out");
}

#[test]
fn one_form_per_option_and_none_unreachable() {
    for stem in [REAL, FIXTURE] {
        let snapshot = support::snapshot(stem);
        check_forms(&snapshot.catalog, &snapshot.plugins, stem);
    }
    // conda 26.7: the root's `-v` is `verbose_2`, left out by default; `--env-spec` gives
    // way to `--format`.
    let snapshot = support::snapshot(REAL);
    let listed = support::listed(
        &snapshot.catalog,
        &snapshot.plugins,
        Grants::default(),
        false,
    );
    for tool in &listed {
        let properties = tool["inputSchema"]["properties"].as_object().unwrap();
        assert!(!properties.contains_key("verbose_2"), "{}", tool["name"]);
        assert!(
            !properties.contains_key("environment_specifier"),
            "{}",
            tool["name"]
        );
        assert!(properties.contains_key("verbose"), "{}", tool["name"]);
    }
}

/// The tool names a text mentions (`conda_` and at least one more name character).
fn tool_names_in(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("conda_") {
        let tail = &rest[at..];
        let len = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
            .unwrap_or(tail.len());
        let name = tail[..len].trim_end_matches(['-', '_']);
        if name.len() > "conda_".len() {
            names.push(name.to_owned());
        }
        rest = &tail[len.max(1)..];
    }
    names
}

/// The instructions (≤ 1 KB) under every grant combination and toolset, in every revision
/// (`initialize`; `server/discover` for the session-less one): they name only tools the
/// session is listed, say the policy in force, `ccm_cwd` and what to ask the operator.
#[test]
fn instructions_fit_and_name_only_listed_tools() {
    use crate::mcp::Session;
    use serde_json::json;
    let conda = &support::fixture().conda;
    let selections: [&[&str]; 4] = [
        &[],
        &["--tools", "@core"],
        &["--tools", "conda_info,conda_execute"],
        &["--tools", "@read"],
    ];
    let mut checked = 0;
    for write in [false, true] {
        for exec in [false, true] {
            for credentials in [false, true] {
                for selection in selections {
                    let mut args: Vec<&str> = selection.to_vec();
                    for (granted, flag) in [
                        (write, "--allow-write"),
                        (exec, "--allow-exec"),
                        (credentials, "--allow-credentials"),
                    ] {
                        if granted {
                            args.push(flag);
                        }
                    }
                    let revision = ["2024-11-05", "2025-06-18", "2025-11-25"][checked % 3];
                    let mut command = support::ccm();
                    command.arg("--conda-exe").arg(conda).args(&args);
                    let mut s = Session::spawn(command);
                    let init = s.request(
                        "initialize",
                        json!({"protocolVersion": revision, "capabilities": {},
                               "clientInfo": {"name": "t", "version": "1"}}),
                    );
                    s.notify("notifications/initialized", json!({}));
                    let text = init["result"]["instructions"].as_str().unwrap().to_owned();
                    check_instructions(&text, &s.tools(), &args);
                    checked += 1;
                }
            }
        }
    }
    // Session-less: `server/discover` carries them.
    let mut command = support::ccm();
    command
        .arg("--conda-exe")
        .arg(conda)
        .args(["--tools", "@core"]);
    let mut s = Session::spawn(command);
    let meta = crate::mcp::session_less_meta();
    let discovered = s.request("server/discover", json!({"_meta": meta}));
    let text = discovered["result"]["instructions"]
        .as_str()
        .unwrap_or_else(|| panic!("{discovered}"))
        .to_owned();
    let listed = s.request("tools/list", json!({"_meta": meta}))["result"]["tools"]
        .as_array()
        .unwrap()
        .clone();
    check_instructions(&text, &listed, &["--tools", "@core"]);
    eprintln!("instructions checked for {} servers", checked + 1);
}

fn check_instructions(text: &str, tools: &[Value], args: &[&str]) {
    assert!(text.len() <= 1024, "{args:?}: {} bytes: {text}", text.len());
    let listed: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    for name in tool_names_in(text) {
        assert!(
            listed.contains(&name.as_str()),
            "{args:?}: the instructions name {name}, which is not listed: {text}"
        );
    }
    assert!(text.contains("ccm_cwd"), "{args:?}: {text}");
    assert!(text.contains("operator"), "{args:?}: {text}");
    let write = args.contains(&"--allow-write");
    assert_eq!(
        text.contains("writes (dry runs excepted) need --allow-write"),
        !write,
        "{args:?}: {text}"
    );
    if listed.contains(&"conda_info") {
        assert!(text.contains("conda_info"), "{args:?}: {text}");
    }
}

#[test]
fn tool_names_are_found_in_text() {
    assert_eq!(
        tool_names_in("conda_<command path>, conda_info (x), `conda_env_list`. conda_x-y."),
        ["conda_info", "conda_env_list", "conda_x-y"]
    );
}
