//! `ab.json`: an A/B gate's result, rewritten (atomically) after every trial and look, so an
//! interrupted gate lists what it measured. It holds the plan, the criteria and budgets, every
//! trial (its slot, its run directory, its values of the gated metrics), every look with each
//! metric's paired difference and verdict, and the final verdict. Each trial's run directory
//! (`NNN-baseline/`, `NNN-candidate/`) beside it is an ordinary run.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::decide::{BudgetCheck, Prior};
use super::design::{Arm, Design, Slot};
use super::run::{Criteria, Look, Stopped};
use crate::artifact::Artifact;
use crate::stats::Verdict;
use crate::summary::RunStatus;

/// The file name in the gate's directory.
pub const AB_FILE: &str = "ab.json";

/// What one arm measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArmInfo {
    /// Where its configuration came from: `base <commit>` or `working tree`.
    pub source: String,
    /// The engine config the arm ran (relative to the repository root) and a hash of its
    /// content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_config: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_hash: Option<String>,
    /// Settings the arm ran with beyond the profile (`--set`, `--candidate-set`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sets: Vec<String>,
    /// The engine: `embedded simulator`, `llama.cpp`, `vllm`, or the target's URL.
    pub engine: String,
}

/// One measured trial.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrialEntry {
    pub slot: Slot,
    /// Its run directory, relative to the gate's directory.
    pub dir: String,
    pub run_id: String,
    pub status: RunStatus,
    /// Requests it sent.
    pub requests: u64,
    /// The gated metrics' values (blank when not measured).
    pub values: BTreeMap<String, Option<f64>>,
    /// What was done before it (`Isolation::text`: `caches reset (POST /reset_prefix_cache)`,
    /// `fresh engine (...)`), or what was tried when the engine offers no reset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isolation: Option<String>,
    /// The client host was busy during it (`environment.noise`): both arms shared the host, so
    /// the A/B verdict stands.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub host_busy: bool,
}

/// One arm's warmup.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WarmupEntry {
    pub arm: Arm,
    pub dir: String,
    pub requests: u64,
}

/// `ab.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AbFile {
    pub format_version: u32,
    pub run_id: String,
    pub profile: String,
    pub baseline: ArmInfo,
    pub candidate: ArmInfo,
    pub design: Design,
    pub criteria: Criteria,
    pub checks: Vec<BudgetCheck>,
    /// The noise history pooled per metric (absent: each look used the blocks' own spread).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub priors: BTreeMap<String, Prior>,
    #[serde(default)]
    pub warmup: Vec<WarmupEntry>,
    #[serde(default)]
    pub trials: Vec<TrialEntry>,
    #[serde(default)]
    pub looks: Vec<Look>,
    /// The verdict (`None` while measuring, or when interrupted before the first look).
    #[serde(default)]
    pub status: Option<Verdict>,
    #[serde(default)]
    pub stopped: Option<Stopped>,
    /// Requests sent, warmups included.
    pub requests: u64,
    #[serde(default)]
    pub notes: Vec<String>,
}

impl Artifact for AbFile {
    const FILE: &'static str = AB_FILE;
    const VERSION: u32 = 1;
    const WHAT: &'static str = "an A/B gate's result";
}

impl AbFile {
    /// Trials measured per arm.
    pub fn trials_of(&self, arm: Arm) -> usize {
        self.trials.iter().filter(|t| t.slot.arm == arm).count()
    }

    /// The trials measured on a busy client host.
    pub fn busy_trials(&self) -> Vec<u32> {
        self.trials.iter().filter(|t| t.host_busy).map(|t| t.slot.trial).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ab::design::PlanInput;

    #[test]
    fn ab_json_round_trips_through_the_artifact_layer() {
        let design = Design::plan(&PlanInput {
            max_requests: 1920,
            warmup_requests: 16,
            items: 80,
            measured: 80,
            trial_requests: None,
            looks: 5,
            spending: Default::default(),
            seed: 1,
        })
        .unwrap();
        let slot = design.slots(1)[0];
        let file = AbFile {
            format_version: 1,
            run_id: "r".into(),
            profile: "default".into(),
            baseline: ArmInfo {
                source: "base abc".into(),
                engine: "embedded simulator".into(),
                ..Default::default()
            },
            candidate: ArmInfo {
                source: "working tree".into(),
                engine: "embedded simulator".into(),
                ..Default::default()
            },
            design,
            criteria: Criteria::default(),
            checks: vec![
                BudgetCheck::new(
                    crate::metric::MetricPath::named("metrics.ttft_ms.p99"),
                    0.05,
                    None,
                    true,
                    "x",
                )
                .unwrap(),
            ],
            priors: BTreeMap::new(),
            warmup: vec![WarmupEntry {
                arm: Arm::Baseline,
                dir: "warmup-baseline".into(),
                requests: 16,
            }],
            trials: vec![TrialEntry {
                slot,
                dir: "001-baseline".into(),
                run_id: "r-001".into(),
                status: RunStatus::Complete,
                requests: 11,
                values: [("metrics.ttft_ms.p99".to_string(), Some(12.5))].into(),
                isolation: Some("fresh simulator".into()),
                host_busy: true,
            }],
            looks: vec![],
            status: None,
            stopped: None,
            requests: 27,
            notes: vec![],
        };
        let dir = tempfile::tempdir().unwrap();
        crate::artifact::write(dir.path(), &file).unwrap();
        let back: AbFile = crate::artifact::read(dir.path()).unwrap();
        assert_eq!(back, file);
        assert_eq!((back.trials_of(slot.arm), back.busy_trials()), (1, vec![1]));
    }
}
