//! `cargo xtask gate PATH`: a run or a trial set against the thresholds of the live decision
//! records.
//!
//! Every threshold is decided from its metric's estimate and confidence interval (a single run
//! is a set of one): pass, fail or inconclusive ([`crate::thresholds::evaluate`]). A metric
//! the run did not measure is a failure, not a pass. Failures of `block` thresholds fail the
//! gate (exit 1); an inconclusive `block` threshold with no failure leaves it undecided (exit
//! 3); `warn` thresholds are reported only. `--until-decided --max-trials K` adds trials to a
//! trial set, with the bench arguments its `trials.json` records, until every blocking
//! threshold is decided (`crate::measure::trials::until_decided`). A set whose trial 1 looks like a
//! cold start gets a note under the report.
//!
//! A strategy comparison's directory (`comparison.json`) gates every strategy's run, a sweep's
//! directory (`sweep.json`) every stage ([`crate::thresholds::runs`]): exit 1 when any fails.
//!
//! `gate --ab BASE_REV` is [`ab`]: the base revision and the working tree measured side by side.

pub mod ab;

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use infergate_model::strategy_compare::{COMPARISON_FILE, StrategyComparison};
use infergate_model::sweep::{SWEEP_FILE, SweepSummary};
use infergate_model::trials::TrialSet;
use xshell::Shell;

use crate::exit::Status;
use crate::text::join_clean;
use crate::thresholds::report_file::{GateFile, GateRun};
use crate::thresholds::{GATE_FILE, GateOptions, GateVerdicts, Thresholds};
use crate::thresholds::{evaluate, print_report};

/// `cargo xtask gate PATH`: gate a measured run or trial set.
#[derive(Debug, Args)]
pub struct GateCmd {
    /// A bench run directory or its summary.json, a trial set's directory (trials.json); a
    /// strategy comparison's directory (every strategy's run) or a sweep's directory (every
    /// stage).
    #[arg(value_name = "PATH", required_unless_present = "ab", conflicts_with = "ab")]
    pub run: Option<PathBuf>,
    /// Thresholds file, relative to the repository root.
    #[arg(long, default_value = GATE_FILE, value_name = "FILE")]
    pub thresholds: PathBuf,
    /// Also print GitHub Actions `::error` / `::warning` annotations.
    #[arg(long)]
    pub github: bool,
    /// Coverage of the confidence intervals the verdicts are decided from, within (0, 1).
    #[arg(long, value_name = "P", default_value_t = infergate_model::stats::DEFAULT_CONFIDENCE, value_parser = infergate_model::stats::parse_confidence)]
    pub confidence: f64,
    /// Decide even when a trial was measured on a busy client host. By default every check
    /// of a set with such a trial (summary `environment.noise.busy`) is inconclusive, naming
    /// the trial: an absolute limit set on a quieter machine says little about a busy one. (An
    /// A/B gate decides anyway: both arms shared the host.)
    #[arg(long)]
    pub allow_busy_host: bool,
    /// The default since busy hosts are refused unless --allow-busy-host; kept for scripts.
    #[arg(long, hide = true, conflicts_with = "allow_busy_host")]
    pub refuse_busy_host: bool,
    /// Add trials to the trial set, with the settings its trials.json records, until every
    /// blocking threshold is decided, up to --max-trials (each look at a Bonferroni-corrected
    /// confidence).
    #[arg(long, requires = "max_trials")]
    pub until_decided: bool,
    /// With --until-decided: the most trials the set may hold.
    #[arg(long, value_name = "K", requires = "until_decided", value_parser = parse_trials)]
    pub max_trials: Option<u32>,
    /// Also write the verdicts as JSON to FILE (relative to the repository root): the exit
    /// status and every run's checks (`gate.json`'s format, docs/mcp.md).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["ab", "until_decided"])]
    pub json: Option<PathBuf>,
    #[command(flatten)]
    pub ab: crate::gate::ab::AbArgs,
}

/// `--max-trials`: 1..=1000.
fn parse_trials(s: &str) -> Result<u32, String> {
    let max = infergate_model::config::limits::MAX_TRIALS;
    match s.trim().parse::<u32>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!("must be a whole number of trials within 1..={max}, got `{s}`")),
    }
}

impl GateCmd {
    pub fn run(self, sh: &Shell) -> anyhow::Result<Status> {
        let root = sh.current_dir();
        if self.ab.ab.is_some() {
            return run_ab(&root, &self.ab, &join_clean(&root, &self.thresholds), self.github);
        }
        let Some(run) = &self.run else { anyhow::bail!("gate needs a PATH (or --ab)") };
        let path = join_clean(&root, run);
        let read_thresholds = || {
            Thresholds::load(&join_clean(&root, &self.thresholds))
                .context("cannot read the thresholds")
        };
        let options = GateOptions {
            confidence: self.confidence,
            refuse_busy_host: !self.allow_busy_host,
            ..GateOptions::default()
        };
        if self.until_decided {
            let max = self.max_trials.unwrap_or(1);
            return until_decided(&root, &path, read_thresholds()?, options, max, self.github);
        }
        let Some((mut verdicts, runs)) = runs_of(&path).context("cannot gate the run")? else {
            let set = TrialSet::load(&path).context("cannot gate the run")?;
            let thresholds = read_thresholds()?;
            let report = self.evaluate_set(&root, &set, &thresholds, &options);
            print_report(&report, self.github);
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
        let thresholds = read_thresholds()?;
        let mut any_incomplete = false;
        let mut profiles = Vec::new();
        let mut problems = Vec::new();
        for (label, set) in sets {
            verdicts.record(label.clone(), evaluate(&set, &thresholds, &options));
            any_incomplete |= incomplete(&set);
            problems.extend(set.problems.iter().map(|p| format!("{label}: {p}")));
            profiles.extend(set.trials.iter().map(|t| t.summary.profile.clone()));
        }
        let status = verdicts.print(self.github);
        crate::thresholds::budgets_note(&thresholds, profiles.iter().map(String::as_str));
        let status = if any_incomplete { Status::PolicyViolated } else { status };
        if let Some(file) = &self.json {
            let runs =
                verdicts.runs.into_iter().map(|(l, report)| GateRun { label: Some(l), report });
            write_gate_file(
                &join_clean(&root, file),
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
        write_gate_file(&join_clean(root, file), GateFile::new(status, set.problems.clone(), runs))
    }
}

fn write_gate_file(path: &Path, file: GateFile) -> anyhow::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    infergate_model::artifact::write_at(path, &file)
        .with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(feature = "runtime")]
fn run_ab(
    root: &Path,
    args: &crate::gate::ab::AbArgs,
    thresholds: &Path,
    github: bool,
) -> anyhow::Result<Status> {
    crate::gate::ab::run(root, args, thresholds, github)
}

#[cfg(not(feature = "runtime"))]
fn run_ab(_: &Path, _: &crate::gate::ab::AbArgs, _: &Path, _: bool) -> anyhow::Result<Status> {
    anyhow::bail!(
        "gate --ab measures engines: this build has no runtime (build xtask with its default features)"
    )
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
        if self.ab.no_history {
            return evaluate(set, thresholds, options);
        }
        crate::history_store::gating::gate_with_history(root, set, thresholds, options)
    }
}

/// A set whose trial 1 looks like a cold start (`infergate_model::trials::cold_start`) widens the
/// intervals the gate decides from: say so under the report.
fn cold_start_note(set: &TrialSet, thresholds: &Thresholds) {
    let metrics: Vec<&str> = thresholds.thresholds.iter().map(|t| t.metric.as_str()).collect();
    if let Some(cold) = set.cold_start(&metrics) {
        eprintln!("note: {}", cold.note);
    }
}

/// `--until-decided`: re-plan the set's profile from the bench arguments its `trials.json`
/// records, add trials to it, print the last look's report.
#[cfg(feature = "runtime")]
fn until_decided(
    root: &Path,
    path: &Path,
    thresholds: Thresholds,
    options: GateOptions,
    max_trials: u32,
    github: bool,
) -> anyhow::Result<Status> {
    use clap::Parser;
    if !infergate_model::trials::is_trial_set(path) {
        anyhow::bail!(
            "--until-decided adds trials to a trial set, and {} has no trials.json; measure one \
             with `cargo xtask bench --trials N`",
            path.display()
        );
    }
    let index =
        infergate_model::trials::TrialsFile::read(path).context("cannot gate the trial set")?;
    if index.bench_args.is_empty() {
        anyhow::bail!(
            "{} does not record the bench arguments of its trials (bench_args), so no trial can \
             be added with the same settings",
            path.join(infergate_model::trials::TRIALS_FILE).display()
        );
    }
    #[derive(Parser)]
    struct Args {
        #[command(flatten)]
        bench: crate::measure::bench::BenchCmd,
    }
    let argv = std::iter::once("bench".to_string()).chain(index.bench_args.iter().cloned());
    let args = Args::try_parse_from(argv).with_context(|| {
        format!("the bench arguments recorded in {} are refused", path.display())
    })?;
    let mut cmd = args.bench;
    cmd.out = Some(path.to_path_buf());
    cmd.quiet = true;
    let plan = cmd.plan(root, index.run_id.clone())?;
    refuse_changed(root, &plan, &TrialSet::load(path).context("cannot gate the trial set")?)?;
    let gate = crate::plan::GateSettings { thresholds, github, options };
    let plan = crate::plan::BenchPlan { gate: Some(gate.clone()), ..plan };
    let mut w = crate::measure::trials::SetWriter::resume(&plan, path.to_path_buf(), index);
    let (status, report) = crate::measure::trials::until_decided(&mut w, &gate, max_trials)?;
    if let Some(report) = report {
        print_report(&report, github);
    }
    Ok(status)
}

/// `--until-decided` adds trials with what the working tree holds now: refused when that is no
/// longer what the set measured (its profile, scenario, engine config or workload files differ
/// from trial 1's, the key named), or when the set is incomplete.
#[cfg(feature = "runtime")]
fn refuse_changed(
    root: &Path,
    plan: &crate::plan::BenchPlan,
    set: &TrialSet,
) -> anyhow::Result<()> {
    if !set.problems.is_empty() {
        anyhow::bail!(
            "{} is incomplete, so no trial is added to it: {}",
            set.dir.display(),
            set.problems.join("; ")
        );
    }
    let Some(first) = set.trials.first() else { return Ok(()) };
    let profile = &plan.profile.profile;
    let mut planned = first.summary.clone();
    planned.profile = plan.profile.name.clone();
    planned.config = infergate_model::summary::RunConfig::Profile(Box::new(profile.clone()));
    planned.engine = match (&plan.engine, &plan.profile.target, profile.sim.mode) {
        (Some(e), _, _) => Some(e.clone()),
        (None, None, infergate_model::config::SimMode::Engine) => Some(
            infergate_model::summary::EngineParams::read(root, &profile.sim.engine_config)
                .context("cannot read the engine config the next trial would run")?,
        ),
        _ => None,
    };
    planned.workload.files =
        bench::runner::prepare::load_workload(&profile.workload, &profile.load, root)
            .context("cannot read the workload the next trial would send")?
            .files;
    if let Some((key, now, then)) =
        infergate_model::trials::measurement_difference(&first.summary, &planned)
    {
        anyhow::bail!(
            "the working tree no longer measures what {} measured: {key} is {now} now, {then} in \
             its trials; a trial added now would be pooled with trials of another \
             configuration. Gate the set as it is, or measure a new one",
            set.dir.display()
        );
    }
    Ok(())
}

#[cfg(not(feature = "runtime"))]
fn until_decided(
    _root: &Path,
    _path: &Path,
    _thresholds: Thresholds,
    _options: GateOptions,
    _max_trials: u32,
    _github: bool,
) -> anyhow::Result<Status> {
    anyhow::bail!(
        "--until-decided measures trials, which this build cannot (built without the `runtime` \
         feature)"
    )
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
