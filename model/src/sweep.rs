//! Load sweeps: the same profile at increasing concurrency (or request rate), one normal run
//! directory per stage, a sweep summary (`sweep.json`) and the knee: the highest load that still
//! meets the SLOs.
//!
//! ```text
//! <sweep dir>/
//!   sweep.json                      the sweep summary ([`SweepSummary`])
//!   sweep.svg                       chart (written by `cargo xtask bench --sweep`)
//!   stage-01-concurrency-32/        a normal run directory (summary.json, requests.jsonl, ...)
//!   stage-02-concurrency-128/
//! ```
//!
//! **Steady state.** Each stage drops its first part as warmup (default: the first third):
//! with a stage duration `D`, `load.warmup_s = D x f` and `load.duration_s = D x (1 - f)`;
//! without one, the stage sends `N` measured requests (the profile's `load.requests`, else the
//! workload's size, and in a closed loop at least 4 x concurrency) preceded by
//! `N x f / (1 - f)` warmup requests.
//!
//! **Knee.** A stage meets the SLOs when it had successful requests, at most 1% of its measured
//! requests failed, and its TTFT, TPOT and E2E p99 are within the profile's `[slo]` objectives
//! (those configured). The knee is the highest load of the leading stages that all meet them
//! (stages in increasing load; the first stage that misses ends the search). No SLO configured:
//! no knee.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::config::{ConfigKey, Override, Profile};
use crate::metrics::Slo;
use crate::server_metrics::ServerSection;
use crate::summary::Summary;

pub const SWEEP_FILE: &str = "sweep.json";
pub(crate) const SWEEP_SCHEMA_VERSION: u32 = 1;
/// Largest share of failed measured requests a stage may have and still meet the SLOs.
pub(crate) const MAX_ERROR_RATE: f64 = 0.01;

/// What a sweep varies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Dimension {
    /// Closed loop: concurrent requests.
    Concurrency,
    /// Open loop: requests per second.
    Rate,
}

impl Dimension {
    pub fn name(self) -> &'static str {
        match self {
            Dimension::Concurrency => "concurrency",
            Dimension::Rate => "rate",
        }
    }
}

/// `concurrency=32,128,256` or `rate=2,4,8`.
#[derive(Clone, Debug, PartialEq)]
pub struct SweepSpec {
    pub dimension: Dimension,
    /// Loads in increasing order.
    pub values: Vec<f64>,
}

impl FromStr for SweepSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (dim, list) = s.split_once('=').ok_or_else(|| {
            format!(
                "`{s}`: expected concurrency=N,N,... or rate=R,R,... (e.g. concurrency=32,128,256)"
            )
        })?;
        let dimension = match dim.trim() {
            "concurrency" => Dimension::Concurrency,
            "rate" => Dimension::Rate,
            other => {
                return Err(format!("`{other}`: a sweep varies `concurrency` or `rate`"));
            }
        };
        let mut values = Vec::new();
        for part in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let v: f64 = part.parse().map_err(|_| format!("`{part}` is not a number"))?;
            let valid = match dimension {
                Dimension::Concurrency => v >= 1.0 && v.fract() == 0.0 && v <= u32::MAX as f64,
                Dimension::Rate => v.is_finite() && v > 0.0,
            };
            if !valid {
                return Err(match dimension {
                    Dimension::Concurrency => {
                        format!("concurrency `{part}` must be a whole number >= 1")
                    }
                    Dimension::Rate => format!("rate `{part}` must be > 0 requests per second"),
                });
            }
            values.push(v);
        }
        if values.is_empty() {
            return Err(format!("`{s}`: no loads listed"));
        }
        if values.windows(2).any(|w| w[1] <= w[0]) {
            return Err(format!("`{s}`: loads must increase from stage to stage"));
        }
        Ok(SweepSpec { dimension, values })
    }
}

impl fmt::Display for SweepSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v: Vec<String> = self.values.iter().map(|v| v.to_string()).collect();
        write!(f, "{}={}", self.dimension.name(), v.join(","))
    }
}

/// How each stage splits into warmup and the measured steady state.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StagePlan {
    /// Share of each stage dropped as warmup (0..1).
    pub warmup_fraction: f64,
    /// Length of each stage in seconds (None: stages are counted in requests).
    pub stage_duration_s: Option<f64>,
}

impl Default for StagePlan {
    fn default() -> Self {
        StagePlan { warmup_fraction: 1.0 / 3.0, stage_duration_s: None }
    }
}

impl StagePlan {
    /// Measured and warmup requests of a stage counted in requests (no stage duration):
    /// `base` measured (the profile's `load.requests`, else the workload's size), in a closed
    /// loop at least 4 x concurrency, preceded by the warmup share.
    pub fn stage_requests(&self, dimension: Dimension, load: f64, base: u64) -> (u64, u64) {
        let mut n = base.max(1);
        if dimension == Dimension::Concurrency {
            n = n.max(4 * load as u64);
        }
        let f = self.warmup_fraction;
        let warmup = (n as f64 * f / (1.0 - f)).round() as u64;
        (n, warmup)
    }
}

/// Directory name of a stage.
pub fn stage_dir_name(index: usize, dimension: Dimension, value: f64) -> String {
    format!("stage-{:02}-{}-{}", index + 1, dimension.name(), value)
}

/// The profile overrides of one stage (applied after the command line's).
pub fn stage_overrides(
    dimension: Dimension,
    value: f64,
    plan: &StagePlan,
    base: &Profile,
    workload_items: u64,
) -> Vec<Override> {
    let origin = format!("--sweep {}={value}", dimension.name());
    let mut o = Vec::new();
    match dimension {
        Dimension::Concurrency => {
            o.push(Override::new(ConfigKey::literal("load.mode"), "closed", origin.clone()));
            o.push(Override::new(
                ConfigKey::literal("load.concurrency"),
                value as i64,
                origin.clone(),
            ));
        }
        Dimension::Rate => {
            o.push(Override::new(ConfigKey::literal("load.mode"), "open", origin.clone()));
            o.push(Override::new(ConfigKey::literal("load.rate"), value, origin.clone()));
        }
    }
    let f = plan.warmup_fraction;
    match plan.stage_duration_s {
        Some(d) => {
            o.push(Override::new(ConfigKey::literal("load.warmup_requests"), 0i64, origin.clone()));
            o.push(Override::new(ConfigKey::literal("load.warmup_s"), d * f, origin.clone()));
            o.push(Override::new(ConfigKey::literal("load.duration_s"), d * (1.0 - f), origin));
        }
        None => {
            let base = base.load.requests.unwrap_or(workload_items);
            let (n, warmup) = plan.stage_requests(dimension, value, base);
            o.push(Override::new(ConfigKey::literal("load.requests"), n as i64, origin.clone()));
            o.push(Override::new(
                ConfigKey::literal("load.warmup_requests"),
                warmup as i64,
                origin.clone(),
            ));
            o.push(Override::new(ConfigKey::literal("load.warmup_s"), 0.0, origin));
        }
    }
    o
}

/// Workload items of a profile without a dataset (a dataset's size is known once it is read).
pub fn synthetic_items(p: &Profile) -> u64 {
    (p.workload.input_lengths.len() as u64 * p.workload.repeats as u64).max(1)
}

/// One stage's result in `sweep.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StageResult {
    pub stage: usize,
    /// Concurrency or rate of the stage.
    pub load: f64,
    /// Run directory, relative to the sweep directory.
    pub dir: String,
    pub run_id: String,
    pub status: crate::summary::RunStatus,
    pub requests: u64,
    pub ok: u64,
    pub failed: u64,
    pub window_s: Option<f64>,
    pub requests_per_s: Option<f64>,
    pub output_tokens_per_s: Option<f64>,
    pub ttft_p99_ms: Option<f64>,
    pub tpot_p99_ms: Option<f64>,
    pub e2e_p99_ms: Option<f64>,
    pub goodput_ratio: Option<f64>,
    pub server_preemptions: Option<f64>,
    pub server_kv_cache_usage_max: Option<f64>,
    pub server_goodput_ratio: Option<f64>,
    /// Mean GPU utilisation (nvidia-smi) over the window, percent.
    pub gpu_utilization_pct: Option<f64>,
    pub cost_per_1m_output_tokens: Option<f64>,
    pub meets_slo: bool,
    /// Why the stage misses the SLOs (empty when it meets them).
    pub violations: Vec<String>,
}

impl StageResult {
    pub fn from_summary(stage: usize, load: f64, dir: String, s: &Summary) -> StageResult {
        let server: Option<&ServerSection> = s.server.as_ref();
        let p99 = |m: &Option<crate::metrics::Stats>| m.as_ref().map(|x| x.p99);
        let mut r = StageResult {
            stage,
            load,
            dir,
            run_id: s.run_id.clone(),
            status: s.status,
            requests: s.requests.total,
            ok: s.requests.ok,
            failed: s.requests.failed,
            window_s: s.timing.window.duration_s,
            requests_per_s: s.throughput.requests_per_s,
            output_tokens_per_s: s.throughput.output_tokens_per_s,
            ttft_p99_ms: p99(&s.metrics.ttft_ms),
            tpot_p99_ms: p99(&s.metrics.tpot_ms),
            e2e_p99_ms: p99(&s.metrics.e2e_ms),
            goodput_ratio: s.goodput.ratio,
            server_preemptions: server.as_ref().and_then(|x| x.preemptions),
            server_kv_cache_usage_max: server
                .as_ref()
                .and_then(|x| x.kv_cache_usage.as_ref().map(|k| k.max)),
            server_goodput_ratio: server.as_ref().and_then(|x| x.goodput_ratio),
            gpu_utilization_pct: server
                .as_ref()
                .and_then(|x| x.gpu.as_ref())
                .and_then(|g| g.utilization_pct.as_ref().map(|u| u.mean)),
            cost_per_1m_output_tokens: s.cost.per_1m_output_tokens,
            meets_slo: false,
            violations: Vec::new(),
        };
        r.violations = slo_violations(&r, &s.goodput.slo);
        r.meets_slo = r.violations.is_empty();
        r
    }
}

/// Why a stage misses the SLOs (empty: it meets them).
pub(crate) fn slo_violations(r: &StageResult, slo: &Slo) -> Vec<String> {
    let mut v = Vec::new();
    if r.ok == 0 {
        v.push("no successful request".to_string());
        return v;
    }
    if r.requests > 0 && r.failed as f64 / r.requests as f64 > MAX_ERROR_RATE {
        v.push(format!("{} of {} requests failed", r.failed, r.requests));
    }
    for (name, limit, value) in [
        ("TTFT", slo.ttft_ms, r.ttft_p99_ms),
        ("TPOT", slo.tpot_ms, r.tpot_p99_ms),
        ("E2E", slo.e2e_ms, r.e2e_p99_ms),
    ] {
        if let Some(limit) = limit {
            match value {
                Some(x) if x <= limit => {}
                Some(x) => v.push(format!("{name} p99 {x:.1} ms > {limit} ms")),
                None => v.push(format!("{name} p99 not measured")),
            }
        }
    }
    v
}

/// The knee: the highest load of the leading stages that all meet the SLOs.
pub(crate) fn find_knee(stages: &[StageResult], slo: &Slo) -> Option<(usize, f64)> {
    if slo.is_empty() {
        return None;
    }
    let mut knee = None;
    for s in stages {
        if !s.meets_slo {
            break;
        }
        knee = Some((s.stage, s.load));
    }
    knee
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Knee {
    /// Concurrency or rate.
    pub load: f64,
    pub stage: usize,
}

/// `sweep.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepSummary {
    pub schema_version: u32,
    pub sweep_id: String,
    pub dimension: Dimension,
    pub values: Vec<f64>,
    pub plan: StagePlan,
    /// The objectives each stage's p99 is held to.
    pub slo: Slo,
    pub stages: Vec<StageResult>,
    /// Highest load still meeting the SLOs (null: none did, or no SLO is configured).
    pub knee: Option<Knee>,
    pub notes: Vec<String>,
}

impl SweepSummary {
    pub fn new(
        sweep_id: String,
        spec: &SweepSpec,
        plan: StagePlan,
        slo: Slo,
        stages: Vec<StageResult>,
    ) -> SweepSummary {
        let knee = find_knee(&stages, &slo).map(|(stage, load)| Knee { load, stage });
        let mut notes = Vec::new();
        if slo.is_empty() {
            notes.push("no SLO configured ([slo] of the profile): no knee".to_string());
        } else if knee.is_none() {
            notes.push("the first stage already misses the SLOs: no knee".to_string());
        }
        if stages.len() < spec.values.len() {
            notes.push(format!(
                "the sweep stopped after {} of {} stages",
                stages.len(),
                spec.values.len()
            ));
        }
        SweepSummary {
            schema_version: SWEEP_SCHEMA_VERSION,
            sweep_id,
            dimension: spec.dimension,
            values: spec.values.clone(),
            plan,
            slo,
            stages,
            knee,
            notes,
        }
    }

    /// The `extra.sweep` section written into each stage's summary.json.
    pub(crate) fn stage_section(&self, stage: usize) -> crate::summary::SweepStage {
        crate::summary::SweepStage {
            sweep_id: self.sweep_id.clone(),
            file: format!("../{SWEEP_FILE}"),
            dimension: self.dimension.name().to_string(),
            stage,
            stages: self.stages.len(),
            load: self.stages.iter().find(|s| s.stage == stage).map(|s| s.load),
            knee: self.knee.as_ref().map(|k| k.load),
            is_knee: self.knee.as_ref().is_some_and(|k| k.stage == stage),
        }
    }

    /// Read `sweep.json` of a sweep directory (or the file itself).
    pub fn read(path: &std::path::Path) -> Result<SweepSummary, crate::artifact::ArtifactError> {
        crate::artifact::read(path)
    }
}

impl crate::artifact::Artifact for SweepSummary {
    const FILE: &'static str = SWEEP_FILE;
    const VERSION: u32 = SWEEP_SCHEMA_VERSION;
    const VERSION_FIELD: &'static str = "schema_version";
    const WHAT: &'static str = "a sweep summary";
}

/// Write `sweep.json` and add `extra.sweep` to every stage's summary.json (atomically).
pub fn write(
    dir: &std::path::Path,
    sweep: &SweepSummary,
) -> Result<(), crate::artifact::ArtifactError> {
    for st in &sweep.stages {
        let stage_dir = dir.join(&st.dir);
        if let Ok(mut s) = Summary::read(&stage_dir) {
            s.extra.sweep = Some(sweep.stage_section(st.stage));
            crate::rundir::write_summary(&stage_dir, &s)?;
        }
    }
    crate::artifact::write(dir, sweep).map(|_| ())
}

/// What a sweep runs.
#[derive(Clone, Debug)]
pub struct SweepSetup {
    /// The sweep directory (stage run directories go inside it).
    pub dir: std::path::PathBuf,
    pub sweep_id: String,
    pub spec: SweepSpec,
    pub plan: StagePlan,
    /// The objectives that decide the knee (the profile's `[slo]`).
    pub slo: Slo,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LoadMode;

    fn stage(i: usize, load: f64, ttft: f64, failed: u64) -> StageResult {
        let mut s = StageResult {
            stage: i,
            load,
            dir: String::new(),
            run_id: String::new(),
            status: crate::summary::RunStatus::Complete,
            requests: 100,
            ok: 100 - failed,
            failed,
            window_s: Some(1.0),
            requests_per_s: None,
            output_tokens_per_s: None,
            ttft_p99_ms: Some(ttft),
            tpot_p99_ms: Some(10.0),
            e2e_p99_ms: None,
            goodput_ratio: None,
            server_preemptions: None,
            server_kv_cache_usage_max: None,
            server_goodput_ratio: None,
            gpu_utilization_pct: None,
            cost_per_1m_output_tokens: None,
            meets_slo: false,
            violations: vec![],
        };
        let slo = Slo { ttft_ms: Some(200.0), tpot_ms: Some(50.0), e2e_ms: None };
        s.violations = slo_violations(&s, &slo);
        s.meets_slo = s.violations.is_empty();
        s
    }

    #[test]
    fn spec_parsing() {
        let s: SweepSpec = "concurrency=32, 128,256".parse().unwrap();
        assert_eq!(s.dimension, Dimension::Concurrency);
        assert_eq!(s.values, vec![32.0, 128.0, 256.0]);
        assert_eq!(s.to_string(), "concurrency=32,128,256");
        let r: SweepSpec = "rate=0.5,2".parse().unwrap();
        assert_eq!((r.dimension, r.values), (Dimension::Rate, vec![0.5, 2.0]));
        for bad in
            ["concurrency", "qps=1,2", "concurrency=1.5", "concurrency=0,4", "rate=4,2", "rate="]
        {
            assert!(bad.parse::<SweepSpec>().is_err(), "{bad}");
        }
    }

    #[test]
    fn knee_is_the_last_stage_before_the_first_miss() {
        let slo = Slo { ttft_ms: Some(200.0), tpot_ms: Some(50.0), e2e_ms: None };
        let stages =
            vec![stage(1, 32.0, 80.0, 0), stage(2, 128.0, 150.0, 1), stage(3, 256.0, 400.0, 0)];
        assert!(stages[1].meets_slo, "1% failures are tolerated");
        assert_eq!(stages[2].violations, vec!["TTFT p99 400.0 ms > 200 ms".to_string()]);
        assert_eq!(find_knee(&stages, &slo), Some((2, 128.0)));
        // A stage after a miss does not count, even if it meets the SLOs by chance.
        let stages = vec![stage(1, 1.0, 80.0, 0), stage(2, 2.0, 300.0, 0), stage(3, 3.0, 80.0, 0)];
        assert_eq!(find_knee(&stages, &slo), Some((1, 1.0)));
        assert!(!stage(1, 1.0, 80.0, 5).meets_slo, "5% failures miss");
        assert_eq!(find_knee(&[stage(1, 1.0, 900.0, 0)], &slo), None);
        assert_eq!(find_knee(&[stage(1, 1.0, 1.0, 0)], &Slo::default()), None);
    }

    #[test]
    fn stages_drop_their_first_third() {
        let mut p = Profile::default();
        p.workload.input_lengths = vec![128];
        p.workload.repeats = 10;
        let plan = StagePlan::default();
        let o = stage_overrides(Dimension::Concurrency, 8.0, &plan, &p, synthetic_items(&p));
        let get = |o: &[Override], k: &str| o.iter().find(|x| x.key == k).map(|x| x.value.clone());
        // 10 items, but at least 4 x 8 = 32 measured requests, after 16 warmup (a third of 48).
        assert_eq!(get(&o, "load.requests"), Some(toml::Value::Integer(32)));
        assert_eq!(get(&o, "load.warmup_requests"), Some(toml::Value::Integer(16)));
        assert_eq!(get(&o, "load.concurrency"), Some(toml::Value::Integer(8)));
        let plan = StagePlan { warmup_fraction: 1.0 / 3.0, stage_duration_s: Some(180.0) };
        let o = stage_overrides(Dimension::Rate, 4.0, &plan, &p, 10);
        let secs = |k| get(&o, k).and_then(|v| v.as_float()).unwrap();
        assert!((secs("load.warmup_s") - 60.0).abs() < 1e-9);
        assert!((secs("load.duration_s") - 120.0).abs() < 1e-9);
        assert_eq!(get(&o, "load.mode"), Some(toml::Value::String("open".into())));
        // The overrides resolve into a valid profile.
        let cfg = crate::config::BenchConfig::builtin();
        let r = cfg.resolve("default", &o).unwrap();
        assert_eq!(r.profile.load.mode, LoadMode::Open);
        assert_eq!(r.profile.load.rate, Some(4.0));
    }
}
