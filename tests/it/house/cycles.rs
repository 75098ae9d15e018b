//! No import cycles inside a layer, and a layer list that names every module: the layer
//! order keeps arrows from running up between layers; this keeps them from running in a
//! circle inside one, module by module (a file is one module: `tools/schema/describe.rs`
//! is `tools::schema::describe`).
//!
//! An arrow is any path in the code (comments and string literals left out, and a file's
//! tests) that names another module: `crate::…`, `super::…`, `self::…`, or a path
//! starting with a module the file declares (`mod warm;` then `warm::stop`). It points at
//! the deepest module the path names. A submodule naming the module that declares it (or
//! that module's ancestors) draws no arrow: in Rust a parent is its children's front door,
//! and its children share its types; a parent naming its child does draw one.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::{ROOT, layers, rust_files, strip_literals};

/// Cycles allowed for a while (none today: the house work removed the last ones in host/
/// and server/). Each is a circle of modules, the last one naming the first. Its arrows
/// are allowed; any other arrow that lies on a cycle fails the test, and so does an entry
/// whose arrows are gone.
const KNOWN_CYCLES: &[(&str, &[&str])] = &[];

/// The module a file under `src/` is (`None` for test files).
fn module_of(relative: &Path) -> Option<Vec<String>> {
    let mut parts: Vec<String> = relative
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.iter().any(|p| p == "tests") {
        return None;
    }
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    Some(parts)
}

/// A file's code: no comments, no string literals, no inline `#[cfg(test)] mod tests`.
fn code_of(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        if line.trim() == "#[cfg(test)]"
            && lines
                .peek()
                .is_some_and(|next| next.trim_start().starts_with("mod tests"))
        {
            break;
        }
        out.push_str(&strip_literals(line));
        out.push('\n');
    }
    out
}

/// Every path `text` names after `at` (the end of a `crate::`, `super::` … prefix):
/// `a::b`, and each leaf of a group `a::{b, c::{d, e}}`.
fn paths_at(text: &str, at: usize, out: &mut Vec<Vec<String>>) -> usize {
    let mut base = Vec::new();
    paths_from(&text[at..], &mut base, out)
}

fn paths_from(text: &str, base: &mut Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
    let depth = base.len();
    let mut i = 0;
    loop {
        let rest = &text[i..];
        let skipped = rest.len() - rest.trim_start().len();
        i += skipped;
        let rest = &text[i..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut j = 0;
            loop {
                j += paths_from(&group[j..], base, out);
                let after = group[j..].trim_start();
                j = group.len() - after.len();
                if let Some(more) = after.strip_prefix(',') {
                    j = group.len() - more.len();
                } else {
                    j += usize::from(after.starts_with('}'));
                    break;
                }
            }
            i += 1 + j;
            break;
        }
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() {
            break;
        }
        i += name.len();
        base.push(name);
        match text[i..].strip_prefix("::") {
            Some(_) => i += 2,
            None => break,
        }
    }
    out.push(base.clone());
    base.truncate(depth);
    i
}

/// Whether `text[at..]` starts a path (not the tail of `x::name` or of an identifier).
fn starts_path(text: &str, at: usize) -> bool {
    !text[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':')
}

/// The modules `code` (of module `own`) names, each resolved to the deepest known module.
fn arrows(own: &[String], code: &str, known: &BTreeSet<Vec<String>>) -> BTreeSet<Vec<String>> {
    let mut found = Vec::new();
    let children: Vec<String> = code
        .lines()
        .filter_map(|line| {
            let line = line.trim();
            let rest = line.split("mod ").nth(1)?;
            let declared = line.starts_with("mod ") || line.starts_with("pub");
            let name = rest.strip_suffix(';')?;
            (declared && !name.contains(' ')).then(|| name.to_owned())
        })
        .collect();
    let mut prefixes: Vec<(String, Vec<String>)> = vec![
        ("crate::".into(), Vec::new()),
        ("self::".into(), own.to_vec()),
    ];
    for up in 1..=own.len() {
        let base = own[..own.len() - up].to_vec();
        prefixes.push(("super::".repeat(up), base));
    }
    for child in &children {
        let mut base = own.to_vec();
        base.push(child.clone());
        prefixes.push((format!("{child}::"), base));
    }
    for (prefix, base) in &prefixes {
        for (at, _) in code.match_indices(prefix.as_str()) {
            if !starts_path(code, at) || code[at + prefix.len()..].starts_with("super::") {
                continue;
            }
            let mut named = Vec::new();
            paths_at(code, at + prefix.len(), &mut named);
            for tail in named {
                let mut path = base.clone();
                path.extend(tail);
                found.push(path);
            }
        }
    }
    found
        .into_iter()
        .filter_map(|mut path| {
            while !known.contains(&path) {
                path.pop()?;
            }
            Some(path)
        })
        // A module's own path and its ancestors' (a submodule using the items of the
        // module that declares it) are no arrows: the parent is its children's front door.
        .filter(|target| !own.starts_with(target))
        .collect()
}

/// Every module of `src/` (its file's path) and the modules its code names.
pub(super) fn graph() -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let src = Path::new(ROOT).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let modules: BTreeMap<Vec<String>, String> = files
        .iter()
        .filter_map(|file| {
            let module = module_of(file.strip_prefix(&src).unwrap())?;
            Some((module, code_of(&std::fs::read_to_string(file).unwrap())))
        })
        .collect();
    let known: BTreeSet<Vec<String>> = modules.keys().cloned().collect();
    modules
        .iter()
        .map(|(module, code)| (module.clone(), arrows(module, code, &known)))
        .collect()
}

/// A path of arrows from `from` to `to` inside one layer, if there is one.
fn route(
    graph: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
    from: &[String],
    to: &[String],
) -> Option<Vec<Vec<String>>> {
    let mut came: BTreeMap<Vec<String>, Vec<String>> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([from.to_vec()]);
    while let Some(here) = queue.pop_front() {
        if here == to {
            let mut path = vec![here];
            while let Some(back) = came.get(path.last().unwrap()) {
                path.push(back.clone());
            }
            path.reverse();
            return Some(path);
        }
        for next in graph.get(&here).into_iter().flatten() {
            if next[0] == from[0] && !came.contains_key(next) && next != from {
                came.insert(next.clone(), here.clone());
                queue.push_back(next.clone());
            }
        }
    }
    None
}

fn name(module: &[String]) -> String {
    module.join("::")
}

/// Every arrow inside a layer that lies on a cycle and is not a known cycle's, each with
/// its cycle; then every known cycle whose arrows are gone.
pub(super) fn problems(graph: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Vec<String> {
    let split = |m: &str| m.split("::").map(str::to_owned).collect::<Vec<_>>();
    let mut allowed = BTreeSet::new();
    let mut out = Vec::new();
    for (label, circle) in KNOWN_CYCLES {
        let arrows: Vec<(Vec<String>, Vec<String>)> = (0..circle.len())
            .map(|i| (split(circle[i]), split(circle[(i + 1) % circle.len()])))
            .collect();
        let present = arrows
            .iter()
            .all(|(from, to)| graph.get(from).is_some_and(|t| t.contains(to)));
        if !present {
            out.push(format!(
                "known cycle `{label}` is gone: remove it from KNOWN_CYCLES"
            ));
        }
        allowed.extend(arrows);
    }
    for (from, targets) in graph {
        for to in targets.iter().filter(|to| to[0] == from[0]) {
            if allowed.contains(&(from.clone(), to.clone())) {
                continue;
            }
            if let Some(back) = route(graph, to, from) {
                let circle: Vec<String> = std::iter::once(from)
                    .chain(back.iter())
                    .map(|m| name(m))
                    .collect();
                out.push(format!("cycle in {}: {}", from[0], circle.join(" → ")));
            }
        }
    }
    out
}

#[test]
fn no_cycle_inside_a_layer() {
    let graph = graph();
    let arrows: usize = graph.values().map(BTreeSet::len).sum();
    assert!(
        arrows > 150,
        "only {arrows} arrows found: the scan is broken"
    );
    let problems = problems(&graph);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_cycle_scan_sees_paths_groups_and_children() {
    let known: BTreeSet<Vec<String>> = [
        "host",
        "host::exec",
        "host::exec::warm",
        "host::stamp",
        "host::discovery",
        "host::discovery::helper",
    ]
    .iter()
    .map(|m| m.split("::").map(str::to_owned).collect())
    .collect();
    let own: Vec<String> = vec!["host".into(), "exec".into()];
    let code = code_of(
        "mod warm;\nuse crate::host::{\n    stamp::{self, locate},\n    discovery::helper::run,\n};\n\
         fn f() { warm::stop(); super::Thing; super::super::host::discovery::X; x::warm::y; \"crate::host::nope\"; }\n\
         // crate::host::discovery\n#[cfg(test)]\nmod tests {\n    use crate::host::stamp;\n}\n",
    );
    let found: Vec<String> = arrows(&own, &code, &known)
        .iter()
        .map(|m| name(m))
        .collect();
    assert_eq!(
        found,
        [
            "host::discovery",
            "host::discovery::helper",
            "host::exec::warm",
            "host::stamp"
        ]
    );
}

#[test]
fn an_injected_cycle_fails() {
    let mut graph = graph();
    // tools::layout is low in tools/: an arrow from it back to toolset closes a circle.
    let layout = vec!["tools".to_owned(), "layout".to_owned()];
    let toolset = vec!["tools".to_owned(), "toolset".to_owned()];
    graph.get_mut(&layout).unwrap().insert(toolset);
    let problems = problems(&graph);
    let closed = "cycle in tools: tools::layout → tools::toolset → tools::layout".to_owned();
    assert!(problems.contains(&closed), "{problems:?}");
    // Every arrow on a circle through the new one is named, each with its circle.
    assert!(
        problems
            .iter()
            .all(|p| p.starts_with("cycle in tools: ")
                && p.contains("tools::layout → tools::toolset")),
        "{problems:?}"
    );
}

/// The modules a layer's line in ARCHITECTURE.md names after its last `: ` (`tools  pure
/// tool surface: layout, schema, …`).
fn listed_modules(line: &str) -> BTreeSet<String> {
    line.rsplit_once(": ")
        .map(|(_, list)| list.split(',').map(|m| m.trim().to_owned()).collect())
        .unwrap_or_default()
}

/// The modules a layer folder holds (files and folders, not `mod.rs` or tests).
fn folder_modules(folder: &Path) -> BTreeSet<String> {
    let Ok(entries) = std::fs::read_dir(folder) else {
        return BTreeSet::new();
    };
    entries
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_dir() || path.extension().is_some_and(|e| e == "rs"))
        .map(|path| path.file_stem().unwrap().to_string_lossy().into_owned())
        .filter(|stem| stem != "mod" && stem != "tests")
        .collect()
}

/// What is wrong with the layer list: a folder module it does not name, a name with no
/// module.
fn list_problems(block: &str, src: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for line in block.lines().filter(|l| !l.trim().is_empty()) {
        let layer = line.split_whitespace().next().unwrap();
        let folder = folder_modules(&src.join(layer));
        let listed = listed_modules(line);
        for missing in folder.difference(&listed) {
            out.push(format!("{layer}/{missing} is not in its layer's list"));
        }
        if !folder.is_empty() {
            for stray in listed.difference(&folder) {
                out.push(format!("{layer}: `{stray}` names no module"));
            }
        }
    }
    out
}

fn layers_block() -> String {
    let text = std::fs::read_to_string(Path::new(ROOT).join("ARCHITECTURE.md")).unwrap();
    let block = text.split("```layers\n").nth(1).unwrap();
    block.split("```").next().unwrap().to_owned()
}

#[test]
fn the_layer_list_names_every_module() {
    let block = layers_block();
    assert_eq!(
        block.lines().filter(|l| !l.trim().is_empty()).count(),
        layers().len()
    );
    let problems = list_problems(&block, &Path::new(ROOT).join("src"));
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn a_module_missing_from_the_layer_list_fails() {
    let block = layers_block();
    let src = Path::new(ROOT).join("src");
    let tools = block.lines().find(|l| l.starts_with("tools ")).unwrap();
    let without = tools.replace(", suggest", "");
    assert_ne!(without, tools, "the tools line names suggest");
    let problems = list_problems(&block.replace(tools, &without), &src);
    assert_eq!(problems, ["tools/suggest is not in its layer's list"]);
}
