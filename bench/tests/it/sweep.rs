//! A concurrency sweep against the engine simulator: throughput rises with concurrency until the
//! KV budget binds, and the knee found from the measured stages is the one the engine model
//! predicts in virtual time.
//!
//! Tolerance: the knee is the same stage (the SLO sits a factor of 3 away from the predicted TTFT
//! p99 of the stages on either side of it). Each stage's measured output throughput is checked
//! against the server's own account of the same requests, not against the model: the tokens the
//! simulator recorded sending to the stage's measured requests over the span from the first of
//! them arriving to the last of them sending its last chunk, within 3% (the client's window
//! starts at the intended send, a fraction of a millisecond before the server's arrival, and ends
//! when the last chunk is read).

use crate::support::*;
use bench::runner::{RunControl, RunSpec};
use infergate_model::config::{BenchConfig, Override, ResolvedProfile, Source, Target};
use infergate_model::sweep::{self, Dimension, StagePlan, SweepSpec};
use infergate_sim::SimOptions;
use infergate_sim::engine::SimRequest;

const PROFILE: &str = r#"
[profile.default]
endpoint = "chat"
[profile.default.load]
concurrency = 1
[profile.default.workload]
input_lengths = [96]
repeats = 4
max_tokens = 32
ignore_eos = true
[profile.default.slo]
ttft_ms = TTFT_SLO
[profile.default.scrape]
interval_s = 0.1
"#;

/// Prompt tokens the simulator sees for a 96-token synthetic prompt in one chat message.
const PROMPT_TOKENS: u32 = 96 + 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throughput_rises_until_the_kv_budget_binds_and_the_knee_matches_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let spec = engine_spec(SMALL_ENGINE);
    let sweep_spec: SweepSpec = "concurrency=1,4,16".parse().unwrap();
    let plan = StagePlan::default();
    let text = PROFILE.replace("TTFT_SLO", "150");
    let cfg = BenchConfig::from_source(Source::new("test.toml", text)).unwrap();
    let base = cfg.resolve("default", &[]).unwrap().profile;
    let items = sweep::synthetic_items(&base);

    // The engine model's prediction, stage by stage.
    let mut predicted = Vec::new();
    for &c in &sweep_spec.values {
        let o = sweep::stage_overrides(Dimension::Concurrency, c, &plan, &base, items);
        let p = cfg.resolve("default", &o).unwrap().profile;
        let n = p.load.requests.unwrap() + p.load.warmup_requests;
        let reqs = (0..n).map(|_| SimRequest::new(0.0, PROMPT_TOKENS, 32)).collect();
        predicted.push(infergate_sim::predict::predict_closed(
            &spec,
            c as u32,
            reqs,
            p.load.warmup_requests as usize,
        ));
    }

    let handle = start_engine_sim(SMALL_ENGINE, SimOptions::default()).await;
    let target = Target {
        base_url: handle.base_url(),
        model: Some(handle.model().to_string()),
        api_key_env: None,
        engine_config: None,
        max_tokens_field: Default::default(),
        metrics_url: None,
        description: None,
        headers: Default::default(),
        ca_bundle: None,
    };
    let sweep_dir = dir.path().join("sweep");
    let setup = sweep::SweepSetup {
        dir: sweep_dir.clone(),
        sweep_id: "test-sweep".into(),
        spec: sweep_spec.clone(),
        plan: plan.clone(),
        slo: base.slo.clone(),
    };
    let result = bench::sweep::run(
        &setup,
        RunControl::default(),
        |i, load| {
            let o: Vec<Override> =
                sweep::stage_overrides(Dimension::Concurrency, load, &plan, &base, items);
            let mut profile = cfg.resolve("default", &o).unwrap().profile;
            profile.target = Some("sim".into());
            Ok(RunSpec {
                profile: ResolvedProfile {
                    name: "default".into(),
                    profile,
                    target: Some(("sim".into(), target.clone())),
                    file: None,
                },
                out_dir: sweep_dir.join(sweep::stage_dir_name(i, Dimension::Concurrency, load)),
                run_id: format!("stage-{i}"),
                git: None,
                engine: None,
                quiet: true,
                handle_signals: false,
                root: dir.path().to_path_buf(),
                invocation: None,
                shard: None,
                slice: None,
                isolation: None,
                preflight: None,
            })
        },
        |_, _| {},
    )
    .await
    .unwrap();
    let served = handle.records();
    handle.shutdown().await;

    let diag = format!("predicted {predicted:#?}\nmeasured {:#?}", result.stages);
    assert_eq!(result.stages.len(), 3, "{diag}");
    let tput: Vec<f64> = result.stages.iter().map(|s| s.output_tokens_per_s.unwrap()).collect();
    // Rises with concurrency while the KV cache has room...
    assert!(tput[1] > 2.5 * tput[0], "{diag}");
    // ...and stops rising once it binds: 16 requests need ~144 of 67 blocks.
    assert!(tput[2] < 2.0 * tput[1], "{diag}");
    assert!(result.stages[2].server_preemptions.unwrap() > 0.0, "{diag}");
    assert!(result.stages[2].server_kv_cache_usage_max.unwrap() > 0.8, "{diag}");
    assert_eq!(result.stages[0].server_preemptions, Some(0.0), "{diag}");
    for (i, m) in result.stages.iter().enumerate() {
        let stage = infergate_model::rundir::read_records(&sweep_dir.join(&m.dir)).unwrap().records;
        let measured: std::collections::HashSet<String> =
            stage.iter().filter(|r| !r.warmup).map(|r| format!("stage-{i}-{}", r.id)).collect();
        let served: Vec<_> = served
            .iter()
            .filter(|r| r.request_id.as_ref().is_some_and(|id| measured.contains(id)))
            .collect();
        assert_eq!(served.len(), measured.len(), "stage {}: the server served them all", m.stage);
        let tokens: f64 = served.iter().map(|r| f64::from(r.output_tokens)).sum();
        let from = served.iter().map(|r| r.arrival_ms).fold(f64::INFINITY, f64::min);
        let to = served.iter().filter_map(|r| r.last_chunk_ms).fold(0.0, f64::max);
        let server_rate = tokens / ((to - from) / 1000.0);
        let ratio = m.output_tokens_per_s.unwrap() / server_rate;
        assert!(
            (0.97..=1.03).contains(&ratio),
            "stage {}: measured {:?} tok/s, the server's own account {server_rate:.1} tok/s\n{diag}",
            m.stage,
            m.output_tokens_per_s
        );
    }
    // The knee: the model's and the measured one are the same stage.
    let slo = &base.slo;
    let predicted_knee = predicted
        .iter()
        .take_while(|p| p.ttft_p99_ms.is_some_and(|t| t <= slo.ttft_ms.unwrap()))
        .last()
        .map(|p| p.load);
    assert_eq!(predicted_knee, Some(4.0), "{diag}");
    assert!(predicted[1].ttft_p99_ms.unwrap() * 3.0 < 150.0, "{diag}");
    assert!(predicted[2].ttft_p99_ms.unwrap() > 3.0 * 150.0, "{diag}");
    assert_eq!(result.knee.as_ref().map(|k| k.load), predicted_knee, "{diag}");

    // Files: the sweep summary and each stage's own run directory with extra.sweep.
    let read = sweep::SweepSummary::read(&sweep_dir).unwrap();
    assert_eq!(read, result);
    let knee_stage =
        infergate_model::Summary::read(&sweep_dir.join(&result.stages[1].dir)).unwrap();
    let section = knee_stage.extra.sweep.as_ref().expect("the stage's sweep section");
    assert!(section.is_knee);
    assert_eq!(section.knee, Some(4.0));
    assert_eq!(knee_stage.requests.total, result.stages[1].requests);
}
