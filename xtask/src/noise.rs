//! `cargo xtask noise`: N trials of the unchanged configuration on this machine (a trial set,
//! as `bench --trials N` measures it), each gated metric's run-to-run CV with its interval, and
//! the trials per arm an A/B gate needs to see a given change at 95% power
//! ([`infergate_model::stats::noise`]). The trials go into the noise history (`refs/infergate/history`)
//! as a `noise` entry, which the absolute gate pools from for sets of the same scenario (the
//! A/B gate pools earlier A/B gates' paired differences).

use infergate_model::metric::MetricPath;
use std::path::PathBuf;

use anyhow::{Context, bail};
use infergate_model::history::EntryKind;
use infergate_model::stats::noise::{RunNoise, run_noise, trials_per_arm};
use infergate_model::trials::TrialSet;
use xshell::Shell;

use crate::console::ConsoleTable;
use crate::exit::Status;
use crate::measure::bench::BenchCmd;
use crate::measure::flags::MeasureFlags;
use crate::text::{BLANK, num};

/// Power of the trials-per-arm figure.
pub(crate) const POWER: f64 = 0.95;

#[derive(Debug, clap::Args)]
pub struct NoiseCmd {
    /// The profile each trial runs, its bench config and `--set`.
    #[command(flatten)]
    pub flags: MeasureFlags,
    /// Trials to measure (at least 3).
    #[arg(long, value_name = "N", default_value_t = 20, value_parser = clap::value_parser!(u32).range(3..=1000))]
    pub trials: u32,
    /// The relative change the trials-per-arm figure is for (0.05 = 5% worse).
    #[arg(long, value_name = "P", default_value_t = infergate_model::ab::DEFAULT_BUDGET, value_parser = crate::text::parse_fraction)]
    pub change: f64,
    /// Metrics to report (repeatable; default: the A/B gate's default metrics).
    #[arg(long = "metric", value_name = "METRIC")]
    pub metrics: Vec<String>,
    /// The trial set's directory (default: target/noise/<run id>).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Leave the noise history alone.
    #[arg(long)]
    pub no_history: bool,
}

impl NoiseCmd {
    pub fn run(self, sh: &Shell) -> anyhow::Result<Status> {
        let root = sh.current_dir();
        let metrics = self.metrics()?;
        let run_id = bench::runner::new_run_id();
        let out = match &self.out {
            Some(dir) => dir.clone(),
            None => crate::measure::default_out_dir(&root, "noise", &run_id),
        };
        let cmd = BenchCmd {
            flags: self.flags.clone(),
            trials: Some(self.trials),
            out: Some(out),
            quiet: true,
            ..BenchCmd::default()
        };
        let plan = cmd.plan(&root, run_id)?;
        let status = crate::measure::bench::execute(&plan)?;
        if status != Status::Success {
            return Ok(status);
        }
        let set = TrialSet::load(&plan.out_dir).context("cannot read the trial set back")?;
        let alpha = infergate_model::ab::DEFAULT_ALPHA_FAIL / metrics.len() as f64;
        println!("{}", self.table(&set, &metrics, alpha));
        println!(
            "trials per arm: to see a change of {}% at {}% power, one-sided at {}% per metric (the A/B \
             gate's {}% over {} metrics); fixed-sample figures (docs/statistics.md)",
            num(self.change * 100.0),
            num(POWER * 100.0),
            num(alpha * 100.0),
            num(infergate_model::ab::DEFAULT_ALPHA_FAIL * 100.0),
            metrics.len()
        );
        if !self.no_history {
            let line =
                crate::history_store::gating::append_set(&root, EntryKind::Noise, &set, &metrics);
            eprintln!("note: {line}");
        }
        Ok(Status::Success)
    }

    /// The metrics to report, each a known one.
    fn metrics(&self) -> anyhow::Result<Vec<MetricPath>> {
        if self.metrics.is_empty() {
            return Ok(infergate_model::ab::default_metrics().to_vec());
        }
        let mut out = Vec::new();
        for m in &self.metrics {
            let Ok(path) = MetricPath::parse(m) else {
                bail!("--metric {m}: not a known metric (see docs/metrics.md for the list)");
            };
            out.push(path);
        }
        Ok(out)
    }

    fn table(&self, set: &TrialSet, metrics: &[MetricPath], alpha: f64) -> ConsoleTable {
        let per_arm = format!("trials per arm ({}%)", num(self.change * 100.0));
        let mut t = ConsoleTable::markdown([
            "metric",
            "trials",
            "mean",
            "run CV",
            "95% interval",
            per_arm.as_str(),
        ]);
        for &m in metrics {
            let values: Vec<Option<f64>> = set.trials.iter().map(|x| x.summary.metric(m)).collect();
            let RunNoise { trials, mean, log_sd, cv } = run_noise(&values);
            let pct = |v: f64| format!("{}%", num(v * 100.0));
            let (cv_text, interval) = match cv {
                Some((c, lo, hi)) => (pct(c), format!("{} .. {}", pct(lo), pct(hi))),
                None => (BLANK.to_string(), BLANK.to_string()),
            };
            let need = log_sd
                .and_then(|s| trials_per_arm(s, self.change, alpha, POWER))
                .map_or(BLANK.to_string(), |n| n.to_string());
            let mean = if mean.is_finite() { num(mean) } else { BLANK.to_string() };
            t.row([m.to_string(), trials.to_string(), mean, cv_text, interval, need]);
        }
        t
    }
}
