//! What is served once the tools are obtained: the toolset, the listed and hidden tools
//! in rmcp's form (the operator's surface applied once), the routes, the fixed parts of
//! the capabilities document and the path confinement.

use std::collections::HashMap;
use std::sync::Arc;

use rmcp::model::Tool as McpTool;
use serde_json::Value;

use super::capabilities;
use crate::config::Config;
use crate::host::confine::Confinement;
use crate::host::discovery::Discovery;
use crate::model::catalog::{Catalog, Plugin};
use crate::tools::listing::{self, Shaped, Shown};
use crate::tools::policy::Grants;
use crate::tools::select::Selected;
use crate::tools::surface::{Applied, Surface};
use crate::tools::toolset::{Toolset, ToolsetSettings};

/// Everything that exists once the tools are obtained.
pub struct Ready {
    pub discovery: Discovery,
    pub toolset: Toolset,
    /// The listed tools, built once.
    pub(super) tools: Vec<McpTool>,
    /// Hidden tools (served form): callable, never listed.
    pub(super) unlisted: Vec<McpTool>,
    /// Served name → canonical name.
    pub(super) routes: HashMap<String, String>,
    /// The fixed parts of the capabilities document.
    pub(super) capabilities: capabilities::Fixed,
    /// Where paths in calls that do not need `--allow-exec` may point.
    pub(super) confinement: Confinement,
    /// Tools listed in a restricted form, by canonical name: calls are validated against
    /// the schema the session was shown (empty under `--list-all`).
    pub(super) restricted: HashMap<String, Shown>,
    /// The operator's selection (`--tools`), folded and left-out tools.
    pub(super) selected: Selected,
}

/// Why the tools cannot be served with the operator's settings.
#[derive(Clone, Debug, thiserror::Error)]
pub enum BuildError {
    #[error("--classify names no tool of this conda: {0} (see 'ccm tools' for the names)")]
    UnknownClassified(String),
    /// The surface settings do not apply (a name collision).
    #[error(transparent)]
    Surface(#[from] crate::tools::error::SurfaceError),
    /// `--tools` names something this conda does not have.
    #[error(transparent)]
    Select(#[from] crate::tools::select::SelectError),
}

/// What a server with these settings serves, before it takes rmcp's form: the toolset
/// (descriptors moved out into `applied`), the policy-shaped listing, the operator's
/// selection and the surface applied. Built by [`served`], for the server ([`build`])
/// and for `ccm tools` alike.
pub struct Served {
    pub toolset: Toolset,
    pub shaped: Shaped,
    pub selected: Selected,
    pub applied: Applied,
}

/// The toolset settings of the operator's `config`; `sandboxed`: read-only calls run in
/// the read-only sandbox.
pub fn settings(config: &Config, sandboxed: bool) -> ToolsetSettings {
    ToolsetSettings {
        allow_exec: config.allow_exec,
        classify: config.classify.clone(),
        timeout: config.timeout,
        sandboxed,
    }
}

/// What is served for these tools (see [`Served`]); `Err` when the operator's settings
/// cannot apply to them (a `--classify` naming no tool, a `--tools` item selecting
/// nothing, a name collision).
pub fn served(
    catalog: &Catalog,
    plugins: &[Plugin],
    settings: &ToolsetSettings,
    surface: &Surface,
    config: &Config,
) -> Result<Served, BuildError> {
    let mut toolset = crate::baked::toolset(catalog, plugins, settings);
    if let Some(unknown) = toolset.unknown_classified.first() {
        return Err(BuildError::UnknownClassified(unknown.clone()));
    }
    // The policy-shaped listing (unless --list-all): withheld tools stay routed.
    let shaped = if config.list_all {
        Shaped::default()
    } else {
        listing::shape(&mut toolset, grants(config))
    };
    // The descriptors move into the served list: one copy of every schema, not two.
    // Toolsets (`--tools`), folding and left-out tools: `tools::select`.
    let selected = Selected::new(
        &toolset,
        catalog,
        plugins,
        config.tools.as_ref(),
        config.list_all,
    )?;
    let applied = selected.apply(surface, toolset.take_descriptors(), &shaped.withheld)?;
    Ok(Served {
        toolset,
        shaped,
        selected,
        applied,
    })
}

/// Everything served for these tools; `Err` when the operator's settings cannot apply to
/// them (a `--classify` naming no tool, a name collision).
pub(super) fn build(
    found: Discovery,
    settings: &ToolsetSettings,
    surface: &Surface,
    config: &Config,
) -> Result<Ready, BuildError> {
    let Served {
        toolset,
        shaped,
        selected,
        applied,
    } = served(&found.catalog, &found.plugins, settings, surface, config)?;
    for warning in &applied.warnings {
        tracing::warn!(%warning, "tool surface setting ignored");
    }
    // Every generated tool has the same output schema: the served tools share one copy.
    let mut outputs: Vec<Arc<rmcp::model::JsonObject>> = Vec::new();
    let mut convert = |list: Vec<Value>| -> Vec<McpTool> {
        list.into_iter()
            .filter_map(|d| serde_json::from_value::<McpTool>(d).ok())
            .map(|mut tool| {
                if let Some(output) = &mut tool.output_schema {
                    match outputs.iter().find(|o| *o == output) {
                        Some(shared) => *output = Arc::clone(shared),
                        None => outputs.push(Arc::clone(output)),
                    }
                }
                tool
            })
            .collect()
    };
    let tools = convert(applied.listed);
    let unlisted = convert(applied.unlisted);
    let confinement = match (&config.allow_paths, config.http.is_some()) {
        (Some(dirs), _) => Confinement::to(dirs),
        (None, true) => Confinement::default_scope(found.prefix.as_deref()),
        (None, false) => Confinement::unrestricted(),
    };
    let mut capabilities = capabilities::fixed(&found, &toolset, config, &confinement);
    capabilities::add_toolset(&mut capabilities, &selected, &shaped);
    Ok(Ready {
        confinement,
        discovery: found,
        toolset,
        tools,
        unlisted,
        routes: applied.routes,
        capabilities,
        restricted: shaped.restricted,
        selected,
    })
}

impl Ready {
    /// The input schema listed (or, for a hidden tool, served) under a served name.
    pub(super) fn listed_schema(&self, served: &str) -> Option<Value> {
        self.tools
            .iter()
            .chain(&self.unlisted)
            .find(|t| t.name == served)
            .map(|t| Value::Object((*t.input_schema).clone()))
    }
}

/// The operator's grants.
pub(super) fn grants(config: &Config) -> Grants {
    Grants {
        write: config.allow_write,
        exec: config.allow_exec,
        credentials: config.allow_credentials,
    }
}

/// An empty catalog, served should the startup task die (it cannot, short of a panic)
/// rather than hanging every request.
pub(super) fn unavailable(config: &Config) -> Ready {
    let found = Discovery {
        catalog: Catalog::unavailable("conda", "unknown", "conda catalog discovery failed"),
        plugins: Vec::new(),
        interpreter: None,
        prefix: None,
        python_version: None,
        site_dirs: Vec::new(),
        processes: 0,
    };
    let settings = ToolsetSettings {
        classify: Vec::new(),
        ..settings(config, false)
    };
    // A selection cannot be resolved against no commands: it selects nothing then.
    let config = Config {
        tools: config
            .tools
            .as_ref()
            .map(|_| crate::tools::select::Selection { items: Vec::new() }),
        ..config.clone()
    };
    build(found, &settings, &Surface::default(), &config).expect("an empty surface always applies")
}
