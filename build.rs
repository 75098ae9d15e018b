//! Bakes the typed compilers rendered into `snapshots/` into the binary.
//!
//! Hermetic: never runs conda or python and writes only to `OUT_DIR`. For every
//! `snapshots/conda-<M>.<m>.json` with its rendered `conda_<M>_<m>.rs`, the registry gets a
//! module (the rendered file, included by path) and an entry with the snapshot's JSON.
//! The fixture conda's snapshots ([`FIXTURES`]) are baked only with the `test-snapshots`
//! feature, which the test builds turn on.

use std::fmt::Write as _;
use std::path::PathBuf;

/// Naming shared with the generator, so the two cannot disagree.
#[path = "codegen/src/naming.rs"]
mod naming;

use naming::FIXTURES;

fn main() {
    let test_snapshots = std::env::var_os("CARGO_FEATURE_TEST_SNAPSHOTS").is_some();
    let root =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
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
            "#[path = {:?}]\npub mod {module};",
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
        "{modules}\n/// Every baked snapshot.\npub static SNAPSHOTS: &[BakedSnapshot] = &[\n{entries}];\n"
    );
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"))
        .join("baked_registry.rs");
    std::fs::write(out, registry).expect("write to OUT_DIR");
}
