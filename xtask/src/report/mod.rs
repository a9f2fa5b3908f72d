//! Reports of measured results: the console tables of a run ([`console`]) and `cargo xtask
//! report PATH`, which writes `report.html` (summary table, latency CDFs, a sweep's charts
//! against load, a capacity search's attainment against load, the per-request timeline,
//! failures over time) into a run, sweep, capacity or strategy comparison directory. `bench --report` writes the same page at the end of a run.

pub mod console;
pub mod input;
pub mod page;

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use xshell::Shell;

pub use console::{latency_table, overview_table, render};

use crate::exit::Status;
use crate::thresholds::{self, Thresholds};

/// The page's file name, in the directory it reports on.
pub const REPORT_FILE: &str = "report.html";

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

/// Write `report.html` for what `path` holds; the limits of `thresholds` (gate.toml), when the
/// file exists, are drawn on the CDFs. Returns the page's path.
pub fn write(path: &Path, thresholds: Option<&Path>) -> anyhow::Result<PathBuf> {
    let input = input::read(path)?;
    let gate = match thresholds.filter(|t| t.is_file()) {
        Some(t) => Some(
            Thresholds::load(t)
                .with_context(|| format!("cannot read the thresholds {}", t.display()))?,
        ),
        None => None,
    };
    let html = page::render_page(&input, gate.as_ref())?;
    let out = input.dir().join(REPORT_FILE);
    infergate_model::rundir::write_atomic(&out, html.as_bytes())
        .with_context(|| format!("cannot write {}", out.display()))?;
    Ok(out)
}
