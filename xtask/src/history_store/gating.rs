//! The absolute gate with the noise history: pool the history's run-to-run variance into a
//! set's intervals ([`infergate_policy::history::priors::SetPriors`], through
//! `thresholds::evaluate::evaluate_pooled`), say what was used, append the set. Used by `gate`
//! and `bench --trials N --gate`; the priors read and the sets appended for the A/B gate.

use std::collections::BTreeMap;
use std::path::Path;

use infergate_model::history::{Entry, EntryKind};
use infergate_model::metric::MetricPath;
use infergate_model::summary::Summary;
use infergate_model::trials::TrialSet;
use infergate_policy::history::priors::SetPriors;

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
    let metrics: Vec<MetricPath> = thresholds.thresholds.iter().map(|t| t.metric).collect();
    let priors = read_priors(root, set, &metrics);
    let report = evaluate::evaluate_pooled(set, thresholds, options, Some(&priors));
    for line in &report.pooling {
        eprintln!("note: {line}");
    }
    eprintln!("note: {}", append_set(root, EntryKind::Trials, set, &metrics));
    report
}

/// Read the history of `root` for `set` (its first trial's scenario and fingerprint).
pub fn read_priors(root: &Path, set: &TrialSet, metrics: &[MetricPath]) -> SetPriors {
    match super::read(root) {
        Ok(h) => SetPriors::from_history(&h.entries, h.describe(), set, metrics),
        Err(e) => SetPriors {
            history: format!("unreadable ({e:#}): not pooled, each set's own spread"),
            unreadable: true,
            ..SetPriors::default()
        },
    }
}

/// Append a trial set (two trials or more) to the history; a line for the report.
pub(crate) fn append_set(
    root: &Path,
    kind: EntryKind,
    set: &TrialSet,
    metrics: &[MetricPath],
) -> String {
    if set.trials.len() < 2 {
        return "noise history: a single run has no run-to-run spread; not appended".into();
    }
    let run_id =
        set.index.as_ref().map_or(set.trials[0].summary.run_id.clone(), |i| i.run_id.clone());
    let summaries: Vec<&Summary> = set.trials.iter().map(|t| &t.summary).collect();
    let Some(entry) = Entry::of_trials(kind, &run_id, &summaries, metrics) else {
        return "noise history: nothing to append".into();
    };
    report_append(root, &[entry])
}

/// Append the two arms of an A/B gate, the baseline's entry with the blocks' paired
/// differences.
pub fn append_ab(
    root: &Path,
    run_id: &str,
    arms: [&[Summary]; 2],
    paired: BTreeMap<String, Vec<f64>>,
    metrics: &[MetricPath],
) -> String {
    let mut out = Vec::new();
    for (kind, trials) in [(EntryKind::AbBaseline, arms[0]), (EntryKind::AbCandidate, arms[1])] {
        let refs: Vec<&Summary> = trials.iter().collect();
        if let Some(mut e) = Entry::of_trials(kind, run_id, &refs, metrics) {
            if kind == EntryKind::AbBaseline {
                e.paired = paired.clone();
                e.seal();
            }
            out.push(e);
        }
    }
    report_append(root, &out)
}

fn report_append(root: &Path, entries: &[Entry]) -> String {
    match super::append(root, entries, "infergate: append measured sets") {
        Ok(n) => format!("noise history: {n} set(s) appended to {}", super::HISTORY_REF),
        Err(e) if e.downcast_ref::<super::NotARepository>().is_some() => {
            format!("noise history: not appended ({e:#})")
        }
        Err(e) => {
            // Not a note among notes: every later gate pools without this set.
            eprintln!(
                "warning: noise history: not appended ({e:#}); later gates pool without this \
                 set until the history reads cleanly (`history list` names what is wrong)"
            );
            format!("noise history: not appended ({e:#})")
        }
    }
}
