//! Path confinement (`--allow-paths`): every path an argv names must lie inside the
//! allowed directories once symlinks are resolved.
//!
//! Which tokens are paths is decided lexically, without knowing the option: a token (or
//! the value part of `--opt=value` and `-Xvalue`) is a path when it is absolute, starts
//! with `~`, contains `/` or is `..`, or is a `file://` URL; other URLs are not paths.
//! A bare word (`env.yml`, `numpy`) that names an entry of the working directory is a
//! path too, judged where it leads (a symlink there may lead anywhere); one that names
//! nothing there would be created inside the working directory, which is judged itself. Resolution follows conda: `~` is the server's HOME (children
//! inherit it), relative paths start at the call's working directory, then the longest
//! existing ancestor is canonicalized (symlinks, `..`) and the rest appended lexically, so
//! a path that does not exist yet is judged by where it would be created.
//!
//! Reads the file system (canonicalization); pure otherwise.

use std::path::{Component, Path, PathBuf};

/// The directories calls may name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Confinement {
    /// Canonical directories; empty = unrestricted.
    allowed: Vec<PathBuf>,
}

/// A path in the argv lies outside every allowed directory (never says which).
#[derive(Debug, PartialEq, Eq)]
pub struct Outside;

impl Confinement {
    /// No restriction.
    pub fn unrestricted() -> Confinement {
        Confinement::default()
    }

    /// Confine to these directories (canonicalized; ones that do not exist are skipped).
    pub fn to(dirs: &[PathBuf]) -> Confinement {
        let mut allowed: Vec<PathBuf> = dirs
            .iter()
            .filter_map(|d| std::fs::canonicalize(d).ok())
            .collect();
        allowed.sort();
        allowed.dedup();
        if allowed.is_empty() {
            // Nothing exists to allow: allow nothing rather than everything.
            allowed.push(PathBuf::from("/nonexistent-ccm-scope"));
        }
        Confinement { allowed }
    }

    /// The default scope over HTTP: the server's working directory, conda's root prefix
    /// (which holds its `envs/` and `pkgs/`) and the user's `~/.conda/envs`.
    pub fn default_scope(root_prefix: Option<&Path>) -> Confinement {
        let mut dirs = Vec::new();
        if let Ok(cwd) = std::env::current_dir() {
            dirs.push(cwd);
        }
        dirs.extend(root_prefix.map(Path::to_path_buf));
        if let Some(home) = std::env::var_os("HOME") {
            dirs.push(PathBuf::from(home).join(".conda").join("envs"));
        }
        Confinement::to(&dirs)
    }

    pub fn is_unrestricted(&self) -> bool {
        self.allowed.is_empty()
    }

    /// The allowed directories (for capabilities).
    pub fn dirs(&self) -> &[PathBuf] {
        &self.allowed
    }

    /// Check every path an argv names, relative paths from `cwd`.
    pub fn check(&self, argv: &[String], cwd: &Path, home: Option<&Path>) -> Result<(), Outside> {
        if self.is_unrestricted() {
            return Ok(());
        }
        for value in argv.iter().flat_map(|t| values(t)) {
            // conda expands `$VAR`/`${VAR}` in paths (conda/common/path/__init__.py:105
            // `expandvars`), so the text alone cannot say where they point.
            if value.contains('$') {
                return Err(Outside);
            }
            for piece in std::iter::once(value).chain(pieces(value)) {
                let Some(path) = path_like(piece, home).or_else(|| existing_word(piece, cwd))
                else {
                    continue;
                };
                let resolved = resolve(&cwd.join(path));
                if !self.allowed.iter().any(|dir| resolved.starts_with(dir)) {
                    return Err(Outside);
                }
            }
        }
        Ok(())
    }
}

/// Whether any value of the argv, read as a path (bare words too, relative ones from
/// `cwd`, `$VAR` expanded from the server's environment, which children inherit), is a
/// file `is_target` accepts.
pub fn names_file(
    argv: &[String],
    cwd: &Path,
    home: Option<&Path>,
    is_target: impl Fn(&Path) -> bool,
) -> bool {
    argv.iter().flat_map(|t| values(t)).any(|value| {
        let expanded = expand_vars(value);
        std::iter::once(expanded.as_str())
            .chain(pieces(&expanded))
            .any(|piece| {
                let path = path_like(piece, home).unwrap_or_else(|| PathBuf::from(piece));
                is_target(&cwd.join(path))
            })
    })
}

/// Whether a value of the argv starts with `~user` (another user's home, which conda
/// expands and the server does not resolve).
pub fn names_other_home(argv: &[String]) -> bool {
    argv.iter().flat_map(|t| values(t)).any(|value| {
        std::iter::once(value).chain(pieces(value)).any(|piece| {
            piece
                .strip_prefix('~')
                .is_some_and(|rest| !rest.is_empty() && !rest.starts_with('/'))
        })
    })
}

/// `$VAR` and `${VAR}` replaced by the server's environment (unset: empty), as conda's
/// `expandvars` does for paths.
fn expand_vars(value: &str) -> String {
    if !value.contains('$') {
        return value.to_owned();
    }
    let mut out = String::new();
    let mut rest = value;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let (name, tail) = match after.strip_prefix('{') {
            Some(inner) => match inner.find('}') {
                Some(end) => (&inner[..end], &inner[end + 1..]),
                None => ("", after),
            },
            None => {
                let end = after
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(after.len());
                (&after[..end], &after[end..])
            }
        };
        if name.is_empty() {
            out.push('$');
        } else if let Some(v) = std::env::var_os(name) {
            out.push_str(&v.to_string_lossy());
        }
        rest = tail;
    }
    out.push_str(rest);
    out
}

/// The parts of a token that can carry a path: the token, the value after the first
/// `=` of an option, and the attached value of a short option (`-p/abs`).
fn values(token: &str) -> Vec<&str> {
    if !token.starts_with('-') {
        return vec![token];
    }
    let mut out = Vec::new();
    if let Some((_, value)) = token.split_once('=') {
        out.push(value);
    }
    if !token.starts_with("--") && token.len() > 2 && token.is_char_boundary(2) {
        out.push(&token[2..]);
    }
    out
}

/// The parts of a value that other syntaxes can embed a path in: match-spec brackets
/// (`pkg[channel=/abs]`, `[url=file:///x]`, conda/models/match_spec.py:322), channel
/// prefixes (`/abs::pkg`), lists and quotes.
fn pieces(value: &str) -> impl Iterator<Item = &str> {
    value
        .split("::")
        .flat_map(|part| part.split(['[', ']', ',', '=', '\'', '"', '(', ')', ' ', '\t']))
        .filter(|piece| !piece.is_empty())
}

/// The path a value names, if it names one.
fn path_like(value: &str, home: Option<&Path>) -> Option<PathBuf> {
    if let Some(rest) = value.strip_prefix("file://") {
        // file:///x, and a host before the path (conda's url_to_path takes localhost,
        // 127.0.0.1 and ::1): the path is what follows the host, percent-decoded.
        let path = match rest.find('/') {
            Some(at) => &rest[at..],
            None => "/",
        };
        return Some(PathBuf::from(percent_decode(path)));
    }
    if value.contains("://") {
        return None;
    }
    if let Some(rest) = value.strip_prefix('~') {
        // `~user` forms are refused by resolving them under a root that is never allowed.
        return Some(
            match (
                rest.strip_prefix('/').or((rest.is_empty()).then_some("")),
                home,
            ) {
                (Some(rest), Some(home)) => home.join(rest),
                _ => PathBuf::from("/nonexistent-ccm-home").join(rest),
            },
        );
    }
    let pathy = value.starts_with('/') || value.contains('/') || value == "..";
    pathy.then(|| PathBuf::from(value))
}

/// A bare word (`rc`, `envlink`, `.x`, `pkg.conda`) that names something in the working
/// directory: conda reads many bare words as paths (`config --file rc`, `create -p env`,
/// `compare env.yml`, a package file), and an entry there — a symlink above all — may lead
/// anywhere, so it is judged where it leads. A word that names nothing there would be
/// created in the working directory, which is judged itself.
fn existing_word(word: &str, cwd: &Path) -> Option<PathBuf> {
    if word.contains("://") {
        return None;
    }
    std::fs::symlink_metadata(cwd.join(word))
        .is_ok()
        .then(|| PathBuf::from(word))
}

/// `%XX` escapes decoded (invalid ones kept as they are).
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Canonicalize the longest existing ancestor, then append the rest lexically.
fn resolve(path: &Path) -> PathBuf {
    resolve_at(path, 0)
}

/// Symlinks followed in one resolution at most (the kernel's `MAXSYMLINKS`).
const MAX_LINKS: u32 = 40;

fn resolve_at(path: &Path, links: u32) -> PathBuf {
    let mut lexical = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                // Resolve what exists so far first, so `link/..` follows the link.
                lexical = canonical_prefix(&lexical, links);
                lexical.pop();
            }
            Component::CurDir => {}
            other => lexical.push(other.as_os_str()),
        }
    }
    canonical_prefix(&lexical, links)
}

fn canonical_prefix(path: &Path, links: u32) -> PathBuf {
    let mut existing = path.to_path_buf();
    let mut rest = Vec::new();
    loop {
        let found = match std::fs::canonicalize(&existing) {
            Ok(canonical) => Some(canonical),
            // A dangling symlink leads where its target would be created (conda's open
            // follows it): resolved from the link's directory, as the kernel does.
            Err(_) => std::fs::read_link(&existing).ok().map(|target| {
                if links >= MAX_LINKS {
                    return PathBuf::from("/nonexistent-ccm-symlink-loop");
                }
                let parent = existing.parent().unwrap_or(Path::new("/"));
                resolve_at(&parent.join(target), links + 1)
            }),
        };
        if let Some(mut out) = found {
            for part in rest.iter().rev() {
                out.push(part);
            }
            return out;
        }
        match (
            existing.file_name().map(|n| n.to_owned()),
            existing.parent(),
        ) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                existing = parent.to_path_buf();
            }
            _ => return path.to_path_buf(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(tokens: &[&str]) -> Vec<String> {
        tokens.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn paths_outside_are_refused_however_spelled() {
        let root = tempfile::tempdir().unwrap();
        let allowed = root.path().join("work");
        let outside = root.path().join("secret");
        std::fs::create_dir_all(&allowed).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, allowed.join("link")).unwrap();
        // Bare words the agent's file tools planted in the working directory.
        for word in ["rc", "envlink", "envfile.yml", ".hidden"] {
            std::os::unix::fs::symlink(outside.join(word), allowed.join(word)).unwrap();
        }
        // Dangling links that lead outside through another dangling link, and a loop.
        std::os::unix::fs::symlink("hop", allowed.join("twice")).unwrap();
        std::os::unix::fs::symlink(outside.join("new"), allowed.join("hop")).unwrap();
        std::os::unix::fs::symlink("loop-b", allowed.join("loop-a")).unwrap();
        std::os::unix::fs::symlink("loop-a", allowed.join("loop-b")).unwrap();
        std::fs::write(allowed.join("env.yml"), "name: x\n").unwrap();
        let scope = Confinement::to(std::slice::from_ref(&allowed));
        let home = root.path().join("home");
        let ok = |tokens: &[&str]| scope.check(&argv(tokens), &allowed, Some(&home));
        for inside in [
            &["compare", "env.yml"][..],
            &["install", "numpy", "conda-forge::scipy"],
            &["create", "-p", "./envs/new", "--file=specs/a.txt"],
            &["install", "-c", "https://conda.anaconda.org/x", "numpy"],
            &["list", "-p", "new/../sub"],
            &["search", "x[channel=./chan]", "numpy>=1.26,<2"],
        ] {
            assert_eq!(ok(inside), Ok(()), "{inside:?}");
        }
        let secret = outside.join("f").to_str().unwrap().to_owned();
        let file_url = format!("file://{}", outside.display());
        let p_attached = format!("-p{}", outside.display());
        let opt_eq = format!("--file={secret}");
        for bad in [
            &["compare", secret.as_str()][..],
            &["compare", "/etc/shadow"],
            &["compare", "/proc/self/environ"],
            &["compare", "link/f"],
            &["compare", "./link/../link/f"],
            &["compare", "../secret/f"],
            &["compare", "sub/../../secret"],
            &["compare", ".."],
            &["install", "-c", file_url.as_str(), "x"],
            &["list", p_attached.as_str()],
            &["export", opt_eq.as_str()],
            &["compare", "~/x"],
            &["compare", "~root/x"],
            &["compare", "$HOME/x"],
            &["list", "-p", "${OLDPWD}"],
            &["list", "-p$HOME"],
            &["search", "x[channel=/etc]"],
            &["search", "x[channel=../../secret]"],
            &["search", "x[url='file:///etc/x.conda']"],
            &["search", "x[channel=\"/etc\"]"],
            &["config", "--file", "rc"],
            &["config", "--file=rc"],
            &["create", "-p", "envlink"],
            &["create", "-penvlink"],
            &["compare", "envfile.yml"],
            &["install", ".hidden"],
            &["config", "--file", "twice"],
            &["export", "--file=twice/sub/x.yml"],
            &["config", "--file", "loop-a"],
        ] {
            assert_eq!(ok(bad), Err(Outside), "{bad:?}");
        }
        assert_eq!(
            Confinement::unrestricted().check(&argv(&["compare", "/etc/shadow"]), &allowed, None),
            Ok(())
        );
    }

    #[test]
    fn the_http_default_scope_is_the_working_directory_prefix_and_user_envs() {
        let prefix = tempfile::tempdir().unwrap();
        let scope = Confinement::default_scope(Some(prefix.path()));
        let cwd = std::fs::canonicalize(std::env::current_dir().unwrap()).unwrap();
        assert!(scope.dirs().contains(&cwd));
        assert!(
            scope
                .dirs()
                .contains(&std::fs::canonicalize(prefix.path()).unwrap())
        );
        let argv = argv(&["compare", "/proc/self/environ"]);
        assert_eq!(scope.check(&argv, &cwd, None), Err(Outside));
    }
}
