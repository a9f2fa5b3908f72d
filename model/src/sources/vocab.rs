//! Each engine's spellings of its parameters and the canonical keys of the engine config
//! (`configs/engine.toml`) they set, with the type of each.
//!
//! A table row is a command-line spelling (`--max-num-seqs`, `-np`) or a key that only a
//! configuration file uses (TensorRT-LLM's `kv_cache_config.free_gpu_memory_fraction`). A key of
//! a YAML, JSON or TOML mapping matches a row whatever its case and separators: `max-num-seqs`,
//! `max_num_seqs` and the production-stack chart's `maxNumSeqs` are one spelling. A long flag
//! matches with `_` for `-` as well (`--max_num_seqs`). vLLM's rows are the reverse of
//! `cargo xtask engine args` (every flag it renders), SGLang's likewise where SGLang has one.
//!
//! Conversions that are not one to one ([`Rule`] other than `Value`):
//! - a switch sets a boolean key (`--no-enable-chunked-prefill` -> `false`,
//!   SGLang's `--disable-radix-cache` -> `scheduler.enable_prefix_caching = false`);
//! - SGLang's `--chunked-prefill-size N`: chunked prefill on with a budget of N tokens, `-1` off;
//!   `--max-prefill-tokens` is the step budget when chunked prefill is off, its own key
//!   (`sglang.max_prefill_tokens`) when `--chunked-prefill-size` sets the budget;
//! - llama.cpp's `-c` is the context shared by all slots: `engine.max_model_len` is `-c / -np`,
//!   and without `-np` the value stays `llama_cpp.ctx_size`;
//! - TensorRT-LLM's `kv_cache_free_gpu_memory_fraction` is a fraction of the memory left after
//!   the weights, not vLLM's share of the whole GPU: its own key
//!   `trtllm.kv_cache_free_gpu_memory_fraction`; TGI's `--max-batch-total-tokens` is a KV
//!   capacity, its own key `tgi.max_batch_total_tokens`.

use super::EngineKind;

/// The type of a canonical key's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Type {
    Int,
    Float,
    Bool,
    Str,
}

impl Type {
    /// For messages: `an integer`, ...
    pub fn name(self) -> &'static str {
        match self {
            Type::Int => "an integer",
            Type::Float => "a number",
            Type::Bool => "a boolean (true or false)",
            Type::Str => "a string",
        }
    }
}

/// What a spelling sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// The key, its value converted to the type.
    Value(&'static str, Type),
    /// A switch: the key set to this boolean when the switch is given (or given `true`); the
    /// opposite when given `false`.
    Switch(&'static str, bool),
    /// A switch that sets a string key to this value.
    Const(&'static str, &'static str),
    /// SGLang's `--chunked-prefill-size`: a positive N turns chunked prefill on with a budget
    /// of N tokens (`scheduler.enable_chunked_prefill`, `scheduler.max_num_batched_tokens`);
    /// `-1` turns it off.
    ChunkedPrefillSize,
    /// SGLang's `--max-prefill-tokens`: `scheduler.max_num_batched_tokens` unless
    /// `--chunked-prefill-size` sets it, then `sglang.max_prefill_tokens`.
    MaxPrefillTokens,
    /// llama.cpp's `-c`: the context of all slots together; `engine.max_model_len` is it
    /// divided by `-np`, without `-np` it stays `llama_cpp.ctx_size`.
    CtxSize,
}

impl Rule {
    /// Whether a command-line flag of this rule takes a value.
    pub fn takes_value(self) -> bool {
        !matches!(self, Rule::Switch(..) | Rule::Const(..))
    }

    /// The canonical key (or keys) the rule sets, for the documentation.
    pub fn keys(self) -> &'static str {
        match self {
            Rule::Value(k, _) | Rule::Switch(k, _) | Rule::Const(k, _) => k,
            Rule::ChunkedPrefillSize => {
                "scheduler.enable_chunked_prefill, scheduler.max_num_batched_tokens"
            }
            Rule::MaxPrefillTokens => {
                "scheduler.max_num_batched_tokens (or sglang.max_prefill_tokens)"
            }
            Rule::CtxSize => "engine.max_model_len (-c / -np; or llama_cpp.ctx_size)",
        }
    }
}

/// One row of an engine's table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Spelling {
    /// As the engine documents it: a flag (`--max-num-seqs`, `-np`) or a file-only key.
    pub spelling: &'static str,
    pub rule: Rule,
    /// What the reader should know when the spelling is used (a conversion that is not exact).
    pub note: Option<&'static str>,
}

const fn v(spelling: &'static str, key: &'static str, ty: Type) -> Spelling {
    Spelling { spelling, rule: Rule::Value(key, ty), note: None }
}

const fn sw(spelling: &'static str, key: &'static str, on: bool) -> Spelling {
    Spelling { spelling, rule: Rule::Switch(key, on), note: None }
}

const fn noted(mut s: Spelling, note: &'static str) -> Spelling {
    s.note = Some(note);
    s
}

use Type::{Bool, Float, Int, Str};

const VLLM: &[Spelling] = &[
    v("--model", "engine.model", Str),
    v("--dtype", "engine.dtype", Str),
    v("--quantization", "engine.quantization", Str),
    v("-q", "engine.quantization", Str),
    v("--tensor-parallel-size", "engine.tensor_parallel_size", Int),
    v("-tp", "engine.tensor_parallel_size", Int),
    v("--gpu-memory-utilization", "engine.gpu_memory_utilization", Float),
    v("--max-model-len", "engine.max_model_len", Int),
    v("--max-num-seqs", "scheduler.max_num_seqs", Int),
    v("--max-num-batched-tokens", "scheduler.max_num_batched_tokens", Int),
    sw("--enable-chunked-prefill", "scheduler.enable_chunked_prefill", true),
    sw("--no-enable-chunked-prefill", "scheduler.enable_chunked_prefill", false),
    sw("--enable-prefix-caching", "scheduler.enable_prefix_caching", true),
    sw("--no-enable-prefix-caching", "scheduler.enable_prefix_caching", false),
    v("--scheduling-policy", "scheduler.scheduler_policy", Str),
    v("--block-size", "scheduler.block_size", Int),
    sw("--async-scheduling", "token_interval.async_scheduling", true),
    sw("--no-async-scheduling", "token_interval.async_scheduling", false),
];

const MEM_FRACTION_NOTE: &str = "--mem-fraction-static -> engine.gpu_memory_utilization is \
    approximate: SGLang's fraction covers weights and KV cache, with activations outside it";
const CHUNKED_NOTE: &str = "--chunked-prefill-size -> scheduler.max_num_batched_tokens is \
    approximate: SGLang caps the prefill tokens of a step, decode tokens are not counted against it";

const SGLANG: &[Spelling] = &[
    v("--model-path", "engine.model", Str),
    v("--model", "engine.model", Str),
    v("--dtype", "engine.dtype", Str),
    v("--quantization", "engine.quantization", Str),
    v("--tp-size", "engine.tensor_parallel_size", Int),
    v("--tp", "engine.tensor_parallel_size", Int),
    v("--tensor-parallel-size", "engine.tensor_parallel_size", Int),
    noted(v("--mem-fraction-static", "engine.gpu_memory_utilization", Float), MEM_FRACTION_NOTE),
    v("--context-length", "engine.max_model_len", Int),
    v("--max-running-requests", "scheduler.max_num_seqs", Int),
    noted(
        Spelling { spelling: "--chunked-prefill-size", rule: Rule::ChunkedPrefillSize, note: None },
        CHUNKED_NOTE,
    ),
    Spelling { spelling: "--max-prefill-tokens", rule: Rule::MaxPrefillTokens, note: None },
    sw("--disable-radix-cache", "scheduler.enable_prefix_caching", false),
    v("--page-size", "scheduler.block_size", Int),
    sw("--disable-overlap-schedule", "token_interval.async_scheduling", false),
    Spelling {
        spelling: "--enable-priority-scheduling",
        rule: Rule::Const("scheduler.scheduler_policy", "priority"),
        note: None,
    },
];

const TRTLLM_FRACTION_NOTE: &str = "kv_cache_free_gpu_memory_fraction is kept as \
    trtllm.kv_cache_free_gpu_memory_fraction: it is a fraction of the GPU memory left free after \
    the weights are loaded, not vLLM's gpu_memory_utilization (a share of the whole GPU)";

const TRTLLM: &[Spelling] = &[
    v("--model", "engine.model", Str),
    v("--max_batch_size", "scheduler.max_num_seqs", Int),
    v("--max_num_tokens", "scheduler.max_num_batched_tokens", Int),
    v("--max_seq_len", "engine.max_model_len", Int),
    v("--tp_size", "engine.tensor_parallel_size", Int),
    v("tensor_parallel_size", "engine.tensor_parallel_size", Int),
    noted(
        v("--kv_cache_free_gpu_memory_fraction", "trtllm.kv_cache_free_gpu_memory_fraction", Float),
        TRTLLM_FRACTION_NOTE,
    ),
    noted(
        v(
            "kv_cache_config.free_gpu_memory_fraction",
            "trtllm.kv_cache_free_gpu_memory_fraction",
            Float,
        ),
        TRTLLM_FRACTION_NOTE,
    ),
    v("kv_cache_config.enable_block_reuse", "scheduler.enable_prefix_caching", Bool),
    v("kv_cache_config.tokens_per_block", "scheduler.block_size", Int),
    v("enable_chunked_prefill", "scheduler.enable_chunked_prefill", Bool),
    v("dtype", "engine.dtype", Str),
];

const LLAMA_CTX_NOTE: &str = "llama.cpp's -c is the context of all slots together: \
    engine.max_model_len is -c divided by -np";

const LLAMA_CPP: &[Spelling] = &[
    v("-m", "engine.model", Str),
    v("--model", "engine.model", Str),
    v("-np", "scheduler.max_num_seqs", Int),
    v("--parallel", "scheduler.max_num_seqs", Int),
    noted(Spelling { spelling: "-c", rule: Rule::CtxSize, note: None }, LLAMA_CTX_NOTE),
    noted(Spelling { spelling: "--ctx-size", rule: Rule::CtxSize, note: None }, LLAMA_CTX_NOTE),
    v("-b", "scheduler.max_num_batched_tokens", Int),
    v("--batch-size", "scheduler.max_num_batched_tokens", Int),
    sw("--cache-prompt", "scheduler.enable_prefix_caching", true),
    sw("--no-cache-prompt", "scheduler.enable_prefix_caching", false),
];

const TGI_TOTAL_NOTE: &str = "--max-batch-total-tokens is kept as tgi.max_batch_total_tokens: \
    it is the KV cache capacity in tokens of all running requests, which no engine config key holds";

const TGI: &[Spelling] = &[
    v("--model-id", "engine.model", Str),
    v("--dtype", "engine.dtype", Str),
    v("--quantize", "engine.quantization", Str),
    v("--num-shard", "engine.tensor_parallel_size", Int),
    v("--max-total-tokens", "engine.max_model_len", Int),
    v("--max-concurrent-requests", "scheduler.max_num_seqs", Int),
    v("--max-batch-prefill-tokens", "scheduler.max_num_batched_tokens", Int),
    noted(v("--max-batch-total-tokens", "tgi.max_batch_total_tokens", Int), TGI_TOTAL_NOTE),
];

/// The table of `engine`.
pub fn spellings(engine: EngineKind) -> &'static [Spelling] {
    match engine {
        EngineKind::Vllm => VLLM,
        EngineKind::Sglang => SGLANG,
        EngineKind::Trtllm => TRTLLM,
        EngineKind::LlamaCpp => LLAMA_CPP,
        EngineKind::Tgi => TGI,
    }
}

/// Lower case without `-` and `_`: `maxNumSeqs`, `max-num-seqs`, `max_num_seqs` agree.
fn folded(s: &str) -> String {
    s.trim_start_matches('-')
        .chars()
        .filter(|c| !matches!(c, '-' | '_'))
        .flat_map(char::to_lowercase)
        .collect()
}

/// The row of a command-line flag (without `=value`): exactly as written, or a long flag with
/// `_` and `-` exchanged.
pub fn flag(engine: EngineKind, name: &str) -> Option<&'static Spelling> {
    let table = spellings(engine);
    table.iter().find(|s| s.spelling == name).or_else(|| {
        if !name.starts_with("--") {
            return None;
        }
        let swap = |s: &str| s.replace('_', "-");
        table.iter().find(|s| s.spelling.starts_with("--") && swap(s.spelling) == swap(name))
    })
}

/// The row of a mapping key (a dotted spelling for nested mappings), whatever its case and
/// separators; short flags (`-c`) are command-line only.
pub fn key(engine: EngineKind, name: &str) -> Option<&'static Spelling> {
    let want = folded(name);
    spellings(engine)
        .iter()
        .filter(|s| s.spelling.starts_with("--") || !s.spelling.starts_with('-'))
        .find(|s| folded(s.spelling) == want)
}

/// Whether the engine's command line takes the model as its first positional argument
/// (`vllm serve MODEL`, `trtllm-serve MODEL`).
pub fn positional_model(engine: EngineKind) -> bool {
    matches!(engine, EngineKind::Vllm | EngineKind::Trtllm)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_resolve_in_every_form() {
        for k in ["max-num-seqs", "max_num_seqs", "maxNumSeqs", "MAX_NUM_SEQS"] {
            assert_eq!(
                key(EngineKind::Vllm, k).map(|s| s.rule),
                Some(Rule::Value("scheduler.max_num_seqs", Int)),
                "{k}"
            );
        }
        assert_eq!(flag(EngineKind::Vllm, "--max_num_seqs").unwrap().spelling, "--max-num-seqs");
        assert!(flag(EngineKind::Vllm, "-np").is_none());
        assert!(key(EngineKind::LlamaCpp, "c").is_none());
        assert_eq!(
            key(EngineKind::Trtllm, "kv_cache_config.free_gpu_memory_fraction").unwrap().rule,
            Rule::Value("trtllm.kv_cache_free_gpu_memory_fraction", Float)
        );
    }

    #[test]
    fn every_key_is_canonical_or_engine_specific() {
        const CANONICAL: &[&str] = &[
            "engine.model",
            "engine.dtype",
            "engine.quantization",
            "engine.tensor_parallel_size",
            "engine.gpu_memory_utilization",
            "engine.max_model_len",
            "scheduler.max_num_seqs",
            "scheduler.max_num_batched_tokens",
            "scheduler.enable_chunked_prefill",
            "scheduler.enable_prefix_caching",
            "scheduler.scheduler_policy",
            "scheduler.block_size",
            "token_interval.async_scheduling",
        ];
        for engine in EngineKind::ALL {
            for s in spellings(engine) {
                if let Rule::Value(k, _) | Rule::Switch(k, _) | Rule::Const(k, _) = s.rule {
                    assert!(
                        CANONICAL.contains(&k) || k.starts_with("trtllm.") || k.starts_with("tgi."),
                        "{engine} {}: {k}",
                        s.spelling
                    );
                }
            }
        }
    }
}
