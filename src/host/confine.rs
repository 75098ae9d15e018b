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

use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use vars::expand_vars;

/// The files inside a prefix that conda opens in place — appends to, rewrites without
/// replacing, or reads and shows — rather than replacing by a new file (conda 26.7.1).
/// A hard link there (or a symlink leading elsewhere) makes conda write or read another
/// file. Package files and `conda-meta/<record>.json` are not here: conda removes them
/// before it writes them anew (conda/core/prefix_data.py:506-523, `rm_rf` then
/// `write_as_json_to_file`).
pub(crate) const IN_PLACE: &[&str] = &[
    // conda/history.py:102-103 `touch` (conda/gateways/disk/update.py:161, open "a"), :399
    // `write_changes` and :411 `write_specs` (open "a"): every transaction appends to it.
    "conda-meta/history",
    // conda/core/prefix_data.py:661-672: read, then `write_text` in place (env config vars).
    "conda-meta/state",
    // conda/core/prefix_data.py:742-746 (read: the pins); rewritten in place by `doctor
    // --fix`, conda/plugins/subcommands/doctor/health_checks/pinned.py:117 `write_text`.
    "conda-meta/pinned",
    // conda/core/prefix_data.py:300-315: read, its message shown in the error.
    "conda-meta/frozen",
    // conda/core/prefix_data.py:726-734 `set_creation_time`: `write_text` in place.
    "conda-meta/created_at",
    // conda/cli/main_config.py:628-631 (`config --prefix/--name`; `--env`: :622-623) and
    // :707 `rc_config.write()` → conda/cli/condarc.py:387 → conda/common/serialize/
    // yaml.py:89 `Path.write_text` (in place); :647 `--write-default` (open "w").
    ".condarc",
];

/// Whether `path` (symlinks followed) is a non-directory with more than one link.
pub(crate) fn linked(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| !m.is_dir() && m.nlink() > 1)
}

/// Whether a file of `prefix` that conda opens in place ([`IN_PLACE`]) is a hard link.
pub(crate) fn linked_in_place(prefix: &Path) -> bool {
    IN_PLACE.iter().any(|file| linked(&prefix.join(file)))
}

/// Whether `prefix` holds a non-directory with more than one link that is not conda's
/// own link of a package cache file: an agent's hard link to a file elsewhere, which
/// conda would write through. conda opens some existing files of a prefix in place
/// after a warning only, entry points above all (conda/gateways/disk/create.py:137-160
/// `create_python_entry_point`: `maybe_raise(BasicClobberError)`, then `open(target,
/// "w")`), and a link script writes what it likes; neither Landlock nor a mount
/// namespace sees a hard link (they judge the name, which lies inside). conda hard-links
/// package files from its caches by design, so a file with other links is accepted when
/// its inode is one of a file below the `link.source` (the extracted package) of a
/// record in `conda-meta` that lies in one of `pkgs_dirs`. Reads the whole prefix (and,
/// when it holds links, those packages): about one `lstat` per file.
pub(crate) fn foreign_links(prefix: &Path, pkgs_dirs: &[PathBuf]) -> bool {
    if std::fs::symlink_metadata(prefix).is_err() {
        return false;
    }
    let mut linked = std::collections::HashSet::new();
    let seen = walk(prefix, &mut |meta| {
        if meta.nlink() > 1 {
            linked.insert((meta.dev(), meta.ino()));
        }
    });
    // A prefix the walk cannot see whole (a directory it cannot list, a name past
    // PATH_MAX) may hide a link: fail closed.
    if seen.is_err() {
        return true;
    }
    if linked.is_empty() {
        return false;
    }
    let caches: Vec<PathBuf> = pkgs_dirs
        .iter()
        .filter_map(|d| std::fs::canonicalize(d).ok())
        .collect();
    for source in sources(prefix) {
        let Ok(source) = std::fs::canonicalize(&source) else {
            continue;
        };
        if caches.iter().any(|c| source.starts_with(c) && source != *c) {
            // What this walk cannot see stays linked (fail closed).
            let _ = walk(&source, &mut |meta| {
                linked.remove(&(meta.dev(), meta.ino()));
            });
        }
        if linked.is_empty() {
            return false;
        }
    }
    true
}

/// The deepest directory [`walk`] descends to (deeper fails closed).
const MAX_DEPTH: usize = 512;

/// Every non-directory below `dir`, without following symlinks; an error when a
/// directory below it cannot be listed, an entry cannot be read, or it lies more than
/// [`MAX_DEPTH`] levels down (the walk did not see everything). Iterative, never recursive.
fn walk(dir: &Path, each: &mut dyn FnMut(&std::fs::Metadata)) -> std::io::Result<()> {
    let mut pending = vec![(dir.to_path_buf(), 0usize)];
    while let Some((dir, depth)) = pending.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            let meta = entry.metadata()?;
            if meta.is_dir() {
                if depth >= MAX_DEPTH {
                    return Err(std::io::Error::other("nested too deep"));
                }
                pending.push((entry.path(), depth + 1));
            } else {
                each(&meta);
            }
        }
    }
    Ok(())
}

/// The `link.source` of every record in `prefix/conda-meta`.
fn sources(prefix: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(prefix.join("conda-meta")) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let Ok(text) = std::fs::read(&path) else {
            continue;
        };
        #[derive(serde::Deserialize)]
        struct Record {
            link: Option<Link>,
        }
        #[derive(serde::Deserialize)]
        struct Link {
            source: Option<PathBuf>,
        }
        if let Ok(Record {
            link: Some(Link {
                source: Some(source),
            }),
        }) = serde_json::from_slice::<Record>(&text)
        {
            found.push(source);
        }
    }
    found
}

/// The directories calls may name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Confinement {
    /// Canonical directories; empty = unrestricted.
    allowed: Vec<PathBuf>,
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
        Confinement { allowed }
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
        Confinement::to(&dirs)
    }

    pub(crate) fn is_unrestricted(&self) -> bool {
        self.allowed.is_empty()
    }

    /// The allowed directories (for capabilities).
    pub(crate) fn dirs(&self) -> &[PathBuf] {
        &self.allowed
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
                if !self.inside(&resolved) || self.escapes(&resolved) {
                    return Err(Outside);
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
pub(crate) fn names_other_home(argv: &[String]) -> bool {
    argv.iter().flat_map(|t| values(t)).any(|value| {
        std::iter::once(value).chain(pieces(value)).any(|piece| {
            piece
                .strip_prefix('~')
                .is_some_and(|rest| !rest.is_empty() && !rest.starts_with('/'))
        })
    })
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
mod tests;
mod vars;
