//! How the server gets its tools: from a baked snapshot at once, or from live discovery.
//!
//! When the target's stamp (conda's version and `conda` entry points, read from disk in a
//! few milliseconds) equals a baked snapshot's, the tools are built from that snapshot
//! and served immediately; live discovery still runs and confirms afterwards. Otherwise
//! (no snapshot for this version, different plugins, `--no-snapshot`) tools wait for live
//! discovery. Reads files, starts no process.

use std::path::Path;

use crate::baked::{self, BakedSnapshot};
use crate::catalog::{Argument, Catalog, Command};
use crate::discovery::{Discovery, stamp};
use crate::snapshot::Snapshot;

/// A start from a baked snapshot.
pub struct Fast {
    pub snapshot: &'static BakedSnapshot,
    /// The snapshot's discovery, localized to this target.
    pub discovery: Discovery,
    pub reason: String,
}

/// Decide the start; `Err(reason)` means: wait for live discovery.
pub fn fast_start(conda_exe: &Path, no_snapshot: bool) -> Result<Fast, String> {
    if no_snapshot {
        return Err("--no-snapshot".into());
    }
    let located = stamp::locate(conda_exe)
        .ok_or_else(|| "the target's site-packages were not found".to_owned())?;
    let stamp = stamp::stamp(&located.site_dirs)
        .ok_or_else(|| "the target's conda metadata was not found".to_owned())?;
    let Some(snapshot) = baked::snapshots()
        .iter()
        .find(|s| s.stamp == Some(stamp.digest.as_str()))
    else {
        return Err(
            match baked::snapshots()
                .iter()
                .find(|s| s.conda_version == stamp.conda_version)
            {
                Some(s) => format!("plugins differ from the baked snapshot {}", s.file),
                None => format!("no baked snapshot for conda {}", stamp.conda_version),
            },
        );
    };
    let parsed = Snapshot::from_text(&localize(snapshot.json, &located.prefix))
        .map_err(|_| format!("the baked snapshot {} does not parse", snapshot.file))?;
    let catalog = parsed.catalog;
    Ok(Fast {
        snapshot,
        reason: format!("stamp matched the baked snapshot {}", snapshot.file),
        discovery: Discovery {
            catalog,
            plugins: parsed.plugins,
            interpreter: Some(located.interpreter),
            prefix: Some(located.prefix),
            python_version: None,
            site_dirs: located.site_dirs,
            processes: 0,
        },
    })
}

/// Put this target's prefix back where the snapshot's text says `<prefix>` (only ever
/// inside a JSON string), so the document is parsed once, straight into the typed model.
fn localize(text: &str, prefix: &Path) -> String {
    let quoted = serde_json::to_string(&prefix.to_string_lossy()).expect("strings serialize");
    text.replace(crate::snapshot::PREFIX, &quoted[1..quoted.len() - 1])
}

/// Compare live discovery with the snapshot that served the tools (`served`: its catalog,
/// as localized at startup). `Err(reason)` when they
/// differ in what decides the tool surface (the served tools may not match the target: a
/// restart is required); the reason names the command, argument and field.
///
/// Compared: the plugin inventory (fingerprint), the program name, the command tree and,
/// per command, everything its signature covers (aliases, greediness, terminality,
/// raw-only, exclusive groups; per argument: id, order, flags, action, nargs, type,
/// required, hidden, static choices) and which commands a blocking diagnostic takes out.
/// Not compared: help texts, defaults and dynamic choice values — they differ between
/// machines (home directory, working directory, installed solvers) without changing a
/// tool's shape or its argv.
pub fn confirm(snapshot: &BakedSnapshot, served: &Catalog, live: &Discovery) -> Result<(), String> {
    if live.catalog.root.is_none() {
        let reason = live
            .catalog
            .diagnostics
            .first()
            .map_or("", |d| d.reason.as_str());
        return Err(format!("live discovery failed: {reason}"));
    }
    if live.fingerprint() != snapshot.fingerprint {
        return Err(format!(
            "the live plugin inventory differs from the baked snapshot {} (fingerprint {} live, {} baked)",
            snapshot.file,
            live.fingerprint(),
            snapshot.fingerprint
        ));
    }
    match surface_difference(served, &live.catalog) {
        None => Ok(()),
        Some(differing) => Err(format!(
            "the live catalog differs from the baked snapshot {} ({differing})",
            snapshot.file
        )),
    }
}

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
