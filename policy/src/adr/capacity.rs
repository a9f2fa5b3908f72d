//! Records written from capacity searches (`bench --capacity`): a search's directory is a
//! configuration of `adr new` like a run or a trial set. Pure: the searches in, the record's
//! words out; `adr new` (`new.rs`) puts them in its sections.
//!
//! - The matrix's **Capacity at SLO** column: each row's bracket `[pass, fail)` and, for an
//!   experiment, the change of its lower end against the baseline's ([`cell`]).
//! - The **conclusion** counts a capacity change only when the two brackets separate
//!   ([`Bracket::separates_from`]); brackets that overlap show no capacity difference
//!   ([`compare`]).
//! - The other columns of a capacity row are the figures of one probe: the bracket's lower end
//!   (the highest load decided pass), else the lowest load probed ([`CapacityRow::probe`]).
//! - The proposed **"holds the SLO at load L"** thresholds: the chosen search's attainment
//!   target and percentile limits, bound to its bracket's lower end ([`held_at`]).

use infergate_model::capacity::{Bracket, CapacityFile, Probe};
use infergate_model::stats::{sig_text, signed_sig_text};

use crate::thresholds::load::{Dimension, Load};
use crate::thresholds::{Action, Comparator};

/// The matrix column.
pub const COLUMN: &str = "Capacity at SLO";

/// The Reproduction section's line on what a capacity search's directory holds.
pub const REPRODUCTION: &str = "A capacity search's directory holds capacity.json (every \
     probe with its trials and decision, the bracket) and a run directory per trial \
     (`probe-NN-<dimension>-<load>/trial-KK/`); its row's run id is its first trial at the load \
     its other columns come from.";

/// A configuration of the record measured by a capacity search.
#[derive(Clone, Debug)]
pub struct CapacityRow {
    pub file: CapacityFile,
    /// The search's directory as the record names it (relative to the repository root).
    pub dir: String,
}

impl CapacityRow {
    pub fn dimension(&self) -> Dimension {
        self.file.search.spec.dimension
    }

    pub fn bracket(&self) -> &Bracket {
        &self.file.bracket
    }

    /// `[24, 28) concurrency`, `[2.5, 3) req/s`.
    pub fn bracket_text(&self) -> String {
        let unit = match self.dimension() {
            Dimension::Concurrency => "concurrency",
            Dimension::Rate => "req/s",
        };
        format!("{} {unit}", self.bracket().text())
    }

    /// The probe whose trials stand for the row in the matrix's other columns: the bracket's
    /// lower end, else (nothing passed) the lowest load probed with a trial.
    pub fn probe(&self) -> Option<&Probe> {
        self.file.standing_probe()
    }

    /// The load the SLO was decided to hold at: the bracket's lower end.
    pub fn held_load(&self) -> Option<Load> {
        self.bracket().pass.map(|v| Load::new(self.dimension(), v))
    }

    /// What the search asked, in words: `SLO attainment >= 0.95` and its limits.
    pub fn question(&self) -> String {
        let spec = &self.file.search.spec;
        let mut parts = vec![format!("SLO attainment >= {}", sig_text(spec.target))];
        parts.extend(spec.limits.iter().map(|l| l.to_string()));
        parts.join(", ")
    }

    /// Whether two searches asked the same question (dimension, target, limits), so their
    /// brackets compare.
    fn same_question(&self, other: &CapacityRow) -> bool {
        let (a, b) = (&self.file.search.spec, &other.file.search.spec);
        a.dimension == b.dimension && a.target == b.target && a.limits == b.limits
    }
}

/// How an experiment's capacity compares with the baseline's.
#[derive(Clone, Debug, PartialEq)]
pub enum Comparison {
    /// The brackets separate, the experiment's above: `Capacity at SLO [8, 9) -> [16, 18)
    /// concurrency`.
    Higher(String),
    /// The brackets separate, the experiment's below.
    Lower(String),
    /// The brackets share loads: no capacity difference shown.
    Overlap(String),
    /// The searches asked other questions (dimension, target, limits): not compared.
    Other(String),
}

/// The experiment `row`'s capacity against the `baseline`'s.
pub fn compare(baseline: &CapacityRow, row: &CapacityRow) -> Comparison {
    let (b, r) = (baseline.bracket(), row.bracket());
    let both = format!("{} -> {}", b.text(), row.bracket_text());
    if !baseline.same_question(row) {
        return Comparison::Other(format!(
            "capacity not compared: the searches asked other questions ({} against {})",
            baseline.question_and_dimension(),
            row.question_and_dimension()
        ));
    }
    if !r.separates_from(b) {
        return Comparison::Overlap(format!(
            "capacity: the brackets overlap ({both}), no capacity difference shown"
        ));
    }
    let lower = matches!((r.fail, b.pass), (Some(f), Some(p)) if f <= p);
    if lower {
        Comparison::Lower(format!("{COLUMN} {both}"))
    } else {
        Comparison::Higher(format!("{COLUMN} {both}"))
    }
}

impl CapacityRow {
    fn question_and_dimension(&self) -> String {
        format!("{} by {}", self.question(), self.dimension().name())
    }
}

/// Row `i`'s Capacity at SLO cell: its bracket and the attainment target it was searched for
/// (`[8, 9) concurrency, attainment >= 0.95`); for an experiment whose search and the
/// baseline's asked the same question, the change of the lower end (absolute, %) and whether
/// the brackets separate. `—` for a row that is no capacity search.
pub fn cell(rows: &[Option<CapacityRow>], i: usize) -> String {
    let Some(row) = rows.get(i).and_then(Option::as_ref) else {
        return crate::text::BLANK.to_string();
    };
    let target = sig_text(row.file.search.spec.target);
    let text = format!("{}, attainment >= {target}", row.bracket_text());
    let Some(base) = rows.first().and_then(Option::as_ref).filter(|_| i > 0) else {
        return text;
    };
    let change = match (base.bracket().pass, row.bracket().pass) {
        (Some(b), Some(r)) if b == r => "=".to_string(),
        (Some(b), Some(r)) => {
            format!("{}, {:+.1}%", signed_sig_text(r - b), (r - b) / b.abs() * 100.0)
        }
        _ => String::new(),
    };
    let how = match compare(base, row) {
        Comparison::Higher(_) | Comparison::Lower(_) => "separate",
        Comparison::Overlap(_) => "overlap",
        Comparison::Other(_) => "not compared",
    };
    let sep = if change.is_empty() { "" } else { "; " };
    format!("{text} ({change}{sep}{how})")
}

/// The lines under the matrix: what the column is and how the conclusion reads it, then one
/// line per search (its question, how it ended, what it spent, what broke the SLO, its notes).
pub fn legend(rows: &[Option<CapacityRow>], labels: &[String]) -> Vec<String> {
    let mut out = vec![format!(
        "{COLUMN} is the bracket of a capacity search (`cargo xtask bench --capacity`): the \
         highest load decided to hold the SLO and the lowest decided not to, `[pass, fail)` (an \
         end left blank: none was decided). A load holds the SLO when the SLO attainment of its \
         trials (`goodput.ratio`: the share of measured requests meeting every objective of the \
         profile's `[slo]`) reaches the search's target, and its limits hold, each decided from \
         its interval over the probe's trials. An experiment's change is its lower end's \
         against the baseline's; the conclusion counts a capacity change only when the two \
         brackets separate (one's failing load at or below the other's passing load), and says \
         they overlap otherwise. A capacity row's other columns are the figures of its probe \
         at the bracket's lower end: rows probed at different loads are not like for like \
         there, so their conclusion compares capacity only."
    )];
    for (i, row) in rows.iter().enumerate() {
        let Some(row) = row else { continue };
        let f = &row.file;
        let s = &f.search;
        let probe = row.probe().map_or_else(
            || "no probe measured".to_string(),
            |p| format!("other columns from {} {}", row.dimension().name(), sig_text(p.load)),
        );
        let mut line = format!(
            "Capacity of {}: {} by {} (`{}`); {} probes, {} trials, {} requests; {probe}",
            labels.get(i).map_or("", String::as_str),
            row.question(),
            row.dimension().name(),
            row.dir,
            s.probes.len(),
            s.trials,
            s.spent_requests,
        );
        if let (Some(binding), Some(fail)) = (&f.binding, f.bracket.fail) {
            line.push_str(&format!(
                "; at {} {} the SLO broke on `{binding}`",
                row.dimension().name(),
                sig_text(fail)
            ));
        }
        for n in &f.notes {
            line.push_str(&format!("; {n}"));
        }
        out.push(format!("{line}."));
    }
    out
}

/// A proposed "holds the SLO at load L" threshold: the metric, comparator, limit, unit and
/// action of its row, the load, and the probe's estimate it rests on.
#[derive(Clone, Debug, PartialEq)]
pub struct HeldAt {
    pub metric: infergate_model::metric::MetricPath,
    pub comparator: Comparator,
    pub limit: f64,
    pub unit: &'static str,
    pub load: Load,
    /// `0.99 ± 0.01 (2 trials)`, or `—`.
    pub evidence: String,
}

/// The thresholds a chosen capacity row proposes: its attainment target and each percentile
/// limit of its search, `block`, at the bracket's lower end. None when no load passed.
pub fn held_at(row: &CapacityRow) -> Vec<HeldAt> {
    let (Some(load), Some(probe)) = (row.held_load(), row.probe()) else { return Vec::new() };
    let evidence = |e: Option<&infergate_model::stats::Estimate>| {
        e.map_or(crate::text::BLANK.to_string(), |e| format!("{} ({} trials)", e.short(), e.trials))
    };
    let spec = &row.file.search.spec;
    let mut out = vec![HeldAt {
        metric: infergate_model::metric::MetricPath::named("goodput.ratio"),
        comparator: Comparator::Ge,
        limit: spec.target,
        unit: "ratio",
        load,
        evidence: evidence(probe.attainment.as_ref()),
    }];
    for l in &spec.limits {
        let unit = l.metric.unit();
        let outcome = probe.limits.iter().find(|o| o.metric == l.metric);
        out.push(HeldAt {
            metric: l.metric,
            comparator: l.cmp,
            limit: l.value,
            unit,
            load,
            evidence: evidence(outcome.and_then(|o| o.estimate.as_ref())),
        });
    }
    out
}

/// The action of every "holds the SLO at load L" threshold: the capacity is what the record
/// decides on, so breaking it fails the gate.
pub const HELD_AT_ACTION: Action = Action::Block;

/// The sentence above the thresholds table of a record that proposes "holds the SLO at load L".
pub fn held_at_rule(row: &CapacityRow, label: &str, profile: &str) -> Option<String> {
    let load = row.held_load()?;
    let fail = row.bracket().fail.map_or_else(
        || "and no load up to the search's highest failed".to_string(),
        |f| format!("below its lowest failing {} {}", row.dimension().name(), sig_text(f)),
    );
    Some(format!(
        "The rows with a load in the At load column hold the SLO at that load: the capacity \
         search of {label} decided {load} to hold it ({}, over its probe's trials), {fail}. The \
         gate decides them on a run measured at that load (`{}`), each as any threshold, from \
         its estimate's interval; on a run at another load it lists them as not applicable \
         and decides the rest. No alert evaluates them (production traffic does not run at a \
         chosen load).",
        row.question(),
        crate::thresholds::load::gate_command(profile, &load)
    ))
}

#[cfg(test)]
mod tests {
    use infergate_model::capacity::{CapacitySpec, Search};
    use infergate_model::stats::Verdict;

    use super::*;

    /// A finished search of `dimension` whose probes at `pass` and `fail` were decided so.
    fn row(dimension: Dimension, pass: f64, fail: f64) -> CapacityRow {
        let mut search = Search::new(CapacitySpec::new(dimension), 100);
        for (load, verdict) in [(pass, Verdict::Pass), (fail, Verdict::Fail)] {
            search.probes.push(Probe {
                load,
                trials: vec![Default::default(); 2],
                attainment: None,
                limits: vec![],
                verdict: Some(verdict),
                reason: None,
                binding: None,
            });
        }
        let file = CapacityFile::new("c".into(), "default".into(), Default::default(), search);
        CapacityRow { file, dir: "runs/c".into() }
    }

    #[test]
    fn a_capacity_change_is_counted_only_when_the_brackets_separate() {
        let c = Dimension::Concurrency;
        let rows = [Some(row(c, 8.0, 9.0)), Some(row(c, 2.0, 3.0)), Some(row(c, 6.0, 10.0)), None];
        let (base, lower, wide) =
            (rows[0].as_ref().unwrap(), rows[1].as_ref().unwrap(), rows[2].as_ref().unwrap());
        assert_eq!(
            compare(base, lower),
            Comparison::Lower("Capacity at SLO [8, 9) -> [2, 3) concurrency".into())
        );
        assert_eq!(
            compare(lower, base),
            Comparison::Higher("Capacity at SLO [2, 3) -> [8, 9) concurrency".into())
        );
        // [6, 10) holds 8 and fails 9 as well as [8, 9) could: no difference shown.
        assert_eq!(
            compare(base, wide),
            Comparison::Overlap(
                "capacity: the brackets overlap ([8, 9) -> [6, 10) concurrency), no capacity \
                 difference shown"
                    .into()
            )
        );
        assert!(matches!(compare(base, &row(Dimension::Rate, 8.0, 9.0)), Comparison::Other(_)));
        assert_eq!(cell(&rows, 0), "[8, 9) concurrency, attainment >= 0.95");
        assert_eq!(cell(&rows, 1), "[2, 3) concurrency, attainment >= 0.95 (-6, -75.0%; separate)");
        assert_eq!(cell(&rows, 2), "[6, 10) concurrency, attainment >= 0.95 (-2, -25.0%; overlap)");
        assert_eq!(cell(&rows, 3), "—");
    }

    #[test]
    fn the_slo_is_held_at_the_lower_end_and_only_with_one() {
        let r = row(Dimension::Concurrency, 8.0, 9.0);
        let held = held_at(&r);
        assert_eq!(held.len(), 1);
        let h = &held[0];
        assert_eq!(
            (h.metric.as_str(), h.comparator, h.limit),
            ("goodput.ratio", Comparator::Ge, 0.95)
        );
        assert_eq!(h.load.to_string(), "concurrency 8");
        let rule = held_at_rule(&r, "Baseline", "default").unwrap();
        assert!(
            rule.contains("decided concurrency 8 to hold it (SLO attainment >= 0.95"),
            "{rule}"
        );
        assert!(rule.contains("below its lowest failing concurrency 9"), "{rule}");
        assert!(rule.contains("bench --profile default --concurrency 8 --gate`"), "{rule}");
        // Nothing passed: no load holds the SLO, nothing to propose.
        let mut none = r.clone();
        none.file.search.probes.remove(0);
        none.file.bracket = none.file.search.bracket();
        assert!(held_at(&none).is_empty() && held_at_rule(&none, "Baseline", "default").is_none());
        assert_eq!(none.probe().map(|p| p.load), Some(9.0), "its lowest probe stands for it");
    }
}
