//! `cargo xtask bench --compare-strategies serial,fixed,token_budget,continuous`: the same bench
//! profile against the embedded engine simulator once per batching strategy, then a table.
//!
//! The comparison directory (`--out`, default `target/bench/<run id>-strategies`) holds the
//! engine config of each strategy (`engine-<strategy>.toml`: the profile's engine config with
//! `[batch]` changed), one normal run directory per strategy (`<strategy>/`) and
//! `comparison.json`. Each run records the file the simulator ran (`summary.engine.file`, the
//! variant), the governed file it derives from (`engine.derived_from`, e.g.
//! `configs/engine.toml`) and each key the variant sets otherwise (`engine.changes`, with the
//! governed file's value, null where that file does not set the key). `adr new` takes the runs
//! (or the comparison directory) as its matrix, rows named by strategy, and its decision lines
//! name the governed file with each key added or changed there. Every run records the command
//! of the whole comparison and its strategy (`summary.invocation`).

use std::path::Path;

use anyhow::{Context, bail};
use bench::runner::{self, RunControl, RunSpec};
use infergate_model::config::{BatchStrategy, EngineConfig, Source};
use infergate_model::strategy_compare::{
    COMPARISON_FILE, StrategyComparison, StrategyRow, variant_config,
};
use infergate_model::summary::{EngineParams, RunStatus};

use crate::console::ConsoleTable;
use crate::exit::Status;
use crate::measure;
use crate::plan::{self, BenchPlan, GateVerdicts, StrategyList};
use crate::text::{BLANK, fmt_opt};

/// Run the comparison of `plan` (its profile was checked to run the engine simulator when the
/// plan was resolved); with `--gate` each strategy's run is gated and the comparison fails
/// (exit 1) when any run fails the gate.
pub fn run(plan: &BenchPlan, strategies: &StrategyList) -> anyhow::Result<Status> {
    let root = &plan.root;
    let engine_file = plan.profile.profile.sim.engine_config.clone();
    let source = Source::read(&root.join(&engine_file))?;
    let dir = &plan.out_dir;
    if dir.join(COMPARISON_FILE).exists() {
        bail!("{} already holds a comparison; choose another --out", dir.display());
    }
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let rt = measure::runtime()?;

    let mut rows = Vec::new();
    let mut notes = Vec::new();
    let mut interrupted = false;
    let mut verdicts = GateVerdicts::default();
    let n = strategies.0.len();
    for (i, &strategy) in strategies.0.iter().enumerate() {
        let (spec, config) = strategy_run(plan, &source, &engine_file, strategy)?;
        if !plan.quiet {
            eprintln!("[{}/{n}] {strategy}", i + 1);
        }
        let outcome = match rt.block_on(runner::run(spec, RunControl::default())) {
            Err(e @ runner::RunError::Interrupted { .. }) => {
                eprintln!("{strategy}: {e}");
                interrupted = true;
                break;
            }
            r => r.with_context(|| format!("the {strategy} run could not run"))?,
        };
        let run_dir = display_path(&outcome.dir, root);
        for n in outcome.out_of_memory_notes() {
            notes.push(format!("{strategy}: {n}"));
        }
        rows.push(StrategyRow::from_summary(strategy, &config, &outcome.summary, &run_dir));
        if let Some(report) =
            plan.gate.as_ref().and_then(|g| g.check(&outcome.dir, &outcome.summary))
        {
            verdicts.record(format!("strategy {strategy}"), report);
        }
        if outcome.status() == RunStatus::Interrupted {
            interrupted = true;
            break;
        }
    }

    let comparison = StrategyComparison {
        format_version: infergate_model::strategy_compare::COMPARISON_FORMAT,
        profile: plan.profile.name.clone(),
        engine_config: engine_file,
        rows,
        notes,
    };
    infergate_model::artifact::write(dir, &comparison)?;
    print_comparison(&comparison, dir);
    let gate = match &plan.gate {
        Some(g) => verdicts.print(g.github),
        None => Status::Success,
    };
    if interrupted {
        return Ok(Status::Interrupted);
    }
    let failed: Vec<String> = comparison
        .rows
        .iter()
        .filter(|r| r.status == RunStatus::Failed)
        .map(|r| r.strategy.to_string())
        .collect();
    if !failed.is_empty() {
        eprintln!(
            "error: no measured request succeeded with {}; see requests.jsonl in their run \
             directories",
            failed.join(", ")
        );
        return Ok(Status::PolicyViolated);
    }
    Ok(gate)
}

/// The run of one strategy: its engine config (the profile's with `[batch]` changed) written
/// into the comparison directory, the run recording that variant with the governed file it
/// derives from and the keys it changes, and the comparison's command with the strategy.
fn strategy_run(
    plan: &BenchPlan,
    source: &Source,
    engine_file: &str,
    strategy: BatchStrategy,
) -> anyhow::Result<(RunSpec, EngineConfig)> {
    let text = variant_config(source, strategy)?;
    let file = plan.out_dir.join(format!("engine-{strategy}.toml"));
    infergate_model::rundir::write_atomic(&file, text.as_bytes())
        .with_context(|| format!("cannot write {}", file.display()))?;
    let config = EngineConfig::from_source(&Source::new(file.clone(), text.clone()))?;
    let as_json = |text: &str| -> anyhow::Result<serde_json::Value> {
        let table: toml::Table = toml::from_str(text).context("engine configs parse")?;
        Ok(serde_json::to_value(table).expect("TOML tables convert to JSON"))
    };
    let ran = display_path(&file, &plan.root);
    let engine = EngineParams::derived(&ran, as_json(&text)?, engine_file, &as_json(&source.text)?);
    let mut profile = plan.profile.clone();
    profile.profile.sim.engine_config = ran;
    let mut spec = plan.run_spec(
        profile,
        plan.out_dir.join(strategy.as_str()),
        plan::strategy_run_id(&plan.run_id, strategy),
    );
    spec.engine = Some(engine);
    spec.invocation = plan.invocation(Some(strategy.to_string()));
    Ok((spec, config))
}

/// The comparison table, how cost is computed, the notes and where it was written.
fn print_comparison(comparison: &StrategyComparison, dir: &Path) {
    println!("{}", table(&comparison.rows));
    println!(
        "device-seconds = measured window x devices; cost = device-seconds x [device] \
         price_per_hour / 3600"
    );
    for n in &comparison.notes {
        println!("note: {n}");
    }
    println!("comparison directory: {}", dir.display());
}

/// A path relative to the repository root when it is inside it.
fn display_path(path: &Path, root: &Path) -> String {
    path.strip_prefix(root).unwrap_or(path).display().to_string()
}

/// The comparison table: one row per strategy; blank cells were not measured.
pub fn table(rows: &[StrategyRow]) -> ConsoleTable {
    let mut t = ConsoleTable::framed([
        "strategy",
        "batch size or budget",
        "ok / failed",
        "mean TTFT ms",
        "mean completion ms",
        "mean queue ms",
        "total tokens",
        "output tok/s",
        "device-s",
        "cost",
        "cost / 1M output",
    ])
    .right_aligned(2..11);
    for r in rows {
        t.row([
            r.strategy.to_string(),
            r.batching.to_string(),
            format!("{} / {}", r.ok, r.failed),
            fmt_opt(r.mean_ttft_ms, 1),
            fmt_opt(r.mean_e2e_ms, 1),
            fmt_opt(r.mean_queue_ms, 1),
            r.total_tokens.map_or_else(|| BLANK.to_string(), |n| n.to_string()),
            fmt_opt(r.output_tokens_per_s, 1),
            fmt_opt(r.device_seconds, 2),
            fmt_opt(r.cost, 5),
            fmt_opt(r.cost_per_1m_output_tokens, 3),
        ]);
    }
    t
}
