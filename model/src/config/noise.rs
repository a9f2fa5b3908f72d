//! `[profile.X.sim.noise]`: the engine simulator's seeded noise model, so the statistics of
//! repeated trials (`bench::stats`) can be checked against a known truth.
//!
//! ```toml
//! [profile.noisy.sim.noise]
//! step_cv = 0.10            # each step's time x a lognormal factor of mean 1 and this CV
//! run_cv = 0.05             # the whole run x one lognormal factor of mean 1 and this CV
//! stall_probability = 0.001 # per step: a stall (a noisy neighbour) is added to the step
//! stall_ms = 20             # how long a stall lasts
//! seed = 13                 # the same seed draws the same noise
//! ```
//!
//! Off by default (every CV and the stall probability 0). The noise describes the machine, not
//! the inference parameters, so it lives in the bench profile and not in `configs/engine.toml`
//! (which decision records govern). Only the engine model reads it (`sim.mode = "engine"`); the
//! timing mode has its own `jitter_ms`.

use serde::{Deserialize, Serialize};

use super::limits::{self, Low, MAX_NOISE_CV};
use super::source::Invalid;

/// The noise model's parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NoiseConfig {
    /// Coefficient of variation of the per-step time factor (lognormal, mean 1), within
    /// [0, 1]. 0 = every step takes its modelled time.
    pub step_cv: f64,
    /// Coefficient of variation of the per-run factor (lognormal, mean 1; drawn once per run
    /// from the seed: a slower GPU clock, a busier neighbour), within [0, 1].
    pub run_cv: f64,
    /// Chance per step that a stall of `stall_ms` is added to it, within [0, 1].
    pub stall_probability: f64,
    /// Length of one stall, ms.
    pub stall_ms: f64,
    /// Seed of every draw: a run with the same seed sees the same noise.
    pub seed: u64,
}

impl Default for NoiseConfig {
    fn default() -> Self {
        NoiseConfig { step_cv: 0.0, run_cv: 0.0, stall_probability: 0.0, stall_ms: 50.0, seed: 13 }
    }
}

impl NoiseConfig {
    /// Whether the model adds anything at all.
    pub fn is_on(&self) -> bool {
        self.step_cv > 0.0 || self.run_cv > 0.0 || self.stall_probability > 0.0
    }

    /// Whether every field has its default (the profile does not mention `[sim.noise]`).
    pub fn is_default(&self) -> bool {
        *self == NoiseConfig::default()
    }

    /// The same noise with another seed: trial `trial` of a set draws its own run factor and
    /// steps (the seed is mixed with the trial number, so neighbouring seeds do not overlap).
    pub fn for_trial(&self, trial: u64) -> NoiseConfig {
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&self.seed.to_le_bytes());
        bytes[8..].copy_from_slice(&trial.to_le_bytes());
        NoiseConfig { seed: crate::hash::fnv1a(&bytes), ..self.clone() }
    }

    /// Range checks: `(dotted key, message)` of the first value outside its bound, keys under
    /// `prefix` (`sim.noise`).
    pub fn validate(&self, prefix: &str) -> Result<(), Invalid> {
        let at = |k: &str, r: Result<(), limits::OutOfRange>| {
            r.map_err(|m| Invalid(format!("{prefix}.{k}"), m.to_string()))
        };
        at("step_cv", limits::check_f64(self.step_cv, Low::Closed, 0.0, MAX_NOISE_CV, "CV"))?;
        at("run_cv", limits::check_f64(self.run_cv, Low::Closed, 0.0, MAX_NOISE_CV, "CV"))?;
        at(
            "stall_probability",
            limits::check_f64(self.stall_probability, Low::Closed, 0.0, 1.0, "per step"),
        )?;
        at("stall_ms", limits::millis(self.stall_ms, true))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_by_default_and_every_value_is_bounded_by_name() {
        let d = NoiseConfig::default();
        assert!(!d.is_on() && d.is_default());
        assert_eq!(d.validate("sim.noise"), Ok(()));
        for (cfg, key, range) in [
            (NoiseConfig { step_cv: 1.5, ..d.clone() }, "sim.noise.step_cv", "[0, 1] CV, got 1.5"),
            (NoiseConfig { run_cv: -0.1, ..d.clone() }, "sim.noise.run_cv", "[0, 1]"),
            (NoiseConfig { run_cv: f64::NAN, ..d.clone() }, "sim.noise.run_cv", "got NaN"),
            (
                NoiseConfig { stall_probability: 2.0, ..d.clone() },
                "sim.noise.stall_probability",
                "[0, 1] per step",
            ),
            (NoiseConfig { stall_ms: 1e300, ..d.clone() }, "sim.noise.stall_ms", "[0, 604800000]"),
        ] {
            let Invalid(k, m) = cfg.validate("sim.noise").unwrap_err();
            assert_eq!(k, key);
            assert!(m.contains(range), "{k}: {m}");
        }
        assert!(NoiseConfig { stall_probability: 0.01, ..d.clone() }.is_on());
    }

    #[test]
    fn trials_get_distinct_reproducible_seeds() {
        let d = NoiseConfig { run_cv: 0.1, ..NoiseConfig::default() };
        let seeds: Vec<u64> = (0..100).map(|i| d.for_trial(i).seed).collect();
        let mut unique = seeds.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), seeds.len());
        assert_eq!(d.for_trial(3), d.for_trial(3));
        assert_eq!(d.for_trial(3).run_cv, 0.1);
    }
}
