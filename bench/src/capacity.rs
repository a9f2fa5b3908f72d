//! Running a capacity search: the model's [`Search`] asks for trials, each one a normal run
//! through the runner (`<dir>/probe-NN-<dimension>-<load>/trial-KK/`), and takes back what the
//! run measured ([`measure`]); `capacity.json` is rewritten atomically after every trial, so an
//! interrupted search (Ctrl-C) keeps every trial it measured. A target's caches are reset before
//! every trial, as a trial set does ([`crate::runner::isolation`]).

use std::path::Path;
use std::time::Instant;

use infergate_model::capacity::{CapacityFile, Search, Step, TrialMeasure, probe_dir_name};
use infergate_model::metrics::Slo;
use infergate_model::summary::{RunStatus, Summary};

use crate::runner::{self, RunControl, RunError, RunSpec};

/// What a search runs and where it writes.
#[derive(Clone, Debug)]
pub struct CapacitySetup {
    /// The search directory (probe directories go inside it).
    pub dir: std::path::PathBuf,
    pub capacity_id: String,
    pub profile: String,
    /// The objectives attainment counts against (the profile's `[slo]`).
    pub slo: Slo,
    /// The engine config file the probes run against, for the record (repository-relative).
    pub engine_config: Option<String>,
}

/// The directory of trial `trial` (from 1) of probe `probe` (from 0) at `load`, relative to the
/// search's directory.
pub fn trial_dir(search: &Search, probe: usize, load: f64, trial: u32) -> String {
    format!("{}/trial-{trial:02}", probe_dir_name(probe, search.spec.dimension, load))
}

/// What a finished trial measured: its SLO attainment and limits as a gate reads them
/// (`Summary::gated_metric`: the plateau's figures when the profile gates on its plateau),
/// each objective's share from its records, the requests it sent and whether it was stopped
/// for over-saturation.
pub fn measure(
    search: &Search,
    slo: &Slo,
    dir: &Path,
    rel: String,
    s: &Summary,
    seconds: f64,
) -> TrialMeasure {
    let objectives = infergate_model::rundir::read_records(dir)
        .map(|r| slo.attainment_by_objective(&r.records))
        .unwrap_or_default();
    TrialMeasure {
        dir: Some(rel),
        attainment: s.gated_metric(infergate_model::metric::MetricPath::named("goodput.ratio")),
        objectives,
        limits: search.spec.limits.iter().map(|l| s.gated_metric(l.metric)).collect(),
        requests: s.requests.total + s.requests.warmup,
        seconds,
        oversaturated: s.status == RunStatus::Oversaturated,
        window: Some(if s.gates_on_plateau() { "plateau" } else { "window" }.to_string()),
    }
}

/// The file a search in this state writes.
fn file_of(setup: &CapacitySetup, search: &Search) -> CapacityFile {
    let mut f = CapacityFile::new(
        setup.capacity_id.clone(),
        setup.profile.clone(),
        setup.slo.clone(),
        search.clone(),
    );
    f.engine_config = setup.engine_config.clone();
    f
}

/// How a search ended: its file (as written), and whether Ctrl-C or SIGTERM stopped it.
#[derive(Debug)]
pub struct CapacityRun {
    pub file: CapacityFile,
    /// Ctrl-C or SIGTERM stopped a trial (before or during its load): the search is marked
    /// interrupted and keeps every trial measured before.
    pub interrupted: bool,
    /// A trial that could not run ended the search (after at least one trial ran; the file's
    /// note says which).
    pub failure: Option<RunError>,
}

/// Run the search to its end: every trial `make_spec(search, probe, load, trial)` builds (its
/// `out_dir` inside the search's directory), `on_trial` told of each. Stops (the search marked
/// interrupted, the note says why) when a run is interrupted or cannot run; an error only when
/// not one trial ran.
pub async fn run(
    setup: &CapacitySetup,
    mut search: Search,
    control: RunControl,
    mut make_spec: impl FnMut(&Search, usize, f64, u32) -> Result<RunSpec, RunError>,
    mut on_trial: impl FnMut(&Search, usize, &TrialMeasure, &Summary),
) -> Result<CapacityRun, RunError> {
    let dir = setup.dir.as_path();
    std::fs::create_dir_all(dir).map_err(|source| {
        RunError::RunDir(infergate_model::rundir::RunDirError::Io {
            path: dir.to_path_buf(),
            source,
        })
    })?;
    let mut failure = None;
    let mut interrupted = false;
    while let Step::Measure { probe, load, trial } = search.next_step() {
        // A trial stopped by the over-saturation watch leaves the control stopped: the next
        // trial starts afresh, unless Ctrl-C stopped the search.
        if control.rearm() {
            interrupted = true;
            search.interrupt();
            break;
        }
        let mut spec = match make_spec(&search, probe, load, trial) {
            Ok(spec) => spec,
            Err(e) => {
                failure = Some(e);
                break;
            }
        };
        if spec.isolation.is_none() {
            spec.isolation = Some(runner::isolation::isolate(&spec.profile).await);
        }
        let rel = spec
            .out_dir
            .strip_prefix(dir)
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| spec.out_dir.display().to_string());
        let started = Instant::now();
        match runner::run(spec, control.clone()).await {
            Ok(out) => {
                let m = measure(
                    &search,
                    &setup.slo,
                    &out.dir,
                    rel,
                    &out.summary,
                    started.elapsed().as_secs_f64(),
                );
                interrupted = out.summary.status == RunStatus::Interrupted;
                if interrupted {
                    // An interrupted trial is kept on disk but not decided on.
                    search.interrupt();
                } else {
                    search.add_trial(probe, m.clone());
                }
                on_trial(&search, probe, &m, &out.summary);
                file_of(setup, &search).write(dir).map_err(RunError::Artifact)?;
                if interrupted {
                    break;
                }
            }
            Err(RunError::Interrupted { .. }) => {
                // Stopped before the trial's load: nothing of it is measured.
                interrupted = true;
                search.interrupt();
                break;
            }
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    let mut file = file_of(setup, &search);
    if let Some(e) = &failure {
        if search.trials == 0 {
            return Err(failure.expect("a failure"));
        }
        search.interrupt();
        file = file_of(setup, &search);
        file.notes.push(format!("trial {} could not run: {e}", search.trials + 1));
    }
    file.write(dir).map_err(RunError::Artifact)?;
    Ok(CapacityRun { file, interrupted, failure })
}
