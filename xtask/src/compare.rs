//! `cargo xtask compare A B`: two runs or trial sets metric by metric. Per metric both
//! estimates with their intervals, the difference B - A with its interval, the relative change
//! and whether it is significant; a console table and `compare.json`
//! ([`infergate_model::compare::Comparison`]). Informational: it exits 0 whatever changed (the gate is
//! what enforces).

use infergate_model::stats::signed_sig_text;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use infergate_model::compare::{Change, Comparison, MetricComparison, compare, default_metrics};
use infergate_model::stats::{DEFAULT_CONFIDENCE, Estimate};
use infergate_model::trials::TrialSet;
use xshell::Shell;

use crate::console::ConsoleTable;
use crate::exit::Status;
use crate::text::{BLANK, join_clean, num};

/// `cargo xtask compare A B`.
#[derive(Debug, Args)]
pub struct CompareCmd {
    /// The baseline: a run directory (or its summary.json) or a trial set's directory.
    #[arg(value_name = "A")]
    pub a: PathBuf,
    /// The candidate, compared with A.
    #[arg(value_name = "B")]
    pub b: PathBuf,
    /// Coverage of the intervals, within (0, 1).
    #[arg(long, value_name = "P", default_value_t = DEFAULT_CONFIDENCE, value_parser = infergate_model::stats::parse_confidence)]
    pub confidence: f64,
    /// A metric to compare (dotted summary.json name, repeatable); default: latencies (mean,
    /// P99), throughput, goodput and failures.
    #[arg(long = "metric", value_name = "METRIC")]
    pub metrics: Vec<String>,
    /// Where to write the JSON (default: `compare.json` in B's directory).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

impl CompareCmd {
    pub fn run(self, sh: &Shell) -> anyhow::Result<Status> {
        let root = sh.current_dir();
        let mut named = Vec::new();
        for m in &self.metrics {
            let Ok(path) = infergate_model::metric::MetricPath::parse(m) else {
                anyhow::bail!(
                    "unknown metric `{m}`; the metric names are listed in docs/adr/README.md"
                );
            };
            named.push(path);
        }
        let load = |p: &Path| {
            TrialSet::load(&join_clean(&root, p))
                .with_context(|| format!("cannot compare {}", p.display()))
        };
        let (a, b) = (load(&self.a)?, load(&self.b)?);
        let metrics = if named.is_empty() { default_metrics() } else { named };
        // The gate's estimation, so a comparison and a gate of the same set agree.
        let opts = crate::thresholds::evaluate::GateOptions {
            confidence: self.confidence,
            ..Default::default()
        }
        .estimation();
        let shown = |p: &Path| p.to_string_lossy().replace('\\', "/");
        let cmp = compare((&shown(&self.a), &a), (&shown(&self.b), &b), &metrics, opts);
        println!("{}", render(&cmp));
        let out = match &self.out {
            Some(o) => join_clean(&root, o),
            None => b.dir.join(
                <infergate_model::compare::Comparison as infergate_model::artifact::Artifact>::FILE,
            ),
        };
        infergate_model::artifact::write_at(&out, &cmp)
            .with_context(|| format!("cannot write {}", out.display()))?;
        println!("wrote {}", out.display());
        Ok(Status::Success)
    }
}

/// The estimate's interval form ([`Estimate::interval`]); the blank's reason is in the notes.
fn estimate_cell(e: Option<&Estimate>) -> String {
    e.map_or_else(|| BLANK.to_string(), |e| e.interval().to_string())
}

fn difference_cell(m: &MetricComparison) -> (String, String) {
    let Some(d) = &m.difference else { return (BLANK.into(), BLANK.into()) };
    let abs = match (d.lo, d.hi) {
        (Some(lo), Some(hi)) => {
            format!(
                "{} [{}, {}]",
                signed_sig_text(d.absolute),
                signed_sig_text(lo),
                signed_sig_text(hi)
            )
        }
        _ => signed_sig_text(d.absolute),
    };
    let rel = d.relative.map_or(BLANK.to_string(), |r| format!("{:+.1}%", r * 100.0));
    (abs, rel)
}

/// The change, with `~` when a side is a single run (the difference may be run-to-run noise).
fn change_cell(m: &MetricComparison) -> String {
    let request_level = m.difference.as_ref().is_some_and(|d| d.request_level_only);
    match m.change {
        Change::Better | Change::Worse if request_level => format!("{}~", m.change.as_str()),
        c => c.as_str().to_string(),
    }
}

/// The console table and its legend.
pub fn render(c: &Comparison) -> String {
    let pct = num(c.confidence * 100.0);
    let mut t = ConsoleTable::framed([
        "Metric".to_string(),
        format!("A ({pct}% interval)"),
        format!("B ({pct}% interval)"),
        "B - A".to_string(),
        "Relative".to_string(),
        "Change".to_string(),
    ])
    .right_aligned(1..5);
    for m in &c.metrics {
        let (abs, rel) = difference_cell(m);
        let name = if m.unit.is_empty() || m.unit == "ratio" || m.unit == "count" {
            m.metric.to_string()
        } else {
            format!("{} ({})", m.metric, m.unit)
        };
        t.row([
            name,
            estimate_cell(m.a.estimate.as_ref()),
            estimate_cell(m.b.estimate.as_ref()),
            abs,
            rel,
            change_cell(m),
        ]);
    }
    let side = |name: &str, s: &infergate_model::compare::Side| {
        format!(
            "{name}: {} (profile `{}`, {} trial{}, {} measured requests)",
            s.path,
            s.profile,
            s.trials,
            if s.trials == 1 { "" } else { "s" },
            s.requests
        )
    };
    let mut out = format!("{}\n{}\n{t}\n", side("A", &c.a), side("B", &c.b));
    out.push_str(&format!(
        "Intervals at {pct}%: t across trials, or for a single run the request bootstrap (~: \
         run-to-run variance not counted); *: a percentile from fewer samples than it needs \
         (P99 from fewer than 100). B - A with Welch's interval; a change is significant when \
         that interval leaves 0 out. Counts are shown as observed (lowest to highest trial).\n"
    ));
    for m in &c.metrics {
        for (name, e) in [("A", &m.a), ("B", &m.b)] {
            if let Some(why) = &e.blank {
                out.push_str(&format!("{} in {name}: blank, {why}\n", m.metric));
            }
        }
    }
    for n in &c.notes {
        out.push_str(&format!("note: {n}\n"));
    }
    let count = |ch: Change| c.metrics.iter().filter(|m| m.change == ch).count();
    out.push_str(&format!(
        "{} better, {} worse, {} without a significant change\n",
        count(Change::Better),
        count(Change::Worse),
        count(Change::NotSignificant)
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells() {
        use infergate_model::stats::Method;
        let e = Estimate {
            trials: 1,
            requests: 64,
            method: Method::RequestBootstrap,
            undersampled: true,
            ..infergate_policy::test_support::estimate(182.345, 170.01, 190.9)
        };
        assert_eq!(estimate_cell(Some(&e)), "182.3 [170, 190.9]*~");
        let counts = Estimate { method: Method::Observed, lo: 0.0, hi: 2.0, value: 1.0, ..e };
        assert_eq!(estimate_cell(Some(&counts)), "0 to 2");
        assert_eq!(estimate_cell(None), BLANK);
    }
}
