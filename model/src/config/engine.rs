//! `configs/engine.toml`: the inference parameters that decision records govern.
//!
//! One file drives both the real deployment (`cargo xtask engine args` renders it as `vllm serve`
//! or SGLang flags) and the embedded engine simulator (`bench::sim::engine`).
//!
//! ```toml
//! [engine]
//! model = "meta-llama/Llama-3.1-8B-Instruct"
//! dtype = "bfloat16"                 # auto | half | float16 | bfloat16 | float | float32
//! # quantization = "fp8"             # fp8 | awq | awq_marlin | gptq | gptq_marlin
//! tensor_parallel_size = 1
//! gpu_memory_utilization = 0.90
//! max_model_len = 8192
//!
//! [scheduler]
//! max_num_seqs = 256
//! max_num_batched_tokens = 8192
//! enable_chunked_prefill = true
//! enable_prefix_caching = true
//! scheduler_policy = "fcfs"          # fcfs | priority
//! block_size = 16
//!
//! [token_interval]
//! async_scheduling = false
//!
//! [batch]                            # optional: the batching strategy (default continuous)
//! strategy = "continuous"            # continuous | serial | fixed | token_budget
//! # fixed_batch_size = 8             # fixed: requests per batch
//! # max_wait_ms = 50                 # fixed, token_budget: how long a batch may wait to fill
//! # max_token_budget = 16384         # token_budget: prompt + max output tokens per batch
//!
//! [device]
//! name = "H100-SXM-80GB"
//! memory_gib = 80
//! price_per_hour = 2.49
//! count = 1
//!
//! [sim]                              # optional: only the simulator reads it
//! # model_profile = "llama-3.1-8b"   # when the model name is not a built-in profile
//! ```
//!
//! Every key except `engine.model` has a default (listed on each field); `engine args` renders
//! every value explicitly, so a deployment never depends on an engine version's own defaults.
//! Unknown keys are refused; errors name the file, the line and what is valid.
//!
//! `[batch]` selects the batching strategy. Real vLLM and SGLang batch continuously (the default);
//! the other strategies exist so the simulator can compare them (`cargo xtask bench
//! --compare-strategies`), and `engine args` refuses to render a file that selects one.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::key::ConfigKey;
use super::limits::{
    self, Low, MAX_DEVICE_COUNT, MAX_ENGINE_TOKENS, MAX_MEMORY_GIB, MAX_NUM_SEQS,
    MAX_PRICE_PER_HOUR,
};
use super::source::{ConfigError, Invalid, Source};

/// The parsed `configs/engine.toml`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineConfig {
    pub engine: EngineSection,
    #[serde(default)]
    pub scheduler: SchedulerSection,
    #[serde(default)]
    pub token_interval: TokenIntervalSection,
    /// The batching strategy. Absent = continuous batching, what vLLM and SGLang do.
    #[serde(default, skip_serializing_if = "BatchSection::is_default")]
    pub batch: BatchSection,
    /// The hardware the engine runs on. Not an engine flag; the simulator needs it and the bench
    /// takes the device price from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<DeviceSection>,
    /// Simulator-only settings (profiles, calibration constants); ignored by `engine args`.
    #[serde(default, skip_serializing_if = "SimSection::is_empty")]
    pub sim: SimSection,
}

/// `[engine]`: the model and how it is loaded.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineSection {
    /// Model id as the engine loads it (a Hugging Face id or a path).
    pub model: String,
    /// Weight and activation precision (vLLM's `--dtype`). Default `auto` (the checkpoint's
    /// 16-bit type).
    #[serde(default)]
    pub dtype: Dtype,
    /// Weight quantization method (vLLM's `--quantization`). Default: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quantization: Option<Quantization>,
    /// GPUs the model is sharded over. Default 1.
    #[serde(default = "one")]
    pub tensor_parallel_size: u32,
    /// Share of each GPU's memory the engine may use for weights, activations and KV cache.
    /// Default 0.9.
    #[serde(default = "default_gpu_memory_utilization")]
    pub gpu_memory_utilization: f64,
    /// Longest sequence (prompt + output) accepted. Default: the model's own context length.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_model_len: Option<u32>,
}

fn one() -> u32 {
    1
}

fn default_gpu_memory_utilization() -> f64 {
    0.9
}

/// `--dtype` values (vLLM's names; `half` = `float16`, `float` = `float32`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Dtype {
    #[default]
    Auto,
    Half,
    Float16,
    Bfloat16,
    Float,
    Float32,
}

impl Dtype {
    pub fn as_str(self) -> &'static str {
        match self {
            Dtype::Auto => "auto",
            Dtype::Half => "half",
            Dtype::Float16 => "float16",
            Dtype::Bfloat16 => "bfloat16",
            Dtype::Float => "float",
            Dtype::Float32 => "float32",
        }
    }

    /// Bytes per element of activations and KV cache (`auto` = the checkpoint's 16-bit type).
    pub fn bytes(self) -> u32 {
        match self {
            Dtype::Float | Dtype::Float32 => 4,
            _ => 2,
        }
    }

    pub fn is_float32(self) -> bool {
        matches!(self, Dtype::Float | Dtype::Float32)
    }
}

/// `--quantization` methods the simulator models.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Quantization {
    /// 8-bit float weights (W8A8 where the GPU has FP8 tensor cores, weight-only otherwise).
    Fp8,
    /// 4-bit AWQ weights, plain kernels (float16 activations only).
    Awq,
    /// 4-bit AWQ weights, Marlin kernels.
    AwqMarlin,
    /// 4-bit GPTQ weights, plain kernels (float16 activations only).
    Gptq,
    /// 4-bit GPTQ weights, Marlin kernels.
    GptqMarlin,
}

impl Quantization {
    pub fn as_str(self) -> &'static str {
        match self {
            Quantization::Fp8 => "fp8",
            Quantization::Awq => "awq",
            Quantization::AwqMarlin => "awq_marlin",
            Quantization::Gptq => "gptq",
            Quantization::GptqMarlin => "gptq_marlin",
        }
    }

    /// Kernels that accept float16 activations only.
    pub(crate) fn float16_only(self) -> bool {
        matches!(self, Quantization::Awq | Quantization::Gptq)
    }
}

/// `[scheduler]`: what one engine step may contain.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SchedulerSection {
    /// Most sequences in one step (running requests). Default 256.
    pub max_num_seqs: u32,
    /// Most tokens (prefill + decode) in one step. Default: 8192 with chunked prefill,
    /// max(max_model_len, 2048) without (see [`EngineConfig::max_num_batched_tokens`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_num_batched_tokens: Option<u32>,
    /// Split long prompts across steps. Default true.
    pub enable_chunked_prefill: bool,
    /// Reuse the KV blocks of identical prompt prefixes. Default true.
    pub enable_prefix_caching: bool,
    /// Order of the waiting queue and choice of preemption victims. Default `fcfs`.
    pub scheduler_policy: SchedulerPolicy,
    /// Tokens per KV cache block. Default 16.
    pub block_size: u32,
}

impl Default for SchedulerSection {
    fn default() -> Self {
        SchedulerSection {
            max_num_seqs: 256,
            max_num_batched_tokens: None,
            enable_chunked_prefill: true,
            enable_prefix_caching: true,
            scheduler_policy: SchedulerPolicy::Fcfs,
            block_size: 16,
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SchedulerPolicy {
    /// First come, first served; the newest running request is preempted first.
    #[default]
    Fcfs,
    /// Lowest `priority` value first (then arrival); the least urgent running request is
    /// preempted first.
    Priority,
}

impl SchedulerPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            SchedulerPolicy::Fcfs => "fcfs",
            SchedulerPolicy::Priority => "priority",
        }
    }
}

/// `[token_interval]`: the CPU work between forward passes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TokenIntervalSection {
    /// Schedule step n+1 on the CPU while step n runs on the GPU. Default false.
    pub async_scheduling: bool,
}

/// `[batch]`: how requests are grouped into the batches the engine steps over.
///
/// - `continuous` (default): vLLM's step loop; requests join and leave the running batch at
///   every step, under the `[scheduler]` limits.
/// - `serial`: one request at a time, run to completion.
/// - `fixed`: wait until `fixed_batch_size` requests are waiting or the oldest has waited
///   `max_wait_ms`, then run that batch to completion; nothing joins it meanwhile.
/// - `token_budget`: the same window, but a batch takes requests (in queue order) while their
///   prompt + max output tokens stay within `max_token_budget`.
///
/// The keys of other strategies are allowed (one file can serve a comparison) and ignored.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BatchSection {
    pub strategy: BatchStrategy,
    /// `fixed`: requests per batch. Default 8 (or `scheduler.max_num_seqs` when smaller); at
    /// most `scheduler.max_num_seqs`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fixed_batch_size: Option<u32>,
    /// `fixed`, `token_budget`: the longest the oldest waiting request waits for its batch to
    /// fill, in ms. Default 50.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_wait_ms: Option<f64>,
    /// `token_budget`: most prompt + max output tokens in one batch. Default max(16384,
    /// max_model_len); at least max_model_len, so every request fits a batch on its own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_token_budget: Option<u32>,
}

/// `[batch] strategy` values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BatchStrategy {
    #[default]
    Continuous,
    Serial,
    Fixed,
    TokenBudget,
}

impl BatchStrategy {
    pub const ALL: [BatchStrategy; 4] = [
        BatchStrategy::Serial,
        BatchStrategy::Fixed,
        BatchStrategy::TokenBudget,
        BatchStrategy::Continuous,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            BatchStrategy::Continuous => "continuous",
            BatchStrategy::Serial => "serial",
            BatchStrategy::Fixed => "fixed",
            BatchStrategy::TokenBudget => "token_budget",
        }
    }

    /// Parse a strategy name (as written in the file).
    pub fn parse(name: &str) -> Result<BatchStrategy, UnknownStrategy> {
        let name = name.trim();
        BatchStrategy::ALL
            .into_iter()
            .find(|s| s.as_str() == name)
            .ok_or_else(|| UnknownStrategy(name.to_string()))
    }
}

/// A batching strategy name that is none of [`BatchStrategy::ALL`] (the name, trimmed).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown batching strategy `{0}`; expected one of serial, fixed, token_budget, continuous")]
pub struct UnknownStrategy(pub String);

impl std::fmt::Display for BatchStrategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Default `[batch] fixed_batch_size`.
pub(crate) const DEFAULT_FIXED_BATCH_SIZE: u32 = 8;
/// Default `[batch] max_wait_ms`.
pub(crate) const DEFAULT_MAX_WAIT_MS: f64 = 50.0;
/// Smallest default `[batch] max_token_budget` (the default is max(this, max_model_len)).
pub(crate) const DEFAULT_MAX_TOKEN_BUDGET: u32 = 16384;

impl BatchSection {
    pub fn is_default(&self) -> bool {
        *self == BatchSection::default()
    }

    /// The batch size in effect: the configured one, else 8 (at most `max_num_seqs`).
    pub fn fixed_batch_size_for(&self, max_num_seqs: u32) -> u32 {
        self.fixed_batch_size.unwrap_or(DEFAULT_FIXED_BATCH_SIZE.min(max_num_seqs))
    }

    pub fn max_wait_ms(&self) -> f64 {
        self.max_wait_ms.unwrap_or(DEFAULT_MAX_WAIT_MS)
    }

    /// The token budget in effect once the model's context length is known.
    pub fn max_token_budget_for(&self, max_model_len: u32) -> u32 {
        self.max_token_budget.unwrap_or(DEFAULT_MAX_TOKEN_BUDGET.max(max_model_len))
    }
}

/// `[device]`: the hardware.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceSection {
    /// GPU model, e.g. `H100-SXM-80GB`, `A100-SXM-80GB`, `L40S`, `L4`.
    pub name: String,
    /// Memory of one GPU in GiB. Default: the simulator's device profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_gib: Option<f64>,
    /// Price of one GPU per hour (any currency; the bench reports cost in it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price_per_hour: Option<f64>,
    /// GPUs on the machine. Default: tensor_parallel_size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u32>,
}

/// `[sim]`: simulator-only settings. Every key is optional; absent keys take the values of the
/// built-in profiles (see `sim/src/engine/README.md`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SimSection {
    /// Built-in model profile to use when `engine.model` does not name one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_profile: Option<String>,
    /// Built-in device profile to use when `device.name` does not name one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_profile: Option<String>,
    /// Fixed GPU time per step besides reading the weights (launches, sampling), in µs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step_overhead_us: Option<f64>,
    /// Share of the GPU's peak tensor throughput that matrix multiplications reach (0..=1].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mfu: Option<f64>,
    /// Share of the GPU's peak memory bandwidth that weight and KV reads reach (0..=1].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bandwidth_efficiency: Option<f64>,
    /// CPU time per step that does not depend on the batch (scheduling, input preparation), µs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interval_base_us: Option<f64>,
    /// CPU time per sequence in a step (detokenization, stop checks, streaming), µs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interval_per_seq_us: Option<f64>,
}

impl SimSection {
    pub fn is_empty(&self) -> bool {
        *self == SimSection::default()
    }
}

/// Block sizes the engines accept.
pub(crate) const BLOCK_SIZES: [u32; 6] = [1, 8, 16, 32, 64, 128];

/// Default token budget per step with chunked prefill.
pub(crate) const DEFAULT_CHUNKED_BATCHED_TOKENS: u32 = 8192;

/// Smallest default token budget without chunked prefill (vLLM's rule: max(max_model_len, 2048)).
pub(crate) const MIN_UNCHUNKED_BATCHED_TOKENS: u32 = 2048;

impl EngineConfig {
    /// Read, parse and validate an engine-parameter file.
    pub fn read(path: &Path) -> Result<EngineConfig, ConfigError> {
        EngineConfig::from_source(&Source::read(path)?)
    }

    /// Parse and validate; errors are located in the file.
    pub fn from_source(source: &Source) -> Result<EngineConfig, ConfigError> {
        let cfg: EngineConfig = source.parse()?;
        cfg.validate().map_err(|invalid| locate_invalid(source, &invalid))?;
        Ok(cfg)
    }

    /// A config with every default and the given model (for tests and programmatic use).
    pub fn with_model(model: impl Into<String>) -> EngineConfig {
        EngineConfig {
            engine: EngineSection {
                model: model.into(),
                dtype: Dtype::Auto,
                quantization: None,
                tensor_parallel_size: 1,
                gpu_memory_utilization: default_gpu_memory_utilization(),
                max_model_len: None,
            },
            scheduler: SchedulerSection::default(),
            token_interval: TokenIntervalSection::default(),
            batch: BatchSection::default(),
            device: None,
            sim: SimSection::default(),
        }
    }

    /// The step token budget in effect: the configured value, else 8192 with chunked prefill,
    /// else max(max_model_len, 2048) (a prompt must fit one step whole). `None` when it depends
    /// on a max_model_len the file leaves to the model.
    pub fn max_num_batched_tokens(&self) -> Option<u32> {
        self.max_num_batched_tokens_for(self.engine.max_model_len)
    }

    /// [`Self::max_num_batched_tokens`] once the model's context length is known.
    pub fn max_num_batched_tokens_for(&self, max_model_len: Option<u32>) -> Option<u32> {
        match (self.scheduler.max_num_batched_tokens, self.scheduler.enable_chunked_prefill) {
            (Some(n), _) => Some(n),
            (None, true) => Some(DEFAULT_CHUNKED_BATCHED_TOKENS),
            (None, false) => max_model_len.map(|l| l.max(MIN_UNCHUNKED_BATCHED_TOKENS)),
        }
    }

    /// GPUs the deployment uses (the tensor-parallel group).
    pub(crate) fn gpus(&self) -> u32 {
        self.engine.tensor_parallel_size
    }

    /// Semantic checks: `(dotted key, message)` of the first problem.
    pub fn validate(&self) -> Result<(), Invalid> {
        let err = |k: &str, m: String| Err(Invalid(k.to_string(), m));
        let e = &self.engine;
        if e.model.trim().is_empty() {
            return err("engine.model", "must name a model (a Hugging Face id or a path)".into());
        }
        if !(1..=64).contains(&e.tensor_parallel_size) {
            return err(
                "engine.tensor_parallel_size",
                format!("must be within 1..=64, got {}", e.tensor_parallel_size),
            );
        }
        let u = e.gpu_memory_utilization;
        if !(u.is_finite() && u > 0.0 && u <= 1.0) {
            return err(
                "engine.gpu_memory_utilization",
                format!("is a share of GPU memory: within (0, 1], got {u}"),
            );
        }
        let tokens = |v: u32| limits::check_int(v.into(), 1, MAX_ENGINE_TOKENS.into(), "tokens");
        if let Some(n) = e.max_model_len {
            tokens(n).or_else(|m| err("engine.max_model_len", m.to_string()))?;
        }
        if let Some(q) = e.quantization {
            if q.float16_only()
                && matches!(e.dtype, Dtype::Bfloat16 | Dtype::Float | Dtype::Float32)
            {
                return err(
                    "engine.dtype",
                    format!(
                        "quantization \"{}\" runs with float16 activations only; use dtype = \
                         \"float16\" or \"auto\", or the Marlin kernels (\"{}_marlin\")",
                        q.as_str(),
                        q.as_str()
                    ),
                );
            }
        }
        let s = &self.scheduler;
        limits::check_int(s.max_num_seqs.into(), 1, MAX_NUM_SEQS.into(), "sequences")
            .or_else(|m| err("scheduler.max_num_seqs", m.to_string()))?;
        if let Some(n) = s.max_num_batched_tokens {
            tokens(n).or_else(|m| err("scheduler.max_num_batched_tokens", m.to_string()))?;
        }
        if let Some(n) = self.max_num_batched_tokens() {
            if n < s.max_num_seqs {
                return err(
                    "scheduler.max_num_batched_tokens",
                    format!(
                        "({n}) must be greater than or equal to max_num_seqs ({}): every \
                         running sequence needs a token of the step",
                        s.max_num_seqs
                    ),
                );
            }
            if let (false, Some(len)) = (s.enable_chunked_prefill, e.max_model_len) {
                if n < len {
                    return err(
                        "scheduler.max_num_batched_tokens",
                        format!(
                            "({n}) is smaller than max_model_len ({len}); without chunked prefill \
                             a prompt must fit one step whole, so longer prompts could never \
                             run. Increase max_num_batched_tokens, decrease max_model_len or \
                             set enable_chunked_prefill = true"
                        ),
                    );
                }
            }
        }
        if !BLOCK_SIZES.contains(&s.block_size) {
            return err(
                "scheduler.block_size",
                format!("must be one of 1, 8, 16, 32, 64, 128, got {}", s.block_size),
            );
        }
        let b = &self.batch;
        if let Some(n) = b.fixed_batch_size {
            if n == 0 {
                return err("batch.fixed_batch_size", "must be at least 1".into());
            }
            if n > s.max_num_seqs {
                return err(
                    "batch.fixed_batch_size",
                    format!(
                        "({n}) is greater than scheduler.max_num_seqs ({}), the most sequences \
                         one step runs",
                        s.max_num_seqs
                    ),
                );
            }
        }
        if let Some(w) = b.max_wait_ms {
            limits::millis(w, true).or_else(|m| err("batch.max_wait_ms", m.to_string()))?;
        }
        if let Some(n) = b.max_token_budget {
            tokens(n).or_else(|m| err("batch.max_token_budget", m.to_string()))?;
            if let Some(len) = e.max_model_len {
                if n < len {
                    return err(
                        "batch.max_token_budget",
                        format!(
                            "({n}) is smaller than engine.max_model_len ({len}); a request of \
                             max_model_len tokens could never join a batch. Increase \
                             max_token_budget or decrease max_model_len"
                        ),
                    );
                }
            }
        }
        if let Some(d) = &self.device {
            if d.name.trim().is_empty() {
                return err(
                    "device.name",
                    "must name the GPU model, e.g. \"H100-SXM-80GB\"".into(),
                );
            }
            if let Some(m) = d.memory_gib {
                limits::check_f64(m, Low::Open, 0.0, MAX_MEMORY_GIB, "GiB")
                    .or_else(|msg| err("device.memory_gib", msg.to_string()))?;
            }
            if let Some(p) = d.price_per_hour {
                limits::check_f64(p, Low::Closed, 0.0, MAX_PRICE_PER_HOUR, "per hour")
                    .or_else(|m| err("device.price_per_hour", m.to_string()))?;
            }
            if let Some(c) = d.count {
                limits::check_int(c.into(), 1, MAX_DEVICE_COUNT.into(), "GPUs")
                    .or_else(|m| err("device.count", m.to_string()))?;
                if c < e.tensor_parallel_size {
                    return err(
                        "device.count",
                        format!(
                            "({c}) is smaller than engine.tensor_parallel_size ({})",
                            e.tensor_parallel_size
                        ),
                    );
                }
            }
        }
        let sim = &self.sim;
        for (k, v) in [("sim.mfu", sim.mfu), ("sim.bandwidth_efficiency", sim.bandwidth_efficiency)]
        {
            if let Some(v) = v {
                if !(v.is_finite() && v > 0.0 && v <= 1.0) {
                    return err(k, format!("is a share of the peak: within (0, 1], got {v}"));
                }
            }
        }
        for (k, v) in [
            ("sim.step_overhead_us", sim.step_overhead_us),
            ("sim.interval_base_us", sim.interval_base_us),
            ("sim.interval_per_seq_us", sim.interval_per_seq_us),
        ] {
            if let Some(v) = v {
                limits::micros(v).or_else(|m| err(k, m.to_string()))?;
            }
        }
        Ok(())
    }
}

/// An error about a dotted key, at that key's line when the file sets it, else at its section.
pub fn locate(source: &Source, key: &ConfigKey, message: &str) -> ConfigError {
    let parts = key.path();
    if source.locate(&parts).is_some() {
        return source.error_at(&parts, format!("{key}: {message}"));
    }
    let section = &parts[..1];
    source.error_at(section, format!("{key}: {message}"))
}

/// A problem a check found ([`Invalid`]: its dotted key and message), located as [`locate`]
/// does; one whose key is not a dotted key is the file's error without a line.
pub fn locate_invalid(source: &Source, invalid: &Invalid) -> ConfigError {
    let Invalid(key, message) = invalid;
    match ConfigKey::parse(key) {
        Ok(k) => locate(source, &k, message),
        Err(_) => source.error(None, format!("{key}: {message}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(text: &str) -> Result<EngineConfig, ConfigError> {
        EngineConfig::from_source(&Source::new("configs/engine.toml", text))
    }

    const MINIMAL: &str = "[engine]\nmodel = \"meta-llama/Llama-3.1-8B-Instruct\"\n";

    #[test]
    fn defaults_fill_everything_but_the_model() {
        let c = cfg(MINIMAL).unwrap();
        assert_eq!(c.engine.tensor_parallel_size, 1);
        assert_eq!(c.engine.dtype, Dtype::Auto);
        assert_eq!(c.scheduler.max_num_seqs, 256);
        assert!(c.scheduler.enable_chunked_prefill);
        assert_eq!(c.max_num_batched_tokens(), Some(8192));
        assert!(!c.token_interval.async_scheduling);
        assert!(c.device.is_none());
        let err = cfg("[engine]\ndtype = \"half\"\n").unwrap_err();
        assert!(err.message.contains("model"), "{err}");
    }

    #[test]
    fn unknown_keys_are_refused_at_their_line() {
        let err = cfg(&format!("{MINIMAL}[scheduler]\nmax_num_seq = 8\n")).unwrap_err();
        assert_eq!(err.line, Some(4), "{err}");
        assert!(err.message.contains("max_num_seqs"), "lists the valid keys: {err}");
        let err = cfg(&format!("{MINIMAL}[batching]\n")).unwrap_err();
        assert_eq!(err.line, Some(3), "{err}");
    }

    #[test]
    fn bad_choices_list_the_valid_ones() {
        let err = cfg(&format!("{MINIMAL}[scheduler]\nscheduler_policy = \"lifo\"\n")).unwrap_err();
        assert_eq!(err.line, Some(4), "{err}");
        assert!(err.message.contains("fcfs") && err.message.contains("priority"), "{err}");
        let err = cfg(&format!("{MINIMAL}quantization = \"int3\"\n")).unwrap_err();
        assert_eq!(err.line, Some(3), "{err}");
        assert!(err.message.contains("awq_marlin"), "{err}");
        let err = cfg(&format!("{MINIMAL}dtype = \"fp16\"\n")).unwrap_err();
        assert!(err.message.contains("bfloat16"), "{err}");
    }

    #[test]
    fn semantic_errors_name_the_key_and_line() {
        let err = cfg(&format!("{MINIMAL}gpu_memory_utilization = 1.2\n")).unwrap_err();
        assert_eq!(err.line, Some(3), "{err}");
        assert!(err.to_string().starts_with("configs/engine.toml:3:"), "{err}");
        assert!(err.message.contains("(0, 1]"), "{err}");

        let err = cfg(&format!("{MINIMAL}[scheduler]\nblock_size = 12\n")).unwrap_err();
        assert_eq!(err.line, Some(4), "{err}");
        assert!(err.message.contains("16"), "{err}");

        let err = cfg(&format!(
            "{MINIMAL}[scheduler]\nmax_num_seqs = 512\nmax_num_batched_tokens = 256\n"
        ))
        .unwrap_err();
        assert_eq!(err.line, Some(5), "{err}");
        assert!(err.message.contains("max_num_seqs (512)"), "{err}");
    }

    #[test]
    fn without_chunked_prefill_a_step_must_hold_the_longest_prompt() {
        let text = format!(
            "{MINIMAL}max_model_len = 16384\n[scheduler]\nenable_chunked_prefill = false\n\
             max_num_batched_tokens = 8192\n"
        );
        let err = cfg(&text).unwrap_err();
        assert_eq!(err.line, Some(6), "{err}");
        assert!(err.message.contains("max_model_len (16384)"), "{err}");
        // With chunked prefill the same budget is fine.
        cfg(&text.replace("= false", "= true")).unwrap();
        // Unset budget without chunking defaults to a step that holds max_model_len.
        let c = cfg(&format!(
            "{MINIMAL}max_model_len = 16384\n[scheduler]\nenable_chunked_prefill = false\n"
        ))
        .unwrap();
        assert_eq!(c.max_num_batched_tokens(), Some(16384));
    }

    #[test]
    fn float16_only_kernels_refuse_bfloat16() {
        let err =
            cfg(&format!("{MINIMAL}dtype = \"bfloat16\"\nquantization = \"awq\"\n")).unwrap_err();
        assert_eq!(err.line, Some(3), "{err}");
        assert!(err.message.contains("awq_marlin"), "{err}");
        cfg(&format!("{MINIMAL}dtype = \"bfloat16\"\nquantization = \"awq_marlin\"\n")).unwrap();
    }

    #[test]
    fn device_checks() {
        let err = cfg(&format!(
            "{MINIMAL}tensor_parallel_size = 4\n[device]\nname = \"H100-SXM-80GB\"\ncount = 2\n"
        ))
        .unwrap_err();
        assert_eq!(err.line, Some(6), "{err}");
        let err = cfg(&format!("{MINIMAL}[device]\nname = \"L4\"\nmemory_gib = -1\n")).unwrap_err();
        assert_eq!(err.line, Some(5), "{err}");
        let err = cfg(&format!("{MINIMAL}[device]\nmemory_gib = 24\n")).unwrap_err();
        assert!(err.message.contains("name"), "{err}");
        let err = cfg(&format!("{MINIMAL}[sim]\nmfu = 0\n")).unwrap_err();
        assert_eq!(err.line, Some(4), "{err}");
    }

    #[test]
    fn sizes_and_counts_have_documented_upper_bounds() {
        for (text, line, range) in [
            ("[device]\nname = \"L4\"\nmemory_gib = 1e300\n", 5, "(0, 1024] GiB, got 1e300"),
            ("[device]\nname = \"L4\"\nprice_per_hour = inf\n", 5, "[0, 1000000] per hour"),
            ("[device]\nname = \"L4\"\ncount = 100000\n", 5, "1..=4096 GPUs"),
            ("max_model_len = 4000000000\n", 3, "1..=16777216 tokens"),
            ("[scheduler]\nmax_num_seqs = 4000000000\n", 4, "1..=65536 sequences"),
            ("[scheduler]\nmax_num_batched_tokens = 0\n", 4, "1..=16777216 tokens"),
            ("[batch]\nmax_wait_ms = 1e300\n", 4, "[0, 604800000] ms"),
            ("[batch]\nmax_token_budget = 4000000000\n", 4, "1..=16777216 tokens"),
            ("[sim]\nstep_overhead_us = 1e300\n", 4, "[0, 604800000000] µs"),
        ] {
            let err = cfg(&format!("{MINIMAL}{text}")).unwrap_err();
            assert_eq!(err.line, Some(line), "{text}: {err}");
            assert!(err.message.contains(&format!("must be within {range}")), "{text}: {err}");
        }
        cfg(&format!("{MINIMAL}[device]\nname = \"L4\"\nmemory_gib = 1024\n")).unwrap();
    }

    #[test]
    fn the_batch_section_defaults_to_continuous_and_is_checked_at_its_lines() {
        let c = cfg(MINIMAL).unwrap();
        assert_eq!(c.batch, BatchSection::default());
        assert_eq!(c.batch.strategy, BatchStrategy::Continuous);
        // An absent section stays absent when the config is written back.
        assert!(!toml::to_string(&c).unwrap().contains("[batch]"));
        let c =
            cfg(&format!("{MINIMAL}max_model_len = 4096\n[batch]\nstrategy = \"token_budget\"\n"))
                .unwrap();
        assert_eq!(c.batch.max_token_budget_for(4096), 16384);
        assert_eq!(c.batch.max_token_budget_for(32768), 32768);
        assert_eq!((c.batch.fixed_batch_size_for(256), c.batch.max_wait_ms()), (8, 50.0));
        assert_eq!(c.batch.fixed_batch_size_for(4), 4);

        let err = cfg(&format!("{MINIMAL}[batch]\nstrategy = \"dynamic\"\n")).unwrap_err();
        assert_eq!(err.line, Some(4), "{err}");
        for s in ["continuous", "serial", "fixed", "token_budget"] {
            assert!(err.message.contains(s), "{err}");
        }
        let err = cfg(&format!("{MINIMAL}[batch]\nbatch_size = 8\n")).unwrap_err();
        assert_eq!(err.line, Some(4), "{err}");
        assert!(err.message.contains("fixed_batch_size"), "{err}");
        let err = cfg(&format!("{MINIMAL}[batch]\nfixed_batch_size = 0\n")).unwrap_err();
        assert_eq!(err.line, Some(4), "{err}");
        let err = cfg(&format!(
            "{MINIMAL}[scheduler]\nmax_num_seqs = 16\n[batch]\nstrategy = \"fixed\"\n\
             fixed_batch_size = 32\n"
        ))
        .unwrap_err();
        assert_eq!(err.line, Some(7), "{err}");
        assert!(err.message.contains("max_num_seqs (16)"), "{err}");
        let err = cfg(&format!("{MINIMAL}[batch]\nmax_wait_ms = -1\n")).unwrap_err();
        assert_eq!(err.line, Some(4), "{err}");
        let err =
            cfg(&format!("{MINIMAL}max_model_len = 8192\n[batch]\nmax_token_budget = 4096\n"))
                .unwrap_err();
        assert_eq!(err.line, Some(5), "{err}");
        assert!(err.to_string().starts_with("configs/engine.toml:5:"), "{err}");
        assert!(err.message.contains("max_model_len (8192)"), "{err}");
        // Keys of other strategies are allowed (one file serves a comparison).
        cfg(&format!(
            "{MINIMAL}[batch]\nstrategy = \"serial\"\nfixed_batch_size = 4\n\
             max_token_budget = 200000\n"
        ))
        .unwrap();
        assert_eq!(BatchStrategy::parse("token_budget"), Ok(BatchStrategy::TokenBudget));
        assert_eq!(
            BatchStrategy::parse(" fixd ").unwrap_err().to_string(),
            "unknown batching strategy `fixd`; expected one of serial, fixed, token_budget, \
             continuous"
        );
    }

    #[test]
    fn shipped_configs_are_valid() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        for name in ["engine.toml", "engine-tuned.toml"] {
            let c = EngineConfig::read(&root.join("configs").join(name))
                .unwrap_or_else(|e| panic!("{e}"));
            assert!(c.device.is_some(), "{name} names its device");
        }
    }
}
