//! The flags of the commands that decide measured runs against the live thresholds (`gate PATH`
//! and `bench trials SET --until-decided`): one group, flattened into both, read once into the
//! thresholds and the gate's options.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;

use crate::text::join_clean;
use crate::thresholds::{GATE_FILE, GateOptions, Thresholds};

#[derive(Clone, Debug, Args)]
pub struct DecideFlags {
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
}

impl DecideFlags {
    /// The thresholds file read, relative to `root`.
    pub fn thresholds(&self, root: &Path) -> anyhow::Result<Thresholds> {
        Thresholds::load(&join_clean(root, &self.thresholds)).context("cannot read the thresholds")
    }

    /// How the checks are decided: at `--confidence`, busy hosts refused unless allowed.
    pub fn options(&self) -> GateOptions {
        GateOptions {
            confidence: self.confidence,
            refuse_busy_host: !self.allow_busy_host,
            ..GateOptions::default()
        }
    }
}
