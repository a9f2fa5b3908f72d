//! Units of limits: a limit is stored in the registry unit of its metric
//! (`infergate_model::metric::known_metrics`); a record may write it in one of these aliases, converted
//! when read: `%` for `ratio` metrics (95 % -> 0.95) and `s` for `ms` metrics (0.2 s -> 200 ms).

use infergate_model::metric::MetricPath;

/// A limit written in a unit that does not fit its metric.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unit `{}` does not fit {metric}, whose unit is `{metric_unit}`{}", shown(.written), aliases(.metric_unit))]
pub struct UnitError {
    /// The unit as written (trimmed; may be empty).
    pub written: String,
    pub metric: MetricPath,
    /// The registry unit of the metric.
    pub metric_unit: &'static str,
}

fn shown(written: &str) -> &str {
    if written.is_empty() { "(empty)" } else { written }
}

fn aliases(metric_unit: &str) -> &'static str {
    match metric_unit {
        "ratio" => " (or `%`)",
        "ms" => " (or `s`)",
        _ => "",
    }
}

/// Convert a limit written in `written` to the registry unit of `metric`.
/// Accepted: the registry unit itself, `%` for `ratio` metrics, `s` for `ms` metrics.
pub fn to_metric_unit(value: f64, written: &str, metric: MetricPath) -> Result<f64, UnitError> {
    let written = written.trim();
    match (metric.unit(), written) {
        (u, w) if u == w => Ok(value),
        ("ratio", "%") => Ok(tidy(value / 100.0)),
        ("ms", "s") => Ok(tidy(value * 1000.0)),
        (u, w) => Err(UnitError { written: w.to_string(), metric, metric_unit: u }),
    }
}

/// Remove binary floating-point noise from a converted value (0.9500000000000001 -> 0.95).
fn tidy(v: f64) -> f64 {
    format!("{v:.12e}").parse().unwrap_or(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_convert_only_through_documented_aliases() {
        let m = MetricPath::named;
        assert_eq!(to_metric_unit(95.0, "%", m("goodput.ratio")), Ok(0.95));
        assert_eq!(to_metric_unit(0.95, "ratio", m("goodput.ratio")), Ok(0.95));
        assert_eq!(to_metric_unit(0.2, "s", m("metrics.ttft_ms.p99")), Ok(200.0));
        assert_eq!(to_metric_unit(7.0, "%", m("error_rate")), Ok(0.07));
        let e = to_metric_unit(200.0, "%", m("metrics.ttft_ms.p99")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "unit `%` does not fit metrics.ttft_ms.p99, whose unit is `ms` (or `s`)"
        );
        assert!(to_metric_unit(1.0, "ms", m("throughput.requests_per_s")).is_err());
        let e = to_metric_unit(1.0, " ", m("goodput.ratio")).unwrap_err();
        assert_eq!(e.written, "");
        assert!(e.to_string().starts_with("unit `(empty)` does not fit goodput.ratio"), "{e}");
    }
}
