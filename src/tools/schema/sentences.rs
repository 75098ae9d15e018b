//! Which sentences of a help text earn their bytes in a listing: the first (what the
//! option or command does), and every later one that names a parameter of the tool or
//! states a constraint; sentences that only say what the schema says (the allowed
//! values, deprecation) or speak of conda's command line (its epilog, `--help`) are
//! dropped. Pure; no I/O.

/// Words that make a sentence a constraint (matched as whole words, lower case): what an
/// option requires, excludes, overrides or risks.
const CONSTRAINT_WORDS: [&str; 18] = [
    "require",
    "requires",
    "required",
    "must",
    "cannot",
    "only",
    "unless",
    "implies",
    "implied",
    "ignore",
    "ignored",
    "ignores",
    "incompatible",
    "conflicts",
    "exclusive",
    "warning",
    "dangerous",
    "experimental",
];

/// Words that, among a sentence's first five, make it lean on the one before ("This may
/// result in …", "Note however that this may …"): kept, it keeps its predecessor too.
const ANAPHORA: [&str; 4] = ["this", "these", "such", "it"];

/// Whether a sentence leans on the one before it ("this command" is the tool, not the
/// sentence before; "in this mode" anywhere).
fn leans_back(sentence: &str) -> bool {
    let words: Vec<String> = sentence
        .split_whitespace()
        .take(6)
        .map(|w| {
            w.trim_matches(|c: char| !c.is_alphanumeric())
                .to_lowercase()
        })
        .collect();
    let early = words.iter().enumerate().take(5).any(|(i, w)| {
        ANAPHORA.contains(&w.as_str())
            && (w != "it" || i == 0)
            && words.get(i + 1).is_none_or(|next| next != "command")
    });
    early || sentence.contains("this mode")
}

/// Phrases that make a sentence a constraint (matched in the lower-cased sentence).
const CONSTRAINT_PHRASES: [&str; 8] = [
    "can't",
    "can not",
    "not allowed",
    "not supported",
    "not compatible",
    "no effect",
    "at your own risk",
    "with caution",
];

/// Words of conda's command line that an agent never sees: a sentence with one of them
/// is dropped (what conda's epilog lists is the schema's allowed values).
const CLI_ONLY: [&str; 2] = ["epilog", "--help"];

/// Abbreviations after which a period does not end a sentence.
const ABBREVIATIONS: [&str; 6] = ["e.g", "i.e", "etc", "vs", "cf", "approx"];

/// The sentences of a text (whitespace collapsed), each with its closing punctuation. A
/// sentence ends at `.`, `!` or `?` followed by whitespace and a letter (conda starts
/// sentences with a lower-case "conda"), a digit, a backtick, a quote or an opening
/// parenthesis — not after an abbreviation or an initial (`A.`).
pub(crate) fn split(text: &str) -> Vec<String> {
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let chars: Vec<char> = text.chars().collect();
    let mut sentences = Vec::new();
    let mut start = 0;
    for i in 0..chars.len() {
        if !matches!(chars[i], '.' | '!' | '?') || chars.get(i + 1) != Some(&' ') {
            continue;
        }
        let opens = chars.get(i + 2).is_some_and(|c| {
            c.is_alphabetic() || c.is_ascii_digit() || matches!(c, '`' | '\'' | '"' | '(')
        });
        let word: String = chars[start..i]
            .iter()
            .rev()
            .take_while(|c| !c.is_whitespace() && **c != '(')
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        let abbreviation = ABBREVIATIONS.iter().any(|a| word.eq_ignore_ascii_case(a))
            || (chars[i] == '.'
                && word.chars().count() == 1
                && word.chars().all(char::is_uppercase));
        if opens && !abbreviation {
            sentences.push(chars[start..=i].iter().collect::<String>());
            start = i + 2;
        }
    }
    if start < chars.len() {
        sentences.push(chars[start..].iter().collect());
    }
    sentences.retain(|s| !s.trim().is_empty());
    sentences
}

/// Whether a sentence states a constraint ([`CONSTRAINT_WORDS`], [`CONSTRAINT_PHRASES`]).
pub(crate) fn is_constraint(sentence: &str) -> bool {
    let lower = sentence.to_lowercase();
    lower
        .split(|c: char| !(c.is_alphanumeric() || c == '\''))
        .any(|word| CONSTRAINT_WORDS.contains(&word))
        || CONSTRAINT_PHRASES.iter().any(|p| lower.contains(p))
}

/// Whether a sentence speaks of conda's command line only ([`CLI_ONLY`]).
pub(crate) fn is_cli_only(sentence: &str) -> bool {
    let lower = sentence.to_lowercase();
    CLI_ONLY.iter().any(|w| lower.contains(w))
}

/// Whether a sentence names one of `names` as a parameter (in backticks).
pub(crate) fn names_parameter(sentence: &str, names: &[&str]) -> bool {
    names
        .iter()
        .any(|name| sentence.contains(&format!("`{name}`")))
}

/// What a sentence is, for the selection.
pub(crate) struct Judge<'a> {
    /// Parameters whose mention keeps a sentence (every parameter of the tool); empty
    /// when only constraints are kept after the first sentence.
    pub names: &'a [&'a str],
    /// Sentences the schema already says (allowed values, deprecation): dropped even when
    /// first.
    pub said: &'a dyn Fn(&str) -> bool,
}

/// The sentences that earn their bytes, joined by spaces: the first one the schema does
/// not already say, then every later one that names a parameter (another one, or the
/// option itself: what its value is) or states a constraint, with the sentence before a
/// kept one that leans on it ([`ANAPHORA`]). Sentences about conda's command line are
/// dropped; a parenthetical that speaks of it is cut out of its sentence.
pub(crate) fn earn(text: &str, judge: &Judge) -> String {
    let candidates: Vec<String> = split(&without_cli_parentheticals(text))
        .into_iter()
        .filter(|s| !is_cli_only(s) && !(judge.said)(s))
        .collect();
    let mut keep: Vec<bool> = candidates
        .iter()
        .enumerate()
        .map(|(i, s)| i == 0 || names_parameter(s, judge.names) || is_constraint(s))
        .collect();
    for i in (1..candidates.len()).rev() {
        if keep[i] && leans_back(&candidates[i]) {
            keep[i - 1] = true;
        }
    }
    candidates
        .into_iter()
        .zip(keep)
        .filter_map(|(s, kept)| kept.then_some(s))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `text` without parentheticals that speak of conda's command line (`(see the epilog
/// for the list available here)`).
fn without_cli_parentheticals(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('(') {
        let Some(close) = rest[open..].find(')').map(|c| open + c) else {
            break;
        };
        let inner = &rest[open..=close];
        if is_cli_only(inner) {
            out.push_str(rest[..open].trim_end());
        } else {
            out.push_str(&rest[..=close]);
        }
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentences_end_at_punctuation_not_after_abbreviations_or_initials() {
        assert_eq!(
            split("Use a path, e.g. ./x or\n  /y. Then go. `a` is b! (c) d? done"),
            [
                "Use a path, e.g. ./x or /y.",
                "Then go.",
                "`a` is b!",
                "(c) d?",
                "done"
            ]
        );
        assert_eq!(
            split("version 1.2 is. 3 more"),
            ["version 1.2 is.", "3 more"]
        );
        assert_eq!(
            split("with caution. conda can. i.e. no, etc. and A. B"),
            ["with caution.", "conda can.", "i.e. no, etc. and A. B"]
        );
        assert_eq!(split("  "), Vec::<String>::new());
    }

    #[test]
    fn constraints_and_command_line_words() {
        for constraint in [
            "Requires `channel`.",
            "This option must be used with great caution.",
            "Explicit filenames and package specifications cannot be mixed.",
            "Any name in the file is ignored.",
            "WARNING: This will break environments.",
            "Use at your own risk.",
        ] {
            assert!(is_constraint(constraint), "{constraint}");
        }
        for plain in ["Remove index cache.", "Show channel urls.", "Ignorance."] {
            assert!(!is_constraint(plain), "{plain}");
        }
        assert!(is_cli_only("See the epilog for the list."));
        assert!(is_cli_only("See `conda export --help` for the formats."));
    }

    #[test]
    fn the_first_sentence_and_the_keepers_stay() {
        let said = |s: &str| s.contains("pending deprecation");
        let judge = Judge {
            names: &["override_channels"],
            said: &said,
        };
        let text = "Additional channel. These are URLs (see the epilog here). Then .condarc \
                    is searched (unless `override_channels` is given). The alias is x. \
                    A URL must be given.";
        assert_eq!(
            earn(text, &judge),
            "Additional channel. Then .condarc is searched (unless `override_channels` is \
             given). A URL must be given."
        );
        // A first sentence the schema says gives way to the next one.
        let text = "`x` is pending deprecation and will be removed. Use `override_channels` \
                    instead. More.";
        assert_eq!(earn(text, &judge), "Use `override_channels` instead.");
        // A kept sentence that leans on the one before keeps it.
        assert_eq!(
            earn(
                "Skip checks. Use `x`. It is fast. This must be used with care.",
                &judge
            ),
            "Skip checks. Use `x`. It is fast. This must be used with care."
        );
        assert_eq!(
            earn(
                "Skip. Use `x`. Fast. In this mode it must be used with care.",
                &judge
            ),
            "Skip. Fast. In this mode it must be used with care."
        );
        assert_eq!(
            earn("Make it. Run y. This command requires `x`.", &judge),
            "Make it. This command requires `x`."
        );
        assert_eq!(
            earn(
                "Remove. Add `x` to skip. Note however that this needs care only.",
                &judge
            ),
            "Remove. Add `x` to skip. Note however that this needs care only."
        );
        assert_eq!(
            earn("Remove. Add y. Note that it must be done.", &judge),
            "Remove. Note that it must be done."
        );
        // The parenthetical about the epilog is cut, the rest of its sentence kept.
        assert_eq!(
            earn("Read a file (see the epilog for formats). Then.", &judge),
            "Read a file."
        );
    }
}
