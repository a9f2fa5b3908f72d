//! The A/B gate: a baseline and a candidate configuration measured side by side in one job,
//! each gated metric decided on the paired difference against a regression budget.
//!
//! - [`design`]: the plan (trials, their length, ABBA/BAAB blocks over workload slices, looks)
//!   within a budget of requests.
//! - [`decide`]: one metric's paired difference, its interval and verdict ([`judge`]).
//! - [`run`]: the sequential procedure over a [`Measure`], looking after each look's block.
//! - [`file`]: `ab.json`, the gate's result and every trial's values.
//!
//! Pure: the CLI measures real engines through [`Measure`]; the tests measure the engine model
//! in virtual time with the same code (`docs/statistics.md` has the rates).

/// The metrics an A/B gate checks when no live record states budgets or thresholds for the
/// profile: TTFT P99, TPOT mean and P99, E2E P99, output throughput, goodput and the error rate.
pub fn default_metrics() -> &'static [crate::metric::MetricPath] {
    static ALL: std::sync::LazyLock<Vec<crate::metric::MetricPath>> =
        std::sync::LazyLock::new(|| {
            DEFAULT_METRIC_PATHS.iter().map(|m| crate::metric::MetricPath::named(m)).collect()
        });
    &ALL
}

const DEFAULT_METRIC_PATHS: &[&str] = &[
    "metrics.ttft_ms.p99",
    "metrics.tpot_ms.mean",
    "metrics.tpot_ms.p99",
    "metrics.e2e_ms.p99",
    "throughput.output_tokens_per_s",
    "goodput.ratio",
    "error_rate",
];

pub(crate) mod decide;
pub mod design;
pub mod file;
pub mod run;

/// A metric's verdict at a look and the gate's: the one pass/fail/inconclusive of every
/// decision ([`crate::stats::Verdict`]).
pub use crate::stats::Verdict;
pub use decide::{
    BudgetCheck, BudgetError, Change, CheckLook, DEFAULT_ALPHA_FAIL, DEFAULT_ALPHA_PASS,
    DEFAULT_BUDGET, NoiseSource, Prior, judge,
};
pub use design::{
    Arm, DEFAULT_LOOKS, DEFAULT_MAX_REQUESTS, Design, DesignError, PlanInput, Slot, Spending,
};
pub use file::{AB_FILE, AbFile, ArmInfo, TrialEntry, WarmupEntry};
pub use run::{Criteria, Look, Measure, Outcome, Progress, Step, Stopped, TrialValues, run};
