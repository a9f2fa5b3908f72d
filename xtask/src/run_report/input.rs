//! What a report is made of, read from the files a run, a trial set, a sweep, a capacity search,
//! a strategy comparison or a tune wrote (`summary.json`, `requests.jsonl`, `trials.json`,
//! `sweep.json`, `capacity.json`, `comparison.json`, `tune.json`; docs/run-directory.md).
//! A new kind of result (trial sets, tunes, `compare` outputs) is one more [`Input`] variant,
//! one more arm in [`read`] and one in the page.

use std::path::{Path, PathBuf};

use anyhow::Context;
use infergate_model::Summary;
use infergate_model::capacity::{CAPACITY_FILE, CapacityFile};
use infergate_model::record::RequestRecord;
use infergate_model::strategy_compare::{COMPARISON_FILE, StrategyComparison};
use infergate_model::sweep::{SWEEP_FILE, SweepSummary};
use infergate_model::trials::{TRIALS_FILE, TrialsFile};

use infergate_policy::tune::model::{TUNE_FILE, TuneFile};

use infergate_model::rundir::SUMMARY_FILE;

/// One run: its summary and its records.
pub struct RunInput {
    /// How the run is named on the page (the run id, a stage's load, a strategy).
    pub name: String,
    pub dir: PathBuf,
    pub summary: Summary,
    pub records: Vec<RequestRecord>,
    /// Why the records are missing or incomplete, when they are.
    pub records_note: Option<String>,
}

impl RunInput {
    /// The measured requests (warmup left out), the requests every metric counts.
    pub fn measured(&self) -> Vec<&RequestRecord> {
        self.records.iter().filter(|r| !r.warmup).collect()
    }
}

/// What a report is about.
pub enum Input {
    Run(Box<RunInput>),
    Sweep {
        dir: PathBuf,
        sweep: SweepSummary,
        stages: Vec<RunInput>,
        notes: Vec<String>,
    },
    Comparison {
        dir: PathBuf,
        comparison: StrategyComparison,
        runs: Vec<RunInput>,
        notes: Vec<String>,
    },
    /// A tune (`tune.json`): its configurations, fronts and winner.
    Tune {
        dir: PathBuf,
        tune: Box<TuneFile>,
        notes: Vec<String>,
    },
    /// A capacity search (`capacity.json`): its probes, the bracket, and the trials of the
    /// probes at the bracket's ends.
    Capacity {
        dir: PathBuf,
        capacity: Box<CapacityFile>,
        trials: Vec<RunInput>,
        notes: Vec<String>,
    },
    /// A trial set (`trials.json`): its estimates and its trials.
    TrialSet {
        dir: PathBuf,
        index: TrialsFile,
        trials: Vec<RunInput>,
        notes: Vec<String>,
    },
}

impl Input {
    /// The directory the report is written into.
    pub fn dir(&self) -> &Path {
        match self {
            Input::Run(r) => &r.dir,
            Input::Sweep { dir, .. }
            | Input::Comparison { dir, .. }
            | Input::TrialSet { dir, .. }
            | Input::Capacity { dir, .. }
            | Input::Tune { dir, .. } => dir,
        }
    }
}

/// Read what `path` holds: a sweep directory (`sweep.json`), a capacity search
/// (`capacity.json`), a strategy comparison (`comparison.json`), a tune (`tune.json`), a trial
/// set (`trials.json`) or a run directory (`summary.json`); a path to one of those files stands
/// for its directory.
pub fn read(path: &Path) -> anyhow::Result<Input> {
    let dir = if path.is_file() {
        path.parent().unwrap_or(Path::new(".")).to_path_buf()
    } else {
        path.to_path_buf()
    };
    if !dir.is_dir() {
        anyhow::bail!(
            "{} does not exist: give a run, trial set, sweep, capacity, strategy comparison or tune \
             directory",
            path.display()
        );
    }
    if dir.join(SWEEP_FILE).is_file() {
        let sweep = SweepSummary::read(&dir)?;
        let mut notes = Vec::new();
        let mut stages = Vec::new();
        for st in &sweep.stages {
            let name = format!("{}={}", sweep.dimension.name(), crate::chart::axis::label(st.load));
            match read_run(&dir.join(&st.dir), name) {
                Ok(run) => stages.push(run),
                Err(e) => notes.push(format!("stage {} left out: {e:#}", st.stage)),
            }
        }
        return Ok(Input::Sweep { dir, sweep, stages, notes });
    }
    if dir.join(CAPACITY_FILE).is_file() {
        return read_capacity(dir);
    }
    if dir.join(COMPARISON_FILE).is_file() {
        let comparison = StrategyComparison::read(&dir)?;
        let mut notes = Vec::new();
        let mut runs = Vec::new();
        for (strategy, run_dir) in comparison.run_dirs(&dir) {
            match read_run(&run_dir, strategy.as_str().to_string()) {
                Ok(run) => runs.push(run),
                Err(e) => notes.push(format!("{} left out: {e:#}", strategy.as_str())),
            }
        }
        return Ok(Input::Comparison { dir, comparison, runs, notes });
    }
    if dir.join(TUNE_FILE).is_file() {
        let tune = TuneFile::read(&dir)?;
        let notes = tune.warnings.clone();
        return Ok(Input::Tune { dir, tune: Box::new(tune), notes });
    }
    if dir.join(TRIALS_FILE).is_file() {
        let index = TrialsFile::read(&dir).context("cannot read the trial set")?;
        let mut notes = index.notes.clone();
        if let Some(cold) = &index.cold_start {
            notes.push(cold.note.clone());
        }
        let mut trials = Vec::new();
        for t in &index.trials {
            match read_run(&dir.join(&t.dir), t.dir.clone()) {
                Ok(run) => trials.push(run),
                Err(e) => notes.push(format!("{} left out: {e:#}", t.dir)),
            }
        }
        return Ok(Input::TrialSet { dir, index, trials, notes });
    }
    if dir.join(SUMMARY_FILE).is_file() {
        let summary = Summary::read(&dir.join(SUMMARY_FILE))?;
        let name = summary.run_id.clone();
        return read_run(&dir, name).map(|r| Input::Run(Box::new(r)));
    }
    anyhow::bail!(
        "{} holds no {SUMMARY_FILE}, {TRIALS_FILE}, {SWEEP_FILE}, {CAPACITY_FILE}, \
         {COMPARISON_FILE} or {TUNE_FILE}: give a run directory, a trial set, a sweep, a capacity \
         search, a strategy comparison or a tune directory",
        dir.display()
    )
}

/// A capacity search: `capacity.json` and the trials of the probes at the bracket's ends (each
/// named by its load and trial), whose latency distributions the page overlays.
fn read_capacity(dir: PathBuf) -> anyhow::Result<Input> {
    let capacity = CapacityFile::read(&dir).context("cannot read the capacity search")?;
    let mut notes = Vec::new();
    let mut trials = Vec::new();
    let ends = [capacity.bracket.pass, capacity.bracket.fail];
    let dim = capacity.search.spec.dimension.name();
    for p in capacity.search.probes.iter().filter(|p| ends.contains(&Some(p.load))) {
        for (k, t) in p.trials.iter().enumerate() {
            let Some(rel) = &t.dir else { continue };
            let name = format!("{dim}={} #{}", crate::chart::axis::label(p.load), k + 1);
            match read_run(&dir.join(rel), name) {
                Ok(run) => trials.push(run),
                Err(e) => notes.push(format!("{rel} left out: {e:#}")),
            }
        }
    }
    Ok(Input::Capacity { dir, capacity: Box::new(capacity), trials, notes })
}

/// One run directory: its summary (required) and its records (a missing or damaged
/// `requests.jsonl` leaves the charts that need them blank, with the reason).
pub(crate) fn read_run(dir: &Path, name: String) -> anyhow::Result<RunInput> {
    let summary_path = dir.join(SUMMARY_FILE);
    let summary = Summary::read(&summary_path)
        .with_context(|| format!("cannot read {}", summary_path.display()))?;
    let (records, records_note) = match infergate_model::rundir::read_records(dir) {
        Ok(r) => {
            let note = r.truncated_tail.then(|| {
                format!(
                    "the last line of {} was cut short and is left out",
                    infergate_model::rundir::REQUESTS_FILE
                )
            });
            (r.records, note)
        }
        Err(e) => (vec![], Some(format!("per-request charts are blank: {e}"))),
    };
    Ok(RunInput { name, dir: dir.to_path_buf(), summary, records, records_note })
}
