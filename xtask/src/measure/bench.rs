//! `cargo xtask bench`: measure a server (the embedded simulator by default).
//!
//! The flags ([`BenchCmd`]) resolve once into a [`BenchPlan`] (`plan.rs`); this module runs a
//! single run itself and hands sweeps to `sweep.rs`, capacity searches to `capacity.rs`, trial
//! sets to `trials.rs` and strategy comparisons to `strategies.rs`, which take the plan, never
//! the flags.

use std::path::{Path, PathBuf};

use anyhow::Context;
use bench::runner::{self, RunControl};
use clap::Args;
use infergate_model::capacity::{Budget, CapacitySpec, Limit};
use infergate_model::config::{BenchConfig, ConfigKey, Override, Target};
use infergate_model::summary::{EngineParams, RunStatus};
use infergate_model::sweep::{Dimension, StagePlan, SweepSpec};
use infergate_model::trials::TrialRequest;
use xshell::Shell;

use crate::exit::Status;
use crate::measure::flags::MeasureFlags;
use crate::plan::{
    BenchMode, BenchPlan, CapacityPlan, GateSettings, PlanError, ProfileSource, StrategyList,
    SweepPlan, TrialPlan, check_capacity, check_comparable,
};
use crate::thresholds::{GateOptions, Thresholds};
use crate::{gitinfo, measure, run_report as report, thresholds};

#[derive(Clone, Debug, Args)]
#[command(group(clap::ArgGroup::new("load_search").args(["sweep", "capacity"])))]
pub struct BenchCmd {
    /// The profile, its bench config and `--set`.
    #[command(flatten)]
    pub flags: MeasureFlags,
    /// Measure this target from the config instead of the profile's.
    #[arg(long, value_name = "NAME", conflicts_with = "base_url")]
    pub target: Option<String>,
    /// Measure a server at this URL (with or without /v1) without naming it in the config.
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// Model id (default: the target's, else the first one /v1/models offers).
    #[arg(long)]
    pub model: Option<String>,
    /// Environment variable holding the API key for --base-url.
    #[arg(long, value_name = "VAR", requires = "base_url")]
    pub api_key_env: Option<String>,
    /// Closed loop with this many concurrent requests.
    #[arg(long, conflicts_with = "rate")]
    pub concurrency: Option<u32>,
    /// Open loop at this many requests per second.
    #[arg(long)]
    pub rate: Option<f64>,
    /// Replay this request trace (Mooncake JSONL, BurstGPT CSV or infergate JSONL; see
    /// docs/workloads.md): load.mode = "trace", workload.trace = FILE.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["concurrency", "rate"])]
    pub trace: Option<String>,
    /// Trace replay: send times are trace times x SCALE (0.5 replays twice as fast).
    #[arg(long, value_name = "SCALE")]
    pub time_scale: Option<f64>,
    /// Trace replay: start this many seconds (trace time) after the first record.
    #[arg(long, value_name = "SECONDS")]
    pub trace_start: Option<f64>,
    /// Trace replay: replay this many seconds (trace time) of the trace.
    #[arg(long, value_name = "SECONDS")]
    pub trace_duration: Option<f64>,
    /// Measured requests to send.
    #[arg(long)]
    pub requests: Option<u64>,
    /// Stop scheduling measured requests after this long: seconds, or 90s, 10m, 1h.
    #[arg(long, value_name = "DURATION", value_parser = crate::text::parse_duration_s)]
    pub duration: Option<f64>,
    /// Output tokens per request.
    #[arg(long)]
    pub max_tokens: Option<u32>,
    /// Run directory (default: target/bench/<run id>).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// No progress bar and no informational lines.
    #[arg(short, long)]
    pub quiet: bool,
    /// Sweep the load, one run per stage: concurrency=32,128,256 or rate=2,4,8 (see
    /// docs/acceptance.md). The sweep directory gets sweep.json and sweep.svg.
    #[arg(
        long,
        value_name = "DIM=V,V,...",
        conflicts_with_all = ["concurrency", "rate", "compare_strategies"]
    )]
    pub sweep: Option<SweepSpec>,
    /// Sweep or capacity search: length of each stage (each trial of a probe) in seconds
    /// (default: stages are counted in requests).
    #[arg(
        long,
        value_name = "SECONDS",
        requires = "load_search",
        value_parser = parse_stage_duration
    )]
    pub stage_duration: Option<f64>,
    /// Sweep or capacity search: share of each stage (each trial of a probe) dropped as warmup
    /// before the measured steady state, within 0..0.9 (default: 1/3).
    #[arg(long, value_name = "F", requires = "load_search", value_parser = parse_warmup_fraction)]
    pub warmup_fraction: Option<f64>,
    /// Capacity under the SLO: the highest load at which the profile's goodput SLO (`[slo]`)
    /// holds, `concurrency` (closed loop) or `rate` (open loop, requests per second), searched
    /// probe by probe, each decided from its interval over trials (see docs/capacity.md). The
    /// capacity directory gets capacity.json, capacity.svg and a run directory per trial. Exit
    /// 0: a load was decided to hold the SLO; 1: none held it; 3: no load could be decided.
    #[arg(
        long,
        value_name = "DIM",
        value_parser = parse_capacity_dimension,
        conflicts_with_all = [
            "sweep", "compare_strategies", "trials", "concurrency", "rate", "trace", "shard",
            "gate", "warmup_trials", "until_decided",
        ]
    )]
    pub capacity: Option<Dimension>,
    /// Capacity: the SLO attainment a load must reach (the share of its measured requests
    /// meeting every objective of `[slo]`), within (0, 1] (default 0.95).
    #[arg(long, value_name = "F", requires = "capacity")]
    pub capacity_target: Option<f64>,
    /// Capacity: a percentile limit every load must hold too, METRIC<=VALUE (like
    /// metrics.ttft_ms.p99<=350); repeatable.
    #[arg(long, value_name = "METRIC<=V", requires = "capacity")]
    pub capacity_limit: Vec<Limit>,
    /// Capacity: the first load probed (default 1); the search doubles it until a load fails,
    /// or halves it while the first fails.
    #[arg(long, value_name = "N", requires = "capacity")]
    pub capacity_start: Option<f64>,
    /// Capacity: the highest load probed (default 4096 concurrent requests, 10000 requests/s).
    #[arg(long, value_name = "N", requires = "capacity")]
    pub capacity_max: Option<f64>,
    /// Capacity: the bracket's relative width at which the search stops, within (0, 1)
    /// (default 0.1).
    #[arg(long, value_name = "F", requires = "capacity")]
    pub capacity_resolution: Option<f64>,
    /// Capacity: trials a load measures before it is decided, and the most it grows to while
    /// undecided: MIN..MAX, or N for N..N (default 3..5).
    #[arg(
        long,
        value_name = "MIN..MAX",
        requires = "capacity",
        value_parser = parse_capacity_trials
    )]
    pub capacity_trials: Option<(u32, u32)>,
    /// Capacity: what the search may spend, requests sent (5000), a time (90s, 20m, 1h) or
    /// both (5000,20m); the search stops before a probe that would not fit (default: no budget).
    #[arg(long, value_name = "BUDGET", requires = "capacity")]
    pub capacity_budget: Option<Budget>,
    /// Gate every measured run (a single run, each stage of a sweep, each run of a comparison)
    /// against the thresholds of the accepted decision records: exit 1 when a blocking
    /// threshold fails.
    #[arg(long)]
    pub gate: bool,
    /// Thresholds file for --gate.
    #[arg(long, value_name = "FILE", default_value = crate::thresholds::GATE_FILE, requires = "gate")]
    pub thresholds: PathBuf,
    /// With --gate, also print GitHub Actions annotations.
    #[arg(long, requires = "gate")]
    pub github: bool,
    /// Run the profile once per batching strategy against the embedded engine simulator and
    /// compare them, e.g. serial,fixed,token_budget,continuous (--out is the comparison's
    /// directory).
    #[arg(long, value_name = "LIST", conflicts_with_all = ["base_url", "target"])]
    pub compare_strategies: Option<StrategyList>,
    /// Also write report.html (see `cargo xtask report`) into the run, sweep, capacity or
    /// comparison directory at the end.
    #[arg(long)]
    pub report: bool,
    /// Measure the profile N times, a trial set: each trial a run directory (`trial-01`, ...)
    /// inside --out, beside trials.json with every gated metric's estimate and interval
    /// (overrides the profile's `trials`).
    #[arg(
        long,
        value_name = "N",
        conflicts_with_all = ["sweep", "compare_strategies"],
        value_parser = parse_trials
    )]
    pub trials: Option<u32>,
    /// Append the trial set's per-trial values to the history of the repository
    /// (`refs/infergate/history`), for `cargo xtask trend` (a gated set is appended anyway).
    #[arg(long = "history", requires = "trials")]
    pub record_history: bool,
    /// Measure N whole trials before the trial set's first, for an engine's cold start: each a
    /// run directory `warmup-NN` in --out, listed in trials.json with its headline metrics,
    /// never part of an estimate or the gate (overrides the profile's `load.warmup_trials`).
    #[arg(
        long,
        value_name = "N",
        conflicts_with_all = ["sweep", "compare_strategies"],
        value_parser = parse_warmup_trials
    )]
    pub warmup_trials: Option<u32>,
    /// Seconds to wait between two trials (overrides the profile's `cooldown_s`).
    #[arg(long, value_name = "SECONDS")]
    pub cooldown: Option<f64>,
    /// Coverage of the confidence intervals of a trial set's estimates, of the gate's verdicts
    /// and of a capacity search's decision at each load, within (0, 1).
    #[arg(long, value_name = "P", default_value_t = infergate_model::stats::DEFAULT_CONFIDENCE, value_parser = infergate_model::stats::parse_confidence)]
    pub confidence: f64,
    /// With --gate: decide even when a trial ran on a busy client host (by default its checks
    /// are inconclusive, naming the trial).
    #[arg(long, requires = "gate")]
    pub allow_busy_host: bool,
    /// With --gate on a trial set: add trials until every blocking threshold is decided (pass
    /// or fail), up to --max-trials, each look at a Bonferroni-corrected confidence.
    #[arg(long, requires = "gate", requires = "max_trials", conflicts_with_all = ["sweep", "compare_strategies"])]
    pub until_decided: bool,
    /// With --until-decided: the most trials the set may hold.
    #[arg(long, value_name = "K", requires = "until_decided", value_parser = parse_trials)]
    pub max_trials: Option<u32>,
    /// Run shard I of N of the profile (indexes from 0, as Kubernetes' JOB_COMPLETION_INDEX):
    /// its part of the concurrency, rate or trace (see docs/sharding.md). Needs a target (one
    /// server the shards share) and --run-id or --start-at; `bench merge` joins the shards.
    #[arg(long, value_name = "I/N", conflicts_with_all = ["sweep", "compare_strategies", "trials"])]
    pub shard: Option<infergate_model::shard::Shard>,
    /// With --shard: the wall-clock time the load starts at, shared by every shard (RFC 3339,
    /// e.g. 2026-12-01T10:00:00Z); the shard connects and prepares first, then waits.
    #[arg(long, value_name = "TIME", requires = "shard", value_parser = parse_start_at)]
    pub start_at: Option<chrono::DateTime<chrono::Utc>>,
    /// The run id (default: a new one; with --shard and no --run-id, one made of --start-at).
    /// Letters, digits, `.`, `_` and `-`.
    #[arg(long, value_name = "ID", value_parser = infergate_model::shard::check_run_id)]
    pub run_id: Option<String>,
    /// The command line this command was parsed from (`cargo xtask bench ...`, shell-quoted),
    /// recorded in every summary it writes; set by `main_impl`, not a flag.
    #[arg(skip)]
    pub command_line: Option<String>,
}

/// `cargo xtask bench`: the measuring flags ([`BenchCmd`], the group `tune` takes too), or
/// one of what `bench` does besides a run.
#[derive(Clone, Debug, Args)]
pub struct BenchCli {
    #[command(flatten)]
    pub args: BenchCmd,
    #[command(subcommand)]
    pub action: Option<BenchAction>,
}

impl BenchCli {
    pub fn run(self, sh: &Shell) -> anyhow::Result<Status> {
        match self.action {
            Some(BenchAction::Merge(merge)) => merge.run(sh, self.args.command_line),
            Some(BenchAction::Ab(ab)) => ab.run(sh),
            Some(BenchAction::Trials(trials)) => trials.run(sh),
            None => self.args.run(sh),
        }
    }
}

/// What `bench` does besides measuring.
#[derive(Clone, Debug, clap::Subcommand)]
pub enum BenchAction {
    /// Merge the run directories of a sharded run (`bench --shard I/N`) into one run.
    Merge(crate::measure::merge::MergeCmd),
    /// Measure the base revision's governed engine config (the baseline) against the working
    /// tree's (the candidate) in one job, trials interleaved, and decide every gated metric on
    /// the paired difference.
    Ab(Box<crate::measure::actions::AbCmd>),
    /// Add trials to a measured trial set, with the settings its trials.json records, until
    /// every blocking threshold is decided.
    Trials(crate::measure::actions::TrialsCmd),
}

/// `--start-at`: an RFC 3339 time.
fn parse_start_at(s: &str) -> Result<chrono::DateTime<chrono::Utc>, String> {
    chrono::DateTime::parse_from_rfc3339(s.trim())
        .map(|t| t.to_utc())
        .map_err(|e| format!("`{s}` is not an RFC 3339 time such as 2026-12-01T10:00:00Z ({e})"))
}

/// `--warmup-fraction`: a share within 0..0.9.
fn parse_warmup_fraction(s: &str) -> Result<f64, String> {
    let f: f64 = s.trim().parse().map_err(|_| format!("`{s}` is not a number"))?;
    if !(f.is_finite() && (0.0..0.9).contains(&f)) {
        return Err(format!("must be within 0..0.9, got {f}"));
    }
    Ok(f)
}

/// `--capacity`: `concurrency` or `rate`.
fn parse_capacity_dimension(s: &str) -> Result<Dimension, String> {
    match s.trim() {
        "concurrency" => Ok(Dimension::Concurrency),
        "rate" => Ok(Dimension::Rate),
        other => Err(format!(
            "`{other}`: a capacity is searched over `concurrency` (closed loop) or `rate` (open \
             loop, requests per second)"
        )),
    }
}

/// `--capacity-trials`: `MIN..MAX`, or `N` for `N..N` (their range is checked with the rest of
/// the search's settings).
fn parse_capacity_trials(s: &str) -> Result<(u32, u32), String> {
    let bad = || format!("`{s}`: give MIN..MAX trials a probe (like 3..5), or N for N..N");
    let whole = |p: &str| p.trim().parse::<u32>().map_err(|_| bad());
    match s.split_once("..") {
        Some((lo, hi)) => Ok((whole(lo)?, whole(hi)?)),
        None => whole(s).map(|n| (n, n)),
    }
}

/// `--stage-duration`: seconds > 0.
fn parse_stage_duration(s: &str) -> Result<f64, String> {
    let d: f64 = s.trim().parse().map_err(|_| format!("`{s}` is not a number of seconds"))?;
    if !(d.is_finite() && d > 0.0) {
        return Err(format!("must be > 0 seconds, got {d}"));
    }
    Ok(d)
}

/// `--trials`, `--max-trials`: 1..=1000.
pub(crate) fn parse_trials(s: &str) -> Result<u32, String> {
    let max = infergate_model::config::limits::MAX_TRIALS;
    match s.trim().parse::<u32>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!("must be a whole number of trials within 1..={max}, got `{s}`")),
    }
}

/// `--warmup-trials`: 0..=1000.
fn parse_warmup_trials(s: &str) -> Result<u32, String> {
    let max = infergate_model::config::limits::MAX_TRIALS;
    match s.trim().parse::<u32>() {
        Ok(n) if n <= max => Ok(n),
        _ => Err(format!("must be a whole number of warmup trials within 0..={max}, got `{s}`")),
    }
}

pub(crate) const DEFAULT_CONFIG: &str = "configs/bench.toml";

impl Default for BenchCmd {
    /// `cargo xtask bench` with no flag: the flags' defaults, for the commands that measure
    /// through the bench (`noise`, `bench ab`) to set theirs on. Parsed from an empty command
    /// line, so the defaults are the flags' own.
    fn default() -> BenchCmd {
        use clap::Parser;
        #[derive(Parser)]
        struct Bench {
            #[command(flatten)]
            bench: BenchCmd,
        }
        Bench::try_parse_from(["bench"]).expect("bench needs no flag").bench
    }
}

impl BenchCmd {
    /// The command-line overrides, in the order they apply (flags, then --set).
    pub fn overrides(&self) -> anyhow::Result<Vec<Override>> {
        let mut o = Vec::new();
        if let Some(c) = self.concurrency {
            o.push(Override::new(
                ConfigKey::literal("load.mode"),
                "closed",
                format!("--concurrency {c}"),
            ));
            o.push(Override::new(
                ConfigKey::literal("load.concurrency"),
                c as i64,
                format!("--concurrency {c}"),
            ));
        }
        if let Some(r) = self.rate {
            let flag = format!("--rate {}", infergate_model::config::limits::number(r));
            o.push(Override::new(ConfigKey::literal("load.mode"), "open", flag.clone()));
            o.push(Override::new(ConfigKey::literal("load.rate"), r, flag));
        }
        if let Some(t) = &self.trace {
            let flag = format!("--trace {t}");
            o.push(Override::new(ConfigKey::literal("load.mode"), "trace", flag.clone()));
            o.push(Override::new(ConfigKey::literal("workload.trace"), t.as_str(), flag));
        }
        let number = infergate_model::config::limits::number;
        for (flag, key, v) in [
            ("--time-scale", "load.time_scale", self.time_scale),
            ("--trace-start", "load.trace_start_s", self.trace_start),
            ("--trace-duration", "load.trace_duration_s", self.trace_duration),
        ] {
            if let Some(v) = v {
                o.push(Override::new(ConfigKey::literal(key), v, format!("{flag} {}", number(v))));
            }
        }
        if let Some(n) = self.requests {
            o.push(Override::new(
                ConfigKey::literal("load.requests"),
                n as i64,
                format!("--requests {n}"),
            ));
        }
        if let Some(d) = self.duration {
            let flag = format!("--duration {}", infergate_model::config::limits::number(d));
            o.push(Override::new(ConfigKey::literal("load.duration_s"), d, flag));
        }
        if let Some(n) = self.max_tokens {
            o.push(Override::new(
                ConfigKey::literal("workload.max_tokens"),
                n as i64,
                format!("--max-tokens {n}"),
            ));
        }
        if let Some(m) = &self.model {
            o.push(Override::new(ConfigKey::literal("model"), m.as_str(), format!("--model {m}")));
        }
        if let Some(t) = &self.target {
            o.push(Override::new(
                ConfigKey::literal("target"),
                t.as_str(),
                format!("--target {t}"),
            ));
        }
        for s in &self.flags.sets {
            o.push(Override::parse(s).map_err(anyhow::Error::msg)?);
        }
        if let Some(n) = self.trials {
            o.push(Override::new(ConfigKey::literal("trials"), n as i64, format!("--trials {n}")));
        }
        if let Some(c) = self.cooldown {
            let flag = format!("--cooldown {}", infergate_model::config::limits::number(c));
            o.push(Override::new(ConfigKey::literal("cooldown_s"), c, flag));
        }
        if let Some(n) = self.warmup_trials {
            let flag = format!("--warmup-trials {n}");
            o.push(Override::new(ConfigKey::literal("load.warmup_trials"), n as i64, flag));
        }
        Ok(o)
    }

    /// What a trial set's trials are measured with, as `trials.json` records it: the resolved
    /// profile and where it came from (the `--config` file, the overrides in order, the
    /// `--base-url` target), so a later trial measures exactly the same.
    fn request(
        &self,
        source: &ProfileSource,
        profile: &infergate_model::config::ResolvedProfile,
    ) -> TrialRequest {
        TrialRequest {
            config: self.flags.config.clone(),
            overrides: source.overrides.clone(),
            cli_target: source.cli_target.clone(),
            profile: profile.profile.clone(),
        }
    }

    /// How a sweep's stages and a capacity search's trials split into warmup and the measured
    /// steady state.
    fn stage_plan(&self) -> StagePlan {
        let default = StagePlan::default();
        StagePlan {
            warmup_fraction: self.warmup_fraction.unwrap_or(default.warmup_fraction),
            stage_duration_s: self.stage_duration,
        }
    }

    /// The capacity search the flags ask for, over `dimension`, the defaults where a flag is
    /// absent (its ranges are checked with the plan).
    fn capacity_spec(&self, dimension: Dimension) -> CapacitySpec {
        let mut spec = CapacitySpec::new(dimension);
        if let Some(v) = self.capacity_target {
            spec.target = v;
        }
        spec.limits = self.capacity_limit.clone();
        if let Some(v) = self.capacity_start {
            spec.start = v;
        }
        if let Some(v) = self.capacity_max {
            spec.max_load = v;
        }
        if let Some(v) = self.capacity_resolution {
            spec.resolution = v;
        }
        if let Some((min, max)) = self.capacity_trials {
            (spec.min_trials, spec.max_trials) = (min, max);
        }
        spec.confidence = self.confidence;
        spec.budget = self.capacity_budget.clone().unwrap_or_default();
        spec.plan = self.stage_plan();
        spec
    }

    /// The mode the flags select (clap has refused the combinations that are not supported).
    pub fn mode(&self) -> BenchMode {
        if let Some(spec) = &self.sweep {
            return BenchMode::Sweep(SweepPlan { spec: spec.clone(), stages: self.stage_plan() });
        }
        if let Some(dimension) = self.capacity {
            let spec = self.capacity_spec(dimension);
            return BenchMode::Capacity(CapacityPlan { spec, base_requests: 0 });
        }
        match &self.compare_strategies {
            Some(list) => BenchMode::Compare(list.clone()),
            None => BenchMode::Single,
        }
    }

    /// The target `--base-url` names, if given.
    fn cli_target(&self) -> anyhow::Result<Option<Target>> {
        let Some(url) = &self.base_url else { return Ok(None) };
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(PlanError::BaseUrl(url.clone()).into());
        }
        if let Some(var) = &self.api_key_env {
            infergate_model::config::validate_env_name(var).map_err(anyhow::Error::msg)?;
        }
        Ok(Some(Target {
            model: self.model.clone(),
            api_key_env: self.api_key_env.clone(),
            ..Target::at(url)
        }))
    }

    /// Resolve the command line into the plan every mode runs from: the config is read, the
    /// profile resolved, the thresholds read (a broken file fails before minutes of
    /// measuring) and the output directory chosen, once. `run_id` is the one run id.
    pub fn plan(&self, root: &Path, run_id: String) -> anyhow::Result<BenchPlan> {
        let source = ProfileSource {
            config: load_config(root, self.flags.config.as_deref())?,
            name: self.flags.profile.clone(),
            overrides: self.overrides()?,
            cli_target: self.cli_target()?,
        };
        let profile = source.resolve(&[])?;
        let mut mode = self.mode();
        let warmup = profile.profile.load.warmup_trials;
        if mode == BenchMode::Single
            && (profile.profile.trials.is_some() || self.until_decided || warmup > 0)
        {
            let count = profile.profile.trials.unwrap_or(1);
            if let Some(max) = self.max_trials.filter(|&m| m < count) {
                anyhow::bail!("--max-trials {max} is fewer than the {count} trials planned");
            }
            mode = BenchMode::Trials(TrialPlan {
                count,
                cooldown_s: profile.profile.cooldown_s.unwrap_or(0.0),
                warmup,
                confidence: self.confidence,
                until_decided: self.until_decided.then_some(self.max_trials).flatten(),
                request: Box::new(self.request(&source, &profile)),
            });
        }
        if let BenchMode::Compare(_) = mode {
            check_comparable(&profile)?;
        }
        if let BenchMode::Capacity(cp) = &mut mode {
            cp.base_requests = match profile.profile.load.requests {
                Some(n) => n,
                None => crate::plan::workload_items(root, &profile.profile)?,
            };
            check_capacity(&profile, cp)?;
        }
        let engine = match &profile.target {
            Some((_, t)) => {
                t.engine_config.as_deref().map(|f| EngineParams::read(root, f)).transpose()?
            }
            None => None,
        };
        let gate = if self.gate {
            let thresholds = Thresholds::load(&root.join(&self.thresholds))
                .context("cannot read the thresholds for --gate")?;
            let options = GateOptions {
                confidence: self.confidence,
                refuse_busy_host: !self.allow_busy_host,
                ..GateOptions::default()
            };
            Some(GateSettings { thresholds, github: self.github, options })
        } else {
            None
        };
        let (profile, shard) = match self.shard {
            Some(shard) => self.shard_plan(profile, shard, &mode)?,
            None => (profile, None),
        };
        let out_dir = match (&self.out, self.shard) {
            (Some(d), _) => root.join(d),
            (None, Some(s)) => measure::default_out_dir(root, "bench", &shard_dir(&run_id, s)),
            (None, None) => measure::default_out_dir(root, "bench", &mode.dir_name(&run_id)),
        };
        Ok(BenchPlan {
            root: root.to_path_buf(),
            run_id,
            out_dir,
            quiet: self.quiet,
            profile,
            source,
            engine,
            git: gitinfo::detect(root),
            gate,
            record_history: self.record_history,
            mode,
            command: self.command_line.clone(),
            shard,
        })
    }

    /// What a shard's run is asked for, or why the profile cannot be sharded: only a single
    /// run of a target (one server the shards share), with enough load for every shard.
    fn shard_plan(
        &self,
        profile: infergate_model::config::ResolvedProfile,
        shard: infergate_model::shard::Shard,
        mode: &BenchMode,
    ) -> anyhow::Result<(
        infergate_model::config::ResolvedProfile,
        Option<infergate_model::shard::ShardRun>,
    )> {
        if *mode != BenchMode::Single {
            return Err(PlanError::ShardMode(shard.to_string()).into());
        }
        if profile.target.is_none() {
            return Err(PlanError::ShardWithoutTarget(profile.name.clone()).into());
        }
        if let Some(at) = self.start_at.filter(|at| *at > chrono::Utc::now() + chrono::Days::new(1))
        {
            let at = at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
            return Err(PlanError::StartTooFar(at).into());
        }
        // Refused here, before a run directory is made, when a shard would get nothing to do;
        // the runner makes the shard's part of the load and the workload.
        shard.split(&profile.profile.load)?;
        let run = infergate_model::shard::ShardRun { shard, start_at: self.start_at };
        Ok((profile, Some(run)))
    }

    /// The run id: `--run-id`, else for a shard one made of `--start-at` (the shards of one
    /// run must share it), else a new one.
    pub fn run_id(&self) -> anyhow::Result<String> {
        if let Some(id) = &self.run_id {
            return Ok(id.clone());
        }
        match (self.shard, self.start_at) {
            (Some(_), Some(at)) => Ok(format!("{}-shards", at.format("%Y%m%dT%H%M%SZ"))),
            (Some(shard), None) => Err(PlanError::ShardWithoutRunId(shard.to_string()).into()),
            (None, _) => Ok(runner::new_run_id()),
        }
    }

    pub fn run(self, sh: &Shell) -> anyhow::Result<Status> {
        let plan = self.plan(&sh.current_dir(), self.run_id()?)?;
        let status = execute(&plan)?;
        if self.report {
            write_report(&plan, &self.thresholds, status)?;
        }
        Ok(status)
    }
}

/// `--report`: the page of what the plan measured. An interrupted run that wrote no summary
/// has nothing to report; that is said, not an error.
fn write_report(
    plan: &BenchPlan,
    thresholds: &std::path::Path,
    status: Status,
) -> anyhow::Result<()> {
    if status == Status::Interrupted && report::input::read(&plan.out_dir).is_err() {
        eprintln!("no report: the run was interrupted before anything was summarised");
        return Ok(());
    }
    let gate = crate::text::join_clean(&plan.root, thresholds);
    let written = report::write(&plan.out_dir, Some(&gate)).context("cannot write the report")?;
    println!("report: {}", written.display());
    Ok(())
}

/// Run a plan in its mode.
pub fn execute(plan: &BenchPlan) -> anyhow::Result<Status> {
    match &plan.mode {
        BenchMode::Single => run_single(plan),
        BenchMode::Sweep(sweep) => crate::measure::sweep::run(plan, sweep),
        BenchMode::Compare(list) => crate::measure::strategies::run(plan, list),
        BenchMode::Trials(tp) => crate::measure::trials::run(plan, tp),
        BenchMode::Capacity(cp) => crate::measure::capacity::run(plan, cp),
    }
}

/// One run, its report, and the gate when asked for.
fn run_single(plan: &BenchPlan) -> anyhow::Result<Status> {
    let spec = plan.run_spec(plan.profile.clone(), plan.out_dir.clone(), plan.run_id.clone());
    let outcome = match measure::runtime()?.block_on(runner::run(spec, RunControl::default())) {
        Ok(outcome) => outcome,
        Err(e @ runner::RunError::Interrupted { .. }) => {
            eprintln!("{e}");
            return Ok(Status::Interrupted);
        }
        Err(e) => return Err(anyhow::Error::new(e).context("the bench could not run")),
    };
    let s = &outcome.summary;
    if !plan.quiet {
        println!("{}", report::render(s));
    }
    println!("run directory: {}", outcome.dir.display());
    let gate = match plan.gate.as_ref().and_then(|g| Some((g.check(&outcome.dir, s)?, g.github))) {
        Some((report, github)) => {
            thresholds::print_report(&report, github);
            if let Some(g) = &plan.gate {
                crate::thresholds::budgets_note(&g.thresholds, std::iter::once(s.profile.as_str()));
            }
            report.status()
        }
        None => Status::Success,
    };
    let run = match s.status {
        RunStatus::Complete => Status::Success,
        RunStatus::Interrupted => Status::Interrupted,
        RunStatus::Aborted => {
            let why = s.notes.last().cloned().unwrap_or_default();
            anyhow::bail!(
                "the run was aborted: {why}; what was recorded is in {}",
                outcome.dir.display()
            );
        }
        RunStatus::Oversaturated => {
            let why = s.notes.iter().find(|n| n.contains("over-saturated")).cloned();
            eprintln!("error: the run {}", why.unwrap_or_else(|| "was over-saturated".into()));
            Status::Oversaturated
        }
        RunStatus::Failed => {
            let classes: Vec<String> =
                s.requests.by_class.iter().map(|(k, v)| format!("{k}: {v}")).collect();
            eprintln!(
                "error: no measured request succeeded ({}); see {} for each request's error",
                if classes.is_empty() { "none was sent".to_string() } else { classes.join(", ") },
                outcome.dir.join("requests.jsonl").display()
            );
            Status::PolicyViolated
        }
    };
    Ok(if run == Status::Success { gate } else { run })
}

/// The default directory of shard `s` of run `run_id`: `<run id>-shard-<I>`.
pub(crate) fn shard_dir(run_id: &str, s: infergate_model::shard::Shard) -> String {
    format!("{run_id}-shard-{}", s.index)
}

/// The bench config: `explicit` when given, else configs/bench.toml when present, else the
/// built-in defaults. Paths are relative to the repository root and named so in messages.
pub(crate) fn load_config(root: &Path, explicit: Option<&Path>) -> anyhow::Result<BenchConfig> {
    Ok(match explicit {
        Some(p) => BenchConfig::load_in(root, p)?,
        None if root.join(DEFAULT_CONFIG).exists() => {
            BenchConfig::load_in(root, Path::new(DEFAULT_CONFIG))?
        }
        None => BenchConfig::builtin(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use infergate_model::config::{BatchStrategy, EngineConfig, LoadMode};
    use infergate_model::strategy_compare::{COMPARISON_FILE, StrategyComparison};
    use infergate_model::summary::Summary;
    use infergate_model::sweep::Dimension;

    fn parse(args: &[&str]) -> Result<BenchCmd, clap::Error> {
        use clap::Parser;
        #[derive(Parser, Debug)]
        struct Cli {
            #[command(flatten)]
            bench: BenchCmd,
        }
        let mut argv = vec!["bench"];
        argv.extend_from_slice(args);
        Cli::try_parse_from(argv).map(|c| c.bench)
    }

    fn bench_cmd(args: &[&str]) -> BenchCmd {
        parse(args).unwrap()
    }

    const RUN_ID: &str = "20250101T000000Z-abcd";

    #[test]
    fn the_default_command_is_bench_without_flags() {
        let parsed = bench_cmd(&[]);
        assert_eq!(format!("{:?}", BenchCmd::default()), format!("{parsed:?}"));
        let d = BenchCmd::default();
        assert_eq!((d.flags.profile.as_str(), d.flags.config.as_ref()), ("default", None));
        assert_eq!(d.thresholds, PathBuf::from(crate::thresholds::GATE_FILE));
        assert_eq!(d.confidence, infergate_model::stats::DEFAULT_CONFIDENCE);
        assert!(d.flags.sets.is_empty() && !d.quiet && d.trials.is_none());
        // -p is --profile.
        assert_eq!(bench_cmd(&["-p", "x"]).flags.profile, "x");
    }

    #[test]
    fn a_trial_plan_holds_the_resolved_request_with_every_override() {
        let ws = workspace(ENGINE);
        let args = ["--trials", "2", "--concurrency", "3", "--set", "load.requests=6"];
        let plan = plan_in(ws.path(), &args).unwrap();
        let BenchMode::Trials(tp) = &plan.mode else { panic!("{:?}", plan.mode) };
        let request = &tp.request;
        let keys: Vec<&str> = request.overrides.iter().map(|o| o.key.as_str()).collect();
        assert_eq!(keys, ["load.mode", "load.concurrency", "load.requests", "trials"]);
        assert_eq!(request.profile, plan.profile.profile);
        assert_eq!((request.config.as_ref(), request.cli_target.as_ref()), (None, None));
        // --base-url's target with the API key's variable, never its value.
        let args = ["--trials", "2", "--base-url", "http://h:1", "--api-key-env", "TEAM_KEY"];
        let plan = plan_in(ws.path(), &args).unwrap();
        let BenchMode::Trials(tp) = &plan.mode else { panic!("{:?}", plan.mode) };
        let target = tp.request.cli_target.as_ref().unwrap();
        assert_eq!(
            (target.base_url.as_str(), target.api_key_env.as_deref()),
            ("http://h:1", Some("TEAM_KEY"))
        );
    }

    fn plan_in(root: &Path, args: &[&str]) -> anyhow::Result<BenchPlan> {
        let mut cmd = bench_cmd(args);
        let argv: Vec<std::ffi::OsString> =
            std::iter::once("bench").chain(args.iter().copied()).map(Into::into).collect();
        cmd.command_line = Some(crate::plan::command_line(&argv));
        cmd.plan(root, RUN_ID.to_string())
    }

    /// A small workload: every strategy runs in well under a second of simulated time.
    const PROFILE: &str = "[profile.default.load]\nconcurrency = 4\nwarmup_requests = 0\n\
        [profile.default.workload]\ninput_lengths = [64, 128]\nrepeats = 4\nmax_tokens = 8\n\
        [profile.default.sim]\nengine_config = \"configs/engine.toml\"\n\
        [profile.remote]\ntarget = \"x\"\n[targets.x]\nbase_url = \"http://127.0.0.1:9\"\n";

    const ENGINE: &str = "[engine]\nmodel = \"meta-llama/Llama-3.1-8B-Instruct\"\n\
        max_model_len = 4096\n[batch]\nfixed_batch_size = 4\nmax_wait_ms = 5\n\
        [device]\nname = \"H100-SXM-80GB\"\nprice_per_hour = 2.0\n";

    fn workspace(engine: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("configs")).unwrap();
        std::fs::write(dir.path().join("configs/bench.toml"), PROFILE).unwrap();
        std::fs::write(dir.path().join("configs/engine.toml"), engine).unwrap();
        dir
    }

    /// A thresholds file with one blocking TTFT p99 limit.
    fn write_thresholds(root: &Path, limit_ms: f64) {
        std::fs::create_dir_all(root.join("thresholds")).unwrap();
        let text = format!(
            "version = 1\n\n[[threshold]]\nmetric = \"metrics.ttft_ms.p99\"\ncomparator = \"<=\"\n\
             limit = {limit_ms:?}\nunit = \"ms\"\naction = \"block\"\nadr = 1\n\
             file = \"docs/adr/0001-x.md\"\nline = 9\n"
        );
        std::fs::write(root.join("thresholds/gate.toml"), text).unwrap();
    }

    #[test]
    fn trace_flags_set_the_replay() {
        let dir = workspace(ENGINE);
        let args = [
            "--trace",
            "configs/t.jsonl",
            "--time-scale",
            "0.5",
            "--trace-start",
            "10",
            "--trace-duration",
            "60",
        ];
        let plan = plan_in(dir.path(), &args).unwrap();
        let p = &plan.profile.profile;
        assert_eq!(p.load.mode, infergate_model::config::LoadMode::Trace);
        assert_eq!(p.workload.trace.as_deref(), Some("configs/t.jsonl"));
        assert_eq!((p.load.time_scale, p.load.trace_start_s), (0.5, 10.0));
        assert_eq!(p.load.trace_duration_s, Some(60.0));
        let err = plan_in(dir.path(), &["--trace", "t.jsonl", "--time-scale", "0"]).unwrap_err();
        assert!(format!("{err:#}").contains("--time-scale 0"), "{err:#}");
        assert!(parse(&["--trace", "t.jsonl", "--concurrency", "4"]).is_err());
    }

    #[test]
    fn clap_refuses_sweep_settings_without_a_sweep_and_two_modes_at_once() {
        use clap::error::ErrorKind;
        let err = parse(&["--warmup-fraction", "0.2"]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::MissingRequiredArgument, "{err}");
        assert!(err.to_string().contains("--sweep"), "{err}");
        let err = parse(&["--stage-duration", "5"]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::MissingRequiredArgument, "{err}");
        let err = parse(&["--sweep", "rate=1,2", "--compare-strategies", "serial"]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::ArgumentConflict, "{err}");
        let err = parse(&["--sweep", "rate=1,2", "--concurrency", "4"]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::ArgumentConflict, "{err}");
        let err = parse(&["--sweep", "rate=1,2", "--warmup-fraction", "0.95"]).unwrap_err();
        assert!(err.to_string().contains("0..0.9"), "{err}");
        let err = parse(&["--sweep", "rate=1,2", "--stage-duration", "0"]).unwrap_err();
        assert!(err.to_string().contains("> 0 seconds"), "{err}");
        let err = parse(&["--sweep", "rate=2,1"]).unwrap_err();
        assert!(err.to_string().contains("increase"), "{err}");
        let err = parse(&["--compare-strategies", "serial,batched"]).unwrap_err();
        assert!(err.to_string().contains("batched"), "{err}");
        let err = parse(&["--github"]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::MissingRequiredArgument, "{err}");
        // --gate goes with every mode.
        assert!(parse(&["--sweep", "rate=1,2", "--gate"]).is_ok());
        assert!(parse(&["--compare-strategies", "serial", "--gate"]).is_ok());
    }

    #[test]
    fn a_single_run_plan_resolves_profile_ids_and_directories_once() {
        let ws = workspace(ENGINE);
        let plan = plan_in(ws.path(), &["--concurrency", "2", "--max-tokens", "3"]).unwrap();
        assert_eq!(plan.mode, BenchMode::Single);
        assert_eq!(plan.run_id, RUN_ID);
        assert_eq!(plan.out_dir, ws.path().join("target/bench").join(RUN_ID));
        assert_eq!(plan.profile.name, "default");
        assert_eq!(plan.profile.profile.load.concurrency, 2);
        assert_eq!(plan.profile.profile.workload.max_tokens, 3);
        assert!(plan.gate.is_none() && plan.engine.is_none() && plan.git.is_none());
        let spec = plan.run_spec(plan.profile.clone(), plan.out_dir.clone(), plan.run_id.clone());
        assert_eq!(spec.run_id, RUN_ID);
        assert_eq!(spec.root, ws.path());
        // --out is relative to the root; --base-url is the `cli` target.
        let plan = plan_in(ws.path(), &["--out", "runs/a", "--base-url", "http://h:1"]).unwrap();
        assert_eq!(plan.out_dir, ws.path().join("runs/a"));
        let (name, target) = plan.profile.target.as_ref().unwrap();
        assert_eq!((name.as_str(), target.base_url.as_str()), ("cli", "http://h:1"));
    }

    #[test]
    fn a_shard_plan_holds_the_whole_load_and_its_run_input_its_part() {
        let ws = workspace(ENGINE);
        let args = ["--base-url", "http://h:1", "--shard", "1/2", "--concurrency", "5"];
        let plan = plan_in(ws.path(), &args).unwrap();
        assert_eq!(plan.profile.profile.load.concurrency, 5, "the plan holds the whole load");
        let shard = plan.shard.as_ref().unwrap();
        assert_eq!(shard.shard.to_string(), "1/2");
        assert_eq!(plan.out_dir, ws.path().join("target/bench").join(format!("{RUN_ID}-shard-1")));
        let spec = plan.run_spec(plan.profile.clone(), plan.out_dir.clone(), RUN_ID.into());
        assert_eq!(spec.shard, plan.shard);
        let input = bench::runner::RunInput::settle(&spec).unwrap();
        assert_eq!(input.profile.load.concurrency, 2, "5 over 2: 3 then 2");
        assert_eq!(input.shard_total.unwrap().concurrency, 5);
        // Too little load for the shards is refused by the plan, before anything runs.
        let args = ["--base-url", "http://h:1", "--shard", "1/8", "--concurrency", "5"];
        let err = plan_in(ws.path(), &args).unwrap_err().to_string();
        assert!(err.contains("load.concurrency = 5 cannot be split over 8 shards"), "{err}");
        // The run id: --run-id, else made of --start-at; without either a shard is refused.
        let cmd = bench_cmd(&["--shard", "0/2", "--start-at", "2026-12-01T10:00:00+01:00"]);
        assert_eq!(cmd.run_id().unwrap(), "20261201T090000Z-shards");
        let cmd =
            bench_cmd(&["--shard", "0/2", "--run-id", "r1", "--start-at", "2026-12-01T10:00:00Z"]);
        assert_eq!(cmd.run_id().unwrap(), "r1");
        let far =
            ["--base-url", "http://h:1", "--shard", "0/2", "--start-at", "2999-01-01T00:00:00Z"];
        let err = plan_in(ws.path(), &far).unwrap_err().downcast::<PlanError>().unwrap();
        assert!(err.to_string().contains("more than a day ahead"), "{err}");
        let err = bench_cmd(&["--shard", "0/2"]).run_id().unwrap_err();
        assert!(err.to_string().contains("needs --run-id or --start-at"), "{err}");
        // A trial set from the profile is no single run to split.
        let err = plan_in(
            ws.path(),
            &["--base-url", "http://h:1", "--shard", "0/2", "--set", "trials=3"],
        );
        let err = err.unwrap_err().downcast::<PlanError>().unwrap();
        assert_eq!(err, PlanError::ShardMode("0/2".into()));
    }

    #[test]
    fn a_sweep_plan_holds_its_stages_and_derives_its_profiles_without_rereading() {
        let ws = workspace(ENGINE);
        let plan = plan_in(ws.path(), &["--sweep", "concurrency=1,2", "--requests", "6"]).unwrap();
        let BenchMode::Sweep(sweep) = &plan.mode else { panic!("{:?}", plan.mode) };
        assert_eq!(sweep.spec.dimension, Dimension::Concurrency);
        assert_eq!(sweep.spec.values, vec![1.0, 2.0]);
        assert_eq!(sweep.stages, StagePlan::default());
        assert_eq!(plan.out_dir, ws.path().join("target/bench").join(format!("sweep-{RUN_ID}")));
        // The config is read once: a stage's profile comes from the plan even after the file
        // is gone.
        std::fs::remove_file(ws.path().join("configs/bench.toml")).unwrap();
        let extra = [
            Override::new(ConfigKey::literal("load.mode"), "open", "--sweep rate=3"),
            Override::new(ConfigKey::literal("load.rate"), 3.0, "--sweep rate=3"),
        ];
        let stage = plan.source.resolve(&extra).unwrap();
        assert_eq!(stage.profile.load.mode, LoadMode::Open);
        assert_eq!(stage.profile.load.requests, Some(6));
        let plan = plan_in(
            ws.path(),
            &["--sweep", "rate=1,2", "--warmup-fraction", "0.25", "--stage-duration", "4"],
        );
        // Without the config the default profile is the built-in one: still a plan.
        let BenchMode::Sweep(sweep) = plan.unwrap().mode else { panic!("sweep") };
        assert_eq!(sweep.stages.warmup_fraction, 0.25);
        assert_eq!(sweep.stages.stage_duration_s, Some(4.0));
    }

    #[test]
    fn a_capacity_plan_holds_its_search_and_refuses_what_cannot_answer() {
        use clap::error::ErrorKind;
        let ws = workspace(ENGINE);
        let args = [
            "--capacity",
            "rate",
            "--set",
            "slo.ttft_ms=500",
            "--capacity-target",
            "0.9",
            "--capacity-limit",
            "metrics.ttft_ms.p99<=350",
            "--capacity-start",
            "2",
            "--capacity-max",
            "64",
            "--capacity-resolution",
            "0.2",
            "--capacity-trials",
            "3..4",
            "--capacity-budget",
            "5000,20m",
            "--warmup-fraction",
            "0.25",
            "--confidence",
            "0.9",
        ];
        let plan = plan_in(ws.path(), &args).unwrap();
        let BenchMode::Capacity(cp) = &plan.mode else { panic!("{:?}", plan.mode) };
        let spec = &cp.spec;
        assert_eq!(spec.dimension, Dimension::Rate);
        assert_eq!((spec.target, spec.start, spec.max_load), (0.9, 2.0, 64.0));
        assert_eq!((spec.resolution, spec.min_trials, spec.max_trials), (0.2, 3, 4));
        assert_eq!(spec.limits[0].to_string(), "metrics.ttft_ms.p99 <= 350");
        assert_eq!((spec.budget.requests, spec.budget.seconds), (Some(5000), Some(1200.0)));
        assert_eq!((spec.plan.warmup_fraction, spec.confidence), (0.25, 0.9));
        // The workload's 2 lengths x 4 repeats: the requests a trial counts from.
        assert_eq!(cp.base_requests, 8);
        let dir = ws.path().join("target/bench").join(format!("capacity-{RUN_ID}"));
        assert_eq!(plan.out_dir, dir);
        // The defaults, and N trials as N..N.
        let args = ["--capacity", "concurrency", "--set", "slo.e2e_ms=900", "--capacity-trials"];
        let plan = plan_in(ws.path(), &[&args[..], &["3"]].concat()).unwrap();
        let BenchMode::Capacity(cp) = &plan.mode else { panic!("{:?}", plan.mode) };
        let default = infergate_model::capacity::CapacitySpec::new(Dimension::Concurrency);
        assert_eq!((cp.spec.min_trials, cp.spec.max_trials), (3, 3));
        assert_eq!((cp.spec.target, cp.spec.max_load), (default.target, default.max_load));
        // Refused before anything runs: no SLO, a setting out of range, a budget too small.
        let refusal = |args: &[&str]| {
            let err = plan_in(ws.path(), args).unwrap_err();
            err.downcast::<PlanError>().unwrap_or_else(|e| panic!("not a plan error: {e:#}"))
        };
        let err = refusal(&["--capacity", "concurrency"]);
        assert_eq!(err, PlanError::CapacityWithoutSlo("default".into()));
        let slo =
            ["--capacity", "concurrency", "--set", "slo.ttft_ms=500", "--capacity-trials", "2..5"];
        let err = refusal(&[&slo[..], &["--capacity-target", "1.01"]].concat());
        assert!(matches!(err, PlanError::Capacity { flag: "--capacity-target", .. }), "{err}");
        let err = refusal(&[&slo[..], &["--capacity-budget", "20"]].concat());
        // 2 trials of 8 measured (at least 4 x concurrency 1) and 4 warmup requests.
        assert!(err.to_string().contains("at least 24"), "{err}");
        assert!(parse(&[&slo[..], &["--capacity-budget", "24"]].concat()).is_ok());
        assert!(plan_in(ws.path(), &[&slo[..], &["--capacity-budget", "24"]].concat()).is_ok());
        // clap: the capacity's settings need --capacity; the other modes and loads conflict.
        let err = parse(&["--capacity-budget", "50"]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::MissingRequiredArgument, "{err}");
        for other in [&["--sweep", "rate=1,2"][..], &["--concurrency", "4"], &["--trials", "2"]] {
            let err = parse(&[&["--capacity", "rate"][..], other].concat()).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::ArgumentConflict, "{other:?}: {err}");
        }
        let err = parse(&["--capacity", "latency"]).unwrap_err();
        assert!(err.to_string().contains("`concurrency`"), "{err}");
        assert!(parse(&["--capacity", "rate", "--stage-duration", "5"]).is_ok());
    }

    #[test]
    fn gate_settings_are_read_with_the_plan() {
        let ws = workspace(ENGINE);
        // A missing thresholds file fails before anything is measured.
        let err = plan_in(ws.path(), &["--gate"]).unwrap_err();
        assert!(err.to_string().contains("thresholds for --gate"), "{err}");
        write_thresholds(ws.path(), 100.0);
        let plan = plan_in(ws.path(), &["--sweep", "rate=1,2", "--gate", "--github"]).unwrap();
        let gate = plan.gate.unwrap();
        assert!(gate.github);
        assert_eq!(gate.thresholds.thresholds.len(), 1);
    }

    #[test]
    fn plans_that_cannot_run_are_refused_with_typed_errors() {
        let ws = workspace(ENGINE);
        let refusal = |args: &[&str]| {
            let err = plan_in(ws.path(), args).unwrap_err();
            err.downcast::<PlanError>().unwrap_or_else(|e| panic!("not a plan error: {e:#}"))
        };
        assert_eq!(
            refusal(&["--compare-strategies", "serial", "--profile", "remote"]),
            PlanError::CompareWithTarget { profile: "remote".into(), target: "x".into() }
        );
        let err = refusal(&["--compare-strategies", "serial", "--set", "sim.mode=timing"]);
        assert_eq!(err, PlanError::CompareNeedsEngine("default".into()));
        assert!(err.to_string().contains("timing"), "{err}");
        assert_eq!(refusal(&["--base-url", "h:1"]), PlanError::BaseUrl("h:1".into()));
        // A config error is not a plan error; it names the flag.
        let err = plan_in(ws.path(), &["--set", "load.mode=sideways"]).unwrap_err();
        assert!(err.downcast_ref::<PlanError>().is_none());
        assert!(err.to_string().contains("--set load.mode=sideways"), "{err}");
    }

    #[test]
    fn one_run_per_strategy_with_its_parameters_and_a_table() {
        let ws = workspace(ENGINE);
        let list = "serial,fixed,token_budget,continuous";
        let plan =
            plan_in(ws.path(), &["--quiet", "--out", "cmp", "--compare-strategies", list]).unwrap();
        assert_eq!(execute(&plan).unwrap(), Status::Success);
        let dir = ws.path().join("cmp");
        let text = std::fs::read_to_string(dir.join(COMPARISON_FILE)).unwrap();
        let cmp: StrategyComparison = serde_json::from_str(&text).unwrap();
        let names: Vec<BatchStrategy> = cmp.rows.iter().map(|r| r.strategy).collect();
        assert_eq!(names, BatchStrategy::ALL);
        for row in &cmp.rows {
            let s = Summary::read(&ws.path().join(&row.run_dir)).unwrap();
            assert_eq!(s.requests.ok, 8, "{}", row.strategy);
            assert_eq!(s.run_id, format!("{RUN_ID}-{}", row.strategy));
            let params = &s.engine.as_ref().unwrap().params;
            assert_eq!(params["batch"]["strategy"], row.strategy.as_str());
            // The file the simulator ran, what it derives from, and the keys it adds there.
            let ran = format!("cmp/engine-{}.toml", row.strategy);
            let engine = s.engine.as_ref().unwrap();
            assert_eq!(engine.file, ran);
            assert_eq!(engine.derived_from.as_deref(), Some("configs/engine.toml"));
            let strategy = engine.changes.iter().find(|c| c.key == "batch.strategy").unwrap();
            assert_eq!((&strategy.from, &strategy.to), (&None, &row.strategy.as_str().into()));
            // The command of the whole comparison, and which strategy this run is.
            let invocation = s.invocation.as_ref().unwrap();
            assert_eq!(
                invocation.command,
                format!("cargo xtask bench --quiet --out cmp --compare-strategies {list}")
            );
            assert_eq!(invocation.part.as_deref(), Some(row.strategy.as_str()));
            assert_eq!(s.config.profile().unwrap().sim.engine_config, ran);
            let on_disk = EngineConfig::read(&ws.path().join(&ran)).unwrap();
            assert_eq!(on_disk.batch.strategy, row.strategy);
            assert!(row.mean_ttft_ms.is_some() && row.mean_queue_ms.is_some());
            assert!(row.device_seconds.unwrap() > 0.0 && row.cost.unwrap() > 0.0);
            assert_eq!(row.total_tokens, Some(s.tokens.input_total.unwrap() + 64));
            assert_eq!(s.extra.scheduler.as_ref().unwrap().strategy, row.strategy.as_str());
        }
        // The parameter that defines each strategy is in its params.
        let params = |i: usize| {
            Summary::read(&ws.path().join(&cmp.rows[i].run_dir)).unwrap().engine.unwrap().params
        };
        assert_eq!(params(1)["batch"]["fixed_batch_size"], 4);
        assert_eq!(params(2)["batch"]["max_token_budget"], 16384);
        assert_eq!(cmp.rows[0].batching, "1 request");
        let rendered = crate::measure::strategies::table(&cmp.rows).to_string();
        assert!(rendered.contains("token_budget") && rendered.contains("mean queue ms"));
        // A second comparison into the same directory is refused rather than mixed in.
        let err = execute(&plan).unwrap_err();
        assert!(err.to_string().contains("already holds a comparison"), "{err}");
    }

    #[test]
    fn the_gate_judges_every_run_of_a_comparison() {
        let ws = workspace(ENGINE);
        // No TTFT is below a microsecond.
        write_thresholds(ws.path(), 0.001);
        let args = ["--quiet", "--out", "cmp", "--compare-strategies", "serial,fixed", "--gate"];
        let args = [&args[..], &["--allow-busy-host"]].concat();
        let plan = plan_in(ws.path(), &args).unwrap();
        assert_eq!(execute(&plan).unwrap(), Status::PolicyViolated);
        write_thresholds(ws.path(), 1e9);
        let args = ["--quiet", "--out", "cmp2", "--compare-strategies", "serial,fixed", "--gate"];
        let args = [&args[..], &["--allow-busy-host"]].concat();
        let plan = plan_in(ws.path(), &args).unwrap();
        assert_eq!(execute(&plan).unwrap(), Status::Success);
    }
}
