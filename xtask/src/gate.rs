//! `cargo xtask gate RUN`: a run against the thresholds of the live decision records.
//!
//! Every threshold is checked as `measured <comparator> limit`. A metric the run did not
//! measure is a failure, not a pass. Failures of `block` thresholds fail the gate (exit 1);
//! failures of `warn` thresholds are reported only. The evaluation and the report are
//! [`crate::thresholds`]'s, so `bench --gate` gates a run it has just measured with the same code.
//!
//! A strategy comparison's directory (`comparison.json`) gates every strategy's run, a sweep's
//! directory (`sweep.json`) every stage ([`crate::thresholds::runs`]): exit 1 when any fails.

use std::path::{Path, PathBuf};

use anyhow::Context;
use bench::Summary;
use bench::strategy_compare::{COMPARISON_FILE, StrategyComparison};
use bench::sweep::{SWEEP_FILE, SweepSummary};
use clap::Args;
use xshell::Shell;

use crate::exit::Status;
use crate::text::join_clean;
use crate::thresholds::{GATE_FILE, GateVerdicts, Thresholds};
use crate::thresholds::{evaluate, print_report};

/// `cargo xtask gate RUN`: gate a measured run.
#[derive(Debug, Args)]
pub struct GateCmd {
    /// A bench run directory or its summary.json; a strategy comparison's directory (every
    /// strategy's run) or a sweep's directory (every stage).
    #[arg(value_name = "RUN")]
    pub run: PathBuf,
    /// Thresholds file, relative to the repository root.
    #[arg(long, default_value = GATE_FILE, value_name = "FILE")]
    pub thresholds: PathBuf,
    /// Also print GitHub Actions `::error` / `::warning` annotations.
    #[arg(long)]
    pub github: bool,
}

impl GateCmd {
    pub fn run(self, sh: &Shell) -> anyhow::Result<Status> {
        let root = sh.current_dir();
        let path = join_clean(&root, &self.run);
        let read_thresholds = || {
            Thresholds::load(&join_clean(&root, &self.thresholds))
                .context("cannot read the thresholds")
        };
        let Some((mut verdicts, runs)) = runs_of(&path).context("cannot gate the run")? else {
            let summary = Summary::read(&path).context("cannot gate the run")?;
            let report = evaluate(&summary, &read_thresholds()?);
            print_report(&report, self.github);
            return Ok(report.status());
        };
        let mut summaries = Vec::new();
        for (label, dir) in runs {
            let summary = Summary::read(&dir)
                .with_context(|| format!("cannot gate {label} ({})", dir.display()))?;
            summaries.push((label, summary));
        }
        if summaries.is_empty() {
            anyhow::bail!("cannot gate {}: it holds no run", path.display());
        }
        let thresholds = read_thresholds()?;
        for (label, summary) in summaries {
            verdicts.record(label, evaluate(&summary, &thresholds));
        }
        Ok(verdicts.print(self.github))
    }
}

/// The runs a comparison or sweep directory holds, each with its label, and the verdicts they
/// are gated into; `None` for a single run.
type DirRuns = (GateVerdicts, Vec<(String, PathBuf)>);

fn runs_of(path: &Path) -> anyhow::Result<Option<DirRuns>> {
    if path.join(COMPARISON_FILE).is_file() {
        let cmp = StrategyComparison::read(path).map_err(anyhow::Error::msg)?;
        let runs = cmp.run_dirs(path).into_iter().map(|(s, d)| (format!("strategy {s}"), d));
        return Ok(Some((GateVerdicts::default(), runs.collect())));
    }
    if path.join(SWEEP_FILE).is_file() {
        let sweep = SweepSummary::read(path).map_err(anyhow::Error::msg)?;
        let n = sweep.stages.len();
        let runs = sweep.stages.iter().map(|s| {
            let label = format!("stage {}/{n} {}={}", s.stage, sweep.dimension.name(), s.load);
            (label, path.join(&s.dir))
        });
        return Ok(Some((GateVerdicts::sweep(), runs.collect())));
    }
    Ok(None)
}
