//! `cargo xtask bench`: measure a server (the embedded simulator by default).

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use bench::config::{BenchConfig, Override, Target};
use bench::runner::{self, RunControl, RunSpec};
use bench::summary::{EngineParams, RunStatus};
use clap::Args;
use xshell::Shell;

use crate::adr::thresholds::Thresholds;
use crate::{Status, gate, gitinfo, report};

#[derive(Clone, Debug, Args)]
pub struct BenchCmd {
    /// Profile from the bench config.
    #[arg(short, long, default_value = "default")]
    pub profile: String,
    /// Bench config file (built-in defaults when the default file is absent).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
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
    /// Measured requests to send.
    #[arg(long)]
    pub requests: Option<u64>,
    /// Stop scheduling measured requests after this many seconds.
    #[arg(long, value_name = "SECONDS")]
    pub duration: Option<f64>,
    /// Output tokens per request.
    #[arg(long)]
    pub max_tokens: Option<u32>,
    /// Override any profile field: KEY=VALUE, e.g. --set workload.input_lengths=[128,512].
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
    /// Run directory (default: target/bench/<run id>).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// No progress bar and no informational lines.
    #[arg(short, long)]
    pub quiet: bool,
    /// Sweep the load, one run per stage: concurrency=32,128,256 or rate=2,4,8 (see
    /// docs/acceptance.md). The sweep directory gets sweep.json and sweep.svg.
    #[arg(long, value_name = "DIM=V,V,...", conflicts_with_all = ["concurrency", "rate"])]
    pub sweep: Option<String>,
    /// Sweep: length of each stage in seconds (default: stages are counted in requests).
    #[arg(long, value_name = "SECONDS", requires = "sweep")]
    pub stage_duration: Option<f64>,
    /// Sweep: share of each stage dropped as warmup before the measured steady state.
    #[arg(long, value_name = "F", default_value_t = 1.0 / 3.0)]
    pub warmup_fraction: f64,
    /// Gate the run against the thresholds of the accepted decision records: exit 1 when a
    /// blocking threshold fails.
    #[arg(long)]
    pub gate: bool,
    /// Thresholds file for --gate.
    #[arg(long, value_name = "FILE", default_value = crate::adr::thresholds::GATE_FILE, requires = "gate")]
    pub thresholds: PathBuf,
    /// With --gate, also print GitHub Actions annotations.
    #[arg(long, requires = "gate")]
    pub github: bool,
    /// Run the profile once per batching strategy against the embedded engine simulator and
    /// compare them, e.g. serial,fixed,token_budget,continuous (--out is the comparison's
    /// directory).
    #[arg(long, value_name = "LIST", conflicts_with_all = ["base_url", "target", "gate"])]
    pub compare_strategies: Option<String>,
}

pub const DEFAULT_CONFIG: &str = "configs/bench.toml";

impl BenchCmd {
    /// The command-line overrides, in the order they apply (flags, then --set).
    pub fn overrides(&self) -> anyhow::Result<Vec<Override>> {
        let mut o = Vec::new();
        if let Some(c) = self.concurrency {
            o.push(Override::new("load.mode", "closed", format!("--concurrency {c}")));
            o.push(Override::new("load.concurrency", c as i64, format!("--concurrency {c}")));
        }
        if let Some(r) = self.rate {
            o.push(Override::new("load.mode", "open", format!("--rate {r}")));
            o.push(Override::new("load.rate", r, format!("--rate {r}")));
        }
        if let Some(n) = self.requests {
            o.push(Override::new("load.requests", n as i64, format!("--requests {n}")));
        }
        if let Some(d) = self.duration {
            o.push(Override::new("load.duration_s", d, format!("--duration {d}")));
        }
        if let Some(n) = self.max_tokens {
            o.push(Override::new("workload.max_tokens", n as i64, format!("--max-tokens {n}")));
        }
        if let Some(m) = &self.model {
            o.push(Override::new("model", m.as_str(), format!("--model {m}")));
        }
        if let Some(t) = &self.target {
            o.push(Override::new("target", t.as_str(), format!("--target {t}")));
        }
        for s in &self.sets {
            o.push(Override::parse(s).map_err(anyhow::Error::msg)?);
        }
        Ok(o)
    }

    pub fn run(self, sh: &Shell) -> anyhow::Result<Status> {
        if self.sweep.is_some() {
            return crate::sweep::run(self, sh);
        }
        if let Some(list) = &self.compare_strategies {
            return crate::strategies::run(&self, list, sh);
        }
        let root = sh.current_dir();
        let spec = self.spec(&root)?;
        // Read the thresholds first: a broken file should fail before minutes of measuring.
        let thresholds = if self.gate {
            Some(
                Thresholds::load(&root.join(&self.thresholds))
                    .context("cannot read the thresholds for --gate")?,
            )
        } else {
            None
        };
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .context("cannot start the async runtime")?;
        let outcome = rt
            .block_on(runner::run(spec, RunControl::default()))
            .context("the bench could not run")?;
        let s = &outcome.summary;
        if !self.quiet {
            println!("{}", report::render(s));
        }
        println!("run directory: {}", outcome.dir.display());
        let gate = match (&thresholds, s.status) {
            (Some(t), RunStatus::Complete | RunStatus::Failed) => {
                let report = gate::evaluate(s, t);
                gate::print_report(&report, self.github);
                report.status()
            }
            _ => Status::Success,
        };
        let run = match s.status {
            RunStatus::Complete => Status::Success,
            RunStatus::Interrupted => Status::Interrupted,
            RunStatus::Failed => {
                let classes: Vec<String> =
                    s.requests.by_class.iter().map(|(k, v)| format!("{k}: {v}")).collect();
                eprintln!(
                    "error: no measured request succeeded ({}); see {} for each request's error",
                    if classes.is_empty() {
                        "none was sent".to_string()
                    } else {
                        classes.join(", ")
                    },
                    outcome.dir.join("requests.jsonl").display()
                );
                Status::PolicyViolated
            }
        };
        Ok(if run == Status::Success { gate } else { run })
    }

    /// Resolve the config and command line into a run specification.
    pub fn spec(&self, root: &Path) -> anyhow::Result<RunSpec> {
        self.spec_with(root, &[])
    }

    /// [`Self::spec`] with overrides applied after the command line's (sweep stages).
    pub fn spec_with(&self, root: &Path, extra: &[Override]) -> anyhow::Result<RunSpec> {
        let cfg = load_config(root, self.config.as_deref())?;
        let mut overrides = self.overrides()?;
        overrides.extend_from_slice(extra);
        let mut resolved = cfg.resolve(&self.profile, &overrides)?;
        if let Some(url) = &self.base_url {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                bail!("--base-url must start with http:// or https://, got `{url}`");
            }
            if let Some(var) = &self.api_key_env {
                bench::config::validate_env_name(var).map_err(anyhow::Error::msg)?;
            }
            let target = Target {
                model: self.model.clone(),
                api_key_env: self.api_key_env.clone(),
                ..Target::at(url)
            };
            resolved.profile.target = Some("cli".into());
            resolved.target = Some(("cli".into(), target));
        }
        let engine = match &resolved.target {
            Some((_, t)) => {
                t.engine_config.as_deref().map(|f| EngineParams::read(root, f)).transpose()?
            }
            None => None,
        };
        let run_id = runner::new_run_id();
        let out_dir = match &self.out {
            Some(d) => root.join(d),
            None => root.join("target").join("bench").join(&run_id),
        };
        Ok(RunSpec {
            profile: resolved,
            out_dir,
            run_id,
            git: gitinfo::detect(root),
            engine,
            quiet: self.quiet,
            handle_signals: true,
            root: root.to_path_buf(),
        })
    }
}

/// The bench config: `explicit` when given, else configs/bench.toml when present, else the
/// built-in defaults. Paths are relative to the repository root and named so in messages.
pub fn load_config(root: &Path, explicit: Option<&Path>) -> anyhow::Result<BenchConfig> {
    Ok(match explicit {
        Some(p) => BenchConfig::load_in(root, p)?,
        None if root.join(DEFAULT_CONFIG).exists() => {
            BenchConfig::load_in(root, Path::new(DEFAULT_CONFIG))?
        }
        None => BenchConfig::builtin(),
    })
}
