//! Every outcome class, produced on purpose, lands in its class and in no latency metric.

use std::time::Duration;

use crate::support::*;
use bench::runner::RunControl;
use infergate_model::Outcome;
use infergate_model::config::{FaultConfig, TimingConfig};
use infergate_model::rundir;
use infergate_model::summary::RunStatus;
use infergate_sim::SimOptions;

const PROFILE: &str = r#"
[profile.default]
[profile.default.load]
concurrency = 4
requests = 12
[profile.default.workload]
input_lengths = [16]
repeats = 4
max_tokens = 8
[profile.default.client]
stall_timeout_s = 0.5
request_timeout_s = 5
"#;

fn fast() -> TimingConfig {
    TimingConfig { ttft_ms: 5.0, itl_ms: 1.0, ..TimingConfig::default() }
}

/// Run 12 requests against a simulator injecting `faults`; return the summary and records.
async fn run_faulty(
    faults: FaultConfig,
    extra: &[&str],
) -> (infergate_model::Summary, Vec<infergate_model::RequestRecord>) {
    let dir = tempfile::tempdir().unwrap();
    let handle = start_timing_sim(fast(), SimOptions { faults, ..SimOptions::default() }).await;
    let out = run_against(&handle, profile(PROFILE, extra), dir.path()).await;
    handle.shutdown().await;
    let records = rundir::read_records(&out.dir).unwrap().records;
    (out.summary, records)
}

fn assert_all_failed_as(
    summary: &infergate_model::Summary,
    records: &[infergate_model::RequestRecord],
    class: Outcome,
) {
    assert_eq!(summary.requests.total, 12);
    assert_eq!(
        summary.requests.by_class.get(&class.to_string()),
        Some(&12),
        "{:?}",
        summary.requests.by_class
    );
    assert_eq!(summary.requests.ok, 0);
    assert_eq!(summary.status, RunStatus::Failed);
    // Nothing failed enters a latency metric.
    assert!(summary.metrics.ttft_ms.is_none());
    assert!(summary.metrics.tpot_ms.is_none());
    assert!(summary.metrics.itl_ms.is_none());
    assert!(summary.metrics.e2e_ms.is_none());
    assert!(
        summary.throughput.requests_per_s.is_none()
            || summary.throughput.requests_per_s == Some(0.0)
    );
    for r in records {
        assert_eq!(r.class, class, "request {} error {:?}", r.id, r.error);
        assert!(r.error.is_some(), "a failed request says why");
    }
}

fn only(name: &str) -> FaultConfig {
    let mut f = FaultConfig::default();
    for (n, p) in f.probabilities_mut() {
        if n == name {
            *p = 1.0;
        }
    }
    f
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_statuses() {
    for (name, code) in [("http_429", 429), ("http_500", 500), ("http_503", 503)] {
        let (s, r) = run_faulty(only(name), &[]).await;
        assert_all_failed_as(&s, &r, Outcome::Http(code));
        assert!(r.iter().all(|r| r.status == Some(code)));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mid_stream_faults() {
    for (name, class) in [
        ("reset", Outcome::Truncated),
        ("truncate", Outcome::Truncated),
        ("error_event", Outcome::StreamError),
        ("error_object", Outcome::StreamError),
        ("malformed", Outcome::Malformed),
        ("empty", Outcome::Empty),
    ] {
        let (s, r) = run_faulty(only(name), &[]).await;
        assert_all_failed_as(&s, &r, class);
        if !matches!(name, "empty" | "reset") {
            // Content arrived before the fault, yet it stays out of the metrics. (A reset may
            // lose the bytes in flight, as a real one does.)
            assert!(
                r.iter().all(|r| r.content_events >= 1),
                "{name}: {:?}",
                r.iter().map(|r| (r.content_events, r.error.clone())).collect::<Vec<_>>()
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_streamed_faults() {
    for (name, class) in [
        ("reset", Outcome::Truncated),
        ("error_object", Outcome::StreamError),
        ("malformed", Outcome::Malformed),
        ("empty", Outcome::Empty),
        ("http_503", Outcome::Http(503)),
    ] {
        let (s, r) = run_faulty(only(name), &["stream=false"]).await;
        assert_all_failed_as(&s, &r, class);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_stalls_every_answer_is_refused_by_the_preflight_stall_timeout() {
    // The preflight's probe is bound by the stall timeout like a measured request (measured
    // stalls are in `hostile_connection`).
    let f = FaultConfig { stall: 1.0, stall_ms: 3000.0, ..FaultConfig::default() };
    let dir = tempfile::tempdir().unwrap();
    let handle = start_timing_sim(fast(), SimOptions { faults: f, ..SimOptions::default() }).await;
    let target = infergate_model::config::Target::at(handle.base_url()).with_model(handle.model());
    let spec = bench::runner::RunSpec::quiet(
        profile(PROFILE, &[]),
        ("sim".into(), target),
        dir.path().join("run"),
        "faults",
    );
    let err = bench::runner::run(spec, bench::runner::RunControl::default()).await.err().unwrap();
    let text = err.to_string();
    assert!(
        text.contains("preflight, the one-token probe") && text.contains("timed out"),
        "{text}"
    );
    assert!(text.contains("client.stall_timeout_s"), "{text}");
    handle.shutdown().await;
}

/// A stream that keeps delivering (a chunk every 100 ms, never a stall) but runs past
/// `client.request_timeout_s` ends as `timeout` too, after the request timeout and not before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_running_past_the_request_timeout_are_timeouts() {
    let dir = tempfile::tempdir().unwrap();
    let slow = TimingConfig { ttft_ms: 5.0, itl_ms: 100.0, ..TimingConfig::default() };
    let handle = start_timing_sim(slow, SimOptions::default()).await;
    let p = profile(
        PROFILE,
        &["client.request_timeout_s=0.6", "load.requests=4", "workload.max_tokens=50"],
    );
    let out = run_against(&handle, p, dir.path()).await;
    handle.shutdown().await;
    let records = rundir::read_records(&out.dir).unwrap().records;
    assert_eq!(records.len(), 4);
    for r in &records {
        assert_eq!(r.class, Outcome::Timeout, "request {}: {:?}", r.id, r.error);
        // It had started streaming (the stall timeout of 0.5 s never struck) and was cut at the
        // request timeout: 0.6 s, not the 5 s the stream would have taken.
        assert!(r.first_token_ms.is_some(), "request {} streamed", r.id);
        let took = r.end_ms - r.intended_ms;
        assert!((600.0..1500.0).contains(&took), "request {} ended after {took} ms", r.id);
    }
    assert_eq!(out.summary.status, RunStatus::Failed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_faults_are_counted_and_ok_requests_measured() {
    let dir = tempfile::tempdir().unwrap();
    let faults = FaultConfig { http_500: 0.25, truncate: 0.25, seed: 3, ..FaultConfig::default() };
    let handle = start_timing_sim(fast(), SimOptions { faults, ..SimOptions::default() }).await;
    let p = profile(PROFILE, &["load.requests=40", "workload.repeats=10"]);
    let out = run_against(&handle, p, dir.path()).await;
    let served = handle.records();
    handle.shutdown().await;
    let (s, r) = (&out.summary, rundir::read_records(&out.dir).unwrap().records);
    assert_eq!(s.requests.total, 40);
    assert_eq!(r.len(), 40);
    // The truth is what the server did to each request (its own record, by request id): the
    // bench must class every request exactly as the fault it was given.
    let mut injected = std::collections::BTreeMap::<&str, u64>::new();
    for rec in &r {
        let id = format!("test-{}", rec.id);
        let sr = served
            .iter()
            .find(|x| x.request_id.as_deref() == Some(id.as_str()))
            .unwrap_or_else(|| panic!("request {} reached the server", rec.id));
        let expected = match sr.fault.as_deref() {
            None => Outcome::Ok,
            Some("http_500") => Outcome::Http(500),
            Some("truncate") => Outcome::Truncated,
            Some(other) => panic!("fault {other} was not configured"),
        };
        assert_eq!(rec.class, expected, "request {} ({:?}): {:?}", rec.id, sr.fault, rec.error);
        *injected.entry(sr.fault.as_deref().unwrap_or("none")).or_default() += 1;
    }
    assert_eq!(injected.len(), 3, "both faults and clean answers occurred: {injected:?}");
    let ok = injected["none"];
    assert_eq!(s.requests.ok, ok);
    assert_eq!(s.requests.failed, 40 - ok);
    assert_eq!(s.requests.by_class.get("http_500"), Some(&injected["http_500"]));
    assert_eq!(s.requests.by_class.get("truncated"), Some(&injected["truncate"]));
    assert_eq!(s.metrics.ttft_ms.as_ref().unwrap().count, ok);
    assert_eq!(s.metrics.e2e_ms.as_ref().unwrap().count, ok);
    assert_eq!(s.status, RunStatus::Complete);
    let by_class_total: u64 = s.requests.by_class.values().sum();
    assert_eq!(by_class_total, 40, "every request in exactly one class");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_goes_away_gives_connect_errors() {
    let dir = tempfile::tempdir().unwrap();
    let handle = start_timing_sim(fast(), SimOptions::default()).await;
    let p = profile(
        PROFILE,
        &["load.mode=\"open\"", "load.rate=40", "load.requests=40", "workload.repeats=10"],
    );
    let run = {
        let dir = dir.path().to_path_buf();
        let base = handle.base_url();
        let model = handle.model().to_string();
        tokio::spawn(async move { run_against_url(&base, &model, p, &dir).await })
    };
    // Gone once it has served a few of the 40 (the preflight's among them), however long the
    // run took to start: the rest of the schedule finds nobody there.
    wait_until(Duration::from_secs(60), "the simulator to serve 6 requests", async || {
        handle.records().len() >= 6
    })
    .await;
    handle.shutdown().await;
    let out = run.await.unwrap();
    let s = &out.summary;
    assert_eq!(s.requests.total, 40);
    let connect = s.requests.by_class.get("connect_error").copied().unwrap_or(0);
    assert!(connect > 0, "{:?}", s.requests.by_class);
    assert!(s.requests.ok > 0, "{:?}", s.requests.by_class);
    assert_eq!(s.metrics.ttft_ms.as_ref().unwrap().count, s.requests.ok);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupt_cancels_in_flight_after_the_grace_period_and_keeps_what_was_measured() {
    let dir = tempfile::tempdir().unwrap();
    // Long streams: 200 tokens x 20 ms = 4 s each.
    let t = TimingConfig { ttft_ms: 5.0, itl_ms: 20.0, ..TimingConfig::default() };
    let handle = start_timing_sim(t, SimOptions::default()).await;
    let p = profile(
        PROFILE,
        &["workload.max_tokens=200", "client.grace_s=0.2", "client.stall_timeout_s=5"],
    );
    let control = RunControl::default();
    let run = {
        let control = control.clone();
        let dir = dir.path().to_path_buf();
        let base = handle.base_url();
        let model = handle.model().to_string();
        tokio::spawn(async move { run_url_with_control(&base, &model, p, &dir, control).await })
    };
    // Interrupt once the preflight's probe and all 4 streams have arrived (each lasts 4 s),
    // however long the run took to start.
    wait_until(Duration::from_secs(60), "the probe and 4 streams at the simulator", async || {
        handle.accepted() >= 5
    })
    .await;
    control.interrupt();
    let out = tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .expect("stops within the grace period")
        .unwrap();
    handle.shutdown().await;
    let s = &out.summary;
    assert_eq!(s.status, RunStatus::Interrupted);
    assert_eq!(s.requests.by_class.get("interrupted"), Some(&4), "{:?}", s.requests.by_class);
    assert!(s.metrics.ttft_ms.is_none());
    // The records and the summary are on disk.
    let records = rundir::read_records(&out.dir).unwrap().records;
    assert_eq!(records.len(), 4);
    assert!(out.dir.join("summary.json").exists());
    let on_disk = infergate_model::Summary::read(&out.dir).unwrap();
    assert_eq!(on_disk.status, RunStatus::Interrupted);
}

/// What a run did not measure stays blank, never estimated: non-streamed requests have an E2E
/// but no TTFT, TPOT or ITL; without an SLO there is no goodput; without an engine config or a
/// price there is no cost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_not_measured_stay_blank() {
    let (s, r) = run_faulty(FaultConfig::default(), &["stream=false"]).await;
    assert_eq!(s.requests.ok, 12, "{:?}", s.requests.by_class);
    let m = &s.metrics;
    assert_eq!(m.e2e_ms.as_ref().map(|e| e.count), Some(12));
    assert!(m.ttft_ms.is_none() && m.tpot_ms.is_none() && m.itl_ms.is_none(), "{m:?}");
    assert!(r.iter().all(|r| r.ttft_ms().is_none() && r.itl_ms.is_empty()));
    assert_eq!((s.goodput.requests, s.goodput.requests_per_s, s.goodput.ratio), (None, None, None));
    assert_eq!((s.cost.total, s.cost.per_1m_output_tokens), (None, None));
    // In summary.json they are null, not 0.
    let json: serde_json::Value = serde_json::to_value(&s).unwrap();
    assert!(json["metrics"]["ttft_ms"].is_null(), "{}", json["metrics"]);
    assert!(json["goodput"]["requests_per_s"].is_null(), "{}", json["goodput"]);
}
