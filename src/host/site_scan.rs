//! A cheap, Python-free view of what could change the target's plugin set: conda's own
//! distribution and every installed distribution that declares `conda` entry points,
//! read from the `*.dist-info`/`*.egg-info` directories on the target's `sys.path`.
//!
//! Restart checks compare two scans before paying for a helper run: when nothing relevant
//! changed on disk, the plugin inventory (and so the fingerprint) cannot have changed.
//!
//! The *target stamp* goes one step further, with no process at all: over the
//! site-packages the resolved target finds from its entry script
//! ([`crate::host::target::Conda::locate`]), it digests conda's version and every
//! `conda` entry point (distribution, version, name, value) but ccm's own launcher's
//! (`model::stamp::is_own_launcher`). A baked snapshot records the
//! stamp of the conda it was captured from; a target with the same stamp can be served from
//! that snapshot before live discovery has finished.

use std::path::{Path, PathBuf};

use serde::Serialize;

pub use crate::model::stamp::Stamp;

/// One distribution that matters for the plugin set.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Record {
    /// Directory holding the metadata (`site-packages`).
    pub site: PathBuf,
    /// Metadata directory name, e.g. `conda_pypi-0.13.1.dist-info` (carries name and version).
    pub metadata_dir: String,
    /// The `[conda]` section of `entry_points.txt`, normalised (trimmed, sorted lines).
    pub conda_entry_points: Vec<String>,
}

/// The relevant distributions, sorted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Scan(pub Vec<Record>);

/// Scan the given `sys.path` directories.
pub fn scan(site_dirs: &[PathBuf]) -> Scan {
    let mut records = Vec::new();
    for site in site_dirs {
        let Ok(entries) = std::fs::read_dir(site) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !(name.ends_with(".dist-info") || name.ends_with(".egg-info")) {
                continue;
            }
            let conda_entry_points = conda_section(&entry.path().join("entry_points.txt"));
            let is_conda = distribution_name(&name).eq_ignore_ascii_case("conda");
            if is_conda || !conda_entry_points.is_empty() {
                records.push(Record {
                    site: site.clone(),
                    metadata_dir: name,
                    conda_entry_points,
                });
            }
        }
    }
    records.sort();
    Scan(records)
}

/// `name` from `name-1.2.3.dist-info`.
pub fn distribution_name(metadata_dir: &str) -> &str {
    let stem = metadata_dir
        .trim_end_matches(".dist-info")
        .trim_end_matches(".egg-info");
    stem.split_once('-').map_or(stem, |(name, _)| name)
}

/// Lines of the `[conda]` section of an `entry_points.txt`, trimmed and sorted.
pub fn conda_section(path: &Path) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    let mut inside = false;
    let mut lines = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            inside = line == "[conda]";
            continue;
        }
        if inside && !line.is_empty() && !line.starts_with('#') && !line.starts_with(';') {
            lines.push(line.to_owned());
        }
    }
    lines.sort();
    lines
}

/// One `conda` entry point as the stamp sees it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
struct EntryPoint {
    distribution: String,
    version: String,
    entry_point: String,
    value: String,
}

/// The stamp of the distributions in `site_dirs`; `None` when conda's own metadata is
/// missing (then only live discovery can tell).
pub fn stamp(site_dirs: &[PathBuf]) -> Option<Stamp> {
    let scan = scan(site_dirs);
    let mut conda_version = None;
    let mut entry_points = Vec::new();
    for record in &scan.0 {
        let dir = record.site.join(&record.metadata_dir);
        let (name, version) = metadata_name_version(&dir)?;
        if crate::model::catalog::normalize_distribution(&name) == "conda"
            && conda_version.is_none()
        {
            conda_version = Some(version.clone());
        }
        for line in &record.conda_entry_points {
            let Some((entry_point, value)) = line.split_once('=') else {
                continue;
            };
            // ccm's own launcher changes nothing a snapshot serves.
            if crate::model::stamp::is_own_launcher(&name, entry_point.trim(), value.trim()) {
                continue;
            }
            entry_points.push(EntryPoint {
                distribution: name.clone(),
                version: version.clone(),
                entry_point: entry_point.trim().to_owned(),
                value: value.trim().to_owned(),
            });
        }
    }
    entry_points.sort();
    entry_points.dedup();
    let conda_version = conda_version?;
    let payload = serde_json::json!({"conda_version": conda_version, "entry_points": entry_points});
    Some(Stamp {
        digest: crate::model::catalog::sha256_hex(
            crate::model::catalog::canonical_json(&payload).as_bytes(),
        ),
        conda_version,
    })
}

/// Whether ccm's own launcher is installed (`model::stamp::is_own_launcher`).
pub fn has_own_launcher(site_dirs: &[PathBuf]) -> bool {
    scan(site_dirs).0.iter().any(|record| {
        let dir = record.site.join(&record.metadata_dir);
        let Some((name, _)) = metadata_name_version(&dir) else {
            return false;
        };
        record.conda_entry_points.iter().any(|line| {
            line.split_once('=').is_some_and(|(entry_point, value)| {
                crate::model::stamp::is_own_launcher(&name, entry_point.trim(), value.trim())
            })
        })
    })
}

/// `Name` and `Version` from a distribution's `METADATA` (or `PKG-INFO`) headers.
fn metadata_name_version(dir: &Path) -> Option<(String, String)> {
    let text = std::fs::read_to_string(dir.join("METADATA"))
        .or_else(|_| std::fs::read_to_string(dir.join("PKG-INFO")))
        .ok()?;
    let mut name = None;
    let mut version = None;
    for line in text.lines() {
        if line.is_empty() {
            break; // end of the headers
        }
        if let Some(v) = line.strip_prefix("Name:") {
            name.get_or_insert_with(|| v.trim().to_owned());
        } else if let Some(v) = line.strip_prefix("Version:") {
            version.get_or_insert_with(|| v.trim().to_owned());
        }
    }
    Some((name?, version?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dist(site: &Path, dir: &str, entry_points: Option<&str>) {
        let path = site.join(dir);
        std::fs::create_dir_all(&path).unwrap();
        std::fs::write(path.join("METADATA"), "Name: x\n").unwrap();
        if let Some(text) = entry_points {
            std::fs::write(path.join("entry_points.txt"), text).unwrap();
        }
    }

    #[test]
    fn sees_conda_and_plugins_only() {
        let site = tempfile::tempdir().unwrap();
        dist(site.path(), "conda-26.7.1.dist-info", None);
        dist(
            site.path(),
            "requests-2.0.dist-info",
            Some("[console_scripts]\nr = r:main\n"),
        );
        dist(
            site.path(),
            "conda_pypi-0.13.1.dist-info",
            Some("[console_scripts]\nx = y\n[conda]\n  pypi = conda_pypi.plugin \n"),
        );
        let found = scan(&[site.path().to_path_buf(), site.path().join("missing")]);
        let names: Vec<_> = found.0.iter().map(|r| r.metadata_dir.as_str()).collect();
        assert_eq!(
            names,
            ["conda-26.7.1.dist-info", "conda_pypi-0.13.1.dist-info"]
        );
        assert_eq!(found.0[1].conda_entry_points, ["pypi = conda_pypi.plugin"]);
    }

    #[test]
    fn stamp_covers_version_and_entry_points_only() {
        let site = tempfile::tempdir().unwrap();
        let write = |dir: &str, meta: &str, eps: Option<&str>| {
            let path = site.path().join(dir);
            std::fs::create_dir_all(&path).unwrap();
            std::fs::write(path.join("METADATA"), meta).unwrap();
            if let Some(e) = eps {
                std::fs::write(path.join("entry_points.txt"), e).unwrap();
            }
        };
        let dirs = [site.path().to_path_buf()];
        assert_eq!(stamp(&dirs), None, "no conda metadata, no stamp");
        write(
            "conda-26.7.1.dist-info",
            "Name: conda\nVersion: 26.7.1\n\nbody Version: 9\n",
            None,
        );
        let plain = stamp(&dirs).unwrap();
        assert_eq!(plain.conda_version, "26.7.1");
        write(
            "requests-2.0.dist-info",
            "Name: requests\nVersion: 2.0\n",
            Some("[console_scripts]\nx = y\n"),
        );
        assert_eq!(
            stamp(&dirs).unwrap(),
            plain,
            "non-plugin distributions do not count"
        );
        write(
            "p-1.0.dist-info",
            "Name: p\nVersion: 1.0\n",
            Some("[conda]\np = p.plugin\n"),
        );
        let with_plugin = stamp(&dirs).unwrap();
        assert_ne!(with_plugin, plain);
        write(
            "p-1.0.dist-info",
            "Name: p\nVersion: 1.1\n",
            Some("[conda]\np = p.plugin\n"),
        );
        assert_ne!(
            stamp(&dirs).unwrap(),
            with_plugin,
            "a plugin version counts"
        );
    }

    #[test]
    fn ccm_own_launcher_is_not_in_the_stamp() {
        let site = tempfile::tempdir().unwrap();
        let write = |dir: &str, meta: &str, eps: &str| {
            let path = site.path().join(dir);
            std::fs::create_dir_all(&path).unwrap();
            std::fs::write(path.join("METADATA"), meta).unwrap();
            std::fs::write(path.join("entry_points.txt"), eps).unwrap();
        };
        let dirs = [site.path().to_path_buf()];
        write(
            "conda-26.7.1.dist-info",
            "Name: conda\nVersion: 26.7.1\n",
            "",
        );
        let plain = stamp(&dirs).unwrap();
        write(
            "ccm_mcp-0.1.0.dist-info",
            "Name: ccm-mcp\nVersion: 0.1.0\n",
            "[conda]\nccm = ccm_conda_plugin.plugin\n",
        );
        assert_eq!(stamp(&dirs).unwrap(), plain, "the launcher alone");
        assert!(has_own_launcher(&dirs));
        // Anything else it would declare counts, and so does another value or name.
        for other in [
            "[conda]\nccm = ccm_conda_plugin.plugin\nx = y.plugin\n",
            "[conda]\nccm = ccm_conda_plugin.other\n",
            "[conda]\nmcp = ccm_conda_plugin.plugin\n",
        ] {
            write(
                "ccm_mcp-0.1.0.dist-info",
                "Name: ccm-mcp\nVersion: 0.1.0\n",
                other,
            );
            assert_ne!(stamp(&dirs).unwrap(), plain, "{other}");
        }
        write(
            "ccm_mcp-0.1.0.dist-info",
            "Name: not-ccm\nVersion: 0.1.0\n",
            "[conda]\nccm = ccm_conda_plugin.plugin\n",
        );
        assert_ne!(stamp(&dirs).unwrap(), plain, "another distribution");
    }

    #[test]
    fn detects_added_and_changed_plugins() {
        let site = tempfile::tempdir().unwrap();
        dist(site.path(), "conda-26.7.1.dist-info", None);
        let dirs = [site.path().to_path_buf()];
        let before = scan(&dirs);
        assert_eq!(before, scan(&dirs));
        dist(
            site.path(),
            "extra-1.0.dist-info",
            Some("[conda]\nextra = extra.plugin\n"),
        );
        let added = scan(&dirs);
        assert_ne!(before, added);
        std::fs::write(
            site.path().join("extra-1.0.dist-info/entry_points.txt"),
            "[conda]\nextra = extra.other\n",
        )
        .unwrap();
        assert_ne!(added, scan(&dirs));
    }
}
