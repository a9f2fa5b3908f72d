//! `[profile.X.steady]`: how a run's plateau (its steady state, ramp-up and drain left out) is
//! found, whether gates and records read the plateau's figures, and when an open loop whose
//! server falls further and further behind its schedule is stopped early (docs/metrics.md,
//! "Steady state").
//!
//! ```toml
//! [profile.x.steady]
//! band = 0.1                 # the load within 10% of its target counts as steady
//! min_s = 5.0                # a plateau shorter than this is none (its figures stay blank)
//! slice_s = 1.0              # the load is judged slice by slice, at least this long each
//! gate = false               # true: gates and `adr new` read the plateau's figures
//! stop_oversaturated = true  # stop an open loop whose server falls behind by a growing margin
//! oversaturation_s = 10.0    # ... once its completions stay short of the schedule this long
//! ```

use serde::{Deserialize, Serialize};

use super::limits::{self, Low};
use super::source::Invalid;

/// The plateau's settings and the over-saturation stop.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SteadyConfig {
    /// Relative band around the load's target: closed loop, the time-averaged requests in flight
    /// against the concurrency (and each slice's completions against the plateau's rate); open
    /// loop, the requests sent against those the schedule meant to send. Within (0, 1).
    pub band: f64,
    /// The shortest plateau, seconds: a shorter one is reported as none, with the reason.
    pub min_s: f64,
    /// The shortest slice the load is judged over, seconds (a slice is lengthened to hold about
    /// 20 completions on average, so a slow load is not judged on noise).
    pub slice_s: f64,
    /// Gates (`gate`, `bench --gate`) and records (`adr new`) read the plateau's figures in place
    /// of the whole window's (`metrics.ttft_ms.p99` reads `plateau.metrics.ttft_ms.p99`).
    pub gate: bool,
    /// Open and trace loops: stop sending when the server falls behind the schedule by a growing
    /// margin (the run's status `oversaturated`, exit 6).
    pub stop_oversaturated: bool,
    /// How long the completions must stay below the schedule by more than the band, seconds,
    /// over a trailing window of the same length, before the run is stopped.
    pub oversaturation_s: f64,
}

impl Default for SteadyConfig {
    fn default() -> Self {
        SteadyConfig {
            band: 0.1,
            min_s: 5.0,
            slice_s: 1.0,
            gate: false,
            stop_oversaturated: true,
            oversaturation_s: 10.0,
        }
    }
}

impl SteadyConfig {
    /// Whether every field has its default (the profile does not mention `[steady]`).
    pub fn is_default(&self) -> bool {
        *self == SteadyConfig::default()
    }

    /// Range checks: `(dotted key, message)` of the first failure, keys under `prefix`.
    pub fn validate(&self, prefix: &str) -> Result<(), Invalid> {
        let at = |k: &str, r: Result<(), limits::OutOfRange>| {
            r.map_err(|m| Invalid(format!("{prefix}.{k}"), m.to_string()))
        };
        at("band", limits::check_f64(self.band, Low::Open, 0.0, 0.99, "share"))?;
        at("min_s", limits::seconds(self.min_s, true))?;
        at("slice_s", limits::check_f64(self.slice_s, Low::Closed, 0.01, 3600.0, "seconds"))?;
        at(
            "oversaturation_s",
            limits::check_f64(self.oversaturation_s, Low::Closed, 0.5, 3600.0, "seconds"),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_of_range_settings_name_their_key() {
        let ok = SteadyConfig::default();
        assert_eq!(ok.validate("steady"), Ok(()));
        let bad = SteadyConfig { band: 0.0, ..ok.clone() };
        assert_eq!(bad.validate("steady").unwrap_err().0, "steady.band");
        let bad = SteadyConfig { oversaturation_s: 0.1, ..ok.clone() };
        assert_eq!(bad.validate("steady").unwrap_err().0, "steady.oversaturation_s");
        let bad = SteadyConfig { slice_s: f64::NAN, ..ok };
        assert_eq!(bad.validate("steady").unwrap_err().0, "steady.slice_s");
    }

    #[test]
    fn a_profile_refuses_an_unknown_steady_key_and_an_out_of_range_band_naming_the_file() {
        use crate::config::{BenchConfig, Source};
        let read =
            |text: &str| BenchConfig::from_source(Source::new("bench.toml", text.to_string()));
        let e = read("[profile.default.steady]\nbandd = 0.2\n").unwrap_err().to_string();
        assert!(e.contains("bench.toml") && e.contains("bandd"), "{e}");
        let cfg = read("[profile.default.steady]\ngate = true\nband = 0.2\n").unwrap();
        let p = cfg.resolve("default", &[]).unwrap().profile;
        assert!(p.steady.gate && p.steady.band == 0.2);
        let e = read("[profile.default.steady]\nband = 1.5\n")
            .and_then(|c| c.resolve("default", &[]).map(|_| ()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("steady.band") && e.contains("1.5"), "{e}");
    }
}
