//! The difference between two estimates (a candidate against a baseline): its interval and
//! whether it is significant, for `adr new`'s matrix and `cargo xtask compare`.
//!
//! Each estimate's standard error is recovered from its interval, `se = half_width / c`, with
//! `c` the critical value it was built with (Student t with trials - 1 degrees of freedom for
//! [`Method::TInterval`], the normal quantile for the bootstraps). The difference `b - a` has
//! `se_d = sqrt(se_a² + se_b²)` (the two sets are independent) and Welch-Satterthwaite's
//! degrees of freedom (a bootstrap side counts as infinitely many):
//!
//! ```text
//! df = se_d⁴ / (se_a⁴ / df_a + se_b⁴ / df_b)
//! ```
//!
//! The interval is `d ± t(1 - α/2, df) se_d`; the difference is significant when it leaves 0
//! out. Observed counts ([`Method::Observed`]) have no interval: their difference is stated, not
//! tested.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, Normal};

use super::interval::t_quantile;
use super::{Estimate, Method, StatsError, check_range};

/// `b - a` with its interval.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Difference {
    /// `b.value - a.value`.
    pub absolute: f64,
    /// Against `a.value` (0.1 = 10% more); `None` when `a.value` is 0.
    pub relative: Option<f64>,
    /// The interval of the difference (`None` for observed counts).
    pub lo: Option<f64>,
    pub hi: Option<f64>,
    pub confidence: f64,
    /// The interval leaves 0 out (`None`: not tested, observed counts).
    pub significant: Option<bool>,
    /// Welch-Satterthwaite degrees of freedom (`None`: the normal).
    pub df: Option<f64>,
    /// Either side counts only request-to-request variance (a single trial): the difference
    /// may be run-to-run noise even when significant.
    pub request_level_only: bool,
}

/// Critical value and degrees of freedom an estimate was built with.
fn critical(e: &Estimate) -> (f64, Option<f64>) {
    let tail = 1.0 - (1.0 - e.confidence) / 2.0;
    if e.method == Method::TInterval && e.trials >= 2 {
        let df = (e.trials - 1) as f64;
        (t_quantile(tail, df), Some(df))
    } else {
        (Normal::new(0.0, 1.0).expect("a valid normal").inverse_cdf(tail), None)
    }
}

/// The difference `b - a` of two estimates at `confidence`.
pub fn difference(a: &Estimate, b: &Estimate, confidence: f64) -> Result<Difference, StatsError> {
    check_range("confidence", "(0, 1)", confidence, |c| c > 0.0 && c < 1.0)?;
    let absolute = b.value - a.value;
    let relative = (a.value != 0.0).then(|| absolute / a.value.abs());
    let request_level_only = !a.method.counts_run_to_run() || !b.method.counts_run_to_run();
    if !a.method.is_interval() || !b.method.is_interval() {
        return Ok(Difference {
            absolute,
            relative,
            lo: None,
            hi: None,
            confidence,
            significant: None,
            df: None,
            request_level_only,
        });
    }
    let ((ca, dfa), (cb, dfb)) = (critical(a), critical(b));
    let (sa, sb) = (a.half_width() / ca, b.half_width() / cb);
    let se = (sa * sa + sb * sb).sqrt();
    let term = |s: f64, df: Option<f64>| df.map_or(0.0, |df| s.powi(4) / df);
    let denom = term(sa, dfa) + term(sb, dfb);
    let df = (denom > 0.0).then(|| se.powi(4) / denom);
    let tail = 1.0 - (1.0 - confidence) / 2.0;
    let c = match df {
        Some(df) => t_quantile(tail, df),
        None => Normal::new(0.0, 1.0).expect("a valid normal").inverse_cdf(tail),
    };
    let (lo, hi) = (absolute - c * se, absolute + c * se);
    Ok(Difference {
        absolute,
        relative,
        lo: Some(lo),
        hi: Some(hi),
        confidence,
        significant: Some(lo > 0.0 || hi < 0.0),
        df,
        request_level_only,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::t_estimate;

    #[test]
    fn welch_by_hand() {
        // a: 10, 11, 12 (mean 11, s 1); b: 13, 15, 17 (mean 15, s 2); n = 3 each.
        // se_a² = 1/3, se_b² = 4/3, se_d = sqrt(5/3) = 1.290994;
        // df = (5/3)² / ((1/3)²/2 + (4/3)²/2) = 2.777778 / 0.944444 = 2.941176.
        let d =
            difference(&t_estimate(&[10.0, 11.0, 12.0]), &t_estimate(&[13.0, 15.0, 17.0]), 0.95)
                .unwrap();
        assert!((d.absolute - 4.0).abs() < 1e-12);
        assert!((d.relative.unwrap() - 4.0 / 11.0).abs() < 1e-12);
        assert!((d.df.unwrap() - 2.941176).abs() < 1e-5, "{d:?}");
        let half = t_quantile(0.975, 2.941176) * 1.290994;
        assert!((d.hi.unwrap() - (4.0 + half)).abs() < 1e-4, "{d:?}");
        // t(0.975, 2.94) = 3.2: the half width 4.14 leaves 0 in.
        assert_eq!(d.significant, Some(false), "{d:?}");
        // Farther apart: significant; the other way round, the same interval negated.
        let far =
            difference(&t_estimate(&[10.0, 11.0, 12.0]), &t_estimate(&[23.0, 25.0, 27.0]), 0.95)
                .unwrap();
        assert_eq!(far.significant, Some(true));
        let back =
            difference(&t_estimate(&[23.0, 25.0, 27.0]), &t_estimate(&[10.0, 11.0, 12.0]), 0.95)
                .unwrap();
        assert!((back.lo.unwrap() + far.hi.unwrap()).abs() < 1e-9);
        assert!(!far.request_level_only);
    }

    #[test]
    fn single_trials_use_the_normal_and_say_so_and_counts_are_not_tested() {
        let boot = |value: f64, half: f64| Estimate {
            value,
            lo: value - half,
            hi: value + half,
            confidence: 0.95,
            trials: 1,
            requests: 500,
            method: Method::RequestBootstrap,
            undersampled: false,
        };
        // se = 1.959964 / 1.959964 = 1 each: se_d = √2, half width 2.771808.
        let d = difference(&boot(100.0, 1.959964), &boot(103.0, 1.959964), 0.95).unwrap();
        assert!(d.df.is_none() && d.request_level_only);
        assert!((d.hi.unwrap() - (3.0 + 1.959964 * 2f64.sqrt())).abs() < 1e-5, "{d:?}");
        assert_eq!(d.significant, Some(true));
        let counts = Estimate { method: Method::Observed, ..boot(0.0, 0.0) };
        let d = difference(&counts, &Estimate { value: 2.0, ..counts.clone() }, 0.95).unwrap();
        assert_eq!((d.absolute, d.significant, d.relative), (2.0, None, None));
        assert!(difference(&counts, &counts, 1.5).is_err());
    }
}
