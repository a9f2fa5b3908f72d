//! A run against thresholds: every threshold that applies to the run's bench profile is checked
//! as `measured <comparator> limit`. A metric the run did not measure is a failure, not a pass.
//! Pure: `gate` and `bench --gate` use the same code.
//!
//! What a check contributes to the gate comes from its [`Verdict`] and its threshold's
//! [`Action`] through [`Verdict::effect`] alone; counts, exit status and rendering read that.
//! A verdict that is neither pass nor fail (say, an inconclusive comparison once limits are
//! checked against confidence intervals) is one more variant with its effect and its words.

use bench::Summary;
use bench::summary::RunStatus;

use super::file::{Threshold, Thresholds};
use super::rule::Action;
use crate::exit::Status;

/// Outcome of one threshold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    /// Measured, and `measured <comparator> limit` does not hold.
    Fail,
    /// The run has no value for the metric: a failure.
    Missing,
    /// The run is not the scenario the threshold was set for (its settings differ from the
    /// threshold's `scenario`): a failure, never a silent pass; [`Check::scenario_diffs`] names
    /// the settings.
    OtherScenario,
    /// A sweep's stage at another load than the threshold's scenario: the sweep measures loads
    /// the record did not decide on by design, so the stage is reported as not this record's
    /// scenario, neither pass nor failure. Only the gate of a whole sweep gives it
    /// ([`GateReport::as_sweep_stage`]), and that gate fails a threshold no stage was the
    /// scenario of.
    NotThisScenario,
}

/// What a check does to the gate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Nothing to report.
    None,
    /// Reported; the gate still passes.
    Warns,
    /// The gate fails (exit 1).
    Blocks,
}

impl Verdict {
    /// The verdict of `measured` against `threshold` (`None`: not measured).
    pub fn judge(threshold: &Threshold, measured: Option<f64>) -> Verdict {
        match measured {
            None => Verdict::Missing,
            Some(v) if threshold.comparator.holds(v, threshold.limit) => Verdict::Pass,
            Some(_) => Verdict::Fail,
        }
    }

    /// Whether the threshold held.
    pub fn passed(self) -> bool {
        self == Verdict::Pass
    }

    /// What this verdict does to the gate under `action`.
    pub fn effect(self, action: Action) -> Effect {
        match (self, action) {
            (Verdict::Pass | Verdict::NotThisScenario, _) => Effect::None,
            (Verdict::Fail | Verdict::Missing | Verdict::OtherScenario, Action::Block) => {
                Effect::Blocks
            }
            (Verdict::Fail | Verdict::Missing | Verdict::OtherScenario, Action::Warn) => {
                Effect::Warns
            }
        }
    }
}

/// One threshold checked against one run.
#[derive(Clone, Debug, PartialEq)]
pub struct Check {
    pub threshold: Threshold,
    pub measured: Option<f64>,
    pub verdict: Verdict,
    /// The settings in which the run differs from the threshold's scenario:
    /// `load.concurrency 16 (set for 32)`.
    pub scenario_diffs: Vec<String>,
}

impl Check {
    /// Failed (including not measured): reported, whatever its action.
    pub fn failed(&self) -> bool {
        self.effect() != Effect::None
    }

    /// What this check does to the gate.
    pub fn effect(&self) -> Effect {
        self.verdict.effect(self.threshold.action)
    }
}

/// Every threshold checked against a run.
#[derive(Clone, Debug, PartialEq)]
pub struct GateReport {
    pub run_id: String,
    pub run_status: RunStatus,
    pub simulated: bool,
    /// The run's bench profile: thresholds scoped to another profile do not apply.
    pub profile: String,
    pub checks: Vec<Check>,
    /// Profiles of the thresholds that did not apply (sorted, unique).
    pub other_profiles: Vec<String>,
}

impl GateReport {
    fn count(&self, effect: Effect) -> usize {
        self.checks.iter().filter(|c| c.effect() == effect).count()
    }

    /// Checks that fail the gate (failed `block` thresholds).
    pub fn blocking_failures(&self) -> usize {
        self.count(Effect::Blocks)
    }

    /// Checks reported without failing the gate (failed `warn` thresholds).
    pub fn warnings(&self) -> usize {
        self.count(Effect::Warns)
    }

    /// Checks whose threshold held.
    pub fn passes(&self) -> usize {
        self.checks.iter().filter(|c| c.verdict.passed()).count()
    }

    /// Thresholds exist, but none for this run's scenario: nothing vouches for it.
    pub fn ungoverned(&self) -> bool {
        self.checks.is_empty() && !self.other_profiles.is_empty()
    }

    /// An interrupted run measured only part of its planned load: it cannot pass thresholds set
    /// for the whole load, so a gate with checks to make fails it, whatever its partial numbers
    /// say (a run stopped early can look better than the full load would have).
    pub fn partial(&self) -> bool {
        self.run_status == RunStatus::Interrupted && !self.checks.is_empty()
    }

    pub fn passed(&self) -> bool {
        self.blocking_failures() == 0 && !self.ungoverned() && !self.partial()
    }

    /// Exit status: policy violated when a `block` threshold failed, when no threshold applies
    /// to the run while other profiles have some, or when the run was interrupted.
    pub fn status(&self) -> Status {
        Status::from_ok(self.passed())
    }

    /// Checks of thresholds set for another scenario (a sweep stage's other load).
    pub fn not_this_scenario(&self) -> usize {
        self.checks.iter().filter(|c| c.verdict == Verdict::NotThisScenario).count()
    }

    /// The report of one stage of a sweep: a threshold set for another scenario than the
    /// stage's is not this record's scenario rather than a failure (the sweep's other loads are
    /// measured on purpose). A stage that is the scenario keeps every verdict.
    pub fn as_sweep_stage(mut self) -> GateReport {
        for c in &mut self.checks {
            if c.verdict == Verdict::OtherScenario {
                c.verdict = Verdict::NotThisScenario;
            }
        }
        self
    }
}

/// The settings of the run's resolved profile (`summary.config`) that differ from the
/// threshold's scenario, each `key value (set for value)`; `(unset)` when the run lacks one.
pub fn scenario_diffs(summary: &Summary, t: &Threshold) -> Vec<String> {
    let mut out = Vec::new();
    for (key, want) in &t.scenario {
        let got = key.split('.').try_fold(&summary.config, |v, k| v.get(k));
        let want_json = serde_json::to_value(want).ok();
        let same = match (got, &want_json) {
            (Some(g), Some(w)) if g.is_number() && w.is_number() => g.as_f64() == w.as_f64(),
            (Some(g), Some(w)) => g == w,
            _ => false,
        };
        if !same {
            let got = got.map_or("(unset)".to_string(), |g| g.to_string());
            out.push(format!("{key} {got} (set for {want})"));
        }
    }
    out
}

/// Check a run against the thresholds that apply to its bench profile (pure).
pub fn evaluate(summary: &Summary, thresholds: &Thresholds) -> GateReport {
    let (applying, others): (Vec<&Threshold>, Vec<&Threshold>) =
        thresholds.thresholds.iter().partition(|t| t.applies_to(&summary.profile));
    let mut other_profiles: Vec<String> = others.iter().filter_map(|t| t.profile.clone()).collect();
    other_profiles.sort();
    other_profiles.dedup();
    let checks = applying
        .into_iter()
        .map(|t| {
            let measured = summary.metric(&t.metric);
            let scenario_diffs = scenario_diffs(summary, t);
            let verdict = if scenario_diffs.is_empty() {
                Verdict::judge(t, measured)
            } else {
                Verdict::OtherScenario
            };
            Check { threshold: t.clone(), measured, verdict, scenario_diffs }
        })
        .collect();
    GateReport {
        run_id: summary.run_id.clone(),
        run_status: summary.status,
        simulated: summary.simulated,
        profile: summary.profile.clone(),
        checks,
        other_profiles,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::thresholds::Comparator;

    fn threshold(action: Action, profile: Option<&str>) -> Threshold {
        Threshold {
            metric: "goodput.ratio".into(),
            comparator: Comparator::Ge,
            limit: 0.9,
            unit: "ratio".into(),
            action,
            profile: profile.map(str::to_string),
            scenario: Default::default(),
            adr: 1,
            file: "docs/adr/0001-x.md".into(),
            line: 9,
        }
    }

    #[test]
    fn verdicts_and_their_effects() {
        let t = threshold(Action::Block, None);
        assert_eq!(Verdict::judge(&t, Some(0.95)), Verdict::Pass);
        assert_eq!(Verdict::judge(&t, Some(0.85)), Verdict::Fail);
        assert_eq!(Verdict::judge(&t, None), Verdict::Missing);
        assert_eq!(Verdict::Pass.effect(Action::Block), Effect::None);
        assert_eq!(Verdict::Fail.effect(Action::Block), Effect::Blocks);
        assert_eq!(Verdict::Missing.effect(Action::Warn), Effect::Warns);
    }

    fn report(checks: Vec<(Action, Verdict)>, other_profiles: Vec<String>) -> GateReport {
        GateReport {
            run_id: "r".into(),
            run_status: RunStatus::Complete,
            simulated: false,
            profile: "default".into(),
            checks: checks
                .into_iter()
                .map(|(a, verdict)| Check {
                    threshold: threshold(a, None),
                    measured: None,
                    verdict,
                    scenario_diffs: Vec::new(),
                })
                .collect(),
            other_profiles,
        }
    }

    #[test]
    fn counts_and_status_follow_the_effects() {
        let r = report(
            vec![
                (Action::Block, Verdict::Pass),
                (Action::Warn, Verdict::Fail),
                (Action::Warn, Verdict::Missing),
                (Action::Block, Verdict::Missing),
            ],
            vec![],
        );
        assert_eq!((r.passes(), r.warnings(), r.blocking_failures()), (1, 2, 1));
        assert_eq!(r.status(), Status::PolicyViolated);
        let r = report(vec![(Action::Warn, Verdict::Fail)], vec![]);
        assert_eq!(r.status(), Status::Success);
        // No check, but thresholds for other profiles: nothing vouches for this run.
        let r = report(vec![], vec!["tuned".into()]);
        assert!(r.ungoverned() && !r.passed());
        assert!(report(vec![], vec![]).passed());
    }
}
