//! Which distribution installed this binary, read at run time for `ccm --version`.
//!
//! One release build serves both distributions, so the label cannot be compiled in: the
//! binary is the wheel's when pip's (or uv's) `RECORD` of the `ccm-mcp` distribution in
//! its prefix lists it, the conda package's when conda's metadata of the `ccm` package in
//! its prefix lists it — each with this file's size, so that another build copied over
//! it is not taken for the distribution's — and otherwise `source` (a cargo build).

use std::path::{Path, PathBuf};

/// What `ccm --version` prints: the version, then the distribution that installed this
/// binary and the build (a `git describe` of the commit) it was made from.
pub(crate) fn version_text() -> String {
    format!(
        "{} ({}; {})",
        env!("CARGO_PKG_VERSION"),
        distribution(),
        env!("CCM_BUILD")
    )
}

/// `wheel`, `conda`, or `source` when no distribution's metadata lists this binary.
pub(crate) fn distribution() -> &'static str {
    std::env::current_exe()
        .ok()
        .and_then(|exe| installed_by(&exe))
        .unwrap_or(env!("CCM_DISTRIBUTION"))
}

/// The distribution whose metadata in `exe`'s prefix (`<prefix>/bin/ccm`) lists it.
pub(crate) fn installed_by(exe: &Path) -> Option<&'static str> {
    let size = std::fs::metadata(exe).ok()?.len();
    let bin = exe.parent()?;
    let prefix = bin.parent()?;
    let relative = format!(
        "{}/{}",
        bin.file_name()?.to_str()?,
        exe.file_name()?.to_str()?
    );
    if conda_lists(prefix, &relative, size) {
        Some("conda")
    } else if wheel_lists(prefix, exe, size) {
        Some("wheel")
    } else {
        None
    }
}

/// `<prefix>/conda-meta/ccm-*.json` lists `relative` (`bin/ccm`) with this size.
fn conda_lists(prefix: &Path, relative: &str, size: u64) -> bool {
    entries(&prefix.join("conda-meta"))
        .filter(|p| starts(p, "ccm-", ".json"))
        .filter_map(|p| std::fs::read(p).ok())
        .filter_map(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
        .any(|record| {
            record["name"] == "ccm"
                && record["paths_data"]["paths"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|path| path["_path"] == relative && path["size_in_bytes"] == size)
        })
}

/// `<prefix>/lib/python*/site-packages/ccm_mcp-*.dist-info/RECORD` lists `exe` with
/// this size (RECORD's paths are relative to site-packages).
fn wheel_lists(prefix: &Path, exe: &Path, size: u64) -> bool {
    let Ok(exe) = std::fs::canonicalize(exe) else {
        return false;
    };
    let lists = |site: &Path, record: &str| {
        record.lines().any(|line| {
            let mut fields = line.rsplitn(3, ',');
            let (Some(listed_size), Some(_hash), Some(path)) =
                (fields.next(), fields.next(), fields.next())
            else {
                return false;
            };
            listed_size == size.to_string()
                && std::fs::canonicalize(site.join(path)).is_ok_and(|p| p == exe)
        })
    };
    for python in entries(&prefix.join("lib")).filter(|p| starts(p, "python", "")) {
        let site = python.join("site-packages");
        for dist in entries(&site).filter(|p| starts(p, "ccm_mcp-", ".dist-info")) {
            if let Ok(record) = std::fs::read_to_string(dist.join("RECORD"))
                && lists(&site, &record)
            {
                return true;
            }
        }
    }
    false
}

/// The file name of `path` starts with `prefix` and ends with `suffix`.
fn starts(path: &Path, prefix: &str, suffix: &str) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with(prefix) && n.ends_with(suffix))
}

/// The entries of a directory (none when it cannot be read).
fn entries(dir: &Path) -> impl Iterator<Item = PathBuf> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A prefix with `bin/ccm` (a few bytes) and nothing else.
    fn prefix() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("bin/ccm");
        std::fs::create_dir_all(exe.parent().unwrap()).unwrap();
        std::fs::write(&exe, b"ccm binary").unwrap();
        (dir, exe)
    }

    fn write(path: PathBuf, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn nothing_lists_a_cargo_build() {
        let (_dir, exe) = prefix();
        assert_eq!(installed_by(&exe), None);
    }

    #[test]
    fn the_wheel_is_what_pips_record_lists_with_its_size() {
        let (dir, exe) = prefix();
        let record = dir
            .path()
            .join("lib/python3.12/site-packages/ccm_mcp-0.1.0.dist-info/RECORD");
        write(
            record.clone(),
            "ccm_conda_plugin/plugin.py,sha256=x,10\n../../../bin/ccm,sha256=y,10\n",
        );
        assert_eq!(installed_by(&exe), Some("wheel"));
        // Another build copied over the wheel's: a different size, not the wheel's.
        write(record.clone(), "../../../bin/ccm,sha256=y,11\n");
        assert_eq!(installed_by(&exe), None);
        // Another distribution's RECORD, or a RECORD naming another file, is not enough.
        write(record, "../../../bin/other,sha256=y,10\n");
        assert_eq!(installed_by(&exe), None);
        let other = dir
            .path()
            .join("lib/python3.12/site-packages/other-1.0.dist-info/RECORD");
        write(other, "../../../bin/ccm,sha256=y,10\n");
        assert_eq!(installed_by(&exe), None);
    }

    #[test]
    fn the_conda_package_is_what_condas_metadata_lists_with_its_size() {
        let (dir, exe) = prefix();
        let meta = dir.path().join("conda-meta/ccm-0.1.0-h0_0.json");
        let record = |size: u64| {
            serde_json::json!({
                "name": "ccm",
                "files": ["bin/ccm"],
                "paths_data": {"paths": [{"_path": "bin/ccm", "size_in_bytes": size}]},
            })
            .to_string()
        };
        write(meta.clone(), &record(10));
        assert_eq!(installed_by(&exe), Some("conda"));
        write(meta.clone(), &record(11));
        assert_eq!(installed_by(&exe), None);
        // Another package's metadata does not count, even when it names bin/ccm.
        std::fs::remove_file(&meta).unwrap();
        let other = record(10).replace("\"ccm\"", "\"other\"");
        write(dir.path().join("conda-meta/ccm-tools-1.0-0.json"), &other);
        assert_eq!(installed_by(&exe), None);
    }
}
