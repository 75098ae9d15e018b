//! The redaction rule of the audit log (pure).
//!
//! An argv token is replaced by [`REDACTED`] (whole, or the part named) when:
//! 1. it contains a value the server withholds (its HTTP token, the token file's path);
//! 2. it is the value of an option whose name contains a secret word (`token`, `passw`,
//!    `secret`, `credential`, `auth`, `key`, `cookie`, `session`): `--token=X` keeps the
//!    name, and the token after `--token` is hidden whole;
//! 3. it is the value after a configuration key with a secret word (`conda config --set
//!    proxy_password X`, likewise after `--append`, `--prepend`, `--add`);
//! 4. it follows a command word that names credentials (`token`, `auth`, `login`,
//!    `password`, `secret`, `credentials`, `keyring`) and is not an option: `conda token
//!    set X` keeps `conda token` only;
//! 5. a URL's userinfo (`scheme://user:pass@host` → `scheme://[redacted]@host`, also
//!    `user:pass@host` without a scheme) and an anaconda.org channel token (`/t/<token>/`
//!    → `/t/[redacted]/`), wherever they occur;
//! 6. the value of every URL query (or fragment) parameter whose name, percent-decoded,
//!    has a secret word or `sig` (`?token=…`, `X-Amz-Signature=…`, `x-api-key=…`,
//!    `sig=…` of a signed URL, `#access_token=…`), with `&` or `;` between parameters,
//!    wherever a `?` or `#` starts one in a token;
//! 7. the value of a `NAME=VALUE` token whose name has a secret word
//!    (`AWS_SECRET_ACCESS_KEY=…`, `DB_PASSWORD=…`), and what follows `Bearer `/`Basic `.
//!
//! Arguments of programs that `conda run` starts are logged as given apart from these
//! patterns: a program's own secret syntax (`curl -u bob:pw`) is not known here.
//!
//! The rule errs on the side of hiding: a flag named like a secret hides the token after it.

/// What stands for a hidden value.
pub const REDACTED: &str = "[redacted]";

const SECRET_WORDS: &[&str] = &[
    "token",
    "passw",
    "secret",
    "credential",
    "auth",
    "key",
    "cookie",
    "session",
];

const CREDENTIAL_COMMANDS: &[&str] = &[
    "token",
    "auth",
    "login",
    "password",
    "secret",
    "credentials",
    "keyring",
];

const SETTERS: &[&str] = &["--set", "--append", "--prepend", "--add"];

/// Query parameter names that also hold secrets: signed URLs' signatures (`sig`, the
/// `X-Amz-Signature`/`X-Goog-Signature` family contain it too).
const QUERY_WORDS: &[&str] = &["sig", "pwd"];

fn secret_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    SECRET_WORDS.iter().any(|w| lower.contains(w))
}

/// Whether a query parameter's name (as written, percent-escapes decoded) names a secret.
fn secret_parameter(name: &str) -> bool {
    let decoded = percent_decoded(name).to_ascii_lowercase();
    secret_name(&decoded) || QUERY_WORDS.iter().any(|w| decoded.contains(w))
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

/// Every query or fragment parameter whose name names a secret: its value hidden. A
/// query starts at `?`, a fragment at `#`; either ends at whitespace, a quote or `]` (the
/// end of a match spec's bracket); parameters are separated by `&` or `;`.
fn query_secrets(token: &str) -> String {
    let mut out = String::with_capacity(token.len());
    let mut rest = token;
    while let Some(at) = rest.find(['?', '#']) {
        out.push_str(&rest[..=at]);
        let query = &rest[at + 1..];
        let end = query
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | ']' | '?' | '#'))
            .unwrap_or(query.len());
        let mut first = true;
        for (separator, parameter) in parameters(&query[..end]) {
            if !first {
                out.push(separator);
            }
            first = false;
            match parameter.split_once('=') {
                Some((name, value)) if !value.is_empty() && secret_parameter(name) => {
                    out.push_str(name);
                    out.push('=');
                    out.push_str(REDACTED);
                }
                _ => out.push_str(parameter),
            }
        }
        rest = &query[end..];
    }
    out.push_str(rest);
    out
}

/// The parameters of a query, each with the separator before it (`&` for the first).
fn parameters(query: &str) -> Vec<(char, &str)> {
    let mut out = Vec::new();
    let mut separator = '&';
    let mut rest = query;
    loop {
        match rest.find(['&', ';']) {
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

/// `argv` with every secret-looking value replaced (see the module's rule).
pub fn redact(argv: &[String], withheld: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(argv.len());
    let mut hide_next = false;
    let mut credential_command = false;
    let mut after_setter = false;
    let mut passthrough = false;
    for token in argv {
        if withheld
            .iter()
            .any(|w| !w.is_empty() && token.contains(w.as_str()))
        {
            out.push(REDACTED.to_owned());
            hide_next = false;
            continue;
        }
        if std::mem::take(&mut hide_next) {
            out.push(REDACTED.to_owned());
            after_setter = false;
            continue;
        }
        if token == "--" {
            passthrough = true;
            out.push(token.clone());
            continue;
        }
        if token.starts_with('-') {
            after_setter = SETTERS.contains(&token.as_str());
            let (name, value) = match token.split_once('=') {
                Some((name, value)) => (name, Some(value)),
                None => (token.as_str(), None),
            };
            if secret_name(name.trim_start_matches('-')) {
                match value {
                    Some(_) => out.push(format!("{name}={REDACTED}")),
                    None => {
                        out.push(token.clone());
                        hide_next = true;
                    }
                }
            } else {
                out.push(scrub_urls(token));
            }
            continue;
        }
        if credential_command {
            out.push(REDACTED.to_owned());
            continue;
        }
        if std::mem::take(&mut after_setter) && secret_name(token) {
            hide_next = true;
        }
        if !passthrough && CREDENTIAL_COMMANDS.contains(&token.to_ascii_lowercase().as_str()) {
            credential_command = true;
        }
        out.push(scrub_urls(token));
    }
    out
}

/// Hide URL userinfo, anaconda.org `/t/<token>/` path segments, query and fragment
/// parameters named like secrets, the value of a
/// `NAME=VALUE` whose name has a secret word, and the credentials after `Bearer`/`Basic`.
fn scrub_urls(token: &str) -> String {
    let token = query_secrets(&channel_tokens(&userinfo(token)));
    if let Some((name, _)) = token.split_once('=')
        && !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
        && secret_name(name)
    {
        return format!("{name}={REDACTED}");
    }
    for scheme in ["Bearer ", "Basic ", "bearer ", "basic "] {
        if let Some(at) = token.find(scheme) {
            return format!("{}{REDACTED}", &token[..at + scheme.len()]);
        }
    }
    token
}

/// Every `userinfo@` hidden: the part before an `@` back to the scheme's `://`, a
/// space, a `/` or the token's start, when a scheme precedes it or it has a `:`
/// (`user:pass@proxy` without a scheme too; `git@host` stays).
fn userinfo(token: &str) -> String {
    let mut out = String::with_capacity(token.len());
    let mut rest = token;
    while let Some(at) = rest.find('@') {
        let head = &rest[..at];
        let start = [
            head.rfind("://").map(|i| i + 3),
            head.rfind([' ', '\t', '/', '"', '\'']).map(|i| i + 1),
        ]
        .into_iter()
        .flatten()
        .max()
        .unwrap_or(0);
        let info = &head[start..];
        let scheme = head[..start].ends_with("://");
        if !info.is_empty() && (scheme || info.contains(':')) {
            out.push_str(&head[..start]);
            out.push_str(REDACTED);
        } else {
            out.push_str(head);
        }
        out.push('@');
        rest = &rest[at + 1..];
    }
    out.push_str(rest);
    out
}

/// Every `/t/<token>` path segment hidden, wherever it occurs (conda's own rule matches
/// `/t/` anywhere in a URL).
fn channel_tokens(token: &str) -> String {
    let mut out = String::with_capacity(token.len());
    let mut rest = token;
    while let Some(at) = rest.find("/t/") {
        out.push_str(&rest[..at + 3]);
        let segment = &rest[at + 3..];
        let end = segment.find(['/', '?', '#', ' ']).unwrap_or(segment.len());
        if end > 0 {
            out.push_str(REDACTED);
        }
        rest = &segment[end..];
    }
    out.push_str(rest);
    out
}
