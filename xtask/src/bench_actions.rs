//! What `bench` measures besides a run: `bench ab [BASE_REV]` (baseline and candidate engine
//! configs side by side, [`crate::ab`]) and `bench trials SET --until-decided` (more trials
//! for a trial set, [`crate::gate::until_decided`]). Both decide what they measured against the
//! live thresholds, as `bench --gate` does; `gate` only decides what was measured.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use xshell::Shell;

use crate::exit::Status;
use crate::text::join_clean;
use crate::thresholds::{GATE_FILE, GateOptions, Thresholds};

/// `bench ab [BASE_REV]`.
#[derive(Clone, Debug, Args)]
pub struct AbCmd {
    #[command(flatten)]
    pub ab: crate::ab::AbArgs,
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
        // No BASE_REV: the merge base (`crate::ab::arms::base_revision` of "").
        self.ab.ab.get_or_insert_with(String::new);
        crate::ab::run(&root, &self.ab, &join_clean(&root, &self.thresholds), self.github)
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
    #[arg(long, value_name = "K", requires = "until_decided", value_parser = crate::gate::parse_trials)]
    pub max_trials: Option<u32>,
    /// Thresholds file, relative to the repository root.
    #[arg(long, default_value = GATE_FILE, value_name = "FILE")]
    pub thresholds: PathBuf,
    /// Also print GitHub Actions `::error` / `::warning` annotations.
    #[arg(long)]
    pub github: bool,
    /// Coverage of the confidence intervals the verdicts are decided from, within (0, 1).
    #[arg(long, value_name = "P", default_value_t = infergate_model::stats::DEFAULT_CONFIDENCE, value_parser = infergate_model::stats::parse_confidence)]
    pub confidence: f64,
    /// Decide even when a trial was measured on a busy client host (by default its checks are
    /// inconclusive, naming the trial).
    #[arg(long)]
    pub allow_busy_host: bool,
    /// The default since busy hosts are refused unless --allow-busy-host; kept for scripts.
    #[arg(long, hide = true, conflicts_with = "allow_busy_host")]
    pub refuse_busy_host: bool,
}

impl TrialsCmd {
    pub fn run(self, sh: &Shell) -> anyhow::Result<Status> {
        let root = sh.current_dir();
        let thresholds = Thresholds::load(&join_clean(&root, &self.thresholds))
            .context("cannot read the thresholds")?;
        let options = GateOptions {
            confidence: self.confidence,
            refuse_busy_host: !self.allow_busy_host,
            ..GateOptions::default()
        };
        let max = self.max_trials.unwrap_or(1);
        let set = join_clean(&root, &self.set);
        crate::gate::until_decided(&root, &set, thresholds, options, max, self.github)
    }
}
