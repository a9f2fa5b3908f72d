//! The A/B gate (`infergate_model::ab`) against a known truth: the engine model of the default profile
//! (`configs/engine.toml`, a closed loop of 16, prompts of 128/256/512/1024 tokens, 128 output
//! tokens) with the noise of the statistics tests (every step x a lognormal factor of CV 10%,
//! every run x one of CV 5%, a 20 ms stall in 0.2% of the steps), in virtual time. Each trial
//! is a fresh engine with a noise seed of its own, so nothing but the configuration is shared
//! between the arms. The gate runs at its default settings: the design `Design::plan` makes of
//! the default budget (1920 requests: 20 default-profile trials), the default criteria, a 5%
//! budget over the default metric list, Pocock-type alpha spending on both sides; the same
//! cases are also run with Bonferroni looks and with O'Brien-Fleming-type spending.
//!
//! The truth of each regression is measured on whole default-profile runs (16 warmup and 80
//! measured requests), not on the gate's short trials: "TTFT P99 10% worse" means the P99 of
//! a profile run is 10% higher on average.
//!
//! The figures are printed (`cargo test -p infergate-bench-tests --test it ab_gate --
//! --nocapture`) and reported in docs/statistics.md.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use infergate_model::ab::{
    self, Arm, BudgetCheck, Criteria, Design, Measure, PlanInput, Slot, Spending, Step, TrialValues,
};
use infergate_model::config::NoiseConfig;
use infergate_model::stats::{
    self, Comparator, Direction, LookRule, Options, Verdict, propose_limit, quantile_in_place,
};
use infergate_sim::engine::{Engine, EngineSpec, Load, SimRecord, SimRequest, Simulation};
use rand::SeedableRng;
use rand::seq::SliceRandom;

/// Gated sets of each case at the default settings.
const SETS: u64 = 1000;

/// Sets of each case under the other spending rules: 200 by default, 1000 (the figures in
/// docs/statistics.md) with `AB_COMPARE_SETS=1000`.
fn compare_sets() -> u64 {
    std::env::var("AB_COMPARE_SETS").ok().and_then(|v| v.parse().ok()).unwrap_or(200)
}
const CONCURRENCY: u32 = 16;
const MAX_TOKENS: u32 = 128;
/// SLO of the default profile (goodput).
const SLO_TTFT_MS: f64 = 500.0;
const SLO_TPOT_MS: f64 = 50.0;

fn noise() -> NoiseConfig {
    NoiseConfig { step_cv: 0.10, run_cv: 0.05, stall_probability: 0.002, stall_ms: 20.0, seed: 17 }
}

fn base_spec() -> &'static EngineSpec {
    static SPEC: OnceLock<EngineSpec> = OnceLock::new();
    SPEC.get_or_init(|| {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        EngineSpec::load(&root.join("configs/engine.toml")).expect("configs/engine.toml")
    })
}

/// The default profile's prompt lengths in send order: 4 lengths x 20, shuffled with seed 42.
fn lengths() -> &'static [u32] {
    static L: OnceLock<Vec<u32>> = OnceLock::new();
    L.get_or_init(|| {
        let mut v = Vec::new();
        for _ in 0..20 {
            v.extend_from_slice(&[128, 256, 512, 1024]);
        }
        v.shuffle(&mut rand::rngs::StdRng::seed_from_u64(42));
        v
    })
}

/// Requests `first..first + n` of the workload (cycling) on a fresh engine with `noise_seed`,
/// the first `warmup` of them left out; what finished.
fn simulate(spec: &EngineSpec, first: u32, n: u32, warmup: u32, noise_seed: u64) -> Vec<SimRecord> {
    let l = lengths();
    let requests = (0..warmup + n)
        .map(|i| SimRequest::new(0.0, l[(first + i) as usize % l.len()], MAX_TOKENS))
        .collect();
    let engine = Engine::new(spec).with_noise(&noise().for_trial(noise_seed));
    let load = Load::Closed { concurrency: CONCURRENCY, requests };
    let report = Simulation::with_engine(engine, load).run();
    report.records.into_iter().skip(warmup as usize).collect()
}

/// A trial's values of the default A/B metrics, by their definitions (docs/metrics.md):
/// nearest-rank percentiles, means over the measured requests, output tokens per second of
/// the measured window, the share of requests within the SLO, the share that failed.
fn values(records: &[SimRecord]) -> BTreeMap<String, Option<f64>> {
    let ok: Vec<&SimRecord> = records.iter().filter(|r| r.is_finished()).collect();
    let ms = |f: fn(&SimRecord) -> Option<f64>| -> Vec<f64> {
        ok.iter().filter_map(|r| f(r)).map(|s| s * 1e3).collect()
    };
    let p99 = |mut v: Vec<f64>| quantile_in_place(&mut v, 0.99);
    let (ttft, tpot, e2e) = (ms(SimRecord::ttft), ms(SimRecord::tpot), ms(SimRecord::e2e));
    let start = records.iter().map(|r| r.arrival).fold(f64::INFINITY, f64::min);
    let end = ok.iter().filter_map(|r| r.last_token).fold(0.0, f64::max);
    let tokens: f64 = ok.iter().map(|r| r.delivered_tokens as f64).sum();
    let good = ok
        .iter()
        .filter(|r| {
            r.ttft().unwrap() * 1e3 <= SLO_TTFT_MS && r.tpot().unwrap() * 1e3 <= SLO_TPOT_MS
        })
        .count();
    let n = records.len() as f64;
    [
        ("metrics.ttft_ms.p99", p99(ttft)),
        (
            "metrics.tpot_ms.mean",
            (!tpot.is_empty()).then(|| tpot.iter().sum::<f64>() / tpot.len() as f64),
        ),
        ("metrics.tpot_ms.p99", p99(tpot)),
        ("metrics.e2e_ms.p99", p99(e2e)),
        ("throughput.output_tokens_per_s", (end > start).then(|| tokens / (end - start))),
        ("goodput.ratio", Some(good as f64 / n)),
        ("error_rate", Some((records.len() - ok.len()) as f64 / n)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// The two arms' engines, and a drift of the machine: trial k (from 1) runs `(1 + drift)^(k-1)`
/// times slower.
struct Case {
    name: &'static str,
    candidate: EngineSpec,
    drift: f64,
}

/// One gate's trials in virtual time.
struct VirtualJob<'a> {
    case: &'a Case,
    design: &'a Design,
    seed: u64,
    /// The candidate arm's trials, for the absolute gate beside it.
    candidate_values: Vec<BTreeMap<String, Option<f64>>>,
}

impl Measure for VirtualJob<'_> {
    type Error = stats::StatsError;

    fn warmup(&mut self, _arm: Arm) -> Result<Step<u64>, Self::Error> {
        // Every trial is a fresh engine: the warmup changes nothing but the requests it costs.
        Ok(Step::Done(self.design.warmup_requests as u64))
    }

    fn trial(&mut self, slot: &Slot) -> Result<Step<TrialValues>, Self::Error> {
        let spec = match slot.arm {
            Arm::Baseline => base_spec(),
            Arm::Candidate => &self.case.candidate,
        };
        let drifted;
        let spec = if self.case.drift > 0.0 {
            drifted = spec.slower((1.0 + self.case.drift).powi(slot.trial as i32 - 1));
            &drifted
        } else {
            spec
        };
        let m = self.design.trial_requests;
        let records =
            simulate(spec, slot.first_item, m, 0, self.seed * 100_000 + slot.trial as u64);
        let values = values(&records);
        if slot.arm == Arm::Candidate {
            self.candidate_values.push(values.clone());
        }
        Ok(Step::Done(TrialValues { values, requests: m as u64 }))
    }
}

fn design(spending: Spending, seed: u64) -> Design {
    Design::plan(&PlanInput {
        max_requests: ab::DEFAULT_MAX_REQUESTS,
        warmup_requests: 16,
        items: 80,
        measured: 80,
        trial_requests: None,
        looks: ab::DEFAULT_LOOKS,
        spending,
        seed,
    })
    .unwrap()
}

fn checks() -> Vec<BudgetCheck> {
    ab::default_metrics()
        .iter()
        .map(|&m| BudgetCheck::new(m, ab::DEFAULT_BUDGET, None, true, "--budget 5%").unwrap())
        .collect()
}

/// What the sets of one case came to.
#[derive(Debug, Default)]
struct Rates {
    fail: f64,
    inconclusive: f64,
    mean_trials: f64,
    max_trials: usize,
    mean_requests: f64,
    max_requests: u64,
    /// The absolute gate's blocking fail rate on the candidate arm's trials (drift case).
    absolute_fail: f64,
}

/// One gate: its verdict, trials, requests, and whether the absolute gate failed beside it.
type SetOutcome = (Verdict, usize, u64, bool);

/// Run `sets` gates of a case, on two threads.
fn rates(case: &Case, spending: Spending, sets: u64, absolute: Option<&Absolute>) -> Rates {
    let checks = checks();
    let per_set: Vec<SetOutcome> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2u64)
            .map(|t| {
                let checks = &checks;
                s.spawn(move || {
                    (t..sets)
                        .step_by(2)
                        .map(|set| {
                            let d = design(spending, set);
                            let mut job = VirtualJob {
                                case,
                                design: &d,
                                seed: set,
                                candidate_values: vec![],
                            };
                            let out = ab::run(
                                &d,
                                &Criteria::default(),
                                checks,
                                &BTreeMap::new(),
                                &mut job,
                            )
                            .unwrap();
                            let abs_fail = absolute.is_some_and(|a| a.fails(&job.candidate_values));
                            (
                                out.status.unwrap(),
                                out.progress.trials.len(),
                                out.progress.requests(),
                                abs_fail,
                            )
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    let n = per_set.len() as f64;
    let share =
        |f: &dyn Fn(&SetOutcome) -> bool| per_set.iter().filter(|x| f(x)).count() as f64 / n;
    Rates {
        fail: share(&|x| x.0 == Verdict::Fail),
        inconclusive: share(&|x| x.0 == Verdict::Inconclusive),
        mean_trials: per_set.iter().map(|x| x.1 as f64).sum::<f64>() / n,
        max_trials: per_set.iter().map(|x| x.1).max().unwrap(),
        mean_requests: per_set.iter().map(|x| x.2 as f64).sum::<f64>() / n,
        max_requests: per_set.iter().map(|x| x.2).max().unwrap(),
        absolute_fail: share(&|x| x.3),
    }
}

/// The absolute gate of a record measured before the job: limits proposed (5% headroom, as
/// the statistics tests) from a 3-trial set of whole default-profile runs of the baseline;
/// the job's candidate trials gated as a trial set against them (t interval, 95%).
struct Absolute {
    limits: Vec<(String, Comparator, f64)>,
}

impl Absolute {
    fn new() -> Absolute {
        let runs: Vec<BTreeMap<String, Option<f64>>> =
            (0..3).map(|i| values(&simulate(base_spec(), 0, 80, 16, 9_000_000 + i))).collect();
        let limits = ["metrics.ttft_ms.p99", "metrics.tpot_ms.p99"]
            .iter()
            .map(|m| {
                let per: Vec<f64> = runs.iter().map(|r| r[*m].unwrap()).collect();
                let e = t_estimate(&per);
                let p = propose_limit(&e, 0.05, Direction::LowerIsBetter).unwrap();
                (m.to_string(), p.comparator, p.limit)
            })
            .collect();
        Absolute { limits }
    }

    fn fails(&self, trials: &[BTreeMap<String, Option<f64>>]) -> bool {
        self.limits.iter().any(|(m, cmp, limit)| {
            let per: Vec<f64> = trials.iter().filter_map(|t| t[m]).collect();
            stats::verdict(&t_estimate(&per), *cmp, *limit) == Verdict::Fail
        })
    }
}

fn t_estimate(values: &[f64]) -> stats::Estimate {
    let one: Vec<Vec<f64>> = values.iter().map(|v| vec![*v]).collect();
    let refs: Vec<&[f64]> = one.iter().map(Vec::as_slice).collect();
    stats::mean_estimate(&refs, Options::default()).unwrap()
}

/// The mean of `metric` over whole default-profile runs of `spec` (the truth of a regression).
fn truth(spec: &EngineSpec, metric: &str, runs: u64) -> f64 {
    (0..runs)
        .map(|i| values(&simulate(spec, 0, 80, 16, 5_000_000 + i))[metric].unwrap())
        .sum::<f64>()
        / runs as f64
}

/// The candidate whose `metric` is `ratio` times the baseline's on whole profile runs, by
/// scaling the step-cost terms `scale` picks with a factor found by bisection.
fn calibrated(metric: &str, ratio: f64, scale: fn(&mut EngineSpec, f64)) -> (EngineSpec, f64) {
    const RUNS: u64 = 200;
    let base = truth(base_spec(), metric, RUNS);
    let with = |f: f64| {
        let mut s = base_spec().clone();
        scale(&mut s, f);
        s
    };
    let (mut lo, mut hi) = (1.0, 2.0);
    for _ in 0..10 {
        let mid = 0.5 * (lo + hi);
        if truth(&with(mid), metric, RUNS) / base < ratio { lo = mid } else { hi = mid }
    }
    let spec = with(hi);
    let got = truth(&spec, metric, RUNS) / base;
    (spec, got)
}

fn decode_only(s: &mut EngineSpec, f: f64) {
    let c = &mut s.cost;
    for v in [
        &mut c.step_fixed_ns,
        &mut c.decode_seq_ns,
        &mut c.kv_token_ns,
        &mut c.interval_base_ns,
        &mut c.interval_seq_ns,
    ] {
        *v *= f;
    }
}

fn prefill_only(s: &mut EngineSpec, f: f64) {
    s.cost.prefill_token_ns *= f;
}

fn show(name: &str, rule: &str, r: &Rates) {
    println!(
        "{name:<28} {rule:<16} fail {:>5.1}%  inconclusive {:>5.1}%  trials mean {:>5.1} max {:>3}  \
         requests mean {:>6.0} max {:>4}",
        r.fail * 100.0,
        r.inconclusive * 100.0,
        r.mean_trials,
        r.max_trials,
        r.mean_requests,
        r.max_requests
    );
}

/// The cases: an unchanged candidate, a decode-only and a prefill-only one calibrated to 10%
/// worse on whole profile runs, every step 5% slower, and an unchanged one on a machine that
/// drifts 1% slower per trial.
fn cases() -> &'static [Case] {
    static CASES: OnceLock<Vec<Case>> = OnceLock::new();
    CASES.get_or_init(|| {
        let (tpot_worse, tpot_truth) = calibrated("metrics.tpot_ms.mean", 1.10, decode_only);
        let (ttft_worse, ttft_truth) = calibrated("metrics.ttft_ms.p99", 1.10, prefill_only);
        println!(
            "truth on whole profile runs: decode-only candidate TPOT mean x{tpot_truth:.4}, \
             prefill-only candidate TTFT P99 x{ttft_truth:.4}"
        );
        assert!(tpot_truth >= 1.095 && ttft_truth >= 1.095, "{tpot_truth} {ttft_truth}");
        vec![
            Case { name: "unchanged", candidate: base_spec().clone(), drift: 0.0 },
            Case { name: "TPOT mean 10% worse", candidate: tpot_worse, drift: 0.0 },
            Case { name: "TTFT P99 10% worse", candidate: ttft_worse, drift: 0.0 },
            Case { name: "5% worse (every step)", candidate: base_spec().slower(1.05), drift: 0.0 },
            Case { name: "unchanged, 1%/trial drift", candidate: base_spec().clone(), drift: 0.01 },
        ]
    })
}

/// Every case under one spending; the drift case also gated absolutely.
fn all_cases(label: &str, spending: Spending, sets: u64) -> BTreeMap<&'static str, Rates> {
    static ABSOLUTE: OnceLock<Absolute> = OnceLock::new();
    let absolute = ABSOLUTE.get_or_init(Absolute::new);
    let mut out = BTreeMap::new();
    for case in cases() {
        let abs = (case.drift > 0.0).then_some(absolute);
        let r = rates(case, spending, sets, abs);
        show(case.name, label, &r);
        if abs.is_some() {
            println!(
                "{:<28} {label:<16} absolute gate on the candidate's trials: blocking fail {:.1}%",
                "",
                r.absolute_fail * 100.0
            );
        }
        out.insert(case.name, r);
    }
    out
}

#[test]
fn the_ab_gate_fails_ten_percent_regressions_and_passes_unchanged_configurations() {
    let d = design(Spending::default(), 0);
    println!(
        "design: {} blocks of 4 trials x {} requests, looks after {:?} blocks, budget {} requests",
        d.blocks, d.trial_requests, d.looks, d.max_requests
    );
    let r = all_cases("default", Spending::default(), SETS);
    let u = &r["unchanged"];
    assert!(u.fail <= 0.01 && u.inconclusive <= 0.05, "unchanged {u:?}");
    assert!(r["TPOT mean 10% worse"].fail >= 0.95, "{:?}", r["TPOT mean 10% worse"]);
    assert!(r["TTFT P99 10% worse"].fail >= 0.95, "{:?}", r["TTFT P99 10% worse"]);
    let drift = &r["unchanged, 1%/trial drift"];
    assert!(drift.fail <= 0.01, "drift {drift:?}");
    // The absolute gate, beside it, is not blind to the drift the A/B cancels.
    assert!(drift.absolute_fail > 0.2, "{drift:?}");
    for (name, rates) in &r {
        assert!(rates.max_requests <= ab::DEFAULT_MAX_REQUESTS, "{name}: {rates:?}");
    }
}

#[test]
fn spending_rules_compared_with_bonferroni_on_the_same_cases() {
    // The same designs and seeds as the default, one rule on both sides. Each keeps its
    // error rates (checked); the figures say what each costs and catches (docs/statistics.md).
    for rule in [LookRule::Bonferroni, LookRule::ObrienFleming] {
        let r = all_cases(rule.as_str(), Spending::both(rule), compare_sets());
        for (name, rates) in &r {
            assert!(rates.max_requests <= ab::DEFAULT_MAX_REQUESTS, "{rule} {name}: {rates:?}");
        }
        assert!(r["unchanged"].fail <= 0.01, "{rule}: {:?}", r["unchanged"]);
    }
}
