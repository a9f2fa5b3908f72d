//! Hostile servers: one raw TCP server answers every measured request of a run the same wrong
//! way (a malformed chunk, a truncated or reset stream, a gzip or HTML body, usage counts no
//! stream could carry, content after `finish_reason`, interleaved choices, HTTP/1.0, an endless
//! error body, an endless `data:` line). For each case: the outcome class of every request, the
//! summary's counters and notes, the run's status, and bounded memory.
//!
//! The cases are one table (`cases`) and one runner (`run_case`), reusable by other modules
//! with cases of their own. Memory: each case runs in a child process (this test binary,
//! filtered to [`one_case_in_this_process`]), whose peak resident memory (`VmHWM`) is then that
//! case's alone; it must stay under [`PEAK_RSS_AT_MOST_KIB`].

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

use crate::support::*;
use infergate_model::summary::RunStatus;
use infergate_model::{Outcome, RequestRecord, Summary};

/// The environment variable that names the case a child process runs.
const CASE_VAR: &str = "INFERGATE_HOSTILE_CASE";

/// The most resident memory a child process may reach (KiB). The test binary, a runtime and a
/// small run peak at 15 to 25 MiB (measured: the endless answers at the top); a case that kept
/// a 256 MiB answer, or even a quarter of one, passes this.
pub(crate) const PEAK_RSS_AT_MOST_KIB: u64 = 64 << 10;

/// What the server may get written of an endless answer before the bench stops reading (socket
/// buffers and what the bench keeps): far below `HUGE`.
const WRITTEN_AT_MOST: usize = 48 << 20;

/// How a hostile server answers a streamed request.
pub(crate) enum Answer {
    /// These bytes (status line, headers, body), then the connection is closed.
    Bytes(Vec<u8>),
    /// These pieces, 20 ms apart (so that events arrive at distinct times), then the
    /// connection is closed.
    Paced(Vec<Vec<u8>>),
    /// These bytes, then the connection is reset (RST, not FIN).
    ThenReset(Vec<u8>),
    /// `head`, then `HUGE` bytes of `fill`: an answer without an end.
    Endless { head: String, fill: u8 },
}

/// What every measured request and the run must show.
pub(crate) struct Expect {
    pub class: Outcome,
    pub status: RunStatus,
    /// Text the error of every failed request holds.
    pub error_has: &'static str,
    /// Texts one of the summary's notes each holds.
    pub notes_have: &'static [&'static str],
    /// Texts no note holds.
    pub notes_lack: &'static [&'static str],
    /// Further checks of the summary and the records.
    pub check: fn(&Summary, &[RequestRecord]),
}

pub(crate) struct Case {
    pub name: &'static str,
    pub answer: fn() -> Answer,
    pub expect: Expect,
}

/// Measured requests per case.
const REQUESTS: u64 = 2;

fn head11(content_type: &str, extra: &str) -> String {
    format!("HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\n{extra}Connection: close\r\n\r\n")
}

fn sse_bytes(head: &str, events: &[&str]) -> Vec<u8> {
    let mut out = head.to_string();
    for e in events {
        out.push_str(&format!("data: {e}\n\n"));
    }
    out.into_bytes()
}

fn tok(s: &str) -> String {
    format!(r#"{{"choices":[{{"index":0,"delta":{{"content":"{s}"}},"finish_reason":null}}]}}"#)
}

const FINISH: &str = r#"{"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}"#;

/// Three tokens, a finish reason, then usage claiming `completion` tokens.
fn with_usage(completion: &str) -> Answer {
    let usage = format!(
        r#"{{"choices":[],"usage":{{"prompt_tokens":4,"completion_tokens":{completion}}}}}"#
    );
    let (a, b, c) = (tok("a"), tok("b"), tok("c"));
    let events = [a.as_str(), b.as_str(), c.as_str(), FINISH, usage.as_str(), "[DONE]"];
    let mut pieces = vec![head11("text/event-stream", "").into_bytes()];
    pieces.extend(events.iter().map(|e| sse_bytes("", &[e])));
    Answer::Paced(pieces)
}

fn no_check(_: &Summary, _: &[RequestRecord]) {}

fn usage_set_aside(s: &Summary, records: &[RequestRecord]) {
    for r in records {
        assert!(r.rejected_usage.is_some(), "{r:?}");
        assert_eq!(r.output_tokens, Some(3), "the stream's own count");
        assert!(r.tpot_ms().is_some_and(|t| t > 0.0), "TPOT from 3 tokens: {:?}", r.tpot_ms());
    }
    assert_eq!(s.tokens.usage_rejected, REQUESTS);
    assert_eq!(s.tokens.output_total, Some(3 * REQUESTS));
    assert_eq!(s.tokens.overflows, 0);
    assert!(s.metrics.tpot_ms.as_ref().is_some_and(|t| t.min > 0.0), "{:?}", s.metrics.tpot_ms);
    let tok_s = s.throughput.output_tokens_per_s.expect("measured");
    assert!(tok_s < 1e6, "{tok_s} tok/s from 6 tokens");
}

fn violations(kind: &'static str) -> fn(&Summary, &[RequestRecord]) {
    match kind {
        "content_after_finish" => |s, records| {
            for r in records {
                assert_eq!(r.stream_violations.content_after_finish, 1, "{r:?}");
            }
            assert_eq!(s.requests.stream_violations, REQUESTS);
            assert_eq!(
                s.requests.stream_violation_kinds.get("content_after_finish"),
                Some(&REQUESTS)
            );
        },
        _ => |s, records| {
            for r in records {
                assert_eq!(r.stream_violations.interleaved_choices, 2, "{r:?}");
                assert_eq!(r.content_events, 2, "only choice 0 is measured");
            }
            assert_eq!(s.requests.stream_violations, REQUESTS);
            assert_eq!(
                s.requests.stream_violation_kinds.get("interleaved_choices"),
                Some(&REQUESTS)
            );
        },
    }
}

fn unexpected(kind: &'static str) -> fn(&Summary, &[RequestRecord]) {
    match kind {
        "gzip" => {
            |s, records| {
                assert!(
                    records.iter().all(|r| r.unexpected_body
                        == Some(infergate_model::record::UnexpectedBody::Gzip))
                );
                assert_eq!(s.requests.unexpected_bodies.get("gzip"), Some(&REQUESTS));
            }
        }
        _ => {
            |s, records| {
                assert!(
                    records.iter().all(|r| r.unexpected_body
                        == Some(infergate_model::record::UnexpectedBody::Html))
                );
                assert_eq!(s.requests.unexpected_bodies.get("html"), Some(&REQUESTS));
            }
        }
    }
}

fn clipped_error(_: &Summary, records: &[RequestRecord]) {
    for r in records {
        let e = r.error.as_deref().unwrap_or_default();
        assert!(e.len() < 1000, "the kept error text is clipped: {} bytes", e.len());
    }
}

const NONE: &[&str] = &[];

/// Every hostile case.
pub(crate) fn cases() -> Vec<Case> {
    type Check = fn(&Summary, &[RequestRecord]);
    let failed = |class: Outcome, error_has: &'static str, check: Check| Expect {
        class,
        status: RunStatus::Failed,
        error_has,
        notes_have: NONE,
        notes_lack: NONE,
        check,
    };
    let ok = |notes_have: &'static [&'static str], check: Check| Expect {
        class: Outcome::Ok,
        status: RunStatus::Complete,
        error_has: "",
        notes_have,
        notes_lack: NONE,
        check,
    };
    vec![
        Case {
            name: "malformed_json_chunk",
            answer: || {
                let a = tok("a");
                Answer::Bytes(sse_bytes(&head11("text/event-stream", ""), &[&a, "{\"choices\":["]))
            },
            expect: failed(Outcome::Malformed, "unparseable chunk", no_check),
        },
        Case {
            name: "truncated_stream",
            answer: || {
                let (a, b) = (tok("a"), tok("b"));
                Answer::Bytes(sse_bytes(&head11("text/event-stream", ""), &[&a, &b]))
            },
            expect: failed(
                Outcome::Truncated,
                "stream ended without finish_reason or [DONE]",
                no_check,
            ),
        },
        Case {
            name: "reset_mid_stream",
            answer: || {
                let a = tok("a");
                Answer::ThenReset(sse_bytes(&head11("text/event-stream", ""), &[&a]))
            },
            expect: failed(Outcome::Truncated, "before finish_reason or [DONE]", no_check),
        },
        Case {
            name: "gzip_body",
            answer: || {
                let mut b = head11("text/event-stream", "Content-Encoding: gzip\r\n").into_bytes();
                b.extend_from_slice(&[0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03]);
                b.extend_from_slice(&[0x4b, 0x49, 0x2c, 0x49, 0xb4, 0x52, 0xa8, 0xe6, 0x02, 0x00]);
                Answer::Bytes(b)
            },
            expect: Expect {
                notes_have: &["no event stream (gzip: 2)"],
                ..failed(Outcome::Truncated, "the body is gzip-compressed", unexpected("gzip"))
            },
        },
        Case {
            name: "html_body",
            answer: || {
                let page = "<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title></head>\n\
                            <body><h1>Bad Gateway</h1></body></html>\n";
                Answer::Bytes(format!("{}{page}", head11("text/html", "")).into_bytes())
            },
            expect: Expect {
                notes_have: &["no event stream (html: 2)"],
                ..failed(
                    Outcome::Truncated,
                    "the body is an HTML page (a proxy or gateway answered?)",
                    unexpected("html"),
                )
            },
        },
        Case {
            name: "usage_u64_max",
            answer: || with_usage(&u64::MAX.to_string()),
            expect: ok(
                &["2 request(s) reported a usage.completion_tokens that contradicts"],
                usage_set_aside,
            ),
        },
        Case {
            name: "usage_1e9",
            answer: || with_usage("1000000000"),
            expect: ok(
                &["2 request(s) reported a usage.completion_tokens that contradicts"],
                usage_set_aside,
            ),
        },
        Case {
            name: "content_after_finish",
            answer: || {
                let (a, b) = (tok("a"), tok("b"));
                let events = [a.as_str(), FINISH, b.as_str(), "[DONE]"];
                Answer::Bytes(sse_bytes(&head11("text/event-stream", ""), &events))
            },
            expect: ok(
                &["2 request(s) broke the streaming protocol (content_after_finish: 2)"],
                violations("content_after_finish"),
            ),
        },
        Case {
            name: "interleaved_choices",
            answer: || {
                let both = r#"{"choices":[{"index":0,"delta":{"content":"a"}},{"index":1,"delta":{"content":"X"}}]}"#;
                let other = r#"{"choices":[{"index":1,"delta":{"content":"Y"}}]}"#;
                let b = tok("b");
                let events = [both, other, b.as_str(), FINISH, "[DONE]"];
                Answer::Bytes(sse_bytes(&head11("text/event-stream", ""), &events))
            },
            expect: ok(
                &["2 request(s) broke the streaming protocol (interleaved_choices: 2)"],
                violations("interleaved_choices"),
            ),
        },
        Case {
            name: "http_1_0",
            answer: || {
                let (a, b) = (tok("a"), tok("b"));
                let head = "HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n\r\n";
                Answer::Bytes(sse_bytes(head, &[&a, &b, FINISH, "[DONE]"]))
            },
            expect: Expect {
                notes_lack: &["announces keep-alive"],
                ..ok(&["the server speaks HTTP/1.0, which closes the connection"], no_check)
            },
        },
        Case {
            name: "endless_error_body",
            answer: || Answer::Endless {
                head: format!(
                    "HTTP/1.1 500 X\r\nContent-Type: text/plain\r\nContent-Length: {HUGE}\r\nConnection: close\r\n\r\n"
                ),
                fill: b'e',
            },
            expect: failed(Outcome::Http(500), "HTTP 500: eeee", clipped_error),
        },
        Case {
            name: "endless_data_line",
            answer: || Answer::Endless {
                head: format!("{}data: ", head11("text/event-stream", "")),
                fill: b'd',
            },
            expect: failed(
                Outcome::Malformed,
                "went past 65536 bytes (client.max_event_kib)",
                no_check,
            ),
        },
    ]
}

/// Answer one connection: the preflight's model list, tokenizer (none) and one-token probe
/// normally, every streamed request with `answer`.
async fn serve(mut s: TcpStream, answer: Arc<Answer>, written: Arc<AtomicUsize>) {
    let Ok(Some((head, body))) =
        tokio::time::timeout(Duration::from_secs(10), read_http_request(&mut s)).await
    else {
        return;
    };
    // Other GETs (the metrics scrape) find nothing.
    let small = preflight_reply(&head, &body)
        .or_else(|| head.starts_with("GET").then(|| http_reply(404, "text/plain", "no")));
    if let Some(r) = small {
        let _ = s.write_all(r.as_bytes()).await;
        let _ = s.shutdown().await;
        return;
    }
    match answer.as_ref() {
        Answer::Bytes(b) => {
            let _ = s.write_all(b).await;
            let _ = s.shutdown().await;
        }
        Answer::Paced(pieces) => {
            for p in pieces {
                if s.write_all(p).await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let _ = s.shutdown().await;
        }
        Answer::ThenReset(b) => {
            let _ = s.write_all(b).await;
            let _ = s.flush().await;
            tokio::time::sleep(Duration::from_millis(50)).await;
            #[allow(deprecated)]
            let _ = s.set_linger(Some(Duration::ZERO));
            drop(s);
        }
        Answer::Endless { head, fill } => {
            let bound = Duration::from_secs(30);
            let _ =
                tokio::time::timeout(bound, endless(&mut s, head.clone(), *fill, &written)).await;
        }
    }
}

/// Run the bench (2 streamed requests, one at a time) against a server answering as `case`
/// says, and check everything the case expects.
pub(crate) async fn run_case(case: &Case) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    let answer = Arc::new((case.answer)());
    let written = Arc::new(AtomicUsize::new(0));
    let (a, w) = (answer.clone(), written.clone());
    let server = tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            tokio::spawn(serve(s, a.clone(), w.clone()));
        }
    });
    let p = profile(
        &format!(
            "[profile.default.load]\nconcurrency = 1\nrequests = {REQUESTS}\nwarmup_requests = 0\n\
             [profile.default.workload]\ninput_lengths = [4]\nmax_tokens = 4\n\
             [profile.default.client]\nrequest_timeout_s = 30\nstall_timeout_s = 10\nmax_event_kib = 64\n"
        ),
        &[],
    );
    let dir = tempfile::tempdir().unwrap();
    let out =
        tokio::time::timeout(Duration::from_secs(120), run_against_url(&url, "m", p, dir.path()))
            .await
            .unwrap_or_else(|_| panic!("{}: the run ends", case.name));
    server.abort();
    let name = case.name;
    let e = &case.expect;
    let s = &out.summary;
    let records = infergate_model::rundir::read_records(&out.dir).unwrap().records;
    assert_eq!(records.len() as u64, REQUESTS, "{name}");
    for r in &records {
        let error = r.error.as_deref().unwrap_or_default();
        assert_eq!(r.class, e.class, "{name}: request {} ({error})", r.id);
        if e.class != Outcome::Ok {
            assert!(error.contains(e.error_has), "{name}: `{error}` lacks `{}`", e.error_has);
        }
    }
    assert_eq!(s.requests.by_class.get(&e.class.to_string()), Some(&REQUESTS), "{name}");
    assert_eq!(s.status, e.status, "{name}");
    let notes = s.notes.join("\n");
    for want in e.notes_have {
        assert!(notes.contains(want), "{name}: no note holds `{want}`:\n{notes}");
    }
    for unwanted in e.notes_lack {
        assert!(!notes.contains(unwanted), "{name}: a note holds `{unwanted}`:\n{notes}");
    }
    (e.check)(s, &records);
    let w = written.load(Ordering::Relaxed);
    assert!(w < WRITTEN_AT_MOST, "{name}: the bench read on: {} MiB written", w >> 20);
    // What a run writes is on disk too: the summary there is the one returned.
    assert_eq!(&Summary::read(&out.dir).unwrap().requests, &s.requests, "{name}");
}

/// A value of `/proc/self/status` in KiB (`VmHWM`, `VmRSS`), where there is one.
fn proc_status_kib(field: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = text.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Runs the case `INFERGATE_HOSTILE_CASE` names, then prints this process's peak resident
/// memory; without the variable (any run but the child's of
/// [`every_hostile_case_in_a_child_process`]) there is nothing to do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_case_in_this_process() {
    let Ok(name) = std::env::var(CASE_VAR) else { return };
    let case = cases().into_iter().find(|c| c.name == name).expect("a known case");
    run_case(&case).await;
    if let Some(peak) = proc_status_kib("VmHWM:") {
        println!("peak_rss_kib={peak}");
    }
}

#[test]
fn every_hostile_case_in_a_child_process() {
    let exe = std::env::current_exe().unwrap();
    for case in cases() {
        let out = std::process::Command::new(&exe)
            .args([
                "hostile::one_case_in_this_process",
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CASE_VAR, case.name)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}:\n{stdout}\n{}",
            case.name,
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout.contains("1 passed"), "{}: the case ran:\n{stdout}", case.name);
        // The harness prints the test's name on the same line, before the test's own output.
        let peak = stdout.split_once("peak_rss_kib=").map(|(_, rest)| {
            rest.chars()
                .take_while(char::is_ascii_digit)
                .collect::<String>()
                .parse::<u64>()
                .unwrap()
        });
        if let Some(peak) = peak {
            assert!(
                peak < PEAK_RSS_AT_MOST_KIB,
                "{}: the run's process reached {} MiB",
                case.name,
                peak >> 10
            );
        } else {
            assert!(
                proc_status_kib("VmHWM:").is_none(),
                "{}: no peak printed although /proc/self/status has one",
                case.name
            );
        }
    }
}
