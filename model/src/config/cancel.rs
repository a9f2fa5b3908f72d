//! `[profile.X.cancel]`: requests the bench cancels on purpose, by closing the stream, the way
//! clients that give up do; what the engine then does with their compute is measured
//! (docs/metrics.md, "Cancellation").
//!
//! ```toml
//! [profile.cancellation.cancel]
//! share = 0.3                # share of the measured requests cancelled (seeded draw per request)
//! after_tokens = 8           # close the stream once this many output tokens arrived
//! # after_ms = 200           # or: this many ms after the request's intended send time
//! # timeout_median_ms = 2000 # or: at a client timeout drawn per request (lognormal)
//! # timeout_sigma = 0.5      #      of this median and log-space spread
//! # header = "X-Request-Timeout"  # time-based cancels also send the deadline (seconds)
//! # drain_s = 30            # after the last request, wait this long at most for the engine to idle
//! seed = 11
//! ```
//!
//! Off by default (`share = 0`). Exactly one of `after_tokens`, `after_ms` and
//! `timeout_median_ms` says when, once `share` is above 0.

use serde::{Deserialize, Serialize};

use super::limits::{self, Low};
use super::source::Invalid;

/// When and how often the bench cancels.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CancelConfig {
    /// Share of the measured requests cancelled, within [0, 1]; each request is drawn from the
    /// seed and its number, so a run with the same seed cancels the same requests.
    pub share: f64,
    /// Close the stream once this many output tokens (content events) arrived (streams only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after_tokens: Option<u32>,
    /// Close the request this many ms after its intended send time (a fixed client timeout).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after_ms: Option<f64>,
    /// Close the request at a client timeout drawn per request from a lognormal distribution
    /// of this median, ms (how a population of clients gives up).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_median_ms: Option<f64>,
    /// The log-space standard deviation of the drawn timeouts (0 = every one the median).
    pub timeout_sigma: f64,
    /// With a time-based cancel, send the request's deadline in this header, in seconds
    /// (`X-Request-Timeout`: a proxy or engine that honours it can drop the work itself).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub header: Option<String>,
    /// After the last request, wait at most this long (s) for the engine to run and queue
    /// nothing before the final scrape: the counters then hold what it computed for the
    /// cancelled requests after their clients left (`server.after_run`).
    pub drain_s: f64,
    pub seed: u64,
}

impl Default for CancelConfig {
    fn default() -> Self {
        CancelConfig {
            share: 0.0,
            after_tokens: None,
            after_ms: None,
            timeout_median_ms: None,
            timeout_sigma: 0.5,
            header: None,
            drain_s: 30.0,
            seed: 11,
        }
    }
}

/// When one request is cancelled.
#[derive(Clone, Debug, PartialEq)]
pub struct CancelPlan {
    /// Close the stream once this many content events arrived.
    pub after_tokens: Option<u64>,
    /// Close the request this many ms after its intended send time.
    pub after_ms: Option<f64>,
    /// The header that carries the deadline, when asked for.
    pub header: Option<String>,
}

impl CancelConfig {
    /// Whether any request is cancelled.
    pub fn is_on(&self) -> bool {
        self.share > 0.0
    }

    /// Whether every field has its default (the profile does not mention `[cancel]`).
    pub fn is_default(&self) -> bool {
        *self == CancelConfig::default()
    }

    /// The plan of measured request `id`: `None` when it is not drawn. The draw depends only on
    /// the seed and `id`, never on the order requests are sent in.
    pub fn plan(&self, id: u64) -> Option<CancelPlan> {
        use rand::{Rng, SeedableRng};
        if !self.is_on() {
            return None;
        }
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&self.seed.to_le_bytes());
        bytes[8..].copy_from_slice(&id.to_le_bytes());
        let mut rng = rand::rngs::StdRng::seed_from_u64(crate::hash::fnv1a(&bytes));
        if rng.random::<f64>() >= self.share {
            return None;
        }
        let after_ms = match (self.after_ms, self.timeout_median_ms) {
            (Some(ms), _) => Some(ms),
            (None, Some(median)) => {
                let z: f64 = rng.sample(rand_distr::StandardNormal);
                Some(median * (self.timeout_sigma * z).exp())
            }
            (None, None) => None,
        };
        Some(CancelPlan {
            after_tokens: self.after_tokens.map(u64::from),
            header: self.header.clone().filter(|_| after_ms.is_some()),
            after_ms,
        })
    }

    /// Range checks and the one-of rule: `(dotted key, message)` of the first failure, keys
    /// under `prefix` (`cancel`). `stream`: whether the profile streams (token counts need it).
    pub fn validate(&self, prefix: &str, stream: bool) -> Result<(), Invalid> {
        let at = |k: &str, r: Result<(), limits::OutOfRange>| {
            r.map_err(|m| Invalid(format!("{prefix}.{k}"), m.to_string()))
        };
        at("share", limits::check_f64(self.share, Low::Closed, 0.0, 1.0, "share"))?;
        if let Some(n) = self.after_tokens {
            at(
                "after_tokens",
                limits::check_int(n.into(), 1, limits::MAX_REQUEST_TOKENS.into(), "tokens"),
            )?;
        }
        if let Some(ms) = self.after_ms {
            at("after_ms", limits::millis(ms, false))?;
        }
        if let Some(ms) = self.timeout_median_ms {
            at("timeout_median_ms", limits::millis(ms, false))?;
        }
        at(
            "timeout_sigma",
            limits::check_f64(self.timeout_sigma, Low::Closed, 0.0, 3.0, "log-space sigma"),
        )?;
        at("drain_s", limits::seconds(self.drain_s, true))?;
        if let Some(h) = &self.header {
            super::bench::validate_header_name(h)
                .map_err(|m| Invalid(format!("{prefix}.header"), m.to_string()))?;
        }
        if !self.is_on() {
            return Ok(());
        }
        let set = [
            self.after_tokens.is_some(),
            self.after_ms.is_some(),
            self.timeout_median_ms.is_some(),
        ];
        if set.iter().filter(|s| **s).count() != 1 {
            return Err(Invalid(
                format!("{prefix}.share"),
                "a share above 0 needs exactly one of after_tokens, after_ms and \
                 timeout_median_ms (when to cancel)"
                    .into(),
            ));
        }
        if self.after_tokens.is_some() && !stream {
            return Err(Invalid(
                format!("{prefix}.after_tokens"),
                "counts streamed tokens: the profile sends stream = false (use after_ms)".into(),
            ));
        }
        if self.header.is_some() && self.after_tokens.is_some() {
            return Err(Invalid(
                format!("{prefix}.header"),
                "carries a deadline: it needs after_ms or timeout_median_ms".into(),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_draw_cancels_the_share_asked_for_and_the_same_requests_each_time() {
        let c = CancelConfig { share: 0.3, after_tokens: Some(8), ..CancelConfig::default() };
        let drawn: Vec<u64> = (0..10_000).filter(|&i| c.plan(i).is_some()).collect();
        // Binomial(10000, 0.3): sd 46, so 3,000 +- 200 is over 4 sd.
        assert!((2800..3200).contains(&drawn.len()), "{}", drawn.len());
        let again: Vec<u64> = (0..10_000).filter(|&i| c.plan(i).is_some()).collect();
        assert_eq!(drawn, again);
        let plan = c.plan(drawn[0]).unwrap();
        assert_eq!((plan.after_tokens, plan.after_ms, plan.header), (Some(8), None, None));
        let other = CancelConfig { seed: 12, ..c.clone() };
        let moved: Vec<u64> = (0..10_000).filter(|&i| other.plan(i).is_some()).collect();
        assert_ne!(drawn, moved);
        assert!(CancelConfig::default().plan(0).is_none());
    }

    #[test]
    fn drawn_timeouts_have_the_median_asked_for() {
        let c = CancelConfig {
            share: 1.0,
            timeout_median_ms: Some(2000.0),
            timeout_sigma: 0.5,
            header: Some("X-Request-Timeout".into()),
            ..CancelConfig::default()
        };
        let mut t: Vec<f64> = (0..4001).map(|i| c.plan(i).unwrap().after_ms.unwrap()).collect();
        t.sort_by(f64::total_cmp);
        // The sample median of 4001 lognormal draws: within 3% of 2000 ms (its sd is ~1.4%).
        assert!((t[2000] / 2000.0 - 1.0).abs() < 0.03, "{}", t[2000]);
        assert_eq!(c.plan(0).unwrap().header.as_deref(), Some("X-Request-Timeout"));
    }

    #[test]
    fn bad_settings_name_their_key() {
        let d = CancelConfig::default();
        assert_eq!(d.validate("cancel", true), Ok(()));
        for (cfg, stream, key, text) in [
            (CancelConfig { share: 1.5, ..d.clone() }, true, "cancel.share", "[0, 1]"),
            (CancelConfig { share: 0.3, ..d.clone() }, true, "cancel.share", "exactly one"),
            (
                CancelConfig {
                    share: 0.3,
                    after_tokens: Some(4),
                    after_ms: Some(5.0),
                    ..d.clone()
                },
                true,
                "cancel.share",
                "exactly one",
            ),
            (
                CancelConfig { share: 0.3, after_tokens: Some(4), ..d.clone() },
                false,
                "cancel.after_tokens",
                "stream = false",
            ),
            (
                CancelConfig {
                    share: 0.3,
                    after_tokens: Some(4),
                    header: Some("X-Request-Timeout".into()),
                    ..d.clone()
                },
                true,
                "cancel.header",
                "deadline",
            ),
            (
                CancelConfig { after_tokens: Some(0), ..d.clone() },
                true,
                "cancel.after_tokens",
                "1..=",
            ),
            (
                CancelConfig { header: Some("bad header".into()), ..d.clone() },
                true,
                "cancel.header",
                "",
            ),
        ] {
            let Invalid(k, m) = cfg.validate("cancel", stream).unwrap_err();
            assert_eq!(k, key, "{m}");
            assert!(m.contains(text), "{k}: {m}");
        }
    }
}
