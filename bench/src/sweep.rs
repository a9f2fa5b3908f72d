//! Running a load sweep: each stage a normal run through the runner, then the sweep summary
//! (`sweep.json`, the data and the knee in `infergate_model::sweep`).

use infergate_model::summary::Summary;
use infergate_model::sweep::{StageResult, SweepSetup, SweepSummary, write};

use crate::runner::{self, RunControl, RunError, RunSpec};

/// Run every stage (`make_spec(stage index, load)` builds its run), then write the sweep
/// summary. Stops early (and says so in the notes) when a stage is interrupted or cannot run.
pub async fn run(
    setup: &SweepSetup,
    control: RunControl,
    mut make_spec: impl FnMut(usize, f64) -> Result<RunSpec, RunError>,
    mut on_stage: impl FnMut(&StageResult, &Summary),
) -> Result<SweepSummary, RunError> {
    let (dir, spec) = (setup.dir.as_path(), &setup.spec);
    std::fs::create_dir_all(dir).map_err(|source| {
        RunError::RunDir(infergate_model::rundir::RunDirError::Io {
            path: dir.to_path_buf(),
            source,
        })
    })?;
    let mut stages = Vec::new();
    let mut first_error = None;
    for (i, &load) in spec.values.iter().enumerate() {
        // A stage stopped by the over-saturation watch leaves the control stopped: the next
        // stage starts afresh (an interrupted control stays so, and its run says it was).
        control.rearm();
        let run_spec = make_spec(i, load)?;
        let rel = run_spec
            .out_dir
            .strip_prefix(dir)
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| run_spec.out_dir.display().to_string());
        match runner::run(run_spec, control.clone()).await {
            Ok(out) => {
                let r = StageResult::from_summary(i + 1, load, rel, &out.summary);
                on_stage(&r, &out.summary);
                let interrupted =
                    out.summary.status == infergate_model::summary::RunStatus::Interrupted;
                stages.push(r);
                if interrupted {
                    break;
                }
            }
            Err(e) => {
                first_error = Some(e);
                break;
            }
        }
    }
    let mut sweep = SweepSummary::new(
        setup.sweep_id.clone(),
        spec,
        setup.plan.clone(),
        setup.slo.clone(),
        stages,
    );
    if let Some(e) = &first_error {
        sweep.notes.push(format!("stage {} could not run: {e}", sweep.stages.len() + 1));
    }
    if sweep.stages.is_empty() {
        if let Some(e) = first_error {
            return Err(e);
        }
    }
    write(dir, &sweep)?;
    Ok(sweep)
}
