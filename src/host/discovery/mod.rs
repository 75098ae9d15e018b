//! Finding the target conda and asking it, in one short-lived helper process, what its
//! command line looks like.
//!
//! The target's interpreter is read from conda's entry script (its shebang names it) or
//! guessed from the prefix (`bin/python`), and confirmed by what the helper reports; only
//! when that fails does discovery pay for `conda info --json` to learn `sys.executable`.
//! The helper (`helper.py`, embedded) runs isolated (`python -I`) with its document on a
//! private descriptor, under [`crate::host::exec`] with a generous output cap of its own
//! (independent of `--output-limit-bytes`). Every failure becomes a diagnostic with a fixed
//! reason: discovery never panics and never aborts the server.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::model::snapshot::{PREFIX, Replacements};
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::host::exec;
use crate::model::catalog::{self, Catalog, Diagnostic, Plugin};

/// The helper's source, run with `python -I -c`.
pub const HELPER_SOURCE: &str = include_str!("helper.py");
/// Cap on a helper's (or `conda info`'s) JSON document.
pub const DOCUMENT_LIMIT: usize = 64 * 1024 * 1024;
/// Stderr kept from helper runs, for logs only.
const HELPER_STDERR_LIMIT: usize = 64 * 1024;
const PROTOCOL: u64 = 1;

/// Where the target conda lives and how long discovery may take.
#[derive(Clone, Debug)]
pub struct Target {
    /// The resolved (absolute, symlink-free) conda executable.
    pub conda_exe: PathBuf,
    /// Bound on each discovery process.
    pub timeout: Duration,
}

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

    fn failed(target: &Target, version: Option<&str>, reason: String, processes: u32) -> Self {
        let prog = target
            .conda_exe
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
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure(pub String);

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

/// Run full discovery against the target.
pub async fn discover(target: &Target) -> Discovery {
    let mut processes = 0;
    let mut last_failure = None;
    for interpreter in interpreter_candidates(&target.conda_exe) {
        processes += 1;
        match catalog_run(target, &interpreter).await {
            Ok((document, facts)) if owns(&facts.prefix, &target.conda_exe) => {
                return finish(document, facts, interpreter, processes);
            }
            Ok(_) => last_failure = Some(Failure("interpreter does not own conda".into())),
            Err(failure) => last_failure = Some(failure),
        }
    }
    if let Some(Failure(reason)) = &last_failure {
        tracing::debug!(%reason, "helper under the guessed interpreter failed; asking conda info");
    }
    // Fall back to what conda itself says about its interpreter.
    processes += 1;
    let info = match conda_info(target).await {
        Ok(info) => info,
        Err(Failure(reason)) => return Discovery::failed(target, None, reason, processes),
    };
    if !info.interpreter.is_file() {
        return Discovery::failed(
            target,
            Some(&info.version),
            "conda target interpreter is not a file".into(),
            processes,
        );
    }
    processes += 1;
    match catalog_run(target, &info.interpreter).await {
        Ok((document, _)) if document.catalog.conda_version != info.version => Discovery::failed(
            target,
            Some(&info.version),
            "conda catalog discovery reported a different conda version".into(),
            processes,
        ),
        Ok((document, facts)) => finish(document, facts, info.interpreter, processes),
        Err(Failure(reason)) => Discovery::failed(target, Some(&info.version), reason, processes),
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

/// Does this prefix contain the conda executable (possibly in `condabin/`)?
fn owns(prefix: &Path, conda_exe: &Path) -> bool {
    let prefix = std::fs::canonicalize(prefix).unwrap_or_else(|_| prefix.to_path_buf());
    conda_exe.starts_with(&prefix)
}

/// Interpreters worth trying before asking `conda info`, best first.
pub fn interpreter_candidates(conda_exe: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(python) = shebang_interpreter(conda_exe) {
        out.push(python);
    }
    if let Some(bin) = conda_exe.parent() {
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

/// The interpreter named by a script's `#!` line (also pip's `/bin/sh` trampoline for long
/// paths, and `#!/usr/bin/env python`).
pub fn shebang_interpreter(script: &Path) -> Option<PathBuf> {
    use std::io::Read;
    let mut head = Vec::with_capacity(512);
    std::fs::File::open(script)
        .ok()?
        .take(1024)
        .read_to_end(&mut head)
        .ok()?;
    let text = String::from_utf8_lossy(&head);
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

async fn catalog_run(
    target: &Target,
    interpreter: &Path,
) -> Result<(CatalogDocument, InterpreterFacts), Failure> {
    let mut document: CatalogDocument =
        run_helper(interpreter, "catalog", &[], target.timeout, None).await?;
    if document.protocol != PROTOCOL {
        return Err(Failure(
            "conda catalog discovery returned invalid JSON: protocol".into(),
        ));
    }
    if document.catalog.prog.is_empty() || document.catalog.root.is_none() {
        return Err(Failure(
            "conda catalog discovery returned invalid program fields".into(),
        ));
    }
    let facts = std::mem::replace(
        &mut document.interpreter,
        InterpreterFacts {
            prefix: PathBuf::new(),
            version: None,
            site_dirs: Vec::new(),
        },
    );
    Ok((document, facts))
}

fn invalid_json(purpose: &str, error: &serde_json::Error) -> Failure {
    let class = match error.classify() {
        serde_json::error::Category::Io => "IoError",
        serde_json::error::Category::Syntax => "SyntaxError",
        serde_json::error::Category::Data => "DataError",
        serde_json::error::Category::Eof => "EofError",
    };
    Failure(format!("{purpose} returned invalid JSON: {class}"))
}

/// Run the embedded helper in `mode` under `interpreter`; its document parsed straight
/// into `T` (no intermediate JSON tree), or why not.
pub async fn run_helper<T: serde::de::DeserializeOwned>(
    interpreter: &Path,
    mode: &str,
    extra: &[String],
    timeout: Duration,
    stdin: Option<Vec<u8>>,
) -> Result<T, Failure> {
    let purpose = match mode {
        "catalog" => "conda catalog discovery",
        "plugins" => "conda plugin discovery",
        "completion" => "conda completion metadata",
        _ => "conda helper",
    };
    let mut args: Vec<OsString> = vec!["-I".into(), "-c".into(), HELPER_SOURCE.into(), mode.into()];
    args.extend(extra.iter().map(OsString::from));
    let spec = exec::Spec {
        program: interpreter.to_path_buf(),
        args,
        cwd: None,
        stdin,
        timeout,
        stdout_limit: DOCUMENT_LIMIT,
        stderr_limit: HELPER_STDERR_LIMIT,
        env_remove: Vec::new(),
        limits: exec::Limits::current(),
        sandbox: None,
    };
    let outcome = exec::run(&spec, &CancellationToken::new())
        .await
        .map_err(|e| {
            Failure(format!(
                "conda target interpreter could not start: {}",
                exec::plain_os_error(&e)
            ))
        })?;
    if !outcome.stderr.is_empty() {
        tracing::debug!(
            purpose,
            stderr = %String::from_utf8_lossy(&outcome.stderr),
            "helper stderr"
        );
    }
    if outcome.timed_out {
        return Err(Failure(format!("{purpose} timed out")));
    }
    if outcome.stdout_truncated {
        return Err(Failure(format!(
            "{purpose} output exceeds the {} MiB limit",
            DOCUMENT_LIMIT / (1024 * 1024)
        )));
    }
    /// The error fields of a document; everything else is skipped without being kept.
    #[derive(Deserialize)]
    struct Probe {
        #[serde(default)]
        error: Option<String>,
        #[serde(default)]
        detail: Option<String>,
    }
    let probe: Option<Probe> = serde_json::from_slice(&outcome.stdout).ok();
    if let Some(Probe {
        error: Some(error),
        detail,
    }) = &probe
    {
        let detail = detail.as_deref().unwrap_or("");
        return Err(Failure(match error.as_str() {
            "import" => format!("{purpose} could not import conda: {detail}"),
            "parser" => format!("{purpose} could not build conda's parser: {detail}"),
            _ => format!("{purpose} failed: {error} {detail}")
                .trim_end()
                .to_owned(),
        }));
    }
    match (outcome.exit_code, probe) {
        (Some(0), Some(_)) => {
            serde_json::from_slice(&outcome.stdout).map_err(|e| invalid_json(purpose, &e))
        }
        (Some(0), None) => Err(Failure(format!(
            "{purpose} returned invalid JSON: SyntaxError"
        ))),
        (code, _) => Err(Failure(format!(
            "{purpose} exited with status {}",
            code.unwrap_or(-1)
        ))),
    }
}

/// What `conda info --json` says about the target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Info {
    pub version: String,
    pub interpreter: PathBuf,
}

/// Ask conda itself for its version and interpreter (the slow path).
pub async fn conda_info(target: &Target) -> Result<Info, Failure> {
    let spec = exec::Spec {
        program: target.conda_exe.clone(),
        args: vec!["info".into(), "--json".into()],
        cwd: None,
        stdin: None,
        timeout: target.timeout,
        stdout_limit: DOCUMENT_LIMIT,
        stderr_limit: HELPER_STDERR_LIMIT,
        env_remove: Vec::new(),
        limits: exec::Limits::current(),
        sandbox: None,
    };
    let outcome = exec::run(&spec, &CancellationToken::new())
        .await
        .map_err(|e| {
            Failure(format!(
                "conda info could not start: {}",
                exec::plain_os_error(&e)
            ))
        })?;
    if outcome.timed_out {
        return Err(Failure("conda info timed out".into()));
    }
    match outcome.exit_code {
        Some(0) => {}
        code => {
            return Err(Failure(format!(
                "conda info exited with status {}",
                code.unwrap_or(-1)
            )));
        }
    }
    let Ok(Value::Object(info)) = serde_json::from_slice::<Value>(&outcome.stdout) else {
        return Err(Failure("conda info did not return a JSON object".into()));
    };
    let version = match info.get("conda_version").and_then(Value::as_str) {
        Some(v) if !v.is_empty() => v.to_owned(),
        _ => {
            return Err(Failure(
                "conda info field 'conda_version' is missing or invalid".into(),
            ));
        }
    };
    let interpreter = match info.get("sys.executable").and_then(Value::as_str) {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => {
            return Err(Failure(
                "conda info field 'sys.executable' is missing or invalid".into(),
            ));
        }
    };
    Ok(Info {
        version,
        interpreter,
    })
}

/// The target's plugin inventory, fresh (restart checks).
pub async fn plugins(
    interpreter: &Path,
    timeout: Duration,
) -> Result<(String, Vec<Plugin>), Failure> {
    #[derive(Deserialize)]
    struct Doc {
        conda_version: String,
        plugins: Vec<Plugin>,
    }
    let doc: Doc = run_helper(interpreter, "plugins", &[], timeout, None).await?;
    Ok((doc.conda_version, doc.plugins))
}

/// Why a conda executable could not be selected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResolveError {
    NotFound(String),
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
        _ => (
            if cfg!(windows) { "conda.exe" } else { "conda" }.to_owned(),
            "PATH",
        ),
    };
    let expanded = expand_home(&candidate);
    let found = if expanded.components().count() > 1 || expanded.is_absolute() {
        Some(expanded)
    } else {
        which::which(&candidate).ok()
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

fn expand_home(path: &str) -> PathBuf {
    if let Some(rest) = path.strip_prefix("~/")
        && let Some(home) = std::env::var_os("HOME")
    {
        return PathBuf::from(home).join(rest);
    }
    PathBuf::from(path)
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
    use super::*;
    use std::io::Write;

    fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
        let path = dir.join(name);
        let mut f = std::fs::File::create(&path).unwrap();
        f.write_all(body.as_bytes()).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        path
    }

    #[test]
    fn shebang_forms() {
        let dir = tempfile::tempdir().unwrap();
        let plain = script(dir.path(), "a", "#!/opt/conda/bin/python -E\nimport x\n");
        assert_eq!(
            shebang_interpreter(&plain),
            Some("/opt/conda/bin/python".into())
        );
        let tramp = script(
            dir.path(),
            "b",
            "#!/bin/sh\n'''exec' \"/very/long/path/bin/python\" \"$0\" \"$@\"\n' '''\n",
        );
        assert_eq!(
            shebang_interpreter(&tramp),
            Some("/very/long/path/bin/python".into())
        );
        let binary = script(dir.path(), "c", "\x7fELF....");
        assert_eq!(shebang_interpreter(&binary), None);
    }

    #[test]
    fn resolution_rules() {
        let dir = tempfile::tempdir().unwrap();
        let conda = script(dir.path(), "conda", "#!/bin/sh\n");
        let link = dir.path().join("link");
        #[cfg(unix)]
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
}
