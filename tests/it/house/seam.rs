//! One platform seam: what only Linux has is chosen in `host/platform.rs` (its Linux side
//! `platform/linux.rs`, its absence elsewhere `platform/other.rs`), so that a port starts
//! in one room. A target gate (`cfg(target_os …)`, `cfg(unix)`, `cfg!(windows)` …) stands
//! nowhere else but on the `mod` line of a Linux room (a whole file compiled on Linux
//! only, beside the data it serves) and in the few places `OUTSIDE` names; no module but
//! the Linux rooms and `platform/linux.rs` names a Linux room; both sides of the seam
//! offer the same names.

use std::collections::BTreeSet;
use std::path::Path;

use super::cycles::graph;
use super::{ROOT, rust_files, strip_literals};

/// The Linux rooms: each declared by its parent on a line after `#[cfg(target_os =
/// "linux")]`, reached only through `platform/linux.rs` and from each other.
const LINUX_ROOMS: &[&str] = &[
    "host::sandbox::bound::landlock",
    "host::sandbox::dev",
    "host::sandbox::enter",
    "host::sandbox::mount",
    "host::sandbox::scope",
    "host::sandbox::seccomp",
    "host::sandbox::walls",
];

/// Tests of the Linux rooms, declared after `#[cfg(all(test, target_os = "linux"))]`.
const LINUX_TESTS: &[&str] = &["host::sandbox::tests"];

/// Target gates outside `host/`, each with why it is not the seam's (ARCHITECTURE.md,
/// "Platform seam").
const OUTSIDE: &[(&str, &str)] = &[
    (
        "src/main.rs",
        "glibc's allocator setting (`mallopt`): the C library's, not a host mechanism",
    ),
    (
        "src/transport.rs",
        "SIGTERM and SIGINT, or Ctrl-C: both sides written, tokio's own split",
    ),
    (
        "src/server/completion_cache.rs",
        "a manifest's identity: unix metadata, or its size and time elsewhere",
    ),
    ("src/cli/tests.rs", "a test fixture's executable bit"),
];

/// Whether a line of code (comments and literals stripped) is a target gate.
fn is_target_gate(code: &str) -> bool {
    let words = [
        "target_os",
        "target_family",
        "target_env",
        "target_vendor",
        "unix",
        "windows",
    ];
    let gated = ["cfg(", "cfg!(", "cfg_attr("]
        .iter()
        .any(|c| code.contains(c));
    gated
        && code
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .any(|word| words.contains(&word))
}

/// The target gates of one file (module `module`, at `relative`) the seam does not
/// allow, and the Linux rooms and tests it declares as they should be.
fn gates(relative: &str, module: &str, text: &str) -> (Vec<String>, Vec<String>) {
    let mut wrong = Vec::new();
    let mut declared = Vec::new();
    let lines: Vec<String> = text.lines().map(strip_literals).collect();
    for (at, code) in lines.iter().enumerate() {
        if !is_target_gate(code) {
            continue;
        }
        let next = lines.get(at + 1).map_or("", |l| l.trim());
        let child = next
            .strip_prefix("pub(crate) ")
            .unwrap_or(next)
            .strip_prefix("mod ")
            .and_then(|rest| rest.strip_suffix(';'))
            .map(|name| format!("{module}::{name}"));
        let raw = text.lines().nth(at).unwrap_or("").trim();
        let room = raw == "#[cfg(target_os = \"linux\")]"
            && child.as_deref().is_some_and(|c| LINUX_ROOMS.contains(&c));
        let test = raw == "#[cfg(all(test, target_os = \"linux\"))]"
            && child.as_deref().is_some_and(|c| LINUX_TESTS.contains(&c));
        if room || test {
            declared.extend(child);
        } else {
            wrong.push(format!("{relative}:{}: {raw}", at + 1));
        }
    }
    (wrong, declared)
}

#[test]
fn target_gates_live_in_the_seam() {
    let root = Path::new(ROOT);
    let src = root.join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut wrong = Vec::new();
    let mut declared = BTreeSet::new();
    for file in &files {
        let relative = file
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let in_seam =
            relative == "src/host/platform.rs" || relative.starts_with("src/host/platform/");
        if in_seam || OUTSIDE.iter().any(|(path, _)| *path == relative) {
            continue;
        }
        let module = file
            .strip_prefix(&src)
            .unwrap()
            .with_extension("")
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join("::");
        let (bad, rooms) = gates(&relative, &module, &std::fs::read_to_string(file).unwrap());
        wrong.extend(bad);
        declared.extend(rooms);
    }
    assert!(
        wrong.is_empty(),
        "target gates outside the platform seam (reach the mechanism through \
         host::platform, or make it a Linux room):\n{}",
        wrong.join("\n")
    );
    let listed: BTreeSet<String> = LINUX_ROOMS
        .iter()
        .chain(LINUX_TESTS)
        .map(|r| (*r).to_owned())
        .collect();
    assert_eq!(
        declared, listed,
        "the Linux rooms declared are the ones listed"
    );
    for (path, _) in OUTSIDE {
        let text = std::fs::read_to_string(root.join(path)).unwrap();
        assert!(
            text.lines().map(strip_literals).any(|l| is_target_gate(&l)),
            "{path} has no target gate left: remove it from OUTSIDE"
        );
    }
}

#[test]
fn the_gate_scan_sees_gates_and_rooms() {
    let text = "#[cfg(target_os = \"linux\")]\nmod walls;\n#[cfg(target_os = \"linux\")]\n\
                fn f() {}\nfn g() { if cfg!(windows) {} }\n// #[cfg(unix)]\n\
                #[cfg(unix)]\nmod other;\n";
    let (wrong, declared) = gates("x.rs", "host::sandbox", text);
    assert_eq!(declared, ["host::sandbox::walls"]);
    assert_eq!(
        wrong,
        [
            "x.rs:3: #[cfg(target_os = \"linux\")]",
            "x.rs:5: fn g() { if cfg!(windows) {} }",
            "x.rs:7: #[cfg(unix)]",
        ]
    );
}

#[test]
fn linux_rooms_are_reached_through_the_seam() {
    let split = |m: &str| m.split("::").map(str::to_owned).collect::<Vec<_>>();
    let rooms: BTreeSet<Vec<String>> = LINUX_ROOMS.iter().map(|r| split(r)).collect();
    let tests: BTreeSet<Vec<String>> = LINUX_TESTS.iter().map(|r| split(r)).collect();
    let seam = split("host::platform::linux");
    let graph = graph();
    for room in &rooms {
        assert!(graph.contains_key(room), "{room:?} is no module of src/");
    }
    let mut wrong = Vec::new();
    for (module, targets) in &graph {
        if rooms.contains(module) || tests.contains(module) || *module == seam {
            continue;
        }
        for target in targets.iter().filter(|t| rooms.contains(*t)) {
            wrong.push(format!(
                "{} names the Linux room {}: reach it through host::platform",
                module.join("::"),
                target.join("::")
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    let reached: BTreeSet<&Vec<String>> = graph[&seam].iter().collect();
    assert!(
        rooms.iter().any(|r| reached.contains(r)),
        "platform/linux.rs reaches no Linux room: the scan is broken"
    );
}

/// The names a side of the seam offers: its top-level `pub(crate)` items and the last
/// name of each `pub(crate) use` (or its `as` name).
fn offered(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let code = strip_literals(line);
        let Some(rest) = code.strip_prefix("pub(crate) ") else {
            continue;
        };
        if let Some(path) = rest.strip_prefix("use ") {
            let mut whole = path.to_owned();
            while !whole.contains(';') {
                match lines.next() {
                    Some(more) => whole.push_str(&strip_literals(more)),
                    None => break,
                }
            }
            let whole = whole.split(';').next().unwrap_or("");
            let leaves = match whole.split_once('{') {
                Some((_, group)) => group.trim_end_matches('}').to_owned(),
                None => whole.to_owned(),
            };
            for leaf in leaves.split(',').map(str::trim).filter(|l| !l.is_empty()) {
                let name = leaf.rsplit(" as ").next().unwrap_or(leaf);
                names.insert(name.rsplit("::").next().unwrap_or(name).trim().to_owned());
            }
            continue;
        }
        for kind in ["fn ", "const ", "static ", "enum ", "struct ", "type "] {
            if let Some(item) = rest.strip_prefix(kind) {
                let name: String = item
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                names.insert(name);
            }
        }
    }
    names
}

#[test]
fn both_sides_of_the_seam_offer_the_same_names() {
    let read = |side: &str| {
        std::fs::read_to_string(Path::new(ROOT).join("src/host/platform").join(side)).unwrap()
    };
    let linux = offered(&read("linux.rs"));
    let other = offered(&read("other.rs"));
    assert!(
        linux.len() > 10 && linux.contains("install_sandbox") && linux.contains("SeccompFilter"),
        "the scan is broken: {linux:?}"
    );
    assert_eq!(
        linux, other,
        "platform/linux.rs and platform/other.rs offer different names"
    );
}
