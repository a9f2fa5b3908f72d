//! Known answers for the rate metrics: throughput, goodput, the measured window and the achieved
//! rate. With fixed timing (no jitter) every request takes the same scheduled time at the server,
//! so the numbers follow from the schedule:
//!
//! - closed loop, concurrency 4, 40 requests of 8 tokens at TTFT 20 ms and 5 ms per token: each
//!   request is 20 + 7 x 5 = 55 ms at the server, each slot runs 10 of them back to back, so the
//!   window is 10 x (55 ms + the per-request overhead: the request's trip to the server and its
//!   end's trip back, the next request's send). The test allows 0 to 3 ms of overhead per request:
//!   throughput between 40 / (10 x 58 ms) = 68.97 and 40 / (10 x 55 ms) = 72.73 requests/s;
//! - output tokens/s is exactly 8 x requests/s and total tokens/s exactly (prompt + 8) x
//!   requests/s over the same window (every request reports the same usage);
//! - goodput: every request meets a 30 ms TTFT SLO (goodput = throughput, ratio 1) and none meets
//!   a 10 ms one (goodput 0 requests/s, ratio 0);
//! - open loop at a constant 20 requests/s: the achieved rate (sends - 1 over the span of the
//!   sends) is 20 within 1%.
//!
//! The exact relations (rates over the window, tokens per request, the goodput of an SLO no
//! request can meet) hold in every attempt. The window and what follows from it are wall-clock
//! figures: a machine that stalls the server (its lateness against its schedule, p99 over 1 ms)
//! delays each request's end by that much, so the closed loop's window may grow by ten times
//! that lateness (ten requests back to back per slot) and the open loop's by once that lateness
//! ([`crate::stall_allowance`]); an attempt over the widened bounds is measured again
//! ([`crate::until_quiet`]), and one over the plain bounds while the server kept its schedule
//! fails at once.

use crate::apart::start_timing_sim_apart;
use crate::known_answer::{rank, sorted};
use crate::support::*;
use infergate_model::config::{TimingConfig, UsageMode};
use infergate_model::rundir;

const CLOSED: &str = r#"
[profile.default]
[profile.default.load]
concurrency = 4
requests = 40
[profile.default.workload]
input_lengths = [16]
repeats = 10
max_tokens = 8
"#;

fn fixed() -> TimingConfig {
    TimingConfig { ttft_ms: 20.0, itl_ms: 5.0, jitter_ms: 0.0, ..TimingConfig::default() }
}

/// A run's summary, its records and the server's lateness against its schedule (p99 over every
/// chunk, ms).
async fn closed_run(
    overrides: &[&str],
) -> (infergate_model::Summary, Vec<infergate_model::RequestRecord>, f64) {
    let dir = tempfile::tempdir().unwrap();
    let server = start_timing_sim_apart(&fixed(), UsageMode::Final);
    let out =
        run_against_url(server.base_url(), server.model(), profile(CLOSED, overrides), dir.path())
            .await;
    let served = server.finish().await;
    let records = rundir::read_records(&out.dir).unwrap().records;
    (out.summary, records, late_p99(&served))
}

fn late_p99(served: &[infergate_sim::SimRecord]) -> f64 {
    let late = sorted(
        served
            .iter()
            .flat_map(|r| r.chunk_ms.iter().zip(&r.chunk_due_ms).map(|(h, d)| h - d))
            .collect(),
    );
    rank(&late, 0.99)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_loop_throughput_window_and_goodput_follow_from_the_schedule() {
    let _alone = crate::one_at_a_time().await;
    crate::until_quiet(closed_attempt).await;
}

async fn closed_attempt() -> crate::Attempt {
    let (s, records, late_p99) = closed_run(&["slo.ttft_ms=30"]).await;
    assert_eq!(s.requests.ok, 40, "{:?}", s.requests.by_class);
    let t = &s.throughput;
    let rps = t.requests_per_s.unwrap();
    let window = s.timing.window.duration_s.unwrap();
    let slack_s = 10.0 * crate::stall_allowance(late_p99) / 1000.0;
    let diag = format!(
        "{t:?} window {window} s | server late p99 {late_p99:.3} ms (window bound widened by {slack_s:.4} s)"
    );
    assert!((rps - 40.0 / window).abs() < 1e-3, "requests/s over the window: {diag}");
    assert!((t.output_tokens_per_s.unwrap() - 8.0 * rps).abs() < 1e-3, "output tokens/s: {diag}");
    let prompt = records[0].input_tokens.unwrap();
    assert!(records.iter().all(|r| r.input_tokens == Some(prompt) && r.output_tokens == Some(8)));
    let total = (prompt + 8) as f64 * rps;
    assert!((t.total_tokens_per_s.unwrap() - total).abs() < 1e-2, "total tokens/s: {diag}");
    let g = &s.goodput;
    assert!(
        (g.requests_per_s.unwrap() - g.requests.unwrap() as f64 / window).abs() < 1e-3,
        "{g:?}"
    );
    let mut failures = Vec::new();
    let longest = 0.580 + slack_s;
    if !(0.550..=longest).contains(&window) {
        failures.push(format!("window {window} s outside 0.550..={longest:.4} s"));
    }
    let slowest = 40.0 / longest;
    if !(slowest..=72.73).contains(&rps) {
        failures.push(format!("{rps} requests/s outside {slowest:.2}..=72.73"));
    }
    // The 30 ms TTFT SLO is met by every request (TTFT is 20 ms plus the trip).
    if (g.requests, g.ratio) != (Some(40), Some(1.0)) {
        failures.push(format!("goodput at a 30 ms TTFT SLO: {g:?}"));
    }
    crate::Attempt { quiet: late_p99 <= crate::QUIET_SERVER_LATE_P99_MS, diag, failures }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_slo_no_request_can_meet_gives_zero_goodput() {
    let _alone = crate::one_at_a_time().await;
    let (s, _, _) = closed_run(&["slo.ttft_ms=10"]).await;
    assert_eq!(s.requests.ok, 40);
    let g = &s.goodput;
    assert_eq!((g.requests, g.requests_per_s, g.ratio), (Some(0), Some(0.0), Some(0.0)), "{g:?}");
}

const OPEN: &str = r#"
[profile.default]
[profile.default.load]
mode = "open"
arrival = "constant"
rate = 20.0
requests = 30
[profile.default.workload]
input_lengths = [16]
repeats = 10
max_tokens = 4
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_loop_achieves_its_constant_rate() {
    let _alone = crate::one_at_a_time().await;
    crate::until_quiet(open_attempt).await;
}

async fn open_attempt() -> crate::Attempt {
    let dir = tempfile::tempdir().unwrap();
    let server = start_timing_sim_apart(&fixed(), UsageMode::Final);
    let out =
        run_against_url(server.base_url(), server.model(), profile(OPEN, &[]), dir.path()).await;
    let late_p99 = late_p99(&server.finish().await);
    let s = &out.summary;
    assert_eq!(s.requests.ok, 30);
    let st = &s.schedule.stats;
    assert_eq!(st.requested_rate, Some(20.0));
    let achieved = st.achieved_rate.unwrap();
    let window = s.timing.window.duration_s.unwrap();
    let slack_s = crate::stall_allowance(late_p99) / 1000.0;
    let diag = format!(
        "achieved {achieved} requests/s, window {window} s, fell behind: {} | server late p99 {late_p99:.3} ms",
        s.schedule.fell_behind
    );
    let mut failures = Vec::new();
    // The rate is 29 sends over their 1.450 s span; a stall that moves each end of the span by
    // the lateness moves the rate by 20 / 1.450 per second of span it changes.
    let rate_slack = 20.0 / 1.450 * 2.0 * slack_s;
    if (achieved - 20.0).abs() > 0.2 + rate_slack {
        failures.push(format!("achieved {achieved} requests/s against 20"));
    }
    if s.schedule.fell_behind {
        failures.push(format!("the schedule fell behind: {:?}", s.notes));
    }
    // The window: from the first intended send (0 ms) to the last end, which follows the last
    // intended send (29 x 50 ms) by one request (20 + 3 x 5 = 35 ms) and its trip.
    let longest = 1.500 + slack_s;
    if !(1.485..=longest).contains(&window) {
        failures.push(format!("window {window} s outside 1.485..={longest:.4} s"));
    }
    crate::Attempt { quiet: late_p99 <= crate::QUIET_SERVER_LATE_P99_MS, diag, failures }
}
