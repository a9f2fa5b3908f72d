//! The sequential procedure of an A/B gate, independent of how a trial is measured: the blocks
//! of the [`Design`] are measured one after another through a [`Measure`] (the CLI's runs of
//! real engines, or the engine model in virtual time in the tests), and after each look's block
//! every check is decided ([`judge`]) at the look's nominal levels. The gate stops at the first
//! look where a blocking check fails or every blocking check passes, else after the last.
//!
//! The levels: the fail side shares `alpha_fail` over the blocking checks (Bonferroni) and over
//! the looks (the design's [`LookRule`](crate::stats::LookRule)); the pass side spends
//! `alpha_pass` over the looks for each check.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::decide::{BlockValues, BudgetCheck, CheckLook, Prior, judge};
use super::design::{Arm, Design, Slot};
use crate::metric::MetricPath;
use crate::stats::Verdict;
use crate::stats::{StatsError, nominal_levels};

/// The error rates an A/B gate keeps.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Criteria {
    /// The chance that an unchanged configuration fails (every look, every blocking check).
    pub alpha_fail: f64,
    /// The chance that a configuration regressed by a check's detect size passes it.
    pub alpha_pass: f64,
}

impl Default for Criteria {
    fn default() -> Self {
        Criteria {
            alpha_fail: super::decide::DEFAULT_ALPHA_FAIL,
            alpha_pass: super::decide::DEFAULT_ALPHA_PASS,
        }
    }
}

/// What one trial measured: each check's metric (blank when not measured) and the requests it
/// sent.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrialValues {
    pub values: BTreeMap<String, Option<f64>>,
    pub requests: u64,
}

/// A measurement's end: done, or stopped by Ctrl-C.
#[derive(Clone, Debug, PartialEq)]
pub enum Step<T> {
    Done(T),
    Interrupted,
}

/// How the trials are measured.
pub trait Measure {
    type Error;
    /// Warm `arm`'s engine up; the requests it sent.
    fn warmup(&mut self, arm: Arm) -> Result<Step<u64>, Self::Error>;
    /// Measure one trial.
    fn trial(&mut self, slot: &Slot) -> Result<Step<TrialValues>, Self::Error>;
    /// Priors of the checks from a noise history, asked for before each look (they may need a
    /// measured trial to know the scenario). None by default.
    fn priors(&mut self, _so_far: &Progress) -> BTreeMap<String, Prior> {
        BTreeMap::new()
    }
    /// Called after every trial and look with everything so far (to write it down).
    fn progress(&mut self, _so_far: &Progress) -> Result<(), Self::Error> {
        Ok(())
    }
}

/// One look: after how many blocks, at which levels, and every check's verdict.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Look {
    /// From 1.
    pub number: u32,
    pub after_blocks: u32,
    /// One-sided nominal level of each blocking check's fail side, and of the pass side.
    pub alpha_fail: f64,
    pub alpha_pass: f64,
    pub checks: Vec<CheckLook>,
    pub status: Verdict,
}

/// Why the gate stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stopped {
    /// A look decided.
    Decided,
    /// The last look was made and could not decide.
    AllLooks,
    /// Ctrl-C or SIGTERM.
    Interrupted,
}

/// Everything measured and decided so far.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Progress {
    pub warmups: Vec<(Arm, u64)>,
    pub trials: Vec<(Slot, TrialValues)>,
    pub looks: Vec<Look>,
}

impl Progress {
    /// Requests sent, warmups included.
    pub fn requests(&self) -> u64 {
        self.warmups.iter().map(|w| w.1).sum::<u64>()
            + self.trials.iter().map(|t| t.1.requests).sum::<u64>()
    }

    /// Blocks whose four trials were measured.
    pub fn blocks(&self) -> u32 {
        (self.trials.len() / 4) as u32
    }
}

/// The end of a gate.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    pub progress: Progress,
    pub stopped: Stopped,
    /// The last look's verdict (`None`: interrupted before the first look).
    pub status: Option<Verdict>,
}

/// Each look's nominal levels: (fail side per blocking check, pass side).
pub fn levels(
    design: &Design,
    criteria: &Criteria,
    checks: &[BudgetCheck],
) -> Result<Vec<(f64, f64)>, StatsError> {
    let blocking = checks.iter().filter(|c| c.blocking).count().max(1);
    let fractions = design.fractions();
    let fail =
        nominal_levels(design.spending.fail, criteria.alpha_fail / blocking as f64, &fractions)?;
    let pass = nominal_levels(design.spending.pass, criteria.alpha_pass, &fractions)?;
    Ok(fail.into_iter().zip(pass).collect())
}

/// Each complete block's four (arm, value of `metric`) pairs.
fn block_values(metric: MetricPath, trials: &[(Slot, TrialValues)]) -> Vec<BlockValues> {
    trials
        .chunks_exact(4)
        .map(|b| {
            std::array::from_fn(|i| {
                (b[i].0.arm, b[i].1.values.get(metric.as_str()).copied().flatten())
            })
        })
        .collect()
}

/// Each check's block differences over the complete blocks of `trials`.
pub fn paired_differences(
    checks: &[BudgetCheck],
    trials: &[(Slot, TrialValues)],
) -> BTreeMap<String, Vec<f64>> {
    checks
        .iter()
        .map(|check| {
            let values = block_values(check.metric, trials);
            (check.metric.to_string(), super::decide::block_differences(check, &values))
        })
        .collect()
}

/// The verdict of every check over the complete blocks of `trials` at look `index` (from 0)
/// with its levels.
pub(crate) fn look_at(
    checks: &[BudgetCheck],
    priors: &BTreeMap<String, Prior>,
    trials: &[(Slot, TrialValues)],
    index: usize,
    (alpha_fail, alpha_pass): (f64, f64),
) -> Look {
    let blocks = (trials.len() / 4) as u32;
    let results = checks
        .iter()
        .map(|check| {
            let values = block_values(check.metric, trials);
            judge(check, &values, priors.get(check.metric.as_str()), alpha_fail, alpha_pass)
        })
        .collect::<Vec<_>>();
    let blocking = || results.iter().filter(|c| c.blocking);
    let status = if blocking().any(|c| c.verdict == Verdict::Fail) {
        Verdict::Fail
    } else if blocking().count() > 0 && blocking().all(|c| c.verdict == Verdict::Pass) {
        Verdict::Pass
    } else {
        Verdict::Inconclusive
    };
    Look {
        number: index as u32 + 1,
        after_blocks: blocks,
        alpha_fail,
        alpha_pass,
        checks: results,
        status,
    }
}

/// Measure the design's blocks and look at each of its looks until one decides.
pub fn run<M: Measure>(
    design: &Design,
    criteria: &Criteria,
    checks: &[BudgetCheck],
    priors: &BTreeMap<String, Prior>,
    measure: &mut M,
) -> Result<Outcome, M::Error>
where
    M::Error: From<StatsError>,
{
    let levels = levels(design, criteria, checks)?;
    let mut progress = Progress::default();
    let interrupted = |progress: Progress| {
        let status = progress.looks.last().map(|l| l.status);
        Outcome { progress, stopped: Stopped::Interrupted, status }
    };
    for arm in [Arm::Baseline, Arm::Candidate] {
        match measure.warmup(arm)? {
            Step::Done(requests) => progress.warmups.push((arm, requests)),
            Step::Interrupted => return Ok(interrupted(progress)),
        }
        measure.progress(&progress)?;
    }
    for block in 1..=design.blocks {
        for slot in design.slots(block) {
            match measure.trial(&slot)? {
                Step::Done(values) => progress.trials.push((slot, values)),
                Step::Interrupted => return Ok(interrupted(progress)),
            }
            measure.progress(&progress)?;
        }
        let Some(index) = design.look_after(block) else { continue };
        let mut all = measure.priors(&progress);
        for (k, v) in priors {
            all.entry(k.clone()).or_insert_with(|| v.clone());
        }
        let look = look_at(checks, &all, &progress.trials, index, levels[index]);
        let status = look.status;
        progress.looks.push(look);
        measure.progress(&progress)?;
        let last = index + 1 == design.looks.len();
        if status != Verdict::Inconclusive || last {
            let stopped =
                if status == Verdict::Inconclusive { Stopped::AllLooks } else { Stopped::Decided };
            return Ok(Outcome { progress, stopped, status: Some(status) });
        }
    }
    // A design always ends with a look after its last block.
    let status = progress.looks.last().map(|l| l.status);
    Ok(Outcome { progress, stopped: Stopped::AllLooks, status })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ab::design::PlanInput;
    use crate::stats::LookRule;

    /// Trials of a known model: each arm's TTFT P99 a fixed value times a factor drawn per
    /// trial, plus a linear drift over the job.
    struct Model {
        baseline: f64,
        candidate: f64,
        noise: Vec<f64>,
        drift: f64,
        stop_after: Option<u32>,
        progress_calls: usize,
    }

    impl Measure for Model {
        type Error = StatsError;
        fn warmup(&mut self, _arm: Arm) -> Result<Step<u64>, StatsError> {
            Ok(Step::Done(16))
        }
        fn trial(&mut self, slot: &Slot) -> Result<Step<TrialValues>, StatsError> {
            if self.stop_after.is_some_and(|n| slot.trial > n) {
                return Ok(Step::Interrupted);
            }
            let base = if slot.arm == Arm::Baseline { self.baseline } else { self.candidate };
            let noise = self.noise[slot.trial as usize % self.noise.len()];
            let v = base * noise * (1.0 + self.drift).powi(slot.trial as i32);
            let values = [("metrics.ttft_ms.p99".to_string(), Some(v))].into();
            Ok(Step::Done(TrialValues { values, requests: 11 }))
        }
        fn progress(&mut self, _so_far: &Progress) -> Result<(), StatsError> {
            self.progress_calls += 1;
            Ok(())
        }
    }

    fn design() -> Design {
        Design::plan(&PlanInput {
            max_requests: 1920,
            warmup_requests: 16,
            items: 80,
            measured: 80,
            trial_requests: None,
            looks: 5,
            spending: Default::default(),
            seed: 3,
        })
        .unwrap()
    }

    fn model(baseline: f64, candidate: f64, drift: f64) -> Model {
        let noise = (0..97).map(|i| 1.0 + 0.08 * (((i * 37) % 97) as f64 / 97.0 - 0.5)).collect();
        Model { baseline, candidate, noise, drift, stop_after: None, progress_calls: 0 }
    }

    fn checks() -> Vec<BudgetCheck> {
        vec![
            BudgetCheck::new(
                MetricPath::named("metrics.ttft_ms.p99"),
                0.05,
                None,
                true,
                "--budget 5%",
            )
            .unwrap(),
        ]
    }

    #[test]
    fn a_clear_regression_stops_early_and_an_unchanged_one_passes_despite_drift() {
        let d = design();
        let none = BTreeMap::new();
        let out =
            run(&d, &Criteria::default(), &checks(), &none, &mut model(100.0, 130.0, 0.0)).unwrap();
        assert_eq!((out.status, out.stopped), (Some(Verdict::Fail), Stopped::Decided));
        assert!(out.progress.blocks() < d.blocks, "stopped at a look before the last");
        assert_eq!(out.progress.requests(), 32 + out.progress.trials.len() as u64 * 11);
        // 2% drift per trial: 60% slower by the end, yet ABBA cancels it in every block.
        let mut m = model(100.0, 100.0, 0.02);
        let out = run(&d, &Criteria::default(), &checks(), &none, &mut m).unwrap();
        assert_eq!(out.status, Some(Verdict::Pass), "{:?}", out.progress.looks.last());
        let c = out.progress.looks.last().unwrap().checks[0].change.clone().unwrap();
        assert!(c.value.abs() < 0.03, "{c:?}");
        assert!(m.progress_calls >= out.progress.trials.len() + 2);
    }

    #[test]
    fn an_interrupted_gate_keeps_what_it_measured() {
        let d = design();
        let mut m = model(100.0, 100.0, 0.0);
        m.stop_after = Some(6);
        let out = run(&d, &Criteria::default(), &checks(), &BTreeMap::new(), &mut m).unwrap();
        assert_eq!((out.stopped, out.status), (Stopped::Interrupted, None));
        assert_eq!(out.progress.trials.len(), 6);
        assert_eq!(out.progress.blocks(), 1);
    }

    #[test]
    fn the_fail_side_is_shared_over_the_blocking_checks_and_the_looks() {
        let obf = crate::ab::design::Spending::both(LookRule::ObrienFleming);
        let d = Design { spending: obf, ..design() };
        let mut two = checks();
        two.push(
            BudgetCheck::new(MetricPath::named("metrics.tpot_ms.mean"), 0.05, None, true, "x")
                .unwrap(),
        );
        two.push(
            BudgetCheck::new(MetricPath::named("metrics.itl_jitter"), 0.05, None, false, "x")
                .unwrap(),
        );
        let l = levels(&d, &Criteria::default(), &two).unwrap();
        assert_eq!(l.len(), d.looks.len());
        // Two blocking checks: 0.5% each, spent over the looks (each look's nominal level at
        // most that, rising towards the last).
        assert!(l.iter().all(|x| x.0 <= 0.005 && x.1 <= 0.05), "{l:?}");
        assert!(l.windows(2).all(|w| w[0].0 < w[1].0), "{l:?}");
        let bonf =
            Design { spending: crate::ab::design::Spending::both(LookRule::Bonferroni), ..d };
        let lb = levels(&bonf, &Criteria::default(), &two).unwrap();
        assert!(lb.iter().all(|x| (x.0 - 0.001).abs() < 1e-12 && (x.1 - 0.005).abs() < 1e-12));
    }
}
