//! One metric of an A/B gate decided from its blocks: the paired difference, its interval,
//! and pass, fail or inconclusive against the regression budget.
//!
//! Each block gives one difference `d = mean(candidate trials) - mean(baseline trials)` on the
//! metric's scale, oriented so that positive is worse: log values for a positive metric (a
//! relative change; lower-is-better `ln B - ln A`, higher-is-better `ln A - ln B`), the values
//! themselves for a share (points). ABBA and BAAB blocks make `d` blind to a linear drift of the
//! machine during the block. Over `n` blocks the estimate is the mean `d̄` with standard error
//! `s / sqrt(n)`, `s` the blocks' standard deviation (`n - 1` degrees of freedom), or the
//! standard deviation pooled with a matching noise history ([`Prior`]) when the blocks are not
//! noisier than it.
//!
//! With `b` the budget and `D` the regression the gate must catch (default `2 b`), at a look
//! whose one-sided nominal levels are `a_f` (fail side) and `a_p` (pass side):
//!
//! ```text
//! fail          d̄ > b  and  d̄ - t(1 - a_f, df) se > 0    a regression, estimated past the budget
//! pass          d̄ <= b and  d̄ + t(1 - a_p, df) se < D    within the budget, and D ruled out
//! inconclusive  otherwise
//! ```
//!
//! So an unchanged configuration fails with probability at most `a_f` (summed over looks and,
//! by Bonferroni, over the blocking metrics: the gate's `alpha_fail`), and one that regressed by
//! `D` passes with probability at most `a_p` (summed over looks: `alpha_pass`). Between 0 and
//! `D` the estimate decides, the budget being where a verdict is a coin flip. The rates met are
//! measured against a known truth in `docs/statistics.md`.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, FisherSnedecor, StudentsT};

use super::design::Arm;
use crate::metric::{Better, MetricPath, Scale};
use crate::stats::Verdict;

/// The default regression budget: 5% worse (5 points for a share).
pub const DEFAULT_BUDGET: f64 = 0.05;
/// The default chance that an unchanged configuration fails, over every look and blocking
/// metric.
pub const DEFAULT_ALPHA_FAIL: f64 = 0.01;
/// The default chance that a configuration regressed by the detect size passes.
pub const DEFAULT_ALPHA_PASS: f64 = 0.025;
/// Histories noisier than this share of the blocks' variance (F test, one-sided) are not
/// pooled: the blocks are then noisier than the history.
pub(crate) const NOISIER_THAN_HISTORY_LEVEL: f64 = 0.05;

/// One metric's regression budget.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetCheck {
    pub metric: MetricPath,
    pub better: Better,
    pub scale: Scale,
    /// How much worse the candidate may be: a fraction of the baseline (positive metrics) or
    /// points (shares).
    pub budget: f64,
    /// The regression the gate must catch (default twice the budget).
    pub detect: f64,
    /// A blocking check fails the gate; a warning is reported only.
    pub blocking: bool,
    /// Where the budget comes from (`ADR-0003 line 88`, `--budget 5%`).
    pub source: String,
}

/// A budget that cannot be checked.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum BudgetError {
    #[error("`{0}` is not a known metric")]
    Unknown(String),
    #[error("`{0}` is a count, observed in each trial: a count has no regression budget")]
    Count(String),
    #[error("the budget of `{metric}` must be within (0, {max}), got {value}")]
    Range { metric: String, max: f64, value: f64 },
    #[error(
        "the detected change of `{metric}` ({detect}) must be larger than its budget ({budget})"
    )]
    Detect { metric: String, budget: f64, detect: f64 },
}

impl BudgetCheck {
    /// A budget for a known metric; `detect` defaults to twice `budget`.
    pub fn new(
        metric: MetricPath,
        budget: f64,
        detect: Option<f64>,
        blocking: bool,
        source: impl Into<String>,
    ) -> Result<BudgetCheck, BudgetError> {
        let def = metric.def();
        if def.scale == Scale::Count {
            return Err(BudgetError::Count(metric.to_string()));
        }
        // A higher-is-better metric cannot lose more than all of itself.
        let max =
            if def.scale == Scale::Positive && def.better == Better::Lower { 10.0 } else { 1.0 };
        let detect = detect.unwrap_or(2.0 * budget);
        for value in [budget, detect] {
            if !(value.is_finite() && value > 0.0 && value < max) {
                return Err(BudgetError::Range { metric: metric.to_string(), max, value });
            }
        }
        if detect <= budget {
            return Err(BudgetError::Detect { metric: metric.to_string(), budget, detect });
        }
        Ok(BudgetCheck {
            metric,
            better: def.better,
            scale: def.scale,
            budget,
            detect,
            blocking,
            source: source.into(),
        })
    }

    /// A value on the check's scale, oriented so that larger is worse; `None` when the value
    /// has none (a positive metric at 0 or below).
    pub(crate) fn oriented(&self, value: f64) -> Option<f64> {
        let v = match self.scale {
            Scale::Positive if value > 0.0 && value.is_finite() => value.ln(),
            Scale::Positive => return None,
            _ if value.is_finite() => value,
            _ => return None,
        };
        Some(if self.better == Better::Lower { v } else { -v })
    }

    /// A change of `x` on the oriented scale as it reads on the metric: the relative change of
    /// candidate against baseline (`0.05`: 5% higher), or the difference in points.
    pub(crate) fn as_change(&self, x: f64) -> f64 {
        let signed = if self.better == Better::Lower { x } else { -x };
        match self.scale {
            Scale::Positive => signed.exp() - 1.0,
            _ => signed,
        }
    }

    /// The budget and the detect size on the oriented scale.
    pub fn limits(&self) -> (f64, f64) {
        let on = |f: f64| match (self.scale, self.better) {
            (Scale::Positive, Better::Lower) => (1.0 + f).ln(),
            (Scale::Positive, Better::Higher) => -(1.0 - f).ln(),
            _ => f,
        };
        (on(self.budget), on(self.detect))
    }

    /// `5% worse` or `5 points worse`.
    pub fn budget_text(&self) -> String {
        words(self.scale, self.budget)
    }

    pub fn detect_text(&self) -> String {
        words(self.scale, self.detect)
    }
}

fn words(scale: Scale, v: f64) -> String {
    let n = crate::stats::sig_text(v * 100.0);
    match scale {
        Scale::Positive => format!("{n}% worse"),
        _ => format!("{n} points worse"),
    }
}

/// The run-to-run noise of a metric's paired difference known from history: its variance on
/// the check's oriented scale and degrees of freedom.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Prior {
    pub variance: f64,
    pub df: f64,
    /// What it was pooled from (`history: 3 A/B gates, 84 blocks, fingerprint 1f2e...`).
    pub label: String,
}

/// Where a look's standard error came from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum NoiseSource {
    /// The blocks' own spread.
    Own,
    /// The blocks pooled with a matching history.
    Pooled { history: String, history_df: f64 },
    /// A history matched, but the blocks are noisier than it (F test): their own spread.
    NoisierThanHistory { history: String, ratio: f64 },
}

/// One block's trial values of a metric, by arm (`None`: not measured).
pub(crate) type BlockValues = [(Arm, Option<f64>); 4];

/// The candidate against the baseline on one metric at one look.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Change {
    /// The change as it reads on the metric ([`BudgetCheck::as_change`]) and its interval's
    /// ends: `lo` from the fail side's level, `hi` from the pass side's (in the metric's own
    /// direction, so `lo <= value <= hi` for a lower-is-better metric).
    pub value: f64,
    pub lo: f64,
    pub hi: f64,
    /// The oriented estimate (positive is worse), its standard error and degrees of freedom.
    pub worse_by: f64,
    pub se: f64,
    pub df: f64,
    /// Blocks it comes from.
    pub blocks: u32,
    /// The arms' means over those blocks (geometric for a positive metric).
    pub baseline: f64,
    pub candidate: f64,
    pub noise: NoiseSource,
}

/// One metric at one look.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckLook {
    pub metric: MetricPath,
    pub blocking: bool,
    pub change: Option<Change>,
    pub verdict: Verdict,
    /// Why it is inconclusive when it has no change to show.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

fn t_quantile(p: f64, df: f64) -> f64 {
    if p <= 0.5 {
        return 0.0;
    }
    if p >= 1.0 {
        return f64::INFINITY;
    }
    StudentsT::new(0.0, 1.0, df).map(|t| t.inverse_cdf(p)).unwrap_or(f64::INFINITY)
}

/// The blocks' oriented differences and the arms' oriented means, skipping blocks with an arm
/// unmeasured.
fn differences(check: &BudgetCheck, blocks: &[BlockValues]) -> (Vec<f64>, f64, f64, usize) {
    let (mut d, mut a, mut b, mut skipped) = (Vec::new(), 0.0, 0.0, 0);
    for block in blocks {
        let mut sums = [0.0f64; 2];
        let mut ok = true;
        for (arm, v) in block {
            match v.and_then(|v| check.oriented(v)) {
                Some(y) => sums[(*arm == Arm::Candidate) as usize] += y / 2.0,
                None => ok = false,
            }
        }
        if ok {
            d.push(sums[1] - sums[0]);
            a += sums[0];
            b += sums[1];
        } else {
            skipped += 1;
        }
    }
    let n = d.len().max(1) as f64;
    (d, a / n, b / n, skipped)
}

/// The blocks' paired differences of a check (oriented, positive is worse), blocks with an
/// unmeasured trial left out: what the noise history keeps of an A/B gate.
pub(crate) fn block_differences(check: &BudgetCheck, blocks: &[BlockValues]) -> Vec<f64> {
    differences(check, blocks).0
}

/// The standard deviation of the differences and its degrees of freedom, pooled with `prior`
/// unless the blocks are noisier than it.
fn spread(d: &[f64], prior: Option<&Prior>) -> (f64, f64, NoiseSource) {
    let n = d.len() as f64;
    let mean = d.iter().sum::<f64>() / n;
    let var = d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    let own_df = n - 1.0;
    let Some(p) = prior.filter(|p| p.variance.is_finite() && p.variance > 0.0 && p.df >= 1.0)
    else {
        return (var.sqrt(), own_df, NoiseSource::Own);
    };
    let ratio = var / p.variance;
    let critical = FisherSnedecor::new(own_df, p.df)
        .map(|f| f.inverse_cdf(1.0 - NOISIER_THAN_HISTORY_LEVEL))
        .unwrap_or(f64::INFINITY);
    if ratio > critical {
        return (
            var.sqrt(),
            own_df,
            NoiseSource::NoisierThanHistory { history: p.label.clone(), ratio },
        );
    }
    let pooled = (own_df * var + p.df * p.variance) / (own_df + p.df);
    let source = NoiseSource::Pooled { history: p.label.clone(), history_df: p.df };
    (pooled.sqrt(), own_df + p.df, source)
}

/// The verdict of `check` over `blocks` at a look with one-sided nominal levels `alpha_fail`
/// and `alpha_pass` (see the module's documentation).
pub fn judge(
    check: &BudgetCheck,
    blocks: &[BlockValues],
    prior: Option<&Prior>,
    alpha_fail: f64,
    alpha_pass: f64,
) -> CheckLook {
    let (d, base, cand, skipped) = differences(check, blocks);
    let inconclusive = |reason: String| CheckLook {
        metric: check.metric,
        blocking: check.blocking,
        change: None,
        verdict: Verdict::Inconclusive,
        reason: Some(reason),
    };
    if d.len() < 2 {
        let why = match skipped {
            0 => format!("{} block(s): a paired interval needs 2", d.len()),
            s => format!("{s} of {} blocks have a trial without a usable value", blocks.len()),
        };
        return inconclusive(why);
    }
    let n = d.len() as f64;
    let mean = d.iter().sum::<f64>() / n;
    let (sd, df, noise) = spread(&d, prior);
    let se = sd / n.sqrt();
    let lower = mean - t_quantile(1.0 - alpha_fail, df) * se;
    let upper = mean + t_quantile(1.0 - alpha_pass, df) * se;
    let (b, detect) = check.limits();
    let verdict = if mean > b && lower > 0.0 {
        Verdict::Fail
    } else if mean <= b && upper < detect {
        Verdict::Pass
    } else {
        Verdict::Inconclusive
    };
    let (x, y) = (check.as_change(lower), check.as_change(upper));
    let level = |v: f64| if check.scale == Scale::Positive { v.exp() } else { v };
    let sign = if check.better == Better::Lower { 1.0 } else { -1.0 };
    let change = Change {
        value: check.as_change(mean),
        lo: x.min(y),
        hi: x.max(y),
        worse_by: mean,
        se,
        df,
        blocks: d.len() as u32,
        baseline: level(sign * base),
        candidate: level(sign * cand),
        noise,
    };
    let reason =
        (skipped > 0).then(|| format!("{skipped} block(s) without a usable value left out"));
    CheckLook {
        metric: check.metric,
        blocking: check.blocking,
        change: Some(change),
        verdict,
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(metric: &str) -> BudgetCheck {
        BudgetCheck::new(MetricPath::named(metric), 0.05, None, true, "--budget 5%").unwrap()
    }

    /// Blocks ABBA with baseline `a` and candidate `b` values, each trial off by up to
    /// `jitter` (a fixed pseudo-random pattern).
    fn blocks(a: f64, b: f64, jitter: f64, n: usize) -> Vec<BlockValues> {
        let u = |k: usize| ((k as f64 * 12.9898).sin() * 43758.5453).fract();
        (0..n)
            .map(|i| {
                let j = |k: usize| 1.0 + jitter * (u(4 * i + k) - 0.5) * 2.0;
                [
                    (Arm::Baseline, Some(a * j(0))),
                    (Arm::Candidate, Some(b * j(1))),
                    (Arm::Candidate, Some(b * j(2))),
                    (Arm::Baseline, Some(a * j(3))),
                ]
            })
            .collect()
    }

    #[test]
    fn budgets_are_checked_against_the_registry() {
        assert_eq!(check("metrics.ttft_ms.p99").detect, 0.1);
        assert_eq!(
            BudgetCheck::new(MetricPath::named("requests.failed"), 0.05, None, true, "x")
                .unwrap_err(),
            BudgetError::Count("requests.failed".into())
        );
        assert!(MetricPath::parse("nope").is_err());
        let m = MetricPath::named;
        assert!(BudgetCheck::new(m("goodput.ratio"), 1.5, None, true, "x").is_err());
        assert!(BudgetCheck::new(m("metrics.ttft_ms.p99"), 0.05, Some(0.04), true, "x").is_err());
        let thr = check("throughput.output_tokens_per_s");
        // 5% worse for a higher-is-better metric: the candidate at 95% of the baseline.
        let (b, d) = thr.limits();
        assert!((thr.oriented(95.0).unwrap() - thr.oriented(100.0).unwrap() - b).abs() < 1e-12);
        assert!((d + (0.9f64).ln()).abs() < 1e-12);
        assert!((thr.as_change(b) + 0.05).abs() < 1e-12);
        assert_eq!(check("goodput.ratio").budget_text(), "5 points worse");
        assert_eq!(check("metrics.tpot_ms.mean").detect_text(), "10% worse");
    }

    #[test]
    fn verdicts_follow_the_estimate_and_its_interval() {
        let ttft = check("metrics.ttft_ms.p99");
        // Unchanged, tight: pass.
        let v = judge(&ttft, &blocks(100.0, 100.0, 0.01, 20), None, 0.01, 0.05);
        assert_eq!(v.verdict, Verdict::Pass, "{v:?}");
        let c = v.change.unwrap();
        assert!(c.value.abs() < 0.01 && c.lo < c.value && c.hi > c.value && c.hi < 0.1, "{c:?}");
        assert_eq!((c.blocks, c.df), (20, 19.0));
        // 12% worse, tight: fail; the means are those of the arms.
        let v = judge(&ttft, &blocks(100.0, 112.0, 0.01, 20), None, 0.01, 0.05);
        assert_eq!(v.verdict, Verdict::Fail);
        let c = v.change.unwrap();
        assert!((c.value - 0.12).abs() < 0.005 && c.lo > 0.0, "{c:?}");
        assert!((c.baseline - 100.0).abs() < 2.0 && (c.candidate - 112.0).abs() < 2.0, "{c:?}");
        // 3% worse and significant: still a pass (within the budget, 10% ruled out).
        let v = judge(&ttft, &blocks(100.0, 103.0, 0.005, 20), None, 0.01, 0.05);
        assert_eq!(v.verdict, Verdict::Pass, "{v:?}");
        // 7% worse but noisy: neither.
        let noisy: Vec<BlockValues> = [0.25, -0.11, 0.25, -0.11, 0.07, 0.07]
            .iter()
            .map(|d: &f64| {
                let b = Some(100.0 * d.exp());
                [
                    (Arm::Baseline, Some(100.0)),
                    (Arm::Candidate, b),
                    (Arm::Candidate, b),
                    (Arm::Baseline, Some(100.0)),
                ]
            })
            .collect();
        let v = judge(&ttft, &noisy, None, 0.01, 0.05);
        assert_eq!(v.verdict, Verdict::Inconclusive, "{v:?}");
        // A throughput 12% lower fails; its change reads as -12%.
        let thr = check("throughput.output_tokens_per_s");
        let v = judge(&thr, &blocks(100.0, 88.0, 0.01, 20), None, 0.01, 0.05);
        assert_eq!(v.verdict, Verdict::Fail);
        assert!((v.change.as_ref().unwrap().value + 0.12).abs() < 0.005, "{v:?}");
        // A share in points: goodput 1.0 -> 0.8 fails, unchanged at 1.0 passes (no spread).
        let good = check("goodput.ratio");
        assert_eq!(
            judge(&good, &blocks(1.0, 0.8, 0.0, 5), None, 0.01, 0.05).verdict,
            Verdict::Fail
        );
        assert_eq!(
            judge(&good, &blocks(1.0, 1.0, 0.0, 5), None, 0.01, 0.05).verdict,
            Verdict::Pass
        );
    }

    #[test]
    fn too_few_blocks_or_unusable_values_are_inconclusive_and_say_why() {
        let ttft = check("metrics.ttft_ms.p99");
        let v = judge(&ttft, &blocks(100.0, 100.0, 0.0, 1), None, 0.01, 0.05);
        assert_eq!(v.verdict, Verdict::Inconclusive);
        assert!(v.reason.unwrap().contains("needs 2"));
        let mut bad = blocks(100.0, 100.0, 0.01, 3);
        for b in &mut bad {
            b[1].1 = None;
        }
        let v = judge(&ttft, &bad, None, 0.01, 0.05);
        assert!(v.reason.unwrap().contains("3 of 3 blocks"), "{:?}", v.change);
        let mut some = blocks(100.0, 100.0, 0.01, 10);
        some[3][2].1 = Some(0.0);
        let v = judge(&ttft, &some, None, 0.01, 0.05);
        assert_eq!(v.change.unwrap().blocks, 9);
        assert!(v.reason.unwrap().contains("1 block(s)"));
    }

    #[test]
    fn a_history_is_pooled_unless_the_blocks_are_noisier() {
        let ttft = check("metrics.ttft_ms.p99");
        let b = blocks(100.0, 100.0, 0.02, 6);
        let own = judge(&ttft, &b, None, 0.01, 0.05).change.unwrap();
        // A history as noisy as the blocks: the same spread, with 60 more degrees of freedom.
        let quiet = Prior { variance: (own.se * 6f64.sqrt()).powi(2), df: 60.0, label: "h".into() };
        let pooled = judge(&ttft, &b, Some(&quiet), 0.01, 0.05).change.unwrap();
        assert_eq!(pooled.df, 65.0);
        assert!(matches!(pooled.noise, NoiseSource::Pooled { .. }));
        assert!(pooled.hi - pooled.lo < own.hi - own.lo, "{own:?} {pooled:?}");
        let tiny = Prior { variance: 1e-8, df: 60.0, label: "h".into() };
        let noisy = judge(&ttft, &b, Some(&tiny), 0.01, 0.05).change.unwrap();
        assert!(matches!(noisy.noise, NoiseSource::NoisierThanHistory { .. }), "{noisy:?}");
        assert_eq!(noisy.df, 5.0);
    }
}
