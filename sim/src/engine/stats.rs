//! The engine's counters and histograms, and their Prometheus text rendering.
//!
//! Names follow vLLM's where vLLM has the metric; the simulator's own are `infergate_sim:*`.
//! Counters only increase.

use infergate_model::engine_series::{infergate_sim, vllm};
use std::fmt::Write as _;

/// A Prometheus histogram with fixed upper bounds (the last bucket is +Inf).
#[derive(Clone, Debug, PartialEq)]
pub struct Histogram {
    bounds: &'static [f64],
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    pub fn new(bounds: &'static [f64]) -> Histogram {
        Histogram { bounds, counts: vec![0; bounds.len() + 1], sum: 0.0, count: 0 }
    }

    #[inline]
    pub fn observe(&mut self, v: f64) {
        let i = self.bounds.partition_point(|&b| b < v);
        self.counts[i] += 1;
        self.sum += v;
        self.count += 1;
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn sum(&self) -> f64 {
        self.sum
    }

    /// Cumulative `(upper bound, count)` pairs, ending with `(+Inf, count)`.
    pub fn cumulative(&self) -> impl Iterator<Item = (f64, u64)> + '_ {
        let mut acc = 0;
        self.bounds.iter().copied().chain(std::iter::once(f64::INFINITY)).zip(&self.counts).map(
            move |(b, c)| {
                acc += c;
                (b, acc)
            },
        )
    }
}

/// vLLM's buckets.
pub(crate) const TTFT_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
];
pub(crate) const ITL_BUCKETS: &[f64] = &[
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
    40.0, 80.0,
];
pub(crate) const REQUEST_BUCKETS: &[f64] = &[
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
    480.0, 960.0, 1920.0, 7680.0,
];
pub(crate) const TOKEN_COUNT_BUCKETS: &[f64] = &[
    1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0, 5000.0, 10000.0, 20000.0,
    50000.0, 100000.0,
];
pub(crate) const ITERATION_TOKEN_BUCKETS: &[f64] =
    &[1.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0, 16384.0];

/// Everything the engine counts. Times are nanoseconds of engine time.
#[derive(Clone, Debug, PartialEq)]
pub struct EngineStats {
    /// Prompt tokens of requests whose prefill completed (vLLM counts them at the first token).
    pub prompt_tokens: u64,
    /// Output tokens the engine generated (delivered or not).
    pub generation_tokens: u64,
    pub preemptions: u64,
    pub finished_stop: u64,
    pub finished_length: u64,
    /// Requests freed because their client disconnected.
    pub cancelled: u64,
    /// Requests refused at admission (too long for max_model_len).
    pub rejected: u64,
    /// Requests the engine failed after admission (their batch ran out of memory).
    pub failed_requests: u64,
    /// Batches formed by a batch-forming strategy (serial, fixed, token_budget).
    pub batches: u64,
    /// Batches that needed more KV cache than the device holds.
    pub oom_batches: u64,
    /// Output tokens computed after the client had gone and never delivered.
    pub wasted_tokens: u64,
    /// Prompt tokens prefilled (not found in the prefix cache) for requests whose client went
    /// away before their first token was sampled.
    pub wasted_prefill_tokens: u64,
    /// Requests whose client went away before they ended, and the time those kept their slot
    /// and KV blocks after it (until freed at a step, or until their end), ns.
    pub abandoned: u64,
    pub abandoned_hold_ns: u64,
    /// Tokens computed again after a preemption.
    pub recomputed_tokens: u64,
    pub prefix_cache_queries: u64,
    pub prefix_cache_hits: u64,
    /// Tokens computed as prompt (prefill, including recomputation) and as decode.
    pub prefill_tokens_computed: u64,
    pub decode_tokens_computed: u64,
    pub steps: u64,
    pub forward_ns: u64,
    pub interval_ns: u64,
    pub step_ns: u64,
    pub ttft: Histogram,
    pub itl: Histogram,
    /// Per finished request of more than one token: its decode time over its tokens after the
    /// first (vLLM's `request_time_per_output_token_seconds`, the bench's TPOT).
    pub tpot: Histogram,
    pub e2e: Histogram,
    pub queue: Histogram,
    pub prefill_time: Histogram,
    pub decode_time: Histogram,
    pub request_prompt_tokens: Histogram,
    pub request_generation_tokens: Histogram,
    pub iteration_tokens: Histogram,
}

impl Default for EngineStats {
    fn default() -> Self {
        EngineStats {
            prompt_tokens: 0,
            generation_tokens: 0,
            preemptions: 0,
            finished_stop: 0,
            finished_length: 0,
            cancelled: 0,
            rejected: 0,
            failed_requests: 0,
            batches: 0,
            oom_batches: 0,
            wasted_tokens: 0,
            wasted_prefill_tokens: 0,
            abandoned: 0,
            abandoned_hold_ns: 0,
            recomputed_tokens: 0,
            prefix_cache_queries: 0,
            prefix_cache_hits: 0,
            prefill_tokens_computed: 0,
            decode_tokens_computed: 0,
            steps: 0,
            forward_ns: 0,
            interval_ns: 0,
            step_ns: 0,
            ttft: Histogram::new(TTFT_BUCKETS),
            itl: Histogram::new(ITL_BUCKETS),
            tpot: Histogram::new(ITL_BUCKETS),
            e2e: Histogram::new(REQUEST_BUCKETS),
            queue: Histogram::new(REQUEST_BUCKETS),
            prefill_time: Histogram::new(REQUEST_BUCKETS),
            decode_time: Histogram::new(REQUEST_BUCKETS),
            request_prompt_tokens: Histogram::new(TOKEN_COUNT_BUCKETS),
            request_generation_tokens: Histogram::new(TOKEN_COUNT_BUCKETS),
            iteration_tokens: Histogram::new(ITERATION_TOKEN_BUCKETS),
        }
    }
}

/// Point-in-time values rendered as gauges.
#[derive(Clone, Debug, PartialEq)]
pub struct Gauges {
    pub running: usize,
    pub waiting: usize,
    pub kv_blocks_total: u32,
    pub kv_blocks_used: u32,
    pub kv_blocks_cached: usize,
    /// Share of the allocated KV slots (blocks in use x block size) not holding a token.
    pub kv_fragmentation: f64,
}

impl Gauges {
    pub(crate) fn kv_usage(&self) -> f64 {
        if self.kv_blocks_total == 0 {
            0.0
        } else {
            self.kv_blocks_used as f64 / self.kv_blocks_total as f64
        }
    }
}

/// Static labels of `vllm:cache_config_info`.
pub(crate) struct CacheInfo<'a> {
    pub block_size: u32,
    pub num_gpu_blocks: u32,
    pub enable_prefix_caching: bool,
    pub gpu_memory_utilization: f64,
    pub model_name: &'a str,
    /// The batching strategy (`[batch] strategy`).
    pub strategy: &'a str,
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

struct Out<'a> {
    out: &'a mut String,
    label: String,
}

impl Out<'_> {
    fn header(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    fn value(&mut self, name: &str, extra: &str, v: f64) {
        let _ = writeln!(self.out, "{name}{{{}{extra}}} {v}", self.label);
    }

    fn gauge(&mut self, name: &str, help: &str, v: f64) {
        self.header(name, "gauge", help);
        self.value(name, "", v);
    }

    fn counter(&mut self, name: &str, help: &str, v: f64) {
        self.header(name, "counter", help);
        self.value(name, "", v);
    }

    fn histogram(&mut self, name: &str, help: &str, h: &Histogram) {
        self.header(name, "histogram", help);
        for (le, c) in h.cumulative() {
            let le = if le.is_infinite() { "+Inf".to_string() } else { le.to_string() };
            let _ = writeln!(self.out, "{name}_bucket{{{},le=\"{le}\"}} {c}", self.label);
        }
        let _ = writeln!(self.out, "{name}_sum{{{}}} {}", self.label, h.sum());
        let _ = writeln!(self.out, "{name}_count{{{}}} {}", self.label, h.count());
    }
}

const NS: f64 = 1e9;

/// Append the engine's metrics in Prometheus text format.
pub fn render(out: &mut String, s: &EngineStats, g: &Gauges, info: &CacheInfo<'_>) {
    let mut o = Out { out, label: format!("model_name=\"{}\"", escape(info.model_name)) };
    o.gauge(
        vllm::NUM_REQUESTS_RUNNING,
        "Number of requests in model execution batches.",
        g.running as f64,
    );
    o.gauge(
        vllm::NUM_REQUESTS_WAITING,
        "Number of requests waiting to be processed.",
        g.waiting as f64,
    );
    o.gauge(vllm::KV_CACHE_USAGE_PERC, "KV-cache usage. 1 means 100 percent usage.", g.kv_usage());
    o.header(vllm::CACHE_CONFIG_INFO, "gauge", "Information of the KV cache configuration.");
    o.value(
        vllm::CACHE_CONFIG_INFO,
        &format!(
            ",block_size=\"{}\",num_gpu_blocks=\"{}\",enable_prefix_caching=\"{}\",gpu_memory_utilization=\"{}\"",
            info.block_size, info.num_gpu_blocks, info.enable_prefix_caching, info.gpu_memory_utilization
        ),
        1.0,
    );
    o.counter(
        vllm::NUM_PREEMPTIONS_TOTAL,
        "Cumulative number of preemptions from the engine.",
        s.preemptions as f64,
    );
    o.counter(
        vllm::PROMPT_TOKENS_TOTAL,
        "Number of prefill tokens processed.",
        s.prompt_tokens as f64,
    );
    o.counter(
        vllm::GENERATION_TOKENS_TOTAL,
        "Number of generation tokens processed.",
        s.generation_tokens as f64,
    );
    o.header(
        vllm::REQUEST_SUCCESS_TOTAL,
        "counter",
        "Count of finished requests, by finish reason.",
    );
    for (reason, v) in
        [("stop", s.finished_stop), ("length", s.finished_length), ("abort", s.cancelled)]
    {
        o.value(vllm::REQUEST_SUCCESS_TOTAL, &format!(",finished_reason=\"{reason}\""), v as f64);
    }
    o.counter(
        vllm::PREFIX_CACHE_QUERIES_TOTAL,
        "Prefix cache queries, in terms of number of queried tokens.",
        s.prefix_cache_queries as f64,
    );
    o.counter(
        vllm::PREFIX_CACHE_HITS_TOTAL,
        "Prefix cache hits, in terms of number of cached tokens.",
        s.prefix_cache_hits as f64,
    );
    o.histogram(
        vllm::TIME_TO_FIRST_TOKEN_SECONDS,
        "Histogram of time to first token in seconds.",
        &s.ttft,
    );
    o.histogram(
        vllm::INTER_TOKEN_LATENCY_SECONDS,
        "Histogram of inter-token latency in seconds.",
        &s.itl,
    );
    o.histogram(
        vllm::REQUEST_TIME_PER_OUTPUT_TOKEN_SECONDS,
        "Histogram of time_per_output_token_seconds per request.",
        &s.tpot,
    );
    o.histogram(
        vllm::E2E_REQUEST_LATENCY_SECONDS,
        "Histogram of e2e request latency in seconds.",
        &s.e2e,
    );
    o.histogram(
        vllm::REQUEST_QUEUE_TIME_SECONDS,
        "Histogram of time spent in WAITING phase for request.",
        &s.queue,
    );
    o.histogram(
        vllm::REQUEST_PREFILL_TIME_SECONDS,
        "Histogram of time spent in PREFILL phase for request.",
        &s.prefill_time,
    );
    o.histogram(
        vllm::REQUEST_DECODE_TIME_SECONDS,
        "Histogram of time spent in DECODE phase for request.",
        &s.decode_time,
    );
    o.histogram(
        vllm::REQUEST_PROMPT_TOKENS,
        "Number of prefill tokens processed.",
        &s.request_prompt_tokens,
    );
    o.histogram(
        vllm::REQUEST_GENERATION_TOKENS,
        "Number of generation tokens processed.",
        &s.request_generation_tokens,
    );
    o.histogram(
        vllm::ITERATION_TOKENS_TOTAL,
        "Histogram of number of tokens per engine_step.",
        &s.iteration_tokens,
    );
    o.gauge(
        infergate_sim::KV_FRAGMENTATION_RATIO,
        "Share of allocated KV cache slots (blocks in use x block_size) not holding a token.",
        g.kv_fragmentation,
    );
    o.gauge(
        infergate_sim::KV_BLOCKS_TOTAL,
        "KV cache blocks of the device budget.",
        g.kv_blocks_total as f64,
    );
    o.gauge(
        infergate_sim::KV_BLOCKS_IN_USE,
        "KV cache blocks held by requests.",
        g.kv_blocks_used as f64,
    );
    o.gauge(
        infergate_sim::KV_BLOCKS_CACHED,
        "KV cache blocks whose content prefix caching can reuse.",
        g.kv_blocks_cached as f64,
    );
    o.counter(
        infergate_sim::WASTED_TOKENS_TOTAL,
        "Output tokens computed for requests whose client had disconnected, never delivered.",
        s.wasted_tokens as f64,
    );
    o.counter(
        infergate_sim::WASTED_PREFILL_TOKENS_TOTAL,
        "Prompt tokens prefilled for requests whose client disconnected before their first token.",
        s.wasted_prefill_tokens as f64,
    );
    o.counter(
        infergate_sim::ABANDONED_REQUESTS_TOTAL,
        "Requests whose client disconnected before they ended.",
        s.abandoned as f64,
    );
    o.counter(
        infergate_sim::ABANDONED_HOLD_SECONDS_TOTAL,
        "Seconds the requests whose client disconnected kept their slot and KV blocks after it.",
        s.abandoned_hold_ns as f64 / 1e9,
    );
    o.counter(
        infergate_sim::CANCELLED_REQUESTS_TOTAL,
        "Requests freed because their client disconnected.",
        s.cancelled as f64,
    );
    o.counter(
        infergate_sim::REJECTED_REQUESTS_TOTAL,
        "Requests refused at admission (longer than max_model_len).",
        s.rejected as f64,
    );
    o.counter(
        infergate_sim::FAILED_REQUESTS_TOTAL,
        "Requests the engine failed after admission (their batch ran out of KV cache memory).",
        s.failed_requests as f64,
    );
    o.counter(
        infergate_sim::OOM_BATCHES_TOTAL,
        "Batches that needed more KV cache than the device holds (their requests failed).",
        s.oom_batches as f64,
    );
    o.counter(
        infergate_sim::BATCHES_TOTAL,
        "Batches formed by a batch-forming strategy (0 under continuous batching).",
        s.batches as f64,
    );
    o.header(
        infergate_sim::BATCH_STRATEGY_INFO,
        "gauge",
        "The batching strategy ([batch] strategy in the engine config).",
    );
    o.value(
        infergate_sim::BATCH_STRATEGY_INFO,
        &format!(",strategy=\"{}\"", escape(info.strategy)),
        1.0,
    );
    o.counter(
        infergate_sim::RECOMPUTED_TOKENS_TOTAL,
        "Tokens computed again after a preemption (recompute mode).",
        s.recomputed_tokens as f64,
    );
    o.counter(
        infergate_sim::COMPUTED_TOKENS_TOTAL,
        "Tokens run through the model: prefill (including recomputation) and decode.",
        (s.prefill_tokens_computed + s.decode_tokens_computed) as f64,
    );
    o.counter(infergate_sim::STEPS_TOTAL, "Engine steps run.", s.steps as f64);
    o.counter(
        infergate_sim::FORWARD_SECONDS_TOTAL,
        "Modelled GPU forward-pass time (busy time of the device).",
        s.forward_ns as f64 / NS,
    );
    o.counter(
        infergate_sim::TOKEN_INTERVAL_SECONDS_TOTAL,
        "Modelled CPU token-interval time (scheduling, detokenization, streaming).",
        s.interval_ns as f64 / NS,
    );
    o.counter(
        infergate_sim::STEP_SECONDS_TOTAL,
        "Wall time of all steps; forward / step = GPU utilisation while busy.",
        s.step_ns as f64 / NS,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative_and_inclusive() {
        let mut h = Histogram::new(&[1.0, 2.0]);
        for v in [0.5, 1.0, 1.5, 3.0] {
            h.observe(v);
        }
        let c: Vec<_> = h.cumulative().collect();
        assert_eq!(c, vec![(1.0, 2), (2.0, 3), (f64::INFINITY, 4)]);
        assert_eq!((h.count(), h.sum()), (4, 6.0));
    }
}
