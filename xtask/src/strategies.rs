//! `cargo xtask bench --compare-strategies serial,fixed,token_budget,continuous`: the same bench
//! profile against the embedded engine simulator once per batching strategy, then a table.
//!
//! The comparison directory (`--out`, default `target/bench/<run id>-strategies`) holds the
//! engine config of each strategy (`engine-<strategy>.toml`: the profile's engine config with
//! `[batch]` changed), one normal run directory per strategy (`<strategy>/`) and
//! `comparison.json`. Each run records its engine parameters as those of the governed file the
//! variants derive from (`summary.engine.file` = e.g. `configs/engine.toml`, `params` = the
//! variant's values), so `adr new` can take the runs as its matrix and its parameter diff and
//! decision lines name `configs/engine.toml: batch.strategy = ...`; the profile in
//! `summary.config` names the variant file the simulator ran.

use std::path::Path;

use anyhow::{Context, bail};
use bench::config::{EngineConfig, SimMode, Source};
use bench::runner::{self, RunControl, RunSpec};
use bench::strategy_compare::{
    COMPARISON_FILE, StrategyComparison, StrategyRow, parse_strategies, variant_config,
};
use bench::summary::{EngineParams, RunStatus};
use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{Cell, CellAlignment, Table};
use xshell::Shell;

use crate::Status;
use crate::bench::BenchCmd;
use crate::report::{BLANK, fmt_opt};

/// Run the comparison `list` names with the rest of the bench command line.
pub fn run(cmd: &BenchCmd, list: &str, sh: &Shell) -> anyhow::Result<Status> {
    let root = sh.current_dir();
    let strategies = parse_strategies(list)
        .map_err(anyhow::Error::msg)
        .context("invalid --compare-strategies")?;
    let base = cmd.spec(&root)?;
    let profile = &base.profile;
    if let Some((name, _)) = &profile.target {
        bail!(
            "--compare-strategies runs the embedded engine simulator, but profile `{}` measures \
             target `{name}`; choose a profile without a target",
            profile.name
        );
    }
    if profile.profile.sim.mode != SimMode::Engine {
        bail!(
            "--compare-strategies needs the engine simulator; profile `{}` has sim.mode = \
             \"timing\" (set --set sim.mode=engine)",
            profile.name
        );
    }
    let engine_file = profile.profile.sim.engine_config.clone();
    let source = Source::read(&root.join(&engine_file))?;
    let dir = match &cmd.out {
        Some(d) => root.join(d),
        None => root.join("target").join("bench").join(format!("{}-strategies", base.run_id)),
    };
    if dir.join(COMPARISON_FILE).exists() {
        bail!("{} already holds a comparison; choose another --out", dir.display());
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;

    let mut rows = Vec::new();
    let mut notes = Vec::new();
    let mut interrupted = false;
    for (i, &strategy) in strategies.iter().enumerate() {
        let text = variant_config(&source, strategy)?;
        let file = dir.join(format!("engine-{strategy}.toml"));
        std::fs::write(&file, &text).with_context(|| format!("cannot write {}", file.display()))?;
        let config = EngineConfig::from_source(&Source::new(file.clone(), text.clone()))?;
        let table: toml::Table = toml::from_str(&text).context("variant configs parse")?;
        let engine = EngineParams {
            file: engine_file.clone(),
            params: serde_json::to_value(table).expect("TOML tables convert to JSON"),
        };
        let mut resolved = profile.clone();
        resolved.profile.sim.engine_config = display_path(&file, &root);
        if !cmd.quiet {
            eprintln!("[{}/{}] {strategy}", i + 1, strategies.len());
        }
        let spec = RunSpec {
            profile: resolved,
            out_dir: dir.join(strategy.as_str()),
            run_id: format!("{}-{strategy}", base.run_id),
            git: base.git.clone(),
            engine: Some(engine),
            quiet: cmd.quiet,
            handle_signals: true,
            root: root.clone(),
        };
        let outcome = rt
            .block_on(runner::run(spec, RunControl::default()))
            .with_context(|| format!("the {strategy} run could not run"))?;
        let run_dir = display_path(&outcome.dir, &root);
        for n in outcome.summary.notes.iter().filter(|n| n.starts_with("out of memory")) {
            notes.push(format!("{strategy}: {n}"));
        }
        rows.push(StrategyRow::from_summary(strategy, &config, &outcome.summary, &run_dir));
        if outcome.status() == RunStatus::Interrupted {
            interrupted = true;
            break;
        }
    }

    let comparison = StrategyComparison {
        profile: profile.name.clone(),
        engine_config: engine_file,
        rows,
        notes,
    };
    let mut json = serde_json::to_vec_pretty(&comparison).expect("comparisons serialize");
    json.push(b'\n');
    bench::rundir::write_atomic(&dir.join(COMPARISON_FILE), &json)?;
    println!("{}", table(&comparison.rows));
    println!(
        "device-seconds = measured window x devices; cost = device-seconds x [device] \
         price_per_hour / 3600"
    );
    for n in &comparison.notes {
        println!("note: {n}");
    }
    println!("comparison directory: {}", dir.display());
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
    Ok(Status::Success)
}

/// A path relative to the repository root when it is inside it.
fn display_path(path: &Path, root: &Path) -> String {
    path.strip_prefix(root).unwrap_or(path).display().to_string()
}

fn right(s: impl ToString) -> Cell {
    Cell::new(s.to_string()).set_alignment(CellAlignment::Right)
}

/// The comparison table: one row per strategy; blank cells were not measured.
pub fn table(rows: &[StrategyRow]) -> Table {
    let mut t = Table::new();
    t.load_style(UTF8_FULL_CONDENSED);
    t.set_header([
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
    ]);
    for r in rows {
        t.add_row([
            Cell::new(r.strategy),
            Cell::new(&r.batching),
            right(format!("{} / {}", r.ok, r.failed)),
            right(fmt_opt(r.mean_ttft_ms, 1)),
            right(fmt_opt(r.mean_e2e_ms, 1)),
            right(fmt_opt(r.mean_queue_ms, 1)),
            right(r.total_tokens.map_or_else(|| BLANK.to_string(), |n| n.to_string())),
            right(fmt_opt(r.output_tokens_per_s, 1)),
            right(fmt_opt(r.device_seconds, 2)),
            right(fmt_opt(r.cost, 5)),
            right(fmt_opt(r.cost_per_1m_output_tokens, 3)),
        ]);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use bench::config::BatchStrategy;
    use bench::summary::Summary;

    fn bench_cmd(args: &[&str]) -> BenchCmd {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            bench: BenchCmd,
        }
        let mut argv = vec!["bench"];
        argv.extend_from_slice(args);
        Cli::try_parse_from(argv).unwrap().bench
    }

    /// A small workload: every strategy runs in well under a second of simulated time.
    const PROFILE: &str = "[profile.default.load]\nconcurrency = 4\nwarmup_requests = 0\n\
        [profile.default.workload]\ninput_lengths = [64, 128]\nrepeats = 4\nmax_tokens = 8\n\
        [profile.default.sim]\nengine_config = \"configs/engine.toml\"\n\
        [profile.remote]\ntarget = \"x\"\n[targets.x]\nbase_url = \"http://127.0.0.1:9\"\n";

    fn workspace(engine: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("configs")).unwrap();
        std::fs::write(dir.path().join("configs/bench.toml"), PROFILE).unwrap();
        std::fs::write(dir.path().join("configs/engine.toml"), engine).unwrap();
        dir
    }

    const ENGINE: &str = "[engine]\nmodel = \"meta-llama/Llama-3.1-8B-Instruct\"\n\
        max_model_len = 4096\n[batch]\nfixed_batch_size = 4\nmax_wait_ms = 5\n\
        [device]\nname = \"H100-SXM-80GB\"\nprice_per_hour = 2.0\n";

    #[test]
    fn one_run_per_strategy_with_its_parameters_and_a_table() {
        let ws = workspace(ENGINE);
        let sh = Shell::new().unwrap();
        sh.change_dir(ws.path());
        let cmd = bench_cmd(&["--quiet", "--out", "cmp"]);
        let list = "serial,fixed,token_budget,continuous";
        assert_eq!(run(&cmd, list, &sh).unwrap(), Status::Success);
        let dir = ws.path().join("cmp");
        let text = std::fs::read_to_string(dir.join(COMPARISON_FILE)).unwrap();
        let cmp: StrategyComparison = serde_json::from_str(&text).unwrap();
        let names: Vec<BatchStrategy> = cmp.rows.iter().map(|r| r.strategy).collect();
        assert_eq!(names, BatchStrategy::ALL);
        for row in &cmp.rows {
            let s = Summary::read(&ws.path().join(&row.run_dir)).unwrap();
            assert_eq!(s.requests.ok, 8, "{}", row.strategy);
            let params = &s.engine.as_ref().unwrap().params;
            assert_eq!(params["batch"]["strategy"], row.strategy.as_str());
            assert_eq!(s.engine.as_ref().unwrap().file, "configs/engine.toml");
            let ran = format!("cmp/engine-{}.toml", row.strategy);
            assert_eq!(s.config["sim"]["engine_config"], ran.as_str());
            let on_disk = EngineConfig::read(&ws.path().join(&ran)).unwrap();
            assert_eq!(on_disk.batch.strategy, row.strategy);
            assert!(row.mean_ttft_ms.is_some() && row.mean_queue_ms.is_some());
            assert!(row.device_seconds.unwrap() > 0.0 && row.cost.unwrap() > 0.0);
            assert_eq!(row.total_tokens, Some(s.tokens.input_total.unwrap() + 64));
            assert_eq!(s.extra["scheduler"]["strategy"], row.strategy.as_str());
        }
        // The parameter that defines each strategy is in its params.
        let params = |i: usize| {
            Summary::read(&ws.path().join(&cmp.rows[i].run_dir)).unwrap().engine.unwrap().params
        };
        assert_eq!(params(1)["batch"]["fixed_batch_size"], 4);
        assert_eq!(params(2)["batch"]["max_token_budget"], 16384);
        assert_eq!(cmp.rows[0].batching, "1 request");
        let rendered = table(&cmp.rows).to_string();
        assert!(rendered.contains("token_budget") && rendered.contains("mean queue ms"));
        // A second comparison into the same directory is refused rather than mixed in.
        let err = run(&cmd, list, &sh).unwrap_err();
        assert!(err.to_string().contains("already holds a comparison"), "{err}");
    }

    #[test]
    fn bad_lists_and_profiles_with_a_target_are_refused() {
        let ws = workspace(ENGINE);
        let sh = Shell::new().unwrap();
        sh.change_dir(ws.path());
        let err = run(&bench_cmd(&["--quiet"]), "serial,batched", &sh).unwrap_err();
        let text = crate::exit::render_error(&err);
        assert!(text.contains("batched") && text.contains("token_budget"), "{text}");
        let err = run(&bench_cmd(&["--quiet", "--profile", "remote"]), "serial", &sh).unwrap_err();
        assert!(err.to_string().contains("target `x`"), "{err}");
        let err =
            run(&bench_cmd(&["--quiet", "--set", "sim.mode=timing"]), "serial", &sh).unwrap_err();
        assert!(err.to_string().contains("timing"), "{err}");
    }
}
