//! The HTTP client: one `Client` per target, built with its access and options; its phases
//! are its submodules: the target's access (`access`), the pre-run checks (`preflight`,
//! `keepalive`), a measured request's body (`body`) and its execution (`exec`).

use std::time::Duration;

use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue};
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::time::Instant;

use infergate_model::config::{Endpoint, MaxTokensField, ProxyMode, Target};
use infergate_model::openai::{
    self, Flow, MESSAGE_CHARS, ResponseResult, StreamEnd, StreamTracker,
};
use infergate_model::outcome::Outcome;
use infergate_model::record::{RequestRecord, round_us};
use infergate_model::sse::{SseItem, SseParser};
use infergate_model::wire;
use infergate_model::workload::{Payload, WorkItem};

pub use infergate_model::redact::Redactor;

mod access;
mod body;
mod exec;
mod keepalive;
mod preflight;
mod served;

pub use access::*;
pub use body::*;
pub use exec::*;
use keepalive::*;
pub use preflight::*;
pub use served::{SERVED_BODY_BYTES, SERVED_READING_TIMEOUT, SERVED_TIMEOUT};

/// Why the HTTP client for a target cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot build the HTTP client")]
    Build(#[source] reqwest::Error),
    #[error("the API key holds characters not allowed in an HTTP header")]
    KeyHeader,
    /// A custom header that cannot go on the wire (its value is never shown).
    #[error("header `{name}` cannot be sent: not a valid header name or value")]
    Header { name: String },
    #[error("the ca_bundle holds no certificate the TLS library accepts")]
    CaBundle(#[source] reqwest::Error),
    #[error("a ca_bundle needs TLS, which this build lacks (the `tls` feature of infergate-bench)")]
    NoTls,
}

/// The redactor of a client: its API key and the user and password of its URL.
fn client_redactor(api_key: Option<&str>, target_url: &str) -> Redactor {
    Redactor::new(api_key.map(str::to_string).into_iter().chain(Redactor::url_secrets(target_url)))
}

/// Where requests go, once resolved.
#[derive(Clone, Debug)]
pub struct Resolved {
    /// `scheme://host:port[/prefix]` without `/v1`.
    pub root: String,
    /// `<root>/v1`.
    pub api_base: String,
    pub url: String,
    pub endpoint: Endpoint,
    pub stream: bool,
    pub model: String,
    pub max_tokens_field: &'static str,
    pub models: Option<Value>,
    pub tokenize: bool,
    /// The server announced itself as the built-in simulator (`wire::SIMULATOR_HEADER` on
    /// `/v1/models`): what is measured is a model of an engine.
    pub simulated: bool,
    /// The server keeps connections alive between responses (see `keeps_connections_alive`).
    pub reuse_connections: bool,
    /// Notes for the summary (proxy use, fallbacks).
    pub notes: Vec<String>,
}

impl Resolved {
    /// The summary's description of this target: where requests went and what it offered;
    /// of the key, only the name of its variable.
    /// Server text and URLs pass through `redactor`.
    pub(crate) fn target_info(
        &self,
        name: String,
        api_key_env: Option<String>,
        redactor: &Redactor,
    ) -> infergate_model::summary::TargetInfo {
        infergate_model::summary::TargetInfo {
            name,
            api_base: redactor.redact(&self.api_base),
            url: redactor.redact(&self.url),
            endpoint: self.endpoint.name().into(),
            stream: self.stream,
            model: redactor.redact(&self.model),
            api_key_env,
            models: self.models.as_ref().map(|m| redactor.redact_json(m)),
            max_tokens_field: Some(self.max_tokens_field.to_string()),
        }
    }
}

/// Split a base URL given with or without `/v1` into (root, api base).
pub(crate) fn split_base_url(base: &str) -> (String, String) {
    let trimmed = base.trim().trim_end_matches('/');
    match trimmed.strip_suffix("/v1") {
        Some(root) => (root.to_string(), trimmed.to_string()),
        None => (trimmed.to_string(), format!("{trimmed}/v1")),
    }
}

pub fn is_loopback(url: &str) -> bool {
    reqwest::Url::parse(url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_string))
        .is_some_and(|h| h == "localhost" || h == "[::1]" || h == "::1" || h.starts_with("127."))
}

/// Timeouts and proxy behaviour of the client.
#[derive(Clone, Debug)]
pub struct ClientOptions {
    pub request_timeout: Duration,
    pub stall_timeout: Duration,
    pub proxy: ProxyMode,
    /// The longest SSE line or event data kept (bytes); a stream that sends more is `malformed`.
    pub max_event_bytes: usize,
    /// Follow redirects to another scheme, host or port (same-origin ones are always followed).
    pub cross_host_redirects: bool,
}

/// Which of a request's timeouts bounds a wait: the stall timeout (no bytes for
/// `client.stall_timeout_s`) or what is left of the request timeout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wait {
    Stall,
    Request,
}

/// A redirect's `Location` as shown in messages and notes: without user information, query or
/// fragment (either may carry a token).
pub(crate) fn shown_location(location: &str) -> String {
    let bare = infergate_model::redact::strip_userinfo(location);
    match bare.find(['?', '#']) {
        Some(i) => format!("{}?…", &bare[..i]),
        None => bare.into_owned(),
    }
}

/// Whether two URLs have the same origin (scheme, host and port).
fn same_origin(a: &reqwest::Url, b: &reqwest::Url) -> bool {
    a.scheme() == b.scheme()
        && a.host_str() == b.host_str()
        && a.port_or_known_default() == b.port_or_known_default()
}

/// The underlying HTTP client. `reuse`: keep connections alive between requests.
fn build_http(
    use_proxy: bool,
    reuse: bool,
    ca_bundle: Option<&[u8]>,
    cross_host_redirects: bool,
    opened: &ConnectionCount,
) -> Result<reqwest::Client, ClientError> {
    let count = opened.0.clone();
    // Redirects within the target's origin are followed (up to 10); one to another host only
    // when the config allows it, else its 3xx answer is what the request gets.
    let redirects = reqwest::redirect::Policy::custom(move |attempt| {
        let off_origin =
            attempt.previous().first().is_some_and(|first| !same_origin(first, attempt.url()));
        if attempt.previous().len() >= 10 {
            attempt.error("more than 10 redirects")
        } else if off_origin && !cross_host_redirects {
            attempt.stop()
        } else {
            attempt.follow()
        }
    });
    let mut builder = http_builder()
        .redirect(redirects)
        // However many connections a load opens before its window, at most so many are being
        // set up at once (a server's accept queue is finite).
        .connector_layer(tower::util::MapResponseLayer::new(move |conn| {
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            conn
        }))
        .connector_layer(tower::limit::ConcurrencyLimitLayer::new(PRECONNECT_AT_ONCE))
        .http1_only()
        .tcp_nodelay(true)
        .pool_max_idle_per_host(if reuse { usize::MAX } else { 0 })
        // Servers close idle keep-alive connections after a few seconds (5 s in uvicorn, which
        // serves vLLM and SGLang, and in llama.cpp's server). A request sent on a connection the
        // server is closing fails without the server ever seeing it, so the pool drops
        // connections idle for longer than that first.
        .pool_idle_timeout(Duration::from_secs(3))
        .connect_timeout(Duration::from_secs(10))
        .user_agent(concat!("infergate/", env!("CARGO_PKG_VERSION")));
    if !use_proxy {
        builder = builder.no_proxy();
    }
    if let Some(pem) = ca_bundle {
        #[cfg(feature = "tls")]
        {
            let certs =
                reqwest::Certificate::from_pem_bundle(pem).map_err(ClientError::CaBundle)?;
            builder = builder.tls_certs_merge(certs);
        }
        #[cfg(not(feature = "tls"))]
        {
            let _ = pem;
            return Err(ClientError::NoTls);
        }
    }
    builder.build().map_err(ClientError::Build)
}

/// Where every HTTP client of infergate starts: reqwest's builder, with rustls's `ring` crypto
/// installed as the process's provider first when HTTPS is built in (reqwest carries no provider
/// of its own here, and refuses to build a client without one).
pub fn http_builder() -> reqwest::ClientBuilder {
    #[cfg(feature = "tls")]
    {
        static PROVIDER: std::sync::Once = std::sync::Once::new();
        PROVIDER.call_once(|| {
            // Err only when a provider is installed already: that one serves.
            let _ = rustls::crypto::ring::default_provider().install_default();
        });
    }
    reqwest::Client::builder()
}

/// The HTTP client for one target.
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    headers: HeaderMap,
    pub redactor: Redactor,
    pub opts: ClientOptions,
    proxied: bool,
    ca_bundle: Option<std::sync::Arc<Vec<u8>>>,
    /// Connections this client has opened so far.
    opened: ConnectionCount,
}

/// The connections a client has opened (every clone of the client counts into the same one).
#[derive(Clone, Default)]
pub(crate) struct ConnectionCount(std::sync::Arc<std::sync::atomic::AtomicU64>);

impl ConnectionCount {
    pub fn get(&self) -> u64 {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// The first `cap` bytes of a body (lossy UTF-8), read within `within`; the rest is not read.
async fn read_capped(mut resp: reqwest::Response, cap: usize, within: Duration) -> String {
    let mut buf = Vec::new();
    let read = async {
        while buf.len() < cap {
            match resp.chunk().await {
                Ok(Some(b)) => buf.extend_from_slice(&b[..b.len().min(cap - buf.len())]),
                _ => break,
            }
        }
    };
    let _ = tokio::time::timeout(within, read).await;
    String::from_utf8_lossy(&buf).into_owned()
}

impl Client {
    pub fn new(
        opts: ClientOptions,
        api_key: Option<&str>,
        target_url: &str,
        access: &Access,
    ) -> Result<(Client, Vec<String>), ClientError> {
        let mut notes = Vec::new();
        let proxies = proxy_vars_present();
        let use_proxy = match opts.proxy {
            ProxyMode::None => false,
            ProxyMode::Env => !proxies.is_empty(),
            ProxyMode::Auto => !proxies.is_empty() && !is_loopback(target_url),
        };
        if !proxies.is_empty() {
            if use_proxy {
                notes.push(format!(
                    "requests go through the proxy named by {} (latencies include it); set client.proxy = \"none\" to connect directly",
                    proxies.join("/")
                ));
            } else {
                notes.push(format!(
                    "proxy variables ({}) are ignored for this target",
                    proxies.join(", ")
                ));
            }
        }
        let opened = ConnectionCount::default();
        let http = build_http(
            use_proxy,
            true,
            access.ca_bundle.as_deref(),
            opts.cross_host_redirects,
            &opened,
        )?;
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        for (name, value) in &access.headers {
            let bad = || ClientError::Header { name: name.clone() };
            let key =
                reqwest::header::HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad())?;
            let mut v = HeaderValue::from_str(value).map_err(|_| bad())?;
            v.set_sensitive(access.secrets.contains(value));
            headers.insert(key, v);
        }
        if let Some(key) = api_key {
            let mut v = HeaderValue::from_str(&format!("Bearer {key}"))
                .map_err(|_| ClientError::KeyHeader)?;
            v.set_sensitive(true);
            headers.insert(AUTHORIZATION, v);
        }
        Ok((
            Client {
                http,
                headers,
                redactor: client_redactor(api_key, target_url).with(&access.secrets),
                opts,
                proxied: use_proxy,
                ca_bundle: access.ca_bundle.clone().map(std::sync::Arc::new),
                opened,
            },
            notes,
        ))
    }

    /// The headers a scrape of `metrics_url` sends: the target's headers and API key when the
    /// page is on the target's server (`root`'s origin; gateways guard `/metrics` like the
    /// API), none for a page elsewhere, so no credential of the target goes to another host.
    pub(crate) fn metrics_headers(&self, metrics_url: &str, root: &str) -> HeaderMap {
        let parse = |u: &str| reqwest::Url::parse(u).ok();
        match (parse(metrics_url), parse(root)) {
            (Some(m), Some(r)) if same_origin(&m, &r) => {
                let mut h = self.headers.clone();
                h.remove(CONTENT_TYPE);
                h
            }
            _ => HeaderMap::new(),
        }
    }

    fn err_text(&self, e: &reqwest::Error) -> String {
        let mut s = e.to_string();
        let mut src = std::error::Error::source(e);
        while let Some(inner) = src {
            s.push_str(": ");
            s.push_str(&inner.to_string());
            src = inner.source();
        }
        self.redactor.redact(&s)
    }

    /// The same client without connection reuse: every request opens its own connection.
    pub(crate) fn without_reuse(&self) -> Result<Client, ClientError> {
        let http = build_http(
            self.proxied,
            false,
            self.ca_bundle.as_deref().map(Vec::as_slice),
            self.opts.cross_host_redirects,
            &self.opened,
        )?;
        Ok(Client { http, ..self.clone() })
    }

    /// The connections this client (and its clones) opened so far.
    pub(crate) fn connections_opened(&self) -> u64 {
        self.opened.get()
    }

    fn connect_hint(&self) -> &'static str {
        if self.proxied {
            " (requests go through a proxy from the environment; is it reachable?)"
        } else {
            ""
        }
    }

    /// Until when the next bytes of a request are awaited: the stall timeout from now, or the
    /// request's `deadline` when that comes first; and which of the two it is.
    fn next_wait(&self, deadline: Instant) -> (Instant, Wait) {
        let stall = Instant::now() + self.opts.stall_timeout;
        if stall < deadline { (stall, Wait::Stall) } else { (deadline, Wait::Request) }
    }

    /// What expired while waiting for `what` (`response headers`, `bytes`), and the setting
    /// that bounds it.
    fn expired(&self, wait: Wait, what: &str) -> String {
        match wait {
            Wait::Stall => format!(
                "no {what} for {:?} (stall timeout: raise client.stall_timeout_s for a slower server)",
                self.opts.stall_timeout
            ),
            Wait::Request => format!(
                "no {what} within the request timeout ({:?}: raise client.request_timeout_s for a slower server)",
                self.opts.request_timeout
            ),
        }
    }

    fn timeout_msg(&self, deadline: Instant) -> String {
        if Instant::now() >= deadline {
            format!("the request exceeded the request timeout ({:?})", self.opts.request_timeout)
        } else {
            format!("no bytes for {:?} (stall timeout)", self.opts.stall_timeout)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls_with_and_without_v1() {
        assert_eq!(
            split_base_url("http://h:8000"),
            ("http://h:8000".into(), "http://h:8000/v1".into())
        );
        assert_eq!(
            split_base_url("http://h:8000/v1/"),
            ("http://h:8000".into(), "http://h:8000/v1".into())
        );
        assert_eq!(
            split_base_url("http://h/api/v1"),
            ("http://h/api".into(), "http://h/api/v1".into())
        );
    }

    #[test]
    fn redaction() {
        let r = Redactor::new(Some("sk-abcdef"));
        assert_eq!(r.redact("bad key sk-abcdef here"), "bad key [redacted] here");
        assert_eq!(Redactor::new(None::<&str>).redact("x"), "x");
    }

    #[test]
    fn an_exchange_becomes_one_record_timed_from_its_intended_send() {
        let clock = Instant::now();
        let at = |ms: u64| clock + Duration::from_millis(ms);
        let mut result = ResponseResult::bare(Outcome::Ok, None);
        result.first_token_ms = Some(130.0);
        result.last_token_ms = Some(150.0);
        result.itl_ms = vec![10.0, 10.0];
        result.output_tokens = Some(3);
        result.text = Some("a b c".into());
        let ex = Exchange {
            sent: Some(at(110)),
            status: Some(200),
            queue_ms: Some(4.0),
            result,
            end: at(151),
        };
        let slot = RequestSlot {
            id: 7,
            warmup: false,
            item: 2,
            intended: at(100),
            counted_input_tokens: Some(12),
        };
        let (r, text) = ex.clone().into_record(slot, clock);
        assert_eq!((r.id, r.item, r.warmup, r.status), (7, 2, false, Some(200)));
        assert_eq!((r.intended_ms, r.sent_ms, r.end_ms), (100.0, Some(110.0), 151.0));
        assert_eq!(r.ttft_ms(), Some(30.0), "from the intended send, not the actual one");
        assert_eq!(r.input_tokens, Some(12), "the tokenizer's count when the server gave none");
        assert_eq!(
            (r.output_tokens, r.queue_ms, text.as_deref()),
            (Some(3), Some(4.0), Some("a b c"))
        );
        let mut reported = ex;
        reported.result.prompt_tokens = Some(15);
        assert_eq!(reported.into_record(slot, clock).0.input_tokens, Some(15), "usage wins");
        let failed = Exchange {
            sent: None,
            status: None,
            queue_ms: None,
            result: ResponseResult::failed(Outcome::ConnectError, "refused".into()),
            end: at(120),
        };
        let (r, text) = failed.into_record(slot, clock);
        assert_eq!(
            (r.class, r.error.as_deref(), r.sent_ms, text),
            (Outcome::ConnectError, Some("refused"), None, None)
        );
        assert_eq!(r.ttft_ms(), None);
    }

    #[test]
    fn the_model_is_the_configured_one_if_offered_else_the_first_offered() {
        let list = vec!["a".to_string(), "b".to_string()];
        let choose = |m: Option<&str>, l: Option<&[String]>| choose_model(m, l, "t", "http://h/v1");
        assert_eq!(choose(Some("b"), Some(&list)).unwrap(), "b");
        assert_eq!(choose(Some("x"), None).unwrap(), "x", "an unknown list is no refusal");
        assert_eq!(choose(None, Some(&list)).unwrap(), "a");
        assert_eq!(choose(Some("x"), Some(&list)).unwrap(), "x", "unlisted: the probe decides");
        let e = choose(None, Some(&[])).unwrap_err();
        assert!(matches!(e, PreflightError::NoModel { .. }), "{e:?}");
        assert!(e.to_string().contains("http://h/v1/models"), "{e}");
        let reply = |status: u16, json: Option<Value>| Reply {
            status,
            json,
            text: String::new(),
            simulator: false,
            location: None,
            redirected_to: None,
            keep_alive: KeepAliveWords::KeepAlive,
        };
        let body = json!({"data": [{"id": "a"}, {"id": "b"}]});
        assert_eq!(offered_models(&reply(200, Some(body))), Ok(Some(list)));
        assert_eq!(offered_models(&reply(404, None)), Ok(None));
        assert_eq!(offered_models(&reply(401, None)), Err(401));
    }

    #[test]
    fn the_note_on_closed_connections_quotes_what_the_server_said() {
        use reqwest::Version;
        let headers = |v: Option<&str>| {
            let mut h = HeaderMap::new();
            if let Some(v) = v {
                h.insert(reqwest::header::CONNECTION, HeaderValue::from_str(v).unwrap());
            }
            h
        };
        let words = |v, h| keep_alive_words(v, &headers(h));
        assert_eq!(words(Version::HTTP_10, None), KeepAliveWords::Http10);
        assert_eq!(words(Version::HTTP_10, Some("Keep-Alive")), KeepAliveWords::KeepAlive);
        assert_eq!(words(Version::HTTP_11, None), KeepAliveWords::KeepAlive);
        assert_eq!(words(Version::HTTP_11, Some("upgrade, Close")), KeepAliveWords::Close);
        assert_eq!(words(Version::HTTP_10, Some("close")), KeepAliveWords::Close);
        let note = closes_connections_note(Some(KeepAliveWords::Http10));
        assert!(note.starts_with("the server speaks HTTP/1.0") && !note.contains("keep-alive"));
        let note = closes_connections_note(Some(KeepAliveWords::Close));
        assert!(note.contains("`Connection: close`") && !note.contains("announces"), "{note}");
        assert!(
            closes_connections_note(Some(KeepAliveWords::KeepAlive))
                .contains("although it announces keep-alive")
        );
        assert!(!closes_connections_note(None).contains("announces"));
    }

    #[test]
    fn the_max_tokens_a_body_sent_is_read_back() {
        assert_eq!(sent_max_tokens(br#"{"model":"m","max_tokens":16,"prompt":"x"}"#), Some(16));
        assert_eq!(sent_max_tokens(br#"{"max_completion_tokens":8}"#), Some(8));
        assert_eq!(sent_max_tokens(br#"{"max_tokens":9,"max_completion_tokens":8}"#), Some(8));
        assert_eq!(sent_max_tokens(br#"{"model":"m"}"#), None);
        assert_eq!(sent_max_tokens(b"not json"), None);
    }

    #[test]
    fn a_redirect_location_is_shown_without_user_information_or_query() {
        assert_eq!(shown_location("http://u:pw@other:9/v1/x?key=sk-1#f"), "http://other:9/v1/x?…");
        assert_eq!(shown_location("https://other/v1"), "https://other/v1");
        let url = |u: &str| reqwest::Url::parse(u).unwrap();
        assert!(same_origin(&url("http://h/v1/a"), &url("http://h:80/v1/b")));
        assert!(!same_origin(&url("http://h:1/v1"), &url("http://h:2/v1")));
        assert!(!same_origin(&url("http://h/v1"), &url("https://h/v1")));
    }

    #[test]
    fn loopback_detection() {
        assert!(is_loopback("http://127.0.0.1:9/v1"));
        assert!(is_loopback("http://localhost/v1"));
        assert!(!is_loopback("http://10.0.0.1/v1"));
    }
}
