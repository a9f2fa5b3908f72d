//! The bench's own timing error against the known answers: what `cargo xtask selftest` and the
//! timing tests (`bench/tests/timing/known_answer.rs`) both judge.
//!
//! The bench measures the known-answer server (the simulator's timing mode in a process of its
//! own, `known_answer::server`), which records for every chunk when its schedule made it due
//! and when it handed it to the connection; `known_answer::run::compare` sets the bench's
//! records beside the server's. This module holds what follows: the bounds the known-answer
//! tests hold ([`TTFT_ERROR_P50_MS`] and the rest), the [`Figures`] judged against them (the
//! bench's TTFT error, its inter-token gap error and the server's lateness, apart), and the
//! [`SelftestRecord`] a self-test leaves (`floor` writes it and reads the recent one,
//! [`is_recent`], into a run's `environment.selftest`).
//!
//! A machine that stalls both processes breaks the bounds through no fault of the bench's, and
//! the server's lateness shows it: [`Attempts`] measures again while the server was late or
//! other processes took the CPU, and blames the bench only for an error made while neither held.
//! Nothing here depends on another module of the crate but `hostnoise`'s `/proc` parsers: the
//! summary's `environment` holds a [`SelftestRecord`].

use serde::{Deserialize, Serialize};

/// The server's lateness against its own schedule, every chunk: median and p99 (ms). Over these
/// the server was late (the machine delayed it; not the bench's error). Measured on 2 cores
/// with two builds running: p50 0.10-0.12 ms, p99 1.3-4.5 ms (docs/performance.md).
pub const SERVER_LATE_P50_MS: f64 = 1.0;
pub const SERVER_LATE_P99_MS: f64 = 10.0;
/// The bench's own TTFT error, request by request (measured from the intended send, minus the
/// server's time from the request's arrival to handing its first chunk over): median and p99
/// (ms), and the least it may be (a TTFT shorter than the server's is a clock error). Measured
/// at concurrency 32 on 2 cores with two builds running (12 runs of the known-answer tests):
/// p50 0.095-0.12, p99 0.33-3.9, max 6.6.
pub const TTFT_ERROR_P50_MS: f64 = 0.5;
pub const TTFT_ERROR_P99_MS: f64 = 5.0;
pub const TTFT_ERROR_MIN_MS: f64 = -0.5;
/// The bench's own error on each inter-token gap (measured gap minus the gap between the
/// server's hand-overs of the same two chunks), absolute value: median and p99 (ms). Measured
/// as above: p50 0.011-0.013, p99 0.07-1.0, max 6.9.
pub const GAP_ERROR_P50_MS: f64 = 0.1;
pub const GAP_ERROR_P99_MS: f64 = 5.0;

/// The server's lateness p99 (every chunk, ms) under which the machine counts as quiet.
/// Measured: 0.13-0.16 ms on the idle 2-core machine, 1.3-4.5 ms with two builds running
/// beside the test, 1.9-6.2 ms on a busy CI host (docs/performance.md).
pub const QUIET_SERVER_LATE_P99_MS: f64 = 1.0;
/// The share of the machine's CPU time that processes other than this one and the servers it
/// started (and waited for) may take during an attempt for the machine to count as quiet.
/// Measured: 0.0-2.1% on the idle 2-core machine, 52% with one busy loop beside it.
pub const QUIET_OTHERS_SHARE: f64 = 0.05;
/// How many times a measurement is made before giving up on a machine that stalls.
pub const ATTEMPTS: usize = 6;

/// How old a self-test may be, on the same host, for a run to record it as its measurement
/// floor (`environment.selftest`).
pub const RECENT_DAYS: i64 = 7;

/// Nearest-rank percentile of sorted values (the order statistic a histogram's p50 / p99
/// approximates).
pub fn rank(sorted: &[f64], p: f64) -> f64 {
    sorted[((p * sorted.len() as f64).ceil() as usize).max(1) - 1]
}

/// The values, sorted.
pub fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(f64::total_cmp);
    v
}

/// A distribution of differences (ms): its median, p99 and extremes.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Spread {
    pub p50: f64,
    pub p99: f64,
    pub min: f64,
    pub max: f64,
    /// How many values.
    pub n: u64,
}

impl Spread {
    /// Of sorted values; `None` when there are none.
    pub fn of(sorted: &[f64]) -> Option<Spread> {
        let (min, max) = (*sorted.first()?, *sorted.last()?);
        Some(Spread {
            p50: rank(sorted, 0.5),
            p99: rank(sorted, 0.99),
            min,
            max,
            n: sorted.len() as u64,
        })
    }
}

/// What one self-test measured: the bench's own error and the server's lateness, apart.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Figures {
    /// The bench's TTFT minus the server's arrival-to-first-hand-over, request by request.
    pub ttft_error_ms: Spread,
    /// |the bench's inter-token gap minus the gap between the same two hand-overs|, gap by gap.
    pub gap_error_ms: Spread,
    /// The server's hand-over minus its schedule's due time, every chunk.
    pub server_late_ms: Spread,
}

impl Figures {
    /// The server kept its schedule (within [`SERVER_LATE_P50_MS`] / [`SERVER_LATE_P99_MS`]).
    pub fn server_on_schedule(&self) -> bool {
        self.server_late_ms.p50 <= SERVER_LATE_P50_MS
            && self.server_late_ms.p99 <= SERVER_LATE_P99_MS
    }

    /// The bounds of the bench's own error it broke, in words (empty: within the bounds).
    pub fn broken_bounds(&self) -> Vec<String> {
        let mut out = Vec::new();
        let (t, g) = (&self.ttft_error_ms, &self.gap_error_ms);
        if t.p50 > TTFT_ERROR_P50_MS || t.p99 > TTFT_ERROR_P99_MS {
            out.push(format!(
                "the bench's TTFT error p50 {:.3} ms p99 {:.3} ms (bounds {TTFT_ERROR_P50_MS} / {TTFT_ERROR_P99_MS})",
                t.p50, t.p99
            ));
        }
        if t.min < TTFT_ERROR_MIN_MS {
            out.push(format!(
                "a TTFT {:.3} ms shorter than the server's (at least {TTFT_ERROR_MIN_MS})",
                -t.min
            ));
        }
        if g.p50 > GAP_ERROR_P50_MS || g.p99 > GAP_ERROR_P99_MS {
            out.push(format!(
                "the bench's gap error p50 {:.3} ms p99 {:.3} ms (bounds {GAP_ERROR_P50_MS} / {GAP_ERROR_P99_MS})",
                g.p50, g.p99
            ));
        }
        out
    }

    /// Every broken bound: the bench's own, then the server's lateness (which is the machine's).
    pub fn failures(&self) -> Vec<String> {
        let mut out = self.broken_bounds();
        if !self.server_on_schedule() {
            out.push(format!(
                "the known-answer server was late against its own schedule (p50 {:.3} ms p99 {:.3} ms, bounds {SERVER_LATE_P50_MS} / {SERVER_LATE_P99_MS}): the machine delayed it; this is not the bench's error",
                self.server_late_ms.p50, self.server_late_ms.p99
            ));
        }
        out
    }

    /// One line of the figures, for messages and test diagnostics.
    pub fn line(&self) -> String {
        let (t, g, l) = (&self.ttft_error_ms, &self.gap_error_ms, &self.server_late_ms);
        format!(
            "bench TTFT error p50 {:.3} p99 {:.3} min {:.3} max {:.3} | gap error p50 {:.3} p99 {:.3} max {:.3} | server late p50 {:.3} p99 {:.3} max {:.3} (ms)",
            t.p50, t.p99, t.min, t.max, g.p50, g.p99, g.max, l.p50, l.p99, l.max
        )
    }
}

/// How a self-test ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SelftestOutcome {
    /// The bench's own error was within the bounds.
    WithinBounds,
    /// The bench's own error broke a bound while the machine was quiet: the bench's error.
    BenchError,
    /// Every attempt broke a bound while the machine stalled the server or other processes
    /// took the CPU: the machine's, not the bench's; the floor was not measured cleanly.
    MachineStalled,
}

impl SelftestOutcome {
    pub fn words(self) -> &'static str {
        match self {
            SelftestOutcome::WithinBounds => "within the known-answer bounds",
            SelftestOutcome::BenchError => {
                "the bench's own error broke the known-answer bounds while the machine was quiet"
            }
            SelftestOutcome::MachineStalled => {
                "the machine stalled the known-answer server (or other processes took the CPU) in every attempt; not the bench's error"
            }
        }
    }
}

/// A self-test's result: what was measured, where, when and how it ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SelftestRecord {
    /// When it ended (RFC 3339, UTC).
    pub at: String,
    /// The host's fingerprint (`Environment::fingerprint`): a run on another host does not
    /// record it.
    pub environment_fingerprint: String,
    /// Concurrent streams.
    pub concurrency: u32,
    /// Tokens per second across all streams (one token per chunk, so also events per second).
    pub tokens_per_s: f64,
    /// The per-stream inter-token gap that rate gives (ms): concurrency / rate.
    pub itl_ms: f64,
    /// Measured requests of the attempt the figures come from.
    pub requests: u64,
    /// Attempts made (a disturbed attempt is measured again).
    pub attempts: u32,
    /// The host's 1-minute load average when it ended.
    #[serde(default)]
    pub load_avg_1m: Option<f64>,
    pub verdict: SelftestOutcome,
    pub figures: Figures,
}

impl SelftestRecord {
    /// The record's line: the floor in words (an ADR's and the command's).
    pub fn floor_line(&self) -> String {
        let (t, g) = (&self.figures.ttft_error_ms, &self.figures.gap_error_ms);
        format!(
            "self-test of {} at concurrency {}, {} tokens/s: the bench's own TTFT error p50 {:.3} ms p99 {:.3} ms, inter-token gap error p50 {:.3} ms p99 {:.3} ms (server lateness p99 {:.3} ms; {})",
            self.at,
            self.concurrency,
            self.tokens_per_s,
            t.p50,
            t.p99,
            g.p50,
            g.p99,
            self.figures.server_late_ms.p99,
            self.verdict.words()
        )
    }
}

/// Same host, and made within [`RECENT_DAYS`] before `now` (not after it).
pub(crate) fn is_recent(
    r: &SelftestRecord,
    fingerprint: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> bool {
    let Ok(at) = chrono::DateTime::parse_from_rfc3339(&r.at) else { return false };
    let age = now - at.with_timezone(&chrono::Utc);
    r.environment_fingerprint == fingerprint
        && age >= chrono::Duration::zero()
        && age <= chrono::Duration::days(RECENT_DAYS)
}

/// What one attempt at a timing measurement saw: whether the known-answer server kept its
/// schedule meanwhile, a line of what it measured, and the bounds it broke.
pub struct Attempt {
    pub quiet: bool,
    pub diag: String,
    pub failures: Vec<String>,
}

/// The CPU time of the whole machine (all, busy) and of this process with the children it
/// waited for, from `/proc` (clock ticks; `None` where there is no `/proc`).
pub fn cpu_ticks() -> Option<(u64, u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let me = std::fs::read_to_string("/proc/self/stat").ok()?;
    let cpu = crate::hostnoise::parse_cpu_times(&stat).ok()?;
    let own = crate::hostnoise::parse_self_ticks(&me).ok()?;
    Some((cpu.total, cpu.total - cpu.idle, own))
}

/// How much of the machine's CPU time went to other processes (steal from the host included)
/// between two readings of [`cpu_ticks`].
pub(crate) fn others_share(
    from: Option<(u64, u64, u64)>,
    to: Option<(u64, u64, u64)>,
) -> Option<f64> {
    let ((a0, b0, m0), (a1, b1, m1)) = (from?, to?);
    let all = a1.checked_sub(a0).filter(|&t| t > 0)?;
    let others = b1.saturating_sub(b0).saturating_sub(m1.saturating_sub(m0));
    Some(others as f64 / all as f64)
}

/// The attempts at one timing measurement, measured until one holds its bounds
/// ([`Attempts::judge`] after each).
#[derive(Default)]
pub struct Attempts {
    /// Each disturbed attempt that broke a bound, in words.
    pub disturbed: Vec<String>,
}

/// What to do after an attempt.
#[derive(Debug, PartialEq)]
pub enum Next {
    /// It held every bound.
    Held,
    /// It broke a bound on a quiet machine (the server on schedule, other processes under
    /// [`QUIET_OTHERS_SHARE`]): the bench's error; the message says which and what was seen.
    Failed(String),
    /// It broke a bound on a disturbed machine: measure again.
    Again,
    /// Every one of [`ATTEMPTS`] was disturbed and broke a bound; each named.
    Stalled(String),
}

impl Attempts {
    /// Judge attempt `n` (from 1), whose CPU readings before and after are given; the line it
    /// prints is returned with the verdict.
    pub fn judge(
        &mut self,
        n: usize,
        a: &Attempt,
        before: Option<(u64, u64, u64)>,
        after: Option<(u64, u64, u64)>,
    ) -> (Next, String) {
        let others = others_share(before, after);
        let idle = others.is_none_or(|s| s <= QUIET_OTHERS_SHARE);
        let others = others.map_or("unknown".to_string(), |s| format!("{:.1}%", 100.0 * s));
        let diag = format!("{} | other processes {others} of the CPU", a.diag);
        let line = format!(
            "attempt {n} (server late p99 under {QUIET_SERVER_LATE_P99_MS} ms: {}, machine idle: {idle}): {diag}",
            a.quiet
        );
        if a.failures.is_empty() {
            return (Next::Held, line);
        }
        if a.quiet && idle {
            let msg = format!(
                "on a quiet machine (the known-answer server kept its schedule, other processes took at most {:.0}% of the CPU): {}\n{diag}",
                100.0 * QUIET_OTHERS_SHARE,
                a.failures.join("; "),
            );
            return (Next::Failed(msg), line);
        }
        self.disturbed.push(format!("attempt {n}: {} ({diag})", a.failures.join("; ")));
        if n < ATTEMPTS {
            return (Next::Again, line);
        }
        let msg = format!(
            "the machine stalled the known-answer server (its lateness p99 over {QUIET_SERVER_LATE_P99_MS} ms) or other processes took over {:.0}% of the CPU in every one of {ATTEMPTS} attempts, and each broke a bound:\n{}",
            100.0 * QUIET_OTHERS_SHARE,
            self.disturbed.join("\n")
        );
        (Next::Stalled(msg), line)
    }
}

/// A self-test's record measured at `at` on the host `fingerprint`, within the bounds (the
/// tests of this module and of [`crate::floor`]).
#[cfg(test)]
pub(crate) fn test_record(at: &str, fingerprint: &str) -> SelftestRecord {
    let s = Spread { p50: 0.1, p99: 0.2, min: 0.0, max: 0.2, n: 100 };
    SelftestRecord {
        at: at.into(),
        environment_fingerprint: fingerprint.into(),
        concurrency: 4,
        tokens_per_s: 400.0,
        itl_ms: 10.0,
        requests: 40,
        attempts: 1,
        load_avg_1m: Some(0.5),
        verdict: SelftestOutcome::WithinBounds,
        figures: Figures { ttft_error_ms: s, gap_error_ms: s, server_late_ms: s },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spread(p50: f64, p99: f64, min: f64) -> Spread {
        Spread { p50, p99, min, max: p99, n: 100 }
    }

    fn figures(ttft: Spread, gap: Spread, late: Spread) -> Figures {
        Figures { ttft_error_ms: ttft, gap_error_ms: gap, server_late_ms: late }
    }

    #[test]
    fn the_bounds_are_the_known_answers_and_a_late_server_is_not_the_benchs() {
        let quiet = spread(0.1, 0.2, 0.0);
        let ok = figures(spread(0.1, 0.3, 0.02), spread(0.01, 0.1, 0.0), quiet);
        assert!(ok.failures().is_empty(), "{:?}", ok.failures());
        let slow = figures(spread(0.6, 0.7, 0.1), spread(0.01, 0.1, 0.0), quiet);
        assert_eq!(slow.broken_bounds().len(), 1, "{:?}", slow.broken_bounds());
        let early = figures(spread(0.1, 0.3, -0.6), spread(0.01, 0.1, 0.0), quiet);
        assert!(early.broken_bounds()[0].contains("shorter than the server's"));
        let gaps = figures(spread(0.1, 0.3, 0.0), spread(0.01, 5.5, 0.0), quiet);
        assert!(gaps.broken_bounds()[0].contains("gap error"));
        let late = figures(spread(0.1, 0.3, 0.0), spread(0.01, 0.1, 0.0), spread(0.2, 12.0, 0.0));
        assert!(late.broken_bounds().is_empty() && !late.server_on_schedule());
        assert!(late.failures()[0].contains("not the bench's error"));
    }

    #[test]
    fn spreads_are_nearest_rank() {
        // Ten values: the median is the 5th, the p99 the 10th (rank ceil(9.9)).
        let v = sorted((1..=10).map(f64::from).rev().collect());
        let s = Spread::of(&v).unwrap();
        assert_eq!((s.p50, s.p99, s.min, s.max, s.n), (5.0, 10.0, 1.0, 10.0, 10));
        assert_eq!(Spread::of(&[]), None);
    }

    use super::test_record as record;

    #[test]
    fn a_selftest_is_recent_on_the_same_host_within_seven_days() {
        let now = chrono::DateTime::parse_from_rfc3339("2026-01-10T12:00:00Z").unwrap().to_utc();
        assert!(is_recent(&record("2026-01-03T12:00:00Z", "abc"), "abc", now));
        assert!(!is_recent(&record("2026-01-03T11:59:59Z", "abc"), "abc", now), "too old");
        assert!(!is_recent(&record("2026-01-10T12:00:01Z", "abc"), "abc", now), "in the future");
        assert!(!is_recent(&record("2026-01-09T12:00:00Z", "abc"), "other", now), "other host");
        assert!(!is_recent(&record("yesterday", "abc"), "abc", now));
    }

    #[test]
    fn a_quiet_broken_attempt_fails_at_once_and_disturbed_ones_are_measured_again() {
        let broken = |quiet| Attempt { quiet, diag: "d".into(), failures: vec!["x".into()] };
        let idle = (Some((0, 0, 0)), Some((100, 10, 9)));
        let busy = (Some((0, 0, 0)), Some((100, 60, 9)));
        let mut a = Attempts::default();
        let held = Attempt { quiet: true, diag: "d".into(), failures: vec![] };
        assert_eq!(a.judge(1, &held, busy.0, busy.1).0, Next::Held);
        assert!(matches!(a.judge(1, &broken(true), idle.0, idle.1).0, Next::Failed(_)));
        assert_eq!(a.judge(1, &broken(false), idle.0, idle.1).0, Next::Again);
        assert_eq!(a.judge(2, &broken(true), busy.0, busy.1).0, Next::Again, "others took 51%");
        let (last, _) = a.judge(ATTEMPTS, &broken(false), idle.0, idle.1);
        let Next::Stalled(msg) = last else { panic!("{last:?}") };
        assert!(msg.contains("attempt 1: x") && msg.contains("attempt 2: x"), "{msg}");
    }
}
