//! guidellm's benchmarks report (`benchmarks.json`) read as an imported run: one of its
//! benchmarks (one per load strategy of a sweep). The fields follow guidellm's own models
//! (guidellm 0.8, `benchmark/schemas/report.py`: `metadata.version` 2, `benchmarks`;
//! `benchmark/schemas/benchmark.py` and `metrics.py`: per metric a distribution by request
//! status, `successful` / `errored` / `incomplete` / `total`, each with `mean`, `median`,
//! `std_dev`, `min`, `max`, `count`, `total_sum` and `percentiles`; `requests`: the requests
//! it kept, by status, with their timings in epoch seconds).
//!
//! The report streams ([`Source`]); only the benchmark asked for is kept. Its values are checked
//! ([`Checker`]): wall-clock times in range and in order, the request totals adding up, the
//! distributions in order. guidellm's `inter_token_latency_ms` weights each request by its
//! output tokens - 1, so TPOT (one value per request) is computed here from the kept requests,
//! as infergate computes it for a run it measured, and is blank when the report kept a sample.

use std::cell::Cell;
use std::fmt;
use std::marker::PhantomData;
use std::path::Path;

use serde::de::{DeserializeSeed, Error as _, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};

use super::{
    Capped, Checker, ImportError, Imported, ImportedLoad, Loose, MAX_FILE_BYTES, MAX_REQUESTS,
    MILLIS, Nullable, Reported, SECONDS, Source, Stat, Written, counts_of, failure_class,
};
use crate::metrics::{MetricsAccumulator, Slo, Stats};
use crate::outcome::Outcome;
use crate::record::RequestRecord;

const WHAT: &str = "a guidellm benchmarks report";
const TOOL: &str = "guidellm";
/// The report schema version read (`metadata.version`).
const VERSION: u64 = 2;

/// The report as far as it is read: its version, guidellm's version, and the one benchmark
/// asked for (the others are skipped as the file streams, only counted).
#[derive(Debug, Default)]
struct Report {
    /// `metadata.version` as written; None when the file has no `metadata`.
    version: Option<Option<Loose>>,
    guidellm_version: Option<String>,
    benchmark: Option<Benchmark>,
    benchmarks: usize,
}

#[derive(Debug, Deserialize)]
struct Metadata {
    #[serde(default)]
    version: Option<Loose>,
    #[serde(default)]
    guidellm_version: Option<String>,
}

/// Reads the report keeping benchmark `index` of `benchmarks`.
struct ReportSeed {
    index: usize,
}

impl<'de> DeserializeSeed<'de> for ReportSeed {
    type Value = Report;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Report, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ReportSeed {
    type Value = Report;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Report, A::Error> {
        let mut r = Report::default();
        let mut seen_benchmarks = false;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "metadata" => {
                    let m: Metadata = map.next_value()?;
                    r.version = Some(m.version);
                    r.guidellm_version = m.guidellm_version;
                }
                "benchmarks" => {
                    seen_benchmarks = true;
                    // A report of another version is refused for its version, not for the
                    // shape of its benchmarks (guidellm writes `metadata` first).
                    if r.version.as_ref().is_some_and(|v| !is_version(v)) {
                        map.next_value::<IgnoredAny>()?;
                    } else {
                        let (b, n) = map.next_value_seed(Pick { index: self.index })?;
                        r.benchmark = b;
                        r.benchmarks = n;
                    }
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        if !seen_benchmarks && r.version.as_ref().is_some_and(is_version) {
            return Err(A::Error::missing_field("benchmarks"));
        }
        Ok(r)
    }
}

fn is_version(v: &Option<Loose>) -> bool {
    matches!(v, Some(Loose::Number(n)) if n.as_u64() == Some(VERSION))
}

/// Benchmark `index` of a list, read; the others skipped and counted.
struct Pick {
    index: usize,
}

impl<'de> DeserializeSeed<'de> for Pick {
    type Value = (Option<Benchmark>, usize);
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Pick {
    type Value = (Option<Benchmark>, usize);
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of benchmarks")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let (mut chosen, mut n) = (None, 0);
        loop {
            let more = if n == self.index {
                chosen = seq.next_element::<Benchmark>()?;
                chosen.is_some()
            } else {
                seq.next_element::<IgnoredAny>()?.is_some()
            };
            if !more {
                return Ok((chosen, n));
            }
            n += 1;
        }
    }
}

#[derive(Debug, Deserialize)]
struct Benchmark {
    #[serde(default)]
    config: Option<BenchmarkConfig>,
    #[serde(default)]
    start_time: Option<f64>,
    #[serde(default)]
    end_time: Option<f64>,
    #[serde(default)]
    duration: Option<f64>,
    metrics: Metrics,
    #[serde(default)]
    requests: Option<Requests>,
}

#[derive(Debug, Deserialize)]
struct BenchmarkConfig {
    strategy: Strategy,
}

#[derive(Debug, Deserialize)]
struct Strategy {
    type_: String,
    #[serde(default)]
    streams: Option<u64>,
    #[serde(default)]
    rate: Option<f64>,
    #[serde(default)]
    max_concurrency: Option<u64>,
}

#[derive(Debug, Deserialize)]
struct Totals {
    successful: u64,
    errored: u64,
    incomplete: u64,
    total: u64,
}

#[derive(Debug, Deserialize)]
struct Metrics {
    request_totals: Totals,
    #[serde(default)]
    requests_per_second: Option<ByStatus>,
    #[serde(default)]
    request_latency: Option<ByStatus>,
    #[serde(default)]
    prompt_token_count: Option<ByStatus>,
    #[serde(default)]
    output_token_count: Option<ByStatus>,
    #[serde(default)]
    time_to_first_token_ms: Option<ByStatus>,
    #[serde(default)]
    inter_token_latency_ms: Option<ByStatus>,
    #[serde(default)]
    output_tokens_per_second: Option<ByStatus>,
    #[serde(default)]
    tokens_per_second: Option<ByStatus>,
}

/// A metric's distributions by request status; only the successful requests' is imported.
#[derive(Debug, Deserialize)]
struct ByStatus {
    #[serde(default)]
    successful: Option<Distribution>,
}

#[derive(Debug, Deserialize)]
struct Distribution {
    mean: f64,
    std_dev: f64,
    min: f64,
    max: f64,
    count: u64,
    total_sum: f64,
    percentiles: Percentiles,
}

#[derive(Debug, Deserialize)]
struct Percentiles {
    p50: f64,
    p90: f64,
    p95: f64,
    p99: f64,
    p999: f64,
}

/// The requests a benchmark kept, by status: at most [`MAX_REQUESTS`] of them in all.
#[derive(Debug, Default)]
struct Requests {
    successful: Vec<RequestStats>,
    errored: Vec<RequestStats>,
    incomplete: Vec<RequestStats>,
}

impl<'de> Deserialize<'de> for Requests {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Requests;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("the kept requests by status")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Requests, A::Error> {
                let mut r = Requests::default();
                let left = Cell::new(MAX_REQUESTS);
                let list = || {
                    let each = PhantomData::<RequestStats>;
                    Nullable(Capped::new(&left, "kept requests", MAX_REQUESTS, each))
                };
                while let Some(key) = map.next_key::<String>()? {
                    let class = match key.as_str() {
                        "successful" => &mut r.successful,
                        "errored" => &mut r.errored,
                        "incomplete" => &mut r.incomplete,
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                            continue;
                        }
                    };
                    *class = map.next_value_seed(list())?.unwrap_or_default();
                }
                Ok(r)
            }
        }
        d.deserialize_map(V)
    }
}

#[derive(Debug, Deserialize)]
struct RequestStats {
    info: RequestInfo,
    #[serde(default)]
    input_metrics: Option<Usage>,
    #[serde(default)]
    output_metrics: Option<Usage>,
}

#[derive(Debug, Deserialize)]
struct RequestInfo {
    timings: Timings,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Timings {
    #[serde(default)]
    request_start: Option<f64>,
    #[serde(default)]
    first_token_iteration: Option<f64>,
    #[serde(default)]
    last_token_iteration: Option<f64>,
    #[serde(default)]
    request_end: Option<f64>,
    #[serde(default)]
    token_iterations: u64,
}

#[derive(Debug, Deserialize)]
struct Usage {
    #[serde(default)]
    total_tokens: Option<u64>,
}

fn definitions() -> Vec<String> {
    vec![
        format!(
            "{TOOL}: its latencies count from when the request was sent (request_start), not \
             from the scheduled send time (targeted_start)"
        ),
        format!(
            "{TOOL}: its percentiles come from its own distribution summaries (infergate's: \
             HdrHistogram, within 0.1%); only its successful requests' distributions are imported"
        ),
        format!(
            "{TOOL}: its inter_token_latency_ms is a distribution over output tokens (each \
             request's (last token - first token) / (output tokens - 1), weighted by its output \
             tokens - 1), not infergate's TPOT (one value per request): TPOT is computed by \
             infergate from the kept requests' token times and output tokens, blank when the \
             report did not keep every request; it records no per-gap ITL (blank), and its \
             time_per_output_token_ms (which includes the TTFT) has no infergate counterpart"
        ),
        format!(
            "{TOOL}: its throughputs are the means of its rate distributions over the benchmark"
        ),
    ]
}

/// The successful requests' distribution of `d` (field `field` of the benchmark at `at`),
/// checked as a latency in `unit`.
fn latency(
    c: &Checker,
    at: &str,
    field: &str,
    d: &Option<ByStatus>,
    unit: (f64, bool),
) -> Result<Option<Reported>, ImportError> {
    let Some(d) = d.as_ref().and_then(|d| d.successful.as_ref()) else { return Ok(None) };
    let f = |name: &str, v: f64| Some(Stat::new(format!("{at}.{field}.successful.{name}"), v));
    let p = |name: &str, v: f64| f(&format!("percentiles.{name}"), v);
    let written = Written {
        count: Some((format!("{at}.{field}.successful.count"), d.count)),
        mean: f("mean", d.mean),
        stdev: f("std_dev", d.std_dev),
        min: f("min", d.min),
        p50: p("p50", d.percentiles.p50),
        p90: p("p90", d.percentiles.p90),
        p95: p("p95", d.percentiles.p95),
        p99: p("p99", d.percentiles.p99),
        p999: p("p999", d.percentiles.p999),
        max: f("max", d.max),
    };
    written.checked(c, unit).map(Some)
}

/// Read benchmark `index` of the report (the only one when it holds one).
pub fn read(path: &Path, index: Option<usize>) -> Result<Imported, ImportError> {
    let mut source = Source::open(path, MAX_FILE_BYTES)?;
    let report = source.json_seed(WHAT, ReportSeed { index: index.unwrap_or(0) })?;
    let version = report.version.flatten();
    if !is_version(&version) {
        return Err(ImportError::Version {
            path: path.to_path_buf(),
            what: WHAT,
            field: "metadata.version".into(),
            found: version.map_or("missing".into(), |v| v.to_string()),
            reads: "2 (guidellm 0.4 and later)",
        });
    }
    let file = source.finish()?;
    let n = report.benchmarks;
    let i = match (index, &report.benchmark) {
        (Some(i), Some(_)) => i,
        (None, Some(_)) if n == 1 => 0,
        (Some(i), None) => {
            return Err(ImportError::field(
                path,
                WHAT,
                "benchmarks",
                format!("holds {n} benchmarks: --benchmark {i} is not one of 0..{}", n.max(1) - 1),
            ));
        }
        (None, _) => {
            return Err(ImportError::field(
                path,
                WHAT,
                "benchmarks",
                format!(
                    "holds {n} benchmarks: choose one with --benchmark I (0 to {})",
                    n.max(1) - 1
                ),
            ));
        }
    };
    let b = report.benchmark.as_ref().expect("the chosen benchmark was read");
    let at = format!("benchmarks[{i}]");
    let c = Checker::new(path);
    check(&c, &at, b)?;
    let m = &b.metrics;
    let t = &m.request_totals;
    let mut notes = vec![];
    if n > 1 {
        notes.push(format!("benchmark {i} of the {n} in the report"));
    }
    let records = match &b.requests {
        Some(r) => {
            let kept = [
                ("successful", r.successful.len() as u64, t.successful),
                ("errored", r.errored.len() as u64, t.errored),
                ("incomplete", r.incomplete.len() as u64, t.incomplete),
            ];
            for (class, kept, counted) in kept {
                if kept > counted {
                    return Err(c.impossible(
                        &format!("{at}.requests.{class}"),
                        format!("a list of {kept} requests"),
                        format!(
                            "`{at}.metrics.request_totals.{class}` is {counted}: a report keeps \
                             at most the requests it counts"
                        ),
                    ));
                }
            }
            if kept.iter().all(|(_, kept, counted)| kept == counted) {
                Some(records(&c, &at, r)?)
            } else {
                let kept: u64 = kept.iter().map(|(_, k, _)| k).sum();
                notes.push(format!(
                    "{TOOL} kept {kept} of the benchmark's {} requests: no requests.jsonl (a \
                     sample would give intervals of the sample) and no TPOT (one value per \
                     request, of every request)",
                    t.total
                ));
                None
            }
        }
        None => {
            notes.push(format!(
                "{TOOL} kept no requests: no requests.jsonl and no TPOT (one value per request)"
            ));
            None
        }
    };
    let mut requests = records.as_deref().map(counts_of).unwrap_or_default();
    requests.total = t.total;
    requests.ok = t.successful;
    requests.failed = t.errored + t.incomplete;
    if t.incomplete > 0 {
        notes.push(format!(
            "{} requests were still in flight when {TOOL} ended the benchmark: counted failed \
             (class interrupted)",
            t.incomplete
        ));
    }
    if let Some(d) = m.inter_token_latency_ms.as_ref().and_then(|d| d.successful.as_ref()) {
        notes.push(format!(
            "{TOOL}'s inter_token_latency_ms (weighted by output tokens - 1: count {}, mean {} \
             ms) is not infergate's TPOT: not imported",
            d.count, d.mean
        ));
    }
    let stats = |field: &str, d: &Option<ByStatus>, unit| {
        latency(&c, &format!("{at}.metrics"), field, d, unit).map(|r| r.and_then(|r| r.stats()))
    };
    let mean = |d: &Option<ByStatus>| d.as_ref()?.successful.as_ref().map(|d| d.mean);
    let sum = |d: &Option<ByStatus>| d.as_ref()?.successful.as_ref().map(|d| d.total_sum as u64);
    let strategy = b.config.as_ref().map(|c| &c.strategy);
    let load = match strategy {
        Some(s) => ImportedLoad {
            mode: match s.type_.as_str() {
                "synchronous" | "concurrent" => Some("closed".into()),
                "constant" | "poisson" => Some("open".into()),
                _ => None,
            },
            concurrency: match s.type_.as_str() {
                "synchronous" => Some(1),
                _ => s.streams.or(s.max_concurrency),
            },
            rate: s.rate,
            arrival: Some(s.type_.clone()),
            requests: None,
        },
        None => ImportedLoad::default(),
    };
    let at_time = |t: Option<f64>| {
        let t = t?;
        let dt = chrono::DateTime::from_timestamp(t.floor() as i64, ((t.fract()) * 1e9) as u32)?;
        Some(dt.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
    };
    Ok(Imported {
        tool: TOOL.into(),
        tool_version: report.guidellm_version.clone(),
        format_version: Some(VERSION.to_string()),
        files: vec![file],
        definitions: definitions(),
        load,
        model: None,
        endpoint: None,
        url: None,
        stream: None,
        started_at: at_time(b.start_time),
        ended_at: at_time(b.end_time),
        interrupted: false,
        requests,
        tokens: crate::metrics::TokenCounts {
            input_total: sum(&m.prompt_token_count),
            output_total: sum(&m.output_token_count),
            ..Default::default()
        },
        latency: crate::metrics::LatencyMetrics {
            ttft_ms: stats("time_to_first_token_ms", &m.time_to_first_token_ms, MILLIS)?,
            tpot_ms: records.as_deref().and_then(tpot),
            itl_ms: None,
            e2e_ms: stats("request_latency", &m.request_latency, SECONDS)?,
            ..Default::default()
        },
        throughput: crate::metrics::Throughput {
            requests_per_s: mean(&m.requests_per_second),
            output_tokens_per_s: mean(&m.output_tokens_per_second),
            total_tokens_per_s: mean(&m.tokens_per_second),
        },
        goodput_requests_per_s: None,
        duration_s: b.duration,
        records,
        notes,
    })
}

/// infergate's TPOT of the records: one value per ok request with more than one output token,
/// (last token - first token) / (output tokens - 1), as infergate computes it for a run it
/// measured ([`RequestRecord::tpot_ms`] through [`MetricsAccumulator`]).
fn tpot(records: &[RequestRecord]) -> Option<Stats> {
    let mut acc = MetricsAccumulator::new(Slo::default());
    for r in records {
        acc.add(r);
    }
    acc.finish(None).latency.tpot_ms
}

/// The benchmark's values (`at`: its JSON path) against what they can be: its times, duration
/// and settings, its request totals (the classes add up to the total), its distributions and
/// rates.
fn check(c: &Checker, at: &str, b: &Benchmark) -> Result<(), ImportError> {
    let start = b.start_time.map(|t| c.epoch_s(&format!("{at}.start_time"), t)).transpose()?;
    let end = b.end_time.map(|t| c.epoch_s(&format!("{at}.end_time"), t)).transpose()?;
    if let (Some(s), Some(e)) = (start, end) {
        c.not_before(
            &format!("{at}.end_time"),
            e,
            &format!("{at}.start_time"),
            s,
            "a benchmark ends after it starts",
        )?;
    }
    if let Some(d) = b.duration {
        c.duration_s(&format!("{at}.duration"), d)?;
    }
    if let Some(s) = b.config.as_ref().map(|c| &c.strategy) {
        let field = |name: &str| format!("{at}.config.strategy.{name}");
        if let Some(r) = s.rate {
            c.positive(&field("rate"), r)?;
        }
        for (name, v) in [("streams", s.streams), ("max_concurrency", s.max_concurrency)] {
            if let Some(v) = v {
                c.count(&field(name), v)?;
            }
        }
    }
    let m = &b.metrics;
    let t = &m.request_totals;
    let totals = format!("{at}.metrics.request_totals");
    for (name, v) in [
        ("successful", t.successful),
        ("errored", t.errored),
        ("incomplete", t.incomplete),
        ("total", t.total),
    ] {
        c.count(&format!("{totals}.{name}"), v)?;
    }
    let classes = t.successful + t.errored + t.incomplete;
    if classes != t.total {
        return Err(c.impossible(
            &format!("{totals}.total"),
            t.total,
            format!(
                "`successful` + `errored` + `incomplete` is {} + {} + {} = {classes}: the total \
                 counts each request once, in one class",
                t.successful, t.errored, t.incomplete
            ),
        ));
    }
    let metrics = format!("{at}.metrics");
    latency(c, &metrics, "inter_token_latency_ms", &m.inter_token_latency_ms, MILLIS)?;
    for (name, d) in [
        ("requests_per_second", &m.requests_per_second),
        ("output_tokens_per_second", &m.output_tokens_per_second),
        ("tokens_per_second", &m.tokens_per_second),
    ] {
        if let Some(d) = d.as_ref().and_then(|d| d.successful.as_ref()) {
            c.rate(&format!("{metrics}.{name}.successful.mean"), d.mean)?;
        }
    }
    for (name, d) in [
        ("prompt_token_count", &m.prompt_token_count),
        ("output_token_count", &m.output_token_count),
    ] {
        if let Some(d) = d.as_ref().and_then(|d| d.successful.as_ref()) {
            c.whole(&format!("{metrics}.{name}.successful.total_sum"), d.total_sum)?;
        }
    }
    Ok(())
}

/// Every kept request as a record, times counted from the earliest send; each request's times
/// checked (wall-clock times, in order: sent, first token, last token, end) and its counts.
fn records(c: &Checker, at: &str, r: &Requests) -> Result<Vec<RequestRecord>, ImportError> {
    let classes =
        [("successful", &r.successful), ("errored", &r.errored), ("incomplete", &r.incomplete)];
    for (class, list) in classes {
        for (j, s) in list.iter().enumerate() {
            check_request(c, &format!("{at}.requests.{class}[{j}]"), s)?;
        }
    }
    let all = r
        .successful
        .iter()
        .map(|s| (s, Outcome::Ok))
        .chain(
            r.errored
                .iter()
                .map(|s| (s, failure_class(None, s.info.error.as_deref().unwrap_or("")))),
        )
        .chain(r.incomplete.iter().map(|s| (s, Outcome::Interrupted)));
    let origin = [&r.successful, &r.errored, &r.incomplete]
        .iter()
        .flat_map(|v| v.iter())
        .filter_map(|s| s.info.timings.request_start)
        .fold(f64::INFINITY, f64::min);
    let ms = |t: f64| (t - origin) * 1000.0;
    Ok(all
        .enumerate()
        .map(|(id, (s, class))| {
            let t = &s.info.timings;
            let start = t.request_start.map_or(0.0, ms);
            let end = t.request_end.map_or(start, ms);
            let id = id as u64;
            let mut rec = match (class, t.first_token_iteration) {
                (Outcome::Ok, Some(first)) => {
                    let mut rec = RequestRecord::ok(id, start, ms(first), Vec::new());
                    rec.last_token_ms = t.last_token_iteration.map(ms);
                    rec.content_events = t.token_iterations;
                    rec.end_ms = end;
                    rec
                }
                (class, _) => {
                    let status = (class == Outcome::Ok).then_some(200);
                    let mut rec = RequestRecord::failed(id, start, class, status, end);
                    rec.error = s.info.error.clone();
                    rec
                }
            };
            rec.input_tokens = s.input_metrics.as_ref().and_then(|u| u.total_tokens);
            rec.output_tokens = s.output_metrics.as_ref().and_then(|u| u.total_tokens);
            rec
        })
        .collect())
}

/// One kept request (`at`: its JSON path): its wall-clock times in range and in order, its
/// counts in range.
fn check_request(c: &Checker, at: &str, s: &RequestStats) -> Result<(), ImportError> {
    let t = &s.info.timings;
    let later = [t.first_token_iteration, t.last_token_iteration, t.request_end];
    if t.request_start.is_none() && later.iter().any(Option::is_some) {
        return Err(ImportError::field(
            c.path,
            WHAT,
            &format!("{at}.info.timings.request_start"),
            "missing, while the request has a first token or an end: a request that ended was sent",
        ));
    }
    let times = [
        ("request_start", t.request_start),
        ("first_token_iteration", t.first_token_iteration),
        ("last_token_iteration", t.last_token_iteration),
        ("request_end", t.request_end),
    ];
    let mut before: Option<(&str, f64)> = None;
    for (name, v) in times {
        let Some(v) = v else { continue };
        let field = format!("{at}.info.timings.{name}");
        c.epoch_s(&field, v)?;
        if let Some((earlier, e)) = before {
            c.not_before(
                &field,
                v,
                &format!("{at}.info.timings.{earlier}"),
                e,
                "a request is sent, then streams its first token, its last, then ends",
            )?;
        }
        before = Some((name, v));
    }
    c.count(&format!("{at}.info.timings.token_iterations"), t.token_iterations)?;
    for (name, u) in [("input_metrics", &s.input_metrics), ("output_metrics", &s.output_metrics)] {
        if let Some(n) = u.as_ref().and_then(|u| u.total_tokens) {
            c.count(&format!("{at}.{name}.total_tokens"), n)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::{ProptestConfig, prop, prop_assert, prop_oneof, proptest};
    use proptest::strategy::Strategy as _;
    use serde_json::{Value, json};

    use super::*;
    use crate::foreign::testkit::{
        assert_refused, assert_sane, edits, num, object, opt, set, write,
    };

    /// A successful-requests distribution from its minimum, mean and maximum.
    fn dist(min: f64, mean: f64, max: f64, count: u64) -> Value {
        let mid = (min + max) / 2.0;
        json!({"successful": {
            "mean": mean, "median": mid, "std_dev": (max - min) / 2.0, "min": min, "max": max,
            "count": count, "total_sum": mean * count as f64,
            "percentiles": {"p50": mid, "p90": max, "p95": max, "p99": max, "p999": max}
        }, "errored": null, "incomplete": null, "total": null})
    }

    /// One kept request: its send, first and last token, end (seconds after the epoch's
    /// 1764930000) and output tokens.
    fn request(
        start: f64,
        first: Option<f64>,
        last: Option<f64>,
        end: f64,
        out: Option<u64>,
    ) -> Value {
        let t0 = 1764930000.0;
        json!({"info": {"timings": {
            "request_start": t0 + start, "first_token_iteration": first.map(|f| t0 + f),
            "last_token_iteration": last.map(|l| t0 + l), "request_end": t0 + end,
            "token_iterations": out.unwrap_or(0)
        }, "error": if first.is_none() { json!("HTTP 500: internal error") } else { Value::Null }},
        "input_metrics": {"total_tokens": 32}, "output_metrics": {"total_tokens": out}})
    }

    /// A consistent report of one benchmark: three requests, two successful (4 tokens over 30
    /// ms after the first: 10 ms each; 9 tokens over 40 ms: 5 ms each), one errored.
    fn valid() -> Value {
        json!({"metadata": {"version": 2, "guidellm_version": "0.8.1"}, "benchmarks": [{
            "config": {"strategy": {"type_": "concurrent", "streams": 2}},
            "start_time": 1764930000.0, "end_time": 1764930000.25, "duration": 0.25,
            "metrics": {
                "request_totals": {"successful": 2, "errored": 1, "incomplete": 0, "total": 3},
                "requests_per_second": dist(8.0, 8.0, 8.0, 1),
                "output_tokens_per_second": dist(52.0, 52.0, 52.0, 1),
                "tokens_per_second": dist(308.0, 308.0, 308.0, 1),
                "prompt_token_count": dist(32.0, 32.0, 32.0, 2),
                "output_token_count": dist(4.0, 6.5, 9.0, 2),
                "time_to_first_token_ms": dist(50.0, 55.0, 60.0, 2),
                "inter_token_latency_ms": dist(5.0, 70.0 / 11.0, 10.0, 11),
                "request_latency": dist(0.09, 0.1, 0.11, 2),
            },
            "requests": {
                "successful": [
                    request(0.0, Some(0.05), Some(0.08), 0.09, Some(4)),
                    request(0.1, Some(0.16), Some(0.2), 0.21, Some(9)),
                ],
                "errored": [request(0.2, None, None, 0.22, None)],
                "incomplete": [],
            }
        }]})
    }

    fn import(v: &Value) -> (tempfile::TempDir, std::path::PathBuf, Result<Imported, ImportError>) {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "benchmarks.json", v);
        let got = read(&path, None);
        (dir, path, got)
    }

    #[test]
    fn tpot_is_one_value_per_request_with_more_than_one_output_token() {
        let (_d, _p, got) = import(&valid());
        let got = got.unwrap();
        assert_sane(&got);
        let tpot = got.latency.tpot_ms.clone().expect("TPOT from the kept requests");
        // Two requests, 10 ms and 5 ms: not guidellm's 11 token-weighted values.
        assert_eq!(tpot.count, 2);
        assert!((tpot.max - 10.0).abs() < 1e-3 && (tpot.min - 5.0).abs() < 1e-3, "{tpot:?}");
        assert!((tpot.mean - 7.5).abs() < 1e-3, "{tpot:?}");
        // A request of one output token has none.
        let mut one = valid();
        set(&mut one, "/benchmarks/0/requests/successful/1/output_metrics/total_tokens", json!(1));
        let (_d, _p, got) = import(&one);
        let tpot = got.unwrap().latency.tpot_ms.unwrap();
        assert_eq!(tpot.count, 1);
        assert!((tpot.mean - 10.0).abs() < 1e-3, "{tpot:?}");
        // Without every request kept there is no TPOT (a sample's would be an estimate).
        let mut sample = valid();
        sample["benchmarks"][0]["requests"]["successful"].as_array_mut().unwrap().pop();
        let (_d, _p, got) = import(&sample);
        let got = got.unwrap();
        assert!(got.latency.tpot_ms.is_none() && got.records.is_none());
    }

    #[test]
    fn only_the_chosen_benchmark_is_read_and_a_report_of_another_version_is_refused_for_it() {
        let mut two = valid();
        let b = two["benchmarks"][0].clone();
        two["benchmarks"].as_array_mut().unwrap().push(b);
        // The other benchmark is skipped, whatever it holds.
        set(&mut two, "/benchmarks/1/metrics", json!("not read"));
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "benchmarks.json", &two);
        assert!(read(&path, Some(0)).is_ok());
        let e = read(&path, None).unwrap_err().to_string();
        assert!(e.contains("holds 2 benchmarks: choose one with --benchmark I (0 to 1)"), "{e}");
        let e = read(&path, Some(5)).unwrap_err().to_string();
        assert!(e.contains("--benchmark 5 is not one of 0..1"), "{e}");
        // guidellm writes `metadata` first: a report of version 3 is refused for its version,
        // whatever shape its benchmarks have.
        let text =
            r#"{"metadata": {"version": 3}, "benchmarks": [{"metrics": "of another shape"}]}"#;
        let path = dir.path().join("v3.json");
        std::fs::write(&path, text).unwrap();
        let e = read(&path, None).unwrap_err().to_string();
        assert!(e.contains(&format!("{}: field `metadata.version` is 3", path.display())), "{e}");
    }

    fn impossible() -> Vec<(&'static str, Value, &'static str)> {
        vec![
            ("/benchmarks/0/duration", json!(-2.0), "benchmarks[0].duration"),
            ("/benchmarks/0/duration", json!(0), "benchmarks[0].duration"),
            ("/benchmarks/0/start_time", json!(1e308), "benchmarks[0].start_time"),
            ("/benchmarks/0/start_time", json!(-1e308), "benchmarks[0].start_time"),
            ("/benchmarks/0/end_time", json!(1764929999.0), "benchmarks[0].end_time"),
            (
                "/benchmarks/0/config/strategy",
                json!({"type_": "constant", "rate": -1}),
                "benchmarks[0].config.strategy.rate",
            ),
            (
                "/benchmarks/0/metrics/request_totals/total",
                json!(40),
                "benchmarks[0].metrics.request_totals.total",
            ),
            (
                "/benchmarks/0/metrics/request_totals/errored",
                json!(u64::MAX),
                "benchmarks[0].metrics.request_totals.errored",
            ),
            (
                "/benchmarks/0/metrics/time_to_first_token_ms/successful/mean",
                json!(-55.0),
                "benchmarks[0].metrics.time_to_first_token_ms.successful.mean",
            ),
            (
                "/benchmarks/0/metrics/time_to_first_token_ms/successful/min",
                json!(70.0),
                "benchmarks[0].metrics.time_to_first_token_ms.successful.percentiles.p50",
            ),
            (
                "/benchmarks/0/metrics/request_latency/successful/percentiles/p99",
                json!(1e308),
                "benchmarks[0].metrics.request_latency.successful.percentiles.p99",
            ),
            (
                "/benchmarks/0/metrics/request_latency/successful/percentiles/p90",
                json!(0.2),
                "benchmarks[0].metrics.request_latency.successful.percentiles.p95",
            ),
            (
                "/benchmarks/0/metrics/request_latency/successful/mean",
                json!(0.5),
                "benchmarks[0].metrics.request_latency.successful.mean",
            ),
            (
                "/benchmarks/0/metrics/inter_token_latency_ms/successful/std_dev",
                json!(-1),
                "benchmarks[0].metrics.inter_token_latency_ms.successful.std_dev",
            ),
            (
                "/benchmarks/0/metrics/requests_per_second/successful/mean",
                json!(-8.0),
                "benchmarks[0].metrics.requests_per_second.successful.mean",
            ),
            (
                "/benchmarks/0/metrics/output_token_count/successful/total_sum",
                json!(13.5),
                "benchmarks[0].metrics.output_token_count.successful.total_sum",
            ),
            (
                "/benchmarks/0/metrics/prompt_token_count/successful/total_sum",
                json!(-64),
                "benchmarks[0].metrics.prompt_token_count.successful.total_sum",
            ),
            (
                "/benchmarks/0/requests/successful/0/info/timings/first_token_iteration",
                json!(1764929999.0),
                "benchmarks[0].requests.successful[0].info.timings.first_token_iteration",
            ),
            (
                "/benchmarks/0/requests/successful/1/info/timings/request_end",
                json!(1764930000.19),
                "benchmarks[0].requests.successful[1].info.timings.request_end",
            ),
            (
                "/benchmarks/0/requests/successful/1/info/timings/request_start",
                json!(-1e308),
                "benchmarks[0].requests.successful[1].info.timings.request_start",
            ),
            (
                "/benchmarks/0/requests/errored/0/output_metrics/total_tokens",
                json!(u64::MAX),
                "benchmarks[0].requests.errored[0].output_metrics.total_tokens",
            ),
            (
                "/benchmarks/0/metrics/request_totals/successful",
                json!(1),
                "benchmarks[0].metrics.request_totals.total",
            ),
        ]
    }

    #[test]
    fn every_impossible_value_is_refused_with_the_file_and_the_field() {
        for (pointer, value, field) in impossible() {
            let mut doc = valid();
            set(&mut doc, pointer, value);
            let (_d, path, got) = import(&doc);
            assert_refused(got, &path, field);
        }
        // A kept request with a first token and an end but no send time.
        let mut doc = valid();
        let timings = "/benchmarks/0/requests/successful/0/info/timings";
        doc.pointer_mut(timings).unwrap().as_object_mut().unwrap().remove("request_start");
        let (_d, path, got) = import(&doc);
        assert_refused(
            got,
            &path,
            "benchmarks[0].requests.successful[0].info.timings.request_start",
        );
        // Kept requests of a class beyond its count: the list is named.
        let mut doc = valid();
        set(&mut doc, "/benchmarks/0/metrics/request_totals/successful", json!(1));
        set(&mut doc, "/benchmarks/0/metrics/request_totals/total", json!(2));
        let (_d, path, got) = import(&doc);
        assert_refused(got, &path, "benchmarks[0].requests.successful");
    }

    /// A report built field by field around one benchmark, each field present or not, of any
    /// number or none.
    fn built() -> impl proptest::strategy::Strategy<Value = Value> {
        let totals = prop::collection::vec(opt(num()), 4);
        let times = prop::collection::vec(opt(num()), 3);
        let d = || {
            (prop::collection::vec(num(), 6), prop::collection::vec(num(), 5)).prop_map(|(v, p)| {
                json!({"successful": {"mean": v[0], "std_dev": v[1], "min": v[2], "max": v[3],
                    "count": v[4], "total_sum": v[5], "percentiles": {"p50": p[0], "p90": p[1],
                    "p95": p[2], "p99": p[3], "p999": p[4]}}})
            })
        };
        let req = (prop::collection::vec(opt(num()), 5), opt(num())).prop_map(|(t, out)| {
            json!({"info": {"timings": object(vec![
                ("request_start", t[0].clone()), ("first_token_iteration", t[1].clone()),
                ("last_token_iteration", t[2].clone()), ("request_end", t[3].clone()),
                ("token_iterations", t[4].clone()),
            ])}, "output_metrics": object(vec![("total_tokens", out)])})
        });
        let reqs = (
            prop::collection::vec(req.clone(), 0..3),
            prop::collection::vec(req.clone(), 0..2),
            prop::collection::vec(req, 0..2),
        );
        (totals, times, opt(d()), opt(d()), opt(d()), reqs, opt(num())).prop_map(
            |(t, times, ttft, e2e, rps, (ok, err, inc), version)| {
                let totals = object(vec![
                    ("successful", t[0].clone()),
                    ("errored", t[1].clone()),
                    ("incomplete", t[2].clone()),
                    ("total", t[3].clone()),
                ]);
                let metrics = object(vec![
                    ("request_totals", Some(totals)),
                    ("time_to_first_token_ms", ttft),
                    ("request_latency", e2e),
                    ("requests_per_second", rps),
                ]);
                let benchmark = object(vec![
                    ("start_time", times[0].clone()),
                    ("end_time", times[1].clone()),
                    ("duration", times[2].clone()),
                    ("metrics", Some(metrics)),
                    (
                        "requests",
                        Some(json!({"successful": ok, "errored": err, "incomplete": inc})),
                    ),
                ]);
                json!({"metadata": object(vec![("version", version.or(Some(json!(2))))]),
                    "benchmarks": [benchmark]})
            },
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn any_guidellm_shaped_file_is_imported_sanely_or_refused(
            doc in prop_oneof![2 => edits(valid()), 1 => built()]
        ) {
            let (_d, path, got) = import(&doc);
            match got {
                Ok(i) => assert_sane(&i),
                Err(e) => prop_assert!(e.to_string().contains(&path.display().to_string()), "{e}"),
            }
        }

        #[test]
        fn one_impossible_value_is_refused_naming_its_field(case in 0..impossible().len()) {
            let (pointer, value, field) = impossible().swap_remove(case);
            let mut doc = valid();
            set(&mut doc, pointer, value);
            let (_d, path, got) = import(&doc);
            assert_refused(got, &path, field);
        }
    }
}
