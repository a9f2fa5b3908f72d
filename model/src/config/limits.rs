//! The documented bounds of every number in `configs/bench.toml` and `configs/engine.toml`
//! (docs/configuration.md, "Limits").
//!
//! A value outside its bound is refused when the config is resolved, with the file and line (or
//! the flag) that set it and the valid range, so nothing later converts a huge float to a
//! `Duration`, sizes an allocation from it or runs for centuries.

/// Longest duration anywhere in a config: one week, in seconds.
pub(crate) const MAX_SECONDS: f64 = 604_800.0;
/// [`MAX_SECONDS`] in milliseconds.
pub(crate) const MAX_MS: f64 = MAX_SECONDS * 1e3;
/// [`MAX_SECONDS`] in microseconds.
pub(crate) const MAX_US: f64 = MAX_SECONDS * 1e6;

/// Latest timestamp of a trace record (Mooncake and infergate JSONL in ms, BurstGPT in
/// seconds): a year after the trace's clock starts, in milliseconds. The replayed window's
/// send times (timestamps x `load.time_scale`) must also lie within [`MAX_MS`] of its start.
pub(crate) const MAX_TRACE_MS: f64 = 365.0 * 86_400.0 * 1e3;

/// Deepest nesting of arrays and objects in a workload file's JSON (datasets, conversations,
/// traces, acceptance datasets): serde_json's recursion limit, reported as a located error.
pub(crate) const MAX_JSON_DEPTH: usize = 127;

/// Most concurrent requests (`load.concurrency`, `load.max_concurrency`).
pub(crate) const MAX_CONCURRENCY: u32 = 100_000;
/// Slowest open-loop rate, requests per second (one request every 1000 s).
pub(crate) const MIN_RATE: f64 = 0.001;
/// Fastest open-loop rate, requests per second.
pub(crate) const MAX_RATE: f64 = 1_000_000.0;
/// Gamma shape range of `load.burstiness`.
pub(crate) const MIN_BURSTINESS: f64 = 0.01;
pub(crate) const MAX_BURSTINESS: f64 = 100.0;
/// Most measured or warmup requests of one run.
pub const MAX_REQUESTS: u64 = 1_000_000_000;

/// Most tokens of one request's prompt or output (`workload.input_lengths`,
/// `workload.max_tokens`, `workload.shared_prefix_tokens`, the simulator's `output_tokens` and
/// `tokens_per_chunk`): 2^20.
pub(crate) const MAX_REQUEST_TOKENS: u32 = 1 << 20;
/// Most synthetic requests in a workload (`input_lengths` entries x `repeats`).
pub const MAX_WORKLOAD_ITEMS: u64 = 10_000_000;

/// Most tokens of an engine's context or step (`engine.max_model_len`,
/// `scheduler.max_num_batched_tokens`, `batch.max_token_budget`): 2^24.
pub(crate) const MAX_ENGINE_TOKENS: u32 = 1 << 24;
/// Most sequences in one engine step (`scheduler.max_num_seqs`).
pub const MAX_NUM_SEQS: u32 = 65_536;
/// Most memory of one GPU (`device.memory_gib`).
pub const MAX_MEMORY_GIB: f64 = 1024.0;
/// Most GPUs on a machine (`device.count`).
pub(crate) const MAX_DEVICE_COUNT: u32 = 4096;
/// Highest price of one GPU per hour (`device.price_per_hour`).
pub(crate) const MAX_PRICE_PER_HOUR: f64 = 1_000_000.0;

/// Most trials of one trial set (`trials`, `--trials`, `--max-trials`).
pub const MAX_TRIALS: u32 = 1000;

/// Largest coefficient of variation of the simulator's noise factors (`sim.noise.step_cv`,
/// `run_cv`).
pub(crate) const MAX_NOISE_CV: f64 = 1.0;

/// Whether a range's lower end is included.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Low {
    /// `[lo, hi]`
    Closed,
    /// `(lo, hi]`
    Open,
}

/// A number outside its documented bound: the value found and the range, with its unit. The
/// message reads `must be within (0, 604800] seconds (a week), got 1e300`.
#[derive(Clone, Debug, PartialEq)]
pub enum OutOfRange {
    Float { got: f64, low: Low, lo: f64, hi: f64, unit: &'static str },
    Int { got: u64, lo: u64, hi: u64, unit: &'static str },
}

impl std::fmt::Display for OutOfRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            OutOfRange::Float { got, low, lo, hi, unit } => {
                let open = if low == Low::Closed { "[" } else { "(" };
                let week = if hi == MAX_SECONDS || hi == MAX_MS || hi == MAX_US {
                    " (a week)"
                } else {
                    ""
                };
                write!(f, "must be within {open}{lo}, {hi}] {unit}{week}, got {}", number(got))
            }
            OutOfRange::Int { got, lo, hi, unit } => {
                let space = if unit.is_empty() { "" } else { " " };
                write!(f, "must be within {lo}..={hi}{space}{unit}, got {got}")
            }
        }
    }
}

impl std::error::Error for OutOfRange {}

/// Check that `v` lies within `lo..=hi` (or `(lo, hi]`).
pub(crate) fn check_f64(
    v: f64,
    low: Low,
    lo: f64,
    hi: f64,
    unit: &'static str,
) -> Result<(), OutOfRange> {
    let above_low = match low {
        Low::Closed => v >= lo,
        Low::Open => v > lo,
    };
    if v.is_finite() && above_low && v <= hi {
        return Ok(());
    }
    Err(OutOfRange::Float { got: v, low, lo, hi, unit })
}

/// A number as users would write it: `1e300` rather than 301 digits.
pub fn number(v: f64) -> String {
    let a = v.abs();
    if a.is_finite() && a != 0.0 && !(1e-4..1e15).contains(&a) {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

/// Check that `v` lies within `lo..=hi`.
pub(crate) fn check_int(v: u64, lo: u64, hi: u64, unit: &'static str) -> Result<(), OutOfRange> {
    if (lo..=hi).contains(&v) { Ok(()) } else { Err(OutOfRange::Int { got: v, lo, hi, unit }) }
}

/// A duration in seconds, at most a week; `zero` says whether 0 is allowed.
pub fn seconds(v: f64, zero: bool) -> Result<(), OutOfRange> {
    check_f64(v, if zero { Low::Closed } else { Low::Open }, 0.0, MAX_SECONDS, "seconds")
}

/// A duration in milliseconds, at most a week; `zero` says whether 0 is allowed.
pub(crate) fn millis(v: f64, zero: bool) -> Result<(), OutOfRange> {
    check_f64(v, if zero { Low::Closed } else { Low::Open }, 0.0, MAX_MS, "ms")
}

/// A duration in microseconds (0 allowed), at most a week.
pub(crate) fn micros(v: f64) -> Result<(), OutOfRange> {
    check_f64(v, Low::Closed, 0.0, MAX_US, "µs")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_refuse_nan_infinities_and_out_of_range_values_with_the_range() {
        assert_eq!(seconds(1.0, false), Ok(()));
        assert_eq!(seconds(MAX_SECONDS, false), Ok(()));
        assert_eq!(seconds(0.0, true), Ok(()));
        let e = seconds(0.0, false).unwrap_err().to_string();
        assert_eq!(e, "must be within (0, 604800] seconds (a week), got 0");
        let e = seconds(1e300, true).unwrap_err().to_string();
        assert_eq!(e, "must be within [0, 604800] seconds (a week), got 1e300");
        for v in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -1.0, MAX_SECONDS + 1.0] {
            assert!(seconds(v, true).is_err(), "{v}");
        }
        assert!(millis(MAX_MS, false).is_ok() && millis(MAX_MS * 1.001, false).is_err());
        assert!(micros(MAX_US).is_ok() && micros(-0.5).is_err());
        let e = check_f64(1e-300, Low::Closed, MIN_RATE, MAX_RATE, "requests per second");
        assert_eq!(
            e.unwrap_err().to_string(),
            "must be within [0.001, 1000000] requests per second, got 1e-300"
        );
        assert_eq!(
            check_int(0, 1, 5, "x").unwrap_err().to_string(),
            "must be within 1..=5 x, got 0"
        );
        assert_eq!(check_int(9, 1, 5, "").unwrap_err().to_string(), "must be within 1..=5, got 9");
        assert!(check_int(5, 1, 5, "x").is_ok());
    }

    #[test]
    fn a_week_of_the_largest_values_converts_to_a_duration() {
        // The bounds exist so these conversions cannot panic.
        let _ = std::time::Duration::from_secs_f64(MAX_SECONDS);
        let _ = std::time::Duration::from_secs_f64(MAX_MS / 1e3 * MAX_REQUEST_TOKENS as f64);
        let _ = std::time::Duration::from_secs_f64(1.0 / MIN_RATE);
    }
}
