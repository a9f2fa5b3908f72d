//! `workload.input_distribution` / `workload.output_distribution`: how synthetic token lengths
//! are drawn, and the bounds of each distribution's parameters (`LengthDist`). Sampling is
//! `bench::lengths`.

use serde::{Deserialize, Serialize};

use super::limits::MAX_REQUEST_TOKENS;
use super::source::Invalid;

/// How token lengths are drawn (`workload.input_distribution`, `workload.output_distribution`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum LengthDist {
    /// Every length is `value`.
    Fixed { value: u32 },
    /// Uniform over the integers `min..=max`.
    Uniform { min: u32, max: u32 },
    /// Normal with `mean` and `stddev`, rounded and clipped to `[min, max]`.
    Normal {
        mean: f64,
        stddev: f64,
        #[serde(default = "one")]
        min: u32,
        #[serde(default = "most")]
        max: u32,
    },
    /// Lognormal whose lengths have `mean` and `stddev` (before clipping), rounded and clipped
    /// to `[min, max]`.
    Lognormal {
        mean: f64,
        stddev: f64,
        #[serde(default = "one")]
        min: u32,
        #[serde(default = "most")]
        max: u32,
    },
    /// Drawn uniformly from the lengths listed in `file` (one positive integer a line; blank
    /// lines and `#` comments skipped), relative to the repository root.
    Empirical { file: String },
}

fn one() -> u32 {
    1
}

fn most() -> u32 {
    MAX_REQUEST_TOKENS
}

impl LengthDist {
    /// The first problem of the distribution's parameters, for `key` (`workload.input_distribution`).
    pub fn validate(&self) -> Result<(), Invalid> {
        let bounded = |field: &str, v: u32| -> Result<(), Invalid> {
            if v == 0 || v > MAX_REQUEST_TOKENS {
                return Err(Invalid(
                    field.to_string(),
                    format!("must be within 1..={MAX_REQUEST_TOKENS} tokens, got {v}"),
                ));
            }
            Ok(())
        };
        let range = |min: u32, max: u32| -> Result<(), Invalid> {
            bounded("min", min)?;
            bounded("max", max)?;
            if min > max {
                return Err(Invalid(
                    "min".into(),
                    format!("must not exceed max ({max}), got {min}"),
                ));
            }
            Ok(())
        };
        let moments = |mean: f64, stddev: f64| -> Result<(), Invalid> {
            if !(mean.is_finite() && mean >= 1.0 && mean <= MAX_REQUEST_TOKENS as f64) {
                return Err(Invalid(
                    "mean".into(),
                    format!("must be within [1, {MAX_REQUEST_TOKENS}] tokens, got {mean}"),
                ));
            }
            if !(stddev.is_finite() && stddev >= 0.0 && stddev <= MAX_REQUEST_TOKENS as f64) {
                return Err(Invalid(
                    "stddev".into(),
                    format!("must be within [0, {MAX_REQUEST_TOKENS}] tokens, got {stddev}"),
                ));
            }
            Ok(())
        };
        match self {
            LengthDist::Fixed { value } => bounded("value", *value),
            LengthDist::Uniform { min, max } => range(*min, *max),
            LengthDist::Normal { mean, stddev, min, max }
            | LengthDist::Lognormal { mean, stddev, min, max } => {
                moments(*mean, *stddev)?;
                range(*min, *max)
            }
            LengthDist::Empirical { file } if file.trim().is_empty() => {
                Err(Invalid("file".into(), "must name a file of lengths, one a line".into()))
            }
            LengthDist::Empirical { .. } => Ok(()),
        }
    }

    /// The file an empirical distribution reads (None for the others).
    pub fn file(&self) -> Option<&str> {
        match self {
            LengthDist::Empirical { file } => Some(file),
            _ => None,
        }
    }
}
