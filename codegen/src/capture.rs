//! `codegen capture`: live discovery against a reference conda → a normalized snapshot.

use std::path::Path;
use std::time::Duration;

use ccm::host::discovery;
use ccm::host::target::Conda;
use ccm::model::snapshot::Snapshot;

pub(crate) fn run(conda_exe: Option<&str>, out: &Path) -> Result<(), String> {
    let env = std::env::var("CONDA_EXE").ok();
    let conda = discovery::resolve_executable(conda_exe, env.as_deref())
        .map_err(|e| format!("could not find the reference conda: {e}"))?;
    // The target resolved once (its `#!` line read here): discovery and the stamp share it.
    let target = Conda::resolve(conda);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    // The capture's children run under the default limits, in executions of its own.
    let executions = ccm::host::exec::Executions::new(ccm::host::exec::Limits::defaults());
    let found = runtime.block_on(discovery::discover(
        &executions,
        &target,
        Duration::from_secs(300),
    ));
    if found.catalog.root.is_none() {
        let reasons: Vec<_> = found
            .catalog
            .diagnostics
            .iter()
            .map(|d| d.reason.as_str())
            .collect();
        return Err(format!("discovery failed: {}", reasons.join("; ")));
    }
    let replacements = ccm::host::discovery::replacements(found.prefix.as_deref());
    let mut snapshot = Snapshot::new(
        &found.catalog,
        &found.plugins,
        found.python_version.clone(),
        &replacements,
    );
    snapshot.stamp = target
        .locate()
        .and_then(|l| ccm::host::site_scan::stamp(&l.site_dirs));
    if snapshot.stamp.is_none() {
        eprintln!(
            "warning: no target stamp (conda's metadata not found): the snapshot cannot serve instant starts"
        );
    }
    let path = out.join(format!("{}.json", snapshot.stem()));
    let text = snapshot.to_text();
    if std::fs::read_to_string(&path).ok().as_deref() == Some(text.as_str()) {
        eprintln!("Up-to-date: {}", path.display());
        return Ok(());
    }
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    eprintln!(
        "Captured conda {} ({} commands, {} plugins) into {}",
        snapshot.conda_version,
        snapshot.catalog.commands().len(),
        snapshot.plugins.len(),
        path.display()
    );
    Ok(())
}
