//! The policy over a tune's rows, as pure functions: SLOs decided by the intervals, the Pareto
//! fronts, the winner and how it was decided, and the warning when it sits at the edge of the
//! grid; [`TuneFile::decide`] fills `tune.json`'s derived fields with them.
//!
//! Every number the choice uses is an estimate with its interval (`infergate_model::stats::Estimate`: t
//! across trials, or the request bootstrap of a single run), and the choice says how sure it
//! is (docs/tune.md):
//!
//! - **SLOs** ([`slo_check`]): a row *meets* an objective when its interval's unfavourable
//!   (upper) end is within the limit, *misses* it when even the favourable (lower) end is
//!   beyond it, and is *undecided* otherwise; only rows that meet every objective contend.
//! - **The winner** ([`choose`]): the contender with the highest goodput (the leader), compared
//!   with each other contender by the goodput difference's interval (Welch, or request-level for
//!   single runs: `infergate_model::compare::compare_estimates`). When the leader is significantly better
//!   than every other, with run-to-run variance counted (trials on both sides: [`beats`]),
//!   goodput decided ([`DecidedBy::Goodput`]). Otherwise the leader and those
//!   it is not significantly better than are indistinguishable, and the tie-break picks among
//!   them: the highest output throughput, then the lowest TTFT P99, then the row measured
//!   first ([`DecidedBy::TieBreak`]).

use std::cmp::Ordering;

use infergate_model::compare::{Change, compare_estimates};
use infergate_model::stats::{
    Comparator, DEFAULT_CONFIDENCE, Difference, Estimate, Verdict, verdict,
};

use super::file::{
    DecidedBy, Objective, Rival, RowStatus, SloCompliance, TieBreak, TuneFile, TuneRow,
};
use crate::tune::grid::Axis;

/// The metric the winner is chosen by, as the registry names it.
pub const GOODPUT: &str = "goodput.requests_per_s";

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

impl TuneRow {
    /// The row [`winner`] ranks with: not eliminated and within every SLO.
    fn contends(&self) -> bool {
        self.meets_slos() && !self.eliminated
    }
}

impl Rival {
    /// The winner is shown better than it ([`beats`]).
    pub fn beaten(&self) -> bool {
        match &self.difference {
            Some(_) => beats(self.difference.as_ref(), self.change),
            // A capacity rival: no goodput difference, `better` when the brackets separate.
            None => self.change == Change::Better,
        }
    }
}

impl TuneFile {
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
        let choice = match self.objective {
            Objective::Goodput => choose(&self.rows),
            Objective::Capacity => choose_by_capacity(&self.rows),
        };
        self.capacity_overlaps = capacity_overlaps(&self.rows);
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
}

/// The profile's SLO objectives against a row's P99 estimates (TTFT, TPOT, E2E), each
/// decided from its interval as a gate decides `<=` (`infergate_model::stats::verdict`): `(misses,
/// undecided)`, each a sentence: `TTFT P99 812 ms [760, 840]~ above the SLO's 500 ms`. An
/// objective not measured is a miss; one measured without an interval is undecided.
pub fn slo_check(
    slo: &infergate_model::metrics::Slo,
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
            infergate_model::metric::MetricPath::named(GOODPUT),
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

/// The winner by capacity under the SLO (`--objective capacity`): among the measured rows
/// whose search decided some load to hold the SLO, the highest bracket's passing load; its
/// rivals are the other such rows. When its bracket separates from every rival's
/// ([`infergate_model::capacity::Bracket::separates_from`]) capacity decided; otherwise the rows
/// whose brackets overlap the leader's are tied, and the lowest cost per million output tokens
/// chooses among them (then the higher passing load, then the row measured first).
pub fn choose_by_capacity(rows: &[TuneRow]) -> Option<Choice> {
    let pass = |i: usize| rows[i].capacity.as_ref().and_then(|c| c.bracket.pass);
    let contenders: Vec<usize> = (0..rows.len())
        .filter(|&i| rows[i].status == RowStatus::Measured && !rows[i].eliminated)
        .filter(|&i| pass(i).is_some())
        .collect();
    let leader =
        *contenders.iter().min_by(|&&a, &&b| cmp_desc(pass(a), pass(b)).then(a.cmp(&b)))?;
    let bracket = |i: usize| &rows[i].capacity.as_ref().expect("a contender").bracket;
    let mut tied: Vec<usize> = contenders
        .iter()
        .copied()
        .filter(|&i| i == leader || !bracket(leader).separates_from(bracket(i)))
        .collect();
    let cost_order = |&a: &usize, &b: &usize| {
        cmp_asc(rows[a].cost_per_1m_output_tokens, rows[b].cost_per_1m_output_tokens)
            .then(cmp_desc(pass(a), pass(b)))
            .then(a.cmp(&b))
    };
    tied.sort_by(cost_order);
    let winner = tied[0];
    let rivals: Vec<(usize, Option<Difference>, Change)> = contenders
        .iter()
        .filter(|&&i| i != winner)
        .map(|&i| {
            let change = if bracket(winner).separates_from(bracket(i)) && pass(winner) > pass(i) {
                Change::Better
            } else {
                Change::NotSignificant
            };
            (i, None, change)
        })
        .collect();
    let decided = tied.len() == 1;
    let tie_break = (!decided).then(|| {
        let (w, next) = (&rows[tied[0]], &rows[tied[1]]);
        if cmp_asc(w.cost_per_1m_output_tokens, next.cost_per_1m_output_tokens) != Ordering::Equal {
            TieBreak::Cost
        } else {
            TieBreak::Order
        }
    });
    Some(Choice {
        winner,
        decided_by: if decided { DecidedBy::Capacity } else { DecidedBy::TieBreak },
        tie_break,
        rivals,
    })
}

/// The pairs of measured rows with a capacity whose brackets overlap (neither separates from
/// the other), in row order.
pub fn capacity_overlaps(rows: &[TuneRow]) -> Vec<(String, String)> {
    let with: Vec<&TuneRow> = rows
        .iter()
        .filter(|r| r.status == RowStatus::Measured && !r.eliminated && r.capacity.is_some())
        .collect();
    let mut out = Vec::new();
    for (i, a) in with.iter().enumerate() {
        for b in &with[i + 1..] {
            let (ba, bb) =
                (&a.capacity.as_ref().unwrap().bracket, &b.capacity.as_ref().unwrap().bracket);
            if !ba.separates_from(bb) {
                out.push((a.name.clone(), b.name.clone()));
            }
        }
    }
    out
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
pub(super) fn cmp_desc(a: Option<f64>, b: Option<f64>) -> Ordering {
    match (a, b) {
        (Some(a), Some(b)) => b.total_cmp(&a),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => Ordering::Equal,
    }
}

/// Lower first; blank last.
pub(super) fn cmp_asc(a: Option<f64>, b: Option<f64>) -> Ordering {
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
