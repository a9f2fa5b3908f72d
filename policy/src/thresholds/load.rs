//! The load a threshold is bound to: "holds the SLO at concurrency 24". A capacity search
//! (`bench --capacity`) finds the highest load at which a profile's SLO still holds; the record
//! written from it states that load as a threshold the gate decides on a run measured there, and
//! only there. A run at another load is not the question the threshold asks: the gate lists it
//! as not applicable, with the command that measures the load.
//!
//! Written `concurrency 24` (a closed loop of 24 concurrent requests) or `rate 2.5 req/s` (an
//! open loop of 2.5 requests a second), in a record's `At load` column and in gate.toml's
//! `load`; `concurrency=24`, `rate=2.5` and `rate 2.5` read the same.

use std::fmt;
use std::str::FromStr;

use infergate_model::stats::sig_text;
pub use infergate_model::sweep::Dimension;
use serde::{Deserialize, Serialize};

/// A load of one dimension: a closed loop's concurrency or an open loop's request rate.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Load {
    pub dimension: Dimension,
    /// Concurrent requests (whole), or requests per second (positive).
    pub value: f64,
}

/// What a load is written as, for messages.
pub const LOAD_SHAPE: &str = "write `concurrency N` (a whole number of concurrent requests, at \
                              least 1) or `rate R req/s` (requests per second, above 0)";

/// A load that cannot be read, as written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    #[error("load `{0}` names no load dimension; {LOAD_SHAPE}")]
    Dimension(String),
    #[error("load `{0}`: the concurrency is a whole number of requests, at least 1; {LOAD_SHAPE}")]
    Concurrency(String),
    #[error("load `{0}`: the rate is a number of requests per second above 0; {LOAD_SHAPE}")]
    Rate(String),
}

impl FromStr for Load {
    type Err = LoadError;

    fn from_str(s: &str) -> Result<Load, LoadError> {
        let t = s.trim().trim_matches('`').trim();
        let (dim, rest) = match t.find(|c: char| c == '=' || c.is_whitespace()) {
            Some(at) => t.split_at(at),
            None => (t, ""),
        };
        let rest = rest.trim_start_matches(|c: char| c == '=' || c.is_whitespace());
        match dim.to_ascii_lowercase().as_str() {
            "concurrency" => {
                let v: f64 = rest.trim().parse().map_err(|_| LoadError::Concurrency(t.into()))?;
                if !(v >= 1.0 && v.fract() == 0.0 && v <= u32::MAX as f64) {
                    return Err(LoadError::Concurrency(t.into()));
                }
                Ok(Load { dimension: Dimension::Concurrency, value: v })
            }
            "rate" => {
                let number = rest.trim().strip_suffix("req/s").unwrap_or(rest).trim();
                let v: f64 = number.parse().map_err(|_| LoadError::Rate(t.into()))?;
                if !(v.is_finite() && v > 0.0) {
                    return Err(LoadError::Rate(t.into()));
                }
                Ok(Load { dimension: Dimension::Rate, value: v })
            }
            _ => Err(LoadError::Dimension(t.into())),
        }
    }
}

impl TryFrom<String> for Load {
    type Error = LoadError;
    fn try_from(s: String) -> Result<Load, LoadError> {
        s.parse()
    }
}

impl From<Load> for String {
    fn from(l: Load) -> String {
        l.to_string()
    }
}

impl fmt::Display for Load {
    /// `concurrency 24`, `rate 2.5 req/s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.dimension {
            Dimension::Concurrency => write!(f, "concurrency {}", sig_text(self.value)),
            Dimension::Rate => write!(f, "rate {} req/s", self.value),
        }
    }
}

impl Load {
    pub fn new(dimension: Dimension, value: f64) -> Load {
        Load { dimension, value }
    }

    /// The load of a run's resolved profile (`summary.config`, or a profile as JSON): a closed
    /// loop's concurrency, an open loop's rate; `None` for a trace replay or a profile without
    /// one.
    pub fn of_config(config: &serde_json::Value) -> Option<Load> {
        let load = config.get("load")?;
        match load.get("mode")?.as_str()? {
            "closed" => Some(Load::new(Dimension::Concurrency, load.get("concurrency")?.as_f64()?)),
            "open" => Some(Load::new(Dimension::Rate, load.get("rate")?.as_f64()?)),
            _ => None,
        }
    }

    /// The load a run measured (its resolved profile's).
    pub fn of_run(s: &infergate_model::Summary) -> Option<Load> {
        Load::of_config(&s.config.to_json())
    }

    /// The bench flag that measures this load: `--concurrency 24`, `--rate 2.5`.
    pub fn flag(&self) -> String {
        match self.dimension {
            Dimension::Concurrency => format!("--concurrency {}", sig_text(self.value)),
            Dimension::Rate => format!("--rate {}", self.value),
        }
    }

    /// The settings of a resolved profile the load stands for, which a load-bound threshold
    /// checks through its load rather than through its record's scenario.
    pub const SETTINGS: [&'static str; 3] = ["load.mode", "load.concurrency", "load.rate"];
}

/// The bench command that measures `profile` at `load` and gates the run.
pub fn gate_command(profile: &str, load: &Load) -> String {
    format!("{} bench --profile {profile} {} --gate", crate::text::tool(), load.flag())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_read_in_either_spelling_and_write_one() {
        for (text, shown) in [
            ("concurrency 24", "concurrency 24"),
            ("concurrency=24", "concurrency 24"),
            (" `Concurrency = 8` ", "concurrency 8"),
            ("rate 2.5 req/s", "rate 2.5 req/s"),
            ("rate=2.5", "rate 2.5 req/s"),
            ("rate 0.25", "rate 0.25 req/s"),
        ] {
            let l: Load = text.parse().unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(l.to_string(), shown);
            assert_eq!(l.to_string().parse::<Load>(), Ok(l), "{shown} reads back");
        }
        for (bad, why) in [
            ("concurrency 2.5", "whole number"),
            ("concurrency 0", "whole number"),
            ("concurrency", "whole number"),
            ("rate -1", "above 0"),
            ("rate inf", "above 0"),
            ("qps 4", "names no load dimension"),
            ("24", "names no load dimension"),
        ] {
            let e = bad.parse::<Load>().unwrap_err().to_string();
            assert!(e.contains(why) && e.contains("`concurrency N`"), "{bad}: {e}");
        }
        let l = Load::new(Dimension::Concurrency, 24.0);
        assert_eq!(l.flag(), "--concurrency 24");
        assert_eq!(Load::new(Dimension::Rate, 2.5).flag(), "--rate 2.5");
    }

    #[test]
    fn a_runs_load_is_its_profiles() {
        let closed = serde_json::json!({"load": {"mode": "closed", "concurrency": 24}});
        assert_eq!(Load::of_config(&closed), Some(Load::new(Dimension::Concurrency, 24.0)));
        let open = serde_json::json!({"load": {"mode": "open", "rate": 2.5, "concurrency": 1}});
        assert_eq!(Load::of_config(&open), Some(Load::new(Dimension::Rate, 2.5)));
        let trace = serde_json::json!({"load": {"mode": "trace", "concurrency": 4}});
        assert_eq!(Load::of_config(&trace), None);
    }
}
