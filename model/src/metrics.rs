//! Latency statistics and the run's metrics, computed from per-request records.
//!
//! Percentiles come from HdrHistogram (values in microseconds, 3 significant digits, so a
//! percentile is within 0.1% of the exact order statistic); count, mean, stdev, min and max are
//! exact (accumulated from the raw values).

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::outcome::Outcome;
use crate::record::{RequestRecord, TokenSource};

/// Highest value a latency histogram can hold: one hour, in microseconds.
const MAX_US: u64 = 3_600_000_000;

/// Summary statistics of one latency metric, in milliseconds.
///
/// A run infergate measured has every value. A run imported from another tool's results
/// (`bench::foreign`) has only those the tool reported: the others are NaN, written `null`
/// (and read back as NaN), so a lookup of one finds no value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    pub count: u64,
    #[serde(deserialize_with = "number_or_null")]
    pub mean: f64,
    #[serde(deserialize_with = "number_or_null")]
    pub stdev: f64,
    #[serde(deserialize_with = "number_or_null")]
    pub min: f64,
    #[serde(deserialize_with = "number_or_null")]
    pub p50: f64,
    #[serde(deserialize_with = "number_or_null")]
    pub p90: f64,
    #[serde(deserialize_with = "number_or_null")]
    pub p95: f64,
    #[serde(deserialize_with = "number_or_null")]
    pub p99: f64,
    #[serde(deserialize_with = "number_or_null")]
    pub p999: f64,
    #[serde(deserialize_with = "number_or_null")]
    pub max: f64,
}

/// A statistic's value, `null` (not reported by the tool an imported run came from) read as NaN.
fn number_or_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// A latency metric being accumulated: an HdrHistogram plus exact moments.
///
/// The moments are sums of whole nanoseconds, so they do not depend on the order the values
/// arrive in: a merged run and the same records read back in another order give the same mean
/// and deviation to the last digit.
#[derive(Clone, Debug)]
pub struct LatencyHist {
    hist: Histogram<u64>,
    n: u64,
    sum_ns: u128,
    sum_sq_ns: u128,
    min: f64,
    max: f64,
}

impl Default for LatencyHist {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyHist {
    pub fn new() -> Self {
        LatencyHist {
            hist: Histogram::new_with_bounds(1, MAX_US, 3).expect("valid histogram bounds"),
            n: 0,
            sum_ns: 0,
            sum_sq_ns: 0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
        }
    }

    /// Record a value in milliseconds. Negative values (clock effects at sub-microsecond scale)
    /// are clamped to zero; values above one hour are clamped into the histogram but the exact
    /// moments keep the real value.
    pub fn record(&mut self, ms: f64) {
        if !ms.is_finite() {
            return;
        }
        let ms = ms.max(0.0);
        let us = ((ms * 1000.0).round() as u64).clamp(1, MAX_US);
        self.hist.record(us).expect("value clamped into bounds");
        self.n += 1;
        let ns = (ms * 1e6).round() as u128;
        self.sum_ns = self.sum_ns.saturating_add(ns);
        self.sum_sq_ns = self.sum_sq_ns.saturating_add(ns.saturating_mul(ns));
        self.min = self.min.min(ms);
        self.max = self.max.max(ms);
    }

    pub fn len(&self) -> u64 {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    pub fn histogram(&self) -> &Histogram<u64> {
        &self.hist
    }

    pub fn mean(&self) -> Option<f64> {
        (self.n > 0).then(|| self.sum_ns as f64 / self.n as f64 / 1e6)
    }

    /// Population standard deviation.
    pub fn stdev(&self) -> Option<f64> {
        if self.n == 0 {
            return None;
        }
        let n = self.n as u128;
        // n·Σx² − (Σx)², exact while it fits; the floating form past that (runs of millions of
        // hour-long values), still independent of the order.
        let exact = n
            .checked_mul(self.sum_sq_ns)
            .zip(self.sum_ns.checked_mul(self.sum_ns))
            .map(|(a, b)| a.saturating_sub(b) as f64 / (n as f64 * n as f64));
        let var_ns2 = exact.unwrap_or_else(|| {
            let mean = self.sum_ns as f64 / n as f64;
            (self.sum_sq_ns as f64 / n as f64 - mean * mean).max(0.0)
        });
        Some(var_ns2.sqrt() / 1e6)
    }

    fn quantile_ms(&self, q: f64) -> f64 {
        let v = self.hist.value_at_quantile(q) as f64 / 1000.0;
        // The histogram reports the highest value equivalent to the bucket; never report a value
        // outside what was actually seen.
        v.clamp(self.min, self.max)
    }

    /// `None` when nothing was recorded: an unmeasured metric stays blank.
    pub fn stats(&self) -> Option<Stats> {
        if self.n == 0 {
            return None;
        }
        Some(Stats {
            count: self.n,
            mean: round3(self.mean().unwrap_or(0.0)),
            stdev: round3(self.stdev().unwrap_or(0.0)),
            min: round3(self.min),
            p50: round3(self.quantile_ms(0.50)),
            p90: round3(self.quantile_ms(0.90)),
            p95: round3(self.quantile_ms(0.95)),
            p99: round3(self.quantile_ms(0.99)),
            p999: round3(self.quantile_ms(0.999)),
            max: round3(self.max),
        })
    }
}

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

/// Service-level objectives a request must meet to count toward goodput.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Slo {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e2e_ms: Option<f64>,
}

impl Slo {
    pub fn is_empty(&self) -> bool {
        self.ttft_ms.is_none() && self.tpot_ms.is_none() && self.e2e_ms.is_none()
    }

    /// Whether an ok request meets every configured objective. `None` when an objective is set
    /// but the request lacks the measurement (e.g. TTFT of a non-streaming request).
    /// A TPOT objective is vacuous for single-token outputs.
    pub(crate) fn met_by(&self, r: &RequestRecord) -> Option<bool> {
        let mut ok = true;
        if let Some(limit) = self.ttft_ms {
            ok &= r.ttft_ms()? <= limit;
        }
        if let Some(limit) = self.tpot_ms {
            match r.tpot_ms() {
                Some(v) => ok &= v <= limit,
                None if r.output_tokens.is_some_and(|n| n < 2) => {}
                None => return None,
            }
        }
        if let Some(limit) = self.e2e_ms {
            ok &= r.e2e_ms()? <= limit;
        }
        Some(ok)
    }
}

impl Slo {
    /// The configured objectives, by the name of the latency each limits (`ttft_ms`, ...).
    pub fn objectives(&self) -> Vec<(&'static str, f64)> {
        [("ttft_ms", self.ttft_ms), ("tpot_ms", self.tpot_ms), ("e2e_ms", self.e2e_ms)]
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k, v)))
            .collect()
    }

    /// The share of `records`' measured requests (warmup and cancelled-on-purpose left out,
    /// failures counted as misses) meeting each configured objective on its own, by the
    /// objective's name; an objective no answered request could be measured against is left
    /// out. Goodput's ratio is the share meeting all of them at once.
    pub fn attainment_by_objective<'a>(
        &self,
        records: impl IntoIterator<Item = &'a RequestRecord>,
    ) -> BTreeMap<String, f64> {
        let objectives = self.objectives();
        let mut met = vec![0u64; objectives.len()];
        let mut known = vec![true; objectives.len()];
        let mut answered = 0u64;
        for r in records {
            if r.warmup || r.class == Outcome::Cancelled {
                continue;
            }
            answered += 1;
            if r.class != Outcome::Ok {
                continue;
            }
            for (i, (name, limit)) in objectives.iter().enumerate() {
                let one = match *name {
                    "ttft_ms" => Slo { ttft_ms: Some(*limit), ..Slo::default() },
                    "tpot_ms" => Slo { tpot_ms: Some(*limit), ..Slo::default() },
                    _ => Slo { e2e_ms: Some(*limit), ..Slo::default() },
                };
                match one.met_by(r) {
                    Some(true) => met[i] += 1,
                    Some(false) => {}
                    None => known[i] = false,
                }
            }
        }
        let mut out = BTreeMap::new();
        if answered == 0 {
            return out;
        }
        for (i, (name, _)) in objectives.iter().enumerate() {
            if known[i] {
                out.insert(name.to_string(), met[i] as f64 / answered as f64);
            }
        }
        out
    }
}

/// Counts of the measured requests.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RequestCounts {
    /// Measured requests (warmup excluded).
    pub total: u64,
    pub ok: u64,
    /// Measured requests that did not end `ok`, those cancelled on purpose apart.
    pub failed: u64,
    /// Measured requests the bench cancelled on purpose (`[profile.*.cancel]`): neither ok nor
    /// failed, never in a latency histogram.
    #[serde(default)]
    pub cancelled: u64,
    /// How the cancelled requests went (absent when none was cancelled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancellation: Option<Cancellation>,
    /// Warmup requests (recorded, excluded from every metric).
    pub warmup: u64,
    /// Measured requests by outcome class.
    pub by_class: BTreeMap<String, u64>,
    /// Measured requests whose stream broke the protocol at least once (they keep their class).
    #[serde(default)]
    pub stream_violations: u64,
    /// Measured requests with each kind of violation (`content_after_finish`,
    /// `interleaved_choices`, ...; kinds that did not occur are left out).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub stream_violation_kinds: BTreeMap<String, u64>,
    /// Measured requests whose body was recognised as something else than an event stream
    /// (`gzip`, `html`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub unexpected_bodies: BTreeMap<String, u64>,
}

/// The requests cancelled on purpose: when they were closed and what they had received.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Cancellation {
    /// Cancelled before their first token arrived (their prefill, if computed, is all waste).
    pub before_first_token: u64,
    /// Output tokens (content events) the cancelled requests received before they were closed.
    pub tokens_received: u64,
    /// When they were closed: ms from the intended send time.
    pub after_ms: Option<Stats>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TokenCounts {
    /// Prompt tokens of the ok requests (blank when no request reported or knew them).
    pub input_total: Option<u64>,
    /// Output tokens of the ok requests.
    pub output_total: Option<u64>,
    /// Ok requests whose output count came from `usage.completion_tokens`.
    pub from_usage: u64,
    /// Ok requests whose output count is the number of content events.
    pub from_chunks: u64,
    /// Ok requests where usage and the content-event count disagree (several tokens per chunk).
    pub count_mismatches: u64,
    /// Ok requests whose `usage.completion_tokens` contradicted the response and was not used
    /// (their records' `rejected_usage`).
    #[serde(default)]
    pub usage_rejected: u64,
    /// Token counts whose sum went past the largest count (2^64 - 1): the totals they belong to
    /// are blank rather than wrapped.
    #[serde(default)]
    pub overflows: u64,
    /// Over the ok streamed requests that reported usage (two content events or more; a whole
    /// body is one): the sum of their `usage.completion_tokens`, those set aside as
    /// contradicting the response included...
    #[serde(default)]
    pub usage_total: Option<u64>,
    /// ... and the sum of the content events the client received for them.
    #[serde(default)]
    pub streamed_total: Option<u64>,
    /// |usage_total - streamed_total| / streamed_total: what the server says it sent against
    /// what the client counted (0 for an honest server streaming one token per event; blank when
    /// no such request). A server or client that drops or invents tokens moves it.
    #[serde(default)]
    pub server_mismatch: Option<f64>,
    /// Reasoning streams: content events of the ok requests' reasoning sections, and of their
    /// answers (absent when no ok request reasoned).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_total: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_total: Option<u64>,
}

/// Above this `tokens.server_mismatch` the summary says so in a note.
pub const TOKEN_MISMATCH_TOLERANCE: f64 = 0.01;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencyMetrics {
    pub ttft_ms: Option<Stats>,
    pub tpot_ms: Option<Stats>,
    pub itl_ms: Option<Stats>,
    pub e2e_ms: Option<Stats>,
    /// ITL jitter ratio: stdev(ITL) / mean(ITL) over every gap of every ok request.
    pub itl_jitter: Option<f64>,
    /// Server-reported queue time (when the server reports it).
    pub queue_ms: Option<Stats>,
    /// Reasoning streams only: time to the first reasoning token and to the first answer
    /// token, from the intended send (absent for runs without reasoning; TTFT is the first of
    /// either, as always).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttfrt_ms: Option<Stats>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttfat_ms: Option<Stats>,
    /// Reasoning streams only: time per reasoning token and per answer token (each request's
    /// from its own events; see docs/metrics.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot_reasoning_ms: Option<Stats>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot_answer_ms: Option<Stats>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Throughput {
    pub requests_per_s: Option<f64>,
    pub output_tokens_per_s: Option<f64>,
    pub total_tokens_per_s: Option<f64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Goodput {
    /// The objectives applied.
    pub slo: Slo,
    /// Ok requests that met every objective.
    pub requests: Option<u64>,
    /// Those requests per second of the measured window.
    pub requests_per_s: Option<f64>,
    /// Share of the measured requests that met every objective (failures count as misses;
    /// requests cancelled on purpose are left out).
    pub ratio: Option<f64>,
    /// Output tokens delivered to ok requests over the output tokens the server computed, from
    /// its counters over the run (blank when the server exposes none; never estimated): the
    /// share of the engine's decode work that reached a client that wanted it.
    #[serde(default)]
    pub token_ratio: Option<f64>,
}

/// The measured window: from the earliest intended send of a measured request to the latest end
/// of a measured request.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Window {
    pub start_ms: Option<f64>,
    pub end_ms: Option<f64>,
    pub duration_s: Option<f64>,
}

/// Schedule adherence of the load generator itself.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ScheduleStats {
    /// Actual send minus intended send, over measured requests that were sent.
    pub lag_ms: Option<Stats>,
    /// Requests per second the load profile asked for (open loop only).
    pub requested_rate: Option<f64>,
    /// Requests per second actually sent over the measured window.
    pub achieved_rate: Option<f64>,
}

/// Everything computed from the records of one run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunMetrics {
    pub requests: RequestCounts,
    pub tokens: TokenCounts,
    pub latency: LatencyMetrics,
    pub throughput: Throughput,
    pub goodput: Goodput,
    pub window: Window,
    pub schedule: ScheduleStats,
    /// Per turn index of sessions workloads (empty otherwise).
    pub turns: Vec<TurnMetrics>,
}

/// The measured requests of one turn index of a sessions workload: TTFT of turn 1 against
/// turn 5, and how the prompt grew with the history.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TurnMetrics {
    /// The turn, from 1.
    pub turn: u32,
    /// Measured requests of this turn (every class).
    pub requests: u64,
    /// Of them, those that ended `ok`.
    pub ok: u64,
    /// TTFT of the ok requests of this turn.
    pub ttft_ms: Option<Stats>,
    /// Mean prompt tokens of the ok requests of this turn (the server's count when reported).
    pub input_tokens_mean: Option<f64>,
}

/// A turn's accumulated records.
#[derive(Clone, Debug, Default)]
struct TurnAcc {
    requests: u64,
    ok: u64,
    ttft: LatencyHist,
    input_sum: f64,
    input_n: u64,
}

/// Builds [`RunMetrics`] from records, one at a time (the runner feeds it as requests finish;
/// a run directory can be recomputed by feeding it `requests.jsonl`).
#[derive(Clone, Debug)]
pub struct MetricsAccumulator {
    slo: Slo,
    pub ttft: LatencyHist,
    pub tpot: LatencyHist,
    pub itl: LatencyHist,
    pub e2e: LatencyHist,
    pub queue: LatencyHist,
    pub lag: LatencyHist,
    pub ttfrt: LatencyHist,
    pub ttfat: LatencyHist,
    pub tpot_reasoning: LatencyHist,
    pub tpot_answer: LatencyHist,
    /// When the requests cancelled on purpose were closed (ms from their intended send).
    cancel_after: LatencyHist,
    cancellation: Cancellation,
    /// Prompt and output lengths (tokens) the server reported for the measured ok requests.
    pub input_len: LatencyHist,
    pub output_len: LatencyHist,
    counts: RequestCounts,
    tokens: TokenCounts,
    input_seen: bool,
    output_seen: bool,
    /// Sums of the ok requests' counts; `None` once a sum overflowed.
    input_total: Option<u64>,
    output_total: Option<u64>,
    slo_met: u64,
    slo_unknown: bool,
    window_start: Option<f64>,
    window_end: Option<f64>,
    first_sent: Option<f64>,
    last_sent: Option<f64>,
    sent: u64,
    run: RunTotals,
    turns: BTreeMap<u32, TurnAcc>,
}

/// Every request of a run, warmup included: what server counters covering the whole run are
/// compared with.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RunTotals {
    /// Earliest intended send and latest end of any request (ms on the run clock).
    pub span: Option<(f64, f64)>,
    /// Output tokens of the ok requests (None when some ok request's count is unknown).
    pub ok_output_tokens: Option<u64>,
    /// Output tokens of the measured ok requests (warmup left out): what the window's energy
    /// is divided by (None when some count is unknown).
    pub measured_ok_output_tokens: Option<u64>,
    /// Output tokens every request of the run received, whatever its class: the ok requests'
    /// counts, the content events (reasoning ones included) of the others (None when some ok
    /// request's count is unknown).
    pub received_tokens: Option<u64>,
    /// Requests cancelled on purpose, warmup included (warmup requests are never cancelled).
    pub cancelled: u64,
    /// Tokens the cancelled requests had left to their `max_tokens` when they were closed (None
    /// when one's max_tokens is unknown).
    pub cancelled_left: Option<u64>,
}

impl MetricsAccumulator {
    pub fn new(slo: Slo) -> Self {
        MetricsAccumulator {
            slo,
            ttft: LatencyHist::new(),
            tpot: LatencyHist::new(),
            itl: LatencyHist::new(),
            e2e: LatencyHist::new(),
            queue: LatencyHist::new(),
            lag: LatencyHist::new(),
            ttfrt: LatencyHist::new(),
            ttfat: LatencyHist::new(),
            tpot_reasoning: LatencyHist::new(),
            tpot_answer: LatencyHist::new(),
            cancel_after: LatencyHist::new(),
            cancellation: Cancellation::default(),
            input_len: LatencyHist::new(),
            output_len: LatencyHist::new(),
            counts: RequestCounts::default(),
            tokens: TokenCounts::default(),
            input_seen: false,
            output_seen: false,
            input_total: Some(0),
            output_total: Some(0),
            slo_met: 0,
            slo_unknown: false,
            window_start: None,
            window_end: None,
            first_sent: None,
            last_sent: None,
            sent: 0,
            run: RunTotals {
                span: None,
                ok_output_tokens: Some(0),
                measured_ok_output_tokens: None,
                received_tokens: Some(0),
                cancelled: 0,
                cancelled_left: Some(0),
            },
            turns: BTreeMap::new(),
        }
    }

    /// The whole run's span and delivered tokens, warmup included, and the measured ok
    /// requests' output tokens (the summary's `tokens.output_total`).
    pub fn run_totals(&self) -> RunTotals {
        let measured = self.output_total.filter(|_| self.counts.ok > 0 && self.output_seen);
        RunTotals { measured_ok_output_tokens: measured, ..self.run }
    }

    pub fn add(&mut self, r: &RequestRecord) {
        self.run.span = Some(match self.run.span {
            None => (r.intended_ms, r.end_ms),
            Some((a, b)) => (a.min(r.intended_ms), b.max(r.end_ms)),
        });
        if r.class == Outcome::Ok {
            add_known(&mut self.run.ok_output_tokens, r.output_tokens);
        }
        let received = match r.class {
            Outcome::Ok => r.output_tokens,
            _ => Some(r.content_events),
        };
        add_known(&mut self.run.received_tokens, received);
        if r.class == Outcome::Cancelled {
            self.run.cancelled += 1;
            let left = r.max_tokens.map(|m| m.saturating_sub(r.content_events));
            add_known(&mut self.run.cancelled_left, left);
        }
        if r.warmup {
            self.counts.warmup += 1;
            return;
        }
        self.counts.total += 1;
        *self.counts.by_class.entry(r.class.to_string()).or_default() += 1;
        self.window_start = Some(self.window_start.map_or(r.intended_ms, |s| s.min(r.intended_ms)));
        self.window_end = Some(self.window_end.map_or(r.end_ms, |e| e.max(r.end_ms)));
        if let Some(sent) = r.sent_ms {
            self.sent += 1;
            self.first_sent = Some(self.first_sent.map_or(sent, |s| s.min(sent)));
            self.last_sent = Some(self.last_sent.map_or(sent, |s| s.max(sent)));
            if let Some(lag) = r.lag_ms() {
                self.lag.record(lag);
            }
        }
        self.count_stream(r);
        self.count_turn(r);
        if r.class == Outcome::Cancelled {
            self.counts.cancelled += 1;
            let c = &mut self.cancellation;
            c.before_first_token += u64::from(r.first_token_ms.is_none());
            c.tokens_received = c.tokens_received.saturating_add(r.content_events);
            self.cancel_after.record(r.end_ms - r.intended_ms);
            return;
        }
        if r.class != Outcome::Ok {
            self.counts.failed += 1;
            return;
        }
        self.counts.ok += 1;
        if let Some(v) = r.ttft_ms() {
            self.ttft.record(v);
        }
        if let Some(v) = r.e2e_ms() {
            self.e2e.record(v);
        }
        if let Some(v) = r.tpot_ms() {
            self.tpot.record(v);
        }
        for &gap in &r.itl_ms {
            self.itl.record(gap);
        }
        if let Some(q) = r.queue_ms {
            self.queue.record(q);
        }
        if r.reasoning_events > 0 {
            if let Some(v) = r.ttfrt_ms() {
                self.ttfrt.record(v);
            }
            if let Some(v) = r.ttfat_ms() {
                self.ttfat.record(v);
            }
            if let Some(v) = r.tpot_reasoning_ms() {
                self.tpot_reasoning.record(v);
            }
            if let Some(v) = r.tpot_answer_ms() {
                self.tpot_answer.record(v);
            }
            add_to(&mut self.tokens.reasoning_total, r.reasoning_events);
            add_to(
                &mut self.tokens.answer_total,
                r.content_events.saturating_sub(r.reasoning_events),
            );
        }
        if let Some(n) = r.input_tokens {
            self.input_len.record(n as f64);
            self.input_seen = true;
            self.input_total = self.checked_sum(self.input_total, n);
        }
        if let Some(n) = r.output_tokens {
            self.output_len.record(n as f64);
            self.output_seen = true;
            self.output_total = self.checked_sum(self.output_total, n);
        }
        if r.rejected_usage.is_some() {
            self.tokens.usage_rejected += 1;
        }
        match r.token_source {
            Some(TokenSource::Usage) => self.tokens.from_usage += 1,
            Some(TokenSource::Chunks) => self.tokens.from_chunks += 1,
            None => {}
        }
        if r.count_mismatch {
            self.tokens.count_mismatches += 1;
        }
        // The usage the server reported: the one used, or the one set aside as contradicting
        // the response (more than max_tokens, say), which is a mismatch too.
        let reported = match (r.token_source, r.output_tokens) {
            (Some(TokenSource::Usage), Some(n)) => Some(n),
            _ => r.rejected_usage,
        };
        if let Some(n) = reported
            && r.content_events >= 2
        {
            add_to(&mut self.tokens.usage_total, n);
            add_to(&mut self.tokens.streamed_total, r.content_events);
        }
        match self.slo.met_by(r) {
            Some(true) => self.slo_met += 1,
            Some(false) => {}
            None => self.slo_unknown = true,
        }
    }

    /// `total + n`, or `None` (counted in `tokens.overflows`) when it does not fit.
    fn checked_sum(&mut self, total: Option<u64>, n: u64) -> Option<u64> {
        let sum = total?.checked_add(n);
        if sum.is_none() {
            self.tokens.overflows += 1;
        }
        sum
    }

    /// A measured request's stream violations and unexpected body, whatever its class.
    fn count_stream(&mut self, r: &RequestRecord) {
        if !r.stream_violations.is_empty() {
            self.counts.stream_violations += 1;
            for (kind, n) in r.stream_violations.kinds() {
                if n > 0 {
                    *self.counts.stream_violation_kinds.entry(kind.to_string()).or_default() += 1;
                }
            }
        }
        if let Some(kind) = r.unexpected_body {
            *self.counts.unexpected_bodies.entry(kind.name().to_string()).or_default() += 1;
        }
    }

    /// Measured requests seen so far, and how many of them were ok.
    pub fn progress(&self) -> (u64, u64) {
        (self.counts.total, self.counts.ok)
    }

    /// A measured request of a session, by its turn.
    fn count_turn(&mut self, r: &RequestRecord) {
        let Some(turn) = r.turn else { return };
        let t = self.turns.entry(turn).or_default();
        t.requests += 1;
        if r.class != Outcome::Ok {
            return;
        }
        t.ok += 1;
        if let Some(v) = r.ttft_ms() {
            t.ttft.record(v);
        }
        if let Some(n) = r.input_tokens {
            t.input_sum += n as f64;
            t.input_n += 1;
        }
    }

    /// The per-turn metrics, by turn.
    fn turn_metrics(&self) -> Vec<TurnMetrics> {
        self.turns
            .iter()
            .map(|(&turn, t)| TurnMetrics {
                turn,
                requests: t.requests,
                ok: t.ok,
                ttft_ms: t.ttft.stats(),
                input_tokens_mean: (t.input_n > 0).then(|| round6(t.input_sum / t.input_n as f64)),
            })
            .collect()
    }

    pub fn finish(&self, requested_rate: Option<f64>) -> RunMetrics {
        let duration_s = match (self.window_start, self.window_end) {
            (Some(s), Some(e)) if e > s => Some((e - s) / 1000.0),
            _ => None,
        };
        let per_s = |n: u64| duration_s.map(|d| round6(n as f64 / d));
        let has_ok = self.counts.ok > 0;
        let input_total = self.input_total.filter(|_| has_ok && self.input_seen);
        let output_total = self.output_total.filter(|_| has_ok && self.output_seen);
        let mut tokens = TokenCounts { input_total, output_total, ..self.tokens.clone() };
        tokens.server_mismatch = match (tokens.usage_total, tokens.streamed_total) {
            (Some(u), Some(s)) if s > 0 => Some(round6((u as f64 - s as f64).abs() / s as f64)),
            _ => None,
        };
        let all_tokens = match (input_total, output_total) {
            (Some(i), Some(o)) => {
                let sum = i.checked_add(o);
                tokens.overflows += u64::from(sum.is_none());
                sum
            }
            _ => None,
        };
        let throughput = Throughput {
            requests_per_s: per_s(self.counts.ok),
            output_tokens_per_s: output_total.and_then(per_s),
            total_tokens_per_s: all_tokens.and_then(per_s),
        };
        let answered = self.counts.total - self.counts.cancelled;
        let goodput = if self.slo.is_empty() || self.slo_unknown || answered == 0 {
            Goodput { slo: self.slo.clone(), ..Goodput::default() }
        } else {
            Goodput {
                slo: self.slo.clone(),
                requests: Some(self.slo_met),
                requests_per_s: per_s(self.slo_met),
                ratio: Some(round6(self.slo_met as f64 / answered as f64)),
                token_ratio: None,
            }
        };
        let mut requests = self.counts.clone();
        if requests.cancelled > 0 {
            requests.cancellation = Some(Cancellation {
                after_ms: self.cancel_after.stats(),
                ..self.cancellation.clone()
            });
        }
        let itl_jitter = match (self.itl.mean(), self.itl.stdev()) {
            (Some(m), Some(s)) if m > 0.0 && self.itl.len() >= 2 => Some(round6(s / m)),
            _ => None,
        };
        let achieved_rate = match (self.first_sent, self.last_sent) {
            (Some(a), Some(b)) if b > a && self.sent >= 2 => {
                Some(round6((self.sent - 1) as f64 / ((b - a) / 1000.0)))
            }
            _ => None,
        };
        RunMetrics {
            requests,
            tokens,
            latency: LatencyMetrics {
                ttft_ms: self.ttft.stats(),
                tpot_ms: self.tpot.stats(),
                itl_ms: self.itl.stats(),
                e2e_ms: self.e2e.stats(),
                itl_jitter,
                queue_ms: self.queue.stats(),
                ttfrt_ms: self.ttfrt.stats(),
                ttfat_ms: self.ttfat.stats(),
                tpot_reasoning_ms: self.tpot_reasoning.stats(),
                tpot_answer_ms: self.tpot_answer.stats(),
            },
            throughput,
            goodput,
            window: Window {
                start_ms: self.window_start,
                end_ms: self.window_end,
                duration_s: duration_s.map(round6),
            },
            schedule: ScheduleStats { lag_ms: self.lag.stats(), requested_rate, achieved_rate },
            turns: self.turn_metrics(),
        }
    }
}

/// The summary's notes on what the server sent: requests that broke the streaming protocol,
/// bodies that were no event stream, usage counts set aside, token sums that overflowed.
pub fn stream_notes(requests: &RequestCounts, tokens: &TokenCounts) -> Vec<String> {
    let kinds = |m: &BTreeMap<String, u64>| {
        m.iter().map(|(k, n)| format!("{k}: {n}")).collect::<Vec<_>>().join(", ")
    };
    let mut notes = Vec::new();
    if requests.stream_violations > 0 {
        notes.push(format!(
            "{} request(s) broke the streaming protocol ({}): counted in each record's \
             stream_violations, not failed; only the content of choice 0 is measured",
            requests.stream_violations,
            kinds(&requests.stream_violation_kinds)
        ));
    }
    let unexpected: u64 = requests.unexpected_bodies.values().sum();
    if unexpected > 0 {
        notes.push(format!(
            "{unexpected} request(s) got a body that is no event stream ({}): classed truncated; \
             a proxy or gateway between the bench and the server is the usual cause",
            kinds(&requests.unexpected_bodies)
        ));
    }
    if tokens.usage_rejected > 0 {
        notes.push(format!(
            "{} request(s) reported a usage.completion_tokens that contradicts the response (more \
             than the request's max_tokens, or more than {} per content event): their output \
             counts are the stream's own, and records keep the reported one as rejected_usage",
            tokens.usage_rejected,
            crate::openai::MAX_TOKENS_PER_EVENT
        ));
    }
    if tokens.overflows > 0 {
        notes.push(format!(
            "{} token sum(s) went past 2^64 - 1: the totals they belong to are blank",
            tokens.overflows
        ));
    }
    notes
}

fn round6(v: f64) -> f64 {
    (v * 1e6).round() / 1e6
}

/// Add `n` to a sum that is blank until its first term.
fn add_to(sum: &mut Option<u64>, n: u64) {
    *sum = Some(sum.unwrap_or(0).saturating_add(n));
}

/// Add a term to a sum of known terms: an unknown term, or one past the largest count, leaves
/// the sum unknown for good.
fn add_known(sum: &mut Option<u64>, n: Option<u64>) {
    *sum = sum.zip(n).and_then(|(t, n)| t.checked_add(n));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok_record(id: u64, intended: f64, first: f64, gaps: &[f64], n: u64) -> RequestRecord {
        let r = RequestRecord::ok(id, intended, first, gaps.to_vec());
        RequestRecord {
            sent_ms: Some(intended + 0.1),
            end_ms: r.last_token_ms.unwrap() + 0.5,
            input_tokens: Some(10),
            output_tokens: Some(n),
            token_source: Some(TokenSource::Usage),
            finish_reason: Some("length".into()),
            ..r
        }
    }

    #[test]
    fn the_run_totals_count_every_received_token_once_and_what_cancelled_requests_had_left() {
        let mut acc = MetricsAccumulator::new(Slo::default());
        acc.add(&ok_record(0, 0.0, 5.0, &[1.0, 1.0], 3));
        // Cancelled after 4 events, the first 2 of them reasoning, of the 10 it asked for.
        let cancelled = RequestRecord {
            class: Outcome::Cancelled,
            output_tokens: None,
            content_events: 4,
            reasoning_events: 2,
            max_tokens: Some(10),
            ..ok_record(1, 1.0, 6.0, &[1.0, 1.0, 1.0], 4)
        };
        acc.add(&cancelled);
        let run = acc.run_totals();
        assert_eq!((run.received_tokens, run.cancelled, run.cancelled_left), (Some(7), 1, Some(6)));
        // A cancelled record without its max_tokens leaves what was left unknown.
        acc.add(&RequestRecord { max_tokens: None, ..cancelled });
        let run = acc.run_totals();
        assert_eq!((run.received_tokens, run.cancelled, run.cancelled_left), (Some(11), 2, None));
    }

    #[test]
    fn exact_moments_and_percentiles() {
        let mut h = LatencyHist::new();
        for v in 1..=1000 {
            h.record(v as f64);
        }
        let s = h.stats().unwrap();
        assert_eq!(s.count, 1000);
        assert!((s.mean - 500.5).abs() < 1e-9);
        let exact_sd = ((1000.0f64 * 1000.0 - 1.0) / 12.0).sqrt();
        assert!((s.stdev - exact_sd).abs() < 1e-3, "{}", s.stdev);
        assert!((s.p50 - 500.0).abs() <= 0.5, "{}", s.p50);
        assert!((s.p99 - 990.0).abs() <= 1.0, "{}", s.p99);
        assert_eq!(s.min, 1.0);
        assert_eq!(s.max, 1000.0);
        assert!(LatencyHist::new().stats().is_none());
    }

    #[test]
    fn failures_and_warmup_stay_out_of_latency() {
        let mut acc = MetricsAccumulator::new(Slo { ttft_ms: Some(60.0), ..Slo::default() });
        acc.add(&ok_record(0, 0.0, 50.0, &[10.0, 10.0, 10.0], 4));
        acc.add(&ok_record(1, 0.0, 70.0, &[10.0], 2));
        let mut bad = ok_record(2, 0.0, 1.0, &[1.0], 2);
        bad.class = Outcome::Http(500);
        acc.add(&bad);
        let mut warm = ok_record(3, 0.0, 5000.0, &[1000.0], 2);
        warm.warmup = true;
        acc.add(&warm);
        let m = acc.finish(None);
        assert_eq!(m.requests.total, 3);
        assert_eq!(m.requests.ok, 2);
        assert_eq!(m.requests.failed, 1);
        assert_eq!(m.requests.warmup, 1);
        assert_eq!(m.requests.by_class["http_500"], 1);
        let ttft = m.latency.ttft_ms.unwrap();
        assert_eq!(ttft.count, 2);
        assert_eq!(ttft.min, 50.0);
        assert_eq!(ttft.max, 70.0);
        let tpot = m.latency.tpot_ms.unwrap();
        assert_eq!(tpot.count, 2);
        assert!((tpot.mean - 10.0).abs() < 1e-9);
        assert_eq!(m.latency.itl_ms.unwrap().count, 4);
        assert_eq!(m.latency.itl_jitter, Some(0.0));
        // One of three measured requests met the TTFT objective.
        assert_eq!(m.goodput.requests, Some(1));
        assert!((m.goodput.ratio.unwrap() - 1.0 / 3.0).abs() < 1e-6);
        assert_eq!(m.tokens.output_total, Some(6));
    }

    #[test]
    fn token_sums_that_overflow_are_counted_and_blank_never_wrapped() {
        let mut acc = MetricsAccumulator::new(Slo::default());
        acc.add(&ok_record(0, 0.0, 50.0, &[10.0], u64::MAX - 1));
        let m = acc.finish(None);
        assert_eq!((m.tokens.output_total, m.tokens.overflows), (Some(u64::MAX - 1), 1));
        assert_eq!(m.throughput.total_tokens_per_s, None, "output + input overflowed");
        acc.add(&ok_record(1, 0.0, 50.0, &[10.0], 2));
        let m = acc.finish(None);
        assert_eq!(m.tokens.output_total, None);
        assert_eq!(m.throughput.output_tokens_per_s, None);
        assert_eq!(m.tokens.overflows, 1, "the output sum overflowed once; no total sum was made");
        assert_eq!(acc.run_totals().ok_output_tokens, None);
        let notes = stream_notes(&m.requests, &m.tokens);
        assert_eq!(
            notes,
            vec!["1 token sum(s) went past 2^64 - 1: the totals they belong to are blank"]
        );
    }

    #[test]
    fn stream_violations_unexpected_bodies_and_rejected_usage_are_counted_per_request() {
        let mut acc = MetricsAccumulator::new(Slo::default());
        let mut r = ok_record(0, 0.0, 50.0, &[10.0], 2);
        r.stream_violations.content_after_finish = 3;
        r.stream_violations.interleaved_choices = 1;
        r.rejected_usage = Some(u64::MAX);
        acc.add(&r);
        let mut failed = ok_record(1, 0.0, 50.0, &[10.0], 2);
        failed.class = Outcome::Truncated;
        failed.stream_violations.interleaved_choices = 2;
        failed.unexpected_body = Some(crate::record::UnexpectedBody::Html);
        acc.add(&failed);
        acc.add(&ok_record(2, 0.0, 50.0, &[10.0], 2));
        let m = acc.finish(None);
        assert_eq!(m.requests.stream_violations, 2);
        let kinds: Vec<_> = m.requests.stream_violation_kinds.iter().collect();
        assert_eq!(
            kinds,
            vec![
                (&"content_after_finish".to_string(), &1),
                (&"interleaved_choices".to_string(), &2)
            ]
        );
        assert_eq!(m.requests.unexpected_bodies.get("html"), Some(&1));
        assert_eq!((m.tokens.usage_rejected, m.tokens.output_total), (1, Some(4)));
        let notes = stream_notes(&m.requests, &m.tokens);
        assert_eq!(notes.len(), 3, "{notes:?}");
        assert!(notes[0].starts_with("2 request(s) broke the streaming protocol (content_after_finish: 1, interleaved_choices: 2)"), "{}", notes[0]);
        assert!(
            notes[1].starts_with("1 request(s) got a body that is no event stream (html: 1)"),
            "{}",
            notes[1]
        );
        assert!(
            notes[2].starts_with("1 request(s) reported a usage.completion_tokens"),
            "{}",
            notes[2]
        );
        assert!(stream_notes(&RequestCounts::default(), &TokenCounts::default()).is_empty());
    }

    #[test]
    fn nothing_measured_stays_blank() {
        let acc = MetricsAccumulator::new(Slo::default());
        let m = acc.finish(Some(10.0));
        assert!(m.latency.ttft_ms.is_none());
        assert!(m.throughput.requests_per_s.is_none());
        assert!(m.goodput.ratio.is_none());
        assert!(m.tokens.output_total.is_none());
        assert_eq!(m.schedule.requested_rate, Some(10.0));
    }
}
