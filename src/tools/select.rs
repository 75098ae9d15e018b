//! Toolsets and the shape of the listing: which tools the operator selected (`--tools`),
//! which commands repeat under two names (listed once, the other name kept as an alias),
//! and which tools are left out of the default listing because they cannot work for an
//! agent.
//!
//! A selection ([`Selection`]) is a list of canonical tool names, globs (`conda_env_*`) and
//! groups ([`GROUPS`]). Its syntax is checked when the command line is parsed
//! ([`Selection::parse`]); what it names is known only after discovery ([`Selected::new`]), where
//! an item that selects nothing is an error. An unselected tool is neither listed nor
//! callable, not even as raw argv through `conda_execute` ([`Selected::admits_path`]).
//!
//! Folding: two sibling command groups whose whole subtrees are the same catalog data
//! (every argument and descendant with its help text; only the group's own name,
//! aliases, one-line help and long description may differ) are one group registered
//! under two names (conda-workspaces' `workspace` and `ws`). Terminal commands never
//! fold, and equal signatures alone are not enough: `env config vars set` and `unset`
//! have the same arguments. Each tool under the longer name (equal lengths: the one that
//! sorts first) is listed, with the
//! other names in its `_meta` ([`META_ALIAS_TOOLS`]); the others stay callable. Selecting
//! either name selects both. `--list-all` turns folding and leaving out off. Pure; no I/O.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::{Value, json};

use crate::model::catalog::{Catalog, Plugin, normalize_distribution};
use crate::tools::error::SurfaceError;
use crate::tools::policy;
use crate::tools::surface::{Applied, Surface};
use crate::tools::toolset::{COMPLETION_TOOL, EXECUTE_TOOL, Toolset};

mod fold;
mod spec;
#[cfg(test)]
mod tests;

use fold::folds;
use spec::clip;
pub use spec::{Item, Selection, SelectionError};

/// The groups a selection may name, as error messages list them.
pub const GROUPS: &str = "@core, @read, @envs, @packages, @config, @plugin:NAME, @all";

/// The `_meta` key of a listed tool that lists the served names of the tools folded into it.
pub const META_ALIAS_TOOLS: &str = "conda-cli-mcp/alias_tools";

/// `@core`: the commands agents use most, by command path (see docs/configuration.md for
/// the reason of each).
pub const CORE: &[&[&str]] = &[
    &["info"],
    &["list"],
    &["search"],
    &["env", "list"],
    &["env", "create"],
    &["env", "remove"],
    &["env", "export"],
    &["create"],
    &["install"],
    &["update"],
    &["remove"],
    &["run"],
    &["config"],
    &["clean"],
];

/// `@envs`: conda's own commands that make, change, describe or drop whole environments
/// (besides everything under `conda env`).
const ENVS: &[&str] = &["create", "rename", "export"];
/// `@packages`: conda's own commands about the packages in environments and the caches.
const PACKAGES: &[&str] = &[
    "install", "update", "remove", "list", "search", "compare", "package", "clean",
];

/// Tools left out of the default listing (still callable; the policy still applies), and
/// why (the capabilities document repeats the reason).
pub const UNFIT: &[(&[&str], &str)] = &[
    (
        &["activate"],
        "prints shell code for an interactive shell to evaluate; an agent has no shell session to change (conda_run runs a program in an environment)",
    ),
    (
        &["deactivate"],
        "prints shell code for an interactive shell to evaluate; an agent has no shell session to change",
    ),
    (
        &["init"],
        "edits shell startup files for later interactive shells; nothing an agent can use",
    ),
    (
        &["mcp"],
        "a launcher that starts an MCP server on stdio (this server or another); it does not return while its stdin is open",
    ),
    (
        &["ccm"],
        "ccm's own launcher: starts this server on stdio; it does not return while its stdin is open",
    ),
];

/// Why a command with subcommands is left out of the default listing: conda's own
/// (`env`: conda/cli/main_env.py:40, `env config`: main_env_config.py:34, and `env config
/// vars`, which argparse answers with `env config`'s usage) and the plugins' command
/// groups (`workspace`, `task`, `completion`) print their usage and do nothing else.
pub const COMMAND_GROUP: &str = "a command group: called without a subcommand it only prints its usage (each subcommand is its own tool)";

/// A named group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Group {
    Core,
    Read,
    Envs,
    Packages,
    Config,
    All,
}

/// Why a selection does not apply to this conda (exit status 2 at startup).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SelectError {
    #[error(
        "--tools: '{0}' selects no tool of this conda (see 'ccm tools' for the names; groups: {GROUPS})"
    )]
    Nothing(String),
    #[error(
        "--tools: @plugin:{name} names no installed plugin distribution (installed: {installed}; groups: {GROUPS})"
    )]
    UnknownPlugin { name: String, installed: String },
    #[error(
        "--tools: @plugin:{0}: which commands this plugin adds is not in the policy's reviewed tables; select its tools by name or glob (groups: {GROUPS})"
    )]
    UnreviewedPlugin(String),
}

impl Group {
    pub(super) fn name(self) -> &'static str {
        match self {
            Group::Core => "core",
            Group::Read => "read",
            Group::Envs => "envs",
            Group::Packages => "packages",
            Group::Config => "config",
            Group::All => "all",
        }
    }

    /// Whether a generated tool (its command path, its tool-level classification) is in
    /// the group.
    fn contains(self, path: &[String], read_only: bool) -> bool {
        let first = path.first().map(String::as_str).unwrap_or("");
        match self {
            Group::Core => CORE.iter().any(|p| p.iter().eq(path.iter())),
            Group::Read => read_only,
            Group::Envs => path.len() == 1 && ENVS.contains(&first) || first == "env",
            Group::Packages => path.len() == 1 && PACKAGES.contains(&first),
            Group::Config => {
                first == "config" || path.starts_with(&["env".to_owned(), "config".to_owned()])
            }
            Group::All => true,
        }
    }
}

/// One tool as the selection sees it.
struct Entry<'a> {
    name: &'a str,
    /// `None` for the server's own tools (`conda_execute`, `conda_cli_command`).
    path: Option<&'a [String]>,
    /// Needs none of the startup options (the policy's tool-level classification, the
    /// operator's `--classify` included).
    read_only: bool,
}

/// The listing and the callable tools of one server.
#[derive(Clone, Debug, Default)]
pub struct Selected {
    /// Canonical names of the selected tools; `None`: every tool (no `--tools`).
    selected: Option<HashSet<String>>,
    /// Command paths of the selected generated tools (for `conda_execute`).
    selected_paths: HashSet<Vec<String>>,
    /// Names the selection gave explicitly (listed even when left out by default).
    named: HashSet<String>,
    /// Folded tool → the tool listed for it (canonical names).
    folded: BTreeMap<String, String>,
    /// Tools left out of the default listing, with the reason.
    left_out: BTreeMap<String, &'static str>,
    list_all: bool,
    spec: Option<Vec<String>>,
}

impl Selected {
    /// The shape of the listing for these tools; `Err` when an item selects nothing.
    pub fn new(
        toolset: &Toolset,
        catalog: &Catalog,
        plugins: &[Plugin],
        spec: Option<&Selection>,
        list_all: bool,
    ) -> Result<Selected, SelectError> {
        let fixed = [
            (EXECUTE_TOOL, toolset.execute.is_some()),
            (COMPLETION_TOOL, toolset.completion.is_some()),
        ];
        let entries: Vec<Entry> = fixed
            .iter()
            .filter(|(_, offered)| *offered)
            .map(|(name, _)| Entry {
                name,
                path: None,
                read_only: *name == COMPLETION_TOOL,
            })
            .chain(toolset.generated.iter().map(|t| Entry {
                name: &t.name,
                path: Some(&t.path),
                read_only: t.class.read_only && !t.class.requires_write && !t.class.requires_exec,
            }))
            .collect();
        let by_path: HashMap<&[String], &str> = toolset
            .generated
            .iter()
            .map(|t| (t.path.as_slice(), t.name.as_str()))
            .collect();
        let folded = folds(catalog, &by_path);
        let mut selected = Selected {
            folded,
            list_all,
            spec: spec.map(Selection::texts),
            ..Selected::default()
        };
        for (path, reason) in UNFIT {
            let path: Vec<String> = path.iter().map(|p| (*p).to_owned()).collect();
            if let Some(name) = by_path.get(path.as_slice()) {
                selected.left_out.insert((*name).to_owned(), reason);
            }
        }
        for tool in &toolset.generated {
            let group = catalog
                .branch(&tool.path)
                .and_then(|branch| branch.last().map(|c| !c.children.is_empty()));
            if group == Some(true) {
                selected.left_out.insert(tool.name.clone(), COMMAND_GROUP);
            }
        }
        if let Some(spec) = spec {
            selected.select(spec, &entries, plugins)?;
        }
        Ok(selected)
    }

    fn select(
        &mut self,
        spec: &Selection,
        entries: &[Entry],
        plugins: &[Plugin],
    ) -> Result<(), SelectError> {
        let mut selected: HashSet<String> = HashSet::new();
        for item in &spec.items {
            let matched: Vec<&str> = match item {
                Item::Name(name) if name == EXECUTE_TOOL || name == COMPLETION_TOOL => {
                    // The server's own tools are always valid names, offered or not.
                    self.named.insert(name.clone());
                    selected.insert(name.clone());
                    continue;
                }
                Item::Name(name) => {
                    self.named.insert(name.clone());
                    entries
                        .iter()
                        .map(|e| e.name)
                        .filter(|n| n == name)
                        .collect()
                }
                Item::Glob(pattern) => entries
                    .iter()
                    .map(|e| e.name)
                    .filter(|n| pattern.matches(n))
                    .collect(),
                Item::Group(Group::All) => entries.iter().map(|e| e.name).collect(),
                Item::Group(group) => entries
                    .iter()
                    .filter(|e| match e.path {
                        Some(path) => group.contains(path, e.read_only),
                        None => *group == Group::Read && e.read_only,
                    })
                    .map(|e| e.name)
                    .collect(),
                Item::Plugin(name) => plugin_tools(name, entries, plugins)?,
            };
            if matched.is_empty() {
                return Err(SelectError::Nothing(clip(&item.text())));
            }
            selected.extend(matched.into_iter().map(str::to_owned));
        }
        // A command registered under two names is one command: selecting either name
        // selects both.
        for (alias, listed) in &self.folded {
            if selected.contains(alias) || selected.contains(listed) {
                selected.insert(alias.clone());
                selected.insert(listed.clone());
            }
        }
        self.selected_paths = entries
            .iter()
            .filter(|e| selected.contains(e.name))
            .filter_map(|e| e.path.map(<[String]>::to_vec))
            .collect();
        self.selected = Some(selected);
        Ok(())
    }

    /// Whether a tool (canonical name) is selected: listed or callable at all.
    pub fn selects(&self, name: &str) -> bool {
        self.selected.as_ref().is_none_or(|s| s.contains(name))
    }

    /// Whether `conda_execute` may run an argv whose command path (as the policy's
    /// simulation reads it; `None` when it cannot follow the argv) is this one: with a
    /// selection, only the paths of selected tools.
    pub fn admits_path(&self, path: Option<&[String]>) -> bool {
        self.selected.is_none() || path.is_some_and(|p| self.selected_paths.contains(p))
    }

    /// Whether a selected tool is listed (folded tools and tools that cannot work for an
    /// agent are not, unless `--list-all` or named explicitly).
    pub fn lists(&self, name: &str) -> bool {
        self.selects(name)
            && (self.list_all
                || !self.folded.contains_key(name)
                    && (!self.left_out.contains_key(name) || self.named.contains(name)))
    }

    /// The served tools: the selected descriptors through the operator's surface, folded
    /// and left-out tools moved to the unlisted (callable) ones, and each listed tool's
    /// folded names in its `_meta`.
    pub fn apply(
        &self,
        surface: &Surface,
        descriptors: Vec<Value>,
        withheld: &HashSet<String>,
    ) -> Result<Applied, SurfaceError> {
        let name = |d: &Value| d["name"].as_str().unwrap_or_default().to_owned();
        let kept: Vec<Value> = descriptors
            .into_iter()
            .filter(|d| self.selects(&name(d)))
            .collect();
        let mut applied = surface.apply_withholding(kept, withheld)?;
        let canonical = |served: &str| applied.routes.get(served).cloned().unwrap_or_default();
        let served: HashMap<String, String> = applied
            .routes
            .iter()
            .map(|(s, c)| (c.clone(), s.clone()))
            .collect();
        let mut listed = Vec::new();
        for mut descriptor in std::mem::take(&mut applied.listed) {
            let tool = canonical(&name(&descriptor));
            if !self.lists(&tool) {
                applied.unlisted.push(descriptor);
                continue;
            }
            let aliases: Vec<&String> = self
                .folded
                .iter()
                .filter(|(_, l)| **l == tool)
                .filter_map(|(alias, _)| served.get(alias))
                .collect();
            if !self.list_all
                && !aliases.is_empty()
                && let Some(meta) = descriptor.get_mut("_meta").and_then(Value::as_object_mut)
            {
                meta.insert(META_ALIAS_TOOLS.to_owned(), json!(aliases));
            }
            listed.push(descriptor);
        }
        applied.listed = listed;
        Ok(applied)
    }

    /// The capabilities document's `toolset` object.
    pub fn describe(&self) -> Value {
        let left_out: Vec<Value> = self
            .left_out
            .iter()
            .filter(|(name, _)| self.selects(name) && !self.lists(name))
            .map(|(tool, reason)| json!({"tool": tool, "reason": reason}))
            .collect();
        json!({
            "tools": self.spec,
            "list_all": self.list_all,
            "folded": if self.list_all { BTreeMap::new() } else { self.folded.clone() },
            "left_out": left_out,
        })
    }
}

/// The tools `@plugin:NAME` selects: those under the top-level commands the policy's
/// reviewed tables record for the installed distribution.
fn plugin_tools<'a>(
    name: &str,
    entries: &[Entry<'a>],
    plugins: &[Plugin],
) -> Result<Vec<&'a str>, SelectError> {
    let wanted = normalize_distribution(name);
    if !plugins
        .iter()
        .any(|p| normalize_distribution(&p.distribution) == wanted)
    {
        let mut installed: Vec<String> = plugins
            .iter()
            .map(|p| normalize_distribution(&p.distribution))
            .collect();
        installed.sort();
        installed.dedup();
        return Err(SelectError::UnknownPlugin {
            name: clip(name),
            installed: if installed.is_empty() {
                "none".to_owned()
            } else {
                installed.join(", ")
            },
        });
    }
    let Some(commands) = policy::plugin_commands(&wanted) else {
        return Err(SelectError::UnreviewedPlugin(clip(name)));
    };
    Ok(entries
        .iter()
        .filter(|e| {
            e.path
                .and_then(|p| p.first())
                .is_some_and(|first| commands.contains(&first.as_str()))
        })
        .map(|e| e.name)
        .collect())
}
