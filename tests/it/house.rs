//! The house rules that keep `src/` navigable: the layer order in ARCHITECTURE.md holds
//! for every path in the code, not only for `use` lines.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The layers, lowest first, read from ARCHITECTURE.md's `layers` block.
fn layers() -> Vec<String> {
    let text = std::fs::read_to_string(Path::new(ROOT).join("ARCHITECTURE.md")).unwrap();
    let block = text
        .split("```layers\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("ARCHITECTURE.md has a ```layers block");
    block
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The layer a file belongs to: its top-level module under `src/` (`snapshots/*.rs` are
/// included into `baked`).
fn layer_of(path: &Path) -> String {
    let root = Path::new(ROOT);
    if path.starts_with(root.join("snapshots")) {
        return "baked".into();
    }
    let relative = path.strip_prefix(root.join("src")).unwrap();
    let first = relative.components().next().unwrap().as_os_str();
    first.to_str().unwrap().trim_end_matches(".rs").to_owned()
}

/// Every module a file names through `prefix` (`crate::x…`, `crate::{x, y…}`).
fn named_modules(text: &str, prefix: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let mut rest = line;
        while let Some(at) = rest.find(prefix) {
            let before = rest[..at].chars().next_back();
            rest = &rest[at + prefix.len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let group = rest
                .strip_prefix('{')
                .map(|g| g.split('}').next().unwrap_or(g));
            let heads: Vec<&str> = match group {
                Some(group) => group.split(',').collect(),
                None => vec![rest],
            };
            for head in heads {
                let name: String = head
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    found.push((number + 1, name));
                }
            }
        }
    }
    found
}

#[test]
fn no_module_uses_a_higher_layer() {
    let layers = layers();
    let rank: BTreeMap<&str, usize> = layers
        .iter()
        .enumerate()
        .map(|(i, name)| (name.as_str(), i))
        .collect();
    let mut files = Vec::new();
    rust_files(&Path::new(ROOT).join("src"), &mut files);
    rust_files(&Path::new(ROOT).join("snapshots"), &mut files);
    files.sort();
    let mut checked = 0;
    let mut wrong = Vec::new();
    for file in &files {
        let layer = layer_of(file);
        if layer == "lib" {
            continue;
        }
        let own = *rank
            .get(layer.as_str())
            .unwrap_or_else(|| panic!("{} is in no layer of ARCHITECTURE.md", file.display()));
        let text = std::fs::read_to_string(file).unwrap();
        let prefix = if layer == "main" { "ccm::" } else { "crate::" };
        for (line, name) in named_modules(&text, prefix) {
            checked += 1;
            match rank.get(name.as_str()) {
                Some(&used) if used <= own => {}
                Some(_) => wrong.push(format!("{}:{line}: {layer} uses {name}", file.display())),
                // `crate::IDENTITY` and other items of the crate root are below every layer.
                None if name.chars().next().is_some_and(char::is_uppercase) => {}
                None => wrong.push(format!("{}:{line}: unknown module {name}", file.display())),
            }
        }
    }
    assert!(
        checked > 100,
        "only {checked} paths found: the scan is broken"
    );
    assert!(
        wrong.is_empty(),
        "arrows that run up:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_scan_sees_grouped_and_inline_paths() {
    let text = "use crate::{tools::x, host};\nfn f() { crate::server::g(); }\n// [`crate::cli`]\n";
    let names: Vec<String> = named_modules(text, "crate::")
        .into_iter()
        .map(|(_, n)| n)
        .collect();
    assert_eq!(names, ["tools", "host", "server", "cli"]);
}
