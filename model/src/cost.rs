//! Cost of a run's measured window from the device price (`summary.cost`).
//!
//! ```text
//! devices        = [device] count of the engine config (default: tensor_parallel_size, else 1)
//! device_seconds = devices x measured window (s)
//! total          = device_seconds x price_per_hour / 3600
//! per_request    = total / successful measured requests
//! per_1m_output  = total / output tokens of the successful measured requests x 1e6
//! ```
//!
//! The price is `[device] price_per_hour` of the engine config recorded for the run (the
//! embedded simulator's own engine config, or a target's `engine_config`). Without a price every
//! money figure is blank (`null`); `devices` and `device_seconds` are still filled when known.
//! The basis is `estimated`: configured price x measured time (a bill may differ).

use crate::summary::{Cost, EngineParams, Summary};

/// Device price and count from the engine parameters recorded in a summary.
pub(crate) fn device_price(engine: Option<&EngineParams>) -> (Option<f64>, Option<u32>) {
    let Some(p) = engine.map(|e| &e.params) else { return (None, None) };
    let price = p.pointer("/device/price_per_hour").and_then(|v| v.as_f64()).filter(|v| *v >= 0.0);
    let count = p
        .pointer("/device/count")
        .and_then(|v| v.as_u64())
        .or_else(|| p.pointer("/engine/tensor_parallel_size").and_then(|v| v.as_u64()))
        .unwrap_or(1) as u32;
    (price, Some(count))
}

/// The cost of a window.
pub fn compute(
    price_per_hour: Option<f64>,
    devices: Option<u32>,
    window_s: Option<f64>,
    ok_requests: u64,
    output_tokens: Option<u64>,
) -> Cost {
    let device_seconds = match (devices, window_s) {
        (Some(d), Some(w)) if w > 0.0 => Some(d as f64 * w),
        _ => None,
    };
    let total = match (price_per_hour, device_seconds) {
        (Some(p), Some(ds)) => Some(ds * p / 3600.0),
        _ => None,
    };
    Cost {
        price_per_hour,
        devices,
        device_seconds,
        total,
        per_request: total.filter(|_| ok_requests > 0).map(|t| t / ok_requests as f64),
        per_1m_output_tokens: match (total, output_tokens) {
            (Some(t), Some(n)) if n > 0 => Some(t / n as f64 * 1e6),
            _ => None,
        },
        basis: total.map(|_| "estimated".to_string()),
    }
}

/// The cost section of a finished summary (from its engine parameters and metrics).
pub fn for_summary(s: &Summary) -> Cost {
    let (price, devices) = device_price(s.engine.as_ref());
    compute(price, devices, s.timing.window.duration_s, s.requests.ok, s.tokens.output_total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn known_price() {
        // 2 GPUs at 3.6 per hour for 10 s: 20 device-seconds = 0.02.
        let c = compute(Some(3.6), Some(2), Some(10.0), 4, Some(2000));
        let close = |a: Option<f64>, b: f64| (a.unwrap() - b).abs() < 1e-12;
        assert_eq!(c.device_seconds, Some(20.0));
        assert!(close(c.total, 0.02), "{c:?}");
        assert!(close(c.per_request, 0.005), "{c:?}");
        assert!(close(c.per_1m_output_tokens, 10.0), "{c:?}");
        assert_eq!(c.basis.as_deref(), Some("estimated"));
    }

    #[test]
    fn unknown_price_is_blank() {
        let c = compute(None, Some(1), Some(10.0), 4, Some(2000));
        assert_eq!(c.device_seconds, Some(10.0));
        assert_eq!(
            (c.total, c.per_request, c.per_1m_output_tokens, c.basis),
            (None, None, None, None)
        );
        let c = compute(Some(1.0), Some(1), None, 0, None);
        assert_eq!((c.device_seconds, c.total), (None, None));
    }

    #[test]
    fn price_and_count_from_engine_params() {
        let e = EngineParams {
            file: "configs/engine.toml".into(),
            params: json!({"engine": {"tensor_parallel_size": 4}, "device": {"price_per_hour": 2.49}}),
            ..EngineParams::default()
        };
        assert_eq!(device_price(Some(&e)), (Some(2.49), Some(4)));
        let e = EngineParams {
            file: "x".into(),
            params: json!({"engine": {}, "device": {"price_per_hour": 1.0, "count": 8}}),
            ..EngineParams::default()
        };
        assert_eq!(device_price(Some(&e)), (Some(1.0), Some(8)));
        assert_eq!(device_price(None), (None, None));
    }
}
