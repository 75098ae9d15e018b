//! conda's `--json` output as it arrives: the fetch records its JSON reporter writes
//! before the final document, and the one-line account of a transaction. Pure.
//!
//! With `--json` and stdout on a terminal, conda's JSON progress bar writes one record per
//! package download or extract step, each terminated by a newline and a NUL:
//! `{"fetch":"<name-version, padded and cut to 20> | <size> | ","finished":false,
//! "maxval":1,"progress":0.42}\n\0`; the final document follows, not NUL-terminated.
//! [`Filter`] takes such records out of a byte stream (whole, as they complete) and passes
//! everything else on in order, so that what remains is the document.

use serde_json::Value;

/// The longest NUL-terminated segment still read as a record (conda's are under 200
/// bytes); a longer one is output and passes on untouched.
pub(crate) const RECORD_MAX: usize = 4096;

/// One fetch record of conda's JSON progress bar.
#[derive(Clone, Debug, PartialEq)]
pub struct FetchRecord {
    /// The package as conda describes it (`name-version`, cut to 20 characters by conda).
    pub package: String,
    /// Its size as conda prints it (`"7.6 MB"`), when given.
    pub size: Option<String>,
    /// The fraction done, 0 to 1.
    pub progress: f64,
    /// The step is finished (the bar was closed).
    pub finished: bool,
}

impl FetchRecord {
    /// "numpy-2.3.1 (7.6 MB)".
    pub fn label(&self) -> String {
        match &self.size {
            Some(size) => format!("{} ({size})", self.package),
            None => self.package.clone(),
        }
    }
}

/// Read one NUL-terminated segment (without its NUL) as a fetch record.
pub(crate) fn parse_record(segment: &[u8]) -> Option<FetchRecord> {
    if segment.len() > RECORD_MAX {
        return None;
    }
    let value: Value = serde_json::from_slice(segment.trim_ascii()).ok()?;
    let object = value.as_object()?;
    let description = object.get("fetch")?.as_str()?;
    let mut parts = description.split('|').map(str::trim);
    let package = clean(parts.next().unwrap_or_default(), 64);
    let size = parts.next().filter(|s| !s.is_empty()).map(|s| clean(s, 16));
    let progress = object
        .get("progress")
        .and_then(Value::as_f64)
        .unwrap_or(0.0)
        .clamp(0.0, 1.0);
    let finished = object.get("finished").and_then(Value::as_bool) == Some(true);
    Some(FetchRecord {
        package,
        size,
        progress,
        finished,
    })
}

/// A completed segment as output followed by a record (output written on the same line
/// before conda's record stays output): where the record starts, and the record.
fn split_record(segment: &[u8]) -> Option<(usize, FetchRecord)> {
    if let Some(found) = parse_record(segment) {
        return Some((0, found));
    }
    const START: &[u8] = b"{\"fetch\"";
    let at = segment.windows(START.len()).rposition(|w| w == START)?;
    parse_record(&segment[at..]).map(|found| (at, found))
}

/// Takes fetch records out of a byte stream fed in chunks; everything else is passed on
/// in order (a NUL-terminated segment that is not a record keeps its NUL).
#[derive(Default)]
pub(crate) struct Filter {
    /// The segment since the last NUL, while it may still be a record.
    pending: Vec<u8>,
    /// The current segment grew past [`RECORD_MAX`]: it is output, passed on as it comes.
    long: bool,
}

impl Filter {
    /// Feed `chunk`; bytes that are output go to `out`, each completed record to `record`.
    pub(crate) fn push(
        &mut self,
        chunk: &[u8],
        out: &mut Vec<u8>,
        record: &mut impl FnMut(FetchRecord),
    ) {
        let mut rest = chunk;
        while let Some(at) = rest.iter().position(|b| *b == 0) {
            let (segment, after) = (&rest[..at], &rest[at + 1..]);
            if self.long {
                out.extend_from_slice(segment);
                out.push(0);
            } else {
                self.pending.extend_from_slice(segment);
                match split_record(&self.pending) {
                    Some((before, found)) => {
                        out.extend_from_slice(&self.pending[..before]);
                        record(found);
                    }
                    None => {
                        out.extend_from_slice(&self.pending);
                        out.push(0);
                    }
                }
            }
            self.pending.clear();
            self.long = false;
            rest = after;
        }
        if self.long {
            out.extend_from_slice(rest);
        } else {
            self.pending.extend_from_slice(rest);
            if self.pending.len() > RECORD_MAX {
                out.append(&mut self.pending);
                self.long = true;
            }
        }
    }

    /// The end of the stream: what is still pending is output.
    pub(crate) fn finish(&mut self, out: &mut Vec<u8>) {
        out.append(&mut self.pending);
        self.long = false;
    }
}

/// `bytes` without the fetch records in it, and how many there were.
pub(crate) fn strip(bytes: &[u8]) -> (Vec<u8>, usize) {
    if !bytes.contains(&0) {
        return (bytes.to_vec(), 0);
    }
    let mut filter = Filter::default();
    let mut out = Vec::with_capacity(bytes.len());
    let mut count = 0;
    filter.push(bytes, &mut out, &mut |_| count += 1);
    filter.finish(&mut out);
    (out, count)
}

/// What a transaction document says changed, in one line: "LINK 3, UNLINK 1 in
/// /path/to/env" (with "dry run: " before it when nothing was done). `None` for any other
/// document.
pub(crate) fn transaction_summary(document: &Value) -> Option<String> {
    let actions = document.get("actions")?.as_object()?;
    let count = |key: &str| {
        actions
            .get(key)
            .and_then(Value::as_array)
            .map_or(0, Vec::len)
    };
    let prefix = actions
        .get("PREFIX")
        .or_else(|| document.get("prefix"))
        .and_then(Value::as_str);
    let mut line = String::new();
    if document.get("dry_run").and_then(Value::as_bool) == Some(true) {
        line.push_str("dry run: ");
    }
    line.push_str(&format!(
        "LINK {}, UNLINK {}",
        count("LINK"),
        count("UNLINK")
    ));
    if let Some(prefix) = prefix {
        line.push_str(" in ");
        line.push_str(&clean(prefix, 256));
    }
    Some(line)
}

/// `text` without control characters, at most `max` characters (an ellipsis marks a cut).
pub(crate) fn clean(text: &str, max: usize) -> String {
    let mut out = String::new();
    for (n, c) in text.chars().filter(|c| !c.is_control()).enumerate() {
        if n == max {
            out.push('…');
            break;
        }
        out.push(c);
    }
    out.trim().to_owned()
}

#[cfg(test)]
mod tests;
