//! A configuration file in memory, with errors that name the file, the line and what is valid.

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use toml::de::{DeTable, DeValue};

/// A value a config check refuses: its dotted key (`load.concurrency`) and why. The caller
/// locates it in its file (a [`ConfigError`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}: {1}")]
pub struct Invalid(pub String, pub String);

/// A configuration problem, located in its file when the location is known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub path: PathBuf,
    pub line: Option<usize>,
    pub col: Option<usize>,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(col) = self.col {
                write!(f, ":{col}")?;
            }
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ConfigError {}

/// The text of a TOML configuration file and its path.
#[derive(Debug, Clone)]
pub struct Source {
    pub path: PathBuf,
    pub text: String,
}

impl Source {
    pub fn read(path: &Path) -> Result<Source, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            path: path.to_path_buf(),
            line: None,
            col: None,
            message: format!("cannot read the file: {e}"),
        })?;
        Ok(Source { path: path.to_path_buf(), text })
    }

    /// Read `rel` under `root`, naming it by `rel` in messages (as users wrote it).
    pub fn read_in(root: &Path, rel: &Path) -> Result<Source, ConfigError> {
        let mut s = Source::read(&root.join(rel))?;
        s.path = rel.to_path_buf();
        Ok(s)
    }

    pub fn new(path: impl Into<PathBuf>, text: impl Into<String>) -> Source {
        Source { path: path.into(), text: text.into() }
    }

    /// 1-based line and column of a byte offset.
    pub fn line_col(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let before = &self.text[..offset];
        let line = before.matches('\n').count() + 1;
        let col = before.rfind('\n').map_or(offset, |nl| offset - nl - 1) + 1;
        (line, col)
    }

    pub fn error(&self, span: Option<Range<usize>>, message: impl Into<String>) -> ConfigError {
        let (line, col) = match span {
            Some(s) => {
                let (l, c) = self.line_col(s.start);
                (Some(l), Some(c))
            }
            None => (None, None),
        };
        ConfigError { path: self.path.clone(), line, col, message: message.into() }
    }

    /// An error about the value at a key path (`["profile", "default", "load", "rate"]`),
    /// located at that key when it is present in the file.
    pub fn error_at(&self, key_path: &[&str], message: impl Into<String>) -> ConfigError {
        self.error(self.locate(key_path), message)
    }

    /// Parse the whole file into `T`. Syntax errors, unknown keys, wrong types and invalid enum
    /// values are reported at their line with the message serde gives (which lists the valid
    /// choices).
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T, ConfigError> {
        self.refuse_literal_secrets()?;
        toml::from_str(&self.text).map_err(|e| self.toml_error(&e))
    }

    pub fn toml_error(&self, e: &toml::de::Error) -> ConfigError {
        self.error(e.span(), e.message().trim().to_string())
    }

    /// Span of the key at `key_path` (the key itself, so the message points at its line).
    pub fn locate(&self, key_path: &[&str]) -> Option<Range<usize>> {
        let doc = DeTable::parse(&self.text).ok()?;
        let mut table: &DeTable<'_> = doc.get_ref();
        let mut span = None;
        for (i, key) in key_path.iter().enumerate() {
            let (k, v) = table.get_key_value(*key)?;
            span = Some(k.span());
            if i + 1 == key_path.len() {
                break;
            }
            match v.get_ref() {
                DeValue::Table(t) => table = t,
                _ => return span,
            }
        }
        span
    }

    /// A literal API key in a config file is refused: keys come only from the environment.
    /// The value is never echoed.
    fn refuse_literal_secrets(&self) -> Result<(), ConfigError> {
        let Ok(doc) = DeTable::parse(&self.text) else {
            return Ok(()); // the real parse reports the syntax error
        };
        fn walk(t: &DeTable<'_>, found: &mut Option<(Range<usize>, String)>) {
            for (k, v) in t.iter() {
                if found.is_some() {
                    return;
                }
                let name = k.get_ref().as_ref();
                let lower = name.to_ascii_lowercase();
                let secret_key = matches!(
                    lower.as_str(),
                    "api_key"
                        | "apikey"
                        | "key"
                        | "token"
                        | "api_token"
                        | "authorization"
                        | "bearer"
                        | "secret"
                );
                let secret_value = v.get_ref().as_str().is_some_and(|s| {
                    s.starts_with("sk-") || s.to_ascii_lowercase().starts_with("bearer ")
                });
                // `{ env = "VAR" }` (a header read from the environment) is not a literal.
                let literal = !matches!(v.get_ref(), DeValue::Table(_));
                if (secret_key && literal) || secret_value {
                    *found = Some((k.span(), name.to_string()));
                    return;
                }
                if let DeValue::Table(inner) = v.get_ref() {
                    walk(inner, found);
                }
            }
        }
        let mut found = None;
        walk(doc.get_ref(), &mut found);
        match found {
            Some((span, key)) => Err(self.error(
                Some(span),
                format!(
                    "`{key}` looks like a literal credential; config files never hold API keys. \
                     Export the key in an environment variable and name that variable with \
                     `api_key_env = \"VAR_NAME\"`"
                ),
            )),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locates_nested_keys() {
        let src = Source::new("x.toml", "a = 1\n[p.q]\nr = 2\n\n[s]\nt = 'u'\n");
        assert_eq!(src.locate(&["a"]).map(|s| src.line_col(s.start)), Some((1, 1)));
        assert_eq!(src.locate(&["p", "q", "r"]).map(|s| src.line_col(s.start)), Some((3, 1)));
        assert_eq!(src.locate(&["s", "t"]).map(|s| src.line_col(s.start)), Some((6, 1)));
        assert_eq!(src.locate(&["s", "nope"]), None);
    }

    #[test]
    fn literal_keys_are_refused_without_echo() {
        let src =
            Source::new("b.toml", "[targets.x]\nbase_url = 'http://h'\napi_key = 'sk-secret123'\n");
        let err = src.parse::<toml::Table>().unwrap_err();
        assert_eq!(err.line, Some(3));
        assert!(!err.to_string().contains("secret123"), "{err}");
        let src = Source::new("b.toml", "[targets.x]\nheader = 'Bearer abc'\n");
        let err = src.parse::<toml::Table>().unwrap_err();
        assert_eq!(err.line, Some(2));
        assert!(!err.to_string().contains("abc"), "{err}");
    }
}
