//! A rollback condition over an engine's own Prometheus series: which series stands for a
//! registry metric on vLLM, SGLang and llama.cpp ([`source`]), the PromQL that `adr alerts`
//! writes for it ([`promql`]), and the same value computed from two scrapes of `/metrics`
//! ([`Window::value`], what `cargo xtask watch` evaluates), so both read one definition.
//!
//! Only what the engine measures itself is exported: a metric with no server-side series (the
//! client's goodput, throughput that follows the offered load, cost) is [`NotExportable`] with
//! the reason, never approximated from another series. Latencies are histograms in seconds;
//! the value is in the registry unit (ms).
//!
//! **A latency quantile is decided on the engine's buckets** ([`resolve`]): the engine's
//! histogram cannot tell where a quantile lies inside a bucket (Prometheus's interpolation puts
//! a P99 near the top of its bucket as soon as the tail enters it), so `P99 above L` is
//! checked as "more than 1% of the window's requests took longer than B", B the lowest bucket
//! bound at or above L ([`Source::ShareOver`], the SLO-as-ratio form). When L is a bound this is
//! the condition exactly; otherwise B is the effective limit the buckets allow, and both
//! commands say so. The bounds are read from `/metrics` by `watch` and are each engine's
//! defaults ([`default_bounds`]) in the rules `adr alerts` writes.

use infergate_model::EngineKind;
use infergate_model::engine_series::{llamacpp, sglang, vllm};
use infergate_model::metric::{MetricPath, Reading, Statistic};
use infergate_model::promtext::Exposition;

use super::rollback::{RollbackCondition, Window};
use super::rule::Comparator;

/// The engine whose names an exposition uses (its metric prefix), if any.
pub fn detect_engine(e: &Exposition) -> Option<EngineKind> {
    EngineKind::with_metrics().find(|eng| {
        let prefix = format!("{}:", eng.metric_prefix().unwrap_or_default());
        e.samples.iter().any(|s| s.name.starts_with(&prefix))
    })
}

/// Where a registry metric's value comes from on one engine.
#[derive(Clone, Debug, PartialEq)]
pub enum Source {
    /// A quantile (0..1) of a histogram in seconds, from the bucket increases over the window;
    /// the value in ms.
    Quantile { family: &'static str, q: f64 },
    /// The mean of a histogram in seconds (sum increase / count increase); the value in ms.
    Mean { family: &'static str },
    /// The highest value of a gauge over the window, the first of these names that exists.
    GaugeMax { names: &'static [&'static str] },
    /// The increase of a counter over the window.
    Increase { name: &'static str },
    /// The share (0..1) of a histogram's observations in the window above the bucket bound
    /// `bound_s` (seconds): a quantile `q` breaks above `bound_s` exactly when this share is
    /// more than `max_share = 1 - q`.
    ShareOver { family: &'static str, q: f64, bound_s: f64, max_share: f64 },
}

impl Source {
    /// The histogram the value comes from, for histogram sources.
    pub fn family(&self) -> Option<&'static str> {
        match self {
            Source::Quantile { family, .. }
            | Source::Mean { family }
            | Source::ShareOver { family, .. } => Some(family),
            _ => None,
        }
    }

    /// Whether `value` breaks condition `c`: a share above its `max_share`, else the
    /// condition's own comparison.
    pub fn breaks(&self, c: &RollbackCondition, value: f64) -> bool {
        match self {
            Source::ShareOver { max_share, .. } => value > *max_share,
            _ => c.holds(value),
        }
    }
}

/// Each engine's default bucket bounds (seconds, without `+Inf`) of a latency histogram: what
/// `adr alerts` writes its rules for (`watch` reads the bounds from `/metrics`). vLLM's from
/// `vllm/v1/metrics/loggers.py`, SGLang's from `sglang/srt/metrics/collector.py` (both
/// configurable: SGLang's `--bucket-time-to-first-token` and the like).
pub fn default_bounds(family: &str) -> Option<&'static [f64]> {
    const VLLM_TTFT: &[f64] = &[
        0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
        20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
    ];
    const VLLM_TOKEN: &[f64] = &[
        0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
        20.0, 40.0, 80.0,
    ];
    const VLLM_REQUEST: &[f64] = &[
        0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
        240.0, 480.0, 960.0, 1920.0, 7680.0,
    ];
    const SGLANG_TTFT: &[f64] = &[
        0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0,
        200.0, 400.0,
    ];
    const SGLANG_E2E: &[f64] = &[
        0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0,
        200.0, 400.0, 800.0,
    ];
    const SGLANG_ITL: &[f64] = &[
        0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060, 0.080,
        0.100, 0.200, 0.400, 0.600, 0.800, 1.0, 2.0, 4.0, 6.0, 8.0,
    ];
    Some(match family {
        vllm::TIME_TO_FIRST_TOKEN_SECONDS => VLLM_TTFT,
        vllm::REQUEST_TIME_PER_OUTPUT_TOKEN_SECONDS | vllm::INTER_TOKEN_LATENCY_SECONDS => {
            VLLM_TOKEN
        }
        vllm::E2E_REQUEST_LATENCY_SECONDS | vllm::REQUEST_QUEUE_TIME_SECONDS => VLLM_REQUEST,
        sglang::TIME_TO_FIRST_TOKEN_SECONDS => SGLANG_TTFT,
        sglang::E2E_REQUEST_LATENCY_SECONDS => SGLANG_E2E,
        sglang::INTER_TOKEN_LATENCY_SECONDS => SGLANG_ITL,
        _ => return None,
    })
}

/// A latency quantile condition on the buckets `bounds` (seconds, ascending, finite): the
/// share of requests over the lowest bound at or above the limit ([`Source::ShareOver`]);
/// other sources unchanged. Refused when the limit lies above the highest finite bound (no
/// bucket separates it from `+Inf`).
pub fn resolve(
    src: &Source,
    c: &RollbackCondition,
    bounds: &[f64],
) -> Result<Source, NotExportable> {
    let Source::Quantile { family, q } = *src else { return Ok(src.clone()) };
    if !matches!(c.comparator, Comparator::Gt | Comparator::Ge) {
        return Ok(src.clone());
    }
    let limit_s = c.limit / 1000.0;
    match bounds.iter().copied().filter(|b| b.is_finite()).find(|b| *b >= limit_s - 1e-12) {
        Some(bound_s) => Ok(Source::ShareOver { family, q, bound_s, max_share: round9(1.0 - q) }),
        None => Err(NotExportable(format!(
            "{family} has no bucket bound at or above {} ms (its highest is {} ms): the \
             engine's histogram cannot tell a quantile above it from +Inf",
            num(c.limit),
            bounds
                .iter()
                .copied()
                .filter(|b| b.is_finite())
                .reduce(f64::max)
                .map_or("none".into(), |b| num(b * 1000.0))
        ))),
    }
}

/// The rollback limit a latency quantile condition can be decided at on `engine`'s default
/// buckets: the lowest bucket bound at or above its limit, in ms, with the histogram. `None`
/// when the metric is no latency quantile with a histogram on that engine; `Err` (why) when no
/// bound lies at or above the limit.
pub fn resolvable_limit(
    c: &RollbackCondition,
    engine: EngineKind,
) -> Option<Result<(f64, &'static str), NotExportable>> {
    let src = source(c.metric, engine).ok()?;
    let Source::Quantile { family, .. } = src else { return None };
    let bounds = default_bounds(family)?;
    Some(match resolve(&src, c, bounds) {
        Ok(Source::ShareOver { bound_s, .. }) => Ok((round9(bound_s * 1000.0), family)),
        Ok(_) => return None,
        Err(why) => Err(why),
    })
}

fn round9(v: f64) -> f64 {
    (v * 1e9).round() / 1e9
}

fn num(v: f64) -> String {
    crate::text::num(v)
}

/// How a resolved condition is decided, in words: `more than 1% of requests over 500 ms`, and
/// whether that is the record's limit or the effective one the buckets allow.
pub fn decided_as(src: &Source, c: &RollbackCondition) -> Option<String> {
    let Source::ShareOver { family, bound_s, max_share, .. } = src else { return None };
    let bound_ms = bound_s * 1000.0;
    let share =
        format!("more than {}% of requests over {} ms", num(max_share * 100.0), num(bound_ms));
    Some(if (bound_ms - c.limit).abs() < 1e-6 {
        format!("{share} ({family}'s bucket bound: the condition exactly)")
    } else {
        format!(
            "{share}: the record's {} ms lies inside a bucket of {family}, whose bound {} ms is the \
             effective limit the engine's histogram allows",
            num(c.limit),
            num(bound_ms)
        )
    })
}

/// The spellings of a bucket bound's `le` label: Rust's and Python's (`1` and `1.0`; Prometheus
/// 3 normalises to the latter), as a regular expression alternation.
fn le_spellings(b: f64) -> String {
    let plain = format!("{b}");
    let python = if b.fract() == 0.0 { format!("{b:.1}") } else { plain.clone() };
    if plain == python {
        plain.replace('.', "\\\\.")
    } else {
        format!("{}|{}", plain, python.replace('.', "\\\\."))
    }
}

/// Why a metric has no server-side alert on an engine.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NotExportable(pub String);

fn latency_family(engine: EngineKind, metric: &str) -> Result<&'static str, NotExportable> {
    let none = |why: &str| Err(NotExportable(why.to_string()));
    match (engine, metric) {
        (EngineKind::Vllm, "ttft_ms") => Ok(vllm::TIME_TO_FIRST_TOKEN_SECONDS),
        (EngineKind::Vllm, "tpot_ms") => Ok(vllm::REQUEST_TIME_PER_OUTPUT_TOKEN_SECONDS),
        (EngineKind::Vllm, "itl_ms") => Ok(vllm::INTER_TOKEN_LATENCY_SECONDS),
        (EngineKind::Vllm, "e2e_ms") => Ok(vllm::E2E_REQUEST_LATENCY_SECONDS),
        (EngineKind::Vllm, "queue_ms") => Ok(vllm::REQUEST_QUEUE_TIME_SECONDS),
        (EngineKind::Sglang, "ttft_ms") => Ok(sglang::TIME_TO_FIRST_TOKEN_SECONDS),
        (EngineKind::Sglang, "itl_ms") => Ok(sglang::INTER_TOKEN_LATENCY_SECONDS),
        (EngineKind::Sglang, "e2e_ms") => Ok(sglang::E2E_REQUEST_LATENCY_SECONDS),
        (EngineKind::Sglang, "tpot_ms") => {
            none("SGLang has no per-request time-per-output-token histogram (its ITL is per token)")
        }
        (EngineKind::Sglang, _) => none("SGLang exports no histogram of it"),
        (EngineKind::LlamaCpp, _) => {
            none("llama.cpp exports no latency histograms (only totals and averages)")
        }
        (EngineKind::Vllm, _) => none("vLLM exports no histogram of it"),
        (EngineKind::Trtllm | EngineKind::Tgi, _) => {
            none("infergate reads no metric names of this engine")
        }
    }
}

/// The series of `metric` (a registry path) on `engine`, or why there is none.
pub fn source(metric: MetricPath, engine: EngineKind) -> Result<Source, NotExportable> {
    if let Reading::Latency { series, stat, plateau: false } = metric.reading() {
        let family = latency_family(engine, series.key())?;
        let q = match stat {
            Statistic::Mean => return Ok(Source::Mean { family }),
            Statistic::P50 => 0.5,
            Statistic::P90 => 0.9,
            Statistic::P95 => 0.95,
            Statistic::P99 => 0.99,
            Statistic::P999 => 0.999,
            _ => {
                return Err(NotExportable(format!(
                    "a histogram gives quantiles and the mean, not the {}",
                    stat.key()
                )));
            }
        };
        return Ok(Source::Quantile { family, q });
    }
    let why = |s: &str| Err(NotExportable(s.to_string()));
    match (metric.as_str(), engine) {
        ("server.kv_cache_usage.max", EngineKind::Vllm) => {
            Ok(Source::GaugeMax { names: &[vllm::KV_CACHE_USAGE_PERC, vllm::GPU_CACHE_USAGE_PERC] })
        }
        ("server.kv_cache_usage.max", EngineKind::Sglang) => {
            Ok(Source::GaugeMax { names: &[sglang::TOKEN_USAGE] })
        }
        ("server.kv_cache_usage.max", EngineKind::LlamaCpp) => {
            Ok(Source::GaugeMax { names: &[llamacpp::KV_CACHE_USAGE_RATIO] })
        }
        ("server.preemptions", EngineKind::Vllm) => {
            Ok(Source::Increase { name: vllm::NUM_PREEMPTIONS_TOTAL })
        }
        ("server.preemptions", _) => why("the engine exports no preemption counter"),
        ("metrics.itl_jitter", _) => why("a histogram gives no standard deviation of ITL"),
        ("error_rate" | "requests.failed" | "requests.ok", _) => why(
            "the engine counts finished requests, not the ones the client saw fail (HTTP errors, \
             broken streams)",
        ),
        ("goodput.token_ratio" | "server.goodput_ratio" | "tokens.server_mismatch", _) => why(
            "it compares the engine's token counter with the tokens the client received, which \
             no engine series holds",
        ),
        (m, _) if m.starts_with("goodput.") => {
            why("goodput is each request judged against the client's SLO")
        }
        (m, _) if m.starts_with("throughput.") => {
            why("throughput follows the offered load, which production does not hold fixed")
        }
        _ => why("measured by the bench only; the engine exports no series of it"),
    }
}

/// The expression of the absent-data alert of a condition: true when its window holds no
/// observation while the engine is deployed: a histogram's count did not increase, or the
/// series that existed within the last day is absent now (the target is down or stopped
/// exporting it). An engine that was never scraped (another engine's group) raises nothing.
pub fn absent_promql(src: &Source, c: &RollbackCondition) -> String {
    let w = c.window;
    let (series, idle) = match src {
        Source::GaugeMax { names } => (format!("{{__name__=~\"{}\"}}", names.join("|")), None),
        Source::Increase { name } => (name.to_string(), None),
        _ => {
            let count = format!("{}_count", src.family().unwrap_or_default());
            let idle = format!("sum(increase({count}[{w}])) == 0");
            (count, Some(idle))
        }
    };
    let gone =
        format!("absent_over_time({series}[{w}]) and on() count(present_over_time({series}[1d]))");
    match idle {
        Some(idle) => format!("{idle} or ({gone})"),
        None => gone,
    }
}

/// The alert expression: the value in the registry unit, compared as the condition breaks.
pub fn promql(src: &Source, c: &RollbackCondition) -> String {
    let w = c.window;
    let value = match src {
        Source::Quantile { family, q } => {
            format!("histogram_quantile({q}, sum by (le) (rate({family}_bucket[{w}]))) * 1000")
        }
        Source::Mean { family } => {
            format!("sum(rate({family}_sum[{w}])) / sum(rate({family}_count[{w}])) * 1000")
        }
        Source::GaugeMax { names } => {
            format!("max(max_over_time({{__name__=~\"{}\"}}[{w}]))", names.join("|"))
        }
        Source::Increase { name } => format!("sum(increase({name}[{w}]))"),
        Source::ShareOver { family, bound_s, max_share, .. } => {
            let count = format!("sum(rate({family}_count[{w}]))");
            return format!(
                "({count} - sum(rate({family}_bucket{{le=~\"{}\"}}[{w}]))) / {count} > {max_share}",
                le_spellings(*bound_s)
            );
        }
    };
    let op = match c.comparator {
        Comparator::Eq => "!=",
        other => other.as_str(),
    };
    format!("{value} {op} {}", c.limit)
}

/// A scrape of `/metrics`: when (seconds on any monotonic clock) and what.
#[derive(Clone, Debug)]
pub struct Scrape {
    pub at_s: f64,
    pub exposition: Exposition,
}

/// The highest sample named `name` (over every label set).
fn gauge_max(e: &Exposition, name: &str) -> Option<f64> {
    e.samples.iter().filter(|s| s.name == name).map(|s| s.value).reduce(f64::max)
}

/// Sum of the `_bucket` samples of `family` by `le` (over every other label), ascending.
fn buckets(e: &Exposition, family: &str) -> Vec<(f64, f64)> {
    let name = format!("{family}_bucket");
    let mut out: Vec<(f64, f64)> = Vec::new();
    for s in e.samples.iter().filter(|s| s.name == name) {
        let Some(le) = s.label("le").and_then(|l| l.parse::<f64>().ok()) else { continue };
        match out.iter_mut().find(|(b, _)| *b == le) {
            Some(slot) => slot.1 += s.value,
            None => out.push((le, s.value)),
        }
    }
    out.sort_by(|a, b| a.0.total_cmp(&b.0));
    out
}

/// Prometheus's `histogram_quantile` over cumulative bucket counts (ascending `le`, the last
/// `+Inf`): linear interpolation inside the bucket that holds the rank; the highest finite
/// bound when the rank falls in `+Inf`; `None` without observations.
pub fn histogram_quantile(q: f64, buckets: &[(f64, f64)]) -> Option<f64> {
    let (last_le, total) = *buckets.last()?;
    if !last_le.is_infinite() || total <= 0.0 || buckets.len() < 2 {
        return None;
    }
    let rank = q * total;
    let i = buckets.iter().position(|(_, c)| *c >= rank)?;
    if i == buckets.len() - 1 {
        return Some(buckets[buckets.len() - 2].0);
    }
    let (upper, count) = buckets[i];
    let (lower, below) =
        if i == 0 { (if upper > 0.0 { 0.0 } else { upper }, 0.0) } else { buckets[i - 1] };
    let in_bucket = count - below;
    if in_bucket <= 0.0 {
        return Some(upper);
    }
    Some(lower + (upper - lower) * (rank - below) / in_bucket)
}

/// The scrapes a window covers at the newest one: from the last scrape at or before
/// `newest - window` (or the oldest kept) to the newest.
fn covered(scrapes: &[Scrape], window: Window) -> Option<(&Scrape, &Scrape)> {
    let newest = scrapes.last()?;
    let from = newest.at_s - window.seconds as f64;
    let start = scrapes.iter().rposition(|s| s.at_s <= from).unwrap_or(0);
    let oldest = &scrapes[start];
    (oldest.at_s < newest.at_s).then_some((oldest, newest))
}

impl Window {
    /// The value of `src` over this window ending at the newest scrape (scrapes in time order),
    /// as `promql` computes it; `None` without two scrapes or without observations.
    pub fn value(self, src: &Source, scrapes: &[Scrape]) -> Option<f64> {
        let (old, new) = covered(scrapes, self)?;
        match src {
            Source::Quantile { family, q } => {
                let (a, b) = (buckets(&old.exposition, family), buckets(&new.exposition, family));
                let delta: Vec<(f64, f64)> = b
                    .iter()
                    .map(|(le, c)| {
                        let before = a.iter().find(|(l, _)| l == le).map_or(0.0, |x| x.1);
                        (*le, (c - before).max(0.0))
                    })
                    .collect();
                histogram_quantile(*q, &delta).map(|s| s * 1000.0)
            }
            Source::Mean { family } => {
                let d = |suffix: &str| {
                    let name = format!("{family}_{suffix}");
                    Some(new.exposition.sum(&name)? - old.exposition.sum(&name).unwrap_or(0.0))
                };
                let (sum, count) = (d("sum")?, d("count")?);
                (count > 0.0).then(|| sum / count * 1000.0)
            }
            Source::GaugeMax { names } => {
                let start = scrapes.iter().position(|s| std::ptr::eq(s, old)).unwrap_or(0);
                scrapes[start..]
                    .iter()
                    .filter_map(|s| names.iter().find_map(|n| gauge_max(&s.exposition, n)))
                    .reduce(f64::max)
            }
            Source::Increase { name } => {
                Some((new.exposition.sum(name)? - old.exposition.sum(name).unwrap_or(0.0)).max(0.0))
            }
            Source::ShareOver { family, bound_s, .. } => {
                let delta = |at: f64| {
                    let pick = |e: &Exposition| {
                        buckets(e, family)
                            .iter()
                            .find(|(le, _)| *le == at || (le - at).abs() < 1e-12)
                            .map(|x| x.1)
                    };
                    Some((pick(&new.exposition)? - pick(&old.exposition).unwrap_or(0.0)).max(0.0))
                };
                let (all, within) = (delta(f64::INFINITY)?, delta(*bound_s)?);
                (all > 0.0).then(|| ((all - within) / all).clamp(0.0, 1.0))
            }
        }
    }
}

/// The finite bucket bounds (seconds, ascending) of `family` in a scrape.
pub fn bounds_in(e: &Exposition, family: &str) -> Vec<f64> {
    buckets(e, family).into_iter().map(|(le, _)| le).filter(|b| b.is_finite()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::thresholds::rollback::parse_condition;

    fn cond(s: &str) -> RollbackCondition {
        parse_condition(s).unwrap().unwrap()
    }

    #[test]
    fn latency_conditions_become_histogram_quantiles_in_ms() {
        let c = cond("`metrics.ttft_ms.p99` above 302 ms for 5m: roll back");
        let src = source(c.metric, EngineKind::Vllm).unwrap();
        assert_eq!(
            promql(&src, &c),
            "histogram_quantile(0.99, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket[5m]))) * 1000 > 302"
        );
        let c = cond("`server.kv_cache_usage.max` >= 0.95 for 30s: investigate");
        let src = source(c.metric, EngineKind::Vllm).unwrap();
        assert_eq!(
            promql(&src, &c),
            "max(max_over_time({__name__=~\"vllm:kv_cache_usage_perc|vllm:gpu_cache_usage_perc\"}[30s])) >= 0.95"
        );
        assert!(source(MetricPath::named("metrics.ttft_ms.p99"), EngineKind::LlamaCpp).is_err());
        assert!(
            source(MetricPath::named("goodput.ratio"), EngineKind::Vllm)
                .unwrap_err()
                .0
                .contains("SLO")
        );
        assert!(
            source(MetricPath::named("metrics.ttft_ms.max"), EngineKind::Vllm)
                .unwrap_err()
                .0
                .contains("max")
        );
    }

    #[test]
    fn quantiles_interpolate_like_prometheus() {
        let b = [(0.1, 50.0), (0.5, 90.0), (1.0, 100.0), (f64::INFINITY, 100.0)];
        assert_eq!(histogram_quantile(0.5, &b), Some(0.1));
        assert!((histogram_quantile(0.7, &b).unwrap() - 0.3).abs() < 1e-12);
        assert!((histogram_quantile(0.25, &b).unwrap() - 0.05).abs() < 1e-12);
        let inf = [(0.1, 0.0), (f64::INFINITY, 4.0)];
        assert_eq!(histogram_quantile(0.99, &inf), Some(0.1));
        assert_eq!(histogram_quantile(0.99, &[(0.1, 0.0), (f64::INFINITY, 0.0)]), None);
    }

    #[test]
    fn window_values_come_from_the_increase_between_scrapes() {
        let scrape = |at_s: f64, fast: f64, slow: f64| {
            let text = format!(
                "h_bucket{{le=\"0.1\"}} {fast}\nh_bucket{{le=\"1\"}} {}\nh_bucket{{le=\"+Inf\"}} {}\n\
                 h_sum {}\nh_count {}\n",
                fast + slow,
                fast + slow,
                fast * 0.05 + slow * 0.5,
                fast + slow
            );
            Scrape { at_s, exposition: infergate_model::promtext::parse(&text) }
        };
        // 100 fast requests in the first 50 s, then 10 slow ones in the last 10 s.
        let s = vec![scrape(0.0, 0.0, 0.0), scrape(50.0, 100.0, 0.0), scrape(60.0, 100.0, 10.0)];
        let w = Window::parse("10s").unwrap();
        let p99 = w.value(&Source::Quantile { family: "h", q: 0.99 }, &s).unwrap();
        assert!((p99 - 991.0).abs() < 1e-9, "{p99}"); // 0.1 + 0.9 x 9.9 / 10 s
        let mean = w.value(&Source::Mean { family: "h" }, &s).unwrap();
        assert!((mean - 500.0).abs() < 1e-9, "{mean}");
        // Over the whole minute the fast ones hold the median: 0.1 s x 55 / 100.
        let p50 = Window::parse("1m").unwrap().value(&Source::Quantile { family: "h", q: 0.5 }, &s);
        assert!((p50.unwrap() - 55.0).abs() < 1e-9, "{p50:?}");
        assert_eq!(w.value(&Source::Quantile { family: "h", q: 0.99 }, &s[..1]), None);
    }
}
