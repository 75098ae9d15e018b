//! Settings parsed from flags and their environment variables: the child limits
//! (sizes, counts, withheld variables), `--classify` and `--allow-paths`.

use std::path::PathBuf;

use super::numbers::positive_int;
use super::{
    ALLOW_PATHS_VAR, CLASSIFY_VAR, Environment, Options, TOOLS_VAR, UsageError, WRITE_ENVS_VAR,
};
use crate::tools::policy::Access;
use crate::tools::policy::write_envs::Scope;
use crate::tools::select::Selection;

/// Environment variables of the limit flags.
pub const MEMORY_LIMIT_VAR: &str = "CCM_MEMORY_LIMIT";
pub const FILE_SIZE_LIMIT_VAR: &str = "CCM_FILE_SIZE_LIMIT";
pub const PROCESS_LIMIT_VAR: &str = "CCM_PROCESS_LIMIT";
pub const CHILD_ENV_REMOVE_VAR: &str = "CCM_CHILD_ENV_REMOVE";

pub(super) fn limit_settings(
    options: &Options,
    env: &Environment,
) -> Result<crate::host::exec::LimitSettings, UsageError> {
    use crate::host::exec::Limit;
    fn given<'a>(
        env: &'a Environment,
        flag: &'static str,
        value: &'a Option<String>,
        var: &'static str,
    ) -> Option<(&'static str, &'a str)> {
        value
            .as_deref()
            .map(|v| (flag, v))
            .or_else(|| env.get(var).map(|v| (var, v)))
    }
    let size = |given: Option<(&str, &str)>| -> Result<Limit, UsageError> {
        match given {
            None => Ok(Limit::Default),
            Some((source, text)) => {
                parse_size(text).map_err(|why| UsageError(format!("argument {source}: {why}")))
            }
        }
    };
    let memory = size(given(
        env,
        "--memory-limit",
        &options.memory_limit,
        MEMORY_LIMIT_VAR,
    ))?;
    let file_size = size(given(
        env,
        "--file-size-limit",
        &options.file_size_limit,
        FILE_SIZE_LIMIT_VAR,
    ))?;
    let processes = match given(
        env,
        "--process-limit",
        &options.process_limit,
        PROCESS_LIMIT_VAR,
    ) {
        None => Limit::Default,
        Some((_, text)) if text.trim() == "unlimited" => Limit::Unlimited,
        Some((source, text)) => Limit::At(positive_int(source, text)? as u64),
    };
    let mut child_env_remove = Vec::new();
    let from_env = env
        .get(CHILD_ENV_REMOVE_VAR)
        .map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    for name in options
        .child_env_remove
        .iter()
        .map(String::as_str)
        .chain(from_env)
    {
        if name.is_empty() || name.contains(['=', '\0']) {
            return Err(UsageError(
                "argument --child-env-remove: give an environment variable name (no '=')".into(),
            ));
        }
        if !child_env_remove.iter().any(|n| n == name) {
            child_env_remove.push(name.to_owned());
        }
    }
    Ok(crate::host::exec::LimitSettings {
        memory,
        file_size,
        processes,
        child_env_remove,
    })
}

/// Why a text is not a size (the operator's own text, which the message repeats).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    #[error("'{0}' is not a size; give bytes, a number with KiB, MiB, GiB or TiB, or 'unlimited'")]
    Unit(String),
    #[error("'{0}' is not a size; give bytes, e.g. 4GiB, or 'unlimited'")]
    Number(String),
    #[error("must be at least one byte")]
    BelowOneByte,
    #[error("must be at least 1MiB")]
    BelowOneMiB,
}

/// `1073741824`, `4GiB`, `4G`, `512MiB`, `64KiB`, `1.5GiB`, `unlimited`.
pub fn parse_size(text: &str) -> Result<crate::host::exec::Limit, SizeError> {
    let text = text.trim();
    if text == "unlimited" {
        return Ok(crate::host::exec::Limit::Unlimited);
    }
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let multiplier: u64 = match unit.trim() {
        "" | "B" => 1,
        "K" | "KiB" | "k" => 1 << 10,
        "M" | "MiB" => 1 << 20,
        "G" | "GiB" => 1 << 30,
        "T" | "TiB" => 1 << 40,
        _ => {
            return Err(SizeError::Unit(text.to_owned()));
        }
    };
    let value: f64 = number
        .parse()
        .map_err(|_| SizeError::Number(text.to_owned()))?;
    let bytes = value * multiplier as f64;
    if !bytes.is_finite() || bytes < 1.0 || bytes > u64::MAX as f64 {
        return Err(SizeError::BelowOneByte);
    }
    // Below 1 MiB nothing (not even the dynamic loader) could run.
    if bytes < (1u64 << 20) as f64 {
        return Err(SizeError::BelowOneMiB);
    }
    Ok(crate::host::exec::Limit::At(bytes as u64))
}

/// `--classify` flags, then `CCM_CLASSIFY` (comma-separated); a later entry for the same
/// tool wins.
pub(super) fn classifications(
    options: &Options,
    env: &Environment,
) -> Result<Vec<(String, Access)>, UsageError> {
    let from_env = env.get(CLASSIFY_VAR).unwrap_or("");
    let entries = options
        .classify
        .iter()
        .map(String::as_str)
        .chain(from_env.split(',').map(str::trim).filter(|e| !e.is_empty()));
    let mut out: Vec<(String, Access)> = Vec::new();
    for entry in entries {
        let parsed = entry
            .split_once('=')
            .and_then(|(tool, access)| Some((tool, Access::parse(access)?)))
            .filter(|(tool, _)| {
                !tool.is_empty()
                    && tool
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "_-".contains(c))
            });
        let Some((tool, access)) = parsed else {
            return Err(UsageError(format!(
                "--classify: '{}' is not TOOL=read|write|exec (TOOL: a canonical tool name such as conda_spawn)",
                entry.chars().take(64).collect::<String>().escape_default()
            )));
        };
        out.retain(|(t, _)| t != tool);
        out.push((tool.to_owned(), access));
    }
    Ok(out)
}

/// `--allow-paths` entries, then `CCM_ALLOW_PATHS`: absolute directories that exist.
pub(super) fn allowed_paths(
    options: &Options,
    env: &Environment,
) -> Result<Option<Vec<PathBuf>>, UsageError> {
    let from_env = env.get(ALLOW_PATHS_VAR).unwrap_or("");
    let entries: Vec<&str> = options
        .allow_paths
        .iter()
        .flat_map(|e| e.split(','))
        .chain(from_env.split(','))
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .collect();
    if entries.is_empty() {
        return Ok(None);
    }
    let mut dirs = Vec::new();
    for entry in entries {
        let path = PathBuf::from(entry);
        if !path.is_absolute() || !path.is_dir() {
            return Err(UsageError(format!(
                "--allow-paths: '{}' is not an existing absolute directory",
                entry.chars().take(64).collect::<String>().escape_default()
            )));
        }
        dirs.push(path);
    }
    Ok(Some(dirs))
}

/// `--tools` (repeatable, comma-separated), else `CCM_TOOLS`; `None` when neither is given.
pub(super) fn selection(
    options: &Options,
    env: &Environment,
) -> Result<Option<Selection>, UsageError> {
    let (source, entries): (&str, Vec<&str>) = if !options.tools.is_empty() {
        (
            "--tools",
            options.tools.iter().map(String::as_str).collect(),
        )
    } else if let Some(value) = env.get(TOOLS_VAR) {
        (TOOLS_VAR, vec![value])
    } else {
        return Ok(None);
    };
    Selection::parse(entries)
        .map(Some)
        .map_err(|why| UsageError(format!("{source}: {why}")))
}

/// `--write-envs` (repeatable, comma-separated), else `CCM_WRITE_ENVS`; it narrows
/// `--allow-write`, so it needs it. Errors name the entry's position, never its text.
pub(super) fn write_scope(
    options: &Options,
    env: &Environment,
) -> Result<Option<Scope>, UsageError> {
    let (source, entries): (&str, Vec<&str>) = if !options.write_envs.is_empty() {
        (
            "--write-envs",
            options.write_envs.iter().map(String::as_str).collect(),
        )
    } else if let Some(value) = env.get(WRITE_ENVS_VAR) {
        (WRITE_ENVS_VAR, vec![value])
    } else {
        return Ok(None);
    };
    if !options.allow_write {
        return Err(UsageError(format!(
            "{source} narrows --allow-write: give --allow-write too"
        )));
    }
    Scope::parse(entries)
        .map(Some)
        .map_err(|why| UsageError(format!("{source}: {why}")))
}
