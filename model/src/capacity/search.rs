//! The search: grow the load (doubling from the start) until a probe is decided fail, then
//! bisect between the highest load decided pass and the lowest decided fail until they are
//! within the resolution. Every probe is decided pass / fail / inconclusive from its interval
//! over trials ([`decide`]); an inconclusive probe adds trials up to the spec's maximum, then
//! stays inconclusive and splits the bracket (the gaps on either side are bisected in turn).
//!
//! [`Search`] is a state machine with no clock and no I/O: [`Search::next_step`] says what to
//! measure (or that the search is done), [`Search::add_trial`] takes what was measured. The
//! bench drives it with runs; the statistical checks drive it with the engine model in virtual
//! time, so both go through the same decisions.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::spec::CapacitySpec;
use crate::stats::{self, Comparator, Estimate, Method, Verdict};

/// What one trial of a probe measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TrialMeasure {
    /// Its run directory, relative to the search's directory (blank in virtual time).
    #[serde(default)]
    pub dir: Option<String>,
    /// SLO attainment over the trial's steady-state window: the share of its measured requests
    /// (failures count as misses, cancelled-on-purpose left out) meeting every objective. Blank
    /// when the run cannot say (no SLO, no request answered, an objective not measurable).
    pub attainment: Option<f64>,
    /// The share meeting each objective alone (`ttft_ms`, `tpot_ms`, `e2e_ms`), for the binding
    /// objective.
    #[serde(default)]
    pub objectives: BTreeMap<String, f64>,
    /// Each of the spec's limits' metric, as the trial measured it (blank: not measured).
    #[serde(default)]
    pub limits: Vec<Option<f64>>,
    /// Requests the trial sent, warmup included.
    pub requests: u64,
    /// Its wall-clock length, seconds.
    pub seconds: f64,
    /// The run was stopped because the server fell behind its open-loop schedule.
    #[serde(default)]
    pub oversaturated: bool,
    /// Which window the attainment comes from: `plateau` (the steady state found in the
    /// records) or `window` (the measured window after the warmup share).
    #[serde(default)]
    pub window: Option<String>,
}

/// A limit's decision at a probe.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LimitOutcome {
    pub metric: crate::metric::MetricPath,
    pub cmp: Comparator,
    pub limit: f64,
    pub estimate: Option<Estimate>,
    pub verdict: Verdict,
}

/// One load the search measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Probe {
    /// Concurrency or requests per second.
    pub load: f64,
    pub trials: Vec<TrialMeasure>,
    /// SLO attainment with its interval at the probe's last look.
    pub attainment: Option<Estimate>,
    #[serde(default)]
    pub limits: Vec<LimitOutcome>,
    /// Null while the probe is still measuring.
    pub verdict: Option<Verdict>,
    /// Why it was decided so, in words.
    pub reason: Option<String>,
    /// For a failing probe: the objective that broke (`ttft_ms`, `tpot_ms`, `e2e_ms`, a limit's
    /// metric, or `oversaturated`).
    pub binding: Option<String>,
}

impl Probe {
    fn new(load: f64) -> Probe {
        Probe {
            load,
            trials: Vec::new(),
            attainment: None,
            limits: Vec::new(),
            verdict: None,
            reason: None,
            binding: None,
        }
    }
}

/// What to do next.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Step {
    /// Measure one more trial of probe `probe` (an index into [`Search::probes`]) at `load`;
    /// `trial` counts from 1.
    Measure {
        probe: usize,
        load: f64,
        trial: u32,
    },
    Done(StopReason),
}

/// Why the search ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The bracket is within the resolution (or split by inconclusive probes whose gaps are).
    Resolved,
    /// The next probe did not fit in what was left of the budget.
    Budget,
    /// The SLO held up to the highest load the search may probe.
    MaxLoad,
    /// The SLO failed down to the lowest load the search may probe.
    MinLoad,
    /// Ctrl-C or a run that could not finish.
    Interrupted,
}

impl StopReason {
    pub fn words(self) -> &'static str {
        match self {
            StopReason::Resolved => "resolved to the resolution",
            StopReason::Budget => "budget spent",
            StopReason::MaxLoad => "the SLO held at the highest load allowed",
            StopReason::MinLoad => "the SLO failed at the lowest load allowed",
            StopReason::Interrupted => "interrupted",
        }
    }
}

/// The capacity: the highest load decided pass below the lowest decided fail, and that fail.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Bracket {
    /// Highest load decided pass (below `fail`). Null: none passed.
    pub pass: Option<f64>,
    /// Lowest load decided fail. Null: none failed.
    pub fail: Option<f64>,
}

impl Bracket {
    /// Whether two brackets leave no load in common: one's fail at or below the other's pass.
    pub fn separates_from(&self, other: &Bracket) -> bool {
        let below =
            |a: &Bracket, b: &Bracket| matches!((a.fail, b.pass), (Some(f), Some(p)) if f <= p);
        below(self, other) || below(other, self)
    }

    /// `[8, 10)`, `[, 1)` (failed at the lowest), `[64, )` (held at the highest).
    pub fn text(&self) -> String {
        let t = |v: Option<f64>| v.map(stats::sig_text).unwrap_or_default();
        format!("[{}, {})", t(self.pass), t(self.fail))
    }
}

/// Decide a probe from its trials at look `look` of `max_looks`: the attainment's t interval
/// over trials against the target, each limit's against its value. Fail when any part fails
/// (an over-saturated trial fails the probe outright), pass when every part passes, else
/// inconclusive. The confidence of a look spends `1 - confidence` over the probe's looks
/// (`stats::confidence_at_look`), so adding trials does not inflate the error rate.
pub fn decide(spec: &CapacitySpec, probe: &mut Probe, look: u32, max_looks: u32) -> Verdict {
    if let Some(i) = probe.trials.iter().position(|t| t.oversaturated) {
        probe.reason = Some(format!(
            "trial {} fell behind the open-loop schedule by a growing margin and was stopped \
             (over-saturation)",
            i + 1
        ));
        probe.binding = Some("oversaturated".into());
        return Verdict::Fail;
    }
    let conf = stats::confidence_at_look(look, max_looks, 1.0 - spec.confidence)
        .unwrap_or(spec.confidence);
    let estimate = |values: Vec<Option<f64>>| -> Option<Estimate> {
        let v: Vec<f64> = values.into_iter().collect::<Option<Vec<f64>>>()?;
        if v.iter().any(|x| !x.is_finite()) {
            return None;
        }
        let (value, lo, hi) = stats::t_interval(&v, conf).ok()?;
        Some(Estimate {
            value,
            lo,
            hi,
            confidence: conf,
            trials: v.len() as u64,
            requests: 0,
            method: Method::TInterval,
            undersampled: false,
        })
    };
    let mut parts = Vec::new();
    probe.attainment = estimate(probe.trials.iter().map(|t| t.attainment).collect());
    let att = match &probe.attainment {
        Some(e) => stats::verdict(e, Comparator::Ge, spec.target),
        None => Verdict::Inconclusive,
    };
    parts.push(att);
    probe.limits = spec
        .limits
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let est =
                estimate(probe.trials.iter().map(|t| t.limits.get(i).copied().flatten()).collect());
            let verdict = est
                .as_ref()
                .map(|e| stats::verdict(e, l.cmp, l.value))
                .unwrap_or(Verdict::Inconclusive);
            LimitOutcome { metric: l.metric, cmp: l.cmp, limit: l.value, estimate: est, verdict }
        })
        .collect();
    parts.extend(probe.limits.iter().map(|l| l.verdict));
    let verdict = if parts.contains(&Verdict::Fail) {
        Verdict::Fail
    } else if parts.iter().all(|v| *v == Verdict::Pass) {
        Verdict::Pass
    } else {
        Verdict::Inconclusive
    };
    let att_text = match &probe.attainment {
        Some(e) => format!(
            "attainment {} [{}, {}]",
            stats::significant(e.value, 3),
            stats::significant(e.lo, 3),
            stats::significant(e.hi, 3)
        ),
        None => "attainment not measured in every trial".to_string(),
    };
    probe.binding = None;
    probe.reason = Some(match verdict {
        Verdict::Pass => format!("{att_text} >= {}", spec.target),
        Verdict::Fail => {
            if att == Verdict::Fail {
                probe.binding = binding_objective(&probe.trials);
                format!("{att_text} < {}", spec.target)
            } else {
                let l = probe.limits.iter().find(|l| l.verdict == Verdict::Fail).expect("a fail");
                probe.binding = Some(l.metric.to_string());
                format!(
                    "{} {} breaks {} {}",
                    l.metric,
                    interval_text(l.estimate.as_ref()),
                    l.cmp,
                    l.limit
                )
            }
        }
        Verdict::Inconclusive => {
            let mut why = vec![];
            if att == Verdict::Inconclusive {
                why.push(format!("{att_text} straddles {}", spec.target));
            }
            for l in probe.limits.iter().filter(|l| l.verdict == Verdict::Inconclusive) {
                why.push(format!(
                    "{} {} straddles {}",
                    l.metric,
                    interval_text(l.estimate.as_ref()),
                    l.limit
                ));
            }
            why.join("; ")
        }
    });
    verdict
}

fn interval_text(e: Option<&Estimate>) -> String {
    match e {
        Some(e) => format!("[{}, {}]", stats::significant(e.lo, 3), stats::significant(e.hi, 3)),
        None => "(not measured)".into(),
    }
}

/// The objective met by the fewest requests over a probe's trials (mean share).
fn binding_objective(trials: &[TrialMeasure]) -> Option<String> {
    let mut sums: BTreeMap<&str, (f64, usize)> = BTreeMap::new();
    for t in trials {
        for (k, v) in &t.objectives {
            let e = sums.entry(k).or_default();
            e.0 += v;
            e.1 += 1;
        }
    }
    sums.into_iter()
        .map(|(k, (s, n))| (k, s / n as f64))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(k, _)| k.to_string())
}

/// A capacity search in progress (or done).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Search {
    pub spec: CapacitySpec,
    /// The profile's measured requests per trial before the closed loop's 4 x concurrency
    /// (`load.requests`, else the workload's size): what a probe's cost is predicted from.
    pub base_requests: u64,
    /// In the order they were measured.
    pub probes: Vec<Probe>,
    pub spent_requests: u64,
    pub spent_s: f64,
    pub trials: u64,
    pub stop: Option<StopReason>,
}

impl Search {
    pub fn new(spec: CapacitySpec, base_requests: u64) -> Search {
        Search {
            spec,
            base_requests,
            probes: Vec::new(),
            spent_requests: 0,
            spent_s: 0.0,
            trials: 0,
            stop: None,
        }
    }

    /// Whether `trials` more trials at `load` fit in what is left of the budget.
    fn fits(&self, load: f64, trials: u32) -> bool {
        let b = &self.spec.budget;
        let req = self.spec.trial_requests(load, self.base_requests) * trials as u64;
        if b.requests.is_some_and(|r| self.spent_requests + req > r) {
            return false;
        }
        if let Some(s) = b.seconds {
            if self.spent_s >= s {
                return false;
            }
            if let Some(t) = self.spec.trial_seconds(load, self.base_requests) {
                if self.spent_s + t * trials as f64 > s {
                    return false;
                }
            }
        }
        true
    }

    /// Loads decided pass, fail; sorted.
    fn decided(&self, v: Verdict) -> Vec<f64> {
        let mut out: Vec<f64> =
            self.probes.iter().filter(|p| p.verdict == Some(v)).map(|p| p.load).collect();
        out.sort_by(f64::total_cmp);
        out
    }

    /// The bracket as decided so far.
    pub fn bracket(&self) -> Bracket {
        let fail = self.decided(Verdict::Fail).first().copied();
        let pass = self.decided(Verdict::Pass).into_iter().rfind(|p| fail.is_none_or(|f| *p < f));
        Bracket { pass, fail }
    }

    /// The objective that broke at the bracket's failing end.
    pub fn binding(&self) -> Option<String> {
        let fail = self.bracket().fail?;
        self.probes
            .iter()
            .find(|p| p.load == fail && p.verdict == Some(Verdict::Fail))?
            .binding
            .clone()
    }

    /// Loads decided inconclusive (after every trial they could have) within the bracket.
    pub fn indeterminate(&self) -> Vec<f64> {
        let b = self.bracket();
        let mut v: Vec<f64> = self
            .probes
            .iter()
            .filter(|p| p.verdict == Some(Verdict::Inconclusive))
            .map(|p| p.load)
            .filter(|l| b.pass.is_none_or(|p| *l > p) && b.fail.is_none_or(|f| *l < f))
            .collect();
        v.sort_by(f64::total_cmp);
        v
    }

    /// Loads decided pass above the lowest decided fail: the SLO attainment is not monotone in
    /// the load there (noise, or a server that sheds load).
    pub fn non_monotone(&self) -> Vec<f64> {
        let b = self.bracket();
        match b.fail {
            Some(f) => self.decided(Verdict::Pass).into_iter().filter(|p| *p > f).collect(),
            None => vec![],
        }
    }

    /// Ends the search (Ctrl-C, a run that could not finish): an open probe stays undecided.
    pub fn interrupt(&mut self) {
        self.stop = Some(StopReason::Interrupted);
    }

    /// What to measure next, or why the search is done.
    pub fn next_step(&mut self) -> Step {
        if let Some(stop) = self.stop {
            return Step::Done(stop);
        }
        if let Some(i) = self.probes.iter().position(|p| p.verdict.is_none()) {
            let load = self.probes[i].load;
            if self.fits(load, 1) {
                let trial = self.probes[i].trials.len() as u32 + 1;
                return Step::Measure { probe: i, load, trial };
            }
            let p = &mut self.probes[i];
            p.verdict = Some(Verdict::Inconclusive);
            let why = p.reason.take().map(|r| format!("{r}; ")).unwrap_or_default();
            p.reason = Some(format!("{why}the budget ended its trials"));
            return self.done(StopReason::Budget);
        }
        let next = match self.next_load() {
            Ok(load) => load,
            Err(stop) => return self.done(stop),
        };
        if !self.fits(next, self.spec.min_trials) {
            return self.done(StopReason::Budget);
        }
        self.probes.push(Probe::new(next));
        Step::Measure { probe: self.probes.len() - 1, load: next, trial: 1 }
    }

    fn done(&mut self, stop: StopReason) -> Step {
        self.stop = Some(stop);
        Step::Done(stop)
    }

    /// The next load to probe: grow, shrink or bisect.
    fn next_load(&self) -> Result<f64, StopReason> {
        let spec = &self.spec;
        let probed = |l: f64| self.probes.iter().any(|p| p.load == l);
        let b = self.bracket();
        let Some(fail) = b.fail else {
            // Growing: double from the highest load probed.
            let Some(top) = self.probes.iter().map(|p| p.load).max_by(f64::total_cmp) else {
                return Ok(spec.clamp(spec.start));
            };
            if top >= spec.max_load {
                return Err(StopReason::MaxLoad);
            }
            return Ok(spec.clamp(top * 2.0));
        };
        let Some(pass) = b.pass else {
            // Shrinking: halve below the lowest load probed.
            let bottom = self.probes.iter().map(|p| p.load).min_by(f64::total_cmp).unwrap_or(fail);
            let next = spec.clamp(bottom / 2.0);
            if bottom <= spec.min_load || next >= bottom || probed(next) {
                return Err(StopReason::MinLoad);
            }
            return Ok(next);
        };
        // Bisecting: the widest gap between neighbouring probed loads within the bracket.
        let mut points: Vec<f64> =
            self.probes.iter().map(|p| p.load).filter(|l| *l >= pass && *l <= fail).collect();
        points.sort_by(f64::total_cmp);
        points.dedup();
        let mut best: Option<(f64, f64)> = None;
        for w in points.windows(2) {
            let (a, c) = (w[0], w[1]);
            if c - a <= spec.step(a) + 1e-9 {
                continue;
            }
            let mid = spec.clamp((a + c) / 2.0);
            if mid <= a || mid >= c || probed(mid) {
                continue;
            }
            let width = c / a;
            if best.is_none_or(|(w, _)| width > w) {
                best = Some((width, mid));
            }
        }
        best.map(|(_, mid)| mid).ok_or(StopReason::Resolved)
    }

    /// Takes what trial `probe` measured, and decides the probe when it has its minimum trials.
    pub fn add_trial(&mut self, probe: usize, m: TrialMeasure) {
        self.spent_requests += m.requests;
        self.spent_s += m.seconds;
        self.trials += 1;
        let (min, max) = (self.spec.min_trials, self.spec.max_trials);
        let spec = self.spec.clone();
        let p = &mut self.probes[probe];
        p.trials.push(m);
        let n = p.trials.len() as u32;
        let over = p.trials.last().is_some_and(|t| t.oversaturated);
        if n < min && !over {
            return;
        }
        let look = n.saturating_sub(min) + 1;
        let verdict = decide(&spec, p, look.min(max - min + 1), max - min + 1);
        if verdict != Verdict::Inconclusive || n >= max {
            p.verdict = Some(verdict);
            if verdict == Verdict::Inconclusive {
                let why = p.reason.take().unwrap_or_default();
                p.reason = Some(format!("{why} after {n} trials"));
            }
        }
    }
}
