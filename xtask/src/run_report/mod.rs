//! Reports of measured results, shared by the commands that print or write them (`report`,
//! `bench --report`, `bench merge`, `import`): the console tables of a run ([`console`]), what
//! a result directory holds ([`input`]) and the HTML page ([`page`]), written by [`write`].

pub mod console;
pub mod input;
pub mod page;

use std::path::{Path, PathBuf};

use anyhow::Context;

pub use console::{latency_table, overview_table, render};

use crate::thresholds::Thresholds;

/// The page's file name, in the directory it reports on.
pub const REPORT_FILE: &str = "report.html";

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
