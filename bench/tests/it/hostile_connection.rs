//! Servers that misbehave at the connection level: they stall before their headers or mid-answer,
//! redirect elsewhere, serve models they do not list, or guard `/metrics`; and runs stopped
//! during their preflight or by a full disk. Each ends in a named class, error or status, never
//! in a hang or a lost summary.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

use crate::support::*;
use bench::client::PreflightError;
use bench::runner::{self, ConnectError, RunControl, RunError, RunOutcome, RunSpec};
use infergate_model::config::{BenchConfig, Source, Target, TimingConfig};
use infergate_model::summary::RunStatus;
use infergate_sim::SimOptions;

/// What the raw server does with one request.
#[derive(Clone)]
enum Answer {
    /// This response, whole; the connection stays open for the next request.
    Reply(String),
    /// Read the request, send nothing (the connection stays open a while).
    Silent,
    /// Send these bytes (headers and part of a body), then nothing more.
    Partial(String),
    /// This response, whole, after a delay (a non-streamed generation taking that long).
    Late(Duration, String),
}

type Handler = Arc<dyn Fn(&str, &str) -> Answer + Send + Sync>;

/// A raw HTTP/1.1 server on 127.0.0.1 answering each request as `handler` says from its head
/// and body. Returns its base URL and the count of requests it has read.
async fn raw_server(handler: Handler) -> (String, Arc<AtomicUsize>) {
    raw_server_counting(handler, Arc::default()).await
}

/// [`raw_server`], counting the connections it accepts in `conns`.
async fn raw_server_counting(
    handler: Handler,
    conns: Arc<AtomicUsize>,
) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(AtomicUsize::new(0));
    let count = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            conns.fetch_add(1, Ordering::SeqCst);
            let (handler, seen) = (handler.clone(), seen.clone());
            tokio::spawn(async move {
                // At most 1000 requests a connection.
                for _ in 0..1000 {
                    let Some((head, body)) = read_http_request(&mut conn).await else { return };
                    seen.fetch_add(1, Ordering::SeqCst);
                    match handler(&head, &body) {
                        Answer::Reply(r) => {
                            if conn.write_all(r.as_bytes()).await.is_err() {
                                return;
                            }
                        }
                        Answer::Silent => {
                            tokio::time::sleep(Duration::from_secs(60)).await;
                            return;
                        }
                        Answer::Late(after, r) => {
                            tokio::time::sleep(after).await;
                            if conn.write_all(r.as_bytes()).await.is_err() {
                                return;
                            }
                        }
                        Answer::Partial(bytes) => {
                            let _ = conn.write_all(bytes.as_bytes()).await;
                            tokio::time::sleep(Duration::from_secs(60)).await;
                            return;
                        }
                    }
                }
            });
        }
    });
    (url, count)
}

fn response(status: u16, headers: &str, body: &str) -> String {
    format!(
        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{headers}\r\n{body}",
        body.len()
    )
}

fn models(ids: &[&str]) -> Answer {
    let data: Vec<String> =
        ids.iter().map(|m| format!("{{\"id\":\"{m}\",\"object\":\"model\"}}")).collect();
    Answer::Reply(response(
        200,
        "",
        &format!("{{\"object\":\"list\",\"data\":[{}]}}", data.join(",")),
    ))
}

fn completion() -> Answer {
    Answer::Reply(response(
        200,
        "",
        r#"{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"one two"},"finish_reason":"stop"}],"usage":{"prompt_tokens":8,"completion_tokens":2,"total_tokens":10}}"#,
    ))
}

/// The path of a request head (`POST /v1/chat/completions HTTP/1.1` -> `/v1/chat/completions`).
fn path(head: &str) -> &str {
    head.split(' ').nth(1).unwrap_or("")
}

/// The preflight's one-token probe (its prompt is `hello`; measured prompts are longer).
fn is_probe(body: &str) -> bool {
    body.contains("\"content\":\"hello\"")
}

/// A well-behaved OpenAI-compatible server listing `listed`, with `measured` answering the
/// measured completion requests.
fn server(listed: &'static [&'static str], measured: Answer) -> Handler {
    Arc::new(move |head, body| match path(head) {
        "/v1/models" => models(listed),
        "/v1/chat/completions" if is_probe(body) => completion(),
        "/v1/chat/completions" => measured.clone(),
        _ => Answer::Reply(response(404, "", "{}")),
    })
}

const PROFILE: &str = "[profile.default]\nstream = false\n\
    [profile.default.load]\nconcurrency = 2\nrequests = 2\nwarmup_requests = 0\n\
    [profile.default.workload]\ninput_lengths = [8]\nmax_tokens = 4\n\
    [profile.default.scrape]\nenabled = false\n\
    [profile.default.client]\nrequest_timeout_s = 60\nstall_timeout_s = 60\n";

fn spec(target: Target, dir: &Path, sets: &[&str]) -> RunSpec {
    RunSpec::quiet(profile(PROFILE, sets), ("t".into(), target), dir.join("run"), "hostile")
}

async fn try_run(target: Target, dir: &Path, sets: &[&str]) -> Result<RunOutcome, RunError> {
    runner::run(spec(target, dir, sets), RunControl::default()).await
}

/// The `error` of every record in a run's `requests.jsonl`.
fn record_errors(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("requests.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .map(|r| r["error"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn measured_requests_end_in_a_named_class_when_the_server_stalls_or_redirects() {
    // (measured requests' answer, settings, class, what every error names)
    let cases: Vec<(Answer, &[&str], &str, &[&str])> = vec![
        // Accepted, never answered: the stall timeout, not the 60 s request timeout, ends a
        // streamed request's wait for its headers.
        (
            Answer::Silent,
            &["client.stall_timeout_s=0.5", "stream=true"],
            "timeout",
            &["no response headers for 500ms", "client.stall_timeout_s"],
        ),
        // Not streamed: only the request timeout bounds the wait.
        (
            Answer::Silent,
            &["client.request_timeout_s=0.5", "client.stall_timeout_s=0.2"],
            "timeout",
            &["no response headers within the request timeout", "client.request_timeout_s"],
        ),
        (
            Answer::Reply(response(
                307,
                "Location: http://user:pw@127.0.0.1:9/v1/chat/completions?key=zz\r\n",
                "",
            )),
            &[],
            "http_307",
            &["redirect to http://127.0.0.1:9/v1/chat/completions?…", "not followed"],
        ),
    ];
    for (i, (answer, sets, class, named)) in cases.into_iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        let (url, _) = raw_server(server(&["m"], answer)).await;
        let out = try_run(Target::at(&url).with_model("m"), dir.path(), sets).await.unwrap();
        let s = &out.summary;
        assert_eq!(s.requests.by_class.get(class), Some(&2), "case {i}: {:?}", s.requests.by_class);
        assert_eq!(s.status, RunStatus::Failed, "case {i}");
        for e in record_errors(&out.dir) {
            for n in named {
                assert!(e.contains(n), "case {i}: {e}");
            }
            assert!(!e.contains("pw") && !e.contains("key=zz"), "case {i}: {e}");
        }
    }
}

/// A non-streamed answer comes whole after its generation: a generation longer than the stall
/// timeout (1 s against 0.3 s) is measured, not cut as a stall.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_streamed_generation_longer_than_the_stall_timeout_is_measured() {
    let dir = tempfile::tempdir().unwrap();
    let Answer::Reply(body) = completion() else { unreachable!() };
    let (url, _) = raw_server(server(&["m"], Answer::Late(Duration::from_secs(1), body))).await;
    let sets = ["client.stall_timeout_s=0.3", "client.request_timeout_s=10"];
    let out = try_run(Target::at(&url).with_model("m"), dir.path(), &sets).await.unwrap();
    let s = &out.summary;
    assert_eq!(s.requests.ok, 2, "{:?} {:?}", s.requests.by_class, record_errors(&out.dir));
    assert!(s.metrics.e2e_ms.as_ref().unwrap().min >= 1000.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_preflight_request_is_bound_by_the_client_timeouts() {
    let stalled_models: Handler = Arc::new(|head, _| match path(head) {
        "/v1/models" => Answer::Silent,
        _ => completion(),
    });
    let half_models: Handler = Arc::new(|head, _| {
        match path(head) {
        "/v1/models" => Answer::Partial(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"data\":"
                .into(),
        ),
        _ => completion(),
    }
    });
    let stalled_probe: Handler = Arc::new(|head, body| match path(head) {
        "/v1/models" => models(&["m"]),
        _ if is_probe(body) => Answer::Silent,
        _ => completion(),
    });
    let stalled_tokenize: Handler = Arc::new(|head, body| match path(head) {
        "/v1/models" => models(&["m"]),
        "/tokenize" => Answer::Silent,
        _ if is_probe(body) => completion(),
        _ => completion(),
    });
    // (server, settings, what the error names)
    let stall = &["client.stall_timeout_s=0.5"][..];
    let cases: Vec<(Handler, &[&str], &[&str])> = vec![
        (
            stalled_models.clone(),
            stall,
            &[
                "preflight, the model list",
                "no response headers for 500ms",
                "client.stall_timeout_s",
            ],
        ),
        (
            stalled_models,
            &["client.request_timeout_s=0.5"],
            &["preflight, the model list", "client.request_timeout_s"],
        ),
        (
            half_models,
            stall,
            &[
                "preflight, the model list",
                "the answer stopped after 8 bytes",
                "client.stall_timeout_s",
            ],
        ),
        (stalled_probe, stall, &["preflight, the one-token probe", "client.stall_timeout_s"]),
        (stalled_tokenize, stall, &["preflight, /tokenize", "client.stall_timeout_s"]),
    ];
    for (i, (handler, sets, named)) in cases.into_iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        let (url, _) = raw_server(handler).await;
        let err = try_run(Target::at(&url).with_model("m"), dir.path(), sets).await.err().unwrap();
        match &err {
            RunError::Connect(ConnectError::Preflight(PreflightError::Unreachable(u))) => {
                assert!(u.timed_out, "case {i}: {err}")
            }
            other => panic!("case {i}: {other:?}"),
        }
        let text = err.to_string();
        for n in named {
            assert!(text.contains(n), "case {i}: {text}");
        }
        assert!(!dir.path().join("run/summary.json").exists(), "case {i}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupt_during_the_preflight_ends_the_run_with_nothing_measured() {
    let dir = tempfile::tempdir().unwrap();
    let (url, seen) = raw_server(Arc::new(|_, _| Answer::Silent)).await;
    let control = RunControl::default();
    let run = {
        let (spec, control) =
            (spec(Target::at(&url).with_model("m"), dir.path(), &[]), control.clone());
        tokio::spawn(runner::run(spec, control))
    };
    // Once the preflight's first request has arrived (the server never answers it).
    wait_until(
        Duration::from_secs(30),
        "the preflight's first request at the server",
        async || seen.load(Ordering::SeqCst) > 0,
    )
    .await;
    control.interrupt();
    let err = tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .expect("the interrupted run ends")
        .unwrap()
        .err()
        .unwrap();
    assert!(matches!(err, RunError::Interrupted { .. }), "{err:?}");
    assert!(err.to_string().contains("no run was measured"), "{err}");
    for f in ["summary.json", "requests.jsonl"] {
        assert!(!dir.path().join("run").join(f).exists(), "{f}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_to_another_host_is_refused_unless_allowed_and_then_noted() {
    let dir = tempfile::tempdir().unwrap();
    let sim = start_timing_sim(TimingConfig::default(), SimOptions::default()).await;
    let to = sim.base_url().replace("http://", "http://user:pw@");
    let (url, _) = raw_server(Arc::new(move |head, _| {
        let location = format!("Location: {to}{}?token=zz\r\n", path(head));
        Answer::Reply(response(307, &location, ""))
    }))
    .await;
    let target = || Target::at(&url).with_model(sim.model());
    let err = try_run(target(), &dir.path().join("a"), &[]).await.err().unwrap();
    assert!(
        matches!(
            err,
            RunError::Connect(ConnectError::Preflight(PreflightError::Redirected {
                status: 307,
                ..
            }))
        ),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(text.contains(&format!("{}/v1/models?…", sim.base_url())), "{text}");
    assert!(text.contains("client.cross_host_redirects = true"), "{text}");
    assert!(!text.contains("pw") && !text.contains("token=zz"), "{text}");

    let out = try_run(target(), &dir.path().join("b"), &["client.cross_host_redirects=true"])
        .await
        .unwrap();
    assert_eq!((out.summary.status, out.summary.requests.ok), (RunStatus::Complete, 2));
    assert!(out.summary.target.url.starts_with(&url), "the summary names the configured URL");
    let note = out.summary.notes.iter().find(|n| n.contains("redirects to another host"));
    let note = note.unwrap_or_else(|| panic!("{:?}", out.summary.notes));
    assert!(note.contains(&sim.base_url()) && !note.contains("pw"), "{note}");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_the_list_omits_is_measured_when_the_probe_is_answered() {
    let dir = tempfile::tempdir().unwrap();
    let (url, _) = raw_server(server(&["listed"], completion())).await;
    let out = try_run(Target::at(&url).with_model("unlisted"), dir.path(), &[]).await.unwrap();
    assert_eq!((out.summary.status, out.summary.requests.ok), (RunStatus::Complete, 2));
    assert_eq!(out.summary.target.model, "unlisted");
    assert!(
        out.summary.notes.iter().any(|n| n.contains("model `unlisted` is not listed")
            && n.contains("listed")
            && n.contains("probe")),
        "{:?}",
        out.summary.notes
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_connection_of_the_load_is_opened_before_the_window() {
    let dir = tempfile::tempdir().unwrap();
    // The connections the server had accepted when the first measured request arrived.
    let conns = Arc::new(AtomicUsize::new(0));
    let at_first = Arc::new(AtomicUsize::new(0));
    let handler: Handler = {
        let (conns, at_first) = (conns.clone(), at_first.clone());
        Arc::new(move |head, body| match path(head) {
            "/v1/models" => models(&["m"]),
            "/v1/chat/completions" => {
                if !is_probe(body) {
                    let _ = at_first.compare_exchange(
                        0,
                        conns.load(Ordering::SeqCst),
                        Ordering::SeqCst,
                        Ordering::SeqCst,
                    );
                }
                completion()
            }
            _ => Answer::Reply(response(404, "", "{}")),
        })
    };
    let (url, _) = raw_server_counting(handler, conns).await;
    // More than the 256 opened before this change.
    let sets = ["load.concurrency=260", "load.requests=260"];
    let out = try_run(Target::at(&url).with_model("m"), dir.path(), &sets).await.unwrap();
    assert!(at_first.load(Ordering::SeqCst) >= 260, "{}", at_first.load(Ordering::SeqCst));
    let c = out.summary.extra.connections.expect("the connections section");
    assert_eq!((c.wanted, c.opened), (260, 260), "{c:?}");
    // A connection whose last preconnect answer the pool has not taken back yet when the 260
    // requests start can be replaced by a fresh one (hyper races a checkout with a connect): at
    // most one such request on a busy machine, and the summary counts it, never hides it.
    assert!(c.cold_requests <= 1, "{c:?}");
    let on_disk: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(on_disk["extra"]["connections"]["opened_before_window"], 260, "{on_disk}");
}

/// A writer that takes `lines` writes, then fails as a full disk does.
struct FullAfter {
    file: std::fs::File,
    lines: usize,
}

impl std::io::Write for FullAfter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.lines == 0 {
            return Err(std::io::Error::from_raw_os_error(28)); // ENOSPC
        }
        self.lines -= 1;
        self.file.write_all(buf)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_write_of_the_records_stops_the_run_and_the_summary_is_still_written() {
    let dir = tempfile::tempdir().unwrap();
    let timing = TimingConfig { ttft_ms: 2.0, itl_ms: 1.0, ..TimingConfig::default() };
    let sim = start_timing_sim(timing, SimOptions::default()).await;
    let p = profile(
        "[profile.default.load]\nconcurrency = 2\nrequests = 500\nwarmup_requests = 0\n\
         [profile.default.workload]\ninput_lengths = [8]\nmax_tokens = 4\n\
         [profile.default.scrape]\nenabled = false\n",
        &[],
    );
    let control = RunControl::default()
        .with_record_sink(Arc::new(|file| Box::new(FullAfter { file, lines: 3 })));
    let out = run_with_control(&sim, p, dir.path(), control).await;
    let s = &out.summary;
    assert_eq!(s.status, RunStatus::Aborted);
    assert_eq!(s.requests.total, 3, "the summary covers the records written");
    let note = s.notes.iter().find(|n| n.contains("first failed write of requests.jsonl"));
    let note = note.unwrap_or_else(|| panic!("{:?}", s.notes));
    assert!(note.contains("No space left on device") && note.contains("requests.jsonl"), "{note}");
    assert_eq!(record_errors(&out.dir).len(), 3, "what was written is kept");
    let on_disk = infergate_model::Summary::read(&out.dir).unwrap();
    assert_eq!(on_disk.status, RunStatus::Aborted);
    // The run stopped at the failure instead of sending all 500 requests.
    let served = sim.records().len();
    assert!(served < 500, "{served} requests were sent after the disk failed");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metrics_scrape_carries_the_targets_headers() {
    let dir = tempfile::tempdir().unwrap();
    let page = "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 1\n";
    let (url, _) = raw_server(Arc::new(move |head, body| match path(head) {
        "/metrics" if head.to_ascii_lowercase().contains("x-tenant: bench") => {
            Answer::Reply(response(200, "", page))
        }
        "/metrics" => Answer::Reply(response(401, "", "{}")),
        "/v1/models" => models(&["m"]),
        _ if is_probe(body) || path(head) == "/v1/chat/completions" => completion(),
        _ => Answer::Reply(response(404, "", "{}")),
    }))
    .await;
    let cfg = BenchConfig::from_source(Source::new(
        "bench.toml",
        format!(
            "[targets.gw]\nbase_url = \"{url}\"\nmodel = \"m\"\n[targets.gw.headers]\nX-Tenant = \"bench\"\n\
             {}",
            PROFILE.replace("enabled = false", "enabled = true\ninterval_s = 0.5").replace(
                "[profile.default]\n",
                "[profile.default]\ntarget = \"gw\"\n"
            )
        ),
    ))
    .unwrap();
    let resolved = cfg.resolve("default", &[]).unwrap();
    let mut spec = spec(resolved.target.clone().unwrap().1, dir.path(), &[]);
    spec.profile = resolved;
    let out = runner::run(spec, RunControl::default()).await.unwrap();
    assert!(
        !out.summary.notes.iter().any(|n| n.contains("server metrics skipped")),
        "{:?}",
        out.summary.notes
    );
    assert!(out.summary.server.is_some());
}
