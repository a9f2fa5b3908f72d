//! Each engine's answers read into [`ServedValue`]s: pure functions over the JSON or text the
//! engine sent. A field that is absent, null or of another shape than documented is not
//! revealed (said in the second list), never guessed, and nothing here panics on an answer.
//!
//! | engine | answer | values |
//! |---|---|---|
//! | llama.cpp | `GET /props` | `total_slots`, `default_generation_settings.n_ctx` (one slot's context), `model_alias`, `model_path`, `build_info` |
//! | vLLM | `GET /server_info?config_format=json` | `model_config`, `cache_config`, `scheduler_config`, `parallel_config` |
//! | vLLM | `GET /metrics` | the labels of `vllm:cache_config_info` |
//! | vLLM | `GET /v1/models` | `max_model_len` of the served model |
//! | vLLM | `GET /version` | `version` |
//! | SGLang | `GET /get_server_info` | its server arguments |
//! | TGI | `GET /info` | `max_batch_size`, `max_total_tokens`, `max_concurrent_requests`, `max_batch_total_tokens`, ... |

use serde_json::Value as Json;

use super::ServedValue;
use crate::config::ConfigKey;

/// Values read from one answer, and what it did not reveal.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Parsed {
    pub values: Vec<ServedValue>,
    pub not_revealed: Vec<String>,
}

impl Parsed {
    fn push(&mut self, key: &'static str, value: Json, source: String) {
        self.push_key(ConfigKey::literal(key), value, source);
    }

    fn push_key(&mut self, key: ConfigKey, value: Json, source: String) {
        self.values.push(ServedValue { key, value, source });
    }

    fn missing(&mut self, what: String) {
        self.not_revealed.push(what);
    }
}

/// A whole number within u32 (an engine's count or size), from a JSON number or its text.
fn count(v: Option<&Json>) -> Option<u64> {
    match v? {
        Json::Number(n) => n.as_u64().filter(|n| *n <= u32::MAX as u64),
        Json::String(s) => s.trim().parse::<u64>().ok().filter(|n| *n <= u32::MAX as u64),
        _ => None,
    }
}

/// A finite number, from a JSON number or its text.
fn number(v: Option<&Json>) -> Option<f64> {
    let x = match v? {
        Json::Number(n) => n.as_f64()?,
        Json::String(s) => s.trim().parse::<f64>().ok()?,
        _ => return None,
    };
    x.is_finite().then_some(x)
}

/// A boolean, from JSON or Python's and Prometheus labels' spellings (`True`, `false`).
fn boolean(v: Option<&Json>) -> Option<bool> {
    match v? {
        Json::Bool(b) => Some(*b),
        Json::String(s) => match s.trim().to_ascii_lowercase().as_str() {
            "true" => Some(true),
            "false" => Some(false),
            _ => None,
        },
        _ => None,
    }
}

/// Non-empty text.
fn text(v: Option<&Json>) -> Option<String> {
    v?.as_str().map(str::trim).filter(|s| !s.is_empty() && *s != "None").map(str::to_string)
}

fn f64_json(x: f64) -> Json {
    serde_json::Number::from_f64(x).map_or(Json::Null, Json::Number)
}

/// llama.cpp's `GET /props`. `total_slots` is `-np` (requests served at once); the default
/// generation settings' `n_ctx` is one slot's context (llama.cpp's `n_ctx_slot`: the `-c`
/// context divided among the slots), so it is the longest prompt and output one request can
/// have, recorded as `engine.max_model_len` as is.
pub fn llamacpp_props(body: &Json) -> Parsed {
    let mut p = Parsed::default();
    const AT: &str = "GET /props";
    if !body.is_object() {
        p.missing(format!("{AT}: the answer is not a JSON object"));
        return p;
    }
    match count(body.get("total_slots")).filter(|n| *n > 0) {
        Some(n) => p.push("scheduler.max_num_seqs", n.into(), format!("{AT} total_slots")),
        None => p.missing(format!("{AT}: no total_slots")),
    }
    let n_ctx = body.get("default_generation_settings").and_then(|g| g.get("n_ctx"));
    match count(n_ctx).filter(|n| *n > 0) {
        Some(n) => p.push(
            "engine.max_model_len",
            n.into(),
            format!("{AT} default_generation_settings.n_ctx (one slot's context)"),
        ),
        None => p.missing(format!("{AT}: no default_generation_settings.n_ctx")),
    }
    if let Some(alias) = text(body.get("model_alias")) {
        p.push("engine.model", alias.into(), format!("{AT} model_alias"));
    }
    if let Some(path) = text(body.get("model_path")) {
        p.push("llamacpp.model_path", path.into(), format!("{AT} model_path"));
    }
    if let Some(build) = text(body.get("build_info")) {
        p.push("llamacpp.build_info", build.into(), format!("{AT} build_info"));
    }
    p
}

/// The labels of vLLM's `vllm:cache_config_info` in a `/metrics` page (its exposition text).
pub fn vllm_cache_config(exposition: &str) -> Parsed {
    let mut p = Parsed::default();
    const AT: &str = "GET /metrics vllm:cache_config_info";
    let page = crate::promtext::parse(exposition);
    let name = crate::engine_series::vllm::CACHE_CONFIG_INFO;
    let Some(s) = page.samples.iter().find(|s| s.name == name) else {
        p.missing(format!("GET /metrics: no {name}"));
        return p;
    };
    let label = |k: &str| s.label(k).map(|v| Json::String(v.to_string()));
    match count(label("block_size").as_ref()) {
        Some(n) => p.push("scheduler.block_size", n.into(), format!("{AT} block_size")),
        None => p.missing(format!("{AT}: no block_size")),
    }
    match number(label("gpu_memory_utilization").as_ref()) {
        Some(x) => p.push(
            "engine.gpu_memory_utilization",
            f64_json(x),
            format!("{AT} gpu_memory_utilization"),
        ),
        None => p.missing(format!("{AT}: no gpu_memory_utilization")),
    }
    match boolean(label("enable_prefix_caching").as_ref()) {
        Some(b) => p.push(
            "scheduler.enable_prefix_caching",
            b.into(),
            format!("{AT} enable_prefix_caching"),
        ),
        None => p.missing(format!("{AT}: no enable_prefix_caching")),
    }
    if let Some(d) = text(label("cache_dtype").as_ref()) {
        p.push("vllm.cache_dtype", d.into(), format!("{AT} cache_dtype"));
    }
    if let Some(n) = count(label("num_gpu_blocks").as_ref()) {
        p.push("vllm.num_gpu_blocks", n.into(), format!("{AT} num_gpu_blocks"));
    }
    p
}

/// `max_model_len` of `model` (else of the only model) in vLLM's `GET /v1/models`.
pub fn vllm_models(body: &Json, model: &str) -> Parsed {
    let mut p = Parsed::default();
    let list = body.get("data").and_then(Json::as_array);
    let entry =
        list.and_then(|l| {
            l.iter()
                .find(|m| m.get("id").and_then(Json::as_str) == Some(model))
                .or(if l.len() == 1 { l.first() } else { None })
        });
    match entry.and_then(|m| count(m.get("max_model_len"))).filter(|n| *n > 0) {
        Some(n) => p.push("engine.max_model_len", n.into(), "GET /v1/models max_model_len".into()),
        None => p.missing("GET /v1/models: no max_model_len".into()),
    }
    p
}

/// vLLM's `GET /version`.
pub fn vllm_version(body: &Json) -> Parsed {
    let mut p = Parsed::default();
    match text(body.get("version")) {
        Some(v) => p.push("vllm.version", v.into(), "GET /version version".into()),
        None => p.missing("GET /version: no version".into()),
    }
    p
}

/// vLLM's `GET /server_info?config_format=json`: `{"vllm_config": {"model_config": ...,
/// "cache_config": ..., "scheduler_config": ..., "parallel_config": ...}}` (the sections also
/// accepted at the top level). The text format (`vllm_config` as one string) reveals nothing
/// that can be read safely.
pub fn vllm_server_info(body: &Json) -> Parsed {
    let mut p = Parsed::default();
    const AT: &str = "GET /server_info";
    let cfg = body.get("vllm_config").unwrap_or(body);
    if !cfg.is_object() {
        p.missing(format!("{AT}: vllm_config is not a JSON object"));
        return p;
    }
    let field = |section: &str, name: &str| cfg.get(section).and_then(|s| s.get(name));
    let at = |section: &str, name: &str| format!("{AT} {section}.{name}");
    let counts = [
        ("scheduler_config", "max_num_seqs", "scheduler.max_num_seqs"),
        ("scheduler_config", "max_num_batched_tokens", "scheduler.max_num_batched_tokens"),
        ("cache_config", "block_size", "scheduler.block_size"),
        ("model_config", "max_model_len", "engine.max_model_len"),
        ("parallel_config", "tensor_parallel_size", "engine.tensor_parallel_size"),
    ];
    for (section, name, key) in counts {
        match count(field(section, name)).filter(|n| *n > 0) {
            Some(n) => p.push(key, n.into(), at(section, name)),
            None => p.missing(format!("{AT}: no {section}.{name}")),
        }
    }
    let bools = [
        ("scheduler_config", "enable_chunked_prefill", "scheduler.enable_chunked_prefill"),
        ("scheduler_config", "chunked_prefill_enabled", "scheduler.enable_chunked_prefill"),
        ("cache_config", "enable_prefix_caching", "scheduler.enable_prefix_caching"),
        ("scheduler_config", "async_scheduling", "token_interval.async_scheduling"),
    ];
    for (section, name, key) in bools {
        if let Some(b) = boolean(field(section, name))
            && !p.values.iter().any(|v| v.key == key)
        {
            p.push(key, b.into(), at(section, name));
        }
    }
    if let Some(x) = number(field("cache_config", "gpu_memory_utilization")) {
        p.push(
            "engine.gpu_memory_utilization",
            f64_json(x),
            at("cache_config", "gpu_memory_utilization"),
        );
    }
    if let Some(policy) = text(field("scheduler_config", "policy")) {
        p.push("scheduler.scheduler_policy", policy.into(), at("scheduler_config", "policy"));
    }
    if let Some(d) = text(field("model_config", "dtype")) {
        let d = d.strip_prefix("torch.").unwrap_or(&d).to_string();
        p.push("engine.dtype", d.into(), at("model_config", "dtype"));
    }
    if let Some(q) = text(field("model_config", "quantization")) {
        p.push("engine.quantization", q.into(), at("model_config", "quantization"));
    }
    if let Some(m) = text(field("model_config", "model")) {
        p.push("engine.model", m.into(), at("model_config", "model"));
    }
    if let Some(d) = text(field("cache_config", "cache_dtype")) {
        p.push("vllm.cache_dtype", d.into(), at("cache_config", "cache_dtype"));
    }
    p
}

/// SGLang's `GET /get_server_info`: its server arguments at the top level.
/// `max_running_requests` is `scheduler.max_num_seqs` (null when SGLang sized it itself: then
/// the scheduler's `internal_states` are read); `chunked_prefill_size` -1 is chunked prefill
/// off, a positive one its token budget (`--chunked-prefill-size`, as `engine args` renders
/// `max_num_batched_tokens`).
pub fn sglang_server_info(body: &Json) -> Parsed {
    let mut p = Parsed::default();
    const AT: &str = "GET /get_server_info";
    if !body.is_object() {
        p.missing(format!("{AT}: the answer is not a JSON object"));
        return p;
    }
    let at = |name: &str| format!("{AT} {name}");
    let internal = body.get("internal_states").and_then(Json::as_array).and_then(|a| a.first());
    let running = count(body.get("max_running_requests"))
        .map(|n| (n, at("max_running_requests")))
        .or_else(|| {
            count(internal.and_then(|s| s.get("max_running_requests")))
                .map(|n| (n, at("internal_states[0].max_running_requests")))
        });
    match running.filter(|(n, _)| *n > 0) {
        Some((n, source)) => p.push("scheduler.max_num_seqs", n.into(), source),
        None => p.missing(format!("{AT}: no max_running_requests")),
    }
    match body.get("chunked_prefill_size").and_then(Json::as_i64) {
        Some(n) if n > 0 => {
            p.push("scheduler.enable_chunked_prefill", true.into(), at("chunked_prefill_size"));
            p.push("scheduler.max_num_batched_tokens", n.into(), at("chunked_prefill_size"));
        }
        Some(_) => {
            p.push("scheduler.enable_chunked_prefill", false.into(), at("chunked_prefill_size"))
        }
        None => p.missing(format!("{AT}: no chunked_prefill_size")),
    }
    for (name, key) in [
        ("context_length", "engine.max_model_len"),
        ("tp_size", "engine.tensor_parallel_size"),
        ("page_size", "scheduler.block_size"),
    ] {
        if let Some(n) = count(body.get(name)).filter(|n| *n > 0) {
            p.push(key, n.into(), at(name));
        }
    }
    if let Some(b) = boolean(body.get("disable_radix_cache")) {
        p.push("scheduler.enable_prefix_caching", (!b).into(), at("disable_radix_cache"));
    }
    if let Some(x) = number(body.get("mem_fraction_static")) {
        p.push("sglang.mem_fraction_static", f64_json(x), at("mem_fraction_static"));
    }
    if let Some(d) = text(body.get("dtype")) {
        p.push("engine.dtype", d.into(), at("dtype"));
    }
    if let Some(m) = text(body.get("model_path")) {
        p.push("engine.model", m.into(), at("model_path"));
    }
    if let Some(v) = text(body.get("version")) {
        p.push("sglang.version", v.into(), at("version"));
    }
    p
}

/// Text Generation Inference's `GET /info`. `max_batch_size` is `scheduler.max_num_seqs`
/// (null when TGI sizes batches by tokens alone), `max_total_tokens` the longest prompt and
/// output of a request (`engine.max_model_len`); `max_concurrent_requests` (the router's
/// limit, requests beyond are refused) and `max_batch_total_tokens` (tokens of a whole batch)
/// have no engine config key and are recorded under `tgi.`.
pub fn tgi_info(body: &Json) -> Parsed {
    let mut p = Parsed::default();
    const AT: &str = "GET /info";
    if !body.is_object() {
        p.missing(format!("{AT}: the answer is not a JSON object"));
        return p;
    }
    let at = |name: &str| format!("{AT} {name}");
    match count(body.get("max_batch_size")).filter(|n| *n > 0) {
        Some(n) => p.push("scheduler.max_num_seqs", n.into(), at("max_batch_size")),
        None => p.missing(format!("{AT}: no max_batch_size")),
    }
    match count(body.get("max_total_tokens")).filter(|n| *n > 0) {
        Some(n) => p.push("engine.max_model_len", n.into(), at("max_total_tokens")),
        None => p.missing(format!("{AT}: no max_total_tokens")),
    }
    for name in ["max_concurrent_requests", "max_batch_total_tokens", "max_input_tokens"] {
        match count(body.get(name)).filter(|n| *n > 0) {
            Some(n) => p.push_key(
                ConfigKey::from_segments(["tgi", name]).expect("a bare name"),
                n.into(),
                at(name),
            ),
            None => p.missing(format!("{AT}: no {name}")),
        }
    }
    if let Some(m) = text(body.get("model_id")) {
        p.push("engine.model", m.into(), at("model_id"));
    }
    if let Some(d) = text(body.get("model_dtype")) {
        let d = d.strip_prefix("torch.").unwrap_or(&d).to_string();
        p.push("engine.dtype", d.into(), at("model_dtype"));
    }
    if let Some(v) = text(body.get("version")) {
        p.push("tgi.version", v.into(), at("version"));
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn value<'a>(p: &'a Parsed, key: &str) -> Option<&'a Json> {
        p.values.iter().find(|v| v.key == key).map(|v| &v.value)
    }

    fn source<'a>(p: &'a Parsed, key: &str) -> &'a str {
        &p.values.iter().find(|v| v.key == key).unwrap().source
    }

    /// Every parser on answers of the wrong shape: nothing read, nothing guessed, no panic.
    #[test]
    fn malformed_answers_reveal_nothing() {
        let bad = [
            json!(null),
            json!("text"),
            json!([1, 2]),
            json!({}),
            json!({"total_slots": -4, "default_generation_settings": "x"}),
            json!({"total_slots": "many", "default_generation_settings": {"n_ctx": 1e300}}),
            json!({"total_slots": 99999999999u64}),
            json!({"vllm_config": "ModelConfig(model='x', max_model_len=8192)"}),
            json!({"vllm_config": {"scheduler_config": {"max_num_seqs": "lots"}, "cache_config": []}}),
            json!({"max_running_requests": null, "chunked_prefill_size": "big", "internal_states": 3}),
            json!({"max_batch_size": null, "max_total_tokens": -1, "max_concurrent_requests": true}),
            json!({"data": "none"}),
            json!({"data": [{"id": "a", "max_model_len": 1}, {"id": "b"}]}),
        ];
        for b in &bad {
            for p in [
                llamacpp_props(b),
                vllm_server_info(b),
                sglang_server_info(b),
                tgi_info(b),
                vllm_models(b, "b"),
                vllm_version(b),
            ] {
                let compared: Vec<_> = p
                    .values
                    .iter()
                    .filter(|v| v.key.section() == "scheduler" || v.key == "engine.max_model_len")
                    .collect();
                assert!(compared.is_empty(), "{b}: {compared:?}");
            }
        }
        assert!(!llamacpp_props(&json!("x")).not_revealed.is_empty());
        assert!(!vllm_server_info(&bad[7]).not_revealed.is_empty());
        for page in [
            "",
            "garbage {{{ \n",
            "vllm:cache_config_info{block_size=\"sixteen\",enable_prefix_caching=\"maybe\"} 1\n",
        ] {
            let p = vllm_cache_config(page);
            assert!(p.values.is_empty(), "{page}: {:?}", p.values);
            assert!(!p.not_revealed.is_empty(), "{page}");
        }
    }

    #[test]
    fn llamacpp_props_slots_and_context() {
        // The shape llama-server answers (started with -c 1024 -np 4).
        let body = json!({
            "default_generation_settings": {"n_ctx": 256, "params": {"n_predict": -1}},
            "total_slots": 4,
            "model_alias": "gemma-3-270m",
            "model_path": "/cache/gemma-3-270m-q4_k_m.gguf",
            "build_info": "b0-unknown",
            "chat_template": "{{ messages }}",
        });
        let p = llamacpp_props(&body);
        assert_eq!(value(&p, "scheduler.max_num_seqs"), Some(&json!(4)));
        assert_eq!(source(&p, "scheduler.max_num_seqs"), "GET /props total_slots");
        assert_eq!(
            value(&p, "engine.max_model_len"),
            Some(&json!(256)),
            "one slot's context, as is"
        );
        assert_eq!(value(&p, "engine.model"), Some(&json!("gemma-3-270m")));
        assert_eq!(
            value(&p, "llamacpp.model_path"),
            Some(&json!("/cache/gemma-3-270m-q4_k_m.gguf"))
        );
        assert!(p.not_revealed.is_empty(), "{:?}", p.not_revealed);
    }

    #[test]
    fn vllm_metrics_labels() {
        let page = "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n\
            # TYPE vllm:cache_config_info gauge\n\
            vllm:cache_config_info{block_size=\"16\",cache_dtype=\"auto\",calculate_kv_scales=\"False\",\
            enable_prefix_caching=\"True\",gpu_memory_utilization=\"0.9\",num_gpu_blocks=\"27000\",\
            num_cpu_blocks=\"None\",model_name=\"m\"} 1.0\n";
        let p = vllm_cache_config(page);
        assert_eq!(value(&p, "scheduler.block_size"), Some(&json!(16)));
        assert_eq!(value(&p, "engine.gpu_memory_utilization"), Some(&json!(0.9)));
        assert_eq!(value(&p, "scheduler.enable_prefix_caching"), Some(&json!(true)));
        assert_eq!(value(&p, "vllm.cache_dtype"), Some(&json!("auto")));
        assert_eq!(value(&p, "vllm.num_gpu_blocks"), Some(&json!(27000)));
        assert_eq!(
            source(&p, "scheduler.block_size"),
            "GET /metrics vllm:cache_config_info block_size"
        );
    }

    #[test]
    fn vllm_server_info_models_and_version() {
        let body = json!({"vllm_config": {
            "model_config": {"model": "meta-llama/Llama-3.1-8B-Instruct", "dtype": "torch.bfloat16",
                             "max_model_len": 8192, "quantization": null},
            "cache_config": {"block_size": 16, "gpu_memory_utilization": 0.9,
                             "enable_prefix_caching": true, "cache_dtype": "auto"},
            "scheduler_config": {"max_num_seqs": 64, "max_num_batched_tokens": 8192,
                                 "chunked_prefill_enabled": false, "policy": "fcfs"},
            "parallel_config": {"tensor_parallel_size": 1},
        }});
        let p = vllm_server_info(&body);
        assert_eq!(value(&p, "scheduler.max_num_seqs"), Some(&json!(64)));
        assert_eq!(
            source(&p, "scheduler.max_num_seqs"),
            "GET /server_info scheduler_config.max_num_seqs"
        );
        assert_eq!(value(&p, "scheduler.enable_chunked_prefill"), Some(&json!(false)));
        assert_eq!(value(&p, "engine.dtype"), Some(&json!("bfloat16")));
        assert_eq!(value(&p, "engine.quantization"), None, "null: none");
        assert_eq!(value(&p, "scheduler.scheduler_policy"), Some(&json!("fcfs")));
        assert!(p.not_revealed.is_empty(), "{:?}", p.not_revealed);

        let models = json!({"data": [{"id": "other", "max_model_len": 1}, {"id": "m", "max_model_len": 4096}]});
        assert_eq!(value(&vllm_models(&models, "m"), "engine.max_model_len"), Some(&json!(4096)));
        assert_eq!(
            value(&vllm_version(&json!({"version": "0.11.0"})), "vllm.version"),
            Some(&json!("0.11.0"))
        );
    }

    #[test]
    fn sglang_server_args() {
        let body = json!({
            "model_path": "meta-llama/Llama-3.1-8B-Instruct", "dtype": "bfloat16",
            "max_running_requests": 128, "chunked_prefill_size": 4096, "context_length": null,
            "tp_size": 2, "page_size": 1, "disable_radix_cache": true, "mem_fraction_static": 0.85,
            "version": "0.5.0",
        });
        let p = sglang_server_info(&body);
        assert_eq!(value(&p, "scheduler.max_num_seqs"), Some(&json!(128)));
        assert_eq!(value(&p, "scheduler.max_num_batched_tokens"), Some(&json!(4096)));
        assert_eq!(value(&p, "scheduler.enable_chunked_prefill"), Some(&json!(true)));
        assert_eq!(value(&p, "scheduler.enable_prefix_caching"), Some(&json!(false)));
        assert_eq!(value(&p, "engine.tensor_parallel_size"), Some(&json!(2)));
        assert_eq!(value(&p, "engine.max_model_len"), None, "null is not revealed");
        let off = sglang_server_info(&json!({
            "max_running_requests": null, "chunked_prefill_size": -1,
            "internal_states": [{"max_running_requests": 2048}],
        }));
        assert_eq!(value(&off, "scheduler.max_num_seqs"), Some(&json!(2048)));
        assert_eq!(
            source(&off, "scheduler.max_num_seqs"),
            "GET /get_server_info internal_states[0].max_running_requests"
        );
        assert_eq!(value(&off, "scheduler.enable_chunked_prefill"), Some(&json!(false)));
        assert_eq!(value(&off, "scheduler.max_num_batched_tokens"), None);
    }

    #[test]
    fn tgi_info_limits() {
        let body = json!({
            "model_id": "meta-llama/Llama-3.1-8B-Instruct", "model_dtype": "torch.float16",
            "max_concurrent_requests": 128, "max_batch_total_tokens": 16000,
            "max_batch_size": null, "max_total_tokens": 2048, "max_input_tokens": 1024,
            "version": "3.0.0",
        });
        let p = tgi_info(&body);
        assert_eq!(value(&p, "scheduler.max_num_seqs"), None, "null: not revealed");
        assert!(p.not_revealed.iter().any(|n| n.contains("max_batch_size")));
        assert_eq!(value(&p, "engine.max_model_len"), Some(&json!(2048)));
        assert_eq!(value(&p, "tgi.max_concurrent_requests"), Some(&json!(128)));
        assert_eq!(value(&p, "tgi.max_batch_total_tokens"), Some(&json!(16000)));
        assert_eq!(value(&p, "engine.dtype"), Some(&json!("float16")));
    }
}
