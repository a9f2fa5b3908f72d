//! A target: the server a profile measures, its headers and credentials (from the
//! environment, never the file) and its CA bundle.

use super::*;

/// A server to measure.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Target {
    /// Base URL, with or without the `/v1` suffix.
    pub base_url: String,
    /// Model id; when absent, the first model `/v1/models` offers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Name of the environment variable holding the API key (never the key itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// The governed engine-parameter file this server was started from (recorded in summaries).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_config: Option<String>,
    /// Which output-length field to send.
    #[serde(default)]
    pub max_tokens_field: MaxTokensField,
    /// Prometheus endpoint; defaults to `<server root>/metrics`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Extra request headers (gateways need them): a literal value, or `{ env = "VAR" }` to take
    /// it from an environment variable. Credential-like headers only from the environment.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, HeaderValue>,
    /// A PEM file of CA certificates trusted for this target's `https://` (besides the
    /// platform's), relative to the repository root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_bundle: Option<String>,
}

/// The value of a `[targets.X.headers]` entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum HeaderValue {
    /// Written in the file: for values that are not secrets (a tenant, a route).
    Literal(String),
    /// Read from this environment variable when the run starts (`{ env = "VAR" }`): for
    /// secrets, which never go in a file.
    Env { env: String },
}

impl<'de> Deserialize<'de> for HeaderValue {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        match toml::Value::deserialize(d)? {
            toml::Value::String(s) => Ok(HeaderValue::Literal(s)),
            toml::Value::Table(t) if t.len() == 1 && t.get("env").is_some_and(|v| v.is_str()) => {
                let env = t["env"].as_str().unwrap_or_default().to_string();
                Ok(HeaderValue::Env { env })
            }
            _ => Err(D::Error::custom(
                "a header value is a string, or { env = \"VAR_NAME\" } to read it from an \
                 environment variable",
            )),
        }
    }
}

/// Headers the client sets itself, or that would break the connection: refused in `headers`.
pub(crate) const RESERVED_HEADERS: [&str; 7] =
    ["host", "content-length", "content-type", "transfer-encoding", "connection", "upgrade", "te"];

/// Whether a header name looks like it carries a credential (its value must come from the
/// environment).
pub fn is_credential_header(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    ["auth", "token", "key", "secret", "cookie", "password", "session", "signature"]
        .iter()
        .any(|w| n.contains(w))
}

/// Why a header name or value cannot be sent. A value is never echoed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    #[error("header `{}` is not a valid header name (letters, digits and !#$%&'*+-.^_`|~)", .0.escape_debug())]
    Name(String),
    #[error("header `{0}` is set by the client itself; headers may not set any of {list}", list = RESERVED_HEADERS.join(", "))]
    Reserved(String),
    #[error("is empty")]
    EmptyValue,
    #[error("has surrounding whitespace")]
    Whitespace,
    #[error(
        "holds a character a header cannot carry (a newline, a control or non-ASCII character)"
    )]
    Character,
}

/// A header name: an HTTP token (RFC 9110), not one the client manages.
pub(crate) fn validate_header_name(name: &str) -> Result<(), HeaderError> {
    let tchar = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    if name.is_empty() || !name.chars().all(tchar) {
        return Err(HeaderError::Name(name.to_string()));
    }
    if RESERVED_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
        return Err(HeaderError::Reserved(name.to_string()));
    }
    Ok(())
}

/// A header value as it goes on the wire: visible ASCII and spaces, no surrounding spaces (an
/// invisible character or a stray newline would corrupt the request). Never echoes the value.
pub(crate) fn validate_header_value(value: &str) -> Result<(), HeaderError> {
    if value.is_empty() {
        return Err(HeaderError::EmptyValue);
    }
    if value.trim() != value {
        return Err(HeaderError::Whitespace);
    }
    if !value.chars().all(|c| c == ' ' || c == '\t' || c.is_ascii_graphic()) {
        return Err(HeaderError::Character);
    }
    Ok(())
}

/// Why a target's header cannot be given its value. Names the header and the variable, never
/// a value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HeaderValueError {
    #[error("header `{name}`: the environment variable {var} is not set")]
    Unset { name: String, var: String },
    /// The value read from the variable `var` cannot be sent.
    #[error("header `{name}`: the value of ${var} {error}")]
    Env { name: String, var: String, error: HeaderError },
    /// The value written in the file cannot be sent.
    #[error("header `{name}`: the value {error}")]
    Literal { name: String, error: HeaderError },
}

/// Why a target's `ca_bundle` cannot be used; `rel` is the file as the config names it.
#[derive(Debug, thiserror::Error)]
pub enum CaBundleError {
    #[error("cannot read ca_bundle {rel}: {error}")]
    Read { rel: String, error: std::io::Error },
    #[error("ca_bundle {rel} holds no PEM certificate (-----BEGIN CERTIFICATE-----)")]
    NoCertificate { rel: String },
}

impl Target {
    /// The headers with their values, environment variables read through `env` (`std::env::var`
    /// in a run). Errors name the header and the variable, never a value.
    pub fn header_values(
        &self,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Vec<(String, String)>, HeaderValueError> {
        let mut out = Vec::with_capacity(self.headers.len());
        for (name, v) in &self.headers {
            let value = match v {
                HeaderValue::Literal(s) => s.clone(),
                HeaderValue::Env { env: var } => env(var).ok_or_else(|| {
                    HeaderValueError::Unset { name: name.clone(), var: var.clone() }
                })?,
            };
            validate_header_value(&value).map_err(|error| match v {
                HeaderValue::Env { env: var } => {
                    HeaderValueError::Env { name: name.clone(), var: var.clone(), error }
                }
                HeaderValue::Literal(_) => HeaderValueError::Literal { name: name.clone(), error },
            })?;
            out.push((name.clone(), value));
        }
        Ok(out)
    }

    /// Read the `ca_bundle` file under `root`: PEM text with at least one certificate.
    pub fn read_ca_bundle(&self, root: &Path) -> Result<Option<Vec<u8>>, CaBundleError> {
        let Some(rel) = &self.ca_bundle else { return Ok(None) };
        let path = root.join(rel);
        let bytes = std::fs::read(&path)
            .map_err(|error| CaBundleError::Read { rel: rel.clone(), error })?;
        if !String::from_utf8_lossy(&bytes).contains("-----BEGIN CERTIFICATE-----") {
            return Err(CaBundleError::NoCertificate { rel: rel.clone() });
        }
        Ok(Some(bytes))
    }

    /// A target at `base_url` with everything else at its default.
    pub fn at(base_url: impl Into<String>) -> Target {
        Target {
            base_url: base_url.into(),
            model: None,
            api_key_env: None,
            engine_config: None,
            max_tokens_field: MaxTokensField::Auto,
            metrics_url: None,
            description: None,
            headers: BTreeMap::new(),
            ca_bundle: None,
        }
    }

    pub fn with_model(mut self, model: impl Into<String>) -> Target {
        self.model = Some(model.into());
        self
    }
}
