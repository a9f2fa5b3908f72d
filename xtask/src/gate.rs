//! `cargo xtask gate RUN`: a run against the thresholds of the live decision records.
//!
//! Every threshold is checked as `measured <comparator> limit`. A metric the run did not
//! measure is a failure, not a pass. Failures of `block` thresholds fail the gate (exit 1);
//! failures of `warn` thresholds are reported only. The evaluation and the report are
//! [`crate::thresholds`]'s, so `bench --gate` gates a run it has just measured with the same code.

use std::path::PathBuf;

use anyhow::Context;
use bench::Summary;
use clap::Args;
use xshell::Shell;

use crate::exit::Status;
use crate::text::join_clean;
use crate::thresholds::{GATE_FILE, Thresholds};
use crate::thresholds::{evaluate, print_report};

/// `cargo xtask gate RUN`: gate a measured run.
#[derive(Debug, Args)]
pub struct GateCmd {
    /// A bench run directory or its summary.json.
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
        let summary =
            Summary::read(&join_clean(&root, &self.run)).context("cannot gate the run")?;
        let thresholds = Thresholds::load(&join_clean(&root, &self.thresholds))
            .context("cannot read the thresholds")?;
        let report = evaluate(&summary, &thresholds);
        print_report(&report, self.github);
        Ok(report.status())
    }
}
