//! The code generator as a library: rendering snapshots (pure) and checking the rendered
//! files. The `codegen` binary (`cargo run -p codegen`) is its command line; the tests use
//! it to render in memory.

pub mod render;

use std::path::{Path, PathBuf};

/// The repository's `snapshots/` directory.
pub fn snapshots_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("snapshots")
}

/// Every (generated file name, content) for the snapshots in `dir`, sorted.
pub fn render_dir(dir: &Path) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(dir)
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
            render::rust_file_name(stem),
            render::render(&snapshot, &json_file),
        ));
    }
    Ok(out)
}

/// Rendered files whose checked-in content differs: (file name, diff).
pub fn stale(dir: &Path) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for (name, content) in render_dir(dir)? {
        let current = std::fs::read_to_string(dir.join(&name)).unwrap_or_default();
        if current != content {
            out.push((name.clone(), diff(&current, &content, &name)));
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
        "--- snapshots/{name} (checked in)\n+++ snapshots/{name} (rendered)\n@@ line {} @@\n",
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
