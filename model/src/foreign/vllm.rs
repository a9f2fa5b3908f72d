//! `vllm bench serve --save-result` JSON read as an imported run. The fields follow the writer
//! in vLLM's `vllm/benchmarks/serve.py` (`benchmark()` builds the result; `main` adds the
//! run's arguments and, without `--save-detailed`, drops the per-request arrays): the totals
//! and throughputs, `mean_/median_/std_/p<N>_<metric>_ms` for `ttft`, `tpot`, `itl` and
//! `e2el` (`--metric-percentiles`, by default 99 only), and with `--save-detailed` one entry
//! per request in `input_lens`, `output_lens`, `ttfts`, `itls`, `latencies`, `start_times` and
//! `errors` (seconds; an empty error is a success). The file has no format version.

use std::path::Path;

use serde::Deserialize;

use super::{
    Extra, ImportError, Imported, ImportedLoad, Reported, counts_of, failure_class, parse_json,
    read_source,
};
use crate::outcome::Outcome;
use crate::record::RequestRecord;

const WHAT: &str = "a `vllm bench serve --save-result` file";
const TOOL: &str = "vllm-bench";

/// A request rate: a number, or `"inf"` (all requests at once).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Rate {
    Number(f64),
    Text(String),
}

#[derive(Debug, Deserialize)]
struct VllmResult {
    #[serde(default)]
    date: Option<String>,
    #[serde(default)]
    backend: Option<String>,
    #[serde(default)]
    endpoint_type: Option<String>,
    #[serde(default)]
    model_id: Option<String>,
    #[serde(default)]
    num_prompts: Option<u64>,
    #[serde(default)]
    request_rate: Option<Rate>,
    #[serde(default)]
    burstiness: Option<f64>,
    #[serde(default)]
    max_concurrency: Option<u64>,
    duration: f64,
    completed: u64,
    #[serde(default)]
    failed: Option<u64>,
    total_input_tokens: u64,
    #[serde(default)]
    total_output_tokens: Option<u64>,
    request_throughput: f64,
    #[serde(default)]
    request_goodput: Option<f64>,
    #[serde(default)]
    output_throughput: Option<f64>,
    #[serde(default)]
    total_token_throughput: Option<f64>,
    #[serde(default)]
    input_lens: Option<Vec<u64>>,
    #[serde(default)]
    output_lens: Option<Vec<u64>>,
    #[serde(default)]
    ttfts: Option<Vec<f64>>,
    #[serde(default)]
    itls: Option<Vec<Vec<f64>>>,
    #[serde(default)]
    latencies: Option<Vec<f64>>,
    #[serde(default)]
    start_times: Option<Vec<f64>>,
    #[serde(default)]
    errors: Option<Vec<String>>,
}

/// vLLM's metric names and where infergate keeps them.
const METRICS: [&str; 4] = ["ttft", "tpot", "itl", "e2el"];

/// Where vLLM's definitions differ from infergate's.
fn definitions() -> Vec<String> {
    vec![
        format!(
            "{TOOL}: its latencies count from when the request was sent (after the client's \
             own wait for a free slot under --max-concurrency), not from the intended send time: \
             they leave out the client-side queueing infergate's count"
        ),
        format!(
            "{TOOL}: its percentiles are numpy's linear interpolation over the raw values \
             (infergate's: HdrHistogram, within 0.1%); it reports mean, median, stdev and the \
             --metric-percentiles it was given, so min, max and the other percentiles are blank"
        ),
        format!(
            "{TOOL}: its E2E (e2el) ends when the response ends, infergate's at the last content \
             event; its TPOT is (E2E - TTFT) / (output tokens - 1) with that E2E"
        ),
    ]
}

pub fn read(path: &Path) -> Result<Imported, ImportError> {
    let (text, file) = read_source(path)?;
    let r: VllmResult = parse_json(path, &text, WHAT)?;
    let extra: Extra = parse_json(path, &text, WHAT)?;
    let mut notes = Vec::new();
    let mut stats: [Reported; 4] = Default::default();
    for (key, value) in &extra {
        let Some((stat, metric)) = statistic_key(key) else { continue };
        let i = METRICS.iter().position(|m| *m == metric).expect("statistic_key checks");
        let v = value.as_f64().ok_or_else(|| {
            ImportError::field(path, WHAT, key, format!("{value} is not a number of milliseconds"))
        })?;
        let s = &mut stats[i];
        match stat {
            "mean" => s.mean = Some(v),
            "median" => s.p50 = Some(v),
            "std" => s.stdev = Some(v),
            "p50" => s.p50 = s.p50.or(Some(v)),
            "p90" => s.p90 = Some(v),
            "p95" => s.p95 = Some(v),
            "p99" => s.p99 = Some(v),
            "p99.9" => s.p999 = Some(v),
            other => {
                notes.push(format!("{key}: infergate keeps no {other} percentile; not imported"))
            }
        }
    }
    for key in ["max_output_tokens_per_s", "max_concurrent_requests"] {
        if let Some(v) = extra.get(key).filter(|v| v.is_number()) {
            notes.push(format!("{TOOL} reported {key} = {v}: infergate has no such metric"));
        }
    }
    let records = records(path, &r)?;
    let failed = r.failed.unwrap_or_else(|| {
        r.errors.as_ref().map_or(0, |e| e.iter().filter(|e| !e.is_empty()).count() as u64)
    });
    let [mut ttft, mut tpot, mut itl, mut e2e] = stats;
    ttft.count = Some(r.completed);
    e2e.count = Some(r.completed);
    match (&r.itls, &r.output_lens, &r.errors) {
        (Some(itls), Some(lens), Some(errors)) => {
            let ok = |i: &usize| errors[*i].is_empty();
            itl.count = Some((0..itls.len()).filter(ok).map(|i| itls[i].len() as u64).sum());
            tpot.count = Some((0..lens.len()).filter(ok).filter(|i| lens[*i] > 1).count() as u64);
        }
        _ => notes.push(format!(
            "{TOOL} saved no per-request data (--save-detailed): the counts of ITL gaps and \
             TPOT samples are unknown (0)"
        )),
    }
    let mut requests = match &records {
        Some(recs) => counts_of(recs),
        None => Default::default(),
    };
    requests.total = r.completed + failed;
    requests.ok = r.completed;
    requests.failed = failed;
    let load = load_of(&r);
    let endpoint =
        r.endpoint_type.as_deref().or(r.backend.as_deref()).map(|b| {
            if b.contains("chat") { "chat".to_string() } else { "completions".to_string() }
        });
    if records.is_some() && r.start_times.is_none() {
        notes.push(format!(
            "{TOOL} saved no send times (start_times): every request's times count from 0"
        ));
    }
    if let Some(date) = &r.date {
        notes.push(format!("{TOOL} dated the run {date} (its host's local time)"));
    }
    Ok(Imported {
        tool: TOOL.into(),
        tool_version: None,
        format_version: None,
        files: vec![file],
        definitions: definitions(),
        load,
        model: r.model_id.clone(),
        endpoint,
        url: None,
        stream: Some(true),
        started_at: None,
        ended_at: None,
        interrupted: false,
        requests,
        tokens: crate::metrics::TokenCounts {
            input_total: Some(r.total_input_tokens),
            output_total: r.total_output_tokens,
            ..Default::default()
        },
        latency: crate::metrics::LatencyMetrics {
            ttft_ms: ttft.stats(),
            tpot_ms: tpot.stats(),
            itl_ms: itl.stats(),
            e2e_ms: e2e.stats(),
            ..Default::default()
        },
        throughput: crate::metrics::Throughput {
            requests_per_s: Some(r.request_throughput),
            output_tokens_per_s: r.output_throughput,
            total_tokens_per_s: r.total_token_throughput,
        },
        goodput_requests_per_s: r.request_goodput,
        duration_s: Some(r.duration),
        records,
        notes,
    })
}

/// `mean_ttft_ms` -> (`mean`, `ttft`); `p99.9_itl_ms` -> (`p99.9`, `itl`); None for other keys.
fn statistic_key(key: &str) -> Option<(&str, &str)> {
    let body = key.strip_suffix("_ms")?;
    let (stat, metric) = body.rsplit_once('_')?;
    if !METRICS.contains(&metric) {
        return None;
    }
    let is_percentile = stat.strip_prefix('p').is_some_and(|n| n.parse::<f64>().is_ok());
    (matches!(stat, "mean" | "median" | "std") || is_percentile).then_some((stat, metric))
}

fn load_of(r: &VllmResult) -> ImportedLoad {
    let rate = match &r.request_rate {
        Some(Rate::Number(n)) if n.is_finite() => Some(*n),
        _ => None,
    };
    let arrival = rate.map(|_| match r.burstiness {
        Some(b) if b != 1.0 => format!("gamma (burstiness {b})"),
        _ => "poisson".to_string(),
    });
    ImportedLoad {
        mode: match (rate, r.max_concurrency) {
            (Some(_), _) => Some("open".into()),
            (None, Some(_)) => Some("closed".into()),
            (None, None) => None,
        },
        concurrency: r.max_concurrency,
        rate,
        arrival,
        requests: r.num_prompts,
    }
}

/// The `--save-detailed` arrays as records (None without them).
fn records(path: &Path, r: &VllmResult) -> Result<Option<Vec<RequestRecord>>, ImportError> {
    if let Some(Rate::Text(t)) = &r.request_rate
        && t != "inf"
    {
        return Err(ImportError::field(
            path,
            WHAT,
            "request_rate",
            format!("`{t}`: a request rate is a number or \"inf\""),
        ));
    }
    let (Some(ttfts), Some(itls), Some(errors)) = (&r.ttfts, &r.itls, &r.errors) else {
        return Ok(None);
    };
    let n = ttfts.len();
    let check = |name: &str, len: Option<usize>| match len {
        Some(l) if l != n => Err(ImportError::field(
            path,
            WHAT,
            name,
            format!("holds {l} entries, `ttfts` {n}: one per request in each"),
        )),
        _ => Ok(()),
    };
    check("itls", Some(itls.len()))?;
    check("errors", Some(errors.len()))?;
    check("input_lens", r.input_lens.as_ref().map(Vec::len))?;
    check("output_lens", r.output_lens.as_ref().map(Vec::len))?;
    check("latencies", r.latencies.as_ref().map(Vec::len))?;
    check("start_times", r.start_times.as_ref().map(Vec::len))?;
    let origin = r.start_times.as_ref().map(|s| s.iter().copied().fold(f64::INFINITY, f64::min));
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let start = match (&r.start_times, origin) {
            (Some(s), Some(o)) => (s[i] - o) * 1000.0,
            _ => 0.0,
        };
        let latency = r.latencies.as_ref().map(|l| l[i] * 1000.0);
        let mut rec = if errors[i].is_empty() {
            let gaps: Vec<f64> = itls[i].iter().map(|g| g * 1000.0).collect();
            let mut rec = RequestRecord::ok(i as u64, start, start + ttfts[i] * 1000.0, gaps);
            rec.end_ms = latency.map_or(rec.last_token_ms.unwrap_or(start), |l| start + l);
            rec.output_tokens = r.output_lens.as_ref().map(|l| l[i]);
            rec
        } else {
            let end = start + latency.unwrap_or(0.0);
            let mut rec =
                RequestRecord::failed(i as u64, start, failure_class(None, &errors[i]), None, end);
            rec.error = Some(errors[i].lines().last().unwrap_or("").to_string());
            rec
        };
        rec.status = (rec.class == Outcome::Ok).then_some(200);
        rec.input_tokens = r.input_lens.as_ref().map(|l| l[i]);
        out.push(rec);
    }
    Ok(Some(out))
}
