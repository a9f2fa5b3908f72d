//! Step 4, assemble the summary: the run's header and metrics, the server-side section, the
//! simulator's scheduler report, and the notes and status that follow from what was measured.

use std::time::Duration;

use infergate_model::config::{LoadMode, Profile};
use infergate_model::server_metrics::ServerSection;
use infergate_model::summary::{
    EngineParams, GitInfo, Invocation, Isolation, RunConfig, RunHeader, RunStatus, ScheduleSummary,
    Summary,
};
use infergate_model::workload::WorkloadSlice;
use infergate_sim::engine::SchedulerReport;

use super::connect::Connection;
use super::drive::Driven;

/// Share of the requested rate below which an open loop fell behind its schedule.
const BEHIND_RATE_SHARE: f64 = 0.95;
/// p99 send lag (ms) above which an open loop fell behind its schedule.
const BEHIND_LAG_MS: f64 = 10.0;
/// Requests an open loop needs before its achieved rate is compared with the requested one.
const MIN_REQUESTS_FOR_RATE: u64 = 20;

/// Everything the summary of a bench run is made from.
pub(crate) struct RunParts<'a> {
    pub run_id: &'a str,
    /// The profile measured (a shard's holds its part of the load) and its name.
    pub profile: &'a Profile,
    pub profile_name: &'a str,
    pub git: Option<GitInfo>,
    /// The command that started the run ([`super::RunSpec::invocation`]).
    pub invocation: Option<&'a Invocation>,
    /// The trial's slice of the workload and what kept the last run's state out of it.
    pub slice: Option<WorkloadSlice>,
    pub isolation: Option<Isolation>,
    pub connection: &'a Connection,
    pub engine: Option<EngineParams>,
    pub started_at: chrono::DateTime<chrono::Utc>,
    /// Notes of the earlier steps, in order.
    pub notes: Vec<String>,
    pub driven: &'a Driven,
    pub scheduler: Option<&'a SchedulerReport>,
}

/// The summary of a bench run.
pub fn assemble(parts: RunParts<'_>) -> Summary {
    let RunParts {
        run_id,
        profile,
        profile_name,
        git,
        invocation,
        slice,
        isolation,
        connection,
        engine,
        started_at,
        mut notes,
        driven,
        scheduler,
    } = parts;
    if let Some(iso) = isolation.as_ref().filter(|i| !i.done()) {
        notes.push(format!("trial isolation: {}", iso.text()));
    }
    let load = &profile.load;
    let requested_rate = (load.mode == LoadMode::Open).then_some(load.rate).flatten();
    let redactor = &connection.client.redactor;
    let (config, withheld) = RunConfig::Profile(Box::new(profile.clone())).redacted(redactor);
    if withheld {
        notes.push(
            "summary.config is the default profile: the resolved profile held a secret where \
             its text cannot be redacted"
                .into(),
        );
    }
    let header = RunHeader {
        run_id: run_id.to_string(),
        simulated: connection.simulated(),
        git,
        target: connection.target_info(),
        config,
        profile: profile_name.to_string(),
        engine,
        started_at,
        workload: driven.workload.clone(),
        notes,
    };
    let mut summary = Summary::of_run(header, driven.acc.finish(requested_rate));
    summary.workload.input_length.realised = driven.acc.input_len.stats();
    summary.workload.output_length.realised = driven.acc.output_len.stats();
    summary.workload.slice = slice;
    summary.isolation = isolation;
    // The command line is the caller's text: a header value or a key pasted into it is removed.
    summary.invocation = invocation.map(|i| Invocation {
        command: redactor.redact(&i.command),
        part: i.part.as_ref().map(|p| redactor.redact(p)),
    });
    summary.cost = infergate_model::cost::for_summary(&summary);
    summary.server = driven.server.clone();
    // The server's own count of the output tokens it computed, against those delivered.
    summary.goodput.token_ratio = driven.server.as_ref().and_then(|s| s.goodput_ratio);
    summary.notes.extend(cancellation_note(&summary, profile, driven.server.as_ref()));
    summary.notes.extend(token_mismatch_note(&summary.tokens));
    if let Some(report) = scheduler {
        summary.notes.extend(report.notes());
        summary.extra.scheduler = Some(report.clone());
    }
    if matches!(load.mode, LoadMode::Open | LoadMode::Trace) {
        let note = fell_behind_note(
            &summary.schedule,
            summary.requests.total,
            requested_rate,
            load.max_concurrency.is_some(),
        );
        if let Some(note) = note {
            summary.schedule.fell_behind = true;
            summary.notes.push(note);
        }
    }
    summary.notes.extend(count_mismatch_note(summary.tokens.count_mismatches));
    summary
        .notes
        .extend(infergate_model::metrics::stream_notes(&summary.requests, &summary.tokens));
    summary.notes.extend(driven.connections.note());
    summary.notes.extend(driven.host_noise.note());
    summary.environment.noise = Some(driven.host_noise.clone());
    summary.extra.connections = Some(driven.connections);
    summary.status = run_status(driven.interrupted, summary.requests.ok);
    if let Some(o) = &driven.oversaturated {
        summary.notes.push(o.note(&profile.steady));
        // Stopped by the watch: the growing queue is why, also when no measured request
        // succeeded before the stop (it came during the warmup, or every request in flight was
        // cancelled at the end of the grace period).
        if matches!(summary.status, RunStatus::Complete | RunStatus::Failed) {
            summary.status = RunStatus::Oversaturated;
        }
    }
    if let Some(e) = &driven.write_error {
        summary.status = RunStatus::Aborted;
        summary.notes.push(format!(
            "the run stopped at the first failed write of requests.jsonl ({e}); the summary \
             covers the {} requests recorded before it",
            summary.requests.total
        ));
    }
    // Notes quote server text and URLs (the scraper's among them): none keeps a secret.
    summary.notes = summary.notes.iter().map(|n| redactor.redact(n)).collect();
    summary
}

/// The run's plateau, from its records in `dir` (`requests.jsonl`), and a note when the
/// profile gates on a plateau the run does not have.
pub fn plateau(dir: &std::path::Path, summary: &mut Summary, profile: &Profile) {
    let target = match profile.load.mode {
        LoadMode::Closed => {
            infergate_model::steady::Target::Concurrency(profile.load.concurrency.into())
        }
        LoadMode::Open | LoadMode::Trace => infergate_model::steady::Target::Schedule,
    };
    let w = &summary.timing.window;
    let plateau = match w.start_ms.zip(w.end_ms) {
        Some(window) => infergate_model::steady::of_file(
            &dir.join(infergate_model::rundir::REQUESTS_FILE),
            window,
            summary.requests.total,
            target,
            &profile.steady,
            &profile.slo,
        ),
        None => infergate_model::steady::none("no measured request".into()),
    };
    if let (true, Some(why)) = (profile.steady.gate, &plateau.reason) {
        summary.notes.push(format!(
            "steady.gate reads the plateau's figures, and the run has none ({why}): they are \
             blank"
        ));
    }
    summary.plateau = Some(plateau);
}

/// What a run that cancelled requests on purpose could not measure, or what it found.
fn cancellation_note(
    summary: &Summary,
    profile: &Profile,
    server: Option<&ServerSection>,
) -> Option<String> {
    if !profile.cancel.is_on() {
        return None;
    }
    let n = summary.requests.cancelled;
    let waste = server.and_then(|s| s.cancelled.as_ref());
    let ratio = summary.goodput.token_ratio.map(|r| format!("; goodput.token_ratio {r}"));
    let ratio = ratio.unwrap_or_else(|| {
        "; goodput.token_ratio is blank: the server's counters gave no output-token count over \
         the run (scrape.enabled, and an engine that exposes one)"
            .into()
    });
    let found = match waste.map(|w| (w.decode_tokens, w.decode_share, w.stopped)) {
        Some((Some(d), Some(share), Some(stopped))) => format!(
            ": the server generated {d} output tokens no client received, {:.1}% of what the \
             cancelled requests had left to max_tokens ({})",
            share * 100.0,
            if stopped { "it stopped for clients that left" } else { "it went on computing them" }
        ),
        Some((Some(d), _, _)) => {
            format!(": the server generated {d} output tokens no client received")
        }
        _ => ": what the server computed for them is blank (no counters, or the engine was not \
               found idle after the run: cancel.drain_s)"
            .into(),
    };
    Some(format!("{n} request(s) cancelled on purpose{found}{ratio}"))
}

/// A note when the server's usage disagrees with the streamed count beyond the tolerance.
fn token_mismatch_note(tokens: &infergate_model::metrics::TokenCounts) -> Option<String> {
    let m = tokens.server_mismatch?;
    (m > infergate_model::metrics::TOKEN_MISMATCH_TOLERANCE).then(|| {
        format!(
            "the server's usage counted {} output tokens where the client received {} content \
             events (tokens.server_mismatch {m}, tolerance {}): a server or client that drops \
             or invents tokens, or one that sends several tokens per event",
            tokens.usage_total.unwrap_or(0),
            tokens.streamed_total.unwrap_or(0),
            infergate_model::metrics::TOKEN_MISMATCH_TOLERANCE
        )
    })
}

/// The measured window's length (for the histogram file's header).
pub fn window(summary: &Summary) -> Duration {
    summary.timing.window.duration_s.map(Duration::from_secs_f64).unwrap_or_default()
}

/// Why an open loop fell behind its schedule, when it did: its achieved rate fell short of
/// the requested one (over enough requests) or its p99 send lag grew past 10 ms.
pub(crate) fn fell_behind_note(
    schedule: &ScheduleSummary,
    requests: u64,
    requested_rate: Option<f64>,
    capped: bool,
) -> Option<String> {
    let lag_p99 = schedule.stats.lag_ms.as_ref().map(|s| s.p99);
    let achieved = schedule.stats.achieved_rate;
    let behind_rate = match (achieved, requested_rate) {
        (Some(a), Some(r)) if requests >= MIN_REQUESTS_FOR_RATE => a < BEHIND_RATE_SHARE * r,
        _ => false,
    };
    let behind_lag = lag_p99.is_some_and(|l| l > BEHIND_LAG_MS);
    if !(behind_rate || behind_lag) {
        return None;
    }
    let why = if capped {
        " (max_concurrency held requests back; their wait is in every latency)"
    } else {
        " (the client could not keep up; results understate the load)"
    };
    let num = |v: Option<f64>, digits: usize| {
        v.map_or(infergate_model::summary::BLANK.to_string(), |v| format!("{v:.digits$}"))
    };
    Some(format!(
        "the load fell behind its schedule: p99 send lag {} ms, achieved {} of {} requests/s{why}",
        num(lag_p99, 1),
        num(achieved, 2),
        num(requested_rate, 2),
    ))
}

/// A note when servers sent several tokens per content event.
pub(crate) fn count_mismatch_note(mismatches: u64) -> Option<String> {
    (mismatches > 0).then(|| format!(
        "{mismatches} request(s) reported more tokens in usage than content events (several tokens per chunk): output counts come from usage"
    ))
}

/// A run's status: interrupted when it was, else failed when no measured request succeeded.
pub fn run_status(interrupted: bool, ok_requests: u64) -> RunStatus {
    if interrupted {
        RunStatus::Interrupted
    } else if ok_requests == 0 {
        RunStatus::Failed
    } else {
        RunStatus::Complete
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use infergate_model::metrics::Stats;

    fn schedule(lag_p99: Option<f64>, achieved: Option<f64>) -> ScheduleSummary {
        let mut s = ScheduleSummary::default();
        s.stats.lag_ms = lag_p99.map(|p| Stats {
            count: 100,
            mean: p,
            stdev: 0.0,
            min: p,
            p50: p,
            p90: p,
            p95: p,
            p99: p,
            p999: p,
            max: p,
        });
        s.stats.achieved_rate = achieved;
        s
    }

    #[test]
    fn an_open_loop_falls_behind_on_rate_or_on_lag() {
        assert_eq!(fell_behind_note(&schedule(Some(2.0), Some(9.9)), 100, Some(10.0), false), None);
        let slow = fell_behind_note(&schedule(Some(2.0), Some(9.0)), 100, Some(10.0), false)
            .expect("achieved 90% of the rate");
        assert_eq!(
            slow,
            "the load fell behind its schedule: p99 send lag 2.0 ms, achieved 9.00 of 10.00 \
             requests/s (the client could not keep up; results understate the load)"
        );
        // Too few requests to compare rates; the lag alone decides.
        assert_eq!(fell_behind_note(&schedule(Some(2.0), Some(5.0)), 19, Some(10.0), false), None);
        let lagging = fell_behind_note(&schedule(Some(10.5), None), 19, Some(10.0), true)
            .expect("p99 lag over 10 ms");
        assert!(
            lagging.contains(&format!("achieved {} of 10.00", infergate_model::summary::BLANK)),
            "{lagging}"
        );
        assert!(lagging.contains("max_concurrency held requests back"), "{lagging}");
    }

    #[test]
    fn status_and_count_notes() {
        assert_eq!(run_status(true, 10), RunStatus::Interrupted);
        assert_eq!(run_status(false, 0), RunStatus::Failed);
        assert_eq!(run_status(false, 1), RunStatus::Complete);
        assert_eq!(count_mismatch_note(0), None);
        assert!(count_mismatch_note(3).unwrap().starts_with("3 request(s)"));
    }
}
