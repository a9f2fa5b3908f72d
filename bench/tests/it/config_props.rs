//! Property tests of config resolution: every numeric field of `configs/bench.toml` and
//! `configs/engine.toml`, given any value (NaN, infinities, huge, tiny, negative, zero), through
//! `--set` and through the file's text. Resolution never panics; an error names its source (the
//! `--set` or the file and line); a value that resolves is one the run can turn into durations
//! without panicking.

use std::time::Duration;

use infergate_model::config::{BenchConfig, ConfigError, EngineConfig, Override, Profile, Source};
use proptest::prelude::*;

/// Float fields of a profile, by dotted key.
const FLOAT_KEYS: &[&str] = &[
    "load.rate",
    "load.burstiness",
    "load.duration_s",
    "load.warmup_s",
    "client.request_timeout_s",
    "client.stall_timeout_s",
    "client.grace_s",
    "scrape.interval_s",
    "workload.temperature",
    "workload.top_p",
    "slo.ttft_ms",
    "slo.tpot_ms",
    "slo.e2e_ms",
    "sim.corruption_rate",
    "sim.logprob_drift",
    "sim.timing.ttft_ms",
    "sim.timing.itl_ms",
    "sim.timing.jitter_ms",
    "sim.faults.http_503",
    "sim.faults.stall",
    "sim.faults.stall_ms",
    "sim.faults.freeze_at_ms",
    "sim.faults.freeze_ms",
];

/// Integer fields of a profile, by dotted key.
const INT_KEYS: &[&str] = &[
    "load.concurrency",
    "load.max_concurrency",
    "load.requests",
    "load.warmup_requests",
    "workload.repeats",
    "workload.max_tokens",
    "workload.seed",
    "workload.shared_prefix_tokens",
    "sim.timing.output_tokens",
    "sim.timing.tokens_per_chunk",
    "sim.timing.seed",
    "sim.faults.seed",
];

/// Numeric fields of an engine config: (section, key).
const ENGINE_KEYS: &[(&str, &str)] = &[
    ("engine", "tensor_parallel_size"),
    ("engine", "gpu_memory_utilization"),
    ("engine", "max_model_len"),
    ("scheduler", "max_num_seqs"),
    ("scheduler", "max_num_batched_tokens"),
    ("scheduler", "block_size"),
    ("batch", "fixed_batch_size"),
    ("batch", "max_wait_ms"),
    ("batch", "max_token_budget"),
    ("device", "memory_gib"),
    ("device", "price_per_hour"),
    ("device", "count"),
    ("sim", "step_overhead_us"),
    ("sim", "mfu"),
    ("sim", "bandwidth_efficiency"),
    ("sim", "interval_base_us"),
    ("sim", "interval_per_seq_us"),
];

/// Floats as TOML writes them, the hostile ones often.
fn float() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("nan".to_string()),
        Just("inf".to_string()),
        Just("-inf".to_string()),
        Just("0.0".to_string()),
        Just("-0.0".to_string()),
        prop::sample::select(vec![1e300, 1e-300, -1e300, 5e-324, f64::MAX, f64::MIN_POSITIVE])
            .prop_map(|v| format!("{v:e}")),
        (-1e12..1e12f64).prop_map(|v| format!("{v:e}")),
        (0.0..2.0f64).prop_map(|v| format!("{v:e}")),
    ]
}

/// Integers as TOML writes them, around every boundary a field may have.
fn int() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            0i64,
            1,
            -1,
            i64::MAX,
            i64::MIN,
            u32::MAX as i64,
            u32::MAX as i64 + 1,
            4_000_000_000,
            1 << 20,
            (1 << 20) + 1,
            100_000,
            100_001,
        ])
        .prop_map(|v| v.to_string()),
        any::<i64>().prop_map(|v| v.to_string()),
        (0i64..2000).prop_map(|v| v.to_string()),
    ]
}

/// A field and a value for it (integers, floats or a list of prompt lengths).
fn field() -> impl Strategy<Value = (String, String)> {
    prop_oneof![
        (prop::sample::select(FLOAT_KEYS), float()).prop_map(|(k, v)| (k.to_string(), v)),
        (prop::sample::select(FLOAT_KEYS), int()).prop_map(|(k, v)| (k.to_string(), v)),
        (prop::sample::select(INT_KEYS), int()).prop_map(|(k, v)| (k.to_string(), v)),
        (prop::sample::select(INT_KEYS), float()).prop_map(|(k, v)| (k.to_string(), v)),
        prop::collection::vec(int(), 0..4)
            .prop_map(|v| ("workload.input_lengths".to_string(), format!("[{}]", v.join(", ")))),
    ]
}

/// What a resolved profile must allow: every duration the run derives converts without panic.
fn assert_usable(p: &Profile) {
    let secs = |v: f64| Duration::try_from_secs_f64(v).expect("a resolved duration converts");
    secs(p.client.request_timeout_s);
    secs(p.client.stall_timeout_s);
    secs(p.client.grace_s);
    secs(p.load.warmup_s);
    secs(p.scrape.interval_s);
    p.load.duration_s.map(secs);
    p.load.rate.map(|r| secs(1.0 / r));
    let t = &p.sim.timing;
    let tokens = f64::from(t.output_tokens.unwrap_or(p.workload.max_tokens));
    secs((t.ttft_ms + (t.itl_ms + t.jitter_ms) * tokens) / 1e3);
    secs((p.sim.faults.stall_ms + p.sim.faults.freeze_ms) / 1e3);
    p.sim.faults.freeze_at_ms.map(|v| secs(v / 1e3));
    let items = p.workload.input_lengths.len() as u64 * u64::from(p.workload.repeats);
    assert!(items <= infergate_model::config::limits::MAX_WORKLOAD_ITEMS);
}

/// An error of a TOML text that sets one key at line `line` names the file and a line.
fn assert_located(err: &ConfigError, file: &str) {
    assert_eq!(err.path.to_str(), Some(file), "{err}");
    assert!(err.line.is_some(), "no line: {err}");
    assert!(err.to_string().starts_with(&format!("{file}:")), "{err}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn set_overrides_never_panic_and_errors_name_the_override((key, value) in field()) {
        let set = format!("{key}={value}");
        let o = Override::parse(&set).expect("KEY=VALUE parses");
        match BenchConfig::builtin().resolve("default", &[o]) {
            Ok(r) => assert_usable(&r.profile),
            Err(e) => {
                let text = e.to_string();
                prop_assert!(text.starts_with(&format!("<command line>: --set {set}: ")), "{}", text);
            }
        }
    }

    #[test]
    fn file_values_never_panic_and_errors_name_file_and_line((key, value) in field()) {
        let (section, name) = key.rsplit_once('.').unwrap();
        let text = format!("[profile.default.{section}]\n{name} = {value}\n");
        let resolved = BenchConfig::from_source(Source::new("configs/bench.toml", text))
            .and_then(|c| c.resolve("default", &[]));
        match resolved {
            Ok(r) => assert_usable(&r.profile),
            Err(e) => assert_located(&e, "configs/bench.toml"),
        }
    }

    #[test]
    fn engine_values_never_panic_and_errors_name_file_and_line(
        (section, key) in prop::sample::select(ENGINE_KEYS),
        value in prop_oneof![float(), int()],
    ) {
        let model = "[engine]\nmodel = \"meta-llama/Llama-3.1-8B-Instruct\"\n";
        let text = match section {
            "engine" => format!("{model}{key} = {value}\n"),
            "device" => format!("{model}[device]\nname = \"H100-SXM-80GB\"\n{key} = {value}\n"),
            _ => format!("{model}[{section}]\n{key} = {value}\n"),
        };
        match EngineConfig::from_source(&Source::new("configs/engine.toml", text)) {
            Ok(c) => {
                if let Some(d) = &c.device {
                    prop_assert!(d.memory_gib.is_none_or(|m| m <= infergate_model::config::limits::MAX_MEMORY_GIB));
                }
                prop_assert!(c.scheduler.max_num_seqs <= infergate_model::config::limits::MAX_NUM_SEQS);
            }
            Err(e) => assert_located(&e, "configs/engine.toml"),
        }
    }
}
