//! The startup state's wire texts: each variant's message is the text clients read in
//! the capabilities document (`startup.reason`, `restart.reason`).

use serde_json::json;

use super::*;
use crate::server::compare::{Difference, Place};
use crate::server::restart::RestartReason;

fn snapshot() -> &'static BakedSnapshot {
    baked::snapshots().first().expect("a baked snapshot")
}

#[test]
fn start_states_describe_the_startup_object() {
    assert_eq!(
        Start::default().describe(),
        json!({"path": "", "reason": "", "confirmation": null})
    );
    let file = snapshot().file;
    for (confirmation, text) in [
        (Confirmation::Pending, "pending"),
        (Confirmation::Confirmed, "confirmed"),
        (Confirmation::Differs, "differs"),
    ] {
        let start = Start::Snapshot {
            snapshot: snapshot(),
            confirmation,
        };
        assert_eq!(
            start.describe(),
            json!({
                "path": "snapshot",
                "reason": format!("stamp matched the baked snapshot {file}"),
                "confirmation": text,
            })
        );
    }
    assert_eq!(
        Start::Live(LiveReason::NoSnapshotFlag).describe(),
        json!({"path": "live", "reason": "--no-snapshot", "confirmation": null})
    );
}

#[test]
fn live_reasons_read_as_before() {
    for (reason, text) in [
        (LiveReason::NoSnapshotFlag, "--no-snapshot"),
        (
            LiveReason::NoSitePackages,
            "the target's site-packages were not found",
        ),
        (
            LiveReason::NoMetadata,
            "the target's conda metadata was not found",
        ),
        (
            LiveReason::PluginsDiffer("conda-26.7.json"),
            "plugins differ from the baked snapshot conda-26.7.json",
        ),
        (
            LiveReason::NoSnapshot("25.1.0".into()),
            "no baked snapshot for conda 25.1.0",
        ),
        (
            LiveReason::Unparseable("conda-26.7.json"),
            "the baked snapshot conda-26.7.json does not parse",
        ),
    ] {
        assert_eq!(reason.to_string(), text);
    }
}

#[test]
fn mismatches_and_restart_reasons_read_as_before() {
    let cases: Vec<(RestartReason, &str)> = vec![
        (
            Mismatch::LiveFailed("timed out".into()).into(),
            "live discovery failed: timed out",
        ),
        (
            Mismatch::Plugins {
                file: "conda-26.7.json",
                live: "aa".into(),
                baked: "bb",
            }
            .into(),
            "the live plugin inventory differs from the baked snapshot conda-26.7.json \
             (fingerprint aa live, bb baked)",
        ),
        (
            Mismatch::Catalog {
                file: "conda-26.7.json",
                difference: Difference::ArgumentNew {
                    at: Place::Command("info".into()),
                    id: "brand_new".into(),
                },
            }
            .into(),
            "the live catalog differs from the baked snapshot conda-26.7.json \
             (command `info`: argument `brand_new` is new)",
        ),
        (
            RestartReason::Changed {
                startup: "aa".into(),
                now: "bb".into(),
            },
            "conda version or plugin inventory changed (fingerprint aa at startup, bb now)",
        ),
        (
            RestartReason::NoInterpreter,
            "conda plugin discovery failed: no target interpreter",
        ),
        (
            RestartReason::Plugins("conda plugin discovery failed: x".into()),
            "conda plugin discovery failed: x",
        ),
    ];
    for (reason, text) in cases {
        assert_eq!(reason.to_string(), text);
    }
}

#[test]
fn differences_name_the_place_and_the_field() {
    let root = || Place::Root;
    let info = || Place::Command("env create".into());
    for (difference, text) in [
        (Difference::Prog, "the program name `prog` differs"),
        (
            Difference::RootMissing,
            "the root parser is missing on one side",
        ),
        (
            Difference::Field {
                at: root(),
                field: "aliases",
            },
            "the root parser: `aliases` differs",
        ),
        (
            Difference::ArgumentDiffers {
                at: info(),
                id: "name".into(),
                field: "nargs",
            },
            "command `env create`: argument `name` differs in `nargs`",
        ),
        (
            Difference::ArgumentGone {
                at: info(),
                id: "name".into(),
            },
            "command `env create`: argument `name` is gone",
        ),
        (
            Difference::Order { at: root() },
            "the root parser: the order of its arguments differs",
        ),
        (
            Difference::CommandNew("env x".into()),
            "command `env x` is new",
        ),
        (
            Difference::CommandGone("env x".into()),
            "command `env x` is gone",
        ),
        (
            Difference::BlockingNew("run".into()),
            "a blocking diagnostic is new at `run`",
        ),
        (
            Difference::BlockingGone("run".into()),
            "a blocking diagnostic is gone at `run`",
        ),
    ] {
        assert_eq!(difference.to_string(), text);
    }
}

#[test]
fn a_catalog_equals_itself_and_a_new_argument_is_named() {
    let served = Snapshot::from_text(snapshot().json)
        .expect("baked snapshots parse")
        .catalog;
    assert_eq!(surface_difference(&served, &served), None);
    let mut live = served.clone();
    let root = live.root.as_mut().expect("a root parser");
    let mut extra = root.arguments.first().expect("an argument").clone();
    extra.id = "brand_new".into();
    root.arguments.push(extra);
    assert_eq!(
        surface_difference(&served, &live),
        Some(Difference::ArgumentNew {
            at: Place::Root,
            id: "brand_new".into()
        })
    );
}
