//! What a capacity search is asked: the load dimension, the SLO attainment target, optional
//! percentile limits, where the search starts and how far it may go, its resolution, the trials
//! per probe and the budget. Parsed from the command line's values, checked before anything is
//! sent ([`CapacitySpec::validate`], [`CapacitySpec::check_budget`]).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::stats::Comparator;
pub use crate::sweep::Dimension;
use crate::sweep::StagePlan;

/// SLO attainment a probe must reach by default: 95% of its measured requests meet every
/// objective of the profile's goodput SLO.
pub const DEFAULT_TARGET: f64 = 0.95;
/// The bracket's default relative width: the search stops when the highest passing and the
/// lowest failing load are within 10% of each other (GuideLLM's goodput profile's default).
pub const DEFAULT_RESOLUTION: f64 = 0.1;
/// Trials every probe measures before it is decided. An interval over trials needs two, but
/// two are not enough for attainment: below the capacity a trial meets the SLO with every
/// request, and near it the run-to-run noise makes some trials read exactly 1 and others far
/// less. A t interval over two trials that happen to agree has no width, and passes a load
/// whose expected attainment is well under the target; a third trial that agrees as well is
/// rarer (docs/statistics.md, "Capacity under the SLO").
pub const DEFAULT_MIN_TRIALS: u32 = 3;
/// Trials an undecided probe may grow to.
pub const DEFAULT_MAX_TRIALS: u32 = 5;
/// The search's default starting load: concurrency 1, or one request per second.
pub const DEFAULT_START: f64 = 1.0;
/// Highest concurrency a search probes unless told otherwise.
pub const DEFAULT_MAX_CONCURRENCY: f64 = 4096.0;
/// Highest request rate a search probes unless told otherwise, per second.
pub const DEFAULT_MAX_RATE: f64 = 10_000.0;
/// Lowest request rate a shrinking search probes, per second.
pub const MIN_RATE: f64 = 0.01;

/// A percentile limit a probe must hold besides the attainment: `metrics.ttft_ms.p99<=350`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Limit {
    /// A summary metric of the registry (`infergate_model::metric::known_metrics`).
    pub metric: crate::metric::MetricPath,
    pub cmp: Comparator,
    pub value: f64,
}

impl FromStr for Limit {
    type Err = String;
    fn from_str(s: &str) -> Result<Limit, String> {
        let at = s.find(['<', '>', '=']).ok_or_else(|| {
            format!("`{s}`: expected METRIC<=VALUE (like metrics.ttft_ms.p99<=350)")
        })?;
        let (metric, rest) = s.split_at(at);
        let op_len = rest.chars().take_while(|c| matches!(c, '<' | '>' | '=')).count();
        let (op, value) = rest.split_at(op_len);
        let metric = metric.trim();
        let metric = crate::metric::MetricPath::parse(metric).map_err(|_| {
            format!(
                "`{metric}` is not a metric of a run's summary; valid: the registry's paths \
                 (docs/metrics.md), like metrics.ttft_ms.p99 or metrics.e2e_ms.p95"
            )
        })?;
        let cmp = Comparator::parse(op).map_err(|e| format!("`{s}`: {e}"))?;
        let value: f64 = value
            .trim()
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite())
            .ok_or_else(|| format!("`{s}`: `{}` is not a number", value.trim()))?;
        Ok(Limit { metric, cmp, value })
    }
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} {}", self.metric, self.cmp, crate::stats::sig_text(self.value))
    }
}

/// How much a search may spend: requests sent (warmup included), wall-clock seconds, or both
/// (whichever runs out first). Neither: the search ends by its resolution or its load range.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Budget {
    pub requests: Option<u64>,
    pub seconds: Option<f64>,
}

impl FromStr for Budget {
    type Err = String;
    /// `5000` or `5000req` (requests), `90s`, `20m`, `1h` (time), or both: `5000,20m`.
    fn from_str(s: &str) -> Result<Budget, String> {
        let mut b = Budget::default();
        let bad = |part: &str| {
            format!(
                "`{part}` is not a budget: give requests (`5000`, `5000req`), a time (`90s`, \
                 `20m`, `1h`) or both (`5000,20m`)"
            )
        };
        for part in s.split(',').map(str::trim) {
            if part.is_empty() {
                return Err(bad(s));
            }
            let digits =
                part.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(part.len());
            let (num, unit) = part.split_at(digits);
            let n: f64 = num.parse().map_err(|_| bad(part))?;
            if !(n.is_finite() && n > 0.0) {
                return Err(bad(part));
            }
            match unit.trim() {
                "" | "req" | "requests" => {
                    if n.fract() != 0.0 || b.requests.is_some() {
                        return Err(bad(part));
                    }
                    b.requests = Some(n as u64);
                }
                "s" | "m" | "min" | "h" => {
                    if b.seconds.is_some() {
                        return Err(bad(part));
                    }
                    let mult = match unit.trim() {
                        "s" => 1.0,
                        "h" => 3600.0,
                        _ => 60.0,
                    };
                    b.seconds = Some(n * mult);
                }
                _ => return Err(bad(part)),
            }
        }
        Ok(b)
    }
}

impl fmt::Display for Budget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if let Some(r) = self.requests {
            parts.push(format!("{r} requests"));
        }
        if let Some(s) = self.seconds {
            parts.push(format!("{} s", crate::stats::sig_text(s)));
        }
        if parts.is_empty() {
            parts.push("unlimited".into());
        }
        f.write_str(&parts.join(", "))
    }
}

/// A capacity search's question and its rules.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CapacitySpec {
    /// Closed loop (concurrency) or open loop (requests per second).
    pub dimension: Dimension,
    /// SLO attainment a probe must reach, within (0, 1].
    pub target: f64,
    /// Percentile limits a probe must hold too.
    #[serde(default)]
    pub limits: Vec<Limit>,
    /// The first load probed.
    pub start: f64,
    /// The lowest load a search that fails at its start shrinks to.
    pub min_load: f64,
    /// The highest load a search grows to.
    pub max_load: f64,
    /// The bracket's relative width at which the search stops, within (0, 1).
    pub resolution: f64,
    /// Trials a probe measures before its first decision (at least 2).
    pub min_trials: u32,
    /// Trials an inconclusive probe may grow to.
    pub max_trials: u32,
    /// Coverage of a probe's decision over all its looks (alpha spent over the looks).
    pub confidence: f64,
    pub budget: Budget,
    /// How each trial splits into warmup and its measured steady state.
    pub plan: StagePlan,
}

impl CapacitySpec {
    /// A search with the defaults: start at 1, grow to the dimension's maximum, 10% resolution,
    /// 3 to 5 trials a probe at 95% confidence, no budget.
    pub fn new(dimension: Dimension) -> CapacitySpec {
        CapacitySpec {
            dimension,
            target: DEFAULT_TARGET,
            limits: Vec::new(),
            start: DEFAULT_START,
            min_load: match dimension {
                Dimension::Concurrency => 1.0,
                Dimension::Rate => MIN_RATE,
            },
            max_load: match dimension {
                Dimension::Concurrency => DEFAULT_MAX_CONCURRENCY,
                Dimension::Rate => DEFAULT_MAX_RATE,
            },
            resolution: DEFAULT_RESOLUTION,
            min_trials: DEFAULT_MIN_TRIALS,
            max_trials: DEFAULT_MAX_TRIALS,
            confidence: 0.95,
            budget: Budget::default(),
            plan: StagePlan::default(),
        }
    }

    /// Each setting within its range: `(flag, message)` of the first that is not.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        let load_ok = |v: f64| match self.dimension {
            Dimension::Concurrency => v >= 1.0 && v.fract() == 0.0 && v <= u32::MAX as f64,
            Dimension::Rate => v.is_finite() && v > 0.0,
        };
        let load_words = match self.dimension {
            Dimension::Concurrency => "a whole number of concurrent requests >= 1",
            Dimension::Rate => "requests per second > 0",
        };
        if !(self.target > 0.0 && self.target <= 1.0) {
            return Err((
                "--capacity-target",
                format!(
                    "`{}` is not an SLO attainment: give the share of requests that must meet \
                     the SLO, within (0, 1], like 0.95",
                    self.target
                ),
            ));
        }
        if !load_ok(self.start) {
            return Err(("--capacity-start", format!("`{}`: give {load_words}", self.start)));
        }
        if !load_ok(self.max_load) || self.max_load < self.start {
            return Err((
                "--capacity-max",
                format!(
                    "`{}`: give {load_words}, at least the start ({})",
                    self.max_load, self.start
                ),
            ));
        }
        if !(self.resolution > 0.0 && self.resolution < 1.0) {
            return Err((
                "--capacity-resolution",
                format!(
                    "`{}` is not a resolution: give the bracket's relative width within (0, 1), \
                     like 0.1",
                    self.resolution
                ),
            ));
        }
        if self.min_trials < 2 || self.max_trials < self.min_trials || self.max_trials > 100 {
            return Err((
                "--capacity-trials",
                format!(
                    "{}..{} trials a probe: a probe's interval over trials needs at least 2, and \
                     at most 100",
                    self.min_trials, self.max_trials
                ),
            ));
        }
        if !(self.confidence > 0.0 && self.confidence < 1.0) {
            return Err((
                "--confidence",
                format!("`{}` is not a confidence between 0 and 1", self.confidence),
            ));
        }
        Ok(())
    }

    /// The resolution step at `load`: the gap between a passing and a failing load below which
    /// the search stops (a whole request at least, in a closed loop).
    pub fn step(&self, load: f64) -> f64 {
        match self.dimension {
            Dimension::Concurrency => (self.resolution * load).ceil().max(1.0),
            Dimension::Rate => self.resolution * load,
        }
    }

    /// A load as the dimension takes it (whole requests in a closed loop), within the range.
    pub fn clamp(&self, load: f64) -> f64 {
        let l = match self.dimension {
            Dimension::Concurrency => load.round(),
            Dimension::Rate => crate::stats::significant(load, 4).parse().unwrap_or(load),
        };
        l.clamp(self.min_load, self.max_load)
    }

    /// Requests one trial at `load` sends (warmup included), as `workload_items` and the profile's
    /// `load.requests` make it (`sweep::stage_overrides`).
    pub fn trial_requests(&self, load: f64, base_requests: u64) -> u64 {
        let (n, warmup) = self.plan.stage_requests(self.dimension, load, base_requests);
        n + warmup
    }

    /// Seconds one trial at `load` lasts, where that is known before it runs: a stage duration,
    /// or an open loop's requests over its rate.
    pub fn trial_seconds(&self, load: f64, base_requests: u64) -> Option<f64> {
        match (self.plan.stage_duration_s, self.dimension) {
            (Some(d), _) => Some(d),
            (None, Dimension::Rate) => Some(self.trial_requests(load, base_requests) as f64 / load),
            (None, Dimension::Concurrency) => None,
        }
    }

    /// Refuses a budget too small for the first probe (its minimum trials at the start), before
    /// anything is sent.
    pub fn check_budget(&self, base_requests: u64) -> Result<(), String> {
        let trials = self.min_trials as u64;
        let per = self.trial_requests(self.start, base_requests);
        let what = format!("{} {}", self.dimension.name(), crate::stats::sig_text(self.start));
        if let Some(b) = self.budget.requests {
            if per * trials > b {
                return Err(format!(
                    "the budget of {b} requests is smaller than one probe: {} requests ({trials} \
                     trials of {per}) at {what}; raise --capacity-budget to at least {}",
                    per * trials,
                    per * trials
                ));
            }
        }
        if let (Some(b), Some(s)) =
            (self.budget.seconds, self.trial_seconds(self.start, base_requests))
        {
            if s * trials as f64 > b {
                return Err(format!(
                    "the budget of {} s is shorter than one probe: {} s ({trials} trials of {} s) \
                     at {what}; raise --capacity-budget to at least {}s",
                    crate::stats::sig_text(b),
                    crate::stats::sig_text(s * trials as f64),
                    crate::stats::sig_text(s),
                    (s * trials as f64).ceil()
                ));
            }
        }
        Ok(())
    }
}
