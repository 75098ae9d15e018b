//! The token check of `--http`: `Authorization: Bearer <token>` or the token query
//! parameter, compared in constant time (SHA-256 digests of both sides, compared with
//! `subtle`), the credentials stripped from every request; and the random token of a run
//! started without one.

use axum::extract::Request;
use axum::http::header::AUTHORIZATION;
use axum::http::{HeaderValue, Uri};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::config::Secret;

/// The token check.
pub(super) struct Auth {
    digest: [u8; 32],
    query_param: String,
}

impl Auth {
    pub(super) fn new(token: &Secret, query_param: &str) -> Self {
        Auth {
            digest: Sha256::digest(token.expose().as_bytes()).into(),
            query_param: query_param.to_owned(),
        }
    }

    /// Constant-time comparison of a presented token with the configured one.
    fn matches(&self, presented: &[u8]) -> bool {
        let digest: [u8; 32] = Sha256::digest(presented).into();
        digest.ct_eq(&self.digest).into()
    }

    /// Whether the request carries the token (header or query parameter), else whether
    /// one was presented at all. Either way the credentials are removed from the request.
    pub(super) fn admit(&self, request: &mut Request) -> Result<(), Denied> {
        let mut ok = false;
        let mut presented = false;
        // Two headers are ambiguous (a proxy may check or log the other one): RFC 6750
        // §3.1 answers a repeated parameter with `invalid_request`.
        if request
            .headers()
            .get_all(AUTHORIZATION)
            .iter()
            .nth(1)
            .is_some()
        {
            request.headers_mut().remove(AUTHORIZATION);
            return Err(Denied::Repeated);
        }
        for value in request.headers().get_all(AUTHORIZATION) {
            presented = true;
            if let Some(token) = bearer(value) {
                ok |= self.matches(token);
            }
        }
        request.headers_mut().remove(AUTHORIZATION);
        if let Some(query) = request.uri().query() {
            let (token, rest) = take_param(query, &self.query_param);
            if let Some(token) = token {
                presented = true;
                ok |= self.matches(&token);
                let uri = request.uri();
                let path_and_query = match rest {
                    Some(rest) => format!("{}?{rest}", uri.path()),
                    None => uri.path().to_owned(),
                };
                let mut parts = uri.clone().into_parts();
                parts.path_and_query = path_and_query.parse().ok();
                if let Ok(stripped) = Uri::from_parts(parts) {
                    *request.uri_mut() = stripped;
                }
            }
        }
        match (ok, presented) {
            (true, _) => Ok(()),
            (false, true) => Err(Denied::Wrong),
            (false, false) => Err(Denied::Missing),
        }
    }
}

/// The token of an `Authorization: Bearer <token>` value (scheme case-insensitive).
fn bearer(value: &HeaderValue) -> Option<&[u8]> {
    let bytes = value.as_bytes();
    let (scheme, rest) = bytes.split_at(bytes.iter().position(|b| *b == b' ')?);
    if !scheme.eq_ignore_ascii_case(b"bearer") {
        return None;
    }
    let token = rest.trim_ascii();
    (!token.is_empty()).then_some(token)
}

/// The percent-decoded value of the first `name=` parameter of a query, and the query
/// without every `name` parameter (`None` when nothing is left). `+` is kept as is: tokens
/// have no spaces, and base64 tokens pasted into a URL keep their `+`.
fn take_param(query: &str, name: &str) -> (Option<Vec<u8>>, Option<String>) {
    let mut value = None;
    let mut rest = Vec::new();
    for pair in query.split('&') {
        let (key, raw) = pair.split_once('=').unwrap_or((pair, ""));
        if percent_decode(key).as_deref() == Some(name.as_bytes()) {
            if value.is_none() {
                value = Some(percent_decode(raw).unwrap_or_default());
            }
        } else if !pair.is_empty() {
            rest.push(pair);
        }
    }
    let rest = (!rest.is_empty()).then(|| rest.join("&"));
    (value, rest)
}

/// RFC 3986 percent-decoding; `None` for a malformed escape.
fn percent_decode(text: &str) -> Option<Vec<u8>> {
    let escapes_ok = text
        .split('%')
        .skip(1)
        .all(|after| after.len() >= 2 && after.as_bytes()[..2].iter().all(u8::is_ascii_hexdigit));
    escapes_ok.then(|| percent_encoding::percent_decode_str(text).collect())
}

/// A fresh random token: 32 bytes from the operating system, as 64 hex digits.
pub(super) fn generate_token() -> std::io::Result<Secret> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(std::io::Error::other)?;
    Ok(Secret::new(
        bytes.iter().map(|b| format!("{b:02x}")).collect(),
    ))
}

/// Why a request has no valid token.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Denied {
    Missing,
    Wrong,
    /// More than one `Authorization` header.
    Repeated,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn auth() -> Auth {
        Auth::new(&Secret::new("s3cret-token-0123456789".into()), "key")
    }

    fn request(uri: &str, authorization: Option<&str>) -> Request {
        let mut builder = axum::http::Request::builder().method("POST").uri(uri);
        if let Some(value) = authorization {
            builder = builder.header(AUTHORIZATION, value);
        }
        builder.body(axum::body::Body::empty()).unwrap()
    }

    #[test]
    fn bearer_header() {
        let a = auth();
        for (value, ok) in [
            ("Bearer s3cret-token-0123456789", true),
            ("bearer   s3cret-token-0123456789 ", true),
            ("Bearer s3cret-token-012345678", false),
            ("Bearer s3cret-token-01234567890", false),
            ("Basic s3cret-token-0123456789", false),
            ("s3cret-token-0123456789", false),
            ("Bearer ", false),
        ] {
            let mut r = request("/mcp", Some(value));
            assert_eq!(a.admit(&mut r).is_ok(), ok, "{value}");
            assert!(
                r.headers().get(AUTHORIZATION).is_none(),
                "the header is removed"
            );
        }
        assert_eq!(a.admit(&mut request("/mcp", None)), Err(Denied::Missing));
    }

    /// Two `Authorization` headers are refused whichever carries the token.
    #[test]
    fn a_repeated_header_is_refused() {
        let a = auth();
        for values in [
            ["Bearer wrong", "Bearer s3cret-token-0123456789"],
            ["Bearer s3cret-token-0123456789", "Bearer wrong"],
            [
                "Bearer s3cret-token-0123456789",
                "Bearer s3cret-token-0123456789",
            ],
        ] {
            let mut r = request("/mcp", Some(values[0]));
            r.headers_mut()
                .append(AUTHORIZATION, HeaderValue::from_static(values[1]));
            assert_eq!(a.admit(&mut r), Err(Denied::Repeated), "{values:?}");
            assert!(r.headers().get(AUTHORIZATION).is_none());
        }
    }

    #[test]
    fn query_token_is_checked_and_stripped() {
        let a = auth();
        let mut r = request("/mcp?a=1&key=s3cret-token-0123456789&b=2", None);
        assert!(a.admit(&mut r).is_ok());
        assert_eq!(r.uri().to_string(), "/mcp?a=1&b=2");
        let mut r = request("/mcp?key=s3cret%2Dtoken-0123456789", None);
        assert!(a.admit(&mut r).is_ok());
        assert_eq!(r.uri().to_string(), "/mcp");
        // The default parameter name is not the configured one.
        let mut r = request("/mcp?token=s3cret-token-0123456789", None);
        assert_eq!(a.admit(&mut r), Err(Denied::Missing));
        let mut r = request("/mcp?key=wrong&key=s3cret-token-0123456789", None);
        assert_eq!(
            a.admit(&mut r),
            Err(Denied::Wrong),
            "the first occurrence counts"
        );
        assert_eq!(r.uri().to_string(), "/mcp");
    }

    #[test]
    fn query_parsing() {
        assert_eq!(
            take_param("token=a%2Bb+c&x", "token"),
            (Some(b"a+b+c".to_vec()), Some("x".to_owned()))
        );
        assert_eq!(take_param("x=1", "token"), (None, Some("x=1".to_owned())));
        assert_eq!(take_param("token=%zz", "token"), (Some(Vec::new()), None));
        assert_eq!(percent_decode("%41%62c"), Some(b"Abc".to_vec()));
        assert_eq!(percent_decode("%4"), None);
        assert_eq!(percent_decode("%+f"), None, "a sign is no hex digit");
    }

    #[test]
    fn generated_tokens_are_long_and_differ() {
        let a = generate_token().unwrap();
        let b = generate_token().unwrap();
        assert_eq!(a.expose().len(), 64);
        assert!(a.expose().bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }
}
