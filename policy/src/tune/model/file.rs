//! `tune.json`, the result of a tune: every configuration's row (its settings, status, figures,
//! estimates with their intervals, SLO compliance, Pareto membership) and the winner with its
//! rivals, the whole rewritten after each configuration and read back as a typed artifact.
//! The fields derived from the rows are filled by [`super::policy`].

use std::path::Path;

use infergate_model::compare::Change;
use infergate_model::config::ConfigKey;
use infergate_model::stats::{Difference, Estimate};
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

/// File name of the result in the tune directory.
pub const TUNE_FILE: &str = "tune.json";
/// File name of the Pareto chart in the tune directory.
pub const PARETO_FILE: &str = "pareto.svg";
/// Version of the `tune.json` format.
pub const FORMAT_VERSION: u32 = 1;
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
    pub settings: Vec<(ConfigKey, Json)>,
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
    /// With `--capacity`: the configuration's capacity under the SLO (its search's bracket);
    /// the row's other figures are those of the bracket's passing probe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<RowCapacity>,
    /// Cost per million output tokens (the engine config's device price), of the run the row
    /// shows; blank without a price.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_per_1m_output_tokens: Option<f64>,
}

/// A configuration's capacity search, as its row keeps it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RowCapacity {
    /// `concurrency` or `rate`.
    pub dimension: String,
    /// The SLO attainment the search held the probes to.
    pub target: f64,
    pub bracket: infergate_model::capacity::Bracket,
    /// The objective that broke at the bracket's failing end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binding: Option<String>,
    /// Requests the search sent (warmup included).
    pub requests: u64,
}

impl RowCapacity {
    /// `concurrency [24, 28)`.
    pub fn text(&self) -> String {
        format!("{} {}", self.dimension, self.bracket.text())
    }
}

/// What a tune ranks its configurations by.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Objective {
    /// Goodput at the profile's load (requests per second meeting every SLO objective).
    #[default]
    Goodput,
    /// Capacity under the SLO: the highest load each configuration's search decided pass
    /// (`--capacity`); ties by cost per million output tokens.
    Capacity,
}

impl TuneRow {
    /// A row not measured (yet), with its status and why.
    pub fn unmeasured(name: &str, settings: Vec<(ConfigKey, Json)>, status: RowStatus) -> TuneRow {
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
            capacity: None,
            cost_per_1m_output_tokens: None,
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
    /// `--objective capacity`: its capacity bracket lies wholly above every other
    /// contender's (or it is the only configuration with a load decided to hold the SLO).
    Capacity,
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
    /// `--objective capacity`: overlapping brackets, the lowest cost per million output
    /// tokens.
    Cost,
}

impl TieBreak {
    pub fn as_str(self) -> &'static str {
        match self {
            TieBreak::Throughput => "throughput",
            TieBreak::TtftP99 => "TTFT P99",
            TieBreak::Order => "the configuration measured first",
            TieBreak::Cost => "cost per 1M output tokens",
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

/// One axis as `tune.json` records it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AxisRecord {
    pub key: ConfigKey,
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
    /// What the configurations are ranked by.
    #[serde(default, skip_serializing_if = "is_goodput")]
    pub objective: Objective,
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
    /// rows (more than [`crate::tune::grid::LISTED_SKIPS`]): counted, not listed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub beyond_max_configs: u64,
    /// `--objective capacity`: the pairs of measured configurations whose capacity brackets
    /// overlap (their capacities are not shown to differ).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capacity_overlaps: Vec<(String, String)>,
    pub warnings: Vec<String>,
}

impl infergate_model::artifact::Artifact for TuneFile {
    const FILE: &'static str = TUNE_FILE;
    const VERSION: u32 = FORMAT_VERSION;
    const VERSION_FIELD: &'static str = "format";
    const WHAT: &'static str = "a tune";
}

fn is_goodput(o: &Objective) -> bool {
    *o == Objective::Goodput
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl TuneFile {
    /// Read `tune.json` of a tune directory (or the file itself).
    pub fn read(path: &Path) -> Result<TuneFile, infergate_model::artifact::ArtifactError> {
        infergate_model::artifact::read(path)
    }

    /// The winner's row.
    pub fn winner_row(&self) -> Option<&TuneRow> {
        let w = self.winner.as_ref()?;
        self.rows.iter().find(|r| &r.name == w)
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
}
