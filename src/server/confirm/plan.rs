//! The question shown to the person (pure): the exact command, the working directory, how
//! the child's environment differs from the server's, `conda_execute`'s stdin, and the
//! bound plan when there is one (the input files conda reads, the target, a caution when
//! it lies where the agent can change files, whether it is deleted, each package with its
//! full channel URL and hash, the download size from conda's dry run). Every piece of
//! text that comes from the call, a file or conda is escaped (control and bidi
//! characters, and every other non-ASCII character), URLs have their credentials
//! redacted, and contents and package lists are shown whole and quoted: a plan too long
//! to show whole is not asked about at all ([`TooLong`]), never shown in part or by a
//! digest.

use std::path::Path;

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::host::bind::{InputFile, Plan, Record};
use crate::host::exec::EnvironmentChanges;
use crate::model::catalog::Command;

/// The refusal when the client cannot be asked (fail closed).
pub(crate) const UNAVAILABLE: &str = "confirmation_unavailable: this server asks the user to confirm \
    every write and exec call (--confirm-writes), and this client cannot be asked (it did not \
    declare the elicitation capability in form mode, or the request is session-less); \
    nothing ran.";
/// The result when the person declined or cancelled.
pub(crate) const DECLINED: &str =
    "declined_by_user: the user did not confirm the plan; nothing ran.";
/// The result when nobody answered in time.
pub(crate) const TIMED_OUT: &str = "confirmation_timed_out: the user did not answer within \
    --confirm-timeout; nothing ran.";
/// The code of a confirmed run that would differ from the plan that was shown.
pub(crate) const PLAN_CHANGED: &str = "plan_changed";
/// The start of the refusal when the plan cannot be bound to the run (the reason follows).
pub(super) const UNBOUND: &str = "confirmation_unavailable: the plan cannot be bound to the run, so \
    the user is not asked (--confirm-writes)";

/// The refusal when the command is too long to show in full (a clipped command could
/// hide what runs).
pub(super) const TOO_LONG: &str = "confirmation_unavailable: the command is too long to show the \
    user in full (--confirm-writes); nothing ran.";
/// The refusal when what decides the run is too long to show in full ([`TooLong`]): a
/// question that claims to bind a plan the person could not read would be no consent.
pub(super) const TOO_LONG_PLAN: &str = "confirmation_unavailable: the plan is too long to show the \
    user in full (standard input or an input file over 64 KiB, 1000 lines or 2000 \
    characters on a line, or not text; or over 2000 packages in one action) \
    (--confirm-writes); nothing ran.";
/// The line shown when nothing is previewed (calls that may run any program).
pub(super) const NO_PREVIEW: &str = "No preview: accepting runs the command above as shown, \
    whatever it installs, removes or runs.";

/// The line shown when conda's dry run lists no package actions.
pub(super) const NO_PLAN: &str = "Dry run: conda lists no package changes for this command; a run \
    that would change packages stops before it does (plan_changed).";
/// What a dry-run plan binds.
pub(super) const BOUND: &str = "Bound: accepting runs exactly this plan (these packages from these \
    channels with these hashes, this configuration, these input files); if any of it changes \
    before the run, nothing is fetched, installed or run (plan_changed).";
/// What a plan without a dry run binds.
pub(super) const BOUND_INSPECT: &str = "No package preview: conda has no dry run for this command. \
    Bound: conda's configuration, the target and the input files shown (a change stops the \
    run: plan_changed); the packages conda resolves at run time are not bound.";

/// Most characters of one shown item (a package or a path of conda's plan).
const ITEM: usize = 200;
/// Most characters of the command line, shown in full or not asked at all.
pub(super) const COMMAND_LIMIT: usize = 16 * 1024;
/// Most packages per action a question lists (every one of them): a large real
/// environment (a full distribution's metapackage) has several hundred; more is not
/// something a person reads, so it is not asked about.
const LIST: usize = 2000;
/// Contents (stdin, input files) are shown whole up to this many lines of at most
/// [`LINE`] characters and this many bytes; beyond, the question is not asked. Hand-made
/// environment files and spec lists are tens to a few hundred lines; 64 KiB is a page a
/// person can still scroll through, and padding past it buys the agent nothing but a
/// refusal.
const CONTENT_LINES: usize = 1000;
const CONTENT_BYTES: usize = 64 * 1024;
const LINE: usize = 2000;

/// What decides the run is too long (or not text) to show in full: the call is refused
/// with [`TOO_LONG_PLAN`] rather than asked about.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct TooLong;

/// Everything the question shows.
pub(super) struct Shown<'a> {
    /// From [`command_line`].
    pub command: &'a str,
    /// The working directory the child gets.
    pub cwd: &'a Path,
    pub stdin: Option<&'a [u8]>,
    pub environment: EnvironmentChanges,
    /// conda's dry-run document.
    pub dry: Option<&'a Value>,
    /// The bound plan.
    pub plan: Option<&'a Plan>,
    /// Values never shown (the audit log's withheld values).
    pub withheld: &'a [String],
    /// A caution line per target environment that lies where the agent or another user
    /// can change files (`exposed`), shown under its line.
    pub cautions: &'a [(String, String)],
}

/// Whether the plan comes from a dry run: the command has `--dry-run` and the argv has
/// no `--` (after which appended options would be arguments).
pub(super) fn dry_runnable(root: Option<&Command>, argv: &[String]) -> bool {
    !argv.iter().any(|t| t == "--") && super::has_dry_run(root, argv)
}

/// The command line as shown: every argument whole, each quoted as a JSON string (so
/// that spaces, quotes and separators cannot merge or split arguments) with invisible
/// characters escaped; `None` when it is longer than [`COMMAND_LIMIT`].
pub(super) fn command_line(argv: &[String]) -> Option<String> {
    let mut line = String::from("conda");
    for arg in argv {
        let quoted = serde_json::to_string(arg).unwrap_or_default();
        line.push(' ');
        line.push_str(&clip(&quoted, usize::MAX));
        if line.chars().count() > COMMAND_LIMIT {
            return None;
        }
    }
    Some(line)
}

/// The question's text, or [`TooLong`] when it cannot show everything that decides the
/// run.
pub(super) fn message(shown: &Shown) -> Result<String, TooLong> {
    let mut lines = vec!["Allow conda to run this? Nothing runs unless you accept.".to_owned()];
    lines.push(format!("Command: {}", shown.command));
    lines.push(format!(
        "Working directory: {}",
        shown_long(&shown.cwd.to_string_lossy())
    ));
    lines.push(environment(&shown.environment));
    if let Some(stdin) = shown.stdin {
        lines.extend(content("Standard input", stdin, shown.withheld)?);
    }
    match shown.plan {
        Some(plan) => lines.extend(plan_lines(plan, shown.dry, shown.withheld, shown.cautions)?),
        None => lines.push(NO_PREVIEW.to_owned()),
    }
    Ok(lines.join("\n"))
}

/// Runs of more spaces than this are shown as one marker ([`clip`]).
const SPACE_RUN: usize = 8;

/// At most `limit` characters of text for the question, escaped as client text is
/// ([`crate::tools::schema::clip`]: controls, format characters, every non-ASCII space and
/// blank-rendering character), and every run of more than [`SPACE_RUN`] spaces shown as
/// `⟨N spaces⟩` so padding cannot push text out of sight; a `⟨` of the text itself is
/// escaped, so the marker cannot be forged. Every other non-ASCII character is escaped
/// too (`\u{430}`), so that a letter of another script cannot pass for an ASCII one in a
/// package, channel or environment name ([`unmistakable`]).
fn clip(text: &str, limit: usize) -> String {
    let mut out = String::with_capacity(text.len());
    let mut run = 0;
    let flush = |out: &mut String, run: usize| match run {
        0..=SPACE_RUN => out.extend(std::iter::repeat_n(' ', run)),
        _ => out.push_str(&format!("⟨{run} spaces⟩")),
    };
    for c in text.chars() {
        if c == ' ' {
            run += 1;
            continue;
        }
        flush(&mut out, std::mem::take(&mut run));
        match c {
            '⟨' => out.push_str("\\u{27e8}"),
            c => out.push(c),
        }
    }
    flush(&mut out, run);
    unmistakable(&out, limit)
}

/// At most `limit` characters of `text` (each escape counts as the one character it
/// shows, as in [`crate::tools::schema::clip`]), `…` appended when cut: ASCII controls
/// escaped as client text is, and every non-ASCII character but the space marker's `⟨`
/// and `⟩` (a `⟨` of the text itself arrives escaped) as `\u{…}`: a Cyrillic `а`, a
/// Greek `ο`, a fullwidth `ｃ` or a dot leader `․` read as what they are, not as the
/// ASCII letters and dots they look like. A `…` of the text is escaped, so a cut cannot
/// be forged either.
fn unmistakable(text: &str, limit: usize) -> String {
    let mut out = String::with_capacity(text.len());
    for (n, c) in text.chars().enumerate() {
        if n == limit {
            out.push('…');
            break;
        }
        match c {
            '⟨' | '⟩' => out.push(c),
            c if c.is_ascii() && crate::tools::schema::invisible(c) => {
                out.extend(c.escape_default())
            }
            c if c.is_ascii() => out.push(c),
            c => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
        }
    }
    out
}

/// An item of conda's plan, escaped and clipped.
pub(super) fn shown(text: &str) -> String {
    clip(text, ITEM)
}

/// A path or a reason, escaped, clipped only far beyond what a path takes.
pub(super) fn shown_long(text: &str) -> String {
    clip(text, 4 * ITEM)
}

/// A URL with its credentials redacted (the audit log's rule), escaped.
fn url(text: &str, withheld: &[String]) -> String {
    let redacted = crate::host::audit::redact(&[text.to_owned()], withheld);
    shown_long(redacted.first().map_or("", String::as_str))
}

/// A line of a shown content with withheld values and URL credentials redacted, nothing
/// hidden for its name ([`crate::host::audit::redact_quoted`]: a name is the agent's to
/// choose, and the value behind it may be what decides the run).
fn redacted_line(line: &str, withheld: &[String]) -> String {
    crate::host::audit::redact_quoted(line, withheld)
}

fn environment(changes: &EnvironmentChanges) -> String {
    let set: Vec<String> = changes
        .set
        .iter()
        .map(|(name, value)| format!("{}={}", shown(name), shown(value)))
        .collect();
    let mut line = format!(
        "Environment: the server's, with {} set by ccm",
        if set.is_empty() {
            "nothing".to_owned()
        } else {
            set.join(", ")
        }
    );
    if !changes.withheld.is_empty() {
        let names: Vec<String> = changes.withheld.iter().map(|n| shown(n)).collect();
        line.push_str(&format!(" and {} withheld", names.join(", ")));
    }
    line
}

/// `title`, its size and digest, then the content quoted line by line; [`TooLong`] when
/// it is not text or over the bounds ([`CONTENT_BYTES`], [`CONTENT_LINES`], [`LINE`]).
fn content(title: &str, bytes: &[u8], withheld: &[String]) -> Result<Vec<String>, TooLong> {
    let digest: String = Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let head = format!("{title}: {} bytes, sha256 {digest}", bytes.len());
    let text = std::str::from_utf8(bytes).ok().filter(|t| {
        bytes.len() <= CONTENT_BYTES
            && t.lines().count() <= CONTENT_LINES
            && t.lines().all(|l| l.chars().count() <= LINE)
    });
    let text = text.ok_or(TooLong)?;
    let mut lines = vec![format!("{head} (credentials redacted):")];
    lines.extend(
        text.split('\n')
            .map(|l| format!("  | {}", clip(&redacted_line(l, withheld), usize::MAX))),
    );
    Ok(lines)
}

/// The environments the plan changes, as the question names them: those the transactions
/// change (an environment file may name its own), else the one conda resolved from the
/// command line; none for `conda config`, which changes a configuration file instead.
pub(super) fn targets(plan: &Plan) -> Vec<&str> {
    if plan.writes.is_some() {
        return Vec::new();
    }
    let mut targets: Vec<&str> = plan
        .transactions
        .iter()
        .flatten()
        .map(|s| s.prefix.as_str())
        .collect();
    targets.dedup();
    if targets.is_empty() {
        targets.extend(plan.prefix.as_deref());
    }
    targets
}

/// A target as the question names it, and where it leads when that is another path (a
/// symlink on the way): the run works there (attack 33 N3: a symlink the agent made in
/// its project to a directory elsewhere was shown by its name only, and the install
/// went there, a removal deleted an environment there).
fn target_shown(plan: &Plan, target: &str) -> String {
    let real = plan
        .transactions
        .iter()
        .flatten()
        .find(|s| s.prefix == target)
        .and_then(|s| s.real.clone())
        .or_else(|| {
            let entry = plan.paths.get("target")?.as_array()?;
            (entry.first()?.as_str()? == target)
                .then(|| entry.get(1)?.as_str().map(str::to_owned))
                .flatten()
        });
    match real {
        Some(real) if real != target => {
            format!("{} (it leads to {})", shown_long(target), shown_long(&real))
        }
        _ => shown_long(target),
    }
}

/// The paths of the command line that lead elsewhere than they name (a symlink on the
/// way), each with where it leads: the run reads or writes there (attack 37 S2: `export
/// --file project/out/passwd`, `project/out` the agent's symlink to another directory,
/// overwrote a file there). The target is shown on its own line.
fn paths_elsewhere(plan: &Plan) -> Vec<String> {
    let target = plan.paths.pointer("/target/0").and_then(Value::as_str);
    let mut lines = Vec::new();
    for entry in plan.paths["argv"].as_array().into_iter().flatten() {
        let text = |at: usize| entry.get(at).and_then(Value::as_str);
        if let (Some(value), Some(real), Some(named)) = (text(0), text(1), text(3))
            && real != named
            && Some(value) != target
        {
            let line = format!(
                "Path: {} (it leads to {})",
                shown_long(value),
                shown_long(real)
            );
            if !lines.contains(&line) {
                lines.push(line);
            }
        }
    }
    lines
}

fn plan_lines(
    plan: &Plan,
    dry: Option<&Value>,
    withheld: &[String],
    cautions: &[(String, String)],
) -> Result<Vec<String>, TooLong> {
    let mut lines = Vec::new();
    for file in &plan.files {
        lines.extend(input_file(file, withheld)?);
    }
    if let Some(written) = &plan.writes {
        lines.push(format!("Configuration file: {}", shown_long(written)));
    }
    lines.extend(paths_elsewhere(plan));
    for target in targets(plan) {
        lines.push(format!(
            "Target environment: {}",
            target_shown(plan, target)
        ));
        lines.extend(
            cautions
                .iter()
                .find(|(t, _)| t == target)
                .map(|(_, c)| c.clone()),
        );
    }
    if plan.deletes_prefix == Some(true) {
        let prefix = plan.prefix.as_deref().unwrap_or("?");
        lines.push(match plan.installed {
            Some(n) => format!(
                "Delete: the environment {} and everything in it ({n} package{}, and any \
                 other files in that directory)",
                target_shown(plan, prefix),
                if n == 1 { "" } else { "s" }
            ),
            None => format!(
                "Delete: the environment {} and everything in it",
                target_shown(plan, prefix)
            ),
        });
    }
    if !plan.packages {
        lines.push(BOUND_INSPECT.to_owned());
        return Ok(lines);
    }
    let setups: Vec<_> = plan.transactions.iter().flatten().collect();
    let several = setups.len() > 1;
    for setup in &setups {
        if several {
            lines.push(format!("In {}:", shown_long(&setup.prefix)));
        }
        for (records, title) in [(&setup.unlink, "Remove"), (&setup.link, "Install")] {
            if records.is_empty() {
                continue;
            }
            if records.len() > LIST {
                return Err(TooLong);
            }
            lines.push(format!("{title} ({}):", records.len()));
            lines.extend(
                records
                    .iter()
                    .map(|r| format!("  {}", package(r, withheld))),
            );
        }
    }
    if setups
        .iter()
        .all(|s| s.link.is_empty() && s.unlink.is_empty())
    {
        lines.push(NO_PLAN.to_owned());
    }
    if let Some(download) = dry.map(download).filter(|d| *d > 0) {
        lines.push(format!("Download: {}", size(download)));
    }
    lines.push(BOUND.to_owned());
    Ok(lines)
}

fn input_file(file: &InputFile, withheld: &[String]) -> Result<Vec<String>, TooLong> {
    let name = serde_json::to_string(&file.value).unwrap_or_default();
    let title = format!(
        "Input file {} ({})",
        url(&name, withheld),
        file.path
            .as_deref()
            .map_or_else(|| "a URL".to_owned(), shown_long)
    );
    match (&file.bytes, file.bound) {
        (Some(bytes), true) => content(&title, bytes, withheld),
        _ => Ok(vec![format!(
            "{title}: read at run time, not bound (conda fetches it then)"
        )]),
    }
}

/// `name version build (package URL's directory, hash)` of a record.
fn package(record: &Record, withheld: &[String]) -> String {
    let field = |value: &Option<String>| shown(value.as_deref().unwrap_or("?"));
    let source = record
        .url
        .as_deref()
        .and_then(|u| u.rsplit_once('/').map(|(dir, _)| dir.to_owned()))
        .or_else(|| record.channel.clone())
        .unwrap_or_else(|| "?".to_owned());
    let hash = match (&record.sha256, &record.md5) {
        (Some(sha), _) => format!("sha256 {}", shown(sha)),
        (None, Some(md5)) => format!("md5 {}", shown(md5)),
        (None, None) => "no hash recorded".to_owned(),
    };
    format!(
        "{} {} {} ({}, {hash})",
        field(&record.name),
        field(&record.version),
        field(&record.build),
        url(&source, withheld)
    )
}

/// The bytes conda's dry run would download (its `FETCH` records).
fn download(dry: &Value) -> u64 {
    let actions: Vec<&Value> = match dry.get("actions") {
        Some(Value::Array(items)) => items.iter().collect(),
        Some(object @ Value::Object(_)) => vec![object],
        _ => Vec::new(),
    };
    actions
        .iter()
        .filter_map(|a| a.get("FETCH").and_then(Value::as_array))
        .flatten()
        .filter_map(|p| p.get("size").and_then(Value::as_u64))
        .sum()
}

fn size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod leads;
#[cfg(test)]
mod tests;
