//! Acceptance of an accelerated engine (a candidate, e.g. fp8) against a baseline (e.g. fp16):
//! the same requests against both, in three layers, each a gate with its action. A failed layer
//! stops the later ones unless `all` is set. Documented in `docs/acceptance.md`.
//!
//! | layer | check | default threshold | action when failed |
//! |---|---|---|---|
//! | numeric | cosine similarity of log-prob vectors, every position | >= 0.9995 | stop the build |
//! | numeric | max relative error, every position | <= 1e-3 | flag operator overflow |
//! | engine | candidate TTFT p99 | <= 200 ms | roll back engine config |
//! | engine | candidate ITL jitter (stdev / mean) | <= 0.15 | inspect the scheduler |
//! | engine | candidate stream integrity violations | = 0 | inspect the stream (disorder) |
//! | business | candidate JSON Schema pass rate | >= 0.99 | refuse release |
//! | business | judge similarity, mean (optional) | >= 0.95 | manual review (never gating) |
//!
//! The run directory:
//!
//! ```text
//! <dir>/acceptance.json            the whole report (AcceptanceReport)
//! <dir>/baseline/, <dir>/candidate/ normal run directories of the engine/business requests
//!                                   (summary.json with extra.acceptance, requests.jsonl, ...)
//! <dir>/numeric.jsonl              per item: positions compared, worst cos / rtol, divergence
//! <dir>/business-failures.jsonl    every structured output that failed its schema
//! ```

pub mod business;
pub mod dataset;
pub mod driver;
pub mod numeric;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use infergate_model::summary::{
    AcceptanceSection, BusinessVerdict, Divergence, EngineVerdict, NumericVerdict,
};

pub const REPORT_FILE: &str = "acceptance.json";
pub(crate) const NUMERIC_FILE: &str = "numeric.jsonl";
pub(crate) const FAILURES_FILE: &str = "business-failures.jsonl";
pub(crate) const REPORT_SCHEMA_VERSION: u32 = 1;

/// Every threshold of the three layers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AcceptThresholds {
    pub cos_min: f64,
    pub rtol_max: f64,
    pub ttft_p99_ms: f64,
    pub itl_jitter_max: f64,
    pub schema_pass_rate_min: f64,
    pub judge_min: f64,
}

impl Default for AcceptThresholds {
    fn default() -> Self {
        AcceptThresholds {
            cos_min: 0.9995,
            rtol_max: 1e-3,
            ttft_p99_ms: 200.0,
            itl_jitter_max: 0.15,
            schema_pass_rate_min: 0.99,
            judge_min: 0.95,
        }
    }
}

impl AcceptThresholds {
    pub fn numeric(&self) -> numeric::NumericThresholds {
        numeric::NumericThresholds { cos_min: self.cos_min, rtol_max: self.rtol_max }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LayerOutcome {
    Pass,
    Fail,
    /// Not evaluated because an earlier layer failed (and `--all` was not given).
    Skipped,
    /// Not evaluated because its input is missing (no targets, no structured item).
    NotRun,
}

impl LayerOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            LayerOutcome::Pass => "pass",
            LayerOutcome::Fail => "fail",
            LayerOutcome::Skipped => "skipped",
            LayerOutcome::NotRun => "not_run",
        }
    }
}

/// One threshold check.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LayerCheck {
    pub name: String,
    /// The measured value (null: not measured, which fails a gating check).
    pub value: Option<f64>,
    /// `>=` or `<=`.
    pub op: String,
    pub threshold: f64,
    pub passed: bool,
    /// False for checks that are reported only (the judge).
    pub gating: bool,
    /// What to do when it fails.
    pub action: String,
}

impl LayerCheck {
    pub fn at_least(name: &str, value: Option<f64>, threshold: f64, action: &str) -> LayerCheck {
        LayerCheck {
            name: name.into(),
            value,
            op: ">=".into(),
            threshold,
            passed: value.is_some_and(|v| v >= threshold),
            gating: true,
            action: action.into(),
        }
    }

    pub fn at_most(name: &str, value: Option<f64>, threshold: f64, action: &str) -> LayerCheck {
        LayerCheck {
            name: name.into(),
            value,
            op: "<=".into(),
            threshold,
            passed: value.is_some_and(|v| v <= threshold),
            gating: true,
            action: action.into(),
        }
    }

    pub(crate) fn reported_only(mut self) -> LayerCheck {
        self.gating = false;
        self
    }
}

/// One layer's outcome.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Layer {
    /// `numeric`, `engine` or `business`.
    pub name: String,
    pub verdict: LayerOutcome,
    pub checks: Vec<LayerCheck>,
    /// Layer-specific numbers (see docs/acceptance.md).
    pub details: Value,
    pub notes: Vec<String>,
}

impl Layer {
    /// A layer decided by its gating checks.
    pub fn evaluated(
        name: &str,
        checks: Vec<LayerCheck>,
        details: Value,
        notes: Vec<String>,
    ) -> Layer {
        let verdict = if checks.iter().any(|c| c.gating && !c.passed) {
            LayerOutcome::Fail
        } else {
            LayerOutcome::Pass
        };
        Layer { name: name.into(), verdict, checks, details, notes }
    }

    pub fn not_evaluated(name: &str, verdict: LayerOutcome, note: String) -> Layer {
        Layer {
            name: name.into(),
            verdict,
            checks: Vec::new(),
            details: Value::Null,
            notes: vec![note],
        }
    }

    /// Actions of the failed gating checks.
    pub fn actions(&self) -> Vec<String> {
        self.checks
            .iter()
            .filter(|c| c.gating && !c.passed)
            .map(|c| format!("{}: {}", c.name, c.action))
            .collect()
    }

    fn check_value(&self, name: &str) -> Option<f64> {
        self.checks.iter().find(|c| c.name == name).and_then(|c| c.value)
    }
}

/// A target as recorded in the report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TargetRef {
    pub name: String,
    pub url: String,
    pub model: String,
    /// The engine config recorded for it, when known.
    pub engine_config: Option<String>,
}

impl infergate_model::artifact::Artifact for AcceptanceReport {
    const FILE: &'static str = REPORT_FILE;
    const VERSION: u32 = REPORT_SCHEMA_VERSION;
    const VERSION_FIELD: &'static str = "schema_version";
    const WHAT: &'static str = "an acceptance report";
}

/// `acceptance.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AcceptanceReport {
    pub schema_version: u32,
    pub run_id: String,
    pub started_at: String,
    pub baseline: Option<TargetRef>,
    pub candidate: Option<TargetRef>,
    /// Dataset path, item count, structured items, items per category.
    pub dataset: Value,
    /// Sampling, concurrency, log-prob settings, logits files.
    pub settings: Value,
    pub thresholds: AcceptThresholds,
    /// `numeric`, `engine`, `business`, in order.
    pub layers: Vec<Layer>,
    /// True when every gating check of every layer passed (a skipped layer is not a pass).
    pub passed: bool,
    /// What to do, from the failed checks.
    pub actions: Vec<String>,
    pub notes: Vec<String>,
}

impl AcceptanceReport {
    pub fn layer(&self, name: &str) -> Option<&Layer> {
        self.layers.iter().find(|l| l.name == name)
    }

    /// Decide `passed` and `actions` from the layers.
    pub fn conclude(&mut self) {
        self.actions = self.layers.iter().flat_map(Layer::actions).collect();
        self.passed = !self.layers.is_empty()
            && self
                .layers
                .iter()
                .all(|l| matches!(l.verdict, LayerOutcome::Pass | LayerOutcome::NotRun))
            && self.layers.iter().any(|l| l.verdict == LayerOutcome::Pass);
    }

    /// The compact `extra.acceptance` section written into the baseline's and the candidate's
    /// summary.json (`role` says which one it is in).
    pub(crate) fn summary_section(&self, role: &str) -> AcceptanceSection {
        let verdict = |n: &str| self.layer(n).map(|l| l.verdict.as_str().to_string());
        let value = |n: &str, c: &str| self.layer(n).and_then(|l| l.check_value(c));
        // The numeric layer's details are its statistics, written from `NumericStats`.
        let first_divergence = self
            .layer("numeric")
            .and_then(|l| l.details.get("first_divergence"))
            .map(|d| {
                serde_json::from_value::<Option<Divergence>>(d.clone())
                    .expect("the numeric layer's details hold its first divergence")
            })
            .unwrap_or_default();
        AcceptanceSection {
            role: role.to_string(),
            file: format!("../{REPORT_FILE}"),
            run_id: self.run_id.clone(),
            passed: self.passed,
            baseline: self.baseline.as_ref().map(|t| t.name.clone()),
            candidate: self.candidate.as_ref().map(|t| t.name.clone()),
            numeric: NumericVerdict {
                verdict: verdict("numeric"),
                cos_min: value("numeric", "cosine similarity"),
                rtol_max: value("numeric", "max relative error"),
                first_divergence,
            },
            engine: EngineVerdict {
                verdict: verdict("engine"),
                ttft_p99_ms: value("engine", "TTFT p99 (ms)"),
                itl_jitter: value("engine", "ITL jitter"),
                stream_violations: value("engine", "stream integrity violations"),
            },
            business: BusinessVerdict {
                verdict: verdict("business"),
                schema_pass_rate: value("business", "JSON Schema pass rate"),
                judge_mean: value("business", "judge similarity (mean)"),
            },
            actions: self.actions.clone(),
        }
    }
}

/// The numeric layer from its statistics.
pub(crate) fn numeric_layer(
    stats: &numeric::NumericStats,
    th: &AcceptThresholds,
    notes: Vec<String>,
) -> Layer {
    let checks = vec![
        LayerCheck::at_least("cosine similarity", stats.cos_min, th.cos_min, "stop the build"),
        LayerCheck::at_most(
            "max relative error",
            stats.rtol_max,
            th.rtol_max,
            "flag operator overflow",
        ),
    ];
    let details = serde_json::to_value(stats).expect("stats serialize");
    Layer::evaluated("numeric", checks, details, notes)
}

/// The engine layer from the candidate's (and the baseline's, for reference) metrics.
pub(crate) fn engine_layer(
    candidate: &infergate_model::metrics::RunMetrics,
    baseline: &infergate_model::metrics::RunMetrics,
    candidate_integrity: &infergate_model::openai::StreamIntegrity,
    baseline_integrity: &infergate_model::openai::StreamIntegrity,
    th: &AcceptThresholds,
    notes: Vec<String>,
) -> Layer {
    let p99 = |m: &infergate_model::metrics::RunMetrics| m.latency.ttft_ms.as_ref().map(|s| s.p99);
    let checks = vec![
        LayerCheck::at_most(
            "TTFT p99 (ms)",
            p99(candidate),
            th.ttft_p99_ms,
            "roll back engine config",
        ),
        LayerCheck::at_most(
            "ITL jitter",
            candidate.latency.itl_jitter,
            th.itl_jitter_max,
            "inspect the scheduler",
        ),
        LayerCheck::at_most(
            "stream integrity violations",
            (candidate.requests.ok > 0).then_some(candidate_integrity.violations() as f64),
            0.0,
            "inspect the stream (disorder): engine streaming, proxies",
        ),
    ];
    let integrity = |i: &infergate_model::openai::StreamIntegrity| {
        json!({
            "events_after_done": i.events_after_done,
            "content_after_finish": i.content_after_finish,
            "choice_index_changes": i.choice_index_changes,
            "duplicated_events": i.duplicated_events,
            "reordered_events": i.reordered_events,
            "missing_done": i.missing_done,
        })
    };
    let details = json!({
        "candidate": {
            "ttft_p99_ms": p99(candidate),
            "itl_jitter": candidate.latency.itl_jitter,
            "requests": candidate.requests,
            "stream_integrity": integrity(candidate_integrity),
        },
        "baseline": {
            "ttft_p99_ms": p99(baseline),
            "itl_jitter": baseline.latency.itl_jitter,
            "requests": baseline.requests,
            "stream_integrity": integrity(baseline_integrity),
        },
    });
    Layer::evaluated("engine", checks, details, notes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_value_fails_a_gating_check_and_the_judge_never_gates() {
        assert!(!LayerCheck::at_most("x", None, 1.0, "a").passed);
        assert!(LayerCheck::at_most("x", Some(1.0), 1.0, "a").passed);
        assert!(!LayerCheck::at_least("x", Some(0.5), 0.9, "a").passed);
        let l = Layer::evaluated(
            "business",
            vec![
                LayerCheck::at_least("JSON Schema pass rate", Some(1.0), 0.99, "refuse release"),
                LayerCheck::at_least("judge similarity (mean)", Some(0.2), 0.95, "manual review")
                    .reported_only(),
            ],
            Value::Null,
            vec![],
        );
        assert_eq!(l.verdict, LayerOutcome::Pass);
        assert!(l.actions().is_empty());
    }

    #[test]
    fn the_report_concludes_from_its_layers() {
        let th = AcceptThresholds::default();
        let stats = numeric::NumericStats::default();
        let mut r = AcceptanceReport {
            schema_version: REPORT_SCHEMA_VERSION,
            run_id: "r".into(),
            started_at: String::new(),
            baseline: None,
            candidate: None,
            dataset: Value::Null,
            settings: Value::Null,
            thresholds: th.clone(),
            layers: vec![
                numeric_layer(&stats, &th, vec![]),
                Layer::not_evaluated("engine", LayerOutcome::Skipped, "numeric failed".into()),
            ],
            passed: true,
            actions: vec![],
            notes: vec![],
        };
        r.conclude();
        assert!(!r.passed);
        assert_eq!(
            r.actions,
            vec!["cosine similarity: stop the build", "max relative error: flag operator overflow"]
        );
        let s = r.summary_section("candidate");
        assert_eq!(s.numeric.verdict.as_deref(), Some("fail"));
        assert_eq!(s.engine.verdict.as_deref(), Some("skipped"));
        assert_eq!(s.business.verdict, None);
        // As summary.json holds it: the same JSON paths the metric registry reads.
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["numeric"]["verdict"], "fail");
        assert_eq!(v["business"]["verdict"], Value::Null);
        assert_eq!(
            (v["role"].as_str(), v["file"].as_str()),
            (Some("candidate"), Some("../acceptance.json"))
        );
    }

    #[test]
    fn stream_disorder_fails_the_engine_layer() {
        use infergate_model::metrics::{LatencyMetrics, RequestCounts, RunMetrics, Stats};
        let stats = |p99: f64| Stats {
            count: 10,
            mean: p99,
            stdev: 0.0,
            min: p99,
            p50: p99,
            p90: p99,
            p95: p99,
            p99,
            p999: p99,
            max: p99,
        };
        let m = RunMetrics {
            requests: RequestCounts { total: 10, ok: 10, ..Default::default() },
            latency: LatencyMetrics {
                ttft_ms: Some(stats(120.0)),
                itl_jitter: Some(0.05),
                ..Default::default()
            },
            ..Default::default()
        };
        let clean = infergate_model::openai::StreamIntegrity::default();
        let th = AcceptThresholds::default();
        assert_eq!(engine_layer(&m, &m, &clean, &clean, &th, vec![]).verdict, LayerOutcome::Pass);
        let bad = infergate_model::openai::StreamIntegrity {
            reordered_events: 2,
            missing_done: 1,
            ..Default::default()
        };
        let l = engine_layer(&m, &m, &bad, &clean, &th, vec![]);
        assert_eq!(l.verdict, LayerOutcome::Fail);
        assert_eq!(l.checks[2].value, Some(3.0));
        assert_eq!(l.details["candidate"]["stream_integrity"]["reordered_events"], 2);
        assert!(l.actions()[0].contains("disorder"));
        let slow = RunMetrics {
            latency: LatencyMetrics {
                ttft_ms: Some(stats(250.0)),
                itl_jitter: Some(0.3),
                ..Default::default()
            },
            ..m.clone()
        };
        let l = engine_layer(&slow, &m, &clean, &clean, &th, vec![]);
        assert_eq!(
            l.actions(),
            vec!["TTFT p99 (ms): roll back engine config", "ITL jitter: inspect the scheduler"]
        );
    }
}
