//! Workloads that look like production: length distributions (requested against realised),
//! trace replay (send times, prefix sharing) on the simulator.

use crate::support::*;
use bench::config::TimingConfig;
use bench::sim::SimOptions;

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
        Some(bench::config::LengthDist::Lognormal { .. })
    ));
    let json = std::fs::read_to_string(out.dir.join("summary.json")).unwrap();
    assert!(json.contains("\"input_length\"") && json.contains("\"realised\""), "{json}");
}
