//! The environments one final argv targets, resolved by conda's own context (for
//! `--write-envs`): the embedded helper parses the argv with conda's parser in the call's
//! working directory and asks `determine_target_prefix` (and, for `rename`, how the
//! destination resolves); each answer is then made canonical here, so that a symlink,
//! `..` or a trailing slash names the directory conda will really write. Every
//! environment conda knows that lies below a target is a target too: writing a prefix
//! (its files, `remove --all`, `create` over it) reaches what is inside it.
//!
//! Resolving a name that names no environment yet asks conda for its first writable envs
//! directory, which conda creates when missing (as the call itself would).

use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::host::discovery::run_helper_in;
use crate::tools::policy::write_envs::{NOT_NAMED, Rule, Target, UNRESOLVED};

/// Why the targets of an argv are not known.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Unresolved {
    /// The argv takes its environment from a file (`create` without `-n`/`-p`).
    #[error("{}", NOT_NAMED)]
    NotNamed,
    /// conda refuses the argv itself (its parser, its context, or the resolution raised
    /// one of conda's errors), as the run then would.
    #[error("{}", UNRESOLVED)]
    Refused,
    /// The helper failed (it crashed, timed out, ran out of memory or answered no
    /// document), or its answer could not be made canonical: nothing is known of the
    /// targets, and nothing says conda would refuse the run.
    #[error("{}", UNRESOLVED)]
    Failed,
}

/// The helper's answer: the targets, or conda's own refusal of the argv.
#[derive(Deserialize)]
#[serde(untagged)]
enum Answer {
    /// `{"unresolved": "parse" | "conda"}`.
    Refused {
        #[serde(rename = "unresolved")]
        _why: serde::de::IgnoredAny,
    },
    Resolved(Box<Document>),
}

/// The helper's `targets` document.
#[derive(Deserialize)]
struct Document {
    explicit: bool,
    target: PathBuf,
    destination: Option<PathBuf>,
    root_prefix: PathBuf,
    envs_dirs: Vec<PathBuf>,
    known: Vec<PathBuf>,
    #[serde(default)]
    envs_dirs_by_file: Vec<(PathBuf, Vec<PathBuf>)>,
}

/// What conda's context says of one argv: the environments it targets, and the envs
/// directories each condarc file names.
pub(crate) struct Resolved {
    pub targets: Vec<Target>,
    /// The envs directories each condarc file names (its absolute entries only), by file:
    /// which to trust is the server's to say (`server::call`).
    pub envs_dirs: Vec<(PathBuf, Vec<PathBuf>)>,
}

/// Resolve the targets of `argv` (a command with `rule`) under `interpreter`, in `cwd`,
/// and the envs directories the condarc files name.
pub(crate) async fn resolve(
    exec: &crate::host::exec::Executions,
    interpreter: &Path,
    argv: &[String],
    cwd: Option<&Path>,
    rule: Rule,
    timeout: Duration,
) -> Result<Resolved, Unresolved> {
    let request = serde_json::json!({ "argv": argv, "destination": rule.destination });
    let answer: Answer = run_helper_in(
        exec,
        interpreter,
        "targets",
        &[],
        timeout,
        Some(request.to_string().into_bytes()),
        cwd.map(Path::to_path_buf),
    )
    .await
    .map_err(|failure| {
        tracing::debug!(%failure, "target resolution failed");
        Unresolved::Failed
    })?;
    let mut document = match answer {
        Answer::Refused { .. } => return Err(Unresolved::Refused),
        Answer::Resolved(document) => *document,
    };
    if rule.named && !document.explicit {
        return Err(Unresolved::NotNamed);
    }
    let mut paths = vec![document.target.clone()];
    if rule.destination {
        paths.push(document.destination.clone().ok_or(Unresolved::Failed)?);
    }
    let envs_dirs = std::mem::take(&mut document.envs_dirs_by_file);
    let targets = tokio::task::spawn_blocking(move || targets(&document, &paths))
        .await
        .map_err(|_| Unresolved::Failed)??;
    Ok(Resolved { targets, envs_dirs })
}

/// The canonical targets: `paths`, then every known environment strictly below one of
/// them; each with its name when it lies directly in an envs directory.
fn targets(document: &Document, paths: &[PathBuf]) -> Result<Vec<Target>, Unresolved> {
    let root = canonical(&document.root_prefix).ok_or(Unresolved::Failed)?;
    let envs_dirs: Vec<PathBuf> = document
        .envs_dirs
        .iter()
        .filter_map(|d| canonical(d))
        .collect();
    let target = |path: PathBuf| {
        let in_envs_dir = path
            .parent()
            .is_some_and(|parent| envs_dirs.iter().any(|d| d == parent));
        let name = in_envs_dir
            .then(|| path.file_name().map(|n| n.to_string_lossy().into_owned()))
            .flatten();
        Target {
            root: path == root,
            path,
            name,
        }
    };
    let direct: Vec<PathBuf> = paths
        .iter()
        .map(|p| canonical(p).ok_or(Unresolved::Failed))
        .collect::<Result<_, _>>()?;
    let known: Vec<PathBuf> = document.known.iter().filter_map(|k| canonical(k)).collect();
    let nested: Vec<PathBuf> = known
        .into_iter()
        .filter(|k| direct.iter().any(|d| k != d && k.starts_with(d)))
        .collect();
    let mut all: Vec<Target> = direct.into_iter().chain(nested).map(target).collect();
    all.dedup_by(|a, b| a.path == b.path);
    Ok(all)
}

/// The canonical forms of the scope's prefix paths (`None` where one cannot be made).
pub(crate) async fn canonical_all(paths: &[PathBuf]) -> Vec<Option<PathBuf>> {
    let paths = paths.to_vec();
    tokio::task::spawn_blocking(move || paths.iter().map(|p| canonical(p)).collect())
        .await
        .unwrap_or_default()
}

/// `path` made canonical even where it does not exist yet: its longest existing ancestor
/// with symlinks resolved, then the rest of its components. `None` for a relative path or
/// a `..` in the part that does not exist (which the OS would resolve against a directory
/// that is not there yet).
pub(crate) fn canonical(path: &Path) -> Option<PathBuf> {
    if !path.is_absolute() {
        return None;
    }
    let components: Vec<Component> = path.components().collect();
    for split in (1..=components.len()).rev() {
        let head: PathBuf = components[..split].iter().collect();
        let Ok(mut resolved) = std::fs::canonicalize(&head) else {
            continue;
        };
        for component in &components[split..] {
            match component {
                Component::Normal(part) => resolved.push(part),
                Component::CurDir => {}
                _ => return None,
            }
        }
        return Some(resolved);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_resolves_symlinks_dots_and_trailing_slashes() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let real = base.join("envs");
        std::fs::create_dir(&real).unwrap();
        std::os::unix::fs::symlink(&real, base.join("link")).unwrap();
        let want = real.join("proj");
        for spelled in [
            format!("{}/link/proj", base.display()),
            format!("{}/link/proj/", base.display()),
            format!("{}/envs/../envs/proj", base.display()),
            format!("{}/link/./proj", base.display()),
            format!("{}//envs//proj", base.display()),
        ] {
            assert_eq!(
                canonical(Path::new(&spelled)),
                Some(want.clone()),
                "{spelled}"
            );
        }
        // `..` below a directory that does not exist: refused, not guessed.
        let missing = format!("{}/envs/nothing/../proj", base.display());
        assert_eq!(canonical(Path::new(&missing)), None);
        assert_eq!(canonical(Path::new("relative/proj")), None);
    }
}
