//! The steady state of a run: its plateau (the interval where the load held its target, ramp-up
//! and drain left out) found from the request records, the metrics of the requests sent within
//! it, and the watch that stops an open loop whose server falls behind its schedule by a
//! growing margin (over-saturation). Definitions in docs/metrics.md, "Steady state"; settings
//! in [`crate::config::SteadyConfig`].

use std::collections::VecDeque;
use std::io::BufRead;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::config::SteadyConfig;
use crate::metrics::{Goodput, LatencyMetrics, MetricsAccumulator, Slo, Throughput};
use crate::record::RequestRecord;

/// Completions a slice is lengthened to hold on average, so a slow load is not judged on noise.
const COMPLETIONS_PER_SLICE: f64 = 20.0;
/// Most slices a run is cut into (longer runs get longer slices).
const MAX_SLICES: f64 = 100_000.0;

/// `summary.json`'s `plateau`: the interval where the load held its target, and the metrics of
/// the measured requests whose intended send lies within it. Blank figures and a `reason` when
/// none was found.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Plateau {
    /// Why there is no plateau (null when there is one).
    pub reason: Option<String>,
    /// Its bounds, ms on the run clock (as the records' times), and its length.
    pub start_ms: Option<f64>,
    pub end_ms: Option<f64>,
    pub duration_s: Option<f64>,
    /// Measured requests whose intended send lies within it (every class), and the ok ones.
    pub requests: u64,
    pub ok: u64,
    /// The length of the slices the load was judged over, ms.
    pub slice_ms: Option<f64>,
    /// Slices within the plateau whose load was outside the band (only its edges are trimmed:
    /// a dip in the middle stays in, and is counted here).
    pub unsteady_slices: u64,
    pub metrics: LatencyMetrics,
    /// Over the plateau's length: its ok requests, their output and total tokens, per second.
    pub throughput: Throughput,
    pub goodput: Goodput,
}

/// What the load's target is.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Target {
    /// A closed loop: this many requests in flight.
    Concurrency(f64),
    /// An open loop or a trace: the schedule's sends.
    Schedule,
}

/// One request's times, as the plateau needs them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Span {
    pub intended_ms: f64,
    pub sent_ms: Option<f64>,
    pub end_ms: f64,
    pub measured: bool,
}

impl Span {
    pub fn of(r: &RequestRecord) -> Span {
        Span {
            intended_ms: r.intended_ms,
            sent_ms: r.sent_ms,
            end_ms: r.end_ms,
            measured: !r.warmup,
        }
    }
}

/// The plateau's bounds and how the load was judged.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bounds {
    pub start_ms: f64,
    pub end_ms: f64,
    pub slice_ms: f64,
    pub unsteady_slices: u64,
}

/// Per-slice tallies of a run's window.
struct Slices {
    origin: f64,
    end: f64,
    width: f64,
    /// Request-ms in flight within each slice (warmup requests included).
    inflight: Vec<f64>,
    /// Measured requests ending in each slice, sent in it, and meant to be sent in it.
    completed: Vec<u64>,
    sent: Vec<u64>,
    scheduled: Vec<u64>,
}

impl Slices {
    fn new(window: (f64, f64), measured: u64, slice_s: f64) -> Slices {
        let (origin, end) = window;
        let span = (end - origin).max(1e-3);
        let rate_per_ms = measured as f64 / span;
        let mut width = (slice_s * 1000.0).max(COMPLETIONS_PER_SLICE / rate_per_ms.max(1e-12));
        width = width.max(span / MAX_SLICES);
        let n = (span / width).ceil().max(1.0) as usize;
        Slices {
            origin,
            end,
            width,
            inflight: vec![0.0; n],
            completed: vec![0; n],
            sent: vec![0; n],
            scheduled: vec![0; n],
        }
    }

    fn index(&self, t: f64) -> Option<usize> {
        if !(t >= self.origin && t <= self.end) {
            return None;
        }
        Some((((t - self.origin) / self.width) as usize).min(self.inflight.len() - 1))
    }

    /// Slice `i`'s own length (the last one may be short).
    fn len_of(&self, i: usize) -> f64 {
        let start = self.origin + i as f64 * self.width;
        (self.end.min(start + self.width) - start).max(1e-9)
    }

    fn add(&mut self, s: &Span) {
        let begin = s.sent_ms.unwrap_or(s.intended_ms).max(self.origin);
        let end = s.end_ms.min(self.end);
        if end > begin {
            let (a, b) = (self.index(begin).unwrap_or(0), self.index(end).unwrap_or(0));
            for i in a..=b {
                let lo = self.origin + i as f64 * self.width;
                let overlap = end.min(lo + self.width) - begin.max(lo);
                self.inflight[i] += overlap.max(0.0);
            }
        }
        if !s.measured {
            return;
        }
        if let Some(i) = self.index(s.end_ms) {
            self.completed[i] += 1;
        }
        if let Some(i) = s.sent_ms.and_then(|t| self.index(t)) {
            self.sent[i] += 1;
        }
        if let Some(i) = self.index(s.intended_ms) {
            self.scheduled[i] += 1;
        }
    }

    /// Which slices held the load's target within `band`, or why none could.
    fn steady(&self, target: Target, band: f64) -> Result<Vec<bool>, PlateauError> {
        let n = self.inflight.len();
        let within = |v: f64, of: f64| of > 0.0 && (v - of).abs() <= band * of;
        match target {
            Target::Concurrency(c) => {
                let held: Vec<bool> =
                    (0..n).map(|i| within(self.inflight[i] / self.len_of(i), c)).collect();
                let rate = |i: usize| self.completed[i] as f64 / self.len_of(i);
                let held_idx: Vec<usize> = (0..n).filter(|&i| held[i]).collect();
                if held_idx.is_empty() {
                    return Err(PlateauError::NeverHeld { band, concurrency: c });
                }
                // The reference rate: the median of the later half of the slices that held the
                // concurrency (a ramp-up comes first; it does not set the reference).
                let mut later: Vec<f64> =
                    held_idx[held_idx.len() / 2..].iter().map(|&i| rate(i)).collect();
                later.sort_by(f64::total_cmp);
                let reference = later[later.len() / 2];
                Ok((0..n).map(|i| held[i] && within(rate(i), reference)).collect())
            }
            Target::Schedule => {
                Ok((0..n).map(|i| within(self.sent[i] as f64, self.scheduled[i] as f64)).collect())
            }
        }
    }
}

fn pct(share: f64) -> String {
    format!("{}", (share * 1000.0).round() / 10.0)
}

/// Why a run has no plateau (`summary.json`'s `plateau.reason`).
#[derive(Debug, thiserror::Error)]
pub enum PlateauError {
    #[error("no measured request")]
    NoMeasuredRequest,
    /// A closed loop whose requests in flight never came within `band` of its concurrency.
    #[error(
        "the requests in flight never stayed within {}% of the concurrency ({concurrency})",
        pct(*band)
    )]
    NeverHeld { band: f64, concurrency: f64 },
    #[error(
        "no slice held both the concurrency and a completion rate within {}% of the run's",
        pct(*band)
    )]
    NoConcurrencySlice { band: f64 },
    #[error("no slice sent within {}% of what the schedule meant to send", pct(*band))]
    NoScheduleSlice { band: f64 },
    /// The steady part found: `slices` slices of `slice_ms`, `length_s` long.
    #[error(
        "the steady part lasted {length_s:.1} s ({slices} slice(s) of {slice_ms:.0} ms), shorter \
         than steady.min_s ({min_s} s) or a single slice"
    )]
    TooShort { length_s: f64, slices: usize, slice_ms: f64, min_s: f64 },
    /// The requests file cannot be opened.
    #[error("cannot read {}: {error}", path.display())]
    Read { path: std::path::PathBuf, error: std::io::Error },
}

/// Find the plateau of a run's requests: the slices of its window (from the earliest intended
/// send of a measured request to the latest end of one) that held the load's target within the
/// band, from the first such slice to the last. `measured`: the measured requests (sets the
/// slices' length).
pub fn detect(
    spans: impl Iterator<Item = Span>,
    window: (f64, f64),
    measured: u64,
    target: Target,
    cfg: &SteadyConfig,
) -> Result<Bounds, PlateauError> {
    if window.1.partial_cmp(&window.0) != Some(std::cmp::Ordering::Greater) || measured == 0 {
        return Err(PlateauError::NoMeasuredRequest);
    }
    let mut slices = Slices::new(window, measured, cfg.slice_s);
    for s in spans {
        slices.add(&s);
    }
    let steady = slices.steady(target, cfg.band)?;
    let (Some(first), Some(last)) =
        (steady.iter().position(|&b| b), steady.iter().rposition(|&b| b))
    else {
        return Err(match target {
            Target::Concurrency(_) => PlateauError::NoConcurrencySlice { band: cfg.band },
            Target::Schedule => PlateauError::NoScheduleSlice { band: cfg.band },
        });
    };
    let start_ms = slices.origin + first as f64 * slices.width;
    let end_ms = slices.end.min(slices.origin + (last + 1) as f64 * slices.width);
    let length_s = (end_ms - start_ms) / 1000.0;
    if length_s < cfg.min_s || last == first {
        return Err(PlateauError::TooShort {
            length_s,
            slices: last + 1 - first,
            slice_ms: slices.width,
            min_s: cfg.min_s,
        });
    }
    let unsteady = steady[first..=last].iter().filter(|&&b| !b).count() as u64;
    Ok(Bounds { start_ms, end_ms, slice_ms: slices.width, unsteady_slices: unsteady })
}

/// The plateau's metrics: those of the measured requests whose intended send lies within
/// `bounds` (`[start, end)`), the rates over the plateau's length.
pub fn measure<R: std::borrow::Borrow<RequestRecord>>(
    records: impl IntoIterator<Item = R>,
    bounds: &Bounds,
    slo: &Slo,
) -> Plateau {
    let mut acc = MetricsAccumulator::new(slo.clone());
    for r in records {
        let r = r.borrow();
        if !r.warmup && r.intended_ms >= bounds.start_ms && r.intended_ms < bounds.end_ms {
            acc.add(r);
        }
    }
    let m = acc.finish(None);
    let length_s = (bounds.end_ms - bounds.start_ms) / 1000.0;
    let per_s = |n: Option<u64>| n.filter(|_| length_s > 0.0).map(|n| round6(n as f64 / length_s));
    let all_tokens =
        m.tokens.input_total.zip(m.tokens.output_total).and_then(|(i, o)| i.checked_add(o));
    let throughput = Throughput {
        requests_per_s: per_s(Some(m.requests.ok)),
        output_tokens_per_s: per_s(m.tokens.output_total),
        total_tokens_per_s: per_s(all_tokens),
    };
    let goodput = Goodput { requests_per_s: per_s(m.goodput.requests), ..m.goodput };
    Plateau {
        reason: None,
        start_ms: Some(round3(bounds.start_ms)),
        end_ms: Some(round3(bounds.end_ms)),
        duration_s: Some(round6(length_s)),
        requests: m.requests.total,
        ok: m.requests.ok,
        slice_ms: Some(round3(bounds.slice_ms)),
        unsteady_slices: bounds.unsteady_slices,
        metrics: m.latency,
        throughput,
        goodput,
    }
}

/// A plateau that could not be found: every figure blank, and why.
pub fn none(reason: String) -> Plateau {
    Plateau { reason: Some(reason), ..Plateau::default() }
}

/// The plateau of the run whose records are in `requests` (a run directory's
/// `requests.jsonl`), read twice, one record at a time: once to find it, once to measure it.
pub fn of_file(
    requests: &Path,
    window: (f64, f64),
    measured: u64,
    target: Target,
    cfg: &SteadyConfig,
    slo: &Slo,
) -> Plateau {
    let found = match each_record(requests) {
        Ok(records) => detect(records.map(|r| Span::of(&r)), window, measured, target, cfg),
        Err(e) => Err(e),
    };
    match found.and_then(|b| each_record(requests).map(|records| measure(records, &b, slo))) {
        Ok(p) => p,
        Err(reason) => none(reason.to_string()),
    }
}

/// The records of a `requests.jsonl`, one at a time; a line that does not read (a cut last
/// line) is left out, as the summary left it out.
fn each_record(path: &Path) -> Result<impl Iterator<Item = RequestRecord>, PlateauError> {
    let file = std::fs::File::open(path)
        .map_err(|error| PlateauError::Read { path: path.to_path_buf(), error })?;
    Ok(std::io::BufReader::new(file)
        .lines()
        .map_while(Result::ok)
        .filter_map(|line| serde_json::from_str::<RequestRecord>(&line).ok()))
}

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

fn round6(v: f64) -> f64 {
    (v * 1e6).round() / 1e6
}

/// Watches an open loop for over-saturation: the requests it completed over a trailing window
/// stay short of those its schedule meant to send over the same window by more than the band
/// (the requests in flight grow), for a whole window's length in a row. The first window starts
/// after the first request completed, so the latency of the first requests is not read as a
/// growing queue.
#[derive(Debug)]
pub struct SaturationWatch {
    window_ms: f64,
    band: f64,
    /// (time, scheduled, completed) samples of the last window and one before it.
    samples: VecDeque<(f64, u64, u64)>,
    first_done_ms: Option<f64>,
    behind_since: Option<f64>,
}

/// What the watch saw when it stopped a run: over the last window, the rates scheduled and
/// completed, and the requests in flight.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Oversaturation {
    pub at_ms: f64,
    pub scheduled_per_s: f64,
    pub completed_per_s: f64,
    pub in_flight: u64,
}

impl Oversaturation {
    /// The summary's note.
    pub fn note(&self, cfg: &SteadyConfig) -> String {
        format!(
            "stopped early at {:.1} s: over-saturated: for {} s the server completed {:.2} \
             requests/s against the {:.2} the schedule sent (more than {}% short), and {} \
             requests were in flight and growing; the run measured a growing queue from there \
             (steady.stop_oversaturated, steady.oversaturation_s)",
            self.at_ms / 1000.0,
            cfg.oversaturation_s,
            self.completed_per_s,
            self.scheduled_per_s,
            pct(cfg.band),
            self.in_flight
        )
    }
}

impl SaturationWatch {
    pub fn new(cfg: &SteadyConfig) -> SaturationWatch {
        SaturationWatch {
            window_ms: cfg.oversaturation_s * 1000.0,
            band: cfg.band,
            samples: VecDeque::new(),
            first_done_ms: None,
            behind_since: None,
        }
    }

    /// A sample at `t_ms`: requests scheduled so far, and completed so far. `Some` when the
    /// run is over-saturated.
    pub fn observe(&mut self, t_ms: f64, scheduled: u64, completed: u64) -> Option<Oversaturation> {
        if completed > 0 && self.first_done_ms.is_none() {
            self.first_done_ms = Some(t_ms);
        }
        self.samples.push_back((t_ms, scheduled, completed));
        while self.samples.len() > 2 && self.samples[1].0 <= t_ms - self.window_ms {
            self.samples.pop_front();
        }
        let &(t0, s0, c0) = self.samples.front()?;
        let covered = t0 <= t_ms - self.window_ms && self.first_done_ms.is_some_and(|f| t0 >= f);
        let (ds, dc) = (scheduled.saturating_sub(s0), completed.saturating_sub(c0));
        let behind = covered && ds > 0 && (dc as f64) < (1.0 - self.band) * ds as f64;
        if !behind {
            self.behind_since = None;
            return None;
        }
        let since = *self.behind_since.get_or_insert(t_ms);
        if t_ms - since < self.window_ms {
            return None;
        }
        let span_s = (t_ms - t0) / 1000.0;
        Some(Oversaturation {
            at_ms: t_ms,
            scheduled_per_s: round6(ds as f64 / span_s),
            completed_per_s: round6(dc as f64 / span_s),
            in_flight: scheduled.saturating_sub(completed),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> SteadyConfig {
        SteadyConfig { min_s: 2.0, ..SteadyConfig::default() }
    }

    /// A closed loop of `c` workers over `[0, until)`: each request takes `slow` ms while it is
    /// sent before `ramp_ms`, else `fast` ms.
    fn closed_loop(c: usize, ramp_ms: f64, slow: f64, fast: f64, until: f64) -> Vec<Span> {
        let mut out = Vec::new();
        for _ in 0..c {
            let mut t = 0.0;
            while t < until {
                let e2e = if t < ramp_ms { slow } else { fast };
                out.push(Span {
                    intended_ms: t,
                    sent_ms: Some(t),
                    end_ms: t + e2e,
                    measured: true,
                });
                t += e2e;
            }
        }
        out
    }

    fn window(spans: &[Span]) -> (f64, f64) {
        let start = spans.iter().map(|s| s.intended_ms).fold(f64::INFINITY, f64::min);
        let end = spans.iter().map(|s| s.end_ms).fold(0.0, f64::max);
        (start, end)
    }

    #[test]
    fn a_closed_loops_plateau_leaves_out_a_slow_ramp_up_and_the_drain() {
        // 8 workers, requests of 400 ms for the first 10 s, then of 50 ms until 30 s.
        let spans = closed_loop(8, 10_000.0, 400.0, 50.0, 30_000.0);
        let b = detect(
            spans.iter().copied(),
            window(&spans),
            spans.len() as u64,
            Target::Concurrency(8.0),
            &cfg(),
        )
        .expect("a plateau");
        assert_eq!(b.slice_ms, 1000.0);
        // The slow requests complete 20 per second, the fast ones 160: the plateau starts
        // with the first slice at the fast rate, 10-11 s.
        assert_eq!(b.start_ms, 10_000.0, "{b:?}");
        // The last slice with every worker busy ends at 30 s (the drain after it is out).
        assert_eq!(b.end_ms, 30_000.0, "{b:?}");
        assert_eq!(b.unsteady_slices, 0);
    }

    #[test]
    fn a_plateau_whose_requests_are_those_sent_within_it() {
        let spans = closed_loop(4, 5_000.0, 500.0, 100.0, 20_000.0);
        let recs: Vec<RequestRecord> = spans
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let ttft = if s.intended_ms < 5_000.0 { 450.0 } else { 50.0 };
                let mut r =
                    RequestRecord::ok(i as u64, s.intended_ms, s.intended_ms + ttft, vec![]);
                r.end_ms = s.end_ms;
                r.sent_ms = s.sent_ms;
                r
            })
            .collect();
        let b = detect(
            spans.iter().copied(),
            window(&spans),
            spans.len() as u64,
            Target::Concurrency(4.0),
            &cfg(),
        )
        .unwrap();
        let p = measure(recs, &b, &Slo::default());
        let ttft = p.metrics.ttft_ms.expect("measured");
        assert_eq!((ttft.min, ttft.max), (50.0, 50.0), "no slow request sent within it");
        let expected = spans
            .iter()
            .filter(|s| s.intended_ms >= b.start_ms && s.intended_ms < b.end_ms)
            .count();
        assert_eq!(p.requests, expected as u64);
        // 4 workers of 100 ms: 40 requests per second.
        let rate = p.throughput.requests_per_s.unwrap();
        assert!((rate - 40.0).abs() < 1.0, "{rate}");
    }

    #[test]
    fn an_open_loops_plateau_is_where_it_sent_on_schedule() {
        // 40 requests/s for 20 s; from 12 s the client sends each 600 ms late (a lag that
        // grows no further), so the slice 12-13 s sends too few and the plateau holds on.
        let spans: Vec<Span> = (0..800)
            .map(|i| {
                let t = i as f64 * 25.0;
                let sent = if t < 12_000.0 { t } else { t + 600.0 };
                Span { intended_ms: t, sent_ms: Some(sent), end_ms: sent + 100.0, measured: true }
            })
            .collect();
        let b =
            detect(spans.iter().copied(), window(&spans), 800, Target::Schedule, &cfg()).unwrap();
        assert_eq!((b.start_ms, b.end_ms), (0.0, 20_000.0), "the drain after 20 s is out");
        assert_eq!(b.unsteady_slices, 1, "the slice of 12 s sent 16 of 40: a dip counted inside");
    }

    #[test]
    fn a_run_without_a_plateau_says_why() {
        // 2 s of load: shorter than min_s.
        let spans = closed_loop(4, 0.0, 50.0, 50.0, 2_000.0);
        let c = SteadyConfig { min_s: 5.0, ..SteadyConfig::default() };
        let why = detect(
            spans.iter().copied(),
            window(&spans),
            spans.len() as u64,
            Target::Concurrency(4.0),
            &c,
        )
        .unwrap_err()
        .to_string();
        assert!(why.contains("shorter than steady.min_s (5 s)"), "{why}");
        // Never the concurrency asked for: 4 in flight of 16.
        let why = detect(
            spans.iter().copied(),
            window(&spans),
            spans.len() as u64,
            Target::Concurrency(16.0),
            &cfg(),
        )
        .unwrap_err()
        .to_string();
        assert!(why.contains("never stayed within 10% of the concurrency (16)"), "{why}");
        assert_eq!(
            detect(std::iter::empty(), (0.0, 0.0), 0, Target::Schedule, &cfg())
                .unwrap_err()
                .to_string(),
            "no measured request"
        );
    }

    #[test]
    fn the_reasons_without_a_plateau_read_as_summaries_show_them() {
        assert_eq!(
            PlateauError::NoConcurrencySlice { band: 0.1 }.to_string(),
            "no slice held both the concurrency and a completion rate within 10% of the run's"
        );
        assert_eq!(
            PlateauError::NoScheduleSlice { band: 0.125 }.to_string(),
            "no slice sent within 12.5% of what the schedule meant to send"
        );
        let short =
            PlateauError::TooShort { length_s: 2.04, slices: 1, slice_ms: 250.4, min_s: 5.0 };
        assert_eq!(
            short.to_string(),
            "the steady part lasted 2.0 s (1 slice(s) of 250 ms), shorter than steady.min_s (5 s) \
             or a single slice"
        );
    }

    #[test]
    fn the_watch_stops_a_loop_whose_completions_stay_short_of_its_schedule() {
        let c = SteadyConfig { oversaturation_s: 2.0, ..SteadyConfig::default() };
        // Scheduled 20/s; the server completes 10/s from 0.5 s on.
        let mut w = SaturationWatch::new(&c);
        let mut fired = None;
        for k in 0..100 {
            let t = k as f64 * 250.0;
            let done = ((t - 500.0).max(0.0) / 100.0) as u64;
            if let Some(o) = w.observe(t, (t / 50.0) as u64, done) {
                fired = Some(o);
                break;
            }
        }
        let o = fired.expect("over-saturated");
        // First completion at 0.75 s; a window from then ends at 2.75 s; behind for 2 s more.
        assert_eq!(o.at_ms, 4_750.0);
        assert!(
            (o.scheduled_per_s - 20.0).abs() < 0.5 && (o.completed_per_s - 10.0).abs() < 0.5,
            "{o:?}"
        );
        assert!(o.note(&c).contains("over-saturated"));
        // A server that keeps up, after a first latency of 3 s, is never stopped.
        let mut w = SaturationWatch::new(&c);
        for k in 0..200 {
            let t = k as f64 * 250.0;
            let done = ((t - 3000.0).max(0.0) / 50.0) as u64;
            assert_eq!(w.observe(t, (t / 50.0) as u64, done), None, "at {t} ms");
        }
    }
}
