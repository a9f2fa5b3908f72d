//! The configuration resolved: the file loaded and its targets checked, a profile's `inherits`
//! chain and the command line's overrides merged into a [`ResolvedProfile`].

use super::*;
use crate::config::key::ConfigKey;

/// A profile resolved from its file and the command line, ready to run.
#[derive(Clone, Debug)]
pub struct ResolvedProfile {
    pub name: String,
    pub profile: Profile,
    /// The target, when the profile names one (`None` = embedded simulator).
    pub target: Option<(String, Target)>,
    /// The config file it came from (None: built-in defaults only).
    pub file: Option<PathBuf>,
}

/// One `key=value` override from the command line (`load.concurrency=64`); a trial set's
/// request ([`crate::trials::TrialRequest`]) keeps them as they applied.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Override {
    pub key: ConfigKey,
    pub value: toml::Value,
    /// How the user wrote it, for error messages.
    pub origin: String,
}

/// Why a command-line override is not `key=value`; `given` is the override as written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OverrideError {
    #[error("`{given}`: expected KEY=VALUE, e.g. load.concurrency=64")]
    NoValue { given: String },
    #[error("`{given}`: `{key}` is not a dotted key like load.concurrency")]
    Key { given: String, key: String },
}

impl Override {
    /// Parse `key=value`; the value is TOML (`64`, `true`, `[128, 256]`, `"text"`), and a bare word
    /// that is not valid TOML is taken as a string.
    pub fn parse(s: &str) -> Result<Override, OverrideError> {
        let (key, raw) =
            s.split_once('=').ok_or_else(|| OverrideError::NoValue { given: s.to_string() })?;
        let key = key.trim();
        let key = ConfigKey::parse(key)
            .map_err(|_| OverrideError::Key { given: s.to_string(), key: key.to_string() })?;
        let raw = raw.trim();
        let value = toml::from_str::<toml::Table>(&format!("v = {raw}"))
            .ok()
            .and_then(|mut t| t.remove("v"))
            .unwrap_or_else(|| toml::Value::String(raw.to_string()));
        Ok(Override { key, value, origin: format!("--set {s}") })
    }

    pub fn new(
        key: ConfigKey,
        value: impl Into<toml::Value>,
        origin: impl Into<String>,
    ) -> Override {
        Override { key, value: value.into(), origin: origin.into() }
    }
}

/// A target name the configuration file does not define; `known`: the targets it does.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("no target `{name}` in {}; defined targets: {}", file.display(), listed(known))]
pub struct UnknownTarget {
    pub name: String,
    pub file: PathBuf,
    pub known: Vec<String>,
}

/// Names joined with commas, `(none)` for none.
pub(super) fn listed(names: &[String]) -> String {
    if names.is_empty() { "(none)".to_string() } else { names.join(", ") }
}

/// The bench configuration file with its source text (for located errors).
#[derive(Clone, Debug)]
pub struct BenchConfig {
    pub source: Source,
    pub file: BenchFile,
    raw: toml::Table,
}

impl BenchConfig {
    pub fn load(path: &Path) -> Result<BenchConfig, ConfigError> {
        Self::from_source(Source::read(path)?)
    }

    /// Load `rel` under `root`; messages name the file as `rel`.
    pub fn load_in(root: &Path, rel: &Path) -> Result<BenchConfig, ConfigError> {
        let cfg = Self::from_source(Source::read_in(root, rel)?)?;
        cfg.validate_files(root)?;
        Ok(cfg)
    }

    pub fn from_source(source: Source) -> Result<BenchConfig, ConfigError> {
        let file: BenchFile = source.parse()?;
        let raw: toml::Table = toml::from_str(&source.text).map_err(|e| source.toml_error(&e))?;
        let cfg = BenchConfig { source, file, raw };
        cfg.validate_targets()?;
        Ok(cfg)
    }

    /// Built-in defaults only (no file).
    pub fn builtin() -> BenchConfig {
        BenchConfig {
            source: Source::new("<built-in defaults>", ""),
            file: BenchFile::default(),
            raw: toml::Table::new(),
        }
    }

    pub fn profile_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.file.profile.keys().cloned().collect();
        if !names.iter().any(|n| n == "default") {
            names.insert(0, "default".into());
        }
        names
    }

    pub fn target(&self, name: &str) -> Result<&Target, UnknownTarget> {
        self.file.targets.get(name).ok_or_else(|| UnknownTarget {
            name: name.to_string(),
            file: self.source.path.clone(),
            known: self.file.targets.keys().cloned().collect(),
        })
    }

    fn validate_targets(&self) -> Result<(), ConfigError> {
        for (name, t) in &self.file.targets {
            let at = |key: &str, msg: String| self.source.error_at(&["targets", name, key], msg);
            if !(t.base_url.starts_with("http://") || t.base_url.starts_with("https://")) {
                return Err(at(
                    "base_url",
                    format!("base_url must start with http:// or https://, got `{}`", t.base_url),
                ));
            }
            if let Some(var) = &t.api_key_env {
                validate_env_name(var).map_err(|m| at("api_key_env", m.to_string()))?;
            }
            self.validate_headers(name, t)?;
            if let Some(ca) = &t.ca_bundle {
                if ca.trim().is_empty() {
                    return Err(at("ca_bundle", "ca_bundle must name a PEM file".into()));
                }
            }
        }
        Ok(())
    }

    fn validate_headers(&self, target: &str, t: &Target) -> Result<(), ConfigError> {
        for (name, value) in &t.headers {
            let at = |m: String| self.source.error_at(&["targets", target, "headers", name], m);
            validate_header_name(name).map_err(|e| at(e.to_string()))?;
            if t.api_key_env.is_some() && name.eq_ignore_ascii_case("authorization") {
                return Err(at(format!(
                    "header `{name}` conflicts with api_key_env, which sends `Authorization: \
                     Bearer <key>`; keep one of them"
                )));
            }
            match value {
                HeaderValue::Env { env } => {
                    validate_env_name(env).map_err(|_| {
                        at(format!(
                            "header `{name}`: env must be the NAME of an environment variable \
                             (letters, digits, underscores), not the value itself"
                        ))
                    })?;
                }
                HeaderValue::Literal(_) if is_credential_header(name) => {
                    return Err(at(format!(
                        "header `{name}` looks like a credential; config files never hold \
                         secrets. Export it in an environment variable and write \
                         `\"{name}\" = {{ env = \"VAR_NAME\" }}`"
                    )));
                }
                HeaderValue::Literal(v) => {
                    validate_header_value(v).map_err(|m| at(format!("header `{name}`: {m}")))?;
                }
            }
        }
        Ok(())
    }

    /// Check the files targets name under `root` (`ca_bundle`), at their lines.
    pub(crate) fn validate_files(&self, root: &Path) -> Result<(), ConfigError> {
        for (name, t) in &self.file.targets {
            t.read_ca_bundle(root).map_err(|e| {
                self.source.error_at(&["targets", name, "ca_bundle"], e.to_string())
            })?;
        }
        Ok(())
    }

    /// Chain of profile names from the most general (`default`) to `name`.
    fn chain(&self, name: &str) -> Result<Vec<String>, ConfigError> {
        let mut chain = vec![name.to_string()];
        let mut cur = name.to_string();
        loop {
            let parent = match self.file.profile.get(&cur) {
                Some(p) => p.inherits.clone(),
                None if cur == "default" => None,
                None => {
                    return Err(self.source.error(
                        None,
                        format!(
                            "no profile `{cur}`; defined profiles: {}",
                            self.profile_names().join(", ")
                        ),
                    ));
                }
            };
            let parent = match parent {
                Some(p) => p,
                None if cur != "default" => "default".to_string(),
                None => break,
            };
            if chain.contains(&parent) {
                return Err(self.source.error_at(
                    &["profile", &cur, "inherits"],
                    format!("profile inheritance loops: {} -> {parent}", chain.join(" -> ")),
                ));
            }
            chain.push(parent.clone());
            cur = parent;
        }
        chain.reverse();
        Ok(chain)
    }

    /// Resolve a profile: built-in defaults, `[profile.default]`, the `inherits` chain, then the
    /// overrides in order.
    pub fn resolve(
        &self,
        name: &str,
        overrides: &[Override],
    ) -> Result<ResolvedProfile, ConfigError> {
        let chain = self.chain(name)?;
        let mut merged = toml::Table::new();
        let profiles = self.raw.get("profile").and_then(|p| p.as_table());
        for layer in &chain {
            if let Some(t) = profiles.and_then(|p| p.get(layer)).and_then(|v| v.as_table()) {
                deep_merge(&mut merged, t);
            }
        }
        merged.remove("inherits");
        for o in overrides {
            o.key
                .set_in(&mut merged, o.value.clone())
                .map_err(|e| self.cli_error(o, e.to_string()))?;
            // Validate each override on its own, so the message names the flag that is wrong.
            let mut probe = toml::Table::new();
            o.key
                .set_in(&mut probe, o.value.clone())
                .map_err(|e| self.cli_error(o, e.to_string()))?;
            if let Err(e) = probe.clone().try_into::<Profile>() {
                return Err(self.cli_error(o, e.message().trim().to_string()));
            }
        }
        let profile: Profile =
            toml::Value::Table(merged).try_into().map_err(|e: toml::de::Error| {
                self.source.error(None, e.message().trim().to_string())
            })?;
        // The located check: which layer set the offending key?
        if let Err(Invalid(key, msg)) = validate_profile(&profile) {
            if let Some(o) = overrides.iter().rev().find(|o| {
                key.starts_with(o.key.as_str()) || o.key.as_str().starts_with(key.as_str())
            }) {
                return Err(self.cli_error(o, msg));
            }
            // A key the checks name that is no dotted key names no line.
            let parsed = ConfigKey::parse(&key).ok();
            for (layer, k) in chain.iter().rev().filter_map(|l| Some((l, parsed.as_ref()?))) {
                let mut path = vec!["profile", layer.as_str()];
                path.extend(k.path());
                if self.source.locate(&path).is_some() {
                    return Err(self.source.error_at(&path, format!("{key}: {msg}")));
                }
            }
            return Err(self.source.error(None, format!("profile `{name}`: {key}: {msg}")));
        }
        let target = match &profile.target {
            Some(t) => {
                let target = self.target(t).map_err(|e| {
                    let mut path = vec!["profile", name, "target"];
                    if self.source.locate(&path).is_none() {
                        path = vec!["profile", "default", "target"];
                    }
                    self.source.error_at(&path, e.to_string())
                })?;
                Some((t.clone(), target.clone()))
            }
            None => None,
        };
        let file = (!self.source.text.is_empty() || self.source.path.exists())
            .then(|| self.source.path.clone());
        Ok(ResolvedProfile { name: name.to_string(), profile, target, file })
    }

    fn cli_error(&self, o: &Override, message: String) -> ConfigError {
        ConfigError {
            path: PathBuf::from("<command line>"),
            line: None,
            col: None,
            message: format!("{}: {message}", o.origin),
        }
    }
}

/// Merge `over` into `base`: tables merge key by key, everything else is replaced.
pub(crate) fn deep_merge(base: &mut toml::Table, over: &toml::Table) {
    for (k, v) in over {
        match (base.get_mut(k), v) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => deep_merge(b, o),
            _ => {
                base.insert(k.clone(), v.clone());
            }
        }
    }
}
