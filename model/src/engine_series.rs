//! The engines' Prometheus series names: the one vocabulary that the scraper
//! (`server_metrics`), the simulator's `/metrics` (`sim::engine::stats`) and the alert rules
//! (`xtask::thresholds::series`) spell. Pure constants; imports nothing.

/// vLLM's (v1 and the older names it still exposes).
pub mod vllm {
    /// The prefix every series of the engine has.
    pub(crate) const PREFIX: &str = "vllm:";
    pub const CACHE_CONFIG_INFO: &str = "vllm:cache_config_info";
    pub const E2E_REQUEST_LATENCY_SECONDS: &str = "vllm:e2e_request_latency_seconds";
    pub const GENERATION_TOKENS_TOTAL: &str = "vllm:generation_tokens_total";
    pub const GPU_CACHE_USAGE_PERC: &str = "vllm:gpu_cache_usage_perc";
    pub(crate) const GPU_PREFIX_CACHE_HITS_TOTAL: &str = "vllm:gpu_prefix_cache_hits_total";
    pub(crate) const GPU_PREFIX_CACHE_QUERIES_TOTAL: &str = "vllm:gpu_prefix_cache_queries_total";
    pub const INTER_TOKEN_LATENCY_SECONDS: &str = "vllm:inter_token_latency_seconds";
    pub const ITERATION_TOKENS_TOTAL: &str = "vllm:iteration_tokens_total";
    pub const KV_CACHE_USAGE_PERC: &str = "vllm:kv_cache_usage_perc";
    pub const NUM_PREEMPTIONS_TOTAL: &str = "vllm:num_preemptions_total";
    pub const NUM_REQUESTS_RUNNING: &str = "vllm:num_requests_running";
    pub const NUM_REQUESTS_WAITING: &str = "vllm:num_requests_waiting";
    pub const PREFIX_CACHE_HITS_TOTAL: &str = "vllm:prefix_cache_hits_total";
    pub const PREFIX_CACHE_QUERIES_TOTAL: &str = "vllm:prefix_cache_queries_total";
    pub const PROMPT_TOKENS_TOTAL: &str = "vllm:prompt_tokens_total";
    pub const REQUEST_DECODE_TIME_SECONDS: &str = "vllm:request_decode_time_seconds";
    pub const REQUEST_GENERATION_TOKENS: &str = "vllm:request_generation_tokens";
    pub const REQUEST_PREFILL_TIME_SECONDS: &str = "vllm:request_prefill_time_seconds";
    pub const REQUEST_PROMPT_TOKENS: &str = "vllm:request_prompt_tokens";
    pub const REQUEST_QUEUE_TIME_SECONDS: &str = "vllm:request_queue_time_seconds";
    pub const REQUEST_SUCCESS_TOTAL: &str = "vllm:request_success_total";
    pub const REQUEST_TIME_PER_OUTPUT_TOKEN_SECONDS: &str =
        "vllm:request_time_per_output_token_seconds";
    pub const TIME_TO_FIRST_TOKEN_SECONDS: &str = "vllm:time_to_first_token_seconds";
}

/// SGLang's.
pub mod sglang {
    /// The prefix every series of the engine has.
    pub(crate) const PREFIX: &str = "sglang:";
    pub const E2E_REQUEST_LATENCY_SECONDS: &str = "sglang:e2e_request_latency_seconds";
    pub const GENERATION_TOKENS_TOTAL: &str = "sglang:generation_tokens_total";
    pub const INTER_TOKEN_LATENCY_SECONDS: &str = "sglang:inter_token_latency_seconds";
    pub(crate) const NUM_QUEUE_REQS: &str = "sglang:num_queue_reqs";
    pub(crate) const NUM_RUNNING_REQS: &str = "sglang:num_running_reqs";
    pub const PROMPT_TOKENS_TOTAL: &str = "sglang:prompt_tokens_total";
    pub const TIME_TO_FIRST_TOKEN_SECONDS: &str = "sglang:time_to_first_token_seconds";
    pub const TOKEN_USAGE: &str = "sglang:token_usage";
}

/// llama.cpp's `llama-server` (with `--metrics`).
pub mod llamacpp {
    /// The prefix every series of the engine has.
    pub(crate) const PREFIX: &str = "llamacpp:";
    pub const KV_CACHE_USAGE_RATIO: &str = "llamacpp:kv_cache_usage_ratio";
    pub const PROMPT_TOKENS_TOTAL: &str = "llamacpp:prompt_tokens_total";
    pub(crate) const REQUESTS_DEFERRED: &str = "llamacpp:requests_deferred";
    pub(crate) const REQUESTS_PROCESSING: &str = "llamacpp:requests_processing";
    pub(crate) const TOKENS_PREDICTED_TOTAL: &str = "llamacpp:tokens_predicted_total";
}

/// The embedded simulator's own, beside the vLLM names it exposes.
pub mod infergate_sim {
    /// The prefix every series of the engine has.
    pub(crate) const PREFIX: &str = "infergate_sim:";
    pub const ABANDONED_HOLD_SECONDS_TOTAL: &str = "infergate_sim:abandoned_hold_seconds_total";
    pub const ABANDONED_REQUESTS_TOTAL: &str = "infergate_sim:abandoned_requests_total";
    pub const BATCH_STRATEGY_INFO: &str = "infergate_sim:batch_strategy_info";
    pub const BATCHES_TOTAL: &str = "infergate_sim:batches_total";
    pub const CANCELLED_REQUESTS_TOTAL: &str = "infergate_sim:cancelled_requests_total";
    pub const COMPUTED_TOKENS_TOTAL: &str = "infergate_sim:computed_tokens_total";
    pub const FAILED_REQUESTS_TOTAL: &str = "infergate_sim:failed_requests_total";
    pub const FORWARD_SECONDS_TOTAL: &str = "infergate_sim:forward_seconds_total";
    pub const KV_BLOCKS_CACHED: &str = "infergate_sim:kv_blocks_cached";
    pub const KV_BLOCKS_IN_USE: &str = "infergate_sim:kv_blocks_in_use";
    pub const KV_BLOCKS_TOTAL: &str = "infergate_sim:kv_blocks_total";
    pub const KV_FRAGMENTATION_RATIO: &str = "infergate_sim:kv_fragmentation_ratio";
    pub const OOM_BATCHES_TOTAL: &str = "infergate_sim:oom_batches_total";
    pub const RECOMPUTED_TOKENS_TOTAL: &str = "infergate_sim:recomputed_tokens_total";
    pub const REJECTED_REQUESTS_TOTAL: &str = "infergate_sim:rejected_requests_total";
    pub const STEP_SECONDS_TOTAL: &str = "infergate_sim:step_seconds_total";
    pub const STEPS_TOTAL: &str = "infergate_sim:steps_total";
    pub const TOKEN_INTERVAL_SECONDS_TOTAL: &str = "infergate_sim:token_interval_seconds_total";
    pub const WASTED_PREFILL_TOKENS_TOTAL: &str = "infergate_sim:wasted_prefill_tokens_total";
    pub const WASTED_TOKENS_TOTAL: &str = "infergate_sim:wasted_tokens_total";
}
