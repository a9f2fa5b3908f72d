//! The gate report for people and for GitHub: a table of the checks, a line per failure, the
//! verdict, and `::error` / `::warning` annotations located at each threshold's record row.

use std::fmt;

use infergate_model::summary::RunStatus;

use infergate_model::stats::Estimate;

use super::evaluate::{Check, CheckOutcome, Effect, GateReport};
use crate::console::ConsoleTable;
use crate::text::{BLANK, gh_escape, num, plural, with_unit};

/// The verdict column: what the check does to the gate, and why when it was not measured.
fn verdict_text(c: &Check) -> &'static str {
    match (c.verdict, c.effect()) {
        (CheckOutcome::NotThisScenario, _) => "not this record's scenario",
        (CheckOutcome::NotApplicable, _) => "not applicable (other load)",
        (_, Effect::None) => "pass",
        (CheckOutcome::Missing, Effect::Blocks) => "FAIL (not measured)",
        (CheckOutcome::Missing, Effect::Warns) => "warn (not measured)",
        (CheckOutcome::OtherScenario, Effect::Blocks) => "FAIL (other scenario)",
        (CheckOutcome::OtherScenario, Effect::Warns) => "warn (other scenario)",
        (CheckOutcome::INCONCLUSIVE, Effect::Undecided) => "INCONCLUSIVE",
        (CheckOutcome::INCONCLUSIVE, _) => "warn (inconclusive)",
        (_, Effect::Undecided) => "INCONCLUSIVE",
        (_, Effect::Blocks) => "FAIL",
        (_, Effect::Warns) => "warn",
    }
}

/// An estimate with its interval in the metric's unit: `84.23 ms [80.1, 88.3]`.
pub fn estimate_text(e: &Estimate, unit: &str) -> String {
    e.interval().in_unit(unit).to_string()
}

/// Where an estimate comes from: `3 trials, 300 requests, t_interval`, marked `UNDERSAMPLED`
/// (a percentile from fewer samples than it needs) and when run-to-run variance is not counted.
pub fn basis_text(e: &Estimate) -> String {
    let mut out = format!(
        "{}, {}, {}",
        plural(e.trials as usize, "trial"),
        plural(e.requests as usize, "request"),
        e.method.as_str()
    );
    if !e.method.counts_run_to_run() {
        out.push_str(" (requests only)");
    }
    if e.undersampled {
        out.push_str(", UNDERSAMPLED");
    }
    out
}

/// The report table: metric, estimate with its interval, n and method, limit, verdict, source
/// record.
pub fn render_table(report: &GateReport) -> String {
    let confidence = report
        .checks
        .iter()
        .find_map(|c| c.estimate.as_ref().filter(|e| e.method.is_interval()))
        .map_or(String::new(), |e| format!(" [{}% CI]", num(e.confidence * 100.0)));
    let mut table = ConsoleTable::markdown([
        "Metric".to_string(),
        format!("Measured{confidence}"),
        "n, method".to_string(),
        "Limit".to_string(),
        "Action".to_string(),
        "Verdict".to_string(),
        "Source".to_string(),
    ]);
    for c in &report.checks {
        let t = &c.threshold;
        let measured = match (&c.estimate, c.measured) {
            (Some(e), _) => estimate_text(e, &t.unit),
            (None, Some(v)) => with_unit(v, &t.unit),
            (None, None) => BLANK.to_string(),
        };
        table.row([
            t.metric.to_string(),
            measured,
            c.estimate.as_ref().map_or(BLANK.to_string(), basis_text),
            t.limit_text(),
            t.action.to_string(),
            verdict_text(c).to_string(),
            format!("ADR-{:04} ({}:{})", t.adr, t.file, t.line),
        ]);
    }
    table.to_string()
}

/// How a failed check is reported: `error` (blocks) or `warning`.
fn level(c: &Check) -> &'static str {
    match c.effect() {
        Effect::Blocks | Effect::Undecided => "error",
        Effect::Warns | Effect::None => "warning",
    }
}

/// What was gated: `run <id>` or `trial set <id>`.
fn subject(report: &GateReport) -> String {
    let kind = if report.trials > 1 { "trial set" } else { "run" };
    format!("{kind} {}", report.run_id)
}

/// A failure in words.
fn failure_message(report: &GateReport, c: &Check) -> String {
    let t = &c.threshold;
    let subject = subject(report);
    let limit = t.limit_text();
    if c.verdict == CheckOutcome::OtherScenario {
        return format!(
            "{subject} is not the scenario ADR-{:04} set {} {limit} for: {}; measure that \
             scenario (or record a decision for this one)",
            t.adr,
            t.metric,
            c.scenario_diffs.join(", ")
        );
    }
    if c.verdict == CheckOutcome::INCONCLUSIVE {
        let what = match (&c.estimate, &c.reason) {
            (_, Some(why)) => format!("{} cannot be decided: {why}", t.metric),
            (Some(e), None) => format!(
                "{} = {} ({}) straddles {limit}: the data cannot decide; add trials \
                 (`{} bench trials SET --until-decided`)",
                t.metric,
                estimate_text(e, &t.unit),
                basis_text(e),
                crate::text::tool()
            ),
            (None, None) => format!("{} cannot be decided", t.metric),
        };
        return format!("{what} (ADR-{:04}, {subject})", t.adr);
    }
    match c.measured {
        Some(v) => format!(
            "{} = {} breaks {limit} (ADR-{:04}, {subject})",
            t.metric,
            with_unit(v, &t.unit),
            t.adr
        ),
        None => {
            format!("{} was not measured by {subject}; ADR-{:04} requires {limit}", t.metric, t.adr)
        }
    }
}

/// GitHub Actions annotations for the failed checks: `::error` for `block`, `::warning` for
/// `warn`, located at the threshold's row in its record.
pub fn render_github(report: &GateReport) -> String {
    Annotations(report).to_string()
}

/// The annotations of [`render_github`].
struct Annotations<'a>(&'a GateReport);

impl fmt::Display for Annotations<'_> {
    fn fmt(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        annotations(out, self.0)
    }
}

fn annotations(out: &mut fmt::Formatter<'_>, report: &GateReport) -> fmt::Result {
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
        )?;
    }
    for m in &report.served_mismatches {
        writeln!(
            out,
            "::error title={}::{}",
            gh_escape("gate: served configuration differs", true),
            gh_escape(&format!("run {}: {m}", report.run_id), false)
        )?;
    }
    if report.no_record() {
        writeln!(
            out,
            "::error title={}::{}",
            gh_escape("gate: no record for this environment", true),
            gh_escape(&no_record_message(report), false)
        )?;
    }
    if report.partial() {
        writeln!(
            out,
            "::error title={}::{}",
            gh_escape("gate: interrupted run", true),
            gh_escape(
                &format!(
                    "run {} was interrupted: only a complete run can pass a gate",
                    report.run_id
                ),
                false
            )
        )?;
    }
    for c in report.checks.iter().filter(|c| c.failed()) {
        let kind = level(c);
        writeln!(
            out,
            "::{kind} file={},line={},title={}::{}",
            gh_escape(&c.threshold.file, true),
            c.threshold.line,
            gh_escape(&format!("gate: {}", c.threshold.metric), true),
            gh_escape(&failure_message(report, c), false)
        )?;
    }
    Ok(())
}

/// The gate report's line on a run that did not complete (none for a complete run).
fn status_line(out: &mut fmt::Formatter<'_>, status: RunStatus) -> fmt::Result {
    match status {
        RunStatus::Complete => Ok(()),
        RunStatus::Interrupted => writeln!(
            out,
            "blocking: the run was interrupted; its metrics cover part of the planned load, and \
             only a complete run can pass a gate (rerun it)"
        ),
        RunStatus::Failed => writeln!(out, "note: no measured request of the run succeeded"),
        RunStatus::Aborted => writeln!(
            out,
            "note: the run was aborted by an error of the bench; its metrics cover part of the planned load"
        ),
        RunStatus::Oversaturated => writeln!(
            out,
            "blocking: the run was stopped early, over-saturated; its metrics cover the load until \
             the server fell behind its schedule, and only a complete run can pass a gate"
        ),
    }
}

/// The whole report as printed by `cargo xtask gate` (and `bench --gate`).
pub fn render_report(report: &GateReport, github: bool) -> String {
    ReportText { report, github }.to_string()
}

/// The report as [`render_report`] prints it.
struct ReportText<'a> {
    report: &'a GateReport,
    github: bool,
}

impl fmt::Display for ReportText<'_> {
    fn fmt(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        report_text(out, self.report, self.github)
    }
}

fn report_text(out: &mut fmt::Formatter<'_>, report: &GateReport, github: bool) -> fmt::Result {
    let sim = if report.simulated { " (simulated: the built-in engine simulator)" } else { "" };
    let trials =
        if report.trials > 1 { format!(" ({} trials)", report.trials) } else { String::new() };
    writeln!(out, "gate: {}{trials} (profile `{}`){sim}", subject(report), report.profile)?;
    if report.plateau {
        writeln!(
            out,
            "note: the thresholds read the run's plateau figures (steady.gate: \
             plateau.metrics.ttft_ms.p99 for metrics.ttft_ms.p99)"
        )?;
    }
    for busy in &report.busy_trials {
        writeln!(out, "note: the client host was busy during {busy}")?;
    }
    status_line(out, report.run_status)?;
    for m in &report.served_mismatches {
        writeln!(out, "served configuration: {m} (the gate does not pass this run)")?;
    }
    let quoted = |ps: &[String]| ps.iter().map(|p| format!("`{p}`")).collect::<Vec<_>>().join(", ");
    if report.ungoverned() {
        writeln!(
            out,
            "gate FAILED: no accepted record sets thresholds for profile `{}` (the thresholds \
             gate profile {} only); measure this scenario and write its record with \
             `{} adr new`",
            report.profile,
            quoted(&report.other_profiles),
            crate::text::tool()
        )?;
        if github {
            annotations(out, report)?;
        }
        return Ok(());
    }
    if report.checks.is_empty() && !report.no_record() {
        writeln!(out, "no thresholds: nothing to gate (are any records Accepted?)")?;
        return Ok(());
    }
    if !report.checks.is_empty() {
        writeln!(out, "{}", render_table(report))?;
    }
    environment_lines(out, report)?;
    if !report.other_profiles.is_empty() {
        writeln!(
            out,
            "not applied: the thresholds of profile {} (other scenarios)",
            quoted(&report.other_profiles)
        )?;
    }
    for c in report.checks.iter().filter(|c| c.failed()) {
        let label = if c.verdict == CheckOutcome::INCONCLUSIVE && c.effect() == Effect::Undecided {
            "inconclusive"
        } else {
            level(c)
        };
        writeln!(out, "{label}: {}", failure_message(report, c))?;
    }
    if report.checks.iter().any(|c| c.estimate.as_ref().is_some_and(|e| e.trials == 1)) {
        writeln!(
            out,
            "note: one trial: its intervals count request-to-request variance only, not \
             run-to-run; measure a trial set (`bench --trials N`) for a decision about the next run"
        )?;
    }
    for c in report.checks.iter().filter(|c| c.verdict == CheckOutcome::NotApplicable) {
        writeln!(
            out,
            "not applicable: ADR-{:04} {} {}: {}",
            c.threshold.adr,
            c.threshold.metric,
            c.threshold.limit_text(),
            c.reason.as_deref().unwrap_or("measured at another load")
        )?;
    }
    for c in report.checks.iter().filter(|c| c.verdict == CheckOutcome::NotThisScenario) {
        writeln!(
            out,
            "not this record's scenario: ADR-{:04} set {} for another one ({})",
            c.threshold.adr,
            c.threshold.metric,
            c.scenario_diffs.join(", ")
        )?;
    }
    let (blocking, warnings) = (report.blocking_failures(), report.warnings());
    let passed = report.passes();
    let elsewhere = match report.not_this_scenario() {
        0 => String::new(),
        n => format!(", {n} for another scenario"),
    };
    let elsewhere = match report.not_applicable() {
        0 => elsewhere,
        n => format!("{elsewhere}, {n} not applicable (another load)"),
    };
    let undecided = report.undecided();
    let outcome = match report.status() {
        crate::exit::Status::Success => "passed",
        crate::exit::Status::Inconclusive => "INCONCLUSIVE",
        crate::exit::Status::NoRecord => "NOT DECIDED (no record for this environment)",
        crate::exit::Status::ServedMismatch => {
            "NOT PASSED (the server runs another configuration than the run's engine config file)"
        }
        _ => "FAILED",
    };
    writeln!(
        out,
        "gate {outcome}: {}, {passed} passed, {blocking} blocking failed, {undecided} blocking \
         inconclusive, {}{elsewhere}",
        plural(report.checks.len(), "check"),
        plural(warnings, "warning"),
    )?;
    if github {
        annotations(out, report)?;
    }
    Ok(())
}

/// The environment lines of a report: which environment's thresholds applied, which were set
/// for other environments, and, when none covers the run's, the verdict's reason and the record
/// command to write. Nothing when no threshold of the profile names an environment.
fn environment_lines(out: &mut fmt::Formatter<'_>, report: &GateReport) -> fmt::Result {
    let keyed = report.checks.iter().any(|c| c.threshold.environment.is_some());
    if let (true, Some(env)) = (keyed, &report.environment) {
        writeln!(out, "environment: {env} (the thresholds keyed to it apply)")?;
    }
    if report.no_record() {
        writeln!(out, "no record for this environment: {}", no_record_message(report))?;
        let gpu = report.environment.as_ref().map_or("this environment".into(), |e| e.gpu_text());
        writeln!(
            out,
            "  {} adr new 'Gate profile {} on {gpu}' --baseline RUN_BASE --exp RUN_HEAD",
            crate::text::tool(),
            report.profile
        )?;
        writeln!(
            out,
            "  (RUN_BASE and RUN_HEAD: bench runs of profile `{}` on this environment, `cargo \
             xtask bench --profile {} --out DIR`; this run can be one)",
            report.profile, report.profile
        )?;
    } else if !report.other_environments.is_empty() {
        writeln!(
            out,
            "not applied: the thresholds set for {} (other environments)",
            environments_text(&report.other_environments)
        )?;
    }
    Ok(())
}

/// `` `gpu=...; ...` and `gpu=...; ...` ``.
fn environments_text(envs: &[super::file::EnvironmentKey]) -> String {
    envs.iter().map(|e| format!("`{e}`")).collect::<Vec<_>>().join(" and ")
}

/// Why a run no record covers is not decided, naming its environment and those the profile's
/// thresholds are keyed to.
fn no_record_message(report: &GateReport) -> String {
    let env = report.environment.as_ref().map_or("(unknown)".into(), |e| format!("`{e}`"));
    format!(
        "{} measured {env}; the live records set thresholds of profile `{}` for {} only. A \
         limit set on another machine does not hold on this one: the run is not decided. \
         Measure this environment and write its record",
        subject(report),
        report.profile,
        environments_text(&report.other_environments)
    )
}

/// Print the report to stdout (GitHub reads annotations from there).
pub fn print_report(report: &GateReport, github: bool) {
    print!("{}", render_report(report, github));
}

/// The live records' regression budgets for the gated profiles: a baseline measured in the
/// same job decides them (`bench ab`), so an absolute gate lists them and leaves them be.
pub fn budgets_note<'a>(
    thresholds: &super::file::Thresholds,
    profiles: impl Iterator<Item = &'a str>,
) {
    let profiles: std::collections::BTreeSet<&str> = profiles.collect();
    let budgets: Vec<String> = thresholds
        .budgets
        .iter()
        .filter(|b| profiles.iter().any(|p| b.applies_to(p)))
        .map(|b| b.text())
        .collect();
    if !budgets.is_empty() {
        eprintln!(
            "note: regression budgets, decided by `bench ab` only (they compare with a baseline \
             measured in the same job, which an absolute gate has not): {}",
            budgets.join("; ")
        );
    }
}
