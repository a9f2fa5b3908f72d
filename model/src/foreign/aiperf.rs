//! AIPerf's exports read as an imported run: the aggregate `profile_export_aiperf.json` and,
//! when it lies beside it, the per-request `profile_export.jsonl`. The fields follow AIPerf's
//! own models (`aiperf/common/models/export_models.py`, `JsonExportData` of export schema 1.x,
//! AIPerf 0.13: one object per metric with `unit`, `avg`, `min`, `max`, `std`, `p1`..`p99`,
//! `count`; `record_models.py`, `MetricRecordInfo`: per request `metadata` with its
//! nanosecond timestamps, `metrics` of `{value, unit}` and `error`). A file without
//! `schema_version` (AIPerf before it wrote one) is read as 1.0.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use super::{
    ImportError, Imported, ImportedLoad, Reported, counts_of, failure_class, ms_factor, parse_json,
    read_source, to_ms,
};
use crate::outcome::Outcome;
use crate::record::RequestRecord;

const WHAT: &str = "an AIPerf profile export (profile_export_aiperf.json)";
const WHAT_RECORD: &str = "an AIPerf per-request record (profile_export.jsonl)";
const TOOL: &str = "aiperf";
/// The export schema major version read.
const SCHEMA_MAJOR: &str = "1";
/// The per-request file AIPerf writes beside the aggregate one.
pub(crate) const RECORDS_FILE: &str = "profile_export.jsonl";

/// One metric of the aggregate export.
#[derive(Clone, Debug, Default, Deserialize)]
struct MetricResult {
    unit: String,
    #[serde(default)]
    avg: Option<f64>,
    #[serde(default)]
    p50: Option<f64>,
    #[serde(default)]
    p90: Option<f64>,
    #[serde(default)]
    p95: Option<f64>,
    #[serde(default)]
    p99: Option<f64>,
    #[serde(default)]
    min: Option<f64>,
    #[serde(default)]
    max: Option<f64>,
    #[serde(default)]
    std: Option<f64>,
    #[serde(default)]
    count: Option<u64>,
}

#[derive(Debug, Deserialize)]
struct Export {
    #[serde(default)]
    schema_version: Option<String>,
    #[serde(default)]
    aiperf_version: Option<String>,
    #[serde(default)]
    request_throughput: Option<MetricResult>,
    #[serde(default)]
    request_latency: Option<MetricResult>,
    #[serde(default)]
    request_count: Option<MetricResult>,
    #[serde(default)]
    time_to_first_token: Option<MetricResult>,
    #[serde(default)]
    inter_token_latency: Option<MetricResult>,
    #[serde(default)]
    inter_chunk_latency: Option<MetricResult>,
    #[serde(default)]
    output_token_throughput: Option<MetricResult>,
    #[serde(default)]
    goodput: Option<MetricResult>,
    #[serde(default)]
    benchmark_duration: Option<MetricResult>,
    #[serde(default)]
    total_isl: Option<MetricResult>,
    #[serde(default)]
    total_osl: Option<MetricResult>,
    #[serde(default)]
    error_request_count: Option<MetricResult>,
    #[serde(default)]
    was_cancelled: Option<bool>,
    #[serde(default)]
    start_time: Option<String>,
    #[serde(default)]
    end_time: Option<String>,
    #[serde(default)]
    input_config: Option<serde_json::Value>,
}

/// A per-request record of `profile_export.jsonl`.
#[derive(Debug, Deserialize)]
struct Record {
    metadata: Metadata,
    #[serde(default)]
    metrics: BTreeMap<String, MetricValue>,
    #[serde(default)]
    error: Option<ErrorDetails>,
}

#[derive(Debug, Deserialize)]
struct Metadata {
    request_start_ns: u64,
    request_end_ns: u64,
    #[serde(default)]
    benchmark_phase: Option<String>,
    #[serde(default)]
    was_cancelled: bool,
}

#[derive(Debug, Deserialize)]
struct MetricValue {
    value: serde_json::Value,
    unit: String,
}

#[derive(Debug, Deserialize)]
struct ErrorDetails {
    #[serde(default)]
    code: Option<i64>,
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

fn definitions() -> Vec<String> {
    vec![
        format!(
            "{TOOL}: its latencies count from when the request was sent (request_start_ns), not \
             from the intended send time"
        ),
        format!(
            "{TOOL}: its percentiles are linear interpolation over the raw values (infergate's: \
             HdrHistogram, within 0.1%), its stdev the population's; it reports no P99.9 (blank)"
        ),
        format!(
            "{TOOL}: its inter_token_latency ((request latency - TTFT) / (output tokens - 1)) is \
             infergate's TPOT, its inter_chunk_latency (the gaps between streamed chunks) \
             infergate's ITL; its request_latency (to the last response) is the E2E"
        ),
    ]
}

pub fn read(path: &Path) -> Result<Imported, ImportError> {
    let (text, file) = read_source(path)?;
    let e: Export = parse_json(path, &text, WHAT)?;
    match &e.schema_version {
        Some(v) if v.split('.').next() != Some(SCHEMA_MAJOR) => {
            return Err(ImportError::Version {
                path: path.to_path_buf(),
                what: WHAT,
                field: "schema_version".into(),
                found: format!("\"{v}\""),
                reads: "1.x",
            });
        }
        _ => {}
    }
    let stats = |field: &str, m: &Option<MetricResult>| -> Result<Option<_>, ImportError> {
        let Some(m) = m else { return Ok(None) };
        let f = ms_factor(&m.unit).ok_or_else(|| {
            ImportError::field(
                path,
                WHAT,
                &format!("{field}.unit"),
                format!("`{}`: a latency's unit is ns, us, ms or sec", m.unit),
            )
        })?;
        let c = |v: Option<f64>| v.map(|v| to_ms(v, f));
        Ok(Reported {
            count: m.count,
            mean: c(m.avg),
            stdev: c(m.std),
            min: c(m.min),
            p50: c(m.p50),
            p90: c(m.p90),
            p95: c(m.p95),
            p99: c(m.p99),
            p999: None,
            max: c(m.max),
        }
        .stats())
    };
    let avg = |m: &Option<MetricResult>| m.as_ref().and_then(|m| m.avg);
    let mut notes = Vec::new();
    let dir = path.parent().unwrap_or(Path::new("."));
    let records_path = dir.join(RECORDS_FILE);
    let mut files = vec![file];
    let records = if records_path.is_file() {
        let (text, file) = read_source(&records_path)?;
        files.push(file);
        Some(records(&records_path, &text)?)
    } else {
        notes.push(format!("no {RECORDS_FILE} beside the export: no per-request records"));
        None
    };
    let ok = avg(&e.request_count).map(|v| v as u64).unwrap_or(0);
    let failed = avg(&e.error_request_count).map(|v| v as u64).unwrap_or(0);
    // With per-request records each request has its class (a cancelled one apart from the
    // failed, which AIPerf's error count includes); without, AIPerf's counts.
    let requests = match records.as_deref() {
        Some(recs) => {
            let c = counts_of(recs);
            if c.ok != ok {
                notes.push(format!(
                    "{RECORDS_FILE} holds {} ok requests, the export's request_count is {ok}",
                    c.ok
                ));
            }
            c
        }
        None => {
            crate::metrics::RequestCounts { total: ok + failed, ok, failed, ..Default::default() }
        }
    };
    let cfg = e.input_config.as_ref();
    let get = |p: &str| cfg.and_then(|c| c.pointer(p));
    let concurrency = get("/loadgen/concurrency").and_then(|v| v.as_u64());
    let rate = get("/loadgen/request_rate").and_then(|v| v.as_f64());
    let load = ImportedLoad {
        mode: match (rate, concurrency) {
            (Some(_), _) => Some("open".into()),
            (None, Some(_)) => Some("closed".into()),
            _ => None,
        },
        concurrency,
        rate,
        arrival: get("/loadgen/request_rate_mode").and_then(|v| v.as_str()).map(str::to_string),
        requests: get("/loadgen/request_count").and_then(|v| v.as_u64()),
    };
    let duration_s = match &e.benchmark_duration {
        Some(d) => {
            let f = ms_factor(&d.unit).ok_or_else(|| {
                ImportError::field(
                    path,
                    WHAT,
                    "benchmark_duration.unit",
                    "a duration's unit is sec",
                )
            })?;
            d.avg.map(|v| to_ms(v, f) / 1000.0)
        }
        None => None,
    };
    if e.start_time.is_some() {
        notes.push(format!("{TOOL}'s start and end times carry no time zone (its host's clock)"));
    }
    Ok(Imported {
        tool: TOOL.into(),
        tool_version: e.aiperf_version.clone(),
        format_version: Some(e.schema_version.clone().unwrap_or_else(|| "1.0".into())),
        files,
        definitions: definitions(),
        load,
        model: get("/endpoint/model_names/0").and_then(|v| v.as_str()).map(str::to_string),
        endpoint: get("/endpoint/type").and_then(|v| v.as_str()).map(str::to_string),
        url: get("/endpoint/url").and_then(|v| v.as_str()).map(str::to_string),
        stream: get("/endpoint/streaming").and_then(|v| v.as_bool()),
        started_at: e.start_time.clone(),
        ended_at: e.end_time.clone(),
        interrupted: e.was_cancelled.unwrap_or(false),
        requests,
        tokens: crate::metrics::TokenCounts {
            input_total: avg(&e.total_isl).map(|v| v as u64),
            output_total: avg(&e.total_osl).map(|v| v as u64),
            ..Default::default()
        },
        latency: crate::metrics::LatencyMetrics {
            ttft_ms: stats("time_to_first_token", &e.time_to_first_token)?,
            tpot_ms: stats("inter_token_latency", &e.inter_token_latency)?,
            itl_ms: stats("inter_chunk_latency", &e.inter_chunk_latency)?,
            e2e_ms: stats("request_latency", &e.request_latency)?,
            ..Default::default()
        },
        throughput: crate::metrics::Throughput {
            requests_per_s: avg(&e.request_throughput),
            output_tokens_per_s: avg(&e.output_token_throughput),
            total_tokens_per_s: None,
        },
        goodput_requests_per_s: avg(&e.goodput),
        duration_s,
        records,
        notes,
    })
}

/// The per-request records of `profile_export.jsonl`, times counted from the earliest start.
fn records(path: &Path, text: &str) -> Result<Vec<RequestRecord>, ImportError> {
    let mut parsed = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let r: Record = parse_json(path, line, WHAT_RECORD).map_err(|e| at_line(e, i + 1))?;
        parsed.push((i + 1, r));
    }
    let origin = parsed.iter().map(|(_, r)| r.metadata.request_start_ns).min().unwrap_or(0);
    let ms = |ns: u64| ns.saturating_sub(origin) as f64 / 1e6;
    let mut out = Vec::with_capacity(parsed.len());
    for (id, (line, r)) in parsed.iter().enumerate() {
        let field_err = |field: String, message: String| ImportError::Field {
            path: path.to_path_buf(),
            line: Some(*line),
            what: WHAT_RECORD,
            field,
            message,
        };
        let value_ms = |name: &str| -> Result<Option<Vec<f64>>, ImportError> {
            let Some(m) = r.metrics.get(name) else { return Ok(None) };
            let f = ms_factor(&m.unit).ok_or_else(|| {
                field_err(
                    format!("metrics.{name}.unit"),
                    format!("`{}` is not a time unit", m.unit),
                )
            })?;
            let nums: Option<Vec<f64>> = match &m.value {
                serde_json::Value::Array(a) => a.iter().map(|v| v.as_f64()).collect(),
                v => v.as_f64().map(|x| vec![x]),
            };
            let nums = nums.ok_or_else(|| {
                field_err(format!("metrics.{name}.value"), "not a number or list of numbers".into())
            })?;
            Ok(Some(nums.into_iter().map(|v| to_ms(v, f)).collect()))
        };
        let count = |name: &str| r.metrics.get(name).and_then(|m| m.value.as_u64());
        let start = ms(r.metadata.request_start_ns);
        let end = ms(r.metadata.request_end_ns);
        let id = id as u64;
        let mut rec = match (&r.error, r.metadata.was_cancelled) {
            (_, true) => RequestRecord::failed(id, start, Outcome::Cancelled, None, end),
            (Some(err), false) => {
                let status = err.code.and_then(|c| u16::try_from(c).ok());
                let text = format!(
                    "{}: {}",
                    err.kind.as_deref().unwrap_or(""),
                    err.message.as_deref().unwrap_or("")
                );
                let mut rec =
                    RequestRecord::failed(id, start, failure_class(status, &text), status, end);
                rec.error = Some(text);
                rec
            }
            (None, false) => match value_ms("time_to_first_token")? {
                Some(ttft) => {
                    let gaps = value_ms("inter_chunk_latency")?.unwrap_or_default();
                    let mut rec = RequestRecord::ok(id, start, start + ttft[0], gaps);
                    rec.end_ms = end;
                    rec.output_tokens = count("output_sequence_length");
                    rec
                }
                None => {
                    let mut rec = RequestRecord::failed(id, start, Outcome::Ok, Some(200), end);
                    rec.output_tokens = count("output_sequence_length");
                    rec
                }
            },
        };
        rec.warmup = r.metadata.benchmark_phase.as_deref() == Some("warmup");
        rec.input_tokens = count("input_sequence_length").or_else(|| count("error_isl"));
        out.push(rec);
    }
    Ok(out)
}

/// A line's parse error with its line number.
fn at_line(e: ImportError, line: usize) -> ImportError {
    match e {
        ImportError::Field { path, what, field, message, .. } => {
            ImportError::Field { path, line: Some(line), what, field, message }
        }
        ImportError::Syntax { path, column, message, .. } => {
            ImportError::Syntax { path, line, column, message }
        }
        other => other,
    }
}
