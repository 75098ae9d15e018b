//! How snapshot files are named, written once for both readers: the generator (this
//! crate) and the build script that bakes its output (`build.rs` includes this file with
//! `#[path]`). Keep it dependency-free: the build script compiles it on its own.

/// Snapshots of the test fixture conda (`tests/fixtures/`): baked only for the tests (the
/// `test-snapshots` feature).
pub const FIXTURES: &[&str] = &["conda-0.99.json"];

/// The Rust module name of a snapshot stem (`conda-26.7` → `conda_26_7`).
pub fn module_name(stem: &str) -> String {
    stem.replace(['-', '.'], "_")
}

/// The file name of the rendered code for a snapshot stem (`conda-26.7` → `conda_26_7.rs`).
pub fn rust_file_name(stem: &str) -> String {
    format!("{}.rs", module_name(stem))
}
