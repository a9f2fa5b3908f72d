//! `cargo xtask tune`: the configurations of a grid (or `[tune]` table) measured one after
//! another, each in its own engine: the embedded simulator in-process, llama.cpp or vLLM started
//! through `engine serve`'s launcher and stopped after its run.
//!
//! The tune directory (`--out`, default `target/tune/<run id>`) holds each variant engine config
//! (`engine-<name>.toml`), each configuration's run, trial set or load sweep (`<name>/`; with
//! successive halving one per rung, `<name>.rung-K/`), `tune.json`
//! (rewritten atomically after every configuration) and `pareto.svg`. A re-run with the same
//! `--out` skips every configuration whose key (variant config, profile, bench arguments,
//! engine, rung) and complete run are already there; Ctrl-C (exit 130) keeps what was measured.

use infergate_model::metric::MetricPath;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use infergate_model::capacity::{CAPACITY_FILE, CapacityFile};
use infergate_model::config::{ConfigKey, EngineConfig, Source};
use infergate_model::summary::Summary;
use infergate_model::summary::{EngineParams, RunStatus};
use infergate_model::trials::{Trial, TrialSet};
use serde_json::Value as Json;
use xshell::Shell;

use super::grid::{self, Axis, TuneSpec, Variant};
use super::model::{
    AxisRecord, FORMAT_VERSION, GOODPUT, Objective, PARETO_FILE, RowCapacity, RowEstimates,
    RowStatus, Search, SloCompliance, TuneFile, TuneRow, slo_check,
};
use crate::console::ConsoleTable;
use crate::engine_process::{Engine, EngineFlags, EngineProcess};
use crate::exit::Status;
use crate::measure::bench::BenchCmd;
use crate::plan::BenchMode;
use crate::text::{BLANK, fmt_opt};

/// How the configurations are picked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SearchKind {
    /// Every configuration in grid order (the first `--max-configs`).
    Grid,
    /// The grid shuffled with `--seed` (the first `--max-configs` of that order).
    Random,
    /// Successive halving: every configuration with few requests, the better half again with
    /// twice as many, until the last rung runs the full request count.
    Halving,
}

#[derive(Debug, Args)]
// `--objective capacity` searches each configuration's capacity: `--capacity concurrency`
// unless the dimension is given.
#[command(mut_arg("capacity", |a| a.default_value_if("objective", "capacity", "concurrency")))]
pub struct TuneCmd {
    /// Bench flags: the profile each configuration runs (`--out` is the tune directory).
    #[command(flatten)]
    pub bench: BenchCmd,
    /// The governed engine config every variant derives from (default: the profile target's
    /// `engine_config`, else the profile's `sim.engine_config`).
    #[arg(long, value_name = "FILE")]
    pub engine_config: Option<String>,
    /// One axis of the grid: a dotted engine-config key and its values, e.g.
    /// scheduler.max_num_seqs=64,128,256 (repeat for more axes).
    #[arg(long = "grid", value_name = "KEY=V,V,...", value_parser = grid::parse_axis)]
    pub grid: Vec<Axis>,
    /// A file with a [tune] table: [tune.grid] lists and [tune.variants.NAME] tables.
    #[arg(long, value_name = "FILE")]
    pub tune_config: Option<PathBuf>,
    #[command(flatten)]
    pub engine: EngineFlags,
    /// Measure at most N configurations (in the search's order).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_configs: Option<u32>,
    /// Start no new configuration after this many seconds.
    #[arg(long, value_name = "SECONDS")]
    pub time_budget: Option<f64>,
    /// The order configurations are measured in.
    #[arg(long, value_enum, default_value_t = SearchKind::Grid)]
    pub search: SearchKind,
    /// Seed of `--search random`.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Write the winner's keys into the governed engine config.
    #[arg(long)]
    pub apply: bool,
    /// What the configurations are ranked by: `goodput` at the profile's load, or `capacity`
    /// under the SLO (each configuration's `--capacity` search; `--capacity concurrency` unless
    /// given; ties by cost per 1M output tokens). Default: capacity with `--capacity`, else
    /// goodput.
    #[arg(long, value_parser = objective_values(), value_name = "OBJECTIVE")]
    pub objective: Option<Objective>,
}

/// The values of `--objective` (the tune model's [`Objective`], which has no parser of its
/// own).
fn objective_values() -> impl clap::builder::TypedValueParser<Value = Objective> {
    use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
    PossibleValuesParser::new([
        PossibleValue::new("goodput").help(
            "Goodput at the profile's load (requests per second meeting every SLO objective)",
        ),
        PossibleValue::new("capacity").help(
            "Capacity under the SLO: the highest load each configuration's search decided pass \
             (`--capacity`); ties by cost per million output tokens",
        ),
    ])
    .map(|s| if s == "capacity" { Objective::Capacity } else { Objective::Goodput })
}

/// What every configuration shares.
struct Tune<'a> {
    cmd: &'a TuneCmd,
    root: PathBuf,
    dir: PathBuf,
    run_id: String,
    governed: Source,
    governed_rel: String,
    /// Part of every row's key: profile, bench arguments, engine.
    key_base: String,
    slo: infergate_model::metrics::Slo,
    /// The profile's measured requests (successive halving splits them into rungs).
    requests: Option<u64>,
    stop: Arc<AtomicBool>,
}

/// One pass over configurations: successive halving's rung (from 1) and its requests, or
/// the only pass of a grid or random search (`None`).
#[derive(Clone, Copy)]
struct Rung {
    number: u32,
    requests: u64,
}

impl TuneCmd {
    pub fn run(mut self, sh: &Shell) -> anyhow::Result<Status> {
        self.refuse_flags()?;
        if self.objective == Some(Objective::Capacity) && self.bench.capacity.is_none() {
            self.bench.capacity = Some(infergate_model::sweep::Dimension::Concurrency);
        }
        let root = sh.current_dir();
        let spec = self.spec(&root)?;
        let run_id = bench::runner::new_run_id();
        let base = self.bench.plan(&root, run_id.clone())?;
        if let (BenchMode::Sweep(_) | BenchMode::Capacity(_), SearchKind::Halving) =
            (&base.mode, self.search)
        {
            bail!(
                "--search halving splits a run's requests into rungs; with --sweep or --capacity \
                 each configuration runs several loads: choose one of them"
            );
        }
        if self.engine.kind == Engine::Sim
            && let Some((name, _)) = &base.profile.target
        {
            bail!(
                "profile `{}` measures target `{name}`; tune runs each configuration in its own \
                 engine: choose a profile without a target (the simulator) or pass --engine \
                 llama-cpp / vllm",
                base.profile.name
            );
        }
        let target_config = base.profile.target.as_ref().and_then(|(_, t)| t.engine_config.clone());
        let governed_rel = self
            .engine_config
            .clone()
            .or(target_config)
            .unwrap_or_else(|| base.profile.profile.sim.engine_config.clone());
        let governed = Source::read_in(&root, Path::new(&governed_rel))?;
        EngineConfig::from_source(&governed)
            .with_context(|| format!("the governed engine config {governed_rel} is invalid"))?;
        let dir = match &self.bench.out {
            Some(d) => root.join(d),
            None => crate::measure::default_out_dir(&root, "tune", &run_id),
        };
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        let key_base = format!(
            "{:?}\n{} {:?} {:?}\n{}\n{:?}",
            base.profile.profile,
            base.profile.name,
            self.bench.flags.config,
            base.source.overrides,
            self.engine.kind.name(),
            base.mode
        );
        let tune = Tune {
            cmd: &self,
            root,
            dir,
            run_id,
            governed,
            governed_rel,
            key_base,
            slo: base.profile.profile.slo.clone(),
            requests: self.bench.requests.or(base.profile.profile.load.requests),
            stop: crate::measure::listen_for_stop()?,
        };
        tune.run(&spec)
    }

    /// Bench flags that make no sense per configuration.
    fn refuse_flags(&self) -> anyhow::Result<()> {
        let b = &self.bench;
        for (set, flag) in [
            (b.compare_strategies.is_some(), "--compare-strategies"),
            (b.gate, "--gate"),
            (b.report, "--report"),
            (b.until_decided, "--until-decided"),
            (b.base_url.is_some(), "--base-url"),
            (b.target.is_some(), "--target"),
        ] {
            if set {
                bail!(
                    "tune does not take {flag}: it starts each configuration's engine and runs the \
                     profile against it (see docs/tune.md)"
                );
            }
        }
        Ok(())
    }

    /// The axes of `--grid` and the `[tune]` table of `--tune-config`.
    fn spec(&self, root: &Path) -> anyhow::Result<TuneSpec> {
        let mut spec = match &self.tune_config {
            Some(f) => grid::read_tune_table(&Source::read_in(root, f)?)?,
            None => TuneSpec::default(),
        };
        spec.axes.extend(self.grid.iter().cloned());
        if spec.axes.is_empty() && spec.variants.is_empty() {
            bail!(
                "nothing to tune: pass --grid KEY=V,V,... (e.g. --grid \
                 scheduler.max_num_seqs=64,128,256) or --tune-config FILE with a [tune] table"
            );
        }
        for (i, a) in spec.axes.iter().enumerate() {
            if spec.axes[..i].iter().any(|b| b.key == a.key) {
                bail!("the grid names `{}` twice", a.key);
            }
        }
        Ok(spec)
    }

    /// What the rows are ranked by: as asked, else capacity when each configuration runs a
    /// capacity search.
    fn objective(&self) -> Objective {
        self.objective.unwrap_or(if self.bench.capacity.is_some() {
            Objective::Capacity
        } else {
            Objective::Goodput
        })
    }

    fn search(&self) -> Search {
        match self.search {
            SearchKind::Grid => Search::Grid,
            SearchKind::Random => Search::Random { seed: self.seed },
            SearchKind::Halving => Search::Halving,
        }
    }
}

fn settings_json(v: &Variant) -> Vec<(ConfigKey, Json)> {
    v.settings
        .iter()
        .map(|(k, val)| (k.clone(), serde_json::to_value(val).expect("TOML values convert")))
        .collect()
}

fn toml_json(text: &str) -> anyhow::Result<Json> {
    let table: toml::Table = toml::from_str(text).context("engine configs parse")?;
    Ok(serde_json::to_value(table).expect("TOML tables convert to JSON"))
}

/// Mean of the values the trials measured.
fn mean(values: Vec<Option<f64>>) -> Option<f64> {
    let v: Vec<f64> = values.into_iter().flatten().collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

impl Tune<'_> {
    fn run(&self, spec: &TuneSpec) -> anyhow::Result<Status> {
        // Configurations are built from their index: only those measured exist in memory.
        let n = spec.count()?;
        let measured = self.cmd.max_configs.map_or(n, |m| u64::from(m).min(n));
        if measured > grid::MAX_TUNE_CONFIGS {
            bail!(
                "the grid has {n} configurations, more than a tune measures ({}): pass \
                 --max-configs N (with --search random for a random sample) or narrow the axes",
                grid::MAX_TUNE_CONFIGS
            );
        }
        let search = self.cmd.search();
        let picked = search.order(n as usize, Some(measured as usize));
        let variants: Vec<Variant> = picked.iter().map(|&i| spec.variant(i as u64)).collect();
        let order: Vec<usize> = (0..variants.len()).collect();
        let previous = TuneFile::read(&self.dir).ok();
        let mut file = TuneFile {
            format: FORMAT_VERSION,
            profile: self.cmd.bench.flags.profile.clone(),
            engine_config: self.governed_rel.clone(),
            engine: self.cmd.engine.kind.name().into(),
            search: search.label(),
            objective: self.cmd.objective(),
            command: self.cmd.bench.command_line.clone(),
            axes: spec
                .axes
                .iter()
                .map(|a| AxisRecord {
                    key: a.key.clone(),
                    values: a.values.iter().map(|v| serde_json::to_value(v).unwrap()).collect(),
                })
                .collect(),
            rows: Vec::new(),
            earlier: Vec::new(),
            winner: None,
            decided_by: None,
            tie_break: None,
            indistinguishable: Vec::new(),
            rivals: Vec::new(),
            slo_undecided: Vec::new(),
            beyond_max_configs: 0,
            capacity_overlaps: Vec::new(),
            warnings: Vec::new(),
        };
        let rungs: Vec<Option<Rung>> = match search {
            Search::Halving => {
                let Some(full) = self.requests else {
                    bail!(
                        "--search halving splits the measured requests into rungs: pass \
                         --requests N or set load.requests in the profile"
                    );
                };
                let rungs = super::model::halving_rungs(full, order.len());
                (1..).zip(rungs).map(|(number, requests)| Some(Rung { number, requests })).collect()
            }
            _ => vec![None],
        };
        let started = Instant::now();
        let mut interrupted = false;
        // Where each configuration's row is in `file.rows`.
        let mut at: Vec<Option<usize>> = vec![None; variants.len()];
        let mut survivors = order.clone();
        for (r, &rung) in rungs.iter().enumerate() {
            let n = survivors.len();
            for (step, &i) in survivors.iter().enumerate() {
                let v = &variants[i];
                let over_budget =
                    self.cmd.time_budget.is_some_and(|b| started.elapsed().as_secs_f64() >= b);
                let row = if interrupted || self.stop.load(Ordering::SeqCst) {
                    interrupted = true;
                    TuneRow::unmeasured(&v.name, settings_json(v), RowStatus::Interrupted)
                } else if over_budget {
                    let mut r = TuneRow::unmeasured(&v.name, settings_json(v), RowStatus::Skipped);
                    r.error = Some("the time budget was spent".into());
                    r
                } else {
                    let tag = match rung {
                        Some(g) => format!("[rung {}/{}, {}/{n}]", g.number, rungs.len(), step + 1),
                        None => format!("[{}/{n}]", step + 1),
                    };
                    eprintln!("{tag} {}", v.name);
                    let row = self.configuration(v, step, rung, previous.as_ref())?;
                    interrupted = row.status == RowStatus::Interrupted;
                    eprintln!("{tag} {}: {}", v.name, progress_line(&row));
                    row
                };
                match at[i] {
                    Some(p) => file.earlier.push(std::mem::replace(&mut file.rows[p], row)),
                    None => {
                        at[i] = Some(file.rows.len());
                        file.rows.push(row);
                    }
                }
                file.decide(&spec.axes);
                self.write(&file)?;
            }
            if interrupted || r + 1 == rungs.len() {
                break;
            }
            let rows: Vec<&TuneRow> =
                survivors.iter().map(|&i| &file.rows[at[i].unwrap()]).collect();
            let kept: Vec<usize> =
                super::model::better_half(&rows).into_iter().map(|k| survivors[k]).collect();
            for &i in survivors.iter().filter(|i| !kept.contains(i)) {
                file.rows[at[i].unwrap()].eliminated = true;
            }
            survivors = kept;
        }
        // The configurations beyond --max-configs: rows while they are few, else a count.
        let beyond = n - variants.len() as u64;
        if beyond > grid::LISTED_SKIPS {
            file.beyond_max_configs = beyond;
        } else if beyond > 0 {
            let picked: std::collections::HashSet<usize> = picked.iter().copied().collect();
            for i in (0..n as usize).filter(|i| !picked.contains(i)) {
                let v = spec.variant(i as u64);
                let mut r = TuneRow::unmeasured(&v.name, settings_json(&v), RowStatus::Skipped);
                r.error = Some("beyond --max-configs".into());
                file.rows.push(r);
            }
        }
        file.decide(&spec.axes);
        self.write(&file)?;
        self.finish(&file, interrupted)
    }

    /// `tune.json` and `pareto.svg`, atomically.
    fn write(&self, file: &TuneFile) -> anyhow::Result<()> {
        infergate_model::artifact::write(&self.dir, file)?;
        let svg = crate::chart::figures::pareto_svg(&file.pareto_points());
        infergate_model::rundir::write_atomic(&self.dir.join(PARETO_FILE), svg.as_bytes())?;
        Ok(())
    }

    /// Measure one configuration (or take its row from the previous tune when its key and its
    /// complete run are there).
    fn configuration(
        &self,
        v: &Variant,
        step: usize,
        rung: Option<Rung>,
        previous: Option<&TuneFile>,
    ) -> anyhow::Result<TuneRow> {
        let name = grid::dir_name(&v.name);
        let mut row = TuneRow::unmeasured(&v.name, settings_json(v), RowStatus::Failed);
        row.rung = rung.map(|g| g.number);
        let run_name = match rung {
            Some(g) => format!("{name}.rung-{}", g.number),
            None => name.clone(),
        };
        row.dir = run_name.clone();
        let text = match grid::variant_text(&self.governed, v) {
            Ok(t) => t,
            Err(e) => {
                row.error = Some(format!("not a valid engine config: {e}"));
                return Ok(row);
            }
        };
        let config = self.dir.join(format!("engine-{name}.toml"));
        infergate_model::rundir::write_atomic(&config, text.as_bytes())
            .with_context(|| format!("cannot write {}", config.display()))?;
        row.config = rel(&config, &self.root);
        let rung_requests = rung.map(|g| g.requests);
        let keyed = format!("{text}\n{}\n{rung_requests:?}", self.key_base);
        row.key = format!("{:016x}", infergate_model::hash::fnv1a(keyed.as_bytes()));
        let run_dir = self.dir.join(&run_name);
        let mut old_rows = previous.into_iter().flat_map(|p| p.rows.iter().chain(&p.earlier));
        if let Some(old) = old_rows.find(|r| r.key == row.key && r.status == RowStatus::Measured)
            && complete(&run_dir)
        {
            eprintln!("  measured before with the same inputs: kept");
            // Whether it goes on is decided again after this rung.
            return Ok(TuneRow { eliminated: false, ..old.clone() });
        }
        if run_dir.exists() {
            // Only a directory this tune wrote (listed in its tune.json) is measured over.
            let ours = previous
                .is_some_and(|p| p.rows.iter().chain(&p.earlier).any(|r| r.dir == run_name));
            if !ours {
                bail!(
                    "{} exists and is not a run of the tune in {}; choose another --out or \
                     remove it",
                    run_dir.display(),
                    self.dir.display()
                );
            }
            std::fs::remove_dir_all(&run_dir).with_context(|| {
                format!("cannot remove the incomplete run {}", run_dir.display())
            })?;
        }
        let started = Instant::now();
        let status = self.measure(&text, &config, &run_dir, (step, rung_requests), &mut row);
        row.elapsed_s = Some(started.elapsed().as_secs_f64());
        match status {
            Ok(Status::Interrupted) => row.status = RowStatus::Interrupted,
            Ok(_) => self.fill(&mut row, &run_dir),
            Err(e) => row.error = Some(crate::exit::render_error(&e).trim().to_string()),
        }
        Ok(row)
    }

    /// Start the engine (real engines), run the profile, stop the engine.
    fn measure(
        &self,
        text: &str,
        config: &Path,
        run_dir: &Path,
        (step, requests): (usize, Option<u64>),
        row: &mut TuneRow,
    ) -> anyhow::Result<Status> {
        let mut cmd = self.cmd.bench.clone();
        cmd.out = Some(run_dir.to_path_buf());
        cmd.quiet = true;
        if requests.is_some() {
            cmd.requests = requests;
        }
        let engine = self.start_engine(text, config, run_dir)?;
        if engine.is_some() && self.stop.load(Ordering::SeqCst) {
            // Ctrl-C while the engine started: stop it, measure nothing.
            return Ok(Status::Interrupted);
        }
        if let Some(e) = &engine {
            cmd.base_url = Some(e.base_url.clone());
            cmd.model = Some(e.model_id.clone());
        }
        let mut plan = cmd.plan(&self.root, format!("{}-{:02}", self.run_id, step + 1))?;
        plan.engine = Some(EngineParams::derived(
            &row.config,
            toml_json(text)?,
            &self.governed_rel,
            &toml_json(&self.governed.text)?,
        ));
        if engine.is_none() {
            plan.profile.profile.sim.engine_config = row.config.clone();
            // Sweep stages and capacity probes resolve their profiles again from the source:
            // the variant config goes with them as an override.
            plan.source.overrides.push(infergate_model::config::Override::new(
                ConfigKey::literal("sim.engine_config"),
                row.config.clone(),
                format!("tune configuration `{}`", row.name),
            ));
        }
        let status = crate::measure::bench::execute(&plan);
        if let Some(e) = engine {
            e.stop();
        }
        status
    }

    fn start_engine(
        &self,
        text: &str,
        config: &Path,
        run_dir: &Path,
    ) -> anyhow::Result<Option<EngineProcess>> {
        let log = PathBuf::from(format!("{}.engine.log", run_dir.display()));
        self.cmd.engine.start(&self.root, (config, text), log)
    }

    /// The row's measurements from its run or trial set (a trial set: the mean of its trials;
    /// a sweep: its knee stage, else its last), each with its estimate (t across trials, the
    /// request bootstrap of a single run), and the SLOs decided from the intervals.
    fn fill(&self, row: &mut TuneRow, run_dir: &Path) {
        if run_dir.join(CAPACITY_FILE).is_file() {
            return fill_capacity(row, run_dir, &self.slo);
        }
        let run_dir = match sweep_stage(run_dir) {
            Ok(Some((dir, which))) => {
                row.sweep_stage = Some(which);
                dir
            }
            Ok(None) => run_dir.to_path_buf(),
            Err(e) => {
                row.error = Some(e);
                return;
            }
        };
        let set = match TrialSet::load(&run_dir) {
            Ok(s) => s,
            Err(e) => {
                row.error = Some(format!("no run to read: {e}"));
                return;
            }
        };
        fill_from_set(row, &set, &self.slo);
    }

    fn finish(&self, file: &TuneFile, interrupted: bool) -> anyhow::Result<Status> {
        println!("{}", table(file));
        println!("{}", legend(file));
        if file.beyond_max_configs > 0 {
            println!(
                "{} more configurations of the grid beyond --max-configs were not measured (counted \
                 in tune.json, not listed)",
                file.beyond_max_configs
            );
        }
        for w in &file.warnings {
            println!("warning: {w}");
        }
        println!("tune directory: {}", self.dir.display());
        if interrupted {
            eprintln!("interrupted: re-run the same command to measure the missing configurations");
            return Ok(Status::Interrupted);
        }
        let (Some(w), Some(statement)) = (file.winner_row(), file.statement()) else {
            eprintln!("error: {}", file.no_winner());
            return Ok(Status::PolicyViolated);
        };
        println!("winner: {statement}");
        if self.cmd.apply {
            let settings: Vec<(ConfigKey, toml::Value)> = w
                .settings
                .iter()
                .map(|(k, v)| Ok((k.clone(), toml::Value::try_from(v)?)))
                .collect::<Result<_, toml::ser::Error>>()?;
            let text = super::apply::apply(&self.governed.text, &settings)
                .with_context(|| format!("cannot apply the winner to {}", self.governed_rel))?;
            infergate_model::rundir::write_atomic(
                &self.root.join(&self.governed_rel),
                text.as_bytes(),
            )?;
            println!(
                "applied to {}; record it: {} adr new \"<title>\" --tune {}",
                self.governed_rel,
                crate::text::tool(),
                rel(&self.dir, &self.root)
            );
        }
        Ok(Status::Success)
    }
}

/// The row's figures from a run or trial set: each metric the mean of its trials with its
/// estimate (t across trials, the request bootstrap of a single run), and the SLOs decided from
/// the intervals.
fn fill_from_set(row: &mut TuneRow, set: &TrialSet, slo: &infergate_model::metrics::Slo) {
    let m = |metric: &str| mean(set.per_trial(MetricPath::named(metric)));
    row.trials = set.trials.len();
    row.requests = set.requests();
    row.goodput_rps = m("goodput.requests_per_s");
    row.goodput_ratio = m("goodput.ratio");
    row.output_tokens_per_s = m("throughput.output_tokens_per_s");
    row.ttft_p99_ms = m("metrics.ttft_ms.p99");
    row.tpot_p99_ms = m("metrics.tpot_ms.p99");
    row.e2e_p99_ms = m("metrics.e2e_ms.p99");
    let metrics = [
        GOODPUT,
        "throughput.output_tokens_per_s",
        "metrics.ttft_ms.p99",
        "metrics.tpot_ms.p99",
        "metrics.e2e_ms.p99",
    ]
    .map(MetricPath::named);
    let mut est = set.estimates(&metrics, infergate_model::stats::Options::default());
    let mut take = |m: MetricPath| est.remove(&m).and_then(|e| e.estimate);
    row.estimates = RowEstimates {
        goodput_rps: take(metrics[0]),
        output_tokens_per_s: take(metrics[1]),
        ttft_p99_ms: take(metrics[2]),
        tpot_p99_ms: take(metrics[3]),
        e2e_p99_ms: take(metrics[4]),
    };
    let all_failed = set.trials.iter().all(|t| t.summary.status == RunStatus::Failed);
    if all_failed {
        row.error = Some("no measured request succeeded; see requests.jsonl".into());
        return;
    }
    row.status = RowStatus::Measured;
    let e = &row.estimates;
    (row.slo_misses, row.slo_undecided) = slo_check(
        slo,
        [
            (row.ttft_p99_ms, e.ttft_p99_ms.as_ref()),
            (row.tpot_p99_ms, e.tpot_p99_ms.as_ref()),
            (row.e2e_p99_ms, e.e2e_p99_ms.as_ref()),
        ],
    );
}

/// A capacity search's row: its bracket, and the figures of the probe that stands for it (the
/// bracket's passing load, else the lowest load probed) over that probe's trials.
fn fill_capacity(row: &mut TuneRow, dir: &Path, slo: &infergate_model::metrics::Slo) {
    let file = match CapacityFile::read(dir) {
        Ok(f) => f,
        Err(e) => {
            row.error = Some(format!("no capacity search to read: {e}"));
            return;
        }
    };
    let bracket = file.bracket.clone();
    row.capacity = Some(RowCapacity {
        dimension: file.search.spec.dimension.name().to_string(),
        target: file.search.spec.target,
        bracket: bracket.clone(),
        binding: file.binding.clone(),
        requests: file.search.spent_requests,
    });
    let Some(probe) = file.standing_probe() else {
        row.error = Some("the capacity search measured no load".into());
        return;
    };
    let load = probe.load;
    let trials: Vec<Trial> = probe
        .trials
        .iter()
        .filter_map(|t| t.dir.as_ref())
        .filter_map(|d| {
            let dir = dir.join(d);
            Summary::read(&dir).ok().map(|summary| Trial { dir, summary })
        })
        .collect();
    if trials.is_empty() {
        row.error =
            Some(format!("no trial of {} {load} to read", file.search.spec.dimension.name()));
        return;
    }
    let which =
        if bracket.pass == Some(load) { "capacity, passing load" } else { "lowest load probed" };
    row.sweep_stage = Some(format!("{which}: {} {load}", file.search.spec.dimension.name()));
    let set = TrialSet::from_trials(dir.to_path_buf(), trials);
    row.cost_per_1m_output_tokens =
        mean(set.per_trial(MetricPath::named("cost.per_1m_output_tokens")));
    fill_from_set(row, &set, slo);
    row.requests = file.search.spent_requests;
}

/// The stage of a sweep directory that stands for it, with which one it is in words (`knee,
/// concurrency 8`); `None` for a run or trial set.
fn sweep_stage(dir: &Path) -> Result<Option<(PathBuf, String)>, String> {
    if !dir.join(infergate_model::sweep::SWEEP_FILE).is_file() {
        return Ok(None);
    }
    let sweep = infergate_model::sweep::SweepSummary::read(dir).map_err(|e| e.to_string())?;
    let (stage, which) = match &sweep.knee {
        Some(k) => (sweep.stages.iter().find(|s| s.stage == k.stage), "knee"),
        None => (sweep.stages.last(), "last stage, no knee"),
    };
    let stage = stage.ok_or_else(|| format!("the sweep {} has no stage", dir.display()))?;
    Ok(Some((dir.join(&stage.dir), format!("{which}: {} {}", sweep.dimension.name(), stage.load))))
}

/// A run, trial set, sweep or capacity search that ran to its end.
fn complete(dir: &Path) -> bool {
    if dir.join(CAPACITY_FILE).is_file() {
        return CapacityFile::read(dir).is_ok_and(|c| {
            c.search.stop.is_some_and(|s| s != infergate_model::capacity::StopReason::Interrupted)
        });
    }
    if dir.join(infergate_model::sweep::SWEEP_FILE).is_file() {
        return infergate_model::sweep::SweepSummary::read(dir).is_ok_and(|s| {
            s.stages.len() == s.values.len()
                && s.stages.iter().all(|st| st.status == RunStatus::Complete)
        });
    }
    TrialSet::load(dir).is_ok_and(|s| {
        !s.trials.is_empty()
            && s.trials.iter().all(|t| matches!(t.summary.status, RunStatus::Complete))
    })
}

fn rel(path: &Path, root: &Path) -> String {
    path.strip_prefix(root).unwrap_or(path).display().to_string()
}

fn progress_line(r: &TuneRow) -> String {
    if let (RowStatus::Measured, Some(c)) = (&r.status, &r.capacity) {
        return format!(
            "capacity {} at SLO attainment >= {}{}, {} requests",
            c.text(),
            c.target,
            c.binding.as_deref().map(|b| format!(" (binding: {b})")).unwrap_or_default(),
            c.requests
        );
    }
    match (&r.status, &r.error) {
        (RowStatus::Measured, _) => format!(
            "goodput {} req/s, {} output tok/s, TTFT P99 {} ms{}",
            shown(r.estimates.goodput_rps.as_ref(), r.goodput_rps, 2),
            shown(r.estimates.output_tokens_per_s.as_ref(), r.output_tokens_per_s, 1),
            shown(r.estimates.ttft_p99_ms.as_ref(), r.ttft_p99_ms, 1),
            match r.slo_compliance() {
                Some(SloCompliance::Misses) => "; misses its SLO",
                Some(SloCompliance::Undecided) => "; SLO undecided",
                _ => "",
            }
        ),
        (RowStatus::Interrupted, _) => "interrupted".into(),
        (_, Some(e)) => format!("failed: {}", e.lines().next().unwrap_or_default()),
        _ => "failed".into(),
    }
}

/// An estimate as `value ± half-width` (marks: `~` one run, `*` undersampled), else the value.
fn shown(e: Option<&infergate_model::stats::Estimate>, v: Option<f64>, decimals: usize) -> String {
    e.map_or_else(|| fmt_opt(v, decimals), |e| e.short().to_string())
}

/// What the table's intervals are, under it.
pub fn legend(file: &TuneFile) -> String {
    let one_run = file
        .rows
        .iter()
        .any(|r| r.estimates.goodput_rps.as_ref().is_some_and(|e| !e.method.counts_run_to_run()));
    let mut s = format!(
        "value ± half-width of the {}% interval: t across trials; ~ one run, the request \
         bootstrap (run-to-run variance not counted); * undersampled. SLOs: met when the \
         interval's unfavourable end is within the limit, missed when its favourable end is \
         beyond it, else undecided.",
        infergate_model::stats::DEFAULT_CONFIDENCE * 100.0
    );
    if one_run {
        s.push_str(&format!(" --trials {} counts run-to-run variance.", file.more_trials()));
    }
    s
}

/// Every configuration, one row each; blank cells were not measured. A capacity tune's table
/// ([`capacity_table`]) leads with each configuration's bracket.
pub fn table(file: &TuneFile) -> ConsoleTable {
    if file.rows.iter().any(|r| r.capacity.is_some()) {
        return capacity_table(file);
    }
    let mut t = ConsoleTable::framed([
        "configuration",
        "status",
        "trials × requests",
        "goodput req/s",
        "goodput %",
        "output tok/s",
        "TTFT P99 ms",
        "TPOT P99 ms",
        "SLOs",
        "front",
    ])
    .right_aligned(2..8);
    for r in &file.rows {
        let winner = file.winner.as_deref() == Some(r.name.as_str());
        let status = match r.status {
            RowStatus::Measured => "measured".to_string(),
            RowStatus::Failed => {
                format!(
                    "failed: {}",
                    r.error.as_deref().unwrap_or_default().lines().next().unwrap_or_default()
                )
            }
            RowStatus::Interrupted => "interrupted".into(),
            RowStatus::Skipped => format!("skipped: {}", r.error.as_deref().unwrap_or_default()),
        };
        let slos = r.slo_compliance().map_or(BLANK, |c| c.as_str());
        let n = match r.status {
            RowStatus::Measured => {
                format!("{} × {}", r.trials, r.requests / r.trials.max(1) as u64)
            }
            _ => BLANK.into(),
        };
        let front = match (r.pareto, r.goodput_pareto) {
            (true, true) => "tput, goodput",
            (true, false) => "tput",
            (false, true) => "goodput",
            (false, false) => "",
        };
        t.row([
            if winner { format!("{} (winner)", r.name) } else { r.name.clone() },
            status,
            n,
            shown(r.estimates.goodput_rps.as_ref(), r.goodput_rps, 2),
            fmt_opt(r.goodput_ratio.map(|g| g * 100.0), 1),
            shown(r.estimates.output_tokens_per_s.as_ref(), r.output_tokens_per_s, 1),
            shown(r.estimates.ttft_p99_ms.as_ref(), r.ttft_p99_ms, 1),
            fmt_opt(r.tpot_p99_ms, 1),
            slos.to_string(),
            front.to_string(),
        ]);
    }
    t
}

/// A capacity tune's rows: the bracket, the binding objective, the search's requests, the cost
/// and the passing load's figures.
fn capacity_table(file: &TuneFile) -> ConsoleTable {
    let mut t = ConsoleTable::framed([
        "configuration",
        "status",
        "capacity",
        "binding",
        "requests",
        "cost / 1M tok",
        "goodput req/s",
        "TTFT P99 ms",
    ])
    .right_aligned(4..8);
    for r in &file.rows {
        let winner = file.winner.as_deref() == Some(r.name.as_str());
        let status = match (r.status, &r.error) {
            (RowStatus::Measured, _) => "measured".to_string(),
            (RowStatus::Interrupted, _) => "interrupted".into(),
            (s, e) => format!(
                "{}: {}",
                if s == RowStatus::Skipped { "skipped" } else { "failed" },
                e.as_deref().unwrap_or_default().lines().next().unwrap_or_default()
            ),
        };
        let c = r.capacity.as_ref();
        t.row([
            if winner { format!("{} (winner)", r.name) } else { r.name.clone() },
            status,
            c.map_or(BLANK.into(), |c| c.text()),
            c.and_then(|c| c.binding.clone()).unwrap_or_else(|| BLANK.into()),
            c.map_or(BLANK.into(), |c| c.requests.to_string()),
            fmt_opt(r.cost_per_1m_output_tokens, 3),
            shown(r.estimates.goodput_rps.as_ref(), r.goodput_rps, 2),
            shown(r.estimates.ttft_p99_ms.as_ref(), r.ttft_p99_ms, 1),
        ]);
    }
    t
}
