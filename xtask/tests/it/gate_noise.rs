//! The gate's verdicts against a known truth: the engine model with seeded noise in virtual
//! time (as in `bench/tests/it/noise_statistics.rs`), each run's TTFT P99 and mean TPOT put
//! into a summary, trial sets of 3 such runs gated by the real gate code
//! (`xtask::thresholds::evaluate`) against limits proposed with `infergate_model::stats::propose_limit`
//! from one trial set (5% headroom).
//!
//! The figures are printed (`cargo test -p xtask --test it gate_noise -- --nocapture`) and
//! reported in docs/statistics.md.

use infergate_model::config::{EngineConfig, NoiseConfig, Source};
use infergate_model::stats::{Direction, Options, min_detectable_change, propose_limit};
use infergate_model::trials::{Trial, TrialSet};
use infergate_sim::engine::{Engine, EngineSpec, Load, SimRequest, Simulation};
use xtask::exit::Status;
use xtask::thresholds::{Action, GateOptions, Threshold, Thresholds, evaluate};

const REQUESTS: usize = 100;
const TRIALS: u64 = 3;
/// Fresh trial sets of each configuration.
const SETS: u64 = 200;
const HEADROOM: f64 = 0.05;

fn spec(factor: f64) -> EngineSpec {
    let text = "[engine]\nmodel = \"meta-llama/Llama-3.1-8B-Instruct\"\nmax_model_len = 4096\n\
        [scheduler]\nmax_num_seqs = 64\n[device]\nname = \"H100-SXM-80GB\"\n";
    let cfg = EngineConfig::from_source(&Source::new("engine.toml", text)).unwrap();
    EngineSpec::new(&cfg).unwrap().slower(factor)
}

fn noise() -> NoiseConfig {
    NoiseConfig { step_cv: 0.10, run_cv: 0.05, stall_probability: 0.002, stall_ms: 20.0, seed: 17 }
}

/// One run in virtual time, as a summary with its TTFT P99 and mean TPOT (ms).
fn run(spec: &EngineSpec, seed: u64) -> infergate_model::Summary {
    let requests = (0..REQUESTS).map(|_| SimRequest::new(0.0, 256, 16)).collect();
    let engine = Engine::new(spec).with_noise(&noise().for_trial(seed));
    let report = Simulation::with_engine(engine, Load::Closed { concurrency: 8, requests }).run();
    let mut ttft: Vec<f64> = report.finished().map(|r| r.ttft().unwrap() * 1e3).collect();
    let tpot: Vec<f64> = report.finished().map(|r| r.tpot().unwrap() * 1e3).collect();
    assert_eq!(ttft.len(), REQUESTS);
    let mut s = crate::support::summary(
        &format!("vt-{seed}"),
        0.0,
        0.0,
        1.0,
        crate::support::engine_params(true, 2048),
    );
    let p99 = infergate_model::stats::quantile_in_place(&mut ttft, 0.99).unwrap();
    let m = s.metrics.ttft_ms.as_mut().unwrap();
    (m.p99, m.count) = (p99, REQUESTS as u64);
    let m = s.metrics.tpot_ms.as_mut().unwrap();
    (m.mean, m.count) = (tpot.iter().sum::<f64>() / tpot.len() as f64, REQUESTS as u64);
    s
}

/// A trial set of 3 runs from `first_seed`.
fn set(spec: &EngineSpec, first_seed: u64) -> TrialSet {
    let trials = (0..TRIALS)
        .map(|i| Trial {
            dir: format!("trial-0{}", i + 1).into(),
            summary: run(spec, first_seed + i),
        })
        .collect();
    TrialSet::from_trials("set".into(), trials)
}

fn threshold(metric: &str, limit: f64, line: usize) -> Threshold {
    Threshold {
        metric: infergate_model::metric::MetricPath::named(metric),
        comparator: infergate_model::stats::Comparator::Le,
        limit,
        unit: "ms".into(),
        action: Action::Block,
        profile: None,
        scenario: Default::default(),
        environment: None,
        load: None,
        adr: 1,
        file: "docs/adr/0001-x.md".into(),
        line,
    }
}

/// Share of `SETS` fresh sets of `spec` the gate fails and leaves undecided.
fn gate_rates(spec: &EngineSpec, thresholds: &Thresholds, base: u64) -> (f64, f64) {
    let (mut failed, mut undecided) = (0, 0);
    for k in 0..SETS {
        let report = evaluate(&set(spec, base + k * TRIALS), thresholds, &GateOptions::default());
        match report.status() {
            Status::PolicyViolated => failed += 1,
            Status::Inconclusive => undecided += 1,
            _ => {}
        }
    }
    (failed as f64 / SETS as f64, undecided as f64 / SETS as f64)
}

#[test]
fn the_gate_rarely_fails_an_unchanged_configuration_and_states_what_it_detects() {
    let baseline = set(&spec(1.0), 2_000_000);
    let metrics = ["metrics.ttft_ms.p99", "metrics.tpot_ms.mean"];
    let named = infergate_model::metric::MetricPath::named;
    let est = baseline.estimates(&metrics.map(named), Options::default());
    let limit = |m: &str| {
        propose_limit(est[&named(m)].estimate.as_ref().unwrap(), HEADROOM, Direction::LowerIsBetter)
            .unwrap()
    };
    let thresholds = Thresholds {
        version: 1,
        thresholds: vec![
            threshold(metrics[0], limit(metrics[0]).limit, 9),
            threshold(metrics[1], limit(metrics[1]).limit, 10),
        ],
        budgets: vec![],
    };
    let (fail, inconclusive) = gate_rates(&spec(1.0), &thresholds, 1_000_000);
    let tpot = est[&named(metrics[1])].estimate.clone().unwrap();
    let mdc = min_detectable_change(&tpot, &limit(metrics[1]), 0.95).unwrap();
    let (worse_fail, worse_inconclusive) = gate_rates(&spec(1.2), &thresholds, 3_000_000);
    eprintln!(
        "unchanged, {SETS} sets: blocking fail {:.1}%, inconclusive {:.1}%; TPOT 20% worse: fail \
         {:.1}%, inconclusive {:.1}%; smallest detectable TPOT change (95% power): {:.1}%",
        fail * 100.0,
        inconclusive * 100.0,
        worse_fail * 100.0,
        worse_inconclusive * 100.0,
        mdc.relative * 100.0
    );
    assert!(fail <= 0.01, "false alarms: {:.1}%", fail * 100.0);
    // A regression of 20% is below what 3 trials at this noise detect: the gate's stated
    // detectable change says so, and the gate does not call it a pass either.
    assert!(mdc.relative > 0.2 || worse_fail >= 0.95, "{mdc:?}, fail {worse_fail}");
    assert!(worse_fail + worse_inconclusive > fail + inconclusive, "the worse TPOT is seen");
}
