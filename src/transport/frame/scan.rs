//! The scanner behind [`super::inspect`]: RFC 8259 syntax checked without depth or number
//! limits (iteratively, so any nesting), the spans of the top-level object's `id` and
//! `params`, for frames serde cannot take, and the first key repeated within one object
//! (keys compared after unescaping), which serde would silently take the last of. Keys
//! are tracked in the outer [`TRACKED`] levels only: serde refuses anything deeper, so the
//! memory the check takes is bounded by the frame's keys, not by its nesting.

use std::borrow::Cow;
use std::collections::HashSet;
use std::ops::Range;

/// What the scanner found in a syntactically valid JSON text.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Scanned {
    pub id: Option<Range<usize>>,
    pub params: Option<Range<usize>>,
    /// The path (`$.params.name`, `$.a[1].k`) of the first key that repeats a key of its
    /// own object, keys compared after JSON unescaping (`"a"` is `"\u0061"`).
    pub repeated: Option<String>,
    /// The path of the object (`$`, `$.params.arguments`) holding the first key whose text,
    /// unescaped, has a control character (`"name\u0000"`): serde keeps it as another key
    /// while a log or a viewer that reads C strings shows the key before it.
    pub control: Option<String>,
    /// The top-level object has a `method` member (a request or a notification).
    pub method: bool,
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

/// One open container.
struct Level<'a> {
    /// An object (else an array).
    object: bool,
    /// Where this object's keys start in [`Scanner::keys`].
    keys_from: usize,
    /// The object's keys as a set, once it has more than [`LINEAR`] of them.
    set: Option<HashSet<Cow<'a, str>>>,
    /// The current member's key, quotes included (objects).
    key: Range<usize>,
    /// The current element's index (arrays).
    index: usize,
}

/// Levels whose keys are tracked: more than serde's recursion limit (128), so every
/// object of a frame serde accepts is.
const TRACKED: usize = 130;

/// Up to this many keys an object's keys are compared one by one (no hashing, no
/// allocation: most objects have a handful); beyond, through a set.
const LINEAR: usize = 16;

/// The scanner's position in the text and what it has seen.
struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
    found: Scanned,
    /// true: object, false: array; one byte per level, at any depth.
    stack: Vec<bool>,
    /// The outer [`TRACKED`] levels, with their keys, current key and index.
    levels: Vec<Level<'a>>,
    want: Want,
    key: Option<String>,
    value_start: usize,
    /// The keys of the open objects, innermost last (each object's from its level's
    /// `keys_from`).
    keys: Vec<Range<usize>>,
}

/// Check RFC 8259 syntax without depth or number limits (iteratively: any nesting), find
/// the spans of the top-level object's `id` and `params` and the first repeated key.
/// `None`: not JSON.
pub fn scan(b: &[u8]) -> Option<Scanned> {
    let mut s = Scanner {
        b,
        i: 0,
        found: Scanned::default(),
        stack: Vec::new(),
        levels: Vec::new(),
        want: Want::Value,
        key: None,
        value_start: 0,
        keys: Vec::new(),
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

impl<'a> Scanner<'a> {
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
            self.close();
            return Some(true);
        }
        if self.stack.len() == 1 && self.stack[0] {
            self.value_start = i;
        }
        self.i = match c {
            b'{' | b'[' => {
                let object = c == b'{';
                self.i += 1;
                self.stack.push(object);
                if self.stack.len() <= TRACKED {
                    self.levels.push(Level {
                        object,
                        keys_from: self.keys.len(),
                        set: None,
                        key: 0..0,
                        index: 0,
                    });
                }
                self.want = if object {
                    Want::KeyOrClose
                } else {
                    Want::ValueOrClose
                };
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
            self.close();
            return Some(true);
        }
        if c != b'"' {
            return None;
        }
        let end = string(self.b, self.i)?;
        let raw = self.i..end;
        if self.stack.len() == 1 {
            self.key = serde_json::from_slice::<String>(&self.b[raw.clone()]).ok();
            self.found.method |= self.key.as_deref() == Some("method");
        }
        if self.stack.len() <= TRACKED {
            self.levels.last_mut()?.key = raw.clone();
            if self.found.control.is_none()
                && self.b[raw.clone()].contains(&b'\\')
                && unescaped(self.b, raw.clone()).contains(char::is_control)
            {
                self.found.control = Some(self.path_to(self.levels.len() - 1));
            }
            if self.found.repeated.is_none() && !self.remember(raw) {
                self.found.repeated = Some(self.path());
            }
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

    /// Remember the current object's key at `raw`; `false` when it has it already.
    fn remember(&mut self, raw: Range<usize>) -> bool {
        let b = self.b;
        let Some(level) = self.levels.last_mut() else {
            return true;
        };
        if let Some(set) = &mut level.set {
            return set.insert(unescaped(b, raw));
        }
        let own = &self.keys[level.keys_from..];
        if own
            .iter()
            .any(|seen| same_key(b, seen.clone(), raw.clone()))
        {
            return false;
        }
        if own.len() < LINEAR {
            self.keys.push(raw);
        } else {
            let mut set: HashSet<Cow<'_, str>> =
                own.iter().map(|seen| unescaped(b, seen.clone())).collect();
            set.insert(unescaped(b, raw));
            level.set = Some(set);
        }
        true
    }

    /// The path of the current member: `$`, then `.key` or `[index]` per level.
    fn path(&self) -> String {
        self.path_to(self.levels.len())
    }

    /// The path of the outer `depth` levels' members (`0`: `$`).
    fn path_to(&self, depth: usize) -> String {
        let mut out = String::from("$");
        for level in &self.levels[..depth] {
            if level.object {
                out.push('.');
                out.push_str(&unescaped(self.b, level.key.clone()));
            } else {
                out.push_str(&format!("[{}]", level.index));
            }
        }
        out
    }

    /// Leave the innermost container (its keys are forgotten).
    fn close(&mut self) {
        if self.stack.len() <= TRACKED
            && let Some(level) = self.levels.pop()
        {
            self.keys.truncate(level.keys_from);
        }
        self.stack.pop();
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
                if self.stack.len() <= TRACKED
                    && let Some(level) = self.levels.last_mut()
                {
                    level.index += 1;
                }
                self.want = Want::Value;
                Some(false)
            }
            (b'}', true) | (b']', false) => {
                self.i += 1;
                self.close();
                Some(true)
            }
            _ => None,
        }
    }
}

/// Whether the JSON strings at `a` and `b` (quotes included) are the same text: their
/// bytes when neither has an escape, else their unescaped texts.
fn same_key(b: &[u8], a: Range<usize>, other: Range<usize>) -> bool {
    let (x, y) = (&b[a.clone()], &b[other.clone()]);
    if !x.contains(&b'\\') && !y.contains(&b'\\') {
        return x == y;
    }
    unescaped(b, a) == unescaped(b, other)
}

/// The text of the JSON string at `raw` (quotes included): borrowed when it has no escape,
/// else unescaped (a string serde cannot take, a lone surrogate, stays as written: serde
/// refuses the whole text anyway).
fn unescaped(b: &[u8], raw: Range<usize>) -> Cow<'_, str> {
    let inner = &b[raw.start + 1..raw.end - 1];
    if !inner.contains(&b'\\')
        && let Ok(text) = std::str::from_utf8(inner)
    {
        return Cow::Borrowed(text);
    }
    match serde_json::from_slice::<String>(&b[raw.clone()]) {
        Ok(text) => Cow::Owned(text),
        Err(_) => String::from_utf8_lossy(inner),
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
