//! guidellm's benchmarks report (`benchmarks.json`) read as an imported run: one of its
//! benchmarks (one per load strategy of a sweep). The fields follow guidellm's own models
//! (guidellm 0.8, `benchmark/schemas/report.py`: `metadata.version` 2, `benchmarks`;
//! `benchmark/schemas/benchmark.py` and `metrics.py`: per metric a distribution by request
//! status, `successful` / `errored` / `incomplete` / `total`, each with `mean`, `median`,
//! `std_dev`, `min`, `max`, `count`, `total_sum` and `percentiles`; `requests`: the requests
//! it kept, by status, with their timings in epoch seconds).

use std::path::Path;

use serde::Deserialize;

use super::{
    ImportError, Imported, ImportedLoad, Reported, counts_of, failure_class, parse_json,
    read_source,
};
use crate::outcome::Outcome;
use crate::record::RequestRecord;

const WHAT: &str = "a guidellm benchmarks report";
const TOOL: &str = "guidellm";
/// The report schema version read (`metadata.version`).
const VERSION: u64 = 2;

#[derive(Debug, Deserialize)]
struct Report {
    metadata: Metadata,
    benchmarks: Vec<Benchmark>,
}

#[derive(Debug, Deserialize)]
struct Metadata {
    #[serde(default)]
    guidellm_version: Option<String>,
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

#[derive(Debug, Deserialize)]
struct Requests {
    #[serde(default)]
    successful: Vec<RequestStats>,
    #[serde(default)]
    errored: Vec<RequestStats>,
    #[serde(default)]
    incomplete: Vec<RequestStats>,
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
            "{TOOL}: its inter_token_latency_ms ((last token - first token) / (output tokens - \
             1)) is infergate's TPOT; it records no per-gap ITL (blank), and its \
             time_per_output_token_ms (which includes the TTFT) has no infergate counterpart"
        ),
        format!(
            "{TOOL}: its throughputs are the means of its rate distributions over the benchmark"
        ),
    ]
}

fn reported(d: &Option<ByStatus>, scale: f64) -> Option<Reported> {
    let d = d.as_ref()?.successful.as_ref()?;
    Some(Reported {
        count: Some(d.count),
        mean: Some(d.mean * scale),
        stdev: Some(d.std_dev * scale),
        min: Some(d.min * scale),
        p50: Some(d.percentiles.p50 * scale),
        p90: Some(d.percentiles.p90 * scale),
        p95: Some(d.percentiles.p95 * scale),
        p99: Some(d.percentiles.p99 * scale),
        p999: Some(d.percentiles.p999 * scale),
        max: Some(d.max * scale),
    })
}

/// Read benchmark `index` of the report (the only one when it holds one).
pub fn read(path: &Path, index: Option<usize>) -> Result<Imported, ImportError> {
    let (text, file) = read_source(path)?;
    let doc: serde_json::Value = parse_json(path, &text, WHAT)?;
    let version = doc.pointer("/metadata/version");
    if version.and_then(|v| v.as_u64()) != Some(VERSION) {
        return Err(ImportError::Version {
            path: path.to_path_buf(),
            what: WHAT,
            field: "metadata.version".into(),
            found: version.map_or("missing".into(), |v| v.to_string()),
            reads: "2 (guidellm 0.4 and later)",
        });
    }
    let report: Report = parse_json(path, &text, WHAT)?;
    let n = report.benchmarks.len();
    let i = match (index, n) {
        (Some(i), n) if i < n => i,
        (None, 1) => 0,
        (Some(i), n) => {
            return Err(ImportError::field(
                path,
                WHAT,
                "benchmarks",
                format!("holds {n} benchmarks: --benchmark {i} is not one of 0..{}", n.max(1) - 1),
            ));
        }
        (None, n) => {
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
    let b = &report.benchmarks[i];
    let m = &b.metrics;
    let t = &m.request_totals;
    let mut notes = vec![];
    if n > 1 {
        notes.push(format!("benchmark {i} of the {n} in the report"));
    }
    let records = match &b.requests {
        Some(r) => {
            let kept = (r.successful.len() + r.errored.len() + r.incomplete.len()) as u64;
            if kept == t.total {
                Some(records(r))
            } else {
                notes.push(format!(
                    "{TOOL} kept {kept} of the benchmark's {} requests: no requests.jsonl (a \
                     sample would give intervals of the sample)",
                    t.total
                ));
                None
            }
        }
        None => None,
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
    let stats = |d: &Option<ByStatus>, scale: f64| reported(d, scale).and_then(|r| r.stats());
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
    let at = |t: Option<f64>| {
        let t = t?;
        let dt = chrono::DateTime::from_timestamp(t.floor() as i64, ((t.fract()) * 1e9) as u32)?;
        Some(dt.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
    };
    Ok(Imported {
        tool: TOOL.into(),
        tool_version: report.metadata.guidellm_version.clone(),
        format_version: Some(VERSION.to_string()),
        files: vec![file],
        definitions: definitions(),
        load,
        model: None,
        endpoint: None,
        url: None,
        stream: None,
        started_at: at(b.start_time),
        ended_at: at(b.end_time),
        interrupted: false,
        requests,
        tokens: crate::metrics::TokenCounts {
            input_total: sum(&m.prompt_token_count),
            output_total: sum(&m.output_token_count),
            ..Default::default()
        },
        latency: crate::metrics::LatencyMetrics {
            ttft_ms: stats(&m.time_to_first_token_ms, 1.0),
            tpot_ms: stats(&m.inter_token_latency_ms, 1.0),
            itl_ms: None,
            e2e_ms: stats(&m.request_latency, 1000.0),
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

/// Every kept request as a record, times counted from the earliest send.
fn records(r: &Requests) -> Vec<RequestRecord> {
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
    all.enumerate()
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
        .collect()
}
