//! The engine simulator over HTTP, measured by the bench: its latencies and queue times agree
//! with the simulator's own records, `/metrics` parses and only counts up during a run, faults
//! land in their outcome classes, and a batch that runs out of memory fails only its requests,
//! is in the decision log and is named in the summary.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use crate::support::*;
use infergate_model::Outcome;
use infergate_model::config::FaultConfig;
use infergate_model::rundir;
use infergate_model::summary::RunStatus;
use infergate_sim::SimOptions;
use infergate_sim::engine::{DECISION_LOG_FILE, Decision, DecisionKind};

const PROFILE: &str = r#"
[profile.default]
[profile.default.load]
concurrency = 8
warmup_requests = 0
[profile.default.workload]
input_lengths = [64, 256, 512, 1024]
repeats = 8
max_tokens = 24
"#;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Tolerances of the agreement check, in ms. The bench measures from its intended send to the
/// arrival of a chunk; the simulator from the request's arrival to the chunk's hand-off to the
/// connection. The difference is loopback HTTP plus scheduling of two tasks on a shared machine:
/// never negative, sub-millisecond when the machine is idle. Per request it may spike when
/// other builds share the CPU, so the typical (median) difference is held tight and each
/// request loosely.
const TTFT_MEDIAN_TOL_MS: f64 = 3.0;
const TTFT_EACH_TOL_MS: f64 = 50.0;
/// TPOT averages the gaps over a request's tokens: first and last chunk skews divide by n - 1.
const TPOT_TOL_MS: f64 = 2.0;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_ttft_and_tpot_agree_with_the_simulators_own_records() {
    let _alone = crate::one_at_a_time().await;
    let dir = tempfile::tempdir().unwrap();
    let handle = start_engine_sim(ENGINE_H100, SimOptions::default()).await;
    let out = run_against(&handle, profile(PROFILE, &[]), dir.path()).await;
    let sims: HashMap<String, infergate_sim::SimRecord> =
        handle.records().into_iter().filter_map(|r| Some((r.request_id.clone()?, r))).collect();
    handle.shutdown().await;
    assert_eq!(out.summary.requests.ok, 32, "{:?}", out.summary.requests.by_class);
    let records = rundir::read_records(&out.dir).unwrap().records;
    let (mut ttft_diffs, mut tpot_diffs) = (Vec::new(), Vec::new());
    for r in &records {
        let s = &sims[&format!("test-{}", r.id)];
        assert_eq!(r.output_tokens, Some(s.output_tokens as u64));
        let sim_ttft = s.first_chunk_ms.unwrap() - s.arrival_ms;
        let d = r.ttft_ms().unwrap() - sim_ttft;
        // Causality: the bench's interval contains the simulator's.
        assert!(d >= -0.01, "request {}: bench TTFT {d} ms below the simulator's", r.id);
        assert!(d <= TTFT_EACH_TOL_MS, "request {}: +{d} ms", r.id);
        ttft_diffs.push(d);
        let sim_tpot =
            (s.last_chunk_ms.unwrap() - s.first_chunk_ms.unwrap()) / (s.output_tokens - 1) as f64;
        let dt = r.tpot_ms().unwrap() - sim_tpot;
        assert!(dt.abs() <= TPOT_TOL_MS, "request {}: TPOT differs by {dt} ms", r.id);
        tpot_diffs.push(dt.abs());
    }
    let m = median(ttft_diffs.clone());
    println!(
        "bench - simulator TTFT: median {m:.3} ms, max {:.3} ms; |TPOT diff| median {:.4} ms",
        ttft_diffs.iter().copied().fold(0.0, f64::max),
        median(tpot_diffs)
    );
    assert!(m <= TTFT_MEDIAN_TOL_MS, "median TTFT difference {m} ms");
    // The engine's work shows: a long prompt takes longer to prefill. Measured one request at a
    // time, so that no batch shared with other requests hides the prefill's cost in the TTFT.
    let dir = tempfile::tempdir().unwrap();
    let handle = start_engine_sim(ENGINE_H100, SimOptions::default()).await;
    let alone = "[profile.default]\n[profile.default.load]\nconcurrency = 1\nwarmup_requests = 0\n\
                 [profile.default.workload]\ninput_lengths = [64, 1024]\nrepeats = 4\nmax_tokens = 4\n";
    let out = run_against(&handle, profile(alone, &[]), dir.path()).await;
    handle.shutdown().await;
    let records = rundir::read_records(&out.dir).unwrap().records;
    let mean_ttft = |long: bool| {
        let v: Vec<f64> = records
            .iter()
            .filter(|r| (r.input_tokens.unwrap() > 900) == long)
            .map(|r| r.ttft_ms().unwrap())
            .collect();
        assert_eq!(v.len(), 4, "four requests of each length");
        v.iter().sum::<f64>() / v.len() as f64
    };
    println!(
        "alone: mean TTFT {:.2} ms (1024 tokens), {:.2} ms (64)",
        mean_ttft(true),
        mean_ttft(false)
    );
    assert!(
        mean_ttft(true) > mean_ttft(false),
        "mean TTFT of long prompts {} ms, of short ones {} ms",
        mean_ttft(true),
        mean_ttft(false)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bench_records_the_simulators_queue_times() {
    let _alone = crate::one_at_a_time().await;
    // Fixed batches of 4 with a 30 ms window and 6 clients: requests wait for windows and for
    // running batches, so queue times are far from zero.
    let engine = format!(
        "{ENGINE_H100}[batch]\nstrategy = \"fixed\"\nfixed_batch_size = 4\nmax_wait_ms = 30\n"
    );
    let dir = tempfile::tempdir().unwrap();
    let handle = start_engine_sim(&engine, SimOptions::default()).await;
    let p = profile(PROFILE, &["load.concurrency=6", "load.requests=24"]);
    let out = run_against(&handle, p, dir.path()).await;
    let all = handle.records();
    let sims: HashMap<String, infergate_sim::SimRecord> =
        all.iter().filter_map(|r| Some((r.request_id.clone()?, r.clone()))).collect();
    let values = parse_scrape(&scrape(&http(), &handle).await);
    handle.shutdown().await;
    assert_eq!(out.summary.requests.ok, 24);
    let records = rundir::read_records(&out.dir).unwrap().records;
    let mut queue = Vec::new();
    for r in &records {
        let sim_q = sims[&format!("test-{}", r.id)].queue_ms.unwrap();
        let q = r.queue_ms.expect("the simulator reports every queue time");
        // The header carries whole microseconds.
        assert!(
            (q - sim_q).abs() <= 0.0005 + 1e-6,
            "request {}: bench {q} ms, simulator {sim_q} ms",
            r.id
        );
        queue.push(q);
    }
    assert!(queue.iter().any(|&q| q > 5.0), "{queue:?}");
    // The summary's figure is the records', and the engine's histogram holds the same times as
    // the simulator's records (the runner's one-token probe included).
    let stats = out.summary.metrics.queue_ms.as_ref().unwrap();
    assert_eq!(stats.count, 24);
    let mean = queue.iter().sum::<f64>() / 24.0;
    // (Summary statistics are rounded to the microsecond.)
    assert!((stats.mean - mean).abs() <= 0.0005 + 1e-6, "{} vs {mean}", stats.mean);
    let sim_sum_s: f64 = all.iter().filter_map(|s| s.queue_ms).sum::<f64>() / 1e3;
    let count = metric(&values, "vllm:request_queue_time_seconds_count", "");
    let sum = metric(&values, "vllm:request_queue_time_seconds_sum", "");
    assert_eq!(count as usize, all.iter().filter(|s| s.queue_ms.is_some()).count());
    assert!(count >= 24.0);
    assert!((sum - sim_sum_s).abs() < 1e-6 * count, "{sum} vs {sim_sum_s}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_scraped_during_a_run_parse_and_counters_only_increase() {
    let _alone = crate::one_at_a_time().await;
    let dir = tempfile::tempdir().unwrap();
    let handle = start_engine_sim(ENGINE_H100, SimOptions::default()).await;
    let client = http();
    let first = scrape(&client, &handle).await;
    let p = profile(PROFILE, &["load.requests=48", "workload.max_tokens=32"]);
    let run = {
        let (base, model, dir) =
            (handle.base_url(), handle.model().to_string(), dir.path().to_path_buf());
        tokio::spawn(async move { run_against_url(&base, &model, p, &dir).await })
    };
    let mut texts = vec![first];
    for _ in 0..2000 {
        if run.is_finished() {
            break;
        }
        texts.push(scrape(&client, &handle).await);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let out = run.await.unwrap();
    texts.push(scrape(&client, &handle).await);
    assert!(texts.len() >= 4, "{} scrapes", texts.len());

    let mut previous: Option<HashMap<String, f64>> = None;
    let mut checked = 0;
    let mut generated = Vec::new();
    for text in &texts {
        let types = check_exposition(text);
        for name in [
            "vllm:num_requests_running",
            "vllm:num_requests_waiting",
            "vllm:kv_cache_usage_perc",
            "vllm:generation_tokens_total",
            "vllm:request_queue_time_seconds",
            "infergate_sim:oom_batches_total",
        ] {
            assert!(types.contains_key(name), "{name} missing");
        }
        let values = parse_scrape(text);
        let monotonic = cumulative_series(&types);
        if let Some(prev) = &previous {
            for (series, v) in prev {
                if monotonic.contains(series.split('{').next().unwrap()) {
                    let now =
                        values.get(series).copied().unwrap_or_else(|| panic!("{series} gone"));
                    assert!(now >= *v, "{series} decreased: {v} -> {now}");
                    checked += 1;
                }
            }
        }
        generated.push(metric(&values, "vllm:generation_tokens_total", ""));
        previous = Some(values);
    }
    let sims = handle.records();
    handle.shutdown().await;
    let (first, last) = (generated[0], *generated.last().unwrap());
    assert!(generated.iter().any(|&g| g > first && g < last), "a scrape saw the run in progress");
    assert!(checked > 100, "{checked} counter checks");
    // The last scrape accounts for every token the simulator sent, and those are the tokens the
    // bench received (besides the runner's probe, which has no request id).
    assert_eq!(out.summary.requests.ok, 48);
    let sent: u32 = sims.iter().map(|s| s.output_tokens).sum();
    assert_eq!(last - first, sent as f64);
    let received: u64 = rundir::read_records(&out.dir)
        .unwrap()
        .records
        .iter()
        .map(|r| r.output_tokens.unwrap())
        .sum();
    let labelled: u32 =
        sims.iter().filter(|s| s.request_id.is_some()).map(|s| s.output_tokens).sum();
    assert_eq!(received, labelled as u64);
    let ok = sims.iter().filter(|s| s.finish_reason.is_some()).count();
    assert_eq!(metric(&previous.unwrap(), "infergate_sim:requests_total", "outcome=ok"), ok as f64);
}

/// Engine mode spot check of the fault classes (every class is covered in timing mode by
/// faults.rs): the fault comes from the server, the request's engine work from the engine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_in_engine_mode_land_in_their_outcome_classes() {
    let _alone = crate::one_at_a_time().await;
    for (name, class) in [
        ("http_503", Outcome::Http(503)),
        ("truncate", Outcome::Truncated),
        ("error_event", Outcome::StreamError),
    ] {
        let mut faults = FaultConfig::default();
        for (n, p) in faults.probabilities_mut() {
            if n == name {
                *p = 1.0;
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let handle =
            start_engine_sim(ENGINE_H100, SimOptions { faults, ..SimOptions::default() }).await;
        let p = profile(PROFILE, &["load.requests=8", "workload.max_tokens=16"]);
        let out = run_against(&handle, p, dir.path()).await;
        let s = &out.summary;
        assert_eq!(
            s.requests.by_class.get(&class.to_string()),
            Some(&8),
            "{name}: {:?}",
            s.requests.by_class
        );
        assert_eq!(s.status, RunStatus::Failed);
        assert!(s.metrics.ttft_ms.is_none() && s.metrics.e2e_ms.is_none());
        if name != "http_503" {
            // The stream broke after its first token; the engine frees the request at its next
            // step and counts it as cancelled.
            let client = http();
            let cancelled = async || {
                let values = parse_scrape(&scrape(&client, &handle).await);
                metric(&values, "infergate_sim:cancelled_requests_total", "")
            };
            wait_until(Duration::from_secs(10), "8 requests cancelled by the engine", async || {
                cancelled().await >= 8.0
            })
            .await;
            assert_eq!(cancelled().await, 8.0, "{name}");
        }
        handle.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_out_of_memory_batch_fails_its_requests_and_is_in_the_log_and_the_summary() {
    let _alone = crate::one_at_a_time().await;
    // ~215 KV blocks. Fixed batches of the 4 clients' requests (the window is long enough that
    // a batch always waits for all four): 4 long prompts need ~250 blocks and fail, 4 short
    // ones fit. The workload alternates 4 long and 4 short requests.
    let dir = tempfile::tempdir().unwrap();
    let engine = "[engine]\nmodel = \"meta-llama/Llama-3.1-8B-Instruct\"\nmax_model_len = 2048\n\
        gpu_memory_utilization = 0.207\n[scheduler]\nmax_num_seqs = 16\nmax_num_batched_tokens = 2048\n\
        [batch]\nstrategy = \"fixed\"\nfixed_batch_size = 4\nmax_wait_ms = 500\n\
        [device]\nname = \"H100-SXM-80GB\"\n";
    std::fs::write(dir.path().join("engine.toml"), engine).unwrap();
    let profile = profile(
        r#"
[profile.default]
[profile.default.load]
concurrency = 4
warmup_requests = 0
[profile.default.workload]
input_lengths = [900, 900, 900, 900, 16, 16, 16, 16]
repeats = 2
max_tokens = 100
shuffle = false
[profile.default.sim]
engine_config = "engine.toml"
save_scheduler_decision = true
"#,
        &[],
    );
    let out = run_embedded(profile, dir.path()).await;
    let s = &out.summary;
    let records = rundir::read_records(&out.dir).unwrap().records;
    let failed: BTreeSet<u64> = records.iter().filter(|r| !r.class.is_ok()).map(|r| r.id).collect();
    assert_eq!(failed, BTreeSet::from([0, 1, 2, 3, 8, 9, 10, 11]), "{:?}", s.requests.by_class);
    for r in records.iter().filter(|r| !r.class.is_ok()) {
        assert_eq!(r.class, Outcome::Http(500));
        assert!(r.error.as_deref().unwrap().contains("out of memory"), "{:?}", r.error);
    }
    assert_eq!(s.requests.ok, 8, "the short batches run");
    assert_eq!(s.status, RunStatus::Complete);

    // The decision log, in the run directory, has the two batches that crossed the line.
    let log = std::fs::read_to_string(out.dir.join(DECISION_LOG_FILE)).unwrap();
    let decisions: Vec<Decision> =
        log.lines().map(|l| serde_json::from_str(l).expect("one decision per line")).collect();
    let ooms: Vec<&Decision> =
        decisions.iter().filter(|d| d.decision == DecisionKind::Oom).collect();
    assert_eq!(ooms.len(), 2);
    let in_log: BTreeSet<String> =
        ooms.iter().flat_map(|d| d.failed.iter().map(|r| r.request_id.clone().unwrap())).collect();
    let expected: BTreeSet<String> = failed.iter().map(|id| format!("test-{id}")).collect();
    assert_eq!(in_log, expected);
    for d in &ooms {
        assert!(d.kv_blocks_needed.unwrap() > d.kv_blocks_total, "{d:?}");
    }
    assert!(decisions.iter().any(|d| d.formed.is_some() && d.decision == DecisionKind::Step));

    // The summary names them.
    let sched = s.extra.scheduler.as_ref().expect("the scheduler's section");
    assert_eq!(sched.strategy, "fixed");
    assert_eq!(sched.oom_batches, 2);
    assert_eq!(sched.failed_requests, 8);
    assert_eq!(sched.decision_log.as_deref(), Some(DECISION_LOG_FILE));
    let notes: Vec<&String> = s.notes.iter().filter(|n| n.starts_with("out of memory")).collect();
    assert_eq!(notes.len(), 2, "{:?}", s.notes);
    assert!(notes[0].contains("test-0") && notes[0].contains(DECISION_LOG_FILE), "{}", notes[0]);
    let on_disk = infergate_model::Summary::read(&out.dir).unwrap();
    assert_eq!(on_disk.notes, s.notes);
    // The same notes, typed: the outcome carries the scheduler's report.
    assert_eq!(out.out_of_memory_notes().iter().collect::<Vec<_>>(), notes);
    assert_eq!(out.scheduler.as_ref().map(|r| r.oom_batches), Some(2));
    assert!(s.simulated, "the embedded simulator announces itself");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_decision_log_is_only_written_when_asked_for() {
    let _alone = crate::one_at_a_time().await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("engine.toml"), ENGINE_H100).unwrap();
    let text = "[profile.default]\n[profile.default.load]\nconcurrency = 2\nrequests = 4\n\
        warmup_requests = 0\n[profile.default.workload]\ninput_lengths = [32]\nrepeats = 4\n\
        max_tokens = 4\n[profile.default.sim]\nengine_config = \"engine.toml\"\n";
    let out = run_embedded(profile(text, &[]), dir.path()).await;
    assert_eq!(out.summary.requests.ok, 4);
    assert!(!out.dir.join(DECISION_LOG_FILE).exists());
    let sched = out.summary.extra.scheduler.as_ref().expect("the scheduler's section");
    assert_eq!(sched.strategy, "continuous");
    assert!(sched.decision_log.is_none());
    let on_disk: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.dir.join("summary.json")).unwrap()).unwrap();
    assert!(on_disk["extra"]["scheduler"].get("decision_log").is_none(), "{on_disk}");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("engine.toml"), ENGINE_H100).unwrap();
    let out = run_embedded(profile(text, &["sim.save_scheduler_decision=true"]), dir.path()).await;
    let log = std::fs::read_to_string(out.dir.join(DECISION_LOG_FILE)).unwrap();
    let steps = log
        .lines()
        .map(|l| serde_json::from_str::<Decision>(l).unwrap())
        .filter(|d| d.decision == DecisionKind::Step)
        .count();
    assert_eq!(steps as u64, out.summary.extra.scheduler.as_ref().unwrap().steps);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_tokens_beyond_the_context_is_refused_with_400_and_the_simulator_serves_on() {
    let _alone = crate::one_at_a_time().await;
    let timing = start_timing_sim(
        infergate_model::config::TimingConfig { ttft_ms: 1.0, itl_ms: 0.1, ..Default::default() },
        SimOptions::default(),
    )
    .await;
    let engine = start_engine_sim(ENGINE_H100, SimOptions::default()).await;
    let client = http();
    for (handle, limit) in [(&timing, infergate_sim::server::TIMING_MAX_MODEL_LEN), (&engine, 4096)]
    {
        let url = format!("{}/v1/chat/completions", handle.base_url());
        for (max_tokens, stream) in
            [(4_000_000_000u64, true), (4_000_000_000, false), (u64::MAX, true)]
        {
            let body = serde_json::json!({"model": handle.model(), "stream": stream,
                "messages": [{"role": "user", "content": "hi"}], "max_tokens": max_tokens});
            let resp = client.post(&url).json(&body).send().await.unwrap();
            assert_eq!(resp.status().as_u16(), 400);
            let text = resp.text().await.unwrap();
            assert!(text.contains(&format!("maximum context length is {limit} tokens")), "{text}");
        }
        // The simulator is still serving.
        let body = serde_json::json!({"model": handle.model(), "stream": false,
            "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2});
        let resp = client.post(&url).json(&body).send().await.unwrap();
        assert_eq!(resp.status().as_u16(), 200);
    }
}
