//! `bench --trials N`: the profile measured N times, a trial set. Each trial is an ordinary run
//! directory (`trial-01`, ...) inside the set's directory (`--out`), and `trials.json` beside
//! them is rewritten atomically after every trial, so an interrupted set (Ctrl-C: exit 130)
//! lists what it measured. With the simulator's seeded noise each trial draws its own seed
//! ([`bench::config::NoiseConfig::for_trial`]).
//!
//! `trials.json` holds, per gated metric (those the live thresholds name for the profile and
//! [`bench::trials::DEFAULT_METRICS`]), each trial's value and the estimate with its interval
//! at `--confidence`. With `--gate` the set is gated; with `--until-decided --max-trials K`
//! trials are added until every blocking threshold is decided ([`until_decided`], which
//! `gate --until-decided` uses too).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use bench::runner::{self, RunControl, StopSignals};
use bench::stats::{self, Options};
use bench::summary::RunStatus;
use bench::trials::{
    DEFAULT_METRICS, FORMAT_VERSION, MetricEstimate, TrialEntry, TrialSet, TrialsFile, is_trial_set,
};
use comfy_table::{Table, presets};

use crate::exit::Status;
use crate::measure;
use crate::plan::{BenchPlan, GateSettings, TrialPlan};
use crate::text::{BLANK, num};
use crate::thresholds::{self, GATE_FILE, GateReport, Thresholds, render};

/// The directory name of trial `n` (from 1).
pub fn trial_dir_name(n: usize) -> String {
    format!("trial-{n:02}")
}

/// The metrics a set estimates: the documented defaults, then every metric a threshold for
/// `profile` names.
pub fn gated_metrics(thresholds: Option<&Thresholds>, profile: &str) -> Vec<String> {
    let mut out: Vec<String> = DEFAULT_METRICS.iter().map(|m| m.to_string()).collect();
    if let Some(t) = thresholds {
        for th in thresholds::evaluate::applying(t, profile).0 {
            if !out.contains(&th.metric) {
                out.push(th.metric.clone());
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
pub struct SetWriter<'a> {
    plan: &'a BenchPlan,
    pub dir: PathBuf,
    pub index: TrialsFile,
    metrics: Vec<String>,
}

impl<'a> SetWriter<'a> {
    /// A new set in the plan's output directory (refused when it already holds one).
    pub fn create(plan: &'a BenchPlan, tp: &TrialPlan) -> anyhow::Result<SetWriter<'a>> {
        let dir = plan.out_dir.clone();
        if is_trial_set(&dir) || dir.join(bench::rundir::SUMMARY_FILE).exists() {
            anyhow::bail!(
                "{} already holds a trial set or a run; choose another --out",
                dir.display()
            );
        }
        std::fs::create_dir_all(&dir).with_context(|| {
            format!("cannot create the trial set's directory {}", dir.display())
        })?;
        let index = TrialsFile {
            format_version: FORMAT_VERSION,
            run_id: plan.run_id.clone(),
            profile: plan.profile.name.clone(),
            bench_args: tp.bench_args.clone(),
            planned: tp.count,
            cooldown_s: tp.cooldown_s,
            confidence: tp.confidence,
            trials: Vec::new(),
            metrics: Default::default(),
            notes: Vec::new(),
        };
        Ok(SetWriter { plan, dir, index, metrics: metrics_of(plan) })
    }

    /// An existing set, to add trials to (`gate --until-decided`).
    pub fn resume(plan: &'a BenchPlan, dir: PathBuf, index: TrialsFile) -> SetWriter<'a> {
        SetWriter { plan, dir, index, metrics: metrics_of(plan) }
    }

    /// Measure one more trial, then rewrite `trials.json`.
    pub fn add_trial(&mut self) -> anyhow::Result<Added> {
        let n = self.index.trials.len() + 1;
        if n > 1 && self.index.cooldown_s > 0.0 && cooldown(self.index.cooldown_s)? {
            eprintln!("interrupted during the cooldown before trial {n}");
            self.index.notes.push(format!("interrupted during the cooldown before trial {n}"));
            self.write(true)?;
            return Ok(Added::Interrupted);
        }
        let mut profile = self.plan.profile.clone();
        let noise = &profile.profile.sim.noise;
        if noise.is_on() {
            profile.profile.sim.noise = noise.for_trial(n as u64);
        }
        let name = trial_dir_name(n);
        let run_id = format!("{}-t{n:02}", self.index.run_id);
        let mut spec = self.plan.run_spec(profile, self.dir.join(&name), run_id);
        spec.invocation = self.plan.invocation(Some(format!("trial {n}")));
        let result = measure::runtime()?.block_on(runner::run(spec, RunControl::default()));
        let outcome = match result {
            Ok(outcome) => outcome,
            Err(e @ runner::RunError::Interrupted { .. }) => {
                eprintln!("trial {n}: {e}");
                self.index.notes.push(format!("trial {n} was interrupted before its load"));
                self.write(true)?;
                return Ok(Added::Interrupted);
            }
            Err(e) => {
                self.write(true)?;
                return Err(anyhow::Error::new(e).context(format!("trial {n} could not run")));
            }
        };
        let s = &outcome.summary;
        self.index.trials.push(TrialEntry {
            dir: name,
            run_id: s.run_id.clone(),
            status: s.status,
            requests: s.requests.total,
            ok: s.requests.ok,
            host_busy: s.environment.noise.as_ref().is_some_and(|n| n.busy),
        });
        if !self.plan.quiet {
            eprintln!(
                "trial {n}: {} requests, {} ok, {}",
                s.requests.total,
                s.requests.ok,
                outcome.dir.display()
            );
        }
        match s.status {
            RunStatus::Interrupted => {
                self.write(true)?;
                Ok(Added::Interrupted)
            }
            RunStatus::Aborted => {
                self.write(true)?;
                let why = s.notes.last().cloned().unwrap_or_default();
                anyhow::bail!("trial {n} was aborted: {why}; see {}", outcome.dir.display())
            }
            RunStatus::Complete | RunStatus::Failed => {
                self.write(n as u32 >= self.index.planned)?;
                Ok(Added::Measured)
            }
        }
    }

    /// Recompute the estimates and rewrite `trials.json` atomically. A single trial's request
    /// bootstrap is computed only when the set ends there (`last`); until then its metrics are
    /// each trial's value, with the estimate blank.
    fn write(&mut self, last: bool) -> anyhow::Result<()> {
        let names: Vec<&str> = self.metrics.iter().map(String::as_str).collect();
        self.index.metrics = if self.index.trials.is_empty() {
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
                    .map(|m| {
                        let per_trial = set.per_trial(m);
                        (m.to_string(), MetricEstimate::blank(per_trial, why.as_str()))
                    })
                    .collect()
            } else {
                set.estimates(&names, options(self.index.confidence))
            }
        };
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
fn metrics_of(plan: &BenchPlan) -> Vec<String> {
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
    for _ in 0..tp.count {
        if w.add_trial()? == Added::Interrupted {
            println!("trial set: {} ({} trials measured)", w.dir.display(), w.index.trials.len());
            return Ok(Status::Interrupted);
        }
    }
    println!("{}", render_estimates(&w.index));
    println!("trial set: {}", w.dir.display());
    let all_failed = w.index.trials.iter().all(|t| t.status == RunStatus::Failed);
    if all_failed {
        eprintln!(
            "error: no measured request succeeded in any trial; see each trial's requests.jsonl"
        );
        return Ok(Status::PolicyViolated);
    }
    let Some(gate) = &plan.gate else { return Ok(Status::Success) };
    let (status, report) = match tp.until_decided {
        Some(max) => until_decided(&mut w, gate, max)?,
        None => {
            let set = w.load()?;
            let report = thresholds::evaluate(&set, &gate.thresholds, &gate.options);
            (report.status(), Some(report))
        }
    };
    if let Some(report) = report {
        thresholds::print_report(&report, gate.github);
    }
    Ok(status)
}

/// Add trials to `w`'s set until every blocking threshold is decided or the set holds
/// `max_trials`. Look k of at most K is made at `confidence_at_look(k, K, 1 - confidence)`
/// (Bonferroni); the looks start at 2 trials (a t interval needs two). Returns the status and
/// the last look's report (`None` when interrupted before any look).
pub fn until_decided(
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
                if status == Status::Inconclusive { "still inconclusive" } else { "decided" },
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
pub fn render_estimates(index: &TrialsFile) -> String {
    let mut table = Table::new();
    table.load_style(presets::ASCII_MARKDOWN);
    table.set_header([
        "Metric".to_string(),
        format!("Estimate [{}% CI]", num(index.confidence * 100.0)),
        "n, method".to_string(),
        "Per trial".to_string(),
    ]);
    for (metric, m) in &index.metrics {
        let unit = bench::summary::metric_def(metric).map_or("", |d| d.unit);
        let per_trial: Vec<String> =
            m.per_trial.iter().map(|v| v.map_or(BLANK.to_string(), num)).collect();
        let (estimate, basis) = match &m.estimate {
            Some(e) => (render::estimate_text(e, unit), render::basis_text(e)),
            None => (BLANK.to_string(), m.blank.clone().unwrap_or_default()),
        };
        table.add_row([metric.clone(), estimate, basis, per_trial.join(", ")]);
    }
    table.to_string()
}
