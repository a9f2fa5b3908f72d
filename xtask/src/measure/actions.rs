//! What `bench` measures besides a run: `bench ab [BASE_REV]` (baseline and candidate engine
//! configs side by side, [`crate::measure::ab`]) and `bench trials SET --until-decided` (more
//! trials for a trial set, [`until_decided`]). Both decide what they measured against the
//! live thresholds, as `bench --gate` does; `gate` only decides what was measured.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use xshell::Shell;

use crate::exit::Status;
use crate::text::join_clean;
use infergate_model::trials::TrialSet;

use crate::decide_flags::DecideFlags;
use crate::plan::{BenchMode, BenchPlan, GateSettings, ProfileSource, TrialPlan};
use crate::thresholds::{GATE_FILE, GateOptions, Thresholds, print_report};
use infergate_model::config::ResolvedProfile;
use infergate_model::summary::EngineParams;
use infergate_model::trials::TrialRequest;

/// `bench ab [BASE_REV]`.
#[derive(Clone, Debug, Args)]
pub struct AbCmd {
    #[command(flatten)]
    pub ab: crate::measure::ab::AbArgs,
    /// Thresholds file, relative to the repository root.
    #[arg(long, default_value = GATE_FILE, value_name = "FILE")]
    pub thresholds: PathBuf,
    /// Also print GitHub Actions `::error` / `::warning` annotations.
    #[arg(long)]
    pub github: bool,
}

impl AbCmd {
    pub fn run(mut self, sh: &Shell) -> anyhow::Result<Status> {
        let root = sh.current_dir();
        // No BASE_REV: the merge base (`crate::measure::ab::base::base_revision` of "").
        self.ab.ab.get_or_insert_with(String::new);
        crate::measure::ab::run(&root, &self.ab, &join_clean(&root, &self.thresholds), self.github)
    }
}

/// `bench trials SET --until-decided --max-trials K`.
#[derive(Clone, Debug, Args)]
pub struct TrialsCmd {
    /// A trial set's directory (trials.json), measured with `bench --trials N`.
    #[arg(value_name = "SET")]
    pub set: PathBuf,
    /// Add trials, with the settings the set's trials.json records, until every blocking
    /// threshold is decided, up to --max-trials (each look at a Bonferroni-corrected
    /// confidence).
    #[arg(long, required = true, requires = "max_trials")]
    pub until_decided: bool,
    /// With --until-decided: the most trials the set may hold.
    #[arg(long, value_name = "K", requires = "until_decided", value_parser = super::bench::parse_trials)]
    pub max_trials: Option<u32>,
    #[command(flatten)]
    pub decide: DecideFlags,
}

impl TrialsCmd {
    pub fn run(self, sh: &Shell) -> anyhow::Result<Status> {
        let root = sh.current_dir();
        let thresholds = self.decide.thresholds(&root)?;
        let max = self.max_trials.unwrap_or(1);
        let set = join_clean(&root, &self.set);
        until_decided(&root, &set, thresholds, self.decide.options(), max, self.decide.github)
    }
}

/// `bench trials --until-decided`: plan the set's next trials from the request its
/// `trials.json` records (the resolved profile, its target, the trial settings), add trials to
/// it, print the last look's report.
pub(crate) fn until_decided(
    root: &Path,
    path: &Path,
    thresholds: Thresholds,
    options: GateOptions,
    max_trials: u32,
    github: bool,
) -> anyhow::Result<Status> {
    if !infergate_model::trials::is_trial_set(path) {
        anyhow::bail!(
            "--until-decided adds trials to a trial set, and {} has no trials.json; measure one \
             with `cargo xtask bench --trials N`",
            path.display()
        );
    }
    let index =
        infergate_model::trials::TrialsFile::read(path).context("cannot gate the trial set")?;
    let Some(request) = index.request.clone() else {
        anyhow::bail!(
            "{} does not record the request its trials were measured with (a set measured \
             before trials.json format {} records its bench arguments as text, which leave \
             settings out; a target URL with a user or password is written to no file), so no \
             trial can be added with the same settings; gate it as it is, or measure a new set \
             with this version: `cargo xtask bench --trials N`",
            path.join(infergate_model::trials::TRIALS_FILE).display(),
            infergate_model::trials::FORMAT_VERSION
        );
    };
    let set = TrialSet::load(path).context("cannot gate the trial set")?;
    let gate = GateSettings { thresholds, github, options };
    let plan = plan_of(root, path, &index, request, gate.clone())?;
    refuse_changed(root, &plan, &set)?;
    let mut w = crate::measure::trials::SetWriter::resume(&plan, path.to_path_buf(), index);
    let (status, report) = crate::measure::trials::until_decided(&mut w, &gate, max_trials)?;
    if let Some(report) = report {
        print_report(&report, github);
    }
    Ok(status)
}

/// The plan of more trials of the set in `path`: the recorded profile run against its target,
/// the engine config and workload files it names read from the working tree, gated. The
/// working tree's bench config is resolved with the recorded overrides too (`source`), so
/// [`refuse_changed`] can tell when it no longer resolves to what the set measured.
fn plan_of(
    root: &Path,
    path: &Path,
    index: &infergate_model::trials::TrialsFile,
    request: Box<TrialRequest>,
    gate: GateSettings,
) -> anyhow::Result<BenchPlan> {
    let source = ProfileSource {
        config: crate::measure::bench::load_config(root, request.config.as_deref())?,
        name: index.profile.clone(),
        overrides: request.overrides.clone(),
        cli_target: request.cli_target.clone(),
    };
    let now = source.resolve(&[])?;
    let profile = ResolvedProfile { profile: request.profile.clone(), ..now };
    let engine = match &profile.target {
        Some((_, t)) => {
            t.engine_config.as_deref().map(|f| EngineParams::read(root, f)).transpose()?
        }
        None => None,
    };
    let mode = BenchMode::Trials(TrialPlan {
        count: index.planned,
        cooldown_s: index.cooldown_s,
        warmup: 0,
        confidence: index.confidence,
        until_decided: None,
        request,
    });
    Ok(BenchPlan {
        root: root.to_path_buf(),
        run_id: index.run_id.clone(),
        out_dir: path.to_path_buf(),
        quiet: true,
        profile,
        source,
        engine,
        git: crate::gitinfo::detect(root),
        gate: Some(gate),
        record_history: false,
        mode,
        command: None,
        shard: None,
    })
}

/// `bench trials --until-decided` adds trials with what the working tree holds now: refused when that is no
/// longer what the set measured (its profile, scenario, engine config or workload files differ
/// from trial 1's, the key named), or when the set is incomplete.
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
    // The working tree's bench config resolved as the set's was: what a trial measured now
    // would be, and the files the next trial reads.
    let now = plan.source.resolve(&[])?;
    let profile = &now.profile;
    let mut planned = first.summary.clone();
    planned.profile = now.name.clone();
    planned.config = infergate_model::summary::RunConfig::Profile(Box::new(profile.clone()));
    planned.engine = match (&plan.engine, &now.target, profile.sim.mode) {
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
