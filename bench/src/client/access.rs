//! What a target's access needs: the API key read from its environment variable (with the
//! diagnoses users need, never the value), extra headers and CA certificates (`Access`), and
//! the proxy variables of the environment.

use super::*;

/// Environment variables that route HTTP through a proxy.
pub(crate) const PROXY_VARS: [&str; 6] =
    ["HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"];

/// Why an API key from the environment cannot be used. The messages name the variable, never
/// its value.
#[derive(Debug, thiserror::Error)]
pub enum ApiKeyError {
    #[error(
        "the API key variable {var} (api_key_env of target `{target}`) is not set in the environment; \
         export it, e.g. `export {var}=...`"
    )]
    NotSet { var: String, target: String },
    #[error("the API key variable {var} does not hold valid UTF-8")]
    NotUnicode { var: String },
    #[error("the API key variable {var} is set but empty")]
    Empty { var: String },
    #[error(
        "the API key variable {var} holds a newline (often from `export {var}=$(cat keyfile)` or a \
         copied line end); remove it — servers reject such keys with 401"
    )]
    Newline { var: String },
    #[error(
        "the API key variable {var} has leading or trailing whitespace; remove it — servers reject such keys with 401"
    )]
    Whitespace { var: String },
}

/// Read an API key from the environment variable a config names, with the diagnoses users need.
pub fn read_api_key(var: &str, target: &str) -> Result<String, ApiKeyError> {
    let var_name = || var.to_string();
    match std::env::var(var) {
        Err(std::env::VarError::NotPresent) => {
            Err(ApiKeyError::NotSet { var: var_name(), target: target.to_string() })
        }
        Err(std::env::VarError::NotUnicode(_)) => Err(ApiKeyError::NotUnicode { var: var_name() }),
        Ok(v) if v.is_empty() => Err(ApiKeyError::Empty { var: var_name() }),
        Ok(v) if v.contains('\n') || v.contains('\r') => {
            Err(ApiKeyError::Newline { var: var_name() })
        }
        Ok(v) if v.trim() != v => Err(ApiKeyError::Whitespace { var: var_name() }),
        Ok(v) => Ok(v),
    }
}

/// What a target asks of the client besides its URL and API key: extra headers and CA
/// certificates to trust. No `Debug`: it holds secrets.
#[derive(Clone, Default)]
pub struct Access {
    /// Extra request headers, (name, value).
    pub headers: Vec<(String, String)>,
    /// The header values that are secrets (read from the environment): redacted like the key.
    pub secrets: Vec<String>,
    /// PEM CA certificates trusted besides the platform's.
    pub ca_bundle: Option<Vec<u8>>,
}

/// Why a target's access cannot be had: a header without a value it can send, or a CA bundle
/// that cannot be read. The messages name the header or file, never a value.
#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    #[error(transparent)]
    Header(#[from] infergate_model::config::HeaderValueError),
    #[error(transparent)]
    CaBundle(#[from] infergate_model::config::CaBundleError),
}

impl Access {
    /// The access of `target`: its headers with values read through `env`, and its CA bundle
    /// under `root`. Errors name the header or file, never a value.
    pub(crate) fn of_target(
        target: &Target,
        root: &std::path::Path,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Access, AccessError> {
        let headers = target.header_values(env)?;
        let secrets = headers
            .iter()
            .filter(|(name, _)| {
                matches!(
                    target.headers.get(name),
                    Some(infergate_model::config::HeaderValue::Env { .. })
                ) || infergate_model::config::is_credential_header(name)
            })
            .map(|(_, v)| v.clone())
            .collect();
        Ok(Access { headers, secrets, ca_bundle: target.read_ca_bundle(root)? })
    }
}

/// Proxy variables present in the environment (names only; values may hold credentials).
pub(crate) fn proxy_vars_present() -> Vec<&'static str> {
    PROXY_VARS
        .iter()
        .copied()
        .filter(|v| std::env::var_os(v).is_some_and(|x| !x.is_empty()))
        .collect()
}
