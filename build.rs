//! Bakes the typed compilers rendered into `snapshots/` into the binary.
//!
//! Hermetic: never runs conda or python and writes only to `OUT_DIR`. For every
//! `snapshots/conda-<M>.<m>.json` with its rendered `conda_<M>_<m>.rs`, the registry gets a
//! module (the rendered file, included by path) and an entry with the snapshot's JSON.
//! The fixture conda's snapshots ([`FIXTURES`]) are baked only with the `test-snapshots`
//! feature, which the test builds turn on.
//!
//! It also records which build this is, for `ccm --version` (the only command it may run
//! is `git`, to name the commit): `CCM_BUILD` (when unset, `git describe --always` of the
//! source tree, or `unknown` outside a git checkout). The distribution (`wheel`, `conda`)
//! is not compiled in: one release build serves both, and `host::install` reads at run
//! time which one installed the binary; `CCM_DISTRIBUTION` is only the label when none
//! did (`source`).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Naming shared with the generator, so the two cannot disagree.
#[path = "codegen/src/naming.rs"]
#[allow(unreachable_pub)] // public in the codegen library, which the generator uses
mod naming;

use naming::FIXTURES;

fn main() {
    let root =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    record_build(&root);
    let test_snapshots = std::env::var_os("CARGO_FEATURE_TEST_SNAPSHOTS").is_some();
    let snapshots = root.join("snapshots");
    println!("cargo:rerun-if-changed=snapshots");
    println!("cargo:rerun-if-changed=codegen/src/naming.rs");
    let mut names: Vec<String> = std::fs::read_dir(&snapshots)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("conda-") && n.ends_with(".json"))
                .filter(|n| test_snapshots || !FIXTURES.contains(&n.as_str()))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    let mut modules = String::new();
    let mut entries = String::new();
    for json in names {
        let stem = json.trim_end_matches(".json");
        let module = naming::module_name(stem);
        let rust = snapshots.join(naming::rust_file_name(stem));
        if !rust.exists() {
            println!(
                "cargo:warning=snapshots/{json} has no rendered {module}.rs; run `cargo run -p codegen`"
            );
            continue;
        }
        println!("cargo:rerun-if-changed={}", rust.display());
        println!("cargo:rerun-if-changed={}", snapshots.join(&json).display());
        writeln!(
            modules,
            "#[path = {:?}]\npub(crate) mod {module};",
            rust.display().to_string()
        )
        .unwrap();
        writeln!(
            entries,
            "    BakedSnapshot {{ file: {json:?}, conda_version: {module}::CONDA_VERSION, \
             fingerprint: {module}::FINGERPRINT, stamp: {module}::STAMP, json: include_str!({:?}), commands: {module}::COMMANDS }},",
            snapshots.join(&json).display().to_string()
        )
        .unwrap();
    }
    let registry = format!(
        "{modules}\n/// Every baked snapshot.\npub(crate) static SNAPSHOTS: &[BakedSnapshot] = &[\n{entries}];\n"
    );
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"))
        .join("baked_registry.rs");
    std::fs::write(out, registry).expect("write to OUT_DIR");
}

/// Sets `CCM_DISTRIBUTION` (always `source`: the label of a binary no distribution
/// installed) and `CCM_BUILD` for the crate (`ccm --version` prints both).
fn record_build(root: &Path) {
    println!("cargo:rerun-if-env-changed=CCM_BUILD");
    let label = |value: String| {
        let ok = !value.is_empty()
            && value.len() <= 64
            && value
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._+-".contains(c));
        ok.then_some(value)
    };
    let build = match std::env::var("CCM_BUILD") {
        Ok(value) => label(value.clone()).unwrap_or_else(|| {
            panic!("CCM_BUILD={value:?}: expected a short label such as a commit")
        }),
        Err(_) => git_describe(root).unwrap_or_else(|| "unknown".to_owned()),
    };
    println!("cargo:rustc-env=CCM_DISTRIBUTION=source");
    println!("cargo:rustc-env=CCM_BUILD={build}");
}

/// `git describe --always` of the checkout at `root`, rerun whenever HEAD moves.
fn git_describe(root: &Path) -> Option<String> {
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .current_dir(root)
            .args(args)
            .output()
            .ok()?;
        let text = String::from_utf8(out.stdout).ok()?.trim().to_owned();
        (out.status.success() && !text.is_empty()).then_some(text)
    };
    // The reflog of HEAD changes on every commit, checkout and reset (worktrees too).
    let reflog = git(&[
        "rev-parse",
        "--path-format=absolute",
        "--git-path",
        "logs/HEAD",
    ])?;
    println!("cargo:rerun-if-changed={reflog}");
    git(&["describe", "--always", "--abbrev=12"])
}
