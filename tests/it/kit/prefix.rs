//! A private copy of a conda prefix, for tests that change it (the conda under test is
//! never written to).

use std::path::{Path, PathBuf};
use std::process::Command;

/// A private copy of a conda prefix at `into`, its entry scripts pointed at the copy's
/// interpreter: the copy's `bin/conda`.
pub(crate) fn copy(prefix: &Path, into: &Path) -> PathBuf {
    let status = Command::new("cp")
        .arg("-a")
        .arg(prefix)
        .arg(into)
        .status()
        .expect("cp");
    assert!(status.success(), "copying {} failed", prefix.display());
    // Entry scripts name their interpreter by absolute path: point them at the copy.
    let old = format!("#!{}/", prefix.display());
    let new = format!("#!{}/", into.display());
    for entry in std::fs::read_dir(into.join("bin")).unwrap().flatten() {
        let path = entry.path();
        if path.is_symlink() || !path.is_file() {
            continue;
        }
        let Ok(bytes) = std::fs::read(&path) else {
            continue;
        };
        if bytes.starts_with(old.as_bytes()) {
            let mut text = new.as_bytes().to_vec();
            text.extend_from_slice(&bytes[old.len()..]);
            std::fs::write(&path, text).unwrap();
        }
    }
    into.join("bin/conda")
}
