//! Two trial sets (or runs) metric by metric: each side's estimate with its interval, the
//! difference and whether it is significant ([`crate::stats::difference`]). What
//! `cargo xtask compare A B` prints and writes as `compare.json`, and what `adr new` shows in
//! its matrix.

use serde::{Deserialize, Serialize};

use crate::metric::{Better, MetricPath};
use crate::stats::{Difference, Estimate, Options, difference};
use crate::trials::{MetricEstimate, TrialSet};

/// The `format_version` of `compare.json`.
pub const FORMAT_VERSION: u32 = 1;

/// The metrics a comparison shows when not told otherwise: a trial set's default metrics
/// ([`crate::trials::default_metrics`]) and the failed requests.
pub fn default_metrics() -> Vec<MetricPath> {
    let failed = MetricPath::named("requests.failed");
    crate::trials::default_metrics().iter().copied().chain([failed]).collect()
}

/// One side of a comparison.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Side {
    /// As given on the command line.
    pub path: String,
    pub profile: String,
    pub trials: usize,
    /// Measured requests over all trials.
    pub requests: u64,
    /// Run ids of the trials.
    pub runs: Vec<String>,
}

/// What a metric's difference says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// Significantly better in B.
    Better,
    /// Significantly worse in B.
    Worse,
    /// The interval of the difference holds 0.
    NotSignificant,
    /// Observed counts: the difference is stated, not tested.
    NotTested,
    /// A side has no estimate.
    Blank,
}

impl Change {
    pub fn as_str(self) -> &'static str {
        match self {
            Change::Better => "better",
            Change::Worse => "worse",
            Change::NotSignificant => "no significant change",
            Change::NotTested => "not tested (counts)",
            Change::Blank => "blank",
        }
    }
}

/// One metric of a comparison.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MetricComparison {
    pub metric: MetricPath,
    pub unit: String,
    pub a: MetricEstimate,
    pub b: MetricEstimate,
    /// `b - a` (absent when a side has no estimate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub difference: Option<Difference>,
    pub change: Change,
}

impl crate::artifact::Artifact for Comparison {
    const FILE: &'static str = "compare.json";
    const VERSION: u32 = FORMAT_VERSION;
    const WHAT: &'static str = "a comparison of two trial sets";
}

/// `compare.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub format_version: u32,
    pub confidence: f64,
    pub a: Side,
    pub b: Side,
    pub metrics: Vec<MetricComparison>,
    /// What the reader must know: different profiles or scenarios, single-run sides.
    pub notes: Vec<String>,
}

fn side(path: &str, set: &TrialSet) -> Side {
    Side {
        path: path.to_string(),
        profile: set.profile().to_string(),
        trials: set.trials.len(),
        requests: set.requests(),
        runs: set.trials.iter().map(|t| t.summary.run_id.clone()).collect(),
    }
}

/// The change a difference makes, by the metric's better direction.
pub(crate) fn change_of(metric: MetricPath, d: &Difference) -> Change {
    match d.significant {
        None => Change::NotTested,
        Some(false) => Change::NotSignificant,
        Some(true) => {
            let lower_is_better = metric.better() == Better::Lower;
            if (d.absolute < 0.0) == lower_is_better { Change::Better } else { Change::Worse }
        }
    }
}

/// The difference of two estimates of `metric` and what it says.
pub fn compare_estimates(
    metric: MetricPath,
    a: Option<&Estimate>,
    b: Option<&Estimate>,
    confidence: f64,
) -> (Option<Difference>, Change) {
    let (Some(a), Some(b)) = (a, b) else { return (None, Change::Blank) };
    match difference(a, b, confidence) {
        Ok(d) => {
            let c = change_of(metric, &d);
            (Some(d), c)
        }
        Err(_) => (None, Change::Blank),
    }
}

/// Compare set `b` (the candidate) with set `a` (the baseline) over `metrics`.
pub fn compare(
    (a_path, a): (&str, &TrialSet),
    (b_path, b): (&str, &TrialSet),
    metrics: &[MetricPath],
    opts: Options,
) -> Comparison {
    let ea = a.estimates(metrics, opts);
    let eb = b.estimates(metrics, opts);
    let mut rows = Vec::new();
    for &m in metrics {
        let unit = m.unit().to_string();
        let ma = ea.get(&m).cloned().unwrap_or_else(blank);
        let mb = eb.get(&m).cloned().unwrap_or_else(blank);
        let (difference, change) =
            compare_estimates(m, ma.estimate.as_ref(), mb.estimate.as_ref(), opts.confidence);
        rows.push(MetricComparison { metric: m, unit, a: ma, b: mb, difference, change });
    }
    let mut notes = Vec::new();
    if a.profile() != b.profile() {
        notes.push(format!(
            "A measured profile `{}` and B profile `{}`: a difference may be the scenario's, not \
             the configuration's",
            a.profile(),
            b.profile()
        ));
    }
    for (name, set) in [("A", a), ("B", b)] {
        if set.trials.len() == 1 {
            notes.push(format!(
                "{name} is a single run: its intervals count request-to-request variance only, \
                 so a significant difference may be run-to-run noise; measure trials \
                 (`cargo xtask bench --trials 3`)"
            ));
        }
        if set.trials.iter().any(|t| t.summary.simulated) {
            notes.push(format!("{name} ran against the engine simulator"));
        }
    }
    Comparison {
        format_version: FORMAT_VERSION,
        confidence: opts.confidence,
        a: side(a_path, a),
        b: side(b_path, b),
        metrics: rows,
        notes,
    }
}

fn blank() -> MetricEstimate {
    MetricEstimate { per_trial: Vec::new(), estimate: None, blank: Some("not asked".into()) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::{Method, t_estimate};

    #[test]
    fn changes_follow_the_metric_s_better_direction() {
        let low = t_estimate(&[100.0, 101.0, 99.0]);
        let high = t_estimate(&[150.0, 151.0, 149.0]);
        let c = |m: &str, a: &Estimate, b: &Estimate| {
            compare_estimates(MetricPath::named(m), Some(a), Some(b), 0.95).1
        };
        // Latency up: worse; throughput up: better.
        assert_eq!(c("metrics.ttft_ms.p99", &low, &high), Change::Worse);
        assert_eq!(c("metrics.ttft_ms.p99", &high, &low), Change::Better);
        assert_eq!(c("throughput.output_tokens_per_s", &low, &high), Change::Better);
        assert_eq!(c("goodput.ratio", &high, &low), Change::Worse);
        // Overlapping noise: not significant.
        let noisy = t_estimate(&[90.0, 115.0, 104.0]);
        assert_eq!(c("metrics.ttft_ms.p99", &low, &noisy), Change::NotSignificant);
        // Counts are stated, not tested; a blank side is blank.
        let counts = Estimate { method: Method::Observed, ..low.clone() };
        assert_eq!(c("requests.failed", &counts, &counts), Change::NotTested);
        assert_eq!(
            compare_estimates(MetricPath::named("error_rate"), None, Some(&low), 0.95).1,
            Change::Blank
        );
    }
}
