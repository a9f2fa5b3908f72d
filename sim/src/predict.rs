//! The engine model's prediction of a sweep stage in virtual time: what a closed-loop stage at
//! some concurrency should measure, for checking a sweep against the simulator.

/// The engine model's prediction of one closed-loop stage in virtual time (for checking a sweep
/// against the simulator, or predicting where the knee lies before running it).
#[derive(Clone, Debug, PartialEq)]
pub struct Prediction {
    pub load: f64,
    pub output_tokens_per_s: f64,
    pub ttft_p99_ms: Option<f64>,
    pub tpot_p99_ms: Option<f64>,
    pub e2e_p99_ms: Option<f64>,
    pub preemptions: u64,
}

/// Predict a closed-loop stage: `requests` in send order, the first `warmup` excluded from the
/// statistics (as the bench excludes warmup requests). Throughput is over the measured requests'
/// span (first send to last end), as the bench's window.
pub fn predict_closed(
    spec: &crate::engine::EngineSpec,
    concurrency: u32,
    requests: Vec<crate::engine::SimRequest>,
    warmup: usize,
) -> Prediction {
    use crate::engine::{Load, quantile, simulate};
    let report = simulate(spec, Load::Closed { concurrency, requests });
    let measured: Vec<_> = report.records.iter().skip(warmup).filter(|r| r.is_finished()).collect();
    let ttft: Vec<f64> =
        measured.iter().filter_map(|r| Some((r.first_token? - r.arrival) * 1000.0)).collect();
    let tpot: Vec<f64> = measured
        .iter()
        .filter(|r| r.delivered_tokens >= 2)
        .filter_map(|r| {
            Some((r.last_token? - r.first_token?) * 1000.0 / (r.delivered_tokens - 1) as f64)
        })
        .collect();
    let e2e: Vec<f64> =
        measured.iter().filter_map(|r| Some((r.last_token? - r.arrival) * 1000.0)).collect();
    let start = measured.iter().map(|r| r.arrival).fold(f64::INFINITY, f64::min);
    let end = measured.iter().filter_map(|r| r.end).fold(f64::NEG_INFINITY, f64::max);
    let tokens: f64 = measured.iter().map(|r| r.delivered_tokens as f64).sum();
    Prediction {
        load: concurrency as f64,
        output_tokens_per_s: if end > start { tokens / (end - start) } else { 0.0 },
        ttft_p99_ms: quantile(ttft, 0.99),
        tpot_p99_ms: quantile(tpot, 0.99),
        e2e_p99_ms: quantile(e2e, 0.99),
        preemptions: report.stats.preemptions,
    }
}
