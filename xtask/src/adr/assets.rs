//! The charts `adr new` writes beside a record, `docs/adr/assets/NNNN-*.svg`, and links from
//! it: the latency CDFs (TTFT and E2E) of the baseline against the chosen run (against every
//! experiment when the baseline is kept), and each sweep's chart against load. They are drawn
//! from the runs' files by [`crate::chart`]; `adr lint` checks that linked assets exist and
//! `adr check` treats them as part of their record.

use std::path::Path;

use infergate_model::sweep::SweepSummary;

use crate::chart::figures::{self, latency_samples};

/// One chart of a record.
#[derive(Clone, Debug, PartialEq)]
pub struct Asset {
    /// `NNNN-latency.svg`: the file name in the assets directory.
    pub file: String,
    /// What the chart shows, the link's text.
    pub caption: String,
    pub svg: String,
}

/// A run the record compares: its label in the record (`Baseline`, `Exp-1`) and directory.
pub struct RunRef<'a> {
    pub label: &'a str,
    pub dir: &'a Path,
}

/// The charts of record `number`: latency CDFs of `runs` (those whose `requests.jsonl` can be
/// read; none when fewer than one remains) and one chart per sweep.
pub fn render(number: u32, runs: &[RunRef<'_>], sweeps: &[SweepSummary]) -> Vec<Asset> {
    let mut out = Vec::new();
    let mut ttft = Vec::new();
    let mut e2e = Vec::new();
    for r in runs {
        let Ok(read) = infergate_model::rundir::read_records(r.dir) else { continue };
        let measured: Vec<_> = read.records.iter().filter(|x| !x.warmup).collect();
        let [t, _, _, e] = latency_samples(&measured);
        ttft.push((r.label.to_string(), t.2));
        e2e.push((r.label.to_string(), e.2));
    }
    if !ttft.is_empty() {
        let labels: Vec<String> = ttft.iter().map(|t| t.0.clone()).collect();
        out.push(Asset {
            file: format!("{number:04}-latency.svg"),
            caption: format!("TTFT and E2E distributions: {}", labels.join(" vs ")),
            svg: figures::stack(&[
                figures::cdf("ttft-cdf", "TTFT", &ttft, vec![]),
                figures::cdf("e2e-cdf", "E2E", &e2e, vec![]),
            ]),
        });
    }
    for (i, s) in sweeps.iter().enumerate() {
        let file = if i == 0 {
            format!("{number:04}-sweep.svg")
        } else {
            format!("{number:04}-sweep-{}.svg", i + 1)
        };
        out.push(Asset {
            file,
            caption: format!(
                "sweep {}: throughput and latency p99 against {}",
                s.sweep_id,
                s.dimension.name()
            ),
            svg: figures::sweep_svg(s),
        });
    }
    out
}
