//! What confirmation compares: the parts of two catalogs that decide the tool surface
//! (commands, signatures, blocking diagnostics), never help texts, defaults or dynamic
//! choice values; and how live discovery contradicts a snapshot start ([`Mismatch`], a
//! restart's reason). Pure.

use std::fmt;

use crate::model::catalog::{Argument, Catalog, Command};

/// The first difference found, as named in a restart reason.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Difference {
    #[error("the program name `prog` differs")]
    Prog,
    #[error("the root parser is missing on one side")]
    RootMissing,
    #[error("{at}: `{field}` differs")]
    Field { at: Place, field: &'static str },
    #[error("{at}: argument `{id}` is new")]
    ArgumentNew { at: Place, id: String },
    #[error("{at}: argument `{id}` differs in `{field}`")]
    ArgumentDiffers {
        at: Place,
        id: String,
        field: &'static str,
    },
    #[error("{at}: argument `{id}` is gone")]
    ArgumentGone { at: Place, id: String },
    #[error("{at}: the order of its arguments differs")]
    Order { at: Place },
    /// A command (its path, space-separated) only live discovery has.
    #[error("command `{0}` is new")]
    CommandNew(String),
    #[error("command `{0}` is gone")]
    CommandGone(String),
    #[error("a blocking diagnostic is new at `{0}`")]
    BlockingNew(String),
    #[error("a blocking diagnostic is gone at `{0}`")]
    BlockingGone(String),
}

/// Which parser differs: the root, or a command by its path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Place {
    Root,
    Command(String),
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Place::Root => f.write_str("the root parser"),
            Place::Command(path) => write!(f, "command `{path}`"),
        }
    }
}

/// The first difference between two catalogs in what decides the tool surface, if any.
pub(super) fn surface_difference(served: &Catalog, live: &Catalog) -> Option<Difference> {
    if served.prog != live.prog {
        return Some(Difference::Prog);
    }
    let (Some(served_root), Some(live_root)) = (&served.root, &live.root) else {
        return (served.root.is_some() != live.root.is_some()).then_some(Difference::RootMissing);
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
        return Some(Difference::BlockingNew(path.join(" ")));
    }
    if let Some(path) = served_blocked.iter().find(|p| !live_blocked.contains(p)) {
        return Some(Difference::BlockingGone(path.join(" ")));
    }
    None
}

fn command_difference(
    served: &Command,
    live: &Command,
    path: &mut Vec<String>,
) -> Option<Difference> {
    let at = if path.is_empty() {
        Place::Root
    } else {
        Place::Command(path.join(" "))
    };
    let fields: [(&'static str, bool); 5] = [
        ("aliases", served.aliases == live.aliases),
        ("terminal", served.terminal == live.terminal),
        ("passthrough", served.passthrough == live.passthrough),
        ("raw_only", served.raw_only == live.raw_only),
        (
            "exclusive_groups",
            served.exclusive_groups == live.exclusive_groups,
        ),
    ];
    if let Some((field, _)) = fields.into_iter().find(|(_, same)| !same) {
        return Some(Difference::Field { at, field });
    }
    if let Some(difference) = arguments_difference(&served.arguments, &live.arguments, at) {
        return Some(difference);
    }
    for live_child in &live.children {
        let name = live_child.name.clone().unwrap_or_default();
        path.push(name);
        let difference = match child(&served.children, &live_child.name) {
            None => Some(Difference::CommandNew(path.join(" "))),
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
        let gone = Difference::CommandGone(path.join(" "));
        path.pop();
        return Some(gone);
    }
    None
}

/// The first difference between two commands' argument lists (new, changed, gone,
/// reordered).
fn arguments_difference(served: &[Argument], live: &[Argument], at: Place) -> Option<Difference> {
    let find = |list: &[Argument], id: &str| list.iter().position(|a| a.id == id);
    for argument in live {
        let Some(index) = find(served, &argument.id) else {
            return Some(Difference::ArgumentNew {
                at,
                id: argument.id.clone(),
            });
        };
        if let Some(field) = argument_difference(&served[index], argument) {
            return Some(Difference::ArgumentDiffers {
                at,
                id: argument.id.clone(),
                field,
            });
        }
    }
    if let Some(gone) = served.iter().find(|a| find(live, &a.id).is_none()) {
        return Some(Difference::ArgumentGone {
            at,
            id: gone.id.clone(),
        });
    }
    if served.iter().map(|a| &a.id).ne(live.iter().map(|a| &a.id)) {
        return Some(Difference::Order { at });
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

/// How live discovery contradicts the snapshot that served the tools.
#[derive(Clone, Debug, thiserror::Error)]
pub enum Mismatch {
    #[error("live discovery failed: {0}")]
    LiveFailed(String),
    #[error(
        "the live plugin inventory differs from the baked snapshot {file} (fingerprint {live} live, {baked} baked)"
    )]
    Plugins {
        file: &'static str,
        live: String,
        baked: &'static str,
    },
    #[error("the live catalog differs from the baked snapshot {file} ({difference})")]
    Catalog {
        file: &'static str,
        difference: Difference,
    },
}
