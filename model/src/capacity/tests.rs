use super::*;
use crate::stats::{Comparator, Verdict};

/// A server whose attainment is 1 up to `capacity` and falls 2% per unit of load above it,
/// with each trial's value moved by `jitter(trial)`.
fn measure(capacity: f64, load: f64, trial: u32, jitter: f64) -> TrialMeasure {
    let truth = if load <= capacity { 1.0 } else { (1.0 - 0.02 * (load - capacity)).max(0.0) };
    let wobble = if trial % 2 == 0 { jitter } else { -jitter };
    TrialMeasure {
        attainment: Some((truth + wobble).clamp(0.0, 1.0)),
        objectives: [("ttft_ms".to_string(), truth), ("tpot_ms".to_string(), 1.0)].into(),
        requests: 100,
        seconds: 1.0,
        ..Default::default()
    }
}

fn run(mut s: Search, f: impl Fn(f64, u32) -> TrialMeasure) -> Search {
    let mut steps = 0;
    while let Step::Measure { probe, load, trial } = s.next_step() {
        s.add_trial(probe, f(load, trial));
        steps += 1;
        assert!(steps < 1000, "the search ends");
    }
    s
}

#[test]
fn grows_by_doubling_then_bisects_to_the_resolution() {
    let spec = CapacitySpec::new(Dimension::Concurrency);
    let s = run(Search::new(spec, 10), |l, t| measure(37.0, l, t, 0.0));
    let loads: Vec<f64> = s.probes.iter().map(|p| p.load).collect();
    assert_eq!(&loads[..7], &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0]);
    assert_eq!(s.stop, Some(StopReason::Resolved));
    let b = s.bracket();
    let (pass, fail) = (b.pass.unwrap(), b.fail.unwrap());
    // 37 passes (attainment 1); 38 falls to 0.98 >= 0.95 ... 40 to 0.94: the true capacity at
    // 0.95 is 39.
    assert!(pass <= 39.0 && fail > 39.0, "{b:?}");
    assert!(fail - pass <= s.spec.step(pass), "{b:?}");
    assert_eq!(s.binding().as_deref(), Some("ttft_ms"));
    // Three trials a probe (all the same: decided at the first look).
    assert!(s.probes.iter().all(|p| p.trials.len() == 3));
    assert_eq!(s.spent_requests, 300 * s.probes.len() as u64);
}

#[test]
fn an_oversaturated_trial_fails_its_probe_at_once() {
    let mut spec = CapacitySpec::new(Dimension::Rate);
    spec.start = 4.0;
    let s = run(Search::new(spec, 10), |l, t| {
        let mut m = measure(100.0, l, t, 0.0);
        m.oversaturated = l >= 8.0;
        m
    });
    let p8 = s.probes.iter().find(|p| p.load == 8.0).unwrap();
    assert_eq!(p8.verdict, Some(Verdict::Fail));
    assert_eq!(p8.trials.len(), 1, "no second trial after over-saturation");
    assert_eq!(p8.binding.as_deref(), Some("oversaturated"));
    assert_eq!(s.bracket().fail, Some(8.0));
    assert!(s.bracket().pass.unwrap() >= 4.0);
}

#[test]
fn a_probe_that_straddles_the_target_adds_trials_then_splits_the_bracket() {
    let mut spec = CapacitySpec::new(Dimension::Concurrency);
    spec.max_trials = 4;
    // At 16 the attainment swings around 0.95 trial to trial: never decided.
    let s = run(Search::new(spec, 10), |l, t| {
        if l == 16.0 {
            let mut m = measure(100.0, l, t, 0.0);
            m.attainment = Some(if t % 2 == 0 { 0.99 } else { 0.91 });
            m
        } else {
            measure(20.0, l, t, 0.0)
        }
    });
    let p16 = s.probes.iter().find(|p| p.load == 16.0).unwrap();
    assert_eq!(p16.verdict, Some(Verdict::Inconclusive));
    assert_eq!(p16.trials.len(), 4);
    assert!(p16.reason.as_deref().unwrap().contains("straddles 0.95"), "{:?}", p16.reason);
    let b = s.bracket();
    assert!(b.pass.unwrap() >= 8.0 && b.fail.unwrap() <= 32.0, "{b:?}");
    // The search probed on both sides of the inconclusive load.
    assert!(s.probes.iter().any(|p| p.load > 16.0 && p.load < 32.0));
}

#[test]
fn two_trials_that_agree_at_the_ceiling_do_not_decide_a_probe() {
    // Near the capacity the run-to-run noise makes some trials meet the SLO with every request
    // and others far from it: at 32 the first two read 1, the rest 0.3. Two equal readings give
    // a t interval of no width; the default minimum of three trials does not pass the load.
    let s = run(Search::new(CapacitySpec::new(Dimension::Concurrency), 10), |l, t| {
        let mut m = measure(1000.0, l, t, 0.0);
        if l >= 32.0 && t > 2 {
            m.attainment = Some(0.3);
        }
        m
    });
    let p32 = s.probes.iter().find(|p| p.load == 32.0).unwrap();
    assert_ne!(p32.verdict, Some(Verdict::Pass), "{p32:?}");
    assert!(p32.trials.len() >= 3);
    assert!(s.bracket().pass.unwrap() < 32.0, "{:?}", s.bracket());
}

#[test]
fn noisy_trials_are_decided_by_their_interval() {
    let spec = CapacitySpec::new(Dimension::Concurrency);
    let s = run(Search::new(spec, 10), |l, t| measure(37.0, l, t, 0.01));
    for p in &s.probes {
        let e = p.attainment.as_ref().unwrap();
        match p.verdict.unwrap() {
            Verdict::Pass => assert!(e.lo >= 0.95, "{p:?}"),
            Verdict::Fail => assert!(e.hi < 0.95, "{p:?}"),
            Verdict::Inconclusive => assert!(e.lo < 0.95 && e.hi >= 0.95, "{p:?}"),
        }
        // Looks at 3, 4 and 5 trials spend alpha: each look's confidence is 1 - 0.05 / 3.
        assert!((e.confidence - (1.0 - 0.05 / 3.0)).abs() < 1e-12);
    }
}

#[test]
fn the_budget_ends_the_search_before_a_probe_it_cannot_pay() {
    let mut spec = CapacitySpec::new(Dimension::Concurrency);
    spec.budget.requests = Some(1000);
    // 10 measured + 5 warmup = 15 a trial at low load, 4 x concurrency above 2.
    let s = run(Search::new(spec.clone(), 10), |l, t| {
        let mut m = measure(1000.0, l, t, 0.0);
        m.requests = spec.trial_requests(l, 10);
        m
    });
    assert_eq!(s.stop, Some(StopReason::Budget));
    assert!(s.spent_requests <= 1000, "{}", s.spent_requests);
    assert_eq!(s.bracket().fail, None);
    spec.budget.requests = Some(20);
    let err = spec.check_budget(10).unwrap_err();
    assert!(err.contains("smaller than one probe: 45 requests (3 trials of 15)"), "{err}");
    spec.budget = "2m".parse().unwrap();
    spec.dimension = Dimension::Rate;
    spec.plan.stage_duration_s = Some(90.0);
    assert!(spec.check_budget(10).unwrap_err().contains("shorter than one probe: 270 s"));
}

#[test]
fn the_range_ends_a_search_that_never_fails_or_never_passes() {
    let mut spec = CapacitySpec::new(Dimension::Concurrency);
    spec.max_load = 48.0;
    let s = run(Search::new(spec.clone(), 10), |l, t| measure(1000.0, l, t, 0.0));
    assert_eq!(s.stop, Some(StopReason::MaxLoad));
    assert_eq!(s.bracket(), Bracket { pass: Some(48.0), fail: None });
    spec.start = 8.0;
    let s = run(Search::new(spec, 10), |_, _| TrialMeasure {
        attainment: Some(0.0),
        requests: 1,
        ..Default::default()
    });
    assert_eq!(s.stop, Some(StopReason::MinLoad));
    let loads: Vec<f64> = s.probes.iter().map(|p| p.load).collect();
    assert_eq!(loads, vec![8.0, 4.0, 2.0, 1.0]);
    assert_eq!(s.bracket(), Bracket { pass: None, fail: Some(1.0) });
}

#[test]
fn a_limit_can_be_the_binding_objective() {
    let mut spec = CapacitySpec::new(Dimension::Concurrency);
    spec.limits.push("metrics.ttft_ms.p99<=350".parse().unwrap());
    let s = run(Search::new(spec, 10), |l, t| {
        let mut m = measure(1000.0, l, t, 0.0);
        m.limits = vec![Some(10.0 * l)];
        m
    });
    let b = s.bracket();
    assert!(b.pass.unwrap() <= 35.0 && b.fail.unwrap() > 35.0, "{b:?}");
    assert_eq!(s.binding().as_deref(), Some("metrics.ttft_ms.p99"));
}

#[test]
fn parsers_and_checks_name_what_is_valid() {
    let l: Limit = "metrics.e2e_ms.p95 < 2000".parse().unwrap();
    assert_eq!((l.metric.as_str(), l.cmp, l.value), ("metrics.e2e_ms.p95", Comparator::Lt, 2000.0));
    assert!("metrics.nope<=1".parse::<Limit>().unwrap_err().contains("not a metric"));
    assert!("metrics.ttft_ms.p99=<1".parse::<Limit>().unwrap_err().contains("comparator"));
    assert!("metrics.ttft_ms.p99".parse::<Limit>().is_err());
    let b: Budget = "5000,20m".parse().unwrap();
    assert_eq!(b, Budget { requests: Some(5000), seconds: Some(1200.0) });
    assert_eq!("90s".parse::<Budget>().unwrap().seconds, Some(90.0));
    for bad in ["", "0", "-5", "1.5", "10x", "5,6", "1m,2m"] {
        assert!(bad.parse::<Budget>().is_err(), "{bad}");
    }
    let mut spec = CapacitySpec::new(Dimension::Concurrency);
    assert!(spec.validate().is_ok());
    for t in [0.0, 1.2, -0.5, f64::NAN] {
        spec.target = t;
        assert_eq!(spec.validate().unwrap_err().0, "--capacity-target");
    }
    spec.target = 1.0;
    spec.start = 1.5;
    assert_eq!(spec.validate().unwrap_err().0, "--capacity-start");
    spec.start = 1.0;
    spec.min_trials = 1;
    assert_eq!(spec.validate().unwrap_err().0, "--capacity-trials");
}

#[test]
fn brackets_separate_only_when_they_share_no_load() {
    let a = Bracket { pass: Some(8.0), fail: Some(10.0) };
    let b = Bracket { pass: Some(12.0), fail: Some(14.0) };
    let c = Bracket { pass: Some(9.0), fail: Some(13.0) };
    assert!(a.separates_from(&b) && b.separates_from(&a));
    assert!(!a.separates_from(&c) && !c.separates_from(&b));
    assert!(a.separates_from(&Bracket { pass: Some(10.0), fail: None }));
    assert_eq!(a.text(), "[8, 10)");
    assert_eq!(Bracket { pass: None, fail: Some(1.0) }.text(), "[, 1)");
}

#[test]
fn capacity_json_reads_back() {
    let spec = CapacitySpec::new(Dimension::Concurrency);
    let s = run(Search::new(spec, 10), |l, t| measure(12.0, l, t, 0.0));
    let f = CapacityFile::new("c1".into(), "default".into(), Slo::default(), s);
    let dir = tempfile::tempdir().unwrap();
    f.write(dir.path()).unwrap();
    assert!(is_capacity_dir(dir.path()));
    assert_eq!(CapacityFile::read(dir.path()).unwrap(), f);
}
