//! Server-side metrics and cost: the bench scrapes the simulator's `/metrics` during a run and
//! reports counter deltas over the measured window; they must equal what the simulator itself
//! recorded for the same requests.

use crate::support::*;
use infergate_model::server_metrics::ServerSection;
use infergate_sim::SimOptions;

const PROFILE: &str = r#"
[profile.default]
endpoint = "chat"
[profile.default.load]
concurrency = 12
warmup_requests = 0
[profile.default.workload]
input_lengths = [64, 160]
repeats = 12
max_tokens = 24
[profile.default.scrape]
interval_s = 0.05
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counter_deltas_over_the_window_equal_the_simulators_own_records() {
    let dir = tempfile::tempdir().unwrap();
    let handle = start_engine_sim(SMALL_ENGINE, SimOptions::default()).await;
    // Long answers: a running request grows by 13 blocks, so any three long ones running at once
    // exceed the budget, however the client's sends are spread on a busy machine.
    let out =
        run_against(&handle, profile(PROFILE, &["workload.max_tokens=200"]), dir.path()).await;
    let records = handle.records();
    // The simulator's counters after the run, read directly.
    let metrics = reqwest_get(&format!("{}/metrics", handle.base_url())).await;
    handle.shutdown().await;

    let s = &out.summary;
    assert_eq!(s.requests.ok, 24, "{:?}", s.requests.by_class);
    let server: ServerSection = s.server.clone().expect("scraped");
    assert_eq!(server.engine, "infergate-sim");
    assert!(server.bracket.as_ref().unwrap().encloses_window);
    // The bench's one-token probe (before the load, outside the window) carries no request id.
    let records: Vec<_> = records.into_iter().filter(|r| r.request_id.is_some()).collect();
    let sim_generated: u64 = records.iter().map(|r| r.output_tokens as u64).sum();
    assert_eq!(sim_generated, 24 * 200);
    assert_eq!(server.generation_tokens, Some(sim_generated as f64));
    assert_eq!(s.tokens.output_total, Some(sim_generated));
    assert_eq!(server.goodput_ratio, Some(1.0));
    let sim_prompt: u64 = records.iter().map(|r| r.prompt_tokens as u64).sum();
    assert_eq!(server.prompt_tokens, Some(sim_prompt as f64));
    // 12 requests of ~360 tokens need ~270 blocks of 67: the KV budget binds, requests are
    // preempted, and the delta equals the simulator's own counter (it started at zero).
    let e = infergate_model::promtext::parse(&metrics);
    let preemptions = e.sum("vllm:num_preemptions_total").unwrap();
    assert!(preemptions > 0.0, "the KV budget should bind");
    assert_eq!(server.preemptions, Some(preemptions));
    let kv = server.kv_cache_usage.expect("KV usage sampled");
    assert!(kv.max > 0.5 && kv.max <= 1.0, "{kv:?}");
    assert!(server.running.unwrap().max >= 1.0);
    assert!(server.kv_fragmentation.is_some());
    assert!(server.gpu.is_none(), "no nvidia-smi samples for the simulator");
    // The summary's metric paths for gates and records.
    assert_eq!(
        s.metric(infergate_model::metric::MetricPath::named("server.goodput_ratio")),
        Some(1.0)
    );
    assert_eq!(
        s.metric(infergate_model::metric::MetricPath::named("server.preemptions")),
        Some(preemptions)
    );
    assert!(
        s.metric(infergate_model::metric::MetricPath::named("server.kv_cache_usage.max")).is_some()
    );
    assert!(
        s.metric(infergate_model::metric::MetricPath::named("server.kv_fragmentation")).is_some()
    );
    // No engine config recorded for this target: cost stays blank.
    assert_eq!(s.cost.per_1m_output_tokens, None);
}

/// Warmup requests overlap the first measured ones, and a server counts their tokens too: the
/// counters cover the whole run, and the ratio compares them with every ok request's tokens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_warmup_the_counters_and_the_ratio_cover_the_whole_run() {
    let dir = tempfile::tempdir().unwrap();
    let handle = start_engine_sim(SMALL_ENGINE, SimOptions::default()).await;
    let out = run_against(&handle, profile(PROFILE, &["load.warmup_requests=6"]), dir.path()).await;
    let records: Vec<_> = handle.records().into_iter().filter(|r| r.request_id.is_some()).collect();
    handle.shutdown().await;
    let s = &out.summary;
    assert_eq!((s.requests.ok, s.requests.warmup), (24, 6), "{:?}", s.requests.by_class);
    let server: ServerSection = s.server.clone().expect("scraped");
    assert!(server.bracket.as_ref().unwrap().encloses_window);
    let sim_generated: u64 = records.iter().map(|r| r.output_tokens as u64).sum();
    assert_eq!(sim_generated, 30 * 24, "warmup and measured requests");
    assert_eq!(server.generation_tokens, Some(sim_generated as f64));
    assert_eq!(s.tokens.output_total, Some(24 * 24), "client metrics exclude the warmup");
    assert_eq!(server.goodput_ratio, Some(1.0), "every generated token reached the client");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_without_metrics_is_skipped_with_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let handle = start_timing_sim(Default::default(), SimOptions::default()).await;
    let p = profile(PROFILE, &["workload.repeats=1", "load.concurrency=2"]);
    // The timing simulator serves /metrics too; point the scraper at a path that does not exist.
    let mut p2 = p.clone();
    p2.scrape.interval_s = 0.05;
    let out = run_against_url_with_metrics(&handle, p2, dir.path(), "/no-metrics-here").await;
    handle.shutdown().await;
    assert!(out.summary.server.is_none());
    assert!(
        out.summary.notes.iter().any(|n| n.contains("server metrics skipped")),
        "{:?}",
        out.summary.notes
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_embedded_simulator_reports_cost_from_its_engine_config() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("configs")).unwrap();
    std::fs::write(dir.path().join("configs/engine.toml"), SMALL_ENGINE).unwrap();
    let mut p = profile(PROFILE, &["workload.repeats=2", "load.concurrency=4"]);
    p.target = None;
    let spec = bench::runner::RunSpec {
        profile: infergate_model::config::ResolvedProfile {
            name: "default".into(),
            profile: p,
            target: None,
            file: None,
        },
        out_dir: dir.path().join("run"),
        run_id: "cost".into(),
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
    };
    let out = bench::runner::run(spec, Default::default()).await.unwrap();
    let s = &out.summary;
    let c = &s.cost;
    // The window from the per-request records, not from the summary being checked: from the
    // earliest intended send of a measured request to the latest end of one.
    let records = infergate_model::rundir::read_records(&out.dir).unwrap().records;
    let measured: Vec<_> = records.iter().filter(|r| !r.warmup).collect();
    assert_eq!(measured.len() as u64, s.requests.total);
    let from = measured.iter().map(|r| r.intended_ms).fold(f64::INFINITY, f64::min);
    let to = measured.iter().map(|r| r.end_ms).fold(0.0, f64::max);
    let window = (to - from) / 1000.0;
    let summary_window = s.timing.window.duration_s.unwrap();
    assert!(
        (summary_window - window).abs() < 1e-6,
        "{summary_window} vs {window} from the records"
    );
    let tokens: u64 =
        measured.iter().filter(|r| r.class.is_ok()).map(|r| r.output_tokens.unwrap()).sum();
    assert_eq!(s.tokens.output_total, Some(tokens));
    assert_eq!(c.price_per_hour, Some(0.8));
    assert_eq!(c.devices, Some(1));
    let total = window * 0.8 / 3600.0;
    assert!((c.total.unwrap() - total).abs() < 1e-8, "{c:?}");
    let per_1m = total / tokens as f64 * 1e6;
    assert!((c.per_1m_output_tokens.unwrap() - per_1m).abs() < 1e-6, "{c:?}");
    assert!((c.per_request.unwrap() - total / s.requests.ok as f64).abs() < 1e-9);
    assert_eq!(
        s.metric(infergate_model::metric::MetricPath::named("cost.per_1m_output_tokens")),
        c.per_1m_output_tokens
    );
    // The embedded simulator's /metrics was scraped too.
    assert!(s.server.is_some(), "{:?}", s.notes);
}

async fn reqwest_get(url: &str) -> String {
    bench::client::http_builder()
        .no_proxy()
        .build()
        .unwrap()
        .get(url)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}
