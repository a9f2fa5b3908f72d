//! The statistics of repeated trials (`infergate_model::stats`) against a known truth: the engine model
//! with seeded noise (`[sim.noise]`), in virtual time, so hundreds of trial sets run in seconds.
//!
//! One run is a closed loop of 8 clients sending 150 requests (256 prompt tokens, 24 output
//! tokens) to an 8B model on one H100, with noise: every step x a lognormal factor (CV 10%), the
//! whole run x a lognormal factor (CV 5%, run-to-run variance), and a 20 ms stall in 0.2% of the
//! steps. A trial set is 3 such runs (the default trial count), each with its own noise seed.
//!
//! The truth: each method estimates the expected value of a run's statistic (a run's TTFT P99,
//! a run's mean TPOT) under this noise. It is computed here as the average of that statistic
//! over 2000 further runs with seeds no trial set uses: its standard error is under 1/20 of a
//! trial set's interval half-width.
//!
//! The rates are printed (`cargo test -p infergate-bench-tests --test it noise_statistics --
//! --nocapture`) and reported in docs/statistics.md.

use std::sync::OnceLock;

use crate::support::*;
use infergate_model::config::{BenchConfig, NoiseConfig, Source};
use infergate_model::stats::{
    Comparator, Direction, Estimate, Options, PercentileMethod, ProposedLimit, Verdict,
    mean_estimate, min_detectable_change, percentile_estimate, propose_limit, verdict,
};
use infergate_sim::engine::{Engine, EngineSpec, Load, SimRequest, Simulation};

const REQUESTS: usize = 100;
const TRIALS: u64 = 3;
/// Trial sets of the unchanged configuration: at 1000, the binomial standard error of a 95%
/// coverage is 0.7%, so a correct method stays inside 93-97% (the band is ±2.9 of them).
const REPETITIONS: u64 = 1000;
/// Trial sets of each slower configuration (power).
const POWER_REPETITIONS: u64 = 200;
/// The first sets also get the two-level bootstrap's interval, for comparison.
const BOOTSTRAP_SETS: u64 = 200;
const TRUTH_RUNS: u64 = 2000;
const HEADROOM: f64 = 0.05;
/// Seeds of the trial sets start here; the truth's runs use 0..TRUTH_RUNS.
const SETS_SEED: u64 = 1_000_000;
const BASELINE_SEED: u64 = 2_000_000;

fn noise() -> NoiseConfig {
    NoiseConfig { step_cv: 0.10, run_cv: 0.05, stall_probability: 0.002, stall_ms: 20.0, seed: 17 }
}

fn spec() -> &'static EngineSpec {
    static SPEC: OnceLock<EngineSpec> = OnceLock::new();
    SPEC.get_or_init(|| engine_spec(ENGINE_H100))
}

/// The same spec with every step `factor` times longer: TTFT and TPOT `factor` times worse.
fn slower(factor: f64) -> EngineSpec {
    spec().slower(factor)
}

/// One run's per-request TTFT and TPOT, ms.
struct Run {
    ttft: Vec<f64>,
    tpot: Vec<f64>,
}

fn run(spec: &EngineSpec, seed: u64) -> Run {
    run_noisy(spec, &noise(), seed)
}

fn run_noisy(spec: &EngineSpec, noise: &NoiseConfig, seed: u64) -> Run {
    let requests = (0..REQUESTS).map(|_| SimRequest::new(0.0, 256, 16)).collect();
    let engine = Engine::new(spec).with_noise(&noise.for_trial(seed));
    let report = Simulation::with_engine(engine, Load::Closed { concurrency: 8, requests }).run();
    let finished: Vec<_> = report.finished().collect();
    assert_eq!(finished.len(), REQUESTS);
    Run {
        ttft: finished.iter().map(|r| r.ttft().unwrap() * 1e3).collect(),
        tpot: finished.iter().map(|r| r.tpot().unwrap() * 1e3).collect(),
    }
}

/// A trial set's estimates of TTFT P99 and mean TPOT.
struct Set {
    ttft_p99: Estimate,
    tpot_mean: Estimate,
    /// TTFT P99 by the two-level bootstrap, for comparison.
    ttft_p99_bootstrap: Option<Estimate>,
}

fn trial_set(spec: &EngineSpec, first_seed: u64, bootstrap: bool) -> Set {
    let runs: Vec<Run> = (0..TRIALS).map(|i| run(spec, first_seed + i)).collect();
    let ttft: Vec<&[f64]> = runs.iter().map(|r| r.ttft.as_slice()).collect();
    let tpot: Vec<&[f64]> = runs.iter().map(|r| r.tpot.as_slice()).collect();
    let opts = Options { seed: first_seed, ..Options::default() };
    let boot = Options { percentile_method: PercentileMethod::TwoLevelBootstrap, ..opts };
    Set {
        ttft_p99: percentile_estimate(&ttft, 0.99, opts).unwrap(),
        tpot_mean: mean_estimate(&tpot, opts).unwrap(),
        ttft_p99_bootstrap: bootstrap.then(|| percentile_estimate(&ttft, 0.99, boot).unwrap()),
    }
}

/// `count` trial sets of a spec, seeds apart from each other and from the truth's.
fn sets(spec: &EngineSpec, base: u64, count: u64) -> Vec<Set> {
    (0..count).map(|k| trial_set(spec, base + k * TRIALS, k < BOOTSTRAP_SETS)).collect()
}

/// The unchanged configuration's 200 trial sets (shared by the coverage and false-alarm tests).
fn unchanged_sets() -> &'static [Set] {
    static SETS: OnceLock<Vec<Set>> = OnceLock::new();
    SETS.get_or_init(|| sets(spec(), SETS_SEED, REPETITIONS))
}

/// The thresholds `adr new` would propose from one trial set of the unchanged configuration.
fn baseline() -> (Set, ProposedLimit, ProposedLimit) {
    let b = trial_set(spec(), BASELINE_SEED, false);
    let ttft = propose_limit(&b.ttft_p99, HEADROOM, Direction::LowerIsBetter).unwrap();
    let tpot = propose_limit(&b.tpot_mean, HEADROOM, Direction::LowerIsBetter).unwrap();
    (b, ttft, tpot)
}

fn rate(n: usize, of: u64) -> f64 {
    n as f64 / of as f64
}

#[test]
fn noise_is_seeded_bounded_and_off_by_default() {
    let off = NoiseConfig::default();
    let plain = run_noisy(spec(), &off, 0);
    let quiet = run(spec(), 0);
    assert_eq!(run_noisy(spec(), &off, 1).ttft, plain.ttft, "off: no draws at all");
    assert_ne!(quiet.ttft, plain.ttft, "noise on changes the timings");
    assert_eq!(run(spec(), 0).ttft, quiet.ttft, "the same seed gives the same run");
    assert_ne!(run(spec(), 1).tpot, quiet.tpot, "another seed another run");

    // In a profile: `[profile.X.sim.noise]`, bounded, unknown keys refused, errors at the line.
    let cfg = |text: &str| BenchConfig::from_source(Source::new("bench.toml", text));
    let ok = cfg("[profile.n.sim.noise]\nstep_cv = 0.1\nrun_cv = 0.05\nstall_probability = 0.01\n\
         stall_ms = 20\nseed = 3\n")
    .unwrap();
    let p = ok.resolve("n", &[]).unwrap().profile;
    assert_eq!((p.sim.noise.step_cv, p.sim.noise.seed), (0.1, 3));
    assert!(!ok.resolve("default", &[]).unwrap().profile.sim.noise.is_on());
    let err = cfg("[profile.n.sim.noise]\nstep_cv = 0.1\nrun_cv = 3\n")
        .and_then(|c| c.resolve("n", &[]))
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("bench.toml:3:"), "{err}");
    assert!(err.contains("sim.noise.run_cv") && err.contains("[0, 1] CV, got 3"), "{err}");
    let err = cfg("[profile.n.sim.noise]\ncv = 0.1\n")
        .and_then(|c| c.resolve("n", &[]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("bench.toml:2") && err.contains("step_cv"), "{err}");
}

#[test]
fn intervals_of_three_trials_cover_the_true_value_95_percent_of_the_time() {
    // The truth: the average over 2000 independent runs of each run's own statistic.
    let (mut ttft_truth, mut tpot_truth) = (0.0, 0.0);
    for seed in 0..TRUTH_RUNS {
        let r = run(spec(), seed);
        let mut t = r.ttft.clone();
        ttft_truth += infergate_model::stats::quantile_in_place(&mut t, 0.99).unwrap();
        tpot_truth += r.tpot.iter().sum::<f64>() / r.tpot.len() as f64;
    }
    ttft_truth /= TRUTH_RUNS as f64;
    tpot_truth /= TRUTH_RUNS as f64;

    let sets = unchanged_sets();
    let covered =
        |f: &dyn Fn(&Set) -> bool| rate(sets.iter().filter(|s| f(s)).count(), REPETITIONS);
    let ttft = covered(&|s| s.ttft_p99.contains(ttft_truth));
    let tpot = covered(&|s| s.tpot_mean.contains(tpot_truth));
    let boots: Vec<&Estimate> = sets.iter().filter_map(|s| s.ttft_p99_bootstrap.as_ref()).collect();
    let boot = rate(boots.iter().filter(|e| e.contains(ttft_truth)).count(), BOOTSTRAP_SETS);
    let boot_half = boots.iter().map(|e| e.half_width()).sum::<f64>() / boots.len() as f64;
    let mean_half = |f: &dyn Fn(&Set) -> f64| sets.iter().map(f).sum::<f64>() / sets.len() as f64;
    println!(
        "coverage over {REPETITIONS} sets of {TRIALS} trials x {REQUESTS} requests: \
         TTFT P99 {:.1}% (truth {ttft_truth:.2} ms, mean half-width {:.2} ms), TPOT mean {:.1}% \
         (truth {tpot_truth:.3} ms, mean half-width {:.3} ms); two-level bootstrap TTFT P99 \
         {:.1}% of {BOOTSTRAP_SETS} sets (mean half-width {boot_half:.2} ms)",
        ttft * 100.0,
        mean_half(&|s| s.ttft_p99.half_width()),
        tpot * 100.0,
        mean_half(&|s| s.tpot_mean.half_width()),
        boot * 100.0,
    );
    assert!(sets.iter().all(|s| !s.ttft_p99.undersampled), "150 requests suffice for P99");
    assert!((0.93..=0.97).contains(&ttft), "TTFT P99 coverage {ttft}");
    assert!((0.93..=0.97).contains(&tpot), "TPOT mean coverage {tpot}");
}

#[test]
fn thresholds_from_one_trial_set_rarely_fail_the_unchanged_configuration() {
    let (b, ttft_limit, tpot_limit) = baseline();
    println!(
        "baseline: TTFT P99 {} -> limit {} {:.2}; TPOT mean {} -> limit {} {:.3}",
        b.ttft_p99,
        ttft_limit.comparator,
        ttft_limit.limit,
        b.tpot_mean,
        tpot_limit.comparator,
        tpot_limit.limit
    );
    let (mut fails, mut inconclusive) = (0, 0);
    for s in unchanged_sets() {
        let v = [
            verdict(&s.ttft_p99, ttft_limit.comparator, ttft_limit.limit),
            verdict(&s.tpot_mean, tpot_limit.comparator, tpot_limit.limit),
        ];
        if v.contains(&Verdict::Fail) {
            fails += 1;
        } else if v.contains(&Verdict::Inconclusive) {
            inconclusive += 1;
        }
    }
    println!(
        "false alarms over {REPETITIONS} fresh sets: fail {:.1}%, inconclusive {:.1}%",
        rate(fails, REPETITIONS) * 100.0,
        rate(inconclusive, REPETITIONS) * 100.0
    );
    assert!(rate(fails, REPETITIONS) <= 0.01, "{fails} blocking fails");
}

#[test]
fn a_twenty_percent_slower_tpot_fails_or_the_detectable_change_says_it_cannot() {
    let (b, _, tpot_limit) = baseline();
    assert_eq!(tpot_limit.comparator, Comparator::Le);
    let mdc = min_detectable_change(&b.tpot_mean, &tpot_limit, 0.95).unwrap();
    let power_at = |factor: f64, base: u64| {
        let worse = slower(factor);
        let fails = sets(&worse, base, POWER_REPETITIONS)
            .iter()
            .filter(|s| {
                verdict(&s.tpot_mean, tpot_limit.comparator, tpot_limit.limit) == Verdict::Fail
            })
            .count();
        rate(fails, POWER_REPETITIONS)
    };
    let power = power_at(1.2, 3_000_000);
    println!(
        "power: TPOT 20% worse fails in {:.1}% of {POWER_REPETITIONS} sets; smallest detectable \
         change at 95% power {:.1}%",
        power * 100.0,
        mdc.relative * 100.0
    );
    if mdc.relative <= 0.20 {
        assert!(power >= 0.95, "power {power} at 20% although the detectable change is {mdc:?}");
    } else {
        // The statement "a 20% regression is below what this gate detects" holds...
        assert!(power < 0.95, "power {power} at 20%, detectable change {mdc:?}");
        // ...and a regression of the stated size is detected.
        let at_mdc = power_at(1.0 + mdc.relative, 4_000_000);
        println!("power at the detectable change: {:.1}%", at_mdc * 100.0);
        assert!(at_mdc >= 0.95, "power {at_mdc} at the detectable change {mdc:?}");
    }
}
