//! The safety policy: what an argv does, decided on the exact argv that will run.
//!
//! [`classify`] reads the argv the way argparse will, against the live catalog: option
//! abbreviations, short clusters (`-yd`), `--opt=value`, options before subcommand names,
//! `--`, values that belong to an option, `REMAINDER` positionals that swallow the rest.
//! That gives the command path, the options really present (with the number of values of
//! their last occurrence) and the positional values. The verdict then comes from
//! allow-lists derived from the source of conda 26.7 ([`conda`]) and of every reviewed
//! plugin ([`plugins`]), each entry citing the source line that justifies it:
//!
//! - a command path that no table knows (a plugin nobody reviewed, or a reviewed plugin at
//!   another version) needs `--allow-write` *and* `--allow-exec`: it can do anything;
//! - option-dependent commands (`config`, `export`, `package`, `doctor`) are read-only only
//!   in the forms conda's code proves read-only (`conda config` writes its rc file unless
//!   it returns early, so the rule lists the early returns, not the mutations);
//! - a dry run is exempt only where conda's code stops before any write, with the exact
//!   `--dry-run`/`-d` token, argparse seeing conda's dry-run option, and none of the inputs
//!   that make conda ignore the dry run (explicit package files or URLs, `--file`,
//!   `--revision`);
//! - options that print credentials (`info --unsafe-channels`) need `--allow-credentials`;
//! - the operator's `--classify TOOL=read|write|exec` replaces the tables for a command.
//!
//! An argv the simulation cannot follow (unknown option or command, ambiguous
//! abbreviation) gets the strictest verdict. Tool annotations come from the same rules
//! ([`describe`]). Pure; no I/O.

mod conda;
mod listed_form;
mod plugins;
mod simulate;
pub(crate) mod write_envs;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::model::catalog::{Command, Plugin, normalize_distribution};

pub use conda::PLAIN_SPEC;
pub use listed_form::{ListedForm, Restriction, UNSANDBOXED, listed_form};
use simulate::simulate;

/// What an operation does, and which startup options it needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Classification {
    pub read_only: bool,
    pub open_world: bool,
    pub requires_write: bool,
    pub requires_exec: bool,
    /// The output reveals credentials (tokens in channel URLs): needs `--allow-credentials`.
    pub reveals_credentials: bool,
}

/// The startup options the operator granted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Grants {
    pub write: bool,
    pub exec: bool,
    pub credentials: bool,
}

impl Classification {
    /// The strictest verdict: anything may happen.
    pub const STRICT: Classification = Classification {
        read_only: false,
        open_world: true,
        requires_write: true,
        requires_exec: true,
        reveals_credentials: false,
    };

    /// Startup options this operation needs that are not granted, in the order
    /// `--allow-write`, `--allow-exec`, `--allow-credentials`.
    pub fn missing(&self, grants: Grants) -> Vec<&'static str> {
        let mut missing = Vec::new();
        if self.requires_write && !grants.write {
            missing.push("--allow-write");
        }
        if self.requires_exec && !grants.exec {
            missing.push("--allow-exec");
        }
        if self.reveals_credentials && !grants.credentials {
            missing.push("--allow-credentials");
        }
        missing
    }

    /// The fixed refusal text for missing options.
    pub fn refusal(missing: &[&str]) -> String {
        format!("Operation requires {}", missing.join(" and "))
    }
}

/// What a command does, as a table entry or an operator's classification says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// No form writes anything outside conda's declared caches, none runs a program.
    Read,
    /// Some form writes; none runs a program the caller chooses.
    Write,
    /// Some form runs a program, shell line or task the caller chooses (and may write):
    /// needs `--allow-write` and `--allow-exec`.
    Exec,
    /// Runs the caller's program and does nothing else itself (`conda run`): needs only
    /// `--allow-exec` (such calls run in the read-only sandbox where it is available).
    Run,
}

impl Access {
    fn classification(self, open_world: bool) -> Classification {
        let (read_only, requires_write, requires_exec) = match self {
            Access::Read => (true, false, false),
            Access::Write => (false, true, false),
            Access::Exec => (false, true, true),
            Access::Run => (false, false, true),
        };
        Classification {
            read_only,
            open_world,
            requires_write,
            requires_exec,
            reveals_credentials: false,
        }
    }

    /// Parse an operator's `read`, `write` or `exec`.
    pub fn parse(text: &str) -> Option<Access> {
        match text {
            "read" => Some(Access::Read),
            "write" => Some(Access::Write),
            "exec" => Some(Access::Exec),
            _ => None,
        }
    }
}

/// One reviewed plugin command.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rule {
    /// Canonical command path (`["workspace", "run"]`).
    pub path: &'static [&'static str],
    pub access: Access,
    /// Reaches the network.
    pub network: bool,
    /// Why, with the source line (`package/file.py:LINE`) that decides it.
    pub why: &'static str,
}

/// A reviewed plugin distribution: its rules apply only when this distribution is
/// installed at a version of the same `major.minor` series.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Reviewed {
    pub distribution: &'static str,
    pub series: &'static str,
    pub rules: &'static [Rule],
}

/// Where an argv comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// `conda_execute`: always needs `--allow-exec`.
    Raw,
    /// A generated tool; `opaque` when it takes uninspected input (remainder, passthrough).
    Generated { opaque: bool },
}

/// The rules in force for one target: conda's own, those of the reviewed plugins that are
/// installed at a reviewed version, and the operator's classifications.
#[derive(Clone, Debug, Default)]
pub struct Rules {
    plugin: HashMap<Vec<String>, Rule>,
    operator: BTreeMap<Vec<String>, Access>,
    /// Read-only calls run in the read-only sandbox (`host::sandbox` is active): a few
    /// forms are read-only only there ([`conda`]'s dry runs that name an environment).
    sandboxed: bool,
}

impl Rules {
    /// The rules for a target with these plugin distributions installed.
    pub fn new(plugins: &[Plugin]) -> Rules {
        let installed: BTreeSet<(String, String)> = plugins
            .iter()
            .map(|p| (normalize_distribution(&p.distribution), p.version.clone()))
            .collect();
        let mut plugin = HashMap::new();
        for reviewed in plugins::REVIEWED {
            let applies = installed.iter().any(|(name, version)| {
                *name == normalize_distribution(reviewed.distribution)
                    && same_series(version, reviewed.series)
            });
            if applies {
                for rule in reviewed.rules {
                    plugin.insert(owned(rule.path), *rule);
                }
            }
        }
        Rules {
            plugin,
            operator: BTreeMap::new(),
            sandboxed: false,
        }
    }

    /// Say whether read-only calls run in the read-only sandbox (they do when it is
    /// active): the verdicts of the forms whose only write the sandbox keeps from having
    /// effect depend on it.
    pub fn set_sandboxed(&mut self, sandboxed: bool) {
        self.sandboxed = sandboxed;
    }

    /// Whether read-only calls run in the read-only sandbox ([`Rules::set_sandboxed`]).
    pub fn sandboxed(&self) -> bool {
        self.sandboxed
    }

    /// Add the operator's classification of a command path (it replaces every table).
    pub fn classify_as(&mut self, path: Vec<String>, access: Access) {
        self.operator.insert(path, access);
    }

    /// Whether the operator classified this command path (`--classify`).
    pub fn operator_classified(&self, path: &[String]) -> bool {
        self.operator.contains_key(path)
    }

    /// Where a command path's verdict comes from, in words (for `ccm tools --json`).
    pub fn source(&self, path: &[String]) -> &'static str {
        if self.operator.contains_key(path) {
            return "classified by the operator (--classify)";
        }
        let p: Vec<&str> = path.iter().map(String::as_str).collect();
        let probe = Facts {
            path: path.to_vec(),
            options: Vec::new(),
            values: &HashMap::new(),
            positionals: &[],
            dry_run: false,
            sandboxed: false,
        };
        if conda::judge(&p, &probe).is_some() {
            return "conda's own command, classified from conda 26.7's source";
        }
        match self.plugin.get(path) {
            Some(rule) => rule.why,
            None => {
                "not in the policy's tables (an unreviewed plugin or version): needs --allow-write and --allow-exec unless classified with --classify"
            }
        }
    }

    /// The table verdict for a command path and what argparse saw.
    fn judge(&self, facts: &Facts) -> Classification {
        if let Some(access) = self.operator.get(&facts.path) {
            return access.classification(true);
        }
        let path: Vec<&str> = facts.path.iter().map(String::as_str).collect();
        if let Some(verdict) = conda::judge(&path, facts) {
            return verdict;
        }
        match self.plugin.get(&facts.path) {
            Some(rule) => rule.access.classification(rule.network),
            None => Classification::STRICT,
        }
    }
}

fn owned(path: &[&str]) -> Vec<String> {
    path.iter().map(|s| (*s).to_owned()).collect()
}

/// `0.13.1` is in the series `0.13`.
fn same_series(version: &str, series: &str) -> bool {
    version == series
        || version
            .strip_prefix(series)
            .is_some_and(|rest| rest.starts_with('.'))
}

/// What argparse will see, as the rule tables read it.
pub(crate) struct Facts<'a> {
    pub path: Vec<String>,
    /// Every option string of every option action present, plus every mutating option a
    /// token could textually be read as.
    pub options: Vec<String>,
    /// Values of the last occurrence of each option action, by its first flag.
    pub values: &'a HashMap<String, usize>,
    /// Positional values of the command's own level.
    pub positionals: &'a [String],
    /// The exact `--dry-run`/`-d` token is present and argparse triggers conda's
    /// dry-run option.
    pub dry_run: bool,
    /// Read-only verdicts run in the read-only sandbox ([`Rules::sandboxed`]).
    pub sandboxed: bool,
}

impl Facts<'_> {
    fn has(&self, names: &[&str]) -> bool {
        self.options.iter().any(|o| names.contains(&o.as_str()))
    }

    /// Values of the last occurrence of the option whose flags include `flag`.
    fn last_values(&self, flag: &str) -> Option<usize> {
        self.values.get(flag).copied()
    }
}

/// Classify the final argv (without the conda executable).
pub fn classify(
    rules: &Rules,
    root: Option<&Command>,
    argv: &[String],
    origin: Origin,
) -> Classification {
    let exec = match origin {
        Origin::Raw => true,
        Origin::Generated { opaque } => opaque,
    };
    let Some(parsed) = root.and_then(|root| simulate(root, argv)) else {
        return Classification::STRICT;
    };
    let mut options = textual_options(argv);
    for flag in &parsed.present {
        if !options.contains(flag) {
            options.push(flag.clone());
        }
    }
    let dry_run_token = tokens_before_separator(argv).any(|t| t == "--dry-run" || t == "-d");
    let facts = Facts {
        path: parsed.path.clone(),
        options,
        values: &parsed.values,
        positionals: &parsed.positionals,
        dry_run: dry_run_token && parsed.dry_run,
        sandboxed: rules.sandboxed,
    };
    let mut verdict = rules.judge(&facts);
    verdict.requires_exec |= exec;
    verdict
}

/// The command path argparse reaches for an argv (aliases resolved to canonical names);
/// `None` when the simulation cannot follow the argv (the strictest verdict's case).
pub fn command_path(root: Option<&Command>, argv: &[String]) -> Option<Vec<String>> {
    root.and_then(|root| simulate(root, argv))
        .map(|parsed| parsed.path)
}

/// How conda's parser reads each argv token that is one of its options: every flag of
/// the option actions it triggers (abbreviations resolved: `--se` reads as `--set`), by
/// position; `None` for other tokens, and for every token when the simulation cannot
/// follow the argv (the audit log's redaction then judges names as written).
pub fn option_readings(root: Option<&Command>, argv: &[String]) -> Vec<Option<Vec<String>>> {
    let mut out = vec![None; argv.len()];
    if let Some(parsed) = root.and_then(|root| simulate(root, argv)) {
        for (at, flags) in parsed.readings {
            out[at] = Some(flags);
        }
    }
    out
}

/// The commands that fetch and extract packages through conda's package cache (and so,
/// with `--json` on a terminal, write fetch records): `create`, `install`, `update` (and
/// its alias), `env create`, `env update`.
pub const FETCHING: &[&[&str]] = &[
    &["create"],
    &["install"],
    &["update"],
    &["env", "create"],
    &["env", "update"],
];

/// Whether conda's JSON reporter would write fetch records for `argv` if its stdout were
/// a terminal: a [`FETCHING`] command with `--json`, not a dry run (nothing is fetched),
/// not quiet or verbose (conda then disables its progress bars).
pub fn writes_fetch_records(root: Option<&Command>, argv: &[String]) -> bool {
    let Some(parsed) = root.and_then(|root| simulate(root, argv)) else {
        return false;
    };
    let present = |flag: &str| parsed.present.iter().any(|p| p == flag);
    FETCHING.iter().any(|path| parsed.path == *path)
        && present("--json")
        && !parsed.dry_run
        && !["--quiet", "--verbose", "--debug", "--trace"]
            .iter()
            .any(|flag| present(flag))
}

/// The top-level commands a reviewed plugin distribution adds (any reviewed version), by
/// its normalized name; `None` for a distribution no table reviews.
pub fn plugin_commands(distribution: &str) -> Option<Vec<&'static str>> {
    let reviewed: Vec<&Reviewed> = plugins::REVIEWED
        .iter()
        .filter(|r| normalize_distribution(r.distribution) == distribution)
        .collect();
    if reviewed.is_empty() {
        return None;
    }
    let mut commands: Vec<&'static str> = reviewed
        .iter()
        .flat_map(|r| r.rules.iter().filter_map(|rule| rule.path.first().copied()))
        .collect();
    commands.sort_unstable();
    commands.dedup();
    Some(commands)
}

/// Tool-level classification (annotations): the strictest verdict any call of the tool
/// can get (every option-dependent command counts as writing).
pub fn describe(rules: &Rules, path: &[String], opaque: bool) -> Classification {
    let values = HashMap::new();
    let facts = Facts {
        path: path.to_vec(),
        options: conda::mutating_options().map(str::to_owned).collect(),
        values: &values,
        positionals: &[],
        dry_run: false,
        sandboxed: false,
    };
    let mut verdict = rules.judge(&facts);
    verdict.requires_exec |= opaque;
    verdict
}

fn tokens_before_separator(argv: &[String]) -> impl Iterator<Item = &str> {
    argv.iter().map(String::as_str).take_while(|t| *t != "--")
}

/// Option-like tokens before `--`, cut at `=`, plus every mutating option they could be
/// read as (long abbreviations, letters of short clusters).
fn textual_options(argv: &[String]) -> Vec<String> {
    let mutating: Vec<&str> = conda::mutating_options().collect();
    let mut out: Vec<String> = Vec::new();
    let mut push = |s: &str| {
        if !out.iter().any(|o| o == s) {
            out.push(s.to_owned());
        }
    };
    for token in tokens_before_separator(argv) {
        if !token.starts_with('-') || token == "-" {
            continue;
        }
        let option = token.split('=').next().unwrap_or(token);
        push(option);
        if option.starts_with("--") {
            for candidate in mutating.iter().filter(|c| c.starts_with("--")) {
                if candidate.starts_with(option) {
                    push(candidate);
                }
            }
        } else {
            for candidate in mutating
                .iter()
                .filter(|c| c.len() == 2 && !c.starts_with("--"))
            {
                if option[1..].contains(&candidate[1..]) {
                    push(candidate);
                }
            }
        }
    }
    out
}
