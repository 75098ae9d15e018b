//! The redaction rule of the audit log (pure).
//!
//! A name *names a secret* when, percent-escapes decoded and in any case, it contains one
//! of [`SECRET_FRAGMENTS`] anywhere (`MY_PASS`, `apitok`, `X-Amz-Signature`,
//! `--passphrase`, `private`), or is a token's name (`PAT`, `GH_PAT`: [`SECRET_NAMES`]).
//! The one set applies wherever a name stands. An argv token is
//! replaced by [`REDACTED`] (whole, or the part named) when:
//! 1. it contains a value the server withholds (its HTTP token, the token file's path);
//! 2. it is the value of an option that names a secret: `--token=X` keeps the name, and
//!    the token after `--token` is hidden whole. An option is judged as conda's parser
//!    reads it when the catalog gives a reading ([`redact_read`]: `--pas` → `--password`,
//!    `-pw` is `-p` with the value `w`), else by the name as written;
//! 3. it is the value after a configuration key that names a secret (`conda config --set
//!    proxy_password X`, likewise after `--append`, `--prepend`, `--add` and every
//!    abbreviation of them: `--se`, `--app`, `--prep`);
//! 4. it follows a command word that names credentials (`token`, `auth`, `login`,
//!    `password`, `secret`, `credentials`, `keyring`) and is not an option: `conda token
//!    set X` keeps `conda token` only;
//! 5. a URL's userinfo (`scheme://user:pass@host` → `scheme://[redacted]@host`, also
//!    `user:pass@host` without a scheme), an anaconda.org channel token (`/t/<token>/`
//!    → `/t/[redacted]/`) and a credential-shaped path segment (a long run mixing letters
//!    and digits, or a UUID: `/services/T…/B…/[redacted]`; [`url`]'s rule), wherever
//!    they occur;
//! 6. the value of every URL query parameter that names a secret (`?token=…`,
//!    `X-Amz-Signature=…`, `?pw=…`), with `&` or `;` between parameters and the `=`
//!    possibly percent-encoded (`sig%3D…`), wherever a `?` starts one in a token; and a
//!    URL's fragment whole (`https://h/c#…` → `#[redacted]`); likewise the value of a
//!    path parameter that names a secret (`https://h/c;jsessionid=…`, in any word: a
//!    channel name conda makes a URL of too, `h.example/c;jsessionid=…`);
//! 7. the value of a `NAME=VALUE` argument that names a secret (`AWS_SECRET_ACCESS_KEY=…`,
//!    `DB_PWD=…`), whole.
//!
//! Inside an argument that holds several words (a `sh -c` string, a header), each word is
//! judged the same way: `NAME=VALUE` (after `export`, `;`, a quote), an option naming a
//! secret and the word after it, a header naming a secret (`Authorization: token X`,
//! `X-Api-Key: X`: the credential word after an optional scheme), and the word after
//! `Bearer`/`Basic`. Only the secret word (or quoted value) is hidden there, so a name
//! that looks like a secret cannot hide the rest of a command from the log.
//!
//! Arguments of programs that `conda run` starts are logged as given apart from these
//! patterns: a program's own secret syntax (`curl -u bob:pw`) is not known here.
//!
//! The rule errs on the side of hiding: a flag named like a secret hides the token after it.

pub use super::url::REDACTED;
use super::url::{self, query_end};

/// Name fragments that mark a secret (any case, with any prefix or suffix). Each covers
/// its longer spellings: `pass` (password, passphrase), `pw` (pwd), `tok` (token), `key`
/// (x-api-key), `auth` (oauth), `sig` (X-Amz-Signature), `cred` (credential), `private`
/// (`?private=…`, `PRIVATE-TOKEN`).
pub(super) const SECRET_FRAGMENTS: &[&str] = &[
    "pass", "pw", "tok", "key", "secret", "auth", "sig", "cred", "session", "cookie", "bearer",
    "jwt", "private",
];
/// A personal access token's name, whole or as an ending (`pat` alone would match `PATH`).
pub(super) const SECRET_NAMES: &[&str] = &["pat"];
const SECRET_ENDINGS: &[&str] = &["_pat", "-pat"];

const CREDENTIAL_COMMANDS: &[&str] = &[
    "token",
    "auth",
    "login",
    "password",
    "secret",
    "credentials",
    "keyring",
];

/// conda config's options whose values are a key and a value
/// (conda/cli/main_config.py `--set`, `--append`, `--prepend` and its alias `--add`).
const SETTERS: &[&str] = &["--set", "--append", "--prepend", "--add"];

/// Authorization schemes a header value may start with before the credential.
const SCHEMES: &[&str] = &[
    "bearer",
    "basic",
    "token",
    "digest",
    "negotiate",
    "ntlm",
    "apikey",
    "key",
    "bot",
];

/// Whether a name (an option without its dashes, a URL parameter, a variable, a header)
/// names a secret: percent-escapes decoded, any case, any of [`SECRET_FRAGMENTS`].
pub(super) fn secret_name(name: &str) -> bool {
    let lower = percent_decoded(&percent_decoded(name)).to_ascii_lowercase();
    let bare = lower.trim_start_matches('-');
    SECRET_FRAGMENTS.iter().any(|w| lower.contains(w))
        || SECRET_NAMES.contains(&bare)
        || SECRET_ENDINGS.iter().any(|e| bare.ends_with(e))
}

/// `%XX` escapes decoded (invalid ones kept as written; bytes that are not UTF-8 replaced).
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && let (Some(Some(high)), Some(Some(low))) = (
                bytes.get(i + 1).map(|b| hex(*b)),
                bytes.get(i + 2).map(|b| hex(*b)),
            )
        {
            out.push((high * 16 + low) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Every query parameter that names a secret: its value hidden; a URL's fragment hidden
/// whole. A query starts at `?`, a fragment at `#` after a `scheme://` in the same word;
/// either ends at [`query_end`]; parameters are separated by `&` or `;`.
fn query_secrets(token: &str) -> String {
    let mut out = String::with_capacity(token.len());
    let mut rest = token;
    while let Some(at) = rest.find(['?', '#']) {
        out.push_str(&rest[..=at]);
        let query = &rest[at + 1..];
        let end = query.find(query_end).unwrap_or(query.len());
        let word_start = out.rfind(char::is_whitespace).map_or(0, |i| i + 1);
        if rest[at..].starts_with('#') && out[word_start..].contains("://") {
            if end > 0 {
                out.push_str(REDACTED);
            }
            rest = &query[end..];
            continue;
        }
        let mut first = true;
        for (separator, parameter) in parameters(&query[..end]) {
            if !first {
                out.push(separator);
            }
            first = false;
            out.push_str(&parameter_shown(parameter));
        }
        rest = &query[end..];
    }
    out.push_str(rest);
    out
}

/// A query parameter with its value hidden when its name names a secret. An `=` may be
/// percent-encoded (`sig%3D…`, `sig%253D…`): the name is what comes before it.
fn parameter_shown(parameter: &str) -> String {
    if let Some((name, value)) = parameter.split_once('=') {
        return if !value.is_empty() && secret_name(name) {
            format!("{name}={REDACTED}")
        } else {
            parameter.to_owned()
        };
    }
    let lower = parameter.to_ascii_lowercase();
    let encoded = ["%3d", "%253d"]
        .iter()
        .filter_map(|e| lower.find(e).map(|at| (at, at + e.len())))
        .min();
    match encoded {
        Some((at, after)) if after < parameter.len() && secret_name(&parameter[..at]) => {
            format!("{}{REDACTED}", &parameter[..after])
        }
        _ => parameter.to_owned(),
    }
}

/// The parameters of a query, each with the separator before it (`&` for the first).
/// Only `&` separates (Python's `parse_qsl` since 3.10, what conda's requests use): a
/// `;` is part of a value, hidden with it (attack 17 A17-5: `?token=ab;cd` showed `cd`).
fn parameters(query: &str) -> Vec<(char, &str)> {
    let mut out = Vec::new();
    let mut separator = '&';
    let mut rest = query;
    loop {
        match rest.find('&') {
            Some(at) => {
                out.push((separator, &rest[..at]));
                separator = rest[at..].chars().next().unwrap_or('&');
                rest = &rest[at + 1..];
            }
            None => {
                out.push((separator, rest));
                return out;
            }
        }
    }
}

/// `argv` with every secret-looking value replaced (see the module's rule), options
/// judged by their names as written.
pub fn redact(argv: &[String], withheld: &[String]) -> Vec<String> {
    redact_read(argv, &[], withheld)
}

/// What the argv loop carries from one token to the next.
#[derive(Default)]
struct State {
    hide_next: bool,
    credential_command: bool,
    after_setter: bool,
    passthrough: bool,
}

/// `argv` with every secret-looking value replaced (see the module's rule). `readings`
/// gives, by position, the flags of the option conda's parser reads a token as (`None`
/// or missing: the token's own name decides, and any setter it could abbreviate counts).
pub fn redact_read(
    argv: &[String],
    readings: &[Option<Vec<String>>],
    withheld: &[String],
) -> Vec<String> {
    let mut out = Vec::with_capacity(argv.len());
    let mut state = State::default();
    for (at, token) in argv.iter().enumerate() {
        if withheld
            .iter()
            .any(|w| !w.is_empty() && token.contains(w.as_str()))
        {
            out.push(REDACTED.to_owned());
            state.hide_next = false;
            continue;
        }
        if std::mem::take(&mut state.hide_next) {
            out.push(REDACTED.to_owned());
            state.after_setter = false;
            continue;
        }
        if token == "--" {
            state.passthrough = true;
            out.push(token.clone());
            continue;
        }
        if token.starts_with('-') && token.len() > 1 {
            let reading = readings.get(at).and_then(Option::as_deref);
            out.push(option(token, reading, &mut state));
            continue;
        }
        if state.credential_command {
            out.push(REDACTED.to_owned());
            continue;
        }
        if std::mem::take(&mut state.after_setter) && secret_name(token) {
            state.hide_next = true;
        }
        if !state.passthrough && CREDENTIAL_COMMANDS.contains(&token.to_ascii_lowercase().as_str())
        {
            state.credential_command = true;
        }
        out.push(scrub(token));
    }
    out
}

/// An option token of the argv, shown: its value hidden when the option names a secret
/// (as read by conda's parser when `reading` is given), `state` told whether it is a
/// setter and whether the next token is its hidden value.
fn option(token: &str, reading: Option<&[String]>, state: &mut State) -> String {
    let (name, value) = match token.split_once('=') {
        Some((name, value)) => (name, Some(value)),
        None => (token, None),
    };
    let (secret, setter) = match reading {
        Some(flags) => (
            flags.iter().any(|f| secret_name(f.trim_start_matches('-'))),
            flags.iter().any(|f| SETTERS.contains(&f.as_str())),
        ),
        None => (
            secret_name(name.trim_start_matches('-')),
            name.len() > 2 && name.starts_with("--") && SETTERS.iter().any(|s| s.starts_with(name)),
        ),
    };
    state.after_setter = setter;
    if !secret {
        return scrub(token);
    }
    state.hide_next = value.is_none();
    match value {
        Some(_) => format!("{name}={REDACTED}"),
        // A short option read by conda's parser may carry its value attached, or end a
        // cluster whose last option takes the next token (`-pVALUE`, `-yp VALUE`).
        None if reading.is_some() && !token.starts_with("--") && token.len() > 2 => {
            let first = token.char_indices().nth(2).map_or(token.len(), |(i, _)| i);
            format!("{}{REDACTED}", &token[..first])
        }
        None => token.to_owned(),
    }
}

/// A `NAME=VALUE` whose name (a variable's characters) names a secret: the name.
fn secret_assignment(word: &str) -> Option<&str> {
    let (name, _) = word.split_once('=')?;
    let variable = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    (variable && secret_name(name)).then_some(name)
}

/// One argument shown: URL credentials hidden (userinfo, `/t/<token>/`, credential-shaped
/// path segments, query parameters, fragments); a whole `NAME=VALUE` naming a secret hidden after its `=`; an argument of
/// several words judged word by word ([`words`]).
fn scrub(token: &str) -> String {
    let token = url::path_parameter_secrets(&query_secrets(&url::unnamed(token)), secret_name);
    match secret_assignment(&token) {
        Some(name)
            if !token[name.len() + 1..]
                .contains(|c: char| c == '$' || SHELL_PUNCTUATION.contains(&c)) =>
        {
            format!("{name}={REDACTED}")
        }
        Some(_) => words(&token),
        None if token.contains(char::is_whitespace) => words(&token),
        None => token,
    }
}

/// A text the agent wrote or named, as the confirmation question quotes it (an environment
/// file, a `--file` list, `conda_execute`'s stdin): withheld values and the credentials a
/// URL carries (userinfo, `/t/<token>`, credential-shaped path segments, query parameters
/// that name a secret) hidden, and nothing hidden for its name. The names in such a text
/// are the agent's to choose, and a value behind a secret-looking name can be what decides
/// the run (`GIT_ASKPASS: ./evil.sh`, a channel alias `conda-forge-signed: https://…`);
/// the person asked must see it.
///
/// Userinfo and `/t/<token>` are judged only in a word that holds a URL (`scheme://`): a
/// local path such as `./proj/t/x/run` or `a:b@c` is shown whole.
pub fn redact_quoted(text: &str, withheld: &[String]) -> String {
    let mut text = text.to_owned();
    for secret in withheld.iter().filter(|w| !w.is_empty()) {
        text = text.replace(secret.as_str(), REDACTED);
    }
    let words: String = url::path_segments(&text)
        .split_inclusive(char::is_whitespace)
        .map(|word| {
            if word.contains("://") {
                url::channel_tokens(&url::userinfo(word))
            } else {
                word.to_owned()
            }
        })
        .collect();
    url::path_parameter_secrets(&query_secrets(&words), secret_name)
}

/// What the word before asks of the next word of a shell string.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pending {
    Nothing,
    /// The next word is a secret (after `--password`, `Bearer`).
    Hide,
    /// The next word is a secret unless it is an authorization scheme (after a header
    /// name that names a secret: `Authorization: token X`).
    Scheme,
}

/// Characters a word's name may follow (a quote, `;`, a subshell) and that end an
/// unquoted value in a shell string.
const SHELL_PUNCTUATION: &[char] = &['"', '\'', ';', '(', ')', '`', '{', '}', '&', '|', '<', '>'];

/// Where a value starting at `start` ends: after its closing quote when it starts with
/// one (the end of `text` when none closes it), else at whitespace or shell punctuation.
fn value_end(text: &str, start: usize) -> usize {
    let rest = &text[start..];
    match rest.chars().next() {
        Some(quote @ ('"' | '\'')) => rest[1..]
            .find(quote)
            .map_or(text.len(), |at| start + 1 + at + 1),
        _ => rest
            .find(|c: char| c.is_whitespace() || SHELL_PUNCTUATION.contains(&c))
            .map_or(text.len(), |at| start + at),
    }
}

/// An argument of several words judged word by word (see the module's rule): only the
/// secret word or quoted value is hidden, everything else is kept as written.
fn words(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut pending = Pending::Nothing;
    let mut i = 0;
    while i < text.len() {
        let rest = &text[i..];
        let lead = rest
            .find(|c: char| !c.is_whitespace())
            .unwrap_or(rest.len());
        out.push_str(&rest[..lead]);
        i += lead;
        let rest = &text[i..];
        let word = &rest[..rest.find(char::is_whitespace).unwrap_or(rest.len())];
        if word.is_empty() {
            break;
        }
        let bare = word.trim_matches(SHELL_PUNCTUATION).to_ascii_lowercase();
        let scheme = SCHEMES.contains(&bare.as_str());
        if pending == Pending::Hide || (pending == Pending::Scheme && !scheme) {
            out.push_str(REDACTED);
            i = value_end(text, i);
            pending = Pending::Nothing;
            continue;
        }
        let skip = word.len() - word.trim_start_matches(SHELL_PUNCTUATION).len();
        match judge(&word[skip..]) {
            Word::Value(kept) => {
                out.push_str(&word[..skip + kept]);
                out.push_str(REDACTED);
                i = value_end(text, i + skip + kept);
                pending = Pending::Nothing;
            }
            Word::Then(next) => {
                pending = match (pending, next) {
                    (Pending::Scheme, _) => Pending::Hide,
                    _ if matches!(bare.as_str(), "bearer" | "basic") => Pending::Hide,
                    (_, next) => next,
                };
                out.push_str(word);
                i += word.len();
            }
        }
    }
    out
}

/// What one word of a shell string (its leading punctuation skipped) is.
enum Word {
    /// It holds a secret value after its first `kept` bytes (`X_TOKEN=…`, `--pass=…`,
    /// `Authorization:…`).
    Value(usize),
    /// It is shown; the next word is judged as said.
    Then(Pending),
}

/// A word of a shell string judged by its name: `NAME=VALUE` or `--option=VALUE` naming a
/// secret, an option naming one (the next word is its value), a header naming one
/// (`Authorization:` then an optional scheme, or `X-Api-Key:VALUE`).
fn judge(core: &str) -> Word {
    let name = core.split_once('=').map_or(core, |(name, _)| name);
    let option = name.starts_with('-') && secret_name(name.trim_start_matches('-'));
    if name.len() < core.len() && (option || secret_assignment(core).is_some()) {
        return Word::Value(name.len() + 1);
    }
    if option {
        return Word::Then(Pending::Hide);
    }
    if let Some((head, tail)) = core.split_once(':')
        && !head.is_empty()
        && head
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
        && secret_name(head)
    {
        let tail = tail
            .trim_end_matches(SHELL_PUNCTUATION)
            .to_ascii_lowercase();
        return match tail.as_str() {
            "" => Word::Then(Pending::Scheme),
            scheme if SCHEMES.contains(&scheme) => Word::Then(Pending::Hide),
            _ => Word::Value(head.len() + 1),
        };
    }
    Word::Then(Pending::Nothing)
}
