//! `--http` settings: the address, the bearer token (never echoed), Host and Origin
//! allow-lists, and the connection and session limits, each from its flag, else its
//! `CCM_HTTP_*` variable, else its default.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use super::numbers::{positive_int, positive_seconds};
use super::{
    DEFAULT_HTTP_ADDR, Environment, MAX_TOKEN_LEN, MIN_TOKEN_LEN, Options, QUERY_PARAM_VAR,
    TOKEN_VAR, UsageError,
};
use crate::config::{HttpConfig, HttpLimits, Secret};

/// HTTP limits: (flag, environment variable, default).
const HTTP_MAX_CONNECTIONS: (&str, &str, &str) =
    ("--http-max-connections", "CCM_HTTP_MAX_CONNECTIONS", "256");
const HTTP_HEADER_TIMEOUT: (&str, &str, &str) =
    ("--http-header-timeout", "CCM_HTTP_HEADER_TIMEOUT", "10");
const HTTP_IDLE_TIMEOUT: (&str, &str, &str) =
    ("--http-idle-timeout", "CCM_HTTP_IDLE_TIMEOUT", "60");
const HTTP_MAX_SESSIONS: (&str, &str, &str) =
    ("--http-max-sessions", "CCM_HTTP_MAX_SESSIONS", "64");
const HTTP_SESSION_IDLE: (&str, &str, &str) =
    ("--http-session-idle", "CCM_HTTP_SESSION_IDLE", "600");
const HTTP_MAX_STATELESS: (&str, &str, &str) =
    ("--http-max-stateless", "CCM_HTTP_MAX_STATELESS", "16");
const ALLOWED_ORIGINS_VAR: &str = "CCM_HTTP_ALLOWED_ORIGINS";

/// A flag's text, else its environment variable's, else the default.
fn setting<'a>(
    flag: &'a Option<String>,
    env: &'a Environment,
    (_, var, default): (&str, &str, &'a str),
) -> &'a str {
    flag.as_deref().or_else(|| env.get(var)).unwrap_or(default)
}

/// The `--http` settings; `None` without `--http` (then no HTTP-only flag may be given).
pub(super) fn http_config(
    options: &Options,
    env: &Environment,
) -> Result<Option<HttpConfig>, UsageError> {
    let Some(addr) = &options.http else {
        return match stray_flag(options) {
            Some(flag) => Err(UsageError(format!("{flag} applies only with --http"))),
            None => Ok(None),
        };
    };
    let addr = parse_addr(addr)?;
    if !addr.ip().is_loopback() && !options.allow_remote {
        return Err(UsageError(format!(
            "--http {addr} listens beyond this machine; add --allow-remote to do so (and put TLS in front, see docs/http.md)"
        )));
    }
    let token = token(options, env)?;
    let query_param = env.get(QUERY_PARAM_VAR).unwrap_or("token").to_owned();
    if query_param.is_empty()
        || !query_param
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '~'))
    {
        return Err(UsageError(format!(
            "{QUERY_PARAM_VAR} must be a non-empty name of A-Z, a-z, 0-9, '_', '-', '.', '~'"
        )));
    }
    let allowed_hosts = allowed_hosts(options, addr)?;
    let allowed_origins = allowed_origins(options, env)?;
    let limits = http_limits(options, env)?;
    Ok(Some(HttpConfig {
        addr,
        token,
        query_param,
        allowed_hosts,
        token_file: options.token_file.clone(),
        allowed_origins,
        limits,
    }))
}

/// The first flag given that applies only with `--http`.
fn stray_flag(options: &Options) -> Option<&'static str> {
    if options.token_file.is_some() {
        Some("--token-file")
    } else if options.allow_remote {
        Some("--allow-remote")
    } else if !options.allowed_hosts.is_empty() {
        Some("--allowed-host")
    } else if !options.allowed_origins.is_empty() {
        Some("--allowed-origin")
    } else if options.http_max_connections.is_some() {
        Some(HTTP_MAX_CONNECTIONS.0)
    } else if options.http_header_timeout.is_some() {
        Some(HTTP_HEADER_TIMEOUT.0)
    } else if options.http_idle_timeout.is_some() {
        Some(HTTP_IDLE_TIMEOUT.0)
    } else if options.http_max_sessions.is_some() {
        Some(HTTP_MAX_SESSIONS.0)
    } else if options.http_session_idle.is_some() {
        Some(HTTP_SESSION_IDLE.0)
    } else if options.http_max_stateless.is_some() {
        Some(HTTP_MAX_STATELESS.0)
    } else {
        None
    }
}

/// The token of `--token-file`, else of `CCM_MCP_TOKEN`; `None`: generate one.
fn token(options: &Options, env: &Environment) -> Result<Option<Secret>, UsageError> {
    Ok(match &options.token_file {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                UsageError(format!(
                    "--token-file: cannot read {}: {}",
                    path.display(),
                    e.kind()
                ))
            })?;
            Some(check_token(
                "--token-file",
                text.trim_end_matches(['\n', '\r']),
            )?)
        }
        None => match env.get(TOKEN_VAR) {
            Some(text) => Some(check_token(TOKEN_VAR, text)?),
            None => None,
        },
    })
}

/// `--allowed-host` values, plus the listening address when it is a specific remote one.
fn allowed_hosts(options: &Options, addr: SocketAddr) -> Result<Vec<String>, UsageError> {
    let mut allowed_hosts = Vec::new();
    for host in &options.allowed_hosts {
        if host.is_empty() || host.contains(['/', ' ', ',']) {
            return Err(UsageError(format!(
                "--allowed-host: '{host}' is not a host name (give HOST or HOST:PORT)"
            )));
        }
        allowed_hosts.push(host.clone());
    }
    if !addr.ip().is_unspecified() && !addr.ip().is_loopback() {
        allowed_hosts.push(addr.ip().to_string());
    }
    Ok(allowed_hosts)
}

/// `--allowed-origin` values, then `CCM_HTTP_ALLOWED_ORIGINS`, lower-cased.
fn allowed_origins(options: &Options, env: &Environment) -> Result<Vec<String>, UsageError> {
    let mut allowed_origins = Vec::new();
    let from_env: Vec<String> = env
        .get(ALLOWED_ORIGINS_VAR)
        .map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|o| !o.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    for origin in options.allowed_origins.iter().chain(&from_env) {
        let valid = origin.split_once("://").is_some_and(|(scheme, rest)| {
            !scheme.is_empty() && !rest.is_empty() && !rest.contains(['/', ' ', ','])
        });
        if !valid {
            return Err(UsageError(format!(
                "--allowed-origin: '{origin}' is not an origin (give SCHEME://HOST[:PORT], e.g. https://app.example)"
            )));
        }
        allowed_origins.push(origin.to_ascii_lowercase());
    }
    Ok(allowed_origins)
}

/// The connection and session limits.
fn http_limits(options: &Options, env: &Environment) -> Result<HttpLimits, UsageError> {
    Ok(HttpLimits {
        max_connections: positive_int(
            HTTP_MAX_CONNECTIONS.0,
            setting(&options.http_max_connections, env, HTTP_MAX_CONNECTIONS),
        )?,
        header_timeout: positive_seconds(
            HTTP_HEADER_TIMEOUT.0,
            setting(&options.http_header_timeout, env, HTTP_HEADER_TIMEOUT),
        )?,
        idle_timeout: positive_seconds(
            HTTP_IDLE_TIMEOUT.0,
            setting(&options.http_idle_timeout, env, HTTP_IDLE_TIMEOUT),
        )?,
        max_sessions: positive_int(
            HTTP_MAX_SESSIONS.0,
            setting(&options.http_max_sessions, env, HTTP_MAX_SESSIONS),
        )?,
        session_idle: positive_seconds(
            HTTP_SESSION_IDLE.0,
            setting(&options.http_session_idle, env, HTTP_SESSION_IDLE),
        )?,
        max_stateless: positive_int(
            HTTP_MAX_STATELESS.0,
            setting(&options.http_max_stateless, env, HTTP_MAX_STATELESS),
        )?,
    })
}

/// `IP:PORT`, `[IPv6]:PORT` or `localhost:PORT`.
fn parse_addr(text: &str) -> Result<SocketAddr, UsageError> {
    if let Some(port) = text.strip_prefix("localhost:")
        && let Ok(port) = port.parse::<u16>()
    {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    text.parse().map_err(|_| {
        UsageError(format!(
            "argument --http: '{text}' is not an address; give IP:PORT, e.g. {DEFAULT_HTTP_ADDR}"
        ))
    })
}

/// A usable bearer token. The message never contains the token.
fn check_token(source: &str, text: &str) -> Result<Secret, UsageError> {
    if text.len() < MIN_TOKEN_LEN
        || text.len() > MAX_TOKEN_LEN
        || !text.bytes().all(|b| b.is_ascii_graphic())
    {
        return Err(UsageError(format!(
            "{source}: the token must be {MIN_TOKEN_LEN} to {MAX_TOKEN_LEN} visible ASCII characters (no spaces)"
        )));
    }
    Ok(Secret::new(text.to_owned()))
}
