//! `configs/bench.toml`: targets and named bench profiles.
//!
//! ```toml
//! [targets.local-vllm]
//! base_url = "http://127.0.0.1:8000"      # with or without /v1
//! model = "meta-llama/Llama-3.1-8B-Instruct"
//! api_key_env = "VLLM_API_KEY"             # the key itself only ever lives in the environment
//! engine_config = "configs/engine.toml"    # the governed parameters this server runs with
//!
//! [profile.default]                        # used when no --profile is given
//! [profile.default.load]
//! concurrency = 16
//!
//! [profile.nightly]
//! inherits = "default"                     # profiles layer over their parent
//! target = "local-vllm"
//! ```
//!
//! Resolution: built-in defaults, then `[profile.default]`, then the chain of `inherits` down to
//! the chosen profile, then command-line overrides. Unknown keys and bad values are refused with
//! the file, the line and the valid choices.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::limits::{
    self, Low, MAX_BURSTINESS, MAX_CONCURRENCY, MAX_RATE, MAX_REQUEST_TOKENS, MAX_REQUESTS,
    MAX_SECONDS, MAX_WORKLOAD_ITEMS, MIN_BURSTINESS, MIN_RATE,
};
use super::source::{ConfigError, Invalid, Source};
use crate::metrics::Slo;

/// The parsed `configs/bench.toml`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BenchFile {
    #[serde(default)]
    pub targets: BTreeMap<String, Target>,
    #[serde(default)]
    pub profile: BTreeMap<String, Profile>,
}

/// A server to measure.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Target {
    /// Base URL, with or without the `/v1` suffix.
    pub base_url: String,
    /// Model id; when absent, the first model `/v1/models` offers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Name of the environment variable holding the API key (never the key itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// The governed engine-parameter file this server was started from (recorded in summaries).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_config: Option<String>,
    /// Which output-length field to send.
    #[serde(default)]
    pub max_tokens_field: MaxTokensField,
    /// Prometheus endpoint; defaults to `<server root>/metrics`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Extra request headers (gateways need them): a literal value, or `{ env = "VAR" }` to take
    /// it from an environment variable. Credential-like headers only from the environment.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, HeaderValue>,
    /// A PEM file of CA certificates trusted for this target's `https://` (besides the
    /// platform's), relative to the repository root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_bundle: Option<String>,
}

/// The value of a `[targets.X.headers]` entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum HeaderValue {
    /// Written in the file: for values that are not secrets (a tenant, a route).
    Literal(String),
    /// Read from this environment variable when the run starts (`{ env = "VAR" }`): for
    /// secrets, which never go in a file.
    Env { env: String },
}

impl<'de> Deserialize<'de> for HeaderValue {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        match toml::Value::deserialize(d)? {
            toml::Value::String(s) => Ok(HeaderValue::Literal(s)),
            toml::Value::Table(t) if t.len() == 1 && t.get("env").is_some_and(|v| v.is_str()) => {
                let env = t["env"].as_str().unwrap_or_default().to_string();
                Ok(HeaderValue::Env { env })
            }
            _ => Err(D::Error::custom(
                "a header value is a string, or { env = \"VAR_NAME\" } to read it from an \
                 environment variable",
            )),
        }
    }
}

/// Headers the client sets itself, or that would break the connection: refused in `headers`.
pub(crate) const RESERVED_HEADERS: [&str; 7] =
    ["host", "content-length", "content-type", "transfer-encoding", "connection", "upgrade", "te"];

/// Whether a header name looks like it carries a credential (its value must come from the
/// environment).
pub fn is_credential_header(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    ["auth", "token", "key", "secret", "cookie", "password", "session", "signature"]
        .iter()
        .any(|w| n.contains(w))
}

/// Why a header name or value cannot be sent. A value is never echoed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    #[error("header `{}` is not a valid header name (letters, digits and !#$%&'*+-.^_`|~)", .0.escape_debug())]
    Name(String),
    #[error("header `{0}` is set by the client itself; headers may not set any of {list}", list = RESERVED_HEADERS.join(", "))]
    Reserved(String),
    #[error("is empty")]
    EmptyValue,
    #[error("has surrounding whitespace")]
    Whitespace,
    #[error(
        "holds a character a header cannot carry (a newline, a control or non-ASCII character)"
    )]
    Character,
}

/// A header name: an HTTP token (RFC 9110), not one the client manages.
pub(crate) fn validate_header_name(name: &str) -> Result<(), HeaderError> {
    let tchar = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    if name.is_empty() || !name.chars().all(tchar) {
        return Err(HeaderError::Name(name.to_string()));
    }
    if RESERVED_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
        return Err(HeaderError::Reserved(name.to_string()));
    }
    Ok(())
}

/// A header value as it goes on the wire: visible ASCII and spaces, no surrounding spaces (an
/// invisible character or a stray newline would corrupt the request). Never echoes the value.
pub(crate) fn validate_header_value(value: &str) -> Result<(), HeaderError> {
    if value.is_empty() {
        return Err(HeaderError::EmptyValue);
    }
    if value.trim() != value {
        return Err(HeaderError::Whitespace);
    }
    if !value.chars().all(|c| c == ' ' || c == '\t' || c.is_ascii_graphic()) {
        return Err(HeaderError::Character);
    }
    Ok(())
}

/// Why a target's header cannot be given its value. Names the header and the variable, never
/// a value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HeaderValueError {
    #[error("header `{name}`: the environment variable {var} is not set")]
    Unset { name: String, var: String },
    /// The value read from the variable `var` cannot be sent.
    #[error("header `{name}`: the value of ${var} {error}")]
    Env { name: String, var: String, error: HeaderError },
    /// The value written in the file cannot be sent.
    #[error("header `{name}`: the value {error}")]
    Literal { name: String, error: HeaderError },
}

/// Why a target's `ca_bundle` cannot be used; `rel` is the file as the config names it.
#[derive(Debug, thiserror::Error)]
pub enum CaBundleError {
    #[error("cannot read ca_bundle {rel}: {error}")]
    Read { rel: String, error: std::io::Error },
    #[error("ca_bundle {rel} holds no PEM certificate (-----BEGIN CERTIFICATE-----)")]
    NoCertificate { rel: String },
}

impl Target {
    /// The headers with their values, environment variables read through `env` (`std::env::var`
    /// in a run). Errors name the header and the variable, never a value.
    pub fn header_values(
        &self,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Vec<(String, String)>, HeaderValueError> {
        let mut out = Vec::with_capacity(self.headers.len());
        for (name, v) in &self.headers {
            let value = match v {
                HeaderValue::Literal(s) => s.clone(),
                HeaderValue::Env { env: var } => env(var).ok_or_else(|| {
                    HeaderValueError::Unset { name: name.clone(), var: var.clone() }
                })?,
            };
            validate_header_value(&value).map_err(|error| match v {
                HeaderValue::Env { env: var } => {
                    HeaderValueError::Env { name: name.clone(), var: var.clone(), error }
                }
                HeaderValue::Literal(_) => HeaderValueError::Literal { name: name.clone(), error },
            })?;
            out.push((name.clone(), value));
        }
        Ok(out)
    }

    /// Read the `ca_bundle` file under `root`: PEM text with at least one certificate.
    pub fn read_ca_bundle(&self, root: &Path) -> Result<Option<Vec<u8>>, CaBundleError> {
        let Some(rel) = &self.ca_bundle else { return Ok(None) };
        let path = root.join(rel);
        let bytes = std::fs::read(&path)
            .map_err(|error| CaBundleError::Read { rel: rel.clone(), error })?;
        if !String::from_utf8_lossy(&bytes).contains("-----BEGIN CERTIFICATE-----") {
            return Err(CaBundleError::NoCertificate { rel: rel.clone() });
        }
        Ok(Some(bytes))
    }

    /// A target at `base_url` with everything else at its default.
    pub fn at(base_url: impl Into<String>) -> Target {
        Target {
            base_url: base_url.into(),
            model: None,
            api_key_env: None,
            engine_config: None,
            max_tokens_field: MaxTokensField::Auto,
            metrics_url: None,
            description: None,
            headers: BTreeMap::new(),
            ca_bundle: None,
        }
    }

    pub fn with_model(mut self, model: impl Into<String>) -> Target {
        self.model = Some(model.into());
        self
    }
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
    #[serde(skip_serializing_if = "super::CancelConfig::is_default")]
    pub cancel: super::CancelConfig,
    /// The plateau and the over-saturation stop (`[profile.*.steady]`; docs/metrics.md).
    #[serde(skip_serializing_if = "super::SteadyConfig::is_default")]
    pub steady: super::SteadyConfig,
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
            cancel: super::CancelConfig::default(),
            steady: super::SteadyConfig::default(),
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
    pub input_distribution: Option<super::LengthDist>,
    /// Output lengths (each item's `max_tokens`) drawn from a distribution.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_distribution: Option<super::LengthDist>,
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
    pub think_time_ms: Option<super::LengthDist>,
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

fn is_default<T: Default + PartialEq>(v: &T) -> bool {
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
    #[serde(skip_serializing_if = "super::NoiseConfig::is_default")]
    pub noise: super::NoiseConfig,
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

fn is_one(v: &f64) -> bool {
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
            noise: super::NoiseConfig::default(),
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

fn is_zero_f64(v: &f64) -> bool {
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

/// A profile resolved from its file and the command line, ready to run.
#[derive(Clone, Debug)]
pub struct ResolvedProfile {
    pub name: String,
    pub profile: Profile,
    /// The target, when the profile names one (`None` = embedded simulator).
    pub target: Option<(String, Target)>,
    /// The config file it came from (None: built-in defaults only).
    pub file: Option<PathBuf>,
}

/// One `key=value` override from the command line (`load.concurrency=64`).
#[derive(Clone, Debug, PartialEq)]
pub struct Override {
    pub key: String,
    pub value: toml::Value,
    /// How the user wrote it, for error messages.
    pub origin: String,
}

/// Why a command-line override is not `key=value`; `given` is the override as written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OverrideError {
    #[error("`{given}`: expected KEY=VALUE, e.g. load.concurrency=64")]
    NoValue { given: String },
    #[error("`{given}`: `{key}` is not a dotted key like load.concurrency")]
    Key { given: String, key: String },
}

impl Override {
    /// Parse `key=value`; the value is TOML (`64`, `true`, `[128, 256]`, `"text"`), and a bare word
    /// that is not valid TOML is taken as a string.
    pub fn parse(s: &str) -> Result<Override, OverrideError> {
        let (key, raw) =
            s.split_once('=').ok_or_else(|| OverrideError::NoValue { given: s.to_string() })?;
        let key = key.trim();
        if key.is_empty() || key.split('.').any(|p| p.is_empty()) {
            return Err(OverrideError::Key { given: s.to_string(), key: key.to_string() });
        }
        let raw = raw.trim();
        let value = toml::from_str::<toml::Table>(&format!("v = {raw}"))
            .ok()
            .and_then(|mut t| t.remove("v"))
            .unwrap_or_else(|| toml::Value::String(raw.to_string()));
        Ok(Override { key: key.to_string(), value, origin: format!("--set {s}") })
    }

    pub fn new(key: &str, value: impl Into<toml::Value>, origin: impl Into<String>) -> Override {
        Override { key: key.to_string(), value: value.into(), origin: origin.into() }
    }
}

/// A target name the configuration file does not define; `known`: the targets it does.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("no target `{name}` in {}; defined targets: {}", file.display(), listed(known))]
pub struct UnknownTarget {
    pub name: String,
    pub file: PathBuf,
    pub known: Vec<String>,
}

/// Names joined with commas, `(none)` for none.
fn listed(names: &[String]) -> String {
    if names.is_empty() { "(none)".to_string() } else { names.join(", ") }
}

/// The bench configuration file with its source text (for located errors).
#[derive(Clone, Debug)]
pub struct BenchConfig {
    pub source: Source,
    pub file: BenchFile,
    raw: toml::Table,
}

impl BenchConfig {
    pub fn load(path: &Path) -> Result<BenchConfig, ConfigError> {
        Self::from_source(Source::read(path)?)
    }

    /// Load `rel` under `root`; messages name the file as `rel`.
    pub fn load_in(root: &Path, rel: &Path) -> Result<BenchConfig, ConfigError> {
        let cfg = Self::from_source(Source::read_in(root, rel)?)?;
        cfg.validate_files(root)?;
        Ok(cfg)
    }

    pub fn from_source(source: Source) -> Result<BenchConfig, ConfigError> {
        let file: BenchFile = source.parse()?;
        let raw: toml::Table = toml::from_str(&source.text).map_err(|e| source.toml_error(&e))?;
        let cfg = BenchConfig { source, file, raw };
        cfg.validate_targets()?;
        Ok(cfg)
    }

    /// Built-in defaults only (no file).
    pub fn builtin() -> BenchConfig {
        BenchConfig {
            source: Source::new("<built-in defaults>", ""),
            file: BenchFile::default(),
            raw: toml::Table::new(),
        }
    }

    pub fn profile_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.file.profile.keys().cloned().collect();
        if !names.iter().any(|n| n == "default") {
            names.insert(0, "default".into());
        }
        names
    }

    pub fn target(&self, name: &str) -> Result<&Target, UnknownTarget> {
        self.file.targets.get(name).ok_or_else(|| UnknownTarget {
            name: name.to_string(),
            file: self.source.path.clone(),
            known: self.file.targets.keys().cloned().collect(),
        })
    }

    fn validate_targets(&self) -> Result<(), ConfigError> {
        for (name, t) in &self.file.targets {
            let at = |key: &str, msg: String| self.source.error_at(&["targets", name, key], msg);
            if !(t.base_url.starts_with("http://") || t.base_url.starts_with("https://")) {
                return Err(at(
                    "base_url",
                    format!("base_url must start with http:// or https://, got `{}`", t.base_url),
                ));
            }
            if let Some(var) = &t.api_key_env {
                validate_env_name(var).map_err(|m| at("api_key_env", m.to_string()))?;
            }
            self.validate_headers(name, t)?;
            if let Some(ca) = &t.ca_bundle {
                if ca.trim().is_empty() {
                    return Err(at("ca_bundle", "ca_bundle must name a PEM file".into()));
                }
            }
        }
        Ok(())
    }

    fn validate_headers(&self, target: &str, t: &Target) -> Result<(), ConfigError> {
        for (name, value) in &t.headers {
            let at = |m: String| self.source.error_at(&["targets", target, "headers", name], m);
            validate_header_name(name).map_err(|e| at(e.to_string()))?;
            if t.api_key_env.is_some() && name.eq_ignore_ascii_case("authorization") {
                return Err(at(format!(
                    "header `{name}` conflicts with api_key_env, which sends `Authorization: \
                     Bearer <key>`; keep one of them"
                )));
            }
            match value {
                HeaderValue::Env { env } => {
                    validate_env_name(env).map_err(|_| {
                        at(format!(
                            "header `{name}`: env must be the NAME of an environment variable \
                             (letters, digits, underscores), not the value itself"
                        ))
                    })?;
                }
                HeaderValue::Literal(_) if is_credential_header(name) => {
                    return Err(at(format!(
                        "header `{name}` looks like a credential; config files never hold \
                         secrets. Export it in an environment variable and write \
                         `\"{name}\" = {{ env = \"VAR_NAME\" }}`"
                    )));
                }
                HeaderValue::Literal(v) => {
                    validate_header_value(v).map_err(|m| at(format!("header `{name}`: {m}")))?;
                }
            }
        }
        Ok(())
    }

    /// Check the files targets name under `root` (`ca_bundle`), at their lines.
    pub(crate) fn validate_files(&self, root: &Path) -> Result<(), ConfigError> {
        for (name, t) in &self.file.targets {
            t.read_ca_bundle(root).map_err(|e| {
                self.source.error_at(&["targets", name, "ca_bundle"], e.to_string())
            })?;
        }
        Ok(())
    }

    /// Chain of profile names from the most general (`default`) to `name`.
    fn chain(&self, name: &str) -> Result<Vec<String>, ConfigError> {
        let mut chain = vec![name.to_string()];
        let mut cur = name.to_string();
        loop {
            let parent = match self.file.profile.get(&cur) {
                Some(p) => p.inherits.clone(),
                None if cur == "default" => None,
                None => {
                    return Err(self.source.error(
                        None,
                        format!(
                            "no profile `{cur}`; defined profiles: {}",
                            self.profile_names().join(", ")
                        ),
                    ));
                }
            };
            let parent = match parent {
                Some(p) => p,
                None if cur != "default" => "default".to_string(),
                None => break,
            };
            if chain.contains(&parent) {
                return Err(self.source.error_at(
                    &["profile", &cur, "inherits"],
                    format!("profile inheritance loops: {} -> {parent}", chain.join(" -> ")),
                ));
            }
            chain.push(parent.clone());
            cur = parent;
        }
        chain.reverse();
        Ok(chain)
    }

    /// Resolve a profile: built-in defaults, `[profile.default]`, the `inherits` chain, then the
    /// overrides in order.
    pub fn resolve(
        &self,
        name: &str,
        overrides: &[Override],
    ) -> Result<ResolvedProfile, ConfigError> {
        let chain = self.chain(name)?;
        let mut merged = toml::Table::new();
        let profiles = self.raw.get("profile").and_then(|p| p.as_table());
        for layer in &chain {
            if let Some(t) = profiles.and_then(|p| p.get(layer)).and_then(|v| v.as_table()) {
                deep_merge(&mut merged, t);
            }
        }
        merged.remove("inherits");
        for o in overrides {
            set_dotted(&mut merged, &o.key, o.value.clone())
                .map_err(|e| self.cli_error(o, e.to_string()))?;
            // Validate each override on its own, so the message names the flag that is wrong.
            let mut probe = toml::Table::new();
            set_dotted(&mut probe, &o.key, o.value.clone())
                .map_err(|e| self.cli_error(o, e.to_string()))?;
            if let Err(e) = probe.clone().try_into::<Profile>() {
                return Err(self.cli_error(o, e.message().trim().to_string()));
            }
        }
        let profile: Profile =
            toml::Value::Table(merged).try_into().map_err(|e: toml::de::Error| {
                self.source.error(None, e.message().trim().to_string())
            })?;
        // The located check: which layer set the offending key?
        if let Err(Invalid(key, msg)) = validate_profile(&profile) {
            let key_parts: Vec<&str> = key.split('.').collect();
            if let Some(o) =
                overrides.iter().rev().find(|o| key.starts_with(&o.key) || o.key.starts_with(&key))
            {
                return Err(self.cli_error(o, msg));
            }
            for layer in chain.iter().rev() {
                let mut path = vec!["profile", layer.as_str()];
                path.extend(key_parts.iter().copied());
                if self.source.locate(&path).is_some() {
                    return Err(self.source.error_at(&path, format!("{key}: {msg}")));
                }
            }
            return Err(self.source.error(None, format!("profile `{name}`: {key}: {msg}")));
        }
        let target = match &profile.target {
            Some(t) => {
                let target = self.target(t).map_err(|e| {
                    let mut path = vec!["profile", name, "target"];
                    if self.source.locate(&path).is_none() {
                        path = vec!["profile", "default", "target"];
                    }
                    self.source.error_at(&path, e.to_string())
                })?;
                Some((t.clone(), target.clone()))
            }
            None => None,
        };
        let file = (!self.source.text.is_empty() || self.source.path.exists())
            .then(|| self.source.path.clone());
        Ok(ResolvedProfile { name: name.to_string(), profile, target, file })
    }

    fn cli_error(&self, o: &Override, message: String) -> ConfigError {
        ConfigError {
            path: PathBuf::from("<command line>"),
            line: None,
            col: None,
            message: format!("{}: {message}", o.origin),
        }
    }
}

/// `api_key_env` (or a header's variable) is not a variable's name. The value is never echoed:
/// it may be a key pasted in the wrong place.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "api_key_env must be the NAME of an environment variable (letters, digits, underscores), not \
     the key itself"
)]
pub struct NotAVariableName;

/// An environment variable name: letters, digits and underscores, not starting with a digit.
pub fn validate_env_name(var: &str) -> Result<(), NotAVariableName> {
    let valid = !var.is_empty()
        && !var.starts_with(|c: char| c.is_ascii_digit())
        && var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if valid { Ok(()) } else { Err(NotAVariableName) }
}

/// Semantic checks on a resolved profile: `(dotted key, message)` of the first problem. Every
/// number is checked against its documented bound ([`super::limits`]).
pub(crate) fn validate_profile(p: &Profile) -> Result<(), Invalid> {
    validate_load(&p.load)?;
    validate_trace(p)?;
    validate_conversations(p)?;
    validate_workload(&p.workload)?;
    for (k, v) in [
        ("slo.ttft_ms", p.slo.ttft_ms),
        ("slo.tpot_ms", p.slo.tpot_ms),
        ("slo.e2e_ms", p.slo.e2e_ms),
    ] {
        if let Some(v) = v {
            at(k, limits::millis(v, false))?;
        }
    }
    at(
        "scrape.interval_s",
        limits::check_f64(p.scrape.interval_s, Low::Closed, 0.01, MAX_SECONDS, "seconds"),
    )?;
    let c = &p.client;
    at("client.request_timeout_s", limits::seconds(c.request_timeout_s, false))?;
    at("client.stall_timeout_s", limits::seconds(c.stall_timeout_s, false))?;
    at("client.grace_s", limits::seconds(c.grace_s, true))?;
    at("client.max_event_kib", limits::check_int(c.max_event_kib, 1, 1024 * 1024, "KiB"))?;
    if let Some(n) = p.trials {
        at("trials", limits::check_int(n.into(), 1, limits::MAX_TRIALS.into(), "trials"))?;
    }
    if let Some(c) = p.cooldown_s {
        at("cooldown_s", limits::seconds(c, true))?;
    }
    p.cancel.validate("cancel", p.stream)?;
    p.steady.validate("steady")?;
    validate_sim(&p.sim)
}

/// The dotted key of a failed check.
fn at<E: std::fmt::Display>(key: &str, r: Result<(), E>) -> Result<(), Invalid> {
    r.map_err(|m| Invalid(key.to_string(), m.to_string()))
}

fn validate_trace(p: &Profile) -> Result<(), Invalid> {
    let (l, w) = (&p.load, &p.workload);
    match (l.mode, &w.trace) {
        (LoadMode::Trace, None) => {
            return at(
                "workload.trace",
                Err("a trace replay (load.mode = \"trace\") needs workload.trace = <file>"
                    .to_string()),
            );
        }
        (LoadMode::Closed | LoadMode::Open, Some(_)) => {
            return at(
                "load.mode",
                Err("workload.trace is replayed by load.mode = \"trace\"".to_string()),
            );
        }
        _ => {}
    }
    if w.trace.is_some() && w.dataset.is_some() {
        return at("workload.dataset", Err("a trace and a dataset exclude each other".to_string()));
    }
    at(
        "load.time_scale",
        limits::check_f64(l.time_scale, Low::Open, 0.0, 1000.0, "(trace time x scale)"),
    )?;
    at("load.trace_start_s", limits::seconds(l.trace_start_s, true))?;
    if let Some(d) = l.trace_duration_s {
        at("load.trace_duration_s", limits::seconds(d, false))?;
    }
    if let Some(r) = l.max_rate {
        at(
            "load.max_rate",
            limits::check_f64(r, Low::Closed, MIN_RATE, MAX_RATE, "requests per second"),
        )?;
    }
    at(
        "workload.trace_block_tokens",
        limits::check_int(w.trace_block_tokens.into(), 1, MAX_REQUEST_TOKENS.into(), "tokens"),
    )
}

/// A conversation dataset: alone (no trace or JSONL dataset), sessions in a closed loop, think
/// time and recorded answers only with it.
fn validate_conversations(p: &Profile) -> Result<(), Invalid> {
    let w = &p.workload;
    if w.conversations.is_none() {
        if w.think_time_ms.is_some() {
            return at(
                "workload.think_time_ms",
                Err("think time is between the turns of sessions: set workload.conversations"
                    .to_string()),
            );
        }
        if w.max_tokens_from_answer {
            return at(
                "workload.max_tokens_from_answer",
                Err("recorded answers come from workload.conversations".to_string()),
            );
        }
        return Ok(());
    }
    if w.trace.is_some() || w.dataset.is_some() {
        return at(
            "workload.conversations",
            Err("a conversation dataset excludes workload.trace and workload.dataset".to_string()),
        );
    }
    let sessions = w.conversation_turns == TurnMode::Sessions;
    if sessions && p.load.mode != LoadMode::Closed {
        return at(
            "load.mode",
            Err("sessions run in a closed loop (load.mode = \"closed\": concurrency counts \
                 sessions); conversation_turns = \"first\" sends single requests in any mode"
                .to_string()),
        );
    }
    if let Some(d) = &w.think_time_ms {
        if !sessions {
            return at(
                "workload.think_time_ms",
                Err("think time is between turns: conversation_turns = \"sessions\"".to_string()),
            );
        }
        d.validate().map_err(|Invalid(field, m)| {
            Invalid(format!("workload.think_time_ms.{field}"), m.replace(" tokens", " ms"))
        })?;
    }
    Ok(())
}

fn validate_load(l: &LoadConfig) -> Result<(), Invalid> {
    let concurrency = |v: u32| limits::check_int(v.into(), 1, MAX_CONCURRENCY.into(), "requests");
    at("load.concurrency", concurrency(l.concurrency))?;
    match (l.mode, l.rate) {
        (LoadMode::Open, None) => {
            return at(
                "load.rate",
                Err("an open-loop load (mode = \"open\") needs rate = <requests per second>"
                    .to_string()),
            );
        }
        (_, Some(r)) => at(
            "load.rate",
            limits::check_f64(r, Low::Closed, MIN_RATE, MAX_RATE, "requests per second"),
        )?,
        _ => {}
    }
    at(
        "load.burstiness",
        limits::check_f64(
            l.burstiness,
            Low::Closed,
            MIN_BURSTINESS,
            MAX_BURSTINESS,
            "(the gamma shape: 1 = Poisson)",
        ),
    )?;
    if let Some(n) = l.max_concurrency {
        at("load.max_concurrency", concurrency(n))?;
    }
    if let Some(n) = l.requests {
        at("load.requests", limits::check_int(n, 1, MAX_REQUESTS, "requests"))?;
    }
    at("load.warmup_requests", limits::check_int(l.warmup_requests, 0, MAX_REQUESTS, "requests"))?;
    if let Some(d) = l.duration_s {
        at("load.duration_s", limits::seconds(d, false))?;
    }
    at(
        "load.warmup_trials",
        limits::check_int(l.warmup_trials.into(), 0, limits::MAX_TRIALS.into(), "trials"),
    )?;
    at("load.warmup_s", limits::seconds(l.warmup_s, true))
}

fn is_zero_u32(v: &u32) -> bool {
    *v == 0
}

fn validate_workload(w: &WorkloadConfig) -> Result<(), Invalid> {
    let tokens = |v: u32| limits::check_int(v.into(), 1, MAX_REQUEST_TOKENS.into(), "tokens");
    for (key, dist) in [
        ("input_distribution", &w.input_distribution),
        ("output_distribution", &w.output_distribution),
    ] {
        if let Some(d) = dist {
            d.validate()
                .map_err(|Invalid(field, m)| Invalid(format!("workload.{key}.{field}"), m))?;
        }
    }
    at("workload.samples", limits::check_int(w.samples.into(), 1, MAX_WORKLOAD_ITEMS, "items"))?;
    let synthetic = w.dataset.is_none() && w.trace.is_none() && w.conversations.is_none();
    if synthetic && w.input_distribution.is_none() {
        if w.input_lengths.is_empty() {
            return at(
                "workload.input_lengths",
                Err("needs at least one prompt length (or set workload.dataset)".to_string()),
            );
        }
        if let Some(&n) = w.input_lengths.iter().find(|&&n| tokens(n).is_err()) {
            return at(
                "workload.input_lengths",
                tokens(n).map_err(|m| format!("every prompt length {m}")),
            );
        }
        at("workload.repeats", limits::check_int(w.repeats.into(), 1, MAX_WORKLOAD_ITEMS, ""))?;
        let items = w.input_lengths.len() as u64 * u64::from(w.repeats);
        if items > MAX_WORKLOAD_ITEMS {
            return at(
                "workload.repeats",
                Err(format!(
                    "{} prompt lengths x {} repeats = {items} requests, more than the \
                     {MAX_WORKLOAD_ITEMS} a synthetic workload may hold",
                    w.input_lengths.len(),
                    w.repeats
                )),
            );
        }
        if w.input_lengths.iter().any(|&n| n <= w.shared_prefix_tokens)
            && w.shared_prefix_tokens > 0
        {
            return at(
                "workload.shared_prefix_tokens",
                Err("must be shorter than every prompt length".to_string()),
            );
        }
    }
    at("workload.max_tokens", tokens(w.max_tokens))?;
    if !(w.temperature.is_finite() && (0.0..=2.0).contains(&w.temperature)) {
        return at(
            "workload.temperature",
            Err(format!("must be within 0..=2, got {}", w.temperature)),
        );
    }
    if !(w.top_p.is_finite() && w.top_p > 0.0 && w.top_p <= 1.0) {
        return at("workload.top_p", Err(format!("must be within (0, 1], got {}", w.top_p)));
    }
    Ok(())
}

fn validate_sim(sim: &SimConfig) -> Result<(), Invalid> {
    let t = &sim.timing;
    at("sim.timing.ttft_ms", limits::millis(t.ttft_ms, true))?;
    at("sim.timing.itl_ms", limits::millis(t.itl_ms, true))?;
    at("sim.timing.jitter_ms", limits::millis(t.jitter_ms, true))?;
    if t.jitter_ms > t.itl_ms {
        return at(
            "sim.timing.jitter_ms",
            Err(format!("must not exceed itl_ms ({}), got {}", t.itl_ms, t.jitter_ms)),
        );
    }
    let tokens = |v: u32| limits::check_int(v.into(), 1, MAX_REQUEST_TOKENS.into(), "tokens");
    at("sim.timing.tokens_per_chunk", tokens(t.tokens_per_chunk))?;
    at("sim.timing.cold_s", limits::check_f64(t.cold_s, Low::Closed, 0.0, 3600.0, "seconds"))?;
    at(
        "sim.timing.cold_factor",
        limits::check_f64(t.cold_factor, Low::Closed, 1.0, MAX_SLOWDOWN, "factor on the TTFT"),
    )?;
    if let Some(n) = t.output_tokens {
        at("sim.timing.output_tokens", tokens(n))?;
    }
    if !(sim.corruption_rate.is_finite() && (0.0..=1.0).contains(&sim.corruption_rate)) {
        return at(
            "sim.corruption_rate",
            Err(format!("is a probability: within 0..=1, got {}", sim.corruption_rate)),
        );
    }
    if !(sim.slowdown.is_finite() && sim.slowdown > 0.0 && sim.slowdown <= MAX_SLOWDOWN) {
        return at(
            "sim.slowdown",
            Err(format!(
                "is a factor on every step's cost: within (0, {MAX_SLOWDOWN}], got {}",
                sim.slowdown
            )),
        );
    }
    if !(sim.logprob_drift.is_finite() && sim.logprob_drift >= 0.0 && sim.logprob_drift < 1.0) {
        return at(
            "sim.logprob_drift",
            Err(format!("is a relative error: within 0..1, got {}", sim.logprob_drift)),
        );
    }
    let f = &sim.faults;
    for (name, prob) in f.probabilities() {
        if !(prob.is_finite() && (0.0..=1.0).contains(&prob)) {
            return at(
                &format!("sim.faults.{name}"),
                Err(format!("is a probability: within 0..=1, got {prob}")),
            );
        }
    }
    let total: f64 = f.probabilities().iter().filter(|(n, _)| *n != "stall").map(|(_, p)| p).sum();
    if total > 1.0 + 1e-9 {
        return at(
            "sim.faults",
            Err(format!("the fault probabilities (except stall) add up to {total}, more than 1")),
        );
    }
    at("sim.faults.stall_ms", limits::millis(f.stall_ms, true))?;
    at("sim.faults.freeze_ms", limits::millis(f.freeze_ms, true))?;
    at(
        "sim.faults.usage_overcount",
        limits::check_f64(f.usage_overcount, Low::Closed, 0.0, 10.0, "share"),
    )?;
    if let Some(v) = f.freeze_at_ms {
        at("sim.faults.freeze_at_ms", limits::millis(v, true))?;
    }
    sim.noise.validate("sim.noise")
}

/// Merge `over` into `base`: tables merge key by key, everything else is replaced.
pub(crate) fn deep_merge(base: &mut toml::Table, over: &toml::Table) {
    for (k, v) in over {
        match (base.get_mut(k), v) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => deep_merge(b, o),
            _ => {
                base.insert(k.clone(), v.clone());
            }
        }
    }
}

/// A dotted key that goes through a value (`load.concurrency.x` where `load.concurrency` is
/// set); `key` is the part up to that value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{key}` is a value, not a table")]
pub struct NotATable {
    pub key: String,
}

/// Set `a.b.c = value` in a table, creating intermediate tables.
pub(crate) fn set_dotted(
    table: &mut toml::Table,
    key: &str,
    value: toml::Value,
) -> Result<(), NotATable> {
    let parts: Vec<&str> = key.split('.').collect();
    let mut cur = table;
    for (i, part) in parts.iter().enumerate() {
        if i + 1 == parts.len() {
            cur.insert(part.to_string(), value);
            return Ok(());
        }
        let entry =
            cur.entry(part.to_string()).or_insert_with(|| toml::Value::Table(toml::Table::new()));
        cur = match entry {
            toml::Value::Table(t) => t,
            _ => return Err(NotATable { key: parts[..=i].join(".") }),
        };
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(text: &str) -> Result<BenchConfig, ConfigError> {
        BenchConfig::from_source(Source::new("configs/bench.toml", text))
    }

    #[test]
    fn unknown_key_is_refused_at_its_line_with_valid_choices() {
        let err = cfg("[profile.default.load]\nconcurrency = 4\nconcurency = 8\n").unwrap_err();
        assert_eq!(err.line, Some(3), "{err}");
        let msg = err.to_string();
        assert!(msg.starts_with("configs/bench.toml:3:"), "{msg}");
        assert!(msg.contains("concurency") && msg.contains("concurrency"), "{msg}");
    }

    #[test]
    fn bad_enum_value_lists_choices() {
        let err = cfg("[profile.default.load]\nmode = \"sideways\"\n").unwrap_err();
        assert_eq!(err.line, Some(2), "{err}");
        assert!(err.message.contains("closed") && err.message.contains("open"), "{err}");
    }

    #[test]
    fn semantic_errors_point_at_the_layer_that_set_them() {
        let c = cfg("[profile.default.load]\nconcurrency = 4\n\n[profile.fast]\n[profile.fast.load]\nconcurrency = 0\n").unwrap();
        assert_eq!(c.resolve("default", &[]).unwrap().profile.load.concurrency, 4);
        let err = c.resolve("fast", &[]).unwrap_err();
        assert_eq!(err.line, Some(6), "{err}");
        assert!(err.message.contains("within 1..=100000"), "{err}");
        let err =
            c.resolve("default", &[Override::parse("load.concurrency=0").unwrap()]).unwrap_err();
        assert!(err.to_string().contains("--set load.concurrency=0"), "{err}");
    }

    #[test]
    fn profiles_inherit_and_overrides_win() {
        let c = cfg(
            "[profile.default]\nstream = false\n[profile.default.workload]\nmax_tokens = 64\nrepeats = 3\n\
             [profile.a]\n[profile.a.workload]\nrepeats = 5\n\
             [profile.b]\ninherits = \"a\"\n[profile.b.load]\nconcurrency = 2\n",
        )
        .unwrap();
        let b =
            c.resolve("b", &[Override::parse("workload.max_tokens=16").unwrap()]).unwrap().profile;
        assert!(!b.stream);
        assert_eq!(b.workload.repeats, 5);
        assert_eq!(b.workload.max_tokens, 16);
        assert_eq!(b.load.concurrency, 2);
        assert_eq!(b.workload.input_lengths, vec![128, 256, 512, 1024]);
        let err = c.resolve("nope", &[]).unwrap_err();
        assert!(err.message.contains("a, b, default"), "{err}");
    }

    #[test]
    fn override_values_are_typed() {
        let o = Override::parse("workload.input_lengths=[16, 32]").unwrap();
        assert_eq!(o.value, toml::Value::Array(vec![16.into(), 32.into()]));
        let o = Override::parse("endpoint=completions").unwrap();
        assert_eq!(o.value, toml::Value::String("completions".into()));
        assert_eq!(
            Override::parse("novalue").unwrap_err().to_string(),
            "`novalue`: expected KEY=VALUE, e.g. load.concurrency=64"
        );
        assert_eq!(
            Override::parse("load..x=1").unwrap_err().to_string(),
            "`load..x=1`: `load..x` is not a dotted key like load.concurrency"
        );
        let c = BenchConfig::builtin();
        let sets = ["load.concurrency=4", "load.concurrency.x=1"];
        let o: Vec<Override> = sets.iter().map(|s| Override::parse(s).unwrap()).collect();
        let err = c.resolve("default", &o).unwrap_err();
        assert_eq!(
            err.to_string(),
            "<command line>: --set load.concurrency.x=1: `load.concurrency` is a value, not a table"
        );
        assert_eq!(
            c.target("gw").unwrap_err().to_string(),
            "no target `gw` in <built-in defaults>; defined targets: (none)"
        );
        let err =
            c.resolve("default", &[Override::parse("load.concurrency=lots").unwrap()]).unwrap_err();
        assert!(err.to_string().contains("--set load.concurrency=lots"), "{err}");
        let err = c.resolve("default", &[Override::parse("load.nope=1").unwrap()]).unwrap_err();
        assert!(err.message.contains("nope"), "{err}");
    }

    #[test]
    fn every_duration_rate_size_and_count_is_bounded_and_named_by_its_override() {
        let c = BenchConfig::builtin();
        for (set, range) in [
            ("load.duration_s=1e300", "(0, 604800] seconds (a week), got 1e300"),
            ("load.rate=1e-300", "[0.001, 1000000] requests per second, got 1e-300"),
            ("client.request_timeout_s=1e20", "(0, 604800] seconds"),
            ("client.stall_timeout_s=1e300", "(0, 604800] seconds"),
            ("client.grace_s=1e300", "[0, 604800] seconds"),
            ("client.grace_s=nan", "got NaN"),
            ("load.warmup_s=1e300", "[0, 604800] seconds"),
            ("load.warmup_s=-inf", "got -inf"),
            ("sim.timing.itl_ms=1e300", "[0, 604800000] ms (a week)"),
            ("sim.timing.ttft_ms=1e300", "[0, 604800000] ms"),
            ("sim.faults.stall_ms=1e300", "[0, 604800000] ms"),
            ("sim.faults.freeze_at_ms=inf", "[0, 604800000] ms"),
            ("scrape.interval_s=1e10", "[0.01, 604800] seconds"),
            ("slo.ttft_ms=1e300", "(0, 604800000] ms"),
            ("load.burstiness=1e-300", "[0.01, 100]"),
            ("workload.input_lengths=[128, 4000000000]", "1..=1048576 tokens, got 4000000000"),
            ("workload.max_tokens=4000000000", "1..=1048576 tokens, got 4000000000"),
            ("load.concurrency=4000000000", "1..=100000 requests, got 4000000000"),
            ("load.max_concurrency=200000", "1..=100000 requests"),
            ("load.requests=18446744073709551", "1..=1000000000 requests"),
            ("load.warmup_requests=9000000000000", "0..=1000000000 requests"),
            ("load.warmup_trials=1001", "0..=1000 trials, got 1001"),
            ("workload.repeats=4000000000", "1..=10000000, got 4000000000"),
            ("workload.repeats=5000000", "4 prompt lengths x 5000000 repeats = 20000000"),
            ("sim.timing.tokens_per_chunk=4000000000", "1..=1048576 tokens"),
            ("sim.timing.output_tokens=2000000", "1..=1048576 tokens"),
        ] {
            let o = Override::parse(set).unwrap();
            let err = c.resolve("default", &[o]).unwrap_err().to_string();
            assert!(err.starts_with(&format!("<command line>: --set {set}: ")), "{set}: {err}");
            assert!(err.contains("must be within") || err.contains("more than"), "{err}");
            assert!(err.contains(range), "{set}: {err}");
        }
        // The bounds themselves are valid.
        let ok = [
            "load.duration_s=604800",
            "load.rate=0.001",
            "load.rate=1000000",
            "client.grace_s=0",
            "load.concurrency=100000",
            "workload.max_tokens=1048576",
        ];
        let o: Vec<Override> = ok.iter().map(|s| Override::parse(s).unwrap()).collect();
        c.resolve("default", &o).unwrap();
    }

    #[test]
    fn out_of_range_numbers_in_the_file_are_refused_at_their_line() {
        let c = cfg("[profile.default.client]\ngrace_s = 5\nrequest_timeout_s = 1e20\n").unwrap();
        let err = c.resolve("default", &[]).unwrap_err();
        assert_eq!(err.line, Some(3), "{err}");
        assert!(err.to_string().starts_with("configs/bench.toml:3:1: client.request_timeout_s: must be within (0, 604800] seconds (a week), got 1e20"), "{err}");
        let c = cfg("[profile.default.workload]\ninput_lengths = [4000000000]\n").unwrap();
        let err = c.resolve("default", &[]).unwrap_err();
        assert_eq!(err.line, Some(2), "{err}");
        assert!(err.message.contains("every prompt length must be within 1..=1048576"), "{err}");
    }

    #[test]
    fn length_distributions_are_checked_at_their_line() {
        let c = cfg("[profile.default.workload]\nsamples = 5\n\
                     [profile.default.workload.input_distribution]\nkind = \"uniform\"\n\
                     min = 90\nmax = 30\n")
        .unwrap();
        let err = c.resolve("default", &[]).unwrap_err();
        assert_eq!(err.line, Some(5), "{err}");
        assert!(err.message.contains("workload.input_distribution.min: must not exceed max (30)"));
        let err =
            cfg("[profile.default.workload.output_distribution]\nkind = \"zipf\"\n").unwrap_err();
        assert_eq!(err.line, Some(2), "{err}");
        assert!(err.message.contains("lognormal") && err.message.contains("empirical"), "{err}");
        let ok =
            cfg("[profile.default.workload.input_distribution]\nkind = \"fixed\"\nvalue = 7\n")
                .unwrap();
        let p = ok.resolve("default", &[]).unwrap().profile;
        assert_eq!(
            p.workload.input_distribution,
            Some(super::super::LengthDist::Fixed { value: 7 })
        );
        let err = ok.resolve("default", &[Override::parse("workload.samples=0").unwrap()]);
        assert!(err.unwrap_err().to_string().contains("--set workload.samples=0"));
    }

    #[test]
    fn a_trace_replay_needs_its_file_and_its_mode() {
        let c = cfg("[profile.default.load]\nmode = \"trace\"\n").unwrap();
        let err = c.resolve("default", &[]).unwrap_err();
        assert!(err.message.contains("needs workload.trace = <file>"), "{err}");
        let c = cfg("[profile.default.workload]\ntrace = \"t.jsonl\"\n").unwrap();
        let err = c.resolve("default", &[]).unwrap_err();
        assert!(err.message.contains("load.mode = \"trace\""), "{err}");
        let ok = cfg("[profile.default.load]\nmode = \"trace\"\ntime_scale = 0.5\n\
                      [profile.default.workload]\ntrace = \"t.csv\"\ntrace_format = \"burstgpt\"\n")
        .unwrap();
        let p = ok.resolve("default", &[]).unwrap().profile;
        assert_eq!((p.load.mode, p.load.time_scale), (LoadMode::Trace, 0.5));
        assert_eq!(p.workload.trace_format, TraceFormat::Burstgpt);
        for (set, want) in [
            ("load.time_scale=0", "(0, 1000]"),
            ("load.trace_start_s=-1", "[0, 604800] seconds"),
            ("load.trace_duration_s=0", "(0, 604800] seconds"),
            ("load.max_rate=0", "requests per second"),
            ("workload.trace_block_tokens=0", "1..=1048576 tokens"),
            ("workload.trace_format=parquet", "mooncake"),
        ] {
            let err = ok.resolve("default", &[Override::parse(set).unwrap()]).unwrap_err();
            assert!(err.to_string().contains(&format!("--set {set}")), "{set}: {err}");
            assert!(err.to_string().contains(want), "{set}: {err}");
        }
    }

    #[test]
    fn conversations_are_checked_with_the_keys_they_need() {
        let ok = cfg("[profile.default.load]\nrate = 2.0\n\
                      [profile.default.workload]\nconversations = \"c.json\"\n\
                      [profile.default.workload.think_time_ms]\nkind = \"fixed\"\nvalue = 500\n")
        .unwrap();
        let p = ok.resolve("default", &[]).unwrap().profile;
        assert_eq!(p.workload.conversation_turns, TurnMode::Sessions);
        assert_eq!(p.workload.files(), vec![("workload.conversations", "c.json")]);
        for (set, want) in [
            ("load.mode=\"open\"", "sessions run in a closed loop"),
            ("workload.trace=\"t.csv\"", "load.mode = \"trace\""),
            ("workload.dataset=\"d.jsonl\"", "excludes workload.trace and workload.dataset"),
            ("workload.conversation_turns=\"first\"", "think time is between turns"),
            ("workload.conversation_format=\"csv\"", "sharegpt"),
        ] {
            let err = ok.resolve("default", &[Override::parse(set).unwrap()]).unwrap_err();
            assert!(err.to_string().contains(want), "{set}: {err}");
        }
        let zero = cfg("[profile.default.workload]\nconversations = \"c.json\"\n\
                        [profile.default.workload.think_time_ms]\nkind = \"fixed\"\nvalue = 0\n")
        .unwrap();
        let err = zero.resolve("default", &[]).unwrap_err().to_string();
        assert!(
            err.contains("workload.think_time_ms.value: must be within 1..=1048576 ms"),
            "{err}"
        );
        let err = cfg("[profile.default.workload]\nmax_tokens_from_answer = true\n")
            .unwrap()
            .resolve("default", &[])
            .unwrap_err();
        assert!(err.to_string().contains("recorded answers come from workload.conversations"));
    }

    #[test]
    fn headers_take_secrets_from_the_environment_only() {
        let c = cfg("[targets.gw]\nbase_url = \"https://gw\"\n[targets.gw.headers]\n\
                     X-Tenant = \"bench\"\nX-Api-Key = { env = \"GW_KEY\" }\n\
                     Authorization = { env = \"GW_AUTH\" }\n")
        .unwrap();
        let t = c.target("gw").unwrap();
        assert_eq!(t.headers["X-Tenant"], HeaderValue::Literal("bench".into()));
        assert_eq!(t.headers["X-Api-Key"], HeaderValue::Env { env: "GW_KEY".into() });
        let env = |v: &str| match v {
            "GW_KEY" => Some("k-123".to_string()),
            "GW_AUTH" => Some("Basic abc".to_string()),
            _ => None,
        };
        let values = t.header_values(env).unwrap();
        assert_eq!(values.len(), 3);
        assert!(values.contains(&("X-Api-Key".into(), "k-123".into())));
        let err = t.header_values(|_| None).unwrap_err().to_string();
        assert!(err.contains("GW_AUTH is not set") || err.contains("GW_KEY is not set"), "{err}");
        let err = t.header_values(|_| Some("abc\r\nX-Evil: 1".into())).unwrap_err().to_string();
        assert!(err.contains("newline") && !err.contains("abc"), "{err}");
        // The parsed config writes back as it was read.
        let text = toml::to_string(t).unwrap();
        assert!(
            text.contains("X-Api-Key = { env = \"GW_KEY\" }") || text.contains("[headers]"),
            "{text}"
        );

        for (line3, line, want) in [
            ("X-Api-Key = \"k-123\"", 4, "looks like a credential"),
            ("Cookie = \"s=1\"", 4, "looks like a credential"),
            ("\"Bad Name\" = \"x\"", 4, "not a valid header name"),
            ("Host = \"other\"", 4, "set by the client itself"),
            ("X-Route = { env = \"not a name\" }", 4, "NAME of an environment variable"),
            ("X-Route = { file = \"x\" }", 4, "{ env = \"VAR_NAME\" }"),
            ("X-Route = 3", 4, "a header value is a string"),
            ("X-Route = \" padded\"", 4, "surrounding whitespace"),
        ] {
            let text =
                format!("[targets.gw]\nbase_url = \"https://gw\"\n[targets.gw.headers]\n{line3}\n");
            let err = cfg(&text).unwrap_err();
            assert_eq!(err.line, Some(line), "{line3}: {err}");
            assert!(err.message.contains(want), "{line3}: {err}");
            assert!(!err.message.contains("k-123") && !err.message.contains("s=1"), "{err}");
        }
        let err = cfg("[targets.gw]\nbase_url = \"https://gw\"\napi_key_env = \"K\"\n\
                       [targets.gw.headers]\nauthorization = { env = \"A\" }\n")
        .unwrap_err();
        assert_eq!(err.line, Some(5), "{err}");
        assert!(err.message.contains("conflicts with api_key_env"), "{err}");
    }

    #[test]
    fn a_ca_bundle_must_be_a_pem_file_under_the_root() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("configs")).unwrap();
        let write = |text: &str| {
            std::fs::write(root.path().join("configs/bench.toml"), text).unwrap();
            BenchConfig::load_in(root.path(), Path::new("configs/bench.toml"))
        };
        let text = "[targets.gw]\nbase_url = \"https://gw\"\nca_bundle = \"certs/ca.pem\"\n";
        let err = write(text).unwrap_err();
        assert_eq!(err.line, Some(3), "{err}");
        assert!(err.message.contains("cannot read ca_bundle certs/ca.pem"), "{err}");
        std::fs::create_dir_all(root.path().join("certs")).unwrap();
        std::fs::write(root.path().join("certs/ca.pem"), "not a certificate").unwrap();
        let err = write(text).unwrap_err();
        assert!(err.message.contains("holds no PEM certificate"), "{err}");
        let pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
        std::fs::write(root.path().join("certs/ca.pem"), pem).unwrap();
        let c = write(text).unwrap();
        let t = c.target("gw").unwrap();
        assert_eq!(t.read_ca_bundle(root.path()).unwrap().unwrap(), pem.as_bytes());
        let err = cfg("[targets.gw]\nbase_url = \"https://gw\"\nca_bundle = \" \"\n").unwrap_err();
        assert_eq!(err.line, Some(3), "{err}");
    }

    #[test]
    fn targets_are_checked() {
        let err = cfg("[targets.x]\nbase_url = \"localhost:8000\"\n").unwrap_err();
        assert_eq!(err.line, Some(2));
        let err =
            cfg("[targets.x]\nbase_url = \"http://h\"\napi_key_env = \"abc def\"\n").unwrap_err();
        assert_eq!(err.line, Some(3));
        assert!(!err.to_string().contains("abc def"));
        let c = cfg("[targets.x]\nbase_url = \"http://h\"\n[profile.default]\ntarget = \"y\"\n")
            .unwrap();
        let err = c.resolve("default", &[]).unwrap_err();
        assert_eq!(err.line, Some(4), "{err}");
        assert!(err.message.contains("defined targets: x"), "{err}");
    }
}
