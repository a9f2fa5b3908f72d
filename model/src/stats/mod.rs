//! Statistics of repeated trials: estimates with confidence intervals that count run-to-run
//! variance, verdicts that may be inconclusive, a sequential rule for adding trials, and limits
//! proposed from evidence. Pure functions over numbers; `docs/statistics.md` states the methods,
//! their assumptions and the coverage measured against the engine simulator's known truth.
//!
//! - [`interval`]: [`mean_estimate`] (Student t across trial means) and
//!   [`percentile_estimate`] (Student t across per-trial percentiles, or the two-level
//!   bootstrap), each falling back to a request-level bootstrap for a single trial.
//! - [`changepoint`]: change points of a series (E-divisive means with a permutation test).
//! - [`decide`]: [`verdict`] (pass / fail / inconclusive), [`confidence_at_look`] (the
//!   sequential rule), [`propose_limit`] and [`min_detectable_change`].
//! - [`difference`]: a candidate against a baseline, Welch's interval and significance.
//! - [`noise`]: the run-to-run CV of a metric over trials of an unchanged configuration, and
//!   the trials per arm a change needs ([`noise::trials_per_arm`]).
//! - [`sequential`]: the nominal level of each look of a sequential gate (Bonferroni, or
//!   Lan-DeMets alpha spending with exact boundaries).

use std::fmt;

use serde::{Deserialize, Serialize};

pub mod changepoint;
pub(crate) mod decide;
pub mod difference;
pub mod interval;
pub mod noise;
pub(crate) mod sequential;

pub use decide::{
    COMPARATOR_CHOICES, Comparator, DetectableChange, Direction, ProposedLimit, UnknownComparator,
    Verdict, confidence_at_look, min_detectable_change, propose_limit, verdict,
};
pub use difference::{Difference, difference};
pub use interval::{
    DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES, Options, PercentileMethod, mean_estimate,
    parse_confidence, percentile_estimate, t_interval,
};
pub use sequential::{LOOK_RULE_CHOICES, LookRule, nominal_levels};

/// How an interval was computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// Student t across the trials' values (trial means, or per-trial percentiles): counts
    /// run-to-run variance; needs 2 trials or more.
    TInterval,
    /// Percentile interval of a two-level bootstrap: resample trials with replacement, then
    /// requests within each resampled trial; the statistic of the pooled resample.
    TwoLevelBootstrap,
    /// A single trial: percentile interval of resampling its requests. Counts only
    /// request-to-request variance, not run-to-run: the interval is too narrow for a
    /// decision about another run.
    RequestBootstrap,
    /// Student t across the trials' log values with the run-to-run variance pooled from a
    /// matching noise history (`bench::history`): more degrees of freedom than the set alone.
    PooledTInterval,
    /// No interval: the values as measured, `[lo, hi]` the smallest and largest trial's.
    /// Counts (failed requests, preemptions) are facts of each run, not estimates of a
    /// configuration's behaviour: a gate holds every trial to the limit.
    Observed,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Method::TInterval => "t_interval",
            Method::PooledTInterval => "pooled_t_interval",
            Method::TwoLevelBootstrap => "two_level_bootstrap",
            Method::RequestBootstrap => "request_bootstrap",
            Method::Observed => "observed",
        }
    }

    /// Whether the interval includes the variance between runs.
    pub fn counts_run_to_run(self) -> bool {
        !matches!(self, Method::RequestBootstrap)
    }

    /// Whether `[lo, hi]` is a confidence interval (not the range of observed values).
    pub fn is_interval(self) -> bool {
        self != Method::Observed
    }
}

/// A metric's estimate from a set of trials, with its confidence interval `[lo, hi]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    /// The point estimate (mean of the trials' values, or the pooled percentile).
    pub value: f64,
    pub lo: f64,
    pub hi: f64,
    /// Coverage the interval is built for (0.95).
    pub confidence: f64,
    /// Trials it comes from.
    pub trials: u64,
    /// Requests (samples) over all trials.
    pub requests: u64,
    pub method: Method,
    /// A percentile estimated from fewer samples than it needs ([`undersampled`]): P99 from
    /// fewer than 100 requests is the slowest request, not a 99th percentile.
    pub undersampled: bool,
}

impl Estimate {
    /// Half the interval's width (the "±" of `value ± half_width`).
    pub fn half_width(&self) -> f64 {
        (self.hi - self.lo) / 2.0
    }

    pub fn contains(&self, x: f64) -> bool {
        self.lo <= x && x <= self.hi
    }

    /// The marks a shown estimate carries, in this order: `*` when undersampled, `~` when its
    /// interval counts request-to-request variance only (one run). Every table that shows an
    /// estimate in short form appends these.
    pub fn marks(&self) -> &'static str {
        match (self.undersampled, self.method.counts_run_to_run()) {
            (false, true) => "",
            (true, true) => "*",
            (false, false) => "~",
            (true, false) => "*~",
        }
    }
}

/// `12.3 [11.9, 12.8] (95%, 3 trials, 450 requests, t_interval)`, with `UNDERSAMPLED` when
/// it is, and a note when the interval leaves out run-to-run variance.
impl fmt::Display for Estimate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} [{}, {}] ({}%, {} trial{}, {} requests, {})",
            sig_text(self.value),
            sig_text(self.lo),
            sig_text(self.hi),
            sig_text(self.confidence * 100.0),
            self.trials,
            if self.trials == 1 { "" } else { "s" },
            self.requests,
            self.method.as_str()
        )?;
        if !self.method.counts_run_to_run() {
            write!(f, " run-to-run variance not counted")?;
        }
        if self.undersampled {
            write!(f, " UNDERSAMPLED")?;
        }
        Ok(())
    }
}

/// An estimate in the short form every table shows ([`Estimate::short`]).
pub struct ShortEstimate<'a>(&'a Estimate);

impl Estimate {
    /// `182.3 ± 4.1`: the value to the precision of its half-width (the half-width to its
    /// second significant digit), then [`Estimate::marks`]; a spread a rounding error wide is
    /// `± 0`; an observed count as it is (`0`, `0 to 2`). The one short form of an estimate:
    /// the record's matrix and thresholds, tune's table and its winner statement.
    pub fn short(&self) -> ShortEstimate<'_> {
        ShortEstimate(self)
    }
}

impl fmt::Display for ShortEstimate<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let e = self.0;
        if e.method == Method::Observed {
            // An observed count has one form, the interval's (`0`, `0 to 2`).
            return e.interval().fmt(f);
        }
        // A spread below a billionth of the value is floating-point noise of identical trials.
        let half = e.half_width();
        if half > e.value.abs() * 1e-9 && half.is_finite() {
            let d = decimals_for(half);
            write!(f, "{:.d$} ± {half:.d$}{}", e.value, e.marks())
        } else {
            write!(f, "{} ± 0{}", sig_text(e.value), e.marks())
        }
    }
}

/// An estimate with its interval ([`Estimate::interval`]).
pub struct IntervalEstimate<'a> {
    estimate: &'a Estimate,
    unit: &'a str,
}

impl Estimate {
    /// `182.3 [170, 190.9]`, then [`Estimate::marks`]: the value and its interval, each in
    /// [`sig_text`]; an observed count as it is (`0`, `0 to 2`). The interval form of an
    /// estimate: `compare`'s table, the gate's and a trial set's console.
    pub fn interval(&self) -> IntervalEstimate<'_> {
        IntervalEstimate { estimate: self, unit: "" }
    }
}

impl<'a> IntervalEstimate<'a> {
    /// The value with its unit (`84.23 ms [80.1, 88.3]`); ratios, counts and currency stand
    /// alone ([`in_unit`]).
    pub fn in_unit(self, unit: &'a str) -> IntervalEstimate<'a> {
        IntervalEstimate { unit, ..self }
    }
}

impl fmt::Display for IntervalEstimate<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let e = self.estimate;
        if e.method == Method::Observed {
            return if e.lo == e.hi {
                f.write_str(&in_unit(sig_text(e.value), self.unit))
            } else {
                write!(f, "{} to {}", sig_text(e.lo), in_unit(sig_text(e.hi), self.unit))
            };
        }
        let (value, lo, hi) =
            (in_unit(sig_text(e.value), self.unit), sig_text(e.lo), sig_text(e.hi));
        write!(f, "{value} [{lo}, {hi}]{}", e.marks())
    }
}

/// A number shown with its unit for people (`201 ms`); ratios, counts and currency (and no
/// unit) stand alone.
pub fn in_unit(number: String, unit: &str) -> String {
    match unit {
        "" | "ratio" | "count" | "currency" => number,
        u => format!("{number} {u}"),
    }
}

/// Decimals that show a half-width to its second significant digit (0.41, 4.1, 41); a
/// half-width a rounding error short of a power of ten (0.00999...) counts as that power.
pub fn decimals_for(half: f64) -> usize {
    (1 - (half.log10() + 1e-9).floor() as i32).clamp(0, 9) as usize
}

/// [`sig_text`] with its sign always shown (`+1.5`, `-0.25`, `+0`): a difference.
pub fn signed_sig_text(v: f64) -> String {
    if v >= 0.0 { format!("+{}", sig_text(v)) } else { sig_text(v) }
}

/// Four significant digits, without trailing zeros: the number format of estimates.
pub fn sig_text(v: f64) -> String {
    significant(v, 4)
}

/// A number for people to `digits` significant digits (at least its integer part), trailing
/// zeros dropped (`significant(0.4591034, 6)` is `0.459103`, `significant(12345.67, 4)` is
/// `12346`); a zero has no sign. Not for files that are read back. The one number formatter:
/// estimates take four digits ([`sig_text`]), limits and values in the CLI's tables six.
pub fn significant(v: f64, digits: i32) -> String {
    if !v.is_finite() {
        return format!("{v}");
    }
    if v == 0.0 {
        // -0.0 too.
        return "0".into();
    }
    let decimals = (digits - 1 - v.abs().log10().floor() as i32).clamp(0, 12) as usize;
    let s = format!("{v:.decimals$}");
    let s = if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.') } else { &s };
    if s == "-0" { "0".into() } else { s.to_string() }
}

/// Samples the `p` quantile needs to be more than the largest sample: `1 / (1 - p)` (P99: 100,
/// P99.9: 1000, the median: 2).
pub(crate) fn needed_samples(p: f64) -> u64 {
    if !(p.is_finite() && p < 1.0) {
        return u64::MAX;
    }
    // 1 / (1 - 0.99) is 100.00000000000009 in floating point: round before the ceiling.
    let n = 1.0 / (1.0 - p.max(0.0));
    let rounded = (n * 1e9).round() / 1e9;
    rounded.ceil().max(1.0) as u64
}

/// Whether `n` samples are too few for the `p` quantile (`n < 1 / (1 - p)`).
pub fn undersampled(p: f64, n: u64) -> bool {
    n < needed_samples(p)
}

/// Nearest-rank quantile (`q` within 0..=1) of the finite ones of some values; `None` when there
/// are none.
pub fn quantile(values: impl IntoIterator<Item = f64>, q: f64) -> Option<f64> {
    let mut v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
    quantile_in_place(&mut v, q)
}

/// Nearest-rank quantile (`p` within 0..=1) of finite samples; `None` for none. Reorders
/// `values` (selection, not a full sort).
pub fn quantile_in_place(values: &mut [f64], p: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let n = values.len();
    let rank = ((p.clamp(0.0, 1.0) * n as f64).ceil() as usize).clamp(1, n);
    let (_, v, _) = values.select_nth_unstable_by(rank - 1, f64::total_cmp);
    Some(*v)
}

/// Why an estimate or a decision cannot be computed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum StatsError {
    #[error("no trials")]
    NoTrials,
    #[error("trial {trial} has no samples")]
    EmptyTrial { trial: usize },
    #[error("trial {trial} has a value that is not a finite number ({value})")]
    NotFinite { trial: usize, value: f64 },
    #[error("{name} must be within {range}, got {value}")]
    OutOfRange { name: &'static str, range: &'static str, value: f64 },
    #[error("look {look} is outside 1..={max_looks}")]
    Look { look: u32, max_looks: u32 },
}

pub(crate) fn check_range(
    name: &'static str,
    range: &'static str,
    value: f64,
    ok: impl Fn(f64) -> bool,
) -> Result<(), StatsError> {
    if value.is_finite() && ok(value) {
        Ok(())
    } else {
        Err(StatsError::OutOfRange { name, range, value })
    }
}

/// The t interval across these trial values as an estimate, 100 requests a trial: the
/// estimate the unit tests of differences and comparisons start from.
#[cfg(test)]
pub(crate) fn t_estimate(values: &[f64]) -> Estimate {
    let (value, lo, hi) = t_interval(values, 0.95).unwrap();
    Estimate {
        value,
        lo,
        hi,
        confidence: 0.95,
        trials: values.len() as u64,
        requests: 100 * values.len() as u64,
        method: Method::TInterval,
        undersampled: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_number_format_and_the_interval_form_of_an_estimate() {
        assert_eq!(significant(0.4591034, 6), "0.459103");
        assert_eq!(significant(12345.67, 4), "12346");
        assert_eq!(significant(201.0, 6), "201");
        assert_eq!(significant(-1e-20, 4), "0", "a zero has no sign");
        assert_eq!(significant(-0.0, 6), "0");
        assert_eq!(sig_text(84.23456), "84.23");
        let e = Estimate {
            value: 84.23456,
            lo: 80.1,
            hi: 88.3,
            confidence: 0.95,
            trials: 3,
            requests: 300,
            method: Method::TInterval,
            undersampled: false,
        };
        assert_eq!(e.interval().to_string(), "84.23 [80.1, 88.3]");
        assert_eq!(e.interval().in_unit("ms").to_string(), "84.23 ms [80.1, 88.3]");
        assert_eq!(e.interval().in_unit("ratio").to_string(), "84.23 [80.1, 88.3]");
        let one_run = Estimate { method: Method::RequestBootstrap, undersampled: true, ..e };
        assert_eq!(one_run.interval().to_string(), "84.23 [80.1, 88.3]*~", "the marks of short");
        assert!(one_run.short().to_string().ends_with("*~"));
        let counts = Estimate { method: Method::Observed, lo: 0.0, hi: 2.0, value: 1.0, ..e };
        assert_eq!(counts.interval().to_string(), "0 to 2");
        assert_eq!(counts.interval().in_unit("count").to_string(), "0 to 2");
    }

    #[test]
    fn four_significant_digits_and_an_unsigned_zero() {
        assert_eq!(sig_text(1211.4), "1211");
        assert_eq!(sig_text(69.0412), "69.04");
        assert_eq!(sig_text(-2.18234), "-2.182");
        assert_eq!(sig_text(0.0), "0");
        assert_eq!(sig_text(-0.0), "0");
        assert_eq!(signed_sig_text(2.18234), "+2.182");
        assert_eq!(signed_sig_text(-2.18234), "-2.182");
        assert_eq!(signed_sig_text(0.0), "+0");
    }

    #[test]
    fn a_percentile_needs_one_over_its_tail_share_of_samples() {
        assert_eq!(needed_samples(0.99), 100);
        assert_eq!(needed_samples(0.999), 1000);
        assert_eq!(needed_samples(0.5), 2);
        assert_eq!(needed_samples(0.9), 10);
        assert_eq!(needed_samples(0.0), 1);
        assert!(undersampled(0.99, 99) && !undersampled(0.99, 100));
        assert!(undersampled(0.999, 999) && !undersampled(0.999, 1000));
        assert!(undersampled(0.95, 19) && !undersampled(0.95, 20));
        assert!(!undersampled(0.5, 2) && undersampled(0.5, 1));
        assert!(undersampled(1.0, 1_000_000), "the maximum is never a stable estimate");
    }

    #[test]
    fn nearest_rank_quantiles() {
        let mut v: Vec<f64> = (1..=100).rev().map(f64::from).collect();
        assert_eq!(quantile_in_place(&mut v, 0.99), Some(99.0));
        assert_eq!(quantile_in_place(&mut v, 0.5), Some(50.0));
        assert_eq!(quantile_in_place(&mut v, 1.0), Some(100.0));
        assert_eq!(quantile_in_place(&mut v, 0.0), Some(1.0));
        assert_eq!(quantile_in_place(&mut [], 0.5), None);
        let mut few = [3.0, 1.0, 2.0];
        assert_eq!(quantile_in_place(&mut few, 0.99), Some(3.0));
    }

    #[test]
    fn display_marks_undersampled_and_request_only_intervals() {
        let e = Estimate {
            value: 12.345,
            lo: 11.9,
            hi: 12.8,
            confidence: 0.95,
            trials: 3,
            requests: 450,
            method: Method::TInterval,
            undersampled: false,
        };
        assert_eq!(e.to_string(), "12.35 [11.9, 12.8] (95%, 3 trials, 450 requests, t_interval)");
        let single = Estimate {
            trials: 1,
            requests: 64,
            undersampled: true,
            method: Method::RequestBootstrap,
            ..e.clone()
        };
        let s = single.to_string();
        assert!(s.contains("1 trial,") && s.ends_with("not counted UNDERSAMPLED"), "{s}");
        assert!((e.half_width() - 0.45).abs() < 1e-12 && e.contains(12.0) && !e.contains(13.0));
        let json = serde_json::to_value(&e).unwrap();
        assert_eq!(json["method"], "t_interval");
        assert_eq!(json["undersampled"], false);
    }
}
