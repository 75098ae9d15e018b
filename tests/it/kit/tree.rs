//! A directory's tree as a list of names, for tests that check what a run left there.

use std::path::Path;

/// Every path below `dir`, relative to it (files and directories), without following a
/// symlink.
pub(crate) fn walkdir_names(dir: &Path) -> Vec<String> {
    let mut names = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(at) = stack.pop() {
        for entry in std::fs::read_dir(&at).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            names.push(path.strip_prefix(dir).unwrap().display().to_string());
            if entry.file_type().unwrap().is_dir() {
                stack.push(path);
            }
        }
    }
    names
}
