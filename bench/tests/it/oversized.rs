//! A server whose answers have no end: a 256 MiB error body, and a stream whose one `data:` line
//! is 256 MiB long. The bench keeps what it documents (64 KiB of an error body, at most
//! `client.max_event_kib` of a line) and stops reading there: the requests end as `http_500` and
//! `malformed`, and the server gets to write only what the socket buffers hold. The preflight's
//! probes and the metrics scraper (an endless `/metrics` page) stop where they document too.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

use crate::support::*;
use infergate_model::Outcome;

/// What the server may get written before the bench stops reading (kernel socket buffers and
/// what the bench keeps): far below `HUGE`.
const WRITTEN_AT_MOST: usize = 48 << 20;

async fn serve(mut s: TcpStream, written: Arc<[AtomicUsize; 3]>, next: Arc<AtomicUsize>) {
    let Ok(Some((head, body))) =
        tokio::time::timeout(Duration::from_secs(10), read_http_request(&mut s)).await
    else {
        return;
    };
    let req = format!(
        "{head}
{body}"
    );
    if let Some(r) = preflight_reply(&head, &body) {
        let _ = s.write_all(r.as_bytes()).await;
        let _ = s.shutdown().await;
        return;
    }
    let bound = Duration::from_secs(30);
    if req.starts_with("GET /metrics") {
        let head = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n# ";
        let _ = tokio::time::timeout(bound, endless(&mut s, head.into(), b'm', &written[2])).await;
        return;
    }
    if next.fetch_add(1, Ordering::Relaxed) % 2 == 0 {
        let head = format!(
            "HTTP/1.1 500 X\r\nContent-Type: text/plain\r\nContent-Length: {HUGE}\r\nConnection: close\r\n\r\n"
        );
        let _ = tokio::time::timeout(bound, endless(&mut s, head, b'e', &written[0])).await;
    } else {
        let head =
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\ndata: "
                .to_string();
        let _ = tokio::time::timeout(bound, endless(&mut s, head, b'd', &written[1])).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endless_bodies_and_lines_are_cut_where_documented_and_classified() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    let written: Arc<[AtomicUsize; 3]> =
        Arc::new([AtomicUsize::new(0), AtomicUsize::new(0), AtomicUsize::new(0)]);
    let next = Arc::new(AtomicUsize::new(0));
    let (w, n) = (written.clone(), next.clone());
    let server = tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            tokio::spawn(serve(s, w.clone(), n.clone()));
        }
    });
    let p = profile(
        "[profile.default.load]\nconcurrency = 1\nrequests = 4\nwarmup_requests = 0\n\
         [profile.default.workload]\ninput_lengths = [4]\nmax_tokens = 4\n\
         [profile.default.client]\nrequest_timeout_s = 30\nstall_timeout_s = 10\nmax_event_kib = 64\n",
        &[],
    );
    let dir = tempfile::tempdir().unwrap();
    let out =
        tokio::time::timeout(Duration::from_secs(120), run_against_url(&url, "m", p, dir.path()))
            .await
            .expect("the run ends: nothing waits for an endless body");
    server.abort();
    let records = infergate_model::rundir::read_records(&out.dir).unwrap().records;
    assert_eq!(records.len(), 4);
    for r in &records {
        let error = r.error.as_deref().unwrap_or_default();
        match r.class {
            Outcome::Http(500) => {
                assert!(
                    error.len() < 1000,
                    "the kept error text is clipped: {} bytes",
                    error.len()
                );
            }
            Outcome::Malformed => {
                assert!(error.contains("65536 bytes") && error.contains("max_event_kib"), "{error}")
            }
            other => panic!("request {} ended as {other}: {error}", r.id),
        }
    }
    let classes: Vec<Outcome> = records.iter().map(|r| r.class).collect();
    assert_eq!(classes.iter().filter(|c| **c == Outcome::Malformed).count(), 2, "{classes:?}");
    for (what, w) in ["error body", "SSE line", "metrics page"].iter().zip(written.iter()) {
        let w = w.load(Ordering::Relaxed);
        assert!(
            w < WRITTEN_AT_MOST,
            "the bench read on: the server wrote {} MiB of a 256 MiB {what}",
            w >> 20
        );
    }
}

/// A 100 MB prompt reaches the simulator whole and is refused as an engine refuses a prompt
/// beyond its context (400, JSON), not dropped while it is still being sent: the bench's
/// client (the same HTTP stack) gets an answer, so the request is `http_400`, not
/// `connect_error`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_megabyte_prompt_is_answered_with_400_not_dropped() {
    let opts = infergate_sim::SimOptions::default();
    let model = opts.model.clone();
    let handle = start_timing_sim(Default::default(), opts).await;
    let body = serde_json::json!({
        "model": model,
        "messages": [{"role": "user", "content": "x ".repeat(50 << 20)}],
        "max_tokens": 4,
    })
    .to_string();
    assert!(body.len() > 100 << 20);
    let r = http()
        .post(format!("{}/v1/chat/completions", handle.base_url()))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("an answer, not a connection reset");
    assert_eq!(r.status().as_u16(), 400);
    let text = r.text().await.unwrap();
    assert!(text.contains("maximum context length"), "{text}");
}
