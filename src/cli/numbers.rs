//! Numbers from the command line, each error naming the flag or the variable the text
//! came from.

use std::time::Duration;

use super::UsageError;

pub(super) fn whole(flag: &str, text: &str) -> Result<usize, UsageError> {
    let value: u64 = text.trim().parse().map_err(|_| {
        UsageError(format!(
            "argument {flag}: '{text}' is not a whole number; give a count of zero or more"
        ))
    })?;
    usize::try_from(value).map_err(|_| UsageError(format!("argument {flag}: too large")))
}

pub(super) fn positive_seconds(flag: &str, text: &str) -> Result<Duration, UsageError> {
    let value: f64 = text.trim().parse().map_err(|_| {
        UsageError(format!(
            "argument {flag}: '{text}' is not a number; give seconds as a finite number greater than zero"
        ))
    })?;
    if !value.is_finite() || value <= 0.0 {
        return Err(UsageError(format!(
            "argument {flag}: must be finite and greater than zero"
        )));
    }
    Duration::try_from_secs_f64(value)
        .map_err(|_| UsageError(format!("argument {flag}: too large")))
}

pub(super) fn positive_int(flag: &str, text: &str) -> Result<usize, UsageError> {
    let value: u64 = text.trim().parse().map_err(|_| {
        UsageError(format!(
            "argument {flag}: '{text}' is not a whole number; give a {} greater than zero",
            if flag.ends_with("-bytes") {
                "byte count"
            } else {
                "count"
            }
        ))
    })?;
    if value == 0 {
        return Err(UsageError(format!(
            "argument {flag}: must be greater than zero"
        )));
    }
    usize::try_from(value).map_err(|_| UsageError(format!("argument {flag}: too large")))
}
