//! *(runtime)* The trials of `bench ab`: the gate's plan, set up once (arms, engines, checks),
//! run through [`infergate_model::ab::run`] with [`CliMeasure`], each trial an ordinary run directory in
//! the gate's directory (`warmup-baseline/`, `001-baseline/`, `002-candidate/`, ...), `ab.json`
//! rewritten after every trial and look.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Context;
use bench::runner::{self, RunControl, isolation};
use infergate_model::ab::{
    self, AbFile, Arm, ArmInfo, Design, Measure, Progress, Slot, Step, TrialEntry, TrialValues,
    WarmupEntry,
};
use infergate_model::config::{ResolvedProfile, Target};
use infergate_model::summary::{EngineParams, Isolation, RunStatus};
use infergate_model::workload::WorkloadSlice;

use crate::engine_process::EngineProcess;
use crate::plan::BenchPlan;

/// One arm, ready to measure.
pub struct ArmRun {
    pub arm: Arm,
    /// The profile its trials run (the candidate's with its bench settings).
    pub profile: ResolvedProfile,
    /// The engine config file it runs (written into the gate's directory), relative to the root.
    pub config_rel: String,
    pub params: EngineParams,
    /// Its engine process (llama.cpp, vLLM); `None` for the embedded simulator.
    pub engine: Option<EngineProcess>,
    pub info: ArmInfo,
}

/// Measures the trials of a gate and keeps `ab.json` up to date.
pub(crate) struct CliMeasure<'a> {
    pub plan: &'a BenchPlan,
    pub dir: PathBuf,
    pub design: Design,
    pub arms: [ArmRun; 2],
    pub file: AbFile,
    /// Per trial: its entry beyond the values (directory, status, isolation).
    entries: Vec<TrialEntry>,
    warmups: Vec<WarmupEntry>,
    /// Set by Ctrl-C or SIGTERM between runs (during a run, the run itself stops).
    stop: Arc<AtomicBool>,
    /// Each arm's trial summaries, in order (for the noise history).
    pub summaries: [Vec<infergate_model::Summary>; 2],
    /// The noise history to pool from (`None`: `--no-history`), read once; the priors made
    /// from it once a baseline trial names the scenario.
    pub history: Option<crate::history_store::History>,
    priors: Option<BTreeMap<String, infergate_model::ab::Prior>>,
    /// Each arm's preflight, from its first run: the later runs against the same engine take
    /// it instead of asking again (an embedded simulator, new for every run, is asked anew).
    preflights: [Option<bench::client::Resolved>; 2],
}

/// Why a trial could not run (an error, not a verdict).
#[derive(Debug, thiserror::Error)]
pub(crate) enum MeasureError {
    #[error(transparent)]
    Run(#[from] anyhow::Error),
    #[error(transparent)]
    Stats(#[from] infergate_model::stats::StatsError),
}

impl<'a> CliMeasure<'a> {
    pub fn new(
        plan: &'a BenchPlan,
        dir: PathBuf,
        (design, arms): (Design, [ArmRun; 2]),
        file: AbFile,
        stop: Arc<AtomicBool>,
    ) -> Self {
        CliMeasure {
            plan,
            dir,
            design,
            arms,
            file,
            entries: Vec::new(),
            warmups: Vec::new(),
            stop,
            summaries: [Vec::new(), Vec::new()],
            history: None,
            priors: None,
            preflights: [None, None],
        }
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    fn arm(&self, arm: Arm) -> &ArmRun {
        &self.arms[(arm == Arm::Candidate) as usize]
    }

    /// The arm's profile for a run of `requests` measured requests without warmup, pointed at
    /// its engine, its simulator noise drawn for `trial`.
    fn profile_for(&self, arm: Arm, requests: u32, trial: u64) -> anyhow::Result<ResolvedProfile> {
        let a = self.arm(arm);
        let mut p = a.profile.clone();
        let load = &mut p.profile.load;
        load.requests = Some(requests as u64);
        load.duration_s = None;
        load.warmup_requests = 0;
        load.warmup_trials = 0;
        p.profile.trials = None;
        match &a.engine {
            Some(e) => {
                let target = Target::at(&e.base_url).with_model(&e.model_id);
                p.profile.target = Some(crate::plan::CLI_TARGET.into());
                p.target = Some((crate::plan::CLI_TARGET.into(), target));
            }
            None => {
                p.profile.sim.engine_config = a.config_rel.clone();
                let noise = &p.profile.sim.noise;
                if noise.is_on() {
                    p.profile.sim.noise = noise.for_trial(trial);
                }
            }
        }
        Ok(p)
    }

    /// One run of `arm` into `name`: `None` when interrupted before or during its load.
    fn run_one(
        &mut self,
        arm: Arm,
        name: &str,
        (requests, trial): (u32, u64),
        slice: Option<WorkloadSlice>,
        isolation: Option<Isolation>,
    ) -> anyhow::Result<Option<runner::RunOutcome>> {
        let profile = self.profile_for(arm, requests, trial)?;
        let run_id = format!("{}-{name}", self.file.run_id);
        let mut spec = self.plan.run_spec(profile, self.dir.join(name), run_id);
        spec.engine = Some(self.arm(arm).params.clone());
        spec.slice = slice;
        spec.isolation = isolation;
        spec.preflight = self.preflights[(arm == Arm::Candidate) as usize].clone();
        spec.quiet = true;
        spec.invocation = self.plan.invocation(Some(format!("A/B {name}")));
        let rt = crate::measure::runtime()?;
        let outcome = match rt.block_on(runner::run(spec, RunControl::default())) {
            Ok(o) => o,
            Err(runner::RunError::Interrupted { .. }) => return Ok(None),
            Err(e) => {
                return Err(anyhow::Error::new(e).context(format!("the A/B run {name} failed")));
            }
        };
        if outcome.summary.status == RunStatus::Interrupted {
            return Ok(None);
        }
        self.preflights[(arm == Arm::Candidate) as usize] = Some(outcome.preflight.clone());
        Ok(Some(outcome))
    }

    /// Reset the arm's engine before a trial (a real engine), or say it is fresh.
    fn isolate(&self, arm: Arm) -> anyhow::Result<Isolation> {
        match &self.arm(arm).engine {
            None => Ok(Isolation::FreshEngine),
            Some(e) => {
                let rt = crate::measure::runtime()?;
                Ok(rt.block_on(isolation::reset_caches(&e.base_url, None)))
            }
        }
    }

    /// Write `ab.json` with what is measured so far.
    fn write(&mut self, progress: &Progress) -> anyhow::Result<()> {
        self.file.warmup = self.warmups.clone();
        self.file.trials = self.entries.clone();
        self.file.looks = progress.looks.clone();
        self.file.requests = progress.requests();
        infergate_model::artifact::write(&self.dir, &self.file).context("cannot write ab.json")?;
        Ok(())
    }
}

/// A trial's directory: its number and arm (`007-candidate`).
pub(crate) fn trial_dir(slot: &Slot) -> String {
    format!("{:03}-{}", slot.trial, slot.arm.as_str())
}

/// The prompt salt of a trial: the same for the k-th trial of each arm in a block (the arms
/// see the same prompts), another for every other trial (no arm's engine sees a prompt twice).
pub fn salt(design: &Design, slot: &Slot) -> u64 {
    let order = design.order(slot.block);
    let position = (slot.trial - 1) % 4;
    let nth = order[..position as usize].iter().filter(|&&a| a == slot.arm).count();
    infergate_model::hash::fnv1a(format!("ab {} {} {}", design.seed, slot.block, nth).as_bytes())
        | 1
}

impl Measure for CliMeasure<'_> {
    type Error = MeasureError;

    fn warmup(&mut self, arm: Arm) -> Result<Step<u64>, MeasureError> {
        let n = self.design.warmup_requests;
        if self.stopped() {
            return Ok(Step::Interrupted);
        }
        if n == 0 {
            return Ok(Step::Done(0));
        }
        let name = format!("warmup-{}", arm.as_str());
        eprintln!("A/B warmup of the {}: {n} requests", arm.as_str());
        let Some(out) = self.run_one(arm, &name, (n, 1 << 40 | arm as u64), None, None)? else {
            return Ok(Step::Interrupted);
        };
        let requests = out.summary.requests.total;
        self.warmups.push(WarmupEntry { arm, dir: name, requests });
        Ok(Step::Done(requests))
    }

    fn trial(&mut self, slot: &Slot) -> Result<Step<TrialValues>, MeasureError> {
        if self.stopped() {
            return Ok(Step::Interrupted);
        }
        let isolation = self.isolate(slot.arm)?;
        let name = trial_dir(slot);
        let slice = WorkloadSlice { first_item: slot.first_item, salt: salt(&self.design, slot) };
        let m = self.design.trial_requests;
        let Some(out) = self.run_one(
            slot.arm,
            &name,
            (m, slot.trial as u64),
            Some(slice),
            Some(isolation.clone()),
        )?
        else {
            return Ok(Step::Interrupted);
        };
        self.summaries[(slot.arm == Arm::Candidate) as usize].push(out.summary.clone());
        let s = &out.summary;
        let values: BTreeMap<String, Option<f64>> =
            self.file.checks.iter().map(|c| (c.metric.to_string(), s.metric(c.metric))).collect();
        self.entries.push(TrialEntry {
            slot: *slot,
            dir: name.clone(),
            run_id: s.run_id.clone(),
            status: s.status,
            requests: s.requests.total,
            values: values.clone(),
            isolation: Some(isolation.text()),
            host_busy: s.environment.noise.as_ref().is_some_and(|n| n.busy),
        });
        let ttft = values.get("metrics.ttft_ms.p99").copied().flatten();
        eprintln!(
            "trial {} (block {}, {}): {} requests, {} ok{}",
            slot.trial,
            slot.block,
            slot.arm.as_str(),
            s.requests.total,
            s.requests.ok,
            ttft.map(|t| format!(", TTFT P99 {} ms", crate::text::num(t))).unwrap_or_default()
        );
        Ok(Step::Done(TrialValues { values, requests: s.requests.total }))
    }

    fn priors(&mut self, _so_far: &Progress) -> BTreeMap<String, infergate_model::ab::Prior> {
        if self.priors.is_none()
            && let (Some(h), Some(first)) = (&self.history, self.summaries[0].first())
        {
            let metrics: Vec<_> = self.file.checks.iter().map(|c| c.metric).collect();
            let p = infergate_policy::history::priors::ab_priors(&h.entries, first, &metrics);
            self.file.priors = p.clone();
            self.file.notes.push(format!("noise history: {}", h.describe()));
            self.priors = Some(p);
        }
        self.priors.clone().unwrap_or_default()
    }

    fn progress(&mut self, so_far: &Progress) -> Result<(), MeasureError> {
        self.write(so_far)?;
        // Once, right after the look (the trials of the next block follow before the next).
        let just_looked = |l: &&ab::Look| l.after_blocks as usize * 4 == so_far.trials.len();
        if let Some(look) = so_far.looks.last().filter(just_looked) {
            eprintln!(
                "look {} after {} blocks ({} trials): {}",
                look.number,
                look.after_blocks,
                so_far.trials.len(),
                match look.status {
                    ab::Verdict::Pass => "pass",
                    ab::Verdict::Fail => "fail",
                    _ if look.number as usize == self.design.looks.len() => "undecided (last look)",
                    ab::Verdict::Inconclusive => "undecided, going on",
                }
            );
        }
        Ok(())
    }
}

/// The gate's directory relative to `root` for messages.
pub fn shown(dir: &Path, root: &Path) -> String {
    dir.strip_prefix(root).unwrap_or(dir).display().to_string()
}
