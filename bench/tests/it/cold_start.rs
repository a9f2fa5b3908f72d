//! The cold-start rule of trial sets (`infergate_model::trials::cold_start`) against the engine model
//! with seeded noise (`[sim.noise]`), in virtual time: how often it flags a set whose trials
//! all come from a warm engine (false alarms), and how often it flags one whose first trial
//! is slower.
//!
//! One run is the load of `noise_statistics`: a closed loop of 8 clients sending 100 requests
//! (256 prompt tokens, 16 output tokens) to an 8B model on one H100, every step x a lognormal
//! factor (CV 10%), the whole run x a lognormal factor (CV 5%), a 20 ms stall in 0.2% of the
//! steps. The rates are printed (`cargo test -p infergate-bench-tests --test it cold_start --
//! --nocapture`) and reported in docs/statistics.md.

use crate::support::*;
use infergate_model::config::NoiseConfig;
use infergate_model::trials::cold_start;
use infergate_sim::engine::{Engine, EngineSpec, Load, SimRequest, Simulation};

const REQUESTS: usize = 100;
/// Sets of each size: 3 trials (the least the rule judges) and 5.
const SETS: u64 = 400;
const SEED: u64 = 3_000_000;

fn noise() -> NoiseConfig {
    NoiseConfig { step_cv: 0.10, run_cv: 0.05, stall_probability: 0.002, stall_ms: 20.0, seed: 17 }
}

/// The latency metrics the rule reads, as a set's `per_trial` columns are named.
const METRICS: [&str; 6] = [
    "metrics.ttft_ms.mean",
    "metrics.ttft_ms.p99",
    "metrics.tpot_ms.mean",
    "metrics.tpot_ms.p99",
    "metrics.e2e_ms.mean",
    "metrics.e2e_ms.p99",
];

/// One run's value of each of [`METRICS`], ms.
fn run(spec: &EngineSpec, seed: u64) -> [f64; 6] {
    let requests = (0..REQUESTS).map(|_| SimRequest::new(0.0, 256, 16)).collect();
    let engine = Engine::new(spec).with_noise(&noise().for_trial(seed));
    let report = Simulation::with_engine(engine, Load::Closed { concurrency: 8, requests }).run();
    let finished: Vec<_> = report.finished().collect();
    assert_eq!(finished.len(), REQUESTS);
    let col = |f: &dyn Fn(&infergate_sim::engine::SimRecord) -> Option<f64>| -> Vec<f64> {
        finished.iter().map(|r| f(r).unwrap() * 1e3).collect()
    };
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let p99 = |mut v: Vec<f64>| infergate_model::stats::quantile_in_place(&mut v, 0.99).unwrap();
    let (ttft, tpot, e2e) = (col(&|r| r.ttft()), col(&|r| r.tpot()), col(&|r| r.e2e()));
    [mean(&ttft), p99(ttft), mean(&tpot), p99(tpot), mean(&e2e), p99(e2e)]
}

/// Whether a set of `trials` runs (seeds from `first`) is flagged, its first run measured
/// with `cold`.
fn flagged(warm: &EngineSpec, cold: &EngineSpec, trials: u64, first: u64) -> bool {
    let runs: Vec<[f64; 6]> =
        (0..trials).map(|i| run(if i == 0 { cold } else { warm }, first + i)).collect();
    let columns: Vec<Vec<Option<f64>>> =
        (0..METRICS.len()).map(|m| runs.iter().map(|r| Some(r[m])).collect()).collect();
    let named = |m: &&str| infergate_model::metric::MetricPath::named(m);
    cold_start(METRICS.iter().zip(&columns).map(|(m, c)| (named(m), c.as_slice()))).is_some()
}

/// Of `SETS` sets of `trials` runs, how many are flagged.
fn count(warm: &EngineSpec, cold: &EngineSpec, trials: u64, base: u64) -> usize {
    (0..SETS).filter(|k| flagged(warm, cold, trials, base + k * trials)).count()
}

#[test]
fn warm_sets_are_not_flagged_and_a_slow_first_trial_is() {
    let warm = engine_spec(ENGINE_H100);
    for trials in [3, 5] {
        let alarms = count(&warm, &warm, trials, SEED + trials * 100_000);
        println!("cold start, {trials} warm trials: {alarms} of {SETS} sets flagged");
        assert_eq!(alarms, 0, "false alarms on sets of {trials} warm trials");
    }
    // A first trial 3x slower (the walkthrough's llama.cpp set is 6x) is always flagged. One
    // with steps 1.3x longer mostly is not: under the rule's ratio, except where queueing
    // makes its TTFT grow by more than its steps (21 of 400 sets with these seeds).
    let cold = warm.slower(3.0);
    let caught = count(&warm, &cold, 3, SEED + 900_000);
    println!("cold start, first of 3 trials 3x slower: {caught} of {SETS} sets flagged");
    assert_eq!(caught, SETS as usize);
    let mild = warm.slower(1.3);
    let flagged_mild = count(&warm, &mild, 3, SEED + 950_000);
    println!("cold start, first of 3 trials 1.3x slower: {flagged_mild} of {SETS} sets flagged");
    assert!(flagged_mild < SETS as usize / 10, "{flagged_mild}");
}
