//! Decisions from estimates: a verdict that may be inconclusive, the confidence of each look of
//! a sequential gate, limits proposed from evidence and the smallest regression such a limit
//! detects. Pure functions; the rules and their assumptions are in `docs/statistics.md`.

use std::fmt;

use serde::{Deserialize, Serialize};
use statrs::distribution::{ChiSquared, ContinuousCDF, Normal};

use super::interval::t_quantile;
use super::{Estimate, Method, StatsError, check_range};

/// How a measured value is compared with a threshold's limit: `measured <comparator> limit`
/// must hold for the check to pass. The one comparator of records, gate.toml and the gate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Comparator {
    #[serde(rename = "<=")]
    Le,
    #[serde(rename = "<")]
    Lt,
    #[serde(rename = ">=")]
    Ge,
    #[serde(rename = ">")]
    Gt,
    /// Exact equality; meant for counts (`requests.failed == 0`).
    #[serde(rename = "==")]
    Eq,
}

/// The comparators, as written.
pub const COMPARATOR_CHOICES: &str = "<=, <, >=, >, ==";

/// A comparator that is not one of [`COMPARATOR_CHOICES`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown comparator `{0}`; valid: {COMPARATOR_CHOICES}")]
pub struct UnknownComparator(pub String);

impl Comparator {
    pub fn parse(s: &str) -> Result<Comparator, UnknownComparator> {
        match s.trim() {
            "<=" => Ok(Comparator::Le),
            "<" => Ok(Comparator::Lt),
            ">=" => Ok(Comparator::Ge),
            ">" => Ok(Comparator::Gt),
            "==" => Ok(Comparator::Eq),
            other => Err(UnknownComparator(other.to_string())),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Comparator::Le => "<=",
            Comparator::Lt => "<",
            Comparator::Ge => ">=",
            Comparator::Gt => ">",
            Comparator::Eq => "==",
        }
    }

    /// Whether `measured <self> limit` holds.
    pub fn holds(self, measured: f64, limit: f64) -> bool {
        match self {
            Comparator::Le => measured <= limit,
            Comparator::Lt => measured < limit,
            Comparator::Ge => measured >= limit,
            Comparator::Gt => measured > limit,
            Comparator::Eq => measured == limit,
        }
    }

    /// Where a value breaks the limit, in words: `above`, `below`, `different from`.
    pub fn breaking_side(self) -> &'static str {
        match self {
            Comparator::Le | Comparator::Lt => "above",
            Comparator::Ge | Comparator::Gt => "below",
            Comparator::Eq => "different from",
        }
    }
}

impl fmt::Display for Comparator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a gate decides about one threshold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The whole interval is on the passing side of the limit.
    Pass,
    /// The whole interval is on the failing side.
    Fail,
    /// The interval straddles the limit: the data cannot decide (never a pass).
    Inconclusive,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "fail",
            Verdict::Inconclusive => "inconclusive",
        }
    }
}

/// Pass when every value of the interval satisfies `value <cmp> limit`, fail when none does,
/// inconclusive otherwise (and when a number is not finite). With `==` the interval passes
/// only as the single point `limit`, and fails when it leaves the limit out.
///
/// Observed values ([`Method::Observed`]: counts, facts of each run, `[lo, hi]` the smallest
/// and largest trial's value) are not estimates: the check passes when every trial holds the
/// limit and fails when any breaks it.
pub fn verdict(estimate: &Estimate, cmp: Comparator, limit: f64) -> Verdict {
    let (lo, hi) = (estimate.lo, estimate.hi);
    if !(lo.is_finite() && hi.is_finite() && limit.is_finite()) || lo > hi {
        return Verdict::Inconclusive;
    }
    let (lo_holds, hi_holds) = (cmp.holds(lo, limit), cmp.holds(hi, limit));
    if estimate.method == Method::Observed {
        return if lo_holds && hi_holds { Verdict::Pass } else { Verdict::Fail };
    }
    if cmp == Comparator::Eq {
        return match (lo_holds && hi_holds, lo <= limit && limit <= hi) {
            (true, _) => Verdict::Pass,
            (false, true) => Verdict::Inconclusive,
            (false, false) => Verdict::Fail,
        };
    }
    match (lo_holds, hi_holds) {
        (true, true) => Verdict::Pass,
        (false, false) => Verdict::Fail,
        _ => Verdict::Inconclusive,
    }
}

/// The confidence of look `look` (1-based) of a sequential gate that adds trials until every
/// threshold is decided and looks at most `max_looks` times, so that the chance of a false
/// verdict over all looks together stays within `alpha` (0.05).
///
/// The rule is Bonferroni's alpha spending: every look uses `alpha / max_looks`, so each look's
/// interval has confidence `1 - alpha / max_looks`. A false fail at some look is the union of
/// the false fails at each look, each at most `alpha / max_looks / 2` (one tail of a two-sided
/// interval), so the whole procedure's false-fail rate is at most `alpha / 2` whatever the
/// correlation between looks (they share trials). Pocock's or O'Brien-Fleming's boundaries
/// spend alpha more efficiently but assume normal statistics with a known correlation between
/// looks, which t intervals over 2 to K trials do not have; Bonferroni needs no assumption.
pub fn confidence_at_look(look: u32, max_looks: u32, alpha: f64) -> Result<f64, StatsError> {
    check_range("alpha", "(0, 1)", alpha, |a| a > 0.0 && a < 1.0)?;
    if max_looks == 0 || look == 0 || look > max_looks {
        return Err(StatsError::Look { look, max_looks });
    }
    Ok(1.0 - alpha / max_looks as f64)
}

/// Which way a metric is better.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Latencies: the limit is an upper bound (`<=`).
    LowerIsBetter,
    /// Throughput, goodput: the limit is a lower bound (`>=`).
    HigherIsBetter,
}

/// A limit proposed from an estimate.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProposedLimit {
    pub comparator: Comparator,
    pub limit: f64,
}

/// A limit from evidence: the interval's unfavourable bound, moved further by `headroom` (a
/// share of the estimate, 0.05 = 5%):
///
/// ```text
/// lower is better:  value <= hi + headroom x |value|
/// higher is better: value >= lo - headroom x |value|
/// ```
///
/// The limit is never inside the interval, so it is never tighter than the measured noise
/// allows: an unchanged configuration measured again fails only when its whole interval lies
/// beyond the old interval's far end plus the headroom.
pub fn propose_limit(
    estimate: &Estimate,
    headroom: f64,
    direction: Direction,
) -> Result<ProposedLimit, StatsError> {
    check_range("headroom", "[0, 10]", headroom, |h| (0.0..=10.0).contains(&h))?;
    let margin = headroom * estimate.value.abs();
    Ok(match direction {
        Direction::LowerIsBetter => {
            ProposedLimit { comparator: Comparator::Le, limit: estimate.hi + margin }
        }
        Direction::HigherIsBetter => {
            ProposedLimit { comparator: Comparator::Ge, limit: estimate.lo - margin }
        }
    })
}

/// The smallest regression a limit detects.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct DetectableChange {
    /// In the metric's unit, in the unfavourable direction.
    pub absolute: f64,
    /// As a share of the estimate (0.2 = 20% worse).
    pub relative: f64,
    pub power: f64,
}

/// The smallest regression of the metric that a gate with `limit` fails with probability
/// `power` (0.95), when it measures a new trial set of the same size and confidence as
/// `estimate`.
///
/// The gate fails when the new interval lies wholly beyond the limit: for an upper limit,
/// `mean - c s/√n > limit`, with `c` the interval's critical value (Student t with n-1 degrees
/// of freedom for [`Method::TInterval`], the normal quantile for the bootstraps). For a true
/// value `μ`, `(mean - limit) / (s/√n)` is a noncentral t with noncentrality
/// `δ = (μ - limit) / (σ/√n)`; `δ*` solves `P(T(n-1, δ) > c) = power` (the normal's
/// `δ* = c + z(power)` for the bootstraps). The noise of latencies and throughput is
/// proportional to the value (a slower GPU clock slows every step by the same share), so the
/// new configuration's standard error is the measured one scaled by `μ / value`; with the
/// measured relative standard error `r = (half_width / c) / value`:
///
/// ```text
/// upper limit (lower is better):  μ = limit / (1 - δ* r),  change = μ / value - 1
///                                 (no regression is detected when δ* r >= 1: infinite)
/// lower limit (higher is better): μ = limit / (1 + δ* r),  change = 1 - μ / value
/// ```
///
/// Assumptions: the trials' values are independent and normal, the new configuration has the
/// measured relative spread (itself an estimate: with 3 trials it is uncertain by a factor of
/// about 2 either way), and the estimate's value is the true one. The value and the limit must
/// be positive.
pub fn min_detectable_change(
    estimate: &Estimate,
    limit: &ProposedLimit,
    power: f64,
) -> Result<DetectableChange, StatsError> {
    check_range("power", "(0, 1)", power, |p| p > 0.0 && p < 1.0)?;
    check_range("value", "(0, inf) for a detectable change", estimate.value, |v| v > 0.0)?;
    check_range("limit", "(0, inf) for a detectable change", limit.limit, |v| v > 0.0)?;
    let tail = 1.0 - (1.0 - estimate.confidence) / 2.0;
    let df = (estimate.method == Method::TInterval && estimate.trials >= 2)
        .then(|| (estimate.trials - 1) as f64);
    let crit = match df {
        Some(df) => t_quantile(tail, df),
        None => std_normal().inverse_cdf(tail),
    };
    let shift =
        noncentrality_for_power(crit, df, power) * estimate.half_width() / crit / estimate.value;
    let value = estimate.value;
    let (absolute, relative) = match limit.comparator {
        Comparator::Le | Comparator::Lt | Comparator::Eq if shift >= 1.0 => {
            (f64::INFINITY, f64::INFINITY)
        }
        Comparator::Le | Comparator::Lt | Comparator::Eq => {
            let mu = limit.limit / (1.0 - shift);
            (mu - value, mu / value - 1.0)
        }
        Comparator::Ge | Comparator::Gt => {
            let mu = limit.limit / (1.0 + shift);
            (value - mu, 1.0 - mu / value)
        }
    };
    Ok(DetectableChange { absolute, relative, power })
}

fn std_normal() -> Normal {
    Normal::new(0.0, 1.0).expect("a valid normal")
}

/// `δ` with `P(T(df, δ) > crit) = power` (the normal when `df` is `None`).
fn noncentrality_for_power(crit: f64, df: Option<f64>, power: f64) -> f64 {
    let z = std_normal();
    let Some(df) = df else {
        return crit + z.inverse_cdf(power);
    };
    // P(T > c) = E[Φ(δ - c S)] with S = sqrt(χ²(df) / df): a midpoint rule over the
    // quantiles of χ², computed once.
    const POINTS: usize = 4000;
    let chi = ChiSquared::new(df).expect("df > 0");
    let scale: Vec<f64> = (0..POINTS)
        .map(|i| (chi.inverse_cdf((i as f64 + 0.5) / POINTS as f64) / df).sqrt() * crit)
        .collect();
    let prob = |delta: f64| scale.iter().map(|s| z.cdf(delta - s)).sum::<f64>() / POINTS as f64;
    let (mut lo, mut hi) = (0.0, 1.0);
    while prob(hi) < power && hi < 1e6 {
        hi *= 2.0;
    }
    for _ in 0..60 {
        let mid = (lo + hi) / 2.0;
        if prob(mid) < power { lo = mid } else { hi = mid }
    }
    hi
}

#[cfg(test)]
mod tests {
    use super::*;

    fn est(lo: f64, hi: f64) -> Estimate {
        Estimate {
            value: (lo + hi) / 2.0,
            lo,
            hi,
            confidence: 0.95,
            trials: 3,
            requests: 300,
            method: Method::TInterval,
            undersampled: false,
        }
    }

    #[test]
    fn comparators_hold_as_documented() {
        for (c, below, at, above) in [
            (Comparator::Le, true, true, false),
            (Comparator::Lt, true, false, false),
            (Comparator::Ge, false, true, true),
            (Comparator::Gt, false, false, true),
            (Comparator::Eq, false, true, false),
        ] {
            assert_eq!(c.holds(0.999, 1.0), below, "{c} just under");
            assert_eq!(c.holds(1.0, 1.0), at, "{c} at");
            assert_eq!(c.holds(1.001, 1.0), above, "{c} just over");
            assert_eq!(Comparator::parse(c.as_str()), Ok(c));
        }
        let e = Comparator::parse("=<").unwrap_err();
        assert_eq!(e, UnknownComparator("=<".into()));
        assert!(e.to_string().contains("<=, <, >=, >, =="), "{e}");
        assert_eq!(Comparator::Le.breaking_side(), "above");
        assert_eq!(Comparator::Gt.breaking_side(), "below");
    }

    #[test]
    fn verdicts_for_every_comparator_and_edge() {
        use Comparator::*;
        use Verdict::*;
        let limit = 10.0;
        // (interval, comparator, verdict)
        for ((lo, hi), cmp, want) in [
            // wholly below the limit
            ((8.0, 9.0), Le, Pass),
            ((8.0, 9.0), Lt, Pass),
            ((8.0, 9.0), Ge, Fail),
            ((8.0, 9.0), Gt, Fail),
            // wholly above
            ((11.0, 12.0), Le, Fail),
            ((11.0, 12.0), Lt, Fail),
            ((11.0, 12.0), Ge, Pass),
            ((11.0, 12.0), Gt, Pass),
            // straddling
            ((9.0, 11.0), Le, Inconclusive),
            ((9.0, 11.0), Lt, Inconclusive),
            ((9.0, 11.0), Ge, Inconclusive),
            ((9.0, 11.0), Gt, Inconclusive),
            // the upper end on the limit
            ((9.0, 10.0), Le, Pass),
            ((9.0, 10.0), Lt, Inconclusive),
            ((9.0, 10.0), Ge, Inconclusive),
            ((9.0, 10.0), Gt, Fail),
            // the lower end on the limit
            ((10.0, 11.0), Le, Inconclusive),
            ((10.0, 11.0), Lt, Fail),
            ((10.0, 11.0), Ge, Pass),
            ((10.0, 11.0), Gt, Inconclusive),
            // a point on the limit
            ((10.0, 10.0), Le, Pass),
            ((10.0, 10.0), Lt, Fail),
            ((10.0, 10.0), Ge, Pass),
            ((10.0, 10.0), Gt, Fail),
        ] {
            assert_eq!(verdict(&est(lo, hi), cmp, limit), want, "[{lo}, {hi}] {cmp} {limit}");
        }
        // What cannot be compared is never a pass.
        for (lo, hi, l) in [
            (f64::NAN, 1.0, 10.0),
            (1.0, f64::INFINITY, 10.0),
            (1.0, 2.0, f64::NAN),
            (3.0, 2.0, 10.0),
        ] {
            for cmp in [Le, Lt, Ge, Gt] {
                assert_eq!(verdict(&est(lo, hi), cmp, l), Inconclusive);
            }
        }
        assert_eq!(Comparator::parse(" >= "), Ok(Ge));
        assert!(Comparator::parse("=<").is_err());
        // `==`: a point on the limit passes, an interval around it cannot decide, one that
        // leaves it out fails.
        assert_eq!(verdict(&est(10.0, 10.0), Eq, limit), Pass);
        assert_eq!(verdict(&est(9.0, 11.0), Eq, limit), Inconclusive);
        assert_eq!(verdict(&est(11.0, 12.0), Eq, limit), Fail);
        // Observed counts: every trial must hold; one that breaks the limit fails.
        let observed = |lo, hi| Estimate { method: Method::Observed, ..est(lo, hi) };
        assert_eq!(verdict(&observed(0.0, 0.0), Eq, 0.0), Pass);
        assert_eq!(verdict(&observed(0.0, 2.0), Eq, 0.0), Fail);
        assert_eq!(verdict(&observed(0.0, 2.0), Le, 1.0), Fail);
        assert_eq!(verdict(&observed(0.0, 1.0), Le, 1.0), Pass);
        assert_eq!(serde_json::to_string(&Lt).unwrap(), "\"<\"");
    }

    #[test]
    fn each_look_spends_an_equal_share_of_alpha() {
        assert_eq!(confidence_at_look(1, 1, 0.05), Ok(0.95));
        for k in 1..=5 {
            assert!((confidence_at_look(k, 5, 0.05).unwrap() - 0.99).abs() < 1e-12);
        }
        // The union bound: K looks of alpha / K.
        let k = 8;
        let spent: f64 = (1..=k).map(|i| 1.0 - confidence_at_look(i, k, 0.05).unwrap()).sum();
        assert!((spent - 0.05).abs() < 1e-12);
        assert_eq!(confidence_at_look(0, 3, 0.05), Err(StatsError::Look { look: 0, max_looks: 3 }));
        assert!(confidence_at_look(4, 3, 0.05).is_err());
        assert!(confidence_at_look(1, 0, 0.05).is_err());
        assert!(confidence_at_look(1, 3, 0.0).is_err() && confidence_at_look(1, 3, 1.0).is_err());
    }

    #[test]
    fn limits_sit_beyond_the_unfavourable_bound() {
        let e = Estimate { value: 100.0, ..est(90.0, 110.0) };
        let up = propose_limit(&e, 0.05, Direction::LowerIsBetter).unwrap();
        assert_eq!(up, ProposedLimit { comparator: Comparator::Le, limit: 115.0 });
        let down = propose_limit(&e, 0.05, Direction::HigherIsBetter).unwrap();
        assert_eq!(down, ProposedLimit { comparator: Comparator::Ge, limit: 85.0 });
        // No headroom: the bound itself. The unchanged estimate passes its own limit.
        let tight = propose_limit(&e, 0.0, Direction::LowerIsBetter).unwrap();
        assert_eq!(tight.limit, 110.0);
        assert_eq!(verdict(&e, tight.comparator, tight.limit), Verdict::Pass);
        // A noisier estimate gets a looser limit.
        let noisy = Estimate { value: 100.0, ..est(70.0, 130.0) };
        assert!(propose_limit(&noisy, 0.05, Direction::LowerIsBetter).unwrap().limit > up.limit);
        assert!(propose_limit(&e, -0.1, Direction::LowerIsBetter).is_err());
        assert!(propose_limit(&e, f64::NAN, Direction::LowerIsBetter).is_err());
    }

    #[test]
    fn the_detectable_change_follows_the_noncentral_t() {
        // The normal case: δ* = z(0.975) + z(0.95) = 1.959964 + 1.644854.
        let d = noncentrality_for_power(1.959964, None, 0.95);
        assert!((d - 3.604818).abs() < 1e-5, "{d}");
        // Many degrees of freedom approach the normal.
        let d = noncentrality_for_power(1.959964, Some(2000.0), 0.95);
        assert!((d - 3.604818).abs() < 0.02, "{d}");
        // df = 2 (3 trials), c = t(0.975, 2). A Monte Carlo of (Z + δ) / S > c with
        // S = sqrt(χ²₂ / 2) = sqrt(Exp(1)), 400000 draws: P = 0.494 at δ = 3.6, 0.529 at 3.8,
        // 0.958 at 8.0, 0.972 at 8.5.
        let c = 4.302653;
        let d = noncentrality_for_power(c, Some(2.0), 0.5);
        assert!(d > 3.6 && d < 3.8, "{d}");
        let d = noncentrality_for_power(c, Some(2.0), 0.95);
        assert!(d > 7.5 && d < 8.0, "{d}");

        // value 100, interval ±10 from 3 trials: r = 10 / c / 100; limit 115.
        let e = Estimate { value: 100.0, ..est(90.0, 110.0) };
        let limit = propose_limit(&e, 0.05, Direction::LowerIsBetter).unwrap();
        let m = min_detectable_change(&e, &limit, 0.95).unwrap();
        let c = t_quantile(0.975, 2.0);
        assert!((c - 4.302653).abs() < 1e-5, "{c}");
        let delta = noncentrality_for_power(c, Some(2.0), 0.95);
        let mu = 115.0 / (1.0 - delta * 10.0 / c / 100.0);
        assert!(
            (m.absolute - (mu - 100.0)).abs() < 1e-9
                && (m.relative - (mu / 100.0 - 1.0)).abs() < 1e-12
        );
        assert!(m.relative > 0.35 && m.relative < 0.45, "{m:?}");
        // More trials with the same interval: a smaller detectable change.
        let more = Estimate { trials: 10, ..e.clone() };
        assert!(min_detectable_change(&more, &limit, 0.95).unwrap().absolute < m.absolute);
        // A lower limit (throughput): the drop it detects.
        let floor = propose_limit(&e, 0.05, Direction::HigherIsBetter).unwrap();
        let d = min_detectable_change(&e, &floor, 0.95).unwrap();
        let mu = 85.0 / (1.0 + delta * 10.0 / c / 100.0);
        assert!((d.relative - (1.0 - mu / 100.0)).abs() < 1e-12, "{d:?}");
        // Noise as large as the value: no regression is detected with 95% power.
        let wild = Estimate { value: 100.0, ..est(40.0, 160.0) };
        let l = propose_limit(&wild, 0.05, Direction::LowerIsBetter).unwrap();
        assert_eq!(min_detectable_change(&wild, &l, 0.95).unwrap().relative, f64::INFINITY);
        let negative = Estimate { value: -1.0, ..e.clone() };
        assert!(min_detectable_change(&negative, &limit, 0.95).is_err());
        assert!(min_detectable_change(&e, &limit, 1.0).is_err());
    }
}
