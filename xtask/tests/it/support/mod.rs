//! Shared test helpers: summaries built in code, the CLI binary, temporary repositories.

pub mod gitrepo;
pub mod governed;
mod wait;

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

// The build without `runtime` has none of the tests that wait on a child.
#[allow(unused_imports)]
pub use wait::{Lines, poll_for, wait_for, wait_until};

use infergate_model::Summary;
use serde_json::json;

pub fn stats(p99: f64) -> serde_json::Value {
    json!({
        "count": 80,
        "mean": p99 * 0.5,
        "stdev": p99 * 0.1,
        "min": p99 * 0.2,
        "p50": p99 * 0.5,
        "p90": p99 * 0.8,
        "p95": p99 * 0.9,
        "p99": p99,
        "p999": p99 * 1.05,
        "max": p99 * 1.1,
    })
}

/// A complete, measured run against a real target with the given headline numbers. Built from
/// JSON, as summary.json is read, so fields the schema adds with defaults need no change here.
pub fn summary(
    run_id: &str,
    ttft_p99: f64,
    tpot_p99: f64,
    goodput: f64,
    engine: serde_json::Value,
) -> Summary {
    let environment = json!({"os": "linux", "arch": "x86_64", "cpus": 8, "cpu_model": "Test CPU", "memory_gib": 31.2});
    let fingerprint =
        serde_json::from_value::<infergate_model::summary::Environment>(environment.clone())
            .unwrap()
            .fingerprint();
    let v = json!({
        "schema_version": infergate_model::summary::SCHEMA_VERSION,
        "run_id": run_id,
        "status": "complete",
        "simulated": false,
        "tool": {"name": "infergate", "version": "0.1.0"},
        "git": {"commit": "0123456789abcdef0123456789abcdef01234567", "dirty": false},
        "environment": environment,
        "environment_fingerprint": fingerprint,
        "target": {
            "name": "local-vllm",
            "api_base": "http://127.0.0.1:8000/v1",
            "url": "http://127.0.0.1:8000/v1/chat/completions",
            "endpoint": "chat",
            "stream": true,
            "model": "test-model",
        },
        "config": {
            "load": {"mode": "closed", "concurrency": 64},
            "workload": {"input_lengths": [128, 256, 512, 1024], "repeats": 20, "max_tokens": 128},
            "slo": {"ttft_ms": 500.0, "tpot_ms": 50.0}
        },
        "profile": "default",
        "engine": {"file": "configs/engine.toml", "params": engine},
        "timing": {
            "started_at": "2025-05-01T10:00:00Z",
            "ended_at": "2025-05-01T10:01:00Z",
            "window": {"start_ms": 0.0, "end_ms": 60000.0, "duration_s": 60.0},
        },
        "requests": {"total": 80, "ok": 80, "failed": 0, "warmup": 4, "by_class": {"ok": 80}},
        "tokens": {"input_total": 51200, "output_total": 10240, "from_usage": 80, "from_chunks": 0, "count_mismatches": 0},
        "metrics": {
            "ttft_ms": stats(ttft_p99),
            "tpot_ms": stats(tpot_p99),
            "itl_ms": stats(tpot_p99 * 1.2),
            "e2e_ms": stats(ttft_p99 + 128.0 * tpot_p99),
            "itl_jitter": 0.123,
            "queue_ms": null,
        },
        "throughput": {"requests_per_s": 10.5, "output_tokens_per_s": 1344.0, "total_tokens_per_s": 6384.0},
        "goodput": {
            "slo": {"ttft_ms": 500.0, "tpot_ms": 50.0},
            "requests": (goodput * 80.0).round() as u64,
            "requests_per_s": 10.0,
            "ratio": goodput,
        },
        "schedule": {"lag_ms": null, "requested_rate": null, "achieved_rate": null, "fell_behind": false},
        "cost": {
            "price_per_hour": 2.5,
            "devices": 1,
            "device_seconds": 60.0,
            "total": 0.041667,
            "per_request": 0.000521,
            "per_1m_output_tokens": 0.5167,
            "basis": "estimated",
        },
        "server": {
            "source": "http://127.0.0.1:8000/metrics",
            "engine": "vllm",
            "interval_s": 1.0,
            "scrapes": 60,
            "failed_scrapes": 0,
            "kv_fragmentation": 0.042,
        },
        "notes": [],
    });
    serde_json::from_value(v).expect("a valid summary")
}

pub fn engine_params(chunked: bool, batched: u64) -> serde_json::Value {
    json!({
        "engine": {"model": "test-model", "dtype": "float16", "gpu_memory_utilization": 0.92},
        "scheduler": {
            "max_num_seqs": 256,
            "max_num_batched_tokens": batched,
            "enable_chunked_prefill": chunked,
            "scheduler_policy": "fcfs"
        }
    })
}

/// Write a summary as `<dir>/<run_id>/summary.json`; returns the run directory.
pub fn write_run(dir: &Path, s: &Summary) -> PathBuf {
    let run = dir.join(&s.run_id);
    std::fs::create_dir_all(&run).unwrap();
    std::fs::write(run.join("summary.json"), serde_json::to_string_pretty(s).unwrap()).unwrap();
    run
}

/// Output of one CLI invocation.
pub struct Out {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Out {
    /// The exit code and both streams, as one text to snapshot.
    pub fn text(&self) -> String {
        format!("exit: {}\n--- stdout\n{}--- stderr\n{}", self.code, self.stdout, self.stderr)
    }
}

/// Snapshot settings that redact what changes from one run of a test to the next: the
/// temporary directory `root` (`[root]`), other temporary paths (`[tmp]`) and today's date
/// (`[date]`). Bind the assertion to them where it is made, so the snapshot keeps the test's
/// module in its name: `redactions(root).bind(|| insta::assert_snapshot!(...))`.
pub fn redactions(root: &Path) -> insta::Settings {
    let mut settings = insta::Settings::clone_current();
    let root = root.display().to_string();
    settings.add_filter(&regex_escape(&root), "[root]");
    let tmp = std::env::temp_dir().display().to_string();
    settings
        .add_filter(&format!(r"{}/?\.tmp\w+", regex_escape(tmp.trim_end_matches('/'))), "[tmp]");
    for today in [chrono::Local::now().date_naive(), chrono::Utc::now().date_naive()] {
        settings.add_filter(&today.format("%Y-%m-%d").to_string(), "[date]");
    }
    settings
}

/// `s` with the characters a regular expression gives a meaning to escaped.
pub fn regex_escape(s: &str) -> String {
    s.chars()
        .flat_map(|c| if "\\.+*?()|[]{}^$".contains(c) { vec!['\\', c] } else { vec![c] })
        .collect()
}

/// Run `cargo xtask -C <root> <args>` (the built binary).
pub fn xtask(root: &Path, args: &[&str]) -> Out {
    let out = xtask_output(root, args);
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The xtask binary working in `root` with `args`, proxies from the environment removed (the
/// servers of the tests are on loopback).
pub fn xtask_command(root: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_xtask"));
    c.arg("-C").arg(root).args(args).env_remove("HTTP_PROXY").env_remove("http_proxy");
    c
}

/// [`xtask_command`] run to its end.
pub fn xtask_output(root: &Path, args: &[&str]) -> std::process::Output {
    xtask_command(root, args).output().expect("run the xtask binary")
}

/// The repository this crate lives in.
/// The one record `adr new` wrote into a repository whose `docs/adr` held none before.
pub fn new_record(root: &Path) -> PathBuf {
    std::fs::read_dir(root.join("docs/adr"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "md"))
        .expect("adr new wrote a record")
}

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// A trial set `dir/name` with one fixture run per TTFT P99 value ([`write_set`]).
pub fn trial_set(dir: &Path, name: &str, ttft_p99: &[f64]) -> PathBuf {
    let summaries: Vec<Summary> = ttft_p99
        .iter()
        .enumerate()
        .map(|(i, &p99)| {
            summary(&format!("trial-{:02}", i + 1), p99, 40.0, 0.95, engine_params(true, 8192))
        })
        .collect();
    write_set(&dir.join(name), &summaries)
}

/// A repository holding this repository's `configs/bench.toml` and `configs/engine*.toml`.
pub fn copy_of_configs() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".git")).unwrap();
    std::fs::create_dir_all(dir.path().join("configs")).unwrap();
    for e in std::fs::read_dir(repo_root().join("configs")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "toml") {
            std::fs::copy(&p, dir.path().join("configs").join(p.file_name().unwrap())).unwrap();
        }
    }
    dir
}

/// Kills the child when the test ends, whatever happened.
pub struct Reaped(pub Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `cargo xtask sim --port 0 ARGS` in `root`, once it says where it serves: the process, the
/// model and the base URL (`http://127.0.0.1:PORT/v1`).
pub fn start_sim(root: &Path, args: &[&str]) -> (Reaped, String, String) {
    let mut all = vec!["sim", "--port", "0"];
    all.extend_from_slice(args);
    let mut child = xtask_command(root, &all)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = Lines::of(child.stdout.take().unwrap());
    let sim = Reaped(child);
    // "serving MODEL at URL/v1 (Ctrl-C to stop)"
    let line =
        stdout.wait_for(Duration::from_secs(30), "the simulator to say where it serves", |l| {
            l.starts_with("serving ")
        });
    let words: Vec<&str> = line.split_whitespace().collect();
    (sim, words[1].to_string(), words[3].to_string())
}

/// One HTTP/1.0 GET of `path` on 127.0.0.1:`port` (so the body is never chunked): the status
/// and the body; `None` when nothing answers.
pub fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
    let req = format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
    s.write_all(req.as_bytes()).ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let status = out.split_whitespace().nth(1)?.parse().ok()?;
    let body = out.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    Some((status, body))
}

/// One ok request record: TTFT `ttft_ms`, then 4 output tokens 10 ms apart.
pub fn record(id: u64, ttft_ms: f64) -> infergate_model::record::RequestRecord {
    let t0 = id as f64 * 100.0;
    let r = infergate_model::record::RequestRecord::ok(id, t0, t0 + ttft_ms, vec![10.0; 3]);
    infergate_model::record::RequestRecord { input_tokens: Some(3), ..r }
}

/// Write `requests.jsonl` into the run directory `dir`: `n` ok requests with the TTFTs
/// `ttft_ms` (cycled), so a single run's request bootstrap has records to draw from.
pub fn write_records(dir: &Path, n: u64, ttft_ms: &[f64]) {
    std::fs::create_dir_all(dir).unwrap();
    let mut w = infergate_model::rundir::RecordWriter::create(dir).unwrap();
    for i in 0..n {
        w.write(&record(i, ttft_ms[i as usize % ttft_ms.len()])).unwrap();
    }
    w.finish().unwrap();
}

/// The fixture [`summary`] of run `run_id` (TPOT P99 20 ms, goodput 0.97, chunked prefill with
/// 2048 batched tokens) with its latency metrics those of the request records in the run
/// directory `dir`, as `bench` computes them: a run whose summary and requests agree.
pub fn summary_of_records(dir: &Path, run_id: &str) -> Summary {
    let mut s = summary(run_id, 0.0, 20.0, 0.97, engine_params(true, 2048));
    let read = infergate_model::rundir::read_records(dir).unwrap();
    let mut acc = infergate_model::metrics::MetricsAccumulator::new(Default::default());
    for r in &read.records {
        acc.add(r);
    }
    s.set_metrics(acc.finish(None));
    s
}

/// Write `histograms.hlog` into the run directory `dir` from its `requests.jsonl`, as a run
/// writes it.
pub fn write_hlog(dir: &Path) {
    let read = infergate_model::rundir::read_records(dir).unwrap();
    let mut acc = infergate_model::metrics::MetricsAccumulator::new(Default::default());
    for r in &read.records {
        acc.add(r);
    }
    let window = std::time::Duration::from_secs(60);
    infergate_model::rundir::write_histograms(dir, &acc, std::time::SystemTime::UNIX_EPOCH, window)
        .unwrap();
}

/// Write `requests.jsonl` and `histograms.hlog` that agree with the fixture summary `s` in
/// what a trial set checks (`infergate_model::rundir::disagreements`): its measured and warmup counts,
/// the last measured request ending where its window ends.
pub fn write_matching_files(dir: &Path, s: &Summary) {
    std::fs::create_dir_all(dir).unwrap();
    let mut w = infergate_model::rundir::RecordWriter::create(dir).unwrap();
    let end = s.timing.window.end_ms.unwrap_or(0.0);
    for i in 0..s.requests.warmup {
        let mut r = record(i, 10.0);
        r.warmup = true;
        w.write(&r).unwrap();
    }
    for i in 0..s.requests.total {
        let mut r = record(s.requests.warmup + i, 10.0);
        if i + 1 == s.requests.total {
            r.end_ms = end;
        }
        w.write(&r).unwrap();
    }
    w.finish().unwrap();
    write_hlog(dir);
}

/// Write a trial set into `dir`: each summary a trial directory (`trial-01`, ...) and
/// `trials.json`. Two identical summaries make zero-width t intervals: the gate then compares
/// the values themselves with the limits.
pub fn write_set(dir: &Path, trials: &[Summary]) -> PathBuf {
    use infergate_model::trials::{FORMAT_VERSION, TrialEntry, TrialsFile};
    let mut entries = Vec::new();
    for (i, s) in trials.iter().enumerate() {
        let name = format!("trial-{:02}", i + 1);
        write_matching_files(&dir.join(&name), s);
        std::fs::write(dir.join(&name).join("summary.json"), serde_json::to_string(s).unwrap())
            .unwrap();
        entries.push(TrialEntry {
            dir: name,
            run_id: s.run_id.clone(),
            status: s.status,
            requests: s.requests.total,
            ok: s.requests.ok,
            host_busy: false,
            headline: Default::default(),
        });
    }
    let index = TrialsFile {
        format_version: FORMAT_VERSION,
        run_id: dir.file_name().unwrap().to_string_lossy().into(),
        profile: trials[0].profile.clone(),
        request: None,
        planned: trials.len() as u32,
        cooldown_s: 0.0,
        confidence: 0.95,
        trials: entries,
        metrics: Default::default(),
        notes: vec![],
        warmup: vec![],
        cold_start: None,
    };
    index.write(dir).unwrap();
    dir.to_path_buf()
}

/// A repository whose one commit (on `main`) holds this repository's `configs/bench.toml` and
/// `configs/engine.toml`, checked out.
pub fn configs_repo() -> gitrepo::GitRepo {
    let mut g = gitrepo::GitRepo::init();
    for name in ["bench.toml", "engine.toml"] {
        let text = std::fs::read_to_string(repo_root().join("configs").join(name)).unwrap();
        g.write(&format!("configs/{name}"), Some(&text));
    }
    g.commit("configs");
    g.checkout();
    g
}
