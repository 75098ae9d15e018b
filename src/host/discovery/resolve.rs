//! Which conda: the target executable from `--conda-exe`, `CONDA_EXE` or `PATH` (its
//! interpreters are read once, from its `#!` line, by [`crate::host::target`]).

use std::path::PathBuf;

/// Why a conda executable could not be selected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    /// Nothing usable where the source points (why, naming the source).
    #[error("{0}")]
    NotFound(String),
    #[error("conda batch launchers are not supported")]
    BatchLauncher,
}

/// Select the target conda: `--conda-exe`, then `CONDA_EXE`, then `conda` on `PATH`.
/// The result is absolute, symlink-free, a regular executable file, not a batch launcher.
pub fn resolve_executable(
    explicit: Option<&str>,
    conda_exe_env: Option<&str>,
) -> Result<PathBuf, ResolveError> {
    let (candidate, source) = match (explicit, conda_exe_env) {
        (Some(path), _) if !path.is_empty() => (path.to_owned(), "--conda-exe"),
        (_, Some(path)) if !path.is_empty() => (path.to_owned(), "CONDA_EXE"),
        _ => (crate::host::platform::CONDA.to_owned(), "PATH"),
    };
    let expanded = expand_home(&candidate);
    let found = if expanded.components().count() > 1 || expanded.is_absolute() {
        Some(expanded)
    } else {
        on_path(&candidate, std::env::var_os("PATH"))
    };
    let Some(found) = found else {
        return Err(ResolveError::NotFound(format!(
            "no conda executable on {source}"
        )));
    };
    let resolved = std::fs::canonicalize(&found).map_err(|_| {
        ResolveError::NotFound(format!(
            "{} (from {source}) does not exist",
            found.display()
        ))
    })?;
    let extension = resolved
        .extension()
        .map(|e| e.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    if extension == "bat" || extension == "cmd" {
        return Err(ResolveError::BatchLauncher);
    }
    // `resolved` is absolute, so `which` checks this very file: regular and executable.
    if which::which(&resolved).is_err() {
        return Err(ResolveError::NotFound(format!(
            "{} (from {source}) is not an executable file",
            resolved.display()
        )));
    }
    Ok(resolved)
}

/// `name` in the absolute directories of `path` (a `PATH` value): an empty or relative
/// entry names the working directory, where an agent could plant a `conda`.
fn on_path(name: &str, path: Option<std::ffi::OsString>) -> Option<PathBuf> {
    let absolute = crate::host::exec::environ::absolute_entries(&path?);
    which::which_in(name, Some(absolute), "/").ok()
}

fn expand_home(path: &str) -> PathBuf {
    if let Some(rest) = path.strip_prefix("~/")
        && let Some(home) = std::env::var_os("HOME")
    {
        return PathBuf::from(home).join(rest);
    }
    PathBuf::from(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::path::Path;

    fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
        let path = dir.join(name);
        let mut f = std::fs::File::create(&path).unwrap();
        f.write_all(body.as_bytes()).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    #[test]
    fn resolution_rules() {
        let dir = tempfile::tempdir().unwrap();
        let conda = script(dir.path(), "conda", "#!/bin/sh\n");
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&conda, &link).unwrap();
        let canonical = std::fs::canonicalize(&conda).unwrap();
        assert_eq!(
            resolve_executable(Some(link.to_str().unwrap()), None).unwrap(),
            canonical
        );
        // --conda-exe wins over CONDA_EXE; an empty one falls through to CONDA_EXE.
        assert_eq!(
            resolve_executable(Some(""), Some(conda.to_str().unwrap())).unwrap(),
            canonical
        );
        assert!(matches!(
            resolve_executable(Some("/nonexistent/conda"), Some(conda.to_str().unwrap())),
            Err(ResolveError::NotFound(_))
        ));
        let bat = script(dir.path(), "conda.BAT", "@echo off\n");
        assert_eq!(
            resolve_executable(Some(bat.to_str().unwrap()), None),
            Err(ResolveError::BatchLauncher)
        );
        let plain = dir.path().join("not-exec");
        std::fs::write(&plain, "x").unwrap();
        assert!(matches!(
            resolve_executable(Some(plain.to_str().unwrap()), None),
            Err(ResolveError::NotFound(_))
        ));
        assert!(matches!(
            resolve_executable(Some(dir.path().to_str().unwrap()), None),
            Err(ResolveError::NotFound(_))
        ));
    }

    #[test]
    fn path_lookup_takes_no_relative_entry() {
        // Relative to the tests' working directory (the crate root), as an agent's planted
        // `conda` in the server's working directory would be.
        std::fs::create_dir_all("target").unwrap();
        let dir = tempfile::tempdir_in("target").unwrap();
        script(dir.path(), "conda", "#!/bin/sh\n");
        let absolute = std::fs::canonicalize(dir.path()).unwrap();
        let here = std::fs::canonicalize(std::env::current_dir().unwrap()).unwrap();
        let relative = absolute.strip_prefix(&here).unwrap();
        let path = |value: String| Some(std::ffi::OsString::from(value));
        assert_eq!(
            on_path("conda", path(format!("{}:", relative.display()))),
            None
        );
        assert_eq!(
            on_path(
                "conda",
                path(format!(":/nonexistent:{}", absolute.display()))
            ),
            Some(absolute.join("conda"))
        );
    }
}
