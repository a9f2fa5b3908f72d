//! A cold first trial: trial 1 an outlier above the others in a latency metric, noted beside
//! the set's estimates (which stay as they are).

use super::*;

/// Trial 1 is flagged as a cold start when its value of a latency metric is more than
/// `COLD_RATIO` times the median of the other trials ...
pub(crate) const COLD_RATIO: f64 = 1.5;
/// ... and more than `COLD_MADS` scaled median absolute deviations (MAD x 1.4826, the
/// standard deviation of normal values) of the other trials above their median.
pub(crate) const COLD_MADS: f64 = 5.0;
/// The rule needs trial 1 and at least this many others.
pub(crate) const COLD_MIN_OTHERS: usize = 2;

/// Trial 1 of a set looks like a cold start: the latency metrics where it is an outlier above
/// the other trials, and the note that says so. The set's estimates are not changed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ColdStart {
    pub metrics: Vec<ColdMetric>,
    pub note: String,
}

/// One latency metric where trial 1 is an outlier.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ColdMetric {
    pub metric: MetricPath,
    /// Trial 1's value.
    pub first: f64,
    /// The median of the other trials' values.
    pub median_others: f64,
}

/// Whether `first` is an outlier above `others` by the documented rule: at least
/// [`COLD_MIN_OTHERS`] others, `first > COLD_RATIO x median` and
/// `first > median + COLD_MADS x 1.4826 x MAD` (a MAD of 0, identical others, leaves the ratio
/// alone to decide). Returns the others' median when it is.
pub(crate) fn is_cold(first: f64, others: &[f64]) -> Option<f64> {
    if others.len() < COLD_MIN_OTHERS || !first.is_finite() || others.iter().any(|v| !v.is_finite())
    {
        return None;
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        let n = v.len();
        if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
    };
    let med = median(&mut others.to_vec());
    let mad = median(&mut others.iter().map(|v| (v - med).abs()).collect());
    (med > 0.0 && first > COLD_RATIO * med && first > med + COLD_MADS * 1.4826 * mad).then_some(med)
}

/// A latency metric's name in a note: `TTFT P99`, `E2E mean`.
pub(super) fn metric_words(metric: MetricPath) -> String {
    let label = metric.label();
    match metric.reading() {
        Reading::Latency { stat, .. } | Reading::ScheduleLag(stat) => match stat.key() {
            p if p.starts_with('p') => format!("{label} {}", p.to_uppercase()),
            key => format!("{label} {key}"),
        },
        _ => label.to_string(),
    }
}

/// The cold-start check of a set over `per_trial` values by metric: every latency metric
/// (`metrics.*`, unit ms) whose trial-1 value [`is_cold`] against the rest. `None` when no
/// metric is, or the set has fewer than `1 + COLD_MIN_OTHERS` trials.
pub fn cold_start<'a>(
    per_trial: impl IntoIterator<Item = (MetricPath, &'a [Option<f64>])>,
) -> Option<ColdStart> {
    let mut metrics = Vec::new();
    for (metric, values) in per_trial {
        let latency = matches!(metric.reading(), Reading::Latency { plateau: false, .. });
        let Some((Some(first), rest)) = values.split_first() else { continue };
        let others: Option<Vec<f64>> = rest.iter().copied().collect();
        let Some(others) = others.filter(|_| latency) else { continue };
        if let Some(median_others) = is_cold(*first, &others) {
            metrics.push(ColdMetric { metric, first: *first, median_others });
        }
    }
    // The most striking first: the largest ratio.
    metrics.sort_by(|a, b| (b.first / b.median_others).total_cmp(&(a.first / a.median_others)));
    let top = metrics.first()?;
    let also: Vec<String> = metrics[1..].iter().map(|m| metric_words(m.metric)).collect();
    let also = if also.is_empty() { String::new() } else { format!(" (also {})", also.join(", ")) };
    let note = format!(
        "trial 1 looks like a cold start: {} {} ms against a median of {} ms of the others{also}; \
         rerun with --warmup-trials 1",
        metric_words(top.metric),
        round_ms(top.first),
        round_ms(top.median_others),
    );
    Some(ColdStart { metrics, note })
}

/// Milliseconds in a note: whole above 100, else 3 significant digits.
pub(super) fn round_ms(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else {
        let s = format!("{v:.2}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}
