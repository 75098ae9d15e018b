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
//! A hard link is a name, not a place: its inode may also be named from outside every
//! allowed directory, and conda opening it writes (or reads) that file. So a path that
//! leads to a non-directory with more than one link is refused as one outside, and so is
//! a directory whose files conda opens in place ([`IN_PLACE`]: a prefix's history,
//! state, `.condarc`…) when one of them has more links or leads outside.
//!
//! Reads the file system (canonicalization, link counts); pure otherwise.

use std::path::{Component, Path, PathBuf};

use vars::expand_vars;

mod links;
pub(crate) use links::{IN_PLACE, foreign_links, linked, linked_in_place};

/// The directories calls may name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Confinement {
    /// Canonical directories; empty = unrestricted.
    allowed: Vec<PathBuf>,
    /// Conda's root prefix (canonical) when it is in the scope by default (over HTTP
    /// without `--allow-paths`) rather than by the operator's word.
    default_root: Option<PathBuf>,
    /// The user's home directory (canonical) under the default scope.
    default_home: Option<PathBuf>,
}

/// A path in the argv lies outside every allowed directory (never says which).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Outside;

impl Confinement {
    /// No restriction.
    pub(crate) fn unrestricted() -> Confinement {
        Confinement::default()
    }

    /// Confine to these directories (canonicalized; ones that do not exist are skipped).
    pub(crate) fn to(dirs: &[PathBuf]) -> Confinement {
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
        Confinement {
            allowed,
            default_root: None,
            default_home: None,
        }
    }

    /// The default scope over HTTP: the server's working directory, conda's root prefix
    /// (which holds its `envs/` and `pkgs/`) and the user's `~/.conda/envs`.
    pub(crate) fn default_scope(root_prefix: Option<&Path>) -> Confinement {
        let mut dirs = Vec::new();
        if let Ok(cwd) = std::env::current_dir() {
            dirs.push(cwd);
        }
        dirs.extend(root_prefix.map(Path::to_path_buf));
        if let Some(home) = std::env::var_os("HOME") {
            dirs.push(PathBuf::from(home).join(".conda").join("envs"));
        }
        Confinement {
            default_root: root_prefix.and_then(|r| std::fs::canonicalize(r).ok()),
            default_home: std::env::var_os("HOME").and_then(|h| std::fs::canonicalize(h).ok()),
            ..Confinement::to(&dirs)
        }
    }

    pub(crate) fn is_unrestricted(&self) -> bool {
        self.allowed.is_empty()
    }

    /// The home directory when the scope is the default one (a bounded write never writes
    /// it whole: [`Confinement::write_dirs`]).
    pub(crate) fn default_home(&self) -> Option<&Path> {
        self.default_home.as_deref()
    }

    /// The allowed directories (for capabilities).
    pub(crate) fn dirs(&self) -> &[PathBuf] {
        &self.allowed
    }

    /// The allowed directories a bounded write may write whole (`server::call::bound`):
    /// the operator's, as given. The default scope names conda's root prefix so that
    /// calls may name its environments and caches, not so that a link script may write
    /// conda's own installation (a `.pth` file there runs in every later conda process
    /// and in the server's own helpers, unsandboxed): of the root prefix only its
    /// `envs/` is written whole, and a default directory that holds the root prefix or
    /// the home directory (a working directory at or above it: the user's dotfiles,
    /// `~/.conda`, conda's user cache) is no such place at all.
    pub(crate) fn write_dirs(&self) -> Vec<PathBuf> {
        let Some(root) = &self.default_root else {
            return self.allowed.clone();
        };
        let holds_home = |dir: &PathBuf| {
            self.default_home
                .as_ref()
                .is_some_and(|h| h.starts_with(dir))
        };
        self.allowed
            .iter()
            .filter_map(|dir| {
                if dir == root {
                    std::fs::canonicalize(root.join("envs")).ok()
                } else if root.starts_with(dir) || holds_home(dir) {
                    None
                } else {
                    Some(dir.clone())
                }
            })
            .collect()
    }

    /// Check every path an argv names, relative paths from `cwd`.
    pub(crate) fn check(
        &self,
        argv: &[String],
        cwd: &Path,
        home: Option<&Path>,
    ) -> Result<(), Outside> {
        if self.is_unrestricted() {
            return Ok(());
        }
        for value in argv_values(argv) {
            // conda expands `$VAR`/`${VAR}` in paths (conda/common/path/__init__.py:105
            // `expandvars`), so the text alone cannot say where they point.
            if value.contains('$') {
                return Err(Outside);
            }
            for piece in std::iter::once(value).chain(pieces(value)) {
                // Both readings: conda opens some values as written (`export --file
                // https://x` is `x` in the directory `https:`: attack 40 V2).
                let readings = [path_like(piece, home), existing_word(piece, cwd)];
                for path in readings.into_iter().flatten() {
                    let resolved = resolve(&cwd.join(path));
                    if !self.inside(&resolved) || self.escapes(&resolved) {
                        return Err(Outside);
                    }
                }
            }
        }
        Ok(())
    }

    fn inside(&self, resolved: &Path) -> bool {
        self.allowed.iter().any(|dir| resolved.starts_with(dir))
    }

    /// Whether anything lies outside: a scope that is not unrestricted nor `/`.
    pub(crate) fn has_outside(&self) -> bool {
        !self.allowed.is_empty() && !self.allowed.iter().any(|dir| dir.parent().is_none())
    }

    /// Whether a path inside leads outside all the same: a non-directory with more than
    /// one link, or a directory whose files conda opens in place are hard links or lead
    /// outside. Nothing is outside `--allow-paths /`.
    fn escapes(&self, resolved: &Path) -> bool {
        if !self.has_outside() {
            return false;
        }
        if !resolved.is_dir() {
            return linked(resolved);
        }
        IN_PLACE.iter().any(|file| {
            let path = resolved.join(file);
            std::fs::symlink_metadata(&path).is_ok()
                && (linked(&path) || !self.inside(&resolve(&path)))
        })
    }

    /// Whether a target prefix of a write (wherever it lies: `-n` is not a path the call
    /// names) escapes through a hard link among the files conda opens in place (see
    /// [`IN_PLACE`]).
    pub(crate) fn target_escapes(&self, prefix: &Path) -> bool {
        self.has_outside() && linked_in_place(&resolve(prefix))
    }
}

/// Whether any value of the argv, read as a path (bare words too, relative ones from
/// `cwd`, `$VAR` expanded from the server's environment, which children inherit), is a
/// file `is_target` accepts.
pub(crate) fn names_file(
    argv: &[String],
    cwd: &Path,
    home: Option<&Path>,
    is_target: impl Fn(&Path) -> bool,
) -> bool {
    argv_values(argv).any(|value| {
        let expanded = expand_vars(value);
        std::iter::once(expanded.as_str())
            .chain(pieces(&expanded))
            .any(|piece| {
                let path = path_like(piece, home).unwrap_or_else(|| PathBuf::from(piece));
                is_target(&cwd.join(path))
            })
    })
}

/// Whether any value of the argv, read as a path as [`names_file`] reads it (symlinks
/// followed), names a file conda could wait on until the call's timeout when it opens
/// it: a FIFO (its `open` blocks until a writer comes), a socket, a block device or a
/// character device other than the memory devices that never block (`/dev/null`,
/// `/dev/zero`, `/dev/full`, `/dev/random`, `/dev/urandom`), or anything under `/proc`
/// (`/dev/stdin`, `/dev/fd/N`, `/proc/self/fd/N` name the child's own pipes, which the
/// server cannot judge from its own).
pub(crate) fn names_special(argv: &[String], cwd: &Path, home: Option<&Path>) -> bool {
    names_file(argv, cwd, home, special)
}

/// See [`names_special`].
pub(crate) fn special(path: &Path) -> bool {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let proc = Path::new("/proc");
    let lexical: PathBuf = path.components().collect();
    if lexical.starts_with(proc)
        || ["/dev/fd", "/dev/stdin", "/dev/stdout", "/dev/stderr"]
            .iter()
            .any(|p| lexical.starts_with(p))
        || resolve(path).starts_with(proc)
    {
        return true;
    }
    let Ok(meta) = std::fs::metadata(path) else {
        return false;
    };
    let kind = meta.file_type();
    // Memory devices (major 1): null 3, zero 5, full 7, random 8, urandom 9
    // (Linux `Documentation/admin-guide/devices.txt`); others of major 1 (mem, port,
    // kmsg) do not count.
    let memory = kind.is_char_device()
        && rustix::fs::major(meta.rdev()) == 1
        && matches!(rustix::fs::minor(meta.rdev()), 3 | 5 | 7 | 8 | 9);
    kind.is_fifo()
        || kind.is_socket()
        || kind.is_block_device()
        || (kind.is_char_device() && !memory)
}

/// Whether a value of the argv starts with `~user` (another user's home, which conda
/// expands and the server does not resolve).
pub(crate) fn names_other_home(argv: &[String]) -> bool {
    argv_values(argv).any(|value| {
        std::iter::once(value).chain(pieces(value)).any(|piece| {
            piece
                .strip_prefix('~')
                .is_some_and(|rest| !rest.is_empty() && !rest.starts_with('/'))
        })
    })
}

/// Every part of the argv that can carry a path, read as argparse reads the tokens
/// (Lib/argparse.py `_parse_optional`): after `--` each token is a value as it is;
/// before it, see [`values`].
fn argv_values(argv: &[String]) -> impl Iterator<Item = &str> {
    let end = argv.iter().position(|t| t == "--");
    argv.iter()
        .enumerate()
        .flat_map(move |(at, token)| match end {
            Some(end) if at > end => vec![token.as_str()],
            Some(end) if at == end => Vec::new(),
            _ => values(token),
        })
}

/// The parts of a token that can carry a path: the token, the value after the first
/// `=` of an option, and the attached value of a short option (`-p/abs`). A token that
/// starts with `-` is a value as it is where argparse reads it as one
/// (Lib/argparse.py 3.11 `_parse_optional`, :2244 and :2275-2281): `-` alone, a token
/// that looks like a negative number (`-1`, `-.5`: conda's parsers have no option that
/// does, so argparse hands it to the option before it or to a positional), and one that
/// holds a space (attack 41 W1: `clean --tempfiles -1` deletes the entry `-1` of the
/// working directory, which was judged as nothing).
fn values(token: &str) -> Vec<&str> {
    if !token.starts_with('-') {
        return vec![token];
    }
    let mut out = Vec::new();
    if token == "-" || negative_number(token) || token.contains(' ') {
        out.push(token);
    }
    if let Some((_, value)) = token.split_once('=') {
        out.push(value);
    }
    if !token.starts_with("--") && token.len() > 2 && token.is_char_boundary(2) {
        out.push(&token[2..]);
    }
    out
}

/// Whether argparse's `_negative_number_matcher`, `^-\d+$|^-\d*\.\d+$`
/// (Lib/argparse.py:1381), may match: read wider than Python does (any numeric
/// character for `\d`, which is any Unicode decimal digit there; `$` matches before a
/// last newline too), since a token taken for a value it is not is only judged more.
fn negative_number(token: &str) -> bool {
    let Some(rest) = token.strip_prefix('-') else {
        return false;
    };
    let rest = rest.strip_suffix('\n').unwrap_or(rest);
    let digits = |s: &str| !s.is_empty() && s.chars().all(char::is_numeric);
    match rest.split_once('.') {
        None => digits(rest),
        Some((whole, fraction)) => (whole.is_empty() || digits(whole)) && digits(fraction),
    }
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

/// Whether conda fetches `value` as a URL: its text before `://` is a scheme conda's
/// session serves (conda/cli/common.py:329-335, conda/gateways/connection/session.py:
/// 296-299; `file://` is read above as the path it names). Any other `://` is part of a
/// path to conda: `/allowed/x://../..` is the directory `x:` and then `..` (attack 39 U2).
fn fetched_url(value: &str) -> bool {
    value
        .split_once("://")
        .is_some_and(|(scheme, _)| ["http", "https", "ftp", "s3"].contains(&scheme))
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
    if fetched_url(value) {
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

/// A bare word (`rc`, `envlink`, `.x`, `pkg.conda`), or a word whose first component
/// (`https:` of `https://x`) names something in the working directory: conda reads many
/// bare words as paths (`config --file rc`, `create -p env`, `compare env.yml`, a package
/// file), and an entry there — a symlink above all — may lead anywhere, so it is judged
/// where it leads. A word that names nothing there would be created in the working
/// directory, which is judged itself.
fn existing_word(word: &str, cwd: &Path) -> Option<PathBuf> {
    // Its first component: a URL's scheme that names a directory or a symlink there
    // (`https:`) makes the URL a path too.
    let first = word.split('/').next().unwrap_or(word);
    std::fs::symlink_metadata(cwd.join(first))
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
mod tests;
mod vars;
