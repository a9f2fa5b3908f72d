//! `tune.json`, the result of a tune, and the policy over its rows as pure functions: which
//! rows meet the profile's SLOs, the Pareto fronts, the winner and its tie-break, the warning
//! when the winner sits at the edge of the grid, and the order a search measures in.
//!
//! Every number the choice uses is an estimate with its interval (`bench::stats::Estimate`: t
//! across trials, or the request bootstrap of a single run), and the choice says how sure it
//! is (docs/tune.md):
//!
//! - **SLOs** ([`slo_check`]): a row *meets* an objective when its interval's unfavourable
//!   (upper) end is within the limit, *misses* it when even the favourable (lower) end is
//!   beyond it, and is *undecided* otherwise; only rows that meet every objective contend.
//! - **The winner** ([`choose`]): the contender with the highest goodput (the leader), compared
//!   with each other contender by the goodput difference's interval (Welch, or request-level for
//!   single runs: `bench::compare::compare_estimates`). When the leader is significantly better
//!   than every other, with run-to-run variance counted (trials on both sides: [`beats`]),
//!   goodput decided ([`DecidedBy::Goodput`]). Otherwise the leader and those
//!   it is not significantly better than are indistinguishable, and the tie-break picks among
//!   them: the highest output throughput, then the lowest TTFT P99, then the row measured
//!   first ([`DecidedBy::TieBreak`]).

use std::cmp::Ordering;
use std::path::Path;

use bench::compare::{Change, compare_estimates};
use bench::stats::{Comparator, DEFAULT_CONFIDENCE, Difference, Estimate, Verdict, verdict};
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
/// The metric the winner is chosen by, as the registry names it.
pub const GOODPUT: &str = "goodput.requests_per_s";
/// Trials `--trials` suggests when single runs cannot decide.
pub const SUGGESTED_TRIALS: usize = 3;

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
    /// Each metric's estimate with its interval, trials, requests and method.
    #[serde(default)]
    pub estimates: RowEstimates,
    /// Whether the row meets every SLO objective, misses one, or cannot tell (measured rows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo: Option<SloCompliance>,
    /// The SLO objectives the row misses (the interval's favourable end is beyond the limit).
    pub slo_misses: Vec<String>,
    /// The SLO objectives it may or may not meet: the interval straddles the limit.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slo_undecided: Vec<String>,
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
            estimates: RowEstimates::default(),
            slo: None,
            slo_misses: vec![],
            slo_undecided: vec![],
            pareto: false,
            goodput_pareto: false,
            elapsed_s: None,
            sweep_stage: None,
            rung: None,
            eliminated: false,
        }
    }

    /// Measured and within every SLO, decided by the intervals.
    pub fn meets_slos(&self) -> bool {
        self.status == RowStatus::Measured
            && self.slo_misses.is_empty()
            && self.slo_undecided.is_empty()
    }

    /// Meets, misses or undecided; `None` when not measured.
    pub fn slo_compliance(&self) -> Option<SloCompliance> {
        let c = if !self.slo_misses.is_empty() {
            SloCompliance::Misses
        } else if !self.slo_undecided.is_empty() {
            SloCompliance::Undecided
        } else {
            SloCompliance::Meets
        };
        (self.status == RowStatus::Measured).then_some(c)
    }

    /// The row [`winner`] ranks with: not eliminated and within every SLO.
    fn contends(&self) -> bool {
        self.meets_slos() && !self.eliminated
    }
}

/// A measured row's estimates ([`Estimate`]: value, interval, confidence, trials, requests,
/// method); blank where the metric has none (no records to resample, not measured).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RowEstimates {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goodput_rps: Option<Estimate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens_per_s: Option<Estimate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_p99_ms: Option<Estimate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot_p99_ms: Option<Estimate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e2e_p99_ms: Option<Estimate>,
}

/// A measured row against the profile's SLOs, from its intervals.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SloCompliance {
    /// Every objective's interval lies within its limit.
    Meets,
    /// Some objective's interval lies wholly beyond its limit (or it was not measured).
    Misses,
    /// No objective is missed, but some interval straddles its limit.
    Undecided,
}

impl SloCompliance {
    pub fn as_str(self) -> &'static str {
        match self {
            SloCompliance::Meets => "met",
            SloCompliance::Misses => "missed",
            SloCompliance::Undecided => "undecided",
        }
    }
}

/// What chose the winner.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DecidedBy {
    /// Its goodput is significantly higher than every other contender's (or it is the only
    /// configuration that meets every SLO).
    Goodput,
    /// Some contender's goodput is statistically indistinguishable from it: the tie-break
    /// chose.
    TieBreak,
}

/// Which rule of the tie-break separated the winner from the next indistinguishable row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TieBreak {
    /// The highest output throughput.
    Throughput,
    /// Equal throughput: the lowest TTFT P99.
    TtftP99,
    /// Equal in both: the configuration measured first.
    Order,
}

impl TieBreak {
    pub fn as_str(self) -> &'static str {
        match self {
            TieBreak::Throughput => "throughput",
            TieBreak::TtftP99 => "TTFT P99",
            TieBreak::Order => "the configuration measured first",
        }
    }
}

/// The winner against another contender: the goodput difference `winner - other` (req/s) with
/// its interval, and what it says (`better`: the winner is significantly better).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Rival {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub difference: Option<Difference>,
    pub change: Change,
}

impl Rival {
    /// The winner is shown better than it ([`beats`]).
    pub fn beaten(&self) -> bool {
        beats(self.difference.as_ref(), self.change)
    }
}

/// The winner and how it was chosen ([`choose`]): indexes into the rows.
#[derive(Clone, Debug, PartialEq)]
pub struct Choice {
    pub winner: usize,
    pub decided_by: DecidedBy,
    /// With [`DecidedBy::TieBreak`]: the rule that separated the winner.
    pub tie_break: Option<TieBreak>,
    /// Every other contender: its index, the goodput difference and what it says.
    pub rivals: Vec<(usize, Option<Difference>, Change)>,
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
    /// `goodput` when the winner is significantly better than every other configuration that
    /// meets the SLOs, `tie-break` when some are indistinguishable from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<DecidedBy>,
    /// With `tie-break`: the rule that chose.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tie_break: Option<TieBreak>,
    /// The configurations the winner is not significantly better than in goodput.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub indistinguishable: Vec<String>,
    /// The winner against every other configuration that meets the SLOs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rivals: Vec<Rival>,
    /// Measured configurations whose SLO compliance the intervals cannot decide.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slo_undecided: Vec<String>,
    /// Configurations of the grid beyond `--max-configs` when there are too many to list as
    /// rows (more than [`super::grid::LISTED_SKIPS`]): counted, not listed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub beyond_max_configs: u64,
    pub warnings: Vec<String>,
}

impl bench::artifact::Artifact for TuneFile {
    const FILE: &'static str = TUNE_FILE;
    const VERSION: u32 = FORMAT_VERSION;
    const VERSION_FIELD: &'static str = "format";
    const WHAT: &'static str = "a tune";
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl TuneFile {
    /// Read `tune.json` of a tune directory (or the file itself).
    pub fn read(path: &Path) -> Result<TuneFile, bench::artifact::ArtifactError> {
        bench::artifact::read(path)
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
            r.slo = r.slo_compliance();
        }
        self.slo_undecided = self
            .rows
            .iter()
            .filter(|r| r.slo == Some(SloCompliance::Undecided) && !r.eliminated)
            .map(|r| r.name.clone())
            .collect();
        let choice = choose(&self.rows);
        let name = |i: usize| self.rows[i].name.clone();
        self.winner = choice.as_ref().map(|c| name(c.winner));
        self.decided_by = choice.as_ref().map(|c| c.decided_by);
        self.tie_break = choice.as_ref().and_then(|c| c.tie_break);
        let rivals = choice.as_ref().map_or(&[][..], |c| c.rivals.as_slice());
        self.rivals = rivals
            .iter()
            .map(|(i, d, change)| Rival { name: name(*i), difference: d.clone(), change: *change })
            .collect();
        self.indistinguishable =
            self.rivals.iter().filter(|r| !r.beaten()).map(|r| r.name.clone()).collect();
        self.warnings =
            choice.map(|c| edge_warnings(axes, &self.rows[c.winner])).unwrap_or_default();
    }

    /// The trials each configuration ran (the most of any measured row).
    fn trials(&self) -> usize {
        self.rows
            .iter()
            .filter(|r| r.status == RowStatus::Measured)
            .map(|r| r.trials)
            .max()
            .unwrap_or(0)
    }

    /// `--trials N` that would count run-to-run variance, or decide more often: 3 after single
    /// runs, else twice as many as ran.
    pub fn more_trials(&self) -> usize {
        (self.trials() * 2).max(SUGGESTED_TRIALS)
    }

    /// How the winner was chosen, in one sentence after `winner: ` (the console, the record):
    /// its goodput estimate, then either that it is significantly better than every other
    /// configuration meeting the SLOs, or which ones it is not significantly better than, the
    /// differences' intervals and the tie-break that chose. `None` without a winner.
    pub fn statement(&self) -> Option<String> {
        let w = self.winner_row()?;
        let goodput = w
            .estimates
            .goodput_rps
            .as_ref()
            .map_or_else(|| crate::text::fmt_opt(w.goodput_rps, 2), |e| e.short().to_string());
        let head = format!("{} (goodput {goodput} req/s)", w.name);
        let request_level = w.estimates.goodput_rps.as_ref().is_some()
            && self
                .rivals
                .iter()
                .any(|r| r.difference.as_ref().is_some_and(|d| d.request_level_only));
        let trials = self.more_trials();
        let diffs = |rivals: &[&Rival]| -> String {
            rivals
                .iter()
                .map(|r| difference_text(r.difference.as_ref()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let names = |rivals: &[&Rival]| -> String {
            rivals.iter().map(|r| r.name.as_str()).collect::<Vec<_>>().join(", ")
        };
        match self.decided_by? {
            DecidedBy::Goodput if self.rivals.is_empty() => {
                Some(format!("{head}: the only configuration that meets every SLO"))
            }
            DecidedBy::Goodput => {
                let all: Vec<&Rival> = self.rivals.iter().collect();
                Some(format!(
                    "{head}: significantly better in goodput than {} (differences {} req/s): \
                     decided by goodput",
                    names(&all),
                    diffs(&all)
                ))
            }
            DecidedBy::TieBreak => {
                let tied: Vec<&Rival> = self.rivals.iter().filter(|r| !r.beaten()).collect();
                let rule = self.tie_break.unwrap_or(TieBreak::Order).as_str();
                let note = if request_level {
                    "; ~: one run each, a request-level interval leaves run-to-run variance out \
                     and cannot decide"
                } else {
                    ""
                };
                Some(format!(
                    "{head}; not significantly better than {} (differences {} req/s{note}): \
                     chosen by the tie-break ({rule}); run with --trials {trials} to decide",
                    names(&tied),
                    diffs(&tied)
                ))
            }
        }
    }

    /// Why there is no winner, for the error line: no measured configuration meets every SLO,
    /// and which ones the intervals could not decide.
    pub fn no_winner(&self) -> String {
        let mut s = "no measured configuration meets every SLO of the profile".to_string();
        if !self.slo_undecided.is_empty() {
            s.push_str(&format!(
                "; undecided (an interval straddles an SLO): {}; run with --trials {} to decide",
                self.slo_undecided.join(", "),
                self.more_trials()
            ));
        }
        s
    }
}

/// A difference's interval `[-0.3, 0.5]` (`~` when request-level only); blank without one.
fn difference_text(d: Option<&Difference>) -> String {
    let Some(d) = d else { return crate::text::BLANK.to_string() };
    let (Some(lo), Some(hi)) = (d.lo, d.hi) else { return format!("{:+}", d.absolute) };
    let width = (hi - lo).abs();
    let decimals = if width > 0.0 { bench::stats::decimals_for(width / 2.0) } else { 2 };
    let tilde = if d.request_level_only { "~" } else { "" };
    format!("[{lo:.decimals$}, {hi:.decimals$}]{tilde}")
}

/// The profile's SLO objectives against a row's P99 estimates (TTFT, TPOT, E2E), each
/// decided from its interval as a gate decides `<=` (`bench::stats::verdict`): `(misses,
/// undecided)`, each a sentence: `TTFT P99 812 ms [760, 840]~ above the SLO's 500 ms`. An
/// objective not measured is a miss; one measured without an interval is undecided.
pub fn slo_check(
    slo: &bench::metrics::Slo,
    p99: [(Option<f64>, Option<&Estimate>); 3],
) -> (Vec<String>, Vec<String>) {
    let (mut misses, mut undecided) = (Vec::new(), Vec::new());
    for ((name, limit), (v, e)) in
        [("TTFT", slo.ttft_ms), ("TPOT", slo.tpot_ms), ("E2E", slo.e2e_ms)].into_iter().zip(p99)
    {
        let Some(l) = limit else { continue };
        let Some(v) = v else {
            misses.push(format!("{name} P99 not measured (SLO {l} ms)"));
            continue;
        };
        let Some(e) = e else {
            undecided.push(format!("{name} P99 {v:.1} ms has no interval (SLO {l} ms)"));
            continue;
        };
        let shown = format!("{name} P99 {v:.1} ms [{:.1}, {:.1}]", e.lo, e.hi);
        let tilde = if e.method.counts_run_to_run() { "" } else { "~" };
        match verdict(e, Comparator::Le, l) {
            Verdict::Pass => {}
            Verdict::Fail => misses.push(format!("{shown}{tilde} above the SLO's {l} ms")),
            Verdict::Inconclusive => {
                undecided.push(format!("{shown}{tilde} straddles the SLO's {l} ms"))
            }
        }
    }
    (misses, undecided)
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

/// The winner and how it was chosen: see the module header. `None` when no measured row
/// meets every SLO.
pub fn choose(rows: &[TuneRow]) -> Option<Choice> {
    let contenders: Vec<usize> = (0..rows.len()).filter(|&i| rows[i].contends()).collect();
    // The tie-break's order: highest throughput, then lowest TTFT P99, then the earlier row.
    let tie_order = |&a: &usize, &b: &usize| {
        let (ra, rb) = (&rows[a], &rows[b]);
        cmp_desc(ra.output_tokens_per_s, rb.output_tokens_per_s)
            .then(cmp_asc(ra.ttft_p99_ms, rb.ttft_p99_ms))
            .then(a.cmp(&b))
    };
    let leader = *contenders.iter().min_by(|a, b| {
        cmp_desc(rows[**a].goodput_rps, rows[**b].goodput_rps).then(tie_order(a, b))
    })?;
    let against = |w: usize, i: usize| {
        compare_estimates(
            GOODPUT,
            rows[i].estimates.goodput_rps.as_ref(),
            rows[w].estimates.goodput_rps.as_ref(),
            DEFAULT_CONFIDENCE,
        )
    };
    let mut tied: Vec<usize> = contenders
        .iter()
        .copied()
        .filter(|&i| {
            let (d, c) = against(leader, i);
            i == leader || !beats(d.as_ref(), c)
        })
        .collect();
    tied.sort_by(tie_order);
    let winner = tied[0];
    let rivals: Vec<(usize, Option<Difference>, Change)> = contenders
        .iter()
        .filter(|&&i| i != winner)
        .map(|&i| {
            let (d, c) = against(winner, i);
            (i, d, c)
        })
        .collect();
    let decided = rivals.iter().all(|(_, d, c)| beats(d.as_ref(), *c));
    let tie_break = (!decided && tied.len() > 1).then(|| {
        let (w, next) = (&rows[tied[0]], &rows[tied[1]]);
        if cmp_desc(w.output_tokens_per_s, next.output_tokens_per_s) != Ordering::Equal {
            TieBreak::Throughput
        } else if cmp_asc(w.ttft_p99_ms, next.ttft_p99_ms) != Ordering::Equal {
            TieBreak::TtftP99
        } else {
            TieBreak::Order
        }
    });
    Some(Choice {
        winner,
        decided_by: if decided { DecidedBy::Goodput } else { DecidedBy::TieBreak },
        tie_break,
        rivals,
    })
}

/// Whether a goodput difference `winner - other` shows the winner better: significant, with
/// run-to-run variance counted. A request-level interval (a single run on either side) does
/// not decide: two runs of one configuration differ by more than it (docs/tune.md).
pub fn beats(d: Option<&Difference>, change: Change) -> bool {
    change == Change::Better && d.is_some_and(|d| !d.request_level_only)
}

/// The winner's index ([`choose`]).
pub fn winner(rows: &[TuneRow]) -> Option<usize> {
    choose(rows).map(|c| c.winner)
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
    /// Nothing the size of `n` is allocated: a random sample of `max` is drawn without the rest.
    pub fn order(&self, n: usize, max: Option<usize>) -> Vec<usize> {
        let k = max.unwrap_or(n).min(n);
        match self {
            Search::Random { seed } => {
                let mut rng = StdRng::seed_from_u64(*seed);
                let mut idx = rand::seq::index::sample(&mut rng, n, k).into_vec();
                idx.shuffle(&mut rng);
                idx
            }
            _ => (0..k).collect(),
        }
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

    /// A t interval over 3 trials: `value ± half`.
    fn est(value: f64, half: f64) -> Estimate {
        crate::test_support::estimate(value, value - half, value + half)
    }

    fn row(name: &str, goodput: f64, tput: f64, ttft: f64) -> TuneRow {
        let mut r = TuneRow::unmeasured(name, vec![], RowStatus::Measured);
        r.trials = 3;
        r.goodput_rps = Some(goodput);
        r.estimates.goodput_rps = Some(est(goodput, 0.3));
        r.output_tokens_per_s = Some(tput);
        r.ttft_p99_ms = Some(ttft);
        r
    }

    fn file(rows: Vec<TuneRow>) -> TuneFile {
        let mut f = TuneFile {
            format: FORMAT_VERSION,
            profile: "default".into(),
            engine_config: "configs/engine.toml".into(),
            engine: "sim".into(),
            search: "grid".into(),
            command: None,
            axes: vec![],
            rows,
            earlier: vec![],
            winner: None,
            decided_by: None,
            tie_break: None,
            indistinguishable: vec![],
            rivals: vec![],
            slo_undecided: vec![],
            beyond_max_configs: 0,
            warnings: vec![],
        };
        f.decide(&[]);
        f
    }

    #[test]
    fn indistinguishable_goodputs_go_to_the_tie_break_throughput_then_ttft_then_order() {
        let mut rows = vec![
            row("a", 5.0, 500.0, 100.0),
            row("b", 9.0, 900.0, 300.0),
            row("c", 12.0, 1200.0, 800.0),
            row("d", 9.05, 950.0, 310.0),
        ];
        rows[2].slo_misses = vec!["TTFT P99 800.0 ms above the SLO's 500 ms".into()];
        // c misses its SLO; d leads, b is within noise of it (9.0 ± 0.3 against 9.05 ± 0.3),
        // a is far below: the tie-break between b and d goes to d's higher throughput.
        let c = choose(&rows).unwrap();
        assert_eq!(
            (c.winner, c.decided_by, c.tie_break),
            (3, DecidedBy::TieBreak, Some(TieBreak::Throughput))
        );
        let changes: Vec<(usize, Change)> = c.rivals.iter().map(|(i, _, ch)| (*i, *ch)).collect();
        assert_eq!(changes, [(0, Change::Better), (1, Change::NotSignificant)]);
        // Welch over two t intervals of 3 trials: se = 0.3 / t(0.975, 2) each, df = 4,
        // half width t(0.975, 4) x se x sqrt(2) = 0.2738 around 0.05.
        let d = c.rivals[1].1.as_ref().unwrap();
        assert!(
            (d.lo.unwrap() + 0.2238).abs() < 1e-3 && (d.hi.unwrap() - 0.3238).abs() < 1e-3,
            "{d:?}"
        );
        let f = file(rows.clone());
        assert_eq!(
            (f.winner.as_deref(), f.indistinguishable.clone()),
            (Some("d"), vec!["b".to_string()])
        );
        assert_eq!(
            f.statement().unwrap(),
            "d (goodput 9.05 ± 0.30 req/s); not significantly better than b (differences \
             [-0.22, 0.32] req/s): chosen by the tie-break (throughput); run with --trials 6 to \
             decide"
        );
        let json = serde_json::to_value(&f).unwrap();
        assert_eq!(json["decided_by"], "tie-break");
        assert_eq!(json["indistinguishable"], serde_json::json!(["b"]));
        assert_eq!(json["rivals"][1]["change"], "not_significant");
        rows[3].output_tokens_per_s = Some(900.0);
        // Same throughput: the lower TTFT P99 wins.
        assert_eq!(
            choose(&rows).map(|c| (c.winner, c.tie_break)),
            Some((1, Some(TieBreak::TtftP99)))
        );
        rows[3].ttft_p99_ms = Some(300.0);
        // Equal in everything: the earlier row.
        assert_eq!(
            choose(&rows).map(|c| (c.winner, c.tie_break)),
            Some((1, Some(TieBreak::Order)))
        );
        rows[1].status = RowStatus::Failed;
        rows[3].status = RowStatus::Failed;
        let only = file(rows.clone());
        assert_eq!(only.decided_by, Some(DecidedBy::Goodput));
        assert_eq!(
            only.statement().unwrap(),
            "a (goodput 5.00 ± 0.30 req/s): the only configuration that meets every SLO"
        );
        rows[0].slo_misses = vec!["x".into()];
        assert_eq!(winner(&rows), None, "no row meets the SLOs");
    }

    #[test]
    fn a_winner_significantly_better_than_every_other_is_decided_by_goodput() {
        let mut rows = vec![
            row("a", 5.0, 500.0, 100.0),
            row("b", 9.0, 990.0, 300.0),
            row("d", 9.05, 950.0, 310.0),
        ];
        rows[1].estimates.goodput_rps = Some(est(9.0, 0.01));
        rows[2].estimates.goodput_rps = Some(est(9.05, 0.01));
        // 0.05 apart with half widths of 0.01: significant, though b has more throughput.
        let c = choose(&rows).unwrap();
        assert_eq!((c.winner, c.decided_by, c.tie_break), (2, DecidedBy::Goodput, None));
        assert!(c.rivals.iter().all(|(_, _, ch)| *ch == Change::Better));
        let f = file(rows.clone());
        assert!(f.indistinguishable.is_empty());
        let s = f.statement().unwrap();
        assert!(
            s.starts_with("d (goodput 9.050 ± 0.010 req/s): significantly better in goodput than a, b (differences ["),
            "{s}"
        );
        assert!(s.ends_with("req/s): decided by goodput"), "{s}");
        // Single runs: the same differences, request-level only, cannot decide; the tie-break
        // among all three goes to b's throughput.
        let mut single = rows.clone();
        for r in &mut single {
            let e = r.estimates.goodput_rps.as_mut().unwrap();
            (e.method, e.trials) = (bench::stats::Method::RequestBootstrap, 1);
            r.trials = 1;
        }
        let c = choose(&single).unwrap();
        assert_eq!((c.winner, c.decided_by), (1, DecidedBy::TieBreak));
        // b against a is better, against d worse: request-level only, neither decides.
        let changes: Vec<(Change, bool)> = c
            .rivals
            .iter()
            .map(|(_, d, ch)| (*ch, d.as_ref().unwrap().request_level_only))
            .collect();
        assert_eq!(changes, [(Change::Better, true), (Change::Worse, true)]);
        let f = file(single);
        assert_eq!(f.indistinguishable, ["a", "d"]);
        let s = f.statement().unwrap();
        assert!(
            s.starts_with("b (goodput 9.000 ± 0.010~ req/s); not significantly better than a, d"),
            "{s}"
        );
        assert!(
            s.ends_with(
                "~ req/s; ~: one run each, a request-level interval leaves run-to-run \
                 variance out and cannot decide): chosen by the tie-break (throughput); run \
                 with --trials 3 to decide"
            ),
            "{s}"
        );
        // A row without a goodput interval cannot be told apart: the tie-break decides.
        rows[0].estimates.goodput_rps = None;
        let c = choose(&rows).unwrap();
        assert_eq!((c.winner, c.decided_by), (2, DecidedBy::TieBreak));
        assert_eq!(c.rivals[0].2, Change::Blank);
    }

    #[test]
    fn an_undecided_slo_never_wins_and_the_error_names_it() {
        let mut rows = vec![row("a", 5.0, 500.0, 100.0), row("b", 9.0, 900.0, 300.0)];
        rows[0].slo_misses = vec!["x".into()];
        rows[1].slo_undecided =
            vec!["TTFT P99 480.0 ms [430.0, 530.0] straddles the SLO's 500 ms".into()];
        let f = file(rows);
        assert_eq!(f.winner, None);
        assert_eq!(f.rows[1].slo, Some(SloCompliance::Undecided));
        assert_eq!(f.rows[0].slo, Some(SloCompliance::Misses));
        assert_eq!(f.slo_undecided, ["b"]);
        assert_eq!(
            f.no_winner(),
            "no measured configuration meets every SLO of the profile; undecided (an interval \
             straddles an SLO): b; run with --trials 6 to decide"
        );
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
    fn slos_are_met_missed_or_undecided_by_the_intervals_unfavourable_and_favourable_ends() {
        let slo = bench::metrics::Slo { ttft_ms: Some(500.0), tpot_ms: Some(50.0), e2e_ms: None };
        let (ttft, tpot) = (est(450.0, 40.0), est(45.0, 4.0));
        let (m, u) = slo_check(
            &slo,
            [(Some(450.0), Some(&ttft)), (Some(45.0), Some(&tpot)), (Some(9e9), None)],
        );
        assert!(m.is_empty() && u.is_empty(), "{m:?} {u:?}");
        // 480 ± 50: the upper end 530 is beyond 500, the lower end within: undecided.
        let straddles = est(480.0, 50.0);
        let mut above = est(812.0, 20.0);
        above.method = bench::stats::Method::RequestBootstrap;
        let (m, u) =
            slo_check(&slo, [(Some(480.0), Some(&straddles)), (Some(45.0), None), (None, None)]);
        assert!(m.is_empty(), "{m:?}");
        assert_eq!(
            u,
            [
                "TTFT P99 480.0 ms [430.0, 530.0] straddles the SLO's 500 ms",
                "TPOT P99 45.0 ms has no interval (SLO 50 ms)"
            ]
        );
        let (m, u) = slo_check(&slo, [(Some(812.0), Some(&above)), (None, None), (None, None)]);
        assert_eq!(
            m,
            [
                "TTFT P99 812.0 ms [792.0, 832.0]~ above the SLO's 500 ms",
                "TPOT P99 not measured (SLO 50 ms)"
            ]
        );
        assert!(u.is_empty());
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
