//! The resolved plan of `cargo xtask bench`: what the flags ask for, resolved once (config read,
//! profile resolved, run id chosen, output directory, gate settings) into one value that the
//! modes run from: a single run, a load sweep (`sweep.rs`), a capacity search (`capacity.rs`),
//! a trial set (`trials.rs`) or a strategy comparison (`strategies.rs`). `bench.rs` builds the plan from the flags and dispatches on its mode; the
//! modes depend on this module only, never on the flags.

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use bench::runner::RunSpec;
use infergate_model::Summary;
use infergate_model::capacity::CapacitySpec;
use infergate_model::config::{
    BatchStrategy, BenchConfig, ConfigError, Override, ResolvedProfile, SimMode, Target,
};
use infergate_model::strategy_compare::parse_strategies;
use infergate_model::summary::{EngineParams, GitInfo, Invocation, RunStatus};
use infergate_model::sweep::{StagePlan, SweepSpec};
use infergate_model::trials::{Trial, TrialSet};

pub use crate::thresholds::GateVerdicts;
use crate::thresholds::{self, GateOptions, GateReport, Thresholds};

/// The name a `--base-url` target is recorded under.
pub(crate) const CLI_TARGET: &str = "cli";

/// Everything `cargo xtask bench` runs, resolved from the command line once.
#[derive(Debug)]
pub struct BenchPlan {
    /// Repository root: relative paths of the config (datasets, engine configs) start here.
    pub root: PathBuf,
    /// The one run id; sweep stages and compared strategies derive theirs from it.
    pub run_id: String,
    /// The run directory (single run), the sweep directory or the comparison directory.
    pub out_dir: PathBuf,
    pub quiet: bool,
    /// The profile with the command line's overrides applied.
    pub profile: ResolvedProfile,
    /// Where `profile` came from, to derive the profiles of sweep stages without rereading it.
    pub source: ProfileSource,
    /// The engine parameters to record (the target's governed config), when known.
    pub engine: Option<EngineParams>,
    pub git: Option<GitInfo>,
    /// `--gate`: applied to every measured run of the mode.
    pub gate: Option<GateSettings>,
    /// `--history`: a trial set is appended to the history (a gated one is anyway).
    pub record_history: bool,
    pub mode: BenchMode,
    /// The command line the plan was resolved from (`cargo xtask bench ...`), recorded in every
    /// run's summary; `None` when the plan was not made from a command line.
    pub command: Option<String>,
    /// `--shard I/N`: `profile` holds the shard's part of the load already.
    pub shard: Option<infergate_model::shard::ShardRun>,
}

/// What `bench` does with the profile.
#[derive(Clone, Debug, PartialEq)]
pub enum BenchMode {
    /// One run.
    Single,
    /// One run per load (`--sweep`).
    Sweep(SweepPlan),
    /// One run per batching strategy against the engine simulator (`--compare-strategies`).
    Compare(StrategyList),
    /// The profile measured several times, a trial set (`--trials`, profile key `trials`).
    Trials(TrialPlan),
    /// The highest load at which the profile's SLO holds, searched probe by probe
    /// (`--capacity`).
    Capacity(CapacityPlan),
}

/// A capacity search: its question and rules, and the measured requests per trial its loads
/// start from (the profile's `load.requests`, else the workload's size).
#[derive(Clone, Debug, PartialEq)]
pub struct CapacityPlan {
    pub spec: CapacitySpec,
    pub base_requests: u64,
}

/// A trial set: how many trials, the pause between them, the intervals' coverage, and with
/// `bench --gate --until-decided` the most trials the gate may add to.
#[derive(Clone, Debug, PartialEq)]
pub struct TrialPlan {
    pub count: u32,
    pub cooldown_s: f64,
    /// Whole trials measured before trial 1 (`load.warmup_trials`, `--warmup-trials`): a
    /// fresh set runs them, trials added to an existing set (`bench trials`) do not.
    pub warmup: u32,
    pub confidence: f64,
    /// `--until-decided --max-trials K`: the gate adds trials up to K until every blocking
    /// threshold is decided.
    pub until_decided: Option<u32>,
    /// What one more trial is measured with, the same settings (recorded in `trials.json`).
    pub request: Box<infergate_model::trials::TrialRequest>,
}

impl BenchMode {
    /// Name of the default output directory under `target/bench/`.
    pub fn dir_name(&self, run_id: &str) -> String {
        match self {
            BenchMode::Single => run_id.to_string(),
            BenchMode::Sweep(_) => sweep_id(run_id),
            BenchMode::Compare(_) => format!("{run_id}-strategies"),
            BenchMode::Trials(_) => format!("{run_id}-trials"),
            BenchMode::Capacity(_) => capacity_id(run_id),
        }
    }
}

/// A load sweep: the loads and how each stage splits into warmup and steady state.
#[derive(Clone, Debug, PartialEq)]
pub struct SweepPlan {
    pub spec: SweepSpec,
    pub stages: StagePlan,
}

/// The batching strategies to compare, in the order given (`serial,fixed,...`).
#[derive(Clone, Debug, PartialEq)]
pub struct StrategyList(pub Vec<BatchStrategy>);

impl FromStr for StrategyList {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_strategies(s).map(StrategyList).map_err(|e| e.to_string())
    }
}

impl fmt::Display for StrategyList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.0.iter().map(|s| s.as_str()).collect();
        f.write_str(&names.join(","))
    }
}

/// The id of a sweep started as run `run_id`.
pub fn sweep_id(run_id: &str) -> String {
    format!("sweep-{run_id}")
}

/// The id of a capacity search started as run `run_id`.
pub fn capacity_id(run_id: &str) -> String {
    format!("capacity-{run_id}")
}

/// The run id of trial `trial` (from 1) of probe `probe` (from 0) of a capacity search.
pub(crate) fn probe_run_id(capacity_id: &str, probe: usize, trial: u32) -> String {
    format!("{capacity_id}-{:02}-{trial:02}", probe + 1)
}

/// The workload's items, as a sweep's stages and a capacity search's trials count their
/// requests from when the profile sets no `load.requests`: a dataset's lines, else the
/// synthetic workload's lengths x repeats.
pub fn workload_items(
    root: &Path,
    profile: &infergate_model::config::Profile,
) -> anyhow::Result<u64> {
    use anyhow::Context;
    Ok(match &profile.workload.dataset {
        Some(d) => {
            let path = root.join(d);
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("cannot read the dataset {}", path.display()))?;
            infergate_model::workload::dataset_line_count(&text) as u64
        }
        None => infergate_model::sweep::synthetic_items(profile),
    })
}

/// The run id of stage `index` (from 0) of a sweep.
pub(crate) fn stage_run_id(sweep_id: &str, index: usize) -> String {
    format!("{sweep_id}-{:02}", index + 1)
}

/// The run id of one strategy of a comparison started as run `run_id`.
pub(crate) fn strategy_run_id(run_id: &str, strategy: BatchStrategy) -> String {
    format!("{run_id}-{strategy}")
}

/// A profile's origin: the config (read once), the profile's name, the command line's overrides
/// and the target `--base-url` names.
#[derive(Clone, Debug)]
pub struct ProfileSource {
    pub config: BenchConfig,
    pub name: String,
    pub overrides: Vec<Override>,
    pub cli_target: Option<Target>,
}

impl ProfileSource {
    /// Resolve the profile with `extra` overrides applied after the command line's (a sweep
    /// stage's load). Pure: the config is not read again.
    pub fn resolve(&self, extra: &[Override]) -> Result<ResolvedProfile, ConfigError> {
        let mut overrides = self.overrides.clone();
        overrides.extend_from_slice(extra);
        let mut resolved = self.config.resolve(&self.name, &overrides)?;
        if let Some(target) = &self.cli_target {
            resolved.profile.target = Some(CLI_TARGET.into());
            resolved.target = Some((CLI_TARGET.into(), target.clone()));
        }
        Ok(resolved)
    }
}

/// Why a command line cannot become a plan (beyond what clap refuses and config errors).
#[derive(Debug, PartialEq, thiserror::Error)]
pub(crate) enum PlanError {
    #[error("--base-url must start with http:// or https://, got `{0}`")]
    BaseUrl(String),
    #[error(
        "--compare-strategies runs the embedded engine simulator, but profile `{profile}` \
         measures target `{target}`; choose a profile without a target"
    )]
    CompareWithTarget { profile: String, target: String },
    #[error(
        "--compare-strategies needs the engine simulator; profile `{0}` has sim.mode = \
         \"timing\" (set --set sim.mode=engine)"
    )]
    CompareNeedsEngine(String),
    #[error(
        "--shard {0} needs --run-id or --start-at: the shards of one run share its run id \
         (give every shard the same one)"
    )]
    ShardWithoutRunId(String),
    #[error(
        "--shard {0} splits one run of a profile; it does not go with a sweep, a strategy \
         comparison or a trial set (the profile's `trials`)"
    )]
    ShardMode(String),
    #[error(
        "--shard needs a target the shards share, but profile `{0}` measures the embedded \
         simulator (one per process); name a target, or --base-url a simulator served by \
         `cargo xtask sim`"
    )]
    ShardWithoutTarget(String),
    #[error(
        "--capacity searches the highest load meeting the profile's goodput SLO, but profile \
         `{0}` sets no objective in [slo]; set one or more of ttft_ms, tpot_ms, e2e_ms (in \
         [profile.{0}.slo], or --set slo.ttft_ms=500)"
    )]
    CapacityWithoutSlo(String),
    #[error("{flag}: {message}")]
    Capacity { flag: &'static str, message: String },
    #[error(
        "--start-at {0} is more than a day ahead; the shard would wait that long before its \
         load (a mistyped date?)"
    )]
    StartTooFar(String),
}

/// Refuse a comparison of a profile that does not run the engine simulator.
pub(crate) fn check_comparable(profile: &ResolvedProfile) -> Result<(), PlanError> {
    if let Some((name, _)) = &profile.target {
        return Err(PlanError::CompareWithTarget {
            profile: profile.name.clone(),
            target: name.clone(),
        });
    }
    if profile.profile.sim.mode != SimMode::Engine {
        return Err(PlanError::CompareNeedsEngine(profile.name.clone()));
    }
    Ok(())
}

/// Refuse a capacity search that cannot answer, before anything is sent: a profile without a
/// goodput SLO, a setting outside its range, a budget too small for the first probe.
pub(crate) fn check_capacity(
    profile: &ResolvedProfile,
    plan: &CapacityPlan,
) -> Result<(), PlanError> {
    if profile.profile.slo.is_empty() {
        return Err(PlanError::CapacityWithoutSlo(profile.name.clone()));
    }
    plan.spec.validate().map_err(|(flag, message)| PlanError::Capacity { flag, message })?;
    plan.spec
        .check_budget(plan.base_requests)
        .map_err(|message| PlanError::Capacity { flag: "--capacity-budget", message })
}

impl BenchPlan {
    /// The run of `profile` into `out_dir` as `run_id`, with the plan's engine parameters, git
    /// state and quietness.
    pub fn run_spec(&self, profile: ResolvedProfile, out_dir: PathBuf, run_id: String) -> RunSpec {
        RunSpec {
            profile,
            out_dir,
            run_id,
            git: self.git.clone(),
            engine: self.engine.clone(),
            quiet: self.quiet,
            handle_signals: true,
            root: self.root.clone(),
            invocation: self.invocation(None),
            shard: self.shard.clone(),
            slice: None,
            isolation: None,
            preflight: None,
        }
    }

    /// The plan's command line as a summary records it; `part` names which of the command's
    /// runs this one is (a sweep's stage, a comparison's strategy).
    pub fn invocation(&self, part: Option<String>) -> Option<Invocation> {
        self.command.as_ref().map(|command| Invocation { command: command.clone(), part })
    }
}

/// A command line as it can be pasted into a shell: `cargo xtask` and the arguments, each
/// quoted when the shell would read it otherwise ([`crate::text::quote`]).
pub(crate) fn command_line(args: &[OsString]) -> String {
    let mut out = String::from(crate::text::tool());
    for a in args {
        out.push(' ');
        out.push_str(&crate::text::quote(&a.to_string_lossy()));
    }
    out
}

/// `--gate`: the thresholds (read before anything is measured) and how to report.
#[derive(Clone, Debug)]
pub struct GateSettings {
    pub thresholds: Thresholds,
    /// Also print GitHub Actions annotations.
    pub github: bool,
    /// How the verdicts are decided (`--confidence`).
    pub options: GateOptions,
}

impl GateSettings {
    /// Gate a measured run in `dir` (its records give a single run's interval); `None` for an
    /// interrupted run (part of the planned load is no verdict).
    pub fn check(&self, dir: &Path, summary: &Summary) -> Option<GateReport> {
        match summary.status {
            RunStatus::Complete | RunStatus::Failed => {
                let trial = Trial { dir: dir.to_path_buf(), summary: summary.clone() };
                let set = TrialSet::from_trials(dir.to_path_buf(), vec![trial]);
                Some(thresholds::evaluate(&set, &self.thresholds, &self.options))
            }
            RunStatus::Interrupted | RunStatus::Aborted | RunStatus::Oversaturated => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_ids_and_directory_names() {
        let id = "20250101T000000Z-abcd";
        assert_eq!(BenchMode::Single.dir_name(id), id);
        let sweep = SweepPlan { spec: "rate=1,2".parse().unwrap(), stages: StagePlan::default() };
        assert_eq!(BenchMode::Sweep(sweep).dir_name(id), format!("sweep-{id}"));
        let list: StrategyList = "serial,fixed".parse().unwrap();
        assert_eq!(list.to_string(), "serial,fixed");
        assert_eq!(BenchMode::Compare(list).dir_name(id), format!("{id}-strategies"));
        assert_eq!(stage_run_id(&sweep_id(id), 1), format!("sweep-{id}-02"));
        assert_eq!(strategy_run_id(id, BatchStrategy::TokenBudget), format!("{id}-token_budget"));
        assert!("serial,serial".parse::<StrategyList>().unwrap_err().contains("twice"));
    }

    #[test]
    fn command_lines_are_quoted_to_be_pasted() {
        let args: Vec<OsString> =
            ["bench", "--out", "runs/a b", "--set", "workload.input_lengths=[128,512]", "it's"]
                .iter()
                .map(OsString::from)
                .collect();
        assert_eq!(
            command_line(&args),
            "cargo xtask bench --out 'runs/a b' --set 'workload.input_lengths=[128,512]' 'it'\\''s'"
        );
    }
}
