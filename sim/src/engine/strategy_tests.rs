//! Virtual-time tests of the batching strategies: serial, fixed, token budget, continuous, the
//! decision log and out-of-memory batches. Deterministic and bounded; none measures wall time.

use std::collections::BTreeSet;

use super::*;
use infergate_model::config::{EngineConfig, Source};

/// An 8B model on one H100 with a `[batch]` section (and extra `[scheduler]` lines).
fn with_batch(batch: &str, scheduler: &str) -> EngineSpec {
    let text = format!(
        "[engine]\nmodel = \"meta-llama/Llama-3.1-8B-Instruct\"\nmax_model_len = 8192\n\
         [scheduler]\n{scheduler}\n[batch]\n{batch}\n[device]\nname = \"H100-SXM-80GB\"\n"
    );
    let cfg = EngineConfig::from_source(&Source::new("engine.toml", text))
        .unwrap_or_else(|e| panic!("{e}"));
    EngineSpec::new(&cfg).unwrap_or_else(|e| panic!("{e}"))
}

fn run_logged(spec: &EngineSpec, load: Load) -> (SimReport, Vec<Decision>) {
    let mut sim = Simulation::new(spec, load);
    sim.record_decisions(true);
    sim.run_until(f64::INFINITY);
    let log = sim.take_decisions();
    (sim.report(), log)
}

/// A closed loop of 16 clients over 64 requests of mixed prompt lengths.
fn closed_mixed() -> Load {
    let requests =
        (0..64).map(|i| SimRequest::new(0.0, [256, 512, 1024, 128][i % 4], 128)).collect();
    Load::Closed { concurrency: 16, requests }
}

#[test]
fn the_strategy_comes_from_the_config() {
    let s = with_batch("strategy = \"fixed\"\nfixed_batch_size = 4\nmax_wait_ms = 20", "");
    assert_eq!(s.strategy, Strategy::Fixed { size: 4, max_wait: 20_000_000 });
    assert_eq!(Engine::new(&s).scheduler_name(), "fixed");
    assert!(s.describe().contains("fixed batches of 4 requests"), "{}", s.describe());
    let s = with_batch("strategy = \"fixed\"", "max_num_seqs = 4");
    assert_eq!(s.strategy, Strategy::Fixed { size: 4, max_wait: 50_000_000 }, "capped default");
    let s = with_batch("strategy = \"token_budget\"", "");
    assert_eq!(s.strategy, Strategy::TokenBudget { budget: 16384, max_wait: 50_000_000 });
    let s = with_batch("", "");
    assert_eq!(s.strategy, Strategy::Continuous);
    assert_eq!(Engine::new(&s).scheduler_name(), "continuous");
    // A budget below the model's own context length (no max_model_len in the file).
    let cfg = EngineConfig::from_source(&Source::new(
        "engine.toml",
        "[engine]\nmodel = \"llama-3.1-8b\"\n[batch]\nstrategy = \"token_budget\"\n\
         max_token_budget = 8192\n[device]\nname = \"H100\"\n",
    ))
    .unwrap();
    let err = EngineSpec::new(&cfg).unwrap_err();
    assert_eq!(err.key, "batch.max_token_budget");
    assert!(err.message.contains("131072"), "{err}");
}

#[test]
fn serial_has_no_batching_wait_and_the_lowest_throughput() {
    // Open load: each request starts exactly when the engine is free of the one before it.
    let serial = with_batch("strategy = \"serial\"", "");
    let times = [0.0, 0.05, 0.1, 0.12, 3.0, 3.01, 9.0];
    let load = Load::Open(times.iter().map(|&t| SimRequest::new(t, 300, 40)).collect());
    let (report, log) = run_logged(&serial, load);
    let mut prev_end: f64 = 0.0;
    for r in &report.records {
        assert!(r.is_finished());
        assert_eq!(r.scheduled, Some(r.arrival.max(prev_end)), "{r:?}");
        prev_end = r.last_token.unwrap();
    }
    assert_eq!(report.records[0].queue_time(), Some(0.0));
    assert_eq!(report.records[4].queue_time(), Some(0.0), "an idle engine takes it at once");
    assert!(log.iter().all(|d| d.seqs <= 1));
    assert!(log.iter().all(|d| d.decision != DecisionKind::Wait), "serial never holds a batch");
    assert_eq!(report.stats.batches, times.len() as u64);

    // Closed loop, same inputs: serial has the lowest throughput of the four.
    let tput = |batch: &str| {
        let report = simulate(&with_batch(batch, ""), closed_mixed());
        assert_eq!(report.finished().count(), 64, "{batch}");
        report.output_tokens_per_s()
    };
    let serial = tput("strategy = \"serial\"");
    let fixed = tput("strategy = \"fixed\"\nfixed_batch_size = 8");
    let budget = tput("strategy = \"token_budget\"\nmax_token_budget = 16384");
    let continuous = tput("strategy = \"continuous\"");
    println!(
        "output tok/s: serial {serial:.0}, fixed {fixed:.0}, token_budget {budget:.0}, \
         continuous {continuous:.0}"
    );
    assert!(serial < fixed && serial < budget && serial < continuous);
    assert!(continuous > fixed, "continuous batching keeps the batch full");
}

#[test]
fn a_long_fixed_window_raises_ttft_by_up_to_the_window_at_low_load() {
    // Low load: one request per second, each alone in the engine.
    let low = || Load::Open((0..10).map(|i| SimRequest::new(i as f64, 200, 20)).collect());
    let base = simulate(&with_batch("strategy = \"continuous\"", ""), low());
    for wait_ms in [50.0, 200.0] {
        let batch = format!("strategy = \"fixed\"\nfixed_batch_size = 8\nmax_wait_ms = {wait_ms}");
        let fixed = simulate(&with_batch(&batch, ""), low());
        for (f, c) in fixed.records.iter().zip(&base.records) {
            let delta = f.ttft().unwrap() - c.ttft().unwrap();
            // The request waits the whole window for company that never comes.
            assert!((delta - wait_ms / 1e3).abs() < 1e-6, "{wait_ms} ms window: +{delta} s");
            assert!((f.queue_time().unwrap() - wait_ms / 1e3).abs() < 1e-6);
        }
    }
    // When the batch fills at once the window costs nothing: a burst of 8 starts immediately.
    let burst = || Load::Open((0..8).map(|_| SimRequest::new(0.5, 200, 20)).collect());
    let fixed = simulate(
        &with_batch("strategy = \"fixed\"\nfixed_batch_size = 8\nmax_wait_ms = 200", ""),
        burst(),
    );
    assert!(fixed.records.iter().all(|r| r.queue_time() == Some(0.0)));
    // Under load, a request never waits for the window longer than the window itself.
    let mut t = 0.0;
    let reqs: Vec<SimRequest> = (0..42)
        .map(|i| {
            t += [0.005, 0.005, 0.005, 0.6, 0.01, 0.5][i % 6];
            SimRequest::new(t, 200, 20)
        })
        .collect();
    let (report, log) = run_logged(
        &with_batch("strategy = \"fixed\"\nfixed_batch_size = 4\nmax_wait_ms = 200", ""),
        Load::Open(reqs),
    );
    assert_eq!(report.finished().count(), 42);
    for d in log.iter().filter(|d| d.decision == DecisionKind::Wait) {
        assert_eq!(d.wait_reason.as_deref(), Some("filling_batch"));
        assert!(d.wake_at_ms.unwrap() - d.t_ms <= 200.0 + 1e-6, "{d:?}");
    }
    assert!(log.iter().any(|d| d.formed == Some(FormReason::Full)));
    assert!(log.iter().any(|d| d.formed == Some(FormReason::WindowClosed)));
}

#[test]
fn token_budget_batches_never_exceed_their_budget() {
    let budget = 8192u64;
    let spec = with_batch(
        &format!("strategy = \"token_budget\"\nmax_token_budget = {budget}\nmax_wait_ms = 30"),
        "",
    );
    let prompts = [100u32, 700, 1500, 300, 2500, 60];
    let reqs = (0..120)
        .map(|i| SimRequest::new(i as f64 * 0.02, prompts[i % prompts.len()], 64))
        .collect();
    let (report, log) = run_logged(&spec, Load::Open(reqs));
    assert_eq!(report.finished().count(), 120);
    let formed: Vec<&Decision> = log.iter().filter(|d| d.formed.is_some()).collect();
    assert_eq!(formed.len() as u64, report.stats.batches);
    let mut full = 0;
    for d in &formed {
        let tokens: u64 = d
            .admitted
            .iter()
            .map(|a| (a.request.prompt_tokens + a.request.max_tokens) as u64)
            .sum();
        assert_eq!(d.batch_tokens, Some(tokens));
        assert!(tokens <= budget, "batch {:?}: {tokens} tokens", d.batch);
        if d.formed == Some(FormReason::Full) {
            full += 1;
        }
    }
    assert!(full > 0, "the budget binds under this load");
    // While a batch runs, nothing joins it.
    let mut members: BTreeSet<u64> = BTreeSet::new();
    let mut current = None;
    for d in log.iter().filter(|d| d.decision == DecisionKind::Step) {
        if d.batch != current {
            current = d.batch;
            members.clear();
            assert!(d.formed.is_some(), "a new batch starts with its forming step");
        } else {
            assert!(d.admitted.is_empty(), "{d:?}");
        }
        members.extend(d.admitted.iter().map(|a| a.request.id));
        assert!(d.seqs as usize <= members.len());
    }
}

/// An 8B model with just enough GPU memory for ~215 KV blocks (~3,400 tokens).
fn small_kv(batch: &str) -> EngineSpec {
    let text = format!(
        "[engine]\nmodel = \"meta-llama/Llama-3.1-8B-Instruct\"\nmax_model_len = 2048\n\
         gpu_memory_utilization = 0.207\n[scheduler]\nmax_num_seqs = 16\n\
         max_num_batched_tokens = 2048\n[batch]\n{batch}\n[device]\nname = \"H100-SXM-80GB\"\n"
    );
    let cfg = EngineConfig::from_source(&Source::new("engine.toml", text)).unwrap();
    EngineSpec::new(&cfg).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn an_out_of_memory_batch_fails_only_its_requests_and_is_in_the_decision_log() {
    let spec = small_kv("strategy = \"fixed\"\nfixed_batch_size = 9\nmax_wait_ms = 100");
    // 400 tokens = 25 blocks per request: 8 fit the pool, 9 do not.
    assert!((200..225).contains(&spec.num_blocks), "{} blocks", spec.num_blocks);
    let mut reqs: Vec<SimRequest> = vec![SimRequest::new(0.0, 200, 200); 2];
    reqs.extend(vec![SimRequest::new(5.0, 200, 200); 9]);
    reqs.extend(vec![SimRequest::new(10.0, 200, 200); 3]);
    let (report, log) = run_logged(&spec, Load::Open(reqs));
    let failed: Vec<u64> = report
        .records
        .iter()
        .filter(|r| matches!(r.outcome, SimOutcome::Failed { status: 500, .. }))
        .map(|r| r.id)
        .collect();
    assert_eq!(failed, (2..11).collect::<Vec<u64>>(), "exactly the burst's batch fails");
    assert_eq!(report.finished().count(), 5, "the batches before and after it run");
    for r in report.records.iter().filter(|r| !r.is_finished()) {
        assert!(r.first_token.is_none() && r.scheduled.is_none());
        assert_eq!(r.end, Some(5.0));
        match &r.outcome {
            SimOutcome::Failed { message, .. } => {
                assert!(message.contains("out of memory"), "{message}")
            }
            o => panic!("{o:?}"),
        }
    }
    assert_eq!((report.stats.oom_batches, report.stats.failed_requests), (1, 9));
    assert_eq!(report.gauges.kv_blocks_used, 0);
    let ooms: Vec<&Decision> = log.iter().filter(|d| d.decision == DecisionKind::Oom).collect();
    assert_eq!(ooms.len(), 1);
    let oom = ooms[0];
    assert_eq!(oom.batch, Some(2));
    assert_eq!(oom.kv_blocks_needed, Some(9 * 25));
    assert_eq!(oom.batch_tokens, Some(9 * 400));
    assert_eq!(oom.failed.iter().map(|r| r.id).collect::<Vec<_>>(), failed);
    assert!((oom.t_ms - 5000.0).abs() < 1e-6);
    // The report names it.
    let mut sim = Simulation::new(&spec, Load::Open(vec![SimRequest::new(0.0, 200, 200); 9]));
    sim.run_until(f64::INFINITY);
    let rep = sim.engine().scheduler_report();
    assert_eq!((rep.oom_batches, rep.failed_requests, rep.batches), (1, 9, Some(1)));
    let notes = rep.notes();
    assert!(notes[0].contains("fixed batch 1") && notes[0].contains("225 KV blocks"), "{notes:?}");
}

#[test]
fn continuous_batching_preempts_instead_of_failing() {
    let spec = small_kv("strategy = \"continuous\"");
    let report = simulate(&spec, Load::Open(vec![SimRequest::new(0.0, 200, 200); 12]));
    assert_eq!(report.finished().count(), 12);
    assert!(report.stats.preemptions > 0);
    assert_eq!(report.stats.failed_requests, 0);
}

#[test]
fn the_decision_log_accounts_for_every_step_and_says_why_requests_wait() {
    let spec = with_batch("", "max_num_seqs = 4");
    let (report, log) = run_logged(&spec, closed_mixed());
    let steps: Vec<&Decision> = log.iter().filter(|d| d.decision == DecisionKind::Step).collect();
    assert_eq!(steps.len() as u64, report.stats.steps);
    let tokens: u64 = steps.iter().map(|d| d.tokens).sum();
    let s = &report.stats;
    assert_eq!(tokens, s.prefill_tokens_computed + s.decode_tokens_computed);
    assert!(steps.iter().all(|d| d.seqs <= 4 && d.kv_blocks_in_use <= d.kv_blocks_total));
    // Every request is admitted once (no preemption here), with its token counts.
    let admitted: Vec<u64> =
        steps.iter().flat_map(|d| d.admitted.iter().map(|a| a.request.id)).collect();
    assert_eq!(admitted.len(), 64);
    assert_eq!(admitted.iter().copied().collect::<BTreeSet<_>>().len(), 64);
    assert!(steps.iter().any(|d| d.wait_reason.as_deref() == Some("max_num_seqs")));
    // One JSON object per line.
    let line = serde_json::to_string(steps[0]).unwrap();
    let back: Decision = serde_json::from_str(&line).unwrap();
    assert_eq!(&back, steps[0]);
    assert!(line.contains("\"strategy\":\"continuous\""), "{line}");
}

#[test]
fn queue_times_are_the_same_in_the_records_and_the_histogram() {
    let spec = with_batch("strategy = \"fixed\"\nfixed_batch_size = 4\nmax_wait_ms = 40", "");
    let report = simulate(&spec, closed_mixed());
    let sum: f64 = report.records.iter().map(|r| r.queue_time().unwrap()).sum();
    assert_eq!(report.stats.queue.count(), 64);
    assert!((report.stats.queue.sum() - sum).abs() < 1e-6, "{} vs {sum}", report.stats.queue.sum());
    assert!(sum > 0.0);
}
