//! The absolute gate with the noise history: pool the history's run-to-run variance into a
//! set's intervals ([`super::priors::SetPriors`], through
//! `thresholds::evaluate::evaluate_pooled`), say what was used, append the set. Used by `gate`
//! and `bench --trials N --gate`.

use std::path::Path;

use infergate_model::history::EntryKind;
use infergate_model::trials::TrialSet;

/// Gate a set with the history of `root` pooled in, printing what was used (a note a line),
/// and append the set to the history. A single run is gated on its own and not appended.
pub(crate) fn gate_with_history(
    root: &Path,
    set: &TrialSet,
    thresholds: &crate::thresholds::Thresholds,
    options: &crate::thresholds::GateOptions,
) -> crate::thresholds::GateReport {
    use crate::thresholds::evaluate;
    if set.trials.len() < 2 {
        return evaluate::evaluate(set, thresholds, options);
    }
    let metrics: Vec<&str> = thresholds.thresholds.iter().map(|t| t.metric.as_str()).collect();
    let priors = super::priors::SetPriors::read(root, set, &metrics);
    let report = evaluate::evaluate_pooled(set, thresholds, options, Some(&priors));
    for line in &report.pooling {
        eprintln!("note: {line}");
    }
    eprintln!("note: {}", super::priors::append_set(root, EntryKind::Trials, set, &metrics));
    report
}
