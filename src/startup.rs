//! How the server gets its tools: from a baked snapshot at once, or from live discovery.
//!
//! When the target's stamp (conda's version and `conda` entry points, read from disk in a
//! few milliseconds) equals a baked snapshot's, the tools are built from that snapshot
//! and served immediately; live discovery still runs and confirms afterwards. Otherwise
//! (no snapshot for this version, different plugins, `--no-snapshot`) tools wait for live
//! discovery. Reads files, starts no process.

use std::path::Path;

use crate::baked::{self, BakedSnapshot};
use crate::catalog::Catalog;
use crate::discovery::{Discovery, stamp};
use crate::snapshot::{Replacements, Snapshot};

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
    let parsed = Snapshot::from_text(snapshot.json)
        .map_err(|_| format!("the baked snapshot {} does not parse", snapshot.file))?;
    let catalog = localize(&parsed.catalog, &located.prefix);
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

/// Put this target's prefix back where the snapshot says `<prefix>`.
fn localize(catalog: &Catalog, prefix: &Path) -> Catalog {
    let mut value = serde_json::to_value(catalog).expect("catalogs serialize");
    localize_value(&mut value, &prefix.to_string_lossy());
    serde_json::from_value(value).expect("localized catalogs deserialize")
}

fn localize_value(value: &mut serde_json::Value, prefix: &str) {
    match value {
        serde_json::Value::String(s) if s.contains("<prefix>") => {
            *s = s.replace("<prefix>", prefix)
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(|v| localize_value(v, prefix)),
        serde_json::Value::Object(map) => map.values_mut().for_each(|v| localize_value(v, prefix)),
        _ => {}
    }
}

/// Compare live discovery with the snapshot that served the tools. `Err(reason)` when they
/// differ (the served tools may not match the target: a restart is required).
pub fn confirm(snapshot: &BakedSnapshot, live: &Discovery) -> Result<(), String> {
    if live.catalog.root.is_none() {
        let reason = live
            .catalog
            .diagnostics
            .first()
            .map_or("", |d| d.reason.as_str());
        return Err(format!("live discovery failed: {reason}"));
    }
    let served = Snapshot::from_text(snapshot.json)
        .map_err(|_| "the baked snapshot does not parse".to_owned())?;
    if live.fingerprint() != snapshot.fingerprint {
        return Err(format!(
            "the live plugin inventory differs from the baked snapshot {} (fingerprint {} live, {} baked)",
            snapshot.file,
            live.fingerprint(),
            snapshot.fingerprint
        ));
    }
    let replacements = Replacements::for_target(live.prefix.as_deref());
    let normalized = Snapshot::new(&live.catalog, &live.plugins, None, &replacements);
    if normalized.catalog == served.catalog {
        return Ok(());
    }
    let differing = first_difference(&served.catalog, &normalized.catalog);
    Err(format!(
        "the live catalog differs from the baked snapshot {} ({differing})",
        snapshot.file
    ))
}

/// A short description of where two catalogs differ.
fn first_difference(served: &Catalog, live: &Catalog) -> String {
    let served_commands = served.commands();
    let live_commands = live.commands();
    for (branch, path) in &live_commands {
        match served.branch(path) {
            None => return format!("command `{}` is new", path.join(" ")),
            Some(old) if old.last() != branch.last() => {
                return format!("command `{}` changed", path.join(" "));
            }
            _ => {}
        }
    }
    for (_, path) in &served_commands {
        if live.branch(path).is_none() {
            return format!("command `{}` is gone", path.join(" "));
        }
    }
    "the root parser or the diagnostics changed".into()
}
