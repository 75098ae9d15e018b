//! The audit log (`--audit-log FILE`): one JSON line per tool call that reached the policy.
//!
//! The file is opened once at startup (an [`Audit`], owned by the server), append-only
//! (`O_APPEND`, created `0600` when missing, close-on-exec so no child inherits it); a path that cannot be opened is a
//! startup error. Each line is serialized in full first and handed to the kernel with one
//! `write(2)` of the whole line (no user-space buffer, so nothing waits to be flushed);
//! with `O_APPEND` concurrent lines never interleave. A write that fails or comes up short
//! is logged to stderr and the call goes on.
//!
//! Redaction ([`redact`]) is pure and applies to every argv before it is written; values
//! the server withholds from children (its HTTP token, the token file's path) are
//! registered with [`Audit::withhold`] and never written either.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

mod redact;
mod url;

pub use redact::{REDACTED, redact, redact_quoted, redact_read};

/// The open log.
struct Log {
    file: File,
    /// Where it was opened (absolute), for the refusal of calls that name it.
    path: PathBuf,
    /// Device and inode: a call naming the log through another spelling or a hard link
    /// is still caught.
    identity: (u64, u64),
}

/// One server's audit log (none without `--audit-log`) and the values withheld from it.
#[derive(Default)]
pub struct Audit {
    log: Option<Log>,
    withheld: Mutex<Vec<String>>,
}

/// Why the log could not be opened (startup error, exit status 2).
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("the audit log cannot be opened for appending: {0}")]
    Open(String),
    #[error("the audit log is not a regular file")]
    NotAFile,
}

impl Audit {
    /// No audit log: nothing is written, no path is the log.
    pub fn none() -> Audit {
        Audit::default()
    }

    /// Open the log for appending (once, at startup).
    pub fn open(path: &Path) -> Result<Audit, AuditError> {
        let plain = |e: std::io::Error| AuditError::Open(e.kind().to_string());
        let file = OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .custom_flags(libc::O_CLOEXEC | libc::O_NOCTTY)
            .open(path)
            .map_err(plain)?;
        let meta = file.metadata().map_err(plain)?;
        if !meta.is_file() {
            return Err(AuditError::NotAFile);
        }
        let path = std::fs::canonicalize(path).map_err(plain)?;
        Ok(Audit {
            log: Some(Log {
                file,
                path,
                identity: (meta.dev(), meta.ino()),
            }),
            withheld: Mutex::default(),
        })
    }

    /// Whether calls are being logged.
    pub fn enabled(&self) -> bool {
        self.log.is_some()
    }

    /// Whether `path` is the log (same file, however spelled; symlinks followed).
    pub fn is_log(&self, path: &Path) -> bool {
        let Some(log) = &self.log else {
            return false;
        };
        std::fs::metadata(path).is_ok_and(|m| (m.dev(), m.ino()) == log.identity)
    }

    /// The log's device and inode (`None` without an audit log).
    pub fn identity(&self) -> Option<(u64, u64)> {
        self.log.as_ref().map(|log| log.identity)
    }

    /// Whether `path` is a directory that holds the log (an ancestor of it): a write that
    /// names it (`remove --all`, `create` over it) could delete the log with it.
    pub fn holds_log(&self, path: &Path) -> bool {
        let Some(log) = &self.log else {
            return false;
        };
        std::fs::canonicalize(path).is_ok_and(|dir| dir.is_dir() && log.path.starts_with(&dir))
    }

    /// A value that must never reach the log (replaced by [`REDACTED`] wherever it occurs).
    pub fn withhold(&self, secret: &str) {
        if secret.is_empty() {
            return;
        }
        if let Ok(mut withheld) = self.withheld.lock()
            && !withheld.iter().any(|s| s == secret)
        {
            withheld.push(secret.to_owned());
        }
    }

    /// The values withheld from the log ([`Audit::withhold`]), for the pure redaction.
    pub fn withheld(&self) -> Vec<String> {
        self.withheld.lock().map(|w| w.clone()).unwrap_or_default()
    }

    /// `argv` redacted by the rule of [`redact`] and with every withheld value removed.
    pub fn redacted(&self, argv: &[String]) -> Vec<String> {
        redact(argv, &self.withheld())
    }

    /// `argv` redacted as [`Audit::redacted`] does, each option judged as conda's parser
    /// reads it (`readings` from the policy's simulation: abbreviations resolved).
    pub fn redacted_read(&self, argv: &[String], readings: &[Option<Vec<String>>]) -> Vec<String> {
        redact_read(argv, readings, &self.withheld())
    }

    /// Append one line (a JSON object; a newline is added). Failures are logged, not raised.
    pub fn append(&self, entry: &serde_json::Value) {
        let Some(log) = &self.log else {
            return;
        };
        let Ok(text) = serde_json::to_string(entry) else {
            return;
        };
        // JSON allows U+0085, U+2028 and U+2029 raw inside strings, but many line readers
        // split on them: escaped, a line is one line for every reader.
        let mut line = escape_line_breaks(&text).into_bytes();
        line.push(b'\n');
        match (&log.file).write(&line) {
            Ok(n) if n == line.len() => {}
            Ok(_) => tracing::error!("an audit log line was written short"),
            Err(error) => {
                let why = error.kind().to_string();
                tracing::error!(%why, "an audit log line could not be written");
            }
        }
    }
}

/// `text` (serialized JSON) with the non-ASCII line breaks written as `\u` escapes.
fn escape_line_breaks(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\u{85}' | '\u{2028}' | '\u{2029}' => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests;
