//! Runs of the embedded helper (the parts in `helper/`, one program, with `python -I -c`)
//! and of `conda info --json`, each under [`crate::host::exec`] with an output cap of its
//! own; every failure becomes a fixed reason text ([`HelperFailure`]).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{CatalogDocument, DOCUMENT_LIMIT, HelperFailure, InterpreterFacts};
use crate::host::exec;
use crate::model::catalog::Plugin;

/// The helper's source, run with `python -I -c`: one program from the parts in `helper/`,
/// in this order (`document.py` first, `main.py`, which runs it, last).
pub const HELPER_SOURCE: &str = concat!(
    include_str!("helper/document.py"),
    include_str!("helper/traverse.py"),
    include_str!("helper/catalog.py"),
    include_str!("helper/roundtrip.py"),
    include_str!("helper/targets.py"),
    include_str!("helper/completion.py"),
    include_str!("helper/main.py"),
);
/// Stderr kept from helper runs, for logs only.
const HELPER_STDERR_LIMIT: usize = 64 * 1024;
const PROTOCOL: u64 = 1;

pub(super) async fn catalog_run(
    exec: &exec::Executions,
    timeout: Duration,
    interpreter: &Path,
) -> Result<(CatalogDocument, InterpreterFacts), HelperFailure> {
    let mut document: CatalogDocument =
        run_helper(exec, interpreter, "catalog", &[], timeout, None).await?;
    if document.protocol != PROTOCOL {
        return Err(HelperFailure(
            "conda catalog discovery returned invalid JSON: protocol".into(),
        ));
    }
    if document.catalog.prog.is_empty() || document.catalog.root.is_none() {
        return Err(HelperFailure(
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

fn invalid_json(purpose: &str, error: &serde_json::Error) -> HelperFailure {
    let class = match error.classify() {
        serde_json::error::Category::Io => "IoError",
        serde_json::error::Category::Syntax => "SyntaxError",
        serde_json::error::Category::Data => "DataError",
        serde_json::error::Category::Eof => "EofError",
    };
    HelperFailure(format!("{purpose} returned invalid JSON: {class}"))
}

/// Run the embedded helper in `mode` under `interpreter` (one of `exec`'s executions); its
/// document parsed straight into `T` (no intermediate JSON tree), or why not.
pub async fn run_helper<T: serde::de::DeserializeOwned>(
    exec: &exec::Executions,
    interpreter: &Path,
    mode: &str,
    extra: &[String],
    timeout: Duration,
    stdin: Option<Vec<u8>>,
) -> Result<T, HelperFailure> {
    run_helper_in(exec, interpreter, mode, extra, timeout, stdin, None).await
}

/// [`run_helper`] in a working directory of the caller's (`None`: the server's).
pub async fn run_helper_in<T: serde::de::DeserializeOwned>(
    exec: &exec::Executions,
    interpreter: &Path,
    mode: &str,
    extra: &[String],
    timeout: Duration,
    stdin: Option<Vec<u8>>,
    cwd: Option<PathBuf>,
) -> Result<T, HelperFailure> {
    let purpose = match mode {
        "catalog" => "conda catalog discovery",
        "plugins" => "conda plugin discovery",
        "completion" => "conda completion metadata",
        "targets" => "conda target resolution",
        _ => "conda helper",
    };
    let mut args: Vec<OsString> = vec!["-I".into(), "-c".into(), HELPER_SOURCE.into(), mode.into()];
    args.extend(extra.iter().map(OsString::from));
    let outcome = run_child(
        exec,
        interpreter.to_path_buf(),
        args,
        stdin,
        cwd,
        timeout,
        "conda target interpreter",
    )
    .await?;
    if !outcome.stderr.is_empty() {
        tracing::debug!(
            purpose,
            stderr = %String::from_utf8_lossy(&outcome.stderr),
            "helper stderr"
        );
    }
    if outcome.timed_out {
        return Err(HelperFailure(format!("{purpose} timed out")));
    }
    if outcome.stdout_truncated {
        return Err(HelperFailure(format!(
            "{purpose} output exceeds the {} MiB limit",
            DOCUMENT_LIMIT / (1024 * 1024)
        )));
    }
    read_document(purpose, &outcome)
}

/// The helper's document in `outcome`, parsed straight into `T`, or the error it reports,
/// or why it is not one.
fn read_document<T: serde::de::DeserializeOwned>(
    purpose: &str,
    outcome: &exec::Outcome,
) -> Result<T, HelperFailure> {
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
        return Err(HelperFailure(match error.as_str() {
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
        (Some(0), None) => Err(HelperFailure(format!(
            "{purpose} returned invalid JSON: SyntaxError"
        ))),
        (code, _) => Err(HelperFailure(format!(
            "{purpose} exited with status {}",
            code.unwrap_or(-1)
        ))),
    }
}

/// Run one discovery child (the helper, or `conda info --json`) with discovery's own output
/// caps; `what` names it when it cannot start.
async fn run_child(
    exec: &exec::Executions,
    program: PathBuf,
    args: Vec<OsString>,
    stdin: Option<Vec<u8>>,
    cwd: Option<PathBuf>,
    timeout: Duration,
    what: &str,
) -> Result<exec::Outcome, HelperFailure> {
    let spec = exec::Spec {
        program,
        args,
        cwd,
        stdin,
        timeout,
        stdout_limit: DOCUMENT_LIMIT,
        stderr_limit: HELPER_STDERR_LIMIT,
        env_remove: Vec::new(),
        limits: exec.limits().clone(),
        sandbox: None,
        write_bound: None,
    };
    exec.run(&spec, &CancellationToken::new())
        .await
        .map_err(|e| {
            HelperFailure(format!(
                "{what} could not start: {}",
                exec::plain_os_error(&e)
            ))
        })
}

/// What `conda info --json` says about the target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Info {
    pub version: String,
    pub interpreter: PathBuf,
}

/// Ask conda itself for its version and interpreter (the slow path).
pub async fn conda_info(
    exec: &exec::Executions,
    conda_exe: &Path,
    timeout: Duration,
) -> Result<Info, HelperFailure> {
    let args = vec!["info".into(), "--json".into()];
    let outcome = run_child(
        exec,
        conda_exe.to_path_buf(),
        args,
        None,
        None,
        timeout,
        "conda info",
    )
    .await?;
    if outcome.timed_out {
        return Err(HelperFailure("conda info timed out".into()));
    }
    match outcome.exit_code {
        Some(0) => {}
        code => {
            return Err(HelperFailure(format!(
                "conda info exited with status {}",
                code.unwrap_or(-1)
            )));
        }
    }
    let Ok(Value::Object(info)) = serde_json::from_slice::<Value>(&outcome.stdout) else {
        return Err(HelperFailure(
            "conda info did not return a JSON object".into(),
        ));
    };
    let version = match info.get("conda_version").and_then(Value::as_str) {
        Some(v) if !v.is_empty() => v.to_owned(),
        _ => {
            return Err(HelperFailure(
                "conda info field 'conda_version' is missing or invalid".into(),
            ));
        }
    };
    let interpreter = match info.get("sys.executable").and_then(Value::as_str) {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => {
            return Err(HelperFailure(
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
    exec: &exec::Executions,
    interpreter: &Path,
    timeout: Duration,
) -> Result<(String, Vec<Plugin>), HelperFailure> {
    #[derive(Deserialize)]
    struct Doc {
        conda_version: String,
        plugins: Vec<Plugin>,
    }
    let doc: Doc = run_helper(exec, interpreter, "plugins", &[], timeout, None).await?;
    Ok((doc.conda_version, doc.plugins))
}
