//! The regression budgets `adr new` proposes (the record's Budget table, read back by
//! `adr::parse` and enforced by `bench ab`): for each blocking or warning metric of the matrix
//! on a positive scale that the chosen row's trial set estimates, from its run-to-run noise and
//! the measured difference against the baseline.
//!
//! - The noise: `s`, the standard deviation of the log values over the chosen set's trials
//!   ([`infergate_model::stats::noise::run_noise`]).
//! - What the A/B gate sees at that noise: `d = exp((z₁₋α + z₀.₉₅)·s·sqrt(2/n)) − 1` with `n` the
//!   trials per arm of the default design's last look (2 per block, `infergate_model::ab::design::TARGET_BLOCKS`
//!   blocks) and `α` the gate's fail level over the blocking metrics. Its trials are shorter
//!   than the record's, so this is the whole-trial floor of what it can resolve.
//! - The budget: the default (`infergate_model::ab::DEFAULT_BUDGET`), or half of `d` rounded up to a
//!   whole percent when that is larger, so the detect size (twice the budget) is one the gate
//!   can see. A budget at least as large as the measured gain's lower end is said to be: a
//!   regression that undoes the change could pass it.

use infergate_model::stats::noise::{normal_quantile, run_noise};
use infergate_model::summary::Scale;

use super::draft::{Body, LEFT, Table};
use crate::thresholds::Action;
use infergate_model::metric::MetricPath;

/// A proposed budget.
#[derive(Clone, Debug, PartialEq)]
pub struct ProposedBudget {
    pub metric: MetricPath,
    pub action: Action,
    /// Fraction worse (0.05).
    pub worse_by: f64,
    /// The run CV of the chosen set's trials.
    pub run_cv: f64,
    /// What the default A/B design resolves at that noise (fraction).
    pub resolves: f64,
    /// The chosen row against the baseline, relative, with its interval; `None` without
    /// estimates on both sides.
    pub measured: Option<(f64, Option<f64>, Option<f64>)>,
}

/// The change the default A/B design resolves at 95% power for log spread `s` across
/// `blocking` blocking metrics.
pub fn resolvable(s: f64, blocking: usize) -> f64 {
    let alpha = infergate_model::ab::DEFAULT_ALPHA_FAIL / blocking.max(1) as f64;
    let n = 2.0 * infergate_model::ab::design::TARGET_BLOCKS as f64;
    ((normal_quantile(1.0 - alpha) + normal_quantile(0.95)) * s * (2.0 / n).sqrt()).exp_m1()
}

/// The budget for a metric of log spread `s`.
pub fn budget_for(s: f64, blocking: usize) -> f64 {
    let half = (resolvable(s, blocking) / 2.0 * 100.0).ceil() / 100.0;
    infergate_model::ab::DEFAULT_BUDGET.max(half)
}

/// One metric's proposal from the chosen set's per-trial values; `None` for a metric that is
/// not on a positive scale or without two positive trial values.
pub fn propose(
    metric: MetricPath,
    action: Action,
    per_trial: &[Option<f64>],
    blocking: usize,
    measured: Option<(f64, Option<f64>, Option<f64>)>,
) -> Option<ProposedBudget> {
    if metric.scale() != Scale::Positive {
        return None;
    }
    let noise = run_noise(per_trial);
    let s = noise.log_sd?;
    Some(ProposedBudget {
        metric,
        action,
        worse_by: budget_for(s, blocking),
        run_cv: noise.cv.map_or(s, |c| c.0),
        resolves: resolvable(s, blocking),
        measured,
    })
}

fn pct(v: f64) -> String {
    format!("{}%", infergate_model::stats::sig_text(v * 100.0))
}

/// The record's budgets paragraph and table.
pub fn render(o: &mut Body, proposed: &[ProposedBudget], chosen_label: &str) {
    if proposed.is_empty() {
        return;
    }
    o.line(format_args!(
        "\nRegression budgets (`cargo xtask bench ab`: the candidate measured beside the baseline \
         in one job, decided on the paired difference; an absolute gate and the alerts do not \
         evaluate them). Proposed from {chosen_label}'s run-to-run noise: the default {} worse, \
         or half of what the A/B gate's default design resolves at that noise when that is \
         larger; the gate must catch twice the budget (Detects).",
        pct(infergate_model::ab::DEFAULT_BUDGET)
    ));
    o.push('\n');
    let head =
        ["Metric", "Budget", "Detects", "Action", "Run CV", "A/B resolves", "Measured change"];
    let mut table = Table::new(head.map(|h| (h, LEFT)));
    let mut undoes = Vec::new();
    for p in proposed {
        let measured = match p.measured {
            Some((v, Some(lo), Some(hi))) => {
                format!("{} [{}, {}]", signed(v), signed(lo), signed(hi))
            }
            Some((v, _, _)) => format!("{} (no interval)", signed(v)),
            None => crate::text::BLANK.to_string(),
        };
        table.row(vec![
            format!("`{}`", p.metric),
            pct(p.worse_by),
            pct(2.0 * p.worse_by),
            p.action.to_string(),
            pct(p.run_cv),
            pct(p.resolves),
            measured,
        ]);
        if let Some(gain) = gain_floor(p)
            && p.worse_by >= gain
        {
            undoes.push(format!("`{}` (gain at least {})", p.metric, pct(gain)));
        }
    }
    o.table(table);
    if !undoes.is_empty() {
        o.line(format_args!(
            "\nA budget as large as the measured gain lets a regression undo the change and \
             pass: {}. Narrow it by hand (more trials per arm) if the gain is the point of this \
             record.",
            undoes.join(", ")
        ));
    }
}

fn signed(v: f64) -> String {
    let s = pct(v);
    if v > 0.0 { format!("+{s}") } else { s }
}

/// The lower end of the gain the chosen row measured over the baseline, as a positive
/// fraction in the metric's better direction; `None` without a significant gain.
fn gain_floor(p: &ProposedBudget) -> Option<f64> {
    let (_, lo, hi) = p.measured?;
    let higher_better = p.metric.better() == infergate_model::metric::Better::Higher;
    let floor = if higher_better { lo? } else { -hi? };
    (floor > 0.0).then_some(floor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quiet_metrics_get_the_default_budget_and_noisy_ones_half_what_the_gate_resolves() {
        // 2% run CV: the design resolves about 1.2% at 3 blocking metrics; the default stands.
        assert!(resolvable(0.02, 3) < 0.02);
        assert_eq!(budget_for(0.02, 3), infergate_model::ab::DEFAULT_BUDGET);
        // 30% run CV: it resolves about 19%; the budget is half of that, rounded up.
        let r = resolvable(0.30, 3);
        assert!(r > 0.18 && r < 0.2, "{r}");
        assert_eq!(budget_for(0.30, 3), (r / 2.0 * 100.0).ceil() / 100.0);
    }

    #[test]
    fn only_positive_metrics_with_a_spread_get_a_budget() {
        let v = [Some(100.0), Some(104.0), Some(98.0)];
        let p =
            propose(MetricPath::named("metrics.ttft_ms.p99"), Action::Block, &v, 2, None).unwrap();
        assert_eq!(p.worse_by, infergate_model::ab::DEFAULT_BUDGET);
        assert!(propose(MetricPath::named("goodput.ratio"), Action::Block, &v, 2, None).is_none());
        assert!(
            propose(MetricPath::named("metrics.ttft_ms.p99"), Action::Block, &[Some(1.0)], 2, None)
                .is_none()
        );
    }

    #[test]
    fn a_budget_as_large_as_the_gain_is_named() {
        let v = [Some(100.0), Some(101.0), Some(99.0)];
        // TTFT 4% lower, interval [-6%, -2%]: a 5% budget would let it all back.
        let p = propose(
            MetricPath::named("metrics.ttft_ms.p99"),
            Action::Block,
            &v,
            2,
            Some((-0.04, Some(-0.06), Some(-0.02))),
        );
        let mut body = Body::default();
        render(&mut body, &[p.unwrap()], "Exp-1");
        let o = body.markdown();
        assert!(o.contains("| `metrics.ttft_ms.p99` | 5% | 10% | block |"), "{o}");
        assert!(o.contains("-4% [-6%, -2%]"), "{o}");
        assert!(o.contains("`metrics.ttft_ms.p99` (gain at least 2%)"), "{o}");
        // A 30% gain is not undone by a 5% budget.
        let p = propose(
            MetricPath::named("metrics.ttft_ms.p99"),
            Action::Block,
            &v,
            2,
            Some((-0.3, Some(-0.35), Some(-0.25))),
        );
        let mut body = Body::default();
        render(&mut body, &[p.unwrap()], "Exp-1");
        let o = body.markdown();
        assert!(!o.contains("gain at least"), "{o}");
    }
}
