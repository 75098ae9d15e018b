//! Credentials a URL carries without a name before them (pure): its userinfo, conda's
//! anaconda.org token (`/t/<token>/`) and credential-shaped path segments. The named
//! ones (query parameters, options, variables) are [`super::redact`]'s.
//!
//! A path segment is *credential-shaped* when it holds a UUID (8-4-4-4-12 hexadecimal
//! digits) or a run of at least [`MIN_RUN`] ASCII letters and digits, with no other
//! character between them, that mixes letters and digits: what services put in a path
//! as a secret (an API key after `/api/conda/`, a webhook's secret, a bot token, a JWT's
//! parts). The whole segment (between two `/`) is hidden. Only the path of a URL with a
//! scheme (`scheme://host/…`) is judged, from the first `/` after the host to a `?`, a
//! `#`, whitespace, a quote, `]` or shell punctuation. Not recognised: a secret shorter
//! than [`MIN_RUN`] or cut into shorter runs by punctuation, one of letters alone or
//! digits alone, one in the host name or in a path without a scheme. Hidden although no
//! secret: a long hash in a path (a content-addressed mirror's directory), a UUID that
//! only names a resource.

/// What stands for a hidden value.
pub const REDACTED: &str = "[redacted]";

/// The shortest run of letters and digits judged a credential. A random run of 20
/// letters and digits lacks a digit with a chance of 3 % (a Slack webhook's secret has
/// 24, GitLab's tokens 20 after their `glpat-` prefix, Artifactory's API keys 73);
/// package file names and build strings stay well below it (`py311h64a7726` is 13).
pub(super) const MIN_RUN: usize = 20;

/// Where a URL's path ends: whitespace, a quote, `]` (a match spec's bracket), the query
/// or fragment, and shell punctuation (so a hidden segment never takes the rest of a
/// shell string with it).
fn path_end(c: char) -> bool {
    c.is_whitespace()
        || matches!(
            c,
            '"' | '\''
                | ']'
                | '?'
                | '#'
                | ';'
                | '&'
                | '|'
                | '<'
                | '>'
                | '('
                | ')'
                | '`'
                | '$'
                | '{'
                | '}'
        )
}

/// Every credential-shaped segment of every URL path in `text` hidden (see the module's
/// rule).
pub(super) fn path_segments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let after = &rest[at + 3..];
        // The host (with userinfo, a port, an IPv6 literal's brackets) ends at the first
        // `/`; a URL with no path ends where its path would.
        let host = after
            .find(|c: char| c == '/' || (c != ']' && path_end(c)))
            .unwrap_or(after.len());
        out.push_str(&rest[..at + 3 + host]);
        let path = &after[host..];
        let end = path.find(path_end).unwrap_or(path.len());
        let mut first = true;
        for segment in path[..end].split('/') {
            if !first {
                out.push('/');
            }
            first = false;
            out.push_str(if credential_shaped(segment) {
                REDACTED
            } else {
                segment
            });
        }
        rest = &path[end..];
    }
    out.push_str(rest);
    out
}

/// Whether a path segment looks like a credential (see the module's rule).
pub(super) fn credential_shaped(segment: &str) -> bool {
    let mixed_run = segment
        .split(|c: char| !c.is_ascii_alphanumeric())
        .any(|run| {
            run.len() >= MIN_RUN
                && run.bytes().any(|b| b.is_ascii_digit())
                && run.bytes().any(|b| b.is_ascii_alphabetic())
        });
    mixed_run || holds_uuid(segment)
}

/// Whether `text` holds 8-4-4-4-12 hexadecimal digits (any case).
fn holds_uuid(text: &str) -> bool {
    const GROUPS: [usize; 5] = [8, 4, 4, 4, 12];
    let bytes = text.as_bytes();
    (0..bytes.len()).any(|start| {
        let mut at = start;
        GROUPS.iter().enumerate().all(|(i, len)| {
            let digits = bytes.get(at..at + len);
            let ok = digits.is_some_and(|d| d.iter().all(u8::is_ascii_hexdigit))
                && (i == GROUPS.len() - 1 || bytes.get(at + len) == Some(&b'-'));
            at += len + 1;
            ok
        })
    })
}

/// Every `userinfo@` hidden: the part before an `@` back to the scheme's `://`, a
/// space, a `/` or the token's start, when a scheme precedes it or it has a `:`
/// (`user:pass@proxy` without a scheme too; `git@host` stays).
pub(super) fn userinfo(token: &str) -> String {
    let mut out = String::with_capacity(token.len());
    let mut rest = token;
    while let Some(first) = rest.find('@') {
        let head = &rest[..first];
        let start = [
            head.rfind("://").map(|i| i + 3),
            head.rfind([' ', '\t', '/', '"', '\'']).map(|i| i + 1),
        ]
        .into_iter()
        .flatten()
        .max()
        .unwrap_or(0);
        let scheme = head[..start].ends_with("://");
        // After a scheme, the userinfo runs to the authority's last `@` (a password may
        // hold `@`; conda splits at the last one: attack 17 A17-5).
        let at = if scheme {
            let authority = rest[start..]
                .find(['/', '?', '#', ' ', '\t', '"', '\''])
                .map_or(rest.len(), |i| start + i);
            rest[..authority].rfind('@').unwrap_or(first)
        } else {
            first
        };
        let head = &rest[..at];
        let info = &head[start..];
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

/// Every `/t/<token>` path segment hidden, wherever it occurs: conda takes `/t/` from
/// anywhere in a URL (conda/common/url.py:345 `split_anaconda_token`).
pub(super) fn channel_tokens(token: &str) -> String {
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

/// The credentials of every URL in `text` that need no name: credential-shaped path
/// segments (judged first, on the URL as written), userinfo, `/t/<token>`.
pub(super) fn unnamed(text: &str) -> String {
    channel_tokens(&userinfo(&path_segments(text)))
}

/// Where a query or fragment ends: whitespace, a quote, `]` (a match spec's bracket).
pub(super) fn query_end(c: char) -> bool {
    c.is_whitespace() || matches!(c, '"' | '\'' | ']' | '?' | '#')
}

/// Every path parameter (`;NAME=VALUE`: `;jsessionid=…`) whose name names a secret, in any
/// word (a channel name conda makes a URL of, `h.example/c;jsessionid=…`, attack 24 B7):
/// its value hidden up to `/`, `;`, `&` or [`query_end`] (attack 23 F3). Run after the
/// query's rule, which hides a parameter's value with the `;` it holds.
pub(super) fn path_parameter_secrets(token: &str, secret_name: fn(&str) -> bool) -> String {
    let mut out = String::with_capacity(token.len());
    let mut rest = token;
    while let Some(at) = rest.find(';') {
        out.push_str(&rest[..=at]);
        rest = &rest[at + 1..];
        let end = rest
            .find(|c: char| query_end(c) || matches!(c, '/' | ';' | '&'))
            .unwrap_or(rest.len());
        if let Some((name, value)) = rest[..end].split_once('=')
            && !value.is_empty()
            && secret_name(name)
        {
            out.push_str(&format!("{name}={REDACTED}"));
            rest = &rest[end..];
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_parameters_named_like_secrets_are_hidden() {
        for (given, expected) in [
            (
                "https://h/c;jsessionid=S3CR3T/x;v=1;Session=2?q=1",
                "https://h/c;jsessionid=[redacted]/x;v=1;Session=[redacted]?q=1",
            ),
            ("file:///p/c;auth=x", "file:///p/c;auth=[redacted]"),
            // Any word: a channel name conda makes a URL of (attack 24 B7).
            (
                "h.example/c;jsessionid=S/x",
                "h.example/c;jsessionid=[redacted]/x",
            ),
            (
                "https:/h/c;jsessionid=S",
                "https:/h/c;jsessionid=[redacted]",
            ),
        ] {
            let secret = |name: &str| {
                ["session", "auth", "tok"]
                    .iter()
                    .any(|w| name.to_ascii_lowercase().contains(w))
            };
            assert_eq!(path_parameter_secrets(given, secret), expected, "{given}");
        }
    }

    /// After a scheme, userinfo runs to the authority's last `@`, as conda splits it
    /// (attack 17 A17-5: a password holding `@` showed its tail); a path's `@` stays.
    #[test]
    fn a_password_holding_an_at_sign_is_hidden_whole() {
        for (given, expected) in [
            (
                "https://bob:p@ss@w0rd@h.example/c",
                "https://[redacted]@h.example/c",
            ),
            (
                "--channel=https://u:a@b@h/c",
                "--channel=https://[redacted]@h/c",
            ),
            ("https://h/c/pkg@1.0", "https://h/c/pkg@1.0"),
        ] {
            assert_eq!(userinfo(given), expected, "{given}");
        }
    }

    #[test]
    fn the_shape_of_a_credential() {
        for secret in [
            "AKCp8k7Q2mZx9TqL4vBn6WsRj3Hd5Fg",
            "glpat-x1Y2z3A4b5C6d7E8f9G0",
            "bot123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw",
            "3f786850e387550fdab836ed7e6dc881de23001b",
            "x-3F2B8C1E-9d4a-4e7b-8c6f-1a2b3c4d5e6f",
        ] {
            assert!(credential_shaped(secret), "{secret}");
        }
        for plain in [
            "",
            "conda-forge",
            "numpy-1.26.4-py311h64a7726_0.conda",
            "PackageManagerExtensionPoints",
            "12345678901234567890123",
            "x1Y2z3A4b5C6d7E8f9G",
            "3f2b8c1e-9d4a-4e7b-8c6f-1a2b3c4d5e6",
            "conda-forge-linux-64-gcc-2024-release",
        ] {
            assert!(!credential_shaped(plain), "{plain}");
        }
    }

    #[test]
    fn only_a_url_path_is_judged() {
        let secret = "AKCp8k7Q2mZx9TqL4vBn6WsRj3Hd5Fg";
        for kept in [
            format!("/home/u/{secret}/channel"),
            format!("https://{secret}.example/chan"),
            format!("https://h.example/chan?x={secret}"),
            format!("https://user:{secret}@h.example/chan"),
        ] {
            assert_eq!(path_segments(&kept), kept);
        }
        assert_eq!(
            path_segments(&format!("a https://h/{secret} b s3://b/{secret}/c")),
            "a https://h/[redacted] b s3://b/[redacted]/c"
        );
        assert_eq!(
            path_segments(&format!("x[channel=https://h/{secret}]")),
            "x[channel=https://h/[redacted]]"
        );
    }
}
