//! What confirmation compares: the parts of two catalogs that decide the tool surface
//! (commands, signatures, blocking diagnostics), never help texts, defaults or dynamic
//! choice values. Pure.

use crate::model::catalog::{Argument, Catalog, Command};

/// The first difference between two catalogs in what decides the tool surface, if any.
pub fn surface_difference(served: &Catalog, live: &Catalog) -> Option<String> {
    if served.prog != live.prog {
        return Some("the program name `prog` differs".into());
    }
    let (Some(served_root), Some(live_root)) = (&served.root, &live.root) else {
        return (served.root.is_some() != live.root.is_some())
            .then(|| "the root parser is missing on one side".into());
    };
    if let Some(difference) = command_difference(served_root, live_root, &mut Vec::new()) {
        return Some(difference);
    }
    let blocked = |catalog: &Catalog| {
        let mut paths: Vec<Vec<String>> = catalog
            .diagnostics
            .iter()
            .filter(|d| d.blocking)
            .map(|d| d.path.clone())
            .collect();
        paths.sort();
        paths.dedup();
        paths
    };
    let (served_blocked, live_blocked) = (blocked(served), blocked(live));
    if let Some(path) = live_blocked.iter().find(|p| !served_blocked.contains(p)) {
        return Some(format!(
            "a blocking diagnostic is new at `{}`",
            path.join(" ")
        ));
    }
    if let Some(path) = served_blocked.iter().find(|p| !live_blocked.contains(p)) {
        return Some(format!(
            "a blocking diagnostic is gone at `{}`",
            path.join(" ")
        ));
    }
    None
}

fn command_difference(served: &Command, live: &Command, path: &mut Vec<String>) -> Option<String> {
    let at = if path.is_empty() {
        "the root parser".to_owned()
    } else {
        format!("command `{}`", path.join(" "))
    };
    let fields: [(&str, bool); 5] = [
        ("aliases", served.aliases == live.aliases),
        ("terminal", served.terminal == live.terminal),
        ("passthrough", served.passthrough == live.passthrough),
        ("raw_only", served.raw_only == live.raw_only),
        (
            "exclusive_groups",
            served.exclusive_groups == live.exclusive_groups,
        ),
    ];
    if let Some((field, _)) = fields.iter().find(|(_, same)| !same) {
        return Some(format!("{at}: `{field}` differs"));
    }
    let find = |list: &[Argument], id: &str| list.iter().position(|a| a.id == id);
    for argument in &live.arguments {
        let Some(index) = find(&served.arguments, &argument.id) else {
            return Some(format!("{at}: argument `{}` is new", argument.id));
        };
        if let Some(field) = argument_difference(&served.arguments[index], argument) {
            return Some(format!(
                "{at}: argument `{}` differs in `{field}`",
                argument.id
            ));
        }
    }
    if let Some(gone) = served
        .arguments
        .iter()
        .find(|a| find(&live.arguments, &a.id).is_none())
    {
        return Some(format!("{at}: argument `{}` is gone", gone.id));
    }
    if served
        .arguments
        .iter()
        .map(|a| &a.id)
        .ne(live.arguments.iter().map(|a| &a.id))
    {
        return Some(format!("{at}: the order of its arguments differs"));
    }
    for live_child in &live.children {
        let name = live_child.name.clone().unwrap_or_default();
        path.push(name);
        let difference = match child(&served.children, &live_child.name) {
            None => Some(format!("command `{}` is new", path.join(" "))),
            Some(served_child) => command_difference(served_child, live_child, path),
        };
        path.pop();
        if difference.is_some() {
            return difference;
        }
    }
    if let Some(gone) = served
        .children
        .iter()
        .find(|c| child(&live.children, &c.name).is_none())
    {
        path.push(gone.name.clone().unwrap_or_default());
        let text = format!("command `{}` is gone", path.join(" "));
        path.pop();
        return Some(text);
    }
    None
}

/// The first signature field in which two arguments with the same id differ.
fn argument_difference(served: &Argument, live: &Argument) -> Option<&'static str> {
    let static_choices = |a: &Argument| {
        if a.dynamic_choices {
            None
        } else {
            Some(a.choices.clone())
        }
    };
    [
        ("flags", served.flags == live.flags),
        ("action", served.action == live.action),
        ("nargs", served.nargs == live.nargs),
        ("value_type", served.value_type == live.value_type),
        ("required", served.required == live.required),
        ("hidden", served.hidden == live.hidden),
        (
            "dynamic_choices",
            served.dynamic_choices == live.dynamic_choices,
        ),
        ("choices", static_choices(served) == static_choices(live)),
    ]
    .into_iter()
    .find(|(_, same)| !same)
    .map(|(field, _)| field)
}

fn child<'a>(list: &'a [Command], name: &Option<String>) -> Option<&'a Command> {
    list.iter().find(|c| &c.name == name)
}
