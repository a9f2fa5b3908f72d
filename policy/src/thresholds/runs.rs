//! The gate over several runs: the stages of a sweep, the strategies of a comparison (`bench
//! --gate`, or `gate DIR` on a sweep or comparison directory). Each run gets its report under a
//! label that names it; the whole fails (exit 1) when any run fails.
//!
//! A sweep measures loads its record did not decide on, by design: a stage whose settings
//! differ from a threshold's scenario is reported as not this record's scenario
//! ([`GateReport::as_sweep_stage`]), not as a failure. A stage that is the scenario is judged
//! as any run is, and a threshold that no stage of the sweep was the scenario of fails the
//! sweep: nothing in it vouched for the record's scenario, so it never passes silently.

use super::evaluate::{CheckOutcome, GateReport};
use super::render::print_report;
use super::rule::Action;
use crate::exit::Status;

/// The gate's reports on the runs of a sweep or a comparison, each under a label that names
/// the run (`stage 2/3 concurrency=128`, `strategy fixed`).
#[derive(Debug, Default)]
pub struct GateVerdicts {
    pub runs: Vec<(String, GateReport)>,
    /// The runs are a sweep's stages (see the module's documentation).
    pub sweep: bool,
}

impl GateVerdicts {
    /// The verdicts of a sweep's stages.
    pub fn sweep() -> GateVerdicts {
        GateVerdicts { runs: Vec::new(), sweep: true }
    }

    pub fn record(&mut self, label: String, report: GateReport) {
        let report = if self.sweep { report.as_sweep_stage() } else { report };
        self.runs.push((label, report));
    }

    /// Labels (with run ids) of the runs whose gate ended with `status`.
    fn ended(&self, status: Status) -> Vec<String> {
        self.runs
            .iter()
            .filter(|(_, r)| r.status() == status)
            .map(|(label, r)| format!("{label} (run {})", r.run_id))
            .collect()
    }

    /// Labels (with run ids) of the runs the gate failed.
    pub fn failed(&self) -> Vec<String> {
        self.ended(Status::PolicyViolated)
    }

    /// Labels (with run ids) of the runs the gate could not decide.
    pub fn undecided(&self) -> Vec<String> {
        self.ended(Status::Inconclusive)
    }

    /// The `block` thresholds of a sweep that no stage was the scenario of:
    /// `ADR-0003 metrics.ttft_ms.p99`, each once.
    pub fn unjudged(&self) -> Vec<String> {
        let Some((_, first)) = self.runs.first() else { return Vec::new() };
        let mut out = Vec::new();
        for c in first.checks.iter().filter(|c| c.threshold.action == Action::Block) {
            let t = &c.threshold;
            let elsewhere_everywhere = self.runs.iter().all(|(_, r)| {
                r.checks
                    .iter()
                    .any(|o| o.threshold == *t && o.verdict == CheckOutcome::NotThisScenario)
            });
            let name = format!("ADR-{:04} {}", t.adr, t.metric);
            if elsewhere_everywhere && !out.contains(&name) {
                out.push(name);
            }
        }
        out
    }

    /// A served-configuration mismatch when a run measured another configuration than its
    /// file; else failed when any run failed or a blocking threshold was no stage's scenario; else no
    /// record when no live record covers the environment of a run; else inconclusive when any
    /// run was undecided.
    pub fn status(&self) -> Status {
        if !self.ended(Status::ServedMismatch).is_empty() {
            Status::ServedMismatch
        } else if !(self.failed().is_empty() && self.unjudged().is_empty()) {
            Status::PolicyViolated
        } else if !self.ended(Status::NoRecord).is_empty() {
            Status::NoRecord
        } else if !self.undecided().is_empty() {
            Status::Inconclusive
        } else {
            Status::Success
        }
    }

    /// Print each run's report under its label, then which runs failed (stderr) or that all
    /// passed.
    pub fn print(&self, github: bool) -> Status {
        for (label, report) in &self.runs {
            println!("gate, {label}:");
            print_report(report, github);
        }
        let failed = self.failed();
        let unjudged = self.unjudged();
        if !failed.is_empty() {
            eprintln!("error: the gate failed for {}", failed.join("; "));
        }
        if !unjudged.is_empty() {
            eprintln!(
                "error: no stage of the sweep is the scenario of {}: nothing measured vouches \
                 for it; include that load in the sweep, or gate a run of that scenario",
                unjudged.join(", ")
            );
        }
        let mismatched = self.ended(Status::ServedMismatch);
        if !mismatched.is_empty() {
            eprintln!(
                "error: the server answered another configuration than the engine config file \
                 for {}",
                mismatched.join("; ")
            );
        }
        let uncovered = self.ended(Status::NoRecord);
        if !uncovered.is_empty() {
            eprintln!("error: no record for the environment of {}", uncovered.join("; "));
        }
        let undecided = self.undecided();
        if !undecided.is_empty() {
            eprintln!("error: the gate could not decide for {}", undecided.join("; "));
        }
        if self.status() == Status::Success && !self.runs.is_empty() {
            let labels: Vec<&str> = self.runs.iter().map(|(l, _)| l.as_str()).collect();
            println!("gate passed for every run: {}", labels.join(", "));
        }
        self.status()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::thresholds::evaluate::Check;
    use crate::thresholds::file::Threshold;
    use crate::thresholds::rule::Comparator;
    use infergate_model::summary::RunStatus;

    fn report(run_id: &str, governed: bool) -> GateReport {
        GateReport {
            trials: 1,
            busy_trials: vec![],
            served_mismatches: vec![],
            run_id: run_id.into(),
            run_status: RunStatus::Complete,
            simulated: true,
            profile: "default".into(),
            checks: vec![],
            // Thresholds of another profile only: nothing vouches for this run, a failure.
            other_profiles: if governed { vec![] } else { vec!["other".into()] },
            environment: None,
            other_environments: vec![],
            pooling: vec![],
            plateau: false,
        }
    }

    #[test]
    fn verdicts_name_the_runs_that_failed() {
        let mut v = GateVerdicts::default();
        assert_eq!(v.status(), Status::Success);
        v.record("stage 1/2 rate=1".into(), report("s-01", true));
        assert_eq!(v.status(), Status::Success);
        v.record("stage 2/2 rate=2".into(), report("s-02", false));
        assert_eq!(v.failed(), vec!["stage 2/2 rate=2 (run s-02)".to_string()]);
        assert_eq!(v.status(), Status::PolicyViolated);
        // A run no record covers is not decided; a failure outranks it.
        let mut uncovered = report("s-03", true);
        uncovered.other_environments = vec![
            "gpu=H100-SXM-80GB x1; engine=infergate-sim; model=m; dtype=auto".parse().unwrap(),
        ];
        let mut v = GateVerdicts::default();
        v.record("stage 1/1 rate=1".into(), uncovered);
        assert_eq!(v.status(), Status::NoRecord);
        v.record("stage 2/2 rate=2".into(), report("s-02", false));
        assert_eq!(v.status(), Status::PolicyViolated);
    }

    /// A stage's report with one blocking TTFT check of the given verdict.
    fn stage(run_id: &str, verdict: CheckOutcome) -> GateReport {
        let threshold = Threshold {
            metric: infergate_model::metric::MetricPath::named("metrics.ttft_ms.p99"),
            comparator: Comparator::Le,
            limit: 200.0,
            unit: "ms".into(),
            action: Action::Block,
            profile: Some("default".into()),
            scenario: [(
                infergate_model::config::ConfigKey::literal("load.concurrency"),
                toml::Value::Integer(32),
            )]
            .into(),
            environment: None,
            load: None,
            adr: 3,
            file: "docs/adr/0003-x.md".into(),
            line: 40,
        };
        let diffs = match verdict {
            CheckOutcome::OtherScenario => vec!["load.concurrency 16 (set for 32)".to_string()],
            _ => vec![],
        };
        let mut r = report(run_id, true);
        r.checks.push(Check {
            threshold,
            measured: Some(150.0),
            estimate: None,
            reason: None,
            verdict,
            scenario_diffs: diffs,
        });
        r
    }

    #[test]
    fn a_sweep_reports_other_loads_as_not_the_scenario_and_judges_the_scenario_stage() {
        // The stage at 16 is not the record's scenario: reported, not a failure.
        let mut v = GateVerdicts::sweep();
        v.record("stage 1/2 concurrency=16".into(), stage("s-01", CheckOutcome::OtherScenario));
        v.record("stage 2/2 concurrency=32".into(), stage("s-02", CheckOutcome::PASS));
        assert_eq!(v.runs[0].1.checks[0].verdict, CheckOutcome::NotThisScenario);
        assert_eq!(v.status(), Status::Success);
        // The scenario's stage failing fails the sweep.
        let mut v = GateVerdicts::sweep();
        v.record("stage 1/2 concurrency=16".into(), stage("s-01", CheckOutcome::OtherScenario));
        v.record("stage 2/2 concurrency=32".into(), stage("s-02", CheckOutcome::FAIL));
        assert_eq!(v.failed(), vec!["stage 2/2 concurrency=32 (run s-02)".to_string()]);
        // No stage is the scenario: the threshold was never judged, the sweep fails.
        let mut v = GateVerdicts::sweep();
        v.record("stage 1/1 concurrency=16".into(), stage("s-01", CheckOutcome::OtherScenario));
        assert!(v.failed().is_empty());
        assert_eq!(v.unjudged(), vec!["ADR-0003 metrics.ttft_ms.p99".to_string()]);
        assert_eq!(v.status(), Status::PolicyViolated);
        // A stage the gate could not decide leaves the sweep undecided, never passed; a failure
        // elsewhere outranks it.
        let mut v = GateVerdicts::sweep();
        v.record("stage 1/2 concurrency=32".into(), stage("s-01", CheckOutcome::INCONCLUSIVE));
        v.record("stage 2/2 concurrency=32".into(), stage("s-02", CheckOutcome::PASS));
        assert_eq!(v.undecided(), vec!["stage 1/2 concurrency=32 (run s-01)".to_string()]);
        assert_eq!(v.status(), Status::Inconclusive);
        v.record("stage 3/3 concurrency=32".into(), stage("s-03", CheckOutcome::FAIL));
        assert_eq!(v.status(), Status::PolicyViolated);
        // Outside a sweep another scenario stays a failure.
        let mut v = GateVerdicts::default();
        v.record("strategy serial".into(), stage("c-1", CheckOutcome::OtherScenario));
        assert_eq!(v.status(), Status::PolicyViolated);
    }
}
