//! The integration tests of `xtask`, in one test binary (one link instead of one per file): each
//! module is one command or policy, `support` holds what they share (the CLI runner, fixture
//! runs, git repositories built with git2).

// Each module uses only part of the shared helpers.
#[allow(dead_code)]
mod support;

mod adr_check;
mod adr_props;
mod alerts;
// `bench --capacity` measures the simulator: the runtime build only.
#[cfg(feature = "runtime")]
mod capacity;
// Prometheus and `watch` against the simulator, which only the runtime build has.
#[cfg(feature = "runtime")]
mod alerts_live;
mod capacity_records;
// Reports of runs measured with `bench` (runtime build), in headless Chromium.
#[cfg(feature = "runtime")]
mod browser;
mod cli;
// `bench` is a command of the runtime build only.
#[cfg(feature = "runtime")]
mod cli_bench;
mod cli_grammar;
#[cfg(feature = "runtime")]
mod cli_limits;
#[cfg(feature = "runtime")]
mod cli_out_dir;
#[cfg(feature = "runtime")]
mod cli_proxy;
#[cfg(feature = "runtime")]
mod cli_root;
mod cli_secrets;
#[cfg(feature = "runtime")]
mod cli_sim;
mod compare;
// `dataset refresh` is a command of the runtime build only.
#[cfg(feature = "runtime")]
mod dataset_refresh;
mod deploy;
mod gate;
// `bench ab` measures the simulator: the runtime build only.
#[cfg(feature = "runtime")]
mod gate_ab;
mod gate_history;
#[cfg(feature = "runtime")]
mod gate_noise;
mod history;
mod history_series;
mod import;
mod init;
// Runs measured with `bench`, a command of the runtime build only.
#[cfg(feature = "runtime")]
mod host_target;
mod lint;
// `cargo xtask mcp`, a command of the `mcp` feature (in the default build).
#[cfg(feature = "mcp")]
mod mcp;
mod new;
// Measures trials on the simulator: the runtime build only.
#[cfg(feature = "runtime")]
mod noise;
// Starts real engines through `xtask::engine_process`, which only the runtime build has.
#[cfg(feature = "runtime")]
mod real_engine;

/// Every scenario against llama.cpp (`real_engine::chain`), as one test. Its name sorts first:
/// the harness starts tests in name order, so the chain, the longest part of this binary, holds
/// one thread from the start while the other tests share the rest.
#[cfg(feature = "runtime")]
#[test]
fn a_real_engine_chain() {
    real_engine::chain();
}
mod repo_policy;
// The self-test measures with `bench`, a command of the runtime build only.
#[cfg(feature = "runtime")]
mod selftest;
// The served configuration read back by `bench`, a command of the runtime build only.
#[cfg(feature = "runtime")]
mod served;
// `bench --shard` and `bench merge`, commands of the runtime build only.
#[cfg(feature = "runtime")]
mod shards;
mod sources;
// Its runs are measured with `bench`, a command of the runtime build only.
#[cfg(feature = "runtime")]
mod report;
mod tidy;
mod trial_warmup;
// `tune` runs the simulator, a command of the runtime build only.
#[cfg(feature = "runtime")]
mod tune;
mod workflows;

/// Built without the `acceptance` feature, `cargo xtask accept` refuses to measure and its
/// tests are not compiled: said loudly, and a failure under `CI=true` (`cargo xtask test` builds
/// the tests with every feature).
#[cfg(all(feature = "runtime", not(feature = "acceptance")))]
#[test]
fn acceptance_tests_need_the_acceptance_feature() {
    let why = "acceptance tests SKIPPED: built without the `acceptance` feature (use `cargo xtask test`, or `cargo test --workspace --all-features`)";
    assert!(!std::env::var("CI").is_ok_and(|v| v == "true" || v == "1"), "CI=true: {why}");
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "\n*** {why} ***\n");
}
