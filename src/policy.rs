//! The safety policy: what an argv does, decided on the exact argv that will run.
//!
//! [`classify`] reads the argv the way argparse will, against the live catalog: option
//! abbreviations, short clusters (`-yd`), `--opt=value`, options before subcommand names,
//! `--`, values that belong to an option, `REMAINDER` positionals that swallow the rest.
//! That gives the command path and the options really present. The rules are the
//! established tables (read-only commands, config mutations, dry runs, …); for the
//! option-dependent rules the textual over-approximation (any token that could abbreviate
//! or cluster into a mutating option counts) is added on top, so simulation can only make
//! a verdict stricter. An argv the simulation cannot follow (unknown option or command,
//! ambiguous abbreviation) gets the strictest verdict. The dry-run exemption needs the
//! exact `--dry-run`/`-d` token *and* argparse seeing conda's dry-run option.
//!
//! Tool annotations come from the same rules ([`describe`]). Pure; no I/O.

use crate::catalog::{Argument, Command, Nargs};

/// What an operation does, and which startup options it needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Classification {
    pub read_only: bool,
    pub open_world: bool,
    pub requires_write: bool,
    pub requires_exec: bool,
}

impl Classification {
    const DEFAULT: Classification = Classification {
        read_only: false,
        open_world: true,
        requires_write: true,
        requires_exec: false,
    };

    /// Startup options this operation needs that are not granted, in the order
    /// `--allow-write`, `--allow-exec`.
    pub fn missing(&self, allow_write: bool, allow_exec: bool) -> Vec<&'static str> {
        let mut missing = Vec::new();
        if self.requires_write && !allow_write {
            missing.push("--allow-write");
        }
        if self.requires_exec && !allow_exec {
            missing.push("--allow-exec");
        }
        missing
    }

    /// The fixed refusal text for missing options.
    pub fn refusal(missing: &[&str]) -> String {
        format!("Operation requires {}", missing.join(" and "))
    }
}

/// Where an argv comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// `conda_execute`: always needs `--allow-exec`.
    Raw,
    /// A generated tool; `opaque` when it takes uninspected input (remainder, passthrough).
    Generated { opaque: bool },
}

const READ_ONLY_COMMANDS: &[&str] = &[
    "activate",
    "commands",
    "compare",
    "deactivate",
    "export",
    "info",
    "list",
    "notices",
    "repoquery",
    "search",
];
const NETWORK_READS: &[&str] = &["notices", "repoquery", "search"];
const MUTATING_COMMANDS: &[&str] = &[
    "clean",
    "content-trust",
    "create",
    "index",
    "init",
    "install",
    "menuinst",
    "package",
    "remove",
    "rename",
    "update",
];
const NETWORK_MUTATIONS: &[&str] = &["content-trust", "create", "install", "update"];
const CONFIG_MUTATIONS: &[&str] = &[
    "--add",
    "--append",
    "--prepend",
    "--remove",
    "--remove-key",
    "--set",
    "--stdin",
    "--write-default",
];
const OTHER_MUTATING_OPTIONS: &[&str] = &["-f", "--file", "--fix", "--heal", "-r", "--reset"];
const DRY_RUN_PATHS: &[&[&str]] = &[
    &["clean"],
    &["create"],
    &["doctor"],
    &["check"],
    &["env", "create"],
    &["env", "remove"],
    &["init"],
    &["install"],
    &["pypi", "install"],
    &["remove"],
    &["rename"],
    &["self", "install"],
    &["self", "remove"],
    &["self", "reset"],
    &["self", "update"],
    &["update"],
];
/// Tool-level annotations mark these destructive even though a bare run needs no flag.
const FORCED_WRITE_TOOLS: &[&[&str]] = &[
    &["config"],
    &["doctor"],
    &["check"],
    &["env", "export"],
    &["export"],
];

/// Classify the final argv (without the conda executable).
pub fn classify(root: Option<&Command>, argv: &[String], origin: Origin) -> Classification {
    let exec = match origin {
        Origin::Raw => true,
        Origin::Generated { opaque } => opaque,
    };
    let Some(parsed) = root.and_then(|root| simulate(root, argv)) else {
        return Classification {
            requires_exec: exec,
            ..Classification::DEFAULT
        };
    };
    let mut options = textual_options(argv);
    for flag in &parsed.present {
        if !options.contains(flag) {
            options.push(flag.clone());
        }
    }
    let mut verdict = rules(&parsed.path, &options);
    let path: Vec<&str> = parsed.path.iter().map(String::as_str).collect();
    let dry_run_token = tokens_before_separator(argv).any(|t| t == "--dry-run" || t == "-d");
    if DRY_RUN_PATHS.contains(&path.as_slice()) && dry_run_token && parsed.dry_run {
        verdict.read_only = true;
        verdict.requires_write = false;
    }
    verdict.requires_exec |= exec;
    verdict
}

/// Tool-level classification (annotations): the bare command, plus forced write for the
/// commands whose options commonly mutate.
pub fn describe(path: &[String], opaque: bool) -> Classification {
    let mut verdict = rules(path, &[]);
    let p: Vec<&str> = path.iter().map(String::as_str).collect();
    if FORCED_WRITE_TOOLS.contains(&p.as_slice()) {
        verdict.read_only = false;
        verdict.requires_write = true;
    }
    verdict.requires_exec |= opaque;
    verdict
}

fn rules(path: &[String], options: &[String]) -> Classification {
    let has = |names: &[&str]| options.iter().any(|o| names.contains(&o.as_str()));
    let p: Vec<&str> = path.iter().map(String::as_str).collect();
    let read_only = |open_world: bool| Classification {
        read_only: true,
        open_world,
        requires_write: false,
        requires_exec: false,
    };
    let write = |open_world: bool| Classification {
        read_only: false,
        open_world,
        requires_write: true,
        requires_exec: false,
    };
    let either = |mutates: bool| {
        if mutates {
            write(false)
        } else {
            read_only(false)
        }
    };
    let Some(first) = p.first().copied() else {
        return Classification::DEFAULT;
    };
    match p.as_slice() {
        ["export"] | ["env", "export"] => either(has(&["-f", "--file"])),
        ["config"] => either(has(CONFIG_MUTATIONS)),
        ["doctor"] | ["check"] => either(has(&["--fix", "--heal"])),
        ["env"]
        | ["env", "config"]
        | ["env", "config", "vars"]
        | ["env", "config", "vars", "list"]
        | ["env", "list"] => read_only(false),
        ["env", "config", "vars", "set" | "unset"] | ["env", "remove"] => write(false),
        ["env", "create" | "update"] => write(true),
        ["env", ..] => Classification::DEFAULT,
        ["run", ..] => Classification {
            read_only: false,
            open_world: true,
            requires_write: false,
            requires_exec: true,
        },
        ["package"] => {
            let inspect = has(&["-u", "-w", "--untracked", "--which"]);
            either(!inspect || has(&["-r", "--reset"]))
        }
        _ if READ_ONLY_COMMANDS.contains(&first) => read_only(NETWORK_READS.contains(&first)),
        _ if MUTATING_COMMANDS.contains(&first) => write(NETWORK_MUTATIONS.contains(&first)),
        ["pypi", rest @ ..] => write(rest == ["install"]),
        ["self", ..] => write(true),
        _ => Classification::DEFAULT,
    }
}

fn tokens_before_separator(argv: &[String]) -> impl Iterator<Item = &str> {
    argv.iter().map(String::as_str).take_while(|t| *t != "--")
}

/// Option-like tokens before `--`, cut at `=`, plus every mutating option they could be
/// read as (long abbreviations, letters of short clusters).
fn textual_options(argv: &[String]) -> Vec<String> {
    let mutating: Vec<&str> = CONFIG_MUTATIONS
        .iter()
        .chain(OTHER_MUTATING_OPTIONS)
        .copied()
        .collect();
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

/// What argparse will make of an argv.
#[derive(Debug, PartialEq, Eq)]
struct Parsed {
    /// Canonical command path.
    path: Vec<String>,
    /// Every option string of every option action argparse will trigger.
    present: Vec<String>,
    /// conda's `--dry-run` action was triggered.
    dry_run: bool,
}

enum Token<'a> {
    Positional,
    /// An option action, with an explicit value (`--opt=value`, `-Xvalue`).
    Option(&'a Argument, Option<String>),
}

/// Follow argparse through the catalog. `None` when argparse would fail or the catalog
/// cannot tell (unknown/ambiguous options or commands, positionals on a parent level).
fn simulate(root: &Command, argv: &[String]) -> Option<Parsed> {
    let mut parsed = Parsed {
        path: Vec::new(),
        present: Vec::new(),
        dry_run: false,
    };
    let mut level = root;
    let mut i = 0;
    let mut positional_index = 0;
    let mut separated = false;
    'tokens: while i < argv.len() {
        if level.passthrough {
            break; // a greedy plugin parser receives the rest unchanged
        }
        let token = argv[i].as_str();
        if !separated && token == "--" {
            separated = true;
            i += 1;
            continue;
        }
        let kind = if separated {
            Token::Positional
        } else {
            classify_token(level, token)?
        };
        match kind {
            Token::Option(argument, explicit) => {
                i += 1;
                let mut actions = vec![(argument, explicit)];
                // Short clusters: `-yd` is -y then -d; `-nfoo` is -n with the value foo.
                while let Some((argument, Some(rest))) = actions.last().cloned() {
                    if !argument.action.is_flag() || rest.is_empty() {
                        break;
                    }
                    let first = argument.flags.iter().find(|f| f.len() == 2)?;
                    if first.starts_with("--") {
                        return None; // `--flag=value` on a flag: argparse error
                    }
                    let next_flag = format!(
                        "{}{}",
                        &first[..1],
                        &rest[..rest.chars().next()?.len_utf8()]
                    );
                    let next = find_flag(level, &next_flag)?;
                    let remaining = rest[rest.chars().next()?.len_utf8()..].to_owned();
                    actions.last_mut()?.1 = None;
                    actions.push((next, (!remaining.is_empty()).then_some(remaining)));
                }
                for (argument, explicit) in actions {
                    record(&mut parsed, argument);
                    i = consume_values(level, argv, i, argument, explicit.is_some(), separated)?;
                }
            }
            Token::Positional => {
                let positionals: Vec<&Argument> = level
                    .arguments
                    .iter()
                    .filter(|a| a.is_positional())
                    .collect();
                let remaining = &positionals[positional_index.min(positionals.len())..];
                if !level.children.is_empty() {
                    if !remaining.is_empty() {
                        return None; // positionals before a subcommand: not followed here
                    }
                    let child = level.children.iter().find(|c| {
                        c.name.as_deref() == Some(token) || c.aliases.iter().any(|a| a == token)
                    })?;
                    parsed.path.push(child.name.clone()?);
                    level = child;
                    positional_index = 0;
                    i += 1;
                    continue 'tokens;
                }
                // The run of positional values up to the next option.
                let run = argv[i..]
                    .iter()
                    .take_while(|t| {
                        separated || matches!(classify_token(level, t), Some(Token::Positional))
                    })
                    .count();
                let mut limits = Vec::new();
                let mut swallow_at = None;
                for (k, argument) in remaining.iter().enumerate() {
                    if matches!(argument.nargs, Nargs::Remainder | Nargs::Parser) {
                        swallow_at = Some(k);
                        break;
                    }
                    limits.push(crate::argv::bounds(argument.nargs));
                }
                let counts = crate::argv::greedy_prefix(&limits, run);
                match (counts, swallow_at) {
                    (Some(_), Some(_)) => break 'tokens, // the remainder takes everything
                    (Some(counts), None) => {
                        let used: usize = counts.iter().sum();
                        if used < run {
                            return None; // extra positional values: argparse error
                        }
                        positional_index += counts.len();
                        i += used;
                    }
                    (None, _) => {
                        // argparse matches fewer positionals now and the rest later; take
                        // the values one by one (conservative for the policy's purposes).
                        positional_index += 1;
                        i += run;
                    }
                }
            }
        }
    }
    Some(parsed)
}

fn record(parsed: &mut Parsed, argument: &Argument) {
    if argument.flags.iter().any(|f| f == "--dry-run") {
        parsed.dry_run = true;
    }
    for flag in &argument.flags {
        if !parsed.present.contains(flag) {
            parsed.present.push(flag.clone());
        }
    }
}

/// Skip the values an option takes; the index after them, or `None` on an argparse error.
fn consume_values(
    level: &Command,
    argv: &[String],
    mut i: usize,
    argument: &Argument,
    explicit: bool,
    separated: bool,
) -> Option<usize> {
    let takes_values = !argument.action.is_flag();
    if !takes_values {
        return (!explicit).then_some(i);
    }
    if explicit {
        return match argument.nargs {
            Nargs::One | Nargs::Optional | Nargs::ZeroOrMore | Nargs::OneOrMore => Some(i),
            Nargs::Exactly(1) => Some(i),
            _ => None,
        };
    }
    let is_value = |t: &str| {
        !separated && t != "--" && matches!(classify_token(level, t), Some(Token::Positional))
    };
    let (min, max) = crate::argv::bounds(argument.nargs);
    if matches!(argument.nargs, Nargs::Remainder | Nargs::Parser) {
        return Some(argv.len());
    }
    let mut taken = 0;
    while taken < max && i < argv.len() && is_value(&argv[i]) {
        taken += 1;
        i += 1;
    }
    (taken >= min).then_some(i)
}

fn find_flag<'a>(level: &'a Command, flag: &str) -> Option<&'a Argument> {
    level
        .arguments
        .iter()
        .find(|a| a.flags.iter().any(|f| f == flag))
}

fn is_negative_number(token: &str) -> bool {
    let rest = &token[1..];
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    match rest.split_once('.') {
        None => digits(rest),
        Some((int, frac)) => (int.is_empty() || digits(int)) && digits(frac),
    }
}

/// argparse's `_parse_optional` for one parser.
fn classify_token<'a>(level: &'a Command, token: &str) -> Option<Token<'a>> {
    if token.is_empty() || !token.starts_with('-') {
        return Some(Token::Positional);
    }
    if let Some(argument) = find_flag(level, token) {
        return Some(Token::Option(argument, None));
    }
    if token.len() == 1 {
        return Some(Token::Positional);
    }
    if let Some((name, value)) = token.split_once('=')
        && let Some(argument) = find_flag(level, name)
    {
        return Some(Token::Option(argument, Some(value.to_owned())));
    }
    let flags = level
        .arguments
        .iter()
        .flat_map(|a| a.flags.iter().map(move |f| (a, f.as_str())));
    let mut matches: Vec<Token<'a>> = Vec::new();
    if token.starts_with("--") {
        let (prefix, explicit) = match token.split_once('=') {
            Some((p, v)) => (p, Some(v.to_owned())),
            None => (token, None),
        };
        for (argument, flag) in flags {
            if flag.starts_with(prefix) {
                matches.push(Token::Option(argument, explicit.clone()));
            }
        }
    } else if !token[1..].starts_with('-') {
        let short = &token[..token.char_indices().nth(2).map_or(token.len(), |(i, _)| i)];
        for (argument, flag) in flags {
            if flag == short {
                matches.push(Token::Option(
                    argument,
                    Some(token[short.len()..].to_owned()),
                ));
            } else if flag.starts_with(token) {
                matches.push(Token::Option(argument, None));
            }
        }
    }
    match matches.len() {
        1 => return matches.pop(),
        0 => {}
        _ => return None, // ambiguous: argparse error
    }
    let negative_like_options = level
        .arguments
        .iter()
        .flat_map(|a| &a.flags)
        .any(|f| is_negative_number(f));
    if is_negative_number(token) && !negative_like_options {
        return Some(Token::Positional);
    }
    if token.contains(' ') {
        return Some(Token::Positional);
    }
    None // an option this parser does not know: argparse error
}
