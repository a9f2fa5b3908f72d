//! A sharded run measured to the known answer: two shards (tasks of this test, each with its
//! part of the load and its own client) against ONE timing-mode simulator in a process of its
//! own (`known-answer-server`), merged, against one
//! process at the same total load. The counts are exact; TTFT p50 and p90 of the merge within
//! 2 ms of the single process's and of the configured 50 ms (the known-answer tolerance of TTFT
//! p50), TPOT and ITL means within 0.5 ms of the configured 10 ms (that of the means): at
//! concurrency 32, 16 output tokens, 320 measured requests after 32 warmup requests, +-1 ms
//! seeded jitter on each gap (see `known_answer.rs` for why).
//!
//! The counts are asserted in every attempt. The TTFT bounds are wall-clock ones of the bench's
//! own, between two runs at different times: a machine that stalled the server meanwhile (its
//! lateness against its schedule over both runs, p99 over 1 ms) widens them by that lateness
//! ([`crate::stall_allowance`]), and an attempt over the widened bounds is measured again
//! ([`crate::until_quiet`]). The TPOT and ITL means keep their 0.5 ms.

use bench::runner::{self, RunControl, RunSpec};
use infergate_model::config::{TimingConfig, UsageMode};
use infergate_model::shard::{Shard, ShardRun};

use crate::apart::start_timing_sim_apart;
use crate::known_answer::{PROFILE, rank, sorted};
use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_merged_shards_are_measured_to_the_known_answer_as_one_process_is() {
    let _one = crate::one_at_a_time().await;
    crate::until_quiet(attempt).await;
}

async fn attempt() -> crate::Attempt {
    let dir = tempfile::tempdir().unwrap();
    let timing =
        TimingConfig { ttft_ms: 50.0, itl_ms: 10.0, jitter_ms: 1.0, ..TimingConfig::default() };
    // The known answers' server, in a process of its own; their load, with 16 output tokens.
    let sim = start_timing_sim_apart(&timing, UsageMode::Final);
    let whole = profile(PROFILE, &["workload.max_tokens=16"]);
    let single =
        run_against_url(sim.base_url(), sim.model(), whole.clone(), &dir.path().join("single"))
            .await
            .summary;
    let start = chrono::Utc::now() + chrono::Duration::milliseconds(300);
    let runs = (0..2u32).map(|i| {
        let shard = Shard::new(i, 2).unwrap();
        let target = infergate_model::config::Target::at(sim.base_url()).with_model(sim.model());
        let out = dir.path().join(format!("shard-{i}"));
        let mut spec = RunSpec::quiet(whole.clone(), ("sim".into(), target), out, "known-shards");
        spec.shard = Some(ShardRun { shard, start_at: Some(start) });
        runner::run(spec, RunControl::default())
    });
    let outcomes = futures_util::future::join_all(runs).await;
    let served = sim.finish().await;
    let dirs: Vec<_> = outcomes.into_iter().map(|o| o.expect("the shard runs").dir).collect();
    let merged =
        infergate_model::merge::merge(&dirs, &dir.path().join("merged"), None).unwrap().summary;
    assert_eq!((merged.requests.ok, merged.requests.warmup), (320, 32));
    assert_eq!((single.requests.ok, single.requests.warmup), (320, 32));
    let late = sorted(
        served
            .iter()
            .flat_map(|r| r.chunk_ms.iter().zip(&r.chunk_due_ms).map(|(h, d)| h - d))
            .collect(),
    );
    let late_p99 = rank(&late, 0.99);
    let slack = crate::stall_allowance(late_p99);
    let (t, t1) = (merged.metrics.ttft_ms.unwrap(), single.metrics.ttft_ms.unwrap());
    let tpot = merged.metrics.tpot_ms.unwrap().mean;
    let itl = merged.metrics.itl_ms.unwrap().mean;
    let diag = format!(
        "TTFT p50 merged {:.3} one process {:.3}, p90 merged {:.3} one process {:.3} ms | TPOT mean {tpot:.3} ITL mean {itl:.3} ms | server late p99 {late_p99:.3} ms (bounds widened by {slack:.3} ms)",
        t.p50, t1.p50, t.p90, t1.p90
    );
    let mut failures = Vec::new();
    if (tpot - 10.0).abs() > 0.5 {
        failures.push(format!("merged TPOT mean {tpot:.3} ms against 10"));
    }
    if (itl - 10.0).abs() > 0.5 {
        failures.push(format!("merged ITL mean {itl:.3} ms against 10"));
    }
    for (name, m, s) in [("p50", t.p50, t1.p50), ("p90", t.p90, t1.p90)] {
        if (m - s).abs() > 2.0 + slack {
            failures.push(format!("TTFT {name}: merged {m:.3} ms, one process {s:.3} ms"));
        }
    }
    if (t.p50 - 50.0).abs() > 2.0 + slack {
        failures.push(format!("merged TTFT p50 {:.3} ms against 50", t.p50));
    }
    crate::Attempt { quiet: late_p99 <= crate::QUIET_SERVER_LATE_P99_MS, diag, failures }
}
