//! `cargo xtask bench` against a server that echoes the API key and the URL password: not one
//! byte the command prints (stdout, stderr) or writes (the run directory) holds any 8-character
//! slice of them, in a run and in a refusal.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::Output;
use std::time::Duration;

const KEY_VAR: &str = "INFERGATE_CLI_SECRETS_KEY";
const KEY: &str = "sk-CLILEAK-5e8d2b7a91c3f604-QWXZ";
const PASSWORD: &str = "pw-SWORDFISH-8b3e11";

/// The answers to measured requests, in turn: the key at every offset around 300 and 120
/// characters, raw and escaped, in error bodies, SSE error events and malformed chunks.
fn answers() -> Vec<String> {
    let mut out = Vec::new();
    for secret in [KEY, PASSWORD] {
        for spelling in [secret.to_string(), secret.replace('-', "\\u002d")] {
            for limit in [120, 300] {
                for pad in limit - secret.len() - 12..=limit + 2 {
                    let text = format!("{}{spelling}{}", "x".repeat(pad), "y".repeat(40));
                    out.push(reply(500, "text/plain", &text));
                    out.push(reply(
                        200,
                        "text/event-stream",
                        &format!("event: error\ndata: {text}\n\n"),
                    ));
                    out.push(reply(200, "text/event-stream", &format!("data: {{{text}\n\n")));
                }
            }
        }
    }
    out
}

fn reply(status: u16, content_type: &str, body: &str) -> String {
    format!(
        "HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// Read one request (head and body), bounded in size and time.
fn read_request(s: &mut TcpStream) -> Option<String> {
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    while buf.len() < 1 << 20 {
        let n = s.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf).into_owned();
        if let Some(i) = text.find("\r\n\r\n") {
            let len = text[..i]
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse().unwrap_or(0))
                })
                .unwrap_or(0usize);
            if buf.len() >= i + 4 + len {
                return Some(text);
            }
        }
    }
    None
}

/// Serve on 127.0.0.1 (at most 10 000 connections, one thread each): the port.
fn start() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let answers = std::sync::Arc::new(answers());
    let next = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    std::thread::spawn(move || {
        for s in listener.incoming().take(10_000) {
            let Ok(mut s) = s else { continue };
            let (answers, next) = (answers.clone(), next.clone());
            std::thread::spawn(move || {
                let Some(req) = read_request(&mut s) else { return };
                let echo = format!("Bearer {KEY} {PASSWORD}");
                let out = if req.starts_with("GET /v1/models") {
                    let list = serde_json::json!({"object": "list", "data": [
                        {"id": "m", "owned_by": echo}, {"id": format!("echo-{KEY}")}]});
                    reply(200, "application/json", &list.to_string())
                } else if req.contains("\"model\":\"nope\"") {
                    // An unlisted model the server does not serve either: the probe is refused
                    // (echoing the key), so the run is refused naming what is offered.
                    let e = format!(
                        r#"{{"error":{{"message":"model nope does not exist ({echo})"}}}}"#
                    );
                    reply(404, "application/json", &e)
                } else if req.contains("\"stream\":false") {
                    let ok = serde_json::json!({"choices": [{"index": 0, "finish_reason": "length",
                        "message": {"role": "assistant", "content": "hi"}}]});
                    reply(200, "application/json", &ok.to_string())
                } else if req.contains("POST /v1/chat") {
                    let n = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    answers[n % answers.len()].clone()
                } else {
                    reply(404, "text/plain", &echo)
                };
                let _ = s.write_all(out.as_bytes());
            });
        }
    });
    port
}

fn repo(port: u16, model: &str, requests: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("configs")).unwrap();
    let text = format!(
        "[targets.hostile]\nbase_url = \"http://user:{PASSWORD}@127.0.0.1:{port}\"\n\
         api_key_env = \"{KEY_VAR}\"\nmodel = \"{model}\"\n\
         [profile.default]\ntarget = \"hostile\"\n\
         [profile.default.workload]\ninput_lengths = [4]\nmax_tokens = 4\n\
         [profile.default.load]\nconcurrency = 8\nrequests = {requests}\n"
    );
    std::fs::write(dir.path().join("configs/bench.toml"), text).unwrap();
    dir
}

fn xtask(root: &Path, args: &[&str]) -> Output {
    crate::support::xtask_command(root, args).env(KEY_VAR, KEY).output().expect("run xtask")
}

/// Where a slice of 8 characters of the key or the password occurs in `text`.
fn leaks(what: &str, text: &str) -> Vec<String> {
    let slices = |s: &'static str| (0..=s.len() - 8).map(move |i| &s[i..i + 8]);
    slices(KEY)
        .chain(slices(PASSWORD))
        .filter(|s| text.contains(s))
        .map(|s| format!("{what}: `{s}`"))
        .collect()
}

fn scan(root: &Path, o: &Output) -> Vec<String> {
    let mut found = leaks("stdout", &String::from_utf8_lossy(&o.stdout));
    found.extend(leaks("stderr", &String::from_utf8_lossy(&o.stderr)));
    // Everything the command wrote (the config holds the URL the user wrote, password included).
    let mut stack = vec![root.join("runs")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let text = String::from_utf8_lossy(&std::fs::read(&p).unwrap()).into_owned();
                found.extend(leaks(&p.display().to_string(), &text));
            }
        }
    }
    found
}

#[test]
fn bench_prints_and_writes_no_slice_of_the_key() {
    let port = start();
    let n = answers().len();
    let r = repo(port, "m", n);
    let o = xtask(r.path(), &["bench", "--out", "runs/a"]);
    let s = infergate_model::Summary::read(&r.path().join("runs/a")).expect("a summary");
    assert_eq!(s.requests.total, n as u64, "{}", String::from_utf8_lossy(&o.stderr));
    let mut found = scan(r.path(), &o);
    // A trial set records what it was measured with: never the URL's password.
    let o = xtask(r.path(), &["bench", "--trials", "2", "--out", "runs/t"]);
    let set = std::fs::read_to_string(r.path().join("runs/t/trials.json"))
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stderr)));
    assert!(set.contains("\"planned\": 2"), "{set}");
    found.extend(scan(r.path(), &o));
    // With the password in --base-url the set keeps no request, and says why.
    let url = format!("http://user:{PASSWORD}@127.0.0.1:{port}");
    let args = ["--base-url", &url, "--model", "m", "--api-key-env", KEY_VAR];
    let o = xtask(r.path(), &[&["bench", "--trials", "2", "--out", "runs/u"][..], &args].concat());
    let set = std::fs::read_to_string(r.path().join("runs/u/trials.json"))
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stderr)));
    assert!(!set.contains("\"request\""), "{set}");
    assert!(set.contains("trials.json keeps no request"), "{set}");
    found.extend(scan(r.path(), &o));
    // A refusal quotes what the server offers.
    let r = repo(port, "nope", 1);
    let o = xtask(r.path(), &["bench", "--out", "runs/b"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("echo-[redacted]"));
    found.extend(scan(r.path(), &o));
    assert!(found.is_empty(), "secrets leaked:\n{}", found.join("\n"));
}
