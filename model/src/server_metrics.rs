//! Server-side metrics over a run's measured window: the `server` section of `summary.json`.
//!
//! The scraper (`scrape`, runtime feature) reads the target's Prometheus `/metrics` during the
//! run; this module turns the scrapes into numbers over the measured window. It is pure: the
//! inputs are timestamped expositions, the output is [`ServerSection`].
//!
//! Engines name the same quantity differently; each canonical metric below lists the names it is
//! read from (the first one present wins):
//!
//! | canonical | kind | vLLM | llama.cpp | SGLang |
//! |---|---|---|---|---|
//! | generation tokens | counter | `vllm:generation_tokens_total` | `llamacpp:tokens_predicted_total` | `sglang:generation_tokens_total` |
//! | prompt tokens | counter | `vllm:prompt_tokens_total` | `llamacpp:prompt_tokens_total` | `sglang:prompt_tokens_total` |
//! | preemptions | counter | `vllm:num_preemptions_total` | — | — |
//! | running | gauge | `vllm:num_requests_running` | `llamacpp:requests_processing` | `sglang:num_running_reqs` |
//! | waiting | gauge | `vllm:num_requests_waiting` | `llamacpp:requests_deferred` | `sglang:num_queue_reqs` |
//! | prefix cache queries, hits | counter | `vllm:prefix_cache_queries_total`, `vllm:prefix_cache_hits_total` (or `vllm:gpu_prefix_cache_*`) | — | — |
//! | KV cache usage (0..1) | gauge | `vllm:kv_cache_usage_perc`, `vllm:gpu_cache_usage_perc` | `llamacpp:kv_cache_usage_ratio` | `sglang:token_usage` |
//!
//! and the simulator's own `infergate_sim:kv_fragmentation_ratio` (gauge),
//! `infergate_sim:wasted_tokens_total`, `infergate_sim:wasted_prefill_tokens_total`,
//! `infergate_sim:abandoned_requests_total` and `infergate_sim:abandoned_hold_seconds_total`
//! (counters).
//!
//! **Cancelled requests.** In a run that cancelled requests on purpose, [`cancel_waste`] sets
//! what the engine computed for them beside what the clients received (`server.cancelled`):
//! the output tokens it generated that no client received (its generation counter less every
//! request's received tokens, once the engine was found idle after the run), their share of
//! what the cancelled requests had left to their `max_tokens`, and, from engines that count
//! them, the prefill of requests that left before their first token and how long a request
//! whose client left kept its slot.
//!
//! **Window.** Counter deltas are taken between the two scrapes that bracket the measured window:
//! the last one at or before its start and the first one at or after its end (the runner scrapes
//! once just before the load starts and once right after the last request ended, so without
//! warmup the bracket is the window). A counter that goes down between two scrapes was reset;
//! the value after the reset counts as the increase. Gauge statistics use the scrapes taken
//! inside the window (the bracketing scrapes when none was).

use crate::engine_series::{infergate_sim, llamacpp, sglang, vllm};
use serde::{Deserialize, Serialize};

use crate::promtext::Exposition;

/// Names per canonical metric, in order of preference.
pub(crate) const GENERATION_TOKENS: &[&str] = &[
    vllm::GENERATION_TOKENS_TOTAL,
    llamacpp::TOKENS_PREDICTED_TOTAL,
    sglang::GENERATION_TOKENS_TOTAL,
];
pub const PROMPT_TOKENS: &[&str] =
    &[vllm::PROMPT_TOKENS_TOTAL, llamacpp::PROMPT_TOKENS_TOTAL, sglang::PROMPT_TOKENS_TOTAL];
pub(crate) const PREEMPTIONS: &[&str] = &[vllm::NUM_PREEMPTIONS_TOTAL];
pub(crate) const RUNNING: &[&str] =
    &[vllm::NUM_REQUESTS_RUNNING, llamacpp::REQUESTS_PROCESSING, sglang::NUM_RUNNING_REQS];
pub const WAITING: &[&str] =
    &[vllm::NUM_REQUESTS_WAITING, llamacpp::REQUESTS_DEFERRED, sglang::NUM_QUEUE_REQS];
pub(crate) const KV_USAGE: &[&str] = &[
    vllm::KV_CACHE_USAGE_PERC,
    vllm::GPU_CACHE_USAGE_PERC,
    llamacpp::KV_CACHE_USAGE_RATIO,
    sglang::TOKEN_USAGE,
];
/// Prompt tokens looked up in the prefix cache, and those found (vLLM v1 and its older names).
pub(crate) const PREFIX_CACHE_QUERIES: &[&str] =
    &[vllm::PREFIX_CACHE_QUERIES_TOTAL, vllm::GPU_PREFIX_CACHE_QUERIES_TOTAL];
pub(crate) const PREFIX_CACHE_HITS: &[&str] =
    &[vllm::PREFIX_CACHE_HITS_TOTAL, vllm::GPU_PREFIX_CACHE_HITS_TOTAL];
pub(crate) const KV_FRAGMENTATION: &[&str] = &[infergate_sim::KV_FRAGMENTATION_RATIO];
pub(crate) const WASTED_TOKENS: &[&str] = &[infergate_sim::WASTED_TOKENS_TOTAL];
pub(crate) const WASTED_PREFILL_TOKENS: &[&str] = &[infergate_sim::WASTED_PREFILL_TOKENS_TOTAL];
pub(crate) const ABANDONED_REQUESTS: &[&str] = &[infergate_sim::ABANDONED_REQUESTS_TOTAL];
pub(crate) const ABANDONED_HOLD_SECONDS: &[&str] = &[infergate_sim::ABANDONED_HOLD_SECONDS_TOTAL];

/// The canonical values of one scrape (`None`: the metric is not exposed).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reading {
    pub generation_tokens: Option<f64>,
    pub prompt_tokens: Option<f64>,
    pub preemptions: Option<f64>,
    pub wasted_tokens: Option<f64>,
    pub wasted_prefill_tokens: Option<f64>,
    pub abandoned_requests: Option<f64>,
    pub abandoned_hold_s: Option<f64>,
    pub running: Option<f64>,
    pub waiting: Option<f64>,
    pub kv_cache_usage: Option<f64>,
    pub kv_fragmentation: Option<f64>,
    pub prefix_cache_queries: Option<f64>,
    pub prefix_cache_hits: Option<f64>,
}

fn first_of(e: &Exposition, names: &[&str]) -> Option<f64> {
    names.iter().find_map(|n| e.sum(n))
}

impl Reading {
    pub fn from_exposition(e: &Exposition) -> Reading {
        Reading {
            generation_tokens: first_of(e, GENERATION_TOKENS),
            prompt_tokens: first_of(e, PROMPT_TOKENS),
            preemptions: first_of(e, PREEMPTIONS),
            wasted_tokens: first_of(e, WASTED_TOKENS),
            wasted_prefill_tokens: first_of(e, WASTED_PREFILL_TOKENS),
            abandoned_requests: first_of(e, ABANDONED_REQUESTS),
            abandoned_hold_s: first_of(e, ABANDONED_HOLD_SECONDS),
            running: first_of(e, RUNNING),
            waiting: first_of(e, WAITING),
            kv_cache_usage: first_of(e, KV_USAGE),
            kv_fragmentation: first_of(e, KV_FRAGMENTATION),
            prefix_cache_queries: first_of(e, PREFIX_CACHE_QUERIES),
            prefix_cache_hits: first_of(e, PREFIX_CACHE_HITS),
        }
    }
}

/// Which engine's names an exposition uses.
pub fn detect_engine(e: &Exposition) -> &'static str {
    let any = |prefix: &str| e.samples.iter().any(|s| s.name.starts_with(prefix));
    if any(infergate_sim::PREFIX) {
        "infergate-sim"
    } else if any(vllm::PREFIX) {
        "vllm"
    } else if any(llamacpp::PREFIX) {
        "llamacpp"
    } else if any(sglang::PREFIX) {
        "sglang"
    } else {
        "unknown"
    }
}

/// One scrape: when it was taken (ms on the run clock; negative = before the load started) and
/// what it read (`None`: the scrape failed).
#[derive(Clone, Debug, PartialEq)]
pub struct Scrape {
    pub t_ms: f64,
    pub reading: Option<Reading>,
}

/// One `nvidia-smi` sample: per GPU, utilisation in percent and memory used in MiB; and the
/// power drawn by all of them, W (absent when a GPU reported none).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GpuSample {
    pub t_ms: f64,
    pub utilization_pct: Vec<f64>,
    pub memory_used_mib: Vec<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_w: Option<f64>,
}

/// Parse `nvidia-smi --query-gpu=utilization.gpu,memory.used,power.draw
/// --format=csv,noheader,nounits` (one `util, mem, power` line per GPU). Lines whose first two
/// values are not numbers (`[N/A]`) are skipped; the power is the sum over the GPUs kept, blank
/// when one of them gave none.
pub fn parse_nvidia_smi(text: &str, t_ms: f64) -> Option<GpuSample> {
    let mut s = GpuSample {
        t_ms,
        utilization_pct: Vec::new(),
        memory_used_mib: Vec::new(),
        power_w: Some(0.0),
    };
    for line in text.lines() {
        let mut parts = line.split(',').map(str::trim);
        let (Some(u), Some(m)) = (parts.next(), parts.next()) else { continue };
        if let (Ok(u), Ok(m)) = (u.parse::<f64>(), m.parse::<f64>()) {
            s.utilization_pct.push(u);
            s.memory_used_mib.push(m);
            let power = parts.next().and_then(|p| p.parse::<f64>().ok()).filter(|p| p.is_finite());
            s.power_w = s.power_w.zip(power).map(|(a, b)| a + b);
        }
    }
    (!s.utilization_pct.is_empty()).then_some(s)
}

/// Energy over the window `(start, end)` (ms) from power samples taken inside it: the
/// time-weighted mean power of consecutive samples (trapezoids) times the window's length, J.
/// Blank with fewer than two samples or a sample without power: never estimated from one.
pub fn energy_j(samples: &[&GpuSample], (start, end): (f64, f64)) -> Option<f64> {
    let points: Vec<(f64, f64)> =
        samples.iter().map(|s| Some((s.t_ms, s.power_w?))).collect::<Option<Vec<_>>>()?;
    if points.len() < 2 || end <= start {
        return None;
    }
    let (mut area, mut span) = (0.0, 0.0);
    for w in points.windows(2) {
        let dt = w[1].0 - w[0].0;
        area += (w[0].1 + w[1].1) / 2.0 * dt;
        span += dt;
    }
    (span > 0.0).then(|| round6(area / span * (end - start) / 1000.0))
}

/// p50 / p99 / max / mean of a gauge over the window (nearest-rank percentiles).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GaugeStats {
    pub samples: u64,
    pub mean: f64,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

impl GaugeStats {
    pub fn of(values: &[f64]) -> Option<GaugeStats> {
        let v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        let q = |p| crate::stats::quantile(v.iter().copied(), p).expect("not empty");
        Some(GaugeStats {
            samples: v.len() as u64,
            mean: round6(v.iter().sum::<f64>() / v.len() as f64),
            p50: round6(q(0.5)),
            p99: round6(q(0.99)),
            max: round6(v.iter().copied().fold(f64::NEG_INFINITY, f64::max)),
        })
    }
}

/// The scrapes that bound the counter deltas: the last one before the run's first request and
/// the first one after its last request ended. Counters cover the whole run, warmup included:
/// a server counts a request's tokens while it runs (vLLM, per step) or when it ends
/// (llama.cpp), so only a bracket around every request compares exactly with what the client
/// received.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Bracket {
    /// Scrape at or before the run's first intended send (ms on the run clock).
    pub from_ms: f64,
    /// Scrape at or after the run's last request ended.
    pub to_ms: f64,
    /// True when the bracket encloses the run (false: a scrape was missing at one end and the
    /// deltas cover less than the run).
    pub encloses_window: bool,
}

/// GPU utilisation and memory from `nvidia-smi`, over the window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GpuSection {
    /// Mean over GPUs of each sample, in percent.
    pub utilization_pct: Option<GaugeStats>,
    /// Sum over GPUs of each sample, in MiB.
    pub memory_used_mib: Option<GaugeStats>,
    /// Sum over GPUs of each sample's power draw, W (absent when not reported).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_w: Option<GaugeStats>,
    /// Energy over the measured window, J ([`energy_j`]; absent when not sampled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_j: Option<f64>,
    /// `energy_j` per million output tokens of the measured ok requests, J (absent when either
    /// is).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub joules_per_1m_output_tokens: Option<f64>,
    /// Every sample of the run, in time order (also those outside the window).
    pub samples: Vec<GpuSample>,
}

/// The `server` section of summary.json. (`Default` is an empty section: a scrape of nothing.)
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerSection {
    /// The metrics URL scraped.
    pub source: String,
    /// Whose metric names were found: `vllm`, `llamacpp`, `sglang`, `infergate-sim`, `unknown`.
    pub engine: String,
    pub interval_s: f64,
    pub scrapes: u64,
    pub failed_scrapes: u64,
    pub bracket: Option<Bracket>,
    /// Counter deltas over the bracket (the whole run, warmup included).
    pub generation_tokens: Option<f64>,
    pub prompt_tokens: Option<f64>,
    pub preemptions: Option<f64>,
    /// Tokens generated for clients that had gone (simulator only).
    pub wasted_tokens: Option<f64>,
    /// Prompt tokens prefilled for requests whose client left before their first token, requests
    /// whose client left before they ended, and the seconds those kept their slot after the
    /// client left (simulator only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wasted_prefill_tokens: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abandoned_requests: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abandoned_hold_s: Option<f64>,
    /// Prompt tokens looked up in the prefix cache over the bracket, and those it served.
    #[serde(default)]
    pub prefix_cache_queries: Option<f64>,
    #[serde(default)]
    pub prefix_cache_hits: Option<f64>,
    /// prefix_cache_hits / prefix_cache_queries (null when nothing was looked up).
    #[serde(default)]
    pub prefix_cache_hit_rate: Option<f64>,
    /// Output tokens the client received in ok requests over the run (warmup included) /
    /// generation_tokens.
    pub goodput_ratio: Option<f64>,
    /// Gauges over the measured window.
    pub running: Option<GaugeStats>,
    pub waiting: Option<GaugeStats>,
    pub kv_cache_usage: Option<GaugeStats>,
    /// Mean share of allocated KV slots not holding a token (simulator only).
    pub kv_fragmentation: Option<f64>,
    pub kv_fragmentation_stats: Option<GaugeStats>,
    /// `nvidia-smi` samples (null when the command is absent).
    pub gpu: Option<GpuSection>,
    /// With requests cancelled on purpose: how the engine went on after the run's last request
    /// ended (absent for other runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_run: Option<AfterRun>,
    /// With requests cancelled on purpose: what the engine computed for them ([`cancel_waste`];
    /// absent for other runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancelled: Option<CancelWaste>,
    /// The gauges of every scrape of the run, in time order (also those outside the window; a
    /// failed scrape is a sample with every gauge null): what reports draw over time.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub samples: Vec<GaugeSample>,
}

/// What the engine did after the run's last request ended, in a run that cancelled requests: an
/// engine that stops cancelled requests is idle at once; one that ignores cancels computes
/// them to their end.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AfterRun {
    /// How long after the last request's end the engine still ran or queued requests, ms (until
    /// the scrape that found it idle, or until the wait ran out).
    pub busy_ms: f64,
    /// Whether it became idle within the wait.
    pub idle: bool,
    /// The longest wait, s (`cancel.drain_s`).
    pub waited_s: f64,
}

/// What the engine computed for the requests cancelled on purpose, against what their clients
/// received. Blank fields were not measured: never estimated.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CancelWaste {
    /// Requests cancelled on purpose.
    pub requests: u64,
    /// Output tokens the server generated that no client received: the generation counter's
    /// increase over the bracket (to the scrape that found the engine idle after the run) less
    /// the tokens every request of the run received. Blank unless the bracket encloses the run,
    /// the engine was found idle after it, and every count is known. Negative: the server
    /// counted fewer tokens than the clients received.
    pub decode_tokens: Option<f64>,
    /// decode_tokens per cancelled request.
    pub decode_tokens_per_cancel: Option<f64>,
    /// Tokens the cancelled requests had left to their max_tokens when they were closed.
    pub tokens_left: Option<u64>,
    /// decode_tokens / tokens_left: 0 for an engine that stopped at once, 1 for one that
    /// computed every cancelled request to its max_tokens (less with requests that would have
    /// ended by themselves).
    pub decode_share: Option<f64>,
    /// Whether the engine stopped generating for the clients that left: decode_share below
    /// [`STOPPED_BELOW`].
    pub stopped: Option<bool>,
    /// Prompt tokens prefilled for requests whose client left before their first token
    /// (engines that count it: the simulator).
    pub prefill_tokens: Option<f64>,
    /// How long a request whose client left kept its slot and KV blocks afterwards, mean over
    /// those requests, ms (engines that count it: the simulator).
    pub hold_ms_mean: Option<f64>,
}

/// `decode_share` below which an engine is said to have stopped for the clients that left.
pub(crate) const STOPPED_BELOW: f64 = 0.5;

/// What the engine computed for a run's cancelled requests (None when the run cancelled none),
/// from a section whose counters and `after_run` are set.
pub fn cancel_waste(
    section: &ServerSection,
    run: &crate::metrics::RunTotals,
) -> Option<CancelWaste> {
    if run.cancelled == 0 {
        return None;
    }
    let encloses = section.bracket.as_ref().is_some_and(|b| b.encloses_window);
    let idle = section.after_run.as_ref().is_some_and(|a| a.idle);
    let decode = match (section.generation_tokens, run.received_tokens) {
        (Some(g), Some(r)) if encloses && idle => Some(g - r as f64),
        _ => None,
    };
    let share = match (decode, run.cancelled_left) {
        (Some(d), Some(left)) if left > 0 => Some(round6(d / left as f64)),
        _ => None,
    };
    let hold = match (section.abandoned_hold_s, section.abandoned_requests) {
        (Some(h), Some(n)) if n > 0.0 => Some(round6(h / n * 1000.0)),
        _ => None,
    };
    Some(CancelWaste {
        requests: run.cancelled,
        decode_tokens: decode,
        decode_tokens_per_cancel: decode.map(|d| round6(d / run.cancelled as f64)),
        tokens_left: run.cancelled_left,
        decode_share: share,
        stopped: share.map(|s| s < STOPPED_BELOW),
        prefill_tokens: section.wasted_prefill_tokens,
        hold_ms_mean: hold,
    })
}

/// The gauges of one scrape (`None`: not exposed, or the scrape failed).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GaugeSample {
    /// When the scrape was taken, ms on the run clock.
    pub t_ms: f64,
    pub running: Option<f64>,
    pub waiting: Option<f64>,
    pub kv_cache_usage: Option<f64>,
}

fn round6(v: f64) -> f64 {
    (v * 1e6).round() / 1e6
}

/// Increase of a counter over consecutive readings, counting resets.
pub(crate) fn counter_delta(values: &[Option<f64>]) -> Option<f64> {
    let v: Vec<f64> = values.iter().flatten().copied().collect();
    if v.len() < 2 || values.first()?.is_none() || values.last()?.is_none() {
        return None;
    }
    let mut total = 0.0;
    for w in v.windows(2) {
        total += if w[1] >= w[0] { w[1] - w[0] } else { w[1] };
    }
    Some(total)
}

/// Compute the section from scrapes sorted by time: gauges (and GPU samples) over the measured
/// window, counters over the whole run (`run.span`, ms on the run clock), compared with the
/// output tokens the run's ok requests received.
pub fn summarize(
    source: &str,
    engine: &str,
    interval_s: f64,
    scrapes: &[Scrape],
    window: Option<(f64, f64)>,
    run: crate::metrics::RunTotals,
    gpu_samples: Option<Vec<GpuSample>>,
) -> ServerSection {
    let ok: Vec<(f64, &Reading)> =
        scrapes.iter().filter_map(|s| s.reading.as_ref().map(|r| (s.t_ms, r))).collect();
    let mut section = ServerSection {
        source: source.to_string(),
        engine: engine.to_string(),
        interval_s,
        scrapes: scrapes.len() as u64,
        failed_scrapes: (scrapes.len() - ok.len()) as u64,
        bracket: None,
        generation_tokens: None,
        prompt_tokens: None,
        preemptions: None,
        wasted_tokens: None,
        wasted_prefill_tokens: None,
        abandoned_requests: None,
        abandoned_hold_s: None,
        prefix_cache_queries: None,
        prefix_cache_hits: None,
        prefix_cache_hit_rate: None,
        goodput_ratio: None,
        after_run: None,
        cancelled: None,
        running: None,
        waiting: None,
        kv_cache_usage: None,
        kv_fragmentation: None,
        kv_fragmentation_stats: None,
        gpu: None,
        samples: scrapes
            .iter()
            .map(|s| GaugeSample {
                t_ms: s.t_ms,
                running: s.reading.as_ref().and_then(|r| r.running),
                waiting: s.reading.as_ref().and_then(|r| r.waiting),
                kv_cache_usage: s.reading.as_ref().and_then(|r| r.kv_cache_usage),
            })
            .collect(),
    };
    let in_window = |t: f64| window.is_some_and(|(a, b)| t >= a && t <= b);
    if let Some(samples) = gpu_samples {
        let inside: Vec<&GpuSample> = samples.iter().filter(|s| in_window(s.t_ms)).collect();
        let util: Vec<f64> = inside
            .iter()
            .map(|s| s.utilization_pct.iter().sum::<f64>() / s.utilization_pct.len() as f64)
            .collect();
        let mem: Vec<f64> = inside.iter().map(|s| s.memory_used_mib.iter().sum()).collect();
        let power: Vec<f64> = inside.iter().filter_map(|s| s.power_w).collect();
        let energy = window.and_then(|w| energy_j(&inside, w));
        let per_1m = match (energy, run.measured_ok_output_tokens) {
            (Some(e), Some(n)) if n > 0 => Some(round6(e / n as f64 * 1e6)),
            _ => None,
        };
        section.gpu = Some(GpuSection {
            utilization_pct: GaugeStats::of(&util),
            memory_used_mib: GaugeStats::of(&mem),
            power_w: GaugeStats::of(&power),
            energy_j: energy,
            joules_per_1m_output_tokens: per_1m,
            samples,
        });
    }
    if ok.is_empty() {
        return section;
    }
    // The scrapes at or before `start` and at or after `end` (or the first / last there are).
    let bracket = |(start, end): (f64, f64)| {
        let from = ok.iter().rposition(|(t, _)| *t <= start);
        let to = ok.iter().position(|(t, _)| *t >= end);
        let encloses = from.is_some() && to.is_some();
        let (from, to) = (from.unwrap_or(0), to.unwrap_or(ok.len() - 1));
        (to > from).then_some((from, to, encloses))
    };
    if let Some((from, to, encloses)) = run.span.and_then(bracket) {
        section.bracket =
            Some(Bracket { from_ms: ok[from].0, to_ms: ok[to].0, encloses_window: encloses });
        let span = &ok[from..=to];
        let delta = |f: fn(&Reading) -> Option<f64>| {
            counter_delta(&span.iter().map(|(_, r)| f(r)).collect::<Vec<_>>())
        };
        section.generation_tokens = delta(|r| r.generation_tokens);
        section.prompt_tokens = delta(|r| r.prompt_tokens);
        section.preemptions = delta(|r| r.preemptions);
        section.wasted_tokens = delta(|r| r.wasted_tokens);
        section.wasted_prefill_tokens = delta(|r| r.wasted_prefill_tokens);
        section.abandoned_requests = delta(|r| r.abandoned_requests);
        section.abandoned_hold_s = delta(|r| r.abandoned_hold_s).map(round6);
        section.prefix_cache_queries = delta(|r| r.prefix_cache_queries);
        section.prefix_cache_hits = delta(|r| r.prefix_cache_hits);
        section.prefix_cache_hit_rate =
            match (section.prefix_cache_hits, section.prefix_cache_queries) {
                (Some(h), Some(q)) if q > 0.0 => Some(round6(h / q)),
                _ => None,
            };
        section.goodput_ratio = match (run.ok_output_tokens, section.generation_tokens) {
            (Some(d), Some(g)) if g > 0.0 && encloses => Some(round6(d as f64 / g)),
            _ => None,
        };
    }
    let Some((start, end)) = window else { return section };
    let mut inside: Vec<&Reading> =
        ok.iter().filter(|(t, _)| *t > start && *t < end).map(|(_, r)| *r).collect();
    if inside.is_empty() {
        // No scrape fell inside a short window: the two around it.
        match bracket((start, end)) {
            Some((from, to, _)) => inside = vec![ok[from].1, ok[to].1],
            None => return section,
        }
    }
    let gauge = |f: fn(&Reading) -> Option<f64>| {
        GaugeStats::of(&inside.iter().filter_map(|r| f(r)).collect::<Vec<_>>())
    };
    section.running = gauge(|r| r.running);
    section.waiting = gauge(|r| r.waiting);
    section.kv_cache_usage = gauge(|r| r.kv_cache_usage);
    section.kv_fragmentation_stats = gauge(|r| r.kv_fragmentation);
    section.kv_fragmentation = section.kv_fragmentation_stats.as_ref().map(|s| s.mean);
    section
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::RunTotals;
    use crate::promtext;

    fn reading(gen_tokens: f64, running: f64) -> Option<Reading> {
        Some(Reading {
            generation_tokens: Some(gen_tokens),
            running: Some(running),
            ..Reading::default()
        })
    }

    #[test]
    fn vllm_and_llamacpp_names_fill_the_same_fields() {
        let vllm = promtext::parse(
            "vllm:generation_tokens_total{model_name=\"m\"} 10\n\
             vllm:num_requests_running{model_name=\"m\"} 2\n\
             vllm:kv_cache_usage_perc{model_name=\"m\"} 0.5\n\
             vllm:num_preemptions_total{model_name=\"m\"} 1\n",
        );
        let r = Reading::from_exposition(&vllm);
        assert_eq!(detect_engine(&vllm), "vllm");
        assert_eq!(
            (r.generation_tokens, r.running, r.kv_cache_usage, r.preemptions),
            (Some(10.0), Some(2.0), Some(0.5), Some(1.0))
        );
        let llama = promtext::parse(
            "# TYPE llamacpp:prompt_tokens_total counter\nllamacpp:prompt_tokens_total 7\n\
             llamacpp:tokens_predicted_total 12\nllamacpp:requests_processing 1\n\
             llamacpp:requests_deferred 3\n",
        );
        let r = Reading::from_exposition(&llama);
        assert_eq!(detect_engine(&llama), "llamacpp");
        assert_eq!(
            (r.generation_tokens, r.prompt_tokens, r.running, r.waiting, r.preemptions),
            (Some(12.0), Some(7.0), Some(1.0), Some(3.0), None)
        );
    }

    #[test]
    fn deltas_over_the_bracket_and_gauges_inside_the_window() {
        let scrapes = vec![
            Scrape { t_ms: -5.0, reading: reading(100.0, 0.0) },
            Scrape { t_ms: 500.0, reading: reading(150.0, 4.0) },
            Scrape { t_ms: 900.0, reading: None },
            Scrape { t_ms: 1500.0, reading: reading(260.0, 8.0) },
            Scrape { t_ms: 2100.0, reading: reading(300.0, 0.0) },
            Scrape { t_ms: 3000.0, reading: reading(999.0, 0.0) },
        ];
        // Warmup from 0 ms, the measured window from 600 ms to 2000 ms.
        let run = RunTotals {
            span: Some((0.0, 2000.0)),
            ok_output_tokens: Some(180),
            ..RunTotals::default()
        };
        let s = summarize("u", "vllm", 0.5, &scrapes, Some((600.0, 2000.0)), run, None);
        let b = s.bracket.as_ref().unwrap();
        assert_eq!((b.from_ms, b.to_ms, b.encloses_window), (-5.0, 2100.0, true));
        assert_eq!(s.generation_tokens, Some(200.0));
        assert_eq!(s.goodput_ratio, Some(0.9));
        // Gauges: only the scrape at 1500 ms lies inside the measured window.
        let running = s.running.clone().unwrap();
        assert_eq!((running.samples, running.max), (1, 8.0));
        // A bracket missing its end covers less than the run: no ratio from it.
        let short = summarize("u", "vllm", 0.5, &scrapes[..4], None, run, None);
        assert_eq!(short.bracket.as_ref().map(|b| b.encloses_window), Some(false));
        assert_eq!(short.goodput_ratio, None);
        let s = summarize("u", "vllm", 0.5, &scrapes, Some((0.0, 2000.0)), run, None);
        assert_eq!((s.scrapes, s.failed_scrapes), (6, 1));
        let running = s.running.unwrap();
        assert_eq!((running.samples, running.max, running.p50), (2, 8.0, 4.0));
        assert_eq!(s.preemptions, None);
        assert_eq!(s.kv_fragmentation, None);
        // Every scrape is kept over time; the failed one with blank gauges.
        let times: Vec<f64> = s.samples.iter().map(|g| g.t_ms).collect();
        assert_eq!(times, vec![-5.0, 500.0, 900.0, 1500.0, 2100.0, 3000.0]);
        assert_eq!((s.samples[1].running, s.samples[2].running), (Some(4.0), None));
    }

    #[test]
    fn counter_resets_count_the_value_after_the_reset() {
        assert_eq!(counter_delta(&[Some(10.0), Some(15.0), Some(3.0), Some(5.0)]), Some(10.0));
        assert_eq!(counter_delta(&[Some(10.0)]), None);
        assert_eq!(counter_delta(&[None, Some(3.0)]), None);
    }

    #[test]
    fn nvidia_smi_lines() {
        let s = parse_nvidia_smi("45, 1024\n 50 , 2048\n[N/A], [N/A]\n", 10.0).unwrap();
        assert_eq!(s.utilization_pct, vec![45.0, 50.0]);
        assert_eq!(s.memory_used_mib, vec![1024.0, 2048.0]);
        assert_eq!(s.power_w, None, "no power column");
        let p = parse_nvidia_smi("45, 1024, 250.5\n50, 2048, 300\n", 10.0).unwrap();
        assert_eq!(p.power_w, Some(550.5));
        let na = parse_nvidia_smi("45, 1024, 250.5\n50, 2048, [N/A]\n", 10.0).unwrap();
        assert_eq!(na.power_w, None, "one GPU without power: blank, not a partial sum");
        assert!(parse_nvidia_smi("", 0.0).is_none());
        let sec = summarize(
            "u",
            "x",
            1.0,
            &[],
            Some((0.0, 100.0)),
            RunTotals::default(),
            Some(vec![s, GpuSample { t_ms: 500.0, ..parse_nvidia_smi("1, 1", 0.0).unwrap() }]),
        );
        let gpu = sec.gpu.unwrap();
        assert_eq!(gpu.utilization_pct.unwrap().max, 47.5);
        assert_eq!(gpu.samples.len(), 2);
        assert_eq!((gpu.energy_j, gpu.joules_per_1m_output_tokens), (None, None));
    }

    /// Power stepping from 200 W to 400 W halfway through a 10 s window, sampled every second:
    /// the trapezoids' mean is 300 W, so 3000 J, and per million of 2000 tokens 1.5e6 J.
    #[test]
    fn energy_is_the_mean_power_of_the_samples_times_the_window() {
        let sample = |t_ms: f64, w: f64| GpuSample {
            t_ms,
            utilization_pct: vec![50.0],
            memory_used_mib: vec![1.0],
            power_w: Some(w),
        };
        let samples: Vec<GpuSample> = (0..=10)
            .map(|i| {
                sample(
                    i as f64 * 1000.0,
                    if i < 5 {
                        200.0
                    } else if i == 5 {
                        300.0
                    } else {
                        400.0
                    },
                )
            })
            .collect();
        let refs: Vec<&GpuSample> = samples.iter().collect();
        assert_eq!(energy_j(&refs, (0.0, 10_000.0)), Some(3000.0));
        assert_eq!(energy_j(&refs[..1], (0.0, 10_000.0)), None, "one sample is no integral");
        let mut gap = samples.clone();
        gap[3].power_w = None;
        let refs: Vec<&GpuSample> = gap.iter().collect();
        assert_eq!(energy_j(&refs, (0.0, 10_000.0)), None, "a sample without power");
        let run = RunTotals { measured_ok_output_tokens: Some(2000), ..RunTotals::default() };
        let sec = summarize("u", "x", 1.0, &[], Some((0.0, 10_000.0)), run, Some(samples));
        let gpu = sec.gpu.unwrap();
        assert_eq!(gpu.energy_j, Some(3000.0));
        assert_eq!(gpu.joules_per_1m_output_tokens, Some(1.5e6));
        assert_eq!(gpu.power_w.unwrap().max, 400.0);
    }
}
