//! The one engine kind: which inference engine a source, a record, a threshold's live series
//! or a command's `--engine` means.
//!
//! Its names are the ones files and command lines use (`vllm`, `sglang`, `trtllm`,
//! `llama-cpp`, `tgi`); [`EngineKind::metric_prefix`] is the prefix the engine's Prometheus
//! metrics carry (`llamacpp:`), for the engines whose metric names are known. A command that
//! supports only some engines (`engine args` renders vLLM and SGLang) restricts the values its
//! flag accepts; it does not define a kind of its own.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// An inference engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EngineKind {
    Vllm,
    Sglang,
    Trtllm,
    LlamaCpp,
    Tgi,
}

impl EngineKind {
    pub const ALL: [EngineKind; 5] = [
        EngineKind::Vllm,
        EngineKind::Sglang,
        EngineKind::Trtllm,
        EngineKind::LlamaCpp,
        EngineKind::Tgi,
    ];

    /// `vllm`, `sglang`, `trtllm`, `llama-cpp`, `tgi`.
    pub fn as_str(self) -> &'static str {
        match self {
            EngineKind::Vllm => "vllm",
            EngineKind::Sglang => "sglang",
            EngineKind::Trtllm => "trtllm",
            EngineKind::LlamaCpp => "llama-cpp",
            EngineKind::Tgi => "tgi",
        }
    }

    /// The prefix of the engine's Prometheus metric names (`vllm`, `sglang`, `llamacpp`), for
    /// the engines whose names infergate reads (`None` for the others).
    pub fn metric_prefix(self) -> Option<&'static str> {
        match self {
            EngineKind::Vllm => Some("vllm"),
            EngineKind::Sglang => Some("sglang"),
            EngineKind::LlamaCpp => Some("llamacpp"),
            EngineKind::Trtllm | EngineKind::Tgi => None,
        }
    }

    /// The engines whose metric names are known, in [`EngineKind::ALL`]'s order.
    pub fn with_metrics() -> impl Iterator<Item = EngineKind> {
        EngineKind::ALL.into_iter().filter(|e| e.metric_prefix().is_some())
    }

    /// The names, for messages: `vllm, sglang, trtllm, llama-cpp, tgi`.
    pub fn names(kinds: &[EngineKind]) -> String {
        kinds.iter().map(|k| k.as_str()).collect::<Vec<_>>().join(", ")
    }
}

impl fmt::Display for EngineKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An engine name that is none of [`EngineKind::ALL`]'s.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownEngine(pub String);

impl fmt::Display for UnknownEngine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown engine `{}`: one of {}", self.0, EngineKind::names(&EngineKind::ALL))
    }
}

impl std::error::Error for UnknownEngine {}

impl FromStr for EngineKind {
    type Err = UnknownEngine;

    /// The name files and command lines use ([`EngineKind::as_str`]).
    fn from_str(s: &str) -> Result<EngineKind, UnknownEngine> {
        EngineKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| UnknownEngine(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_reads_back_as_its_kind_and_the_file_spelling_is_the_same() {
        for k in EngineKind::ALL {
            assert_eq!(k.as_str().parse::<EngineKind>(), Ok(k));
            let json = serde_json::to_string(&k).unwrap();
            assert_eq!(json, format!("\"{}\"", k.as_str()));
        }
        let e = "llamacpp".parse::<EngineKind>().unwrap_err().to_string();
        assert_eq!(e, "unknown engine `llamacpp`: one of vllm, sglang, trtllm, llama-cpp, tgi");
        let known: Vec<_> = EngineKind::with_metrics().collect();
        assert_eq!(known, [EngineKind::Vllm, EngineKind::Sglang, EngineKind::LlamaCpp]);
    }
}
