//! The generated files (`snapshots/*.rs`, `docs/tools.md`) are what the generator makes of
//! the snapshots.

#[test]
fn rendered_snapshots_are_up_to_date() {
    let stale = codegen::stale(&codegen::repo_root()).expect("snapshots render");
    let report: Vec<String> = stale.iter().map(|(_, diff)| diff.clone()).collect();
    assert!(
        stale.is_empty(),
        "{}\ngenerated files are stale: run `cargo run -p codegen` and commit the result",
        report.join("\n")
    );
}

#[test]
fn rendering_is_deterministic() {
    let root = codegen::repo_root();
    assert_eq!(
        codegen::render_all(&root).unwrap(),
        codegen::render_all(&root).unwrap()
    );
}
