//! What the unit tests of several modules build alike.

use infergate_model::stats::{Estimate, Method};
use infergate_model::summary::RunStatus;
use infergate_model::sweep::StageResult;

/// An estimate of `value` within `[lo, hi]`: a 95% t interval over 3 trials of 300 requests
/// in all. A test that needs another method, count or mark changes it with struct update
/// syntax (`Estimate { trials: 1, ..estimate(v, lo, hi) }`).
pub fn estimate(value: f64, lo: f64, hi: f64) -> Estimate {
    Estimate {
        value,
        lo,
        hi,
        confidence: 0.95,
        trials: 3,
        requests: 300,
        method: Method::TInterval,
        undersampled: false,
    }
}

/// A complete sweep stage of 10 requests, meeting a 200 ms TTFT objective when `ttft` is under it.
pub fn stage(i: usize, load: f64, tput: f64, ttft: Option<f64>) -> StageResult {
    StageResult {
        stage: i,
        load,
        dir: format!("stage-{i:02}"),
        run_id: "r".into(),
        status: RunStatus::Complete,
        requests: 10,
        ok: 10,
        failed: 0,
        window_s: Some(1.0),
        requests_per_s: Some(1.0),
        output_tokens_per_s: Some(tput),
        ttft_p99_ms: ttft,
        tpot_p99_ms: Some(20.0),
        e2e_p99_ms: None,
        goodput_ratio: None,
        server_preemptions: None,
        server_kv_cache_usage_max: None,
        server_goodput_ratio: None,
        gpu_utilization_pct: None,
        cost_per_1m_output_tokens: None,
        meets_slo: ttft.is_some_and(|t| t < 200.0),
        violations: vec![],
    }
}
