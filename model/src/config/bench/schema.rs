//! The options of `configs/bench.toml`: the file's shape, every section a profile may set
//! and its defaults (unknown keys refused).

use super::*;

/// The parsed `configs/bench.toml`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BenchFile {
    #[serde(default)]
    pub targets: BTreeMap<String, Target>,
    #[serde(default)]
    pub profile: BTreeMap<String, Profile>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MaxTokensField {
    /// `max_tokens`, switching to `max_completion_tokens` if the server rejects it.
    #[default]
    Auto,
    MaxTokens,
    MaxCompletionTokens,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Endpoint {
    /// `/v1/chat/completions`
    #[default]
    Chat,
    /// `/v1/completions`
    Completions,
}

impl Endpoint {
    pub fn path(self) -> &'static str {
        match self {
            Endpoint::Chat => "chat/completions",
            Endpoint::Completions => "completions",
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Endpoint::Chat => "chat",
            Endpoint::Completions => "completions",
        }
    }
}

/// A bench profile: everything that defines one measurement.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Profile {
    /// Parent profile this one layers over (`default` when absent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inherits: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Name of a `[targets.*]` entry; absent = the embedded engine simulator.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    pub endpoint: Endpoint,
    pub stream: bool,
    /// Overrides the target's model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub load: LoadConfig,
    pub workload: WorkloadConfig,
    pub slo: Slo,
    pub client: ClientConfig,
    pub sim: SimConfig,
    /// Scraping the target's Prometheus metrics (and `nvidia-smi`) during the run.
    pub scrape: ScrapeConfig,
    /// Requests cancelled on purpose (`[profile.*.cancel]`; none by default).
    #[serde(skip_serializing_if = "crate::config::CancelConfig::is_default")]
    pub cancel: crate::config::CancelConfig,
    /// The plateau and the over-saturation stop (`[profile.*.steady]`; docs/metrics.md).
    #[serde(skip_serializing_if = "crate::config::SteadyConfig::is_default")]
    pub steady: crate::config::SteadyConfig,
    /// Trials `cargo xtask bench` measures the profile (`--trials`): a trial set of this many
    /// runs ([`crate::trials`]); absent = one run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trials: Option<u32>,
    /// Seconds waited between two trials (`--cooldown`); absent = 0.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cooldown_s: Option<f64>,
}

impl Default for Profile {
    fn default() -> Self {
        Profile {
            inherits: None,
            description: None,
            target: None,
            endpoint: Endpoint::Chat,
            stream: true,
            model: None,
            load: LoadConfig::default(),
            workload: WorkloadConfig::default(),
            slo: Slo::default(),
            client: ClientConfig::default(),
            sim: SimConfig::default(),
            scrape: ScrapeConfig::default(),
            cancel: crate::config::CancelConfig::default(),
            steady: crate::config::SteadyConfig::default(),
            trials: None,
            cooldown_s: None,
        }
    }
}

/// `[profile.*.scrape]`: server-side metrics collected during a run (see `server_metrics`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ScrapeConfig {
    /// Scrape the target's `/metrics` (its `metrics_url`) during the run.
    pub enabled: bool,
    /// Seconds between scrapes.
    pub interval_s: f64,
    /// Sample `nvidia-smi` at the same interval when the command exists (real targets only).
    pub gpu: bool,
}

impl Default for ScrapeConfig {
    fn default() -> Self {
        ScrapeConfig { enabled: true, interval_s: 1.0, gpu: true }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LoadMode {
    /// `concurrency` workers, each sending its next request when the previous one finishes.
    #[default]
    Closed,
    /// Requests sent on a schedule at `rate` per second, whether or not earlier ones finished.
    Open,
    /// Requests sent when a trace (`workload.trace`) says, whether or not earlier ones finished.
    Trace,
}

/// The format of a conversation dataset (`workload.conversation_format`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConversationFormat {
    /// Each record by its key: `conversations` is ShareGPT, `messages` is OpenAI.
    #[default]
    Auto,
    /// `{"conversations": [{"from": "human" | "gpt" | "system", "value": "..."}]}`.
    Sharegpt,
    /// `{"messages": [{"role": "system" | "user" | "assistant", "content": "..."}]}`.
    Openai,
}

/// What a run makes of a conversation dataset (`workload.conversation_turns`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnMode {
    /// Each conversation is a session: its user turns in order, each sent with the history.
    #[default]
    Sessions,
    /// Each conversation's first user turn (after its system messages) as a single request.
    First,
}

/// The format of `workload.trace`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TraceFormat {
    /// By the file: `.csv` is BurstGPT; JSONL with `input_length` is Mooncake, else infergate's.
    #[default]
    Auto,
    /// JSONL: `timestamp` (ms), `input_length`, `output_length`, `hash_ids`.
    Mooncake,
    /// CSV with a header: `Timestamp` (s), `Request tokens`, `Response tokens`, ...
    Burstgpt,
    /// JSONL: `timestamp_ms`, `input_tokens`, `output_tokens`, optional `hash_ids`.
    Infergate,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Arrival {
    /// Exponential inter-arrival times (a Poisson process).
    #[default]
    Poisson,
    /// Gamma inter-arrival times with shape `burstiness` (1 = Poisson, < 1 burstier).
    Gamma,
    /// Evenly spaced.
    Constant,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LoadConfig {
    pub mode: LoadMode,
    /// Closed loop: number of concurrent workers.
    pub concurrency: u32,
    /// Open loop: requests per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    pub arrival: Arrival,
    /// Gamma shape for `arrival = "gamma"`.
    pub burstiness: f64,
    /// Open loop: at most this many requests in flight (later ones wait, and the wait counts).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_concurrency: Option<u32>,
    /// Measured requests to send (default: the workload's size).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requests: Option<u64>,
    /// Stop scheduling measured requests after this many seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_s: Option<f64>,
    /// Requests sent before the measured ones and excluded from metrics.
    pub warmup_requests: u64,
    /// Seconds of load before the measured window (requests intended earlier are warmup).
    pub warmup_s: f64,
    /// Trial sets: whole trials measured before trial 1 (an engine's cold start), written as
    /// `warmup-NN/` and never part of an estimate (`--warmup-trials`).
    #[serde(skip_serializing_if = "is_zero_u32")]
    pub warmup_trials: u32,
    /// Trace replay: intended send time = timestamp x `time_scale` (0.5 replays twice as fast).
    pub time_scale: f64,
    /// Trace replay: skip the records arriving in the first `trace_start_s` seconds.
    pub trace_start_s: f64,
    /// Trace replay: replay only the records of this many seconds (trace time) from the start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace_duration_s: Option<f64>,
    /// Trace replay: at most this many requests per second (later sends are delayed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_rate: Option<f64>,
}

impl Default for LoadConfig {
    fn default() -> Self {
        LoadConfig {
            mode: LoadMode::Closed,
            concurrency: 16,
            rate: None,
            arrival: Arrival::Poisson,
            burstiness: 1.0,
            max_concurrency: None,
            requests: None,
            duration_s: None,
            warmup_requests: 0,
            warmup_s: 0.0,
            warmup_trials: 0,
            time_scale: 1.0,
            trace_start_s: 0.0,
            trace_duration_s: None,
            max_rate: None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WorkloadConfig {
    /// Prompt lengths in tokens of the target (see the README on how they are counted).
    pub input_lengths: Vec<u32>,
    /// Each length this many times.
    pub repeats: u32,
    /// Output tokens requested per request.
    pub max_tokens: u32,
    /// Ask the server to ignore end-of-sequence so every request produces `max_tokens`.
    pub ignore_eos: bool,
    pub temperature: f64,
    pub top_p: f64,
    /// Seeds prompt text, request order and the `seed` sampling parameter.
    pub seed: u64,
    /// A JSONL file of requests instead of synthetic prompts (see the README).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dataset: Option<String>,
    /// Tokens of a prefix shared by every synthetic prompt (exercises prefix caching).
    pub shared_prefix_tokens: u32,
    /// Shuffle the request order (deterministically, by `seed`).
    pub shuffle: bool,
    /// Prompt lengths drawn from a distribution instead of `input_lengths` (`samples` items).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_distribution: Option<crate::config::LengthDist>,
    /// Output lengths (each item's `max_tokens`) drawn from a distribution.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_distribution: Option<crate::config::LengthDist>,
    /// Items of a workload whose prompt lengths come from `input_distribution`.
    pub samples: u32,
    /// A request trace to replay (`load.mode = "trace"`), relative to the repository root.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
    pub trace_format: TraceFormat,
    /// Tokens per hash block of the trace (Mooncake: 512).
    pub trace_block_tokens: u32,
    /// A conversation dataset (ShareGPT or OpenAI `messages`), relative to the repository root
    /// (docs/workloads.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conversations: Option<String>,
    /// (Defaults are not written, so resolved profiles of other workloads read as before.)
    #[serde(skip_serializing_if = "is_default")]
    pub conversation_format: ConversationFormat,
    /// Every turn of each conversation as a session, or its first turn only.
    #[serde(skip_serializing_if = "is_default")]
    pub conversation_turns: TurnMode,
    /// Each turn's `max_tokens` is the length of the answer the dataset recorded for it.
    #[serde(skip_serializing_if = "is_default")]
    pub max_tokens_from_answer: bool,
    /// Milliseconds between a session turn's answer and its next turn (a length distribution
    /// whose values are milliseconds); none: the next turn is sent at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub think_time_ms: Option<crate::config::LengthDist>,
}

impl Default for WorkloadConfig {
    fn default() -> Self {
        WorkloadConfig {
            input_lengths: vec![128, 256, 512, 1024],
            repeats: 20,
            max_tokens: 128,
            ignore_eos: true,
            temperature: 0.0,
            top_p: 1.0,
            seed: 42,
            dataset: None,
            shared_prefix_tokens: 0,
            shuffle: true,
            input_distribution: None,
            output_distribution: None,
            samples: 100,
            trace: None,
            trace_format: TraceFormat::Auto,
            trace_block_tokens: 512,
            conversations: None,
            conversation_format: ConversationFormat::Auto,
            conversation_turns: TurnMode::Sessions,
            max_tokens_from_answer: false,
            think_time_ms: None,
        }
    }
}

pub(super) fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

impl WorkloadConfig {
    /// The files the workload reads, each with the key that names it (`workload.trace`), as the
    /// profile writes them (relative to the repository root).
    pub fn files(&self) -> Vec<(&'static str, &str)> {
        let mut out = Vec::new();
        for (key, file) in [
            ("workload.dataset", &self.dataset),
            ("workload.trace", &self.trace),
            ("workload.conversations", &self.conversations),
        ] {
            if let Some(f) = file {
                out.push((key, f.as_str()));
            }
        }
        for (key, dist) in [
            ("workload.input_distribution.file", &self.input_distribution),
            ("workload.output_distribution.file", &self.output_distribution),
            ("workload.think_time_ms.file", &self.think_time_ms),
        ] {
            if let Some(f) = dist.as_ref().and_then(|d| d.file()) {
                out.push((key, f));
            }
        }
        out
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProxyMode {
    /// Ignore proxy variables for loopback targets, honour them otherwise (with a warning).
    #[default]
    Auto,
    /// Honour HTTP_PROXY / HTTPS_PROXY / ALL_PROXY / NO_PROXY.
    Env,
    /// Connect directly.
    None,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClientConfig {
    /// A request running longer than this ends as `timeout`.
    pub request_timeout_s: f64,
    /// A stream that delivers no bytes for this long ends as `timeout`.
    pub stall_timeout_s: f64,
    /// After Ctrl-C, in-flight requests get this long to finish before they are `cancelled`.
    pub grace_s: f64,
    pub proxy: ProxyMode,
    /// The longest SSE line (and the most `data:` of one event) kept, in KiB: a stream that
    /// sends more ends as `malformed`, so a hostile or broken server cannot grow the bench's
    /// memory without bound.
    pub max_event_kib: u64,
    /// Follow a redirect to another host (scheme, host or port) than the target's. Off: such an
    /// answer is refused in preflight and counted as its `http_3xx` class in a run, so requests
    /// never measure a server other than the one the summary names.
    pub cross_host_redirects: bool,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            request_timeout_s: 600.0,
            stall_timeout_s: 60.0,
            grace_s: 10.0,
            proxy: ProxyMode::Auto,
            max_event_kib: 1024,
            cross_host_redirects: false,
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SimMode {
    /// Fixed TTFT, inter-token gap and output length: a known-answer oracle.
    Timing,
    /// The continuous-batching engine model driven by the engine config.
    #[default]
    Engine,
}

/// The largest `sim.slowdown`.
pub(crate) const MAX_SLOWDOWN: f64 = 100.0;

/// The embedded engine simulator used when a profile names no target.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SimConfig {
    pub mode: SimMode,
    /// Engine-parameter file for `mode = "engine"`.
    pub engine_config: String,
    /// How usage is reported in streams (when the request asks for it).
    pub usage: UsageMode,
    /// Share of structured-output answers that come back corrupted (0..=1).
    pub corruption_rate: f64,
    /// Relative perturbation of every log-prob (simulates a lower-precision engine).
    pub logprob_drift: f64,
    /// Engine mode: append every scheduling decision to `scheduler_decisions.jsonl` in the run
    /// directory (a run artifact, not an inference parameter).
    pub save_scheduler_decision: bool,
    pub timing: TimingConfig,
    pub faults: FaultConfig,
    /// Engine mode: the seeded noise model (`[sim.noise]`; off by default).
    #[serde(skip_serializing_if = "crate::config::NoiseConfig::is_default")]
    pub noise: crate::config::NoiseConfig,
    /// Engine mode: every step's cost times this factor (default 1): a known regression to
    /// drill a gate with (`--candidate-set sim.slowdown=1.1`).
    #[serde(skip_serializing_if = "is_one")]
    pub slowdown: f64,
    /// Engine mode: what the engine does when a client closes its stream: `stop` frees the
    /// request at the next step (vLLM, SGLang), `ignore` computes it to its end, every token
    /// of it waste (an engine or proxy that does not notice).
    #[serde(skip_serializing_if = "OnCancel::is_stop")]
    pub on_cancel: OnCancel,
    /// Engine mode: the first this many tokens of every streamed chat answer are reasoning,
    /// sent as `reasoning_content` deltas as they are computed (timing mode:
    /// `sim.timing.reasoning_tokens`). 0: no reasoning.
    #[serde(skip_serializing_if = "is_zero_u32")]
    pub reasoning_tokens: u32,
}

/// `sim.on_cancel`: the simulated engine's answer to a client that went away.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnCancel {
    /// Free the request (its slot and KV blocks) when the next step starts.
    #[default]
    Stop,
    /// Keep computing it to its end; its tokens count as waste.
    Ignore,
}

impl OnCancel {
    fn is_stop(&self) -> bool {
        *self == OnCancel::Stop
    }
}

pub(super) fn is_one(v: &f64) -> bool {
    *v == 1.0
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            mode: SimMode::Engine,
            engine_config: "configs/engine.toml".into(),
            usage: UsageMode::Final,
            corruption_rate: 0.0,
            logprob_drift: 0.0,
            save_scheduler_decision: false,
            timing: TimingConfig::default(),
            faults: FaultConfig::default(),
            noise: crate::config::NoiseConfig::default(),
            slowdown: 1.0,
            on_cancel: OnCancel::Stop,
            reasoning_tokens: 0,
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UsageMode {
    /// A usage-only chunk with empty `choices` after the finish chunk (vLLM, OpenAI).
    #[default]
    Final,
    /// Usage carried by the finish chunk itself.
    LastChunk,
    /// Cumulative usage in every chunk.
    Every,
    /// No usage at all.
    None,
}

/// Timing mode: the simulator answers every request on an exact schedule. The first content
/// chunk leaves `ttft_ms` after the request arrives, carrying `tokens_per_chunk` tokens; each
/// later chunk follows after one `itl_ms` gap per token it carries (each gap drawn uniformly from
/// `[itl - jitter, itl + jitter]` when `jitter_ms` > 0, seeded).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TimingConfig {
    pub ttft_ms: f64,
    /// Gap per token.
    pub itl_ms: f64,
    /// Natural output length (stops earlier than max_tokens unless ignore_eos); absent = max_tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u32>,
    /// Each gap is drawn uniformly from [gap - jitter, gap + jitter] (seeded).
    pub jitter_ms: f64,
    pub tokens_per_chunk: u32,
    /// The first this many tokens of every streamed chat answer are reasoning, sent as
    /// `reasoning_content` deltas (vLLM's and SGLang's reasoning parsers); the answer follows
    /// from the first chunk whose first token lies past them. 0: no reasoning.
    #[serde(skip_serializing_if = "is_zero_u32")]
    pub reasoning_tokens: u32,
    pub seed: u64,
    /// A cold start: requests that arrive within this many seconds of the first request the
    /// simulator received get `cold_factor` times the TTFT (an engine still capturing graphs
    /// and filling caches; a known ramp-up to drill the plateau with). 0: none.
    #[serde(skip_serializing_if = "is_zero_f64")]
    pub cold_s: f64,
    /// The TTFT factor of the cold start's requests, within [1, 100].
    #[serde(skip_serializing_if = "is_one")]
    pub cold_factor: f64,
}

impl Default for TimingConfig {
    fn default() -> Self {
        TimingConfig {
            ttft_ms: 50.0,
            itl_ms: 10.0,
            output_tokens: None,
            jitter_ms: 0.0,
            tokens_per_chunk: 1,
            reasoning_tokens: 0,
            seed: 7,
            cold_s: 0.0,
            cold_factor: 1.0,
        }
    }
}

/// Faults the simulator injects on purpose. Probabilities are per request (0..=1), drawn from a
/// seeded generator so a run is reproducible.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FaultConfig {
    pub http_429: f64,
    pub http_500: f64,
    pub http_503: f64,
    /// Connection reset after some content.
    pub reset: f64,
    /// `event: error` after some content.
    pub error_event: f64,
    /// A JSON `{"error": ...}` object after some content.
    pub error_object: f64,
    /// A chunk that is not JSON.
    pub malformed: f64,
    /// The stream ends after some content, without finish_reason or `[DONE]`.
    pub truncate: f64,
    /// A complete response without any content.
    pub empty: f64,
    /// A per-request pause of `stall_ms` in the middle of the stream.
    pub stall: f64,
    pub stall_ms: f64,
    /// The whole server freezes once for `freeze_ms`, `freeze_at_ms` after it started.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub freeze_at_ms: Option<f64>,
    pub freeze_ms: f64,
    /// Every `usage.completion_tokens` reported this share above the tokens sent (0.2: 20%
    /// more), within [0, 10]: a server whose accounting invents tokens.
    #[serde(skip_serializing_if = "is_zero_f64")]
    pub usage_overcount: f64,
    pub seed: u64,
}

pub(super) fn is_zero_f64(v: &f64) -> bool {
    *v == 0.0
}

impl Default for FaultConfig {
    fn default() -> Self {
        FaultConfig {
            http_429: 0.0,
            http_500: 0.0,
            http_503: 0.0,
            reset: 0.0,
            error_event: 0.0,
            error_object: 0.0,
            malformed: 0.0,
            truncate: 0.0,
            empty: 0.0,
            stall: 0.0,
            stall_ms: 5000.0,
            freeze_at_ms: None,
            freeze_ms: 1000.0,
            usage_overcount: 0.0,
            seed: 11,
        }
    }
}

impl FaultConfig {
    /// The probability fields, by name (for validation and the `--fault NAME=P` flag).
    pub fn probabilities_mut(&mut self) -> [(&'static str, &mut f64); 10] {
        [
            ("http_429", &mut self.http_429),
            ("http_500", &mut self.http_500),
            ("http_503", &mut self.http_503),
            ("reset", &mut self.reset),
            ("error_event", &mut self.error_event),
            ("error_object", &mut self.error_object),
            ("malformed", &mut self.malformed),
            ("truncate", &mut self.truncate),
            ("empty", &mut self.empty),
            ("stall", &mut self.stall),
        ]
    }

    pub(crate) fn probabilities(&self) -> [(&'static str, f64); 10] {
        [
            ("http_429", self.http_429),
            ("http_500", self.http_500),
            ("http_503", self.http_503),
            ("reset", self.reset),
            ("error_event", self.error_event),
            ("error_object", self.error_object),
            ("malformed", self.malformed),
            ("truncate", self.truncate),
            ("empty", self.empty),
            ("stall", self.stall),
        ]
    }
}
