//! What production endpoints need of the client: the target's custom headers on every request
//! (secret values redacted like the key), and its CA bundle trusted for `https://`.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::support::*;
use bench::client::ClientError;
use bench::runner::{self, ConnectError, RunControl, RunError, RunSpec};
use infergate_model::config::{HeaderValue, Target};

const TOKEN_VAR: &str = "INFERGATE_TEST_ACCESS_TOKEN";
const TOKEN: &str = "gw-TOKEN-93b1d7e2aa40c5f8";

const PROFILE: &str = r#"
[profile.default]
[profile.default.load]
concurrency = 2
requests = 6
[profile.default.workload]
input_lengths = [4]
max_tokens = 4
"#;

/// How the test server answers measured (streamed) requests.
#[derive(Clone, Copy)]
enum Mode {
    /// A short stream.
    Ok,
    /// 500 with the request's head (its headers) as the body.
    EchoHeaders,
}

fn reply(status: u16, content_type: &str, body: &str) -> String {
    format!(
        "HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// One request on one connection (bounded in size and time); its head is kept in `seen`.
async fn serve<S: AsyncRead + AsyncWrite + Unpin>(
    mut s: S,
    mode: Mode,
    seen: Arc<Mutex<Vec<String>>>,
) {
    let mut buf = Vec::new();
    let read = async {
        let mut chunk = [0u8; 8192];
        while buf.len() < 1 << 20 {
            let n = s.read(&mut chunk).await.ok()?;
            if n == 0 {
                return None;
            }
            buf.extend_from_slice(&chunk[..n]);
            let text = String::from_utf8_lossy(&buf).into_owned();
            if let Some(i) = text.find("\r\n\r\n") {
                let len = text[..i]
                    .lines()
                    .find_map(|l| {
                        let l = l.to_ascii_lowercase();
                        l.strip_prefix("content-length:").map(|v| v.trim().parse().unwrap_or(0))
                    })
                    .unwrap_or(0usize);
                if buf.len() >= i + 4 + len {
                    return Some((text[..i].to_string(), text[i + 4..].to_string()));
                }
            }
        }
        None
    };
    let Ok(Some((head, body))) = tokio::time::timeout(Duration::from_secs(10), read).await else {
        return;
    };
    let out = if head.starts_with("GET /v1/models") {
        let list = serde_json::json!({"object": "list", "data": [{"id": "m", "owned_by": head}]});
        reply(200, "application/json", &list.to_string())
    } else if !head.starts_with("POST /v1/chat") {
        reply(404, "text/plain", &head)
    } else if body.contains("\"stream\":false") {
        let ok = serde_json::json!({"choices": [{"index": 0, "finish_reason": "length",
            "message": {"role": "assistant", "content": "hi"}}]});
        reply(200, "application/json", &ok.to_string())
    } else {
        {
            let mut seen = seen.lock().unwrap();
            if seen.len() < 100 {
                seen.push(head.to_ascii_lowercase());
            }
        }
        match mode {
            Mode::EchoHeaders => reply(500, "text/plain", &head),
            Mode::Ok => {
                let content = r#"{"choices":[{"index":0,"delta":{"content":"hi"}}]}"#;
                let finish = r#"{"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}"#;
                let sse = format!("data: {content}\n\ndata: {finish}\n\ndata: [DONE]\n\n");
                reply(200, "text/event-stream", &sse)
            }
        }
    };
    let _ = s.write_all(out.as_bytes()).await;
    let _ = s.shutdown().await;
}

/// A plain-HTTP server: its port, and the heads of the measured requests it saw.
async fn start_http(mode: Mode) -> (u16, Arc<Mutex<Vec<String>>>, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let kept = seen.clone();
    let task = tokio::spawn(async move {
        for _ in 0..1000 {
            let Ok((s, _)) = listener.accept().await else { break };
            tokio::spawn(serve(s, mode, kept.clone()));
        }
    });
    (port, seen, task)
}

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("it/fixtures/tls").join(name)).unwrap()
}

#[cfg(feature = "tls")]
/// A TLS server with the fixture certificate (signed by `fixtures/tls/ca.pem`).
async fn start_https() -> (u16, tokio::task::JoinHandle<()>) {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(&fixture("server.pem")).map(|c| c.unwrap()).collect();
    let key = PrivateKeyDer::from_pem_slice(&fixture("server.key")).unwrap();
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let config = tokio_rustls::rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let task = tokio::spawn(async move {
        for _ in 0..1000 {
            let Ok((s, _)) = listener.accept().await else { break };
            let (acceptor, seen) = (acceptor.clone(), seen.clone());
            tokio::spawn(async move {
                if let Ok(Ok(tls)) =
                    tokio::time::timeout(Duration::from_secs(10), acceptor.accept(s)).await
                {
                    serve(tls, Mode::Ok, seen).await;
                }
            });
        }
    });
    (port, task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_headers_go_on_every_request_and_secret_values_are_redacted() {
    // SAFETY: no other test reads or writes this variable.
    unsafe { std::env::set_var(TOKEN_VAR, TOKEN) };
    let (port, seen, server) = start_http(Mode::EchoHeaders).await;
    let mut t = Target::at(format!("http://127.0.0.1:{port}")).with_model("m");
    t.headers.insert("X-Tenant".into(), HeaderValue::Literal("bench-tenant".into()));
    t.headers.insert("X-Gateway-Token".into(), HeaderValue::Env { env: TOKEN_VAR.into() });
    let dir = tempfile::tempdir().unwrap();
    let spec =
        RunSpec::quiet(profile(PROFILE, &[]), ("gw".into(), t), dir.path().join("run"), "hdr");
    let out = runner::run(spec, RunControl::default()).await.expect("the run completes");
    assert_eq!(out.summary.requests.total, 6);
    let seen = seen.lock().unwrap().clone();
    // The measured requests and the preflight's streamed keep-alive checks.
    assert!(seen.len() >= 6, "every measured request reached the server: {}", seen.len());
    for head in &seen {
        assert!(head.contains("\r\nx-tenant: bench-tenant"), "{head}");
        assert!(head.contains(&format!("\r\nx-gateway-token: {}", TOKEN.to_ascii_lowercase())));
    }
    // The server echoed the headers into the model list and every error body.
    let written: String = files_under(dir.path()).into_iter().map(|(_, text)| text).collect();
    assert!(written.contains("bench-tenant"), "a literal value is no secret");
    for i in 0..=TOKEN.len() - 8 {
        assert!(!written.contains(&TOKEN[i..i + 8]), "`{}` leaked", &TOKEN[i..i + 8]);
    }
    assert!(written.contains("x-gateway-token: [redacted]"), "{written}");
    unsafe { std::env::remove_var(TOKEN_VAR) };
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unset_header_variable_is_refused_by_name() {
    let (port, _, server) = start_http(Mode::Ok).await;
    let mut t = Target::at(format!("http://127.0.0.1:{port}")).with_model("m");
    t.headers.insert("X-Api-Token".into(), HeaderValue::Env { env: "INFERGATE_TEST_UNSET".into() });
    let dir = tempfile::tempdir().unwrap();
    let spec =
        RunSpec::quiet(profile(PROFILE, &[]), ("gw".into(), t), dir.path().join("run"), "hdr");
    let err = runner::run(spec, RunControl::default()).await.err().expect("refused");
    assert!(matches!(&err, RunError::Connect(ConnectError::Access { .. })), "{err:?}");
    assert!(err.to_string().contains("INFERGATE_TEST_UNSET"), "{err}");
    server.abort();
}

#[cfg(feature = "tls")]
/// The fixture CA copied under the run's root (RunSpec::quiet's root is the run's parent).
fn https_spec(port: u16, dir: &Path, ca: Option<&str>) -> RunSpec {
    std::fs::write(dir.join("ca.pem"), fixture("ca.pem")).unwrap();
    let mut t = Target::at(format!("https://127.0.0.1:{port}")).with_model("m");
    t.ca_bundle = ca.map(str::to_string);
    RunSpec::quiet(profile(PROFILE, &[]), ("tls".into(), t), dir.join("run"), "tls")
}

#[cfg(feature = "tls")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_with_a_private_ca_works_when_its_bundle_is_trusted() {
    let (port, server) = start_https().await;
    // Without the bundle the certificate is unknown: refused before measuring.
    let dir = tempfile::tempdir().unwrap();
    let err = runner::run(https_spec(port, dir.path(), None), RunControl::default()).await.err();
    let err = err.expect("an unknown CA is refused");
    assert!(matches!(&err, RunError::Connect(ConnectError::Preflight(_))), "{err:?}");
    // With it, every request succeeds.
    let dir = tempfile::tempdir().unwrap();
    let spec = https_spec(port, dir.path(), Some("ca.pem"));
    let out = runner::run(spec, RunControl::default()).await.expect("the run completes");
    assert_eq!(out.summary.requests.ok, 6, "{:?}", out.summary.notes);
    assert_eq!(out.summary.target.url, format!("https://127.0.0.1:{port}/v1/chat/completions"));
    // A bundle the TLS library cannot read is refused by name.
    let dir = tempfile::tempdir().unwrap();
    let spec = https_spec(port, dir.path(), Some("bad.pem"));
    std::fs::write(
        dir.path().join("bad.pem"),
        "-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    let err = runner::run(spec, RunControl::default()).await.err().expect("refused");
    assert!(
        matches!(&err, RunError::Connect(ConnectError::Client(ClientError::CaBundle(_)))),
        "{err:?}"
    );
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_run_releases_its_directory_for_the_next() {
    let (port, _, server) = start_http(Mode::Ok).await;
    let dir = tempfile::tempdir().unwrap();
    let spec = |t: Target| {
        RunSpec::quiet(profile(PROFILE, &[]), ("gw".into(), t), dir.path().join("run"), "again")
    };
    let mut bad = Target::at(format!("http://127.0.0.1:{port}")).with_model("m");
    bad.headers
        .insert("X-Api-Token".into(), HeaderValue::Env { env: "INFERGATE_TEST_UNSET".into() });
    runner::run(spec(bad), RunControl::default()).await.err().expect("refused");
    // The same directory, in the same process: its lock was released.
    let good = Target::at(format!("http://127.0.0.1:{port}")).with_model("m");
    let out = runner::run(spec(good), RunControl::default()).await.expect("the run completes");
    assert_eq!(out.summary.requests.ok, 6);
    server.abort();
}
