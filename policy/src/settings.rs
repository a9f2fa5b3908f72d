//! `configs/xtask.toml`: settings of `cargo xtask` itself (not inference parameters).
//!
//! ```toml
//! [adr]
//! # Governed besides configs/engine*.toml (always governed).
//! governed = ["configs/serving.toml", "configs/lora-*.toml"]
//!
//! [dataset]
//! # PII removed from refreshed requests besides e-mail addresses (regular expressions).
//! pii_patterns = ['\b\d{3}-\d{2}-\d{4}\b']
//! ```
//!
//! Sources anywhere in the repository, in the formats teams deploy with, are governed as well
//! (docs/governed-sources.md):
//!
//! ```toml
//! [[adr.source]]
//! path = "deploy/helm/values.yaml"
//! engine = "vllm"
//! at = "servingEngineSpec.modelSpec[0].vllmConfig"
//! ```
//!
//! A missing file means the defaults; unknown keys are refused with their line.
//!
//! Every file the bench configuration (`configs/bench.toml`) names as an `engine_config` is
//! governed as well ([`engine_config_refs`]).

use infergate_model::config::{ConfigError, Source};
use infergate_model::sources::SourceDecl;
use serde::Deserialize;

/// Where the settings live, relative to the repository root.
pub const SETTINGS_FILE: &str = "configs/xtask.toml";

/// Governed whatever the settings say: the engine parameter files.
pub const ALWAYS_GOVERNED: &str = "configs/engine*.toml";

/// The contents of `configs/xtask.toml`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    #[serde(default)]
    pub adr: AdrSettings,
    #[serde(default)]
    pub dataset: DatasetSettings,
}

/// `[dataset]`: `cargo xtask dataset refresh`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatasetSettings {
    /// PII patterns (regular expressions, `regex` crate syntax) removed from refreshed
    /// requests besides e-mail addresses, which always are.
    #[serde(default)]
    pub pii_patterns: Vec<String>,
}

/// `[adr]`: decision records.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdrSettings {
    /// Files governed by decision records besides `configs/engine*.toml`: paths relative to the
    /// repository root, under `configs/`, ending in `.toml`; `*` matches any characters of one
    /// path segment.
    #[serde(default)]
    pub governed: Vec<String>,
    /// `[[adr.source]]`: engine parameters where the team deploys them (any file of the
    /// repository, read in the engine's spellings into the canonical keys).
    #[serde(default, rename = "source")]
    pub sources: Vec<SourceDecl>,
}

impl Settings {
    /// Parse and validate the settings text (`source.path` names the file in errors).
    pub fn parse(source: &Source) -> Result<Settings, ConfigError> {
        let s: Settings = toml::from_str(&source.text).map_err(|e| source.toml_error(&e))?;
        for pattern in &s.adr.governed {
            validate_pattern(pattern)
                .map_err(|e| source.error_at(&["adr", "governed"], e.to_string()))?;
        }
        for (i, decl) in s.adr.sources.iter().enumerate() {
            validate_source(decl).map_err(|why| {
                let e = source.error_at(&["adr"], why);
                let line = nth_table_line(&source.text, "adr.source", i).or(e.line);
                ConfigError { line, col: None, ..e }
            })?;
        }
        Ok(s)
    }

    /// The declared sources whose path pattern matches `path`.
    pub fn sources_of<'s>(&'s self, path: &str) -> impl Iterator<Item = &'s SourceDecl> + 's {
        let path = path.to_string();
        self.adr.sources.iter().filter(move |d| matches(&d.path, &path))
    }

    /// The governed patterns: [`ALWAYS_GOVERNED`] and the configured ones.
    pub fn governed_patterns(&self) -> Vec<String> {
        let mut out = vec![ALWAYS_GOVERNED.to_string()];
        for p in &self.adr.governed {
            if !out.contains(p) {
                out.push(p.clone());
            }
        }
        out
    }
}

/// A governed pattern is a path under `configs/` ending in `.toml` (decision lines can only
/// name such files), made of letters, digits, `_-./` and `*`, without empty, `.` or `..`
/// segments.
pub fn validate_pattern(p: &str) -> Result<(), BadPattern> {
    let ok = p.starts_with("configs/")
        && p.ends_with(".toml")
        && p.split('/').all(|seg| !seg.is_empty() && seg != "." && seg != "..")
        && p.chars().all(|c| c.is_ascii_alphanumeric() || "_-./*".contains(c));
    if ok { Ok(()) } else { Err(BadPattern(p.to_string())) }
}

/// Why a `[[adr.source]]` cannot be read, if it cannot: its path must be a file of the
/// repository (letters, digits, `_-./`, `*` within a segment), and `at` and `args` exclude
/// each other and must be key paths.
fn validate_source(d: &SourceDecl) -> Result<(), String> {
    let path_ok = !d.path.is_empty()
        && d.path.split('/').all(|seg| !seg.is_empty() && seg != "." && seg != "..")
        && d.path.chars().all(|c| c.is_ascii_alphanumeric() || "_-./*".contains(c));
    if !path_ok {
        return Err(format!(
            "[[adr.source]] path `{}` is not a file of the repository: a path from its root of \
             letters, digits, `_-./` and `*` wildcards within a segment",
            d.path
        ));
    }
    if d.at.is_some() && d.args.is_some() {
        return Err(format!(
            "[[adr.source]] `{}` has both `at` (where the parameters sit) and `args` (where a \
             command line sits); give one",
            d.path
        ));
    }
    for (name, p) in [("at", &d.at), ("args", &d.args)] {
        if let Some(p) = p {
            infergate_model::sources::path::KeyPath::parse(p).map_err(|e| {
                format!("[[adr.source]] `{}`: `{name} = \"{p}\"` is not a key path: {e}", d.path)
            })?;
        }
    }
    Ok(())
}

/// The 1-based line of the `index`-th `[[name]]` header of a TOML text.
fn nth_table_line(text: &str, name: &str, index: usize) -> Option<usize> {
    let header = format!("[[{name}]]");
    text.lines()
        .enumerate()
        .filter(|(_, l)| l.split('#').next().unwrap_or("").trim().replace(' ', "") == header)
        .nth(index)
        .map(|(i, _)| i + 1)
}

/// A governed pattern that is not a path under `configs/` ending in `.toml`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "governed file `{0}` is not a path under configs/ ending in .toml (letters, digits, \
     `_-./` and `*` wildcards); decision records can only name such files"
)]
pub struct BadPattern(pub String);

/// Whether `path` (relative to the repository root, `/`-separated) matches `pattern`: segment by
/// segment, `*` matching any run of characters within a segment.
pub fn matches(pattern: &str, path: &str) -> bool {
    let p: Vec<&str> = pattern.split('/').collect();
    let s: Vec<&str> = path.split('/').collect();
    p.len() == s.len() && p.iter().zip(&s).all(|(p, s)| glob_segment(p.as_bytes(), s.as_bytes()))
}

fn glob_segment(p: &[u8], s: &[u8]) -> bool {
    match p.split_first() {
        None => s.is_empty(),
        Some((b'*', rest)) => (0..=s.len()).any(|i| glob_segment(rest, &s[i..])),
        Some((c, rest)) => s.first() == Some(c) && glob_segment(rest, &s[1..]),
    }
}

/// The bench configuration, whose `engine_config` keys name engine parameter files.
pub const BENCH_FILE: &str = "configs/bench.toml";

/// An `engine_config = "..."` of the bench configuration (a profile's `sim` section, a target,
/// wherever it is written): the file a run takes its engine parameters from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EngineConfigRef {
    /// The path as written, with a leading `./` removed.
    pub path: String,
    /// Dotted key of the setting (`profile.tuned.sim.engine_config`).
    pub key: String,
    /// 1-based line in the bench configuration.
    pub line: usize,
}

impl EngineConfigRef {
    /// Why a decision record cannot govern this file, if it cannot: it must be a path under
    /// `configs/` ending in `.toml`.
    pub fn ungovernable(&self) -> Option<String> {
        let literal = !self.path.contains('*');
        if literal && validate_pattern(&self.path).is_ok() {
            return None;
        }
        Some(format!(
            "`{}` = \"{}\" names a file decision records cannot govern; an engine config is a \
             path under configs/ ending in .toml (letters, digits, `_-./`), so that `adr check` \
             governs it",
            self.key, self.path
        ))
    }
}

/// Every `engine_config` string of the bench configuration, in file order. Each is governed
/// (`adr check` adds it to the governed files): a profile cannot take its engine parameters
/// from a file that escapes the records. Invalid TOML is an error naming the line.
pub fn engine_config_refs(source: &Source) -> Result<Vec<EngineConfigRef>, ConfigError> {
    let table: toml::Table = toml::from_str(&source.text).map_err(|e| source.toml_error(&e))?;
    let mut out = Vec::new();
    fn walk(t: &toml::Table, at: &mut Vec<String>, out: &mut Vec<(Vec<String>, String)>) {
        for (k, v) in t {
            at.push(k.clone());
            match v {
                toml::Value::String(s) if k == "engine_config" => out.push((at.clone(), s.clone())),
                toml::Value::Table(sub) => walk(sub, at, out),
                _ => {}
            }
            at.pop();
        }
    }
    let mut found = Vec::new();
    walk(&table, &mut Vec::new(), &mut found);
    for (path, value) in found {
        let keys: Vec<&str> = path.iter().map(String::as_str).collect();
        let line = source.locate(&keys).map_or(1, |span| source.line_col(span.start).0);
        let mut p = value.as_str();
        while let Some(rest) = p.strip_prefix("./") {
            p = rest;
        }
        out.push(EngineConfigRef { path: p.to_string(), key: path.join("."), line });
    }
    out.sort_by_key(|r| r.line);
    Ok(out)
}

/// Whether `path` is governed by any of `patterns`.
pub fn is_governed(patterns: &[String], path: &str) -> bool {
    patterns.iter().any(|p| matches(p, path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_within_one_segment() {
        assert!(matches(ALWAYS_GOVERNED, "configs/engine.toml"));
        assert!(matches(ALWAYS_GOVERNED, "configs/engine-tuned.toml"));
        assert!(!matches(ALWAYS_GOVERNED, "configs/bench.toml"));
        assert!(!matches(ALWAYS_GOVERNED, "configs/sub/engine.toml"));
        assert!(!matches(ALWAYS_GOVERNED, "configs/engine.toml.bak"));
        assert!(!matches(ALWAYS_GOVERNED, "other/configs/engine.toml"));
        assert!(matches("configs/*/lora-*.toml", "configs/a/lora-x.toml"));
        assert!(matches("configs/serving.toml", "configs/serving.toml"));
        assert!(!matches("configs/serving.toml", "configs/serving2.toml"));
    }

    #[test]
    fn every_engine_config_of_the_bench_configuration_is_found_with_its_line() {
        let text = "[profile.a.sim]\nengine_config = \"configs/engine.toml\"\n\n\
                    [profile.b.sim]\nengine_config = \"./configs/llm.toml\"\n\n\
                    [targets.t]\nengine_config = \"/etc/llm.toml\"\n";
        let refs = engine_config_refs(&Source::new(BENCH_FILE, text)).unwrap();
        let got: Vec<(&str, &str, usize)> =
            refs.iter().map(|r| (r.path.as_str(), r.key.as_str(), r.line)).collect();
        assert_eq!(
            got,
            [
                ("configs/engine.toml", "profile.a.sim.engine_config", 2),
                ("configs/llm.toml", "profile.b.sim.engine_config", 5),
                ("/etc/llm.toml", "targets.t.engine_config", 8),
            ]
        );
        assert_eq!(refs[1].ungovernable(), None);
        let why = refs[2].ungovernable().unwrap();
        assert!(
            why.starts_with("`targets.t.engine_config` = \"/etc/llm.toml\" names a file"),
            "{why}"
        );
        let e = engine_config_refs(&Source::new(BENCH_FILE, "[a\n")).unwrap_err();
        assert_eq!(e.line, Some(1), "{e}");
    }

    #[test]
    fn settings_refuse_unknown_keys_and_bad_patterns_at_their_line() {
        let s = Settings::parse(&Source::new(
            SETTINGS_FILE,
            "[adr]\ngoverned = [\"configs/serving.toml\", \"configs/engine*.toml\"]\n",
        ))
        .unwrap();
        assert_eq!(
            s.governed_patterns(),
            vec!["configs/engine*.toml".to_string(), "configs/serving.toml".to_string()]
        );
        assert_eq!(Settings::parse(&Source::new(SETTINGS_FILE, "")).unwrap(), Settings::default());
        let e = Settings::parse(&Source::new(SETTINGS_FILE, "[adr]\ngovern = []\n")).unwrap_err();
        assert_eq!(e.line, Some(2), "{e}");
        assert!(e.message.contains("unknown field `govern`"), "{e}");
        assert!(e.message.contains("governed"), "{e}");
        let e =
            Settings::parse(&Source::new(SETTINGS_FILE, "\n[adr]\ngoverned = [\"bench.toml\"]\n"))
                .unwrap_err();
        assert_eq!(e.line, Some(3), "{e}");
        assert!(e.to_string().starts_with("configs/xtask.toml:3:"), "{e}");
        for bad in ["configs/../x.toml", "configs/x.yaml", "configs//x.toml", "configs/x y.toml"] {
            assert!(validate_pattern(bad).is_err(), "{bad}");
        }
    }
}
