//! argparse, followed through the catalog: what an argv's tokens are (options, their
//! values, subcommand names, positionals) the way argparse will read them. Pure.

use std::collections::HashMap;

use crate::model::catalog::{Argument, Command, Nargs};

/// What argparse will make of an argv.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Parsed {
    /// Canonical command path.
    pub path: Vec<String>,
    /// Every option string of every option action argparse will trigger.
    pub present: Vec<String>,
    /// Number of values of the last occurrence of each option action, by each of its flags.
    pub values: HashMap<String, usize>,
    /// Positional values on the deepest level reached.
    pub positionals: Vec<String>,
    /// conda's `--dry-run` action was triggered.
    pub dry_run: bool,
    /// By argv position, every flag of the option actions an option token triggers
    /// (`--se` → `--set`; `-yd` → `-y`, `--yes`, `-d`, `--dry-run`).
    pub readings: Vec<(usize, Vec<String>)>,
}

enum Token<'a> {
    Positional,
    /// An option action, with an explicit value (`--opt=value`, `-Xvalue`).
    Option(&'a Argument, Option<String>),
}

/// Follow argparse through the catalog. `None` when argparse would fail or the catalog
/// cannot tell (unknown/ambiguous options or commands, positionals on a parent level).
pub(super) fn simulate(root: &Command, argv: &[String]) -> Option<Parsed> {
    let mut parsed = Parsed {
        path: Vec::new(),
        present: Vec::new(),
        values: HashMap::new(),
        positionals: Vec::new(),
        dry_run: false,
        readings: Vec::new(),
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
                let actions = cluster(level, argument, explicit)?;
                let flags = actions.iter().flat_map(|(a, _)| a.flags.iter().cloned());
                parsed.readings.push((i - 1, flags.collect()));
                for (argument, explicit) in actions {
                    record(&mut parsed, argument);
                    let after =
                        consume_values(level, argv, i, argument, explicit.is_some(), separated)?;
                    let count = after - i + usize::from(explicit.is_some());
                    for flag in &argument.flags {
                        parsed.values.insert(flag.clone(), count);
                    }
                    i = after;
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
                    parsed.positionals.clear();
                    level = child;
                    positional_index = 0;
                    i += 1;
                    continue 'tokens;
                }
                match positional_run(level, argv, i, remaining, separated, &mut parsed)? {
                    Run::Rest => break 'tokens, // the remainder takes everything
                    Run::Next { matched, at } => {
                        positional_index += matched;
                        i = at;
                    }
                }
            }
        }
    }
    Some(parsed)
}

/// Short clusters: `-yd` is -y then -d; `-nfoo` is -n with the value foo. The option
/// actions one option token triggers, each with its explicit value.
fn cluster<'a>(
    level: &'a Command,
    argument: &'a Argument,
    explicit: Option<String>,
) -> Option<Vec<(&'a Argument, Option<String>)>> {
    let mut actions = vec![(argument, explicit)];
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
    Some(actions)
}

/// Where a run of positional values leaves the simulation.
enum Run {
    /// `matched` more positional arguments of the level took values; go on at `at`.
    Next { matched: usize, at: usize },
    /// A remainder positional took everything left.
    Rest,
}

/// The run of positional values at `i`, up to the next option, given to the level's
/// `remaining` positional arguments. `None` on an argparse error.
fn positional_run(
    level: &Command,
    argv: &[String],
    i: usize,
    remaining: &[&Argument],
    separated: bool,
    parsed: &mut Parsed,
) -> Option<Run> {
    let run = argv[i..]
        .iter()
        .take_while(|t| separated || matches!(classify_token(level, t), Some(Token::Positional)))
        .count();
    let mut limits = Vec::new();
    let mut swallow_at = None;
    for (k, argument) in remaining.iter().enumerate() {
        if matches!(argument.nargs, Nargs::Remainder | Nargs::Parser) {
            swallow_at = Some(k);
            break;
        }
        limits.push(crate::tools::argv::bounds(argument.nargs));
    }
    let counts = crate::tools::argv::greedy_prefix(&limits, run);
    parsed.positionals.extend(argv[i..i + run].iter().cloned());
    match (counts, swallow_at) {
        (Some(_), Some(_)) => {
            parsed.positionals.extend(argv[i + run..].iter().cloned());
            Some(Run::Rest)
        }
        (Some(counts), None) => {
            let used: usize = counts.iter().sum();
            if used < run {
                return None; // extra positional values: argparse error
            }
            Some(Run::Next {
                matched: counts.len(),
                at: i + used,
            })
        }
        (None, _) => {
            // argparse matches fewer positionals now and the rest later; take
            // the values one by one (conservative for the policy's purposes).
            Some(Run::Next {
                matched: 1,
                at: i + run,
            })
        }
    }
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
    let (min, max) = crate::tools::argv::bounds(argument.nargs);
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
