//! What the unit tests of several modules build alike.

use infergate_model::stats::{Estimate, Method};

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
