//! What the gates take from the noise history, and what they give it.
//!
//! - The absolute gate ([`SetPriors`]): for each gated metric, the per-trial variance pooled
//!   over the history's sets of the same scenario and fingerprint (`infergate_model::history::pool`),
//!   applied to the set's own t interval unless the set is noisier than the history. A history
//!   that could not be read, or of another scenario or fingerprint, is never pooled; each
//!   metric's line says what was used.
//! - The A/B gate ([`ab_priors`]): the paired differences of earlier A/B gates of the same
//!   scenario and fingerprint.
//!
//! Reading the history and appending to it (git) is the command side's
//! (`xtask::history_store`).

use std::collections::BTreeMap;

use infergate_model::history::{self, Entry, EntryKind, PoolOutcome, Pooled};
use infergate_model::metric::MetricPath;
use infergate_model::stats::Method;
use infergate_model::summary::Summary;
use infergate_model::trials::{MetricEstimate, TrialSet};

/// The priors of one trial set.
#[derive(Clone, Debug, Default)]
pub struct SetPriors {
    /// Per metric, the pooled variance (absent: nothing matched).
    pub pooled: BTreeMap<String, Pooled>,
    /// What the history was: `refs/infergate/history at ...: N entries`, or why it was not
    /// read.
    pub history: String,
    /// Set when the history could not be read: nothing is pooled.
    pub unreadable: bool,
}

/// The kinds of entries whose trials share a set's noise.
const SET_KINDS: &[EntryKind] = &[EntryKind::Trials, EntryKind::Noise];

impl SetPriors {
    /// The priors of `set` (its first trial's scenario and fingerprint) from the history's
    /// `entries`, `described` as the report says what the history was.
    pub fn from_history(
        entries: &[Entry],
        described: String,
        set: &TrialSet,
        metrics: &[MetricPath],
    ) -> SetPriors {
        let first = &set.trials[0].summary;
        let (scenario, fingerprint) = (history::scenario_of(first), history::fingerprint_of(first));
        let exclude = set.index.as_ref().map_or(first.run_id.clone(), |i| i.run_id.clone());
        let pooled = metrics
            .iter()
            .filter_map(|&m| {
                let p = history::pool(entries, &scenario, &fingerprint, m, SET_KINDS, &exclude)?;
                Some((m.to_string(), p))
            })
            .collect();
        SetPriors { pooled, history: described, unreadable: false }
    }

    /// Replace each t interval of `estimates` that has a prior by the pooled interval (at
    /// `confidence`), unless the set is noisier than the history; one line per metric saying
    /// what was used.
    pub fn apply(
        &self,
        estimates: &mut BTreeMap<MetricPath, MetricEstimate>,
        confidence: f64,
    ) -> Vec<String> {
        let mut notes = vec![format!("noise history: {}", self.history)];
        let mut unmatched = Vec::new();
        for (metric, m) in estimates.iter_mut() {
            let Some(e) = m.estimate.as_mut().filter(|e| e.method == Method::TInterval) else {
                continue;
            };
            let Some(p) = self.pooled.get(metric.as_str()) else {
                unmatched.push(metric.as_str());
                continue;
            };
            let per_trial: Vec<f64> = m.per_trial.iter().filter_map(|v| *v).collect();
            match history::pooled_estimate(*metric, &per_trial, e.requests, p, confidence) {
                Ok(mut pooled) => {
                    pooled.undersampled = e.undersampled;
                    notes.push(format!(
                        "{metric}: pooled with {} history set(s), {} degrees of freedom ({} of the set)",
                        p.entries,
                        crate::text::num(p.df + per_trial.len() as f64 - 1.0),
                        per_trial.len() - 1
                    ));
                    *e = pooled;
                }
                Err(PoolOutcome::Noisier { ratio }) => notes.push(format!(
                    "{metric}: the set is noisier than its history ({}x its variance): the set's own spread",
                    crate::text::num(ratio)
                )),
                Err(PoolOutcome::Pooled { .. }) => {}
            }
        }
        // An unreadable history already said that nothing is pooled.
        if !unmatched.is_empty() && !self.unreadable {
            notes.push(format!(
                "no matching history (same scenario and fingerprint), the set's own spread: {}",
                unmatched.join(", ")
            ));
        }
        notes
    }
}

/// The priors of an A/B gate's checks from earlier gates of the baseline's scenario and
/// fingerprint (their blocks' paired differences).
pub fn ab_priors(
    entries: &[Entry],
    baseline_trial: &Summary,
    metrics: &[MetricPath],
) -> BTreeMap<String, infergate_model::ab::Prior> {
    let (scenario, fingerprint) =
        (history::scenario_of(baseline_trial), history::fingerprint_of(baseline_trial));
    metrics
        .iter()
        .filter_map(|&m| {
            let p = history::pool_paired(entries, &scenario, &fingerprint, m)?;
            let label = format!("the history's {} A/B gate(s) of this scenario", p.entries);
            Some((
                m.to_string(),
                infergate_model::ab::Prior { variance: p.variance, df: p.df, label },
            ))
        })
        .collect()
}
