//! `tune.json`, the result of a tune, and the policy over its rows as pure functions: which
//! rows meet the profile's SLOs, the Pareto fronts, the winner and its tie-break, the warning
//! when the winner sits at the edge of the grid, and the order a search measures in.
//!
//! The winner (docs/tune.md): among the measured rows that meet every SLO of the profile (TTFT,
//! TPOT and E2E P99 within the profile's `[slo]`), the highest goodput (requests/s meeting
//! every SLO). Rows within [`TIE_TOLERANCE`] of that goodput tie; the tie goes to the highest
//! output throughput, then the lowest TTFT P99, then the earlier row.

use std::cmp::Ordering;
use std::path::Path;

use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use super::grid::Axis;

/// File name of the result in the tune directory.
pub const TUNE_FILE: &str = "tune.json";
/// File name of the Pareto chart in the tune directory.
pub const PARETO_FILE: &str = "pareto.svg";
/// Version of the `tune.json` format.
pub const FORMAT_VERSION: u32 = 1;
/// Goodputs this close (relative) to the best tie.
pub const TIE_TOLERANCE: f64 = 0.01;

/// What became of one configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RowStatus {
    /// Its run ran to its end (some requests may have failed).
    Measured,
    /// The variant is not a valid engine config, the engine did not start, or no request
    /// succeeded: `error` says which.
    Failed,
    /// Ctrl-C during its run: measured again on resume.
    Interrupted,
    /// Not run: `--max-configs` or the time budget was reached.
    Skipped,
}

/// One configuration's row. Blank (`null`) = not measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TuneRow {
    /// Named by its differing keys (`max_num_seqs=128 enable_chunked_prefill=false`).
    pub name: String,
    /// The keys it sets: `[key, value]` in axis order.
    pub settings: Vec<(String, Json)>,
    /// Hash of (variant config, profile, bench arguments, engine): a row with the same key and
    /// a complete run is not measured again.
    pub key: String,
    /// The variant engine config, relative to the repository root.
    pub config: String,
    /// Its run (or trial set) directory, relative to the tune directory.
    pub dir: String,
    pub status: RowStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub trials: usize,
    pub requests: u64,
    pub goodput_rps: Option<f64>,
    pub goodput_ratio: Option<f64>,
    pub output_tokens_per_s: Option<f64>,
    pub ttft_p99_ms: Option<f64>,
    pub tpot_p99_ms: Option<f64>,
    pub e2e_p99_ms: Option<f64>,
    /// The SLO objectives the row misses (empty: it meets every one).
    pub slo_misses: Vec<String>,
    /// On the Pareto front of throughput against TTFT P99.
    pub pareto: bool,
    /// On the Pareto front of goodput against TTFT P99.
    pub goodput_pareto: bool,
    /// Seconds the configuration took (engine start and runs).
    pub elapsed_s: Option<f64>,
    /// With `--sweep`: the stage whose numbers the row shows (`knee: concurrency 8`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep_stage: Option<String>,
    /// Successive halving: the rung (from 1) this row was measured in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rung: Option<u32>,
    /// Successive halving: dropped after its rung (measured with fewer requests than the
    /// last rung); never the winner.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub eliminated: bool,
}

impl TuneRow {
    /// A row not measured (yet), with its status and why.
    pub fn unmeasured(name: &str, settings: Vec<(String, Json)>, status: RowStatus) -> TuneRow {
        TuneRow {
            name: name.to_string(),
            settings,
            key: String::new(),
            config: String::new(),
            dir: String::new(),
            status,
            error: None,
            trials: 0,
            requests: 0,
            goodput_rps: None,
            goodput_ratio: None,
            output_tokens_per_s: None,
            ttft_p99_ms: None,
            tpot_p99_ms: None,
            e2e_p99_ms: None,
            slo_misses: vec![],
            pareto: false,
            goodput_pareto: false,
            elapsed_s: None,
            sweep_stage: None,
            rung: None,
            eliminated: false,
        }
    }

    /// Measured and within every SLO.
    pub fn meets_slos(&self) -> bool {
        self.status == RowStatus::Measured && self.slo_misses.is_empty()
    }

    /// The row [`winner`] ranks with: not eliminated and within every SLO.
    fn contends(&self) -> bool {
        self.meets_slos() && !self.eliminated
    }
}

/// One axis as `tune.json` records it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AxisRecord {
    pub key: String,
    pub values: Vec<Json>,
}

/// The whole tune (`tune.json`), rewritten atomically after each configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TuneFile {
    pub format: u32,
    pub profile: String,
    /// The governed engine config every variant derives from.
    pub engine_config: String,
    /// `sim`, `llama-cpp` or `vllm`.
    pub engine: String,
    /// `grid`, `random (seed S)` or `successive halving`.
    pub search: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    pub axes: Vec<AxisRecord>,
    pub rows: Vec<TuneRow>,
    /// Successive halving: the rows of earlier rungs a later rung measured again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub earlier: Vec<TuneRow>,
    /// The winner's name; null when no measured row meets every SLO.
    pub winner: Option<String>,
    pub warnings: Vec<String>,
}

impl TuneFile {
    /// Read `tune.json` of a tune directory (or the file itself).
    pub fn read(path: &Path) -> Result<TuneFile, String> {
        let file = if path.is_dir() { path.join(TUNE_FILE) } else { path.to_path_buf() };
        let text = std::fs::read_to_string(&file)
            .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        serde_json::from_str(&text).map_err(|e| format!("{} is not a tune: {e}", file.display()))
    }

    /// The winner's row.
    pub fn winner_row(&self) -> Option<&TuneRow> {
        let w = self.winner.as_ref()?;
        self.rows.iter().find(|r| &r.name == w)
    }

    /// The measured configurations as points of the Pareto charts (`pareto.svg`).
    pub fn pareto_points(&self) -> Vec<crate::chart::figures::ParetoPoint> {
        self.rows
            .iter()
            .filter(|r| r.status == RowStatus::Measured)
            .map(|r| crate::chart::figures::ParetoPoint {
                name: r.name.clone(),
                ttft_p99_ms: r.ttft_p99_ms,
                throughput: r.output_tokens_per_s,
                goodput: r.goodput_rps,
                pareto: r.pareto,
                goodput_pareto: r.goodput_pareto,
                winner: self.winner.as_deref() == Some(r.name.as_str()),
            })
            .collect()
    }

    /// Fill the derived fields from the rows: both fronts, the winner, the edge warnings.
    pub fn decide(&mut self, axes: &[Axis]) {
        let front = pareto_front(&self.rows, |r| r.output_tokens_per_s);
        let goodput_front = pareto_front(&self.rows, |r| r.goodput_rps);
        for (i, r) in self.rows.iter_mut().enumerate() {
            r.pareto = front.contains(&i);
            r.goodput_pareto = goodput_front.contains(&i);
        }
        let w = winner(&self.rows);
        self.winner = w.map(|i| self.rows[i].name.clone());
        self.warnings = w.map(|i| edge_warnings(axes, &self.rows[i])).unwrap_or_default();
    }
}

/// The SLO objectives values miss: `TTFT P99 812 ms above the SLO's 500 ms`.
pub fn slo_misses(slo: &bench::metrics::Slo, p99: [Option<f64>; 3]) -> Vec<String> {
    let mut out = Vec::new();
    for ((name, limit), v) in
        [("TTFT", slo.ttft_ms), ("TPOT", slo.tpot_ms), ("E2E", slo.e2e_ms)].into_iter().zip(p99)
    {
        match (limit, v) {
            (Some(l), Some(v)) if v > l => {
                out.push(format!("{name} P99 {v:.1} ms above the SLO's {l} ms"))
            }
            (Some(l), None) => out.push(format!("{name} P99 not measured (SLO {l} ms)")),
            _ => {}
        }
    }
    out
}

/// The rows on the Pareto front of `y` (higher is better) against TTFT P99 (lower is better):
/// measured rows with both values that no other such row dominates (at least as good in both,
/// better in one). Indexes in row order.
pub fn pareto_front(rows: &[TuneRow], y: impl Fn(&TuneRow) -> Option<f64>) -> Vec<usize> {
    let pts: Vec<(usize, f64, f64)> = rows
        .iter()
        .enumerate()
        .filter(|(_, r)| r.status == RowStatus::Measured)
        .filter_map(|(i, r)| Some((i, r.ttft_p99_ms?, y(r)?)))
        .collect();
    pts.iter()
        .filter(|&&(i, x, v)| {
            !pts.iter().any(|&(j, x2, v2)| j != i && x2 <= x && v2 >= v && (x2 < x || v2 > v))
        })
        .map(|p| p.0)
        .collect()
}

/// The winner: see the module header. `None` when no measured row meets every SLO.
pub fn winner(rows: &[TuneRow]) -> Option<usize> {
    let ok: Vec<usize> = (0..rows.len()).filter(|&i| rows[i].contends()).collect();
    let best = ok.iter().filter_map(|&i| rows[i].goodput_rps).fold(f64::NEG_INFINITY, f64::max);
    let tied: Vec<usize> = ok
        .into_iter()
        .filter(|&i| rows[i].goodput_rps.is_some_and(|g| g >= best - best.abs() * TIE_TOLERANCE))
        .collect();
    let key = |i: usize| (rows[i].output_tokens_per_s, rows[i].ttft_p99_ms);
    tied.into_iter().min_by(|&a, &b| {
        let (ta, la) = key(a);
        let (tb, lb) = key(b);
        cmp_desc(ta, tb).then(cmp_asc(la, lb)).then(a.cmp(&b))
    })
}

/// Higher first; blank last.
fn cmp_desc(a: Option<f64>, b: Option<f64>) -> Ordering {
    match (a, b) {
        (Some(a), Some(b)) => b.total_cmp(&a),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => Ordering::Equal,
    }
}

/// Lower first; blank last.
fn cmp_asc(a: Option<f64>, b: Option<f64>) -> Ordering {
    match (a, b) {
        (Some(a), Some(b)) => a.total_cmp(&b),
        _ => cmp_desc(a, b),
    }
}

/// A warning per numeric axis (of two or more values) whose smallest or largest value the
/// winner took: the best may lie beyond the grid.
pub fn edge_warnings(axes: &[Axis], winner: &TuneRow) -> Vec<String> {
    let mut out = Vec::new();
    for a in axes.iter().filter(|a| a.values.len() > 1) {
        let nums: Vec<f64> = a.values.iter().filter_map(number).collect();
        if nums.len() != a.values.len() {
            continue;
        }
        let Some(v) =
            winner.settings.iter().find(|(k, _)| k == &a.key).and_then(|(_, v)| v.as_f64())
        else {
            continue;
        };
        let (lo, hi) =
            nums.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &x| (l.min(x), h.max(x)));
        let side = if v == hi {
            "largest"
        } else if v == lo {
            "smallest"
        } else {
            continue;
        };
        out.push(format!(
            "the winner `{}` takes the {side} value tried for {} ({v}): the best may lie \
             beyond the grid; extend it past {v} and tune again",
            winner.name, a.key,
        ));
    }
    out
}

fn number(v: &toml::Value) -> Option<f64> {
    match v {
        toml::Value::Integer(i) => Some(*i as f64),
        toml::Value::Float(f) => Some(*f),
        _ => None,
    }
}

/// Fewest measured requests of a rung of successive halving.
pub const MIN_RUNG_REQUESTS: u64 = 8;

/// The measured requests of each rung of successive halving over `n` configurations with
/// `full` requests: ceil(log2 n) rungs (at least one), the last with `full`, each earlier one
/// with half the next (at least [`MIN_RUNG_REQUESTS`], never more than `full`).
pub fn halving_rungs(full: u64, n: usize) -> Vec<u64> {
    let rungs = (n.max(1) as f64).log2().ceil().max(1.0) as u32;
    (0..rungs).map(|r| (full >> (rungs - 1 - r).min(63)).max(MIN_RUNG_REQUESTS.min(full))).collect()
}

/// The better half (rounded up) of `rows`, as indexes into it in their order: ranked by
/// meeting every SLO, then goodput, then throughput, then TTFT P99, then order (a row not
/// measured ranks last).
pub fn better_half(rows: &[&TuneRow]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..rows.len()).collect();
    idx.sort_by(|&a, &b| {
        let (ra, rb) = (rows[a], rows[b]);
        let measured = |r: &TuneRow| r.status == RowStatus::Measured;
        measured(rb)
            .cmp(&measured(ra))
            .then(rb.meets_slos().cmp(&ra.meets_slos()))
            .then(cmp_desc(ra.goodput_rps, rb.goodput_rps))
            .then(cmp_desc(ra.output_tokens_per_s, rb.output_tokens_per_s))
            .then(cmp_asc(ra.ttft_p99_ms, rb.ttft_p99_ms))
            .then(a.cmp(&b))
    });
    idx.truncate(rows.len().div_ceil(2));
    idx.sort();
    idx
}

/// How a search orders the configurations: `grid` keeps the grid's order; `random` shuffles it
/// with the seed (the same seed, the same order). `--max-configs` then keeps the first ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Search {
    Grid,
    Random {
        seed: u64,
    },
    /// Grid order, measured in rungs of [`halving_rungs`], the [`better_half`] going on.
    Halving,
}

impl Search {
    /// The indexes of `n` configurations in the order this search measures them, the first
    /// `max` of them (all when `None`).
    pub fn order(&self, n: usize, max: Option<usize>) -> Vec<usize> {
        let mut idx: Vec<usize> = (0..n).collect();
        if let Search::Random { seed } = self {
            idx.shuffle(&mut StdRng::seed_from_u64(*seed));
        }
        idx.truncate(max.unwrap_or(n));
        idx
    }

    pub fn label(&self) -> String {
        match self {
            Search::Grid => "grid".into(),
            Search::Random { seed } => format!("random (seed {seed})"),
            Search::Halving => "successive halving".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, goodput: f64, tput: f64, ttft: f64) -> TuneRow {
        let mut r = TuneRow::unmeasured(name, vec![], RowStatus::Measured);
        r.goodput_rps = Some(goodput);
        r.output_tokens_per_s = Some(tput);
        r.ttft_p99_ms = Some(ttft);
        r
    }

    #[test]
    fn the_winner_has_the_best_goodput_within_the_slos_and_ties_go_to_throughput() {
        let mut rows = vec![
            row("a", 5.0, 500.0, 100.0),
            row("b", 9.0, 900.0, 300.0),
            row("c", 12.0, 1200.0, 800.0),
            row("d", 9.05, 950.0, 310.0),
        ];
        rows[2].slo_misses = vec!["TTFT P99 800.0 ms above the SLO's 500 ms".into()];
        // c misses its SLO; b and d tie within 1% on goodput: d has the higher throughput.
        assert_eq!(winner(&rows), Some(3));
        rows[3].output_tokens_per_s = Some(900.0);
        // Same throughput: the lower TTFT P99 wins.
        assert_eq!(winner(&rows), Some(1));
        rows[3].ttft_p99_ms = Some(300.0);
        // Equal in everything: the earlier row.
        assert_eq!(winner(&rows), Some(1));
        rows[1].status = RowStatus::Failed;
        rows[3].status = RowStatus::Failed;
        assert_eq!(winner(&rows), Some(0));
        rows[0].slo_misses = vec!["x".into()];
        assert_eq!(winner(&rows), None, "no row meets the SLOs");
    }

    #[test]
    fn the_pareto_front_keeps_the_rows_no_other_row_dominates() {
        let mut rows = vec![
            row("fast", 1.0, 500.0, 100.0),
            row("dominated", 1.0, 400.0, 200.0),
            row("wide", 1.0, 1000.0, 400.0),
            row("middle", 1.0, 700.0, 250.0),
            row("failed", 1.0, 5000.0, 1.0),
        ];
        rows[4].status = RowStatus::Failed;
        assert_eq!(pareto_front(&rows, |r| r.output_tokens_per_s), vec![0, 2, 3]);
        rows[1].ttft_p99_ms = None;
        assert_eq!(pareto_front(&rows, |r| r.output_tokens_per_s), vec![0, 2, 3]);
    }

    #[test]
    fn slo_misses_name_the_objective_and_a_blank_value_misses() {
        let slo = bench::metrics::Slo { ttft_ms: Some(500.0), tpot_ms: Some(50.0), e2e_ms: None };
        assert!(slo_misses(&slo, [Some(499.0), Some(50.0), Some(9e9)]).is_empty());
        assert_eq!(
            slo_misses(&slo, [Some(812.0), None, None]),
            ["TTFT P99 812.0 ms above the SLO's 500 ms", "TPOT P99 not measured (SLO 50 ms)"]
        );
    }

    #[test]
    fn a_winner_at_the_edge_of_a_numeric_axis_is_warned_about() {
        let axes = vec![
            super::super::grid::parse_axis("scheduler.max_num_seqs=64,128,256").unwrap(),
            super::super::grid::parse_axis("scheduler.enable_chunked_prefill=true,false").unwrap(),
        ];
        let mut w = row("w", 1.0, 1.0, 1.0);
        w.settings = vec![
            ("scheduler.max_num_seqs".into(), 256.into()),
            ("scheduler.enable_chunked_prefill".into(), true.into()),
        ];
        let warnings = edge_warnings(&axes, &w);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("largest value tried for scheduler.max_num_seqs (256)"));
        w.settings[0].1 = 128.into();
        assert!(edge_warnings(&axes, &w).is_empty());
        w.settings[0].1 = 64.into();
        assert!(edge_warnings(&axes, &w)[0].contains("smallest"));
    }

    #[test]
    fn halving_doubles_the_requests_each_rung_and_keeps_the_better_half() {
        assert_eq!(halving_rungs(64, 6), vec![16, 32, 64]);
        assert_eq!(halving_rungs(64, 8), vec![16, 32, 64]);
        assert_eq!(halving_rungs(64, 2), vec![64]);
        assert_eq!(halving_rungs(64, 1), vec![64]);
        assert_eq!(halving_rungs(20, 16), vec![8, 8, 10, 20]);
        assert_eq!(halving_rungs(4, 4), vec![4, 4]);
        let mut rows = vec![
            row("a", 5.0, 500.0, 100.0),
            row("b", 9.0, 900.0, 300.0),
            row("c", 12.0, 1200.0, 800.0),
            row("d", 9.0, 950.0, 310.0),
            row("e", 1.0, 100.0, 100.0),
        ];
        rows[2].slo_misses = vec!["x".into()];
        rows[4].status = RowStatus::Failed;
        let refs: Vec<&TuneRow> = rows.iter().collect();
        // Within the SLOs first (b, d, a by goodput, then throughput), c missing them next.
        assert_eq!(better_half(&refs), vec![0, 1, 3]);
        rows[0].eliminated = true;
        rows[1].eliminated = true;
        rows[3].eliminated = true;
        assert_eq!(winner(&rows), None, "an eliminated row never wins");
    }

    #[test]
    fn searches_order_and_cap_the_configurations() {
        assert_eq!(Search::Grid.order(4, None), vec![0, 1, 2, 3]);
        assert_eq!(Search::Grid.order(4, Some(2)), vec![0, 1]);
        let r = Search::Random { seed: 7 }.order(10, Some(4));
        assert_eq!(r, Search::Random { seed: 7 }.order(10, Some(4)), "seeded");
        assert_eq!(r.len(), 4);
        let mut all = Search::Random { seed: 7 }.order(10, None);
        assert_ne!(all, (0..10).collect::<Vec<_>>());
        all.sort();
        assert_eq!(all, (0..10).collect::<Vec<_>>());
    }
}
