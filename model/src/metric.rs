//! The metric registry and the typed metric path.
//!
//! Every metric a threshold, a budget, a record or a comparison may name is an entry of one
//! registry ([`known_metrics`]): its dotted `summary.json` path, unit, direction, label, scale,
//! kind, and how it is read from a summary ([`Reading`], in typed terms: no JSON). A
//! [`MetricPath`] is a path resolved against the registry once, where it is read from a file or
//! the command line; from there on it is a small copyable value whose definition is at hand.

use std::collections::HashMap;
use std::sync::LazyLock;

use serde::{Deserialize, Serialize};

/// Direction in which a metric is better.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Better {
    Lower,
    Higher,
}

/// What kind of number a metric is, which decides how two of them are compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scale {
    /// A positive quantity whose noise is proportional to it (latencies, rates, costs): changes
    /// are relative (`5% worse`), compared on log values.
    Positive,
    /// A share within [0, 1] (goodput ratio, error rate, hit rates): changes are in points
    /// (`5 points worse`); a relative change of a share near 0 or 1 means little.
    Share,
    /// A count of events (failed requests, preemptions): observed, never estimated or compared
    /// as a change.
    Count,
}

/// Where a metric's samples come from, which decides how a trial set's interval of it is
/// computed (`bench::trials`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum MetricKind {
    /// A count (`unit = "count"`): observed in each trial, no interval.
    Count,
    /// Computed from the request records; `tail` is the share of samples beyond the
    /// statistic for a percentile (P99: 0.01, the maximum and minimum: 0), `None` for means,
    /// rates and ratios.
    Records { tail: Option<f64> },
    /// Not computed from the records (server-side metrics, cost, acceptance sections).
    Summary,
}

/// A latency series of `summary.json`'s `metrics` (and the plateau's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Series {
    Ttft,
    Tpot,
    Itl,
    E2e,
    Queue,
    Ttfrt,
    Ttfat,
    TpotReasoning,
    TpotAnswer,
}

impl Series {
    pub const ALL: [Series; 9] = [
        Series::Ttft,
        Series::Tpot,
        Series::Itl,
        Series::E2e,
        Series::Queue,
        Series::Ttfrt,
        Series::Ttfat,
        Series::TpotReasoning,
        Series::TpotAnswer,
    ];

    /// Its field in `metrics` (`ttft_ms`).
    pub fn key(self) -> &'static str {
        match self {
            Series::Ttft => "ttft_ms",
            Series::Tpot => "tpot_ms",
            Series::Itl => "itl_ms",
            Series::E2e => "e2e_ms",
            Series::Queue => "queue_ms",
            Series::Ttfrt => "ttfrt_ms",
            Series::Ttfat => "ttfat_ms",
            Series::TpotReasoning => "tpot_reasoning_ms",
            Series::TpotAnswer => "tpot_answer_ms",
        }
    }

    /// Its column label in decision records.
    pub fn label(self) -> &'static str {
        match self {
            Series::Ttft => "TTFT",
            Series::Tpot => "TPOT",
            Series::Itl => "ITL",
            Series::E2e => "E2E",
            Series::Queue => "Queue time",
            Series::Ttfrt => "Time to first reasoning token",
            Series::Ttfat => "Time to first answer token",
            Series::TpotReasoning => "TPOT (reasoning)",
            Series::TpotAnswer => "TPOT (answer)",
        }
    }
}

/// A statistic of a latency series (`metrics::Stats`), the sample count included.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Statistic {
    Count,
    Mean,
    Stdev,
    Min,
    P50,
    P90,
    P95,
    P99,
    P999,
    Max,
}

impl Statistic {
    /// The statistics a latency metric of the registry is available at (not the count).
    pub const REGISTERED: [Statistic; 9] = [
        Statistic::Mean,
        Statistic::Stdev,
        Statistic::Min,
        Statistic::P50,
        Statistic::P90,
        Statistic::P95,
        Statistic::P99,
        Statistic::P999,
        Statistic::Max,
    ];

    /// Its field in `metrics::Stats` (`p99`).
    pub fn key(self) -> &'static str {
        match self {
            Statistic::Count => "count",
            Statistic::Mean => "mean",
            Statistic::Stdev => "stdev",
            Statistic::Min => "min",
            Statistic::P50 => "p50",
            Statistic::P90 => "p90",
            Statistic::P95 => "p95",
            Statistic::P99 => "p99",
            Statistic::P999 => "p999",
            Statistic::Max => "max",
        }
    }

    /// The share of samples beyond it (P99: 0.01; the maximum and minimum: 0); `None` for the
    /// mean, the standard deviation and the count.
    pub fn tail(self) -> Option<f64> {
        match self {
            Statistic::Max | Statistic::Min => Some(0.0),
            Statistic::P50 => Some(0.5),
            Statistic::P90 => Some(0.1),
            Statistic::P95 => Some(0.05),
            Statistic::P99 => Some(0.01),
            Statistic::P999 => Some(0.001),
            Statistic::Count | Statistic::Mean | Statistic::Stdev => None,
        }
    }
}

/// A rate of `throughput` (per second of the window or the plateau).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rate {
    Requests,
    OutputTokens,
    TotalTokens,
}

/// A figure of `goodput`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GoodputFigure {
    RequestsPerS,
    Ratio,
    /// The server's counters over the delivered tokens (the whole window only).
    TokenRatio,
}

/// A count of `requests`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RequestCount {
    Ok,
    Failed,
    Cancelled,
}

/// A figure of `cost`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CostFigure {
    PerRequest,
    Per1mOutputTokens,
}

/// A figure of the `server` section.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ServerFigure {
    GoodputRatio,
    KvFragmentation,
    Preemptions,
    /// `kv_cache_usage.max`.
    KvCacheUsageMax,
    PrefixCacheHitRate,
    /// `gpu.utilization_pct.mean`.
    GpuUtilizationMean,
    /// `gpu.joules_per_1m_output_tokens`.
    GpuJoulesPer1mOutputTokens,
}

/// A figure of an acceptance's verdicts (`extra.acceptance`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AcceptanceFigure {
    /// `numeric.cos_min`.
    CosMin,
    /// `numeric.rtol_max`.
    RtolMax,
    /// `engine.stream_violations`.
    StreamViolations,
    /// `business.schema_pass_rate`.
    SchemaPassRate,
}

/// How a metric is read from a summary, field by field (`Summary::value_of`). A figure that
/// has one over the run's plateau says which of the two it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reading {
    /// A latency series' statistic (`metrics.ttft_ms.p99`, `plateau.metrics.ttft_ms.count`).
    Latency { series: Series, stat: Statistic, plateau: bool },
    /// `metrics.itl_jitter`.
    ItlJitter { plateau: bool },
    /// `throughput.*_per_s`.
    Throughput { rate: Rate, plateau: bool },
    /// `goodput.*`.
    Goodput { figure: GoodputFigure, plateau: bool },
    /// `requests.ok`, `requests.failed`, `requests.cancelled`.
    Requests(RequestCount),
    /// `error_rate`: derived from the request counts.
    ErrorRate,
    /// `tokens.server_mismatch`.
    ServerTokenMismatch,
    /// `cost.*`.
    Cost(CostFigure),
    /// `server.*`.
    Server(ServerFigure),
    /// A statistic of the schedule's lag (`schedule.lag_ms.p99`).
    ScheduleLag(Statistic),
    /// `extra.acceptance.*`.
    Acceptance(AcceptanceFigure),
    /// `extra.sweep.knee`.
    SweepKnee,
}

impl Reading {
    /// The same figure over the run's plateau (`None` where the plateau has none).
    fn over_plateau(self) -> Option<Reading> {
        match self {
            Reading::Latency { series, stat, plateau: false } => {
                Some(Reading::Latency { series, stat, plateau: true })
            }
            Reading::ItlJitter { plateau: false } => Some(Reading::ItlJitter { plateau: true }),
            Reading::Throughput { rate, plateau: false } => {
                Some(Reading::Throughput { rate, plateau: true })
            }
            Reading::Goodput { figure, plateau: false } if figure != GoodputFigure::TokenRatio => {
                Some(Reading::Goodput { figure, plateau: true })
            }
            _ => None,
        }
    }
}

/// A metric that decision records and gates may name.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MetricDef {
    /// Dotted path in summary.json.
    pub path: &'static str,
    /// Unit the value is expressed in.
    pub unit: &'static str,
    pub better: Better,
    /// Column label in decision records.
    pub label: &'static str,
    pub scale: Scale,
    /// Where its samples come from.
    pub kind: MetricKind,
    /// How it is read from a summary.
    pub reading: Reading,
    /// The number of samples a statistic of the records rests on (the latency histogram's
    /// count: `metrics.ttft_ms.count` for `metrics.ttft_ms.p99`).
    pub samples: Option<Reading>,
    /// A figure of the run's plateau (`plateau.metrics.ttft_ms.p99`): computed from the
    /// records sent within it.
    pub plateau: bool,
}

/// The scale of a metric of the registry: counts by their unit, the shares by name, the rest
/// positive.
fn scale_of(path: &str, unit: &str) -> Scale {
    const SHARES: &[&str] = &[
        "goodput.ratio",
        "plateau.goodput.ratio",
        "goodput.token_ratio",
        "tokens.server_mismatch",
        "error_rate",
        "server.goodput_ratio",
        "server.kv_fragmentation",
        "server.kv_cache_usage.max",
        "server.prefix_cache_hit_rate",
        "extra.acceptance.business.schema_pass_rate",
        "extra.acceptance.numeric.cos_min",
    ];
    if unit == "count" {
        Scale::Count
    } else if SHARES.contains(&path) {
        Scale::Share
    } else {
        Scale::Positive
    }
}

/// Every metric a threshold may name. Latency metrics are available at every statistic.
pub fn known_metrics() -> &'static [MetricDef] {
    static ALL: LazyLock<Vec<MetricDef>> = LazyLock::new(build_known_metrics);
    &ALL
}

fn build_known_metrics() -> Vec<MetricDef> {
    let mut out = Vec::new();
    for series in Series::ALL {
        let samples = Reading::Latency { series, stat: Statistic::Count, plateau: false };
        for stat in Statistic::REGISTERED {
            // Built once per process (see `known_metrics`).
            let path: &'static str =
                Box::leak(format!("metrics.{}.{}", series.key(), stat.key()).into_boxed_str());
            out.push(MetricDef {
                path,
                unit: "ms",
                better: Better::Lower,
                label: series.label(),
                scale: Scale::Positive,
                kind: MetricKind::Records { tail: stat.tail() },
                reading: Reading::Latency { series, stat, plateau: false },
                samples: Some(samples),
                plateau: false,
            });
        }
    }
    // From the records: means, rates and ratios (no tail), or the schedule's own percentile.
    let records = MetricKind::Records { tail: None };
    let (count, summary) = (MetricKind::Count, MetricKind::Summary);
    let whole = false;
    type Row = (&'static str, &'static str, Better, &'static str, MetricKind, Reading);
    let fixed: [Row; 20] = [
        (
            "metrics.itl_jitter",
            "ratio",
            Better::Lower,
            "ITL jitter",
            records,
            Reading::ItlJitter { plateau: whole },
        ),
        (
            "throughput.requests_per_s",
            "req/s",
            Better::Higher,
            "Throughput (req/s)",
            records,
            Reading::Throughput { rate: Rate::Requests, plateau: whole },
        ),
        (
            "throughput.output_tokens_per_s",
            "tok/s",
            Better::Higher,
            "Output tok/s",
            records,
            Reading::Throughput { rate: Rate::OutputTokens, plateau: whole },
        ),
        (
            "throughput.total_tokens_per_s",
            "tok/s",
            Better::Higher,
            "Total tok/s",
            records,
            Reading::Throughput { rate: Rate::TotalTokens, plateau: whole },
        ),
        (
            "goodput.requests_per_s",
            "req/s",
            Better::Higher,
            "Goodput (req/s)",
            records,
            Reading::Goodput { figure: GoodputFigure::RequestsPerS, plateau: whole },
        ),
        (
            "goodput.ratio",
            "ratio",
            Better::Higher,
            "Goodput ratio",
            records,
            Reading::Goodput { figure: GoodputFigure::Ratio, plateau: whole },
        ),
        // The server's counters over the delivered tokens: a summary value.
        (
            "goodput.token_ratio",
            "ratio",
            Better::Higher,
            "Goodput (token ratio)",
            summary,
            Reading::Goodput { figure: GoodputFigure::TokenRatio, plateau: whole },
        ),
        (
            "tokens.server_mismatch",
            "ratio",
            Better::Lower,
            "Server token mismatch",
            summary,
            Reading::ServerTokenMismatch,
        ),
        (
            "requests.cancelled",
            "count",
            Better::Lower,
            "Cancelled requests",
            count,
            Reading::Requests(RequestCount::Cancelled),
        ),
        (
            "requests.failed",
            "count",
            Better::Lower,
            "Failed requests",
            count,
            Reading::Requests(RequestCount::Failed),
        ),
        (
            "requests.ok",
            "count",
            Better::Higher,
            "Ok requests",
            count,
            Reading::Requests(RequestCount::Ok),
        ),
        ("error_rate", "ratio", Better::Lower, "Error rate", records, Reading::ErrorRate),
        (
            "cost.per_1m_output_tokens",
            "currency",
            Better::Lower,
            "Cost per 1M output tokens",
            summary,
            Reading::Cost(CostFigure::Per1mOutputTokens),
        ),
        (
            "cost.per_request",
            "currency",
            Better::Lower,
            "Cost per request",
            summary,
            Reading::Cost(CostFigure::PerRequest),
        ),
        (
            "server.goodput_ratio",
            "ratio",
            Better::Higher,
            "Server goodput ratio",
            summary,
            Reading::Server(ServerFigure::GoodputRatio),
        ),
        (
            "server.kv_fragmentation",
            "ratio",
            Better::Lower,
            "KV fragmentation",
            summary,
            Reading::Server(ServerFigure::KvFragmentation),
        ),
        (
            "server.preemptions",
            "count",
            Better::Lower,
            "Preemptions",
            count,
            Reading::Server(ServerFigure::Preemptions),
        ),
        (
            "server.kv_cache_usage.max",
            "ratio",
            Better::Lower,
            "KV cache usage max",
            summary,
            Reading::Server(ServerFigure::KvCacheUsageMax),
        ),
        (
            "server.prefix_cache_hit_rate",
            "ratio",
            Better::Higher,
            "Prefix cache hit rate",
            summary,
            Reading::Server(ServerFigure::PrefixCacheHitRate),
        ),
        (
            "schedule.lag_ms.p99",
            "ms",
            Better::Lower,
            "Schedule lag p99",
            MetricKind::Records { tail: Statistic::P99.tail() },
            Reading::ScheduleLag(Statistic::P99),
        ),
    ];
    // Sections written by acceptance runs and sweeps (docs/acceptance.md), and the GPU samples.
    let sections: [Row; 7] = [
        (
            "extra.acceptance.numeric.cos_min",
            "ratio",
            Better::Higher,
            "Logit cosine (min)",
            summary,
            Reading::Acceptance(AcceptanceFigure::CosMin),
        ),
        (
            "extra.acceptance.numeric.rtol_max",
            "ratio",
            Better::Lower,
            "Logit max rel. error",
            summary,
            Reading::Acceptance(AcceptanceFigure::RtolMax),
        ),
        (
            "extra.acceptance.engine.stream_violations",
            "count",
            Better::Lower,
            "Stream violations",
            count,
            Reading::Acceptance(AcceptanceFigure::StreamViolations),
        ),
        (
            "extra.acceptance.business.schema_pass_rate",
            "ratio",
            Better::Higher,
            "Schema pass rate",
            summary,
            Reading::Acceptance(AcceptanceFigure::SchemaPassRate),
        ),
        ("extra.sweep.knee", "load", Better::Higher, "Knee", summary, Reading::SweepKnee),
        (
            "server.gpu.utilization_pct.mean",
            "%",
            Better::Higher,
            "GPU utilisation",
            summary,
            Reading::Server(ServerFigure::GpuUtilizationMean),
        ),
        (
            "server.gpu.joules_per_1m_output_tokens",
            "J",
            Better::Lower,
            "Energy per 1M output tokens",
            summary,
            Reading::Server(ServerFigure::GpuJoulesPer1mOutputTokens),
        ),
    ];
    for (path, unit, better, label, kind, reading) in fixed.into_iter().chain(sections) {
        debug_assert_eq!(unit == "count", kind == MetricKind::Count, "{path}");
        let scale = scale_of(path, unit);
        out.push(MetricDef {
            path,
            unit,
            better,
            label,
            scale,
            kind,
            reading,
            samples: None,
            plateau: false,
        });
    }
    out.extend(plateau_metrics(&out));
    out
}

/// The plateau's figures (`plateau.metrics.ttft_ms.p99`, docs/metrics.md "Steady state"): the
/// latency statistics, ITL jitter, throughput and goodput of the requests sent within it; a
/// single run's interval resamples the records sent within the plateau.
fn plateau_metrics(whole: &[MetricDef]) -> Vec<MetricDef> {
    whole
        .iter()
        .filter_map(|d| Some((d, d.reading.over_plateau()?)))
        .map(|(d, reading)| {
            // Built once per process (see `known_metrics`).
            let path: &'static str = Box::leak(format!("plateau.{}", d.path).into_boxed_str());
            let label: &'static str = Box::leak(format!("{} (plateau)", d.label).into_boxed_str());
            let samples = d.samples.and_then(Reading::over_plateau);
            MetricDef {
                path,
                label,
                scale: scale_of(path, d.unit),
                reading,
                samples,
                plateau: true,
                ..*d
            }
        })
        .collect()
}

/// A metric of the registry ([`known_metrics`]), resolved once from its dotted path
/// (`metrics.ttft_ms.p99`): what a threshold, a budget or a comparison names. Written (and read
/// back) as that path; ordered by it.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct MetricPath(u16);

/// Each registry path's place in the registry.
static BY_PATH: LazyLock<HashMap<&'static str, u16>> =
    LazyLock::new(|| known_metrics().iter().enumerate().map(|(i, d)| (d.path, i as u16)).collect());

/// Each metric's plateau figure, where the registry has one.
static PLATEAU_OF: LazyLock<Vec<Option<MetricPath>>> = LazyLock::new(|| {
    known_metrics()
        .iter()
        .map(|d| {
            let on_plateau = d.reading.over_plateau()?;
            known_metrics()
                .iter()
                .position(|p| p.plateau && p.reading == on_plateau)
                .map(|i| MetricPath(i as u16))
        })
        .collect()
});

impl MetricPath {
    /// The registry's metric at `path`; the error names the nearest known one.
    pub fn parse(path: &str) -> Result<MetricPath, UnknownMetric> {
        BY_PATH.get(path).map(|&i| MetricPath(i)).ok_or_else(|| UnknownMetric(path.to_string()))
    }

    /// The registry's metric at a path written in the source (`"metrics.ttft_ms.p99"`).
    ///
    /// # Panics
    /// When the registry has no such path: a mistake in the code, not in a user's input.
    pub fn named(path: &str) -> MetricPath {
        MetricPath::parse(path).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Every metric of the registry, in its order.
    pub fn all() -> impl Iterator<Item = MetricPath> {
        (0..known_metrics().len()).map(|i| MetricPath(i as u16))
    }

    /// Its entry in the registry.
    pub fn def(self) -> &'static MetricDef {
        &known_metrics()[usize::from(self.0)]
    }

    /// Its dotted path in `summary.json`.
    pub fn as_str(self) -> &'static str {
        self.def().path
    }

    pub fn unit(self) -> &'static str {
        self.def().unit
    }

    pub fn better(self) -> Better {
        self.def().better
    }

    pub fn scale(self) -> Scale {
        self.def().scale
    }

    pub fn kind(self) -> MetricKind {
        self.def().kind
    }

    pub fn label(self) -> &'static str {
        self.def().label
    }

    /// How it is read from a summary.
    pub fn reading(self) -> Reading {
        self.def().reading
    }

    /// Whether it is a figure of the run's plateau.
    pub fn is_plateau(self) -> bool {
        self.def().plateau
    }

    /// Its figure over the run's plateau (`plateau.metrics.ttft_ms.p99` for
    /// `metrics.ttft_ms.p99`), when the registry has one.
    pub fn plateau(self) -> Option<MetricPath> {
        PLATEAU_OF[usize::from(self.0)]
    }
}

impl std::fmt::Display for MetricPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Debug for MetricPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MetricPath({})", self.as_str())
    }
}

impl PartialOrd for MetricPath {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for MetricPath {
    /// By path, as the paths' text sorts.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl std::str::FromStr for MetricPath {
    type Err = UnknownMetric;

    fn from_str(s: &str) -> Result<MetricPath, UnknownMetric> {
        MetricPath::parse(s)
    }
}

impl AsRef<str> for MetricPath {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl PartialEq<str> for MetricPath {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for MetricPath {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl Serialize for MetricPath {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for MetricPath {
    /// A path of the registry; any other is refused, naming the nearest known one.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<MetricPath, D::Error> {
        let s = std::borrow::Cow::<'de, str>::deserialize(d)?;
        MetricPath::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// A metric that is not in the registry ([`known_metrics`]), as written; its message names the
/// nearest one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", unknown_metric_message(.0))]
pub struct UnknownMetric(pub String);

fn unknown_metric_message(metric: &str) -> String {
    let nearest = known_metrics().iter().map(|m| (edit_distance(metric, m.path), m.path)).min();
    let hint = match nearest {
        Some((d, path)) if d <= 4 => format!("did you mean `{path}`? "),
        _ => String::new(),
    };
    if metric.is_empty() {
        return "missing metric; metrics are the dotted summary.json paths listed in docs/adr/README.md".into();
    }
    format!(
        "unknown metric `{metric}`; {hint}metrics are the dotted summary.json paths listed in \
         docs/adr/README.md (e.g. metrics.ttft_ms.p99, goodput.ratio)"
    )
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != *cb)).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_is_resolved_once_and_written_as_itself() {
        let p = MetricPath::parse("metrics.ttft_ms.p99").unwrap();
        assert_eq!(p.to_string(), "metrics.ttft_ms.p99");
        assert_eq!(p.unit(), "ms");
        assert_eq!(p.kind(), MetricKind::Records { tail: Some(0.01) });
        assert_eq!(p.plateau().unwrap().as_str(), "plateau.metrics.ttft_ms.p99");
        assert!(p.plateau().unwrap().is_plateau() && !p.is_plateau());
        assert_eq!(p.plateau().unwrap().plateau(), None);
        assert_eq!(MetricPath::named("requests.failed").plateau(), None);
        assert_eq!(serde_json::to_value(p).unwrap(), serde_json::json!("metrics.ttft_ms.p99"));
        let back: MetricPath = serde_json::from_str("\"goodput.ratio\"").unwrap();
        assert_eq!(back.scale(), Scale::Share);
        let e = serde_json::from_str::<MetricPath>("\"metrics.ttft_ms.P99\"").unwrap_err();
        assert!(e.to_string().contains("did you mean `metrics.ttft_ms.p99`?"), "{e}");
        let e = "goodput.ratoi".parse::<MetricPath>().unwrap_err().to_string();
        assert!(e.starts_with("unknown metric `goodput.ratoi`; did you mean `goodput.ratio`?"));
        assert!(MetricPath::parse("metrics.ttft_ms.count").is_err(), "a count is not a metric");
        assert_eq!(MetricPath::all().count(), known_metrics().len());
        assert!(MetricPath::all().all(|m| MetricPath::parse(m.as_str()) == Ok(m)));
        let mut sorted: Vec<MetricPath> = MetricPath::all().collect();
        sorted.sort();
        assert!(sorted.windows(2).all(|w| w[0].as_str() < w[1].as_str()));
    }
}
