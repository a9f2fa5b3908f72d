//! Capacity under the SLO: the highest load (concurrency, or requests per second) at which a
//! configuration still meets its profile's goodput SLO, found by a search whose every probe is
//! decided from its interval over trials, and reported as a bracket: the highest load decided
//! pass and the lowest decided fail, never a single number the noise could have moved.
//!
//! - [`spec`]: the question ([`CapacitySpec`]: dimension, attainment target, percentile limits,
//!   range, resolution, trials per probe, budget), its parsers and its checks;
//! - [`search`]: the search as a state machine ([`Search`]) and a probe's decision
//!   ([`decide`]);
//! - this module: `capacity.json` ([`CapacityFile`]), the typed artifact a search writes.
//!
//! ```text
//! <capacity dir>/
//!   capacity.json                           the search ([`CapacityFile`])
//!   capacity.svg                            chart (written by `cargo xtask bench --capacity`)
//!   probe-01-concurrency-1/trial-01/        a normal run directory per trial
//! ```
//!
//! **SLO attainment** of a trial is the share of its measured requests meeting every objective
//! of the profile's goodput SLO: its `goodput.ratio`, read from the steady-state plateau when
//! one was found. docs/statistics.md, "Capacity under the SLO", states the method and the
//! figures of its checks.

pub mod search;
pub mod spec;

use serde::{Deserialize, Serialize};

pub use search::*;
pub use spec::*;

use crate::metrics::Slo;

pub const CAPACITY_FILE: &str = "capacity.json";
/// The `format_version` of `capacity.json` this tool writes and reads.
pub const FORMAT_VERSION: u32 = 1;

/// `capacity.json`: the search, its probes, and the answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CapacityFile {
    pub format_version: u32,
    pub capacity_id: String,
    /// The bench profile searched.
    pub profile: String,
    /// The objectives attainment counts against (the profile's `[slo]`).
    pub slo: Slo,
    /// The engine config the probes ran against, relative to the repository (when known).
    #[serde(default)]
    pub engine_config: Option<String>,
    /// The search: its spec, every probe and its trials, what it spent and why it stopped.
    pub search: Search,
    pub bracket: Bracket,
    /// The objective that broke at the bracket's failing end.
    pub binding: Option<String>,
    /// Loads between the bracket's ends that stayed inconclusive after all their trials.
    pub indeterminate: Vec<f64>,
    pub notes: Vec<String>,
}

impl CapacityFile {
    /// The file of a finished (or interrupted) search.
    pub fn new(capacity_id: String, profile: String, slo: Slo, search: Search) -> CapacityFile {
        let mut notes = Vec::new();
        let bracket = search.bracket();
        let dim = search.spec.dimension.name();
        if let Some(stop) = search.stop {
            notes.push(format!("the search ended: {}", stop.words()));
        }
        if bracket.pass.is_none() && bracket.fail.is_some() {
            notes.push(format!(
                "no {dim} was decided to hold the SLO: the capacity is below {}",
                crate::stats::sig_text(bracket.fail.unwrap_or_default())
            ));
        }
        let indeterminate = search.indeterminate();
        if !indeterminate.is_empty() {
            let l: Vec<String> = indeterminate.iter().map(|v| crate::stats::sig_text(*v)).collect();
            notes.push(format!(
                "indeterminate at {dim} {}: the attainment's interval straddled the target after \
                 every trial allowed",
                l.join(", ")
            ));
        }
        let odd = search.non_monotone();
        if !odd.is_empty() {
            let l: Vec<String> = odd.iter().map(|v| crate::stats::sig_text(*v)).collect();
            notes.push(format!(
                "not monotone: {dim} {} passed above the lowest failing load; the bracket is \
                 below the lowest failure",
                l.join(", ")
            ));
        }
        CapacityFile {
            format_version: FORMAT_VERSION,
            capacity_id,
            profile,
            slo,
            engine_config: None,
            binding: search.binding(),
            bracket,
            indeterminate,
            search,
            notes,
        }
    }

    /// The probe whose trials stand for the search where one load's figures are wanted (a
    /// record's other columns, a tune's row): the bracket's lower end, else (nothing passed)
    /// the lowest load probed with a trial.
    pub fn standing_probe(&self) -> Option<&Probe> {
        let probes = &self.search.probes;
        let pass = self.bracket.pass.and_then(|l| {
            probes.iter().find(|p| p.load == l && p.verdict == Some(crate::stats::Verdict::Pass))
        });
        pass.or_else(|| {
            probes.iter().filter(|p| !p.trials.is_empty()).min_by(|a, b| a.load.total_cmp(&b.load))
        })
    }

    /// Read `capacity.json` of a search directory (or the file itself).
    pub fn read(path: &std::path::Path) -> Result<CapacityFile, crate::artifact::ArtifactError> {
        crate::artifact::read(path)
    }

    /// Write it into `dir`, atomically.
    pub fn write(
        &self,
        dir: &std::path::Path,
    ) -> Result<std::path::PathBuf, crate::artifact::ArtifactError> {
        crate::artifact::write(dir, self)
    }
}

impl crate::artifact::Artifact for CapacityFile {
    const FILE: &'static str = CAPACITY_FILE;
    const VERSION: u32 = FORMAT_VERSION;
    const WHAT: &'static str = "a capacity search";
}

/// Whether `path` is a capacity search's directory (or its `capacity.json`).
pub fn is_capacity_dir(path: &std::path::Path) -> bool {
    path.join(CAPACITY_FILE).is_file() || path.file_name().is_some_and(|n| n == CAPACITY_FILE)
}

/// Directory name of probe `index` (from 0) at `load`.
pub fn probe_dir_name(index: usize, dimension: Dimension, load: f64) -> String {
    format!("probe-{:02}-{}-{}", index + 1, dimension.name(), load)
}

#[cfg(test)]
mod tests;
