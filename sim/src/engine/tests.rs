//! Virtual-time tests: each parameter moves the metrics in its documented direction. All runs
//! are deterministic (seeded) and bounded in size; none measures wall time.

use std::path::Path;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::*;
use infergate_model::config::{EngineConfig, Source};

fn config(text: &str) -> EngineConfig {
    EngineConfig::from_source(&Source::new("engine.toml", text)).unwrap_or_else(|e| panic!("{e}"))
}

fn spec(text: &str) -> EngineSpec {
    EngineSpec::new(&config(text)).unwrap_or_else(|e| panic!("{e}"))
}

/// An 8B model on one H100, with the given scheduler and token-interval lines.
fn h100(scheduler: &str) -> EngineSpec {
    spec(&format!(
        "[engine]\nmodel = \"meta-llama/Llama-3.1-8B-Instruct\"\nmax_model_len = 8192\n\
         [scheduler]\n{scheduler}\n[device]\nname = \"H100-SXM-80GB\"\n"
    ))
}

fn shipped(name: &str) -> EngineSpec {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    EngineSpec::load(&root.join("configs").join(name)).unwrap_or_else(|e| panic!("{e}"))
}

fn q(values: impl IntoIterator<Item = f64>, p: f64) -> f64 {
    quantile(values, p).expect("values")
}

/// Exponential inter-arrival times at `rate` per second, seeded.
fn poisson_times(rate: f64, duration: f64, seed: u64) -> Vec<f64> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut t = 0.0;
    let mut out = Vec::new();
    loop {
        let u: f64 = rng.random::<f64>();
        t += -(1.0 - u).ln() / rate;
        if t >= duration {
            return out;
        }
        out.push(t);
    }
}

#[test]
fn shipped_configs_resolve_to_plausible_numbers() {
    let base = shipped("engine.toml");
    assert_eq!(base.model.key, "llama-3.1-8b");
    assert_eq!(base.device.key, "H100-SXM-80GB");
    // 8B bf16 on 80 GB at 0.9: ~15 GiB of weights, ~55 GiB of KV at 128 KiB per token.
    assert!((14.0..16.0).contains(&base.memory.weights_gib), "{:?}", base.memory);
    assert_eq!(base.memory.kv_bytes_per_token, 131072.0);
    let kv_tokens = base.num_blocks as u64 * base.block_size as u64;
    assert!((400_000..500_000).contains(&kv_tokens), "{kv_tokens}");
    // One decoding sequence: the weight read dominates, ~6-7 ms forward.
    let fwd = base.cost.forward_ns(0, 1, 1000) / 1e6;
    assert!((5.5..8.0).contains(&fwd), "{fwd} ms");
    // A 1000-token prefill costs ~30 ms more.
    let prefill = (base.cost.forward_ns(1000, 0, 1000) - base.cost.forward_ns(0, 0, 1000)) / 1e6;
    assert!((20.0..45.0).contains(&prefill), "{prefill} ms");
    let tuned = shipped("engine-tuned.toml");
    assert!(tuned.chunked_prefill && tuned.cost.async_scheduling);
    assert!(tuned.num_blocks > base.num_blocks, "higher gpu_memory_utilization, more blocks");
    assert!(base.describe().contains("llama-3.1-8b"));
}

#[test]
fn precision_and_parallelism_move_the_cost_model() {
    let with = |engine: &str| {
        spec(&format!(
            "[engine]\nmodel = \"meta-llama/Llama-3.1-70B-Instruct\"\nmax_model_len = 8192\n\
             {engine}\n[device]\nname = \"H100-SXM-80GB\"\ncount = 8\n"
        ))
    };
    let tp4 = with("tensor_parallel_size = 4");
    let tp8 = with("tensor_parallel_size = 8");
    let fp8 = with("tensor_parallel_size = 4\nquantization = \"fp8\"");
    // More GPUs: less weight per GPU to read, more KV room, but all-reduces cost.
    assert!(tp8.cost.decode_seq_ns < tp4.cost.decode_seq_ns);
    assert!(tp8.num_blocks > tp4.num_blocks);
    assert!(tp8.cost.step_fixed_ns < tp4.cost.step_fixed_ns);
    // FP8 halves the weights and runs GEMMs on FP8 tensor cores.
    assert!((fp8.memory.weights_gib * 2.0 - tp4.memory.weights_gib).abs() < 0.01);
    assert!(fp8.cost.prefill_token_ns < tp4.cost.prefill_token_ns * 0.6);
    assert!(fp8.num_blocks > tp4.num_blocks);
    // 70B in bf16 does not fit one 80 GB GPU.
    let err = EngineSpec::new(&config(
        "[engine]\nmodel = \"meta-llama/Llama-3.1-70B-Instruct\"\n[device]\nname = \"H100\"\n",
    ))
    .unwrap_err();
    assert_eq!(err.key, "engine.gpu_memory_utilization");
    assert!(err.message.contains("weights"), "{err}");
}

#[test]
fn spec_errors_name_the_key_and_the_choices() {
    let src = Source::new(
        "configs/engine.toml",
        "[engine]\nmodel = \"acme/support-bot\"\n[device]\nname = \"H100\"\n",
    );
    let err = EngineSpec::new(&EngineConfig::from_source(&src).unwrap()).unwrap_err();
    let located = err.locate(&src);
    assert_eq!(located.line, Some(2), "{located}");
    assert!(located.message.contains("llama-3.1-8b"), "{located}");
    // A profile for a custom name.
    let ok = spec(
        "[engine]\nmodel = \"acme/support-bot\"\nmax_model_len = 4096\n[device]\nname = \"H100\"\n\
         [sim]\nmodel_profile = \"llama-3.1-8b\"\n",
    );
    assert_eq!(ok.served_model_name, "sim/acme/support-bot");
    // A context longer than the KV cache can hold (8B on a 24 GB L4 at the full 128k context).
    let err = EngineSpec::new(&config(
        "[engine]\nmodel = \"llama-3.1-8b\"\n[scheduler]\nmax_num_batched_tokens = 2048\n\
         [device]\nname = \"L4\"\n",
    ))
    .unwrap_err();
    assert_eq!(err.key, "engine.max_model_len");
    assert!(err.message.contains("KV cache"), "{err}");
    let err = EngineSpec::new(&config("[engine]\nmodel = \"llama-3.1-8b\"\n")).unwrap_err();
    assert_eq!(err.key, "device");
}

#[test]
fn a_single_request_runs_prefill_then_one_token_per_step() {
    let s = h100("");
    let report = simulate(&s, Load::Open(vec![SimRequest::new(0.0, 100, 5)]));
    let r = &report.records[0];
    assert_eq!(r.outcome, SimOutcome::Finished(Finish::Length));
    assert_eq!((r.output_tokens, r.delivered_tokens, r.preemptions), (5, 5, 0));
    assert_eq!(r.queue_time(), Some(0.0));
    let c = &s.cost;
    let step = |prefill, decode, kv| {
        (c.step_ns(c.forward_ns(prefill, decode, kv), c.interval_ns(1))).round() / 1e9
    };
    let ttft = step(100, 0, 100);
    assert!((r.ttft().unwrap() - ttft).abs() < 1e-9, "{:?} vs {ttft}", r.ttft());
    // Decode steps read 101..=104 KV tokens.
    let decode: f64 = (101..=104).map(|kv| step(0, 1, kv)).sum();
    assert!((r.e2e().unwrap() - ttft - decode).abs() < 1e-8);
    assert_eq!(report.stats.steps, 5);
    assert_eq!(report.stats.prompt_tokens, 100);
    assert_eq!(report.stats.generation_tokens, 5);
    assert_eq!(report.gauges.kv_blocks_used, 0, "blocks are freed at the end");
}

#[test]
fn natural_stops_and_refusals() {
    let s = h100("");
    let report = simulate(
        &s,
        Load::Open(vec![
            SimRequest::new(0.0, 10, 50).output_len(3),
            SimRequest::new(0.0, 8000, 500),
            SimRequest::new(0.0, 10, 5),
        ]),
    );
    assert_eq!(report.records[0].outcome, SimOutcome::Finished(Finish::Stop));
    assert_eq!(report.records[0].output_tokens, 3);
    match &report.records[1].outcome {
        SimOutcome::Rejected { status: 400, message } => {
            assert!(message.contains("maximum context length is 8192"), "{message}")
        }
        o => panic!("{o:?}"),
    }
    assert_eq!(report.records[2].outcome, SimOutcome::Finished(Finish::Length));
    assert_eq!(report.stats.rejected, 1);
}

#[test]
fn runs_are_deterministic() {
    let s = shipped("engine-tuned.toml");
    let load = || {
        let mut rng = StdRng::seed_from_u64(3);
        Load::Open(
            poisson_times(20.0, 10.0, 9)
                .into_iter()
                .map(|t| {
                    SimRequest::new(t, rng.random_range(16..2000), rng.random_range(1..300))
                        .shared_prefix(rng.random_range(0..3), 256)
                })
                .collect(),
        )
    };
    let a = simulate(&s, load());
    let b = simulate(&s, load());
    assert_eq!(a.records, b.records);
    assert_eq!(a.stats, b.stats);
    assert!(a.finished().count() > 150);
}

/// Short chat requests at a steady rate, with a few prompts close to max_model_len mixed in.
fn mixed_long_prompt_load() -> (Vec<SimRequest>, Vec<bool>) {
    let mut reqs = Vec::new();
    let mut long = Vec::new();
    for t in poisson_times(22.0, 40.0, 1) {
        reqs.push(SimRequest::new(t, 256, 256));
        long.push(false);
    }
    for k in 0..20 {
        reqs.push(SimRequest::new(1.0 + 2.0 * k as f64, 8100, 64));
        long.push(true);
    }
    (reqs, long)
}

#[test]
fn chunked_prefill_lowers_short_request_ttft_p99_with_long_prompts_mixed_in() {
    let (reqs, long) = mixed_long_prompt_load();
    let run = |chunked: bool| {
        let s = h100(&format!(
            "max_num_seqs = 256\nmax_num_batched_tokens = 8192\nenable_chunked_prefill = {chunked}"
        ));
        let report = simulate(&s, Load::Open(reqs.clone()));
        assert_eq!(report.finished().count(), reqs.len());
        let short_ttft =
            report.records.iter().zip(&long).filter(|(_, l)| !**l).map(|(r, _)| r.ttft().unwrap());
        q(short_ttft, 0.99)
    };
    let (off, on) = (run(false), run(true));
    println!("short-request TTFT p99: chunked prefill off {off:.3} s, on {on:.3} s");
    assert!(on < off * 0.5, "off {off} on {on}");
}

#[test]
fn chunked_prefill_bounds_the_stall_a_long_prompt_causes_to_decoding_requests() {
    // Moderate load: decoding requests share steps with an occasional long prefill.
    let mut reqs: Vec<_> =
        poisson_times(8.0, 30.0, 4).into_iter().map(|t| SimRequest::new(t, 256, 256)).collect();
    let shorts = reqs.len();
    reqs.extend((0..14).map(|k| SimRequest::new(1.0 + 2.0 * k as f64, 6000, 16)));
    let run = |scheduler: &str| {
        let report = simulate(&h100(scheduler), Load::Open(reqs.clone()));
        let gaps = report.records[..shorts].iter().map(|r| r.max_gap.unwrap());
        q(gaps, 0.99)
    };
    let off = run("max_num_batched_tokens = 8192\nenable_chunked_prefill = false");
    let on = run("max_num_batched_tokens = 2048\nenable_chunked_prefill = true");
    println!(
        "worst inter-token gap p99: unchunked {:.0} ms, chunked 2048 {:.0} ms",
        off * 1e3,
        on * 1e3
    );
    assert!(on < off * 0.6, "off {off} on {on}");
}

#[test]
fn max_num_seqs_raises_throughput_until_the_kv_budget_binds_then_preemptions_appear() {
    // An 8B model on a 24 GB L4 leaves room for ~43k KV tokens: ~80 sequences of 512 tokens.
    let run = |seqs: u32| {
        let s = spec(&format!(
            "[engine]\nmodel = \"meta-llama/Llama-3.1-8B-Instruct\"\nmax_model_len = 4096\n\
             [scheduler]\nmax_num_seqs = {seqs}\nmax_num_batched_tokens = 4096\n\
             enable_prefix_caching = false\n[device]\nname = \"L4\"\n"
        ));
        let requests = (0..600).map(|_| SimRequest::new(0.0, 256, 256)).collect();
        let report = simulate(&s, Load::Closed { concurrency: 160, requests });
        assert_eq!(report.finished().count(), 600, "every request finishes, preempted or not");
        assert!(report.finished().all(|r| r.delivered_tokens == 256));
        let kv_tokens = s.num_blocks * s.block_size;
        (report.output_tokens_per_s(), report.stats.preemptions, kv_tokens, report)
    };
    let results: Vec<_> = [8, 16, 32, 64, 160].into_iter().map(|n| (n, run(n))).collect();
    for (n, (tput, pre, kv, _)) in &results {
        println!("max_num_seqs {n:>3}: {tput:>7.0} tok/s, {pre} preemptions, {kv} KV tokens");
    }
    let tput: Vec<f64> = results.iter().map(|(_, r)| r.0).collect();
    let pre: Vec<u64> = results.iter().map(|(_, r)| r.1).collect();
    // Below the KV budget (64 x 512 < 43k tokens): more sequences, more throughput, no preemption.
    assert!(tput[0] < tput[1] && tput[1] < tput[2] && tput[2] < tput[3], "{tput:?}");
    assert_eq!(&pre[..4], &[0, 0, 0, 0]);
    // Beyond it the KV cache binds: preemptions, recomputation, and no gain worth the slots.
    let (_, (tput_160, pre_160, _, report)) = &results[4];
    assert!(*pre_160 > 0);
    assert!(report.stats.recomputed_tokens > 0);
    assert!(report.records.iter().any(|r| r.preemptions > 0));
    assert!(*tput_160 < tput[3] * 1.2, "{tput_160} vs {}", tput[3]);
}

#[test]
fn async_scheduling_removes_the_token_interval_from_tpot() {
    let run = |async_sched: bool, n: usize| {
        let s = spec(&format!(
            "[engine]\nmodel = \"meta-llama/Llama-3.1-8B-Instruct\"\nmax_model_len = 8192\n\
             [token_interval]\nasync_scheduling = {async_sched}\n[device]\nname = \"H100\"\n"
        ));
        let report =
            simulate(&s, Load::Open((0..n).map(|_| SimRequest::new(0.0, 128, 64)).collect()));
        let tpot = q(report.records.iter().map(|r| r.tpot().unwrap()), 0.5);
        (tpot, report.gpu_utilisation().unwrap(), s.cost.clone())
    };
    // One sequence: each decode step is forward + interval without, forward alone with.
    let (sync1, util_sync, cost) = run(false, 1);
    let (async1, util_async, _) = run(true, 1);
    let interval = cost.interval_ns(1) / 1e9;
    assert!((sync1 - async1 - interval).abs() < 1e-8, "{sync1} - {async1} != {interval}");
    assert!(util_async > 0.99 && util_sync < 0.9, "{util_sync} {util_async}");
    // A large batch: the interval grows with the batch; async hides it behind the forward pass.
    let (sync256, util_sync, _) = run(false, 256);
    let (async256, util_async, _) = run(true, 256);
    println!(
        "TPOT p50 at 256 seqs: sync {:.2} ms (GPU {:.0}%), async {:.2} ms (GPU {:.0}%)",
        sync256 * 1e3,
        util_sync * 1e2,
        async256 * 1e3,
        util_async * 1e2
    );
    assert!(async256 < sync256 * 0.8);
    assert!(util_sync < 0.75 && util_async > 0.99);
}

#[test]
fn prefix_caching_lowers_ttft_for_shared_prefixes() {
    let run = |caching: bool| {
        let s = h100(&format!("enable_prefix_caching = {caching}"));
        let reqs = (0..20)
            .map(|i| SimRequest::new(i as f64 * 0.5, 2048 + 40, 16).shared_prefix(7, 2048))
            .collect();
        simulate(&s, Load::Open(reqs))
    };
    let (off, on) = (run(false), run(true));
    let mean_ttft =
        |r: &SimReport| r.records[1..].iter().map(|r| r.ttft().unwrap()).sum::<f64>() / 19.0;
    println!("TTFT mean: no caching {:.4} s, caching {:.4} s", mean_ttft(&off), mean_ttft(&on));
    assert!(mean_ttft(&on) < mean_ttft(&off) * 0.3);
    assert_eq!(on.records[0].cached_tokens, 0, "the first request fills the cache");
    assert!(on.records[1..].iter().all(|r| r.cached_tokens == 2048));
    assert!(off.records.iter().all(|r| r.cached_tokens == 0));
    assert_eq!(on.stats.prefix_cache_hits, 19 * 2048);
    assert_eq!(off.stats.prefix_cache_queries, 0);
    // Unrelated prompts never hit.
    let s = h100("");
    let unrelated = simulate(
        &s,
        Load::Open(
            (0..5).map(|i| SimRequest::new(i as f64, 2000, 4).shared_prefix(i, 2000)).collect(),
        ),
    );
    assert_eq!(unrelated.stats.prefix_cache_hits, 0);
}

#[test]
fn token_prompts_share_blocks_by_content() {
    let s = h100("");
    let mut engine = Engine::new(&s);
    let prompt: Vec<u32> = (0..40).collect();
    let mut other = prompt.clone();
    other[35] = 999; // differs in the third block only
    for (id, p) in [prompt.clone(), prompt, other].into_iter().enumerate() {
        let req = EngineRequest {
            label: None,
            id: id as u64,
            prompt: Prompt::Tokens(p.into()),
            max_tokens: 2,
            output_len: None,
            priority: 0,
            arrival: 0,
        };
        engine.add_request(req).unwrap();
        while engine.step(engine.now()).is_some() {}
    }
    // 40 tokens = 2 full blocks: the second and third requests reuse both.
    assert_eq!(engine.stats().prefix_cache_hits, 64);
}

#[test]
fn a_disconnect_frees_the_request_at_the_next_step_and_counts_waste() {
    let s = h100("");
    let reqs = vec![
        SimRequest::new(0.0, 500, 400).cancel_after(0.5),
        SimRequest::new(0.0, 500, 400),
        SimRequest::new(0.1, 500, 400).cancel_after(0.05), // gone while it decodes
        SimRequest::new(10.0, 50, 10).cancel_after(20.0),  // finishes long before
    ];
    let mut sim = Simulation::new(&s, Load::Open(reqs));
    sim.run_until(0.3);
    let used_before = sim.engine().gauges().kv_blocks_used;
    let report = sim.run();
    let r = &report.records;
    assert_eq!(r[0].outcome, SimOutcome::Cancelled);
    assert_eq!(r[0].end, Some(0.5));
    assert!(r[0].delivered_tokens > 10 && r[0].delivered_tokens < 400);
    // The step running when the client left produced one more token, never delivered.
    assert_eq!(r[0].output_tokens, r[0].delivered_tokens + 1);
    assert!(r[0].last_token.unwrap() <= 0.5);
    assert_eq!(r[1].outcome, SimOutcome::Finished(Finish::Length));
    assert_eq!(r[2].outcome, SimOutcome::Cancelled);
    assert_eq!(r[2].output_tokens, r[2].delivered_tokens + 1);
    assert_eq!(r[3].outcome, SimOutcome::Finished(Finish::Length));
    let wasted: u32 = r.iter().map(|r| r.output_tokens - r.delivered_tokens).sum();
    assert_eq!(report.stats.wasted_tokens, wasted as u64);
    assert_eq!(report.stats.wasted_tokens, 2);
    assert_eq!(report.stats.cancelled, 2);
    assert!(used_before > 0);
    assert_eq!(report.gauges.kv_blocks_used, 0);
}

/// One slot and one closed-loop client; 30% of the requests (the bench's seeded draw) close
/// their stream just after their 8th token. The request after a cancelled one waits for the
/// slot: at the next step for an engine that stops, until the cancelled request's 50th token
/// for one that ignores the cancel. The cost model says exactly how long that is.
#[test]
fn an_engine_that_ignores_cancels_delays_the_next_request_by_what_the_model_predicts() {
    let s = h100("max_num_seqs = 1");
    let c = &s.cost;
    let step = |prefill: u64, decode: u64, kv: u64| {
        (c.step_ns(c.forward_ns(prefill, decode, kv), c.interval_ns(1))).round() / 1e9
    };
    let (prompt, max) = (100u64, 50u64);
    let cancel = infergate_model::config::CancelConfig {
        share: 0.3,
        after_tokens: Some(8),
        ..Default::default()
    };
    let n = 100u64;
    let planned: Vec<bool> = (0..n).map(|id| cancel.plan(id).is_some()).collect();
    let requests: Vec<SimRequest> = planned
        .iter()
        .map(|&p| {
            let r = SimRequest::new(0.0, prompt as u32, max as u32);
            if p { r.cancel_after_tokens(8) } else { r }
        })
        .collect();
    let cancelled = planned.iter().filter(|&&p| p).count() as u64;
    assert!((15..=45).contains(&cancelled), "{cancelled} of {n} drawn");
    let run = |ignore: bool| {
        let load = Load::Closed { concurrency: 1, requests: requests.clone() };
        Simulation::new(&s, load).ignoring_cancels(ignore).run()
    };
    let (stop, ignore) = (run(false), run(true));
    let p99 = |r: &SimReport| q(r.records.iter().filter_map(SimRecord::ttft), 0.99);
    // Stop: the slot is free after the step running at the cancel (token 9). Ignore: after the
    // cancelled request's last token, 41 decode steps later.
    let predicted: f64 = (10..=max).map(|j| step(0, 1, prompt + j - 1)).sum();
    let worse = p99(&ignore) - p99(&stop);
    assert!((worse - predicted).abs() < 1e-6, "TTFT P99 {worse} s worse, the model's {predicted}");
    assert!(predicted > 0.1, "{predicted}");
    for (r, ignored) in [(&stop, false), (&ignore, true)] {
        let cancelled_records =
            r.records.iter().filter(|r| r.outcome == SimOutcome::Cancelled).count() as u64;
        assert_eq!(cancelled_records, cancelled);
        assert_eq!(r.stats.abandoned, cancelled);
        // Every client left after its first token: no prefill wasted.
        assert_eq!(r.stats.wasted_prefill_tokens, 0);
        // The simulator's own count: the 9th token, or tokens 9 to 50.
        let per_cancel = if ignored { max - 8 } else { 1 };
        assert_eq!(r.stats.wasted_tokens, cancelled * per_cancel);
        assert_eq!(r.stats.generation_tokens, (n - cancelled) * max + cancelled * (8 + per_cancel));
        // The slot was held from the cancel to the step that freed it, or to the last token.
        let reaction = CLIENT_REACTION_NS as f64 / 1e9;
        let held = (if ignored { predicted } else { 0.0 }) + step(0, 1, prompt + 8) - reaction;
        let hold = r.stats.abandoned_hold_ns as f64 / 1e9 / cancelled as f64;
        assert!((hold - held).abs() < 1e-6, "held {hold} s, expected {held}");
        assert_eq!(r.stats.cancelled, if ignored { 0 } else { cancelled });
    }
}

#[test]
fn prefill_for_a_client_that_left_before_its_first_token_is_waste() {
    // Chunks of 256 prompt tokens: a 4000-token prompt takes 16 steps before its first token.
    let s = h100("max_num_batched_tokens = 256\nenable_chunked_prefill = true");
    let c = &s.cost;
    let first_chunk = c.step_ns(c.forward_ns(256, 0, 256), c.interval_ns(1)).round() / 1e9;
    // The client leaves during the second chunk.
    let reqs = vec![SimRequest::new(0.0, 4000, 10).cancel_after(first_chunk * 1.5)];
    let stop = simulate(&s, Load::Open(reqs.clone()));
    assert_eq!(stop.records[0].outcome, SimOutcome::Cancelled);
    assert_eq!(stop.records[0].first_token, None);
    // Freed at the end of the second chunk: both chunks were computed for nobody.
    assert_eq!(stop.stats.wasted_prefill_tokens, 512);
    assert_eq!((stop.stats.abandoned, stop.stats.cancelled), (1, 1));
    assert_eq!(stop.stats.prompt_tokens, 0, "the prompt counter counts at the first token");
    let ignore = Simulation::new(&s, Load::Open(reqs)).ignoring_cancels(true).run();
    // Computed to its end: the whole prompt, then 10 tokens no client received.
    assert_eq!(ignore.stats.wasted_prefill_tokens, 4000);
    assert_eq!(ignore.stats.wasted_tokens, 10);
    assert_eq!((ignore.stats.abandoned, ignore.stats.cancelled), (1, 0));
    assert!(ignore.stats.abandoned_hold_ns > stop.stats.abandoned_hold_ns);
    assert_eq!(ignore.gauges.kv_blocks_used, 0, "its blocks are freed at its end");
}

#[test]
fn a_waiting_request_cancelled_before_scheduling_wastes_nothing() {
    let s = h100("max_num_seqs = 1");
    let reqs =
        vec![SimRequest::new(0.0, 100, 200), SimRequest::new(0.0, 100, 10).cancel_after(0.1)];
    let report = simulate(&s, Load::Open(reqs));
    assert_eq!(report.records[1].outcome, SimOutcome::Cancelled);
    assert_eq!(report.records[1].scheduled, None);
    assert_eq!((report.stats.cancelled, report.stats.wasted_tokens), (1, 0));
}

#[test]
fn priority_policy_serves_urgent_requests_first() {
    let run = |policy: &str| {
        let s = h100(&format!("max_num_seqs = 2\nscheduler_policy = \"{policy}\""));
        let mut reqs: Vec<_> = (0..10).map(|_| SimRequest::new(0.0, 100, 50).priority(5)).collect();
        reqs.push(SimRequest::new(0.001, 100, 50).priority(0));
        let report = simulate(&s, Load::Open(reqs));
        report.records[10].queue_time().unwrap()
    };
    let (fcfs, prio) = (run("fcfs"), run("priority"));
    assert!(prio < fcfs * 0.25, "priority {prio} fcfs {fcfs}");
}

#[test]
fn kv_fragmentation_is_the_empty_share_of_allocated_slots() {
    let s = h100("enable_prefix_caching = false");
    let mut engine = Engine::new(&s);
    let req = |id, len| EngineRequest {
        id,
        label: None,
        prompt: Prompt::unique(len),
        max_tokens: 100,
        output_len: None,
        priority: 0,
        arrival: 0,
    };
    engine.add_request(req(0, 17)).unwrap();
    engine.add_request(req(1, 32)).unwrap();
    engine.step(0).unwrap();
    // 17 tokens in 2 blocks, 32 tokens in 2 blocks: 49 of 64 slots hold a token.
    let g = engine.gauges();
    assert_eq!(g.kv_blocks_used, 4);
    assert!((g.kv_fragmentation - 15.0 / 64.0).abs() < 1e-12, "{}", g.kv_fragmentation);
    engine.step(engine.now()).unwrap();
    // The second request's next token needs a third block.
    let g = engine.gauges();
    assert_eq!(g.kv_blocks_used, 5);
    assert!((g.kv_fragmentation - (80.0 - 51.0) / 80.0).abs() < 1e-12);
}

// ---- real time ----

mod real_time {
    use std::time::Duration;

    use tokio::time::{Instant, timeout};

    use super::h100;
    use crate::backend::{Backend, FinishReason, GenEvent, GenRequest};
    use crate::engine::EngineBackend;

    fn request(id: u64, prompt_len: u32, max_tokens: u32) -> GenRequest {
        GenRequest {
            id,
            prompt: (0..prompt_len).collect(),
            max_tokens,
            natural_len: None,
            ignore_eos: true,
            priority: 0,
            arrival: Instant::now(),
            request_id: None,
        }
    }

    fn metric(text: &str, name: &str) -> f64 {
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("{name}{{")))
            .unwrap_or_else(|| panic!("{name} missing"));
        line.rsplit_once(' ').unwrap().1.parse().unwrap()
    }

    async fn next(rx: &mut tokio::sync::mpsc::UnboundedReceiver<GenEvent>) -> Option<GenEvent> {
        timeout(Duration::from_secs(10), rx.recv()).await.expect("an event within 10 s")
    }

    #[tokio::test]
    async fn events_arrive_in_order_and_a_dropped_receiver_is_freed() {
        // 8B on an H100: steps of ~7.5 ms.
        let backend = EngineBackend::new(&h100(""));
        assert_eq!(backend.max_model_len(), Some(8192));
        assert!(backend.describe().contains("llama-3.1-8b"), "{}", backend.describe());

        let mut receivers: Vec<_> =
            (0..3).map(|i| backend.submit(request(i, 50 + 10 * i as u32, 5))).collect();
        for rx in &mut receivers {
            let mut events = Vec::new();
            while let Some(e) = next(rx).await {
                events.push(e);
                assert!(events.len() <= 7, "{events:?}");
            }
            assert!(matches!(events[0], GenEvent::Scheduled { .. }), "{events:?}");
            assert!(
                events[1..6].iter().all(|e| *e == GenEvent::Tokens { count: 1, due: None }),
                "{events:?}"
            );
            assert_eq!(events[6], GenEvent::Finished { reason: FinishReason::Length });
        }

        // A client that goes away after its first token.
        let mut rx = backend.submit(request(10, 100, 5000));
        loop {
            match next(&mut rx).await {
                Some(GenEvent::Tokens { .. }) => break,
                Some(GenEvent::Scheduled { .. }) => {}
                other => panic!("{other:?}"),
            }
        }
        drop(rx);
        let deadline = Instant::now() + Duration::from_secs(5);
        let text = loop {
            let mut text = String::new();
            backend.render_metrics(&mut text);
            if metric(&text, "infergate_sim:cancelled_requests_total") == 1.0 {
                break text;
            }
            assert!(Instant::now() < deadline, "not freed within 5 s:\n{text}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        assert_eq!(metric(&text, "vllm:num_requests_running"), 0.0);
        assert_eq!(metric(&text, "infergate_sim:kv_blocks_in_use"), 0.0);
        // The step in flight when the receiver went away produced one undeliverable token.
        assert_eq!(metric(&text, "infergate_sim:wasted_tokens_total"), 1.0);
        assert!(metric(&text, "vllm:generation_tokens_total") < 100.0);

        // Too long for max_model_len: refused at once.
        let mut rx = backend.submit(request(11, 8000, 500));
        match next(&mut rx).await {
            Some(GenEvent::Failed { status: 400, message }) => {
                assert!(message.contains("8192"), "{message}")
            }
            other => panic!("{other:?}"),
        }
    }
}
