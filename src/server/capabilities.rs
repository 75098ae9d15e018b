//! The `conda://capabilities` document: the fixed parts (catalog, plugins, fingerprint,
//! generated tools and their compilers, the baked snapshot's status, path confinement,
//! the toolset: `--tools`, folded tools, tools left out of the listing and why),
//! serialized once when the tools are built, and the parts read when it is served
//! (sandbox, restart, startup, limits).

use std::collections::BTreeMap;

use rmcp::model::Resource;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::config::Config;
use crate::host::confine::Confinement;
use crate::host::discovery::Discovery;
use crate::host::exec;
use crate::host::sandbox::Sandbox;
use crate::model::catalog::{Catalog, Command, Diagnostic, canonical_json};
use crate::tools::listing::Shaped;
use crate::tools::select::Selected;
use crate::tools::toolset::Toolset;

pub const CAPABILITIES_URI: &str = "conda://capabilities";

/// The fixed parts of the document, as JSON text (the catalog alone is hundreds of
/// kilobytes; it is serialized once and never held as a tree).
pub(super) type Fixed = BTreeMap<&'static str, Box<RawValue>>;

/// The resource as listed.
pub(super) fn resource(size: usize) -> Resource {
    Resource::new(CAPABILITIES_URI, "conda_capabilities")
        .with_title("Conda CLI capabilities")
        .with_description("Startup command catalog and external plugin metadata.")
        .with_mime_type("application/json")
        .with_size(size as u64)
}

/// The fixed parts for these tools.
pub(super) fn fixed(
    found: &Discovery,
    toolset: &Toolset,
    config: &Config,
    confinement: &Confinement,
) -> Fixed {
    let compilers: BTreeMap<&str, &str> = toolset
        .generated
        .iter()
        .map(|t| (t.name.as_str(), t.compiler.label()))
        .collect();
    let mut capabilities: Fixed = BTreeMap::new();
    capabilities.insert("conda_version", raw(&found.catalog.conda_version));
    capabilities.insert("discovery_fingerprint", raw(&found.fingerprint()));
    capabilities.insert("generated_tools", raw(&toolset.generated_names()));
    capabilities.insert("plugins", raw(&found.plugins));
    capabilities.insert("target_executable", raw(&config.conda_exe));
    let write_envs = config.write_envs.as_ref().map(|scope| scope.patterns());
    capabilities.insert("write_envs", raw(&write_envs));
    capabilities.insert(
        "write_bound",
        raw(&write_bound(config, confinement, found.prefix.as_deref())),
    );
    capabilities.insert("compilers", raw(&compilers));
    capabilities.insert("snapshot", raw(&snapshot_status(found)));
    capabilities.insert(
        "paths",
        raw(&serde_json::json!({
            "confined": !confinement.is_unrestricted(),
            "allowed": confinement.dirs(),
        })),
    );
    capabilities
}

/// The `write_bound` field: whether writes nobody confirms are held by the kernel to the
/// places their gates admitted (`host::sandbox::bound`), for the run's whole life.
fn write_bound(
    config: &Config,
    confinement: &Confinement,
    root_prefix: Option<&std::path::Path>,
) -> Value {
    use crate::host::sandbox::{Inputs, bound};
    let narrow = config.write_envs.is_some();
    if !config.allow_write || (!narrow && confinement.is_unrestricted()) {
        return json!({"state": "not_needed",
            "reason": "writes are not confined (no --allow-paths or --write-envs with --allow-write)"});
    }
    let writable = if narrow {
        "the target environments (--write-envs), as resolved when the call was judged"
    } else {
        "the allowed directories (--allow-paths; of the HTTP default scope, those that hold \
         no part of conda's root prefix but its envs/), and the targets"
    };
    let conda: Vec<std::path::PathBuf> =
        bound::conda_places(&Inputs::from_process(), root_prefix, !narrow)
            .into_iter()
            .map(|w| w.path)
            .collect();
    match bound::support() {
        Ok(abi) => json!({"state": "active", "landlock_abi": abi, "writable": writable,
            "allowed_places": (!narrow).then(|| confinement.write_dirs()),
            "conda_places": conda}),
        Err(reason) => json!({"state": "unavailable", "reason": reason, "writable": writable}),
    }
}

/// The `toolset` field: the operator's selection, the folded tools, the tools left out of
/// the listing with the reason, and the policy-shaped listing: the selected tools the
/// policy admits no call of (`withheld`) and those listed in a restricted form with the
/// sentence that says what else needs which flag (`restricted`).
pub(super) fn add_toolset(capabilities: &mut Fixed, selected: &Selected, shaped: &Shaped) {
    let mut document = selected.describe();
    let mut withheld: Vec<&String> = shaped
        .withheld
        .iter()
        .filter(|name| selected.selects(name))
        .collect();
    withheld.sort();
    let restricted: BTreeMap<&String, &String> = shaped
        .restricted
        .iter()
        .filter(|(name, _)| selected.selects(name))
        .map(|(name, shown)| (name, &shown.sentence))
        .collect();
    document["withheld"] = json!(withheld);
    document["restricted"] = json!(restricted);
    capabilities.insert("toolset", raw(&document));
}

/// The live parts of the capabilities document: the server's `restart` and `startup`
/// objects, its sandbox (none until probed) and its executions.
pub(super) struct Live<'a> {
    pub restart: Value,
    pub startup: Value,
    pub sandbox: Option<&'a Sandbox>,
    /// The server's executions: their limits and the `--warm` state.
    pub exec: &'a exec::Executions,
}

/// The capabilities document as served now: the `fixed` parts, the catalog of
/// `discovery` with the `toolset`'s tools, and the `live` parts.
pub(super) fn text(fixed: &Fixed, discovery: &Discovery, toolset: &Toolset, live: Live) -> String {
    let mut document: BTreeMap<&str, Part> =
        fixed.iter().map(|(k, v)| (*k, Part::Raw(v))).collect();
    let restart = raw(&live.restart);
    let startup = raw(&live.startup);
    let limits = raw(&live.exec.limits().describe());
    let sandbox = raw(&match live.sandbox {
        Some(sandbox) => sandbox.describe(discovery.prefix.as_deref()),
        None => Value::Null,
    });
    let catalog = catalog_view(&discovery.catalog, toolset);
    document.insert("catalog", Part::Catalog(catalog));
    document.insert("sandbox", Part::Raw(&sandbox));
    document.insert("restart", Part::Raw(&restart));
    document.insert("startup", Part::Raw(&startup));
    document.insert("limits", Part::Raw(&limits));
    let warm = raw(&live.exec.describe_warm());
    document.insert("warm", Part::Raw(&warm));
    serde_json::to_string(&document).expect("raw JSON parts serialize")
}

/// One field of the capabilities document: JSON text, or the catalog, which is written
/// straight into the document (hundreds of kilobytes: never held as a tree, nor as text
/// of its own).
#[derive(serde::Serialize)]
#[serde(untagged)]
enum Part<'a> {
    Raw(&'a RawValue),
    Catalog(CatalogView<'a>),
}

/// The capabilities `catalog` field. The catalog's structs serialize to canonical JSON
/// directly (fields are declared in sorted order).
#[derive(serde::Serialize)]
struct CatalogView<'a> {
    conda_version: &'a str,
    diagnostics: Vec<&'a Diagnostic>,
    prog: &'a str,
    root: &'a Option<Command>,
}

/// The catalog with the toolset's own diagnostics joined to discovery's.
fn catalog_view<'a>(catalog: &'a Catalog, toolset: &'a Toolset) -> CatalogView<'a> {
    CatalogView {
        conda_version: &catalog.conda_version,
        diagnostics: catalog
            .diagnostics
            .iter()
            .chain(&toolset.diagnostics)
            .collect(),
        prog: &catalog.prog,
        root: &catalog.root,
    }
}

/// Canonical JSON text as a raw value.
fn raw(value: &impl serde::Serialize) -> Box<RawValue> {
    RawValue::from_string(canonical_json(value)).expect("canonical JSON is valid JSON")
}

/// The baked snapshot of the live conda version, compared with the live catalog.
fn snapshot_status(found: &Discovery) -> Value {
    let live_version = &found.catalog.conda_version;
    let live_fingerprint = found.fingerprint();
    let Some(snapshot) = crate::baked::snapshots()
        .iter()
        .find(|s| s.conda_version == live_version)
    else {
        return Value::Null;
    };
    let stale = snapshot.fingerprint != live_fingerprint;
    if stale {
        // Expected whenever optional plugins are installed, hence not a warning.
        tracing::info!(
            snapshot = snapshot.file,
            "the live conda's plugins differ from the baked snapshot of the same version; \
             commands whose signature changed use the generic interpreter"
        );
    }
    json!({
        "file": snapshot.file,
        "conda_version": snapshot.conda_version,
        "fingerprint": snapshot.fingerprint,
        "live_conda_version": live_version,
        "live_fingerprint": live_fingerprint,
        "snapshot_stale": stale,
    })
}
