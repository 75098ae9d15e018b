//! The house rules that keep `src/` navigable: the layer order in ARCHITECTURE.md holds
//! for every path in the code, not only for `use` lines.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// No import cycle inside a layer; the layer list names every module.
mod cycles;
/// One platform seam: target gates in `host/platform` only, Linux rooms reached through it.
mod seam;

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
    files_ending(dir, "rs", out);
}

fn files_ending(dir: &Path, extension: &str, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files_ending(&path, extension, out);
        } else if path.extension().is_some_and(|e| e == extension) {
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

/// One module convention: `foo.rs` next to a `foo/` folder, never `foo/mod.rs`.
#[test]
fn modules_are_files_not_mod_rs() {
    let root = Path::new(ROOT);
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    let wrong: Vec<String> = files
        .iter()
        .filter(|file| file.file_name().is_some_and(|n| n == "mod.rs"))
        .map(|file| {
            format!(
                "{}: move it to the folder's sibling `.rs` file",
                file.strip_prefix(root).unwrap().display()
            )
        })
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
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

/// Lines of a function starting at `lines[start]` (its signature line) through its
/// closing brace; `None` for a declaration without a body.
fn function_length(lines: &[&str], start: usize) -> Option<usize> {
    let mut depth = 0i32;
    let mut opened = false;
    for (offset, line) in lines[start..].iter().enumerate() {
        let code = strip_literals(line);
        for c in code.chars() {
            match c {
                '{' => {
                    depth += 1;
                    opened = true;
                }
                '}' => depth -= 1,
                _ => {}
            }
        }
        if opened && depth <= 0 {
            return Some(offset + 1);
        }
        if !opened && code.trim_end().ends_with(';') {
            return None;
        }
    }
    None
}

/// A line without its string and char literals and its `//` comment.
fn strip_literals(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                while let Some(d) = chars.next() {
                    match d {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        _ => {}
                    }
                }
            }
            '\'' if chars.clone().nth(1) == Some('\'') => {
                chars.next();
                chars.next();
            }
            '\'' if chars.peek() == Some(&'\\') => {
                // An escape (`'\''`, `'\n'`, `'\u{1f}'`): skip it, then up to the quote.
                chars.next();
                chars.next();
                for d in chars.by_ref() {
                    if d == '\'' {
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'/') => break,
            _ => out.push(c),
        }
    }
    out
}

/// `fn name` at the start of a line (after visibility and qualifiers).
fn function_name(line: &str) -> Option<&str> {
    let mut rest = line.trim_start();
    for qualifier in [
        "pub(crate) ",
        "pub(super) ",
        "pub ",
        "const ",
        "async ",
        "unsafe ",
        "extern \"C\" ",
    ] {
        rest = rest.strip_prefix(qualifier).unwrap_or(rest);
    }
    let rest = rest.strip_prefix("fn ")?;
    let end = rest.find(|c: char| !(c.is_alphanumeric() || c == '_'))?;
    Some(&rest[..end])
}

/// Files and functions stay small enough to read in one sitting: no file in `src/` over
/// 500 lines (inline tests count), no function over 80 lines. A function that is a table
/// says so with `// A table` on the line before its signature (or among its attributes).
#[test]
fn rooms_are_small() {
    const MAX_FILE: usize = 500;
    const MAX_FUNCTION: usize = 80;
    let mut files = Vec::new();
    rust_files(&Path::new(ROOT).join("src"), &mut files);
    files.sort();
    let mut too_big = Vec::new();
    let mut functions = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        if lines.len() > MAX_FILE {
            too_big.push(format!("{}: {} lines", file.display(), lines.len()));
        }
        for (at, line) in lines.iter().enumerate() {
            let Some(name) = function_name(line) else {
                continue;
            };
            functions += 1;
            let table = lines[..at]
                .iter()
                .rev()
                .take_while(|l| {
                    l.trim_start().starts_with("#[") || l.trim_start().starts_with("//")
                })
                .any(|l| l.trim_start().starts_with("// A table"));
            match function_length(&lines, at) {
                Some(n) if n > MAX_FUNCTION && !table => too_big.push(format!(
                    "{}:{}: fn {name}: {n} lines",
                    file.display(),
                    at + 1
                )),
                _ => {}
            }
        }
    }
    assert!(
        functions > 500,
        "only {functions} functions found: the scan is broken"
    );
    assert!(
        too_big.is_empty(),
        "too big to read in one sitting:\n{}",
        too_big.join("\n")
    );
}

#[test]
fn the_size_scan_measures_functions() {
    let text = "fn a() {\n    let s = \"}\";\n    if x { y('{', '\\'', '}') }\n}\nfn b();\n";
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(function_name(lines[0]), Some("a"));
    assert_eq!(function_length(&lines, 0), Some(4));
    assert_eq!(function_length(&lines, 4), None);
    assert_eq!(
        function_name("    pub(crate) async fn run_it(x: u8) {"),
        Some("run_it")
    );
}

/// Where a Python line starts: inside a bracket or a triple-quoted string of an earlier
/// line (a continuation), or as a statement of its own.
#[derive(Default)]
struct PythonScan {
    depth: i32,
    triple: Option<&'static str>,
}

impl PythonScan {
    /// Whether `line` starts a statement; then takes in its strings, comment and brackets.
    fn starts_statement(&mut self, line: &str) -> bool {
        let starts = self.depth == 0 && self.triple.is_none();
        let mut rest = line;
        while !rest.is_empty() {
            if let Some(quote) = self.triple {
                match rest.find(quote) {
                    Some(at) if !rest[..at].ends_with('\\') => {
                        rest = &rest[at + 3..];
                        self.triple = None;
                    }
                    Some(at) => rest = &rest[at + 3..],
                    None => break,
                }
                continue;
            }
            let Some(c) = rest.chars().next() else { break };
            if c == '#' {
                break;
            }
            if let Some(quote) = ["\"\"\"", "'''"].into_iter().find(|q| rest.starts_with(q)) {
                self.triple = Some(quote);
                rest = &rest[3..];
                continue;
            }
            match c {
                '(' | '[' | '{' => self.depth += 1,
                ')' | ']' | '}' => self.depth -= 1,
                '"' | '\'' => {
                    rest = skip_python_string(rest, c);
                    continue;
                }
                _ => {}
            }
            rest = &rest[c.len_utf8()..];
        }
        starts
    }
}

/// `rest` after the one-line string its first character (`quote`) opens.
fn skip_python_string(rest: &str, quote: char) -> &str {
    let mut chars = rest[1..].char_indices();
    while let Some((at, d)) = chars.next() {
        if d == '\\' {
            chars.next();
        } else if d == quote {
            return &rest[at + 2..];
        }
    }
    ""
}

/// A `def name` statement at the start of a line (after indentation and `async`).
fn python_function_name(line: &str) -> Option<&str> {
    let rest = line.trim_start();
    let rest = rest.strip_prefix("async ").unwrap_or(rest);
    let rest = rest.strip_prefix("def ")?;
    let end = rest.find(|c: char| !(c.is_alphanumeric() || c == '_'))?;
    Some(&rest[..end])
}

fn indentation(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// Lines of the Python function whose `def` is `lines[start]`, through its last line of
/// code (comments and blank lines after it do not count).
fn python_function_length(lines: &[&str], start: usize) -> usize {
    let own = indentation(lines[start]);
    let mut scan = PythonScan::default();
    scan.starts_statement(lines[start]);
    let mut last = start;
    for (at, line) in lines.iter().enumerate().skip(start + 1) {
        let code = !line.trim().is_empty() && !line.trim_start().starts_with('#');
        let statement = scan.starts_statement(line);
        if statement && code && indentation(line) <= own {
            break;
        }
        if code || !statement {
            last = at;
        }
    }
    last - start + 1
}

/// The Python in `src/` (the programs the binary embeds) is held to the same rooms: no
/// file over 500 lines, no function over 80 unless `# A table` on a line before its `def`
/// (or among its decorators) says it is one, and each file opens with a paragraph (a
/// comment or a docstring) saying what it owns.
#[test]
fn python_rooms_are_small() {
    const MAX_FILE: usize = 500;
    const MAX_FUNCTION: usize = 80;
    let mut files = Vec::new();
    files_ending(&Path::new(ROOT).join("src"), "py", &mut files);
    files.sort();
    let mut too_big = Vec::new();
    let mut functions = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        if lines.len() > MAX_FILE {
            too_big.push(format!("{}: {} lines", file.display(), lines.len()));
        }
        let opens = lines
            .first()
            .is_some_and(|l| l.starts_with('#') || l.starts_with("\"\"\""));
        if !opens {
            too_big.push(format!("{}: opens with no paragraph", file.display()));
        }
        let mut scan = PythonScan::default();
        for (at, line) in lines.iter().enumerate() {
            let statement = scan.starts_statement(line);
            let Some(name) = python_function_name(line).filter(|_| statement) else {
                continue;
            };
            functions += 1;
            let table = lines[..at]
                .iter()
                .map(|l| l.trim_start())
                .rev()
                .take_while(|l| l.starts_with('@') || l.starts_with('#'))
                .any(|l| l.starts_with("# A table"));
            let n = python_function_length(&lines, at);
            if n > MAX_FUNCTION && !table {
                too_big.push(format!(
                    "{}:{}: def {name}: {n} lines",
                    file.display(),
                    at + 1
                ));
            }
        }
    }
    assert!(
        functions > 60,
        "only {functions} Python functions found: the scan is broken"
    );
    assert!(
        too_big.is_empty(),
        "too big to read in one sitting:\n{}",
        too_big.join("\n")
    );
}

#[test]
fn the_size_scan_measures_python_functions() {
    let text = r#"def first(
    a,
    b="(",
):
    """A docstring

with a line at column 0, a ''' and a # that is not a comment.
    """
    x = {
        "key": ")",
    }
# a comment at column 0 inside the body
    def inner():
        return 'it\'s'

    return x  # )


# between
async def second(): pass
class Third:
    def method(self):
        return """
"""
"#;
    let lines: Vec<&str> = text.lines().collect();
    let mut scan = PythonScan::default();
    let found: Vec<(usize, &str, usize)> = lines
        .iter()
        .enumerate()
        .filter(|(_, line)| scan.starts_statement(line))
        .filter_map(|(at, line)| {
            python_function_name(line).map(|n| (at, n, python_function_length(&lines, at)))
        })
        .collect();
    assert_eq!(
        found,
        [
            (0, "first", 16),
            (12, "inner", 2),
            (19, "second", 1),
            (21, "method", 3)
        ]
    );
}
