//! The plateau of a run against a server with a known ramp-up: the timing simulator's cold
//! start (`sim.timing.cold_s`) serves the requests of its first 15 s with 4 times the TTFT; it
//! counts from the simulator's first request, the preflight's, so the load meets about 10 s of
//! it. The plateau leaves them out, and its TTFT P99 is the one a run without the ramp
//! measures. Both runs are real time (25 s and 6 s), in the timing binary: the 5% bound is a
//! few milliseconds.

use crate::support::*;
use infergate_model::config::TimingConfig;
use infergate_sim::SimOptions;

/// TTFT 300 ms (a few milliseconds of a busy machine are 1% of it), then a token every 2 ms;
/// with the cold start, a TTFT of 1200 ms.
fn timing(cold_s: f64) -> TimingConfig {
    TimingConfig {
        ttft_ms: 300.0,
        itl_ms: 2.0,
        cold_s,
        cold_factor: 4.0,
        ..TimingConfig::default()
    }
}

/// A closed loop of 8 clients for `duration_s`, plateaus of 2 s and more.
fn closed(duration_s: f64) -> infergate_model::config::Profile {
    profile(
        &format!(
            "[profile.default.workload]\nmax_tokens = 10\n\
             [profile.default.load]\nconcurrency = 8\nduration_s = {duration_s}\n\
             [profile.default.steady]\nmin_s = 2.0\n"
        ),
        &[],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_loops_plateau_leaves_out_a_slow_ramp_up_and_measures_the_warm_ttft() {
    let _alone = crate::one_at_a_time().await;
    let cold = start_timing_sim(timing(15.0), SimOptions::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let ramp = run_against(&cold, closed(25.0), dir.path()).await.summary;
    let warm = start_timing_sim(timing(0.0), SimOptions::default()).await;
    let dir2 = tempfile::tempdir().unwrap();
    let flat = run_against(&warm, closed(6.0), dir2.path()).await.summary;

    let whole = ramp.metrics.ttft_ms.as_ref().expect("measured");
    assert!(whole.p99 >= 1200.0, "the whole window holds the slow requests: {whole:?}");
    let p = ramp.plateau.as_ref().expect("every run reports its plateau");
    assert_eq!(p.reason, None, "{p:?}");
    let start = p.start_ms.unwrap();
    // The slow requests arrived within 15 s of the simulator's first request (the preflight's,
    // before the load); the plateau starts after the last of them was sent.
    let records = infergate_model::rundir::read_records(&dir.path().join("run")).unwrap().records;
    let last_slow = records
        .iter()
        .filter(|r| r.ttft_ms().is_some_and(|t| t >= 1200.0))
        .map(|r| r.intended_ms)
        .fold(f64::NEG_INFINITY, f64::max);
    assert!(last_slow > 7_000.0, "the load met about 10 s of the ramp: {last_slow} ms");
    assert!(start > last_slow, "{p:?} starts before the last slow request ({last_slow} ms)");
    let ttft = p.metrics.ttft_ms.as_ref().expect("the plateau's TTFT");
    assert!(ttft.max < 1200.0, "no slow request was sent within the plateau: {ttft:?}");
    assert!(p.requests > 0 && p.requests < ramp.requests.total, "{p:?}");

    let reference = flat.plateau.as_ref().and_then(|p| p.metrics.ttft_ms.as_ref()).expect("warm");
    let diff = (ttft.p99 - reference.p99).abs() / reference.p99;
    eprintln!(
        "plateau {start:.0}-{:.0} ms, {} requests: TTFT P99 {} ms; without the ramp {} ms \
         ({:.2}%); whole window {} ms",
        p.end_ms.unwrap(),
        p.requests,
        ttft.p99,
        reference.p99,
        diff * 100.0,
        whole.p99
    );
    assert!(diff <= 0.05, "plateau P99 {} against {} without the ramp", ttft.p99, reference.p99);
    // Its rate is the warm loop's.
    let rate = p.throughput.requests_per_s.unwrap();
    let warm_rate = flat.plateau.as_ref().and_then(|p| p.throughput.requests_per_s).unwrap();
    assert!((rate - warm_rate).abs() / warm_rate < 0.1, "{rate} against {warm_rate}");
    // The registry names the plateau's figures, and a summary reads them back.
    assert_eq!(
        ramp.metric(infergate_model::metric::MetricPath::named("plateau.metrics.ttft_ms.p99")),
        Some(ttft.p99)
    );
    let read = infergate_model::summary::Summary::read(&dir.path().join("run")).unwrap();
    assert_eq!(read.plateau, ramp.plateau);
}
