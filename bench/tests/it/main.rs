//! The integration tests of `infergate-bench`, in one test binary (one link instead of one per
//! file): each module is one area of the crate, `support` holds what they share.

// Each module uses only part of the shared helpers.
#[allow(dead_code)]
mod support;

mod ab_gate;
#[cfg(feature = "acceptance")]
mod accept;
mod access;
mod cancellation;
mod capacity_statistics;
mod cold_start;
mod config_props;
mod diagnose;
mod engine_metrics;
mod faults;
mod hostile;
mod hostile_connection;
mod noise_statistics;
mod oversized;
mod reader_props;
mod secrets;
mod served;
mod server_side;
mod sessions;
mod shards;
#[cfg(feature = "acceptance")]
mod structured_logprobs;
mod sweep;
#[cfg(feature = "tls")]
mod tls_default;
mod workloads;

/// Built without the `acceptance` feature, the acceptance tests are not compiled: said loudly,
/// and a failure under `CI=true` (`cargo xtask test` builds the tests with every feature).
#[cfg(not(feature = "acceptance"))]
#[test]
fn acceptance_tests_need_the_acceptance_feature() {
    let why = "acceptance tests SKIPPED: built without the `acceptance` feature (use `cargo xtask test`, or `cargo test --workspace --all-features`)";
    assert!(!std::env::var("CI").is_ok_and(|v| v == "true" || v == "1"), "CI=true: {why}");
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "\n*** {why} ***\n");
}
