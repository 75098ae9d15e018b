//! Flags in help texts as an agent reads them: each `--long-flag` or `-x` of the tool
//! named by its parameter name in backticks (`-n NAME or -p PREFIX` is "`name` or
//! `prefix`"), the value placeholder after it dropped, and the command-line wording
//! around it ("on the CLI", quotes around the flag) left out. Pure; no I/O.

use crate::model::catalog::ActionKind;
use crate::tools::layout::{Layout, Property};

/// `text` with each flag of this tool (`--long-flag`, `-x`) replaced by its parameter
/// name in backticks (the property of `level` when two levels share the flag, else the
/// only one) and a value placeholder after it (`-n NAME`) dropped. Left alone: flags of
/// no parameter (`--help`), flags written with a value (`--file=a`: command-line syntax)
/// and flags in a conda command line (`conda config --show x` names another tool's
/// option). A negative flag (`--no-x` of a `BooleanOptionalAction`) becomes `` `x: false` ``.
pub fn in_parameter_names(text: &str, layout: &Layout, level: usize) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('-') {
        let (before, from) = rest.split_at(at);
        out.push_str(before);
        let starts_word = out
            .chars()
            .last()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '-'));
        let Some(flag) = flag_at(from).filter(|_| starts_word) else {
            // Not a flag: copy the dashes.
            let dashes = from.len() - from.trim_start_matches('-').len();
            out.push_str(&from[..dashes]);
            rest = &from[dashes..];
            continue;
        };
        let after = &from[flag.len()..];
        let with_value = after.starts_with('=');
        let property = (!with_value && !in_command_line(&out))
            .then(|| parameter_of(flag, layout, level))
            .flatten();
        let Some(property) = property else {
            // `--no-x` of a `BooleanOptionalAction` is its parameter set to false.
            match (!with_value && !in_command_line(&out))
                .then(|| negative_of(flag, layout, level))
                .flatten()
            {
                Some(property) => {
                    out.push('`');
                    out.push_str(&property.id);
                    out.push_str(": false`");
                }
                None => out.push_str(flag),
            }
            rest = after;
            continue;
        };
        let quote = ['\'', '"', '`']
            .into_iter()
            .find(|q| out.ends_with(*q) && after.starts_with(*q));
        if let Some(q) = quote {
            out.pop();
            out.push('`');
            out.push_str(&property.id);
            out.push('`');
            rest = &after[q.len_utf8()..];
        } else {
            out.push('`');
            out.push_str(&property.id);
            out.push('`');
            rest = after;
        }
        if takes_value(property) {
            rest = without_placeholder(rest);
        }
    }
    out.push_str(rest);
    tidy(&out)
}

/// The flag `text` starts with: `--name` (letters, digits and inner dashes) or `-x` (one
/// letter not followed by a letter, digit or dash).
fn flag_at(text: &str) -> Option<&str> {
    if let Some(long) = text.strip_prefix("--") {
        let len = long
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .unwrap_or(long.len());
        let flag = text[..2 + len].trim_end_matches('-');
        return (flag.len() > 2).then_some(flag);
    }
    let mut chars = text.chars().skip(1);
    let letter = chars.next()?;
    let next = chars.next();
    (letter.is_ascii_alphabetic() && next.is_none_or(|c| !(c.is_alphanumeric() || c == '-')))
        .then(|| &text[..2])
}

/// Whether the property's flag is followed by a value on conda's command line.
fn takes_value(property: &Property) -> bool {
    !matches!(
        property.argument.action,
        ActionKind::StoreTrue
            | ActionKind::StoreFalse
            | ActionKind::StoreConst
            | ActionKind::Count
            | ActionKind::AppendConst
            | ActionKind::Boolean
            | ActionKind::ExtendConst
    )
}

/// `rest` without a leading value placeholder (` NAME`, ` PREFIX`: a space and a word of
/// two or more capitals or underscores).
fn without_placeholder(rest: &str) -> &str {
    let Some(word) = rest.strip_prefix(' ') else {
        return rest;
    };
    let len = word
        .find(|c: char| !(c.is_ascii_uppercase() || c == '_'))
        .unwrap_or(word.len());
    let boundary = word[len..]
        .chars()
        .next()
        .is_none_or(|c| !c.is_alphanumeric());
    if len >= 2 && boundary {
        &word[len..]
    } else {
        rest
    }
}

/// Command-line wording around replaced flags: a parameter named twice in a row
/// (`-n/--name`), "on the CLI".
fn tidy(text: &str) -> String {
    let mut out = text.replace(" on the CLI", "");
    let mut from = 0;
    while let Some(at) = out[from..].find("`/`").map(|i| from + i) {
        let left_start = out[..at].rfind('`');
        let right_end = out[at + 3..].find('`').map(|i| at + 3 + i);
        match (left_start, right_end) {
            (Some(l), Some(r)) if out[l + 1..at] == out[at + 3..r] => {
                out.replace_range(at + 1..=r, "");
                from = l;
            }
            _ => from = at + 3,
        }
    }
    out
}

/// Whether the text right before a flag is a conda command line (`conda config `).
fn in_command_line(before: &str) -> bool {
    before
        .split_whitespace()
        .rev()
        .take(2)
        .any(|word| word.trim_start_matches(['`', '\'', '"', '(']) == "conda")
}

/// The property a flag of this tool belongs to, if one property (or one of `level`) has
/// it.
fn parameter_of<'a>(flag: &str, layout: &'a Layout, level: usize) -> Option<&'a Property> {
    let owners: Vec<_> = layout
        .properties
        .iter()
        .filter(|p| p.argument.flags.iter().any(|f| f == flag))
        .filter(|p| p.argument.action != ActionKind::Boolean || !flag.starts_with("--no-"))
        .collect();
    match owners.as_slice() {
        [only] => Some(*only),
        _ => owners.iter().find(|p| p.level == level).copied(),
    }
}

/// The `BooleanOptionalAction` property whose negative flag (`--no-x`) `flag` is (the one
/// of `level` when two levels share it).
fn negative_of<'a>(flag: &str, layout: &'a Layout, level: usize) -> Option<&'a Property> {
    if !flag.starts_with("--no-") {
        return None;
    }
    let owners: Vec<_> = layout
        .properties
        .iter()
        .filter(|p| p.argument.action == ActionKind::Boolean)
        .filter(|p| p.argument.flags.iter().any(|f| f == flag))
        .collect();
    match owners.as_slice() {
        [only] => Some(*only),
        _ => owners.iter().find(|p| p.level == level).copied(),
    }
}
