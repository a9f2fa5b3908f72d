//! A sharded run measured to the known answer: two shards (tasks of this test, each with its
//! part of the load and its own client) against ONE timing-mode simulator, merged, against one
//! process at the same total load. The counts are exact; TTFT p50 and p90 of the merge within
//! 2 ms of the single process's and of the configured 50 ms (the known-answer tolerance of TTFT
//! p50), TPOT and ITL means within 0.5 ms of the configured 10 ms (that of the means): at
//! concurrency 32, 16 output tokens, 320 measured requests after 32 warmup requests, +-1 ms
//! seeded jitter on each gap (see `known_answer.rs` for why).

use bench::config::{TimingConfig, UsageMode};
use bench::runner::{self, RunControl, RunSpec};
use bench::shard::{Shard, ShardRun, ShardTotal};
use bench::sim::SimOptions;

use crate::support::*;

const PROFILE: &str = r#"
[profile.default]
endpoint = "chat"
[profile.default.load]
concurrency = 32
requests = 320
warmup_requests = 32
[profile.default.workload]
input_lengths = [64, 128]
repeats = 16
max_tokens = 16
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_merged_shards_are_measured_to_the_known_answer_as_one_process_is() {
    let _one = crate::one_at_a_time().await;
    let dir = tempfile::tempdir().unwrap();
    let timing =
        TimingConfig { ttft_ms: 50.0, itl_ms: 10.0, jitter_ms: 1.0, ..TimingConfig::default() };
    let sim =
        start_timing_sim(timing, SimOptions { usage: UsageMode::Final, ..SimOptions::default() })
            .await;
    let whole = profile(PROFILE, &[]);
    let single = run_against(&sim, whole.clone(), &dir.path().join("single")).await.summary;
    let start = chrono::Utc::now() + chrono::Duration::milliseconds(300);
    let runs = (0..2u32).map(|i| {
        let shard = Shard::new(i, 2).unwrap();
        let mut part = whole.clone();
        part.load = shard.split(&whole.load).unwrap();
        let target = bench::config::Target::at(sim.base_url()).with_model(sim.model());
        let out = dir.path().join(format!("shard-{i}"));
        let mut spec = RunSpec::quiet(part, ("sim".into(), target), out, "known-shards");
        let total = ShardTotal::of(&whole.load);
        spec.shard = Some(ShardRun { shard, total, start_at: Some(start) });
        runner::run(spec, RunControl::default())
    });
    let outcomes = futures_util::future::join_all(runs).await;
    sim.shutdown().await;
    let dirs: Vec<_> = outcomes.into_iter().map(|o| o.expect("the shard runs").dir).collect();
    let merged = bench::merge::merge(&dirs, &dir.path().join("merged"), None).unwrap().summary;
    assert_eq!((merged.requests.ok, merged.requests.warmup), (320, 32));
    assert_eq!((single.requests.ok, single.requests.warmup), (320, 32));
    let (t, t1) = (merged.metrics.ttft_ms.unwrap(), single.metrics.ttft_ms.unwrap());
    for (name, m, s) in [("p50", t.p50, t1.p50), ("p90", t.p90, t1.p90)] {
        assert!((m - s).abs() <= 2.0, "TTFT {name}: merged {m} ms, one process {s} ms");
    }
    assert!((t.p50 - 50.0).abs() <= 2.0, "merged TTFT p50 {} ms against 50", t.p50);
    let tpot = merged.metrics.tpot_ms.unwrap().mean;
    let itl = merged.metrics.itl_ms.unwrap().mean;
    assert!((tpot - 10.0).abs() <= 0.5, "merged TPOT mean {tpot} ms against 10");
    assert!((itl - 10.0).abs() <= 0.5, "merged ITL mean {itl} ms against 10");
}
