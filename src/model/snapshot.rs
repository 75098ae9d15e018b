//! Snapshots: a discovery normalized for checking in (`snapshots/conda-<M>.<m>.json`),
//! and the per-command signature digests that decide whether a baked typed compiler fits a
//! live command.
//!
//! Normalization makes a capture reproducible on any machine: the target prefix, the home
//! directory and the working directory are replaced by `<prefix>`, `~` and `<cwd>` where
//! they stand as a whole path (see [`Replacements`]), keys are sorted, and nothing records
//! a time. Help texts are normalized by the same rule: conda writes the user's home into
//! them (`the user config file (/root/.condarc)`), and `~` is right for every user where
//! the capture machine's home would be wrong. Confirmation never compares help texts
//! (`startup::confirm`), so normalizing them cannot make a start look stale. Choices
//! computed at inspection time stay in the catalog, flagged `dynamic_choices`; signatures
//! ignore their values (the typed compilers take such values as plain strings). Pure; no
//! I/O.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::model::catalog::{self, Catalog, Command, Plugin};

/// Version of the snapshot file format.
pub const FORMAT: u32 = 1;

/// A checked-in discovery.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    pub format: u32,
    pub conda_version: String,
    /// Provenance: the interpreter version the capture ran under.
    pub python_version: Option<String>,
    pub catalog: Catalog,
    pub plugins: Vec<Plugin>,
    pub discovery_fingerprint: String,
    /// The target stamp (conda version + entry points, read from disk) at capture time.
    #[serde(default)]
    pub stamp: Option<crate::model::stamp::Stamp>,
}

/// Paths to replace, longest first, each only where it stands as a whole path: it begins
/// a token (the text's start, whitespace, a quote, `=`, `:` or `(` before it) and ends at
/// a `/`, whitespace, a quote, the text's end or punctuation (`.` only before whitespace,
/// a quote or the end, since `.x` continues a file name). So `/root` is not replaced in
/// `base/root prefix`, nor `/home/u` in `/home/u2`; with the home directory inside the
/// working directory (or the other way round) the longer path wins where both match.
#[derive(Clone, Debug, Default)]
pub struct Replacements(Vec<(String, String)>);

impl Replacements {
    pub fn new(pairs: &[(Option<String>, &str)]) -> Self {
        let mut list: Vec<(String, String)> = pairs
            .iter()
            .filter_map(|(from, to)| {
                let from = from.as_deref()?.trim_end_matches('/');
                (from.len() > 1).then(|| (from.to_owned(), to.to_string()))
            })
            .collect();
        list.sort_by_key(|(from, _)| std::cmp::Reverse(from.len()));
        Replacements(list)
    }

    /// `text` with every whole-path occurrence replaced (one pass, longest first).
    pub fn apply(&self, text: &str) -> String {
        if !self.0.iter().any(|(from, _)| text.contains(from.as_str())) {
            return text.to_owned();
        }
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        while at < text.len() {
            if begins_token(text, at)
                && let Some((from, to)) = self.0.iter().find(|(from, _)| {
                    text[at..].starts_with(from.as_str()) && ends_token(text, at + from.len())
                })
            {
                out.push_str(to);
                at += from.len();
                continue;
            }
            let c = text[at..].chars().next().expect("at is a char boundary");
            out.push(c);
            at += c.len_utf8();
        }
        out
    }

    fn value(&self, value: &mut Value) {
        match value {
            Value::String(s) => *s = self.apply(s),
            Value::Array(items) => items.iter_mut().for_each(|v| self.value(v)),
            Value::Object(map) => map.values_mut().for_each(|v| self.value(v)),
            _ => {}
        }
    }
}

/// The placeholder of the target prefix (put back when a snapshot serves a start).
pub const PREFIX: &str = "<prefix>";

fn is_quote(c: char) -> bool {
    matches!(c, '"' | '\'' | '`')
}

/// Whether a path may begin at byte `at` of `text`.
fn begins_token(text: &str, at: usize) -> bool {
    match text[..at].chars().next_back() {
        None => true,
        Some(c) => c.is_whitespace() || is_quote(c) || matches!(c, '=' | ':' | '('),
    }
}

/// Whether a path may end at byte `at` of `text`.
fn ends_token(text: &str, at: usize) -> bool {
    let mut rest = text[at..].chars();
    match rest.next() {
        None => true,
        Some('.') => rest.next().is_none_or(|c| c.is_whitespace() || is_quote(c)),
        Some(c) => {
            c == '/'
                || c.is_whitespace()
                || is_quote(c)
                || matches!(c, ',' | ';' | ':' | '!' | '?' | ')' | ']' | '}')
        }
    }
}

impl Snapshot {
    /// Normalize a discovery into a snapshot.
    pub fn new(
        catalog: &Catalog,
        plugins: &[Plugin],
        python_version: Option<String>,
        replacements: &Replacements,
    ) -> Snapshot {
        let mut value = serde_json::to_value(catalog).expect("catalogs serialize");
        replacements.value(&mut value);
        let catalog: Catalog =
            serde_json::from_value(value).expect("normalized catalogs deserialize");
        Snapshot {
            format: FORMAT,
            conda_version: catalog.conda_version.clone(),
            python_version,
            discovery_fingerprint: catalog::discovery_fingerprint(&catalog.conda_version, plugins),
            catalog,
            plugins: plugins.to_vec(),
            stamp: None,
        }
    }

    /// The file name stem for this version: `conda-26.7`.
    pub fn stem(&self) -> String {
        file_stem(&self.conda_version)
    }

    /// Pretty JSON with sorted keys and a final newline: the checked-in form.
    pub fn to_text(&self) -> String {
        let value = serde_json::to_value(self).expect("snapshots serialize");
        let mut text = serde_json::to_string_pretty(&value).expect("values serialize");
        text.push('\n');
        text
    }

    pub fn from_text(text: &str) -> Result<Snapshot, serde_json::Error> {
        serde_json::from_str(text)
    }
}

/// `conda-<major>.<minor>` for a version string.
pub fn file_stem(version: &str) -> String {
    let mut parts = version.split('.');
    let major = parts.next().unwrap_or("0");
    let minor = parts.next().unwrap_or("0");
    format!("conda-{major}.{minor}")
}

/// Digest of everything in a branch that shapes the tool's schema structure and argv:
/// level names, greediness, every argument's id, flags, action, nargs, type, required,
/// hidden and (static) choices, and the exclusive groups. Help texts, defaults and
/// dynamic choice values are left out. The shape is streamed into the hasher as compact
/// JSON (fields in a fixed order), without building intermediate values.
pub fn signature(branch: &[&Command]) -> String {
    #[derive(Serialize)]
    struct ArgumentShape<'a> {
        id: &'a str,
        flags: &'a [String],
        action: crate::model::catalog::ActionKind,
        nargs: crate::model::catalog::Nargs,
        value_type: crate::model::catalog::ValueType,
        required: bool,
        hidden: bool,
        choices: &'a [String],
        dynamic_choices: bool,
    }
    #[derive(Serialize)]
    struct LevelShape<'a> {
        name: &'a Option<String>,
        passthrough: bool,
        arguments: Vec<ArgumentShape<'a>>,
        exclusive_groups: &'a [crate::model::catalog::ExclusiveGroup],
    }
    let levels: Vec<LevelShape> = branch
        .iter()
        .map(|command| LevelShape {
            name: &command.name,
            passthrough: command.passthrough,
            arguments: command
                .arguments
                .iter()
                .map(|a| ArgumentShape {
                    id: &a.id,
                    flags: &a.flags,
                    action: a.action,
                    nargs: a.nargs,
                    value_type: a.value_type,
                    required: a.required,
                    hidden: a.hidden,
                    choices: if a.dynamic_choices { &[] } else { &a.choices },
                    dynamic_choices: a.dynamic_choices,
                })
                .collect(),
            exclusive_groups: &command.exclusive_groups,
        })
        .collect();
    let mut hasher = HashWriter(Sha256::new());
    serde_json::to_writer(&mut hasher, &levels).expect("shapes serialize");
    catalog::hex(&hasher.0.finalize())
}

struct HashWriter(Sha256);

impl std::io::Write for HashWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.update(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stems() {
        assert_eq!(file_stem("26.7.1"), "conda-26.7");
        assert_eq!(file_stem("0.99.0"), "conda-0.99");
        assert_eq!(file_stem("unknown"), "conda-unknown.0");
    }

    #[test]
    fn replacements_are_longest_first() {
        let r = Replacements::new(&[
            (Some("/home/u".into()), "~"),
            (Some("/home/u/conda".into()), "<prefix>"),
            (None, "<cwd>"),
        ]);
        assert_eq!(
            r.apply("/home/u/conda/.condarc and /home/u/.condarc"),
            "<prefix>/.condarc and ~/.condarc"
        );
    }

    #[test]
    fn only_whole_paths_are_replaced() {
        let r = Replacements::new(&[(Some("/root".into()), "~")]);
        // Inside a word, inside a longer name, or continued by a file name: kept.
        for kept in [
            "The menuinst base/root prefix",
            "/rootfs/x",
            "/root-old",
            "/root_x",
            "/root.bak",
            "x/root",
            "a,/root",
        ] {
            assert_eq!(r.apply(kept), kept);
        }
        // At every token start and every token end: replaced.
        for (text, expected) in [
            ("/root", "~"),
            ("/root/.condarc", "~/.condarc"),
            ("in /root.", "in ~."),
            ("in /root. Then", "in ~. Then"),
            ("'/root'", "'~'"),
            ("\"/root/x\"", "\"~/x\""),
            ("`/root`", "`~`"),
            ("--dir=/root", "--dir=~"),
            ("PATH=/bin:/root/bin", "PATH=/bin:~/bin"),
            ("(/root)", "(~)"),
            (
                "at /root, /root; /root! /root? [x /root]",
                "at ~, ~; ~! ~? [x ~]",
            ),
            ("a\t/root\n/root", "a\t~\n~"),
        ] {
            assert_eq!(r.apply(text), expected, "{text}");
        }
    }

    #[test]
    fn home_inside_cwd_and_cwd_inside_home() {
        let home_in_cwd = Replacements::new(&[
            (Some("/work/home/".into()), "~"),
            (Some("/work".into()), "<cwd>"),
        ]);
        assert_eq!(
            home_in_cwd.apply("/work/home/.condarc /work/x /work /work/homework"),
            "~/.condarc <cwd>/x <cwd> <cwd>/homework"
        );
        let cwd_in_home = Replacements::new(&[
            (Some("/home/u".into()), "~"),
            (Some("/home/u/src/ccm".into()), "<cwd>"),
        ]);
        assert_eq!(
            cwd_in_home.apply("/home/u/src/ccm/a /home/u/src/ccmx /home/u/.condarc"),
            "<cwd>/a ~/src/ccmx ~/.condarc"
        );
    }

    #[test]
    fn trivial_paths_are_never_replaced() {
        let r = Replacements::new(&[(Some("/".into()), "~"), (Some("".into()), "<cwd>")]);
        assert_eq!(r.apply("/ and /x"), "/ and /x");
    }

    #[test]
    fn every_string_of_a_catalog_follows_the_whole_path_rule() {
        let r = Replacements::new(&[
            (Some("/opt/conda".into()), PREFIX),
            (Some("/root".into()), "~"),
        ]);
        let mut value = serde_json::json!({
            "help": "The menuinst base/root prefix; see /root/.condarc and /opt/conda/.condarc",
            "arguments": [{"default": "/root", "choices": ["/opt/conda/envs/x", "/opt/condas"]}],
        });
        r.value(&mut value);
        assert_eq!(
            value,
            serde_json::json!({
                "help": "The menuinst base/root prefix; see ~/.condarc and <prefix>/.condarc",
                "arguments": [{"default": "~", "choices": ["<prefix>/envs/x", "/opt/condas"]}],
            })
        );
    }
}
