//! A run or a trial set against thresholds: every threshold that applies to the bench profile is
//! decided from the metric's estimate with its confidence interval
//! ([`infergate_model::trials::TrialSet::estimates`], [`infergate_model::stats::verdict`]): pass when the interval
//! lies wholly on the passing side of the limit, fail when wholly on the failing side,
//! inconclusive when it straddles the limit or there is no interval. A single run is a set of
//! one (its interval is the request bootstrap of its own records). A metric no trial measured is
//! a failure, not a pass. Pure but for reading a single run's records: `gate` and `bench --gate`
//! use the same code.
//!
//! What a check contributes to the gate comes from its [`CheckOutcome`] and its threshold's
//! [`Action`] through [`CheckOutcome::effect`] alone; counts, exit status and rendering read that.
//! An inconclusive blocking check leaves the gate undecided (exit 3), never passed.

use infergate_model::Summary;
pub use infergate_model::stats::Verdict;
use infergate_model::stats::{self, Estimate, Options};
use infergate_model::summary::RunStatus;
use infergate_model::trials::TrialSet;
use serde::{Deserialize, Serialize};

use super::file::{EnvironmentKey, Threshold, Thresholds};
use super::rule::Action;
use crate::exit::Status;

/// Outcome of one threshold: the [`Verdict`] of its estimate (the one verdict of the
/// statistics, the A/B gate and the capacity search), or why the run was not judged against it.
/// Written as one word in gate reports (`pass`, `fail`, `inconclusive`, `missing`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "&'static str", try_from = "String")]
pub enum CheckOutcome {
    /// Measured and judged: pass (the whole interval on the passing side), fail (`measured
    /// <comparator> limit` does not hold for any of it), or inconclusive: the interval
    /// straddles the limit, the metric has no interval (its estimate is blank;
    /// [`Check::reason`] says why), or the gate refused to decide on a busy host. Inconclusive
    /// is never a pass: a blocking one leaves the gate undecided.
    Judged(Verdict),
    /// The run has no value for the metric: a failure.
    Missing,
    /// The run is not the scenario the threshold was set for (its settings differ from the
    /// threshold's `scenario`): a failure, never a silent pass; [`Check::scenario_diffs`] names
    /// the settings.
    OtherScenario,
    /// A sweep's stage at another load than the threshold's scenario: the sweep measures loads
    /// the record did not decide on by design, so the stage is reported as not this record's
    /// scenario, neither pass nor failure. Only the gate of a whole sweep gives it
    /// ([`GateReport::as_sweep_stage`]), and that gate fails a threshold no stage was the
    /// scenario of.
    NotThisScenario,
    /// A load-bound threshold ("holds the SLO at concurrency 24") on a run measured at another
    /// load: the run does not ask the threshold's question, so it is listed as not
    /// applicable, with the load the run measured and the command that measures the
    /// threshold's ([`Check::reason`]), and changes nothing in the gate's verdict.
    NotApplicable,
}

impl CheckOutcome {
    /// The judged outcomes, by the verdict they hold.
    pub const PASS: CheckOutcome = CheckOutcome::Judged(Verdict::Pass);
    pub const FAIL: CheckOutcome = CheckOutcome::Judged(Verdict::Fail);
    pub const INCONCLUSIVE: CheckOutcome = CheckOutcome::Judged(Verdict::Inconclusive);
    const ALL: [CheckOutcome; 7] = [
        CheckOutcome::PASS,
        CheckOutcome::FAIL,
        CheckOutcome::INCONCLUSIVE,
        CheckOutcome::Missing,
        CheckOutcome::OtherScenario,
        CheckOutcome::NotThisScenario,
        CheckOutcome::NotApplicable,
    ];

    /// The word a gate report writes.
    pub fn as_str(self) -> &'static str {
        match self {
            CheckOutcome::Judged(v) => v.as_str(),
            CheckOutcome::Missing => "missing",
            CheckOutcome::OtherScenario => "other_scenario",
            CheckOutcome::NotThisScenario => "not_this_scenario",
            CheckOutcome::NotApplicable => "not_applicable",
        }
    }
}

impl From<CheckOutcome> for &'static str {
    fn from(o: CheckOutcome) -> &'static str {
        o.as_str()
    }
}

impl TryFrom<String> for CheckOutcome {
    type Error = String;

    fn try_from(s: String) -> Result<CheckOutcome, String> {
        CheckOutcome::ALL.into_iter().find(|o| o.as_str() == s).ok_or_else(|| {
            let names: Vec<&str> = CheckOutcome::ALL.iter().map(|o| o.as_str()).collect();
            format!("unknown verdict `{s}`: one of {}", names.join(", "))
        })
    }
}

/// What a check does to the gate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Nothing to report.
    None,
    /// Reported; the gate still passes.
    Warns,
    /// The gate fails (exit 1).
    Blocks,
    /// The gate cannot pass, but nothing failed: undecided (exit 3) unless another check
    /// blocks.
    Undecided,
}

impl CheckOutcome {
    /// The outcome of `estimate` against `threshold` (`None`: not measured).
    pub fn judge(threshold: &Threshold, estimate: Option<&Estimate>) -> CheckOutcome {
        match estimate {
            None => CheckOutcome::Missing,
            Some(e) => {
                CheckOutcome::Judged(stats::verdict(e, threshold.comparator, threshold.limit))
            }
        }
    }

    /// Whether the threshold held.
    pub fn passed(self) -> bool {
        self == CheckOutcome::PASS
    }

    /// What this verdict does to the gate under `action`.
    pub fn effect(self, action: Action) -> Effect {
        match (self, action) {
            (
                CheckOutcome::PASS | CheckOutcome::NotThisScenario | CheckOutcome::NotApplicable,
                _,
            ) => Effect::None,
            (
                CheckOutcome::FAIL | CheckOutcome::Missing | CheckOutcome::OtherScenario,
                Action::Block,
            ) => Effect::Blocks,
            (
                CheckOutcome::FAIL | CheckOutcome::Missing | CheckOutcome::OtherScenario,
                Action::Warn,
            ) => Effect::Warns,
            (CheckOutcome::INCONCLUSIVE, Action::Block) => Effect::Undecided,
            (CheckOutcome::INCONCLUSIVE, Action::Warn) => Effect::Warns,
        }
    }
}

/// One threshold checked against one run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Check {
    pub threshold: Threshold,
    pub measured: Option<f64>,
    /// The estimate the verdict was decided from: the value, interval, n and method.
    pub estimate: Option<Estimate>,
    /// Why the check is inconclusive without an interval, was refused (a busy host), or is not
    /// applicable (a load-bound threshold on a run at another load).
    pub reason: Option<String>,
    pub verdict: CheckOutcome,
    /// The settings in which the run differs from the threshold's scenario:
    /// `load.concurrency 16 (set for 32)`.
    pub scenario_diffs: Vec<String>,
}

impl Check {
    /// Failed (including not measured): reported, whatever its action.
    pub fn failed(&self) -> bool {
        self.effect() != Effect::None
    }

    /// What this check does to the gate.
    pub fn effect(&self) -> Effect {
        self.verdict.effect(self.threshold.action)
    }
}

/// Every threshold checked against a run or a trial set.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateReport {
    /// The run's id, or the trial set's.
    pub run_id: String,
    /// Trials the estimates come from (1 for a run).
    pub trials: usize,
    /// Trials measured on a busy client host, each with why (`trial-02: other processes ...`).
    pub busy_trials: Vec<String>,
    pub run_status: RunStatus,
    pub simulated: bool,
    /// The run's bench profile: thresholds scoped to another profile do not apply.
    pub profile: String,
    pub checks: Vec<Check>,
    /// Profiles of the thresholds that did not apply (sorted, unique).
    pub other_profiles: Vec<String>,
    /// The environment the run measured (`None` in reports built without a run).
    pub environment: Option<EnvironmentKey>,
    /// Environments other than the run's that thresholds of its profile are keyed to (sorted,
    /// unique): they were not applied.
    pub other_environments: Vec<EnvironmentKey>,
    /// How the noise history was used, one line per metric (empty: not consulted).
    pub pooling: Vec<String>,
    /// The thresholds read the run's plateau figures (its profile's `steady.gate`).
    pub plateau: bool,
    /// The keys whose served value contradicts the engine config file of a run of the set
    /// (summary `engine.mismatches`), one line each: the run measured another configuration
    /// than its file says, and never passes ([`Status::ServedMismatch`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub served_mismatches: Vec<String>,
}

impl GateReport {
    fn count(&self, effect: Effect) -> usize {
        self.checks.iter().filter(|c| c.effect() == effect).count()
    }

    /// Checks that fail the gate (failed `block` thresholds).
    pub fn blocking_failures(&self) -> usize {
        self.count(Effect::Blocks)
    }

    /// Blocking checks the data could not decide (inconclusive `block` thresholds).
    pub fn undecided(&self) -> usize {
        self.count(Effect::Undecided)
    }

    /// Checks reported without failing the gate (failed `warn` thresholds).
    pub fn warnings(&self) -> usize {
        self.count(Effect::Warns)
    }

    /// Checks whose threshold held.
    pub fn passes(&self) -> usize {
        self.checks.iter().filter(|c| c.verdict.passed()).count()
    }

    /// Thresholds exist, but none for this run's profile: nothing vouches for it.
    pub fn ungoverned(&self) -> bool {
        self.checks.is_empty()
            && self.other_environments.is_empty()
            && !self.other_profiles.is_empty()
    }

    /// The run's profile has thresholds, keyed to other environments than the run's, and none
    /// for its own: no live record covers the environment it measured. Not decided
    /// ([`Status::NoRecord`]), never a pass.
    pub fn no_record(&self) -> bool {
        !self.other_environments.is_empty()
            && !self.checks.iter().any(|c| c.threshold.environment.is_some())
    }

    /// An interrupted run measured only part of its planned load: it cannot pass thresholds set
    /// for the whole load, so a gate with checks to make fails it, whatever its partial numbers
    /// say (a run stopped early can look better than the full load would have).
    pub fn partial(&self) -> bool {
        matches!(self.run_status, RunStatus::Interrupted | RunStatus::Oversaturated)
            && !self.checks.is_empty()
    }

    /// Nothing blocks (no blocking failure, governed, complete).
    fn nothing_blocks(&self) -> bool {
        self.blocking_failures() == 0 && !self.ungoverned() && !self.partial()
    }

    /// Every blocking threshold was decided and held, for a run of an environment a record
    /// covers.
    pub fn passed(&self) -> bool {
        self.nothing_blocks()
            && self.undecided() == 0
            && !self.no_record()
            && self.served_mismatches.is_empty()
    }

    /// Exit status: a served configuration that contradicts the run's file outranks the
    /// verdicts (they measured another configuration); else policy violated when a `block` threshold
    /// failed, when no threshold applies to the run while other profiles have some, or when
    /// the run was interrupted; else no
    /// record when the profile's thresholds are keyed to other environments only; else
    /// inconclusive when a `block` threshold is undecided; else success.
    pub fn status(&self) -> Status {
        let status = self.verdict_status();
        if self.served_mismatches.is_empty() {
            status
        } else {
            status.worst(Status::ServedMismatch)
        }
    }

    /// [`Self::status`] from the checks alone.
    fn verdict_status(&self) -> Status {
        if !self.nothing_blocks() {
            Status::PolicyViolated
        } else if self.no_record() {
            Status::NoRecord
        } else if self.undecided() > 0 {
            Status::Inconclusive
        } else {
            Status::Success
        }
    }

    /// Checks of thresholds set for another scenario (a sweep stage's other load).
    pub fn not_this_scenario(&self) -> usize {
        self.checks.iter().filter(|c| c.verdict == CheckOutcome::NotThisScenario).count()
    }

    /// Checks of load-bound thresholds at another load than the run's.
    pub fn not_applicable(&self) -> usize {
        self.checks.iter().filter(|c| c.verdict == CheckOutcome::NotApplicable).count()
    }

    /// The report of one stage of a sweep: a threshold set for another scenario than the
    /// stage's is not this record's scenario rather than a failure (the sweep's other loads are
    /// measured on purpose). A stage that is the scenario keeps every verdict.
    pub fn as_sweep_stage(mut self) -> GateReport {
        for c in &mut self.checks {
            if c.verdict == CheckOutcome::OtherScenario {
                c.verdict = CheckOutcome::NotThisScenario;
            }
        }
        self
    }
}

/// The settings of the run's resolved profile (`summary.config`) that differ from the
/// threshold's scenario, each `key value (set for value)`; `(unset)` when the run lacks one. A
/// load-bound threshold's load stands for the scenario's load settings
/// ([`Load::SETTINGS`](super::load::Load::SETTINGS)): [`other_load`] decides those.
pub fn scenario_diffs(summary: &Summary, t: &Threshold) -> Vec<String> {
    let mut out = Vec::new();
    let config = summary.config.to_json();
    for (key, want) in &t.scenario {
        if t.load.is_some() && super::load::Load::SETTINGS.contains(&key.as_str()) {
            continue;
        }
        let got = key.get_json(&config);
        let want_json = serde_json::to_value(want).ok();
        let same = match (got, &want_json) {
            (Some(g), Some(w)) if g.is_number() && w.is_number() => g.as_f64() == w.as_f64(),
            (Some(g), Some(w)) => g == w,
            _ => false,
        };
        if !same {
            let got = got.map_or("(unset)".to_string(), |g| g.to_string());
            out.push(format!("{key} {got} (set for {want})"));
        }
    }
    out
}

/// Why a load-bound threshold does not apply to a run: the load the run measured is not the
/// threshold's (`None`: it is, or the threshold is bound to none). Names the run's load and the
/// command that measures the threshold's.
pub fn other_load(summary: &Summary, t: &Threshold) -> Option<String> {
    let want = t.load?;
    let got = super::load::Load::of_run(summary);
    if got == Some(want) {
        return None;
    }
    let measured = got.map_or_else(
        || "a load without one concurrency or rate (a trace replay)".to_string(),
        |l| l.to_string(),
    );
    Some(format!(
        "the run measured {measured}, and the threshold is decided at {want} only: measure that \
         load (`{}`)",
        super::load::gate_command(&summary.profile, &want)
    ))
}

/// Resamples of a single run's request bootstrap in the gate and in `trials.json` (the
/// library's default is 2000). Each replicate runs the run's records through a fresh
/// accumulator: 10,000 requests take about 6.5 ms of CPU a replicate, so 2000 took 13 s of CPU
/// on the reference machine. With 500 the interval's ends wobble by about 0.12 bootstrap
/// standard errors between seeds (0.06 with 2000): about 6% of the half-width
/// (`docs/performance.md`).
pub const GATE_RESAMPLES: u32 = 500;

/// How the gate decides.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GateOptions {
    /// Coverage of the intervals the verdicts are decided from (`--confidence`, 0.95).
    pub confidence: f64,
    /// Resamples of a single run's request bootstrap.
    pub resamples: u32,
    /// Every check of a set with a trial measured on a busy client host is inconclusive
    /// (the default; `--allow-busy-host` turns it off).
    pub refuse_busy_host: bool,
}

impl Default for GateOptions {
    fn default() -> Self {
        GateOptions {
            confidence: stats::DEFAULT_CONFIDENCE,
            resamples: GATE_RESAMPLES,
            refuse_busy_host: true,
        }
    }
}

impl GateOptions {
    /// The estimation options of these settings.
    pub fn estimation(&self) -> Options {
        Options { resamples: self.resamples, ..Options::default().with_confidence(self.confidence) }
    }
}

/// The status of a set: interrupted when any trial was (part of the planned load), aborted when
/// any was, failed when every trial failed, else complete.
fn set_status(set: &TrialSet) -> RunStatus {
    let all = || set.trials.iter().map(|t| t.summary.status);
    if all().any(|s| s == RunStatus::Interrupted) {
        RunStatus::Interrupted
    } else if all().any(|s| s == RunStatus::Oversaturated) {
        RunStatus::Oversaturated
    } else if all().any(|s| s == RunStatus::Aborted) {
        RunStatus::Aborted
    } else if all().all(|s| s == RunStatus::Failed) {
        RunStatus::Failed
    } else {
        RunStatus::Complete
    }
}

/// The trials measured on a busy client host: `trial-02 (why)`.
fn busy_trials(set: &TrialSet) -> Vec<String> {
    set.trials
        .iter()
        .filter_map(|t| {
            let noise = t.summary.environment.noise.as_ref().filter(|n| n.busy)?;
            let name = t
                .dir
                .file_name()
                .map_or_else(|| t.summary.run_id.clone(), |n| n.to_string_lossy().into_owned());
            Some(format!("{name} ({})", noise.reasons.join("; ")))
        })
        .collect()
}

/// The thresholds that gate a run: those of its bench profile (or of none) that hold for its
/// environment (they name it, or none).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Selection<'a> {
    pub applying: Vec<&'a Threshold>,
    /// Profiles of the thresholds that do not apply (sorted, unique).
    pub other_profiles: Vec<String>,
    /// Environments that thresholds of the run's profile are keyed to, other than the run's
    /// (sorted, unique).
    pub other_environments: Vec<EnvironmentKey>,
}

impl Selection<'_> {
    /// The run's profile has thresholds keyed to environments, none of them the run's: no live
    /// record covers the environment it measured. Its thresholds that name no environment still
    /// apply, but the limits set for this profile on other machines do not, so the run is not
    /// decided ([`Status::NoRecord`]).
    pub fn no_record(&self) -> bool {
        !self.other_environments.is_empty()
            && !self.applying.iter().any(|t| t.environment.is_some())
    }
}

/// The one selection of thresholds for a run of `profile` measured on `env` (`None`: the
/// environment is not known yet, as before a trial set is measured; every environment's
/// thresholds of the profile are selected). The absolute gate, `bench --gate`, trial sets, the
/// noise-history gate, the A/B gate's metrics and the report's limits all select through it.
pub fn select<'a>(
    thresholds: &'a Thresholds,
    profile: &str,
    env: Option<&EnvironmentKey>,
) -> Selection<'a> {
    let mut sel = Selection::default();
    for t in &thresholds.thresholds {
        if !t.applies_to(profile) {
            sel.other_profiles.extend(t.profile.clone());
        } else if t.holds_for(env) {
            sel.applying.push(t);
        } else {
            sel.other_environments.extend(t.environment.clone());
        }
    }
    sel.other_profiles.sort();
    sel.other_profiles.dedup();
    sel.other_environments.sort();
    sel.other_environments.dedup();
    sel
}

/// Check a run or a trial set against the thresholds that apply to its bench profile, each
/// decided from its metric's estimate at `opts.confidence`.
pub fn evaluate(set: &TrialSet, thresholds: &Thresholds, opts: &GateOptions) -> GateReport {
    evaluate_pooled(set, thresholds, opts, None)
}

/// [`evaluate`] with the run-to-run variance of a matching noise history pooled into each
/// metric's interval (`crate::history::priors`), as its `notes` say.
pub fn evaluate_pooled(
    set: &TrialSet,
    thresholds: &Thresholds,
    opts: &GateOptions,
    priors: Option<&crate::history::priors::SetPriors>,
) -> GateReport {
    let first: &Summary = &set.trials[0].summary;
    let environment = EnvironmentKey::of(first);
    let Selection { applying, other_profiles, other_environments } =
        select(thresholds, &first.profile, Some(&environment));
    let diffs: Vec<Vec<String>> = applying.iter().map(|t| scenario_diffs(first, t)).collect();
    let elsewhere: Vec<Option<String>> = applying.iter().map(|t| other_load(first, t)).collect();
    // Each threshold's metric as the run's profile has it read (`Summary::gated_path`: the
    // plateau's figure under `steady.gate`).
    let mut metrics: Vec<infergate_model::metric::MetricPath> = applying
        .iter()
        .zip(diffs.iter().zip(&elsewhere))
        .filter(|(_, (d, e))| d.is_empty() && e.is_none())
        .map(|(t, _)| first.gated_path(t.metric))
        .collect();
    metrics.sort();
    metrics.dedup();
    let mut estimates = set.estimates(&metrics, opts.estimation());
    let pooling = match priors {
        Some(p) => p.apply(&mut estimates, opts.confidence),
        None => Vec::new(),
    };
    let busy = busy_trials(set);
    let checks = applying
        .into_iter()
        .zip(diffs.into_iter().zip(elsewhere))
        .map(|(t, (scenario_diffs, elsewhere))| {
            let mut check = Check {
                threshold: t.clone(),
                measured: first.gated_metric(t.metric),
                estimate: None,
                reason: None,
                verdict: CheckOutcome::OtherScenario,
                scenario_diffs,
            };
            if let Some(why) = elsewhere {
                check.verdict = CheckOutcome::NotApplicable;
                check.reason = Some(why);
                check.scenario_diffs.clear();
                return check;
            }
            if !check.scenario_diffs.is_empty() {
                return check;
            }
            let Some(m) = estimates.get(&first.gated_path(t.metric)) else {
                check.verdict = CheckOutcome::Missing;
                return check;
            };
            check.measured = m.estimate.as_ref().map(|e| e.value).or(check.measured);
            check.estimate = m.estimate.clone();
            check.verdict = match (&m.estimate, m.per_trial.iter().any(Option::is_some)) {
                (Some(e), _) => CheckOutcome::judge(t, Some(e)),
                (None, false) => CheckOutcome::Missing,
                (None, true) => {
                    check.reason = m.blank.clone();
                    CheckOutcome::INCONCLUSIVE
                }
            };
            if opts.refuse_busy_host
                && !busy.is_empty()
                && matches!(check.verdict, CheckOutcome::PASS | CheckOutcome::FAIL)
            {
                check.verdict = CheckOutcome::INCONCLUSIVE;
                check.reason = Some(format!(
                    "the client host was busy during {} (decide anyway: --allow-busy-host)",
                    busy.join(", ")
                ));
            }
            check
        })
        .collect();
    let run_id = match &set.index {
        Some(index) if !index.run_id.is_empty() => index.run_id.clone(),
        Some(_) => set.dir.file_name().map_or_else(String::new, |n| n.to_string_lossy().into()),
        None => first.run_id.clone(),
    };
    GateReport {
        run_id,
        trials: set.trials.len(),
        busy_trials: busy,
        run_status: set_status(set),
        simulated: first.simulated,
        profile: first.profile.clone(),
        checks,
        other_profiles,
        environment: Some(environment),
        other_environments,
        pooling,
        plateau: first.gates_on_plateau(),
        served_mismatches: served_mismatches(set),
    }
}

/// The served-configuration mismatches of a set's trials, one line each (the trial named when
/// the set has several).
pub fn served_mismatches(set: &TrialSet) -> Vec<String> {
    let several = set.trials.len() > 1;
    let mut out = Vec::new();
    for (i, t) in set.trials.iter().enumerate() {
        let Some(e) = &t.summary.engine else { continue };
        for m in &e.mismatches {
            let who = if several { format!("trial {}: ", i + 1) } else { String::new() };
            out.push(format!("{who}{}", m.text(&e.file)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::thresholds::Comparator;

    fn threshold(action: Action, profile: Option<&str>) -> Threshold {
        Threshold {
            metric: infergate_model::metric::MetricPath::named("goodput.ratio"),
            comparator: Comparator::Ge,
            limit: 0.9,
            unit: "ratio".into(),
            action,
            profile: profile.map(str::to_string),
            scenario: Default::default(),
            environment: None,
            load: None,
            adr: 1,
            file: "docs/adr/0001-x.md".into(),
            line: 9,
        }
    }

    #[test]
    fn a_check_outcome_is_written_as_the_one_word_gate_reports_always_used() {
        let words: Vec<String> =
            CheckOutcome::ALL.iter().map(|o| serde_json::to_string(o).unwrap()).collect();
        assert_eq!(
            words,
            [
                "\"pass\"",
                "\"fail\"",
                "\"inconclusive\"",
                "\"missing\"",
                "\"other_scenario\"",
                "\"not_this_scenario\"",
                "\"not_applicable\""
            ]
        );
        for (o, w) in CheckOutcome::ALL.iter().zip(&words) {
            assert_eq!(serde_json::from_str::<CheckOutcome>(w).unwrap(), *o);
        }
        let e = serde_json::from_str::<CheckOutcome>("\"passed\"").unwrap_err().to_string();
        assert!(e.starts_with("unknown verdict `passed`: one of pass, fail, inconclusive"), "{e}");
    }

    #[test]
    fn thresholds_are_selected_by_profile_and_environment() {
        let key = |gpu: &str| -> EnvironmentKey {
            format!("gpu={gpu} x1; engine=vllm; model=m; dtype=auto").parse().unwrap()
        };
        let keyed = |gpu: &str| Threshold {
            environment: Some(key(gpu)),
            ..threshold(Action::Block, Some("default"))
        };
        let t = Thresholds {
            version: 1,
            thresholds: vec![
                keyed("H100"),
                keyed("A100"),
                threshold(Action::Warn, None),
                threshold(Action::Block, Some("other")),
            ],
            budgets: vec![],
        };
        let sel = select(&t, "default", Some(&key("H100")));
        assert_eq!(sel.applying, vec![&t.thresholds[0], &t.thresholds[2]]);
        assert_eq!((sel.other_environments.clone(), sel.no_record()), (vec![key("A100")], false));
        assert_eq!(sel.other_profiles, vec!["other".to_string()]);
        // An environment no threshold names: the unkeyed one applies, and no record covers it.
        let sel = select(&t, "default", Some(&key("L4")));
        assert_eq!(sel.applying, vec![&t.thresholds[2]]);
        assert_eq!(sel.other_environments, vec![key("A100"), key("H100")]);
        assert!(sel.no_record());
        // Not known yet: every environment's.
        assert_eq!(select(&t, "default", None).applying.len(), 3);
    }

    #[test]
    fn verdicts_and_their_effects() {
        let t = threshold(Action::Block, None);
        let est = |lo: f64, hi: f64| crate::test_support::estimate((lo + hi) / 2.0, lo, hi);
        // goodput.ratio >= 0.9
        assert_eq!(CheckOutcome::judge(&t, Some(&est(0.92, 0.98))), CheckOutcome::PASS);
        assert_eq!(CheckOutcome::judge(&t, Some(&est(0.8, 0.89))), CheckOutcome::FAIL);
        assert_eq!(CheckOutcome::judge(&t, Some(&est(0.85, 0.95))), CheckOutcome::INCONCLUSIVE);
        assert_eq!(CheckOutcome::judge(&t, None), CheckOutcome::Missing);
        assert_eq!(CheckOutcome::PASS.effect(Action::Block), Effect::None);
        assert_eq!(CheckOutcome::FAIL.effect(Action::Block), Effect::Blocks);
        assert_eq!(CheckOutcome::Missing.effect(Action::Warn), Effect::Warns);
        assert_eq!(CheckOutcome::INCONCLUSIVE.effect(Action::Block), Effect::Undecided);
        assert_eq!(CheckOutcome::INCONCLUSIVE.effect(Action::Warn), Effect::Warns);
    }

    fn report(checks: Vec<(Action, CheckOutcome)>, other_profiles: Vec<String>) -> GateReport {
        GateReport {
            run_id: "r".into(),
            trials: 1,
            busy_trials: vec![],
            run_status: RunStatus::Complete,
            simulated: false,
            profile: "default".into(),
            checks: checks
                .into_iter()
                .map(|(a, verdict)| Check {
                    threshold: threshold(a, None),
                    measured: None,
                    estimate: None,
                    reason: None,
                    verdict,
                    scenario_diffs: Vec::new(),
                })
                .collect(),
            other_profiles,
            environment: None,
            other_environments: Vec::new(),
            served_mismatches: Vec::new(),
            pooling: Vec::new(),
            plateau: false,
        }
    }

    #[test]
    fn counts_and_status_follow_the_effects() {
        let r = report(
            vec![
                (Action::Block, CheckOutcome::PASS),
                (Action::Warn, CheckOutcome::FAIL),
                (Action::Warn, CheckOutcome::Missing),
                (Action::Block, CheckOutcome::Missing),
            ],
            vec![],
        );
        assert_eq!((r.passes(), r.warnings(), r.blocking_failures()), (1, 2, 1));
        assert_eq!(r.status(), Status::PolicyViolated);
        let r = report(vec![(Action::Warn, CheckOutcome::FAIL)], vec![]);
        assert_eq!(r.status(), Status::Success);
        // An undecided blocking check is never a pass, and a failure outranks it.
        let r = report(
            vec![(Action::Block, CheckOutcome::PASS), (Action::Block, CheckOutcome::INCONCLUSIVE)],
            vec![],
        );
        assert_eq!((r.undecided(), r.passed(), r.status()), (1, false, Status::Inconclusive));
        let r = report(
            vec![(Action::Block, CheckOutcome::FAIL), (Action::Block, CheckOutcome::INCONCLUSIVE)],
            vec![],
        );
        assert_eq!(r.status(), Status::PolicyViolated);
        let r = report(vec![(Action::Warn, CheckOutcome::INCONCLUSIVE)], vec![]);
        assert_eq!((r.warnings(), r.status()), (1, Status::Success));
        // No check, but thresholds for other profiles: nothing vouches for this run.
        let r = report(vec![], vec!["tuned".into()]);
        assert!(r.ungoverned() && !r.passed());
        assert!(report(vec![], vec![]).passed());
    }

    #[test]
    fn a_served_mismatch_never_passes_and_outranks_the_verdicts() {
        for checks in [
            vec![(Action::Block, CheckOutcome::PASS)],
            vec![(Action::Block, CheckOutcome::FAIL)],
            vec![(Action::Block, CheckOutcome::INCONCLUSIVE)],
            vec![],
        ] {
            let mut r = report(checks, vec![]);
            r.served_mismatches =
                vec!["scheduler.max_num_seqs: configs/engine.toml says 256, the server 64".into()];
            assert!(!r.passed(), "{r:?}");
            assert_eq!(r.status(), Status::ServedMismatch, "{r:?}");
            assert_eq!(r.status().code(), 7);
        }
    }
}
