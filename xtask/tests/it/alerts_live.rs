//! Rollback conditions on a live engine: a real Prometheus, scraping the simulator every second
//! with the rules `adr alerts` writes for a record of short windows, fires the rollback alert
//! when every engine step is slowed down and stays silent when it is not; `cargo xtask watch`
//! on the same simulator agrees with it on both.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::alerts::{repo_with_record, tool};
use crate::support::*;

/// A free port on loopback (bound, then released for the server to take).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// One HTTP/1.1 exchange on loopback: the status and the body.
fn http(port: u16, method: &str, path: &str, body: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let status = out.split_whitespace().nth(1)?.parse().ok()?;
    let body = out.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    Some((status, body))
}

/// Requests to the simulator from `clients` threads until `stop` (at most 2000 each).
fn load(
    port: u16,
    model: &str,
    clients: usize,
    stop: &Arc<AtomicBool>,
) -> Vec<std::thread::JoinHandle<usize>> {
    (0..clients)
        .map(|i| {
            let stop = Arc::clone(stop);
            let body = format!(
                "{{\"model\":\"{model}\",\"prompt\":\"canary request {i}\",\"max_tokens\":4}}"
            );
            std::thread::spawn(move || {
                let mut ok = 0;
                for _ in 0..2000 {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    if http(port, "POST", "/v1/completions", &body).is_some_and(|(s, _)| s == 200) {
                        ok += 1;
                    }
                }
                ok
            })
        })
        .collect()
}

fn port_of(url: &str) -> u16 {
    url.trim_start_matches("http://127.0.0.1:").split('/').next().unwrap().parse().unwrap()
}

fn json_get(port: u16, path: &str) -> Option<serde_json::Value> {
    let (status, body) = http(port, "GET", path, "")?;
    (status == 200).then(|| serde_json::from_str(&body).ok()).flatten()
}

/// The alert states Prometheus reports now (`pending`, `firing`).
fn alert_states(port: u16) -> Vec<String> {
    json_get(port, "/api/v1/alerts")
        .and_then(|v| v["data"]["alerts"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter_map(|a| a["state"].as_str().map(str::to_string))
        .collect()
}

const SCRAPE_S: u64 = 1;
const WINDOW_S: u64 = 6;
const CONDITION: &str = "- `metrics.ttft_ms.p99` above 150 ms for 6s: roll back";
/// Every engine step stalls 300 ms: the first token of each request is at least that late.
const SLOW: [&str; 4] =
    ["--set", "sim.noise.stall_probability=1", "--set", "sim.noise.stall_ms=300"];

/// What one canary saw: whether and when (after Prometheus's first scrape) the alert fired, what
/// `watch` did, and the TTFT P99 Prometheus computed at the end.
struct Seen {
    fired_after: Option<Duration>,
    watch_code: Option<i32>,
    watch_after: Option<Duration>,
    watch_out: String,
    p99_ms: Option<f64>,
}

/// The simulator (with `sim_args`) under load, Prometheus scraping it every second with the
/// generated rules, and `cargo xtask watch` on it, until the alert fires or for the window, two
/// scrape intervals and one rule evaluation after the first scrape.
fn canary(sim_args: &[&str]) -> Option<Seen> {
    let prometheus = tool("prometheus", "prometheus")?;
    let r = repo_with_record(CONDITION);
    assert_eq!(xtask(r.path(), &["adr", "alerts"]).code, 0);
    let (sim, model, url) = start_sim(r.path(), sim_args);
    let sim_port = port_of(&url);
    let bench_toml = r.path().join("configs/bench.toml");
    let mut cfg = std::fs::read_to_string(&bench_toml).unwrap();
    cfg.push_str(&format!("\n[targets.canary]\nbase_url = \"{url}\"\nmodel = \"{model}\"\n"));
    std::fs::write(&bench_toml, cfg).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let clients = load(sim_port, &model, 3, &stop);

    let prom_port = free_port();
    let dir = r.path().join("prometheus");
    std::fs::create_dir_all(&dir).unwrap();
    let config = format!(
        "global:\n  scrape_interval: {SCRAPE_S}s\n  evaluation_interval: {SCRAPE_S}s\n\
         rule_files:\n  - {}\nscrape_configs:\n  - job_name: sim\n    static_configs:\n      \
         - targets: ['127.0.0.1:{sim_port}']\n",
        r.path().join("deploy/prometheus/infergate-rules.yml").display()
    );
    std::fs::write(dir.join("prometheus.yml"), config).unwrap();
    let prom = Reaped(
        Command::new(prometheus)
            .arg(format!("--config.file={}", dir.join("prometheus.yml").display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{prom_port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let watch = Reaped(
        xtask_command(
            r.path(),
            &[
                "watch",
                "--target",
                "canary",
                "--interval",
                "1s",
                "--duration",
                &format!("{}s", WINDOW_S + 4 * SCRAPE_S),
            ],
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap(),
    );
    let watch_started = Instant::now();

    // The first scrape: the target is up (bounded: 60 s for Prometheus to start).
    let up_deadline = Instant::now() + Duration::from_secs(60);
    let t0 = loop {
        let up = json_get(prom_port, "/api/v1/targets")
            .is_some_and(|v| v["data"]["activeTargets"][0]["health"].as_str() == Some("up"));
        if up {
            break Instant::now();
        }
        assert!(Instant::now() < up_deadline, "Prometheus never scraped the simulator");
        std::thread::sleep(Duration::from_millis(100));
    };
    // Window + two scrape intervals + one evaluation interval (rules are evaluated on their own
    // tick, one scrape interval here).
    let deadline = t0 + Duration::from_secs(WINDOW_S + 3 * SCRAPE_S);
    let mut fired_after = None;
    while Instant::now() < deadline {
        if alert_states(prom_port).iter().any(|s| s == "firing") {
            fired_after = Some(t0.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let p99_ms = json_get(
        prom_port,
        &format!(
            "/api/v1/query?query=histogram_quantile(0.99,sum%20by%20(le)(rate(vllm:time_to_first_token_seconds_bucket[{WINDOW_S}s])))*1000"
        ),
    )
    .and_then(|v| v["data"]["result"][0]["value"][1].as_str().and_then(|s| s.parse().ok()));

    // watch: it exits by itself (1 when the condition held its window, 0 at --duration).
    let mut watch = watch;
    let watch_deadline = Instant::now() + Duration::from_secs(WINDOW_S + 4 * SCRAPE_S + 60);
    let (watch_code, watch_after) = loop {
        if let Some(status) = watch.0.try_wait().unwrap() {
            break (status.code(), Some(watch_started.elapsed()));
        }
        if Instant::now() > watch_deadline {
            break (None, None);
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut watch_out = String::new();
    if let Some(mut o) = watch.0.stdout.take() {
        let _ = o.read_to_string(&mut watch_out);
    }
    if let Some(mut e) = watch.0.stderr.take() {
        let _ = e.read_to_string(&mut watch_out);
    }
    stop.store(true, Ordering::Relaxed);
    let sent: usize = clients.into_iter().map(|c| c.join().unwrap()).sum();
    assert!(sent > 0, "no request reached the simulator");
    drop((prom, sim));
    Some(Seen { fired_after, watch_code, watch_after, watch_out, p99_ms })
}

#[test]
fn prometheus_fires_the_rollback_alert_on_a_slowed_engine_and_watch_agrees() {
    let Some(seen) = canary(&SLOW) else { return };
    let fired = seen.fired_after.unwrap_or_else(|| {
        panic!(
            "the alert did not fire within the window ({WINDOW_S} s), two scrape intervals and \
             one evaluation ({SCRAPE_S} s each) of the first scrape; TTFT P99 {:?} ms",
            seen.p99_ms
        )
    });
    assert!(seen.p99_ms.is_some_and(|p| p > 150.0), "{:?}", seen.p99_ms);
    eprintln!("alert fired {:.1} s after the first scrape", fired.as_secs_f64());
    // watch agrees: it ends with exit 1 naming the condition, within the same bound of its
    // first scrape (its status lines are stamped with the seconds since it).
    assert_eq!(seen.watch_code, Some(1), "{}", seen.watch_out);
    let last_tick: u64 = seen
        .watch_out
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix('[')?.split_once("s]")?.0.trim().parse().ok())
        .unwrap_or(u64::MAX);
    assert!(last_tick <= WINDOW_S + 3 * SCRAPE_S, "{}", seen.watch_out);
    assert!(
        seen.watch_out.contains("ROLL BACK: ADR-0001 metrics.ttft_ms.p99 above 150 ms for 6s"),
        "{}",
        seen.watch_out
    );
    eprintln!("watch exited 1 after {:?}:\n{}", seen.watch_after, seen.watch_out);
}

#[test]
fn a_healthy_engine_never_fires_and_watch_agrees() {
    let Some(seen) = canary(&[]) else { return };
    assert_eq!(seen.fired_after, None, "fired on a healthy engine (TTFT P99 {:?} ms)", seen.p99_ms);
    // Not vacuous: Prometheus had TTFT data, below the limit.
    assert!(seen.p99_ms.is_some_and(|p| p < 150.0), "TTFT P99 {:?} ms", seen.p99_ms);
    // watch agrees: it ran to --duration (the same span) and exited 0, with data.
    assert_eq!(seen.watch_code, Some(0), "{}", seen.watch_out);
    assert!(seen.watch_out.contains(" ms (> 150)"), "{}", seen.watch_out);
    assert!(!seen.watch_out.contains("ROLL BACK"), "{}", seen.watch_out);
}
