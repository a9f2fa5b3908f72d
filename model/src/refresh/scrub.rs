//! Scrubbing a production request before it becomes a dataset item: secrets (API keys of the
//! common providers, `Bearer` tokens, `api_key=...` assignments, the values of secret-named
//! fields, and the values the log line's own secret fields hold, in any spelling
//! [`Redactor`] knows) become [`SECRET`]; e-mail addresses and the configured PII patterns
//! become [`PII`]; user ids (`user`, `safety_identifier`, user fields of `metadata`) become a
//! keyed hash, `u-` and 24 hex digits of HMAC-SHA256 under a key from the environment, so an id
//! cannot be recovered by hashing a list of candidate ids without the key.

use hmac::{Hmac, Mac};
use regex::Regex;
use serde_json::{Map, Value};
use sha2::Sha256;

use super::log::is_secret_field;
use crate::redact::{REDACTED, Redactor, strip_userinfo};

/// What replaces a secret.
pub const SECRET: &str = REDACTED;
/// What replaces a match of a PII pattern.
pub const PII: &str = "[pii]";

/// The PII patterns applied when none are configured: e-mail addresses.
pub(crate) const DEFAULT_PII: &[&str] =
    &[r"(?i)[a-z0-9._%+\-]+@[a-z0-9\-]+(?:\.[a-z0-9\-]+)*\.[a-z]{2,}"];

/// The secret patterns: name and regular expression.
pub(crate) const SECRET_PATTERNS: &[(&str, &str)] = &[
    ("openai-style key (sk-, pk-, rk-)", r"\b(?:sk|pk|rk)-[A-Za-z0-9_\-]{16,}"),
    ("bearer token", r"(?i)\bbearer\s+[A-Za-z0-9._~+/\-]{8,}=*"),
    ("aws access key id", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    ("github token", r"\bgh[pousr]_[A-Za-z0-9]{30,}"),
    ("hugging face token", r"\bhf_[A-Za-z0-9]{30,}"),
    ("google api key", r"\bAIza[0-9A-Za-z_\-]{35}"),
    ("slack token", r"\bxox[abprs]-[A-Za-z0-9\-]{10,}"),
    ("jwt", r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),
    (
        "key assignment (api_key=, secret:, password=, access_token=)",
        r#"(?i)\b(?:api[_-]?key|secret|password|access[_-]?token)\b\s*[:=]\s*["']?[^\s"',;]{6,}"#,
    ),
];

/// Fields whose values are a request's structure, never scrubbed: a message's role, a content
/// part's kind, the response format (a JSON Schema).
const STRUCTURAL_FIELDS: &[&str] = &["role", "type", "response_format"];

/// The fixed text whose HMAC identifies a key (`key_id`).
const KEY_ID_TEXT: &[u8] = b"infergate dataset refresh key id";

/// The shortest user-id key accepted, in bytes.
pub const MIN_KEY_BYTES: usize = 16;

/// Why a scrubber cannot be built or a request scrubbed.
#[derive(Debug, thiserror::Error)]
pub enum ScrubError {
    #[error("PII pattern `{pattern}` is not a valid regular expression: {message}")]
    Pattern { pattern: String, message: String },
    #[error(
        "log line {line} holds a user id and the user-id key is not set: export {env} (at least \
         {MIN_KEY_BYTES} bytes, kept secret) so ids are hashed with it"
    )]
    NoKey { line: u64, env: String },
}

/// What was removed, counted over every request scrubbed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub secrets: u64,
    pub pii: u64,
    pub user_ids: u64,
}

/// Scrubs requests; see the module header.
pub struct Scrubber {
    secrets: Vec<Regex>,
    pii: Vec<Regex>,
    pii_sources: Vec<String>,
    key: Option<Vec<u8>>,
    key_env: String,
    pub counts: Counts,
}

impl Scrubber {
    /// A scrubber with [`DEFAULT_PII`] and these PII patterns, and the user-id key, whose
    /// variable `key_env` is named when a key is needed and missing.
    pub fn new(
        pii: &[String],
        key: Option<Vec<u8>>,
        key_env: &str,
    ) -> Result<Scrubber, ScrubError> {
        let mut sources: Vec<String> = DEFAULT_PII.iter().map(|s| s.to_string()).collect();
        sources.extend(pii.iter().filter(|p| !sources.contains(p)).cloned().collect::<Vec<_>>());
        let compile = |p: &str| compile_pattern(p);
        Ok(Scrubber {
            secrets: SECRET_PATTERNS.iter().map(|(_, p)| compile(p)).collect::<Result<_, _>>()?,
            pii: sources.iter().map(|p| compile(p)).collect::<Result<_, _>>()?,
            pii_sources: sources,
            key,
            key_env: key_env.to_string(),
            counts: Counts::default(),
        })
    }

    /// Whether `pattern` is a valid PII pattern: a regular expression of the `regex` crate that
    /// does not match the empty text (one that does would put a mark between every character).
    pub fn check_pattern(pattern: &str) -> Result<(), ScrubError> {
        compile_pattern(pattern).map(|_| ())
    }

    /// The PII patterns in force.
    pub fn pii_patterns(&self) -> &[String] {
        &self.pii_sources
    }

    /// `hmac-sha256:` and 16 hex digits identifying the key, if there is one.
    pub fn key_id(&self) -> Option<String> {
        self.key.as_ref().map(|k| format!("hmac-sha256:{}", &hmac_hex(k, KEY_ID_TEXT)[..16]))
    }

    /// A user id as its keyed hash.
    fn hash_id(&mut self, id: &str, line: u64) -> Result<String, ScrubError> {
        let key = self.key.as_ref().ok_or(ScrubError::NoKey { line, env: self.key_env.clone() })?;
        self.counts.user_ids += 1;
        Ok(format!("u-{}", &hmac_hex(key, id.as_bytes())[..24]))
    }

    /// A text with its secrets and PII replaced; `known` removes the log line's own secrets in
    /// every spelling.
    pub fn text(&mut self, s: &str, known: &Redactor) -> String {
        let mut out = strip_userinfo(&known.redact(s)).into_owned();
        if out != s {
            self.counts.secrets += 1;
        }
        for re in &self.secrets {
            let n = re.find_iter(&out).count() as u64;
            if n > 0 {
                self.counts.secrets += n;
                out = re.replace_all(&out, SECRET).into_owned();
            }
        }
        for re in &self.pii {
            let n = re.find_iter(&out).count() as u64;
            if n > 0 {
                self.counts.pii += n;
                out = re.replace_all(&out, PII).into_owned();
            }
        }
        out
    }

    /// A request body scrubbed (`line`: its log line, for errors; `known`: the values of the
    /// line's secret fields).
    pub fn request(
        &mut self,
        req: &Map<String, Value>,
        line: u64,
        known: &[String],
    ) -> Result<Map<String, Value>, ScrubError> {
        let known = Redactor::new(known);
        let mut out = Map::new();
        for (k, v) in req {
            let v = match (k.as_str(), v) {
                ("user" | "safety_identifier", Value::String(id)) => {
                    Value::String(self.hash_id(id, line)?)
                }
                ("metadata", Value::Object(m)) => Value::Object(self.metadata(m, line, &known)?),
                _ => self.value(k, v, &known),
            };
            out.insert(k.clone(), v);
        }
        Ok(out)
    }

    /// `metadata`: fields whose name holds `user` are ids, hashed; the rest scrubbed.
    fn metadata(
        &mut self,
        m: &Map<String, Value>,
        line: u64,
        known: &Redactor,
    ) -> Result<Map<String, Value>, ScrubError> {
        let mut out = Map::new();
        for (k, v) in m {
            let v = match v {
                Value::String(id) if k.to_ascii_lowercase().contains("user") => {
                    Value::String(self.hash_id(id, line)?)
                }
                _ => self.value(k, v, known),
            };
            out.insert(k.clone(), v);
        }
        Ok(out)
    }

    /// A value under field `key`: blanked when the field names a secret, else scrubbed. Keys
    /// are never rewritten, and neither are the values that are the request's structure rather
    /// than its text: a message's `role`, a content part's `type`, and a `response_format`
    /// (its JSON Schema names fields, it holds no user's text).
    fn value(&mut self, key: &str, v: &Value, known: &Redactor) -> Value {
        if is_secret_field(key) && !v.is_null() {
            self.counts.secrets += 1;
            return Value::String(SECRET.into());
        }
        if STRUCTURAL_FIELDS.contains(&key) {
            return v.clone();
        }
        match v {
            Value::String(s) => Value::String(self.text(s, known)),
            Value::Array(a) => Value::Array(a.iter().map(|x| self.value("", x, known)).collect()),
            Value::Object(o) => {
                Value::Object(o.iter().map(|(k, x)| (k.clone(), self.value(k, x, known))).collect())
            }
            other => other.clone(),
        }
    }
}

fn compile_pattern(pattern: &str) -> Result<Regex, ScrubError> {
    let re = Regex::new(pattern).map_err(|e| ScrubError::Pattern {
        pattern: pattern.to_string(),
        message: e.to_string(),
    })?;
    if re.is_match("") {
        return Err(ScrubError::Pattern {
            pattern: pattern.to_string(),
            message: "it matches the empty text, so it would mark every position of every \
                      string; give a pattern that needs at least one character"
                .to_string(),
        });
    }
    Ok(re)
}

fn hmac_hex(key: &[u8], data: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes keys of any length");
    mac.update(data);
    mac.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn scrubber(key: Option<&str>) -> Scrubber {
        Scrubber::new(&[], key.map(|k| k.as_bytes().to_vec()), "KEY_VAR").unwrap()
    }

    #[test]
    fn keys_tokens_and_emails_are_removed_from_text() {
        let mut s = scrubber(None);
        let none = Redactor::default();
        let text = "my key is sk-proj-AbCdEf0123456789xyz, header Authorization: Bearer \
                    abc.DEF-123_456=, mail Jane.Doe+x@mail.example.co.uk or ops@corp.io; \
                    api_key=\"q9w8e7r6t5\" and AKIAIOSFODNN7EXAMPLE, ghp_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
        let out = s.text(text, &none);
        for leaked in
            ["sk-proj", "abc.DEF", "Jane.Doe", "@", "q9w8e7r6t5", "AKIAIOSFODNN7EXAMPLE", "ghp_"]
        {
            assert!(!out.contains(leaked), "{leaked} in {out}");
        }
        assert!(out.starts_with("my key is [redacted], header Authorization: [redacted]"), "{out}");
        assert!(out.contains("mail [pii] or [pii];"), "{out}");
        assert_eq!(s.counts.pii, 2);
        assert_eq!(s.counts.secrets, 5);
        // Ordinary words stay.
        assert_eq!(
            s.text("ask for a task-list of 16 items", &none),
            "ask for a task-list of 16 items"
        );
    }

    #[test]
    fn known_secrets_go_in_every_spelling_and_secret_fields_are_blanked() {
        let mut s = scrubber(None);
        let known = vec!["Zq8-house-secret-77".to_string()];
        let req = json!({
            "messages": [{"role": "user", "content": "echo Zq8\\u002dhouse\\u002dsecret\\u002d77 and Zq8-house-secret-77"}],
            "extra_headers": {"X-Api-Key": "anything at all", "trace": "https://bob:pw@host/x"},
        });
        let out = s.request(req.as_object().unwrap(), 3, &known).unwrap();
        let text = Value::Object(out).to_string();
        assert!(!text.contains("Zq8") && !text.contains("anything at all"), "{text}");
        assert!(!text.contains("bob") && !text.contains("pw@"), "{text}");
        assert!(text.contains(r#""X-Api-Key":"[redacted]""#), "{text}");
    }

    #[test]
    fn user_ids_are_hashed_with_the_key_and_need_one() {
        let req = json!({"prompt": "p", "user": "alice@example.com",
            "metadata": {"user_id": "42", "end_user": "bob", "tier": "gold"}});
        let req = req.as_object().unwrap();
        let mut a = scrubber(Some("0123456789abcdef-key-one"));
        let out = a.request(req, 9, &[]).unwrap();
        let user = out["user"].as_str().unwrap().to_string();
        assert!(user.starts_with("u-") && user.len() == 26, "{user}");
        assert_ne!(out["metadata"]["user_id"], json!("42"));
        assert_ne!(out["metadata"]["end_user"], json!("bob"));
        assert_eq!(out["metadata"]["tier"], json!("gold"));
        assert_eq!(a.counts.user_ids, 3);
        // The same key gives the same hash; another key another.
        let again = scrubber(Some("0123456789abcdef-key-one")).request(req, 9, &[]).unwrap();
        assert_eq!(again["user"], json!(user));
        let other = scrubber(Some("0123456789abcdef-key-two")).request(req, 9, &[]).unwrap();
        assert_ne!(other["user"], json!(user));
        assert_eq!(a.key_id().unwrap().len(), "hmac-sha256:".len() + 16);
        // No key: refused with the variable to set.
        let e = scrubber(None).request(req, 9, &[]).unwrap_err().to_string();
        assert!(e.starts_with("log line 9 holds a user id") && e.contains("export KEY_VAR"), "{e}");
    }

    #[test]
    fn configured_pii_patterns_add_to_the_default_and_bad_ones_are_named() {
        let mut s = Scrubber::new(&[r"\b\d{3}-\d{2}-\d{4}\b".into()], None, "K").unwrap();
        let out = s.text("ssn 123-45-6789, mail a@b.org", &Redactor::default());
        assert_eq!(out, "ssn [pii], mail [pii]");
        assert_eq!(s.pii_patterns().len(), 2);
        let e = Scrubber::new(&["(".into()], None, "K").err().unwrap().to_string();
        assert!(e.starts_with("PII pattern `(` is not a valid regular expression"), "{e}");
        for empty in ["", "a*", "(?:x)?"] {
            let e = Scrubber::check_pattern(empty).unwrap_err().to_string();
            assert!(e.contains("matches the empty text"), "{empty}: {e}");
        }
    }

    #[test]
    fn pii_patterns_rewrite_string_values_never_keys_roles_or_schemas() {
        let mut s = Scrubber::new(&["user".into(), "type".into()], None, "K").unwrap();
        let req = json!({
            "messages": [
                {"role": "user", "content": "the user said hi"},
                {"role": "user", "content": [{"type": "text", "text": "user type"}]},
            ],
            "response_format": {"type": "json_schema", "json_schema": {"name": "user",
                "schema": {"type": "object", "properties": {"user": {"type": "string"}},
                           "required": ["user"]}}},
            "user_type": "x",
        });
        let out = Value::Object(s.request(req.as_object().unwrap(), 1, &[]).unwrap());
        assert_eq!(out["messages"][0]["role"], json!("user"));
        assert_eq!(out["messages"][0]["content"], json!("the [pii] said hi"));
        assert_eq!(out["messages"][1]["content"][0]["type"], json!("text"));
        assert_eq!(out["messages"][1]["content"][0]["text"], json!("[pii] [pii]"));
        assert_eq!(out["response_format"], req["response_format"]);
        assert!(out.as_object().unwrap().contains_key("user_type"), "{out}");
    }
}
