//! `cargo xtask report PATH`, which writes `report.html` (summary table, latency CDFs, a sweep's charts
//! against load, a capacity search's attainment against load, the per-request timeline,
//! failures over time) into a run, sweep, capacity or strategy comparison directory. `bench --report` writes the same page at the end of a run; the
//! page and the console tables of a run are `crate::run_report`'s.

use std::path::{Path, PathBuf};

use clap::Args;
use xshell::Shell;

pub use crate::run_report::{
    REPORT_FILE, console, input, latency_table, overview_table, page, render, write,
};

use crate::exit::Status;
use crate::thresholds;

/// `cargo xtask report PATH`.
#[derive(Debug, Args)]
pub struct ReportCmd {
    /// Relative to the repository root: a run directory (summary.json), a trial set (trials.json),
    /// a sweep directory (sweep.json), a capacity search (capacity.json), a strategy comparison
    /// directory (comparison.json) or a tune directory (tune.json), or one of those files.
    pub path: PathBuf,
    /// Thresholds file, relative to the repository root, whose limits are drawn on the latency CDFs (skipped when the file is absent).
    #[arg(long, value_name = "FILE", default_value = thresholds::GATE_FILE)]
    pub thresholds: PathBuf,
}

impl ReportCmd {
    pub fn run(self, sh: &Shell) -> anyhow::Result<Status> {
        let root = sh.current_dir();
        let path = crate::text::join_clean(&root, &self.path);
        let gate = crate::text::join_clean(&root, &self.thresholds);
        // The default file is optional (a repository without records has none); a file named
        // on the command line must exist.
        if self.thresholds != Path::new(thresholds::GATE_FILE) && !gate.is_file() {
            anyhow::bail!("the thresholds file {} does not exist", gate.display());
        }
        let written = write(&path, Some(&gate))?;
        println!("report: {}", written.display());
        Ok(Status::Success)
    }
}
