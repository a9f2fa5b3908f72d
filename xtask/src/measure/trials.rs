//! `bench --trials N`: the profile measured N times, a trial set. Each trial is an ordinary run
//! directory (`trial-01`, ...) inside the set's directory (`--out`), and `trials.json` beside
//! them is rewritten atomically after every trial, so an interrupted set (Ctrl-C: exit 130)
//! lists what it measured. With the simulator's seeded noise each trial draws its own seed
//! ([`infergate_model::config::NoiseConfig::for_trial`]).
//!
//! `trials.json` holds, per gated metric (those the live thresholds name for the profile and
//! [`infergate_model::trials::default_metrics`]), each trial's value and the estimate with its interval
//! at `--confidence`. With `--gate` the set is gated; with `--until-decided --max-trials K`
//! trials are added until every blocking threshold is decided ([`until_decided`], which
//! `bench trials SET --until-decided` uses too).
//!
//! `--warmup-trials N` (`load.warmup_trials`) measures N whole trials first, `warmup-01`, ...,
//! listed in `trials.json` with their headline metrics and never estimated or gated; trials
//! added to an existing set (`bench trials`) run none (the engine is warm). When trial
//! 1 looks like a cold start ([`infergate_model::trials::cold_start`]), `trials.json` and the console say
//! so; the estimates are not changed.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use bench::runner::{self, RunControl, StopSignals};
use infergate_model::metric::MetricPath;
use infergate_model::stats::{self, Options};
use infergate_model::summary::RunStatus;
use infergate_model::trials::{
    FORMAT_VERSION, MetricEstimate, TrialEntry, TrialSet, TrialsFile, default_metrics,
    headline_metrics, is_trial_set,
};

use crate::console::ConsoleTable;
use crate::exit::Status;
use crate::measure;
use crate::plan::{BenchPlan, GateSettings, TrialPlan};
use crate::text::{BLANK, num};
use crate::thresholds::{self, GATE_FILE, GateReport, Thresholds, render};

/// The directory name of trial `n` (from 1).
pub(crate) fn trial_dir_name(n: usize) -> String {
    format!("trial-{n:02}")
}

/// The directory name of warmup trial `k` (from 1).
pub(crate) fn warmup_dir_name(k: usize) -> String {
    format!("warmup-{k:02}")
}

/// Warmup trial `k` draws the simulator's noise with seed `WARMUP_SEEDS + k`, apart from the
/// trials' (their number).
const WARMUP_SEEDS: u64 = 1 << 32;

/// A run's line in `trials.json`.
fn entry_of(dir: String, s: &infergate_model::summary::Summary) -> TrialEntry {
    TrialEntry {
        dir,
        run_id: s.run_id.clone(),
        status: s.status,
        requests: s.requests.total,
        ok: s.requests.ok,
        host_busy: s.environment.noise.as_ref().is_some_and(|n| n.busy),
        headline: Default::default(),
    }
}

/// The metrics a set estimates: the documented defaults, then every metric a threshold for
/// `profile` names, whatever environment it holds for (the set's is known once it ran; the
/// gate then selects by it).
pub(crate) fn gated_metrics(thresholds: Option<&Thresholds>, profile: &str) -> Vec<MetricPath> {
    let mut out: Vec<MetricPath> = default_metrics().to_vec();
    if let Some(t) = thresholds {
        for th in thresholds::evaluate::select(t, profile, None).applying {
            if !out.contains(&th.metric) {
                out.push(th.metric);
            }
        }
    }
    out
}

/// What adding a trial came to.
#[derive(Debug, PartialEq)]
pub enum Added {
    /// The trial ran to its end (complete or failed).
    Measured,
    /// Ctrl-C or SIGTERM: the set stops; `trials.json` lists what was measured.
    Interrupted,
}

/// A trial set being measured: its directory, its index, and the plan each trial runs.
pub(crate) struct SetWriter<'a> {
    plan: &'a BenchPlan,
    pub dir: PathBuf,
    pub index: TrialsFile,
    metrics: Vec<MetricPath>,
}

impl<'a> SetWriter<'a> {
    /// A new set in the plan's output directory (refused when it already holds one).
    pub fn create(plan: &'a BenchPlan, tp: &TrialPlan) -> anyhow::Result<SetWriter<'a>> {
        let dir = plan.out_dir.clone();
        if is_trial_set(&dir) || dir.join(infergate_model::rundir::SUMMARY_FILE).exists() {
            anyhow::bail!(
                "{} already holds a trial set or a run; choose another --out",
                dir.display()
            );
        }
        std::fs::create_dir_all(&dir).with_context(|| {
            format!("cannot create the trial set's directory {}", dir.display())
        })?;
        // A user or password in the target's URL is written to no file: the set is then gated
        // as it is, and trials are not added to it later.
        let kept = !tp.request.holds_credentials();
        let mut notes = Vec::new();
        if !kept {
            notes.push(
                "trials.json keeps no request: the target's URL holds a user or password, which \
                 no file keeps, so `bench trials --until-decided` cannot add trials to this set \
                 (give the key by its variable, --api-key-env)"
                    .to_string(),
            );
        }
        let index = TrialsFile {
            format_version: FORMAT_VERSION,
            run_id: plan.run_id.clone(),
            profile: plan.profile.name.clone(),
            request: kept.then(|| tp.request.clone()),
            planned: tp.count,
            cooldown_s: tp.cooldown_s,
            confidence: tp.confidence,
            trials: Vec::new(),
            metrics: Default::default(),
            notes,
            warmup: Vec::new(),
            cold_start: None,
        };
        Ok(SetWriter { plan, dir, index, metrics: metrics_of(plan) })
    }

    /// An existing set, to add trials to (`bench trials SET --until-decided`).
    pub fn resume(plan: &'a BenchPlan, dir: PathBuf, index: TrialsFile) -> SetWriter<'a> {
        SetWriter { plan, dir, index, metrics: metrics_of(plan) }
    }

    /// Measure warmup trial `k` (from 1) into `warmup-NN`, then rewrite `trials.json`: listed
    /// with its headline metrics, never part of an estimate.
    pub(crate) fn add_warmup(&mut self) -> anyhow::Result<Added> {
        let k = self.index.warmup.len() + 1;
        let label = format!("warmup trial {k}");
        let name = warmup_dir_name(k);
        let run_id = format!("{}-w{k:02}", self.index.run_id);
        let Some(outcome) = self.measure(&label, name.clone(), run_id, WARMUP_SEEDS + k as u64)?
        else {
            return Ok(Added::Interrupted);
        };
        let s = &outcome.summary;
        let mut entry = entry_of(name, s);
        entry.headline = headline_metrics().iter().map(|&m| (m.to_string(), s.metric(m))).collect();
        self.index.warmup.push(entry);
        if !self.plan.quiet {
            let ttft =
                s.metric(MetricPath::named("metrics.ttft_ms.p99")).map_or(BLANK.to_string(), num);
            eprintln!(
                "{label}: {} requests, {} ok, TTFT P99 {ttft} ms, {} (not part of the estimates)",
                s.requests.total,
                s.requests.ok,
                outcome.dir.display()
            );
        }
        self.finish_one(&label, s.status, &outcome.dir, s.notes.last(), false)
    }

    /// Measure one more trial, then rewrite `trials.json`.
    pub(crate) fn add_trial(&mut self) -> anyhow::Result<Added> {
        let n = self.index.trials.len() + 1;
        let label = format!("trial {n}");
        let name = trial_dir_name(n);
        let run_id = format!("{}-t{n:02}", self.index.run_id);
        let Some(outcome) = self.measure(&label, name.clone(), run_id, n as u64)? else {
            return Ok(Added::Interrupted);
        };
        let s = &outcome.summary;
        self.index.trials.push(entry_of(name, s));
        if !self.plan.quiet {
            eprintln!(
                "trial {n}: {} requests, {} ok, {}",
                s.requests.total,
                s.requests.ok,
                outcome.dir.display()
            );
        }
        let last = n as u32 >= self.index.planned;
        self.finish_one(&label, s.status, &outcome.dir, s.notes.last(), last)
    }

    /// The cooldown (when anything was measured before), then one run of the plan into
    /// `name`, its noise seeded by `seed`. `None`: interrupted before its load, `trials.json`
    /// rewritten.
    fn measure(
        &mut self,
        label: &str,
        name: String,
        run_id: String,
        seed: u64,
    ) -> anyhow::Result<Option<runner::RunOutcome>> {
        let before = self.index.trials.len() + self.index.warmup.len();
        if before > 0 && self.index.cooldown_s > 0.0 && cooldown(self.index.cooldown_s)? {
            eprintln!("interrupted during the cooldown before {label}");
            self.index.notes.push(format!("interrupted during the cooldown before {label}"));
            self.write(true)?;
            return Ok(None);
        }
        let mut profile = self.plan.profile.clone();
        // The set runs the warmup trials; each run is an ordinary run, its scenario that of
        // the other trials (a record compares the load sections of its rows).
        profile.profile.load.warmup_trials = 0;
        let noise = &profile.profile.sim.noise;
        if noise.is_on() {
            profile.profile.sim.noise = noise.for_trial(seed);
        }
        let mut spec = self.plan.run_spec(profile, self.dir.join(&name), run_id);
        spec.invocation = self.plan.invocation(Some(label.to_string()));
        spec.isolation = Some(self.isolate()?);
        if let Some(iso) = spec.isolation.as_ref().filter(|i| !i.done()) {
            eprintln!("note: {label}: {}", iso.text());
        }
        let result = measure::runtime()?.block_on(runner::run(spec, RunControl::default()));
        match result {
            Ok(outcome) => Ok(Some(outcome)),
            Err(e @ runner::RunError::Interrupted { .. }) => {
                eprintln!("{label}: {e}");
                self.index.notes.push(format!("{label} was interrupted before its load"));
                self.write(true)?;
                Ok(None)
            }
            Err(e) => {
                self.write(true)?;
                Err(anyhow::Error::new(e).context(format!("{label} could not run")))
            }
        }
    }

    /// Keep what earlier runs left out of the next (`bench::runner::isolation`): the embedded
    /// simulator is built anew for every run; a target's caches are reset before every run
    /// (the first too: the engine may have served other runs), where the engine offers it.
    fn isolate(&self) -> anyhow::Result<infergate_model::summary::Isolation> {
        Ok(measure::runtime()?.block_on(runner::isolation::isolate(&self.plan.profile)))
    }

    /// After a run: rewrite `trials.json` and say how the set goes on by the run's status.
    fn finish_one(
        &mut self,
        label: &str,
        status: RunStatus,
        dir: &std::path::Path,
        last_note: Option<&String>,
        last: bool,
    ) -> anyhow::Result<Added> {
        match status {
            RunStatus::Interrupted => {
                self.write(true)?;
                Ok(Added::Interrupted)
            }
            RunStatus::Aborted => {
                self.write(true)?;
                let why = last_note.cloned().unwrap_or_default();
                anyhow::bail!("{label} was aborted: {why}; see {}", dir.display())
            }
            RunStatus::Complete | RunStatus::Failed | RunStatus::Oversaturated => {
                self.write(last)?;
                Ok(Added::Measured)
            }
        }
    }

    /// Recompute the estimates and rewrite `trials.json` atomically. A single trial's request
    /// bootstrap is computed only when the set ends there (`last`); until then its metrics are
    /// each trial's value, with the estimate blank.
    fn write(&mut self, last: bool) -> anyhow::Result<()> {
        let names: &[MetricPath] = &self.metrics;
        let metrics: BTreeMap<MetricPath, MetricEstimate> = if self.index.trials.is_empty() {
            Default::default()
        } else {
            let set = TrialSet::with_index(&self.dir, self.index.clone())
                .context("cannot read the trials back")?;
            if set.trials.len() == 1 && !last {
                let why = format!(
                    "1 of {} trials measured: the estimates follow the second",
                    self.index.planned
                );
                names
                    .iter()
                    .map(|&m| {
                        let per_trial = set.per_trial(m);
                        (m, MetricEstimate::blank(per_trial, why.as_str()))
                    })
                    .collect()
            } else {
                set.estimates(names, options(self.index.confidence))
            }
        };
        self.index.cold_start = match self.index.trials.is_empty() {
            true => None,
            false => infergate_model::trials::cold_start(
                metrics.iter().map(|(&m, e)| (m, e.per_trial.as_slice())),
            ),
        };
        self.index.metrics = metrics.into_iter().map(|(m, e)| (m.to_string(), e)).collect();
        self.index.write(&self.dir).context("cannot write trials.json")?;
        Ok(())
    }

    /// The set as measured so far.
    pub fn load(&self) -> anyhow::Result<TrialSet> {
        TrialSet::load(&self.dir).context("cannot read the trial set back")
    }
}

/// The estimation options at `confidence`.
fn options(confidence: f64) -> Options {
    Options { resamples: thresholds::evaluate::GATE_RESAMPLES, ..Options::default() }
        .with_confidence(confidence)
}

/// The metrics a plan's sets estimate: the live thresholds for its profile (the `--gate`
/// file, else `thresholds/gate.toml` when it exists) and the defaults.
fn metrics_of(plan: &BenchPlan) -> Vec<MetricPath> {
    let profile = &plan.profile.name;
    if let Some(g) = &plan.gate {
        return gated_metrics(Some(&g.thresholds), profile);
    }
    let path = plan.root.join(GATE_FILE);
    let file = path.exists().then(|| Thresholds::load(&path));
    match file {
        Some(Ok(t)) => gated_metrics(Some(&t), profile),
        Some(Err(e)) => {
            eprintln!(
                "warning: {} cannot be read ({e:#}); trials.json estimates the default metrics only",
                path.display()
            );
            gated_metrics(None, profile)
        }
        None => gated_metrics(None, profile),
    }
}

/// Wait `seconds` between trials; `true` when Ctrl-C or SIGTERM came meanwhile.
fn cooldown(seconds: f64) -> anyhow::Result<bool> {
    measure::runtime()?.block_on(async {
        let mut signals = StopSignals::listen();
        Ok(tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs_f64(seconds)) => false,
            _ = signals.next() => true,
        })
    })
}

/// `bench --trials N`: measure the set, print its estimates, gate it when asked.
pub fn run(plan: &BenchPlan, tp: &TrialPlan) -> anyhow::Result<Status> {
    let mut w = SetWriter::create(plan, tp)?;
    for _ in 0..tp.warmup {
        if w.add_warmup()? == Added::Interrupted {
            println!("trial set: {} (interrupted during the warmup trials)", w.dir.display());
            return Ok(Status::Interrupted);
        }
    }
    for _ in 0..tp.count {
        if w.add_trial()? == Added::Interrupted {
            println!("trial set: {} ({} trials measured)", w.dir.display(), w.index.trials.len());
            return Ok(Status::Interrupted);
        }
    }
    println!("{}", render_estimates(&w.index));
    if let Some(cold) = &w.index.cold_start {
        eprintln!("note: {}", cold.note);
    }
    println!("trial set: {}", w.dir.display());
    let all_failed = w.index.trials.iter().all(|t| t.status == RunStatus::Failed);
    if all_failed {
        eprintln!(
            "error: no measured request succeeded in any trial; see each trial's requests.jsonl"
        );
        return Ok(Status::PolicyViolated);
    }
    let Some(gate) = &plan.gate else {
        if plan.record_history {
            let set = w.load()?;
            let note = crate::history_store::gating::append_set(
                &plan.root,
                infergate_model::history::EntryKind::Trials,
                &set,
                infergate_model::trials::default_metrics(),
            );
            eprintln!("note: {note}");
        }
        return Ok(Status::Success);
    };
    let (status, report) = match tp.until_decided {
        Some(max) => until_decided(&mut w, gate, max)?,
        None => {
            let set = w.load()?;
            let report = crate::history_store::gating::gate_with_history(
                &plan.root,
                &set,
                &gate.thresholds,
                &gate.options,
            );
            (report.status(), Some(report))
        }
    };
    if let Some(report) = report {
        thresholds::print_report(&report, gate.github);
    }
    crate::thresholds::budgets_note(&gate.thresholds, std::iter::once(plan.profile.name.as_str()));
    Ok(status)
}

/// Add trials to `w`'s set until every blocking threshold is decided or the set holds
/// `max_trials`. Look k of at most K is made at `confidence_at_look(k, K, 1 - confidence)`
/// (Bonferroni); the looks start at 2 trials (a t interval needs two). Returns the status and
/// the last look's report (`None` when interrupted before any look).
pub(crate) fn until_decided(
    w: &mut SetWriter<'_>,
    gate: &GateSettings,
    max_trials: u32,
) -> anyhow::Result<(Status, Option<GateReport>)> {
    while w.index.trials.len() < 2 && (w.index.trials.len() as u32) < max_trials {
        if w.add_trial()? == Added::Interrupted {
            return Ok((Status::Interrupted, None));
        }
    }
    let first = w.index.trials.len() as u32;
    let looks = max_trials.saturating_sub(first) + 1;
    let alpha = 1.0 - gate.options.confidence;
    let mut look = 1;
    loop {
        let confidence = stats::confidence_at_look(look, looks, alpha)
            .map_err(|e| anyhow::anyhow!("--until-decided: {e}"))?;
        let opts = thresholds::GateOptions { confidence, ..gate.options };
        let report = thresholds::evaluate(&w.load()?, &gate.thresholds, &opts);
        let n = w.index.trials.len();
        let status = report.status();
        if status != Status::Inconclusive || n as u32 >= max_trials {
            println!(
                "until decided: {} after {n} trials ({look} of at most {looks} looks, each at \
                 {}% confidence, Bonferroni)",
                match status {
                    Status::Inconclusive => "still inconclusive",
                    // More trials cannot help: no record covers the set's environment.
                    Status::NoRecord => "not decided (no record for this environment)",
                    _ => "decided",
                },
                num(confidence * 100.0)
            );
            return Ok((status, Some(report)));
        }
        if w.add_trial()? == Added::Interrupted {
            return Ok((Status::Interrupted, Some(report)));
        }
        look += 1;
    }
}

/// The console table of a set's estimates: metric, estimate [lo, hi], n and method.
pub(crate) fn render_estimates(index: &TrialsFile) -> String {
    let mut table = ConsoleTable::markdown([
        "Metric".to_string(),
        format!("Estimate [{}% CI]", num(index.confidence * 100.0)),
        "n, method".to_string(),
        "Per trial".to_string(),
    ]);
    for (metric, m) in &index.metrics {
        let unit = MetricPath::parse(metric).map_or("", MetricPath::unit);
        let per_trial: Vec<String> =
            m.per_trial.iter().map(|v| v.map_or(BLANK.to_string(), num)).collect();
        let (estimate, basis) = match &m.estimate {
            Some(e) => (render::estimate_text(e, unit), render::basis_text(e)),
            None => (BLANK.to_string(), m.blank.clone().unwrap_or_default()),
        };
        table.row([metric.clone(), estimate, basis, per_trial.join(", ")]);
    }
    table.to_string()
}
