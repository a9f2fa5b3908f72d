//! A tune's result shown: the winner's statement after `winner: ` (the console, the record)
//! with the differences' intervals and the tie-break that chose, why there is no winner, and
//! the measured configurations as points of the Pareto charts.

use infergate_model::stats::Difference;

use super::file::{DecidedBy, Objective, Rival, RowStatus, TieBreak, TuneFile, TuneRow};

impl TuneFile {
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

    /// How the winner was chosen, in one sentence after `winner: ` (the console, the record):
    /// its goodput estimate, then either that it is significantly better than every other
    /// configuration meeting the SLOs, or which ones it is not significantly better than, the
    /// differences' intervals and the tie-break that chose. `None` without a winner.
    pub fn statement(&self) -> Option<String> {
        let w = self.winner_row()?;
        if self.objective == Objective::Capacity {
            return self.capacity_statement(w);
        }
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
            DecidedBy::Goodput | DecidedBy::Capacity if self.rivals.is_empty() => {
                Some(format!("{head}: the only configuration that meets every SLO"))
            }
            DecidedBy::Goodput | DecidedBy::Capacity => {
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

    /// The winner by capacity: its bracket, then either that it lies above every other
    /// configuration's, or which brackets overlap it and the tie-break that chose.
    fn capacity_statement(&self, w: &TuneRow) -> Option<String> {
        let cap = w.capacity.as_ref()?;
        let head =
            format!("{} (capacity {} at SLO attainment >= {})", w.name, cap.text(), cap.target);
        let bracket_of = |name: &str| {
            self.rows
                .iter()
                .find(|r| r.name == name)
                .and_then(|r| r.capacity.as_ref())
                .map(|c| format!("{name}'s {}", c.bracket.text()))
                .unwrap_or_else(|| name.to_string())
        };
        let list =
            |names: Vec<&str>| names.into_iter().map(bracket_of).collect::<Vec<_>>().join(", ");
        match self.decided_by? {
            DecidedBy::Capacity if self.rivals.is_empty() => {
                Some(format!("{head}: the only configuration with a load that holds the SLO"))
            }
            DecidedBy::Capacity | DecidedBy::Goodput => Some(format!(
                "{head}: its bracket lies above {}: decided by capacity",
                list(self.rivals.iter().map(|r| r.name.as_str()).collect())
            )),
            DecidedBy::TieBreak => {
                let rule = self.tie_break.unwrap_or(TieBreak::Order).as_str();
                let tied: Vec<&str> =
                    self.rivals.iter().filter(|r| !r.beaten()).map(|r| r.name.as_str()).collect();
                Some(format!(
                    "{head}; its bracket overlaps {} (capacities not shown to differ): chosen by \
                     the tie-break ({rule}); a finer --capacity-resolution or more \
                     --capacity-trials may separate them",
                    list(tied)
                ))
            }
        }
    }

    /// Why there is no winner, for the error line: no measured configuration meets every SLO,
    /// and which ones the intervals could not decide.
    pub fn no_winner(&self) -> String {
        if self.objective == Objective::Capacity {
            return "no measured configuration's capacity search decided a load that holds the \
                    SLO of the profile"
                .to_string();
        }
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
    let decimals = if width > 0.0 { infergate_model::stats::decimals_for(width / 2.0) } else { 2 };
    let tilde = if d.request_level_only { "~" } else { "" };
    format!("[{lo:.decimals$}, {hi:.decimals$}]{tilde}")
}
