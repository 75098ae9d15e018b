//! The per-tool view of the catalog: which arguments of a command's branch become input
//! properties, under which ids, in which order.
//!
//! Schemas, the generic argv interpreter, the round-trip test and the code generator all
//! read a [`Layout`], so they cannot disagree about property ids. Rules: walk the branch
//! root → terminal; an argument is exposed unless it is a hidden, optional option (so
//! hidden positionals and required hidden arguments are exposed); each exposed argument
//! keeps its catalog id, de-duplicated against earlier ids of the branch with `_2`, `_3`…;
//! a greedy terminal parser adds an `args` passthrough array last. Pure; no I/O.

use serde::{Deserialize, Serialize};

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
        let mut used: Vec<String> = Vec::new();
        let mut properties = Vec::new();
        let mut levels = Vec::new();
        for (level, command) in branch.iter().enumerate() {
            let mut local: Vec<(String, String)> = Vec::new(); // catalog id -> property id
            for argument in &command.arguments {
                if !argument.is_exposed() {
                    continue;
                }
                let id = dedupe(&argument.id, &used);
                used.push(id.clone());
                local.push((argument.id.clone(), id.clone()));
                properties.push(Property {
                    id,
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
                        .filter_map(|m| local.iter().find(|(c, _)| c == m).map(|(_, p)| p.clone()))
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

fn dedupe(base: &str, used: &[String]) -> String {
    if !used.iter().any(|u| u == base) {
        return base.to_owned();
    }
    (2..)
        .map(|n| format!("{base}_{n}"))
        .find(|candidate| !used.iter().any(|u| u == candidate))
        .expect("an unused suffix always exists")
}
