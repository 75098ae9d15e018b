//! Environment-scoped writes (`--write-envs`): which commands write into one or two
//! environments they name, and whether a resolved target lies in the operator's scope.
//!
//! The scope narrows `--allow-write`: a call the policy admits as a write (and every
//! `conda run`) runs only when every environment its final argv targets matches. Targets
//! are resolved by conda's own context under the target's interpreter (the host's job);
//! this module holds the table of commands that have targets and the matching, on paths
//! the host already made canonical. Commands that write but target no single environment
//! (`config`, `clean`, `package`, `export --file`, `doctor --fix`, `init`, plugins) need
//! `--allow-write` without a scope. Pure; no I/O.

use std::path::{Path, PathBuf};

use glob::Pattern;

/// conda's name for the root environment; `root` is its old alias
/// (conda/base/constants.py: `ROOT_ENV_NAME = "base"`).
const BASE: &str = "base";

/// Refusal: a write whose command targets no single environment.
pub(crate) const NO_TARGET: &str =
    "Operation writes outside a single environment: requires --allow-write without --write-envs";
/// Refusal: `create`/`env create`/`env update` without `name` or `prefix` take the target
/// from an environment file, which the scope does not read.
pub(crate) const NOT_NAMED: &str =
    "Operation takes its environment from a file: give name or prefix (--write-envs)";
/// Refusal: conda's context could not resolve the target.
pub(crate) const UNRESOLVED: &str =
    "Operation's target environment could not be resolved (--write-envs)";

/// How a command's targets are found, per conda 26.7.1's source.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Rule {
    /// The target must be given as `-n`/`-p`: without them conda reads it from a file.
    pub named: bool,
    /// The command has a second target, its `destination` positional (`rename`).
    pub destination: bool,
}

/// The rule of a canonical command path; `None` for commands with no single target.
pub(crate) fn rule(path: &[String]) -> Option<Rule> {
    let p: Vec<&str> = path.iter().map(String::as_str).collect();
    let plain = Rule {
        named: false,
        destination: false,
    };
    let named = Rule {
        named: true,
        destination: false,
    };
    // A table.
    match p.as_slice() {
        // conda/cli/install.py:295 `prefix = context.target_prefix` (install and update,
        // conda/cli/main_install.py and main_update.py call `install`).
        ["install"] | ["update"] => Some(plain),
        // conda/cli/main_remove.py:164 `PrefixData.from_context()`.
        ["remove"] => Some(plain),
        // conda/cli/main_create.py:151-166: without -n/-p the name comes from --file.
        ["create"] => Some(named),
        // conda/cli/main_env_create.py: the spec's name unless -n/-p; main_env_update.py:
        // 105-130 the same, then `determine_target_prefix(context, args)`.
        ["env", "create"] | ["env", "update"] => Some(named),
        // conda/cli/main_env_remove.py: `context.target_prefix` via `PrefixData.from_context`.
        ["env", "remove"] => Some(plain),
        // conda/cli/main_env_vars.py:125,142,159 `determine_target_prefix(context, args)`.
        ["env", "config", "vars", "set"] | ["env", "config", "vars", "unset"] => Some(plain),
        // conda/cli/main_rename.py:79 source `PrefixData.from_context()`; :95-101 the
        // destination: a path when it holds os.sep, else `PrefixData.from_name`.
        ["rename"] => Some(Rule {
            named: false,
            destination: true,
        }),
        // conda/cli/main_run.py:109 `PrefixData.from_context()`.
        ["run"] => Some(plain),
        _ => None,
    }
}

/// What a refusal may say about a target: its kind, never its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The root prefix.
    Base,
    /// An environment directly in one of conda's envs directories.
    Named,
    /// Any other prefix.
    Path,
}

impl Kind {
    fn words(self) -> &'static str {
        match self {
            Kind::Base => "the base environment",
            Kind::Named => "a named environment",
            Kind::Path => "an environment by path",
        }
    }
}

/// One target as the host resolved it: a canonical path (symlinks of its existing part
/// resolved, no `.`/`..`, no trailing slash), whether it is the root prefix, and its
/// name when it lies directly in one of conda's envs directories.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub path: PathBuf,
    pub root: bool,
    pub name: Option<String>,
}

impl Target {
    pub fn kind(&self) -> Kind {
        match (self.root, &self.name) {
            (true, _) => Kind::Base,
            (false, Some(_)) => Kind::Named,
            (false, None) => Kind::Path,
        }
    }
}

/// Why `--write-envs` cannot be used as given.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ScopeError {
    #[error("no pattern given")]
    Empty,
    #[error("a prefix path must be absolute (entry {0})")]
    Relative(usize),
    #[error("a prefix path must not contain '.' or '..' components (entry {0})")]
    Dots(usize),
    #[error("invalid name pattern (entry {0})")]
    Glob(usize),
}

/// The operator's scope: name globs and prefix paths.
#[derive(Clone, Debug)]
pub struct Scope {
    /// The patterns as given (compared for equality, shown by `ccm tools --json`).
    patterns: Vec<String>,
    /// Name globs other than `base` (which no glob matches).
    names: Vec<Pattern>,
    /// Whether `base` is named explicitly.
    base: bool,
    /// Prefix paths, as given (absolute); the host makes them canonical per check.
    paths: Vec<PathBuf>,
}

impl PartialEq for Scope {
    fn eq(&self, other: &Self) -> bool {
        self.patterns == other.patterns
    }
}

impl Scope {
    /// Parse comma-separated entries: an entry with a `/` is an absolute prefix path,
    /// any other a name glob (`*`, `?`, `[...]`); `base` names the root environment.
    pub fn parse<'a>(entries: impl IntoIterator<Item = &'a str>) -> Result<Scope, ScopeError> {
        let patterns: Vec<String> = entries
            .into_iter()
            .flat_map(|e| e.split(','))
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .map(str::to_owned)
            .collect();
        if patterns.is_empty() {
            return Err(ScopeError::Empty);
        }
        let mut names = Vec::new();
        let mut base = false;
        let mut paths = Vec::new();
        for (index, pattern) in patterns.iter().enumerate() {
            let entry = index + 1;
            if pattern.contains('/') {
                let path = Path::new(pattern);
                if !path.is_absolute() {
                    return Err(ScopeError::Relative(entry));
                }
                if path
                    .components()
                    .any(|c| matches!(c, std::path::Component::ParentDir))
                    || pattern.split('/').any(|part| part == ".")
                {
                    return Err(ScopeError::Dots(entry));
                }
                paths.push(path.components().collect());
            } else if pattern == BASE {
                base = true;
            } else {
                names.push(Pattern::new(pattern).map_err(|_| ScopeError::Glob(entry))?);
            }
        }
        Ok(Scope {
            patterns,
            names,
            base,
            paths,
        })
    }

    /// The patterns as given.
    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }

    /// The prefix paths, for the host to make canonical.
    pub fn paths(&self) -> &[PathBuf] {
        &self.paths
    }

    /// Whether `target` is in the scope, given the canonical forms of [`Scope::paths`]
    /// (`None` where a path could not be made canonical: it matches nothing). The root
    /// prefix matches only `base` or its own path, never a glob.
    pub fn admits(&self, target: &Target, canonical_paths: &[Option<PathBuf>]) -> bool {
        if canonical_paths.iter().flatten().any(|p| *p == target.path) {
            return true;
        }
        if target.root {
            return self.base;
        }
        target
            .name
            .as_deref()
            .is_some_and(|name| self.names.iter().any(|p| p.matches(name)))
    }

    /// The refusal for a target outside the scope: its kind, never its value.
    pub fn refusal(kind: Kind) -> String {
        format!("Operation targets {} outside --write-envs", kind.words())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(path: &str, root: bool, name: Option<&str>) -> Target {
        Target {
            path: PathBuf::from(path),
            root,
            name: name.map(str::to_owned),
        }
    }

    fn paths(scope: &Scope) -> Vec<Option<PathBuf>> {
        scope.paths().iter().cloned().map(Some).collect()
    }

    #[test]
    fn names_globs_and_paths() {
        let scope = Scope::parse(["proj-*,scratch", "/work/envs/app/"]).unwrap();
        let canon = paths(&scope);
        assert!(scope.admits(&target("/c/envs/proj-a", false, Some("proj-a")), &canon));
        assert!(scope.admits(&target("/c/envs/scratch", false, Some("scratch")), &canon));
        assert!(!scope.admits(&target("/c/envs/scratch2", false, Some("scratch2")), &canon));
        // A path pattern matches that path (a trailing slash is not part of it) ...
        assert!(scope.admits(&target("/work/envs/app", false, None), &canon));
        // ... and nothing below or beside it.
        assert!(!scope.admits(&target("/work/envs/app/sub", false, None), &canon));
        assert!(!scope.admits(&target("/work/envs/application", false, None), &canon));
        // A name glob never matches a prefix outside conda's envs directories.
        assert!(!scope.admits(&target("/tmp/proj-a", false, None), &canon));
    }

    #[test]
    fn base_only_when_named() {
        let any = Scope::parse(["*"]).unwrap();
        let root = target("/c", true, Some("base"));
        assert!(!any.admits(&root, &paths(&any)));
        assert!(any.admits(&target("/c/envs/x", false, Some("x")), &paths(&any)));
        let named = Scope::parse(["base"]).unwrap();
        assert!(named.admits(&root, &paths(&named)));
        assert!(!named.admits(&target("/c/envs/base", false, Some("base")), &paths(&named)));
        let glob = Scope::parse(["ba*", "b?se", "[b]ase"]).unwrap();
        assert!(!glob.admits(&root, &paths(&glob)));
        // The root prefix by its path is named explicitly.
        let by_path = Scope::parse(["/c"]).unwrap();
        assert!(by_path.admits(&root, &paths(&by_path)));
        // A path that could not be made canonical matches nothing.
        assert!(!by_path.admits(&root, &[None]));
    }

    #[test]
    fn bad_entries_are_refused_without_their_text() {
        assert_eq!(Scope::parse([""]).unwrap_err(), ScopeError::Empty);
        assert_eq!(
            Scope::parse(["a,envs/x"]).unwrap_err(),
            ScopeError::Relative(2)
        );
        assert_eq!(Scope::parse(["/a/../b"]).unwrap_err(), ScopeError::Dots(1));
        assert_eq!(Scope::parse(["/a/./b"]).unwrap_err(), ScopeError::Dots(1));
        assert_eq!(
            Scope::parse(["x", "[oops"]).unwrap_err(),
            ScopeError::Glob(2)
        );
        for error in [ScopeError::Relative(2), ScopeError::Glob(2)] {
            assert!(!error.to_string().contains("oops"));
        }
    }

    #[test]
    fn the_table() {
        let path = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(rule(&path(&["install"])).map(|r| r.named), Some(false));
        assert_eq!(rule(&path(&["create"])).map(|r| r.named), Some(true));
        assert_eq!(rule(&path(&["env", "update"])).map(|r| r.named), Some(true));
        assert_eq!(rule(&path(&["rename"])).map(|r| r.destination), Some(true));
        for none in [
            &["config"][..],
            &["clean"],
            &["package"],
            &["export"],
            &["init"],
        ] {
            assert_eq!(rule(&path(none)), None);
        }
        assert_eq!(
            Scope::refusal(Kind::Base),
            "Operation targets the base environment outside --write-envs"
        );
    }
}
