//! Folding: commands registered under two names.

use super::*;

#[test]
fn commands_under_two_names_fold_into_the_longer_one() {
    let catalog = catalog_with_twin("ev");
    let (shaping, toolset) = shaping(&catalog, &[], None).unwrap();
    assert_eq!(
        shaping.folded.get("conda_ev_list").map(String::as_str),
        Some("conda_env_list")
    );
    assert_eq!(
        shaping.folded.get("conda_ev").map(String::as_str),
        Some("conda_env")
    );
    let twins = toolset
        .generated_names()
        .iter()
        .filter(|n| n.starts_with("conda_ev_") || *n == "conda_ev")
        .count();
    assert_eq!(
        shaping.folded.len(),
        twins,
        "every tool under the second name"
    );
    assert!(shaping.selects("conda_ev_list") && !shaping.lists("conda_ev_list"));
    assert!(shaping.lists("conda_env_list"));
    assert!(
        !shaping.folded.contains_key("conda_task"),
        "one option more: another command"
    );

    // The longer name is listed whichever is registered first.
    let catalog = catalog_with_twin("environments");
    let (shaping, _) = super::shaping(&catalog, &[], None).unwrap();
    assert_eq!(
        shaping.folded.get("conda_env_list").map(String::as_str),
        Some("conda_environments_list")
    );
}

#[test]
fn folding_is_decided_by_the_catalog_not_names() {
    // conda 26.7's own commands with equal signatures are different commands.
    let catalog = catalog();
    let (shaping, _) = shaping(&catalog, &[], None).unwrap();
    assert_eq!(
        shaping.folded,
        BTreeMap::new(),
        "env config vars set/unset, commands/deactivate"
    );
    // One option more under the second name: no longer the same command.
    let mut catalog = catalog_with_twin("ev");
    let root = catalog.root.as_mut().unwrap();
    let ev = root
        .children
        .iter_mut()
        .find(|c| c.name.as_deref() == Some("ev"))
        .unwrap();
    let list = ev
        .children
        .iter_mut()
        .find(|c| c.name.as_deref() == Some("list"))
        .unwrap();
    let mut extra = list.arguments[0].clone();
    extra.id = "extra".into();
    extra.dest = "extra".into();
    extra.flags = vec!["--extra".into()];
    list.arguments.push(extra);
    let (shaping, _) = super::shaping(&catalog, &[], None).unwrap();
    assert!(
        !shaping.folded.keys().any(|k| k.starts_with("conda_ev")),
        "{:?}",
        shaping.folded
    );
    // The group's own one-line help may differ (conda sets it from the plugin's
    // summary); a subcommand's may not.
    let mut catalog = catalog_with_twin("ev");
    let root = catalog.root.as_mut().unwrap();
    let ev = root
        .children
        .iter_mut()
        .find(|c| c.name.as_deref() == Some("ev"))
        .unwrap();
    ev.help = Some("Shorthand for 'conda env'.".into());
    let (shaping, _) = super::shaping(&catalog, &[], None).unwrap();
    assert_eq!(shaping.folded.len(), 11, "{:?}", shaping.folded);
    let root = catalog.root.as_mut().unwrap();
    let ev = root
        .children
        .iter_mut()
        .find(|c| c.name.as_deref() == Some("ev"))
        .unwrap();
    ev.children[0].help = Some("something else".into());
    let (shaping, _) = super::shaping(&catalog, &[], None).unwrap();
    assert!(shaping.folded.is_empty(), "{:?}", shaping.folded);
    // Terminal commands never fold, even with equal arguments and texts.
    let mut catalog = super::catalog();
    let root = catalog.root.as_mut().unwrap();
    let mut copy = root
        .children
        .iter()
        .find(|c| c.name.as_deref() == Some("list"))
        .unwrap()
        .clone();
    copy.name = Some("lst".into());
    root.children.push(copy);
    let (shaping, _) = super::shaping(&catalog, &[], None).unwrap();
    assert!(shaping.folded.is_empty(), "{:?}", shaping.folded);
}

#[test]
fn selecting_either_name_selects_both() {
    let catalog = catalog_with_twin("ev");
    let names = selected(&catalog, &[], "conda_ev_list");
    assert_eq!(names, sorted(&["conda_env_list", "conda_ev_list"]));
    let (shaping, _) = shaping(&catalog, &[], Some("conda_ev_list")).unwrap();
    assert!(shaping.lists("conda_env_list") && !shaping.lists("conda_ev_list"));
    assert!(shaping.admits_path(Some(&["ev".to_owned(), "list".to_owned()])));
}
