//! From an engine config to the numbers the engine runs on: limits, the KV block budget and the
//! step cost model. The formulas are documented in `README.md` next to this file.

use std::fmt;
use std::path::Path;

use infergate_model::config::engine::DeviceSection;
use infergate_model::config::engine::locate_invalid;
use infergate_model::config::{
    ConfigError, Dtype, EngineConfig, Quantization, SchedulerPolicy, Source,
};

use super::profile::{self, DeviceProfile, ModelProfile};
use super::strategies::Strategy;

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// Defaults of the `[sim]` calibration constants.
pub(crate) const DEFAULT_STEP_OVERHEAD_US: f64 = 300.0;
pub(crate) const DEFAULT_MFU: f64 = 0.5;
pub(crate) const DEFAULT_BANDWIDTH_EFFICIENCY: f64 = 0.8;
pub(crate) const DEFAULT_INTERVAL_BASE_US: f64 = 1000.0;
pub(crate) const DEFAULT_INTERVAL_PER_SEQ_US: f64 = 50.0;
/// GPU memory outside weights, activations and KV cache (CUDA context, graphs, NCCL), GiB.
pub(crate) const RUNTIME_OVERHEAD_GIB: f64 = 1.0;

/// The engine config resolved against the model and device profiles.
#[derive(Clone, Debug)]
pub struct EngineSpec {
    pub config: EngineConfig,
    pub model: &'static ModelProfile,
    pub device: &'static DeviceProfile,
    /// The name the simulator serves the model under (`sim/<engine.model>`).
    pub served_model_name: String,
    pub tensor_parallel_size: u32,
    pub max_model_len: u32,
    pub max_num_seqs: u32,
    pub max_num_batched_tokens: u32,
    pub block_size: u32,
    /// KV cache blocks (per GPU; every GPU of the tensor-parallel group holds the same blocks).
    pub num_blocks: u32,
    pub chunked_prefill: bool,
    pub prefix_caching: bool,
    pub policy: SchedulerPolicy,
    /// The batching strategy (`[batch]`).
    pub strategy: Strategy,
    pub memory: MemoryPlan,
    pub cost: CostModel,
}

/// Memory of one GPU, GiB.
#[derive(Clone, Debug, PartialEq)]
pub struct MemoryPlan {
    pub device_gib: f64,
    /// device_gib x gpu_memory_utilization.
    pub budget_gib: f64,
    pub weights_gib: f64,
    /// Peak activations of a full step (max_num_batched_tokens) plus the logits of
    /// max_num_seqs sequences.
    pub activation_gib: f64,
    pub runtime_gib: f64,
    /// What is left for the KV cache.
    pub kv_gib: f64,
    /// KV cache bytes one token occupies on one GPU.
    pub kv_bytes_per_token: f64,
}

/// Time of one engine step (nanoseconds):
///
/// ```text
/// forward  = step_fixed + prefill_token x prefill tokens + decode_seq x decoding sequences
///            + kv_token x KV tokens read
/// interval = interval_base + interval_seq x sequences in the step
/// step     = forward + interval             (synchronous scheduling)
///          = max(forward, interval)         (async_scheduling)
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct CostModel {
    pub step_fixed_ns: f64,
    pub prefill_token_ns: f64,
    pub decode_seq_ns: f64,
    pub kv_token_ns: f64,
    pub interval_base_ns: f64,
    pub interval_seq_ns: f64,
    pub async_scheduling: bool,
}

impl CostModel {
    pub(crate) fn forward_ns(&self, prefill_tokens: u64, decode_seqs: u64, kv_tokens: u64) -> f64 {
        self.step_fixed_ns
            + self.prefill_token_ns * prefill_tokens as f64
            + self.decode_seq_ns * decode_seqs as f64
            + self.kv_token_ns * kv_tokens as f64
    }

    pub(crate) fn interval_ns(&self, seqs: u64) -> f64 {
        self.interval_base_ns + self.interval_seq_ns * seqs as f64
    }

    pub(crate) fn step_ns(&self, forward_ns: f64, interval_ns: f64) -> f64 {
        if self.async_scheduling { forward_ns.max(interval_ns) } else { forward_ns + interval_ns }
    }
}

/// A config the simulator cannot run, with the key to blame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecError {
    /// Dotted key (`engine.max_model_len`).
    pub key: String,
    pub message: String,
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.key, self.message)
    }
}

impl std::error::Error for SpecError {}

impl SpecError {
    fn new(key: &str, message: String) -> SpecError {
        SpecError { key: key.to_string(), message }
    }

    /// The error at its key's line in the file the config came from.
    pub fn locate(&self, source: &Source) -> ConfigError {
        locate_invalid(
            source,
            &infergate_model::config::Invalid(self.key.clone(), self.message.clone()),
        )
    }
}

impl EngineSpec {
    /// The same engine with every step `factor` times as long (each term of the step cost
    /// scaled): TTFT and TPOT `factor` times worse, a known change for tests of the statistics.
    pub fn slower(&self, factor: f64) -> EngineSpec {
        let mut s = self.clone();
        let c = &mut s.cost;
        for v in [
            &mut c.step_fixed_ns,
            &mut c.prefill_token_ns,
            &mut c.decode_seq_ns,
            &mut c.kv_token_ns,
            &mut c.interval_base_ns,
            &mut c.interval_seq_ns,
        ] {
            *v *= factor;
        }
        s
    }

    /// Read an engine-parameter file and resolve it; every error names the file and line.
    pub fn load(path: &Path) -> Result<EngineSpec, ConfigError> {
        let source = Source::read(path)?;
        let config = EngineConfig::from_source(&source)?;
        EngineSpec::new(&config).map_err(|e| e.locate(&source))
    }

    /// Resolve a (validated) config against the built-in profiles.
    pub fn new(config: &EngineConfig) -> Result<EngineSpec, SpecError> {
        config
            .validate()
            .map_err(|infergate_model::config::Invalid(k, m)| SpecError::new(&k, m))?;
        let (e, s) = (&config.engine, &config.scheduler);
        let (model, device, dev_cfg) = profiles(config)?;
        let (max_model_len, max_num_batched_tokens) = context_limits(config, model)?;
        let precision = Precision::of(config, device);
        let strategy = Strategy::from_config(&config.batch, max_model_len, s.max_num_seqs);
        if let Strategy::TokenBudget { budget, .. } = strategy {
            if budget < max_model_len as u64 {
                return Err(SpecError::new(
                    "batch.max_token_budget",
                    format!(
                        "({budget}) is smaller than the model's context length ({max_model_len}); \
                         a request that long could never join a batch. Increase \
                         max_token_budget or set engine.max_model_len"
                    ),
                ));
            }
        }
        let device_gib = dev_cfg.memory_gib.unwrap_or(device.memory_gib);
        let memory = memory_plan(config, model, device_gib, &precision, max_num_batched_tokens)?;
        let num_blocks = kv_blocks(&memory, s.block_size, max_model_len)?;
        let cost = cost_model(config, model, device, &precision, memory.kv_bytes_per_token);
        Ok(EngineSpec {
            config: config.clone(),
            model,
            device,
            served_model_name: format!("sim/{}", e.model),
            tensor_parallel_size: e.tensor_parallel_size,
            max_model_len,
            max_num_seqs: s.max_num_seqs,
            max_num_batched_tokens,
            block_size: s.block_size,
            num_blocks,
            chunked_prefill: s.enable_chunked_prefill,
            prefix_caching: s.enable_prefix_caching,
            policy: s.scheduler_policy,
            strategy,
            memory,
            cost,
        })
    }

    /// One line for `/v1/models` and logs.
    pub fn describe(&self) -> String {
        format!(
            "engine model: {} on {}x {} ({}), {} KV blocks of {} tokens, max_num_seqs {}, \
             max_num_batched_tokens {}, chunked prefill {}, prefix caching {}, {} scheduling, {}",
            self.model.key,
            self.tensor_parallel_size,
            self.device.key,
            match self.config.engine.quantization {
                Some(q) => q.as_str().to_string(),
                None => precision_name(self.config.engine.dtype).to_string(),
            },
            self.num_blocks,
            self.block_size,
            self.max_num_seqs,
            self.max_num_batched_tokens,
            on_off(self.chunked_prefill),
            on_off(self.prefix_caching),
            if self.cost.async_scheduling { "async" } else { "sync" },
            self.strategy.describe(),
        )
    }
}

impl EngineSpec {
    /// The engine config served, as vLLM's `GET /server_info?config_format=json` shows its own
    /// (`{"vllm_config": {"model_config": ..., "cache_config": ..., "scheduler_config": ...,
    /// "parallel_config": ...}}`): the values in effect, defaults and derived budgets
    /// included.
    pub fn server_info(&self) -> serde_json::Value {
        let e = &self.config.engine;
        serde_json::json!({"vllm_config": {
            "model_config": {
                "model": e.model,
                "served_model_name": self.served_model_name,
                "dtype": e.dtype.as_str(),
                "quantization": e.quantization.map(|q| q.as_str()),
                "max_model_len": self.max_model_len,
            },
            "cache_config": {
                "block_size": self.block_size,
                "gpu_memory_utilization": e.gpu_memory_utilization,
                "enable_prefix_caching": self.prefix_caching,
                "cache_dtype": "auto",
                "num_gpu_blocks": self.num_blocks,
            },
            "scheduler_config": {
                "max_num_seqs": self.max_num_seqs,
                "max_num_batched_tokens": self.max_num_batched_tokens,
                "enable_chunked_prefill": self.chunked_prefill,
                "policy": self.policy.as_str(),
                "async_scheduling": self.cost.async_scheduling,
            },
            "parallel_config": {"tensor_parallel_size": self.tensor_parallel_size},
        }})
    }
}

fn on_off(b: bool) -> &'static str {
    if b { "on" } else { "off" }
}

fn precision_name(d: Dtype) -> &'static str {
    match d {
        Dtype::Auto | Dtype::Bfloat16 => "bf16",
        Dtype::Half | Dtype::Float16 => "fp16",
        Dtype::Float | Dtype::Float32 => "fp32",
    }
}

/// The model and device profiles a config names (its `[sim]` overrides first), and its
/// `[device]` section.
fn profiles(
    config: &EngineConfig,
) -> Result<(&'static ModelProfile, &'static DeviceProfile, &DeviceSection), SpecError> {
    let (e, sim) = (&config.engine, &config.sim);
    let (model_key, model_name) = match &sim.model_profile {
        Some(p) => ("sim.model_profile", p.as_str()),
        None => ("engine.model", e.model.as_str()),
    };
    let model = profile::find_model(model_name).ok_or_else(|| {
        SpecError::new(
            model_key,
            format!(
                "the simulator has no model profile for `{model_name}`; set [sim] \
                 model_profile to the built-in profile of the same shape: {}",
                profile::model_keys()
            ),
        )
    })?;
    let Some(dev_cfg) = &config.device else {
        return Err(SpecError::new(
            "device",
            format!(
                "the simulator needs a [device] section (name = one of {})",
                profile::device_keys()
            ),
        ));
    };
    let (device_key, device_name) = match &sim.device_profile {
        Some(p) => ("sim.device_profile", p.as_str()),
        None => ("device.name", dev_cfg.name.as_str()),
    };
    let device = profile::find_device(device_name).ok_or_else(|| {
        SpecError::new(
            device_key,
            format!(
                "the simulator has no device profile for `{device_name}`; set [sim] \
                 device_profile to the closest of: {}",
                profile::device_keys()
            ),
        )
    })?;
    Ok((model, device, dev_cfg))
}

/// `max_model_len` and `max_num_batched_tokens`, checked against the model and against each
/// other (tensor parallelism must divide the heads).
fn context_limits(config: &EngineConfig, model: &ModelProfile) -> Result<(u32, u32), SpecError> {
    let (e, s) = (&config.engine, &config.scheduler);
    let tp = e.tensor_parallel_size;
    if model.heads % tp != 0 {
        return Err(SpecError::new(
            "engine.tensor_parallel_size",
            format!(
                "the model's {} attention heads are not divisible by tensor_parallel_size {tp}",
                model.heads
            ),
        ));
    }
    let max_model_len = e.max_model_len.unwrap_or(model.max_position);
    if max_model_len > model.max_position {
        return Err(SpecError::new(
            "engine.max_model_len",
            format!(
                "({max_model_len}) is greater than the model's context length ({})",
                model.max_position
            ),
        ));
    }
    let max_num_batched_tokens = config
        .max_num_batched_tokens_for(Some(max_model_len))
        .expect("known once max_model_len is");
    if !s.enable_chunked_prefill && max_num_batched_tokens < max_model_len {
        return Err(SpecError::new(
            "scheduler.max_num_batched_tokens",
            format!(
                "({max_num_batched_tokens}) is smaller than the model's context length \
                 ({max_model_len}); without chunked prefill a prompt must fit one step. Set \
                 engine.max_model_len or enable chunked prefill"
            ),
        ));
    }
    Ok((max_model_len, max_num_batched_tokens))
}

/// Bytes per activation and per weight, and the tensor throughput they run at.
struct Precision {
    act_bytes: f64,
    weight_bytes: f64,
    tflops: f64,
}

impl Precision {
    fn of(config: &EngineConfig, device: &DeviceProfile) -> Precision {
        let e = &config.engine;
        let act_bytes = e.dtype.bytes() as f64;
        let base_tflops =
            if e.dtype.is_float32() { device.bf16_tflops / 2.0 } else { device.bf16_tflops };
        let (weight_bytes, tflops) = match e.quantization {
            None => (act_bytes, base_tflops),
            Some(Quantization::Fp8) => (1.0, device.fp8_tflops.unwrap_or(base_tflops)),
            Some(Quantization::Awq | Quantization::Gptq) => (0.53125, base_tflops * 0.6),
            Some(Quantization::AwqMarlin | Quantization::GptqMarlin) => {
                (0.53125, base_tflops * 0.9)
            }
        };
        Precision { act_bytes, weight_bytes, tflops }
    }
}

/// The memory of one GPU of `device_gib`: weights, activations, runtime and what is left for
/// the KV cache (refused when nothing is).
fn memory_plan(
    config: &EngineConfig,
    model: &ModelProfile,
    device_gib: f64,
    p: &Precision,
    max_num_batched_tokens: u32,
) -> Result<MemoryPlan, SpecError> {
    let (e, s) = (&config.engine, &config.scheduler);
    let tp = e.tensor_parallel_size;
    let budget_gib = device_gib * e.gpu_memory_utilization;
    let weights_gib = model.params * p.weight_bytes / tp as f64 / GIB;
    let act_per_token =
        (2.0 * model.intermediate as f64 / tp as f64 + 4.0 * model.hidden as f64) * p.act_bytes;
    let activation_gib = (max_num_batched_tokens as f64 * act_per_token
        + s.max_num_seqs as f64 * model.vocab as f64 * 4.0)
        / GIB;
    let kv_heads_per_gpu = (model.kv_heads / tp).max(1);
    let kv_bytes_per_token =
        2.0 * model.layers as f64 * kv_heads_per_gpu as f64 * model.head_dim as f64 * p.act_bytes;
    let kv_gib = budget_gib - weights_gib - activation_gib - RUNTIME_OVERHEAD_GIB;
    if kv_gib <= 0.0 {
        return Err(SpecError::new(
            "engine.gpu_memory_utilization",
            format!(
                "no memory is left for the KV cache: {budget_gib:.1} GiB per GPU \
                 ({device_gib} GiB x {}) holds {weights_gib:.1} GiB of weights, \
                 {activation_gib:.1} GiB of activations and {RUNTIME_OVERHEAD_GIB} GiB of \
                 runtime. Raise gpu_memory_utilization or tensor_parallel_size, quantize, or \
                 lower max_num_batched_tokens",
                e.gpu_memory_utilization
            ),
        ));
    }
    Ok(MemoryPlan {
        device_gib,
        budget_gib,
        weights_gib,
        activation_gib,
        runtime_gib: RUNTIME_OVERHEAD_GIB,
        kv_gib,
        kv_bytes_per_token,
    })
}

/// KV cache blocks of `block_size` tokens in the plan's KV memory; refused when the longest
/// request would not fit.
fn kv_blocks(memory: &MemoryPlan, block_size: u32, max_model_len: u32) -> Result<u32, SpecError> {
    let blocks = (memory.kv_gib * GIB / (memory.kv_bytes_per_token * block_size as f64)).floor();
    let num_blocks = blocks.min(u32::MAX as f64 / 2.0) as u32;
    let kv_tokens = num_blocks as u64 * block_size as u64;
    if kv_tokens < max_model_len as u64 {
        return Err(SpecError::new(
            "engine.max_model_len",
            format!(
                "({max_model_len}) is larger than the maximum number of tokens that can be \
                 stored in the KV cache ({kv_tokens}: {num_blocks} blocks of {block_size}). \
                 Raise gpu_memory_utilization or decrease max_model_len"
            ),
        ));
    }
    Ok(num_blocks)
}

/// The step cost model (README: compute, memory bandwidth, tensor-parallel communication).
fn cost_model(
    config: &EngineConfig,
    model: &ModelProfile,
    device: &DeviceProfile,
    p: &Precision,
    kv_bytes_per_token: f64,
) -> CostModel {
    let sim = &config.sim;
    let tp = config.engine.tensor_parallel_size;
    let flops = p.tflops * 1e12 * sim.mfu.unwrap_or(DEFAULT_MFU);
    let bw =
        device.mem_bw_gbs * 1e9 * sim.bandwidth_efficiency.unwrap_or(DEFAULT_BANDWIDTH_EFFICIENCY);
    let tpf = tp as f64;
    let (comm_fixed_ns, comm_token_ns) = if tp > 1 {
        let per_token_bytes =
            2.0 * model.layers as f64 * model.hidden as f64 * p.act_bytes * 2.0 * (tpf - 1.0) / tpf;
        (
            2.0 * model.layers as f64 * device.allreduce_us * 1e3,
            per_token_bytes / (device.link_gbs * 1e9) * 1e9,
        )
    } else {
        (0.0, 0.0)
    };
    let weights_read_ns = model.params * p.weight_bytes / tpf / bw * 1e9;
    CostModel {
        step_fixed_ns: sim.step_overhead_us.unwrap_or(DEFAULT_STEP_OVERHEAD_US) * 1e3
            + weights_read_ns
            + comm_fixed_ns,
        prefill_token_ns: 2.0 * (model.params - model.lm_head_params()) / tpf / flops * 1e9
            + comm_token_ns,
        decode_seq_ns: 2.0 * model.params / tpf / flops * 1e9 + comm_token_ns,
        kv_token_ns: kv_bytes_per_token / bw * 1e9,
        interval_base_ns: sim.interval_base_us.unwrap_or(DEFAULT_INTERVAL_BASE_US) * 1e3,
        interval_seq_ns: sim.interval_per_seq_us.unwrap_or(DEFAULT_INTERVAL_PER_SEQ_US) * 1e3,
        async_scheduling: config.token_interval.async_scheduling,
    }
}
