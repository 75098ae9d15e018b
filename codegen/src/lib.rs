//! The code generator as a library: rendering snapshots (pure) and checking the rendered
//! files. The `codegen` binary (`cargo run -p codegen`) is its command line; the binary and
//! the freshness test share one path, [`ensure`].

pub mod docs;
pub mod naming;
pub mod render;

use std::path::{Path, PathBuf};

/// The repository's root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The repository's `snapshots/` directory.
pub fn snapshots_dir() -> PathBuf {
    repo_root().join("snapshots")
}

/// Every generated file (path relative to the repository root, content) rendered from the
/// snapshots in `root/snapshots`: one `snapshots/conda_<M>_<m>.rs` per snapshot, and
/// `docs/tools.md` from the reference snapshot.
pub fn render_all(root: &Path) -> Result<Vec<(String, String)>, String> {
    let dir = root.join("snapshots");
    let mut out = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("conda-") && n.ends_with(".json"))
        .collect();
    entries.sort();
    for json_file in entries {
        let text = std::fs::read_to_string(dir.join(&json_file))
            .map_err(|e| format!("{json_file}: {e}"))?;
        let snapshot = ccm::model::snapshot::Snapshot::from_text(&text)
            .map_err(|e| format!("{json_file}: {e}"))?;
        let stem = json_file.trim_end_matches(".json");
        out.push((
            format!("snapshots/{}", render::rust_file_name(stem)),
            render::render(&snapshot, &json_file),
        ));
        if json_file == docs::DOCS_SNAPSHOT {
            out.push((
                "docs/tools.md".to_owned(),
                docs::render(&snapshot, &json_file),
            ));
        }
    }
    Ok(out)
}

/// What [`ensure`] does about a generated file whose checked-in content is stale.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Rewrite it and succeed (`cargo run -p codegen`).
    Write,
    /// Print its diff, rewrite it, then fail naming the command to run (`--check`, the
    /// freshness test): a failing test leaves the fix in the work tree.
    Check,
}

/// Render every generated file and bring the checked-in ones up to date; in
/// [`Mode::Check`], fail when any was stale. Progress goes to stderr.
pub fn ensure(root: &Path, mode: Mode) -> Result<(), String> {
    let mut stale = Vec::new();
    for (path, content) in render_all(root)? {
        let file = root.join(&path);
        let current = std::fs::read_to_string(&file).unwrap_or_default();
        if current == content {
            eprintln!("Up-to-date: {path}");
            continue;
        }
        if mode == Mode::Check {
            eprintln!("{}", diff(&current, &content, &path));
        }
        std::fs::write(&file, content).map_err(|e| format!("{}: {e}", file.display()))?;
        eprintln!("Updated: {path}");
        stale.push(path);
    }
    if mode == Mode::Write || stale.is_empty() {
        return Ok(());
    }
    Err(format!(
        "{} was not up to date and has been rewritten (what `cargo run -p codegen` does): \
         commit the result",
        stale.join(", ")
    ))
}

/// A short line diff: the first differing lines of each side.
pub fn diff(old: &str, new: &str, name: &str) -> String {
    let old: Vec<&str> = old.lines().collect();
    let new: Vec<&str> = new.lines().collect();
    let first = old
        .iter()
        .zip(&new)
        .position(|(a, b)| a != b)
        .unwrap_or(old.len().min(new.len()));
    let mut out = format!(
        "--- {name} (checked in)\n+++ {name} (rendered)\n@@ line {} @@\n",
        first + 1
    );
    for line in old.iter().skip(first).take(6) {
        out.push_str(&format!("-{line}\n"));
    }
    for line in new.iter().skip(first).take(6) {
        out.push_str(&format!("+{line}\n"));
    }
    out
}
