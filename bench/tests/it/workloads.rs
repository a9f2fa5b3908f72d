//! Workloads that look like production: length distributions (requested against realised),
//! trace replay (send times, prefix sharing) on the simulator.

use crate::support::*;
use infergate_model::config::TimingConfig;
use infergate_sim::SimOptions;

fn fast_timing() -> TimingConfig {
    TimingConfig { ttft_ms: 1.0, itl_ms: 0.0, ..TimingConfig::default() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn length_distributions_are_requested_and_realised_as_configured() {
    let h = start_timing_sim(fast_timing(), SimOptions::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let p = profile(
        r#"
[profile.default]
endpoint = "completions"
[profile.default.load]
concurrency = 8
[profile.default.workload]
samples = 60
ignore_eos = true
[profile.default.workload.input_distribution]
kind = "lognormal"
mean = 200.0
stddev = 80.0
min = 40
max = 400
[profile.default.workload.output_distribution]
kind = "uniform"
min = 4
max = 24
"#,
        &[],
    );
    let out = run_against(&h, p, dir.path()).await;
    let w = &out.summary.workload;
    assert_eq!(w.items, 60);
    let req_in = w.input_length.requested.as_ref().expect("requested prompt lengths");
    let real_in = w.input_length.realised.as_ref().expect("realised prompt lengths");
    assert_eq!(req_in.count, 60);
    assert!(req_in.min >= 40.0 && req_in.max <= 400.0, "{req_in:?}");
    assert!(req_in.max > req_in.min, "drawn, not fixed: {req_in:?}");
    // The simulator's tokenizer is the one prompts are fitted with: what was asked is what the
    // server counted.
    assert_eq!(real_in.count, 60);
    assert_eq!((real_in.min, real_in.max, real_in.mean), (req_in.min, req_in.max, req_in.mean));
    let req_out = w.output_length.requested.as_ref().unwrap();
    let real_out = w.output_length.realised.as_ref().unwrap();
    assert!(req_out.min >= 4.0 && req_out.max <= 24.0 && req_out.max > req_out.min);
    assert_eq!(
        (real_out.min, real_out.max, real_out.mean),
        (req_out.min, req_out.max, req_out.mean)
    );
    assert!(matches!(
        w.input_length.distribution,
        Some(infergate_model::config::LengthDist::Lognormal { .. })
    ));
    let json = std::fs::read_to_string(out.dir.join("summary.json")).unwrap();
    assert!(json.contains("\"input_length\"") && json.contains("\"realised\""), "{json}");
}

fn trace_profile(trace: &std::path::Path, extra: &str) -> infergate_model::config::Profile {
    profile(
        &format!(
            r#"
[profile.default]
endpoint = "completions"
[profile.default.load]
mode = "trace"
{extra}
[profile.default.workload]
trace = "{}"
ignore_eos = true
[profile.default.scrape]
interval_s = 0.2
"#,
            trace.display()
        ),
        &[],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_sends_each_record_at_its_timestamp_times_the_scale_with_its_lengths() {
    let h = start_timing_sim(fast_timing(), SimOptions::default()).await;
    let dir = tempfile::tempdir().unwrap();
    // Mooncake records with uneven gaps, listed out of order (the replay sorts by arrival).
    let stamps: Vec<u64> = (0..30u64).map(|i| i * 23 + (i * i) % 7).collect();
    let mut lines: Vec<String> = stamps
        .iter()
        .enumerate()
        .map(|(i, t)| {
            format!(
                "{{\"timestamp\": {t}, \"input_length\": {}, \"output_length\": {}, \"hash_ids\": [{}]}}",
                20 + i,
                1 + i % 5,
                i % 3
            )
        })
        .collect();
    lines.swap(3, 4);
    let trace = dir.path().join("trace.jsonl");
    std::fs::write(&trace, lines.join("\n")).unwrap();
    let out = run_against(&h, trace_profile(&trace, "time_scale = 0.5"), dir.path()).await;
    assert_eq!(out.summary.requests.ok, 30, "{:?}", out.summary.notes);
    let recs = records_by_id(&out.dir);
    let first = recs[0].intended_ms;
    for (i, r) in recs.iter().enumerate() {
        // Record times have microsecond resolution.
        let want = stamps[i] as f64 * 0.5;
        assert!(
            (r.intended_ms - first - want).abs() <= 0.002,
            "request {i}: {} vs {want}",
            r.intended_ms - first
        );
        assert_eq!(r.input_tokens, Some(20 + i as u64), "request {i}");
        assert_eq!(r.output_tokens, Some(1 + i as u64 % 5), "request {i}");
    }
    let info = out.summary.workload.trace.as_ref().expect("the trace in the summary");
    assert_eq!((info.records, info.time_scale), (30, 0.5));
    assert_eq!(info.format, Some(infergate_model::config::TraceFormat::Mooncake));
    assert_eq!((info.blocks, info.reused_blocks), (30, 27));
    // The file is named with a hash of its content.
    let files = &out.summary.workload.files;
    assert_eq!(files.len(), 1);
    assert_eq!(files[0].path, trace.display().to_string());
    let bytes = std::fs::read(&trace).unwrap();
    assert_eq!(files[0], infergate_model::workload::WorkloadFile::of(&files[0].path, &bytes));
    assert!(files[0].hash.starts_with("fnv1a:") && files[0].hash.len() == 22);
    assert!(out.summary.workload.input_length.realised.is_some());

    // A window of the trace: records from 200 ms to 400 ms (trace time) after the first.
    let dir2 = tempfile::tempdir().unwrap();
    let p = trace_profile(&trace, "trace_start_s = 0.2\ntrace_duration_s = 0.2");
    let out = run_against(&h, p, dir2.path()).await;
    let inside: Vec<u64> = stamps.iter().copied().filter(|t| (200..400).contains(t)).collect();
    let recs = records_by_id(&out.dir);
    assert_eq!(recs.len(), inside.len());
    let offsets: Vec<f64> = recs.iter().map(|r| r.intended_ms - recs[0].intended_ms).collect();
    for (o, t) in offsets.iter().zip(&inside) {
        assert!((o - (*t - inside[0]) as f64).abs() <= 0.002, "{o} vs {t}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_trace_is_refused_with_its_file_and_line_before_anything_is_sent() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("bad.jsonl");
    std::fs::write(
        &trace,
        "{\"timestamp\": 0, \"input_length\": 5, \"output_length\": 1}\n\
         {\"timestamp\": 9, \"input_length\": 5}\n",
    )
    .unwrap();
    // A target nobody listens on: the trace is read before it is contacted.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let target = infergate_model::config::Target::at(url).with_model("m");
    let spec = bench::runner::RunSpec::quiet(
        trace_profile(&trace, ""),
        ("t".into(), target),
        dir.path().join("run"),
        "test",
    );
    let Err(err) = bench::runner::run(spec, bench::runner::RunControl::default()).await else {
        panic!("a malformed trace was run");
    };
    let chain = format!("{:#}", anyhow_chain(&err));
    assert!(chain.contains(&format!("{}:2: missing `output_length`", trace.display())), "{chain}");
    assert!(!dir.path().join("run/requests.jsonl").exists(), "nothing was run");
}

fn anyhow_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trace_with_a_known_share_of_reused_blocks_gets_that_prefix_cache_hit_rate() {
    let h = start_engine_sim(ENGINE_H100, SimOptions::default()).await;
    let dir = tempfile::tempdir().unwrap();
    // 120 records of 4 blocks of 64 tokens: the first two blocks come from one of 6 groups, the
    // last two are the record's own. After each group's first record, half of every prompt is
    // a prefix seen before: (120 - 6) x 2 of 480 blocks.
    let lines: Vec<String> = (0..120u64)
        .map(|i| {
            let g = i % 6;
            format!(
                "{{\"timestamp_ms\": {}, \"input_tokens\": 256, \"output_tokens\": 4, \"hash_ids\": [{}, {}, {}, {}]}}",
                i * 10,
                g * 10 + 1,
                g * 10 + 2,
                1000 + 2 * i,
                1001 + 2 * i
            )
        })
        .collect();
    let trace = dir.path().join("shared.jsonl");
    std::fs::write(&trace, lines.join("\n")).unwrap();
    let mut p = trace_profile(&trace, "");
    p.workload.trace_block_tokens = 64;
    let out = run_against(&h, p, dir.path()).await;
    assert_eq!(out.summary.requests.ok, 120, "{:?}", out.summary.notes);
    let expected = (120.0 - 6.0) * 2.0 / 480.0;
    let info = out.summary.workload.trace.as_ref().unwrap();
    assert_eq!((info.blocks, info.reused_blocks), (480, 228));
    let server = out.summary.server.as_ref().expect("the simulator was scraped");
    let rate = server.prefix_cache_hit_rate.expect("a hit rate");
    assert!((rate - expected).abs() <= 0.02, "hit rate {rate}, expected {expected}");
    assert_eq!(
        out.summary
            .metric(infergate_model::metric::MetricPath::named("server.prefix_cache_hit_rate")),
        Some(rate)
    );
    // The simulator's own counters agree.
    let text = scrape(&http(), &h).await;
    let values = parse_scrape(&text);
    let hits = metric(&values, "vllm:prefix_cache_hits_total", "");
    let queries = metric(&values, "vllm:prefix_cache_queries_total", "");
    assert!((hits / queries - expected).abs() <= 0.02, "{hits} / {queries}");
}

#[test]
fn every_shipped_profile_resolves_and_its_workload_files_load() {
    let root = &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let cfg = infergate_model::config::BenchConfig::load_in(
        root,
        std::path::Path::new("configs/bench.toml"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let (mut traces, mut conversations) = (0, 0);
    for name in cfg.profile_names() {
        let p = cfg.resolve(&name, &[]).unwrap_or_else(|e| panic!("{name}: {e}")).profile;
        let loaded = bench::runner::prepare::load_workload(&p.workload, &p.load, root)
            .unwrap_or_else(|e| panic!("{name}: {}", anyhow_chain(&e)));
        assert!(!loaded.workload.is_empty(), "{name}");
        if let Some((_, replay)) = &loaded.trace {
            traces += 1;
            assert!(replay.info.records >= 100, "{name}: {:?}", replay.info);
            assert_eq!(replay.offsets.len() as u64, replay.info.records);
        }
        if let Some(c) = &loaded.conversations {
            conversations += 1;
            let sessions = c.sessions.as_ref().map_or(0, Vec::len);
            let answers = c.answers.as_ref().expect("the samples take max_tokens from answers");
            assert!(answers.iter().all(Option::is_some), "{name}");
            match name.as_str() {
                "chat-sessions" => assert_eq!(sessions, 40),
                "chat-first-turns" => assert_eq!((sessions, loaded.workload.len()), (0, 30)),
                _ => {}
            }
        }
    }
    assert!(traces >= 2, "the trace profiles load their sample traces");
    assert!(conversations >= 2, "the conversation profiles load their samples");
}
