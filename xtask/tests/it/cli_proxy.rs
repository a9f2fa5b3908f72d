//! Proxy variables, as docs/configuration.md promises: ignored for loopback targets, used and
//! noted otherwise, and `client.proxy = "none"` connects directly. The proxy is a test server on
//! 127.0.0.1 that answers as the target itself would; the target's host (`proxied.invalid`) does
//! not exist, so a request that did not go through the proxy cannot succeed.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::*;

/// A proxy answering every request itself; it keeps each request line it saw. It serves until
/// the test drops the listener's deadline (30 s) or 200 connections, whichever comes first.
struct Proxy {
    port: u16,
    seen: Arc<Mutex<Vec<String>>>,
}

fn start_proxy() -> Proxy {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut served = 0;
        while Instant::now() < deadline && served < 200 {
            match listener.accept() {
                Ok((s, _)) => {
                    served += 1;
                    let log = log.clone();
                    std::thread::spawn(move || answer(s, &log));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
    });
    Proxy { port, seen }
}

/// One request (bounded to 1 MiB and 10 s), answered as an OpenAI-compatible server would.
fn answer(mut s: std::net::TcpStream, log: &Mutex<Vec<String>>) {
    s.set_nonblocking(false).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let (head, body) = loop {
        let Ok(n) = s.read(&mut chunk) else { return };
        if n == 0 || buf.len() > 1 << 20 {
            return;
        }
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf).into_owned();
        let Some(i) = text.find("\r\n\r\n") else { continue };
        let len: usize = text[..i]
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-length:")
                    .map(|v| v.trim().parse().unwrap_or(0))
            })
            .unwrap_or(0);
        if buf.len() >= i + 4 + len {
            break (text[..i].to_string(), text[i + 4..].to_string());
        }
    };
    let line = head.lines().next().unwrap_or_default().to_string();
    log.lock().unwrap().push(line.clone());
    let reply = |status: &str, ctype: &str, body: &str| {
        format!(
            "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
    };
    let out = if line.starts_with("GET ") && line.contains("/v1/models ") {
        reply("200 OK", "application/json", r#"{"object":"list","data":[{"id":"m"}]}"#)
    } else if line.starts_with("POST ") && line.contains("/v1/chat/completions ") {
        if body.contains("\"stream\":true") {
            let sse = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":null}]}\n\n\
                       data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"length\"}],\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":1}}\n\n\
                       data: [DONE]\n\n";
            reply("200 OK", "text/event-stream", sse)
        } else {
            reply(
                "200 OK",
                "application/json",
                r#"{"choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"length"}],"usage":{"prompt_tokens":4,"completion_tokens":1}}"#,
            )
        }
    } else {
        reply("404 Not Found", "text/plain", "no such path")
    };
    let _ = s.write_all(out.as_bytes());
}

/// A repository whose default profile targets `proxied.invalid`.
fn remote_repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".git")).unwrap();
    std::fs::create_dir_all(dir.path().join("configs")).unwrap();
    let text = "[targets.remote]\nbase_url = \"http://proxied.invalid/v1\"\nmodel = \"m\"\n\n\
                [profile.default]\ntarget = \"remote\"\nendpoint = \"chat\"\n\
                [profile.default.workload]\ninput_lengths = [4]\nrepeats = 3\nmax_tokens = 1\n\
                [profile.default.load]\nconcurrency = 1\nrequests = 3\n\
                [profile.default.client]\nrequest_timeout_s = 10\nstall_timeout_s = 5\n";
    std::fs::write(dir.path().join("configs/bench.toml"), text).unwrap();
    dir
}

fn bench_through(root: &Path, proxy: &Proxy, extra: &[&str]) -> Out {
    let mut args = vec!["bench", "-q", "--out", "runs/p"];
    args.extend_from_slice(extra);
    let o = xtask_command(root, &args)
        .env("HTTP_PROXY", format!("http://127.0.0.1:{}", proxy.port))
        .env_remove("NO_PROXY")
        .env_remove("no_proxy")
        .output()
        .unwrap();
    Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

#[test]
fn a_proxy_from_the_environment_is_used_for_a_remote_target_and_noted() {
    let proxy = start_proxy();
    let r = remote_repo();
    let o = bench_through(r.path(), &proxy, &[]);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    let s = infergate_model::Summary::read(&r.path().join("runs/p")).unwrap();
    assert_eq!(s.requests.ok, 3, "{:?}", s.requests.by_class);
    assert!(
        s.notes.iter().any(|n| n.contains("requests go through the proxy named by HTTP_PROXY")),
        "{:?}",
        s.notes
    );
    let seen = proxy.seen.lock().unwrap().clone();
    let measured = seen
        .iter()
        .filter(|l| l.starts_with("POST http://proxied.invalid/v1/chat/completions "))
        .count();
    assert!(measured >= 3, "the proxy carried the measured requests: {seen:?}");
}

#[test]
fn client_proxy_none_connects_directly() {
    let proxy = start_proxy();
    let r = remote_repo();
    let o = bench_through(r.path(), &proxy, &["--set", "client.proxy=\"none\""]);
    assert_eq!(o.code, 2, "the host does not exist: {}{}", o.stdout, o.stderr);
    assert!(o.stderr.contains("proxied.invalid"), "{}", o.stderr);
    assert!(proxy.seen.lock().unwrap().is_empty(), "nothing went through the proxy");
}

#[test]
fn a_proxy_from_the_environment_is_ignored_for_a_loopback_target() {
    let proxy = start_proxy();
    let r = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(r.path().join(".git")).unwrap();
    std::fs::create_dir_all(r.path().join("configs")).unwrap();
    let text = "[profile.default.sim]\nmode = \"timing\"\n[profile.default.sim.timing]\n\
                ttft_ms = 2\nitl_ms = 1\n[profile.default.workload]\ninput_lengths = [8]\n\
                repeats = 2\nmax_tokens = 2\n[profile.default.load]\nconcurrency = 2\n";
    std::fs::write(r.path().join("configs/bench.toml"), text).unwrap();
    let o = bench_through(r.path(), &proxy, &[]);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    let s = infergate_model::Summary::read(&r.path().join("runs/p")).unwrap();
    assert_eq!(s.requests.ok, 2);
    assert!(
        s.notes.iter().any(|n| n.contains("proxy variables (HTTP_PROXY) are ignored")),
        "{:?}",
        s.notes
    );
    assert!(proxy.seen.lock().unwrap().is_empty(), "nothing went through the proxy");
}
