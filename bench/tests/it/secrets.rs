//! A server that echoes the API key (and the password of the URL) in every place it can: the
//! model list, error bodies with the key at every offset around the lengths the bench keeps,
//! JSON-escaped and percent-encoded, SSE error events and error objects, a malformed chunk, a
//! `finish_reason`, redirect locations, preflight refusals. Not one byte the run writes or
//! returns holds the key or any 8-character slice of it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

use crate::support::*;
use bench::runner::{self, RunControl, RunSpec};
use infergate_model::config::Target;

/// Read only from this variable (set by these tests alone).
const KEY_VAR: &str = "INFERGATE_TEST_SECRETS_KEY";
const KEY: &str = "sk-LEAKCHECK-7f3a9c1e5b2d4086-ZQXW";
/// The password of the target URL.
const PASSWORD: &str = "pw-HUNTER2-c0ffee42";

/// Where the bench cuts server text: error bodies, notes and error events; malformed chunks.
const LIMITS: [usize; 2] = [300, 120];

/// The spellings of a secret a server may echo.
fn spellings(secret: &str) -> Vec<String> {
    vec![
        secret.to_string(),
        secret.replace('-', "\\u002d"),
        secret.replace('-', "\\\\u002D"),
        secret.chars().map(|c| format!("\\u{:04x}", c as u32)).collect(),
        secret.replace('-', "%2D"),
    ]
}

/// Text with `secret` spelled `spelling` after `pad` characters.
fn at_offset(pad: usize, spelling: &str) -> String {
    format!("{}{spelling}{}", "x".repeat(pad), "y".repeat(60))
}

/// What the server answers to the n-th measured request.
fn hostile_answers(port: u16) -> Vec<String> {
    let mut out = Vec::new();
    let mut all = spellings(KEY);
    all.extend(spellings(PASSWORD));
    for spelling in &all {
        for limit in LIMITS {
            for pad in limit.saturating_sub(KEY.len() + 12)..=limit + 2 {
                let text = at_offset(pad, spelling);
                let json_text = serde_json::to_string(&text).unwrap();
                // A status with the text as its body, and the same text in streamed errors.
                out.push(response(500, "text/plain", &[], &text));
                out.push(sse(&[("error", &text)]));
                out.push(sse(&[("error", &format!("{{\"error\":{{\"message\":{json_text}}}}}"))]));
                out.push(sse(&[("", &format!("{{\"error\":{{\"message\":{json_text}}}}}"))]));
                out.push(sse(&[(
                    "",
                    &format!("{{\"object\":\"error\",\"message\":{json_text}}}"),
                )]));
                // A malformed chunk.
                out.push(sse(&[("", &format!("{{{text}"))]));
            }
        }
        // Content and finish_reason.
        let quoted = serde_json::to_string(spelling).unwrap();
        out.push(sse(&[
            ("", &format!("{{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":{quoted}}}}}]}}")),
            (
                "",
                &format!(
                    "{{\"choices\":[{{\"index\":0,\"delta\":{{}},\"finish_reason\":{quoted}}}]}}"
                ),
            ),
            ("", "[DONE]"),
        ]));
        // A redirect to a location holding the key, which answers with it; a redirect loop.
        let to = format!("http://127.0.0.1:{port}/redirected?key={spelling}");
        out.push(response(307, "text/plain", &[("Location", &to)], spelling));
        let to = format!("http://user:{spelling}@127.0.0.1:{port}/loop?key={spelling}");
        out.push(response(302, "text/plain", &[("Location", &to)], spelling));
    }
    out
}

fn response(status: u16, content_type: &str, headers: &[(&str, &str)], body: &str) -> String {
    let mut head = format!(
        "HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    format!("{head}\r\n{body}")
}

/// An SSE response of these events (`event:` type, `data:`).
fn sse(events: &[(&str, &str)]) -> String {
    let mut body = String::new();
    for (ty, data) in events {
        if !ty.is_empty() {
            body.push_str(&format!("event: {ty}\n"));
        }
        body.push_str(&format!("data: {data}\n\n"));
    }
    response(200, "text/event-stream", &[], &body)
}

/// The answer to one request (head and body as text).
fn answer(head: &str, body: &str, port: u16, answers: &[String], next: &AtomicUsize) -> String {
    let path = head.split_whitespace().nth(1).unwrap_or("/");
    let echo = format!("Bearer {KEY} {}", spellings(KEY).join(" "));
    if path.starts_with("/v1/models") {
        let list = serde_json::json!({"object": "list", "data": [
            {"id": "m", "owned_by": echo},
            {"id": format!("echo-{KEY}"), "root": spellings(PASSWORD).join(" ")},
        ]});
        // Written by hand as well: the key escaped in the JSON text itself.
        let text = list
            .to_string()
            .replace("\"object\"", &format!("\"x\":\"sk\\u002d{}\",\"object\"", &KEY[3..]));
        return response(200, "application/json", &[], &text);
    }
    if path.starts_with("/redirected") || path.starts_with("/loop") {
        if path.starts_with("/loop") {
            let to = format!("http://127.0.0.1:{port}/loop?again=1&key={KEY}");
            return response(302, "text/plain", &[("Location", &to)], KEY);
        }
        return response(500, "text/plain", &[], &format!("redirected with {echo}"));
    }
    if path.starts_with("/tokenize") {
        return response(404, "text/plain", &[], &echo);
    }
    if body.contains("\"model\":\"probe400\"") {
        return response(400, "application/json", &[], &format!("{{\"error\":\"{echo}\"}}"));
    }
    if body.contains("\"model\":\"probe404\"") {
        return response(404, "text/plain", &[], &format!("no such model {echo}"));
    }
    if body.contains("\"stream\":false") {
        let ok = serde_json::json!({"choices": [{"index": 0,
            "message": {"role": "assistant", "content": "hi"}, "finish_reason": "length"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1}, "system_fingerprint": echo});
        return response(200, "application/json", &[], &ok.to_string());
    }
    let n = next.fetch_add(1, Ordering::Relaxed);
    answers[n % answers.len()].clone()
}

/// One request on one connection, then close (bounded in size and time).
async fn serve_one(mut s: TcpStream, port: u16, answers: Arc<Vec<String>>, next: Arc<AtomicUsize>) {
    let read = read_http_request(&mut s);
    let Ok(Some((head, body))) = tokio::time::timeout(Duration::from_secs(10), read).await else {
        return;
    };
    let reply = answer(&head, &body, port, &answers, &next);
    let _ = s.write_all(reply.as_bytes()).await;
    let _ = s.shutdown().await;
}

/// Start the hostile server: its port, and the number of answers it cycles through.
async fn start() -> (u16, usize, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let answers = Arc::new(hostile_answers(port));
    let count = answers.len();
    let next = Arc::new(AtomicUsize::new(0));
    let task = tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            tokio::spawn(serve_one(s, port, answers.clone(), next.clone()));
        }
    });
    (port, count, task)
}

/// Every 8-character slice of a secret.
fn slices(secret: &str) -> Vec<&str> {
    (0..=secret.len() - 8).map(|i| &secret[i..i + 8]).collect()
}

/// The secrets' slices found in `text` (named by `what`), in raw or escaped spellings.
fn leaks(what: &str, text: &str) -> Vec<String> {
    let redactor = infergate_model::redact::Redactor::new([KEY, PASSWORD]);
    let mut found: Vec<String> = slices(KEY)
        .into_iter()
        .chain(slices(PASSWORD))
        .filter(|s| text.contains(s))
        .map(|s| format!("{what}: `{s}`"))
        .collect();
    if !redactor.is_clean(text) {
        found.push(format!("{what}: an escaped spelling"));
    }
    found
}

fn target(port: u16, model: &str) -> Target {
    Target {
        api_key_env: Some(KEY_VAR.into()),
        model: Some(model.into()),
        ..Target::at(format!("http://user:{PASSWORD}@127.0.0.1:{port}"))
    }
}

const PROFILE: &str = r#"
[profile.default]
[profile.default.client]
request_timeout_s = 10
stall_timeout_s = 5
[profile.default.load]
concurrency = 8
[profile.default.workload]
input_lengths = [4]
max_tokens = 4
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_byte_of_a_run_holds_the_key() {
    // SAFETY: no other test reads or writes this variable.
    unsafe { std::env::set_var(KEY_VAR, KEY) };
    let (port, count, server) = start().await;
    let dir = tempfile::tempdir().unwrap();
    let requests = format!("load.requests={count}");
    let mut spec = RunSpec::quiet(
        profile(PROFILE, &[&requests]),
        ("hostile".into(), target(port, "m")),
        dir.path().join("run"),
        "secrets",
    );
    // A command line a person pasted the key and the URL's password into.
    spec.invocation = Some(infergate_model::summary::Invocation {
        command: format!(
            "cargo xtask bench --base-url http://user:{PASSWORD}@127.0.0.1:{port} --set model={KEY}"
        ),
        part: None,
    });
    let out = runner::run(spec, RunControl::default()).await.expect("the run completes");
    let command = &out.summary.invocation.as_ref().expect("the command is recorded").command;
    assert!(command.starts_with("cargo xtask bench --base-url http://"), "{command}");
    assert!(command.contains("--set model=[redacted]"), "{command}");
    let mut found = Vec::new();
    assert_eq!(out.summary.requests.total, count as u64);
    assert!(out.summary.target.models.is_some(), "the model list is recorded");
    assert_eq!(out.summary.target.url, format!("http://127.0.0.1:{port}/v1/chat/completions"));
    let written = files_under(dir.path());
    assert!(written.iter().any(|(p, _)| p.ends_with("requests.jsonl")));
    for (path, text) in &written {
        found.extend(leaks(path, text));
    }
    // What the run returns (the console prints the summary and its notes).
    found.extend(leaks("summary", &format!("{:?}", out.summary)));
    let records = written.iter().find(|(p, _)| p.ends_with("requests.jsonl")).unwrap();
    assert!(records.1.contains("[redacted]"), "the key was echoed and removed");

    // Preflight refusals quote the server: a 400 and a 404 probe.
    for model in ["probe400", "probe404"] {
        let spec = RunSpec::quiet(
            profile(PROFILE, &["load.requests=1"]),
            ("hostile".into(), target(port, model)),
            dir.path().join(model),
            "secrets",
        );
        let err = runner::run(spec, RunControl::default()).await.err().expect("refused");
        let mut text = format!("{err}");
        let mut src = std::error::Error::source(&err);
        while let Some(e) = src {
            text.push_str(&format!(": {e}"));
            src = e.source();
        }
        assert!(text.contains("[redacted]"), "{model}: {text}");
        found.extend(leaks(&format!("error of model {model}"), &text));
        found.extend(leaks(&format!("error of model {model} (Debug)"), &format!("{err:?}")));
    }
    for (path, text) in files_under(dir.path()) {
        found.extend(leaks(&path, &text));
    }
    server.abort();
    unsafe { std::env::remove_var(KEY_VAR) };
    assert!(found.is_empty(), "secrets leaked:\n{}", found.join("\n"));
}
