//! What to say when an agent names something that is not there: the closest valid names
//! (a property of the schema it was shown, a listed tool), so that the next call can be
//! right. Names are ranked by Jaro–Winkler similarity (`strsim`) to the wrong name and to
//! what else the candidate is called on conda's command line (its flags, its value
//! placeholder: `env` is close to `name`, whose placeholder is `ENVIRONMENT`); a wrong
//! name that starts another or is started by it counts as close. Only candidates'
//! names are ever written, never the wrong name (the caller echoes it, clipped, where the
//! echo rule allows). Pure; no I/O.

use serde_json::Value;

use crate::tools::layout::Layout;

/// Most names a suggestion lists.
pub(crate) const MOST: usize = 10;
/// How similar the closest name must be to be offered as "did you mean".
const CLOSE: f64 = 0.75;
/// The similarity of a name that starts another (at least three characters long).
const PREFIX: f64 = 0.9;

/// A valid name and what else it is called.
#[derive(Clone, Debug)]
pub(crate) struct Candidate {
    pub name: String,
    pub aliases: Vec<String>,
}

/// The candidates, most similar first (ties in their given order), with the similarity
/// of the best.
pub(crate) fn rank(wrong: &str, candidates: &[Candidate]) -> Vec<(String, f64)> {
    let wrong = normal(wrong);
    let mut scored: Vec<(usize, String, f64)> = candidates
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let best = std::iter::once(&c.name)
                .chain(&c.aliases)
                .map(|alias| similarity(&wrong, &normal(alias)))
                .fold(0.0, f64::max);
            (i, c.name.clone(), best)
        })
        .collect();
    scored.sort_by(|a, b| b.2.total_cmp(&a.2).then(a.0.cmp(&b.0)));
    scored.into_iter().map(|(_, n, s)| (n, s)).collect()
}

/// A name as compared: lower case, `-` as `_`, without leading dashes and without the
/// `conda_` every tool name starts with (which would make every tool look close).
fn normal(name: &str) -> String {
    let name = name
        .trim_start_matches('-')
        .to_lowercase()
        .replace('-', "_");
    name.strip_prefix("conda_")
        .map(str::to_owned)
        .unwrap_or(name)
}

fn similarity(a: &str, b: &str) -> f64 {
    let jw = strsim::jaro_winkler(a, b);
    let shorter = a.len().min(b.len());
    if shorter >= 3 && (a.starts_with(b) || b.starts_with(a)) {
        jw.max(PREFIX)
    } else {
        jw
    }
}

/// "did you mean 'x'? " and the valid names (at most [`MOST`], the closest first); empty
/// when there are no candidates.
pub(crate) fn closest(wrong: &str, candidates: &[Candidate], kind: &str) -> String {
    let ranked = rank(wrong, candidates);
    let Some((best, score)) = ranked.first() else {
        return String::new();
    };
    let mut out = String::new();
    if *score >= CLOSE {
        out.push_str(&format!("did you mean '{best}'? "));
    }
    let names: Vec<&str> = ranked.iter().take(MOST).map(|(n, _)| n.as_str()).collect();
    let more = if ranked.len() > MOST { ", …" } else { "" };
    out.push_str(&format!("{kind}: {}{more}", names.join(", ")));
    out
}

/// The properties of a listed input schema as candidates, with their conda flags and value
/// placeholders from the tool's layout (when it has one).
pub(crate) fn properties(schema: &Value, layout: Option<&Layout>) -> Vec<Candidate> {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    properties
        .keys()
        .map(|name| {
            let aliases = layout
                .and_then(|l| l.property(name))
                .map(|p| {
                    let a = &p.argument;
                    let mut aliases: Vec<String> = a.flags.clone();
                    aliases.extend(a.metavar.iter().cloned());
                    aliases.push(a.dest.clone());
                    aliases
                })
                .unwrap_or_default();
            Candidate {
                name: name.clone(),
                aliases,
            }
        })
        .collect()
}

/// Tool names as candidates, each also under its name without `conda_` (an agent writes
/// `install` or `env_create`).
pub(crate) fn tools<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<Candidate> {
    names
        .into_iter()
        .map(|name| Candidate {
            name: name.to_owned(),
            aliases: name
                .strip_prefix("conda_")
                .map(|rest| vec![rest.to_owned()])
                .unwrap_or_default(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(name: &str, aliases: &[&str]) -> Candidate {
        Candidate {
            name: name.into(),
            aliases: aliases.iter().map(|a| a.to_string()).collect(),
        }
    }

    #[test]
    fn the_closest_name_comes_first() {
        let candidates = [
            c("dev", &["--dev"]),
            c("name", &["-n", "--name", "ENVIRONMENT", "name"]),
            c("prefix", &["-p", "--prefix", "PATH", "prefix"]),
            c("packages", &["package_spec"]),
        ];
        assert_eq!(rank("env", &candidates)[0].0, "name");
        assert_eq!(rank("environment", &candidates)[0].0, "name");
        assert_eq!(rank("path", &candidates)[0].0, "prefix");
        assert_eq!(rank("package", &candidates)[0].0, "packages");
        assert_eq!(
            closest("pkgs", &candidates, "valid properties"),
            "did you mean 'packages'? valid properties: packages, prefix, dev, name"
        );
        assert_eq!(
            closest("zzzz", &candidates[..1], "valid properties"),
            "valid properties: dev"
        );
        assert_eq!(closest("x", &[], "valid properties"), "");
        let many: Vec<Candidate> = (0..12).map(|i| c(&format!("p{i}"), &[])).collect();
        assert!(closest("q", &many, "k").ends_with(", …"));
        assert_eq!(closest("q", &many, "k").matches(", ").count(), MOST);
    }

    #[test]
    fn tools_are_found_without_their_prefix() {
        let tools = tools(["conda_info", "conda_install", "conda_env_create"]);
        assert_eq!(rank("install", &tools)[0].0, "conda_install");
        assert_eq!(rank("conda_instal", &tools)[0].0, "conda_install");
        assert_eq!(rank("conda_create_env", &tools)[0].0, "conda_env_create");
        // The shared `conda_` makes nothing close.
        assert!(!closest("conda_nothing", &tools, "t").starts_with("did you mean"));
    }
}
