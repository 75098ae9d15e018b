//! Which calls of a command the policy admits under the operator's grants, in the terms a
//! listed schema can state: nothing, everything, or a restricted form (only dry runs,
//! some options left out, one of some options required, plain package specs). The
//! listing (`tools::listing`) turns a [`ListedForm`] into the schema an agent is shown; the
//! policy on the final argv stays the only gate. Every restriction mirrors an arm of
//! `conda::judge` (the same source lines decide it); a property test proves that no input
//! a restricted schema admits is refused. Pure; no I/O.

use super::conda::CONFIG_MODIFIERS;
use super::{Grants, Rules};

/// Why a dry run that names an environment needs `--allow-write` where the read-only
/// sandbox is not active (see `conda::judge`, install/update).
pub const UNSANDBOXED: &str = "A dry run that names an environment (name, prefix) is \
     read-only only in the read-only sandbox, which is not active on this server: conda \
     first empties the trash of the directory it is given, which there would take effect.";

/// What a listed schema may offer of one command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListedForm {
    /// The policy refuses every call: not listed.
    Refused,
    /// Every call the full schema admits is admitted (path confinement aside).
    Full,
    /// Only the calls of this form are admitted.
    Restricted(Restriction),
}

/// A restricted form, stated on option strings (the listing maps them to properties).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Restriction {
    /// Only dry runs: the `--dry-run` option must be given.
    pub dry_run: bool,
    /// Options left out: every property one of these flags belongs to.
    pub without: Vec<&'static str>,
    /// At least one of these options must be given; `true` when it must carry at least
    /// one value.
    pub one_of: Vec<(&'static str, bool)>,
    /// The command's own positional values must be plain package specs
    /// ([`super::PLAIN_SPEC`]).
    pub plain_specs: bool,
    /// The grants a call outside this form needs (for the description and errors).
    pub needs: Vec<&'static str>,
    /// Some options left out are admitted where the read-only sandbox is active (it is
    /// not here): the errors say so.
    pub unsandboxed: bool,
}

/// The listed form of the command at `path` (`opaque`: it takes uninspected input) under
/// `grants`.
pub fn listed_form(rules: &Rules, path: &[String], opaque: bool, grants: Grants) -> ListedForm {
    let strictest = super::describe(rules, path, opaque);
    let needs = strictest.missing(grants);
    if needs.is_empty() {
        // Credentials are an option of `info` only; leave it out unless granted.
        return match credentials_option(rules, path) {
            Some(flag) if !grants.credentials => ListedForm::Restricted(Restriction {
                without: vec![flag],
                needs: vec!["--allow-credentials"],
                ..Restriction::default()
            }),
            _ => ListedForm::Full,
        };
    }
    // Only conda's own commands have forms that need less than their strictest verdict;
    // an operator's classification is per command.
    if needs != ["--allow-write"] || rules.operator.contains_key(path) {
        return ListedForm::Refused;
    }
    let p: Vec<&str> = path.iter().map(String::as_str).collect();
    match restriction(&p, rules.sandboxed()) {
        Some(mut restriction) => {
            restriction.needs = needs;
            ListedForm::Restricted(restriction)
        }
        None => ListedForm::Refused,
    }
}

/// `info --unsafe-channels` (conda/cli/main_info.py:578) prints channel tokens.
fn credentials_option(rules: &Rules, path: &[String]) -> Option<&'static str> {
    (path == ["info"] && !rules.operator.contains_key(path)).then_some("--unsafe-channels")
}

/// The read-only forms of conda's own writing commands (see `conda::judge`, whose arms
/// cite the source lines; `sandboxed`: read-only calls run in the read-only sandbox).
/// `None`: no form is read-only.
// A table: one arm per command path, mirroring conda::judge.
fn restriction(path: &[&str], sandboxed: bool) -> Option<Restriction> {
    let dry_run = Restriction {
        dry_run: true,
        ..Restriction::default()
    };
    let restriction = match path {
        // conda::judge `config`: read-only only where execute_config returns early
        // (--show-sources, --show, --describe, --validate, --get with keys) and no
        // modifier is given.
        ["config"] => Restriction {
            without: CONFIG_MODIFIERS.to_vec(),
            one_of: vec![
                ("--show-sources", false),
                ("--show", false),
                ("--describe", false),
                ("--validate", false),
                ("--get", true),
            ],
            ..Restriction::default()
        },
        // conda::judge `export`: writes only with -f/--file.
        ["export"] | ["env", "export"] => Restriction {
            without: vec!["-f", "--file"],
            ..Restriction::default()
        },
        // conda::judge `doctor`: writes only with --fix.
        ["doctor"] | ["check"] => Restriction {
            without: vec!["--fix"],
            ..Restriction::default()
        },
        // conda::judge `package`: read-only with --which, or --untracked without --reset.
        ["package"] => Restriction {
            without: vec!["-r", "--reset"],
            one_of: vec![("--which", false), ("--untracked", false)],
            ..Restriction::default()
        },
        // conda::judge: dry runs stop before any write.
        ["remove"] | ["env", "remove"] | ["rename"] | ["clean"] | ["init"] => dry_run,
        // conda::judge `create`: a dry run that solves (no --file, --revision, --clone,
        // no explicit package files or URLs).
        ["create"] => Restriction {
            without: vec!["--file", "--revision", "--clone"],
            plain_specs: true,
            ..dry_run
        },
        // conda::judge `install`/`update`: as `create`; a target named with -n/-p (which
        // may be a directory that is not an environment, whose trash conda empties) only
        // where the read-only sandbox keeps that from having effect.
        ["install"] | ["update"] if sandboxed => Restriction {
            without: vec!["--file", "--revision", "--clone"],
            plain_specs: true,
            ..dry_run
        },
        ["install"] | ["update"] => Restriction {
            without: vec![
                "--file",
                "--revision",
                "--clone",
                "-n",
                "--name",
                "-p",
                "--prefix",
            ],
            plain_specs: true,
            unsandboxed: true,
            ..dry_run
        },
        _ => return None,
    };
    Some(restriction)
}

impl Restriction {
    /// One sentence for the tool's description and for schema errors: what is offered
    /// and what a call outside it needs. `omitted` are the property ids left out,
    /// `one_of` those of which one is required.
    pub fn sentence(&self, omitted: &[String], one_of: &[String]) -> String {
        let needs = self.needs.join(" and ");
        let mut parts = Vec::new();
        if self.dry_run {
            parts.push("only dry runs (dry_run: true)".to_owned());
        }
        if !one_of.is_empty() {
            parts.push(format!("one of {} is required", one_of.join(", ")));
        }
        if self.plain_specs {
            parts.push("package specs must be plain match specs (no files or URLs)".to_owned());
        }
        if !omitted.is_empty() {
            parts.push(format!("not offered: {}", omitted.join(", ")));
        }
        if parts.is_empty() {
            parts.push("only read-only forms".to_owned());
        }
        format!("Here: {}. Anything else needs {needs}.", parts.join("; "))
    }
}
