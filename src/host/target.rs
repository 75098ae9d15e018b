//! The target conda, resolved once: its executable and what the `#!` line of its entry
//! script says, read from the file a single time when the server (or a one-shot command)
//! starts. Fast start, live discovery, the warm zygote and the stamp all take their
//! interpreter from here; the files the interpreter implies (prefix, site-packages) are
//! looked up when asked, so a change on disk is seen as before.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Bytes of the entry script read for its `#!` line (pip's `/bin/sh` trampoline puts the
/// interpreter on the second line).
const HEAD: u64 = 1024;
/// Bytes the kernel reads of a `#!` line (the zygote starts its interpreter as it would).
const KERNEL_HEAD: usize = 256;

/// The target conda: its resolved executable and its entry script's `#!` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conda {
    exe: PathBuf,
    /// The interpreter the `#!` line names (pip's trampoline and `env` followed).
    shebang: Option<PathBuf>,
    /// The `#!` line as the kernel reads it; `None` when the executable is not such a script.
    script: Option<Script>,
}

/// The interpreter (and its one optional argument) of a `#!` line, as the kernel reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Script {
    pub interpreter: PathBuf,
    pub argument: Option<OsString>,
}

/// Where a target conda's Python lives, found from files only.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Located {
    pub interpreter: PathBuf,
    pub prefix: PathBuf,
    /// `<prefix>/lib/python*/site-packages` (and `<prefix>/Lib/site-packages`).
    pub site_dirs: Vec<PathBuf>,
}

impl Conda {
    /// Read the `#!` line of `exe` (already resolved: absolute, symlink-free) once.
    pub fn resolve(exe: PathBuf) -> Conda {
        let head = read_head(&exe).unwrap_or_default();
        Conda {
            shebang: shebang_interpreter(&head),
            script: kernel_script(&head[..head.len().min(KERNEL_HEAD)]),
            exe,
        }
    }

    /// The resolved executable.
    pub fn exe(&self) -> &Path {
        &self.exe
    }

    /// The `#!` line as the kernel reads it, when the executable is such a script.
    pub fn script(&self) -> Option<&Script> {
        self.script.as_ref()
    }

    /// Interpreters worth trying before asking `conda info`, best first.
    pub fn interpreter_candidates(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        if let Some(python) = &self.shebang {
            out.push(python.clone());
        }
        if let Some(bin) = self.exe.parent() {
            let mut guesses = vec![bin.join("python"), bin.join("python3")];
            if let Some(prefix) = bin.parent() {
                guesses.push(prefix.join("bin").join("python"));
                guesses.push(prefix.join("python.exe"));
            }
            out.extend(guesses);
        }
        let mut seen = Vec::new();
        out.retain(|p| {
            let keep = p.is_file() && !seen.contains(p);
            seen.push(p.clone());
            keep
        });
        out
    }

    /// Find the target's interpreter and site-packages without running anything.
    pub fn locate(&self) -> Option<Located> {
        let interpreter = self.interpreter_candidates().into_iter().next()?;
        let prefix = interpreter.parent()?.parent()?.to_path_buf();
        let mut site_dirs = Vec::new();
        if let Ok(entries) = std::fs::read_dir(prefix.join("lib")) {
            let mut libs: Vec<PathBuf> = entries
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("python"))
                .map(|e| e.path().join("site-packages"))
                .filter(|p| p.is_dir())
                .collect();
            libs.sort();
            site_dirs.extend(libs);
        }
        let windows = prefix.join("Lib").join("site-packages");
        if windows.is_dir() {
            site_dirs.push(windows);
        }
        (!site_dirs.is_empty()).then_some(Located {
            interpreter,
            prefix,
            site_dirs,
        })
    }
}

fn read_head(script: &Path) -> Option<Vec<u8>> {
    use std::io::Read;
    let mut head = Vec::with_capacity(512);
    std::fs::File::open(script)
        .ok()?
        .take(HEAD)
        .read_to_end(&mut head)
        .ok()?;
    Some(head)
}

/// The interpreter named by a script's `#!` line (also pip's `/bin/sh` trampoline for long
/// paths, and `#!/usr/bin/env python`).
fn shebang_interpreter(head: &[u8]) -> Option<PathBuf> {
    let text = String::from_utf8_lossy(head);
    let mut lines = text.lines();
    let first = lines.next()?.strip_prefix("#!")?.trim();
    let mut words = first.split_whitespace();
    let program = words.next()?;
    if program.ends_with("/sh") {
        // pip: #!/bin/sh \n '''exec' "/long/path/python" "$0" "$@"
        let second = lines.next()?;
        let rest = second.strip_prefix("'''exec' ")?;
        let quoted = rest.strip_prefix('"')?;
        let end = quoted.find('"')?;
        return Some(PathBuf::from(&quoted[..end]));
    }
    if program.ends_with("/env") {
        let name = words.find(|w| !w.starts_with('-'))?;
        return which::which(name).ok();
    }
    Some(PathBuf::from(program))
}

/// The `#!` line of `head` (the first bytes one read returns) as the kernel reads it: an
/// absolute interpreter and one optional argument, the line ended by a newline.
fn kernel_script(head: &[u8]) -> Option<Script> {
    let line = head.split(|b| *b == b'\n').next().unwrap_or_default();
    let rest = line.strip_prefix(b"#!")?.trim_ascii();
    let (interpreter, argument) = match rest.iter().position(|b| *b == b' ' || *b == b'\t') {
        Some(at) => (&rest[..at], Some(rest[at..].trim_ascii())),
        None => (rest, None),
    };
    let interpreter = PathBuf::from(std::ffi::OsStr::from_bytes(interpreter));
    if !interpreter.is_absolute() || !head.contains(&b'\n') {
        return None;
    }
    let argument = argument
        .filter(|a| !a.is_empty())
        .map(|a| std::ffi::OsStr::from_bytes(a).to_owned());
    Some(Script {
        interpreter,
        argument,
    })
}

#[cfg(test)]
mod tests;
