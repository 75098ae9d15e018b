//! The generic argv interpreter: a tool's validated input → the exact argv conda receives.
//!
//! Levels are emitted root → terminal, each as its command name then its arguments;
//! aliases are never used and `--` is never inserted. Argument order within a level is
//! chosen so that argparse reads every value back where it was meant to go:
//!
//! * single values are attached to their option (`--opt=value`, `-Xvalue`), so a value
//!   may start with `-` and can never be taken for an option or a positional;
//! * positionals come first (so option values cannot swallow them), except on a level
//!   with a `REMAINDER` positional, whose options come first (so the remainder cannot
//!   swallow them) and whose remainder comes last;
//! * an option with an open-ended value list is followed by another option of its level
//!   (or ends the argv), so it cannot swallow what follows;
//! * the split of positional values is checked against argparse's own greedy matching,
//!   so a later optional positional cannot be given while an earlier one is absent.
//!
//! Integer values written as `2.0` are emitted as `2`. Inputs are expected to be valid
//! against the tool's schema; anything else is an error, never a panic. Pure; no I/O.

use serde_json::{Map, Value};

use crate::catalog::{ActionKind, Argument, Nargs, ValueType};
use crate::layout::{Layout, Property};
use crate::schema::{Invalid, boolean_flags};

/// Compile a validated input to argv (without the conda executable).
pub fn compile(layout: &Layout, input: &Map<String, Value>) -> Result<Vec<String>, Invalid> {
    for key in input.keys() {
        let known = layout.property(key).is_some() || layout.passthrough.as_deref() == Some(key);
        if !known {
            return Err(invalid("$", "additionalProperties", Some(key)));
        }
    }
    let mut argv = Vec::new();
    for (index, level) in layout.levels.iter().enumerate() {
        if let Some(name) = &level.name {
            argv.push(name.clone());
        }
        let properties = layout.properties.iter().filter(|p| p.level == index);
        let mut positionals: Vec<(&Property, Vec<String>)> = Vec::new();
        let mut bounded: Vec<Vec<String>> = Vec::new();
        let mut open: Vec<Vec<String>> = Vec::new();
        let mut has_remainder = false;
        for property in properties {
            let argument = &property.argument;
            if argument.is_positional() {
                if argument.nargs.is_opaque() {
                    has_remainder = true;
                }
                let value = input.get(&property.id);
                let tokens = match value {
                    None | Some(Value::Null) => Vec::new(),
                    Some(value) => positional_tokens(property, value)?,
                };
                positionals.push((property, tokens));
            } else if let Some(value) = input.get(&property.id) {
                for group in option_tokens(property, value)? {
                    if group.open {
                        open.push(group.tokens);
                    } else {
                        bounded.push(group.tokens);
                    }
                }
            }
        }
        check_positional_split(&positionals)?;
        let is_last = index + 1 == layout.levels.len();
        let passthrough = if is_last {
            passthrough_tokens(layout, input)?
        } else {
            Vec::new()
        };
        let follows_options = !is_last
            || !passthrough.is_empty()
            || (has_remainder && positionals.iter().any(|(_, t)| !t.is_empty()));
        let options = order_options(bounded, open, follows_options).ok_or_else(|| {
            let id = layout
                .properties
                .iter()
                .find(|p| p.level == index && !p.argument.is_positional())
                .map_or("$".to_owned(), |p| format!("$.{}", p.id));
            invalid(&id, "unrepresentable", None)
        })?;
        let positional_tokens = positionals.into_iter().flat_map(|(_, t)| t);
        if has_remainder {
            argv.extend(options);
            argv.extend(positional_tokens);
        } else {
            argv.extend(positional_tokens);
            argv.extend(options);
        }
        argv.extend(passthrough);
    }
    Ok(argv)
}

/// Options of a level: bounded ones, then open-ended ones; when tokens follow the level,
/// the last open-ended option needs a bounded one after it (or the level is unexpressible).
fn order_options(
    mut bounded: Vec<Vec<String>>,
    open: Vec<Vec<String>>,
    something_follows: bool,
) -> Option<Vec<String>> {
    let mut terminator = None;
    if something_follows && !open.is_empty() {
        terminator = Some(bounded.pop()?);
    }
    let mut out: Vec<String> = bounded.into_iter().flatten().collect();
    out.extend(open.into_iter().flatten());
    if let Some(t) = terminator {
        out.extend(t);
    }
    Some(out)
}

fn invalid(path: &str, keyword: &str, property: Option<&str>) -> Invalid {
    Invalid {
        path: path.to_owned(),
        keyword: keyword.to_owned(),
        property: property.map(str::to_owned),
    }
}

fn type_error(path: &str) -> Invalid {
    invalid(path, "type", None)
}

/// The text of one scalar value as argparse's `type=` expects it.
fn scalar_text(argument: &Argument, value: &Value, path: &str) -> Result<String, Invalid> {
    match (argument.value_type, value) {
        (ValueType::String, Value::String(s)) => Ok(s.clone()),
        (ValueType::Integer, Value::Number(n)) => {
            if let Some(i) = n.as_i64() {
                Ok(i.to_string())
            } else if let Some(u) = n.as_u64() {
                Ok(u.to_string())
            } else {
                match n.as_f64() {
                    Some(f) if f.is_finite() && f.fract() == 0.0 => Ok(format!("{f:.0}")),
                    _ => Err(type_error(path)),
                }
            }
        }
        (ValueType::Number, Value::Number(n)) => {
            if let Some(i) = n.as_i64() {
                Ok(i.to_string())
            } else if let Some(u) = n.as_u64() {
                Ok(u.to_string())
            } else {
                match n.as_f64() {
                    Some(f) if f.is_finite() => Ok(format!("{f}")),
                    _ => Err(type_error(path)),
                }
            }
        }
        _ => Err(type_error(path)),
    }
}

fn items<'v>(value: &'v Value, path: &str) -> Result<&'v Vec<Value>, Invalid> {
    value.as_array().ok_or_else(|| type_error(path))
}

fn list_texts(argument: &Argument, value: &Value, path: &str) -> Result<Vec<String>, Invalid> {
    items(value, path)?
        .iter()
        .enumerate()
        .map(|(i, item)| scalar_text(argument, item, &format!("{path}[{i}]")))
        .collect()
}

fn opaque_texts(value: &Value, path: &str) -> Result<Vec<String>, Invalid> {
    items(value, path)?
        .iter()
        .enumerate()
        .map(|(i, item)| match item {
            Value::String(s) => Ok(s.clone()),
            _ => Err(type_error(&format!("{path}[{i}]"))),
        })
        .collect()
}

fn positional_tokens(property: &Property, value: &Value) -> Result<Vec<String>, Invalid> {
    let argument = &property.argument;
    let path = format!("$.{}", property.id);
    if argument.action != ActionKind::Store && argument.action != ActionKind::Extend {
        return Err(invalid(&path, "unrepresentable", None));
    }
    match argument.nargs {
        Nargs::One | Nargs::Optional => Ok(vec![scalar_text(argument, value, &path)?]),
        Nargs::Remainder | Nargs::Parser => opaque_texts(value, &path),
        _ => list_texts(argument, value, &path),
    }
}

/// One option occurrence's tokens, and whether its value list is open-ended.
struct Occurrence {
    tokens: Vec<String>,
    open: bool,
}

fn bounded(tokens: Vec<String>) -> Occurrence {
    Occurrence {
        tokens,
        open: false,
    }
}

/// `--opt=value`, `-Xvalue`, or (short flag, value empty or starting with `=`) two tokens.
/// argparse drops a value that is exactly `--`, so that one cannot be passed at all.
fn single(flag: &str, value: String, path: &str) -> Result<Occurrence, Invalid> {
    if value == "--" {
        return Err(invalid(path, "unrepresentable", None));
    }
    Ok(if flag.starts_with("--") {
        bounded(vec![format!("{flag}={value}")])
    } else if value.is_empty() || value.starts_with('=') {
        bounded(vec![flag.to_owned(), value])
    } else {
        bounded(vec![format!("{flag}{value}")])
    })
}

fn repeat(value: &Value, path: &str) -> Result<usize, Invalid> {
    let n = match value {
        Value::Number(n) => n.as_u64().or_else(|| {
            n.as_f64()
                .filter(|f| f.fract() == 0.0 && *f >= 0.0)
                .map(|f| f as u64)
        }),
        _ => None,
    }
    .ok_or_else(|| type_error(path))?;
    if n > crate::schema::MAX_REPEAT {
        return Err(invalid(path, "maximum", None));
    }
    Ok(n as usize)
}

fn as_bool(value: &Value, path: &str) -> Result<bool, Invalid> {
    value.as_bool().ok_or_else(|| type_error(path))
}

/// One occurrence of a value-taking option.
fn occurrence(
    flag: &str,
    argument: &Argument,
    value: &Value,
    path: &str,
) -> Result<Occurrence, Invalid> {
    Ok(match argument.nargs {
        Nargs::One => single(flag, scalar_text(argument, value, path)?, path)?,
        Nargs::Optional => match value {
            Value::Null => Occurrence {
                tokens: vec![flag.to_owned()],
                open: true,
            },
            value => single(flag, scalar_text(argument, value, path)?, path)?,
        },
        Nargs::Exactly(_) => {
            let mut tokens = vec![flag.to_owned()];
            tokens.extend(list_texts(argument, value, path)?);
            bounded(tokens)
        }
        Nargs::ZeroOrMore | Nargs::OneOrMore => {
            let mut tokens = vec![flag.to_owned()];
            tokens.extend(list_texts(argument, value, path)?);
            Occurrence { tokens, open: true }
        }
        Nargs::Remainder | Nargs::Parser => {
            let mut tokens = vec![flag.to_owned()];
            tokens.extend(opaque_texts(value, path)?);
            Occurrence { tokens, open: true }
        }
    })
}

fn option_tokens(property: &Property, value: &Value) -> Result<Vec<Occurrence>, Invalid> {
    let argument = &property.argument;
    let path = format!("$.{}", property.id);
    let Some(flag) = argument.preferred_flag() else {
        return Err(invalid(&path, "unrepresentable", None));
    };
    let flag_only = || vec![bounded(vec![flag.to_owned()])];
    Ok(match argument.action {
        ActionKind::StoreTrue | ActionKind::StoreConst => {
            if as_bool(value, &path)? {
                flag_only()
            } else {
                Vec::new()
            }
        }
        ActionKind::StoreFalse => {
            if as_bool(value, &path)? {
                Vec::new()
            } else {
                flag_only()
            }
        }
        ActionKind::Boolean => {
            let (positive, negative) = boolean_flags(argument);
            let chosen = if as_bool(value, &path)? {
                positive
            } else {
                negative
            };
            let flag = chosen.ok_or_else(|| invalid(&path, "const", None))?;
            vec![bounded(vec![flag.to_owned()])]
        }
        ActionKind::Count | ActionKind::AppendConst => {
            let n = repeat(value, &path)?;
            (0..n).map(|_| bounded(vec![flag.to_owned()])).collect()
        }
        ActionKind::Store => vec![occurrence(flag, argument, value, &path)?],
        ActionKind::Append => items(value, &path)?
            .iter()
            .enumerate()
            .map(|(i, item)| occurrence(flag, argument, item, &format!("{path}[{i}]")))
            .collect::<Result<_, _>>()?,
        ActionKind::Extend => match argument.nargs {
            Nargs::One | Nargs::Optional => items(value, &path)?
                .iter()
                .enumerate()
                .map(|(i, item)| occurrence(flag, argument, item, &format!("{path}[{i}]")))
                .collect::<Result<_, _>>()?,
            _ => vec![occurrence(flag, argument, value, &path)?],
        },
        ActionKind::ExtendConst => {
            let mut tokens = vec![flag.to_owned()];
            tokens.extend(list_texts(argument, value, &path)?);
            vec![Occurrence { tokens, open: true }]
        }
    })
}

fn passthrough_tokens(layout: &Layout, input: &Map<String, Value>) -> Result<Vec<String>, Invalid> {
    match (
        &layout.passthrough,
        layout.passthrough.as_ref().and_then(|id| input.get(id)),
    ) {
        (Some(id), Some(value)) => opaque_texts(value, &format!("$.{id}")),
        _ => Ok(Vec::new()),
    }
}

/// (min, max) values argparse's pattern for this nargs accepts.
fn bounds(nargs: Nargs) -> (usize, usize) {
    match nargs {
        Nargs::One => (1, 1),
        Nargs::Optional => (0, 1),
        Nargs::Exactly(n) => (n as usize, n as usize),
        Nargs::ZeroOrMore => (0, usize::MAX),
        Nargs::OneOrMore | Nargs::Parser => (1, usize::MAX),
        Nargs::Remainder => (0, usize::MAX),
    }
}

/// argparse matches the run of positional values against the positionals' patterns
/// greedily, left to right. The intended split must be the one argparse will find.
fn check_positional_split(positionals: &[(&Property, Vec<String>)]) -> Result<(), Invalid> {
    let wanted: Vec<usize> = positionals.iter().map(|(_, t)| t.len()).collect();
    let limits: Vec<(usize, usize)> = positionals
        .iter()
        .map(|(p, _)| bounds(p.argument.nargs))
        .collect();
    let total = wanted.iter().sum();
    let split = greedy_prefix(&limits, total);
    if split.as_deref() == Some(wanted.as_slice()) {
        return Ok(());
    }
    // Name the first positional whose value would land elsewhere.
    let split = split.unwrap_or_default();
    let culprit = positionals
        .iter()
        .zip(&wanted)
        .enumerate()
        .find(|(i, (_, w))| split.get(*i) != Some(w) && **w > 0)
        .or_else(|| {
            positionals
                .iter()
                .zip(&wanted)
                .enumerate()
                .find(|(_, (_, w))| **w > 0)
        })
        .map(|(_, ((p, _), _))| format!("$.{}", p.id))
        .unwrap_or_else(|| "$".into());
    Err(invalid(&culprit, "order", None))
}

/// argparse's positional matching: the patterns of consecutive positionals are matched
/// greedily, left to right, against the run of values (a prefix match). Each takes as many
/// values as it can while the ones after it can still take their minimum. `None` when even
/// the minimums do not fit.
pub fn greedy_prefix(limits: &[(usize, usize)], available: usize) -> Option<Vec<usize>> {
    let mut out = Vec::with_capacity(limits.len());
    let mut left = available;
    for (i, (min, max)) in limits.iter().enumerate() {
        let reserved: usize = limits[i + 1..].iter().map(|(m, _)| *m).sum();
        let room = left.checked_sub(reserved)?;
        if room < *min {
            return None;
        }
        let take = (*max).min(room);
        out.push(take);
        left -= take;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_prefix_matches_argparse() {
        const MANY: usize = usize::MAX;
        // ? ? with one value: the first takes it.
        assert_eq!(greedy_prefix(&[(0, 1), (0, 1)], 1), Some(vec![1, 0]));
        // * then 1: the required one keeps a value.
        assert_eq!(greedy_prefix(&[(0, MANY), (1, 1)], 3), Some(vec![2, 1]));
        // * then ?: the star takes everything.
        assert_eq!(greedy_prefix(&[(0, MANY), (0, 1)], 3), Some(vec![3, 0]));
        // ? then 1 with one value: the required one wins.
        assert_eq!(greedy_prefix(&[(0, 1), (1, 1)], 1), Some(vec![0, 1]));
        // A prefix match: values beyond the patterns stay unconsumed.
        assert_eq!(greedy_prefix(&[(1, 1)], 3), Some(vec![1]));
        assert_eq!(greedy_prefix(&[(2, 2)], 1), None);
    }
}
