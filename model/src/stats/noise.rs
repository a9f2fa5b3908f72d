//! Run-to-run noise of one metric over trials of an unchanged configuration, and the trials an
//! A/B comparison needs to see a given change.
//!
//! Noise on these metrics is proportional (a machine 5% slower makes every latency 5% longer),
//! so the spread is taken on log values: `s` is the sample standard deviation of `ln v` over
//! the trials (n − 1 degrees of freedom) and the run CV is `sqrt(exp(s²) − 1)`, the CV of a
//! lognormal of that spread (≈ `s` for small `s`). Its 95% interval comes from
//! `(n − 1)·s²/σ² ~ χ²(n − 1)` (normal log values). A metric with a value ≤ 0 in some trial
//! (an error rate of 0) has no log spread: it is reported without a CV.
//!
//! Trials per arm for a relative change `d` at power `1 − β` and one-sided level `α`, with
//! both arms' trials independent with that log spread (the paired ABBA design does no worse
//! when the machine does not drift): `n = ⌈2·(z₁₋α + z₁₋β)²·s² / ln(1 + d)²⌉`, at least 2. It is
//! the fixed-sample figure: the A/B gate's sequential looks stop earlier on average and may
//! use more at most (docs/statistics.md).

use statrs::distribution::{ChiSquared, ContinuousCDF, Normal};

/// The run-to-run spread of one metric.
#[derive(Clone, Debug, PartialEq)]
pub struct RunNoise {
    /// Trials with a value.
    pub trials: usize,
    /// Mean of the values.
    pub mean: f64,
    /// Sample standard deviation of the log values (`None` with a value ≤ 0 or under 2 trials).
    pub log_sd: Option<f64>,
    /// The run CV and its 95% interval (`None` as `log_sd`).
    pub cv: Option<(f64, f64, f64)>,
}

/// The spread of `values` (the metric's value in each trial; `None`s are left out).
pub fn run_noise(values: &[Option<f64>]) -> RunNoise {
    let v: Vec<f64> = values.iter().flatten().copied().filter(|x| x.is_finite()).collect();
    let n = v.len();
    let mean = if n == 0 { f64::NAN } else { v.iter().sum::<f64>() / n as f64 };
    let log_sd = (n >= 2 && v.iter().all(|&x| x > 0.0)).then(|| {
        let logs: Vec<f64> = v.iter().map(|x| x.ln()).collect();
        let m = logs.iter().sum::<f64>() / n as f64;
        (logs.iter().map(|l| (l - m).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
    });
    let cv = log_sd.map(|s| {
        let df = (n - 1) as f64;
        let chi = ChiSquared::new(df).expect("df > 0");
        let sd_at = |q: f64| s * (df / chi.inverse_cdf(q)).sqrt();
        (lognormal_cv(s), lognormal_cv(sd_at(0.975)), lognormal_cv(sd_at(0.025)))
    });
    RunNoise { trials: n, mean, log_sd, cv }
}

/// The standard normal's quantile at `p`.
pub fn normal_quantile(p: f64) -> f64 {
    Normal::new(0.0, 1.0).expect("the standard normal").inverse_cdf(p)
}

/// The CV of a lognormal whose log has standard deviation `s`.
pub(crate) fn lognormal_cv(s: f64) -> f64 {
    (s * s).exp_m1().sqrt()
}

/// Trials per arm to detect a relative change `change` (0.05 = 5%) at one-sided level `alpha`
/// and `power`, for a metric of log spread `log_sd` (module docs). `None` for a change that is
/// not positive.
pub fn trials_per_arm(log_sd: f64, change: f64, alpha: f64, power: f64) -> Option<u64> {
    if !(change > 0.0 && change.is_finite() && log_sd.is_finite() && log_sd >= 0.0) {
        return None;
    }
    let k = normal_quantile(1.0 - alpha) + normal_quantile(power);
    let n = 2.0 * k * k * log_sd * log_sd / change.ln_1p().powi(2);
    Some((n.ceil() as u64).max(2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_spread_of_known_values() {
        // ln values e^0, e^0.1, e^-0.1: sd 0.1 exactly.
        let v = [1.0, 0.1f64.exp(), (-0.1f64).exp()].map(Some);
        let r = run_noise(&v);
        assert!((r.log_sd.unwrap() - 0.1).abs() < 1e-12);
        let (cv, lo, hi) = r.cv.unwrap();
        assert!((cv - lognormal_cv(0.1)).abs() < 1e-12 && lo < cv && cv < hi);
        // χ²(2): 0.0506 and 7.378 → sd interval 0.1·sqrt(2/7.378) .. 0.1·sqrt(2/0.0506).
        assert!((lo - lognormal_cv(0.1 * (2.0f64 / 7.37776).sqrt())).abs() < 1e-4);
        assert!((hi - lognormal_cv(0.1 * (2.0f64 / 0.0506356).sqrt())).abs() < 1e-3);
    }

    #[test]
    fn a_zero_or_a_single_value_has_no_log_spread() {
        assert_eq!(run_noise(&[Some(0.0), Some(1.0), Some(2.0)]).log_sd, None);
        assert_eq!(run_noise(&[Some(3.0), None]).log_sd, None);
        assert_eq!(run_noise(&[Some(3.0), None]).trials, 1);
    }

    #[test]
    fn trials_per_arm_follow_the_normal_formula() {
        // 5% CV, 5% change, α 1% one-sided, 95% power: 2·(2.326+1.645)²·0.05²/ln(1.05)² = 33.2.
        assert_eq!(trials_per_arm(0.05, 0.05, 0.01, 0.95), Some(34));
        // Four times the variance, four times the trials (to rounding).
        assert_eq!(trials_per_arm(0.10, 0.05, 0.01, 0.95), Some(133));
        assert_eq!(trials_per_arm(0.0, 0.05, 0.01, 0.95), Some(2));
        assert_eq!(trials_per_arm(0.05, 0.0, 0.01, 0.95), None);
    }
}
