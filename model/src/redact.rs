//! Secrets out of every text the bench shows or stores. A `Redactor` knows the secrets of one
//! target (its API key, the values of headers read from the environment, the user and password
//! of its URL) and removes them from server text before it is cut to length, in any spelling a
//! server may echo them in: raw, JSON-escaped (`\u002d`, each character `\uXXXX`, escaped once or
//! more), percent-encoded or as HTML character references. The user and password of any URL in
//! the text are removed as well.

use std::borrow::Cow;
use std::sync::Arc;

/// What replaces a secret.
pub(crate) const REDACTED: &str = "[redacted]";

/// Shorter values are not treated as secrets (they would blank out ordinary text).
pub(crate) const MIN_SECRET_CHARS: usize = 4;

/// Removes secrets from text. Cheap to clone; its `Debug` never shows a secret.
#[derive(Clone, Default)]
pub struct Redactor {
    secrets: Arc<Vec<Vec<char>>>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Redactor({} secrets)", self.secrets.len())
    }
}

impl Redactor {
    /// A redactor of these secrets (values under `MIN_SECRET_CHARS` characters are ignored).
    pub fn new<S: AsRef<str>>(secrets: impl IntoIterator<Item = S>) -> Redactor {
        let mut list: Vec<Vec<char>> = Vec::new();
        for s in secrets {
            let chars: Vec<char> = s.as_ref().chars().collect();
            if chars.len() >= MIN_SECRET_CHARS && !list.contains(&chars) {
                list.push(chars);
            }
        }
        // Longest first: a secret that contains another is removed whole.
        list.sort_by_key(|s| std::cmp::Reverse(s.len()));
        Redactor { secrets: Arc::new(list) }
    }

    /// Whether it knows no secret (then only URL user information is removed).
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// This redactor with more secrets.
    pub fn with<S: AsRef<str>>(&self, more: impl IntoIterator<Item = S>) -> Redactor {
        let old: Vec<String> = self.secrets.iter().map(|s| s.iter().collect()).collect();
        let more: Vec<String> = more.into_iter().map(|s| s.as_ref().to_string()).collect();
        Redactor::new(old.iter().chain(more.iter()))
    }

    /// The secrets of a URL: its user and password, as written and percent-decoded.
    pub fn url_secrets(url: &str) -> Vec<String> {
        let Some(info) = userinfo(url) else { return Vec::new() };
        let mut out = Vec::new();
        for part in info.split(':') {
            out.push(part.to_string());
            out.push(percent_decode(part));
        }
        out
    }

    /// `text` without its secrets, and without the user and password of any URL in it.
    pub fn redact(&self, text: &str) -> String {
        self.clip(text, usize::MAX)
    }

    /// At most `n` characters of `text` (with an ellipsis when cut), its secrets removed before
    /// it is cut: a secret that starts within the first `n` characters is removed whole.
    pub fn clip(&self, text: &str, n: usize) -> String {
        let text = strip_userinfo(text);
        let cut = text.char_indices().nth(n).map_or(text.len(), |(i, _)| i);
        let mut out = String::with_capacity(cut.min(4096));
        let mut p = 0;
        while p < cut {
            if let Some(end) = self.secret_at(&text, p) {
                out.push_str(REDACTED);
                p = end;
                continue;
            }
            let (_, end) = token(&text, p);
            out.push_str(&text[p..end]);
            p = end;
        }
        if p < text.len() {
            out.push('…');
        }
        out
    }

    /// A JSON value with every string (and object key) redacted.
    pub fn redact_json(&self, v: &serde_json::Value) -> serde_json::Value {
        use serde_json::Value;
        match v {
            Value::String(s) => Value::String(self.redact(s)),
            Value::Array(a) => Value::Array(a.iter().map(|x| self.redact_json(x)).collect()),
            Value::Object(o) => Value::Object(
                o.iter().map(|(k, x)| (self.redact(k), self.redact_json(x))).collect(),
            ),
            other => other.clone(),
        }
    }

    /// Whether `text` holds no secret in any spelling this redactor knows.
    pub fn is_clean(&self, text: &str) -> bool {
        (0..text.len())
            .filter(|&i| text.is_char_boundary(i))
            .all(|i| self.secret_at(text, i).is_none())
    }

    /// The end of a secret spelled at byte `p` of `text`, if one is.
    fn secret_at(&self, text: &str, p: usize) -> Option<usize> {
        'secrets: for secret in self.secrets.iter() {
            let mut q = p;
            for &want in secret {
                if q >= text.len() {
                    continue 'secrets;
                }
                let (got, end) = token(text, q);
                if got != want {
                    continue 'secrets;
                }
                q = end;
            }
            return Some(q);
        }
        None
    }
}

/// The character spelled at byte `p` of `text` and where its spelling ends: a plain character,
/// a JSON escape (`\uXXXX` with surrogate pairs, `\/`; any number of backslashes, for text
/// escaped more than once), `\xHH`, a percent-encoded ASCII byte, or an HTML character reference.
fn token(text: &str, p: usize) -> (char, usize) {
    let b = text.as_bytes();
    let plain = || {
        let c = text[p..].chars().next().unwrap_or('\0');
        (c, p + c.len_utf8())
    };
    match b[p] {
        b'\\' => {
            let mut q = p;
            while q < b.len() && b[q] == b'\\' {
                q += 1;
            }
            if q >= b.len() {
                return plain();
            }
            match b[q] {
                b'u' => match hex_at(text, q + 1, 4) {
                    Some(hi) if (0xD800..0xDC00).contains(&hi) => {
                        // A surrogate pair: the low half follows as another escape.
                        let mut r = q + 5;
                        let start = r;
                        while r < b.len() && b[r] == b'\\' {
                            r += 1;
                        }
                        if r > start && r < b.len() && b[r] == b'u' {
                            if let Some(lo) = hex_at(text, r + 1, 4) {
                                if (0xDC00..0xE000).contains(&lo) {
                                    let c = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
                                    return (char::from_u32(c).unwrap_or('\u{FFFD}'), r + 5);
                                }
                            }
                        }
                        plain()
                    }
                    Some(cp) => char::from_u32(cp).map_or_else(plain, |c| (c, q + 5)),
                    None => plain(),
                },
                b'x' => hex_at(text, q + 1, 2)
                    .and_then(char::from_u32)
                    .map_or_else(plain, |c| (c, q + 3)),
                c if c.is_ascii_punctuation() => (c as char, q + 1),
                _ => plain(),
            }
        }
        b'%' => match hex_at(text, p + 1, 2) {
            Some(v) if v < 0x80 => (v as u8 as char, p + 3),
            _ => plain(),
        },
        b'&' if b.get(p + 1) == Some(&b'#') => {
            let (radix, start) = match b.get(p + 2) {
                Some(b'x' | b'X') => (16, p + 3),
                _ => (10, p + 2),
            };
            let digits =
                text[start..].bytes().take(8).take_while(|d| (*d as char).is_digit(radix)).count();
            let end = start + digits;
            if digits == 0 || b.get(end) != Some(&b';') {
                return plain();
            }
            u32::from_str_radix(&text[start..end], radix)
                .ok()
                .and_then(char::from_u32)
                .map_or_else(plain, |c| (c, end + 1))
        }
        _ => plain(),
    }
}

/// The value of `len` hex digits at byte `at` of `text`.
fn hex_at(text: &str, at: usize, len: usize) -> Option<u32> {
    let digits = text.get(at..at + len)?;
    if !digits.bytes().all(|d| d.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(digits, 16).ok()
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match (b[i], hex_at(s, i + 1, 2)) {
            (b'%', Some(v)) => {
                out.push(v as u8);
                i += 3;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Where the authority of a URL whose `://` ends at byte `start` ends.
fn authority_end(text: &str, start: usize) -> usize {
    text[start..]
        .find(|c: char| "/?#\"'<>`,;)]}".contains(c) || c.is_whitespace() || c == '\\')
        .map_or(text.len(), |i| start + i)
}

/// The user information (`user:password`) of a URL, if it has any.
pub(crate) fn userinfo(url: &str) -> Option<&str> {
    let start = url.find("://")? + 3;
    let end = authority_end(url, start);
    let at = url[start..end].rfind('@')?;
    Some(&url[start..start + at])
}

/// `text` with the user information of every URL in it removed (`http://user:pass@host/` ->
/// `http://host/`): for URLs that are recorded or printed.
pub fn strip_userinfo(text: &str) -> Cow<'_, str> {
    if !text.contains("://") {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = 0;
    let mut search = 0;
    while let Some(i) = text[search..].find("://") {
        let start = search + i + 3;
        let end = authority_end(text, start);
        if let Some(at) = text[start..end].rfind('@') {
            out.push_str(&text[rest..start]);
            rest = start + at + 1;
        }
        search = end.max(start);
    }
    out.push_str(&text[rest..]);
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "sk-LEAKCHECK-0123456789abcdef";

    fn escaped_every_char(s: &str) -> String {
        s.chars().map(|c| format!("\\u{:04x}", c as u32)).collect()
    }

    #[test]
    fn raw_and_escaped_spellings_are_removed() {
        let r = Redactor::new([KEY]);
        let dash = KEY.replace('-', "\\u002d");
        let double = KEY.replace('-', "\\\\u002D");
        let percent = KEY.replace('-', "%2D");
        let html = KEY.replace('-', "&#45;").replace('L', "&#x4c;");
        for spelling in [KEY.to_string(), dash, double, percent, html, escaped_every_char(KEY)] {
            let text = format!("bad key {spelling} here");
            assert_eq!(r.redact(&text), "bad key [redacted] here", "{text}");
        }
        assert_eq!(Redactor::new(["ab/cd/ef"]).redact(r"u=ab\/cd\/ef"), "u=[redacted]");
        assert_eq!(Redactor::new(None::<&str>).redact("x"), "x");
        assert_eq!(Redactor::new(["abc"]).redact("abc"), "abc", "too short to be a secret");
    }

    #[test]
    fn surrogate_pairs_and_stray_escapes() {
        let r = Redactor::new(["pass😀word"]);
        assert_eq!(r.redact("x pass\\ud83d\\ude00word y"), "x [redacted] y");
        // Incomplete or invalid escapes are plain text.
        for t in ["\\u12", "\\ud83d", "%4", "&#;", "&#x110000;", "\\", "\\\\\\", "%FF"] {
            assert_eq!(r.redact(t), t);
        }
    }

    #[test]
    fn the_secret_is_removed_before_the_text_is_cut_at_every_offset() {
        let r = Redactor::new([KEY]);
        for spelling in [KEY.to_string(), escaped_every_char(KEY)] {
            for offset in 0..40 {
                let text = format!("{}{spelling}{}", "x".repeat(offset), "y".repeat(50));
                let out = r.clip(&text, 20);
                assert!(!out.contains("LEAK") && !out.contains("\\u004c"), "{offset}: {out}");
                assert!(out.chars().count() <= 20 + REDACTED.len() + 1, "{out}");
                if offset < 20 {
                    assert!(out.contains(REDACTED), "{offset}: {out}");
                }
            }
        }
        assert_eq!(r.clip("short", 20), "short");
        assert_eq!(r.clip("abcdef", 3), "abc…");
    }

    #[test]
    fn json_values_are_redacted_in_keys_and_strings() {
        let r = Redactor::new([KEY]);
        let v =
            serde_json::json!({"data": [{"id": "m", "owner": format!("Bearer {KEY}")}], KEY: 1});
        let out = r.redact_json(&v).to_string();
        assert!(!out.contains("LEAK"), "{out}");
        assert!(r.is_clean(&out) && !r.is_clean(KEY));
    }

    #[test]
    fn userinfo_is_stripped_from_urls_and_becomes_secrets() {
        assert_eq!(strip_userinfo("http://u:p@h:1/v1"), "http://h:1/v1");
        assert_eq!(
            strip_userinfo("see https://a@b and http://x/y@z, ftp://q:w@e"),
            "see https://b and http://x/y@z, ftp://e"
        );
        assert_eq!(strip_userinfo("no url"), "no url");
        assert_eq!(userinfo("http://user:pa%40ss@h/"), Some("user:pa%40ss"));
        assert_eq!(userinfo("http://h/@x"), None);
        assert_eq!(
            Redactor::url_secrets("http://user:pa%40ss@h/"),
            ["user", "user", "pa%40ss", "pa@ss"]
        );
        let r = Redactor::new(Redactor::url_secrets("http://alice:hunter22@h/"));
        assert_eq!(
            r.redact("cannot reach http://alice:hunter22@h/v1 as hunter22"),
            "cannot reach http://h/v1 as [redacted]"
        );
    }
}
