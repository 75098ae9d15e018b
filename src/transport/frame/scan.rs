//! The scanner behind [`super::inspect`]: RFC 8259 syntax checked without depth or number
//! limits (iteratively, so any nesting), and the spans of the top-level object's `id` and
//! `params`, for frames serde cannot take.

use std::ops::Range;

/// Where a syntactically valid JSON text keeps its top-level `id` and `params`.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Scanned {
    pub id: Option<Range<usize>>,
    pub params: Option<Range<usize>>,
}

/// What the scanner expects next.
#[derive(Clone, Copy, PartialEq)]
enum Want {
    Value,
    ValueOrClose,
    Key,
    KeyOrClose,
    CommaOrClose,
}

/// The scanner's position in the text and what it has seen.
struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
    found: Scanned,
    /// true: object, false: array.
    stack: Vec<bool>,
    want: Want,
    key: Option<String>,
    value_start: usize,
}

/// Check RFC 8259 syntax without depth or number limits (iteratively: any nesting), and
/// find the spans of the top-level object's `id` and `params`. `None`: not JSON.
pub fn scan(b: &[u8]) -> Option<Scanned> {
    let mut s = Scanner {
        b,
        i: 0,
        found: Scanned::default(),
        stack: Vec::new(),
        want: Want::Value,
        key: None,
        value_start: 0,
    };
    loop {
        s.ws();
        let c = *b.get(s.i)?;
        let ended = match s.want {
            Want::Value | Want::ValueOrClose => s.value(c)?,
            Want::Key | Want::KeyOrClose => s.key(c)?,
            Want::CommaOrClose => s.comma_or_close(c)?,
        };
        if !ended {
            continue;
        }
        // A value ended at `i`.
        if s.stack.len() == 1 && s.stack[0] {
            match s.key.as_deref() {
                Some("id") => s.found.id = Some(s.value_start..s.i),
                Some("params") => s.found.params = Some(s.value_start..s.i),
                _ => {}
            }
        }
        if s.stack.is_empty() {
            s.ws();
            return (s.i == b.len()).then_some(s.found);
        }
        s.want = Want::CommaOrClose;
    }
}

impl Scanner<'_> {
    fn ws(&mut self) {
        while self.i < self.b.len() && matches!(self.b[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }

    /// A value, or the `]` closing an empty array. `Some(true)`: a value ended at `i`.
    fn value(&mut self, c: u8) -> Option<bool> {
        let (b, i) = (self.b, self.i);
        if self.want == Want::ValueOrClose && c == b']' {
            self.i += 1;
            self.stack.pop();
            return Some(true);
        }
        if self.stack.len() == 1 && self.stack[0] {
            self.value_start = i;
        }
        self.i = match c {
            b'{' => {
                self.i += 1;
                self.stack.push(true);
                self.want = Want::KeyOrClose;
                return Some(false);
            }
            b'[' => {
                self.i += 1;
                self.stack.push(false);
                self.want = Want::ValueOrClose;
                return Some(false);
            }
            b'"' => string(b, i)?,
            b'-' | b'0'..=b'9' => number(b, i)?,
            b't' => literal(b, i, b"true")?,
            b'f' => literal(b, i, b"false")?,
            b'n' => literal(b, i, b"null")?,
            _ => return None,
        };
        Some(true)
    }

    /// A member's key and its `:`, or the `}` closing an empty object. `Some(true)`: a
    /// value (the object) ended at `i`.
    fn key(&mut self, c: u8) -> Option<bool> {
        if self.want == Want::KeyOrClose && c == b'}' {
            self.i += 1;
            self.stack.pop();
            return Some(true);
        }
        if c != b'"' {
            return None;
        }
        let end = string(self.b, self.i)?;
        if self.stack.len() == 1 {
            self.key = serde_json::from_slice::<String>(&self.b[self.i..end]).ok();
        }
        self.i = end;
        self.ws();
        if self.b.get(self.i) != Some(&b':') {
            return None;
        }
        self.i += 1;
        self.want = Want::Value;
        Some(false)
    }

    /// After a value: a `,`, or the close of its container. `Some(true)`: a value (the
    /// container) ended at `i`.
    fn comma_or_close(&mut self, c: u8) -> Option<bool> {
        let object = *self.stack.last()?;
        match (c, object) {
            (b',', true) => {
                self.i += 1;
                self.want = Want::Key;
                Some(false)
            }
            (b',', false) => {
                self.i += 1;
                self.want = Want::Value;
                Some(false)
            }
            (b'}', true) | (b']', false) => {
                self.i += 1;
                self.stack.pop();
                Some(true)
            }
            _ => None,
        }
    }
}

/// The end of the string that starts at `i` (a `"`).
fn string(b: &[u8], mut i: usize) -> Option<usize> {
    i += 1;
    loop {
        match *b.get(i)? {
            b'"' => return Some(i + 1),
            b'\\' => match *b.get(i + 1)? {
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => i += 2,
                b'u' => {
                    let hex = b.get(i + 2..i + 6)?;
                    if !hex.iter().all(u8::is_ascii_hexdigit) {
                        return None;
                    }
                    i += 6;
                }
                _ => return None,
            },
            0..=0x1f => return None,
            _ => i += 1,
        }
    }
}

/// The end of the number that starts at `i`.
fn number(b: &[u8], mut i: usize) -> Option<usize> {
    let digits = |i: &mut usize| {
        let start = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i > start
    };
    if b.get(i) == Some(&b'-') {
        i += 1;
    }
    match b.get(i)? {
        b'0' => i += 1,
        b'1'..=b'9' => {
            digits(&mut i);
        }
        _ => return None,
    }
    if b.get(i) == Some(&b'.') {
        i += 1;
        if !digits(&mut i) {
            return None;
        }
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if !digits(&mut i) {
            return None;
        }
    }
    Some(i)
}

fn literal(b: &[u8], i: usize, word: &[u8]) -> Option<usize> {
    (b.get(i..i + word.len())? == word).then_some(i + word.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scanner_accepts_json_and_rejects_the_rest() {
        for ok in [
            "0",
            "-1.5e+10",
            "\"a\\u00e9\\n\"",
            "[]",
            "{}",
            "[1,[2,{\"a\":[true,false,null]}]]",
            " {\"id\" : 7 , \"params\":{\"x\":[1e400]}} ",
        ] {
            assert!(scan(ok.as_bytes()).is_some(), "{ok}");
        }
        for bad in [
            "",
            "NaN",
            "Infinity",
            "-Infinity",
            "{\"a\":NaN}",
            "[1,]",
            "{\"a\":1,}",
            "01",
            "1.",
            "\"\\x\"",
            "\"a\tb\"",
            "{\"a\" 1}",
            "[1] 2",
            "{",
            "tru",
        ] {
            assert!(scan(bad.as_bytes()).is_none(), "{bad}");
        }
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(scan(deep.as_bytes()).is_some());
        let text = r#"{"jsonrpc":"2.0","params":{"a":[1]},"id":"x"}"#;
        let found = scan(text.as_bytes()).unwrap();
        assert_eq!(&text[found.id.unwrap()], "\"x\"");
        assert_eq!(&text[found.params.unwrap()], "{\"a\":[1]}");
    }
}
