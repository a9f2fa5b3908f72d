//! Confidence intervals from trials: each trial is a list of per-request samples (TTFT, TPOT,
//! ... of its measured requests).
//!
//! - Means: the Student t interval across the trial means, `mean ± t(1-α/2, n-1) s / √n`.
//!   The trial is the unit: its mean already carries the request-to-request spread, and the
//!   spread of the trial means is the run-to-run variance the interval must count.
//! - Percentiles, by default the same t interval across the per-trial percentiles (each
//!   trial's P99 of its own requests); or, with [`PercentileMethod::TwoLevelBootstrap`], the
//!   percentile interval of a two-level bootstrap (resample trials with replacement, then
//!   requests within each resampled trial, take the percentile of the pooled resample).
//!   `docs/statistics.md` gives the measured coverage of both: with the few trials a set has
//!   (3), the bootstrap cannot see the between-trial spread (three values resampled) and its
//!   interval is too narrow, so the t interval is the default.
//! - A single trial: the percentile interval of resampling its requests
//!   ([`super::Method::RequestBootstrap`]), marked as not counting run-to-run variance.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use statrs::distribution::{ContinuousCDF, StudentsT};

use super::{Estimate, Method, StatsError, check_range, quantile_in_place, undersampled};

/// Default coverage of an interval.
pub const DEFAULT_CONFIDENCE: f64 = 0.95;

/// A coverage as the command line gives it (`--confidence 0.9`): a number strictly between 0
/// and 1; the error says what is valid. The one parser of every command's `--confidence`.
pub fn parse_confidence(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(c) if c > 0.0 && c < 1.0 => Ok(c),
        _ => Err(format!(
            "`{s}` is not a confidence between 0 and 1: give a coverage within (0, 1), like 0.95"
        )),
    }
}

/// Default number of bootstrap resamples: the 2.5% and 97.5% points of 2000 replicates are
/// the 50th and 1950th values, stable to a few percent of the interval's width.
pub const DEFAULT_RESAMPLES: u32 = 2000;

/// How a percentile's interval is computed from two trials or more.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PercentileMethod {
    /// Student t across the per-trial percentiles (the default).
    #[default]
    TInterval,
    /// The two-level bootstrap.
    TwoLevelBootstrap,
}

/// Settings of an estimate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Options {
    /// Coverage of the interval, within (0, 1).
    pub confidence: f64,
    /// Bootstrap resamples (two-level and single-trial), at least 1.
    pub resamples: u32,
    /// Seed of the bootstrap's generator: the same samples and seed give the same interval.
    pub seed: u64,
    pub percentile_method: PercentileMethod,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            confidence: DEFAULT_CONFIDENCE,
            resamples: DEFAULT_RESAMPLES,
            seed: 0x5eed,
            percentile_method: PercentileMethod::default(),
        }
    }
}

impl Options {
    pub fn with_confidence(self, confidence: f64) -> Options {
        Options { confidence, ..self }
    }

    fn check(&self) -> Result<(), StatsError> {
        check_range("confidence", "(0, 1)", self.confidence, |c| c > 0.0 && c < 1.0)?;
        check_range("resamples", "1..", self.resamples as f64, |r| r >= 1.0)
    }
}

/// The Student t interval of some values (at least 2): `(mean, lo, hi)`.
pub fn t_interval(values: &[f64], confidence: f64) -> Result<(f64, f64, f64), StatsError> {
    check_range("confidence", "(0, 1)", confidence, |c| c > 0.0 && c < 1.0)?;
    let n = values.len();
    if n < 2 {
        return Err(StatsError::OutOfRange {
            name: "trials",
            range: "2.. (a t interval needs a spread)",
            value: n as f64,
        });
    }
    let mean = values.iter().sum::<f64>() / n as f64;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let half = t_quantile(1.0 - (1.0 - confidence) / 2.0, (n - 1) as f64) * (var / n as f64).sqrt();
    Ok((mean, mean - half, mean + half))
}

/// The `q` quantile of Student's t with `df` degrees of freedom.
pub(crate) fn t_quantile(q: f64, df: f64) -> f64 {
    StudentsT::new(0.0, 1.0, df).expect("df > 0").inverse_cdf(q)
}

/// Every trial non-empty and finite.
fn check_trials<T: AsRef<[f64]>>(trials: &[T]) -> Result<u64, StatsError> {
    if trials.is_empty() {
        return Err(StatsError::NoTrials);
    }
    let mut requests = 0;
    for (i, t) in trials.iter().enumerate() {
        let t = t.as_ref();
        if t.is_empty() {
            return Err(StatsError::EmptyTrial { trial: i });
        }
        if let Some(&value) = t.iter().find(|v| !v.is_finite()) {
            return Err(StatsError::NotFinite { trial: i, value });
        }
        requests += t.len() as u64;
    }
    Ok(requests)
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

/// The mean of a metric over a set of trials (each the per-request samples of one run): the t
/// interval across the trial means, or for one trial the request-level bootstrap.
pub fn mean_estimate<T: AsRef<[f64]>>(trials: &[T], opts: Options) -> Result<Estimate, StatsError> {
    opts.check()?;
    let requests = check_trials(trials)?;
    let base = |value, lo, hi, method| Estimate {
        value,
        lo,
        hi,
        confidence: opts.confidence,
        trials: trials.len() as u64,
        requests,
        method,
        undersampled: false,
    };
    if trials.len() == 1 {
        let samples = trials[0].as_ref();
        let (lo, hi) = request_bootstrap(samples, opts, |s| mean(s));
        return Ok(base(mean(samples), lo, hi, Method::RequestBootstrap));
    }
    let means: Vec<f64> = trials.iter().map(|t| mean(t.as_ref())).collect();
    let (value, lo, hi) = t_interval(&means, opts.confidence)?;
    Ok(base(value, lo, hi, Method::TInterval))
}

/// The `p` quantile (0.99 for P99) of a metric over a set of trials.
pub fn percentile_estimate<T: AsRef<[f64]>>(
    trials: &[T],
    p: f64,
    opts: Options,
) -> Result<Estimate, StatsError> {
    opts.check()?;
    check_range("percentile", "[0, 1]", p, |p| (0.0..=1.0).contains(&p))?;
    let requests = check_trials(trials)?;
    let fewest = trials.iter().map(|t| t.as_ref().len() as u64).min().unwrap_or(0);
    let base = |value, lo, hi, method, undersampled| Estimate {
        value,
        lo,
        hi,
        confidence: opts.confidence,
        trials: trials.len() as u64,
        requests,
        method,
        undersampled,
    };
    let q = |s: &mut [f64]| quantile_in_place(s, p).unwrap_or(f64::NAN);
    if trials.len() == 1 {
        let mut samples = trials[0].as_ref().to_vec();
        let (lo, hi) = request_bootstrap(&samples, opts, |s| q(s));
        let value = q(&mut samples);
        return Ok(base(value, lo, hi, Method::RequestBootstrap, undersampled(p, requests)));
    }
    match opts.percentile_method {
        PercentileMethod::TInterval => {
            // Each trial's percentile comes from its own requests: the smallest trial decides.
            let per_trial: Vec<f64> = trials.iter().map(|t| q(&mut t.as_ref().to_vec())).collect();
            let (value, lo, hi) = t_interval(&per_trial, opts.confidence)?;
            Ok(base(value, lo, hi, Method::TInterval, undersampled(p, fewest)))
        }
        PercentileMethod::TwoLevelBootstrap => {
            let mut pooled: Vec<f64> =
                trials.iter().flat_map(|t| t.as_ref().iter().copied()).collect();
            let value = q(&mut pooled);
            let (lo, hi) = two_level_bootstrap(trials, opts, |s| q(s));
            Ok(base(value, lo, hi, Method::TwoLevelBootstrap, undersampled(p, requests)))
        }
    }
}

/// The `(α/2, 1-α/2)` points of some replicates.
fn percentile_interval(replicates: &mut [f64], confidence: f64) -> (f64, f64) {
    let tail = (1.0 - confidence) / 2.0;
    let lo = quantile_in_place(replicates, tail).unwrap_or(f64::NAN);
    let hi = quantile_in_place(replicates, 1.0 - tail).unwrap_or(f64::NAN);
    (lo, hi)
}

/// Percentile interval of `stat` over resamples of one trial's requests.
fn request_bootstrap(
    samples: &[f64],
    opts: Options,
    stat: impl Fn(&mut [f64]) -> f64,
) -> (f64, f64) {
    let mut rng = StdRng::seed_from_u64(opts.seed);
    let mut buf = vec![0.0; samples.len()];
    let mut replicates: Vec<f64> = (0..opts.resamples)
        .map(|_| {
            for b in buf.iter_mut() {
                *b = samples[rng.random_range(0..samples.len())];
            }
            stat(&mut buf)
        })
        .collect();
    percentile_interval(&mut replicates, opts.confidence)
}

/// Percentile interval of `stat` over two-level resamples: `n` trials drawn with replacement,
/// each one's requests drawn with replacement, pooled.
fn two_level_bootstrap<T: AsRef<[f64]>>(
    trials: &[T],
    opts: Options,
    stat: impl Fn(&mut [f64]) -> f64,
) -> (f64, f64) {
    let mut rng = StdRng::seed_from_u64(opts.seed);
    let mut buf = Vec::new();
    let mut replicates: Vec<f64> = (0..opts.resamples)
        .map(|_| {
            buf.clear();
            for _ in 0..trials.len() {
                let t = trials[rng.random_range(0..trials.len())].as_ref();
                buf.extend((0..t.len()).map(|_| t[rng.random_range(0..t.len())]));
            }
            stat(&mut buf)
        })
        .collect();
    percentile_interval(&mut replicates, opts.confidence)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_confidence_is_a_coverage_strictly_between_0_and_1() {
        assert_eq!(parse_confidence("0.9"), Ok(0.9));
        assert_eq!(parse_confidence(" 0.95 "), Ok(0.95));
        for bad in ["1", "0", "-0.5", "ninety", "NaN", "inf"] {
            let e = parse_confidence(bad).unwrap_err();
            assert!(e.contains("between 0 and 1") && e.contains(bad), "{bad}: {e}");
        }
    }

    #[test]
    fn t_interval_matches_a_hand_computation() {
        // mean 11, s = 1, n = 3: t(0.975, 2) = 4.302653, half = 4.302653 / sqrt(3) = 2.484138.
        let (m, lo, hi) = t_interval(&[10.0, 11.0, 12.0], 0.95).unwrap();
        assert!((m - 11.0).abs() < 1e-12);
        assert!((hi - 13.484138).abs() < 1e-5 && (lo - 8.515862).abs() < 1e-5, "{lo} {hi}");
        // 90%: t(0.95, 2) = 2.919986.
        let (_, _, hi) = t_interval(&[10.0, 11.0, 12.0], 0.90).unwrap();
        assert!((hi - (11.0 + 2.919986 / 3f64.sqrt())).abs() < 1e-5, "{hi}");
        assert!(t_interval(&[1.0], 0.95).is_err());
        assert!(t_interval(&[1.0, 2.0], 1.0).is_err());
    }

    #[test]
    fn means_use_the_trial_means_and_one_trial_falls_back_to_the_requests() {
        let trials = [vec![9.0, 11.0], vec![10.0, 12.0], vec![11.0, 13.0]];
        let e = mean_estimate(&trials, Options::default()).unwrap();
        assert_eq!((e.method, e.trials, e.requests), (Method::TInterval, 3, 6));
        assert!((e.value - 11.0).abs() < 1e-12 && (e.hi - 13.484138).abs() < 1e-5);
        assert!(!e.undersampled);

        let one = [(0..200).map(|i| (i % 10) as f64).collect::<Vec<_>>()];
        let e = mean_estimate(&one, Options::default()).unwrap();
        assert_eq!(e.method, Method::RequestBootstrap);
        // Mean 4.5, sd 2.87, se 0.203: the 95% interval is about 4.5 ± 0.4.
        assert!((e.value - 4.5).abs() < 1e-12);
        assert!(e.lo < 4.5 && e.hi > 4.5 && e.hi - e.lo > 0.6 && e.hi - e.lo < 1.0, "{e}");
        // Seeded: the same samples and seed give the same interval.
        assert_eq!(e, mean_estimate(&one, Options::default()).unwrap());
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        let empty: [Vec<f64>; 0] = [];
        assert_eq!(mean_estimate(&empty, Options::default()), Err(StatsError::NoTrials));
        let e = mean_estimate(&[vec![1.0], vec![]], Options::default()).unwrap_err();
        assert_eq!(e, StatsError::EmptyTrial { trial: 1 });
        let e = percentile_estimate(&[vec![1.0, f64::NAN]], 0.5, Options::default()).unwrap_err();
        assert!(matches!(e, StatsError::NotFinite { trial: 0, .. }), "{e}");
        let e = percentile_estimate(&[vec![1.0]], 1.5, Options::default()).unwrap_err();
        assert!(e.to_string().contains("percentile must be within [0, 1]"), "{e}");
        let o = Options { resamples: 0, ..Options::default() };
        assert!(mean_estimate(&[vec![1.0]], o).is_err());
        assert!(mean_estimate(&[vec![1.0]], Options::default().with_confidence(0.0)).is_err());
    }

    #[test]
    fn percentiles_per_method_and_their_undersampled_mark() {
        let trial = |shift: f64, n: usize| (1..=n).map(|i| i as f64 + shift).collect::<Vec<_>>();
        let trials = [trial(0.0, 200), trial(10.0, 200), trial(20.0, 200)];
        let e = percentile_estimate(&trials, 0.99, Options::default()).unwrap();
        // Per-trial P99: 198, 208, 218; their t interval.
        assert_eq!(e.method, Method::TInterval);
        assert!((e.value - 208.0).abs() < 1e-12 && (e.hi - (208.0 + 10.0 * 2.484138)).abs() < 1e-4);
        assert!(!e.undersampled);

        let o = Options {
            percentile_method: PercentileMethod::TwoLevelBootstrap,
            ..Options::default()
        };
        let b = percentile_estimate(&trials, 0.99, o).unwrap();
        assert_eq!(b.method, Method::TwoLevelBootstrap);
        // The pooled P99 of 600 samples: rank 594 of 1..=200, 11..=210, 21..=220.
        let mut pooled: Vec<f64> = trials.concat();
        assert_eq!(b.value, quantile_in_place(&mut pooled, 0.99).unwrap());
        assert!(b.lo <= b.value && b.value <= b.hi && b.lo >= 190.0 && b.hi <= 220.0, "{b}");

        // 3 trials of 64: each P99 is a trial's slowest request.
        let small = [trial(0.0, 64), trial(1.0, 64), trial(2.0, 64)];
        assert!(percentile_estimate(&small, 0.99, Options::default()).unwrap().undersampled);
        assert!(!percentile_estimate(&small, 0.5, Options::default()).unwrap().undersampled);
        let single = percentile_estimate(&small[..1], 0.99, Options::default()).unwrap();
        assert_eq!(single.method, Method::RequestBootstrap);
        assert!(single.undersampled && single.value == 64.0 && single.hi == 64.0, "{single}");
    }
}
