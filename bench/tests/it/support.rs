//! Helpers shared by the integration tests: start a simulator, run the bench against it.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bench::runner::{self, RunControl, RunOutcome, RunSpec};
use infergate_model::config::{
    BenchConfig, Override, Profile, ResolvedProfile, Source, Target, TimingConfig,
};
use infergate_sim::{SimHandle, SimOptions, TimingBackend};

/// Returns once `cond` holds, re-checked often at first and then every 50 ms; panics naming
/// `what` when it did not within `within`. What a test waits for (a count a server keeps, a
/// metric), never a fixed delay.
pub async fn wait_until(within: Duration, what: &str, mut cond: impl AsyncFnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + within;
    let mut pause = Duration::from_millis(1);
    loop {
        if cond().await {
            return;
        }
        let now = tokio::time::Instant::now();
        assert!(now < deadline, "waited {within:?} for {what}: it never came");
        tokio::time::sleep(pause.min(deadline - now)).await;
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

/// Start a timing-mode simulator on an OS-chosen loopback port.
pub async fn start_timing_sim(timing: TimingConfig, opts: SimOptions) -> SimHandle {
    infergate_sim::start(opts, Arc::new(TimingBackend::new(timing)), ([127, 0, 0, 1], 0).into())
        .await
        .expect("start the simulator")
}

/// A profile from TOML text (the `[profile.default]` body) plus overrides.
pub fn profile(toml_text: &str, overrides: &[&str]) -> Profile {
    let cfg = BenchConfig::from_source(Source::new("test.toml", toml_text.to_string()))
        .expect("valid test config");
    let o: Vec<Override> = overrides.iter().map(|s| Override::parse(s).unwrap()).collect();
    cfg.resolve("default", &o).expect("valid test profile").profile
}

/// Run the bench against a running simulator.
pub async fn run_against(handle: &SimHandle, profile: Profile, dir: &Path) -> RunOutcome {
    run_with_control(handle, profile, dir, RunControl::default()).await
}

pub async fn run_with_control(
    handle: &SimHandle,
    profile: Profile,
    dir: &Path,
    control: RunControl,
) -> RunOutcome {
    run_url_with_control(&handle.base_url(), handle.model(), profile, dir, control).await
}

pub async fn run_against_url(
    base_url: &str,
    model: &str,
    profile: Profile,
    dir: &Path,
) -> RunOutcome {
    run_url_with_control(base_url, model, profile, dir, RunControl::default()).await
}

pub async fn run_url_with_control(
    base_url: &str,
    model: &str,
    profile: Profile,
    dir: &Path,
    control: RunControl,
) -> RunOutcome {
    let target = Target::at(base_url).with_model(model);
    let spec = RunSpec::quiet(profile, ("sim".into(), target), dir.join("run"), "test");
    runner::run(spec, control).await.expect("the run completes")
}

// ---- engine mode ----

/// An 8B model on one H100 (the shipped baseline's shape, with a shorter context).
pub const ENGINE_H100: &str = "[engine]\nmodel = \"meta-llama/Llama-3.1-8B-Instruct\"\n\
    max_model_len = 4096\n[scheduler]\nmax_num_seqs = 64\n[device]\nname = \"H100-SXM-80GB\"\n";

/// An engine spec from engine-config text.
pub fn engine_spec(engine_toml: &str) -> infergate_sim::engine::EngineSpec {
    let cfg = infergate_model::config::EngineConfig::from_source(&Source::new(
        "engine.toml",
        engine_toml,
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    infergate_sim::engine::EngineSpec::new(&cfg).unwrap_or_else(|e| panic!("{e}"))
}

/// Start an engine-mode simulator for an engine config given as TOML text; `opts.model` is
/// replaced by the served model name.
pub async fn start_engine_sim(engine_toml: &str, opts: SimOptions) -> SimHandle {
    let spec = engine_spec(engine_toml);
    let opts = SimOptions { model: spec.served_model_name.clone(), ..opts };
    let backend = Arc::new(infergate_sim::engine::EngineBackend::new(&spec));
    infergate_sim::start(opts, backend, ([127, 0, 0, 1], 0).into())
        .await
        .expect("start the simulator")
}

/// Run the bench against the embedded simulator its profile describes (no target); `dir` is the
/// repository root its relative paths resolve against, and the run directory is `dir/run`.
pub async fn run_embedded(mut profile: Profile, dir: &Path) -> RunOutcome {
    profile.target = None;
    let spec = RunSpec {
        profile: ResolvedProfile { name: "default".into(), profile, target: None, file: None },
        out_dir: dir.join("run"),
        run_id: "test".into(),
        git: None,
        engine: None,
        quiet: true,
        handle_signals: false,
        root: dir.to_path_buf(),
        invocation: None,
        shard: None,
        slice: None,
        isolation: None,
        preflight: None,
    };
    runner::run(spec, RunControl::default()).await.expect("the run completes")
}

/// An HTTP client for the simulator (loopback: no proxy).
pub fn http() -> reqwest::Client {
    bench::client::http_builder().no_proxy().build().expect("an HTTP client")
}

/// `GET /metrics` of a simulator.
pub async fn scrape(client: &reqwest::Client, handle: &SimHandle) -> String {
    let resp = client.get(format!("{}/metrics", handle.base_url())).send().await.expect("scrape");
    assert_eq!(resp.status(), 200);
    resp.text().await.expect("metrics text")
}

/// A strict check of the Prometheus text exposition format (names, labels, values, every
/// sample in a family declared with `# TYPE`). Returns each family's type.
pub fn check_exposition(text: &str) -> HashMap<String, String> {
    let mut types = HashMap::new();
    let valid_name = |n: &str| {
        let mut c = n.chars();
        c.next().is_some_and(|f| f.is_ascii_alphabetic() || f == '_' || f == ':')
            && c.all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == ':')
    };
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("TYPE name kind");
            assert!(valid_name(name), "{line}");
            assert!(["counter", "gauge", "histogram"].contains(&kind), "{line}");
            assert!(types.insert(name.to_string(), kind.to_string()).is_none(), "dup {line}");
            continue;
        }
        if line.starts_with("# HELP ") || line.is_empty() {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').expect("sample line");
        assert!(value == "+Inf" || value.parse::<f64>().is_ok(), "{line}");
        let (name, labels) = match series.split_once('{') {
            Some((n, l)) => (n, l.strip_suffix('}').expect("closing brace")),
            None => (series, ""),
        };
        assert!(valid_name(name), "{line}");
        for pair in labels.split(',').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').expect("label k=v");
            assert!(valid_name(k) && !k.contains(':'), "{line}");
            assert!(v.len() >= 2 && v.starts_with('"') && v.ends_with('"'), "{line}");
        }
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| {
                name.strip_suffix(s).filter(|f| types.get(*f).is_some_and(|k| k == "histogram"))
            })
            .unwrap_or(name);
        assert!(types.contains_key(family), "sample without TYPE: {line}");
    }
    types
}

/// Parse a scrape with `prometheus-parse` into `series -> value` (histogram buckets as
/// `series` + `le=<bound>`). That crate's name pattern (`\w+`) silently skips names with `:`
/// (valid in the format, and vLLM's convention), so names are mapped to `_` first, and every
/// sample line must come back.
pub fn parse_scrape(text: &str) -> HashMap<String, f64> {
    let mapped: Vec<String> = text
        .lines()
        .map(|l| match l.strip_prefix("# ") {
            Some(_) => {
                let mut parts: Vec<String> = l.splitn(4, ' ').map(str::to_string).collect();
                if parts.len() >= 3 {
                    parts[2] = parts[2].replace(':', "_");
                }
                parts.join(" ")
            }
            None => match l.find(['{', ' ']) {
                Some(i) => format!("{}{}", l[..i].replace(':', "_"), &l[i..]),
                None => l.to_string(),
            },
        })
        .collect();
    let scrape = prometheus_parse::Scrape::parse(mapped.iter().map(|l| Ok(l.clone()))).unwrap();
    let sample_lines = text.lines().filter(|l| !l.starts_with('#') && !l.is_empty()).count();
    let parsed: usize = scrape
        .samples
        .iter()
        .map(|s| match &s.value {
            prometheus_parse::Value::Histogram(b) => b.len(),
            _ => 1,
        })
        .sum();
    assert_eq!(parsed, sample_lines, "every sample line parses");
    let mut out = HashMap::new();
    for s in &scrape.samples {
        let mut labels: Vec<_> = s.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        labels.sort();
        let key = format!("{}{{{}}}", s.metric, labels.join(","));
        match &s.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => {
                out.insert(key, *v);
            }
            prometheus_parse::Value::Histogram(buckets) => {
                let mut prev = 0.0;
                for b in buckets {
                    assert!(b.count >= prev, "{key}: buckets are cumulative");
                    prev = b.count;
                    out.insert(format!("{key}le={}", b.less_than), b.count);
                }
            }
            prometheus_parse::Value::Summary(_) => panic!("no summaries"),
        }
    }
    out
}

/// The value of the one series of a metric (name with `:` mapped to `_`) whose key contains
/// `labels`.
pub fn metric(values: &HashMap<String, f64>, name: &str, labels: &str) -> f64 {
    let prefix = format!("{}{{", name.replace(':', "_"));
    let hits: Vec<f64> = values
        .iter()
        .filter(|(k, _)| k.starts_with(&prefix) && k.contains(labels) && !k.contains("le="))
        .map(|(_, v)| *v)
        .collect();
    assert_eq!(hits.len(), 1, "{name} {labels}: {hits:?}");
    hits[0]
}

/// A small engine: a 1B model on an L4 with a KV cache of a few hundred tokens, so the KV budget
/// binds at a handful of concurrent requests and every step lasts ~10 ms.
pub const SMALL_ENGINE: &str = r#"
[engine]
model = "meta-llama/Llama-3.2-1B-Instruct"
dtype = "bfloat16"
gpu_memory_utilization = 0.1425   # 67 KV blocks (1072 tokens)
max_model_len = 512
[scheduler]
max_num_seqs = 64
max_num_batched_tokens = 1024
enable_chunked_prefill = true
enable_prefix_caching = false
[device]
name = "L4"
price_per_hour = 0.8
count = 1
"#;

/// Run against a simulator whose metrics are scraped from `metrics_path` instead of `/metrics`.
pub async fn run_against_url_with_metrics(
    handle: &SimHandle,
    profile: Profile,
    dir: &Path,
    metrics_path: &str,
) -> RunOutcome {
    let mut target = Target::at(handle.base_url()).with_model(handle.model());
    target.metrics_url = Some(format!("{}{metrics_path}", handle.base_url()));
    let spec = RunSpec::quiet(profile, ("sim".into(), target), dir.join("run"), "test");
    runner::run(spec, RunControl::default()).await.expect("the run completes")
}

/// One HTTP/1.1 request read from a raw connection, as (head, body): bounded to 1 MiB, `None`
/// when the peer closes first. For test servers that answer as no real server would.
pub async fn read_http_request(s: &mut tokio::net::TcpStream) -> Option<(String, String)> {
    use tokio::io::AsyncReadExt;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let n = s.read(&mut chunk).await.ok()?;
        if n == 0 || buf.len() > 1 << 20 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf);
        if let Some(i) = text.find("\r\n\r\n") {
            let len = text[..i]
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                })
                .unwrap_or(0);
            if buf.len() >= i + 4 + len {
                return Some((text[..i].to_string(), text[i + 4..].to_string()));
            }
        }
    }
}

/// The records of a run directory's `requests.jsonl`, in request id order.
pub fn records_by_id(run_dir: &Path) -> Vec<infergate_model::RequestRecord> {
    let text = std::fs::read_to_string(run_dir.join("requests.jsonl")).unwrap();
    let mut v: Vec<infergate_model::RequestRecord> =
        text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    v.sort_by_key(|r| r.id);
    v
}

/// Every file under `dir`, as (path, text).
pub fn files_under(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let text = String::from_utf8_lossy(&std::fs::read(&p).unwrap()).into_owned();
                out.push((p.display().to_string(), text));
            }
        }
    }
    out
}

/// The series of an exposition's counters and histograms (names as `parse_scrape` gives them:
/// `:` mapped to `_`; a histogram's buckets, `_sum` and `_count`): the ones that never decrease.
pub fn cumulative_series(types: &HashMap<String, String>) -> std::collections::BTreeSet<String> {
    types
        .iter()
        .filter(|(_, kind)| *kind != "gauge")
        .flat_map(|(name, kind)| {
            let n = name.replace(':', "_");
            match kind.as_str() {
                "histogram" => vec![format!("{n}_sum"), format!("{n}_count"), n],
                _ => vec![n],
            }
        })
        .collect()
}

/// What each endless answer of a test server would send in full: 256 MiB.
pub const HUGE: usize = 256 << 20;

/// Write `head`, then `HUGE` bytes of `fill` (stopping when the client goes away); the bytes
/// written are added to `written`.
pub async fn endless(
    s: &mut tokio::net::TcpStream,
    head: String,
    fill: u8,
    written: &std::sync::atomic::AtomicUsize,
) {
    use tokio::io::AsyncWriteExt;
    if s.write_all(head.as_bytes()).await.is_err() {
        return;
    }
    let block = vec![fill; 64 << 10];
    for _ in 0..HUGE / block.len() {
        if s.write_all(&block).await.is_err() {
            return;
        }
        written.fetch_add(block.len(), std::sync::atomic::Ordering::Relaxed);
    }
}

/// A whole HTTP/1.1 response that closes its connection.
pub fn http_reply(status: u16, content_type: &str, body: &str) -> String {
    format!(
        "HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// How a raw test server answers the bench's preflight, normally: the model list (`m`), no
/// `/tokenize`, a one-token answer to a non-streamed request. `None` for anything else (the
/// streamed requests a test answers its own way).
pub fn preflight_reply(head: &str, body: &str) -> Option<String> {
    if head.starts_with("GET /v1/models") {
        Some(http_reply(200, "application/json", r#"{"object":"list","data":[{"id":"m"}]}"#))
    } else if head.contains("/tokenize") {
        Some(http_reply(404, "text/plain", "no"))
    } else if body.contains("\"stream\":false") {
        let ok = r#"{"choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"length"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}"#;
        Some(http_reply(200, "application/json", ok))
    } else {
        None
    }
}
