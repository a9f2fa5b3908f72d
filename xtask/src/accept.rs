//! `cargo xtask acceptance`: accept a candidate engine against a baseline in three layers
//! (numeric, engine, business); `cargo xtask acceptance dataset` writes an acceptance dataset.
//! See docs/acceptance.md.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use bench::accept::driver::{self, AcceptSpec, TargetSpec};
use bench::accept::{AcceptThresholds, AcceptanceReport, dataset};
use clap::{Args, Subcommand};
use infergate_model::config::BenchConfig;
use infergate_model::summary::EngineParams;
use xshell::Shell;

use crate::console::ConsoleTable;
use crate::exit::Status;
use crate::text::{BLANK, fmt_opt};
use crate::{gitinfo, measure};

pub(crate) const DEFAULT_DATASET: &str = "configs/acceptance/dataset.jsonl";

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct AcceptCmd {
    #[command(subcommand)]
    pub sub: Option<AcceptSub>,
    /// Baseline target (a [targets.NAME] of the bench config), e.g. the fp16 server.
    #[arg(long = "baseline-target", value_name = "TARGET", requires = "candidate")]
    pub baseline: Option<String>,
    /// Candidate target, e.g. the fp8 server.
    #[arg(long = "candidate-target", value_name = "TARGET", requires = "baseline")]
    pub candidate: Option<String>,
    /// A target that scores semantic similarity (reported, never gating).
    #[arg(long, value_name = "TARGET")]
    pub judge: Option<String>,
    /// JSONL dataset (see docs/acceptance.md).
    #[arg(long, value_name = "FILE", default_value = DEFAULT_DATASET)]
    pub dataset: PathBuf,
    /// Bench config with the targets.
    #[arg(long, value_name = "FILE", default_value = crate::measure::bench::DEFAULT_CONFIG)]
    pub config: PathBuf,
    /// Evaluate every layer even when an earlier one failed.
    #[arg(long)]
    pub all: bool,
    /// Request pairs in flight: use the production concurrency.
    #[arg(long, default_value_t = 8)]
    pub concurrency: u32,
    /// Dataset items (from the start) for the numeric layer.
    #[arg(long, default_value_t = 16)]
    pub numeric_items: usize,
    /// Output tokens compared per numeric item.
    #[arg(long, default_value_t = 32)]
    pub numeric_max_tokens: u32,
    /// Alternatives per position (top_logprobs).
    #[arg(long, default_value_t = 5)]
    pub top_logprobs: u32,
    /// Fixed sampling temperature of the engine/business requests (numeric: greedy).
    #[arg(long, default_value_t = 0.01)]
    pub temperature: f64,
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Output tokens for items without max_tokens.
    #[arg(long, default_value_t = 128)]
    pub max_tokens: u32,
    /// Numeric layer from dumped logits: the baseline's .npy (f16/f32/f64).
    #[arg(long, value_name = "FILE", requires = "candidate_logits")]
    pub baseline_logits: Option<PathBuf>,
    /// The candidate's .npy, same shape.
    #[arg(long, value_name = "FILE", requires = "baseline_logits")]
    pub candidate_logits: Option<PathBuf>,
    #[arg(long, default_value_t = AcceptThresholds::default().cos_min)]
    pub min_cos: f64,
    #[arg(long, default_value_t = AcceptThresholds::default().rtol_max)]
    pub max_rtol: f64,
    #[arg(long, value_name = "MS", default_value_t = AcceptThresholds::default().ttft_p99_ms)]
    pub max_ttft_p99: f64,
    #[arg(long, default_value_t = AcceptThresholds::default().itl_jitter_max)]
    pub max_itl_jitter: f64,
    #[arg(long, default_value_t = AcceptThresholds::default().schema_pass_rate_min)]
    pub min_schema_pass_rate: f64,
    #[arg(long, default_value_t = AcceptThresholds::default().judge_min)]
    pub min_judge: f64,
    /// Run directory (default: target/accept/<run id>).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    #[arg(short, long)]
    pub quiet: bool,
}

#[derive(Debug, Subcommand)]
pub enum AcceptSub {
    /// Write a generated acceptance dataset (long context, multi-turn, >= 40% structured).
    Dataset(DatasetCmd),
}

#[derive(Debug, Args)]
pub struct DatasetCmd {
    /// Items to generate.
    #[arg(long, value_name = "N", default_value_t = 500)]
    pub items: usize,
    /// Seed of the generation: the same seed writes the same dataset.
    #[arg(long, value_name = "SEED", default_value_t = dataset::SAMPLE_SEED)]
    pub seed: u64,
    /// The dataset file to write (JSONL), relative to the repository root.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
}

impl AcceptCmd {
    pub fn run(self, sh: &Shell) -> anyhow::Result<Status> {
        let root = sh.current_dir();
        if let Some(AcceptSub::Dataset(d)) = &self.sub {
            if d.items == 0 {
                bail!("--items must be at least 1");
            }
            let path = root.join(&d.out);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)
                    .with_context(|| format!("cannot create {}", parent.display()))?;
            }
            let text = dataset::to_jsonl(&dataset::generate(d.items, d.seed));
            infergate_model::rundir::write_atomic(&path, text.as_bytes())?;
            println!("wrote {} items to {}", d.items, path.display());
            return Ok(Status::Success);
        }
        let spec = self.spec(&root)?;
        if !cfg!(feature = "acceptance") {
            bail!(
                "this build of xtask leaves out the acceptance checks (JSON Schema validation of \
                 structured outputs, `.npy` logits: the default build does, to build faster); \
                 run the same command built with them: `cargo run --package xtask --features \
                 acceptance -- acceptance ...`"
            );
        }
        let dir = spec.out_dir.clone();
        let report = measure::runtime()?
            .block_on(driver::run(spec))
            .context("the acceptance could not run")?;
        print!("{}", render(&report));
        println!("run directory: {}", dir.display());
        Ok(Status::from_ok(report.passed))
    }

    pub fn spec(&self, root: &Path) -> anyhow::Result<AcceptSpec> {
        let checks = [
            ("--min-cos", self.min_cos),
            ("--max-rtol", self.max_rtol),
            ("--max-ttft-p99", self.max_ttft_p99),
            ("--max-itl-jitter", self.max_itl_jitter),
            ("--min-schema-pass-rate", self.min_schema_pass_rate),
            ("--min-judge", self.min_judge),
        ];
        for (flag, v) in checks {
            if !(v.is_finite() && v >= 0.0) {
                bail!("{flag} must be a number >= 0, got {v}");
            }
        }
        if !(self.temperature.is_finite() && (0.0..=2.0).contains(&self.temperature)) {
            bail!("--temperature must be within 0..=2, got {}", self.temperature);
        }
        let targets = match (&self.baseline, &self.candidate) {
            (Some(b), Some(c)) => {
                let cfg = BenchConfig::load(&root.join(&self.config))?;
                let get = |name: &str| -> anyhow::Result<TargetSpec> {
                    let mut t = cfg.target(name).map_err(anyhow::Error::msg)?.clone();
                    // Acceptance connects without a root: its CA bundle by its full path.
                    t.ca_bundle = t.ca_bundle.map(|f| root.join(f).display().to_string());
                    let engine = t
                        .engine_config
                        .as_deref()
                        .map(|f| EngineParams::read(root, f))
                        .transpose()?;
                    Ok(TargetSpec { name: name.to_string(), target: t, engine })
                };
                let judge = self.judge.as_deref().map(get).transpose()?;
                Some((get(b)?, get(c)?, judge))
            }
            _ if self.baseline_logits.is_some() => None,
            _ => bail!(
                "give --baseline-target TARGET --candidate-target TARGET (targets of {}), or --baseline-logits and --candidate-logits",
                self.config.display()
            ),
        };
        let run_id = bench::runner::new_run_id();
        let out_dir = match &self.out {
            Some(d) => root.join(d),
            None => measure::default_out_dir(root, "accept", &run_id),
        };
        let mut spec = AcceptSpec::new(out_dir, run_id);
        if let Some((b, c, j)) = targets {
            spec.baseline = Some(b);
            spec.candidate = Some(c);
            spec.judge = j;
            spec.dataset = Some(root.join(&self.dataset));
            spec.dataset_name = Some(self.dataset.to_string_lossy().replace('\\', "/"));
        }
        spec.concurrency = self.concurrency;
        spec.numeric_items = self.numeric_items;
        spec.numeric_max_tokens = self.numeric_max_tokens;
        spec.top_logprobs = self.top_logprobs;
        spec.temperature = self.temperature;
        spec.seed = self.seed;
        spec.max_tokens = self.max_tokens;
        spec.all = self.all;
        spec.logits = self
            .baseline_logits
            .as_ref()
            .zip(self.candidate_logits.as_ref())
            .map(|(b, c)| (root.join(b), root.join(c)));
        spec.thresholds = AcceptThresholds {
            cos_min: self.min_cos,
            rtol_max: self.max_rtol,
            ttft_p99_ms: self.max_ttft_p99,
            itl_jitter_max: self.max_itl_jitter,
            schema_pass_rate_min: self.min_schema_pass_rate,
            judge_min: self.min_judge,
        };
        spec.git = gitinfo::detect(root);
        spec.quiet = self.quiet;
        Ok(spec)
    }
}

/// The console report: one row per check, then the verdict and the actions.
pub fn render(r: &AcceptanceReport) -> String {
    let mut t = ConsoleTable::framed([
        "layer",
        "check",
        "value",
        "threshold",
        "result",
        "action when failed",
    ]);
    for l in &r.layers {
        if l.checks.is_empty() {
            t.row([
                l.name.to_string(),
                BLANK.to_string(),
                BLANK.to_string(),
                BLANK.to_string(),
                l.verdict.as_str().to_string(),
                l.notes.join("; "),
            ]);
        }
        for c in &l.checks {
            let result = match (c.passed, c.gating) {
                (true, _) => "pass",
                (false, true) => "FAIL",
                (false, false) => "below (reported only)",
            };
            // Thresholds near 1 (cosine) or near 0 (rtol) need the digits that decide them.
            let near_one = c.threshold > 0.99 && c.threshold < 1.0;
            let small = c.threshold != 0.0 && c.threshold.abs() < 0.01;
            let decimals = if near_one || small { 6 } else { 4 };
            t.row([
                format!("{} ({})", l.name, l.verdict.as_str()),
                c.name.to_string(),
                fmt_opt(c.value, decimals),
                format!("{} {}", c.op, c.threshold),
                result.to_string(),
                c.action.to_string(),
            ]);
        }
    }
    let mut out = format!("{t}\n");
    if let Some(d) =
        r.layer("numeric").and_then(|l| l.details.get("first_divergence")).filter(|d| !d.is_null())
    {
        out.push_str(&format!(
            "first divergence: item {} position {} ({})\n",
            d["item"],
            d["position"],
            d["reason"].as_str().unwrap_or("")
        ));
    }
    out.push_str(if r.passed { "acceptance: PASSED\n" } else { "acceptance: FAILED\n" });
    for a in &r.actions {
        out.push_str(&format!("action: {a}\n"));
    }
    for l in &r.layers {
        for n in &l.notes {
            if !l.checks.is_empty() {
                out.push_str(&format!("note ({}): {n}\n", l.name));
            }
        }
    }
    for n in &r.notes {
        out.push_str(&format!("note: {n}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use bench::accept::{Layer, LayerCheck, LayerOutcome};

    #[test]
    fn render_shows_every_check_the_verdict_and_the_actions() {
        let mut r = AcceptanceReport {
            schema_version: 1,
            run_id: "r".into(),
            started_at: String::new(),
            baseline: None,
            candidate: None,
            dataset: serde_json::Value::Null,
            settings: serde_json::Value::Null,
            thresholds: AcceptThresholds::default(),
            layers: vec![
                Layer::evaluated(
                    "numeric",
                    vec![
                        LayerCheck::at_least(
                            "cosine similarity",
                            Some(0.99991),
                            0.9995,
                            "stop the build",
                        ),
                        LayerCheck::at_most(
                            "max relative error",
                            Some(0.002),
                            0.001,
                            "flag operator overflow",
                        ),
                    ],
                    serde_json::json!({"first_divergence": {"item": 2, "position": 5, "reason": "rtol"}}),
                    vec![],
                ),
                Layer::not_evaluated(
                    "engine",
                    LayerOutcome::Skipped,
                    "the numeric layer failed".into(),
                ),
            ],
            passed: true,
            actions: vec![],
            notes: vec![],
        };
        r.conclude();
        let out = render(&r);
        assert!(out.contains("0.999910"), "{out}");
        assert!(out.contains("FAIL"), "{out}");
        assert!(out.contains("first divergence: item 2 position 5 (rtol)"), "{out}");
        assert!(out.contains("acceptance: FAILED"), "{out}");
        assert!(out.contains("action: max relative error: flag operator overflow"), "{out}");
        assert!(out.contains("skipped"), "{out}");
    }

    #[test]
    fn targets_or_logits_are_required() {
        use clap::Parser;
        let cli = crate::Cli::try_parse_from(["cargo xtask", "acceptance"]).unwrap();
        let crate::Command::Acceptance(cmd) = cli.command else { panic!("acceptance") };
        let err = cmd.spec(Path::new("/nonexistent")).unwrap_err().to_string();
        assert!(err.contains("--baseline-target TARGET --candidate-target TARGET"), "{err}");
        assert!(
            crate::Cli::try_parse_from(["cargo xtask", "acceptance", "--baseline-target", "a"])
                .is_err()
        );
        let cli = crate::Cli::try_parse_from([
            "cargo xtask",
            "acceptance",
            "dataset",
            "--items",
            "5",
            "--out",
            "x.jsonl",
        ])
        .unwrap();
        assert!(matches!(
            cli.command,
            crate::Command::Acceptance(AcceptCmd { sub: Some(AcceptSub::Dataset(_)), .. })
        ));
    }
}
