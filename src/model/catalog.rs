//! The immutable command catalog: conda's argparse tree as plain data.
//!
//! Discovery fills it once from the target's own parser; everything else (schemas, argv,
//! policy, codegen) reads it. This module owns the data model, its serde form (which is also
//! the `catalog` field of `conda://capabilities` and the snapshot format), and the two
//! digests computed over it: the discovery fingerprint (restart detection, compatible with
//! the established algorithm and its test vectors) and per-command signature digests (which
//! decide whether a baked typed compiler fits a live command). It does no I/O.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

// Every serialized struct here declares its fields in alphabetical order of their JSON
// names, so serializing a catalog directly yields canonical (sorted-key) JSON.

/// The whole parser of one conda installation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Catalog {
    /// `conda.__version__` as the helper reported it, or `unknown` when discovery failed.
    pub conda_version: String,
    /// Everything discovery could not represent, and why.
    #[serde(default)]
    pub diagnostics: Vec<Diagnostic>,
    /// `parser.prog`, normally `conda`.
    pub prog: String,
    /// The root parser; `None` when discovery failed (see `diagnostics`).
    pub root: Option<Command>,
}

/// One parser in the tree: the root, a command, or a nested subcommand.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Command {
    /// Other names the parent's subparsers action accepts for this parser.
    #[serde(default)]
    pub aliases: Vec<String>,
    /// Arguments in parser declaration order, hidden ones included.
    #[serde(default)]
    pub arguments: Vec<Argument>,
    /// Subcommands in parser insertion order (built-ins first, then plugins).
    #[serde(default)]
    pub children: Vec<Command>,
    /// Mutually exclusive groups of this parser.
    #[serde(default)]
    pub exclusive_groups: Vec<ExclusiveGroup>,
    /// The one-line help the parent lists for this command.
    #[serde(default)]
    pub help: Option<String>,
    /// Canonical name; `None` for the root.
    pub name: Option<String>,
    /// The parser is greedy: unknown arguments are passed to the command unchanged.
    #[serde(default)]
    pub passthrough: bool,
    /// Something on this parser cannot be represented; it and its descendants are
    /// reachable only through raw argv.
    #[serde(default)]
    pub raw_only: bool,
    /// The parser's long description (`parser.description`).
    #[serde(default)]
    pub summary: Option<String>,
    /// True unless a subparsers action of this parser is required.
    pub terminal: bool,
}

/// How argparse stores an argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActionKind {
    Store,
    Append,
    Extend,
    StoreTrue,
    StoreFalse,
    /// `argparse.BooleanOptionalAction` (`--x` / `--no-x`).
    Boolean,
    StoreConst,
    AppendConst,
    Count,
    /// conda's `ExtendConstAction`: extend with the values, or with `const` when none.
    ExtendConst,
}

impl ActionKind {
    /// Actions that take no value on the command line.
    pub fn is_flag(self) -> bool {
        matches!(
            self,
            ActionKind::StoreTrue
                | ActionKind::StoreFalse
                | ActionKind::Boolean
                | ActionKind::StoreConst
                | ActionKind::AppendConst
                | ActionKind::Count
        )
    }
}

/// argparse's `nargs`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Nargs {
    /// `None`: exactly one value.
    One,
    /// An integer count (`0` for flag actions).
    Exactly(u32),
    /// `?`
    Optional,
    /// `*`
    ZeroOrMore,
    /// `+`
    OneOrMore,
    /// `argparse.REMAINDER`
    Remainder,
    /// `argparse.PARSER` (a subparsers action's own nargs)
    Parser,
}

impl Nargs {
    /// Whether a single occurrence carries a list of values.
    pub fn is_list(self) -> bool {
        matches!(
            self,
            Nargs::Exactly(_)
                | Nargs::ZeroOrMore
                | Nargs::OneOrMore
                | Nargs::Remainder
                | Nargs::Parser
        )
    }

    /// Whether arguments are taken verbatim, options included.
    pub fn is_opaque(self) -> bool {
        matches!(self, Nargs::Remainder | Nargs::Parser)
    }
}

impl Serialize for Nargs {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Nargs::One => s.serialize_none(),
            Nargs::Exactly(n) => s.serialize_u32(*n),
            Nargs::Optional => s.serialize_str("?"),
            Nargs::ZeroOrMore => s.serialize_str("*"),
            Nargs::OneOrMore => s.serialize_str("+"),
            Nargs::Remainder => s.serialize_str("remainder"),
            Nargs::Parser => s.serialize_str("parser"),
        }
    }
}

impl<'de> Deserialize<'de> for Nargs {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::Null => Ok(Nargs::One),
            Value::Number(n) => n
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .map(Nargs::Exactly)
                .ok_or_else(|| {
                    serde::de::Error::custom("nargs must be a small non-negative integer")
                }),
            Value::String(s) => match s.as_str() {
                "?" => Ok(Nargs::Optional),
                "*" => Ok(Nargs::ZeroOrMore),
                "+" => Ok(Nargs::OneOrMore),
                "remainder" => Ok(Nargs::Remainder),
                "parser" => Ok(Nargs::Parser),
                _ => Err(serde::de::Error::custom("unknown nargs value")),
            },
            _ => Err(serde::de::Error::custom(
                "nargs must be null, an integer or a string",
            )),
        }
    }
}

/// The JSON type argparse's `type=` converts a value to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ValueType {
    String,
    Integer,
    Number,
}

/// One argparse action (option or positional).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Argument {
    pub action: ActionKind,
    /// Allowed values as strings, in argparse order; empty when unrestricted.
    #[serde(default)]
    pub choices: Vec<String>,
    /// argparse `const` when JSON-representable, else null.
    #[serde(default, rename = "const")]
    pub const_value: Value,
    /// argparse `default` when JSON-representable, else null.
    #[serde(default)]
    pub default: Value,
    /// argparse `dest`.
    pub dest: String,
    /// The choices were computed when the parser was inspected (lazy choices), so they
    /// depend on the installation (installed solvers, environment specifiers, ...).
    #[serde(default)]
    pub dynamic_choices: bool,
    /// Option strings in declaration order; empty for positionals.
    #[serde(default)]
    pub flags: Vec<String>,
    /// Help text; `None` when hidden or absent.
    #[serde(default)]
    pub help: Option<String>,
    /// `help=argparse.SUPPRESS`.
    #[serde(default)]
    pub hidden: bool,
    /// Stable property id, unique within its parser.
    pub id: String,
    #[serde(default)]
    pub metavar: Vec<String>,
    pub nargs: Nargs,
    #[serde(default)]
    pub required: bool,
    pub value_type: ValueType,
}

impl Argument {
    pub fn is_positional(&self) -> bool {
        self.flags.is_empty()
    }

    /// The option string the compiler emits: the first `--long` flag, else the first flag.
    pub fn preferred_flag(&self) -> Option<&str> {
        self.flags
            .iter()
            .find(|f| f.starts_with("--"))
            .or_else(|| self.flags.first())
            .map(String::as_str)
    }
}

/// A mutually exclusive group of one parser.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExclusiveGroup {
    /// Argument ids of the group's members, hidden ones included.
    pub members: Vec<String>,
    pub required: bool,
}

/// Something discovery could not represent, with where and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Diagnostic {
    /// `module.QualName` of the argparse action class involved, if any.
    #[serde(default)]
    pub action_type: Option<String>,
    /// Whether the affected command lost its generated tool (`raw_only`), or the
    /// diagnostic is informational (plugin inventory failure, a hidden unsupported action).
    #[serde(default = "default_true")]
    pub blocking: bool,
    /// Command path where it was found; empty for global failures.
    #[serde(default)]
    pub path: Vec<String>,
    /// A fixed reason text.
    pub reason: String,
}

fn default_true() -> bool {
    true
}

/// An installed distribution's `conda` entry point.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Plugin {
    pub distribution: String,
    pub entry_point: String,
    /// Hook names the loaded entry point implements, sorted.
    #[serde(default)]
    pub hooks: Vec<String>,
    pub value: String,
    pub version: String,
}

/// Normalise a distribution name as PEP 503 does (`conda_completion` == `Conda-Completion`).
pub fn normalize_distribution(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut last_sep = false;
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !last_sep {
                out.push('-');
            }
            last_sep = true;
        } else {
            out.extend(c.to_lowercase());
            last_sep = false;
        }
    }
    out
}

/// Compact JSON with sorted keys and non-ASCII kept: the canonical text every digest and
/// every JSON document this server emits is computed from.
pub fn canonical_json(value: &impl Serialize) -> String {
    // serde_json's map is a BTreeMap (the `preserve_order` feature is off), so keys are sorted.
    let value = serde_json::to_value(value).expect("catalog values always serialize");
    serde_json::to_string(&value).expect("a Value always serializes")
}

/// Lowercase hex SHA-256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// Lowercase hex of bytes.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// The discovery fingerprint: SHA-256 over the conda version and the plugin inventory.
///
/// Records are sorted by their own canonical JSON (hooks sorted within each), then the
/// canonical JSON of `{"conda_version": v, "plugins": records}` is hashed.
pub fn discovery_fingerprint(conda_version: &str, plugins: &[Plugin]) -> String {
    let mut records: Vec<(String, Value)> = plugins
        .iter()
        .map(|p| {
            let mut hooks = p.hooks.clone();
            hooks.sort();
            let record = serde_json::json!({
                "distribution": p.distribution,
                "version": p.version,
                "entry_point": p.entry_point,
                "value": p.value,
                "hooks": hooks,
            });
            (canonical_json(&record), record)
        })
        .collect();
    records.sort_by(|a, b| a.0.cmp(&b.0));
    let payload = serde_json::json!({
        "conda_version": conda_version,
        "plugins": records.into_iter().map(|(_, r)| r).collect::<Vec<_>>(),
    });
    sha256_hex(canonical_json(&payload).as_bytes())
}

impl Catalog {
    /// A catalog for a target whose discovery failed: no commands, one global diagnostic.
    pub fn unavailable(prog: &str, conda_version: &str, reason: &str) -> Self {
        Catalog {
            prog: prog.to_owned(),
            conda_version: conda_version.to_owned(),
            root: None,
            diagnostics: vec![Diagnostic {
                path: Vec::new(),
                reason: truncate_reason(reason),
                action_type: None,
                blocking: true,
            }],
        }
    }

    /// Every command with its path (root excluded), depth-first pre-order.
    pub fn commands(&self) -> Vec<(Vec<&Command>, Vec<String>)> {
        let mut out = Vec::new();
        if let Some(root) = &self.root {
            let mut branch = vec![root];
            walk(root, &mut branch, &mut Vec::new(), &mut out);
        }
        out
    }

    /// The branch (root → … → command) for a canonical path.
    pub fn branch(&self, path: &[String]) -> Option<Vec<&Command>> {
        let mut node = self.root.as_ref()?;
        let mut branch = vec![node];
        for part in path {
            node = node
                .children
                .iter()
                .find(|c| c.name.as_deref() == Some(part.as_str()))?;
            branch.push(node);
        }
        Some(branch)
    }
}

fn walk<'a>(
    node: &'a Command,
    branch: &mut Vec<&'a Command>,
    path: &mut Vec<String>,
    out: &mut Vec<(Vec<&'a Command>, Vec<String>)>,
) {
    for child in &node.children {
        let name = child.name.clone().unwrap_or_default();
        path.push(name);
        branch.push(child);
        out.push((branch.clone(), path.clone()));
        walk(child, branch, path, out);
        branch.pop();
        path.pop();
    }
}

/// Diagnostic reasons are bounded (512 characters), like every fixed text we report.
pub fn truncate_reason(reason: &str) -> String {
    reason.chars().take(512).collect()
}

#[cfg(test)]
mod tests;
