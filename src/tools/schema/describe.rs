//! Descriptions as an agent reads them: argparse help texts with the boilerplate that the
//! schema already says dropped (an integer count need not say it "can be used multiple
//! times", an array need not say the flag "may be repeated"), the tool's own flags named
//! by their parameter names (`-n NAME` is `name`), conda's deprecation notices turned
//! into JSON Schema's `deprecated`, and only the sentences that earn their bytes kept
//! ([`sentences::earn`]: the first, and every one that names another parameter or states
//! a constraint). Pure; no I/O.

use super::sentences::{self, Judge};
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
/// parameter names, only its sentences that earn their bytes; a stand-in for a hidden
/// argument without help; `None` otherwise.
pub(super) fn argument(argument: &Argument, layout: &Layout, level: usize) -> Option<String> {
    if let Some((deeper, command)) = same_as_deeper(argument, layout, level) {
        return Some(format!("Same as `{deeper}`, given before `{command}`."));
    }
    match &argument.help {
        Some(help) if !help.trim().is_empty() => {
            let trimmed = trim_repeats(argument, help);
            let text = if trimmed.is_empty() {
                collapse(help)
            } else {
                trimmed
            };
            let text = in_parameter_names(&text, layout, level);
            // A sentence naming the parameter itself says what its value is ("The
            // argument for the `tempfiles` flag is a path"): it is kept too.
            let names: Vec<&str> = layout.properties.iter().map(|p| p.id.as_str()).collect();
            let said = |sentence: &str| schema_says(argument, sentence);
            let earned = sentences::earn(
                &text,
                &Judge {
                    names: &names,
                    said: &said,
                },
            );
            (!earned.is_empty()).then_some(earned)
        }
        _ if argument.hidden => Some(format!(
            "Undocumented conda argument `{}`.",
            argument.metavar.first().unwrap_or(&argument.dest)
        )),
        _ => None,
    }
}

/// Most bytes of conda's text in a tool's description: what ccm adds (the policy's
/// sentences, a restricted form's) fits in the rest of 1 KB.
pub const COMMAND_TEXT_LIMIT: usize = 700;

/// A command's description: its help in parameter names, only the sentences that earn
/// their bytes (the first, then those stating a constraint, which no parameter's own
/// description says), at
/// most [`COMMAND_TEXT_LIMIT`] bytes (whole sentences). Where conda says nothing or next
/// to nothing (under three words), a first line says which conda command the tool runs.
pub fn command(help: Option<&str>, path: &[String], layout: &Layout) -> String {
    let level = layout.levels.len().saturating_sub(1);
    let text = help
        .map(|h| in_parameter_names(h, layout, level))
        .unwrap_or_default();
    // A sentence that only points to a parameter repeats what that parameter's own
    // description says: after the first, a tool keeps the constraints.
    let never = |_: &str| false;
    let earned = sentences::earn(
        &text,
        &Judge {
            names: &[],
            said: &never,
        },
    );
    let mut out = String::new();
    for sentence in sentences::split(&earned) {
        if !out.is_empty() && out.len() + 1 + sentence.len() > COMMAND_TEXT_LIMIT {
            break;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(&sentence);
    }
    let command = format!("conda {}", path.join(" "));
    match out.split_whitespace().count() {
        0 => format!("Runs `{command}` (conda gives no description)."),
        1 | 2 => format!("Runs `{command}`: {out}"),
        _ => out,
    }
}

/// Whether a sentence of an argument's help only says what its schema says: conda's
/// deprecation notice (the schema's `deprecated`), or the allowed values (two or more of
/// its choices, which the schema's `enum` lists).
fn schema_says(argument: &Argument, sentence: &str) -> bool {
    let deprecation = DEPRECATION_MARKS.iter().any(|m| sentence.contains(m));
    let words: Vec<&str> = sentence
        .split(|c: char| !(c.is_alphanumeric() || matches!(c, '-' | '_' | '.')))
        .map(|w| w.trim_end_matches('.'))
        .collect();
    let choices = argument
        .choices
        .iter()
        .filter(|choice| words.contains(&choice.as_str()))
        .count();
    deprecation || choices >= 2
}

/// The id of a property of a later level with the same flags, action and help (the
/// command's `-v` repeating the root's), and the name of the command that level belongs
/// to: an earlier form's description refers to it instead of repeating it.
fn same_as_deeper<'a>(
    argument: &Argument,
    layout: &'a Layout,
    level: usize,
) -> Option<(&'a str, &'a str)> {
    argument.help.as_ref().filter(|h| !h.trim().is_empty())?;
    let deeper = layout.properties.iter().find(|p| {
        p.level > level
            && p.argument.flags == argument.flags
            && p.argument.action == argument.action
            && p.argument.help == argument.help
    })?;
    let command = layout.levels.get(deeper.level)?.name.as_deref()?;
    Some((deeper.id.as_str(), command))
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

pub use super::names::in_parameter_names;

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
        // The leaf's own -v is `verbose` (its per-command form keeps the plain id); the
        // root's, seen from the root, `verbose_2`.
        assert_eq!(said("see --verbose"), "see `verbose`");
        assert_eq!(
            in_parameter_names("see --verbose", &l, 0),
            "see `verbose_2`"
        );
        // The root's -v with another help keeps it; with the leaf's help, it refers to it.
        let root_verbose = &l.properties[0];
        assert_eq!(root_verbose.id, "verbose_2");
        assert_eq!(argument(&root_verbose.argument, &l, 0).unwrap(), "root");
        let mut same = root_verbose.argument.clone();
        same.help = Some("leaf".into());
        assert_eq!(
            argument(&same, &l, 0).unwrap(),
            "Same as `verbose`, given before `install`."
        );
        for kept in [
            "e.g. --file=a --file=b",
            "see `conda config --show channels`",
            "conda install --show",
            "--help and --unknown-flag",
            "x--freeze-installed",
            "a -- b ---",
        ] {
            assert_eq!(said(kept), kept);
        }
        assert_eq!(said("--pyc, or --file"), "`pyc`, or `file`");
        // A negative flag is its parameter set to false (conda-index: "Conflicts with
        // --no-write-monolithic.").
        assert_eq!(
            said("Conflicts with --no-pyc."),
            "Conflicts with `pyc: false`."
        );
    }

    #[test]
    fn command_line_wording_becomes_parameter_names() {
        let l = layout(
            Vec::new(),
            vec![
                arg("name", &["-n", "--name"], ActionKind::Store, "x"),
                arg("prefix", &["-p", "--prefix"], ActionKind::Store, "x"),
                arg("yes", &["-y", "--yes"], ActionKind::StoreTrue, "x"),
                arg("no_deps", &["--no-deps"], ActionKind::StoreTrue, "x"),
            ],
        );
        let said = |text: &str| in_parameter_names(text, &l, 1);
        assert_eq!(
            said("requires either the -n NAME or -p PREFIX option unless"),
            "requires either the `name` or `prefix` option unless"
        );
        assert_eq!(
            said("into the target environment (-n/-p or the current one)"),
            "into the target environment (`name`/`prefix` or the current one)"
        );
        assert_eq!(
            said("unless overridden on the CLI with -n/--name."),
            "unless overridden with `name`."
        );
        assert_eq!(
            said("use the '--no-deps' option"),
            "use the `no_deps` option"
        );
        // A flag takes no placeholder: the capitals after it stay.
        assert_eq!(said("-y YES"), "`yes` YES");
        for kept in ["re-run", "a -1 b", "x-n", "-nx", "--prefix=/a", "- n", "-Z"] {
            assert_eq!(said(kept), kept);
        }
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
    fn tool_descriptions_say_what_the_tool_does_in_under_1_kb() {
        let l = layout(Vec::new(), Vec::new());
        let path = ["task".to_owned(), "run".to_owned()];
        assert_eq!(
            super::command(None, &path, &l),
            "Runs `conda task run` (conda gives no description)."
        );
        assert_eq!(
            super::command(Some("Run."), &path, &l),
            "Runs `conda task run`: Run."
        );
        let long = "Do a thing. It must be done. ".repeat(100);
        let said = super::command(Some(&long), &path, &l);
        assert!(
            said.len() <= COMMAND_TEXT_LIMIT && said.ends_with("done."),
            "{said}"
        );
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
