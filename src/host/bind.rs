//! Plan binding for `--confirm-writes`: the question's preview and the confirmed run both
//! go through the binding program (`bind/program/*.py`, embedded), conda's own entry point under
//! the target's interpreter (`python -I -c`), which records what decides the run (the preview) and checks it again
//! before anything happens (the run).
//!
//! The preview ([`preview_spec`], its document read by [`split_preview`]) records conda's
//! configuration by source, the target prefix, the bytes of the input files conda reads
//! (`--file`, `env create -f`, `env update -f`; conda reads a private copy of exactly those
//! bytes) and each transaction's records (name, version, build, channel URL, package URL,
//! md5, sha256, size). [`Binding::new`] keeps that plan and the file copies in a directory
//! of the server's own (mode 0700 under its temporary directory, removed with the
//! binding). The run ([`Binding::run_spec`]) is the argv that was shown, run by conda's
//! entry point; conda reads the copies, and when the configuration, the target, an input
//! file or a transaction's records are not what the preview saw, nothing is fetched,
//! linked or run: the wrapper names the change ([`Binding::changed`]) and exits. Knows
//! nothing about MCP.

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use base64::Engine;
use serde::{Deserialize, Serialize};
use sha2::Digest;

use super::exec;

/// The wrapper's source, run with `python -I -c`: one program in parts (`bind/program/`),
/// concatenated in this order.
pub(crate) const SOURCE: &str = concat!(
    include_str!("bind/program/records.py"),
    include_str!("bind/program/paths.py"),
    include_str!("bind/program/shared.py"),
    include_str!("bind/program/cache.py"),
    include_str!("bind/program/target.py"),
    include_str!("bind/program/writes.py"),
    include_str!("bind/program/creations.py"),
    include_str!("bind/program/plan.py"),
    include_str!("bind/program/main.py"),
);
/// The wrapper's exit status when the run would differ from the plan.
pub(crate) const CHANGED_EXIT: i32 = 87;
/// Stdout a preview may take beyond the call's output limit: the plan document (the input
/// files' bytes, base64, at most 4 MiB raw, and the records).
const PLAN_ALLOWANCE: usize = 8 << 20;

/// How the preview runs: conda's dry run, or (for a command conda cannot dry-run) only as
/// far as conda's parse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Preview {
    DryRun,
    Inspect,
}

/// The preview's document (`program/plan.py`'s `Preview.document`).
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub(crate) struct Plan {
    pub protocol: u32,
    /// conda's command function (`conda.cli.main_create.execute`).
    #[serde(default)]
    pub command: Option<String>,
    /// The target prefix conda resolved.
    #[serde(default)]
    pub prefix: Option<String>,
    /// What the target was (`program/plan.py` `_state`): the run stops when it changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_state: Option<String>,
    /// Whether the plan binds the packages (a dry run) or not (inspect).
    #[serde(default)]
    pub packages: bool,
    /// The command deletes the target prefix (`remove --all`, `env remove`).
    #[serde(default)]
    pub deletes_prefix: Option<bool>,
    /// Packages installed in the target, for a command that deletes it.
    #[serde(default)]
    pub installed: Option<u64>,
    #[serde(default)]
    pub files: Vec<InputFile>,
    #[serde(default)]
    pub transactions: Vec<Vec<Setup>>,
    /// conda's configuration by source (compared whole; opaque here).
    #[serde(default)]
    pub configuration: serde_json::Value,
    /// What conda's dry run did not list (explicit packages, a clone): such a plan cannot
    /// be bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unpreviewed: Option<String>,
    /// Where the call's paths led at preview time (the working directory, the target, the
    /// file `conda config` writes, every argv value): the run stops when one leads
    /// elsewhere (opaque here; `program/paths.py` `bound_paths`).
    #[serde(default)]
    pub paths: serde_json::Value,
    /// The file `conda config` writes, resolved (for the question).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writes: Option<String>,
    /// The audit log's device and inode: the run stops when a path of the call is it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<(u64, u64)>,
    /// Why the preview could not bind the plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unbound: Option<String>,
}

/// One input file conda reads.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub(crate) struct InputFile {
    /// The value as the argv gives it.
    pub value: String,
    /// The local path conda reads (`None`: a URL, fetched at run time).
    #[serde(default)]
    pub path: Option<String>,
    /// Whether its bytes are bound (a local file that existed at preview time).
    #[serde(default)]
    pub bound: bool,
    #[serde(default)]
    pub size: Option<u64>,
    #[serde(default)]
    pub sha256: Option<String>,
    /// The bytes (base64) in the preview's document; moved to `copy` by [`Binding::new`].
    #[serde(default, skip_serializing)]
    pub content: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy: Option<String>,
    /// The bytes, decoded, until the question is built ([`Binding::forget_contents`]).
    #[serde(skip)]
    pub bytes: Option<Vec<u8>>,
}

/// One prefix of a transaction.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub(crate) struct Setup {
    pub prefix: String,
    /// Where the prefix led (symlinks resolved) when the transaction was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub real: Option<String>,
    #[serde(default)]
    pub unlink: Vec<Record>,
    #[serde(default)]
    pub link: Vec<Record>,
}

/// A package record as conda has it.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
pub(crate) struct Record {
    pub name: Option<String>,
    pub version: Option<String>,
    pub build: Option<String>,
    pub build_number: Option<u64>,
    pub subdir: Option<String>,
    /// The channel's URL.
    pub channel: Option<String>,
    pub url: Option<String>,
    #[serde(rename = "fn")]
    pub file_name: Option<String>,
    pub md5: Option<String>,
    pub sha256: Option<String>,
    pub size: Option<u64>,
    /// A record to remove: the sha256 of the paths it lists (what removing it deletes;
    /// the record is a file of the target, bound like the rest of the plan).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<String>,
}

/// Why a plan cannot be bound (the call is refused; nothing ran).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Unbound {
    #[error("the target's interpreter is unknown")]
    NoInterpreter,
    #[error("the preview did not describe the plan")]
    NoDocument,
    #[error("the preview's plan is larger than the server takes")]
    TooLarge,
    #[error("{0}")]
    Refused(String),
    #[error("the plan could not be kept ({0})")]
    Io(String),
}

/// A fresh random nonce for one preview's document.
pub(crate) fn nonce() -> String {
    let mut bytes = [0u8; 16];
    if getrandom::fill(&mut bytes).is_err() {
        // Without randomness the document is still the last line; a nonce nobody could
        // predict only makes that line unforgeable by conda's output.
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        bytes.copy_from_slice(&now.to_le_bytes());
    }
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("ccm-plan-{hex}")
}

fn wrapper_args(
    mode: &str,
    key: &OsString,
    conda: &Path,
    digest: Option<&str>,
    argv: &[OsString],
) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec!["-I".into(), "-c".into(), SOURCE.into(), mode.into()];
    args.push(key.clone());
    args.push(conda.as_os_str().to_owned());
    args.extend(digest.map(OsString::from));
    args.push("--".into());
    args.extend(argv.iter().cloned());
    args
}

/// The preview of `spec` (whose argv already carries `--dry-run --json` for a dry run)
/// through the wrapper under `interpreter`.
pub(crate) fn preview_spec(
    spec: &exec::Spec,
    interpreter: &Path,
    how: Preview,
    nonce: &str,
) -> exec::Spec {
    let mode = match how {
        Preview::DryRun => "preview",
        Preview::Inspect => "inspect",
    };
    let mut preview = spec.clone();
    preview.program = interpreter.to_path_buf();
    preview.args = wrapper_args(mode, &nonce.into(), &spec.program, None, &spec.args);
    preview.stdout_limit = spec.stdout_limit.saturating_add(PLAN_ALLOWANCE);
    preview
}

/// Take the plan document out of a preview's stdout (what is left is conda's own), or
/// why there is none.
pub(crate) fn split_preview(outcome: &mut exec::Outcome, nonce: &str) -> Result<Plan, Unbound> {
    if outcome.stdout_truncated {
        return Err(Unbound::TooLarge);
    }
    let marker = format!("\n{nonce} ");
    let stdout = &outcome.stdout;
    let at = stdout
        .windows(marker.len())
        .rposition(|w| w == marker.as_bytes())
        .ok_or(Unbound::NoDocument)?;
    let plan: Plan =
        serde_json::from_slice(&stdout[at + marker.len()..]).map_err(|_| Unbound::NoDocument)?;
    outcome.stdout.truncate(at);
    if let Some(why) = &plan.unbound {
        return Err(Unbound::Refused(why.clone()));
    }
    if let Some(what) = &plan.unpreviewed {
        return Err(Unbound::Refused(format!(
            "conda's dry run does not list the packages of {what}"
        )));
    }
    Ok(plan)
}

/// A plan bound for its run: the plan and the copies of its input files, in a directory
/// of the server's own (removed when the binding is dropped).
#[derive(Debug)]
pub(crate) struct Binding {
    dir: super::scratch::Scratch,
    interpreter: PathBuf,
    /// The sha256 of `plan.json` as written (the run refuses another).
    digest: String,
    pub plan: Plan,
}

impl Binding {
    /// Keep `plan` (its files' bytes become copies) for a run under `interpreter`; `log`
    /// is the audit log's device and inode ([`super::audit::Audit::identity`]).
    pub(crate) fn new(
        mut plan: Plan,
        interpreter: &Path,
        log: Option<(u64, u64)>,
    ) -> Result<Binding, Unbound> {
        let io = |e: std::io::Error| Unbound::Io(exec::plain_os_error(&e));
        let dir = super::scratch::Scratch::new("ccm-plan", &std::env::temp_dir()).map_err(io)?;
        for (index, file) in plan.files.iter_mut().enumerate() {
            let Some(content) = file.content.take() else {
                continue;
            };
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(content)
                .map_err(|_| Unbound::NoDocument)?;
            let name = file
                .path
                .as_deref()
                .and_then(|p| Path::new(p).file_name())
                .ok_or(Unbound::NoDocument)?;
            let folder = dir.path().join("files").join(index.to_string());
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&folder)
                .map_err(io)?;
            let copy = folder.join(name);
            write_new(&copy, &bytes).map_err(io)?;
            file.copy = Some(copy.to_string_lossy().into_owned());
            file.bytes = Some(bytes);
        }
        plan.log = log;
        let document = serde_json::to_vec(&plan).map_err(|e| Unbound::Io(e.to_string()))?;
        write_new(&dir.path().join("plan.json"), &document).map_err(io)?;
        let digest = sha2::Sha256::digest(&document)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        Ok(Binding {
            dir,
            interpreter: interpreter.to_path_buf(),
            digest,
            plan,
        })
    }

    /// The plan's directory (where the confirmed run reports what changed).
    pub(crate) fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Drop the input files' bytes once the question shows them (the copies stay).
    pub(crate) fn forget_contents(&mut self) {
        for file in &mut self.plan.files {
            file.bytes = None;
        }
    }

    /// The confirmed run of `spec` (the argv that was shown) through the wrapper.
    pub(crate) fn run_spec(&self, spec: &exec::Spec) -> exec::Spec {
        let mut run = spec.clone();
        run.program = self.interpreter.clone();
        run.args = wrapper_args(
            "run",
            &self.dir.path().as_os_str().to_owned(),
            &spec.program,
            Some(&self.digest),
            &spec.args,
        );
        // The wrapper's test hold (`program/main.py` `_hold_for_tests`): debug builds only.
        if !cfg!(debug_assertions) {
            run.env_remove.push("CCM_TEST_HOLD_FETCHED");
        }
        run
    }

    /// What changed, when the run (which ended with `exit_code`) stopped because it would
    /// differ from the plan: only the wrapper's own exit status says so, `changed.json`
    /// only says what, and how far the run got.
    pub(crate) fn changed(&self, exit_code: Option<i32>) -> Option<Stopped> {
        if exit_code != Some(CHANGED_EXIT) {
            return None;
        }
        #[derive(Deserialize)]
        struct Changed {
            changed: String,
            #[serde(default)]
            reached: Option<String>,
        }
        // The plan's directory is a place of the run's write bound: a link script could
        // have put a FIFO or a link to `/dev/zero` there first (attack 8).
        let file = self.dir.path().join("changed.json");
        let text = crate::host::files::read(&file, 64 << 10).unwrap_or_default();
        let changed: Changed = serde_json::from_slice(&text).unwrap_or(Changed {
            changed: "the run stopped before it began".into(),
            reached: None,
        });
        let reached = match changed.reached.as_deref() {
            None => Reached::Nothing,
            Some("fetched") => Reached::Fetched,
            Some("extracted") => Reached::Extracted,
            Some("removed") => Reached::Removed,
            // Not the wrapper's word: say the least that is sure.
            Some(_) => Reached::Unknown,
        };
        Some(Stopped {
            why: changed.changed,
            reached,
        })
    }
}

/// A confirmed run that stopped because it would differ from its plan.
#[derive(Debug, PartialEq)]
pub(crate) struct Stopped {
    /// What changed, in the wrapper's words.
    pub(crate) why: String,
    pub(crate) reached: Reached,
}

/// How far a stopped run got (`program/plan.py` `Run.reached`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Reached {
    /// Before anything was fetched.
    Nothing,
    /// A package was fetched into the package cache.
    Fetched,
    /// Every package was fetched and extracted; nothing linked, removed or run.
    Extracted,
    /// The transaction ran; the target was about to be deleted whole.
    Removed,
    /// `changed.json` says something the wrapper does not write.
    Unknown,
}

impl Reached {
    /// What the stopped run did and did not do, for its result.
    pub(crate) fn done(self) -> &'static str {
        match self {
            Reached::Nothing => "nothing was fetched, installed or run",
            Reached::Fetched => {
                "nothing was installed or run; what was fetched is in the package cache"
            }
            Reached::Extracted => {
                "nothing in the environment was linked, removed or run; the packages were \
                 fetched into the package cache"
            }
            Reached::Removed => {
                "the transaction ran, its packages' scripts included; the environment's \
                 directory was not deleted"
            }
            Reached::Unknown => "the run stopped before its next step",
        }
    }
}

/// Create `path` (it must not exist) with `bytes`, readable by the server's user only.
fn write_new(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(bytes)
}

#[cfg(test)]
mod tests;
