//! `cargo xtask gate PATH`: a run or a trial set against the thresholds of the live decision
//! records.
//!
//! Every threshold is decided from its metric's estimate and confidence interval (a single run
//! is a set of one): pass, fail or inconclusive ([`crate::thresholds::evaluate`]). A metric
//! the run did not measure is a failure, not a pass. Failures of `block` thresholds fail the
//! gate (exit 1); an inconclusive `block` threshold with no failure leaves it undecided (exit
//! 3); `warn` thresholds are reported only. The gate measures nothing: `bench trials SET
//! --until-decided --max-trials K` adds trials to a trial set until every blocking threshold is
//! decided, and `bench ab BASE_REV` measures the base revision and the working tree side by
//! side (`crate::measure::actions`). A set whose trial 1 looks like a cold start gets a note
//! under the report.
//!
//! A strategy comparison's directory (`comparison.json`) gates every strategy's run, a sweep's
//! directory (`sweep.json`) every stage ([`crate::thresholds::runs`]): exit 1 when any fails.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use infergate_model::strategy_compare::{COMPARISON_FILE, StrategyComparison};
use infergate_model::sweep::{SWEEP_FILE, SweepSummary};
use infergate_model::trials::TrialSet;
use xshell::Shell;

use crate::decide_flags::DecideFlags;
use crate::exit::Status;
use crate::text::join_clean;
use crate::thresholds::report_file::{GateFile, GateRun};
use crate::thresholds::{GateOptions, GateVerdicts, Thresholds};
use crate::thresholds::{evaluate, print_report};

/// `cargo xtask gate PATH`: gate a measured run or trial set.
#[derive(Debug, Args)]
pub struct GateCmd {
    /// A bench run directory or its summary.json, a trial set's directory (trials.json); a
    /// strategy comparison's directory (every strategy's run) or a sweep's directory (every
    /// stage).
    #[arg(value_name = "PATH", required = true)]
    pub run: Option<PathBuf>,
    #[command(flatten)]
    pub decide: DecideFlags,
    /// Also write the verdicts as JSON to FILE (relative to the repository root; `-`:
    /// standard output): the exit status and every run's checks (`gate.json`'s format,
    /// docs/mcp.md).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Neither read nor append the noise history (`refs/infergate/history`).
    #[arg(long)]
    pub no_history: bool,
}

impl GateCmd {
    pub fn run(self, sh: &Shell) -> anyhow::Result<Status> {
        let root = sh.current_dir();
        let Some(run) = &self.run else { anyhow::bail!("gate needs a PATH") };
        let path = join_clean(&root, run);
        let options = self.decide.options();
        let Some((mut verdicts, runs)) = runs_of(&path).context("cannot gate the run")? else {
            let set = TrialSet::load(&path).context("cannot gate the run")?;
            let thresholds = self.decide.thresholds(&root)?;
            let report = self.evaluate_set(&root, &set, &thresholds, &options);
            print_report(&report, self.decide.github);
            cold_start_note(&set, &thresholds);
            crate::thresholds::budgets_note(
                &thresholds,
                set.trials.iter().map(|t| t.summary.profile.as_str()),
            );
            let status = if incomplete(&set) { Status::PolicyViolated } else { report.status() };
            let runs = vec![GateRun { label: None, report }];
            self.write_json(&root, status, &set, runs)?;
            return Ok(status);
        };
        let mut sets = Vec::new();
        for (label, dir) in runs {
            let set = TrialSet::load(&dir)
                .with_context(|| format!("cannot gate {label} ({})", dir.display()))?;
            sets.push((label, set));
        }
        if sets.is_empty() {
            anyhow::bail!("cannot gate {}: it holds no run", path.display());
        }
        let thresholds = self.decide.thresholds(&root)?;
        let mut any_incomplete = false;
        let mut profiles = Vec::new();
        let mut problems = Vec::new();
        for (label, set) in sets {
            verdicts.record(label.clone(), evaluate(&set, &thresholds, &options));
            any_incomplete |= incomplete(&set);
            problems.extend(set.problems.iter().map(|p| format!("{label}: {p}")));
            profiles.extend(set.trials.iter().map(|t| t.summary.profile.clone()));
        }
        let status = verdicts.print(self.decide.github);
        crate::thresholds::budgets_note(&thresholds, profiles.iter().map(String::as_str));
        let status = if any_incomplete { Status::PolicyViolated } else { status };
        if let Some(file) = &self.json {
            let runs =
                verdicts.runs.into_iter().map(|(l, report)| GateRun { label: Some(l), report });
            write_gate_file(
                &json_path(&root, file),
                GateFile::new(status, problems, runs.collect()),
            )?;
        }
        Ok(status)
    }

    /// `--json FILE` of a single run or trial set.
    fn write_json(
        &self,
        root: &Path,
        status: Status,
        set: &TrialSet,
        runs: Vec<GateRun>,
    ) -> anyhow::Result<()> {
        let Some(file) = &self.json else { return Ok(()) };
        write_gate_file(&json_path(root, file), GateFile::new(status, set.problems.clone(), runs))
    }
}

/// `--json FILE` relative to the root; `-` stays `-` (standard output).
fn json_path(root: &Path, file: &Path) -> PathBuf {
    if file == Path::new("-") { file.to_path_buf() } else { join_clean(root, file) }
}

fn write_gate_file(path: &Path, file: GateFile) -> anyhow::Result<()> {
    if path == Path::new("-") {
        println!("{}", serde_json::to_string_pretty(&file)?);
        return Ok(());
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    infergate_model::artifact::write_at(path, &file)
        .with_context(|| format!("cannot write {}", path.display()))
}

/// A trial set that is not what its files say (a trial's records disagree with its summary, a
/// trial directory `trials.json` does not list) never passes: each problem is printed and the
/// gate fails (exit 1) whatever the verdicts.
fn incomplete(set: &TrialSet) -> bool {
    if set.problems.is_empty() {
        return false;
    }
    eprintln!("error: the trial set {} is incomplete:", set.dir.display());
    for p in &set.problems {
        eprintln!("  {p}");
    }
    eprintln!(
        "  a set gates only when every trial is the run its summary describes; measure it again"
    );
    true
}

impl GateCmd {
    /// Gate a set with the noise history pooled in (unless `--no-history`).
    fn evaluate_set(
        &self,
        root: &Path,
        set: &TrialSet,
        thresholds: &Thresholds,
        options: &GateOptions,
    ) -> crate::thresholds::GateReport {
        if self.no_history {
            return evaluate(set, thresholds, options);
        }
        crate::history_store::gating::gate_with_history(root, set, thresholds, options)
    }
}

/// A set whose trial 1 looks like a cold start (`infergate_model::trials::cold_start`) widens the
/// intervals the gate decides from: say so under the report.
fn cold_start_note(set: &TrialSet, thresholds: &Thresholds) {
    let metrics: Vec<_> = thresholds.thresholds.iter().map(|t| t.metric).collect();
    if let Some(cold) = set.cold_start(&metrics) {
        eprintln!("note: {}", cold.note);
    }
}

/// The runs a comparison or sweep directory holds, each with its label, and the verdicts they
/// are gated into; `None` for a single run.
type DirRuns = (GateVerdicts, Vec<(String, PathBuf)>);

fn runs_of(path: &Path) -> anyhow::Result<Option<DirRuns>> {
    if path.join(COMPARISON_FILE).is_file() {
        let cmp = StrategyComparison::read(path)?;
        let runs = cmp.run_dirs(path).into_iter().map(|(s, d)| (format!("strategy {s}"), d));
        return Ok(Some((GateVerdicts::default(), runs.collect())));
    }
    if path.join(SWEEP_FILE).is_file() {
        let sweep = SweepSummary::read(path)?;
        let n = sweep.stages.len();
        let runs = sweep.stages.iter().map(|s| {
            let label = format!("stage {}/{n} {}={}", s.stage, sweep.dimension.name(), s.load);
            (label, path.join(&s.dir))
        });
        return Ok(Some((GateVerdicts::sweep(), runs.collect())));
    }
    Ok(None)
}
