//! Finding the target conda and asking it, in one short-lived helper process, what its
//! command line looks like.
//!
//! The target's interpreter is read from conda's entry script (its shebang names it, read
//! once by [`crate::host::target`]) or guessed from the prefix (`bin/python`), and confirmed by what the helper reports; only
//! when that fails does discovery pay for `conda info --json` to learn `sys.executable`.
//! The helper (`helper/*.py`, embedded) runs isolated (`python -I`) with its document on a
//! private descriptor, under [`crate::host::exec`] with a generous output cap of its own
//! (independent of `--output-limit-bytes`). Every failure becomes a diagnostic with a fixed
//! reason: discovery never panics and never aborts the server.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::model::catalog::{self, Catalog, Diagnostic, Plugin};
use crate::model::snapshot::{PREFIX, Replacements};

mod helper;
mod resolve;

pub use helper::{HELPER_SOURCE, Info, conda_info, plugins, run_helper, run_helper_in};
pub use resolve::{ResolveError, resolve_executable};

use crate::host::exec::Executions;
use crate::host::target::Conda;

/// Cap on a helper's (or `conda info`'s) JSON document.
pub const DOCUMENT_LIMIT: usize = 64 * 1024 * 1024;

/// What discovery learned. Always complete: failures are diagnostics in `catalog`.
#[derive(Clone, Debug, PartialEq)]
pub struct Discovery {
    pub catalog: Catalog,
    pub plugins: Vec<Plugin>,
    /// The interpreter the helper ran under, when one was found.
    pub interpreter: Option<PathBuf>,
    /// The target's `sys.prefix`, when known.
    pub prefix: Option<PathBuf>,
    /// The target interpreter's version (`3.11.7`), when known.
    pub python_version: Option<String>,
    /// `sys.path` directories of the target, for cheap change detection.
    pub site_dirs: Vec<PathBuf>,
    /// Helper processes and `conda info` runs it took (1 in the common case).
    pub processes: u32,
}

impl Discovery {
    pub fn fingerprint(&self) -> String {
        catalog::discovery_fingerprint(&self.catalog.conda_version, &self.plugins)
    }

    fn failed(conda: &Conda, version: Option<&str>, reason: String, processes: u32) -> Self {
        let prog = conda
            .exe()
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "conda".into());
        Discovery {
            catalog: Catalog::unavailable(&prog, version.unwrap_or("unknown"), &reason),
            plugins: Vec::new(),
            interpreter: None,
            prefix: None,
            python_version: None,
            site_dirs: Vec::new(),
            processes,
        }
    }
}

impl Discovery {
    /// When the target is not a working conda (discovery found no parser at all): one line
    /// that says what was found and what to do. `None` for a working conda, even one with
    /// diagnostics.
    pub fn not_a_conda(&self, conda_exe: &Path) -> Option<String> {
        if self.catalog.root.is_some() {
            return None;
        }
        let why = self
            .catalog
            .diagnostics
            .iter()
            .find(|d| d.blocking)
            .map_or("conda catalog discovery failed", |d| d.reason.as_str());
        Some(format!(
            "{} is not a working conda ({why}). Point --conda-exe (or CONDA_EXE) at an \
             installed conda's executable (<prefix>/bin/conda; `conda info` must run there)",
            conda_exe.display()
        ))
    }
}

/// A failed helper or `conda info` run, as a fixed reason text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct HelperFailure(pub String);

/// The helper's catalog-mode document.
#[derive(Deserialize)]
struct CatalogDocument {
    protocol: u64,
    catalog: Catalog,
    plugins: Vec<Plugin>,
    plugin_error: Option<String>,
    interpreter: InterpreterFacts,
}

#[derive(Deserialize)]
struct InterpreterFacts {
    prefix: PathBuf,
    #[serde(default)]
    version: Option<String>,
    #[serde(default)]
    site_dirs: Vec<PathBuf>,
}

/// Run full discovery against the target, resolved once by the caller (its `#!` line
/// read by [`Conda::resolve`], never here), each process one of `exec`'s and bounded by
/// `timeout`.
pub async fn discover(exec: &Executions, conda: &Conda, timeout: Duration) -> Discovery {
    let mut processes = 0;
    let mut last_failure = None;
    for interpreter in conda.interpreter_candidates() {
        processes += 1;
        match helper::catalog_run(exec, timeout, &interpreter).await {
            Ok((document, facts)) if owns(&facts.prefix, conda.exe()) => {
                return finish(document, facts, interpreter, processes);
            }
            Ok(_) => {
                last_failure = Some(HelperFailure("interpreter does not own conda".into()));
            }
            Err(failure) => last_failure = Some(failure),
        }
    }
    if let Some(HelperFailure(reason)) = &last_failure {
        tracing::debug!(%reason, "helper under the guessed interpreter failed; asking conda info");
    }
    // Fall back to what conda itself says about its interpreter.
    processes += 1;
    let info = match conda_info(exec, conda.exe(), timeout).await {
        Ok(info) => info,
        Err(HelperFailure(reason)) => return Discovery::failed(conda, None, reason, processes),
    };
    if !info.interpreter.is_file() {
        return Discovery::failed(
            conda,
            Some(&info.version),
            "conda target interpreter is not a file".into(),
            processes,
        );
    }
    processes += 1;
    match helper::catalog_run(exec, timeout, &info.interpreter).await {
        Ok((document, _)) if document.catalog.conda_version != info.version => Discovery::failed(
            conda,
            Some(&info.version),
            "conda catalog discovery reported a different conda version".into(),
            processes,
        ),
        Ok((document, facts)) => finish(document, facts, info.interpreter, processes),
        Err(HelperFailure(reason)) => {
            Discovery::failed(conda, Some(&info.version), reason, processes)
        }
    }
}

fn finish(
    document: CatalogDocument,
    facts: InterpreterFacts,
    interpreter: PathBuf,
    processes: u32,
) -> Discovery {
    let mut catalog = document.catalog;
    if let Some(error) = document.plugin_error {
        // The catalog itself is fine; only the inventory is missing (never blocks tools).
        catalog.diagnostics.push(Diagnostic {
            path: Vec::new(),
            reason: catalog::truncate_reason(&format!("conda plugin discovery failed: {error}")),
            action_type: None,
            blocking: false,
        });
    }
    if let Some(version) = facts.version.as_deref()
        && !honours_safe_path(version)
    {
        tracing::warn!(
            version,
            "the target's Python is older than 3.11 and ignores PYTHONSAFEPATH: a \
             multiprocessing child conda starts (its CUDA probe in info, doctor and \
             solves) takes modules from the working directory; see docs/security.md"
        );
    }
    Discovery {
        catalog,
        plugins: document.plugins,
        interpreter: Some(interpreter),
        prefix: Some(facts.prefix),
        python_version: facts.version,
        site_dirs: facts.site_dirs,
        processes,
    }
}

/// Whether an interpreter of this version (`3.11.7`) honours `PYTHONSAFEPATH` (3.11 and
/// later); an unreadable version is taken to.
fn honours_safe_path(version: &str) -> bool {
    let mut parts = version.split('.').map(|p| p.parse::<u32>());
    match (parts.next(), parts.next()) {
        (Some(Ok(major)), Some(Ok(minor))) => (major, minor) >= (3, 11),
        _ => true,
    }
}

/// Does this prefix contain the conda executable (possibly in `condabin/`)?
fn owns(prefix: &Path, conda_exe: &Path) -> bool {
    let prefix = std::fs::canonicalize(prefix).unwrap_or_else(|_| prefix.to_path_buf());
    conda_exe.starts_with(&prefix)
}

/// What a snapshot of this target normalizes for this process: the target's prefix, the
/// home directory and the working directory (the helper runs here, so defaults such as
/// `conda run --cwd` carry it).
pub fn replacements(prefix: Option<&Path>) -> Replacements {
    let text = |p: &Path| p.to_string_lossy().into_owned();
    Replacements::new(&[
        (prefix.map(text), PREFIX),
        (std::env::var("HOME").ok(), "~"),
        (std::env::current_dir().ok().as_deref().map(text), "<cwd>"),
    ])
}

#[cfg(test)]
mod tests {
    use super::honours_safe_path;

    #[test]
    fn python_3_11_and_later_honour_pythonsafepath() {
        for (version, honours) in [
            ("3.10.14", false),
            ("3.9.0", false),
            ("3.11.7", true),
            ("3.13.1", true),
            ("4.0", true),
            ("unknown", true),
        ] {
            assert_eq!(honours_safe_path(version), honours, "{version}");
        }
    }
}
