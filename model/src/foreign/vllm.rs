//! `vllm bench serve --save-result` JSON read as an imported run. The fields follow the writer
//! in vLLM's `vllm/benchmarks/serve.py` (`benchmark()` builds the result; `main` adds the
//! run's arguments and, without `--save-detailed`, drops the per-request arrays): the totals
//! and throughputs, `mean_/median_/std_/p<N>_<metric>_ms` for `ttft`, `tpot`, `itl` and
//! `e2el` (`--metric-percentiles`, by default 99 only), and with `--save-detailed` one entry
//! per request in `input_lens`, `output_lens`, `ttfts`, `itls`, `latencies`, `start_times` and
//! `errors` (seconds; an empty error is a success). The file has no format version.
//!
//! The file streams in one pass ([`Source`]): the fields read by name, the statistics by key,
//! the rest skipped. Every value is then checked ([`Checker`]): the per-request arrays hold one
//! entry per request (whichever of them are present), `completed` and `failed` match `errors`,
//! latencies are finite, never negative and end after the first and the last token, send times
//! span at most [`MAX_SECONDS`].

use std::cell::Cell;
use std::fmt;
use std::marker::PhantomData;
use std::path::Path;

use serde::de::{Error as _, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

use super::{
    Capped, Checker, ImportError, Imported, ImportedLoad, Loose, MAX_FILE_BYTES, MAX_REQUESTS,
    MAX_SECONDS, MAX_VALUES, MILLIS, Nullable, Num, SECONDS, Source, Stat, Written, counts_of,
    failure_class,
};
use crate::outcome::Outcome;
use crate::record::RequestRecord;

const WHAT: &str = "a `vllm bench serve --save-result` file";
const TOOL: &str = "vllm-bench";
/// How far a request's last token may pass its end (`ttfts` plus the sum of `itls` against
/// `latencies`): the rounding of a sum of floating-point seconds, 1 µs.
const SLACK_S: f64 = 1e-6;

/// A request rate: a number, or `"inf"` (all requests at once).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Rate {
    Number(f64),
    Text(String),
}

/// The result file: the fields read by name, and every statistic (`<stat>_<metric>_ms`) and
/// measurement infergate keeps in a note, by key. Read in one pass as the file streams: the
/// fields it does not read (`generated_texts`, ...) are skipped, not kept.
#[derive(Debug, Default)]
struct VllmResult {
    date: Option<String>,
    backend: Option<String>,
    endpoint_type: Option<String>,
    model_id: Option<String>,
    num_prompts: Option<u64>,
    request_rate: Option<Rate>,
    burstiness: Option<f64>,
    max_concurrency: Option<u64>,
    duration: f64,
    completed: u64,
    failed: Option<u64>,
    total_input_tokens: u64,
    total_output_tokens: Option<u64>,
    request_throughput: f64,
    request_goodput: Option<f64>,
    output_throughput: Option<f64>,
    total_token_throughput: Option<f64>,
    input_lens: Option<Vec<u64>>,
    output_lens: Option<Vec<u64>>,
    ttfts: Option<Vec<f64>>,
    itls: Option<Vec<Vec<f64>>>,
    latencies: Option<Vec<f64>>,
    start_times: Option<Vec<f64>>,
    errors: Option<Vec<String>>,
    /// `mean_ttft_ms`, `p99_e2el_ms`, ..., `max_output_tokens_per_s`: the key and its value.
    keyed: Vec<(String, Loose)>,
}

/// A per-request array (`null` or a list of at most [`MAX_REQUESTS`] entries).
fn per_request<'de, A: MapAccess<'de>, T: Deserialize<'de>>(
    map: &mut A,
) -> Result<Option<Vec<T>>, A::Error> {
    let left = Cell::new(MAX_REQUESTS);
    map.next_value_seed(Nullable(Capped::new(&left, "requests", MAX_REQUESTS, PhantomData::<T>)))
}

/// The measurements infergate has no metric for, kept in a note with their values.
const NOTED: [&str; 2] = ["max_output_tokens_per_s", "max_concurrent_requests"];

impl<'de> Deserialize<'de> for VllmResult {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = VllmResult;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<VllmResult, A::Error> {
                let mut r = VllmResult::default();
                // The file's budget of ITL gaps, all requests together.
                let gaps = Cell::new(MAX_VALUES);
                let (mut duration, mut completed, mut input, mut throughput) =
                    (None, None, None, None);
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "date" => r.date = map.next_value()?,
                        "backend" => r.backend = map.next_value()?,
                        "endpoint_type" => r.endpoint_type = map.next_value()?,
                        "model_id" => r.model_id = map.next_value()?,
                        "num_prompts" => r.num_prompts = map.next_value()?,
                        "request_rate" => r.request_rate = map.next_value()?,
                        "burstiness" => r.burstiness = map.next_value()?,
                        "max_concurrency" => r.max_concurrency = map.next_value()?,
                        "duration" => duration = Some(map.next_value()?),
                        "completed" => completed = Some(map.next_value()?),
                        "failed" => r.failed = map.next_value()?,
                        "total_input_tokens" => input = Some(map.next_value()?),
                        "total_output_tokens" => r.total_output_tokens = map.next_value()?,
                        "request_throughput" => throughput = Some(map.next_value()?),
                        "request_goodput" => r.request_goodput = map.next_value()?,
                        "output_throughput" => r.output_throughput = map.next_value()?,
                        "total_token_throughput" => r.total_token_throughput = map.next_value()?,
                        "input_lens" => r.input_lens = per_request(&mut map)?,
                        "output_lens" => r.output_lens = per_request(&mut map)?,
                        "ttfts" => r.ttfts = per_request(&mut map)?,
                        "itls" => {
                            let left = Cell::new(MAX_REQUESTS);
                            let gaps =
                                Capped::new(&gaps, "ITL gaps", MAX_VALUES, PhantomData::<f64>);
                            let lists = Capped::new(&left, "requests", MAX_REQUESTS, gaps);
                            r.itls = map.next_value_seed(Nullable(lists))?;
                        }
                        "latencies" => r.latencies = per_request(&mut map)?,
                        "start_times" => r.start_times = per_request(&mut map)?,
                        "errors" => r.errors = per_request(&mut map)?,
                        k if statistic_key(k).is_some() || NOTED.contains(&k) => {
                            let v = map.next_value::<Loose>()?;
                            r.keyed.push((key, v));
                        }
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                r.duration = duration.ok_or_else(|| A::Error::missing_field("duration"))?;
                r.completed = completed.ok_or_else(|| A::Error::missing_field("completed"))?;
                r.total_input_tokens =
                    input.ok_or_else(|| A::Error::missing_field("total_input_tokens"))?;
                r.request_throughput =
                    throughput.ok_or_else(|| A::Error::missing_field("request_throughput"))?;
                Ok(r)
            }
        }
        d.deserialize_map(V)
    }
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
    let mut source = Source::open(path, MAX_FILE_BYTES)?;
    let mut r: VllmResult = source.json(WHAT)?;
    let file = source.finish()?;
    let c = Checker::new(path);
    check(&c, &r)?;
    let mut notes = Vec::new();
    let mut written: [Written; 4] = Default::default();
    for (key, value) in &r.keyed {
        if NOTED.contains(&key.as_str()) {
            if let Some(v) = value.as_f64() {
                c.rate(key, v)?;
                notes
                    .push(format!("{TOOL} reported {key} = {value}: infergate has no such metric"));
            }
            continue;
        }
        let Some((stat, metric)) = statistic_key(key) else { continue };
        let i = METRICS.iter().position(|m| *m == metric).expect("statistic_key checks");
        let v = value.as_f64().ok_or_else(|| {
            ImportError::field(path, WHAT, key, format!("{value} is not a number of milliseconds"))
        })?;
        let s = &mut written[i];
        let stat_of = || Some(Stat::new(key.clone(), v));
        match stat {
            "mean" => s.mean = stat_of(),
            "median" => s.p50 = stat_of(),
            "std" => s.stdev = stat_of(),
            "p50" => s.p50 = s.p50.take().or_else(stat_of),
            "p90" => s.p90 = stat_of(),
            "p95" => s.p95 = stat_of(),
            "p99" => s.p99 = stat_of(),
            "p99.9" => s.p999 = stat_of(),
            other => {
                c.latency(key, v, MILLIS)?;
                notes.push(format!("{key}: infergate keeps no {other} percentile; not imported"))
            }
        }
    }
    let [ttft, tpot, itl, e2e] = &written;
    let (mut ttft, mut tpot, mut itl, mut e2e) = (
        ttft.checked(&c, MILLIS)?,
        tpot.checked(&c, MILLIS)?,
        itl.checked(&c, MILLIS)?,
        e2e.checked(&c, MILLIS)?,
    );
    let failed = r.failed.unwrap_or_else(|| {
        r.errors.as_ref().map_or(0, |e| e.iter().filter(|e| !e.is_empty()).count() as u64)
    });
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
    let records = records(&mut r);
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

/// Every value of the file against what it can be: the run's totals, rates and settings, the
/// per-request arrays one entry per request, each of their values, and the counts they give
/// against `completed` and `failed`.
fn check(c: &Checker, r: &VllmResult) -> Result<(), ImportError> {
    if let Some(Rate::Text(t)) = &r.request_rate
        && t != "inf"
    {
        return Err(ImportError::field(
            c.path,
            WHAT,
            "request_rate",
            format!("`{t}`: a request rate is a number or \"inf\""),
        ));
    }
    if let Some(Rate::Number(n)) = &r.request_rate {
        c.positive("request_rate", *n)?;
    }
    if let Some(b) = r.burstiness {
        c.positive("burstiness", b)?;
    }
    c.duration_s("duration", r.duration)?;
    c.count("completed", r.completed)?;
    c.count("total_input_tokens", r.total_input_tokens)?;
    c.rate("request_throughput", r.request_throughput)?;
    for (field, v) in [
        ("failed", r.failed),
        ("total_output_tokens", r.total_output_tokens),
        ("num_prompts", r.num_prompts),
        ("max_concurrency", r.max_concurrency),
    ] {
        if let Some(v) = v {
            c.count(field, v)?;
        }
    }
    for (field, v) in [
        ("request_goodput", r.request_goodput),
        ("output_throughput", r.output_throughput),
        ("total_token_throughput", r.total_token_throughput),
    ] {
        if let Some(v) = v {
            c.rate(field, v)?;
        }
    }
    let arrays = [
        ("input_lens", r.input_lens.as_ref().map(Vec::len)),
        ("output_lens", r.output_lens.as_ref().map(Vec::len)),
        ("ttfts", r.ttfts.as_ref().map(Vec::len)),
        ("itls", r.itls.as_ref().map(Vec::len)),
        ("latencies", r.latencies.as_ref().map(Vec::len)),
        ("start_times", r.start_times.as_ref().map(Vec::len)),
        ("errors", r.errors.as_ref().map(Vec::len)),
    ];
    let present: Vec<(&str, usize)> =
        arrays.iter().filter_map(|(name, len)| Some((*name, (*len)?))).collect();
    // One entry per request in each: the length most arrays share is the number of requests
    // (the first such array names it), an array of another length is the one refused.
    let shared = |len: usize| present.iter().filter(|(_, l)| *l == len).count();
    let Some(&(first, n)) = present.iter().max_by_key(|(_, len)| (shared(*len), usize::MAX - len))
    else {
        return Ok(());
    };
    let first = present.iter().find(|(_, l)| *l == n).map_or(first, |(name, _)| *name);
    if let Some((name, len)) = present.iter().find(|(_, l)| *l != n) {
        return Err(ImportError::field(
            c.path,
            WHAT,
            name,
            format!("holds {len} entries, `{first}` {n}: one per request in each"),
        ));
    }
    if let Some(errors) = &r.errors {
        let ok = errors.iter().filter(|e| e.is_empty()).count() as u64;
        if ok != r.completed {
            return Err(c.impossible(
                "completed",
                r.completed,
                format!(
                    "`errors` holds {ok} successful requests (an empty error) of {n}: one \
                     count of the same requests"
                ),
            ));
        }
        if let Some(failed) = r.failed
            && failed != n as u64 - ok
        {
            return Err(c.impossible(
                "failed",
                failed,
                format!(
                    "`errors` holds {} failed requests (an error) of {n}: one count of the same \
                     requests",
                    n as u64 - ok
                ),
            ));
        }
    }
    let each = |name: &str, values: &Option<Vec<f64>>| -> Result<(), ImportError> {
        for (i, v) in values.iter().flatten().enumerate() {
            c.latency(&format!("{name}[{i}]"), *v, SECONDS)?;
        }
        Ok(())
    };
    each("ttfts", &r.ttfts)?;
    each("latencies", &r.latencies)?;
    for (name, lens) in [("input_lens", &r.input_lens), ("output_lens", &r.output_lens)] {
        for (i, v) in lens.iter().flatten().enumerate() {
            c.count(&format!("{name}[{i}]"), *v)?;
        }
    }
    for (i, gaps) in r.itls.iter().flatten().enumerate() {
        for (j, g) in gaps.iter().enumerate() {
            c.latency(&format!("itls[{i}][{j}]"), *g, SECONDS)?;
        }
    }
    if let (Some(ttfts), Some(latencies)) = (&r.ttfts, &r.latencies) {
        for i in 0..n {
            let field = format!("latencies[{i}]");
            let first = format!("ttfts[{i}]");
            c.not_before(
                &field,
                latencies[i],
                &first,
                ttfts[i],
                "a request ends after its first token",
            )?;
            if let Some(gaps) = r.itls.as_ref().map(|g| &g[i]) {
                let last = ttfts[i] + gaps.iter().sum::<f64>();
                if last > latencies[i] + SLACK_S {
                    return Err(c.impossible(
                        &field,
                        latencies[i],
                        format!(
                            "before the last token (`{first}` + the sum of `itls[{i}]` = {last}): \
                             a request ends after its last token"
                        ),
                    ));
                }
            }
        }
    }
    if let Some(starts) = &r.start_times {
        let (j, origin) = starts
            .iter()
            .copied()
            .enumerate()
            .fold((0, f64::INFINITY), |(j, o), (i, s)| if s < o { (i, s) } else { (j, o) });
        for (i, s) in starts.iter().enumerate() {
            let after = s - origin;
            if after > MAX_SECONDS {
                return Err(c.impossible(
                    &format!("start_times[{i}]"),
                    Num(*s),
                    format!(
                        "{} s after the first send (`start_times[{j}]`, {}): a benchmark spans \
                         at most 30 days",
                        Num(after),
                        Num(origin)
                    ),
                ));
            }
        }
    }
    Ok(())
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

/// The `--save-detailed` arrays, checked by [`check`], as records (None without them). Each
/// request's gaps move into its record, not copied.
fn records(r: &mut VllmResult) -> Option<Vec<RequestRecord>> {
    let (Some(ttfts), Some(itls), Some(errors)) = (&r.ttfts, r.itls.as_mut(), &r.errors) else {
        return None;
    };
    let n = ttfts.len();
    let origin = r.start_times.as_ref().map(|s| s.iter().copied().fold(f64::INFINITY, f64::min));
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let start = match (&r.start_times, origin) {
            (Some(s), Some(o)) => (s[i] - o) * 1000.0,
            _ => 0.0,
        };
        let latency = r.latencies.as_ref().map(|l| l[i] * 1000.0);
        let mut rec = if errors[i].is_empty() {
            let mut gaps = std::mem::take(&mut itls[i]);
            gaps.iter_mut().for_each(|g| *g *= 1000.0);
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
    Some(out)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::*;
    use crate::foreign::testkit::{
        assert_refused, assert_sane, edits, list_of, num, object, opt, set, write,
    };

    /// A consistent result of three requests (the third failed), with `--save-detailed`.
    fn valid() -> Value {
        json!({
            "date": "20261201-101500", "endpoint_type": "openai-chat", "model_id": "m",
            "num_prompts": 3, "request_rate": "inf", "burstiness": 1.0, "max_concurrency": 2,
            "duration": 0.3, "completed": 2, "failed": 1,
            "total_input_tokens": 64, "total_output_tokens": 7,
            "request_throughput": 6.5, "output_throughput": 23.0, "total_token_throughput": 236.0,
            "input_lens": [32, 32, 32], "output_lens": [4, 3, 0],
            "ttfts": [0.05, 0.0625, 0.0],
            "itls": [[0.01, 0.0125, 0.015], [0.01, 0.01], []],
            "latencies": [0.09, 0.095, 0.004],
            "start_times": [1000.0, 1000.0, 1000.09],
            "errors": ["", "", "Bad Request"],
            "generated_texts": ["a b c d", "a b c", ""],
            "max_output_tokens_per_s": 40.0,
            "mean_ttft_ms": 56.25, "median_ttft_ms": 56.25, "std_ttft_ms": 6.25, "p99_ttft_ms": 62.375,
            "mean_tpot_ms": 11.25, "median_tpot_ms": 11.25, "std_tpot_ms": 1.25, "p99_tpot_ms": 12.475,
            "mean_itl_ms": 11.5, "median_itl_ms": 10.0, "std_itl_ms": 2.0, "p99_itl_ms": 14.9,
            "mean_e2el_ms": 92.5, "median_e2el_ms": 92.5, "std_e2el_ms": 2.5, "p99_e2el_ms": 94.95,
            "p25_ttft_ms": 53.125
        })
    }

    fn import(v: &Value) -> (tempfile::TempDir, std::path::PathBuf, Result<Imported, ImportError>) {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "result.json", v);
        let got = read(&path);
        (dir, path, got)
    }

    #[test]
    fn a_consistent_result_imports_every_request() {
        let (_d, _p, got) = import(&valid());
        let got = got.unwrap();
        assert_sane(&got);
        let recs = got.records.as_ref().unwrap();
        assert_eq!(recs.len(), 3);
        assert_eq!((got.requests.ok, got.requests.failed, got.requests.total), (2, 1, 3));
        assert_eq!(got.latency.itl_ms.as_ref().unwrap().count, 5);
        assert_eq!(got.latency.tpot_ms.as_ref().unwrap().count, 2);
        assert!((recs[1].ttft_ms().unwrap() - 62.5).abs() < 1e-9);
        assert!(got.notes.iter().any(|n| n.contains("max_output_tokens_per_s = 40.0")));
    }

    #[test]
    fn per_request_arrays_of_other_lengths_are_refused_without_ttfts_too() {
        // The review's case: no `ttfts`, `errors` shorter than the other arrays.
        let doc = json!({"duration": 1, "completed": 3, "total_input_tokens": 3,
            "request_throughput": 3, "output_lens": [2, 2, 2],
            "itls": [[0.01], [0.01], [0.01]], "errors": [""]});
        let (_d, path, got) = import(&doc);
        assert_refused(got, &path, "errors");
    }

    #[test]
    fn a_file_of_more_requests_than_the_limit_is_refused_as_it_is_read() {
        // Two bytes a request in the file, half a kilobyte a record: refused at the one too
        // many, before the records are built.
        let zeros = vec!["0"; MAX_REQUESTS + 1].join(",");
        let text = format!(
            r#"{{"duration": 1, "completed": 1, "total_input_tokens": 1, "request_throughput": 1, "ttfts": [{zeros}]}}"#
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("many.json");
        std::fs::write(&path, text).unwrap();
        let e = read(&path).unwrap_err().to_string();
        assert!(e.contains("field `ttfts`: more than 1000000 requests"), "{e}");
    }

    /// One impossible value of the consistent result: where, what, and the field the refusal
    /// must name.
    fn impossible() -> Vec<(&'static str, Value, &'static str)> {
        vec![
            ("/duration", json!(-2.0), "duration"),
            ("/duration", json!(0), "duration"),
            ("/duration", json!(1e308), "duration"),
            ("/ttfts/1", json!(-0.05), "ttfts[1]"),
            ("/ttfts/0", json!(1e308), "ttfts[0]"),
            ("/latencies/2", json!(-1), "latencies[2]"),
            ("/latencies/0", json!(0.01), "latencies[0]"),
            ("/latencies/1", json!(0.07), "latencies[1]"),
            ("/itls/0/1", json!(-0.01), "itls[0][1]"),
            ("/itls/1/0", json!(1e308), "itls[1][0]"),
            ("/start_times/2", json!(1e308), "start_times[2]"),
            ("/start_times/0", json!(-1e308), "start_times[1]"),
            ("/completed", json!(3), "completed"),
            ("/completed", json!(1e18 as u64), "completed"),
            ("/failed", json!(0), "failed"),
            ("/request_throughput", json!(-3.0), "request_throughput"),
            ("/request_throughput", json!(1e308), "request_throughput"),
            ("/output_throughput", json!(-1), "output_throughput"),
            ("/request_rate", json!(-1), "request_rate"),
            ("/request_rate", json!(0), "request_rate"),
            ("/burstiness", json!(-1), "burstiness"),
            ("/output_lens/0", json!(u64::MAX), "output_lens[0]"),
            ("/input_lens", json!([32, 32]), "input_lens"),
            ("/errors", json!(["", ""]), "errors"),
            ("/mean_ttft_ms", json!(-1), "mean_ttft_ms"),
            ("/std_itl_ms", json!(1e308), "std_itl_ms"),
            ("/p99_ttft_ms", json!(10.0), "p99_ttft_ms"),
            ("/mean_e2el_ms", json!("slow"), "mean_e2el_ms"),
            ("/p25_ttft_ms", json!(-5), "p25_ttft_ms"),
            ("/max_output_tokens_per_s", json!(-40), "max_output_tokens_per_s"),
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
    }

    /// A document shaped like a vLLM result: the consistent one with a few values removed,
    /// replaced or added, or one built field by field.
    fn doc() -> impl Strategy<Value = Value> {
        prop_oneof![2 => edits(valid()), 1 => built()]
    }

    /// A document built field by field: each present or not, of any number (or none), the
    /// per-request arrays mostly of one length.
    fn built() -> impl Strategy<Value = Value> {
        let scalars = prop::collection::vec(opt(num()), 16);
        let arrays = (0usize..4).prop_flat_map(|n| {
            let itls =
                list_of(n, prop::collection::vec(num(), 0..4).prop_map(Value::Array).boxed());
            let errors = list_of(
                n,
                prop::sample::select(vec![json!(""), json!("timeout"), json!(1)]).boxed(),
            );
            (prop::collection::vec(opt(list_of(n, num())), 5), opt(itls), opt(errors))
        });
        let rate = opt(prop_oneof![num(), Just(json!("inf")), Just(json!("fast"))]);
        (scalars, arrays, rate).prop_map(|(s, (a, itls, errors), rate)| {
            let mut pairs = vec![("request_rate", rate), ("itls", itls), ("errors", errors)];
            let scalar_keys = [
                "duration",
                "completed",
                "failed",
                "total_input_tokens",
                "total_output_tokens",
                "request_throughput",
                "output_throughput",
                "request_goodput",
                "burstiness",
                "max_concurrency",
                "num_prompts",
                "mean_ttft_ms",
                "median_ttft_ms",
                "p99_ttft_ms",
                "std_e2el_ms",
                "max_output_tokens_per_s",
            ];
            pairs.extend(scalar_keys.into_iter().zip(s));
            let array_keys = ["input_lens", "output_lens", "ttfts", "latencies", "start_times"];
            pairs.extend(array_keys.into_iter().zip(a));
            object(pairs)
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Whatever the file holds, the import ends: a run that keeps every invariant, or a
        /// refusal that names the file.
        #[test]
        fn any_vllm_shaped_file_is_imported_sanely_or_refused(doc in doc()) {
            let (_d, path, got) = import(&doc);
            match got {
                Ok(i) => assert_sane(&i),
                Err(e) => prop_assert!(e.to_string().contains(&path.display().to_string()), "{e}"),
            }
        }

        /// One impossible value anywhere in a consistent result is refused, naming the field.
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
