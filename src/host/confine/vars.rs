//! `$VAR` expansion of argv values read as paths, as conda's `expandvars` does.

/// `$VAR` and `${VAR}` replaced by the server's environment (unset: empty), as conda's
/// `expandvars` does for paths.
pub(super) fn expand_vars(value: &str) -> String {
    if !value.contains('$') {
        return value.to_owned();
    }
    let mut out = String::new();
    let mut rest = value;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let (name, tail) = match after.strip_prefix('{') {
            Some(inner) => match inner.find('}') {
                Some(end) => (&inner[..end], &inner[end + 1..]),
                None => ("", after),
            },
            None => {
                let end = after
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(after.len());
                (&after[..end], &after[end..])
            }
        };
        if name.is_empty() {
            out.push('$');
        } else if let Some(v) = std::env::var_os(name) {
            out.push_str(&v.to_string_lossy());
        }
        rest = tail;
    }
    out.push_str(rest);
    out
}
