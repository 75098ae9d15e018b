//! Hard links in a prefix: which files conda opens in place, whether one of them (or any
//! file of a prefix) is a link to a file elsewhere that conda would write or read through.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

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

/// The walk of [`foreign_links`] ran past its deadline (a prefix with millions of entries,
/// which an agent can make in its own environment): nothing is known, the caller refuses.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct OutOfTime;

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
/// when it holds links, those packages): about one `lstat` per file, stopped at
/// `deadline` (attack 9 A9-4: the walk held a call outside its `--timeout`).
pub(crate) fn foreign_links(
    prefix: &Path,
    pkgs_dirs: &[PathBuf],
    deadline: Option<Instant>,
) -> Result<bool, OutOfTime> {
    if std::fs::symlink_metadata(prefix).is_err() {
        return Ok(false);
    }
    let mut linked = std::collections::HashSet::new();
    let seen = walk(prefix, deadline, &mut |meta| {
        if meta.nlink() > 1 {
            linked.insert((meta.dev(), meta.ino()));
        }
    });
    // A prefix the walk cannot see whole (a directory it cannot list, a name past
    // PATH_MAX) may hide a link: fail closed.
    match seen {
        Err(e) if e.kind() == std::io::ErrorKind::TimedOut => return Err(OutOfTime),
        Err(_) => return Ok(true),
        Ok(()) if linked.is_empty() => return Ok(false),
        Ok(()) => {}
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
            let seen = walk(&source, deadline, &mut |meta| {
                linked.remove(&(meta.dev(), meta.ino()));
            });
            if seen.is_err_and(|e| e.kind() == std::io::ErrorKind::TimedOut) {
                return Err(OutOfTime);
            }
        }
        if linked.is_empty() {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The deepest directory [`walk`] descends to (deeper fails closed).
const MAX_DEPTH: usize = 512;

/// Every non-directory below `dir`, without following symlinks; an error when a
/// directory below it cannot be listed, an entry cannot be read, or it lies more than
/// [`MAX_DEPTH`] levels down (the walk did not see everything); `TimedOut` past
/// `deadline`. Iterative, never recursive.
fn walk(
    dir: &Path,
    deadline: Option<Instant>,
    each: &mut dyn FnMut(&std::fs::Metadata),
) -> std::io::Result<()> {
    let mut pending = vec![(dir.to_path_buf(), 0usize)];
    while let Some((dir, depth)) = pending.pop() {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(std::io::ErrorKind::TimedOut.into());
        }
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

/// The largest record [`read_record`] reads (conda's records are kilobytes; one of a
/// package with tens of thousands of files a few megabytes).
const MAX_RECORD: u64 = 64 << 20;

/// A record's text: a regular file, not a symlink, opened without blocking (a FIFO the
/// agent put in its own environment's `conda-meta` must not hold the gate: attack 7), at
/// most [`MAX_RECORD`] bytes (`host::files`). `None` for anything else, whose
/// `link.source` is then not counted (its links stay foreign: fail closed).
fn read_record(path: &Path) -> Option<Vec<u8>> {
    crate::host::files::read(path, MAX_RECORD)
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
        let Some(text) = read_record(&path) else {
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
