//! `cargo xtask bench --sweep concurrency=32,128,256`: one run per load, the sweep summary
//! (`sweep.json`, see `infergate_model::sweep`), a console table and an SVG chart (`sweep.svg`).

use std::path::Path;

use anyhow::{Context, bail};
use bench::runner::{RunControl, RunError, RunSpec};
use infergate_model::summary::RunStatus;
use infergate_model::sweep::{self, StageResult, SweepSetup, SweepSummary};

use crate::console::ConsoleTable;
use crate::exit::Status;
use crate::plan::{self, BenchPlan, GateVerdicts, SweepPlan};
use crate::text::fmt_opt;
use crate::{measure, text};

pub(crate) const CHART_FILE: &str = "sweep.svg";

/// Run the sweep of `plan`: every stage is resolved before the first one is measured; with
/// `--gate` each stage is gated and the sweep fails (exit 1) when any stage fails the gate.
pub fn run(plan: &BenchPlan, sweep_plan: &SweepPlan) -> anyhow::Result<Status> {
    let root = &plan.root;
    let profile = &plan.profile.profile;
    let items = plan::workload_items(root, profile)?;
    let dir = plan.out_dir.clone();
    if dir.join(sweep::SWEEP_FILE).exists() {
        bail!("{} already holds a sweep; choose another --out directory", dir.display());
    }
    let setup = SweepSetup {
        dir: dir.clone(),
        sweep_id: plan::sweep_id(&plan.run_id),
        spec: sweep_plan.spec.clone(),
        plan: sweep_plan.stages.clone(),
        slo: profile.slo.clone(),
    };
    let mut specs = stage_specs(plan, &setup, items)?.into_iter();
    let spec = &setup.spec;
    let n = spec.values.len();
    let mut any_failed = false;
    let mut verdicts = GateVerdicts::sweep();
    let result = measure::runtime()?.block_on(bench::sweep::run(
        &setup,
        RunControl::default(),
        |i, _| {
            specs
                .next()
                .ok_or_else(|| RunError::Setup(format!("stage {} has no run", i + 1).into()))
        },
        |r, s| {
            any_failed |= s.status == RunStatus::Failed;
            let label = format!("stage {}/{n} {}={}", r.stage, spec.dimension.name(), r.load);
            if !plan.quiet {
                eprintln!("{label}: {}", stage_line(r));
            }
            if let Some(report) = plan.gate.as_ref().and_then(|g| g.check(&dir.join(&r.dir), s)) {
                verdicts.record(label, report);
            }
        },
    ))?;
    infergate_model::rundir::write_atomic(&dir.join(CHART_FILE), render_svg(&result).as_bytes())?;
    print_result(&result, &dir);
    let gate = match &plan.gate {
        Some(g) => verdicts.print(g.github),
        None => Status::Success,
    };
    let interrupted = result.stages.iter().any(|s| s.status == RunStatus::Interrupted);
    Ok(if interrupted {
        Status::Interrupted
    } else if any_failed || result.stages.len() < n {
        Status::PolicyViolated
    } else {
        gate
    })
}

/// The run of every stage: the plan's profile with the stage's load, in its stage directory,
/// with a run id derived from the sweep's. Resolved from the config already read.
fn stage_specs(plan: &BenchPlan, setup: &SweepSetup, items: u64) -> anyhow::Result<Vec<RunSpec>> {
    let dimension = setup.spec.dimension;
    let base = &plan.profile.profile;
    let mut specs = Vec::new();
    for (i, &load) in setup.spec.values.iter().enumerate() {
        let extra = sweep::stage_overrides(dimension, load, &setup.plan, base, items);
        let profile = plan
            .source
            .resolve(&extra)
            .with_context(|| format!("stage {} ({}={load})", i + 1, dimension.name()))?;
        let out_dir = setup.dir.join(sweep::stage_dir_name(i, dimension, load));
        let mut spec = plan.run_spec(profile, out_dir, plan::stage_run_id(&setup.sweep_id, i));
        spec.quiet = true;
        spec.invocation = plan.invocation(Some(stage_label(dimension, load)));
        specs.push(spec);
    }
    Ok(specs)
}

/// What names a stage among the runs of its sweep: its load (`concurrency 32`, `rate 4`).
pub(crate) fn stage_label(dimension: infergate_model::sweep::Dimension, load: f64) -> String {
    format!("{} {}", dimension.name(), infergate_model::config::limits::number(load))
}

/// A stage's progress line: throughput, latency tails and the SLOs.
fn stage_line(r: &StageResult) -> String {
    format!(
        "{} output tok/s, TTFT p99 {} ms, TPOT p99 {} ms, {}",
        fmt_opt(r.output_tokens_per_s, 1),
        fmt_opt(r.ttft_p99_ms, 1),
        fmt_opt(r.tpot_p99_ms, 1),
        if r.meets_slo { "meets the SLOs".to_string() } else { r.violations.join("; ") }
    )
}

/// The sweep table, the knee, the notes and where the sweep was written.
fn print_result(result: &SweepSummary, dir: &Path) {
    println!("{}", table(result));
    match &result.knee {
        Some(k) => println!(
            "knee: {}={} (highest load meeting {})",
            result.dimension.name(),
            k.load,
            slo_text(result)
        ),
        None => println!("knee: {}", text::BLANK),
    }
    for note in &result.notes {
        println!("note: {note}");
    }
    println!("sweep directory: {} (sweep.json, {CHART_FILE})", dir.display());
}

fn slo_text(s: &SweepSummary) -> String {
    let mut parts = Vec::new();
    if let Some(v) = s.slo.ttft_ms {
        parts.push(format!("TTFT p99 <= {v} ms"));
    }
    if let Some(v) = s.slo.tpot_ms {
        parts.push(format!("TPOT p99 <= {v} ms"));
    }
    if let Some(v) = s.slo.e2e_ms {
        parts.push(format!("E2E p99 <= {v} ms"));
    }
    parts.join(", ")
}

/// The sweep as a console table, one row per stage.
pub fn table(s: &SweepSummary) -> ConsoleTable {
    let mut t = ConsoleTable::framed([
        s.dimension.name(),
        "ok/total",
        "req/s",
        "output tok/s",
        "TTFT p99 ms",
        "TPOT p99 ms",
        "preemptions",
        "KV max",
        "GPU %",
        "cost/1M tok",
        "SLO",
    ])
    .right_aligned(1..10);
    for r in &s.stages {
        let knee = s.knee.as_ref().is_some_and(|k| k.stage == r.stage);
        t.row([
            format!("{}{}", r.load, if knee { " (knee)" } else { "" }),
            format!("{}/{}", r.ok, r.requests),
            fmt_opt(r.requests_per_s, 2),
            fmt_opt(r.output_tokens_per_s, 1),
            fmt_opt(r.ttft_p99_ms, 1),
            fmt_opt(r.tpot_p99_ms, 1),
            fmt_opt(r.server_preemptions, 0),
            fmt_opt(r.server_kv_cache_usage_max, 2),
            fmt_opt(r.gpu_utilization_pct, 0),
            fmt_opt(r.cost_per_1m_output_tokens, 4),
            if r.meets_slo { "met".to_string() } else { r.violations.join("; ") },
        ]);
    }
    t
}

/// The sweep chart: output throughput and latency p99 against load (GPU utilisation too, when
/// sampled), the knee and the SLOs labelled; values that were not measured are left out and
/// counted (see `chart::figures::sweep_svg`).
pub(crate) fn render_svg(s: &SweepSummary) -> String {
    crate::chart::figures::sweep_svg(s)
}

/// Whether a path holds a sweep (for tools that accept runs or sweeps).
pub fn is_sweep_dir(p: &Path) -> bool {
    p.join(sweep::SWEEP_FILE).is_file()
}

#[cfg(test)]
mod tests {
    use super::*;
    use infergate_model::metrics::Slo;
    use infergate_model::sweep::{StagePlan, SweepSpec};

    fn summary() -> SweepSummary {
        let stage = |i: usize, load: f64, tput: f64, ttft: f64| StageResult {
            gpu_utilization_pct: (i == 2).then_some(55.0),
            violations: if ttft < 200.0 { vec![] } else { vec!["TTFT".into()] },
            ..infergate_policy::test_support::stage(i, load, tput, Some(ttft))
        };
        let spec: SweepSpec = "concurrency=32,128,256".parse().unwrap();
        SweepSummary::new(
            "sweep-x".into(),
            &spec,
            StagePlan::default(),
            Slo { ttft_ms: Some(200.0), tpot_ms: Some(50.0), e2e_ms: None },
            vec![
                stage(1, 32.0, 1000.0, 80.0),
                stage(2, 128.0, 3000.0, 150.0),
                stage(3, 256.0, 3100.0, 900.0),
            ],
        )
    }

    #[test]
    fn chart_is_an_svg_with_every_panel() {
        let svg = render_svg(&summary());
        assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(200)]);
        assert!(svg.contains("Output throughput"));
        assert!(svg.contains("TTFT p99"));
        assert!(svg.contains("GPU utilisation"));
    }

    #[test]
    fn table_marks_the_knee() {
        let s = summary();
        assert_eq!(s.knee.as_ref().map(|k| k.load), Some(128.0));
        let t = table(&s).to_string();
        assert!(t.contains("128 (knee)"), "{t}");
        assert!(t.contains("3000.0"), "{t}");
    }
}
