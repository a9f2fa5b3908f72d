//! Shared test helpers: summaries built in code, the CLI binary, temporary repositories.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use bench::Summary;
use bench::metrics::{Goodput, LatencyMetrics, RequestCounts, Slo, Stats, Throughput, TokenCounts};
use bench::summary::{
    Cost, EngineParams, Environment, GitInfo, RunStatus, ScheduleSummary, Timing, TargetInfo,
    ToolInfo,
};
use serde_json::json;

pub fn stats(p99: f64) -> Stats {
    Stats {
        count: 80,
        mean: p99 * 0.5,
        stdev: p99 * 0.1,
        min: p99 * 0.2,
        p50: p99 * 0.5,
        p90: p99 * 0.8,
        p95: p99 * 0.9,
        p99,
        p999: p99 * 1.05,
        max: p99 * 1.1,
    }
}

/// A complete, measured run against a real target with the given headline numbers.
pub fn summary(run_id: &str, ttft_p99: f64, tpot_p99: f64, goodput: f64, engine: serde_json::Value) -> Summary {
    let environment = Environment {
        os: "linux".into(),
        arch: "x86_64".into(),
        cpus: 8,
        cpu_model: Some("Test CPU".into()),
        memory_gib: Some(31.2),
        hostname: None,
    };
    Summary {
        schema_version: bench::summary::SCHEMA_VERSION,
        run_id: run_id.into(),
        status: RunStatus::Complete,
        simulated: false,
        tool: ToolInfo { name: "infergate".into(), version: "0.1.0".into() },
        git: Some(GitInfo { commit: "0123456789abcdef0123456789abcdef01234567".into(), dirty: false }),
        environment_fingerprint: environment.fingerprint(),
        environment,
        target: TargetInfo {
            name: "local-vllm".into(),
            api_base: "http://127.0.0.1:8000/v1".into(),
            url: "http://127.0.0.1:8000/v1/chat/completions".into(),
            endpoint: "chat".into(),
            stream: true,
            model: "test-model".into(),
            api_key_env: None,
            models: None,
            max_tokens_field: None,
        },
        config: json!({
            "load": {"mode": "closed", "concurrency": 64},
            "workload": {"input_lengths": [128, 256, 512, 1024], "repeats": 20, "max_tokens": 128},
            "slo": {"ttft_ms": 500.0, "tpot_ms": 50.0}
        }),
        profile: "default".into(),
        engine: Some(EngineParams { file: "configs/engine.toml".into(), params: engine }),
        timing: Timing {
            started_at: "2025-05-01T10:00:00Z".into(),
            ended_at: "2025-05-01T10:01:00Z".into(),
            window: Default::default(),
        },
        requests: RequestCounts { total: 80, ok: 80, failed: 0, warmup: 4, by_class: Default::default() },
        tokens: TokenCounts::default(),
        metrics: LatencyMetrics {
            ttft_ms: Some(stats(ttft_p99)),
            tpot_ms: Some(stats(tpot_p99)),
            itl_ms: Some(stats(tpot_p99 * 1.2)),
            e2e_ms: Some(stats(ttft_p99 + 128.0 * tpot_p99)),
            itl_jitter: Some(0.123),
            queue_ms: None,
        },
        throughput: Throughput {
            requests_per_s: Some(10.5),
            output_tokens_per_s: Some(1344.0),
            total_tokens_per_s: Some(6384.0),
        },
        goodput: Goodput {
            slo: Slo { ttft_ms: Some(500.0), tpot_ms: Some(50.0), e2e_ms: None },
            requests: Some((goodput * 80.0).round() as u64),
            requests_per_s: Some(10.0),
            ratio: Some(goodput),
        },
        schedule: ScheduleSummary::default(),
        cost: Cost {
            price_per_hour: Some(2.5),
            devices: Some(1),
            device_seconds: Some(60.0),
            total: Some(0.041667),
            per_request: Some(0.000521),
            per_1m_output_tokens: Some(0.5167),
            basis: Some("estimated".into()),
        },
        server: Some(json!({"kv_fragmentation": 0.042})),
        extra: Default::default(),
        notes: Vec::new(),
    }
}

pub fn engine_params(chunked: bool, batched: u64) -> serde_json::Value {
    json!({
        "engine": {"model": "test-model", "dtype": "float16", "gpu_memory_utilization": 0.92},
        "scheduler": {
            "max_num_seqs": 256,
            "max_num_batched_tokens": batched,
            "enable_chunked_prefill": chunked,
            "scheduler_policy": "fcfs"
        }
    })
}

/// Write a summary as `<dir>/<run_id>/summary.json`; returns the run directory.
pub fn write_run(dir: &Path, s: &Summary) -> PathBuf {
    let run = dir.join(&s.run_id);
    std::fs::create_dir_all(&run).unwrap();
    std::fs::write(run.join("summary.json"), serde_json::to_string_pretty(s).unwrap()).unwrap();
    run
}

/// Output of one CLI invocation.
pub struct Out {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Run `cargo xtask -C <root> <args>` (the built binary).
pub fn xtask(root: &Path, args: &[&str]) -> Out {
    let out = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .arg("-C")
        .arg(root)
        .args(args)
        .output()
        .expect("run the xtask binary");
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The repository this crate lives in.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}
