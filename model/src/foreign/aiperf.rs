//! AIPerf's exports read as an imported run: the aggregate `profile_export_aiperf.json` and,
//! when it lies beside it, the per-request `profile_export.jsonl`. The fields follow AIPerf's
//! own models (`aiperf/common/models/export_models.py`, `JsonExportData` of export schema 1.x,
//! AIPerf 0.13: one object per metric with `unit`, `avg`, `min`, `max`, `std`, `p1`..`p99`,
//! `count`; `record_models.py`, `MetricRecordInfo`: per request `metadata` with its
//! nanosecond timestamps, `metrics` of `{value, unit}` and `error`). A file without
//! `schema_version` (AIPerf before it wrote one) is read as 1.0. The export streams as one JSON
//! document, `profile_export.jsonl` line by line (each line at most
//! [`MAX_LINE_BYTES`](super::MAX_LINE_BYTES)); every value is checked against what it can be
//! ([`Checker`]).

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use serde::de::IgnoredAny;

use super::{
    Checker, ImportError, Imported, ImportedLoad, Loose, MAX_FILE_BYTES, MAX_LINE_BYTES,
    MAX_REQUESTS, MAX_SECONDS, MAX_VALUES, Source, Stat, Written, counts_of, failure_class,
    ms_factor, parse_line,
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
    value: Reading,
    unit: String,
}

/// A per-request metric's value: a number, a list of numbers (8 bytes each, not a JSON tree),
/// null, or something else (described, not kept).
#[derive(Debug)]
enum Reading {
    One(f64),
    List(Vec<f64>),
    Null,
    Other,
}

impl<'de> Deserialize<'de> for Reading {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Reading, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Reading;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a number or a list of numbers")
            }
            fn visit_u64<E>(self, v: u64) -> Result<Reading, E> {
                Ok(Reading::One(v as f64))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Reading, E> {
                Ok(Reading::One(v as f64))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Reading, E> {
                Ok(Reading::One(v))
            }
            fn visit_unit<E>(self) -> Result<Reading, E> {
                Ok(Reading::Null)
            }
            fn visit_none<E>(self) -> Result<Reading, E> {
                Ok(Reading::Null)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Reading, E> {
                Ok(Reading::Other)
            }
            fn visit_str<E>(self, _: &str) -> Result<Reading, E> {
                Ok(Reading::Other)
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut a: A,
            ) -> Result<Reading, A::Error> {
                while a.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Reading::Other)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut a: A,
            ) -> Result<Reading, A::Error> {
                let mut out = Vec::new();
                let mut numbers = true;
                while let Some(v) = a.next_element::<Loose>()? {
                    match v.as_f64() {
                        Some(x) if numbers => out.push(x),
                        _ => numbers = false,
                    }
                }
                Ok(if numbers { Reading::List(out) } else { Reading::Other })
            }
        }
        d.deserialize_any(V)
    }
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

/// How far a request's first or last token may pass its end: the rounding of a sum of
/// floating-point milliseconds, 1 µs.
const SLACK_MS: f64 = 1e-3;

/// An AIPerf start or end time: ISO 8601 without a time zone (its host's clock), or with one.
fn date_time(c: &Checker, field: &str, text: &str) -> Result<f64, ImportError> {
    let parsed = chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S%.f")
        .map(|t| t.and_utc().timestamp_micros())
        .or_else(|_| chrono::DateTime::parse_from_rfc3339(text).map(|t| t.timestamp_micros()))
        .map_err(|_| {
            ImportError::field(
                c.path,
                WHAT,
                field,
                format!("`{text}` is not a date and time (ISO 8601: 2026-12-05T10:00:00.000000)"),
            )
        })?;
    let s = parsed as f64 / 1e6;
    if !(super::EPOCH_MIN_S..=super::EPOCH_MAX_S).contains(&s) {
        return Err(c.impossible(
            field,
            format!("\"{text}\""),
            "a date from 2000-01-01 to 2100-01-01",
        ));
    }
    Ok(s)
}

pub fn read(path: &Path) -> Result<Imported, ImportError> {
    let mut source = Source::open(path, MAX_FILE_BYTES)?;
    let e: Export = source.json(WHAT)?;
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
    let file = source.finish()?;
    let c = Checker::new(path);
    let unit = |field: &str, m: &MetricResult, valid: &str| {
        ms_factor(&m.unit).ok_or_else(|| {
            ImportError::field(
                path,
                WHAT,
                &format!("{field}.unit"),
                format!("`{}`: {valid}", m.unit),
            )
        })
    };
    let stats = |field: &str, m: &Option<MetricResult>| -> Result<Option<_>, ImportError> {
        let Some(m) = m else { return Ok(None) };
        let f = unit(field, m, "a latency's unit is ns, us, ms or sec")?;
        let s = |name: &str, v: Option<f64>| Some(Stat::new(format!("{field}.{name}"), v?));
        let written = Written {
            count: m.count.map(|n| (format!("{field}.count"), n)),
            mean: s("avg", m.avg),
            stdev: s("std", m.std),
            min: s("min", m.min),
            p50: s("p50", m.p50),
            p90: s("p90", m.p90),
            p95: s("p95", m.p95),
            p99: s("p99", m.p99),
            p999: None,
            max: s("max", m.max),
        };
        Ok(written.checked(&c, f)?.stats())
    };
    let avg = |m: &Option<MetricResult>| m.as_ref().and_then(|m| m.avg);
    let rate = |field: &str, m: &Option<MetricResult>| -> Result<Option<f64>, ImportError> {
        avg(m).map(|v| c.rate(&format!("{field}.avg"), v)).transpose()
    };
    let whole = |field: &str, m: &Option<MetricResult>| -> Result<Option<u64>, ImportError> {
        avg(m).map(|v| c.whole(&format!("{field}.avg"), v)).transpose()
    };
    let ok = whole("request_count", &e.request_count)?.unwrap_or(0);
    let failed = whole("error_request_count", &e.error_request_count)?.unwrap_or(0);
    let input_total = whole("total_isl", &e.total_isl)?;
    let output_total = whole("total_osl", &e.total_osl)?;
    let throughput = crate::metrics::Throughput {
        requests_per_s: rate("request_throughput", &e.request_throughput)?,
        output_tokens_per_s: rate("output_token_throughput", &e.output_token_throughput)?,
        total_tokens_per_s: None,
    };
    let goodput = rate("goodput", &e.goodput)?;
    let duration_s = match &e.benchmark_duration {
        Some(d) => {
            let f = unit("benchmark_duration", d, "a duration's unit is sec")?;
            d.avg.map(|v| c.duration("benchmark_duration.avg", v, f)).transpose()?
        }
        None => None,
    };
    let started = e.start_time.as_deref().map(|t| date_time(&c, "start_time", t)).transpose()?;
    let ended = e.end_time.as_deref().map(|t| date_time(&c, "end_time", t)).transpose()?;
    if let (Some(s), Some(end)) = (started, ended)
        && end < s
    {
        return Err(c.impossible(
            "end_time",
            format!("\"{}\"", e.end_time.as_deref().unwrap_or_default()),
            format!(
                "before `start_time` (\"{}\"): a benchmark ends after it starts",
                e.start_time.as_deref().unwrap_or_default()
            ),
        ));
    }
    let latency = crate::metrics::LatencyMetrics {
        ttft_ms: stats("time_to_first_token", &e.time_to_first_token)?,
        tpot_ms: stats("inter_token_latency", &e.inter_token_latency)?,
        itl_ms: stats("inter_chunk_latency", &e.inter_chunk_latency)?,
        e2e_ms: stats("request_latency", &e.request_latency)?,
        ..Default::default()
    };
    let cfg = e.input_config.as_ref();
    let get = |p: &str| cfg.and_then(|c| c.pointer(p));
    let setting = |p: &str| format!("input_config{}", p.replace('/', "."));
    let concurrency = get("/loadgen/concurrency")
        .and_then(|v| v.as_u64())
        .map(|n| c.count(&setting("/loadgen/concurrency"), n))
        .transpose()?;
    let rate = get("/loadgen/request_rate")
        .and_then(|v| v.as_f64())
        .map(|r| c.positive(&setting("/loadgen/request_rate"), r))
        .transpose()?;
    let request_count = get("/loadgen/request_count")
        .and_then(|v| v.as_u64())
        .map(|n| c.count(&setting("/loadgen/request_count"), n))
        .transpose()?;
    let mut notes = Vec::new();
    let dir = path.parent().unwrap_or(Path::new("."));
    let records_path = dir.join(RECORDS_FILE);
    let mut files = vec![file];
    // Whatever is there under that name is read (a link to a device or a pipe included, within
    // the limits); only its absence means "no per-request records".
    let records = match std::fs::metadata(&records_path) {
        Ok(m) if !m.is_dir() => {
            let mut source = Source::open(&records_path, MAX_FILE_BYTES)?;
            let records = records(&mut source)?;
            files.push(source.finish()?);
            Some(records)
        }
        _ => {
            notes.push(format!("no {RECORDS_FILE} beside the export: no per-request records"));
            None
        }
    };
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
    let load = ImportedLoad {
        mode: match (rate, concurrency) {
            (Some(_), _) => Some("open".into()),
            (None, Some(_)) => Some("closed".into()),
            _ => None,
        },
        concurrency,
        rate,
        arrival: get("/loadgen/request_rate_mode").and_then(|v| v.as_str()).map(str::to_string),
        requests: request_count,
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
        tokens: crate::metrics::TokenCounts { input_total, output_total, ..Default::default() },
        latency,
        throughput,
        goodput_requests_per_s: goodput,
        duration_s,
        records,
        notes,
    })
}

/// What one line of `profile_export.jsonl` says of its request, checked, before the earliest
/// send of the file is known.
struct Line {
    line: usize,
    start_ns: u64,
    end_ns: u64,
    warmup: bool,
    outcome: Answer,
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
}

enum Answer {
    Cancelled,
    Failed {
        class: Outcome,
        status: Option<u16>,
        text: String,
    },
    /// Answered, with its TTFT and the gaps between its chunks (ms).
    Streamed {
        ttft_ms: f64,
        gaps: Vec<f64>,
    },
    /// Answered, without a TTFT (not streamed).
    Whole,
}

/// The per-request records of `profile_export.jsonl`, read line by line, times counted from the
/// earliest start.
fn records(source: &mut Source) -> Result<Vec<RequestRecord>, ImportError> {
    let path = source.path().to_path_buf();
    let mut lines = Vec::new();
    let mut buf = Vec::new();
    let (mut number, mut gaps) = (0, 0);
    let too_many = |line, what, limit| ImportError::TooMany {
        path: path.clone(),
        line: Some(line),
        what,
        limit,
    };
    while source.line(&mut buf, number + 1, MAX_LINE_BYTES)? {
        number += 1;
        if buf.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        if lines.len() == MAX_REQUESTS {
            return Err(too_many(number, "requests", MAX_REQUESTS));
        }
        let r: Record = parse_line(&path, number, &buf, WHAT_RECORD)?;
        let line = line_of(&Checker::new(&path).at_line(number), number, r)?;
        if let Answer::Streamed { gaps: g, .. } = &line.outcome {
            gaps += g.len();
            if gaps > MAX_VALUES {
                return Err(too_many(number, "inter-chunk gaps", MAX_VALUES));
            }
        }
        lines.push(line);
    }
    let Some(first) = lines.iter().min_by_key(|l| l.start_ns) else { return Ok(Vec::new()) };
    let (origin, origin_line) = (first.start_ns, first.line);
    for l in &lines {
        let after = (l.start_ns - origin) as f64 / 1e9;
        if after > MAX_SECONDS {
            return Err(Checker::new(&path).at_line(l.line).impossible(
                "metadata.request_start_ns",
                l.start_ns,
                format!(
                    "{after} s after the first send (line {origin_line}, {origin}): a benchmark \
                     spans at most 30 days"
                ),
            ));
        }
    }
    let ms = |ns: u64| (ns - origin) as f64 / 1e6;
    let mut out = Vec::with_capacity(lines.len());
    for (id, l) in lines.into_iter().enumerate() {
        let (start, end, id) = (ms(l.start_ns), ms(l.end_ns), id as u64);
        let mut rec = match l.outcome {
            Answer::Cancelled => RequestRecord::failed(id, start, Outcome::Cancelled, None, end),
            Answer::Failed { class, status, text } => {
                let mut rec = RequestRecord::failed(id, start, class, status, end);
                rec.error = Some(text);
                rec
            }
            Answer::Streamed { ttft_ms, gaps } => {
                let mut rec = RequestRecord::ok(id, start, start + ttft_ms, gaps);
                rec.end_ms = end;
                rec.output_tokens = l.output_tokens;
                rec
            }
            Answer::Whole => {
                let mut rec = RequestRecord::failed(id, start, Outcome::Ok, Some(200), end);
                rec.output_tokens = l.output_tokens;
                rec
            }
        };
        rec.warmup = l.warmup;
        rec.input_tokens = l.input_tokens;
        out.push(rec);
    }
    Ok(out)
}

/// One line's record checked (`c` names its file and line): its times in range and in order,
/// its metrics' units, values and counts.
fn line_of(c: &Checker, line: usize, r: Record) -> Result<Line, ImportError> {
    let field_err = |field: String, message: String| ImportError::Field {
        path: c.path.to_path_buf(),
        line: c.line,
        what: WHAT_RECORD,
        field,
        message,
    };
    let md = &r.metadata;
    let start_ns = c.epoch_ns("metadata.request_start_ns", md.request_start_ns)?;
    let end_ns = c.epoch_ns("metadata.request_end_ns", md.request_end_ns)?;
    c.not_before(
        "metadata.request_end_ns",
        end_ns,
        "metadata.request_start_ns",
        start_ns,
        "a request ends after it starts",
    )?;
    let length_ms = (end_ns - start_ns) as f64 / 1e6;
    // A metric's values in ms, each checked as a latency; `(scalar, list)`.
    let values_ms = |name: &str| -> Result<Option<(bool, Vec<f64>)>, ImportError> {
        let Some(m) = r.metrics.get(name) else { return Ok(None) };
        let f = ms_factor(&m.unit).ok_or_else(|| {
            field_err(format!("metrics.{name}.unit"), format!("`{}` is not a time unit", m.unit))
        })?;
        let not_numbers =
            || field_err(format!("metrics.{name}.value"), "not a number or list of numbers".into());
        let (scalar, mut nums): (bool, Vec<f64>) = match &m.value {
            Reading::List(a) => (false, a.clone()),
            Reading::One(v) => (true, vec![*v]),
            Reading::Null | Reading::Other => return Err(not_numbers()),
        };
        for (k, v) in nums.iter_mut().enumerate() {
            let field = match scalar {
                true => format!("metrics.{name}.value"),
                false => format!("metrics.{name}.value[{k}]"),
            };
            *v = c.latency(&field, *v, f)?;
        }
        Ok(Some((scalar, nums)))
    };
    let count = |name: &str| -> Result<Option<u64>, ImportError> {
        let Some(m) = r.metrics.get(name) else { return Ok(None) };
        let field = format!("metrics.{name}.value");
        match m.value {
            Reading::One(v) => c.whole(&field, v).map(Some),
            Reading::Null => Ok(None),
            Reading::List(_) | Reading::Other => {
                Err(field_err(field, "not a number of tokens".into()))
            }
        }
    };
    let outcome = match (&r.error, md.was_cancelled) {
        (_, true) => Answer::Cancelled,
        (Some(err), false) => {
            let status = err.code.and_then(|c| u16::try_from(c).ok());
            let text = format!(
                "{}: {}",
                err.kind.as_deref().unwrap_or(""),
                err.message.as_deref().unwrap_or("")
            );
            Answer::Failed { class: failure_class(status, &text), status, text }
        }
        (None, false) => match values_ms("time_to_first_token")? {
            Some((_, ttft)) if ttft.len() != 1 => {
                return Err(field_err(
                    "metrics.time_to_first_token.value".into(),
                    format!("a list of {} numbers: a request has one TTFT", ttft.len()),
                ));
            }
            Some((scalar, ttft)) => {
                let ttft_ms = ttft[0];
                let field = match scalar {
                    true => "metrics.time_to_first_token.value",
                    false => "metrics.time_to_first_token.value[0]",
                };
                if ttft_ms > length_ms + SLACK_MS {
                    return Err(c.impossible(
                        field,
                        format!("{ttft_ms} ms"),
                        format!(
                            "after the request's end ({length_ms} ms after its start): a \
                             request's first token comes before its end"
                        ),
                    ));
                }
                let gaps = values_ms("inter_chunk_latency")?.map(|(_, g)| g).unwrap_or_default();
                let last = ttft_ms + gaps.iter().sum::<f64>();
                if last > length_ms + SLACK_MS {
                    return Err(c.impossible(
                        "metrics.inter_chunk_latency.value",
                        format!("a list of gaps that ends {last} ms after the request's start"),
                        format!(
                            "after the request's end ({length_ms} ms after its start): a \
                             request's last chunk comes before its end"
                        ),
                    ));
                }
                Answer::Streamed { ttft_ms, gaps }
            }
            None => Answer::Whole,
        },
    };
    let input_tokens = match count("input_sequence_length")? {
        Some(n) => Some(n),
        None => count("error_isl")?,
    };
    Ok(Line {
        line,
        start_ns,
        end_ns,
        warmup: md.benchmark_phase.as_deref() == Some("warmup"),
        outcome,
        input_tokens,
        output_tokens: count("output_sequence_length")?,
    })
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::*;
    use crate::foreign::testkit::{
        assert_refused, assert_sane, edits, num, object, opt, set, write,
    };

    const T0: u64 = 1_764_930_000_000_000_000;

    fn metric(unit: &str, avg: f64, min: f64, max: f64, count: u64) -> Value {
        let mid = (min + max) / 2.0;
        json!({"unit": unit, "avg": avg, "min": min, "max": max, "std": (max - min) / 2.0,
            "count": count, "p50": mid, "p90": max, "p95": max, "p99": max})
    }

    /// A consistent export of three requests (two answered, one failed).
    fn export() -> Value {
        json!({
            "schema_version": "1.4", "aiperf_version": "0.13.0",
            "request_throughput": {"unit": "requests/sec", "avg": 20.0},
            "request_latency": metric("ms", 42.0, 40.0, 44.0, 2),
            "request_count": {"unit": "requests", "avg": 2.0},
            "time_to_first_token": metric("ms", 11.5, 10.5, 12.5, 2),
            "inter_token_latency": metric("ms", 9.9, 9.8, 10.0, 2),
            "inter_chunk_latency": metric("ms", 9.9, 9.25, 10.25, 6),
            "output_token_throughput": {"unit": "tokens/sec", "avg": 80.0},
            "benchmark_duration": {"unit": "sec", "avg": 0.1},
            "total_isl": {"unit": "tokens", "avg": 64.0},
            "total_osl": {"unit": "tokens", "avg": 8.0},
            "error_request_count": {"unit": "requests", "avg": 1.0},
            "goodput": null, "was_cancelled": false,
            "start_time": "2026-12-05T00:00:00.000000", "end_time": "2026-12-05T00:00:00.100000",
            "input_config": {
                "endpoint": {"model_names": ["m"], "type": "chat", "streaming": true},
                "loadgen": {"concurrency": 2, "request_count": 3}
            }
        })
    }

    /// Its per-request lines: 40 ms and 44 ms answers, and a failure.
    fn lines() -> Vec<Value> {
        let ms = 1_000_000;
        vec![
            json!({"metadata": {"request_start_ns": T0, "request_end_ns": T0 + 40 * ms,
                "benchmark_phase": "profiling", "was_cancelled": false},
                "metrics": {"time_to_first_token": {"value": 10.5, "unit": "ms"},
                    "inter_chunk_latency": {"value": [10.0, 10.25, 9.25], "unit": "ms"},
                    "input_sequence_length": {"value": 32, "unit": "tokens"},
                    "output_sequence_length": {"value": 4, "unit": "tokens"}},
                "error": null}),
            json!({"metadata": {"request_start_ns": T0 + 50 * ms, "request_end_ns": T0 + 94 * ms,
                "benchmark_phase": "profiling", "was_cancelled": false},
                "metrics": {"time_to_first_token": {"value": 12.5, "unit": "ms"},
                    "inter_chunk_latency": {"value": [10.0, 10.0, 9.5], "unit": "ms"},
                    "input_sequence_length": {"value": 32, "unit": "tokens"},
                    "output_sequence_length": {"value": 4, "unit": "tokens"}},
                "error": null}),
            json!({"metadata": {"request_start_ns": T0 + 60 * ms, "request_end_ns": T0 + 61 * ms,
                "benchmark_phase": "profiling", "was_cancelled": false},
                "metrics": {"error_isl": {"value": 32, "unit": "tokens"}},
                "error": {"code": 500, "type": "InternalServerError", "message": "boom"}}),
        ]
    }

    /// The export and its lines written side by side: the export's path, the records' path
    /// and what reading the export gives.
    fn import(
        export: &Value,
        lines: &[Value],
    ) -> (tempfile::TempDir, PathBuf, PathBuf, Result<Imported, ImportError>) {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "profile_export_aiperf.json", export);
        let jsonl = dir.path().join(RECORDS_FILE);
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        std::fs::write(&jsonl, text).unwrap();
        let got = read(&path);
        (dir, path, jsonl, got)
    }

    #[test]
    fn a_consistent_export_imports_every_request() {
        let (_d, _p, _j, got) = import(&export(), &lines());
        let got = got.unwrap();
        assert_sane(&got);
        let recs = got.records.as_ref().unwrap();
        assert_eq!(recs.len(), 3);
        assert_eq!((got.requests.ok, got.requests.failed), (2, 1));
        assert!((recs[1].intended_ms - 50.0).abs() < 1e-9 && (recs[1].end_ms - 94.0).abs() < 1e-9);
        assert!((recs[1].ttft_ms().unwrap() - 12.5).abs() < 1e-9);
    }

    #[test]
    fn a_ttft_of_no_value_is_refused_with_its_line() {
        let mut l = lines();
        set(&mut l[1], "/metrics/time_to_first_token/value", json!([]));
        let (_d, _p, jsonl, got) = import(&export(), &l);
        let e = got.unwrap_err().to_string();
        let at = format!("{}:2: ", jsonl.display());
        assert!(e.contains(&at) && e.contains("field `metrics.time_to_first_token.value`"), "{e}");
    }

    /// Where an impossible value goes: the export, or line `n` (from 0) of the records.
    #[derive(Clone, Copy, Debug)]
    enum In {
        Export,
        Line(usize),
    }

    /// Where, the values set (JSON pointer, value), and the field the refusal must name.
    type Case = (In, Vec<(&'static str, Value)>, &'static str);

    fn impossible() -> Vec<Case> {
        let ns31d = 31 * 86_400 * 1_000_000_000u64;
        vec![
            (In::Export, vec![("/benchmark_duration/avg", json!(-1))], "benchmark_duration.avg"),
            (In::Export, vec![("/benchmark_duration/avg", json!(0))], "benchmark_duration.avg"),
            (In::Export, vec![("/request_latency/avg", json!(-42))], "request_latency.avg"),
            (In::Export, vec![("/request_latency/p99", json!(1e308))], "request_latency.p99"),
            (In::Export, vec![("/request_latency/p90", json!(50))], "request_latency.p95"),
            (In::Export, vec![("/time_to_first_token/min", json!(20))], "time_to_first_token.p50"),
            (In::Export, vec![("/inter_chunk_latency/std", json!(-1))], "inter_chunk_latency.std"),
            (In::Export, vec![("/request_count/avg", json!(2.5))], "request_count.avg"),
            (In::Export, vec![("/error_request_count/avg", json!(-1))], "error_request_count.avg"),
            (In::Export, vec![("/total_osl/avg", json!(1e308))], "total_osl.avg"),
            (In::Export, vec![("/request_throughput/avg", json!(-20))], "request_throughput.avg"),
            (In::Export, vec![("/end_time", json!("2026-12-04T00:00:00.000000"))], "end_time"),
            (In::Export, vec![("/start_time", json!("1970-01-01T00:00:00"))], "start_time"),
            (In::Export, vec![("/start_time", json!("yesterday"))], "start_time"),
            (
                In::Export,
                vec![("/input_config/loadgen/concurrency", json!(u64::MAX))],
                "input_config.loadgen.concurrency",
            ),
            (
                In::Line(0),
                vec![("/metadata/request_end_ns", json!(T0 - 1))],
                "metadata.request_end_ns",
            ),
            (
                In::Line(0),
                vec![("/metadata/request_start_ns", json!(u64::MAX))],
                "metadata.request_start_ns",
            ),
            (
                In::Line(0),
                vec![("/metadata/request_start_ns", json!(0))],
                "metadata.request_start_ns",
            ),
            (
                In::Line(2),
                vec![
                    ("/metadata/request_start_ns", json!(T0 + ns31d)),
                    ("/metadata/request_end_ns", json!(T0 + ns31d + 1)),
                ],
                "metadata.request_start_ns",
            ),
            (
                In::Line(1),
                vec![("/metrics/time_to_first_token/value", json!(-12.5))],
                "metrics.time_to_first_token.value",
            ),
            (
                In::Line(1),
                vec![("/metrics/time_to_first_token/value", json!([]))],
                "metrics.time_to_first_token.value",
            ),
            (
                In::Line(1),
                vec![("/metrics/time_to_first_token/value", json!(1e308))],
                "metrics.time_to_first_token.value",
            ),
            (
                In::Line(0),
                vec![("/metrics/time_to_first_token/value", json!(45.0))],
                "metrics.time_to_first_token.value",
            ),
            (
                In::Line(0),
                vec![("/metrics/time_to_first_token/unit", json!("fortnights"))],
                "metrics.time_to_first_token.unit",
            ),
            (
                In::Line(0),
                vec![("/metrics/inter_chunk_latency/value", json!([10.0, -1.0, 9.0]))],
                "metrics.inter_chunk_latency.value[1]",
            ),
            (
                In::Line(0),
                vec![("/metrics/inter_chunk_latency/value", json!([20.0, 20.0, 20.0]))],
                "metrics.inter_chunk_latency.value",
            ),
            (
                In::Line(0),
                vec![("/metrics/output_sequence_length/value", json!(-4))],
                "metrics.output_sequence_length.value",
            ),
            (
                In::Line(0),
                vec![("/metrics/output_sequence_length/value", json!(4.5))],
                "metrics.output_sequence_length.value",
            ),
            (
                In::Line(2),
                vec![("/metrics/error_isl/value", json!(1e20))],
                "metrics.error_isl.value",
            ),
        ]
    }

    fn refused_at(case: Case) {
        let (place, sets, field) = case;
        let (mut e, mut l) = (export(), lines());
        for (pointer, value) in sets {
            match place {
                In::Export => set(&mut e, pointer, value),
                In::Line(n) => set(&mut l[n], pointer, value),
            }
        }
        let (_d, path, jsonl, got) = import(&e, &l);
        match place {
            In::Export => assert_refused(got, &path, field),
            In::Line(n) => {
                let named = format!("{}:{}: ", jsonl.display(), n + 1);
                let e = got.expect_err("refused").to_string();
                assert!(e.contains(&named), "`{named}` not in: {e}");
                assert!(e.contains(&format!("field `{field}")), "field `{field}` not in: {e}");
            }
        }
    }

    #[test]
    fn every_impossible_value_is_refused_with_the_file_and_the_field() {
        for case in impossible() {
            refused_at(case);
        }
    }

    /// A per-request line built field by field, each present or not, of any number or none.
    fn built_line() -> impl Strategy<Value = Value> {
        let units = prop::sample::select(vec![json!("ms"), json!("ns"), json!("sec"), json!("x")]);
        (
            prop::collection::vec(opt(num()), 2),
            opt(prop_oneof![num(), prop::collection::vec(num(), 0..3).prop_map(Value::Array)]),
            opt(prop::collection::vec(num(), 0..4).prop_map(Value::Array)),
            units,
            opt(num()),
            any::<bool>(),
            opt(Just(json!({"code": 503, "type": "E", "message": "m"}))),
        )
            .prop_map(|(md, ttft, icl, unit, osl, cancelled, error)| {
                let m = |v: Option<Value>| v.map(|v| json!({"value": v, "unit": unit.clone()}));
                json!({
                    "metadata": object(vec![
                        ("request_start_ns", md[0].clone()), ("request_end_ns", md[1].clone()),
                        ("was_cancelled", Some(json!(cancelled))),
                    ]),
                    "metrics": object(vec![
                        ("time_to_first_token", m(ttft)), ("inter_chunk_latency", m(icl)),
                        ("output_sequence_length", osl.map(|v| json!({"value": v, "unit": "tokens"}))),
                    ]),
                    "error": error,
                })
            })
    }

    fn doc() -> impl Strategy<Value = (Value, Vec<Value>)> {
        let line = prop_oneof![
            2 => (0..3usize).prop_flat_map(|i| edits(lines()[i].clone())),
            1 => built_line(),
        ];
        (edits(export()), prop::collection::vec(line, 0..4))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn any_aiperf_shaped_export_and_records_are_imported_sanely_or_refused(d in doc()) {
            let (export, lines) = d;
            let (_d, path, jsonl, got) = import(&export, &lines);
            match got {
                Ok(i) => assert_sane(&i),
                Err(e) => {
                    let e = e.to_string();
                    let named = [&path, &jsonl].iter().any(|p| e.contains(&p.display().to_string()));
                    prop_assert!(named, "{e}");
                }
            }
        }

        #[test]
        fn one_impossible_value_is_refused_naming_its_field(case in 0..impossible().len()) {
            refused_at(impossible().swap_remove(case));
        }
    }
}
