//! The code generator as a library: rendering snapshots (pure) and checking the rendered
//! files. The `codegen` binary (`cargo run -p codegen`) is its command line; the tests use
//! it to render in memory.

pub mod docs;
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
        let snapshot =
            ccm::snapshot::Snapshot::from_text(&text).map_err(|e| format!("{json_file}: {e}"))?;
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

/// Generated files whose checked-in content differs: (path, diff).
pub fn stale(root: &Path) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for (path, content) in render_all(root)? {
        let current = std::fs::read_to_string(root.join(&path)).unwrap_or_default();
        if current != content {
            out.push((path.clone(), diff(&current, &content, &path)));
        }
    }
    Ok(out)
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
