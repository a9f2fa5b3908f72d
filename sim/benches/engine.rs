//! Speed of the engine model in virtual time: simulated requests per second of wall time.
//!
//!     cargo bench -p infergate-bench --bench engine
//!
//! Plain std timing: each scenario runs a few times and the fastest run is reported (the
//! simulation is deterministic, so runs differ only by machine noise).

use std::hint::black_box;
use std::time::{Duration, Instant};

use infergate_model::config::{EngineConfig, Source};
use infergate_sim::engine::{EngineSpec, Load, SimRequest, simulate};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn spec(scheduler: &str) -> EngineSpec {
    let text = format!(
        "[engine]\nmodel = \"meta-llama/Llama-3.1-8B-Instruct\"\nmax_model_len = 8192\n\
         [scheduler]\n{scheduler}\n[token_interval]\nasync_scheduling = true\n\
         [device]\nname = \"H100-SXM-80GB\"\n"
    );
    let cfg = EngineConfig::from_source(&Source::new("bench.toml", text)).expect("valid config");
    EngineSpec::new(&cfg).expect("valid spec")
}

/// A chat-like mix: prompts 128..2048 tokens (a quarter sharing a system prompt), outputs
/// 16..512 tokens, 2% of clients disconnecting early.
fn requests(n: usize, rate: Option<f64>, seed: u64) -> Vec<SimRequest> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut t = 0.0;
    (0..n)
        .map(|_| {
            if let Some(rate) = rate {
                t += -(1.0 - rng.random::<f64>()).ln() / rate;
            }
            let mut r = SimRequest::new(t, rng.random_range(128..2048), rng.random_range(16..512));
            if rng.random_bool(0.25) {
                r = r.shared_prefix(rng.random_range(0..4), 96);
            }
            if rng.random_bool(0.02) {
                r = r.cancel_after(rng.random_range(0.05..2.0));
            }
            r
        })
        .collect()
}

fn run(name: &str, spec: &EngineSpec, load: impl Fn() -> Load) {
    let n = match load() {
        Load::Open(r) => r.len(),
        Load::Closed { requests, .. } => requests.len(),
    };
    let mut best = Duration::MAX;
    let mut report = None;
    for _ in 0..3 {
        let load = load();
        let start = Instant::now();
        let r = black_box(simulate(spec, load));
        best = best.min(start.elapsed());
        report = Some(r);
    }
    let r = report.expect("ran");
    let wall = best.as_secs_f64();
    println!(
        "{name:<40} {n:>6} requests {:>8} steps {:>10} tokens  {:>7.1} ms  {:>9.0} sim req/s  {:>9.0} steps/s  {:>6.0}x real time",
        r.stats.steps,
        r.stats.generation_tokens + r.stats.prompt_tokens,
        wall * 1e3,
        n as f64 / wall,
        r.stats.steps as f64 / wall,
        r.duration / wall,
    );
}

fn main() {
    // `cargo test --benches` runs this binary with `--bench` absent: keep that quick.
    let quick = !std::env::args().any(|a| a == "--bench");
    let n = if quick { 500 } else { 20_000 };
    let tuned = spec("max_num_seqs = 384\nmax_num_batched_tokens = 2048");
    let baseline =
        spec("max_num_seqs = 256\nmax_num_batched_tokens = 8192\nenable_chunked_prefill = false");
    let no_cache = spec("max_num_seqs = 256\nenable_prefix_caching = false");
    run("open 12 req/s, tuned (chunked 2048)", &tuned, || Load::Open(requests(n, Some(12.0), 1)));
    run("open 12 req/s, baseline (unchunked 8192)", &baseline, || {
        Load::Open(requests(n, Some(12.0), 1))
    });
    run("closed 256 clients, no prefix caching", &no_cache, || Load::Closed {
        concurrency: 256,
        requests: requests(n, None, 2),
    });
}
