//! The engine model's Prometheus exposition over a whole virtual-time run, checked with the
//! shared exposition helpers.

use std::collections::HashMap;

use infergate_sim::engine::{Load, SimRequest, Simulation};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::support::{check_exposition, cumulative_series, engine_spec, parse_scrape};

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

/// The engine model's `/metrics` text at every half second of a virtual-time run: valid
/// exposition, every expected family, counters and histograms that never decrease.
#[test]
fn metrics_parse_and_counters_never_decrease() {
    let s = engine_spec(
        "[engine]\nmodel = \"meta-llama/Llama-3.1-8B-Instruct\"\nmax_model_len = 4096\n\
         [scheduler]\nmax_num_seqs = 128\nmax_num_batched_tokens = 2048\n[device]\nname = \"L4\"\n",
    );
    let mut rng = StdRng::seed_from_u64(5);
    let reqs = poisson_times(12.0, 20.0, 2)
        .into_iter()
        .map(|t| {
            let r = SimRequest::new(t, rng.random_range(64..1500), rng.random_range(16..400))
                .shared_prefix(rng.random_range(0..4), 512);
            if rng.random_bool(0.1) { r.cancel_after(rng.random_range(0.1..5.0)) } else { r }
        })
        .collect();
    let mut sim = Simulation::new(&s, Load::Open(reqs));
    let mut previous: Option<HashMap<String, f64>> = None;
    let mut checked = 0;
    let mut scrapes = 0;
    let mut t = 0.0;
    loop {
        let more = sim.run_until(t);
        let mut text = String::new();
        sim.render_metrics(&mut text);
        let types = check_exposition(&text);
        let values = parse_scrape(&text);
        for name in [
            "vllm:num_requests_running",
            "vllm:num_requests_waiting",
            "vllm:kv_cache_usage_perc",
            "vllm:prompt_tokens_total",
            "vllm:generation_tokens_total",
            "vllm:num_preemptions_total",
            "vllm:time_to_first_token_seconds",
            "vllm:request_time_per_output_token_seconds",
            "vllm:request_queue_time_seconds",
            "vllm:e2e_request_latency_seconds",
            "infergate_sim:kv_fragmentation_ratio",
            "infergate_sim:wasted_tokens_total",
        ] {
            assert!(types.contains_key(name), "{name} missing");
        }
        if let Some(prev) = &previous {
            let monotonic = cumulative_series(&types);
            for (series, v) in prev {
                let metric = series.split('{').next().unwrap();
                if monotonic.contains(metric) {
                    let now = values[series];
                    assert!(now >= *v, "{series} decreased: {v} -> {now}");
                    checked += 1;
                }
            }
        }
        let usage = values.iter().find(|(k, _)| k.starts_with("vllm_kv_cache_usage_perc")).unwrap();
        assert!((0.0..=1.0).contains(usage.1));
        previous = Some(values);
        scrapes += 1;
        if !more {
            break;
        }
        t += 0.5;
        assert!(scrapes < 1000, "bounded");
    }
    let report = sim.report();
    assert!(scrapes > 20 && checked > 1000, "{scrapes} scrapes, {checked} counter checks");
    assert!(report.stats.cancelled > 0 && report.stats.wasted_tokens > 0);
    assert!(report.stats.prefix_cache_hits > 0);
    let last = previous.unwrap();
    assert_eq!(
        last["vllm_generation_tokens_total{model_name=sim/meta-llama/Llama-3.1-8B-Instruct}"],
        report.stats.generation_tokens as f64
    );
}

/// `vllm:request_time_per_output_token_seconds` is the bench's TPOT of each finished request of
/// more than one token (decode time over the tokens after the first), as the records say.
#[test]
fn the_per_request_tpot_histogram_matches_the_records() {
    let s = engine_spec(
        "[engine]\nmodel = \"meta-llama/Llama-3.1-8B-Instruct\"\nmax_model_len = 4096\n\
         [scheduler]\nmax_num_seqs = 32\nmax_num_batched_tokens = 2048\n[device]\nname = \"L4\"\n",
    );
    let mut rng = StdRng::seed_from_u64(9);
    let reqs: Vec<SimRequest> = poisson_times(8.0, 5.0, 3)
        .into_iter()
        .map(|t| SimRequest::new(t, rng.random_range(32..800), rng.random_range(1..120)))
        .collect();
    let mut sim = Simulation::new(&s, Load::Open(reqs));
    sim.run_until(f64::INFINITY);
    let report = sim.report();
    let mut count = 0u64;
    let mut sum = 0.0;
    for r in report.records.iter().filter(|r| r.is_finished() && r.output_tokens > 1) {
        count += 1;
        sum += (r.last_token.unwrap() - r.first_token.unwrap()) / f64::from(r.output_tokens - 1);
    }
    assert!(count > 10, "{count} requests of more than one token");
    assert_eq!(report.stats.tpot.count(), count);
    assert!(
        (report.stats.tpot.sum() - sum).abs() < 1e-6 * count as f64,
        "{} vs {sum}",
        report.stats.tpot.sum()
    );
    let mut text = String::new();
    sim.render_metrics(&mut text);
    let values = parse_scrape(&text);
    let n = values
        .iter()
        .find(|(k, _)| k.starts_with("vllm_request_time_per_output_token_seconds_count"))
        .map(|(_, v)| *v);
    assert_eq!(n, Some(count as f64));
}
