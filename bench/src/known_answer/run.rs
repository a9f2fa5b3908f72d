//! One self-test: the bench run against the known-answer server in a process of its own
//! ([`super::server`]) at a concurrency and event rate, its records set beside the server's
//! ([`compare`]), measured again while the machine was disturbed ([`infergate_model::selftest::Attempts`]).

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use anyhow::Context;

use super::server::ServerProcess;
use infergate_model::RequestRecord;
use infergate_model::config::{BenchConfig, Profile, Source, Target, TimingConfig};
use infergate_model::selftest::{
    Attempt, Attempts, Figures, Next, SelftestOutcome, SelftestRecord, Spread, sorted,
};
use infergate_sim::SimRecord;

/// The answer every request gets: its first token this long after it arrives (ms).
pub(crate) const TTFT_MS: f64 = 50.0;
/// Output tokens per request, one per chunk.
pub const MAX_TOKENS: u32 = 64;
/// The most measured requests a self-test sends (its records, and the server's, are held in
/// memory to be compared).
pub const MAX_REQUESTS: u64 = 100_000;

/// What to measure: the user's concurrency and event rate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Plan {
    pub concurrency: u32,
    /// Tokens per second across all streams.
    pub tokens_per_s: f64,
    /// Measured requests (after `concurrency` warmup requests).
    pub requests: u64,
}

impl Plan {
    /// The plan, or why it cannot be measured.
    pub fn new(concurrency: u32, tokens_per_s: f64, requests: u64) -> anyhow::Result<Plan> {
        anyhow::ensure!(concurrency >= 1, "--concurrency must be at least 1");
        anyhow::ensure!(
            tokens_per_s.is_finite() && tokens_per_s > 0.0,
            "--tokens-per-s must be a positive number, not {tokens_per_s}"
        );
        anyhow::ensure!(
            (1..=MAX_REQUESTS).contains(&requests),
            "--requests must be within 1..={MAX_REQUESTS}, not {requests}"
        );
        let plan = Plan { concurrency, tokens_per_s, requests };
        let itl = plan.itl_ms();
        anyhow::ensure!(
            (1.0..=10_000.0).contains(&itl),
            "{tokens_per_s} tokens/s across {concurrency} streams is one token every {itl:.3} ms per \
             stream; the known-answer server keeps gaps of 1 ms to 10 s (tokens/s within {} to {})",
            f64::from(concurrency) / 10.0,
            f64::from(concurrency) * 1000.0,
        );
        Ok(plan)
    }

    /// Each stream's inter-token gap (ms): the streams share the rate.
    pub fn itl_ms(&self) -> f64 {
        f64::from(self.concurrency) * 1000.0 / self.tokens_per_s
    }

    /// The server's timing: TTFT [`TTFT_MS`], one token per chunk every [`Plan::itl_ms`] with a
    /// uniform jitter of a tenth of it (mean 0, so the rate is kept; without it the streams of a
    /// deterministic server end, and restart, in lockstep).
    pub fn timing(&self) -> TimingConfig {
        let itl = self.itl_ms();
        TimingConfig {
            ttft_ms: TTFT_MS,
            itl_ms: itl,
            jitter_ms: itl / 10.0,
            tokens_per_chunk: 1,
            ..TimingConfig::default()
        }
    }

    /// The bench profile: closed loop at the concurrency, `concurrency` warmup requests.
    pub fn profile(&self) -> anyhow::Result<Profile> {
        let text = format!(
            "[profile.default]\nendpoint = \"chat\"\n[profile.default.load]\nconcurrency = {}\n\
             requests = {}\nwarmup_requests = {}\n[profile.default.workload]\n\
             input_lengths = [64, 128]\nrepeats = 16\nmax_tokens = {MAX_TOKENS}\n",
            self.concurrency, self.requests, self.concurrency
        );
        let cfg = BenchConfig::from_source(Source::new("selftest.toml", text))?;
        Ok(cfg.resolve("default", &[])?.profile)
    }
}

/// The bench's records beside the server's, and what follows from them.
pub struct Compared {
    pub figures: Figures,
    /// Measured requests compared.
    pub requests: u64,
    /// Sorted: the bench's TTFT error per request, |gap error| per gap, the server's lateness
    /// on every chunk and on each first chunk (ms).
    pub ttft_error: Vec<f64>,
    pub gap_error: Vec<f64>,
    pub late_all: Vec<f64>,
    pub late_first: Vec<f64>,
    /// The gaps between the server's hand-overs and between its due times, in request order.
    pub handed_gaps: Vec<f64>,
    pub due_gaps: Vec<f64>,
}

/// Each measured record of run `run_id` beside the server's record of the same request (the
/// bench sends `RUN_ID-ID` as its request id); an error names a request the server did not see.
pub fn pairs<'a>(
    run_id: &str,
    records: &'a [RequestRecord],
    sim: &'a [SimRecord],
) -> anyhow::Result<Vec<(&'a RequestRecord, &'a SimRecord)>> {
    let by_id: HashMap<&str, &SimRecord> =
        sim.iter().filter_map(|r| Some((r.request_id.as_deref()?, r))).collect();
    records
        .iter()
        .filter(|r| !r.warmup)
        .map(|r| {
            let id = format!("{run_id}-{}", r.id);
            let s = by_id
                .get(id.as_str())
                .with_context(|| format!("the known-answer server has no record of {id}"))?;
            Ok((r, *s))
        })
        .collect()
}

fn diffs(v: &[f64]) -> impl Iterator<Item = f64> + '_ {
    v.windows(2).map(|w| w[1] - w[0])
}

/// Set the bench's measured records of run `run_id` beside the server's records, request by
/// request and gap by gap. An error when a request failed, the server has no record of one, or
/// the bench saw another number of gaps than the server handed over.
pub fn compare(
    run_id: &str,
    records: &[RequestRecord],
    sim: &[SimRecord],
) -> anyhow::Result<Compared> {
    let pairs = pairs(run_id, records, sim)?;
    let (mut ttft_error, mut gap_error, mut late_all, mut late_first) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut handed_gaps, mut due_gaps) = (Vec::new(), Vec::new());
    for (r, s) in &pairs {
        let (Some(ttft), Some(first)) = (r.ttft_ms(), s.chunk_ms.first()) else {
            anyhow::bail!("request {} has no first token ({:?})", r.id, r.class);
        };
        anyhow::ensure!(
            s.chunk_ms.len() == s.chunk_due_ms.len(),
            "request {}: the server recorded {} hand-overs of {} due chunks",
            r.id,
            s.chunk_ms.len(),
            s.chunk_due_ms.len()
        );
        ttft_error.push(ttft - (first - s.arrival_ms));
        let gaps: Vec<f64> = diffs(&s.chunk_ms).collect();
        anyhow::ensure!(
            r.itl_ms.len() == gaps.len(),
            "request {}: the bench measured {} gaps, the server handed over {}",
            r.id,
            r.itl_ms.len(),
            gaps.len()
        );
        gap_error.extend(r.itl_ms.iter().zip(&gaps).map(|(m, g)| (m - g).abs()));
        handed_gaps.extend(gaps);
        due_gaps.extend(diffs(&s.chunk_due_ms));
        let late: Vec<f64> = s.chunk_ms.iter().zip(&s.chunk_due_ms).map(|(h, d)| h - d).collect();
        late_first.extend(late.first().copied());
        late_all.extend(late);
    }
    let (ttft_error, gap_error) = (sorted(ttft_error), sorted(gap_error));
    let (late_all, late_first) = (sorted(late_all), sorted(late_first));
    let none = |what: &str| format!("no {what} to compare: no measured request");
    let figures = Figures {
        ttft_error_ms: Spread::of(&ttft_error).with_context(|| none("TTFT"))?,
        gap_error_ms: Spread::of(&gap_error).with_context(|| none("gap"))?,
        server_late_ms: Spread::of(&late_all).with_context(|| none("chunk"))?,
    };
    let requests = pairs.len() as u64;
    Ok(Compared {
        figures,
        requests,
        ttft_error,
        gap_error,
        late_all,
        late_first,
        handed_gaps,
        due_gaps,
    })
}

/// How the known-answer server is started: a program that runs [`super::server::serve`] with
/// the timing (as JSON) and the open files it needs.
pub(crate) type ServerCommand<'a> = &'a dyn Fn(&TimingConfig, u32) -> Command;

/// One measurement: the server started, the bench run against it into `dir`, the two compared.
pub async fn measure(
    plan: &Plan,
    server: ServerCommand<'_>,
    dir: &Path,
    run_id: &str,
) -> anyhow::Result<Compared> {
    let timing = plan.timing();
    let process = ServerProcess::start(server(&timing, plan.concurrency))?;
    let target = Target::at(process.base_url()).with_model(process.model());
    let spec = crate::runner::RunSpec::quiet(
        plan.profile()?,
        ("known-answer".into(), target),
        dir.to_path_buf(),
        run_id,
    );
    let out = crate::runner::run(spec, crate::runner::RunControl::default()).await;
    let sim = process.finish().await?;
    let out = out.context("the bench's run against the known-answer server")?;
    let s = &out.summary;
    anyhow::ensure!(
        s.requests.ok == plan.requests,
        "{} of {} requests to the known-answer server succeeded ({:?}); see {}",
        s.requests.ok,
        plan.requests,
        s.requests.by_class,
        out.dir.display()
    );
    let read = infergate_model::rundir::read_records(&out.dir)?;
    compare(run_id, &read.records, &sim)
}

/// What [`run`] found: the figures of the attempt that decided, and how it ended.
pub struct Outcome {
    pub verdict: SelftestOutcome,
    pub figures: Figures,
    pub attempts: u32,
    /// Why it failed or stalled, in words (empty when within the bounds).
    pub message: String,
}

impl Outcome {
    /// The record to write: these figures, `plan`, and the host and time given.
    pub fn record(&self, plan: &Plan, fingerprint: String, load: Option<f64>) -> SelftestRecord {
        SelftestRecord {
            at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            environment_fingerprint: fingerprint,
            concurrency: plan.concurrency,
            tokens_per_s: plan.tokens_per_s,
            itl_ms: plan.itl_ms(),
            requests: plan.requests,
            attempts: self.attempts,
            load_avg_1m: load,
            verdict: self.verdict,
            figures: self.figures,
        }
    }
}

/// The self-test: measured until an attempt holds the bounds, fails them on a quiet machine
/// (the bench's error), or every one of [`infergate_model::selftest::ATTEMPTS`] was disturbed. Each attempt's run
/// directory is `work/attempt-N` (replaced); `progress` gets a line per attempt.
pub async fn run(
    plan: &Plan,
    server: ServerCommand<'_>,
    work: &Path,
    progress: &mut dyn FnMut(&str),
) -> anyhow::Result<Outcome> {
    let mut attempts = Attempts::default();
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ");
    let mut n = 0;
    loop {
        n += 1;
        let dir = work.join(format!("attempt-{n}"));
        if dir.exists() {
            std::fs::remove_dir_all(&dir)
                .with_context(|| format!("cannot remove {}", dir.display()))?;
        }
        let before = infergate_model::selftest::cpu_ticks();
        let c = measure(plan, server, &dir, &format!("selftest-{stamp}-{n}")).await?;
        let after = infergate_model::selftest::cpu_ticks();
        let quiet =
            c.figures.server_late_ms.p99 <= infergate_model::selftest::QUIET_SERVER_LATE_P99_MS;
        // The bench's own bounds: its error is measured against what the server handed over, so
        // a late server leaves the figures valid (the lateness is printed beside them).
        let a = Attempt { quiet, diag: c.figures.line(), failures: c.figures.broken_bounds() };
        let (next, line) = attempts.judge(n, &a, before, after);
        progress(&line);
        let (verdict, message) = match next {
            Next::Held => (SelftestOutcome::WithinBounds, String::new()),
            Next::Failed(m) => (SelftestOutcome::BenchError, m),
            Next::Stalled(m) => (SelftestOutcome::MachineStalled, m),
            Next::Again => continue,
        };
        // The last attempt is never `Again`.
        return Ok(Outcome { verdict, figures: c.figures, attempts: n as u32, message });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_shares_the_rate_among_the_streams() {
        let p = Plan::new(100, 10_000.0, 1000).unwrap();
        assert_eq!((p.itl_ms(), p.timing().jitter_ms, p.timing().tokens_per_chunk), (10.0, 1.0, 1));
        assert_eq!(Plan::new(1000, 10_000.0, 1).unwrap().itl_ms(), 100.0);
        let profile = p.profile().unwrap();
        assert_eq!((profile.load.concurrency, profile.load.requests), (100, Some(1000)));
        let e = Plan::new(1000, 2_000_000.0, 10).unwrap_err().to_string();
        assert!(e.contains("one token every 0.500 ms per stream"), "{e}");
        assert!(e.contains("tokens/s within 100 to 1000000"), "{e}");
        assert!(Plan::new(0, 100.0, 10).is_err());
        assert!(Plan::new(1, f64::NAN, 10).is_err());
        assert!(Plan::new(1, 100.0, 0).is_err() && Plan::new(1, 100.0, MAX_REQUESTS + 1).is_err());
    }

    fn sim(run: &str, id: u64, arrival: f64, due: &[f64], handed: &[f64]) -> SimRecord {
        SimRecord {
            request_id: Some(format!("{run}-{id}")),
            arrival_ms: arrival,
            chunk_due_ms: due.to_vec(),
            chunk_ms: handed.to_vec(),
            ..SimRecord::default()
        }
    }

    #[test]
    fn the_benchs_records_are_set_beside_the_servers_request_by_request() {
        // Request 1: the server took 50.2 ms to its first hand-over (0.2 late), the bench saw
        // 50.5 from its intended send: a TTFT error of 0.3. Its gaps were handed over 10.0 and
        // 9.8 apart and measured 10.1 and 9.8.
        let mut r1 = RequestRecord::ok(1, 0.0, 50.5, vec![10.1, 9.8]);
        let s1 = sim("run", 1, 100.0, &[150.0, 160.0, 170.0], &[150.2, 160.2, 170.0]);
        let r2 = RequestRecord::ok(2, 0.0, 50.1, vec![10.0, 10.0]);
        let s2 = sim("run", 2, 200.0, &[250.0, 260.0, 270.0], &[250.0, 260.0, 270.0]);
        let warm = RequestRecord { warmup: true, ..RequestRecord::ok(0, 0.0, 1.0, vec![]) };
        let c = compare("run", &[warm, r1.clone(), r2.clone()], &[s1.clone(), s2.clone()]).unwrap();
        assert_eq!(c.requests, 2, "the warmup request is not compared");
        let close = |a: &[f64], b: &[f64]| {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-9)
        };
        assert!(close(&c.ttft_error, &[0.1, 0.3]), "{:?}", c.ttft_error);
        assert!(close(&c.gap_error, &[0.0, 0.0, 0.0, 0.1]), "{:?}", c.gap_error);
        assert!(close(&c.late_all, &[0.0, 0.0, 0.0, 0.0, 0.2, 0.2]), "{:?}", c.late_all);
        assert!(close(&c.late_first, &[0.0, 0.2]), "{:?}", c.late_first);
        assert_eq!((c.figures.ttft_error_ms.n, c.figures.gap_error_ms.n), (2, 4));
        // A request the server did not see, or whose gaps the bench counted otherwise, is an
        // error, not a figure.
        let e =
            compare("other", std::slice::from_ref(&r2), &[s1.clone(), s2.clone()]).err().unwrap();
        assert!(e.to_string().contains("no record of other-2"), "{e}");
        r1.itl_ms.pop();
        let e = compare("run", &[r1], &[s1, s2]).err().unwrap();
        assert!(e.to_string().contains("the bench measured 1 gaps, the server handed over 2"));
    }
}
