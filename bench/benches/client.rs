//! The load generator's own capacity: how many requests and streamed events per second one bench
//! process drives, and how much memory each in-flight stream costs.
//!
//!     cargo bench -p infergate-bench --bench client
//!
//! The simulator runs in a second process (this binary re-executed with `--serve-sim`) in
//! timing mode at zero delay, so the figures are the client's, not the server's; on a machine
//! where both share the cores, they are a lower bound of the client's capacity.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bench::runner::{self, RunControl, RunSpec};
use infergate_model::config::{BenchConfig, Override, Source, Target, TimingConfig};
use infergate_sim::{SimOptions, TimingBackend};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--serve-sim") {
        serve_sim(&args[i + 1..]);
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    // 1. Throughput at zero delay: 64 tokens per request, one event per token.
    let (mut child, url) = spawn_sim(0.0, 0.0);
    for concurrency in [16u32, 64] {
        let dir = tempfile::tempdir().unwrap();
        let started = Instant::now();
        let out = rt.block_on(run(
            &url,
            dir.path(),
            &[
                &format!("load.concurrency={concurrency}"),
                "load.requests=4000",
                "workload.max_tokens=64",
            ],
        ));
        let wall = started.elapsed().as_secs_f64();
        let s = &out.summary;
        let window = s.timing.window.duration_s.unwrap();
        let events = s.tokens.output_total.unwrap() as f64;
        println!(
            "zero delay, concurrency {concurrency:>3}: {:>8.0} requests/s, {:>9.0} events/s over the measured window ({} ok of {}; {wall:.1} s wall)",
            s.requests.ok as f64 / window,
            events / window,
            s.requests.ok,
            s.requests.total,
        );
    }
    child.kill().ok();
    // 2. Memory per in-flight stream: 1,000 streams that each last 20 s.
    let (mut child, url) = spawn_sim(0.0, 1000.0);
    let before = rss_kib();
    let dir = tempfile::tempdir().unwrap();
    let control = RunControl::default();
    let run_handle = {
        let url = url.clone();
        let dir = dir.path().to_path_buf();
        let control = control.clone();
        rt.spawn(async move {
            run_with(
                &url,
                &dir,
                &["load.concurrency=1000", "load.requests=1000", "workload.max_tokens=20"],
                control,
            )
            .await
        })
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut peak = 0;
    loop {
        let running = rt.block_on(running_streams(&url));
        if running >= 1000 {
            std::thread::sleep(Duration::from_secs(2)); // every stream has received data
            peak = rss_kib();
            break;
        }
        if Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    control.abort();
    let _ = rt.block_on(run_handle);
    child.kill().ok();
    if peak == 0 {
        println!("memory: the 1,000 streams did not all start within 60 s");
    } else {
        println!(
            "memory: {} KiB resident before, {} KiB with 1,000 streams in flight: {:.1} KiB per stream",
            before,
            peak,
            (peak - before) as f64 / 1000.0
        );
    }
}

async fn run(url: &str, dir: &Path, sets: &[&str]) -> runner::RunOutcome {
    run_with(url, dir, sets, RunControl::default()).await
}

async fn run_with(url: &str, dir: &Path, sets: &[&str], control: RunControl) -> runner::RunOutcome {
    let cfg = BenchConfig::from_source(Source::new(
        "bench.toml",
        "[profile.default.workload]\ninput_lengths = [32]\nrepeats = 1\n[profile.default.client]\nstall_timeout_s = 120\ngrace_s = 0\n",
    ))
    .unwrap();
    let overrides: Vec<Override> = sets.iter().map(|s| Override::parse(s).unwrap()).collect();
    let profile = cfg.resolve("default", &overrides).unwrap().profile;
    let target = Target::at(url).with_model("sim/timing");
    let spec = RunSpec::quiet(profile, ("sim".into(), target), dir.join("run"), "capacity");
    runner::run(spec, control).await.expect("the run completes")
}

async fn running_streams(url: &str) -> u64 {
    let Ok(resp) =
        bench::client::http_builder().build().unwrap().get(format!("{url}/metrics")).send().await
    else {
        return 0;
    };
    let text = resp.text().await.unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix("vllm:num_requests_running "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// Resident memory of this process in KiB.
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn spawn_sim(ttft_ms: f64, itl_ms: f64) -> (Child, String) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--serve-sim", &ttft_ms.to_string(), &itl_ms.to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the simulator process");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    (child, line.trim().to_string())
}

fn serve_sim(args: &[String]) {
    let ttft_ms: f64 = args[0].parse().unwrap();
    let itl_ms: f64 = args[1].parse().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let timing = TimingConfig { ttft_ms, itl_ms, ..TimingConfig::default() };
        let h = infergate_sim::start(
            SimOptions::default(),
            Arc::new(TimingBackend::new(timing)),
            ([127, 0, 0, 1], 0).into(),
        )
        .await
        .unwrap();
        println!("{}", h.base_url());
        std::future::pending::<()>().await;
    });
}
