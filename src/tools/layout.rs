//! The per-tool view of the catalog: which arguments of a command's branch become input
//! properties, under which ids, in which order.
//!
//! Schemas, the generic argv interpreter, the round-trip test and the code generator all
//! read a [`Layout`], so they cannot disagree about property ids. Rules: walk the branch
//! root → terminal; an argument is exposed unless it is a hidden, optional option (so
//! hidden positionals and required hidden arguments are exposed); each exposed argument
//! keeps its catalog id, de-duplicated with `_2`, `_3`… against the ids of the levels
//! after it (ids are given terminal level first, so an option both the command and an
//! earlier level take keeps its plain id in its per-command form: the root's `-v` is
//! `verbose_2`, the command's `verbose`); a greedy terminal parser adds an `args`
//! passthrough array last.
//!
//! Reserved names: ids that start with [`RESERVED_PREFIX`] (`ccm_`) belong to ccm's own
//! per-call properties ([`WORKDIR`], [`TIMEOUT`]), which every generated tool takes and
//! no compiler turns into argv. A conda argument whose id would take the prefix is
//! renamed `conda_<id>` (then de-duplicated like the rest), so the two can never collide.
//! Pure; no I/O.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::model::catalog::{Argument, Command};

/// One exposed argument of one level.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Property {
    /// Input property name (unique within the tool).
    pub id: String,
    /// Index of the level in [`Layout::levels`].
    pub level: usize,
    pub argument: Argument,
}

/// One parser of the branch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Level {
    /// The command name emitted for this level; `None` for the root.
    pub name: Option<String>,
    /// Exclusive groups of this level, as property ids (exposed members only).
    pub groups: Vec<Group>,
    /// Whether a later level follows this one (its name is emitted after this level).
    pub has_next: bool,
}

/// A mutually exclusive group, in property ids.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Group {
    pub members: Vec<String>,
    pub required: bool,
}

/// Everything a tool needs to build its schema and compile inputs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Layout {
    /// Canonical command path.
    pub path: Vec<String>,
    pub levels: Vec<Level>,
    /// Exposed arguments in branch order (levels root → terminal, declaration order).
    pub properties: Vec<Property>,
    /// Property id of the passthrough array of a greedy terminal parser.
    pub passthrough: Option<String>,
}

/// The property id of a greedy command's passthrough array (de-duplicated like the rest).
const PASSTHROUGH_ID: &str = "args";

/// The prefix of ccm's own properties; no conda-derived id starts with it.
pub const RESERVED_PREFIX: &str = "ccm_";
/// The working directory of a generated tool's call (ccm's, not conda's).
pub const WORKDIR: &str = "ccm_cwd";
/// The timeout of a generated tool's call, in seconds (at most the server's `--timeout`).
pub const TIMEOUT: &str = "ccm_timeout_seconds";
/// The longest working directory accepted (the bound of `conda_execute`'s `cwd`).
pub const MAX_WORKDIR: usize = 4096;

/// Whether `id` is one of ccm's own per-call properties (never part of argv).
pub fn is_reserved(id: &str) -> bool {
    id == WORKDIR || id == TIMEOUT
}

/// What `ccm_cwd` says: where an agent looks for the fix when a relative path (an
/// environment file) is not found.
pub const WORKDIR_DESCRIPTION: &str = "Directory to run conda in; relative paths resolve from it.";
/// What `ccm_timeout_seconds` says.
pub const TIMEOUT_DESCRIPTION: &str = "Stop the call after this many seconds.";

/// The schemas of ccm's own per-call properties, with the bounds of `conda_execute`'s
/// `cwd` and `timeout_seconds` and one short sentence each (the server's instructions say
/// how roots change `ccm_cwd`).
pub fn reserved_properties(timeout: Duration) -> Map<String, Value> {
    let mut properties = Map::new();
    properties.insert(
        WORKDIR.into(),
        json!({"type": "string", "maxLength": MAX_WORKDIR, "description": WORKDIR_DESCRIPTION}),
    );
    // A whole number of seconds is written as an integer (`900`, not `900.0`).
    let maximum = if timeout.subsec_nanos() == 0 {
        json!(timeout.as_secs())
    } else {
        json!(timeout.as_secs_f64())
    };
    properties.insert(
        TIMEOUT.into(),
        json!({
            "type": "number",
            "exclusiveMinimum": 0,
            "maximum": maximum,
            "description": TIMEOUT_DESCRIPTION,
        }),
    );
    properties
}

/// Add ccm's own per-call properties to a generated tool's input schema.
pub fn add_reserved(schema: &mut Map<String, Value>, timeout: Duration) {
    if let Some(Value::Object(properties)) = schema.get_mut("properties") {
        properties.extend(reserved_properties(timeout));
    }
}

impl Argument {
    /// Whether the argument becomes an input property. Hidden optional options are what
    /// argparse's `help=SUPPRESS` is for (debugging switches); hidden positionals and
    /// required hidden arguments carry real input and are exposed.
    pub fn is_exposed(&self) -> bool {
        !self.hidden || self.is_positional() || self.required
    }

    /// Whether taking this argument means running arbitrary, uninspected input
    /// (`REMAINDER`/`PARSER` nargs).
    pub fn is_opaque(&self) -> bool {
        self.nargs.is_opaque()
    }
}

impl Layout {
    /// Build the layout of the branch `root → … → command` (`branch[0]` is the root).
    pub fn new(branch: &[&Command]) -> Layout {
        // Ids are given deepest level first: an option the command and an earlier level
        // both take (`-v` before and after the command name) keeps its plain id in its
        // per-command form, the one a listing shows.
        let mut used: Vec<String> = Vec::new();
        let mut ids: Vec<Vec<String>> = vec![Vec::new(); branch.len()];
        for (level, command) in branch.iter().enumerate().rev() {
            for argument in command.arguments.iter().filter(|a| a.is_exposed()) {
                let id = dedupe(&unreserved(&argument.id), &used);
                used.push(id.clone());
                ids[level].push(id);
            }
        }
        let mut properties = Vec::new();
        let mut levels = Vec::new();
        for (level, command) in branch.iter().enumerate() {
            let exposed = command.arguments.iter().filter(|a| a.is_exposed());
            // catalog id -> property id
            let local: Vec<(&str, &str)> = exposed
                .clone()
                .zip(&ids[level])
                .map(|(argument, id)| (argument.id.as_str(), id.as_str()))
                .collect();
            for (argument, id) in exposed.zip(&ids[level]) {
                properties.push(Property {
                    id: id.clone(),
                    level,
                    argument: argument.clone(),
                });
            }
            let groups = command
                .exclusive_groups
                .iter()
                .map(|group| Group {
                    members: group
                        .members
                        .iter()
                        .filter_map(|m| {
                            local
                                .iter()
                                .find(|(c, _)| c == m)
                                .map(|(_, p)| (*p).to_owned())
                        })
                        .collect(),
                    required: group.required,
                })
                .collect();
            levels.push(Level {
                name: command.name.clone(),
                groups,
                has_next: level + 1 < branch.len(),
            });
        }
        let passthrough = branch
            .last()
            .filter(|c| c.passthrough)
            .map(|_| dedupe(PASSTHROUGH_ID, &used));
        Layout {
            path: branch
                .iter()
                .skip(1)
                .filter_map(|c| c.name.clone())
                .collect(),
            levels,
            properties,
            passthrough,
        }
    }

    /// Whether any argument of the branch (hidden or not) or a greedy passthrough takes
    /// opaque input; such tools need `--allow-exec`.
    pub fn branch_is_opaque(branch: &[&Command]) -> bool {
        branch.last().is_some_and(|c| c.passthrough)
            || branch
                .iter()
                .any(|c| c.arguments.iter().any(Argument::is_opaque))
    }

    pub fn property(&self, id: &str) -> Option<&Property> {
        self.properties.iter().find(|p| p.id == id)
    }

    /// A required exclusive group none of whose members is exposed cannot be satisfied
    /// through the schema: the command is raw-only.
    pub fn unsatisfiable_group(&self) -> bool {
        self.levels
            .iter()
            .any(|l| l.groups.iter().any(|g| g.required && g.members.is_empty()))
    }
}

/// A conda-derived id, kept out of the reserved prefix.
fn unreserved(id: &str) -> String {
    if id.starts_with(RESERVED_PREFIX) {
        format!("conda_{id}")
    } else {
        id.to_owned()
    }
}

fn dedupe(base: &str, used: &[String]) -> String {
    if !used.iter().any(|u| u == base) {
        return base.to_owned();
    }
    (2..)
        .map(|n| format!("{base}_{n}"))
        .find(|candidate| !used.iter().any(|u| u == candidate))
        .expect("an unused suffix always exists")
}

/// The `--x` and `--no-x` option strings of a `BooleanOptionalAction`.
pub fn boolean_flags(argument: &Argument) -> (Option<&str>, Option<&str>) {
    let negative = argument
        .flags
        .iter()
        .find(|f| f.starts_with("--no-"))
        .map(String::as_str);
    let positive = argument
        .flags
        .iter()
        .find(|f| f.starts_with("--") && !f.starts_with("--no-"))
        .or_else(|| argument.flags.iter().find(|f| !f.starts_with("--no-")))
        .map(String::as_str);
    (positive, negative)
}
