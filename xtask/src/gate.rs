//! `cargo xtask gate RUN`: a run against the thresholds of the live decision records.
//!
//! Every threshold is checked as `measured <comparator> limit`. A metric the run did not
//! measure is a failure, not a pass. Failures of `block` thresholds fail the gate (exit 1);
//! failures of `warn` thresholds are reported only. [`evaluate`] is pure, so `bench --gate`
//! gates a run it has just measured with the same code.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::Context;
use bench::Summary;
use bench::summary::RunStatus;
use clap::Args;
use comfy_table::{Table, presets};
use xshell::Shell;

use crate::Status;
use crate::adr::model::Action;
use crate::adr::plural;
use crate::adr::thresholds::{GATE_FILE, Threshold, Thresholds, with_unit};

/// Outcome of one threshold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    /// Measured, and `measured <comparator> limit` does not hold.
    Fail,
    /// The run has no value for the metric: a failure.
    Missing,
}

/// One threshold checked against one run.
#[derive(Clone, Debug, PartialEq)]
pub struct Check {
    pub threshold: Threshold,
    pub measured: Option<f64>,
    pub verdict: Verdict,
}

impl Check {
    /// Failed (including not measured).
    pub fn failed(&self) -> bool {
        self.verdict != Verdict::Pass
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
    /// Failed `block` checks.
    pub fn blocking_failures(&self) -> usize {
        self.checks.iter().filter(|c| c.failed() && c.threshold.action == Action::Block).count()
    }

    /// Failed `warn` checks.
    pub fn warnings(&self) -> usize {
        self.checks.iter().filter(|c| c.failed() && c.threshold.action == Action::Warn).count()
    }

    /// Thresholds exist, but none for this run's scenario: nothing vouches for it.
    pub fn ungoverned(&self) -> bool {
        self.checks.is_empty() && !self.other_profiles.is_empty()
    }

    pub fn passed(&self) -> bool {
        self.blocking_failures() == 0 && !self.ungoverned()
    }

    /// Exit status: policy violated when a `block` threshold failed, or when no threshold
    /// applies to the run while other profiles have some.
    pub fn status(&self) -> Status {
        Status::from_ok(self.passed())
    }
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
            let verdict = match measured {
                None => Verdict::Missing,
                Some(v) if t.comparator.holds(v, t.limit) => Verdict::Pass,
                Some(_) => Verdict::Fail,
            };
            Check { threshold: t.clone(), measured, verdict }
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

fn verdict_text(c: &Check) -> &'static str {
    match (c.verdict, c.threshold.action) {
        (Verdict::Pass, _) => "pass",
        (Verdict::Fail, Action::Block) => "FAIL",
        (Verdict::Fail, Action::Warn) => "warn",
        (Verdict::Missing, Action::Block) => "FAIL (not measured)",
        (Verdict::Missing, Action::Warn) => "warn (not measured)",
    }
}

/// The report table: metric, measured, limit, verdict, source record.
pub fn render_table(report: &GateReport) -> String {
    let mut table = Table::new();
    table.load_style(presets::ASCII_MARKDOWN);
    table.set_header(["Metric", "Measured", "Limit", "Action", "Verdict", "Source"]);
    for c in &report.checks {
        let t = &c.threshold;
        table.add_row([
            t.metric.clone(),
            c.measured.map_or("—".to_string(), |v| with_unit(v, &t.unit)),
            format!("{} {}", t.comparator, with_unit(t.limit, &t.unit)),
            t.action.to_string(),
            verdict_text(c).to_string(),
            format!("ADR-{:04} ({}:{})", t.adr, t.file, t.line),
        ]);
    }
    table.to_string()
}

/// How a failed check is reported: `error` (blocks) or `warning`.
fn level(action: Action) -> &'static str {
    match action {
        Action::Block => "error",
        Action::Warn => "warning",
    }
}

/// A failure in words.
fn failure_message(report: &GateReport, c: &Check) -> String {
    let t = &c.threshold;
    let limit = format!("{} {}", t.comparator, with_unit(t.limit, &t.unit));
    match c.measured {
        Some(v) => format!(
            "{} = {} breaks {limit} (ADR-{:04}, run {})",
            t.metric,
            with_unit(v, &t.unit),
            t.adr,
            report.run_id
        ),
        None => format!(
            "{} was not measured by run {}; ADR-{:04} requires {limit}",
            t.metric, report.run_id, t.adr
        ),
    }
}

/// Escape a GitHub workflow-command message (`%`, CR, LF) or property (also `:` and `,`).
pub(crate) fn gh_escape(s: &str, property: bool) -> String {
    let mut out = s.replace('%', "%25").replace('\r', "%0D").replace('\n', "%0A");
    if property {
        out = out.replace(':', "%3A").replace(',', "%2C");
    }
    out
}

/// GitHub Actions annotations for the failed checks: `::error` for `block`, `::warning` for
/// `warn`, located at the threshold's row in its record.
pub fn render_github(report: &GateReport) -> String {
    let mut out = String::new();
    if report.ungoverned() {
        writeln!(
            out,
            "::error title={}::{}",
            gh_escape("gate: no thresholds for this profile", true),
            gh_escape(
                &format!(
                    "no accepted record sets thresholds for profile `{}` (run {})",
                    report.profile, report.run_id
                ),
                false
            )
        )
        .unwrap();
    }
    for c in report.checks.iter().filter(|c| c.failed()) {
        let kind = level(c.threshold.action);
        writeln!(
            out,
            "::{kind} file={},line={},title={}::{}",
            gh_escape(&c.threshold.file, true),
            c.threshold.line,
            gh_escape(&format!("gate: {}", c.threshold.metric), true),
            gh_escape(&failure_message(report, c), false)
        )
        .unwrap();
    }
    out
}

/// The whole report as printed by `cargo xtask gate` (and `bench --gate`).
pub fn render_report(report: &GateReport, github: bool) -> String {
    let mut out = String::new();
    let sim = if report.simulated { " (simulated: the built-in engine simulator)" } else { "" };
    writeln!(out, "gate: run {} (profile `{}`){sim}", report.run_id, report.profile).unwrap();
    match report.run_status {
        RunStatus::Complete => {}
        RunStatus::Interrupted => writeln!(
            out,
            "note: the run was interrupted; its metrics cover part of the planned load"
        )
        .unwrap(),
        RunStatus::Failed => {
            writeln!(out, "note: no measured request of the run succeeded").unwrap()
        }
    }
    let quoted = |ps: &[String]| ps.iter().map(|p| format!("`{p}`")).collect::<Vec<_>>().join(", ");
    if report.ungoverned() {
        writeln!(
            out,
            "gate FAILED: no accepted record sets thresholds for profile `{}` (the thresholds \
             gate profile {} only); measure this scenario and write its record with \
             `cargo xtask adr new`",
            report.profile,
            quoted(&report.other_profiles)
        )
        .unwrap();
        if github {
            out.push_str(&render_github(report));
        }
        return out;
    }
    if report.checks.is_empty() {
        writeln!(out, "no thresholds: nothing to gate (are any records Accepted?)").unwrap();
        return out;
    }
    writeln!(out, "{}", render_table(report)).unwrap();
    if !report.other_profiles.is_empty() {
        writeln!(
            out,
            "not applied: the thresholds of profile {} (other scenarios)",
            quoted(&report.other_profiles)
        )
        .unwrap();
    }
    for c in report.checks.iter().filter(|c| c.failed()) {
        writeln!(out, "{}: {}", level(c.threshold.action), failure_message(report, c)).unwrap();
    }
    let (blocking, warnings) = (report.blocking_failures(), report.warnings());
    let passed = report.checks.len() - blocking - warnings;
    writeln!(
        out,
        "gate {}: {}, {passed} passed, {blocking} blocking failed, {}",
        if report.passed() { "passed" } else { "FAILED" },
        plural(report.checks.len(), "check"),
        plural(warnings, "warning"),
    )
    .unwrap();
    if github {
        out.push_str(&render_github(report));
    }
    out
}

/// Print the report to stdout (GitHub reads annotations from there).
pub fn print_report(report: &GateReport, github: bool) {
    print!("{}", render_report(report, github));
}

/// `cargo xtask gate RUN`: gate a measured run.
#[derive(Debug, Args)]
pub struct GateCmd {
    /// A bench run directory or its summary.json.
    #[arg(value_name = "RUN")]
    pub run: PathBuf,
    /// Thresholds file, relative to the repository root.
    #[arg(long, default_value = GATE_FILE, value_name = "FILE")]
    pub thresholds: PathBuf,
    /// Also print GitHub Actions `::error` / `::warning` annotations.
    #[arg(long)]
    pub github: bool,
}

impl GateCmd {
    pub fn run(self, sh: &Shell) -> anyhow::Result<Status> {
        let root = sh.current_dir();
        let summary = Summary::read(&root.join(&self.run)).context("cannot gate the run")?;
        let thresholds =
            Thresholds::load(&root.join(&self.thresholds)).context("cannot read the thresholds")?;
        let report = evaluate(&summary, &thresholds);
        print_report(&report, self.github);
        Ok(report.status())
    }
}
