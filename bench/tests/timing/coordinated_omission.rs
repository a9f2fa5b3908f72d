//! Latency is measured from the intended send time: a server that stalls once for 1 s under an
//! open-loop rate shows the stall in the TTFT of every request scheduled during it, and the
//! load generator keeps its schedule instead of waiting for the server.

use crate::support::*;
use infergate_model::config::{FaultConfig, TimingConfig};
use infergate_model::rundir;
use infergate_sim::SimOptions;

const PROFILE: &str = r#"
[profile.default]
[profile.default.load]
mode = "open"
arrival = "constant"
rate = 50.0
requests = 150
[profile.default.workload]
input_lengths = [16]
repeats = 10
max_tokens = 8
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_second_stall_is_carried_by_the_requests_scheduled_during_it() {
    let _alone = crate::one_at_a_time().await;
    let dir = tempfile::tempdir().unwrap();
    let timing = TimingConfig { ttft_ms: 20.0, itl_ms: 5.0, ..TimingConfig::default() };
    // The server freezes 1.2 s after it starts, for 1 s (the run is 3 s long).
    let faults =
        FaultConfig { freeze_at_ms: Some(1200.0), freeze_ms: 1000.0, ..FaultConfig::default() };
    let handle = start_timing_sim(timing, SimOptions { faults, ..SimOptions::default() }).await;
    let out = run_against(&handle, profile(PROFILE, &[]), dir.path()).await;
    let sim = handle.records();
    handle.shutdown().await;
    let s = &out.summary;
    assert_eq!(s.requests.ok, 150, "{:?}", s.requests.by_class);
    let records = rundir::read_records(&out.dir).unwrap().records;
    let (freeze_from, freeze_until) = (1200.0, 2200.0);
    let mut during = 0;
    assert_eq!(records.len(), 150);
    for r in &records {
        let sr = sim
            .iter()
            .find(|x| x.request_id.as_deref() == Some(&format!("test-{}", r.id)))
            .unwrap_or_else(|| panic!("request {} reached the server", r.id));
        if sr.arrival_ms >= freeze_from && sr.arrival_ms < freeze_until {
            during += 1;
            // Held until the freeze ends, then 20 ms to the first token: at least that much,
            // counted from when it was meant to be sent (never later than it arrived).
            let at_least = freeze_until - sr.arrival_ms + 20.0 - 1.0;
            let ttft = r.ttft_ms().unwrap();
            assert!(ttft >= at_least, "request {}: TTFT {ttft} < {at_least}", r.id);
        }
    }
    // 50 requests/s for a 1 s stall.
    assert!(during >= 45, "only {during} requests arrived during the stall");
    let ttft = s.metrics.ttft_ms.as_ref().unwrap();
    // A third of the requests were scheduled during the stall: the stall dominates p90 and up.
    assert!(ttft.p90 > 300.0, "{ttft:?}");
    assert!(ttft.max > 950.0 && ttft.max < 1100.0, "{ttft:?}");
    // The sender kept its schedule while the server was stalled: no request waited for
    // an earlier one to finish before it was sent.
    let lag = s.schedule.stats.lag_ms.as_ref().unwrap();
    assert!(lag.max < 200.0, "the sender fell behind during the stall: {lag:?}");
    assert!(!s.schedule.fell_behind, "{lag:?} {:?}", s.notes);
}

/// With a concurrency cap the requests that had to wait for a free slot carry the wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_for_a_concurrency_slot_counts() {
    let _alone = crate::one_at_a_time().await;
    let dir = tempfile::tempdir().unwrap();
    // Each request takes 20 + 7 x 5 = 55 ms; one slot at 50 requests/s cannot keep up.
    let timing = TimingConfig { ttft_ms: 20.0, itl_ms: 5.0, ..TimingConfig::default() };
    let handle = start_timing_sim(timing, SimOptions::default()).await;
    let p = profile(PROFILE, &["load.max_concurrency=1", "load.requests=20"]);
    let out = run_against(&handle, p, dir.path()).await;
    handle.shutdown().await;
    let s = &out.summary;
    assert_eq!(s.requests.ok, 20);
    let records = rundir::read_records(&out.dir).unwrap().records;
    // Request k was meant to go at 20k ms but could only go after k earlier requests of ~55 ms.
    let last = records.iter().max_by_key(|r| r.id).unwrap();
    assert!(last.lag_ms().unwrap() > 19.0 * 30.0, "lag {:?}", last.lag_ms());
    assert!(last.ttft_ms().unwrap() >= last.lag_ms().unwrap() + 20.0 - 1.0);
    assert!(s.schedule.fell_behind, "a held-back schedule is reported");
    assert!(s.notes.iter().any(|n| n.contains("max_concurrency")), "{:?}", s.notes);
}
