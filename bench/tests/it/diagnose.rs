//! The usual client failures are diagnosed before measuring, in terms of what to change, and
//! API keys never appear in any file or message.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::support::*;
use bench::client::PreflightError;
use bench::runner::{self, ConnectError, RunControl, RunError, RunSpec};
use infergate_model::config::{Target, TimingConfig};
use infergate_sim::SimOptions;

const PROFILE: &str = r#"
[profile.default]
[profile.default.load]
concurrency = 2
requests = 4
[profile.default.workload]
input_lengths = [8]
repeats = 2
max_tokens = 4
"#;

fn target(base_url: &str, model: Option<&str>, key_env: Option<&str>) -> Target {
    Target {
        model: model.map(str::to_string),
        api_key_env: key_env.map(str::to_string),
        ..Target::at(base_url)
    }
}

async fn try_run(t: Target, dir: &Path) -> Result<runner::RunOutcome, RunError> {
    let spec = RunSpec::quiet(profile(PROFILE, &[]), ("t".into(), t), dir.join("run"), "diag");
    runner::run(spec, RunControl::default()).await
}

fn fast() -> TimingConfig {
    TimingConfig { ttft_ms: 2.0, itl_ms: 1.0, ..TimingConfig::default() }
}

fn files_contain(dir: &Path, needle: &str) -> bool {
    std::fs::read_dir(dir).unwrap().any(|e| {
        let p = e.unwrap().path();
        std::fs::read(&p).map(|b| String::from_utf8_lossy(&b).contains(needle)).unwrap_or(false)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_model_lists_what_the_server_offers() {
    let dir = tempfile::tempdir().unwrap();
    let h = start_timing_sim(fast(), SimOptions::default()).await;
    let err =
        try_run(target(&h.base_url(), Some("gpt-nope"), None), dir.path()).await.err().unwrap();
    match &err {
        RunError::Connect(ConnectError::Preflight(PreflightError::ModelNotServed {
            model,
            offered,
            ..
        })) => assert_eq!(
            (model.as_str(), offered.clone()),
            ("gpt-nope", vec!["sim/timing".to_string()])
        ),
        other => panic!("{other:?}"),
    }
    let err = err.to_string();
    assert!(err.contains("gpt-nope") && err.contains("sim/timing"), "{err}");
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn base_url_with_or_without_v1_and_a_wrong_path() {
    let dir = tempfile::tempdir().unwrap();
    let h = start_timing_sim(fast(), SimOptions::default()).await;
    for base in [h.base_url(), format!("{}/v1", h.base_url()), format!("{}/v1/", h.base_url())] {
        let d = dir.path().join(base.len().to_string());
        let out = try_run(target(&base, None, None), &d).await.unwrap();
        assert_eq!(out.summary.target.url, format!("{}/v1/chat/completions", h.base_url()));
        assert_eq!(out.summary.target.model, "sim/timing", "the first offered model is used");
        assert_eq!(out.summary.requests.ok, 4);
    }
    let err = try_run(
        target(&format!("{}/api", h.base_url()), Some("sim/timing"), None),
        &dir.path().join("x"),
    )
    .await
    .err()
    .unwrap()
    .to_string();
    assert!(err.contains("does not exist") && err.contains("/v1"), "{err}");
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_refused_is_explained() {
    let dir = tempfile::tempdir().unwrap();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let err = try_run(target(&format!("http://127.0.0.1:{port}"), Some("m"), None), dir.path())
        .await
        .err()
        .unwrap();
    assert!(
        matches!(err, RunError::Connect(ConnectError::Preflight(PreflightError::Unreachable(_)))),
        "{err:?}"
    );
    let err = err.to_string();
    assert!(
        err.contains(&format!("127.0.0.1:{port}")) && err.to_lowercase().contains("refused"),
        "{err}"
    );
}

/// Environment variables are process-wide: every case that sets one runs in this one test,
/// one after the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_keys_come_from_the_environment_and_never_leak() {
    const VAR: &str = "INFERGATE_TEST_KEY_7f3a";
    const SECRET: &str = "sk-test-5ecret-value-91";
    let dir = tempfile::tempdir().unwrap();
    let h = start_timing_sim(
        fast(),
        SimOptions { api_key: Some(SECRET.into()), ..SimOptions::default() },
    )
    .await;
    let base = h.base_url();

    // No key configured: the server's 401 is explained in terms of api_key_env.
    let err =
        try_run(target(&base, None, None), &dir.path().join("a")).await.err().unwrap().to_string();
    assert!(err.contains("401") && err.contains("api_key_env"), "{err}");

    // Variable named but unset.
    // SAFETY: this test binary's tests do not read this variable concurrently; only this test
    // sets or reads INFERGATE_TEST_KEY_7f3a.
    unsafe { std::env::remove_var(VAR) };
    let err = try_run(target(&base, None, Some(VAR)), &dir.path().join("b"))
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains(VAR) && err.contains("not set"), "{err}");

    // A key with a trailing newline is refused before any request, without echoing it.
    unsafe { std::env::set_var(VAR, format!("{SECRET}\n")) };
    let err = try_run(target(&base, None, Some(VAR)), &dir.path().join("c"))
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("newline") && !err.contains(SECRET), "{err}");

    // A wrong key: 401 explained, the key not shown.
    unsafe { std::env::set_var(VAR, "sk-wrong-key-0000") };
    let err = try_run(target(&base, None, Some(VAR)), &dir.path().join("d"))
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("401") && err.contains(VAR) && err.contains("Bearer"), "{err}");
    assert!(!err.contains("sk-wrong-key-0000"), "{err}");

    // The right key: the run works and the key is in no file of the run directory.
    unsafe { std::env::set_var(VAR, SECRET) };
    let out = try_run(target(&base, None, Some(VAR)), &dir.path().join("e")).await.unwrap();
    assert_eq!(out.summary.requests.ok, 4);
    assert_eq!(out.summary.target.api_key_env.as_deref(), Some(VAR));
    assert!(!files_contain(&out.dir, SECRET), "the key leaked into the run directory");
    assert!(files_contain(&out.dir, VAR), "the variable's name is recorded");
    unsafe { std::env::remove_var(VAR) };
    h.shutdown().await;
}

/// A minimal OpenAI-compatible server over raw TCP that behaves like llama.cpp's: it announces
/// `Keep-Alive` on every response but closes the connection shortly after each streamed one.
/// Returns its base URL and counters of (connections accepted, requests read on a connection
/// that had already carried a streamed response).
async fn closing_server() -> (String, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let accepted = Arc::new(AtomicUsize::new(0));
    let after_stream = Arc::new(AtomicUsize::new(0));
    let (acc, late) = (accepted.clone(), after_stream.clone());
    tokio::spawn(async move {
        // Bounded: the tests using it send far fewer connections than this.
        for _ in 0..1000 {
            let Ok((sock, _)) = listener.accept().await else { return };
            let n = acc.fetch_add(1, Ordering::SeqCst) as u64;
            // llama.cpp's close arrives right behind the last chunk; a little later on some
            // connections, so that a client may already have sent on a dying one.
            let close_delay_us = (n % 2) * 200;
            let late = late.clone();
            tokio::spawn(async move {
                let mut sock = BufReader::new(sock);
                let mut streamed = false;
                for _ in 0..100 {
                    let mut head = String::new();
                    loop {
                        let mut line = String::new();
                        match sock.read_line(&mut line).await {
                            Ok(0) | Err(_) => return,
                            Ok(_) if line == "\r\n" => break,
                            Ok(_) => head.push_str(&line),
                        }
                    }
                    if streamed {
                        late.fetch_add(1, Ordering::SeqCst);
                    }
                    let len = head
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse::<usize>().unwrap())
                        })
                        .unwrap_or(0);
                    let mut body = vec![0; len];
                    sock.read_exact(&mut body).await.unwrap();
                    let body: serde_json::Value =
                        serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
                    let path = head.split_whitespace().nth(1).unwrap_or("").to_string();
                    let plain = |status: &str, json: String| {
                        format!(
                            "HTTP/1.1 {status}\r\nContent-Type: application/json\r\n\
                             Keep-Alive: timeout=5, max=100\r\nContent-Length: {}\r\n\r\n{json}",
                            json.len()
                        )
                    };
                    let out = if path == "/v1/models" {
                        plain(
                            "200 OK",
                            r#"{"object":"list","data":[{"id":"m","object":"model"}]}"#.into(),
                        )
                    } else if path != "/v1/chat/completions" {
                        plain("404 Not Found", r#"{"error":{"message":"not found"}}"#.into())
                    } else if body["stream"] != serde_json::json!(true) {
                        plain(
                            "200 OK",
                            r#"{"choices":[{"index":0,"message":{"role":"assistant","content":"a"},"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}"#.into(),
                        )
                    } else {
                        streamed = true;
                        let n = body["max_tokens"].as_u64().unwrap_or(4);
                        let mut events = String::new();
                        for i in 0..n {
                            let fin = if i + 1 == n { r#""length""# } else { "null" };
                            events.push_str(&format!(
                                "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"t{i} \"}},\"finish_reason\":{fin}}}]}}\n\n"
                            ));
                        }
                        events.push_str(&format!(
                            "data: {{\"choices\":[],\"usage\":{{\"prompt_tokens\":3,\"completion_tokens\":{n},\"total_tokens\":{}}}}}\n\ndata: [DONE]\n\n",
                            n + 3
                        ));
                        format!(
                            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\
                             Keep-Alive: timeout=5, max=100\r\nTransfer-Encoding: chunked\r\n\r\n\
                             {:x}\r\n{events}\r\n0\r\n\r\n",
                            events.len()
                        )
                    };
                    if sock.get_mut().write_all(out.as_bytes()).await.is_err() {
                        return;
                    }
                    if streamed {
                        tokio::time::sleep(Duration::from_micros(close_delay_us)).await;
                        return;
                    }
                }
            });
        }
    });
    (base, accepted, after_stream)
}

/// A server that closes connections after streamed responses although it announces keep-alive
/// is recognised before the run: every request opens its own connection, none is sent on a
/// connection being closed, and every request succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_closing_connections_after_streams_gets_one_connection_per_request() {
    let dir = tempfile::tempdir().unwrap();
    let (base, accepted, after_stream) = closing_server().await;
    let spec = RunSpec::quiet(
        profile(PROFILE, &["load.concurrency=4", "load.requests=40", "workload.repeats=40"]),
        ("t".into(), target(&base, Some("m"), None)),
        dir.path().join("run"),
        "closing",
    );
    let out = runner::run(spec, RunControl::default()).await.unwrap();
    assert_eq!(out.summary.requests.ok, 40, "{:?}", out.summary.requests.by_class);
    assert!(
        out.summary.notes.iter().any(|n| n.contains("closes connections")),
        "{:?}",
        out.summary.notes
    );
    assert_eq!(after_stream.load(Ordering::SeqCst), 0, "a request reached a closing connection");
    assert!(accepted.load(Ordering::SeqCst) >= 40, "one connection per measured request");
}

/// A server that does keep connections open (the simulator, like vLLM's uvicorn) keeps them
/// reused: no note, and no connection per request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_keeping_connections_open_is_not_flagged() {
    let dir = tempfile::tempdir().unwrap();
    let h = start_timing_sim(fast(), SimOptions::default()).await;
    let out = try_run(target(&h.base_url(), None, None), dir.path()).await.unwrap();
    assert_eq!(out.summary.requests.ok, 4);
    assert!(
        !out.summary.notes.iter().any(|n| n.contains("closes connections")),
        "{:?}",
        out.summary.notes
    );
    h.shutdown().await;
}

/// A server that refuses `max_tokens` (400 naming it) gets `max_completion_tokens` instead:
/// the probe retries with it, every measured request carries it, and the summary says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_refusing_max_tokens_gets_max_completion_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let opts = SimOptions { only_max_completion_tokens: true, ..SimOptions::default() };
    let h = start_timing_sim(fast(), opts).await;
    let out = try_run(target(&h.base_url(), Some(h.model()), None), dir.path()).await.unwrap();
    let served = h.records();
    h.shutdown().await;
    let s = &out.summary;
    assert_eq!(s.requests.ok, 4, "{:?} {:?}", s.requests.by_class, s.notes);
    assert_eq!(s.target.max_tokens_field.as_deref(), Some("max_completion_tokens"));
    assert!(
        s.notes
            .iter()
            .any(|n| n
                .contains("the server rejects max_tokens; max_completion_tokens is sent instead")),
        "{:?}",
        s.notes
    );
    // The limit was honoured: each measured request got its 4 tokens, not the server's default.
    let measured: Vec<_> = served.iter().filter(|r| r.request_id.is_some()).collect();
    assert!(measured.len() >= 4);
    assert!(measured.iter().all(|r| r.output_tokens == 4), "{measured:?}");
}

/// A run given an earlier run's preflight of the same server (the trials of an A/B gate's arm)
/// sends only its measured requests and records the same target; one given the preflight of a
/// server at another address asks its own server again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_later_run_of_a_job_takes_the_first_runs_preflight_and_sends_only_its_requests() {
    let dir = tempfile::tempdir().unwrap();
    let h = start_timing_sim(fast(), SimOptions::default()).await;
    let run = |n: &str, known: Option<bench::client::Resolved>| {
        let mut spec = RunSpec::quiet(
            profile(PROFILE, &[]),
            ("t".into(), target(&h.base_url(), None, None)),
            dir.path().join(n),
            n,
        );
        spec.preflight = known;
        runner::run(spec, RunControl::default())
    };
    let first = run("first", None).await.unwrap();
    let served_first = h.records().len();
    assert!(served_first > 4, "the preflight's probes reach the server: {served_first}");
    let second = run("second", Some(first.preflight.clone())).await.unwrap();
    assert_eq!(second.summary.requests.ok, 4);
    assert_eq!(h.records().len() - served_first, 4, "only the measured requests were sent");
    assert_eq!(
        serde_json::to_value(&second.summary.target).unwrap(),
        serde_json::to_value(&first.summary.target).unwrap()
    );
    let mut elsewhere = first.preflight.clone();
    elsewhere.root = "http://127.0.0.1:1".into();
    let before = h.records().len();
    let third = run("third", Some(elsewhere)).await.unwrap();
    assert_eq!(third.summary.requests.ok, 4);
    assert_eq!(h.records().len() - before, served_first, "another address: asked again");
    h.shutdown().await;
}
