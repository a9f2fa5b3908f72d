//! A rollback condition over an engine's own Prometheus series: which series stands for a
//! registry metric on vLLM, SGLang and llama.cpp ([`source`]), the PromQL that `adr alerts`
//! writes for it ([`promql`]), and the same value computed from two scrapes of `/metrics`
//! ([`Window::value`], what `cargo xtask watch` evaluates), so both read one definition.
//!
//! Only what the engine measures itself is exported: a metric with no server-side series (the
//! client's goodput, throughput that follows the offered load, cost) is [`NotExportable`] with
//! the reason, never approximated from another series. Latencies are histograms in seconds;
//! the value is in the registry unit (ms).

use bench::promtext::Exposition;

use super::rollback::{RollbackCondition, Window};
use super::rule::Comparator;

/// The engines whose metric names are known.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Engine {
    Vllm,
    Sglang,
    LlamaCpp,
}

impl Engine {
    pub const ALL: [Engine; 3] = [Engine::Vllm, Engine::Sglang, Engine::LlamaCpp];

    pub fn as_str(self) -> &'static str {
        match self {
            Engine::Vllm => "vllm",
            Engine::Sglang => "sglang",
            Engine::LlamaCpp => "llamacpp",
        }
    }

    /// The engine whose names an exposition uses (its metric prefix), if any.
    pub fn detect(e: &Exposition) -> Option<Engine> {
        Engine::ALL.into_iter().find(|eng| {
            let prefix = format!("{}:", eng.as_str());
            e.samples.iter().any(|s| s.name.starts_with(&prefix))
        })
    }
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
}

/// Why a metric has no server-side alert on an engine.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NotExportable(pub String);

fn latency_family(engine: Engine, metric: &str) -> Result<&'static str, NotExportable> {
    let none = |why: &str| Err(NotExportable(why.to_string()));
    match (engine, metric) {
        (Engine::Vllm, "ttft_ms") => Ok("vllm:time_to_first_token_seconds"),
        (Engine::Vllm, "tpot_ms") => Ok("vllm:request_time_per_output_token_seconds"),
        (Engine::Vllm, "itl_ms") => Ok("vllm:inter_token_latency_seconds"),
        (Engine::Vllm, "e2e_ms") => Ok("vllm:e2e_request_latency_seconds"),
        (Engine::Vllm, "queue_ms") => Ok("vllm:request_queue_time_seconds"),
        (Engine::Sglang, "ttft_ms") => Ok("sglang:time_to_first_token_seconds"),
        (Engine::Sglang, "itl_ms") => Ok("sglang:inter_token_latency_seconds"),
        (Engine::Sglang, "e2e_ms") => Ok("sglang:e2e_request_latency_seconds"),
        (Engine::Sglang, "tpot_ms") => {
            none("SGLang has no per-request time-per-output-token histogram (its ITL is per token)")
        }
        (Engine::Sglang, _) => none("SGLang exports no histogram of it"),
        (Engine::LlamaCpp, _) => {
            none("llama.cpp exports no latency histograms (only totals and averages)")
        }
        (Engine::Vllm, _) => none("vLLM exports no histogram of it"),
    }
}

/// The series of `metric` (a registry path) on `engine`, or why there is none.
pub fn source(metric: &str, engine: Engine) -> Result<Source, NotExportable> {
    let parts: Vec<&str> = metric.split('.').collect();
    if let ["metrics", fam, stat] = parts[..]
        && fam != "itl_jitter"
    {
        let family = latency_family(engine, fam)?;
        let q = match stat {
            "mean" => return Ok(Source::Mean { family }),
            "p50" => 0.5,
            "p90" => 0.9,
            "p95" => 0.95,
            "p99" => 0.99,
            "p999" => 0.999,
            _ => {
                return Err(NotExportable(format!(
                    "a histogram gives quantiles and the mean, not the {stat}"
                )));
            }
        };
        return Ok(Source::Quantile { family, q });
    }
    let why = |s: &str| Err(NotExportable(s.to_string()));
    match (metric, engine) {
        ("server.kv_cache_usage.max", Engine::Vllm) => Ok(Source::GaugeMax {
            names: &["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"],
        }),
        ("server.kv_cache_usage.max", Engine::Sglang) => {
            Ok(Source::GaugeMax { names: &["sglang:token_usage"] })
        }
        ("server.kv_cache_usage.max", Engine::LlamaCpp) => {
            Ok(Source::GaugeMax { names: &["llamacpp:kv_cache_usage_ratio"] })
        }
        ("server.preemptions", Engine::Vllm) => {
            Ok(Source::Increase { name: "vllm:num_preemptions_total" })
        }
        ("server.preemptions", _) => why("the engine exports no preemption counter"),
        ("metrics.itl_jitter", _) => why("a histogram gives no standard deviation of ITL"),
        ("error_rate" | "requests.failed" | "requests.ok", _) => why(
            "the engine counts finished requests, not the ones the client saw fail (HTTP errors, \
             broken streams)",
        ),
        (m, _) if m.starts_with("goodput.") || m == "server.goodput_ratio" => {
            why("goodput is each request judged against the client's SLO")
        }
        (m, _) if m.starts_with("throughput.") => {
            why("throughput follows the offered load, which production does not hold fixed")
        }
        _ => why("measured by the bench only; the engine exports no series of it"),
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
        }
    }
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
        let src = source(&c.metric, Engine::Vllm).unwrap();
        assert_eq!(
            promql(&src, &c),
            "histogram_quantile(0.99, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket[5m]))) * 1000 > 302"
        );
        let c = cond("`server.kv_cache_usage.max` >= 0.95 for 30s: investigate");
        let src = source(&c.metric, Engine::Vllm).unwrap();
        assert_eq!(
            promql(&src, &c),
            "max(max_over_time({__name__=~\"vllm:kv_cache_usage_perc|vllm:gpu_cache_usage_perc\"}[30s])) >= 0.95"
        );
        assert!(source("metrics.ttft_ms.p99", Engine::LlamaCpp).is_err());
        assert!(source("goodput.ratio", Engine::Vllm).unwrap_err().0.contains("SLO"));
        assert!(source("metrics.ttft_ms.max", Engine::Vllm).unwrap_err().0.contains("max"));
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
            Scrape { at_s, exposition: bench::promtext::parse(&text) }
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
