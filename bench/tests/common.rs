//! Helpers shared by the integration tests: start a simulator, run the bench against it.

#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;

use bench::config::{
    BenchConfig, Override, Profile, ResolvedProfile, Source, Target, TimingConfig,
};
use bench::runner::{self, RunControl, RunOutcome, RunSpec};
use bench::sim::{self, SimHandle, SimOptions, TimingBackend};

/// Start a timing-mode simulator on an OS-chosen loopback port.
pub async fn start_timing_sim(timing: TimingConfig, opts: SimOptions) -> SimHandle {
    sim::start(opts, Arc::new(TimingBackend::new(timing)), ([127, 0, 0, 1], 0).into())
        .await
        .expect("start the simulator")
}

/// A profile from TOML text (the `[profile.default]` body) plus overrides.
pub fn profile(toml_text: &str, overrides: &[&str]) -> Profile {
    let cfg = BenchConfig::from_source(Source::new("test.toml", toml_text.to_string()))
        .expect("valid test config");
    let o: Vec<Override> = overrides.iter().map(|s| Override::parse(s).unwrap()).collect();
    cfg.resolve("default", &o).expect("valid test profile").profile
}

/// Run the bench against a running simulator.
pub async fn run_against(handle: &SimHandle, profile: Profile, dir: &Path) -> RunOutcome {
    run_with_control(handle, profile, dir, RunControl::default()).await
}

pub async fn run_with_control(
    handle: &SimHandle,
    profile: Profile,
    dir: &Path,
    control: RunControl,
) -> RunOutcome {
    run_url_with_control(&handle.base_url(), handle.model(), profile, dir, control).await
}

pub async fn run_against_url(
    base_url: &str,
    model: &str,
    profile: Profile,
    dir: &Path,
) -> RunOutcome {
    run_url_with_control(base_url, model, profile, dir, RunControl::default()).await
}

pub async fn run_url_with_control(
    base_url: &str,
    model: &str,
    profile: Profile,
    dir: &Path,
    control: RunControl,
) -> RunOutcome {
    run_target(base_url, model, None, profile, dir, control).await
}

/// Run against a simulator whose metrics are scraped from `metrics_path` instead of `/metrics`.
pub async fn run_against_url_with_metrics(
    handle: &SimHandle,
    profile: Profile,
    dir: &Path,
    metrics_path: &str,
) -> RunOutcome {
    let url = format!("{}{metrics_path}", handle.base_url());
    run_target(&handle.base_url(), handle.model(), Some(url), profile, dir, RunControl::default())
        .await
}

pub async fn run_target(
    base_url: &str,
    model: &str,
    metrics_url: Option<String>,
    mut profile: Profile,
    dir: &Path,
    control: RunControl,
) -> RunOutcome {
    let target = Target {
        base_url: base_url.to_string(),
        model: Some(model.to_string()),
        api_key_env: None,
        engine_config: None,
        max_tokens_field: Default::default(),
        metrics_url,
        description: None,
    };
    profile.target = Some("sim".into());
    let spec = RunSpec {
        profile: ResolvedProfile {
            name: "default".into(),
            profile,
            target: Some(("sim".into(), target)),
            file: None,
        },
        out_dir: dir.join("run"),
        run_id: "test".into(),
        git: None,
        engine: None,
        quiet: true,
        handle_signals: false,
        capture_text: false,
        logprobs: None,
        root: dir.to_path_buf(),
    };
    runner::run(spec, control).await.expect("the run completes")
}

/// An engine spec from engine-config TOML text.
pub fn engine_spec(toml_text: &str) -> bench::sim::engine::EngineSpec {
    let cfg = bench::config::EngineConfig::from_source(&Source::new("engine.toml", toml_text))
        .expect("valid engine config");
    bench::sim::engine::EngineSpec::new(&cfg).expect("valid engine spec")
}

/// Start an engine-model simulator for a spec on an OS-chosen loopback port.
pub async fn start_engine_sim(
    spec: &bench::sim::engine::EngineSpec,
    opts: SimOptions,
) -> SimHandle {
    let backend = Arc::new(bench::sim::engine::EngineBackend::new(spec));
    let opts = SimOptions { model: spec.served_model_name.clone(), ..opts };
    sim::start(opts, backend, ([127, 0, 0, 1], 0).into()).await.expect("start the simulator")
}

/// A small engine: a 1B model on an L4 with a KV cache of a few hundred tokens, so the KV budget
/// binds at a handful of concurrent requests and every step lasts ~10 ms.
pub const SMALL_ENGINE: &str = r#"
[engine]
model = "meta-llama/Llama-3.2-1B-Instruct"
dtype = "bfloat16"
gpu_memory_utilization = 0.1425   # 67 KV blocks (1072 tokens)
max_model_len = 512
[scheduler]
max_num_seqs = 64
max_num_batched_tokens = 1024
enable_chunked_prefill = true
enable_prefix_caching = false
[device]
name = "L4"
price_per_hour = 0.8
count = 1
"#;
