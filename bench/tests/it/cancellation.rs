//! What the engine computes beside the answers, against the engine simulator: requests
//! cancelled on purpose (`[profile.*.cancel]`: their own outcome class, never in a latency
//! histogram, and the engine's compute for them measured from its counters) and reasoning
//! tokens (`sim.reasoning_tokens`). The truth is the simulator's own: its records of what each
//! request was sent and its counters read directly after the run, not the bench's scrapes or the
//! client's counts.

use std::sync::Arc;

use infergate_model::Outcome;
use infergate_model::server_metrics::ServerSection;
use infergate_sim::{SimHandle, SimOptions};

use crate::support::*;

const PROFILE: &str = r#"
[profile.default]
endpoint = "chat"
[profile.default.load]
concurrency = 8
warmup_requests = 0
[profile.default.workload]
input_lengths = [64, 128]
repeats = 30
max_tokens = 32
ignore_eos = true
[profile.default.scrape]
interval_s = 0.05
[profile.default.cancel]
share = 0.3
after_tokens = 8
seed = 5
"#;

/// The engine simulator of `SMALL_ENGINE`, freeing cancelled requests at the next step or, with
/// `ignore`, computing them to their end.
async fn engine(ignore: bool) -> SimHandle {
    let spec = engine_spec(SMALL_ENGINE);
    let opts = SimOptions { model: spec.served_model_name.clone(), ..SimOptions::default() };
    let backend = infergate_sim::engine::EngineBackend::new(&spec).ignoring_cancels(ignore);
    infergate_sim::start(opts, Arc::new(backend), ([127, 0, 0, 1], 0).into())
        .await
        .expect("a simulator")
}

/// What the simulator itself says: the output tokens it sent to requests whose client stayed,
/// and its counters (generation tokens, waste) after the run, less the preflight's probe.
struct Truth {
    delivered_to_ok: f64,
    generated: f64,
    wasted: f64,
}

async fn truth(handle: &SimHandle) -> Truth {
    let sim_records = handle.records();
    let probe: f64 =
        sim_records.iter().filter(|r| r.request_id.is_none()).map(|r| r.output_tokens as f64).sum();
    let delivered_to_ok = sim_records
        .iter()
        .filter(|r| r.request_id.is_some() && !r.disconnected)
        .map(|r| r.output_tokens as f64)
        .sum();
    let text = scrape(&http(), handle).await;
    let e = infergate_model::promtext::parse(&text);
    Truth {
        delivered_to_ok,
        generated: e.sum("vllm:generation_tokens_total").unwrap() - probe,
        wasted: e.sum("infergate_sim:wasted_tokens_total").unwrap(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_requests_are_their_own_class_and_the_token_ratio_is_the_engines() {
    let dir = tempfile::tempdir().unwrap();
    let handle = engine(false).await;
    let p = profile(PROFILE, &[]);
    let planned: Vec<u64> = (0..60).filter(|&id| p.cancel.plan(id).is_some()).collect();
    let out = run_against(&handle, p, dir.path()).await;
    // The engine frees them at the next step: idle when the run ends.
    let truth = truth(&handle).await;
    handle.shutdown().await;
    let s = &out.summary;
    let recs = records_by_id(&dir.path().join("run"));

    // The requests drawn, and only they, were cancelled, each after its 8th token.
    let cancelled: Vec<u64> =
        recs.iter().filter(|r| r.class == Outcome::Cancelled).map(|r| r.id).collect();
    let mut sorted = cancelled.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, planned);
    assert!((12..=24).contains(&planned.len()), "{} of 60 drawn", planned.len());
    for r in recs.iter().filter(|r| r.class == Outcome::Cancelled) {
        assert_eq!(r.content_events, 8, "{r:?}");
        assert!(r.error.as_deref().unwrap().contains("cancel.after_tokens"), "{r:?}");
    }
    // Cancelled requests are neither ok nor failed, and in no latency histogram.
    let n = planned.len() as u64;
    assert_eq!((s.requests.cancelled, s.requests.ok, s.requests.failed), (n, 60 - n, 0));
    assert_eq!(s.metrics.ttft_ms.as_ref().unwrap().count, 60 - n);
    assert_eq!(s.metrics.e2e_ms.as_ref().unwrap().count, 60 - n);
    assert_eq!(s.metric(infergate_model::metric::MetricPath::named("error_rate")), Some(0.0));
    let c = s.requests.cancellation.as_ref().expect("cancellation stats");
    assert_eq!((c.tokens_received, c.before_first_token), (8 * n, 0));
    assert_eq!(c.after_ms.as_ref().unwrap().count, n);

    // The token ratio against the simulator's own counts, within a point.
    let ratio = s.goodput.token_ratio.expect("the simulator exposes its counters");
    let known = truth.delivered_to_ok / truth.generated;
    assert!((ratio - known).abs() <= 0.01, "token ratio {ratio}, the simulator's {known}");
    assert_eq!(
        s.metric(infergate_model::metric::MetricPath::named("goodput.token_ratio")),
        Some(ratio)
    );
    // It stops at the next step: at most a step's token per cancelled request is waste.
    let server: ServerSection = s.server.clone().unwrap();
    assert_eq!(server.wasted_tokens, Some(truth.wasted));
    assert!(truth.wasted <= n as f64, "{} tokens wasted for {n} cancels", truth.wasted);
    let after = server.after_run.clone().expect("the engine was watched after the run");
    assert!(after.idle, "{after:?}");
    // What it computed for the clients that left: its counter less what every client received
    // (the simulator's own records of the ok answers, 8 tokens for each cancelled request).
    let waste = server.cancelled.as_ref().expect("what the engine computed for them");
    let nobody = truth.generated - truth.delivered_to_ok - 8.0 * n as f64;
    assert_eq!(waste.decode_tokens, Some(nobody), "{waste:?}");
    assert!(nobody >= truth.wasted && nobody <= 2.0 * n as f64, "{nobody} for {n} cancels");
    assert_eq!(waste.tokens_left, Some(24 * n));
    assert!(waste.decode_share.unwrap() < 0.1, "{waste:?}");
    assert_eq!(waste.stopped, Some(true));
    assert_eq!(waste.prefill_tokens, Some(0.0), "every client left after its 8th token");
    assert_eq!(server.abandoned_requests, Some(n as f64));
    // Freed at the step after the server noticed: within about one step (an ITL).
    let itl_p99 = s.metrics.itl_ms.as_ref().unwrap().p99;
    let hold = waste.hold_ms_mean.unwrap();
    assert!(hold <= 2.0 * itl_p99 + 2.0, "held {hold} ms after the cancel, ITL P99 {itl_p99}");
    // An honest server: usage equals what was streamed.
    assert_eq!(
        s.metric(infergate_model::metric::MetricPath::named("tokens.server_mismatch")),
        Some(0.0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_that_ignores_cancels_wastes_what_the_simulator_counts() {
    let dir = tempfile::tempdir().unwrap();
    let handle = engine(true).await;
    let p = profile(PROFILE, &[]);
    let n = (0..60).filter(|&id| p.cancel.plan(id).is_some()).count() as f64;
    let out = run_against(&handle, p, dir.path()).await;
    let truth = truth(&handle).await;
    handle.shutdown().await;
    let s = &out.summary;
    let server: ServerSection = s.server.clone().unwrap();
    // Every cancelled request was computed to its 32nd token; those after the 8th it handed
    // over (and the ones in the socket) reached nobody.
    assert_eq!(truth.generated, 60.0 * 32.0);
    assert_eq!(server.generation_tokens, Some(truth.generated));
    assert_eq!(server.wasted_tokens, Some(truth.wasted));
    assert!(truth.wasted >= n * (32.0 - 8.0 - 2.0), "{} wasted for {n} cancels", truth.wasted);
    // Measured from the counters: every token after the 8th went to nobody, and the engine
    // did not stop.
    let waste = server.cancelled.as_ref().expect("what the engine computed for them");
    assert_eq!(waste.decode_tokens, Some(truth.generated - truth.delivered_to_ok - 8.0 * n));
    assert_eq!(waste.decode_tokens, Some(24.0 * n));
    assert_eq!((waste.decode_share, waste.stopped), (Some(1.0), Some(false)));
    // Each kept its slot for the rest of its answer: about 24 steps.
    let itl_p50 = s.metrics.itl_ms.as_ref().unwrap().p50;
    let hold = waste.hold_ms_mean.unwrap();
    assert!(hold >= 10.0 * itl_p50, "held {hold} ms after the cancel, ITL P50 {itl_p50}");
    let ratio = s.goodput.token_ratio.unwrap();
    let known = truth.delivered_to_ok / truth.generated;
    assert!((ratio - known).abs() <= 0.01, "token ratio {ratio}, the simulator's {known}");
    assert!(server.after_run.as_ref().unwrap().idle);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_above_the_streamed_tokens_is_a_mismatch_and_an_honest_server_none() {
    let dir = tempfile::tempdir().unwrap();
    let mut out = Vec::new();
    for overcount in [0.0, 0.2] {
        let mut opts = SimOptions::default();
        opts.faults.usage_overcount = overcount;
        let handle = start_engine_sim(SMALL_ENGINE, opts).await;
        let run_dir = dir.path().join(format!("{overcount}"));
        let p = profile(PROFILE, &["cancel.share=0"]);
        out.push(run_against(&handle, p, &run_dir).await.summary);
        handle.shutdown().await;
    }
    assert_eq!(
        out[0].metric(infergate_model::metric::MetricPath::named("tokens.server_mismatch")),
        Some(0.0)
    );
    assert!(
        !out[0].notes.iter().any(|n| n.contains("tokens.server_mismatch")),
        "{:?}",
        out[0].notes
    );
    // 32 tokens reported as round(32 x 1.2) = 38.
    let m = out[1]
        .metric(infergate_model::metric::MetricPath::named("tokens.server_mismatch"))
        .unwrap();
    assert!((m - 6.0 / 32.0).abs() < 1e-6, "{m}");
    assert!(
        out[1].notes.iter().any(|n| n.contains("tokens.server_mismatch")),
        "{:?}",
        out[1].notes
    );
    // The gate on it is xtask's: xtask/tests/it/cli_sim.rs.
}

/// An engine that reasons first (`sim.reasoning_tokens`): the first 12 of every answer's 32
/// tokens are computed and streamed as `reasoning_content`, the rest as the answer; the bench
/// counts and times the two apart, and every token reaches the client once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_that_reasons_first_is_counted_and_timed_in_two_parts() {
    let dir = tempfile::tempdir().unwrap();
    let spec = engine_spec(SMALL_ENGINE);
    let opts = SimOptions { model: spec.served_model_name.clone(), ..SimOptions::default() };
    let backend = infergate_sim::engine::EngineBackend::new(&spec).with_reasoning_tokens(12);
    let handle =
        infergate_sim::start(opts, Arc::new(backend), ([127, 0, 0, 1], 0).into()).await.unwrap();
    let out = run_against(&handle, profile(PROFILE, &["cancel.share=0"]), dir.path()).await;
    let truth = truth(&handle).await;
    handle.shutdown().await;
    let s = &out.summary;
    assert_eq!((s.requests.ok, s.requests.cancelled), (60, 0));
    assert_eq!((s.tokens.reasoning_total, s.tokens.answer_total), (Some(60 * 12), Some(60 * 20)));
    // Every token the engine computed reached a client, reasoning included.
    assert_eq!(truth.generated, 60.0 * 32.0);
    assert_eq!(s.goodput.token_ratio, Some(1.0));
    for r in records_by_id(&dir.path().join("run")) {
        assert_eq!((r.reasoning_events, r.content_events), (12, 32), "{r:?}");
        // The first token is reasoning; the answer starts 12 tokens later, after the gaps
        // between them.
        assert_eq!(r.first_reasoning_ms, r.first_token_ms, "{r:?}");
        let gaps: f64 = r.itl_ms[..12].iter().sum();
        let answer_after = r.first_answer_ms.unwrap() - r.first_reasoning_ms.unwrap();
        assert!((answer_after - gaps).abs() < 0.01, "{answer_after} ms against {gaps} ms of gaps");
    }
    let (ttfrt, ttfat) =
        (s.metrics.ttfrt_ms.as_ref().unwrap(), s.metrics.ttfat_ms.as_ref().unwrap());
    assert_eq!(
        ttfrt.p50,
        s.metrics.ttft_ms.as_ref().unwrap().p50,
        "TTFT is the first reasoning token"
    );
    assert!(ttfat.p50 > ttfrt.p50 + 11.0 * s.metrics.itl_ms.as_ref().unwrap().p50 * 0.5);
}
