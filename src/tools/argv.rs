//! Tool input → the exact argv conda receives.
//!
//! Two layers. The *primitives* ([`Occurrence`] constructors, [`Level`], [`assemble`]) turn
//! argument values, already written as text, into ordered tokens; both compilers use them:
//! the generic interpreter here ([`compile`], reading JSON through the catalog's layout)
//! and the typed compilers baked from `snapshots/` (reading their generated structs). So
//! the ordering rules live in one place:
//!
//! * levels are emitted root → terminal, each as its command name then its arguments;
//!   aliases are never used and `--` is never inserted;
//! * single values are attached to their option (`--opt=value`, `-Xvalue`), so a value may
//!   start with `-` and can never be taken for an option or a positional (argparse drops a
//!   value that is exactly `--`, so that one is refused);
//! * positionals come first (so option values cannot swallow them), except on a level with
//!   a `REMAINDER` positional, whose options come first (so the remainder cannot swallow
//!   them);
//! * an option with an open-ended value list is followed by another option of its level
//!   (or ends the argv), so it cannot swallow what follows;
//! * the split of positional values is checked against argparse's own greedy matching, so
//!   a later optional positional cannot be given while an earlier one is absent.
//!
//! Integer values written as `2.0` are emitted as `2`. Inputs are expected to be valid
//! against the tool's schema; anything else is an error, never a panic. Pure; no I/O.

use serde_json::{Map, Number, Value};

use crate::model::catalog::{ActionKind, Argument, Nargs, ValueType};
use crate::tools::bounds::MAX_REPEAT;
use crate::tools::error::{Invalid, Keyword};
use crate::tools::layout::{self, Layout, Property, boolean_flags};

// ---------------------------------------------------------------------------------------
// Primitives shared by the generic and the typed compilers

/// The tokens of one option occurrence, and whether its value list is open-ended (it
/// would swallow following values).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Occurrence {
    pub tokens: Vec<String>,
    pub open: bool,
}

/// A flag without a value.
pub fn flag(flag: &str) -> Occurrence {
    Occurrence {
        tokens: vec![flag.to_owned()],
        open: false,
    }
}

/// A bare flag whose optional value is absent (`nargs='?'` with null): open-ended.
pub fn bare(flag: &str) -> Occurrence {
    Occurrence {
        tokens: vec![flag.to_owned()],
        open: true,
    }
}

/// One value attached to its option: `--opt=value`, `-Xvalue`, or (short flag, value empty
/// or starting with `=`) two tokens.
pub fn single(flag: &str, value: String, path: &str) -> Result<Occurrence, Invalid> {
    if value == "--" {
        return Err(invalid(path, Keyword::Unrepresentable, None));
    }
    let tokens = if flag.starts_with("--") {
        vec![format!("{flag}={value}")]
    } else if value.is_empty() || value.starts_with('=') {
        vec![flag.to_owned(), value]
    } else {
        vec![format!("{flag}{value}")]
    };
    Ok(Occurrence {
        tokens,
        open: false,
    })
}

/// An option followed by its values; `open` when argparse takes as many as it finds.
pub fn values(flag: &str, values: Vec<String>, open: bool) -> Occurrence {
    let mut tokens = Vec::with_capacity(values.len() + 1);
    tokens.push(flag.to_owned());
    tokens.extend(values);
    Occurrence { tokens, open }
}

/// The text of an integer value (`2.0` → `2`); `None` when not integral.
pub fn integer_text(n: &Number) -> Option<String> {
    if let Some(i) = n.as_i64() {
        Some(i.to_string())
    } else if let Some(u) = n.as_u64() {
        Some(u.to_string())
    } else {
        n.as_f64()
            .filter(|f| f.is_finite() && f.fract() == 0.0)
            .map(|f| format!("{f:.0}"))
    }
}

/// The text of a number value.
pub fn number_text(n: &Number) -> Option<String> {
    if let Some(i) = n.as_i64() {
        Some(i.to_string())
    } else if let Some(u) = n.as_u64() {
        Some(u.to_string())
    } else {
        n.as_f64().filter(|f| f.is_finite()).map(|f| format!("{f}"))
    }
}

/// The arguments of one parser level, collected in declaration order.
#[derive(Debug, Default)]
pub struct Level {
    name: Option<String>,
    positionals: Vec<(String, Nargs, Vec<String>)>,
    bounded: Vec<Vec<String>>,
    open: Vec<(String, Vec<String>)>,
    has_remainder: bool,
}

impl Level {
    pub fn new(name: Option<&str>) -> Level {
        Level {
            name: name.map(str::to_owned),
            ..Level::default()
        }
    }

    /// A positional (declare every positional of the level, present or not, in order).
    pub fn positional(&mut self, id: &str, nargs: Nargs, tokens: Vec<String>) {
        self.has_remainder |= nargs.is_opaque();
        self.positionals.push((id.to_owned(), nargs, tokens));
    }

    /// Occurrences of the option with property `id`.
    pub fn option(&mut self, id: &str, occurrences: Vec<Occurrence>) {
        for occurrence in occurrences {
            if occurrence.open {
                self.open.push((id.to_owned(), occurrence.tokens));
            } else {
                self.bounded.push(occurrence.tokens);
            }
        }
    }
}

/// Order every level's tokens; `passthrough` (a greedy command's arguments) goes last.
pub fn assemble(levels: Vec<Level>, passthrough: Vec<String>) -> Result<Vec<String>, Invalid> {
    let count = levels.len();
    let mut argv = Vec::new();
    for (index, level) in levels.into_iter().enumerate() {
        if let Some(name) = level.name {
            argv.push(name);
        }
        check_positional_split(&level.positionals)?;
        let is_last = index + 1 == count;
        let follows_options = !is_last
            || !passthrough.is_empty()
            || (level.has_remainder && level.positionals.iter().any(|(_, _, t)| !t.is_empty()));
        let mut bounded = level.bounded;
        let mut terminator = None;
        if follows_options && let Some((id, _)) = level.open.last() {
            terminator = Some(
                bounded
                    .pop()
                    .ok_or_else(|| invalid(&format!("$.{id}"), Keyword::Unrepresentable, None))?,
            );
        }
        let mut options: Vec<String> = bounded.into_iter().flatten().collect();
        options.extend(level.open.into_iter().flat_map(|(_, t)| t));
        options.extend(terminator.into_iter().flatten());
        let positionals = level.positionals.into_iter().flat_map(|(_, _, t)| t);
        if level.has_remainder {
            argv.extend(options);
            argv.extend(positionals);
        } else {
            argv.extend(positionals);
            argv.extend(options);
        }
    }
    argv.extend(passthrough);
    Ok(argv)
}

fn invalid(path: &str, keyword: Keyword, property: Option<&str>) -> Invalid {
    Invalid {
        path: path.to_owned(),
        keyword,
        property: property.map(str::to_owned),
        expected: None,
    }
}

/// (min, max) values argparse's pattern for this nargs accepts.
pub fn bounds(nargs: Nargs) -> (usize, usize) {
    match nargs {
        Nargs::One => (1, 1),
        Nargs::Optional => (0, 1),
        Nargs::Exactly(n) => (n as usize, n as usize),
        Nargs::ZeroOrMore | Nargs::Remainder => (0, usize::MAX),
        Nargs::OneOrMore | Nargs::Parser => (1, usize::MAX),
    }
}

/// argparse matches the run of positional values against the positionals' patterns
/// greedily, left to right. The intended split must be the one argparse will find.
fn check_positional_split(positionals: &[(String, Nargs, Vec<String>)]) -> Result<(), Invalid> {
    let wanted: Vec<usize> = positionals.iter().map(|(_, _, t)| t.len()).collect();
    let limits: Vec<(usize, usize)> = positionals.iter().map(|(_, n, _)| bounds(*n)).collect();
    let total = wanted.iter().sum();
    let split = greedy_prefix(&limits, total);
    if split.as_deref() == Some(wanted.as_slice()) {
        return Ok(());
    }
    // Name the first positional whose values would land elsewhere.
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
        .map(|(_, ((id, _, _), _))| format!("$.{id}"))
        .unwrap_or_else(|| "$".into());
    Err(invalid(&culprit, Keyword::Order, None))
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

// ---------------------------------------------------------------------------------------
// The generic interpreter

/// Compile a validated input to argv (without the conda executable).
pub fn compile(layout: &Layout, input: &Map<String, Value>) -> Result<Vec<String>, Invalid> {
    for key in input.keys() {
        // ccm's own per-call properties are not conda arguments.
        let known = layout.property(key).is_some()
            || layout.passthrough.as_deref() == Some(key)
            || layout::is_reserved(key);
        if !known {
            return Err(invalid("$", Keyword::AdditionalProperties, Some(key)));
        }
    }
    let mut levels = Vec::with_capacity(layout.levels.len());
    for (index, spec) in layout.levels.iter().enumerate() {
        let mut level = Level::new(spec.name.as_deref());
        for property in layout.properties.iter().filter(|p| p.level == index) {
            let argument = &property.argument;
            let value = input.get(&property.id);
            if argument.is_positional() {
                let tokens = match value {
                    None | Some(Value::Null) => Vec::new(),
                    Some(value) => positional_tokens(property, value)?,
                };
                level.positional(&property.id, argument.nargs, tokens);
            } else if let Some(value) = value {
                level.option(&property.id, option_tokens(property, value)?);
            }
        }
        levels.push(level);
    }
    let passthrough = match layout
        .passthrough
        .as_ref()
        .and_then(|id| input.get(id).map(|v| (id, v)))
    {
        Some((id, value)) => opaque_texts(value, &format!("$.{id}"))?,
        None => Vec::new(),
    };
    assemble(levels, passthrough)
}

fn type_error(path: &str) -> Invalid {
    invalid(path, Keyword::Type, None)
}

/// The text of one scalar value as argparse's `type=` expects it.
fn scalar_text(argument: &Argument, value: &Value, path: &str) -> Result<String, Invalid> {
    match (argument.value_type, value) {
        (ValueType::String, Value::String(s)) => Ok(s.clone()),
        (ValueType::Integer, Value::Number(n)) => integer_text(n).ok_or_else(|| type_error(path)),
        (ValueType::Number, Value::Number(n)) => number_text(n).ok_or_else(|| type_error(path)),
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
        return Err(invalid(&path, Keyword::Unrepresentable, None));
    }
    match argument.nargs {
        Nargs::One | Nargs::Optional => Ok(vec![scalar_text(argument, value, &path)?]),
        Nargs::Remainder | Nargs::Parser => opaque_texts(value, &path),
        _ => list_texts(argument, value, &path),
    }
}

fn repeat(value: &Value, path: &str) -> Result<usize, Invalid> {
    let n = match value {
        Value::Number(n) => integer_text(n).and_then(|t| t.parse::<u64>().ok()),
        _ => None,
    }
    .ok_or_else(|| type_error(path))?;
    if n > MAX_REPEAT {
        return Err(invalid(path, Keyword::Maximum, None));
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
            Value::Null => bare(flag),
            value => single(flag, scalar_text(argument, value, path)?, path)?,
        },
        Nargs::Exactly(_) => values(flag, list_texts(argument, value, path)?, false),
        Nargs::ZeroOrMore | Nargs::OneOrMore => {
            values(flag, list_texts(argument, value, path)?, true)
        }
        Nargs::Remainder | Nargs::Parser => values(flag, opaque_texts(value, path)?, true),
    })
}

fn each<T>(
    value: &Value,
    path: &str,
    mut one: impl FnMut(&Value, &str) -> Result<T, Invalid>,
) -> Result<Vec<T>, Invalid> {
    items(value, path)?
        .iter()
        .enumerate()
        .map(|(i, item)| one(item, &format!("{path}[{i}]")))
        .collect()
}

fn option_tokens(property: &Property, value: &Value) -> Result<Vec<Occurrence>, Invalid> {
    let argument = &property.argument;
    let path = format!("$.{}", property.id);
    let Some(name) = argument.preferred_flag() else {
        return Err(invalid(&path, Keyword::Unrepresentable, None));
    };
    Ok(match argument.action {
        ActionKind::StoreTrue | ActionKind::StoreConst => {
            if as_bool(value, &path)? {
                vec![flag(name)]
            } else {
                Vec::new()
            }
        }
        ActionKind::StoreFalse => {
            if as_bool(value, &path)? {
                Vec::new()
            } else {
                vec![flag(name)]
            }
        }
        ActionKind::Boolean => {
            let (positive, negative) = boolean_flags(argument);
            let chosen = if as_bool(value, &path)? {
                positive
            } else {
                negative
            };
            vec![flag(
                chosen.ok_or_else(|| invalid(&path, Keyword::Const, None))?,
            )]
        }
        ActionKind::Count | ActionKind::AppendConst => vec![flag(name); repeat(value, &path)?],
        ActionKind::Store => vec![occurrence(name, argument, value, &path)?],
        ActionKind::Append => each(value, &path, |item, p| occurrence(name, argument, item, p))?,
        ActionKind::Extend => match argument.nargs {
            Nargs::One | Nargs::Optional => {
                each(value, &path, |item, p| occurrence(name, argument, item, p))?
            }
            _ => vec![occurrence(name, argument, value, &path)?],
        },
        ActionKind::ExtendConst => vec![values(name, list_texts(argument, value, &path)?, true)],
    })
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

    #[test]
    fn primitives() {
        assert_eq!(
            single("--name", "-x".into(), "$").unwrap().tokens,
            ["--name=-x"]
        );
        assert_eq!(single("-n", "x".into(), "$").unwrap().tokens, ["-nx"]);
        assert_eq!(single("-n", "".into(), "$").unwrap().tokens, ["-n", ""]);
        assert_eq!(single("-n", "=x".into(), "$").unwrap().tokens, ["-n", "=x"]);
        assert!(single("--name", "--".into(), "$.name").is_err());
        let n = |v: Value| match v {
            Value::Number(n) => n,
            _ => unreachable!(),
        };
        assert_eq!(
            integer_text(&n(serde_json::json!(2.0))).as_deref(),
            Some("2")
        );
        assert_eq!(
            integer_text(&n(serde_json::json!(1e20))).as_deref(),
            Some("100000000000000000000")
        );
        assert_eq!(integer_text(&n(serde_json::json!(2.5))), None);
        assert_eq!(
            number_text(&n(serde_json::json!(0.25))).as_deref(),
            Some("0.25")
        );
    }
}
