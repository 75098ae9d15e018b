//! Descriptions as an agent reads them: argparse help texts with the boilerplate that the
//! schema already says dropped (an integer count need not say it "can be used multiple
//! times", an array need not say the flag "may be repeated"), the tool's own flags named
//! by their parameter names, and conda's deprecation notices turned into JSON Schema's
//! `deprecated`. Nothing else in a help text changes. Pure; no I/O.

use crate::model::catalog::{ActionKind, Argument};
use crate::tools::layout::Layout;

/// Sentences that only say an option may be given more than once: dropped from the
/// description of a property whose schema is an array (or a count).
const REPEAT_SENTENCES: [&str; 7] = [
    "Can be used multiple times.",
    "Can be used several times.",
    "You may pass this flag more than once.",
    "May be given more than once.",
    "May be repeated.",
    "May be repeated (e.g. --file=file1 --file=file2).",
    "This option can be used multiple times.",
];

/// How conda's `deprecated.action` words the help of a deprecated option.
const DEPRECATION_MARKS: [&str; 2] = ["is pending deprecation", "is deprecated"];

/// Whether the argument's help says conda deprecated it.
pub fn is_deprecated(argument: &Argument) -> bool {
    argument
        .help
        .as_deref()
        .is_some_and(|h| DEPRECATION_MARKS.iter().any(|m| h.contains(m)))
}

/// The description of a property: the help text trimmed of what the schema says, in
/// parameter names; a stand-in for a hidden argument without help; `None` otherwise.
pub fn argument(argument: &Argument, layout: &Layout, level: usize) -> Option<String> {
    if let Some(earlier) = same_as_earlier(argument, layout, level) {
        return Some(format!(
            "Same as `{earlier}`, given after the command name."
        ));
    }
    match &argument.help {
        Some(help) if !help.trim().is_empty() => {
            let trimmed = trim_repeats(argument, help);
            let text = if trimmed.is_empty() {
                collapse(help)
            } else {
                trimmed
            };
            Some(in_parameter_names(&text, layout, level))
        }
        _ if argument.hidden => Some(format!(
            "Undocumented conda argument `{}`.",
            argument.metavar.first().unwrap_or(&argument.dest)
        )),
        _ => None,
    }
}

/// The id of a property of an earlier level with the same flags, action and help (a
/// subcommand's `-v` repeating the root's): its description is not repeated.
fn same_as_earlier<'a>(argument: &Argument, layout: &'a Layout, level: usize) -> Option<&'a str> {
    argument.help.as_ref().filter(|h| !h.trim().is_empty())?;
    layout
        .properties
        .iter()
        .find(|p| {
            p.level < level
                && p.argument.flags == argument.flags
                && p.argument.action == argument.action
                && p.argument.help == argument.help
        })
        .map(|p| p.id.as_str())
}

/// Whether the property's schema already says the option repeats (a count, or an array
/// of occurrences).
fn repeats(argument: &Argument) -> bool {
    matches!(
        argument.action,
        ActionKind::Count
            | ActionKind::AppendConst
            | ActionKind::Append
            | ActionKind::Extend
            | ActionKind::ExtendConst
    )
}

/// Drop the repeat sentences of a repeating property; a count's "Once for A, twice for
/// B, …" becomes "1 for A, 2 for B, …" (the value is the number of repetitions).
fn trim_repeats(argument: &Argument, help: &str) -> String {
    let mut text = collapse(help);
    if !repeats(argument) {
        return text;
    }
    for sentence in REPEAT_SENTENCES {
        text = text.replace(sentence, "");
    }
    if matches!(argument.action, ActionKind::Count) {
        for (word, number) in [
            ("Once for ", "1 for "),
            ("twice for ", "2 for "),
            ("thrice for ", "3 for "),
            ("four times for ", "4 for "),
        ] {
            text = text.replace(word, number);
        }
    }
    collapse(&text)
}

/// Runs of whitespace as one space, trimmed.
fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `text` with each `--long-flag` of this tool replaced by its parameter name in
/// backticks (the property of `level` when two levels share the flag, else the only
/// one). Left alone:
/// flags of no parameter (`--help`), flags written with a value (`--file=a`: command-line
/// syntax), negative flags (`--no-x` of a `BooleanOptionalAction`) and flags in a conda
/// command line (`conda config --show x` names another tool's option).
pub fn in_parameter_names(text: &str, layout: &Layout, level: usize) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("--") {
        let (before, from) = rest.split_at(at);
        out.push_str(before);
        let len = from[2..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .unwrap_or(from.len() - 2);
        let raw = &from[..2 + len];
        let flag = raw.trim_end_matches('-');
        if flag.len() <= 2 {
            // Dashes alone (`--`, `---`): no flag.
            out.push_str(raw);
            rest = &from[raw.len()..];
            continue;
        }
        let starts_word = out
            .chars()
            .last()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '-'));
        let with_value = from[flag.len()..].starts_with('=');
        let id = (starts_word && !with_value && !in_command_line(&out))
            .then(|| parameter_of(flag, layout, level))
            .flatten();
        match id {
            // In backticks, unless the flag already stands in them.
            Some(id) if out.ends_with('`') && from[flag.len()..].starts_with('`') => {
                out.push_str(id);
            }
            Some(id) => {
                out.push('`');
                out.push_str(id);
                out.push('`');
            }
            None => out.push_str(flag),
        }
        rest = &from[flag.len()..];
    }
    out.push_str(rest);
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

/// The parameter id of a flag of this tool, if one parameter (or one of `level`) has it.
fn parameter_of<'a>(flag: &str, layout: &'a Layout, level: usize) -> Option<&'a str> {
    let owners: Vec<_> = layout
        .properties
        .iter()
        .filter(|p| p.argument.flags.iter().any(|f| f == flag))
        .filter(|p| p.argument.action != ActionKind::Boolean || !flag.starts_with("--no-"))
        .collect();
    let chosen = match owners.as_slice() {
        [only] => Some(*only),
        _ => owners.iter().find(|p| p.level == level).copied(),
    };
    chosen.map(|p| p.id.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::catalog::{Command, Nargs, ValueType};

    fn arg(id: &str, flags: &[&str], action: ActionKind, help: &str) -> Argument {
        Argument {
            action,
            choices: Vec::new(),
            const_value: serde_json::Value::Null,
            default: serde_json::Value::Null,
            dest: id.into(),
            dynamic_choices: false,
            flags: flags.iter().map(|f| f.to_string()).collect(),
            help: Some(help.into()),
            hidden: false,
            id: id.into(),
            metavar: Vec::new(),
            nargs: if action == ActionKind::Append {
                Nargs::One
            } else {
                Nargs::Exactly(0)
            },
            required: false,
            value_type: ValueType::String,
        }
    }

    fn command(name: Option<&str>, arguments: Vec<Argument>) -> Command {
        Command {
            aliases: Vec::new(),
            arguments,
            children: Vec::new(),
            exclusive_groups: Vec::new(),
            help: None,
            name: name.map(str::to_owned),
            passthrough: false,
            raw_only: false,
            summary: None,
            terminal: name.is_some(),
        }
    }

    fn layout(root: Vec<Argument>, leaf: Vec<Argument>) -> Layout {
        let root = command(None, root);
        let leaf = command(Some("install"), leaf);
        Layout::new(&[&root, &leaf])
    }

    #[test]
    fn flags_become_parameter_names() {
        let verbose = |h: &str| arg("verbose", &["-v", "--verbose"], ActionKind::Count, h);
        let l = layout(
            vec![verbose("root")],
            vec![
                verbose("leaf"),
                arg(
                    "freeze_installed",
                    &["--freeze-installed"],
                    ActionKind::StoreTrue,
                    "x",
                ),
                arg("file", &["--file"], ActionKind::Append, "x"),
                arg("show", &["--show"], ActionKind::StoreTrue, "x"),
                arg("pyc", &["--pyc", "--no-pyc"], ActionKind::Boolean, "x"),
            ],
        );
        let said = |text: &str| in_parameter_names(text, &l, 1);
        assert_eq!(
            said("use the --freeze-installed option."),
            "use the `freeze_installed` option."
        );
        assert_eq!(said("`--freeze-installed` is"), "`freeze_installed` is");
        // The leaf's own -v is `verbose_2`; the root's, seen from the root, `verbose`.
        assert_eq!(said("see --verbose"), "see `verbose_2`");
        assert_eq!(in_parameter_names("see --verbose", &l, 0), "see `verbose`");
        // The leaf's -v with another help keeps it; with the root's help, it refers to it.
        let leaf_verbose = &l.properties[1];
        assert_eq!(argument(&leaf_verbose.argument, &l, 1).unwrap(), "leaf");
        let mut same = leaf_verbose.argument.clone();
        same.help = Some("root".into());
        assert_eq!(
            argument(&same, &l, 1).unwrap(),
            "Same as `verbose`, given after the command name."
        );
        for kept in [
            "e.g. --file=a --file=b",
            "see `conda config --show channels`",
            "conda install --show",
            "--help and --unknown-flag",
            "x--freeze-installed",
            "--no-pyc",
            "a -- b ---",
        ] {
            assert_eq!(said(kept), kept);
        }
        assert_eq!(said("--pyc, or --file"), "`pyc`, or `file`");
    }

    #[test]
    fn repeat_boilerplate_is_dropped_where_the_schema_says_it() {
        let count = arg(
            "verbose",
            &["-v"],
            ActionKind::Count,
            "Can be used multiple times. Once for detailed output, twice for INFO logging, \
             thrice for DEBUG logging, four times for TRACE logging.",
        );
        assert_eq!(
            trim_repeats(&count, count.help.as_deref().unwrap()),
            "1 for detailed output, 2 for INFO logging, 3 for DEBUG logging, 4 for TRACE logging."
        );
        let append = arg(
            "file",
            &["--file"],
            ActionKind::Append,
            "Read specs from a file.  May be repeated (e.g. --file=file1 --file=file2).",
        );
        assert_eq!(
            trim_repeats(&append, append.help.as_deref().unwrap()),
            "Read specs from a file."
        );
        // A plain flag keeps the sentence: the schema does not say it.
        let flag = arg(
            "x",
            &["--x"],
            ActionKind::StoreTrue,
            "Can be used several times.",
        );
        assert_eq!(
            trim_repeats(&flag, flag.help.as_deref().unwrap()),
            "Can be used several times."
        );
        // A help that is nothing but boilerplate stays.
        let only = arg("c", &["--c"], ActionKind::Append, "May be repeated.");
        let l = layout(Vec::new(), vec![only.clone()]);
        assert_eq!(argument(&only, &l, 1).unwrap(), "May be repeated.");
    }

    #[test]
    fn deprecation_is_read_from_conda_help() {
        let mut a = arg(
            "env_spec",
            &["--env-spec"],
            ActionKind::Store,
            "`--env-spec` is pending deprecation and will be removed in 27.3.",
        );
        assert!(is_deprecated(&a));
        a.help = Some("`--x` is deprecated and will be removed in 26.9.".into());
        assert!(is_deprecated(&a));
        a.help = Some("Name of environment.".into());
        assert!(!is_deprecated(&a));
    }
}
