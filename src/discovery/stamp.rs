//! A cheap, Python-free view of what could change the target's plugin set: conda's own
//! distribution and every installed distribution that declares `conda` entry points,
//! read from the `*.dist-info`/`*.egg-info` directories on the target's `sys.path`.
//!
//! Restart checks compare two scans before paying for a helper run: when nothing relevant
//! changed on disk, the plugin inventory (and so the fingerprint) cannot have changed.

use std::path::{Path, PathBuf};

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
