//! Rollback conditions on a live engine. A record is written the way a user writes one: a bench
//! run of the default profile, `adr new` (its rollback limits on the engine's bucket bounds),
//! the window shortened for a test. Then three canaries run at once, each the simulator under
//! the recorded load (`bench` against it for 60 s), watched by `cargo xtask watch` and scraped by
//! a real Prometheus loaded with the rules `adr alerts` writes:
//!
//! - the record's own configuration: no rollback, from either;
//! - every engine step 8 ms slower (TTFT P99 a little higher, just under the gate's limit; TPOT
//!   nearly twice): no rollback, from either;
//! - the same engine on a slower GPU (L40S: every step about 2.7x): rollback from both, within
//!   the window and a few intervals: Prometheus of the first request over the limit (by its own
//!   clock), `watch` of its first scrape with data.
//!
//! A `/metrics` that never answers (it hangs, or answers 502) ends a watch with the no-data exit
//! code, and Prometheus fires the absent-data alert.

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::alerts::{repo_with_record, tool};
use crate::support::*;

/// A free port on loopback (bound, then released for the server to take).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn port_of(url: &str) -> u16 {
    url.trim_start_matches("http://127.0.0.1:").split('/').next().unwrap().parse().unwrap()
}

fn json_get(port: u16, path: &str) -> Option<serde_json::Value> {
    let (status, body) = http_get(port, path)?;
    (status == 200).then(|| serde_json::from_str(&body).ok()).flatten()
}

/// The alerts Prometheus has firing now whose `action` label is `action`.
fn firing(port: u16, action: &str) -> Vec<String> {
    json_get(port, "/api/v1/alerts")
        .and_then(|v| v["data"]["alerts"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter(|a| a["state"] == "firing" && a["labels"]["action"] == action)
        .filter_map(|a| a["labels"]["alertname"].as_str().map(str::to_string))
        .collect()
}

/// Prometheus scraping 127.0.0.1:`target` every second with `rules`, its data in `dir`.
fn prometheus(
    bin: &std::path::Path,
    dir: &std::path::Path,
    target: u16,
    rules: &std::path::Path,
) -> (Reaped, u16) {
    let port = free_port();
    std::fs::create_dir_all(dir).unwrap();
    let config = format!(
        "global:\n  scrape_interval: {SCRAPE_S}s\n  evaluation_interval: {SCRAPE_S}s\n\
         rule_files:\n  - {}\nscrape_configs:\n  - job_name: canary\n    static_configs:\n      \
         - targets: ['127.0.0.1:{target}']\n",
        rules.display()
    );
    std::fs::write(dir.join("prometheus.yml"), config).unwrap();
    let child = Command::new(bin)
        .arg(format!("--config.file={}", dir.join("prometheus.yml").display()))
        .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    (Reaped(child), port)
}

/// When Prometheus first scraped its target up (bounded: 60 s for it to start).
fn first_scrape(port: u16) -> Instant {
    wait_until(Duration::from_secs(60), "Prometheus to scrape the canary up", || {
        json_get(port, "/api/v1/targets")
            .is_some_and(|v| v["data"]["activeTargets"][0]["health"].as_str() == Some("up"))
    });
    Instant::now()
}

/// A child's exit code and output, waiting at most `limit`.
fn finish(mut child: Reaped, limit: Duration) -> (Option<i32>, Duration, String) {
    let started = Instant::now();
    let code = poll_for(limit, || child.0.try_wait().unwrap()).and_then(|s| s.code());
    let elapsed = started.elapsed();
    let mut out = String::new();
    if let Some(mut o) = child.0.stdout.take() {
        let _ = o.read_to_string(&mut out);
    }
    if let Some(mut e) = child.0.stderr.take() {
        let _ = e.read_to_string(&mut out);
    }
    (code, elapsed, out)
}

const SCRAPE_S: u64 = 1;
/// The watch and the load: the minute.
const WATCH_S: u64 = 60;
/// The record's windows, shortened from `adr new`'s five minutes.
const WINDOW: &str = "20s";
const WINDOW_S: u64 = 20;

/// One canary: its name, the simulator's arguments.
const CANARIES: [(&str, &[&str]); 3] = [
    ("unchanged", &[]),
    ("near", &["--set", "sim.noise.stall_probability=1", "--set", "sim.noise.stall_ms=8"]),
    ("slow", &["--set", "sim.engine_config=configs/engine-l40s.toml"]),
];

/// What one canary saw.
struct Seen {
    name: &'static str,
    /// Seconds after Prometheus first saw an observation when a rollback alert fired, if it did.
    fired_s: Option<f64>,
    watch_code: Option<i32>,
    watch_out: String,
    /// The load's own TTFT and TPOT P99 (ms), as the bench measured them.
    bench_p99: (Option<f64>, Option<f64>),
    /// How late Prometheus' own loops ran on this machine meanwhile (s): [`lateness`].
    prom_late_s: f64,
    /// By Prometheus' own clock, from the first evaluation whose window held a request over the
    /// TTFT limit to the first in which the rollback alert was firing ([`prom_fired_s`]).
    prom_fired_s: Option<f64>,
}

/// The first time (Prometheus' clock, s) at which `query` had a result, evaluated every 0.25 s
/// over the last `span_s` seconds.
fn first_true(port: u16, query: &str, span_s: u64) -> Option<f64> {
    let now = json_get(port, "/api/v1/query?query=time()")?["data"]["result"][0].as_f64()?;
    let path = format!(
        "/api/v1/query_range?query={query}&start={:.3}&end={now:.3}&step=0.25",
        now - span_s as f64
    );
    let v = json_get(port, &path)?;
    v["data"]["result"]
        .as_array()?
        .iter()
        .filter_map(|series| series["values"][0][0].as_f64())
        .min_by(f64::total_cmp)
}

/// Seconds from the first evaluation whose rule window ([`WINDOW`]) holds a request over the
/// record's TTFT limit to the rollback alert's firing, both as Prometheus recorded them (its `ALERTS` series is written by
/// the evaluation that fires it), so neither this test's polling nor a slow HTTP answer on a
/// loaded machine moves them. (The slow engine's first requests meet no queue and come in under
/// the limit: the condition cannot hold before one is over it.)
fn prom_fired_s(port: u16, span_s: u64, ttft_limit_ms: f64) -> Option<f64> {
    let les = json_get(port, "/api/v1/label/le/values")?;
    let le = les["data"]
        .as_array()?
        .iter()
        .filter_map(|v| v.as_str())
        .find(|v| v.parse::<f64>().is_ok_and(|b| (b * 1000.0 - ttft_limit_ms).abs() < 1e-6))?
        .to_string();
    let family = "vllm:time_to_first_token_seconds";
    let over = format!(
        "sum(increase({family}_count[{WINDOW}])) - sum(increase({family}_bucket{{le=\"{le}\"}}[{WINDOW}])) > 0"
    );
    let over = first_true(port, &url_encoded(&over), span_s)?;
    let fired = first_true(
        port,
        &url_encoded("ALERTS{alertstate=\"firing\",action=\"roll back\"}"),
        span_s,
    )?;
    Some(fired - over)
}

/// A query string's value, percent-encoded.
fn url_encoded(q: &str) -> String {
    q.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b':' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// How much a loaded machine delayed Prometheus' loops, from its own `/metrics`: the scrape
/// interval's p99 over the configured one, and the rule evaluation's p99 duration. The rollback
/// bound waits a few intervals; each can be that much late.
fn lateness(port: u16) -> f64 {
    let Some((200, text)) = http_get(port, "/metrics") else { return 0.0 };
    let value = |prefix: &str| {
        text.lines()
            .find(|l| l.starts_with(prefix))
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .filter(|v| v.is_finite())
            .unwrap_or(0.0)
    };
    let interval =
        value("prometheus_target_interval_length_seconds{interval=\"1s\",quantile=\"0.99\"}");
    let eval = value("prometheus_rule_group_duration_seconds{quantile=\"0.99\"}");
    (interval - SCRAPE_S as f64).max(0.0) + eval
}

/// The simulator (running, with its model and URL), the recorded load against it, Prometheus
/// and `watch` on it.
fn canary(
    root: &std::path::Path,
    name: &'static str,
    (sim, model, url): (Reaped, String, String),
    prom_bin: &std::path::Path,
    ttft_limit_ms: f64,
) -> Seen {
    let sim_port = port_of(&url);
    // The recorded load: the default profile's closed loop and workload, for the watch's minute.
    let out = format!("runs/load-{name}");
    let duration = (WATCH_S + 5).to_string();
    let load = Reaped(
        xtask_command(
            root,
            &[
                "bench",
                "-q",
                "--base-url",
                &url,
                "--model",
                &model,
                "--requests",
                "1000000",
                "--duration",
                &duration,
                "--out",
                &out,
            ],
        )
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap(),
    );
    let rules = root.join("deploy/prometheus/infergate-rules.yml");
    let (prom, prom_port) =
        prometheus(prom_bin, &root.join(format!("prometheus-{name}")), sim_port, &rules);
    let watch = Reaped(
        xtask_command(
            root,
            &[
                "watch",
                "--target",
                &format!("canary-{name}"),
                "--interval",
                "2s",
                "--duration",
                &format!("{WATCH_S}s"),
            ],
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap(),
    );
    first_scrape(prom_port);
    // The window starts when the first request has been observed (the load's own start, the
    // first token of a slow engine, come before it).
    let observed = "/api/v1/query?query=sum(vllm:time_to_first_token_seconds_count)%3E0";
    wait_until(Duration::from_secs(WATCH_S), "Prometheus to observe a request", || {
        json_get(prom_port, observed).is_some_and(|v| !v["data"]["result"][0].is_null())
    });
    let t0 = Instant::now();
    let mut fired_s = None;
    let watch_ends = Instant::now() + Duration::from_secs(WATCH_S);
    let mut watch = Some(watch);
    let mut watch_result = None;
    while Instant::now() < watch_ends {
        if fired_s.is_none() && !firing(prom_port, "roll back").is_empty() {
            fired_s = Some(t0.elapsed().as_secs_f64());
        }
        if let Some(w) = watch.as_mut()
            && w.0.try_wait().unwrap().is_some()
        {
            watch_result = Some(finish(watch.take().unwrap(), Duration::ZERO));
        }
        if fired_s.is_some() && watch.is_none() {
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    let (watch_code, _, mut watch_out) = match watch {
        Some(w) => finish(w, Duration::from_secs(30)),
        None => watch_result.unwrap(),
    };
    if fired_s.is_none() {
        // What Prometheus made of the rules, for the reader of a failure.
        let rules = json_get(prom_port, "/api/v1/rules").unwrap_or_default();
        watch_out.push_str(&format!("\nPrometheus rules: {rules}\n"));
    }
    let prom_late_s = lateness(prom_port);
    let prom_fired_s = prom_fired_s(prom_port, 2 * WATCH_S + 30, ttft_limit_ms);
    // The load's summary: it ends by itself after its duration.
    let _ = finish(load, Duration::from_secs(WATCH_S + 60));
    drop((prom, sim));
    let p99 = |m: &str| {
        let s = infergate_model::Summary::read(&root.join(&out)).ok()?;
        s.metric(infergate_model::metric::MetricPath::named(m))
    };
    Seen {
        name,
        fired_s,
        watch_code,
        watch_out,
        bench_p99: (p99("metrics.ttft_ms.p99"), p99("metrics.tpot_ms.p99")),
        prom_late_s,
        prom_fired_s,
    }
}

#[test]
fn watch_and_prometheus_agree_with_the_bench_on_unchanged_near_limit_and_slow_canaries() {
    let Some(prom_bin) = tool("prometheus", "prometheus") else { return };
    // The record, as a user makes it: a bench run of the default profile and adr new.
    let scratch = copy_of_configs();
    let o = xtask(scratch.path(), &["bench", "-q", "--out", "runs/baseline"]);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    let o = xtask(scratch.path(), &["adr", "new", "Canary", "--baseline", "runs/baseline"]);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    let written = std::fs::read_to_string(new_record(scratch.path())).unwrap();
    let baseline = infergate_model::Summary::read(&scratch.path().join("runs/baseline")).unwrap();
    let conditions: Vec<String> = written
        .lines()
        .filter(|l| l.starts_with("- `metrics.") && l.contains(": roll back"))
        .map(|l| l.replace("for 5m", &format!("for {WINDOW}")))
        .collect();
    // The rollback limits lie on vLLM's buckets, which the simulator exports: TTFT on 0.25 s,
    // 0.5 s, ...; TPOT on 10 ms, 25 ms, 50 ms, ...
    let ttft = conditions.iter().find(|l| l.contains("ttft_ms.p99")).expect("a TTFT condition");
    let limit: f64 =
        ttft.split("above ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
    assert!([250.0, 500.0, 750.0, 1000.0].contains(&limit), "{ttft}");
    assert!(
        baseline.metric(infergate_model::metric::MetricPath::named("metrics.ttft_ms.p99")).unwrap()
            < limit
    );
    let r = repo_with_record(&conditions.join("\n"));
    let engine = std::fs::read_to_string(r.path().join("configs/engine.toml")).unwrap();
    let l40s = engine.replace("name = \"H100-SXM-80GB\"", "name = \"L40S\"");
    assert_ne!(l40s, engine);
    std::fs::write(r.path().join("configs/engine-l40s.toml"), l40s).unwrap();
    assert_eq!(xtask(r.path(), &["adr", "alerts"]).code, 0);

    // The three simulators, each a target of the bench configuration, then the canaries at once.
    let root = r.path().to_path_buf();
    let mut cfg = std::fs::read_to_string(root.join("configs/bench.toml")).unwrap();
    let sims: Vec<(Reaped, String, String)> =
        CANARIES.iter().map(|(_, args)| start_sim(&root, args)).collect();
    for ((name, _), (_, model, url)) in CANARIES.iter().zip(&sims) {
        cfg.push_str(&format!(
            "\n[targets.canary-{name}]\nbase_url = \"{url}\"\nmodel = \"{model}\"\n"
        ));
    }
    std::fs::write(root.join("configs/bench.toml"), cfg).unwrap();
    let handles: Vec<_> = CANARIES
        .iter()
        .zip(sims)
        .map(|(&(name, _), sim)| {
            let (root, prom_bin) = (root.clone(), prom_bin.clone());
            std::thread::spawn(move || canary(&root, name, sim, &prom_bin, limit))
        })
        .collect();
    let seen: Vec<Seen> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    for s in &seen {
        eprintln!(
            "{}: bench TTFT P99 {:?} ms, TPOT P99 {:?} ms; Prometheus rollback {:?} s after its \
             first observation ({:?} s after the first request over the limit, by Prometheus' clock); watch exit {:?}; Prometheus' loops \
             late by {:.3} s",
            s.name,
            s.bench_p99.0,
            s.bench_p99.1,
            s.fired_s,
            s.prom_fired_s,
            s.watch_code,
            s.prom_late_s
        );
    }
    let base_ttft =
        baseline.metric(infergate_model::metric::MetricPath::named("metrics.ttft_ms.p99")).unwrap();
    for s in &seen[..2] {
        assert_eq!(s.fired_s, None, "{}: Prometheus rolled back\n{}", s.name, s.watch_out);
        assert_eq!(s.watch_code, Some(0), "{}: {}", s.name, s.watch_out);
        assert!(s.watch_out.contains("no rollback condition held in 1m"), "{}", s.watch_out);
        assert!(s.watch_out.contains("% over "), "{}: watched with data\n{}", s.name, s.watch_out);
        let ttft = s.bench_p99.0.expect("the load measured TTFT");
        assert!(ttft < limit, "{}: bench TTFT P99 {ttft} ms against the record's {limit}", s.name);
    }
    // Near the limit: slower than the record's run, still under its limit.
    let near = seen[1].bench_p99;
    assert!(near.0.unwrap() > base_ttft * 0.95, "{near:?} against {base_ttft}");
    assert!(
        near.1.unwrap()
            > baseline
                .metric(infergate_model::metric::MetricPath::named("metrics.tpot_ms.p99"))
                .unwrap()
                * 1.4,
        "{near:?}"
    );
    // The slow engine: both roll back within the window and a few scrape intervals.
    let slow = &seen[2];
    // Timed by Prometheus' own clock from the first evaluation whose window holds a request
    // over the limit (so this test's polling, a loaded machine's slow answers and the engine's
    // ramp before its queue builds do not count): the `for` window, then the evaluation that
    // finds the share over its limit, the one after `for` that fires it, and one interval of
    // slack; each of those intervals may be as late as Prometheus measured its own scrapes and
    // evaluations. Measured on the idle 2-core machine: 20.75 s (24.8 s from the first
    // observation, the slow engine's first requests meeting no queue).
    let bound = (WINDOW_S + 3 * SCRAPE_S) as f64 + 3.0 * slow.prom_late_s;
    assert!(slow.fired_s.is_some(), "Prometheus never rolled back\n{}", slow.watch_out);
    assert!(
        slow.prom_fired_s.is_some_and(|s| s <= bound),
        "Prometheus: {:?} s after the first request over the limit, by its clock ({:?} s after the first observation, seen) against {bound:.3} s (its loops late by {:.3} s)\n{}",
        slow.prom_fired_s,
        slow.fired_s,
        slow.prom_late_s,
        slow.watch_out
    );
    assert_eq!(slow.watch_code, Some(1), "{}", slow.watch_out);
    assert!(slow.watch_out.contains("ROLL BACK: ADR-0001 metrics."), "{}", slow.watch_out);
    let last_tick: u64 = slow
        .watch_out
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix('[')?.split_once("s]")?.0.trim().parse().ok())
        .unwrap_or(u64::MAX);
    // watch: the window after its first scrape with data (its load starts with it), and its
    // own scrape intervals.
    assert!(last_tick <= WINDOW_S + 4 * 2, "{}", slow.watch_out);
}

/// A metrics page that never answers usefully (it hangs, or answers 502) and an engine that
/// serves no request: `watch` exits 4 (no data), never 0. Prometheus scraping the idle engine
/// fires the absent-data alert of its engine's group, and only that one.
#[test]
fn a_metrics_page_that_never_answers_is_no_data_not_an_all_clear() {
    let r = repo_with_record("- `metrics.ttft_ms.p99` above 250 ms for 3s: roll back");
    assert_eq!(xtask(r.path(), &["adr", "alerts"]).code, 0);
    // Two servers on loopback: one accepts and never answers, one answers 502 to everything.
    let hang = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let bad = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let (hang_port, bad_port) =
        (hang.local_addr().unwrap().port(), bad.local_addr().unwrap().port());
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in hang.incoming().take(64).flatten() {
            held.push(s);
        }
    });
    std::thread::spawn(move || {
        for mut s in bad.incoming().take(256).flatten() {
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf);
            let _ = s.write_all(
                b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
        }
    });
    let (sim, model, url) = start_sim(r.path(), &[]);
    let bench_toml = r.path().join("configs/bench.toml");
    let mut cfg = std::fs::read_to_string(&bench_toml).unwrap();
    for (name, base) in [
        ("hang", format!("http://127.0.0.1:{hang_port}/v1")),
        ("bad", format!("http://127.0.0.1:{bad_port}/v1")),
        ("idle", url.clone()),
    ] {
        cfg.push_str(&format!("\n[targets.{name}]\nbase_url = \"{base}\"\nmodel = \"{model}\"\n"));
    }
    std::fs::write(&bench_toml, cfg).unwrap();
    let spawn = |name: &str| {
        let args = ["watch", "--target", name, "--interval", "1s", "--duration", "6s"];
        Reaped(
            xtask_command(r.path(), &args)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        )
    };
    let watches = [(spawn("hang"), "hang"), (spawn("bad"), "502"), (spawn("idle"), "idle")];
    let prom = tool("prometheus", "prometheus").map(|bin| {
        let rules = r.path().join("deploy/prometheus/infergate-rules.yml");
        prometheus(&bin, &r.path().join("prometheus"), port_of(&url), &rules)
    });
    for (child, what) in watches {
        let (code, _, out) = finish(child, Duration::from_secs(60));
        assert_eq!(code, Some(4), "{what}: {out}");
        assert!(out.contains("NO DATA"), "{what}: {out}");
    }
    if let Some((_prom, port)) = prom {
        first_scrape(port);
        let fired = wait_for(Duration::from_secs(30), "an absent-data alert to fire", || {
            Some(firing(port, "no data")).filter(|f| !f.is_empty())
        });
        assert_eq!(fired, vec!["InfergateAdr0001MetricsTtftMsP99RollBackNoData".to_string()]);
        // Only the vLLM group's: SGLang was never scraped here.
        let alerts = json_get(port, "/api/v1/alerts").unwrap();
        let engines: Vec<&str> = alerts["data"]["alerts"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|a| a["labels"]["engine"].as_str())
            .collect();
        assert_eq!(engines, ["vllm"], "{alerts}");
    }
    drop(sim);
}
