//! `cargo xtask bench --capacity concurrency|rate`: capacity under the SLO, the highest load at
//! which the profile's goodput SLO still holds (SLO attainment at least `--capacity-target`,
//! and every `--capacity-limit`), found by a search whose every probe is decided from its
//! interval over trials (`infergate_model::capacity`). Each trial is a normal run at the probe's
//! load (the sweep's stage overrides, its own noise seed), `capacity.json` is rewritten after
//! every trial, and the end is a console table, `capacity.svg` and the exit code:
//!
//! - 0: a load was decided to hold the SLO (the bracket's passing end, below the lowest load
//!   decided not to, or the highest load allowed);
//! - 1: no load held it: every decided probe failed, down to the lowest load probed;
//! - 3: no probe could be decided (the budget ended on inconclusive probes);
//! - 130: Ctrl-C or SIGTERM; `capacity.json` keeps every trial measured.
//!
//! docs/capacity.md describes the search, the flags and the files.

use std::path::Path;

use anyhow::{Context, bail};
use bench::capacity::{CapacityRun, CapacitySetup};
use bench::runner::{RunControl, RunError, RunSpec};
use infergate_model::capacity::{CapacityFile, Dimension, Probe, Search, TrialMeasure};
use infergate_model::config::SimMode;
use infergate_model::stats::{self, Verdict};
use infergate_model::summary::Summary;

use crate::console::ConsoleTable;
use crate::exit::Status;
use crate::measure;
use crate::plan::{self, BenchPlan, CapacityPlan};
use crate::text::BLANK;

pub(crate) const CHART_FILE: &str = "capacity.svg";

/// Run the capacity search of `plan` (its settings were checked when the plan was made).
pub fn run(plan: &BenchPlan, cp: &CapacityPlan) -> anyhow::Result<Status> {
    let dir = plan.out_dir.clone();
    if infergate_model::capacity::is_capacity_dir(&dir)
        || dir.join(infergate_model::rundir::SUMMARY_FILE).exists()
    {
        bail!("{} already holds a capacity search or a run; choose another --out", dir.display());
    }
    let items = plan::workload_items(&plan.root, &plan.profile.profile)?;
    let setup = CapacitySetup {
        dir: dir.clone(),
        capacity_id: plan::capacity_id(&plan.run_id),
        profile: plan.profile.name.clone(),
        slo: plan.profile.profile.slo.clone(),
        engine_config: engine_config(plan),
    };
    let search = Search::new(cp.spec.clone(), cp.base_requests);
    if !plan.quiet {
        eprintln!("{}", intro(&search));
    }
    // Each trial's run hears Ctrl-C during its load; between two runs this flag does, and the
    // next run starts interrupted.
    let stop = measure::listen_for_stop()?;
    let control = RunControl::default();
    // Every trial of the search draws the simulator's noise from a seed of its own.
    let mut seed = 0u64;
    let result = measure::runtime()?.block_on(bench::capacity::run(
        &setup,
        search,
        control.clone(),
        |search, probe, load, trial| {
            if stop.load(std::sync::atomic::Ordering::SeqCst) {
                control.interrupt();
            }
            seed += 1;
            trial_spec(plan, &setup, search, (probe, load, trial), items, seed)
                .map_err(|e| RunError::Setup(format!("{e:#}").into()))
        },
        |search, probe, m, s| {
            if !plan.quiet {
                progress(search, probe, m, s);
            }
        },
    ));
    let outcome = result.context("the capacity search could not run")?;
    let file = &outcome.file;
    infergate_model::rundir::write_atomic(&dir.join(CHART_FILE), render_svg(file).as_bytes())?;
    print_result(file, &dir);
    if let Some(e) = outcome.failure {
        return Err(anyhow::Error::new(e).context(format!(
            "the capacity search stopped: trial {} could not run ({} keeps the {} trials \
             measured)",
            file.search.trials + 1,
            dir.join(infergate_model::capacity::CAPACITY_FILE).display(),
            file.search.trials
        )));
    }
    Ok(status(&outcome))
}

/// The exit status of a finished search: its bracket, or the interruption.
pub(crate) fn status(outcome: &CapacityRun) -> Status {
    let b = &outcome.file.bracket;
    if outcome.interrupted {
        Status::Interrupted
    } else if b.pass.is_some() {
        Status::Success
    } else if b.fail.is_some() {
        Status::PolicyViolated
    } else {
        Status::Inconclusive
    }
}

/// The engine config the probes run against, for the record: the target's, or the one the
/// embedded simulator's engine mode runs.
fn engine_config(plan: &BenchPlan) -> Option<String> {
    let p = &plan.profile;
    match &p.target {
        Some((_, t)) => t.engine_config.clone(),
        None if p.profile.sim.mode == SimMode::Engine => Some(p.profile.sim.engine_config.clone()),
        None => None,
    }
}

/// What names a load: `concurrency 4`, `rate 2.5`.
fn load_label(dimension: Dimension, load: f64) -> String {
    format!("{} {}", dimension.name(), infergate_model::config::limits::number(load))
}

/// The run of one trial: the plan's profile at the probe's load (the sweep's stage overrides:
/// the loop, the warmup share and the trial's length), its noise drawn from `seed`, in its
/// probe's directory.
fn trial_spec(
    plan: &BenchPlan,
    setup: &CapacitySetup,
    search: &Search,
    (probe, load, trial): (usize, f64, u32),
    items: u64,
    seed: u64,
) -> anyhow::Result<RunSpec> {
    let dimension = search.spec.dimension;
    let label = load_label(dimension, load);
    let mut extra = infergate_model::sweep::stage_overrides(
        dimension,
        load,
        &search.spec.plan,
        &plan.profile.profile,
        items,
    );
    for o in &mut extra {
        o.origin = format!("--capacity {} (probe {}: {label})", dimension.name(), probe + 1);
    }
    let mut profile = plan
        .source
        .resolve(&extra)
        .with_context(|| format!("probe {} ({label}), trial {trial}", probe + 1))?;
    let noise = &profile.profile.sim.noise;
    if noise.is_on() {
        profile.profile.sim.noise = noise.for_trial(seed);
    }
    let out_dir = setup.dir.join(bench::capacity::trial_dir(search, probe, load, trial));
    let run_id = plan::probe_run_id(&setup.capacity_id, probe, trial);
    let mut spec = plan.run_spec(profile, out_dir, run_id);
    spec.quiet = true;
    spec.invocation = plan.invocation(Some(format!("{label}, trial {trial}")));
    Ok(spec)
}

/// The line before the first probe: what is searched and within what.
fn intro(search: &Search) -> String {
    let spec = &search.spec;
    let n = infergate_model::config::limits::number;
    let mut limits: Vec<String> = spec.limits.iter().map(|l| l.to_string()).collect();
    limits.insert(0, format!("SLO attainment >= {}", n(spec.target)));
    format!(
        "capacity search over {} from {} up to {}: {}; {}..{} trials a probe at {}% confidence, \
         resolution {}, budget {}",
        spec.dimension.name(),
        n(spec.start),
        n(spec.max_load),
        limits.join(", "),
        spec.min_trials,
        spec.max_trials,
        n(spec.confidence * 100.0),
        n(spec.resolution),
        spec.budget
    )
}

/// A trial's line, and its probe's when this trial decided it.
fn progress(search: &Search, probe: usize, m: &TrialMeasure, s: &Summary) {
    let Some(p) = search.probes.get(probe) else { return };
    let label = format!("probe {} {}", probe + 1, load_label(search.spec.dimension, p.load));
    let att = m.attainment.map(|a| stats::significant(a, 3)).unwrap_or_else(|| BLANK.into());
    let over = if m.oversaturated { ", stopped early: over-saturated" } else { "" };
    eprintln!(
        "{label}, trial {}: attainment {att}, {} requests, {:.1} s{over} ({})",
        p.trials.len().max(1),
        m.requests,
        m.seconds,
        s.run_id
    );
    if p.verdict.is_some() && p.trials.last() == Some(m) {
        eprintln!("{label}: {} ({})", verdict_word(p.verdict), p.reason.as_deref().unwrap_or(""));
    }
}

fn verdict_word(v: Option<Verdict>) -> &'static str {
    match v {
        Some(Verdict::Pass) => "pass",
        Some(Verdict::Fail) => "fail",
        Some(Verdict::Inconclusive) => "inconclusive",
        None => "open",
    }
}

/// The probes as a console table, in the order they were measured.
pub(crate) fn table(f: &CapacityFile) -> ConsoleTable {
    let dim = f.search.spec.dimension;
    let mut t = ConsoleTable::framed([
        "probe",
        dim.name(),
        "trials",
        "attainment",
        "verdict",
        "binding",
        "reason",
    ])
    .right_aligned(0..3);
    for (i, p) in f.search.probes.iter().enumerate() {
        t.row([
            (i + 1).to_string(),
            infergate_model::config::limits::number(p.load),
            p.trials.len().to_string(),
            attainment_text(p),
            verdict_word(p.verdict).to_string(),
            p.binding.clone().unwrap_or_else(|| BLANK.into()),
            p.reason.clone().unwrap_or_else(|| BLANK.into()),
        ]);
    }
    t
}

/// A probe's attainment with its interval, or its trials' values when it has none.
fn attainment_text(p: &Probe) -> String {
    match &p.attainment {
        Some(e) => e.interval().to_string(),
        None => {
            let v: Vec<String> = p
                .trials
                .iter()
                .map(|t| t.attainment.map(stats::sig_text).unwrap_or_else(|| BLANK.into()))
                .collect();
            if v.is_empty() { BLANK.to_string() } else { v.join(", ") }
        }
    }
}

/// The lines under the table: the bracket, the binding objective, why the search stopped, what
/// it spent.
pub(crate) fn summary_lines(f: &CapacityFile) -> Vec<String> {
    let s = &f.search;
    let dim = s.spec.dimension.name();
    let n = infergate_model::config::limits::number;
    let b = &f.bracket;
    let meaning = match (b.pass, b.fail) {
        (Some(p), Some(fl)) => format!(
            "the SLO holds at {dim} {} and not at {}: the capacity is in between",
            n(p),
            n(fl)
        ),
        (Some(p), None) => format!("the SLO holds up to {dim} {}, the highest probed", n(p)),
        (None, Some(fl)) => {
            format!("no load probed holds the SLO: the capacity is below {}", n(fl))
        }
        (None, None) => "no probe was decided".to_string(),
    };
    let mut lines = vec![
        format!("capacity: {dim} {} ({meaning})", b.text()),
        format!("binding objective: {}", f.binding.as_deref().unwrap_or(BLANK)),
        format!("stopped: {}", s.stop.map(|r| r.words()).unwrap_or("before the search could end")),
        format!(
            "spent: {} trials, {} requests, {} s (budget: {})",
            s.trials,
            s.spent_requests,
            stats::significant(s.spent_s, 3),
            s.spec.budget
        ),
    ];
    lines.extend(f.notes.iter().map(|n| format!("note: {n}")));
    lines
}

/// The table, the bracket and where the search was written.
fn print_result(f: &CapacityFile, dir: &Path) {
    println!("{}", table(f));
    for line in summary_lines(f) {
        println!("{line}");
    }
    println!("capacity directory: {} (capacity.json, {CHART_FILE})", dir.display());
}

/// `capacity.svg`: the attainment against load, the target and the bracket.
pub(crate) fn render_svg(f: &CapacityFile) -> String {
    crate::chart::render(&crate::chart::figures::capacity_attainment(f))
}

#[cfg(test)]
mod tests {
    use super::*;
    use infergate_model::capacity::{CapacitySpec, Step};
    use infergate_model::metrics::Slo;

    /// A search run in memory against a server whose attainment is 1 up to concurrency 6 and
    /// 0.5 above it.
    fn searched() -> CapacityFile {
        let mut spec = CapacitySpec::new(Dimension::Concurrency);
        spec.max_load = 16.0;
        let mut s = Search::new(spec, 10);
        while let Step::Measure { probe, load, .. } = s.next_step() {
            let a = if load <= 6.0 { 1.0 } else { 0.5 };
            let m = TrialMeasure {
                attainment: Some(a),
                objectives: [("ttft_ms".to_string(), a)].into(),
                requests: 10,
                seconds: 1.0,
                ..Default::default()
            };
            s.add_trial(probe, m);
        }
        CapacityFile::new("capacity-x".into(), "default".into(), Slo::default(), s)
    }

    #[test]
    fn the_table_and_lines_give_the_bracket_and_every_probe() {
        let f = searched();
        assert_eq!((f.bracket.pass, f.bracket.fail), (Some(6.0), Some(7.0)));
        let t = table(&f).to_string();
        assert_eq!(t.matches("pass").count() + t.matches("fail").count(), f.search.probes.len());
        let lines = summary_lines(&f).join("\n");
        assert!(lines.contains("capacity: concurrency [6, 7)"), "{lines}");
        assert!(lines.contains("binding objective: ttft_ms"), "{lines}");
        assert!(lines.contains("stopped: resolved to the resolution"), "{lines}");
        assert!(lines.contains(&format!("{} trials", f.search.trials)), "{lines}");
    }

    #[test]
    fn the_chart_shades_the_bracket_and_draws_the_target() {
        let svg = render_svg(&searched());
        assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(200)]);
        assert!(svg.contains("data-chart=\"capacity-attainment\""));
        assert!(svg.contains("class=\"band\" data-label=\"capacity [6, 7)\""), "{svg}");
        assert!(svg.contains("data-label=\"target 0.95\""), "{svg}");
        assert!(svg.contains("data-name=\"pass\"") && svg.contains("data-name=\"fail\""));
        assert!(svg.contains("class=\"intervals\""), "{svg}");
    }

    #[test]
    fn the_exit_status_follows_the_bracket() {
        let f = searched();
        let run =
            |file: CapacityFile, interrupted| CapacityRun { file, interrupted, failure: None };
        assert_eq!(status(&run(f.clone(), false)), Status::Success);
        assert_eq!(status(&run(f.clone(), true)), Status::Interrupted);
        let mut none = f.clone();
        none.bracket.pass = None;
        assert_eq!(status(&run(none.clone(), false)), Status::PolicyViolated);
        none.bracket.fail = None;
        assert_eq!(status(&run(none, false)), Status::Inconclusive);
    }
}
