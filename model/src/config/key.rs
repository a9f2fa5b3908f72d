//! A configuration key: a dotted path into a bench profile or the engine config
//! (`load.concurrency`, `scheduler.max_num_seqs`, `unmapped."--kv-cache-dtype"`), parsed once
//! into its segments ([`ConfigKey`]).
//!
//! A segment is bare (letters, digits, `_`, `-`) or a TOML basic string in double quotes
//! without a backslash or a quote inside (`"compilation-config.level"`): what decision records,
//! `--set`, `--grid` and the governed sources write. A key keeps the text it was written as
//! (its [`Display`](std::fmt::Display), its serialized form); its segments are what a table is
//! walked by. The value at a key is read from a TOML or JSON document and set in a TOML table
//! here, and whether a key is one of the engine config's ([`ConfigKey::is_engine_key`]) is
//! decided by its section in one place, [`ENGINE_SECTIONS`].

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A dotted configuration key, valid by construction.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConfigKey {
    /// As written (`unmapped."--x"`, `load.concurrency`).
    text: String,
    /// Unquoted (`["unmapped", "--x"]`); never empty.
    segments: Vec<String>,
}

/// The shape of a key, for messages.
pub const KEY_SHAPE: &str = "segments of letters, digits, `_` and `-` (or \"quoted\" text \
                             without `\\` or `\"`) joined by `.`, e.g. load.concurrency";

/// Text that is not a dotted key ([`KEY_SHAPE`]); `key` as given.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{key}` is not a dotted key: {KEY_SHAPE}")]
pub struct KeyError {
    pub key: String,
}

/// A dotted key that goes through a value (`load.concurrency.x` where `load.concurrency` is
/// set); `key` is the part up to that value, `segment` its last segment (`concurrency`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{key}` is a value, not a table")]
pub struct NotATable {
    pub key: String,
    pub segment: String,
}

/// The sections of `configs/engine.toml` ([`crate::config::EngineConfig`]'s fields) whose keys
/// configure the engine, and whether a running server reveals them (its served configuration,
/// [`crate::served`]): `batch` and `device` are the simulator's and the bench's. `sim` is
/// left out: `sim.*` is a bench profile's section as well, and a key under it is read as one.
pub const ENGINE_SECTIONS: [(&str, bool); 5] = [
    ("engine", true),
    ("scheduler", true),
    ("token_interval", true),
    ("batch", false),
    ("device", false),
];

fn bare(seg: &str) -> bool {
    !seg.is_empty() && seg.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

fn quotable(seg: &str) -> bool {
    !seg.is_empty() && !seg.contains(['"', '\\'])
}

impl ConfigKey {
    /// Parse a dotted key ([`KEY_SHAPE`]): no surrounding space, no empty segment.
    pub fn parse(key: &str) -> Result<ConfigKey, KeyError> {
        let err = || KeyError { key: key.to_string() };
        let mut segments = Vec::new();
        let mut rest = key;
        loop {
            let (seg, tail) = if let Some(quoted) = rest.strip_prefix('"') {
                let end = quoted.find('"').ok_or_else(err)?;
                let seg = &quoted[..end];
                if !quotable(seg) {
                    return Err(err());
                }
                (seg, &quoted[end + 1..])
            } else {
                let end = rest.find('.').unwrap_or(rest.len());
                let seg = &rest[..end];
                if !bare(seg) {
                    return Err(err());
                }
                (seg, &rest[end..])
            };
            segments.push(seg.to_string());
            if tail.is_empty() {
                return Ok(ConfigKey { text: key.to_string(), segments });
            }
            rest = tail.strip_prefix('.').ok_or_else(err)?;
        }
    }

    /// The key of these segments (a table's keys, walked down), each written bare when it can
    /// be and quoted when not; an error for no segment, or an empty one or one with `"` or `\`.
    pub fn from_segments<S: AsRef<str>>(
        segments: impl IntoIterator<Item = S>,
    ) -> Result<ConfigKey, KeyError> {
        let segments: Vec<String> = segments.into_iter().map(|s| s.as_ref().to_string()).collect();
        let text = segments
            .iter()
            .map(|s| if bare(s) { s.clone() } else { format!("\"{s}\"") })
            .collect::<Vec<_>>()
            .join(".");
        if segments.is_empty() || !segments.iter().all(|s| quotable(s)) {
            return Err(KeyError { key: text });
        }
        Ok(ConfigKey { text, segments })
    }

    /// A key written in the code (`"load.concurrency"`), not read from input.
    ///
    /// # Panics
    ///
    /// When `key` is not a dotted key: a mistake in the code, which its tests run into.
    pub fn literal(key: &'static str) -> ConfigKey {
        ConfigKey::parse(key).unwrap_or_else(|e| panic!("{e}"))
    }

    /// This key under `parent` (`fail_after` under `sim.faults`: `sim.faults.fail_after`).
    pub fn under(&self, parent: &ConfigKey) -> ConfigKey {
        ConfigKey {
            text: format!("{}.{}", parent.text, self.text),
            segments: parent.segments.iter().chain(&self.segments).cloned().collect(),
        }
    }

    /// The key as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The segments, unquoted (`["scheduler", "max_num_seqs"]`).
    pub fn segments(&self) -> &[String] {
        &self.segments
    }

    /// The segments as a path into a document (for [`crate::config::Source::locate`]).
    pub fn path(&self) -> Vec<&str> {
        self.segments.iter().map(String::as_str).collect()
    }

    /// The first segment: the section (`engine`, `scheduler`, `load`, ...).
    pub fn section(&self) -> &str {
        &self.segments[0]
    }

    /// The last segment (`max_num_seqs` of `scheduler.max_num_seqs`).
    pub fn leaf(&self) -> &str {
        self.segments.last().expect("a key has a segment")
    }

    /// Whether every segment is written bare (no quoted segment, even one that could be bare:
    /// `a."b"` is not).
    pub fn is_bare(&self) -> bool {
        !self.text.contains('"')
    }

    /// A key of the engine config: a key under one of its [`ENGINE_SECTIONS`]
    /// (`scheduler.max_num_seqs`), not a section alone. Any other key is a bench setting
    /// (`load.concurrency`, `sim.slowdown`) or an engine's own (`vllm.cache_dtype`).
    pub fn is_engine_key(&self) -> bool {
        self.segments.len() >= 2 && ENGINE_SECTIONS.iter().any(|(s, _)| *s == self.section())
    }

    /// An engine-config key a running server reveals (its section is one a server answers
    /// for: `engine`, `scheduler`, `token_interval`).
    pub fn is_served_key(&self) -> bool {
        self.segments.len() >= 2 && ENGINE_SECTIONS.iter().any(|(s, r)| *r && *s == self.section())
    }

    /// The value at the key in a TOML table.
    pub fn get_in<'a>(&self, table: &'a toml::Table) -> Option<&'a toml::Value> {
        let (first, rest) = self.segments.split_first()?;
        rest.iter().try_fold(table.get(first)?, |v, k| v.get(k.as_str()))
    }

    /// The value at the key in a TOML value (a table).
    pub fn get_toml<'a>(&self, value: &'a toml::Value) -> Option<&'a toml::Value> {
        self.segments.iter().try_fold(value, |v, k| v.get(k.as_str()))
    }

    /// The value at the key in a JSON value (an object).
    pub fn get_json<'a>(&self, value: &'a serde_json::Value) -> Option<&'a serde_json::Value> {
        self.segments.iter().try_fold(value, |v, k| v.get(k.as_str()))
    }

    /// Set the key to `value` in a table, creating the tables on the way; an error when one
    /// on the way is a value.
    pub fn set_in(&self, table: &mut toml::Table, value: toml::Value) -> Result<(), NotATable> {
        let (leaf, sections) = self.segments.split_last().expect("a key has a segment");
        let mut cur = table;
        for (i, part) in sections.iter().enumerate() {
            let entry =
                cur.entry(part.clone()).or_insert_with(|| toml::Value::Table(toml::Table::new()));
            cur = match entry {
                toml::Value::Table(t) => t,
                _ => {
                    return Err(NotATable {
                        key: self.segments[..=i].join("."),
                        segment: part.clone(),
                    });
                }
            };
        }
        cur.insert(leaf.clone(), value);
        Ok(())
    }
}

impl fmt::Display for ConfigKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl FromStr for ConfigKey {
    type Err = KeyError;

    fn from_str(s: &str) -> Result<ConfigKey, KeyError> {
        ConfigKey::parse(s)
    }
}

impl AsRef<str> for ConfigKey {
    fn as_ref(&self) -> &str {
        &self.text
    }
}

impl PartialEq<str> for ConfigKey {
    fn eq(&self, other: &str) -> bool {
        self.text == other
    }
}

impl PartialEq<&str> for ConfigKey {
    fn eq(&self, other: &&str) -> bool {
        self.text == *other
    }
}

impl Serialize for ConfigKey {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for ConfigKey {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<ConfigKey, D::Error> {
        let text = String::deserialize(d)?;
        ConfigKey::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_and_quoted_segments_parse_and_keep_their_text() {
        let k = ConfigKey::parse("scheduler.max_num_seqs").unwrap();
        assert_eq!(k.segments(), ["scheduler", "max_num_seqs"]);
        assert_eq!((k.section(), k.leaf()), ("scheduler", "max_num_seqs"));
        let k = ConfigKey::parse("unmapped.\"compilation-config.level\"").unwrap();
        assert_eq!(k.segments(), ["unmapped", "compilation-config.level"]);
        assert_eq!(k.to_string(), "unmapped.\"compilation-config.level\"");
        assert!(!k.is_bare());
        assert!(!ConfigKey::parse("a.\"b\"").unwrap().is_bare());
        assert!(ConfigKey::parse("a.b-c").unwrap().is_bare());
        let under = ConfigKey::literal("b.c").under(&ConfigKey::literal("a"));
        assert_eq!(
            (under.as_str(), under.segments()),
            ("a.b.c", &["a", "b", "c"].map(String::from)[..])
        );
        assert_eq!(ConfigKey::parse("model").unwrap().leaf(), "model");
        for bad in ["", ".", "a.", ".a", "a..b", "a b", "a.\"\"", "a.\"x\\y\"", "a.\"x", "a.\"x\"y"]
        {
            assert_eq!(ConfigKey::parse(bad), Err(KeyError { key: bad.into() }), "{bad}");
        }
    }

    #[test]
    fn segments_are_quoted_where_they_must_be() {
        let k = ConfigKey::from_segments(["unmapped", "--x", "a.b"]).unwrap();
        assert_eq!(k.as_str(), "unmapped.--x.\"a.b\"");
        assert_eq!(ConfigKey::parse(k.as_str()).unwrap(), k);
        assert!(ConfigKey::from_segments(["a", "x\"y"]).is_err());
        assert!(ConfigKey::from_segments(Vec::<String>::new()).is_err());
    }

    #[test]
    fn values_are_read_and_set_at_the_key() {
        let k = ConfigKey::literal("load.concurrency");
        let mut t = toml::Table::new();
        k.set_in(&mut t, toml::Value::Integer(8)).unwrap();
        assert_eq!(k.get_in(&t), Some(&toml::Value::Integer(8)));
        assert_eq!(k.get_toml(&toml::Value::Table(t.clone())), Some(&toml::Value::Integer(8)));
        let json = serde_json::json!({"load": {"concurrency": 8}});
        assert_eq!(k.get_json(&json), Some(&serde_json::json!(8)));
        let err = ConfigKey::literal("load.concurrency.x").set_in(&mut t, 1.into()).unwrap_err();
        assert_eq!((err.key.as_str(), err.segment.as_str()), ("load.concurrency", "concurrency"));
    }

    #[test]
    fn engine_keys_are_decided_by_section() {
        let key = ConfigKey::literal;
        assert!(key("scheduler.max_num_seqs").is_engine_key());
        assert!(key("device.count").is_engine_key() && !key("device.count").is_served_key());
        assert!(key("engine.dtype").is_served_key());
        for other in ["engine", "sim.slowdown", "load.concurrency", "vllm.cache_dtype"] {
            assert!(!key(other).is_engine_key(), "{other}");
        }
    }

    #[test]
    fn serde_is_the_text_and_refuses_an_invalid_key() {
        let k = ConfigKey::literal("workload.max_tokens");
        assert_eq!(serde_json::to_string(&k).unwrap(), "\"workload.max_tokens\"");
        assert_eq!(serde_json::from_str::<ConfigKey>("\"workload.max_tokens\"").unwrap(), k);
        let err = serde_json::from_str::<ConfigKey>("\"a..b\"").unwrap_err();
        assert!(err.to_string().contains("not a dotted key"), "{err}");
    }
}
