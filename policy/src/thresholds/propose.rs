//! Limits proposed from measured values (`adr new` writes them into a record). From an
//! estimate with an interval ([`propose_from_estimate`]): the interval's unfavourable end moved
//! by the headroom (`infergate_model::stats::propose_limit`), with the smallest regression the limit
//! detects. From a value without an interval ([`propose`]): the value moved by the headroom in
//! the metric's worse direction. Either way rounded away from the value.

use infergate_model::Summary;
use infergate_model::metric::{Better, MetricPath, Scale};
use infergate_model::stats::{DetectableChange, Direction, Estimate, Method};

use super::rule::{Action, Comparator};

/// Default headroom of proposed thresholds.
pub const DEFAULT_HEADROOM: f64 = 0.10;
/// Significant digits of proposed limits.
pub const LIMIT_DIGITS: i32 = 3;

/// A proposed threshold for one metric of a measured run.
#[derive(Clone, Debug, PartialEq)]
pub struct Proposed {
    /// The metric of the registry.
    pub metric: MetricPath,
    pub comparator: Comparator,
    /// In `unit`, the registry unit of the metric.
    pub limit: f64,
    pub unit: &'static str,
    pub action: Action,
    /// The value the limit was proposed from.
    pub measured: f64,
    /// The estimate (with its interval) the limit was proposed from; `None`: the value alone.
    pub estimate: Option<Estimate>,
    /// The smallest regression the limit detects with 95% power at the measured noise, when
    /// it can be computed (an interval, a positive value).
    pub detects: Option<DetectableChange>,
}

/// Power at which a record states the smallest regression its gate detects.
pub const DETECT_POWER: f64 = 0.95;

/// The threshold proposed for `metric` of run `run` ([`propose_limit`]); `None` when the run
/// did not measure it.
pub fn propose(
    run: &Summary,
    metric: MetricPath,
    action: Action,
    headroom: f64,
) -> Option<Proposed> {
    let def = metric.def();
    let measured = run.gated_metric(metric)?;
    let (comparator, limit) = propose_limit(measured, def.better, headroom);
    Some(Proposed {
        metric,
        comparator,
        limit,
        unit: def.unit,
        action,
        measured,
        estimate: None,
        detects: None,
    })
}

/// The threshold proposed for `metric` from its estimate: the interval's unfavourable end plus
/// `headroom` of the estimate (`infergate_model::stats::propose_limit`), rounded away from the value to
/// [`LIMIT_DIGITS`] significant digits; with the smallest regression it detects. Observed
/// counts have no interval: their limit is [`propose_limit`]'s from the worst trial.
pub fn propose_from_estimate(
    metric: MetricPath,
    estimate: &Estimate,
    action: Action,
    headroom: f64,
) -> Option<Proposed> {
    let def = metric.def();
    if estimate.method == Method::Observed {
        let worst = if def.better == Better::Lower { estimate.hi } else { estimate.lo };
        let (comparator, limit) = propose_limit(worst, def.better, headroom);
        return Some(Proposed {
            metric,
            comparator,
            limit,
            unit: def.unit,
            action,
            measured: estimate.value,
            estimate: Some(estimate.clone()),
            detects: None,
        });
    }
    let direction = match def.better {
        Better::Lower => Direction::LowerIsBetter,
        Better::Higher => Direction::HigherIsBetter,
    };
    let raw = infergate_model::stats::propose_limit(estimate, headroom, direction).ok()?;
    let up = def.better == Better::Lower;
    // Every known metric is at least 0: a floor below 0 is the floor 0 (it holds for any value,
    // and the record says that it detects nothing).
    let limit = round_sig(raw.limit, LIMIT_DIGITS, up).max(0.0);
    let rounded = infergate_model::stats::ProposedLimit { comparator: raw.comparator, limit };
    let detects =
        infergate_model::stats::min_detectable_change(estimate, &rounded, DETECT_POWER).ok();
    Some(Proposed {
        metric,
        comparator: raw.comparator,
        limit,
        unit: def.unit,
        action,
        measured: estimate.value,
        estimate: Some(estimate.clone()),
        detects,
    })
}

/// Why no value of `metric` can break `value <comparator> limit`, when none can: every known
/// metric is at least 0 (a cosine at least -1), a share at most 1, so `>= 0` or `<= 1` of a
/// share holds for every run and decides nothing. `None`: a run can break it.
pub fn unbreakable(metric: MetricPath, comparator: Comparator, limit: f64) -> Option<String> {
    let def = metric.def();
    let floor = if def.path == "extra.acceptance.numeric.cos_min" { -1.0 } else { 0.0 };
    let ceiling = (def.scale == Scale::Share).then_some(1.0);
    let holds = match comparator {
        Comparator::Ge => limit <= floor,
        Comparator::Gt => limit < floor,
        Comparator::Le => ceiling.is_some_and(|c| limit >= c) || limit == f64::INFINITY,
        Comparator::Lt => ceiling.is_some_and(|c| limit > c),
        Comparator::Eq => false,
    };
    holds.then(|| {
        let range = match ceiling {
            Some(c) => format!("within [{floor}, {c}]"),
            None => format!("at least {floor}"),
        };
        format!(
            "`{metric} {comparator} {}` holds for every value the metric can take ({range}): no \
             run can fail it",
            crate::text::num(limit)
        )
    })
}

/// A proposed limit: the measured value moved by the headroom in the metric's worse direction
/// and rounded away from the measured value to [`LIMIT_DIGITS`] significant digits.
/// Lower-is-better metrics get `<= value * (1 + h)`, higher-is-better metrics
/// `>= value * (1 - h)`.
pub fn propose_limit(value: f64, better: Better, headroom: f64) -> (Comparator, f64) {
    match better {
        Better::Lower => (Comparator::Le, round_sig(value * (1.0 + headroom), LIMIT_DIGITS, true)),
        Better::Higher => {
            (Comparator::Ge, round_sig(value * (1.0 - headroom), LIMIT_DIGITS, false))
        }
    }
}

/// Round to `digits` significant digits, up (toward +inf) or down, ignoring binary noise below
/// 1e-9 of the last digit.
pub fn round_sig(x: f64, digits: i32, up: bool) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let exp = x.abs().log10().floor() as i32 - (digits - 1);
    let scaled = x / 10f64.powi(exp);
    let r = if up { (scaled - 1e-9).ceil() } else { (scaled + 1e-9).floor() };
    let decimals = (-exp).max(0) as usize;
    format!("{:.*}", decimals, r * 10f64.powi(exp)).parse().unwrap_or(x)
}

/// A headroom that is not a percentage (or fraction) from 0 up to 100%.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "headroom `{0}` must be a percentage like `10%` (or a fraction like 0.1) from 0 up to 100%"
)]
pub struct BadHeadroom(pub String);

/// Parse a headroom: `10%` or a fraction `0.1`; at least 0 and below 100%.
pub fn parse_headroom(s: &str) -> Result<f64, BadHeadroom> {
    let t = s.trim();
    let v = match t.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|v| v / 100.0),
        None => t.parse::<f64>(),
    };
    match v {
        Ok(v) if (0.0..1.0).contains(&v) => Ok(v),
        _ => Err(BadHeadroom(t.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_move_by_the_headroom_toward_worse_and_round_outward() {
        assert_eq!(propose_limit(182.345, Better::Lower, 0.10), (Comparator::Le, 201.0));
        assert_eq!(propose_limit(100.0, Better::Lower, 0.10), (Comparator::Le, 110.0));
        assert_eq!(propose_limit(0.97, Better::Higher, 0.10), (Comparator::Ge, 0.873));
        assert_eq!(propose_limit(1.0, Better::Higher, 0.10), (Comparator::Ge, 0.9));
        assert_eq!(propose_limit(0.0342, Better::Lower, 0.10), (Comparator::Le, 0.0377));
        assert_eq!(propose_limit(12345.0, Better::Higher, 0.05), (Comparator::Ge, 11700.0));
        assert_eq!(propose_limit(0.0, Better::Lower, 0.10), (Comparator::Le, 0.0));
        assert_eq!(propose_limit(50.0, Better::Lower, 0.0), (Comparator::Le, 50.0));
    }

    #[test]
    fn limits_from_estimates_sit_beyond_the_interval_and_state_what_they_detect() {
        let e = crate::test_support::estimate(100.0, 90.0, 110.0);
        // Lower is better: hi + 10% of the value = 120.
        let p = propose_from_estimate(
            MetricPath::named("metrics.ttft_ms.p99"),
            &e,
            Action::Block,
            0.10,
        )
        .unwrap();
        assert_eq!((p.comparator, p.limit, p.measured), (Comparator::Le, 120.0, 100.0));
        let d = p.detects.unwrap();
        assert!(d.relative > 0.2 && d.power == DETECT_POWER, "{d:?}");
        // Higher is better: lo - 10% of the value = 0.851 - 0.09.
        let p = propose_from_estimate(
            MetricPath::named("goodput.ratio"),
            &Estimate { value: 0.9, lo: 0.851, hi: 0.95, ..e.clone() },
            Action::Block,
            0.10,
        )
        .unwrap();
        assert_eq!((p.comparator, p.limit), (Comparator::Ge, 0.761));
        // Observed counts: from the worst trial.
        let counts = Estimate { method: Method::Observed, value: 1.0, lo: 0.0, hi: 2.0, ..e };
        let p = propose_from_estimate(
            MetricPath::named("requests.failed"),
            &counts,
            Action::Block,
            0.10,
        )
        .unwrap();
        assert_eq!((p.limit, p.detects), (2.2, None));
        assert!(MetricPath::parse("metrics.nope").is_err());
        // An interval reaching 0: the floor is 0, not below, and it detects no regression.
        let wide = Estimate { value: 0.73, lo: 0.0, hi: 1.0, method: Method::TInterval, ..e };
        let p =
            propose_from_estimate(MetricPath::named("goodput.ratio"), &wide, Action::Block, 0.10)
                .unwrap();
        assert_eq!((p.limit, p.detects), (0.0, None));
    }

    #[test]
    fn rounding_is_outward_and_ignores_binary_noise() {
        assert_eq!(round_sig(201.0000000001, 3, true), 201.0);
        assert_eq!(round_sig(201.1, 3, true), 202.0);
        assert_eq!(round_sig(0.8729999, 3, false), 0.872);
        assert_eq!(round_sig(-1.234, 2, true), -1.2);
        assert!(round_sig(f64::NAN, 3, true).is_nan());
    }

    #[test]
    fn headroom_inputs() {
        assert_eq!(parse_headroom("10%"), Ok(0.1));
        assert_eq!(parse_headroom("0.25"), Ok(0.25));
        assert_eq!(parse_headroom("0%"), Ok(0.0));
        assert_eq!(parse_headroom(" 100% "), Err(BadHeadroom("100%".into())));
        assert!(parse_headroom("-5%").is_err());
        assert!(parse_headroom("ten").unwrap_err().to_string().contains("`10%`"));
    }
}
