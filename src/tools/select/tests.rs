use std::time::Duration;

use super::*;
use crate::model::snapshot::Snapshot;
use crate::tools::policy::Access;
use crate::tools::toolset::ToolsetSettings;

mod fold;

const CONDA_26_7: &str = include_str!("../../../snapshots/conda-26.7.json");

fn catalog() -> Catalog {
    Snapshot::from_text(CONDA_26_7)
        .expect("the checked-in snapshot parses")
        .catalog
}

/// conda 26.7 with `env` registered once more under `name`, and a `task` command (the one
/// the conda-workspaces table reviews) copied from `info`.
fn catalog_with_twin(name: &str) -> Catalog {
    let mut catalog = catalog();
    let root = catalog.root.as_mut().expect("a root");
    let mut twin = root
        .children
        .iter()
        .find(|c| c.name.as_deref() == Some("env"))
        .expect("conda env")
        .clone();
    twin.name = Some(name.to_owned());
    twin.summary = Some("Shorthand for 'conda env'.".to_owned());
    let mut task = root
        .children
        .iter()
        .find(|c| c.name.as_deref() == Some("info"))
        .expect("conda info")
        .clone();
    task.name = Some("task".to_owned());
    let mut own = task.arguments[0].clone();
    own.id = "own".into();
    own.dest = "own".into();
    own.flags = vec!["--own".into()];
    task.arguments.push(own);
    root.children.push(twin);
    root.children.push(task);
    catalog
}

fn plugin(distribution: &str) -> Plugin {
    Plugin {
        distribution: distribution.to_owned(),
        entry_point: distribution.to_owned(),
        hooks: vec!["conda_subcommands".to_owned()],
        value: format!("{distribution}.plugin"),
        version: "0.12.0".to_owned(),
    }
}

fn settings(allow_exec: bool, classify: Vec<(String, Access)>) -> ToolsetSettings {
    ToolsetSettings {
        allow_exec,
        classify,
        timeout: Duration::from_secs(60),
        sandboxed: false,
    }
}

fn spec(text: &str) -> Selection {
    Selection::parse([text]).expect("a valid selection")
}

fn shaping(
    catalog: &Catalog,
    plugins: &[Plugin],
    text: Option<&str>,
) -> Result<(Selected, Toolset), SelectError> {
    let toolset = Toolset::build(catalog, plugins, &settings(true, Vec::new()));
    let spec = text.map(spec);
    Selected::new(&toolset, catalog, plugins, spec.as_ref(), false).map(|s| (s, toolset))
}

fn selected(catalog: &Catalog, plugins: &[Plugin], text: &str) -> Vec<String> {
    let (shaping, toolset) = shaping(catalog, plugins, Some(text)).expect("selects");
    let mut names: Vec<String> = [EXECUTE_TOOL, COMPLETION_TOOL]
        .into_iter()
        .map(str::to_owned)
        .chain(toolset.generated_names())
        .filter(|n| shaping.selects(n))
        .collect();
    names.sort();
    names
}

fn sorted(names: &[&str]) -> Vec<String> {
    let mut out: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
    out.sort();
    out
}

#[test]
fn syntax_is_checked_when_parsed() {
    assert_eq!(Selection::parse([""]), Err(SelectionError::Empty));
    assert_eq!(Selection::parse([" , ,"]), Err(SelectionError::Empty));
    assert_eq!(
        Selection::parse(["@nope"]),
        Err(SelectionError::UnknownGroup("@nope".into()))
    );
    assert!(Selection::parse(["@plugin:"]).is_err());
    assert!(Selection::parse(["@plugin:a b"]).is_err());
    assert!(Selection::parse(["conda info"]).is_err());
    assert!(
        Selection::parse(["conda_[env"]).is_err(),
        "an unclosed class is no glob"
    );
    assert!(Selection::parse(["conda/info"]).is_err());
    let message = SelectionError::UnknownGroup("@x".into()).to_string();
    assert!(message.contains(GROUPS), "{message}");
    let parsed = Selection::parse(["@core, conda_env_*", "conda_info,@plugin:conda-workspaces"])
        .expect("valid");
    assert_eq!(
        parsed.texts(),
        [
            "@core",
            "conda_env_*",
            "conda_info",
            "@plugin:conda-workspaces"
        ]
    );
    // The operator's text is clipped and escaped in messages.
    let long = format!("@{}", "x\u{7}".repeat(80));
    let Err(SelectionError::UnknownGroup(shown)) = Selection::parse([long.as_str()]) else {
        panic!("an unknown group");
    };
    assert!(
        shown.chars().count() <= 64 * 6 && !shown.contains('\u{7}'),
        "{shown}"
    );
}

#[test]
fn core_is_the_commands_agents_use_most() {
    let names = selected(&catalog(), &[], "@core");
    assert_eq!(
        names,
        sorted(&[
            "conda_clean",
            "conda_config",
            "conda_create",
            "conda_env_create",
            "conda_env_export",
            "conda_env_list",
            "conda_env_remove",
            "conda_info",
            "conda_install",
            "conda_list",
            "conda_remove",
            "conda_run",
            "conda_search",
            "conda_update",
        ])
    );
}

#[test]
fn read_follows_the_policy_and_the_operators_classification() {
    let catalog = catalog();
    let names = selected(&catalog, &[], "@read");
    for name in [
        "conda_info",
        "conda_list",
        "conda_search",
        "conda_env_list",
        "conda_compare",
    ] {
        assert!(names.iter().any(|n| n == name), "{name} in {names:?}");
    }
    for name in [
        "conda_install",
        "conda_config",
        "conda_run",
        EXECUTE_TOOL,
        "conda_create",
    ] {
        assert!(!names.iter().any(|n| n == name), "{name} in {names:?}");
    }
    // `--classify conda_install=read` makes it read-only for the policy, so for @read.
    let toolset = Toolset::build(
        &catalog,
        &[],
        &settings(false, vec![("conda_install".into(), Access::Read)]),
    );
    let shaping = Selected::new(&toolset, &catalog, &[], Some(&spec("@read")), false).unwrap();
    assert!(shaping.selects("conda_install"));
}

#[test]
fn envs_packages_config_and_all() {
    let catalog = catalog();
    let envs = selected(&catalog, &[], "@envs");
    assert!(
        envs.iter().all(|n| n.starts_with("conda_env")
            || ["conda_create", "conda_rename", "conda_export"].contains(&n.as_str())),
        "{envs:?}"
    );
    assert!(envs.contains(&"conda_env_config_vars_set".to_owned()));
    assert!(envs.contains(&"conda_rename".to_owned()));
    let packages = selected(&catalog, &[], "@packages");
    assert_eq!(
        packages,
        sorted(&[
            "conda_clean",
            "conda_compare",
            "conda_install",
            "conda_list",
            "conda_package",
            "conda_remove",
            "conda_search",
            "conda_update",
        ])
    );
    let config = selected(&catalog, &[], "@config");
    assert_eq!(
        config,
        sorted(&[
            "conda_config",
            "conda_env_config",
            "conda_env_config_vars",
            "conda_env_config_vars_list",
            "conda_env_config_vars_set",
            "conda_env_config_vars_unset",
        ])
    );
    let all = selected(&catalog, &[], "@all");
    let toolset = Toolset::build(&catalog, &[], &settings(true, Vec::new()));
    assert_eq!(
        all.len(),
        toolset.generated.len() + 1,
        "every tool and conda_execute"
    );
}

#[test]
fn names_globs_and_the_servers_own_tools() {
    let catalog = catalog();
    assert_eq!(
        selected(&catalog, &[], "conda_env_*,conda_info"),
        sorted(&[
            "conda_env_config",
            "conda_env_config_vars",
            "conda_env_config_vars_list",
            "conda_env_config_vars_set",
            "conda_env_config_vars_unset",
            "conda_env_create",
            "conda_env_export",
            "conda_env_list",
            "conda_env_remove",
            "conda_env_update",
            "conda_info",
        ])
    );
    assert_eq!(selected(&catalog, &[], "conda_i?fo"), ["conda_info"]);
    // conda_execute and conda_cli_command are valid names whether or not they are offered.
    let names = selected(&catalog, &[], "conda_info,conda_execute,conda_cli_command");
    assert_eq!(
        names,
        sorted(&["conda_cli_command", "conda_execute", "conda_info"])
    );
    assert!(!selected(&catalog, &[], "@core").contains(&EXECUTE_TOOL.to_owned()));
}

#[test]
fn an_item_that_selects_nothing_is_an_error() {
    let catalog = catalog();
    let plugins = [plugin("conda-workspaces"), plugin("some-unreviewed")];
    let error = |text: &str| shaping(&catalog, &plugins, Some(text)).expect_err("an error");
    assert_eq!(
        error("conda_nope"),
        SelectError::Nothing("conda_nope".into())
    );
    assert_eq!(
        error("conda_nope_*"),
        SelectError::Nothing("conda_nope_*".into())
    );
    assert!(matches!(
        error("@plugin:conda-spawn"),
        SelectError::UnknownPlugin { ref installed, .. } if installed == "conda-workspaces, some-unreviewed"
    ));
    assert_eq!(
        error("@plugin:some_unreviewed"),
        SelectError::UnreviewedPlugin("some_unreviewed".into())
    );
    // Installed and reviewed, but none of its commands is in this catalog.
    assert_eq!(
        error("@plugin:conda-workspaces"),
        SelectError::Nothing("@plugin:conda-workspaces".into())
    );
    assert!(error("conda_nope").to_string().contains(GROUPS));
    assert!(matches!(
        shaping(&catalog, &[], Some("@plugin:x")).err(),
        Some(SelectError::UnknownPlugin { ref installed, .. }) if installed == "none"
    ));
}

#[test]
fn a_plugin_group_selects_the_commands_its_table_records() {
    let catalog = catalog_with_twin("ev");
    let plugins = [plugin("Conda_Workspaces")];
    assert_eq!(
        selected(&catalog, &plugins, "@plugin:conda-workspaces"),
        ["conda_task"]
    );
}

#[test]
fn unfit_tools_are_left_out_unless_named_or_listing_all() {
    let catalog = catalog();
    let (shaping, _) = shaping(&catalog, &[], None).unwrap();
    for name in ["conda_activate", "conda_deactivate", "conda_init"] {
        assert!(shaping.selects(name) && !shaping.lists(name), "{name}");
    }
    assert!(shaping.lists("conda_info"));
    let described = shaping.describe();
    let left_out = described["left_out"].as_array().unwrap();
    let mut tools: Vec<&str> = left_out.iter().filter_map(|e| e["tool"].as_str()).collect();
    tools.sort_unstable();
    // The three unfit commands and the three command groups (`env`, `env config`, `env
    // config vars`), which only print their usage.
    assert_eq!(
        tools,
        [
            "conda_activate",
            "conda_deactivate",
            "conda_env",
            "conda_env_config",
            "conda_env_config_vars",
            "conda_init"
        ],
        "{described}"
    );
    assert!(
        left_out
            .iter()
            .all(|e| e["reason"].as_str().is_some_and(|r| !r.is_empty()))
    );
    let (named, _) = super::tests::shaping(&catalog, &[], Some("conda_init,@core")).unwrap();
    assert!(named.lists("conda_init"), "an explicit name lists it");
    let (globbed, _) = super::tests::shaping(&catalog, &[], Some("conda_*")).unwrap();
    assert!(globbed.selects("conda_init") && !globbed.lists("conda_init"));
    let toolset = Toolset::build(&catalog, &[], &settings(false, Vec::new()));
    let all = Selected::new(&toolset, &catalog, &[], None, true).unwrap();
    assert!(all.lists("conda_init"));
    let twins = catalog_with_twin("ev");
    let toolset = Toolset::build(&twins, &[], &settings(false, Vec::new()));
    let all = Selected::new(&toolset, &twins, &[], None, true).unwrap();
    assert!(all.lists("conda_ev_list"), "--list-all folds nothing");
    assert_eq!(all.describe()["folded"], json!({}));
}

#[test]
fn raw_argv_reaches_only_selected_commands() {
    let catalog = catalog();
    let path = |p: &[&str]| p.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let (everything, _) = shaping(&catalog, &[], None).unwrap();
    assert!(everything.admits_path(None));
    assert!(everything.admits_path(Some(&path(&["env", "remove"]))));
    let (core, _) = shaping(&catalog, &[], Some("@core,conda_execute")).unwrap();
    assert!(core.admits_path(Some(&path(&["env", "list"]))));
    assert!(!core.admits_path(Some(&path(&["env", "update"]))));
    assert!(
        !core.admits_path(Some(&path(&["env"]))),
        "a parent is no selected tool"
    );
    assert!(!core.admits_path(Some(&[])), "nor is the root");
    assert!(
        !core.admits_path(None),
        "an argv the simulation cannot follow"
    );
    let root = catalog.root.as_ref();
    let argv = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let reach = |a: &[&str]| core.admits_path(policy::command_path(root, &argv(a)).as_deref());
    assert!(reach(&["env", "list", "--json"]));
    assert!(!reach(&["env", "update", "-n", "x"]));
    assert!(!reach(&["env", "updat"]), "an abbreviation is refused");
    assert!(
        !reach(&["--no-plugins", "env", "update"]),
        "options before the command"
    );
    assert!(reach(&["--no-plugins", "env", "list"]));
    assert!(
        reach(&["uninstall", "-n", "x", "--all"]),
        "remove is in @core"
    );
    let (info, _) = shaping(&catalog, &[], Some("conda_info,conda_execute")).unwrap();
    let reach_info = |a: &[&str]| info.admits_path(policy::command_path(root, &argv(a)).as_deref());
    assert!(
        !reach_info(&["uninstall", "-n", "x", "--all"]),
        "an alias of remove"
    );
    assert!(reach_info(&["info", "--json"]));
    assert!(reach(&["info", "--envs"]));
}

#[test]
fn apply_filters_moves_and_annotates() {
    let catalog = catalog_with_twin("ev");
    let mut toolset = Toolset::build(&catalog, &[], &settings(true, Vec::new()));
    let shaping = Selected::new(
        &toolset,
        &catalog,
        &[],
        Some(&spec("conda_env_*,conda_init,conda_execute")),
        false,
    )
    .unwrap();
    let applied = shaping
        .apply(
            &Surface::default(),
            toolset.take_descriptors(),
            &HashSet::new(),
        )
        .unwrap();
    let names = |list: &[Value]| {
        list.iter()
            .map(|d| d["name"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    let listed = names(&applied.listed);
    assert!(
        listed.contains(&"conda_env_list".to_owned()) && listed.contains(&"conda_init".to_owned())
    );
    assert!(listed.contains(&EXECUTE_TOOL.to_owned()));
    assert!(
        !listed.iter().any(|n| n.starts_with("conda_ev_")),
        "{listed:?}"
    );
    assert!(!listed.contains(&"conda_info".to_owned()));
    let unlisted = names(&applied.unlisted);
    assert!(unlisted.contains(&"conda_ev_list".to_owned()));
    assert!(
        applied.routes.contains_key("conda_ev_list"),
        "still callable"
    );
    assert!(
        !applied.routes.contains_key("conda_info"),
        "unselected: not callable"
    );
    let env_list = applied
        .listed
        .iter()
        .find(|d| d["name"] == "conda_env_list")
        .unwrap();
    assert_eq!(
        env_list["_meta"][META_ALIAS_TOOLS],
        json!(["conda_ev_list"])
    );
}

#[test]
fn an_empty_selection_selects_nothing() {
    let catalog = catalog();
    let toolset = Toolset::build(&catalog, &[], &settings(true, Vec::new()));
    let nothing = Selection { items: Vec::new() };
    let shaping = Selected::new(&toolset, &catalog, &[], Some(&nothing), false).unwrap();
    assert!(!shaping.selects(EXECUTE_TOOL) && !shaping.selects("conda_info"));
    assert!(!shaping.admits_path(Some(&["info".to_owned()])));
    assert!(!shaping.admits_path(None));
}
