//! The generated files (`snapshots/*.rs`, `docs/tools.md`) are what the generator makes of
//! the snapshots.

use codegen::Mode;

#[test]
fn rendered_snapshots_are_up_to_date() {
    if let Err(message) = codegen::ensure(&codegen::repo_root(), Mode::Check) {
        panic!("{message}");
    }
}

/// Check rewrites a stale file and fails naming the command; Write rewrites and succeeds.
#[test]
fn check_rewrites_a_stale_file_then_fails() {
    let root = tempfile::tempdir().unwrap();
    let snapshots = root.path().join("snapshots");
    std::fs::create_dir(&snapshots).unwrap();
    std::fs::copy(
        codegen::snapshots_dir().join("conda-0.99.json"),
        snapshots.join("conda-0.99.json"),
    )
    .unwrap();
    let rendered = snapshots.join("conda_0_99.rs");
    let expected = std::fs::read_to_string(codegen::snapshots_dir().join("conda_0_99.rs")).unwrap();

    std::fs::write(&rendered, "// stale\n").unwrap();
    let error = codegen::ensure(root.path(), Mode::Check).unwrap_err();
    assert!(error.contains("snapshots/conda_0_99.rs"), "{error}");
    assert!(error.contains("cargo run -p codegen"), "{error}");
    assert_eq!(std::fs::read_to_string(&rendered).unwrap(), expected);
    codegen::ensure(root.path(), Mode::Check).expect("fresh after the rewrite");

    std::fs::write(&rendered, "// stale\n").unwrap();
    codegen::ensure(root.path(), Mode::Write).expect("write succeeds");
    assert_eq!(std::fs::read_to_string(&rendered).unwrap(), expected);
}

#[test]
fn rendering_is_deterministic() {
    let root = codegen::repo_root();
    assert_eq!(
        codegen::render_all(&root).unwrap(),
        codegen::render_all(&root).unwrap()
    );
}
