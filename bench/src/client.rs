//! The HTTP client: preflight diagnosis of a target, request bodies, and one request's execution
//! with every event timestamped when its bytes arrive.

use std::time::Duration;

use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue};
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::config::{Endpoint, MaxTokensField, ProxyMode, Target};
use crate::openai::{self, Flow, MESSAGE_CHARS, ResponseResult, StreamEnd, StreamTracker};
use crate::outcome::Outcome;
use crate::record::{RequestRecord, round_us};
use crate::sse::{SseItem, SseParser};
use crate::wire;
use crate::workload::{Payload, WorkItem};

/// Environment variables that route HTTP through a proxy.
pub const PROXY_VARS: [&str; 6] =
    ["HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"];

pub use crate::redact::Redactor;

/// Why an API key from the environment cannot be used. The messages name the variable, never
/// its value.
#[derive(Debug, thiserror::Error)]
pub enum ApiKeyError {
    #[error(
        "the API key variable {var} (api_key_env of target `{target}`) is not set in the environment; \
         export it, e.g. `export {var}=...`"
    )]
    NotSet { var: String, target: String },
    #[error("the API key variable {var} does not hold valid UTF-8")]
    NotUnicode { var: String },
    #[error("the API key variable {var} is set but empty")]
    Empty { var: String },
    #[error(
        "the API key variable {var} holds a newline (often from `export {var}=$(cat keyfile)` or a \
         copied line end); remove it — servers reject such keys with 401"
    )]
    Newline { var: String },
    #[error(
        "the API key variable {var} has leading or trailing whitespace; remove it — servers reject such keys with 401"
    )]
    Whitespace { var: String },
}

/// Read an API key from the environment variable a config names, with the diagnoses users need.
pub fn read_api_key(var: &str, target: &str) -> Result<String, ApiKeyError> {
    let var_name = || var.to_string();
    match std::env::var(var) {
        Err(std::env::VarError::NotPresent) => {
            Err(ApiKeyError::NotSet { var: var_name(), target: target.to_string() })
        }
        Err(std::env::VarError::NotUnicode(_)) => Err(ApiKeyError::NotUnicode { var: var_name() }),
        Ok(v) if v.is_empty() => Err(ApiKeyError::Empty { var: var_name() }),
        Ok(v) if v.contains('\n') || v.contains('\r') => {
            Err(ApiKeyError::Newline { var: var_name() })
        }
        Ok(v) if v.trim() != v => Err(ApiKeyError::Whitespace { var: var_name() }),
        Ok(v) => Ok(v),
    }
}

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

/// What a target asks of the client besides its URL and API key: extra headers and CA
/// certificates to trust. No `Debug`: it holds secrets.
#[derive(Clone, Default)]
pub struct Access {
    /// Extra request headers, (name, value).
    pub headers: Vec<(String, String)>,
    /// The header values that are secrets (read from the environment): redacted like the key.
    pub secrets: Vec<String>,
    /// PEM CA certificates trusted besides the platform's.
    pub ca_bundle: Option<Vec<u8>>,
}

impl Access {
    /// The access of `target`: its headers with values read through `env`, and its CA bundle
    /// under `root`. Errors name the header or file, never a value.
    pub fn of_target(
        target: &Target,
        root: &std::path::Path,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Access, String> {
        let headers = target.header_values(env)?;
        let secrets = headers
            .iter()
            .filter(|(name, _)| {
                matches!(target.headers.get(name), Some(crate::config::HeaderValue::Env { .. }))
                    || crate::config::is_credential_header(name)
            })
            .map(|(_, v)| v.clone())
            .collect();
        Ok(Access { headers, secrets, ca_bundle: target.read_ca_bundle(root)? })
    }
}

/// A request outside the measurement (a preflight check, a token count) that got no whole
/// answer: the server could not be reached, or a client timeout expired. The detail has any
/// secret removed and, for a timeout, names the setting to raise.
#[derive(Debug, thiserror::Error)]
#[error("{}", if *timed_out {
    format!("{check} ({url}) timed out: {detail}")
} else {
    format!("{check}: cannot reach {url}: {detail}")
})]
pub struct Unreachable {
    /// What the request was for (`preflight: the model list`, ...).
    pub check: String,
    pub url: String,
    pub detail: String,
    /// A client timeout expired (else the connection failed).
    pub timed_out: bool,
}

/// Why a target cannot be measured, found before any measured request: each message says what
/// to change.
#[derive(Debug, thiserror::Error)]
pub enum PreflightError {
    #[error(transparent)]
    Unreachable(#[from] Unreachable),
    #[error(transparent)]
    Client(#[from] ClientError),
    /// The server refused the request for its key (or its lack of one).
    #[error("{}", auth_hint(*status, target, api_key_env.as_deref()))]
    Auth { status: u16, target: String, api_key_env: Option<String> },
    /// The model is not listed by `/v1/models`, and the one-token probe with it failed too.
    #[error("model `{model}` is not served at {api_base}: /v1/models does not list it (it offers: {}) \
        and the one-token probe with it answered {probe}",
        if offered.is_empty() { "(nothing)".to_string() } else { offered.join(", ") })]
    ModelNotServed { model: String, api_base: String, offered: Vec<String>, probe: String },
    /// A preflight request was answered with a redirect to another host, which is not followed.
    #[error(
        "{check}: {url} answered {status} redirecting to {location}, another host than the target's; \
         set base_url to where the server is, or client.cross_host_redirects = true to follow \
         (the summary notes where requests went)"
    )]
    Redirected { check: String, url: String, status: u16, location: String },
    #[error(
        "no model configured for target `{target}` and {models_url} lists none; set model = \"...\""
    )]
    NoModel { target: String, models_url: String },
    /// The endpoint or the model is unknown to the server (404 on the probe).
    #[error("{hint}; the server said: {text}")]
    NotFound { hint: String, text: String },
    #[error("a one-token probe to {url} answered {status}: {text}")]
    Probe { url: String, status: u16, text: String },
}

impl PreflightError {
    /// The same error with secrets and URL user information removed from every text it holds.
    pub fn redacted(self, r: &Redactor) -> PreflightError {
        let r = |s: String| r.redact(&s);
        match self {
            PreflightError::Unreachable(Unreachable { check, url, detail, timed_out }) => {
                PreflightError::Unreachable(Unreachable {
                    check,
                    url: r(url),
                    detail: r(detail),
                    timed_out,
                })
            }
            PreflightError::ModelNotServed { model, api_base, offered, probe } => {
                PreflightError::ModelNotServed {
                    model: r(model),
                    api_base: r(api_base),
                    offered: offered.into_iter().map(r).collect(),
                    probe: r(probe),
                }
            }
            PreflightError::Redirected { check, url, status, location } => {
                PreflightError::Redirected {
                    check,
                    url: r(url),
                    status,
                    location: r(shown_location(&location)),
                }
            }
            PreflightError::NoModel { target, models_url } => {
                PreflightError::NoModel { target, models_url: r(models_url) }
            }
            PreflightError::NotFound { hint, text } => {
                PreflightError::NotFound { hint: r(hint), text: r(text) }
            }
            PreflightError::Probe { url, status, text } => {
                PreflightError::Probe { url: r(url), status, text: r(text) }
            }
            other @ (PreflightError::Client(_) | PreflightError::Auth { .. }) => other,
        }
    }
}

/// The redactor of a client: its API key and the user and password of its URL.
fn client_redactor(api_key: Option<&str>, target_url: &str) -> Redactor {
    Redactor::new(api_key.map(str::to_string).into_iter().chain(Redactor::url_secrets(target_url)))
}

fn auth_hint(status: u16, target: &str, api_key_env: Option<&str>) -> String {
    match api_key_env {
        None => format!(
            "the server answered {status}: it requires an API key. Name the variable holding it with \
             api_key_env in [targets.{target}] and export it"
        ),
        Some(var) => format!(
            "the server answered {status} to the key from ${var}: check its value (it is sent as \
             `Authorization: Bearer <key>`; a wrong key, a key for another server or a stray newline \
             are the usual causes)"
        ),
    }
}

/// Why the target's tokenizer gave no count.
#[derive(Debug, thiserror::Error)]
pub enum TokenizeError {
    #[error(transparent)]
    Unreachable(#[from] Unreachable),
    #[error("/tokenize answered {status}: {text}")]
    Status { status: u16, text: String },
    #[error("/tokenize answered something that is not JSON")]
    NotJson,
    #[error("/tokenize answer has neither `count` nor `tokens`")]
    NoCount,
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
    pub fn target_info(
        &self,
        name: String,
        api_key_env: Option<String>,
        redactor: &Redactor,
    ) -> crate::summary::TargetInfo {
        crate::summary::TargetInfo {
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
pub fn split_base_url(base: &str) -> (String, String) {
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

/// Proxy variables present in the environment (names only; values may hold credentials).
pub fn proxy_vars_present() -> Vec<&'static str> {
    PROXY_VARS
        .iter()
        .copied()
        .filter(|v| std::env::var_os(v).is_some_and(|x| !x.is_empty()))
        .collect()
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
pub fn shown_location(location: &str) -> String {
    let bare = crate::redact::strip_userinfo(location);
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

/// What goes into every request besides the prompt.
#[derive(Clone, Debug)]
pub struct Sampling {
    pub temperature: f64,
    pub top_p: f64,
    pub seed: u64,
    pub ignore_eos: bool,
    /// `top_logprobs` to request (None: no log-probs).
    pub logprobs: Option<u32>,
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
pub struct ConnectionCount(std::sync::Arc<std::sync::atomic::AtomicU64>);

impl ConnectionCount {
    pub fn get(&self) -> u64 {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// Outcome of one request at the transport level, plus the parsed response.
#[derive(Clone, Debug)]
pub struct Exchange {
    pub sent: Option<Instant>,
    pub status: Option<u16>,
    pub queue_ms: Option<f64>,
    pub result: ResponseResult,
    pub end: Instant,
}

/// Where one request sits in its run: what the record of its exchange needs besides the
/// exchange.
#[derive(Clone, Copy, Debug)]
pub struct RequestSlot {
    pub id: u64,
    pub warmup: bool,
    /// The workload item it sent.
    pub item: u64,
    /// When it was meant to be sent (latencies count from here).
    pub intended: Instant,
    /// Prompt tokens counted with the target's tokenizer before the run, when known (used when
    /// the server reports no usage).
    pub counted_input_tokens: Option<u32>,
}

impl Exchange {
    /// The per-request record of this exchange, times in ms on the run clock that started at
    /// `clock`, and the generated text when it was kept.
    pub fn into_record(self, slot: RequestSlot, clock: Instant) -> (RequestRecord, Option<String>) {
        let ms = |t: Instant| round_us((t - clock).as_secs_f64() * 1000.0);
        let r = self.result;
        let record = RequestRecord {
            id: slot.id,
            warmup: slot.warmup,
            class: r.class,
            error: r.error,
            status: self.status,
            item: slot.item,
            session: None,
            turn: None,
            intended_ms: ms(slot.intended),
            sent_ms: self.sent.map(ms),
            first_token_ms: r.first_token_ms.map(round_us),
            last_token_ms: r.last_token_ms.map(round_us),
            end_ms: ms(self.end),
            input_tokens: r.prompt_tokens.or(slot.counted_input_tokens.map(u64::from)),
            output_tokens: r.output_tokens,
            token_source: r.token_source,
            content_events: r.content_events,
            count_mismatch: r.count_mismatch,
            rejected_usage: r.rejected_usage,
            stream_violations: r.integrity.by_kind(),
            unexpected_body: r.unexpected_body,
            itl_ms: r.itl_ms.into_iter().map(round_us).collect(),
            queue_ms: self.queue_ms,
            server_timings: r.server_timings,
            finish_reason: r.finish_reason,
            reasoning_events: r.reasoning_events,
            first_reasoning_ms: r.first_reasoning_ms.map(round_us),
            first_answer_ms: r.first_answer_ms.filter(|_| r.reasoning_events > 0).map(round_us),
            max_tokens: None,
        };
        (record, r.text)
    }
}

/// One request to execute.
#[derive(Clone, Debug)]
pub struct Call<'a> {
    pub url: &'a str,
    pub body: bytes::Bytes,
    pub stream: bool,
    /// Sent as `x-request-id` (servers may log it; the simulator records it).
    pub request_id: &'a str,
    /// The run clock's origin: event times are ms since this instant.
    pub clock: Instant,
    /// Keep the generated text.
    pub capture_text: bool,
    /// Close the request on purpose (`[profile.*.cancel]`): `None` for most requests.
    pub cancel: Option<Cancel>,
}

/// When the client closes one request on purpose, as a client that gives up does.
#[derive(Clone, Debug, Default)]
pub struct Cancel {
    /// Once this many content events arrived.
    pub after_tokens: Option<u64>,
    /// At this instant (the intended send time plus the planned ms).
    pub at: Option<Instant>,
    /// The planned ms, for the record's message.
    pub after_ms: Option<f64>,
    /// A header sent with the request carrying the deadline, and its value (seconds).
    pub header: Option<(String, String)>,
}

impl Cancel {
    /// The plan of a request intended at `intended`.
    pub fn of(plan: &crate::config::CancelPlan, intended: Instant) -> Cancel {
        let at = plan.after_ms.map(|ms| intended + Duration::from_secs_f64(ms / 1000.0));
        let header = match (&plan.header, plan.after_ms) {
            (Some(h), Some(ms)) => Some((h.clone(), format!("{:.3}", ms / 1000.0))),
            _ => None,
        };
        Cancel { after_tokens: plan.after_tokens, at, after_ms: plan.after_ms, header }
    }

    fn why_time(&self) -> String {
        format!(
            "cancelled on purpose {} ms after its intended send (cancel)",
            crate::config::limits::number(self.after_ms.unwrap_or_default())
        )
    }

    fn why_tokens(n: u64) -> String {
        format!("cancelled on purpose after {n} output tokens (cancel.after_tokens)")
    }
}

/// Sleep until `at`, or forever without it.
async fn until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Signals from the runner to requests in flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Running,
    /// No new requests; in-flight ones may finish.
    Draining,
    /// Abort everything in flight now (`interrupted`).
    Abort,
}

/// A preflight answer: status, the body as JSON when it is JSON, its first characters with any
/// secret removed, and whether the simulator announced itself.
struct Reply {
    status: u16,
    json: Option<Value>,
    text: String,
    simulator: bool,
    /// The `Location` of a redirect that was not followed (as [`shown_location`] shows it).
    location: Option<String>,
    /// Where the answer came from, when a followed redirect led to another origin (shown).
    redirected_to: Option<String>,
    /// What the answer said about keeping its connection open.
    keep_alive: KeepAliveWords,
}

impl Reply {
    /// A redirect to another host the client did not follow, as the preflight error it is.
    fn refused_redirect(&self, check: &str, url: &str) -> Result<(), PreflightError> {
        match &self.location {
            Some(location) if (300..400).contains(&self.status) => {
                Err(PreflightError::Redirected {
                    check: check.to_string(),
                    url: url.to_string(),
                    status: self.status,
                    location: location.clone(),
                })
            }
            _ => Ok(()),
        }
    }
}

/// The names of the pre-run checks, as errors and notes show them.
const CHECK_MODELS: &str = "preflight, the model list";
const CHECK_PROBE: &str = "preflight, the one-token probe";
const CHECK_REUSE: &str = "preflight, the connection-reuse check";
const CHECK_TOKENIZE: &str = "preflight, /tokenize";
const CHECK_COUNT: &str = "counting prompt tokens with /tokenize";

/// The models a `/v1/models` answer offers (None: unknown), or the status that refused the key.
fn offered_models(r: &Reply) -> Result<Option<Vec<String>>, u16> {
    match r.status {
        200 => {
            Ok(r.json.as_ref().and_then(|b| b.get("data")).and_then(|d| d.as_array()).map(|d| {
                d.iter()
                    .filter_map(|m| m.get("id").and_then(|i| i.as_str()).map(str::to_string))
                    .collect()
            }))
        }
        401 | 403 => Err(r.status),
        _ => Ok(None),
    }
}

/// The model to request: the configured one (listed or not: the probe decides whether an
/// unlisted one is served), else the first one offered.
fn choose_model(
    configured: Option<&str>,
    offered: Option<&[String]>,
    target_name: &str,
    api_base: &str,
) -> Result<String, PreflightError> {
    match (configured, offered) {
        (Some(m), _) => Ok(m.to_string()),
        (None, Some(list)) if !list.is_empty() => Ok(list[0].clone()),
        (None, _) => Err(PreflightError::NoModel {
            target: target_name.to_string(),
            models_url: format!("{api_base}/models"),
        }),
    }
}

/// The refusal of a model `/v1/models` does not list and the probe did not serve either.
fn not_listed(model: &str, api_base: &str, offered: &[String], probe: String) -> PreflightError {
    PreflightError::ModelNotServed {
        model: model.to_string(),
        api_base: api_base.to_string(),
        offered: offered.to_vec(),
        probe,
    }
}

/// The one-token request preflight sends.
struct Probe<'a> {
    endpoint: Endpoint,
    model: &'a str,
}

impl Probe<'_> {
    fn body(&self, field: &str) -> Value {
        let mut b = match self.endpoint {
            Endpoint::Chat => {
                json!({"model": self.model, "messages": [{"role": "user", "content": "hello"}]})
            }
            Endpoint::Completions => json!({"model": self.model, "prompt": "hello"}),
        };
        b[field] = json!(1);
        b["stream"] = json!(false);
        b
    }
}

/// Why the probe refused the target: an auth answer (described by the caller, who knows the
/// key's variable) or another preflight error.
enum ProbeRefused {
    Auth(u16),
    Other(PreflightError),
}

impl From<PreflightError> for ProbeRefused {
    fn from(e: PreflightError) -> Self {
        ProbeRefused::Other(e)
    }
}

impl From<Unreachable> for ProbeRefused {
    fn from(e: Unreachable) -> Self {
        ProbeRefused::Other(e.into())
    }
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
    pub fn metrics_headers(&self, metrics_url: &str, root: &str) -> HeaderMap {
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
    pub fn without_reuse(&self) -> Result<Client, ClientError> {
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
    pub fn connections_opened(&self) -> u64 {
        self.opened.get()
    }

    /// Whether the server keeps a connection usable after a response of this kind. Some
    /// servers (llama.cpp's, after a streamed response) close the connection although they
    /// announce keep-alive; a request sent on it before the close is noticed fails without the
    /// server reading it. On a plain-HTTP target without a proxy this is observed on one
    /// connection driven by hand; otherwise two requests in a row through the pool tell.
    /// `words`: what the server's first answer said about keeping the connection.
    async fn keeps_connections_alive(
        &self,
        url: &str,
        body: &Value,
        words: &mut Option<KeepAliveWords>,
    ) -> bool {
        match self.connection_survives(url, body, words).await {
            Some(kept) => kept,
            None => self.pooled_requests_succeed(url, body, words).await,
        }
    }

    /// Two one-token requests on one TCP connection: `Some(false)` when the server closes it
    /// after the first response (within a grace period for its close to arrive) or the second
    /// request fails on it, `Some(true)` when both are answered on it, `None` when this cannot
    /// be observed directly (https, a proxy, the server unreachable or too slow).
    async fn connection_survives(
        &self,
        url: &str,
        body: &Value,
        words: &mut Option<KeepAliveWords>,
    ) -> Option<bool> {
        use http_body_util::{BodyExt, Full};
        use hyper_util::rt::TokioIo;

        /// How long a closing server gets for its FIN to arrive after the last body byte.
        const CLOSE_GRACE: Duration = Duration::from_millis(300);
        // A one-token answer: the client's timeouts bound it like any preflight request.
        let answer_timeout = self.opts.request_timeout.min(self.opts.stall_timeout);

        if self.proxied {
            return None;
        }
        let uri: hyper::Uri = url.parse().ok()?;
        if uri.scheme_str() != Some("http") {
            return None;
        }
        let host = uri.host()?.trim_start_matches('[').trim_end_matches(']').to_string();
        let port = uri.port_u16().unwrap_or(80);
        let authority = uri.authority()?.to_string();
        // Origin form on the request line, as a client talking to the server directly sends it.
        let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_string();
        let tcp = tokio::time::timeout(
            answer_timeout.min(Duration::from_secs(10)),
            tokio::net::TcpStream::connect((host.as_str(), port)),
        )
        .await
        .ok()?
        .ok()?;
        let _ = tcp.set_nodelay(true);
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake::<_, Full<bytes::Bytes>>(TokioIo::new(tcp))
                .await
                .ok()?;
        let conn = tokio::spawn(conn);
        let verdict = async {
            for attempt in 0..2 {
                if attempt > 0 {
                    tokio::time::sleep(CLOSE_GRACE).await;
                    if conn.is_finished() || sender.is_closed() {
                        return Some(false);
                    }
                }
                if sender.ready().await.is_err() {
                    return Some(false);
                }
                let mut req = hyper::Request::post(path.clone())
                    .header(reqwest::header::HOST, authority.as_str())
                    .body(Full::new(bytes::Bytes::from(body.to_string())))
                    .ok()?;
                req.headers_mut().extend(self.headers.clone());
                type BoxError = Box<dyn std::error::Error + Send + Sync>;
                let answered = match tokio::time::timeout(answer_timeout, async {
                    let resp = sender.send_request(req).await.map_err(BoxError::from)?;
                    words.get_or_insert(keep_alive_words(resp.version(), resp.headers()));
                    let ok = resp.status().is_success();
                    let body = http_body_util::Limited::new(resp.into_body(), PREFLIGHT_BODY_BYTES);
                    match body.collect().await {
                        Ok(_) => Ok(ok),
                        // A body past what is kept says nothing about connections.
                        Err(e) if e.is::<http_body_util::LengthLimitError>() => Ok(false),
                        Err(e) => Err(e),
                    }
                })
                .await
                {
                    Err(_) => return None, // slow, not closed: no evidence either way
                    Ok(r) => r,
                };
                match answered {
                    Ok(true) => {}
                    // An error answer says nothing about connections.
                    Ok(false) => return None,
                    // The first request failing says nothing about reuse; the second failing
                    // on a connection the first left open is what this looks for.
                    Err(_) => return if attempt == 0 { None } else { Some(false) },
                }
            }
            Some(true)
        }
        .await;
        conn.abort();
        verdict
    }

    /// Two one-token requests in a row through the connection pool (each read to its end, up
    /// to what is kept, so the connection is reusable).
    async fn pooled_requests_succeed(
        &self,
        url: &str,
        body: &Value,
        words: &mut Option<KeepAliveWords>,
    ) -> bool {
        for _ in 0..2 {
            match self.call_json(CHECK_REUSE, url, Some(body)).await {
                Ok(reply) => {
                    words.get_or_insert(reply.keep_alive);
                }
                Err(e) if !e.timed_out => return false,
                Err(_) => return true, // slow, not closed: no evidence either way
            }
        }
        true
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

    /// A request outside the measurement (`check` names it): its answer, the body read up to
    /// [`PREFLIGHT_BODY_BYTES`] with its first characters kept (any secret removed), under the
    /// client's request and stall timeouts. `body: None` sends a GET.
    async fn call_json(
        &self,
        check: &str,
        url: &str,
        body: Option<&Value>,
    ) -> Result<Reply, Unreachable> {
        let deadline = Instant::now() + self.opts.request_timeout;
        let req = match body {
            None => self.http.get(url),
            Some(b) => self.http.post(url).body(b.to_string()),
        };
        let failed = |detail: String, timed_out: bool| Unreachable {
            check: check.to_string(),
            url: self.redactor.redact(url),
            detail,
            timed_out,
        };
        let (until, wait) = self.next_wait(deadline);
        let resp =
            match tokio::time::timeout_at(until, req.headers(self.headers.clone()).send()).await {
                Err(_) => return Err(failed(self.expired(wait, "response headers"), true)),
                Ok(Err(e)) => {
                    let detail = format!("{}{}", self.err_text(&e), self.connect_hint());
                    return Err(failed(detail, e.is_timeout()));
                }
                Ok(Ok(r)) => r,
            };
        let status = resp.status().as_u16();
        let keep_alive = keep_alive_words(resp.version(), resp.headers());
        let simulator = resp.headers().contains_key(wire::SIMULATOR_HEADER);
        let location = resp
            .headers()
            .get(reqwest::header::LOCATION)
            .filter(|_| resp.status().is_redirection())
            .map(|l| self.redactor.redact(&shown_location(&String::from_utf8_lossy(l.as_bytes()))));
        let redirected_to = reqwest::Url::parse(url)
            .ok()
            .filter(|asked| !same_origin(asked, resp.url()))
            .map(|_| self.redactor.redact(&shown_location(resp.url().as_str())));
        let text = self.read_within(resp, PREFLIGHT_BODY_BYTES, deadline).await.map_err(
            |(wait, got)| {
                failed(
                    format!(
                        "the answer stopped after {got} bytes: {}",
                        self.expired(wait, "bytes")
                    ),
                    true,
                )
            },
        )?;
        Ok(Reply {
            status,
            json: serde_json::from_str(&text).ok(),
            text: self.redactor.clip(&text, MESSAGE_CHARS),
            simulator,
            location,
            redirected_to,
            keep_alive,
        })
    }

    /// The first `cap` bytes of a body (lossy UTF-8; the rest is not read), under the stall
    /// timeout and the request's `deadline`; a read error ends the body. On a timeout: which
    /// one expired, and how many bytes had come.
    async fn read_within(
        &self,
        mut resp: reqwest::Response,
        cap: usize,
        deadline: Instant,
    ) -> Result<String, (Wait, usize)> {
        let mut buf = Vec::new();
        while buf.len() < cap {
            let (until, wait) = self.next_wait(deadline);
            match tokio::time::timeout_at(until, resp.chunk()).await {
                Err(_) => return Err((wait, buf.len())),
                Ok(Ok(Some(b))) => buf.extend_from_slice(&b[..b.len().min(cap - buf.len())]),
                Ok(_) => break,
            }
        }
        Ok(String::from_utf8_lossy(&buf).into_owned())
    }

    /// POST a JSON body under the client's timeouts: status, the body as JSON when it is JSON,
    /// and its text.
    pub async fn post_json(
        &self,
        url: &str,
        body: &Value,
    ) -> Result<(u16, Option<Value>, String), Unreachable> {
        let r = self.call_json("request", url, Some(body)).await?;
        Ok((r.status, r.json, r.text))
    }

    /// Check the target before measuring: models, auth, endpoint path, output-length field,
    /// tokenizer. Every failure is explained in terms of what to change. Every request is bound
    /// by the client's request and stall timeouts.
    pub async fn preflight(
        &self,
        target_name: &str,
        target: &Target,
        model_override: Option<&str>,
        endpoint: Endpoint,
        stream: bool,
        api_key_env: Option<&str>,
    ) -> Result<Resolved, PreflightError> {
        let (root, api_base) = split_base_url(&target.base_url);
        let mut notes = Vec::new();
        let auth = |status: u16| PreflightError::Auth {
            status,
            target: target_name.to_string(),
            api_key_env: api_key_env.map(str::to_string),
        };
        let models_url = format!("{api_base}/models");
        let models = self.call_json(CHECK_MODELS, &models_url, None).await?;
        models.refused_redirect(CHECK_MODELS, &models_url)?;
        let offered = match offered_models(&models) {
            Ok(offered) => offered,
            Err(status) => return Err(auth(status)),
        };
        if offered.is_none() {
            notes.push(match models.status {
                404 => format!("{models_url} answered 404; the model list is unknown"),
                s => format!("{models_url} answered {s}: {}", models.text),
            });
        }
        let configured = model_override.or(target.model.as_deref());
        let model = choose_model(configured, offered.as_deref(), target_name, &api_base)?;
        // A gateway may serve a model it does not list: the probe decides.
        let unlisted = offered.as_ref().filter(|list| !list.contains(&model));
        let url = format!("{api_base}/{}", endpoint.path());
        let probe = Probe { endpoint, model: &model };
        let probed = self.probe(&url, &probe, target, &mut notes).await;
        let (field, status, redirected_to) = match (probed, unlisted) {
            (Ok((_, status, _)), Some(list)) if !(200..300).contains(&status) => {
                return Err(not_listed(&model, &api_base, list, format!("{status}")));
            }
            (Err(ProbeRefused::Other(e)), Some(list)) => {
                return Err(not_listed(&model, &api_base, list, e.to_string()));
            }
            (Err(ProbeRefused::Auth(status)), _) => return Err(auth(status)),
            (Err(ProbeRefused::Other(e)), None) => return Err(e),
            (Ok(answer), _) => answer,
        };
        if let Some(list) = unlisted {
            notes.push(format!(
                "model `{model}` is not listed by {models_url} (it offers: {}); the one-token probe \
                 with it was answered, so it is measured",
                if list.is_empty() { "(nothing)".to_string() } else { list.join(", ") }
            ));
        }
        if let Some(to) = redirected_to.or(models.redirected_to.clone()) {
            notes.push(format!(
                "{url} redirects to another host (client.cross_host_redirects = true): \
                 requests were answered by {to}"
            ));
        }
        let mut reuse_connections = true;
        if (200..300).contains(&status) {
            let mut b = probe.body(field);
            b["stream"] = json!(stream);
            let mut words = None;
            reuse_connections = self.keeps_connections_alive(&url, &b, &mut words).await;
            if !reuse_connections {
                notes.push(closes_connections_note(words));
            }
        }
        let client = if reuse_connections { self.clone() } else { self.without_reuse()? };
        let tokenize = client.offers_tokenize(&root, &model).await?;
        if !tokenize {
            notes.push("the target offers no /tokenize: prompt lengths are approximate (one token per word)".into());
        }
        Ok(Resolved {
            root,
            api_base,
            url,
            endpoint,
            stream,
            model,
            max_tokens_field: field,
            models: models.json.filter(|_| models.status == 200),
            tokenize,
            simulated: models.simulator,
            reuse_connections,
            notes,
        })
    }

    /// The one-token probe outside the measurement: path, auth, output-length field. Returns the
    /// field to send, the probe's status (an overloaded or failing server is measured anyway)
    /// and where a followed redirect to another host led.
    async fn probe(
        &self,
        url: &str,
        probe: &Probe<'_>,
        target: &Target,
        notes: &mut Vec<String>,
    ) -> Result<(&'static str, u16, Option<String>), ProbeRefused> {
        let mut field = match target.max_tokens_field {
            MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
            _ => "max_tokens",
        };
        let mut reply = self.call_json(CHECK_PROBE, url, Some(&probe.body(field))).await?;
        if reply.status == 400
            && target.max_tokens_field == MaxTokensField::Auto
            && reply.text.contains("max_tokens")
        {
            let second = self
                .call_json(CHECK_PROBE, url, Some(&probe.body("max_completion_tokens")))
                .await?;
            if (200..300).contains(&second.status) {
                field = "max_completion_tokens";
                notes.push(
                    "the server rejects max_tokens; max_completion_tokens is sent instead".into(),
                );
            }
            reply = second;
        }
        reply.refused_redirect(CHECK_PROBE, url)?;
        let Reply { status, text, redirected_to, .. } = reply;
        match status {
            200..=299 => {}
            // An overloaded or failing server is what a load test is for: measure it anyway.
            429 | 500..=599 => notes.push(format!(
                "the one-token probe to {url} answered {status} ({text}); measuring anyway"
            )),
            401 | 403 => return Err(ProbeRefused::Auth(status)),
            404 => {
                let hint = if text.contains("model") {
                    format!("the server does not know model `{}`", probe.model)
                } else {
                    format!(
                        "{url} does not exist: check base_url (`{}` was used; it is accepted with or without /v1) \
                         and whether the server offers the {} endpoint",
                        target.base_url,
                        probe.endpoint.name()
                    )
                };
                return Err(PreflightError::NotFound { hint, text }.into());
            }
            s => {
                return Err(PreflightError::Probe { url: url.to_string(), status: s, text }.into());
            }
        }
        Ok((field, status, redirected_to))
    }

    /// Whether the target counts tokens at `/tokenize` (vLLM and llama.cpp shapes).
    async fn offers_tokenize(&self, root: &str, model: &str) -> Result<bool, Unreachable> {
        let r = self
            .call_json(
                CHECK_TOKENIZE,
                &format!("{root}/tokenize"),
                Some(&json!({"model": model, "prompt": "hello world", "content": "hello world"})),
            )
            .await?;
        Ok(r.status == 200
            && r.json
                .as_ref()
                .is_some_and(|b| b.get("count").is_some() || b.get("tokens").is_some()))
    }

    /// Open `n` connections to the server so that connection setup happens before the measured
    /// window rather than inside the first requests' TTFT; returns how many were opened.
    ///
    /// `n` concurrent `GET /v1/models` (each needs a connection of its own while the others are
    /// in flight); the connector sets up at most [`PRECONNECT_AT_ONCE`] at a time, and the
    /// opening stops after [`PRECONNECT_TIME`].
    pub async fn preconnect(&self, api_base: &str, n: usize) -> usize {
        let url = format!("{api_base}/models");
        // Counted since the client was made: the preflight's connections may carry some.
        let until = Instant::now() + PRECONNECT_TIME;
        let available = || self.connections_opened().min(n as u64);
        // A request answered on a connection free again while others were still being set up
        // may leave its own unopened: a further round opens what is missing.
        for _ in 0..PRECONNECT_ROUNDS {
            let gets = (0..n).map(|_| {
                let req = self.http.get(&url).headers(self.headers.clone());
                async move {
                    if let Ok(resp) = req.send().await {
                        // Read to the end (up to what is kept) so the connection is reusable.
                        read_capped(resp, PREFLIGHT_BODY_BYTES, Duration::from_secs(10)).await;
                    }
                }
            });
            let _ = tokio::time::timeout_at(until, futures_util::future::join_all(gets)).await;
            if available() >= n as u64 || Instant::now() >= until {
                break;
            }
        }
        available() as usize
    }

    /// Count tokens with the target's `/tokenize` (vLLM and llama.cpp shapes).
    pub async fn count_tokens(
        &self,
        root: &str,
        model: &str,
        text: &str,
    ) -> Result<u32, TokenizeError> {
        let r = self
            .call_json(
                CHECK_COUNT,
                &format!("{root}/tokenize"),
                Some(&json!({"model": model, "prompt": text, "content": text})),
            )
            .await?;
        let (status, body, msg) = (r.status, r.json, r.text);
        if status != 200 {
            return Err(TokenizeError::Status { status, text: msg });
        }
        let body = body.ok_or(TokenizeError::NotJson)?;
        body.get("count")
            .and_then(|c| c.as_u64())
            .or_else(|| body.get("tokens").and_then(|t| t.as_array()).map(|t| t.len() as u64))
            .map(|n| n as u32)
            .ok_or(TokenizeError::NoCount)
    }

    /// Execute one request. Latencies are computed later from `intended`; here every event is
    /// timestamped on arrival (before JSON parsing) on the run clock.
    pub async fn execute(&self, call: Call<'_>, mut phase: watch::Receiver<Phase>) -> Exchange {
        let Call { url, body, stream, request_id, clock, capture_text, cancel } = call;
        let cancel = cancel.unwrap_or_default();
        let sent_body = body.clone();
        let deadline = Instant::now() + self.opts.request_timeout;
        let sent = Instant::now();
        let mut req =
            self.http.post(url).headers(self.headers.clone()).header("x-request-id", request_id);
        if let Some((name, value)) = &cancel.header {
            req = req.header(name.as_str(), value.as_str());
        }
        let req = req.body(body);
        let abort = async move {
            let _ = phase.wait_for(|p| *p == Phase::Abort).await;
        };
        tokio::pin!(abort);
        let failed = |class: Outcome, msg: String, sent: Option<Instant>| Exchange {
            sent,
            status: None,
            queue_ms: None,
            result: ResponseResult::failed(class, msg),
            end: Instant::now(),
        };
        // A streamed answer sends its headers before the first token: the stall timeout bounds
        // their wait too. A non-streamed answer arrives whole, headers after the whole
        // generation, so only the request timeout bounds it.
        let (until, wait) =
            if stream { self.next_wait(deadline) } else { (deadline, Wait::Request) };
        let resp = tokio::select! {
            r = tokio::time::timeout_at(until, req.send()) => r,
            _ = &mut abort => return failed(Outcome::Interrupted, "in flight when the run was interrupted".into(), Some(sent)),
            _ = self::until(cancel.at) => return failed(Outcome::Cancelled, cancel.why_time(), Some(sent)),
        };
        let mut resp = match resp {
            Err(_) => {
                return failed(
                    Outcome::Timeout,
                    self.expired(wait, "response headers"),
                    Some(sent),
                );
            }
            Ok(Err(e)) => {
                let class = if e.is_timeout() { Outcome::Timeout } else { Outcome::ConnectError };
                return failed(
                    class,
                    format!("{}{}", self.err_text(&e), self.connect_hint()),
                    Some(sent),
                );
            }
            Ok(Ok(r)) => r,
        };
        let status = resp.status().as_u16();
        let queue_ms = resp
            .headers()
            .get(crate::wire::QUEUE_TIME_HEADER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<f64>().ok());
        if !resp.status().is_success() {
            // A redirect still here is one to another host the client does not follow.
            let location = resp
                .headers()
                .get(reqwest::header::LOCATION)
                .filter(|_| resp.status().is_redirection())
                .map(|l| shown_location(&String::from_utf8_lossy(l.as_bytes())));
            let text = read_capped(resp, ERROR_BODY_BYTES, Duration::from_secs(5)).await;
            let message = match location {
                Some(to) => format!(
                    "HTTP {status}: a redirect to {to} (another host) not followed; \
                     client.cross_host_redirects = true follows it"
                ),
                None => {
                    format!("HTTP {status}: {}", self.redactor.clip(text.trim(), MESSAGE_CHARS))
                }
            };
            let mut ex = failed(Outcome::Http(status), self.redactor.redact(&message), Some(sent));
            ex.status = Some(status);
            return ex;
        }
        let (mut result, end) = if stream {
            let result = self
                .read_stream(&mut resp, deadline, &mut abort, clock, capture_text, &cancel)
                .await;
            (result, Instant::now())
        } else {
            self.read_body(&mut resp, deadline, &mut abort, clock, capture_text, &cancel).await
        };
        // After the response: the body is parsed again outside every measured time.
        result.check_usage(stream, sent_max_tokens(&sent_body));
        Exchange { sent: Some(sent), status: Some(status), queue_ms, result, end }
    }

    /// A whole (non-streamed) body, parsed when it arrived complete; with the time it ended.
    async fn read_body(
        &self,
        resp: &mut reqwest::Response,
        deadline: Instant,
        abort: &mut std::pin::Pin<&mut impl std::future::Future<Output = ()>>,
        clock: Instant,
        capture_text: bool,
        cancel: &Cancel,
    ) -> (ResponseResult, Instant) {
        let mut buf = Vec::new();
        let end = loop {
            match self.next_chunk(resp, deadline, abort, cancel).await {
                Ok(b) if buf.len() + b.len() > self.opts.max_event_bytes => {
                    break StreamEnd::Oversized(format!(
                        "the body went past {} bytes (client.max_event_kib)",
                        self.opts.max_event_bytes
                    ));
                }
                Ok(b) => buf.extend_from_slice(&b),
                Err(end) => break end,
            }
        };
        let now = Instant::now();
        let mut result = match end {
            StreamEnd::Eof { .. } => openai::read_body(
                &buf,
                (now - clock).as_secs_f64() * 1000.0,
                capture_text,
                &self.redactor,
            ),
            StreamEnd::Interrupted => ResponseResult::failed(
                Outcome::Interrupted,
                "in flight when the run was interrupted".into(),
            ),
            StreamEnd::CancelledOnPurpose(why) => ResponseResult::failed(Outcome::Cancelled, why),
            StreamEnd::Timeout(m) => ResponseResult::failed(Outcome::Timeout, m),
            StreamEnd::ReadError(m) => ResponseResult::failed(
                Outcome::Truncated,
                format!("connection failed mid-body: {m}"),
            ),
            StreamEnd::Oversized(m) => ResponseResult::failed(Outcome::Malformed, m),
            // Only the stream tracker asks to stop; a body is read to its end.
            StreamEnd::Stopped => {
                ResponseResult::failed(Outcome::Truncated, "body reading stopped early".into())
            }
        };
        self.redact_result(&mut result);
        (result, now)
    }

    /// A streamed body: every event stamped with the arrival time of the bytes that complete
    /// it (ms on the run clock that started at `clock`).
    async fn read_stream(
        &self,
        resp: &mut reqwest::Response,
        deadline: Instant,
        abort: &mut std::pin::Pin<&mut impl std::future::Future<Output = ()>>,
        clock: Instant,
        capture_text: bool,
        cancel: &Cancel,
    ) -> ResponseResult {
        let header =
            |name| resp.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_string);
        let (encoding, content_type) =
            (header(reqwest::header::CONTENT_ENCODING), header(CONTENT_TYPE));
        // The body's first bytes, to say what it was when it was no event stream.
        let mut head = Vec::with_capacity(openai::SNIFF_BYTES);
        let mut parser = SseParser::with_limit(self.opts.max_event_bytes);
        let mut tracker = StreamTracker::new(capture_text).with_redactor(self.redactor.clone());
        let mut items = Vec::with_capacity(8);
        let end = 'read: loop {
            match self.next_chunk(resp, deadline, abort, cancel).await {
                Err(end) => break end,
                Ok(bytes) => {
                    // The arrival time of these bytes stamps every event they complete.
                    let t = (Instant::now() - clock).as_secs_f64() * 1000.0;
                    let room = openai::SNIFF_BYTES - head.len();
                    head.extend_from_slice(&bytes[..room.min(bytes.len())]);
                    items.clear();
                    parser.feed(&bytes, &mut items);
                    for item in items.drain(..) {
                        let flow = match item {
                            SseItem::Event(ev) => tracker.on_event(&ev.event, &ev.data, t),
                            SseItem::Comment(_) => {
                                tracker.on_comment();
                                Flow::Continue
                            }
                        };
                        if flow == Flow::Stop {
                            break 'read StreamEnd::Stopped;
                        }
                    }
                    // A planned cancel closes the stream once its tokens arrived (the events
                    // of these bytes are all counted: a client reads what it was handed).
                    if let Some(n) = cancel.after_tokens
                        && tracker.content_events() >= n
                        && !tracker.completed()
                    {
                        break 'read StreamEnd::CancelledOnPurpose(Cancel::why_tokens(n));
                    }
                    if parser.overflowed() {
                        break 'read StreamEnd::Oversized(format!(
                            "an SSE line or event's data went past {} bytes (client.max_event_kib)",
                            self.opts.max_event_bytes
                        ));
                    }
                }
            }
        };
        let end = match end {
            StreamEnd::Eof { .. } => {
                StreamEnd::Eof { partial_event: parser.finish().partial_event }
            }
            other => other,
        };
        let mut result = tracker.finish(end);
        if result.class == Outcome::Truncated && result.content_events == 0 {
            let kind = openai::recognise_body(encoding.as_deref(), content_type.as_deref(), &head);
            if let Some(kind) = kind {
                result.unexpected_body = Some(kind);
                let why = result.error.take().unwrap_or_default();
                result.error = Some(format!("{why}: {}", kind.hint()));
            }
        }
        self.redact_result(&mut result);
        result
    }

    /// A response's error and kept output text without secrets (acceptance stores outputs).
    fn redact_result(&self, result: &mut ResponseResult) {
        if self.redactor.is_empty() {
            return;
        }
        for text in [&mut result.error, &mut result.text].into_iter().flatten() {
            *text = self.redactor.redact(text);
        }
    }

    /// The next bytes of a response body, or how the body ended: at its end (`Eof`), by the
    /// request or stall timeout, a read error, or the run's abort.
    async fn next_chunk(
        &self,
        resp: &mut reqwest::Response,
        deadline: Instant,
        abort: &mut std::pin::Pin<&mut impl std::future::Future<Output = ()>>,
        cancel: &Cancel,
    ) -> Result<bytes::Bytes, StreamEnd> {
        let next = tokio::select! {
            c = tokio::time::timeout_at(deadline.min(Instant::now() + self.opts.stall_timeout), resp.chunk()) => c,
            _ = abort.as_mut() => return Err(StreamEnd::Interrupted),
            _ = until(cancel.at) => return Err(StreamEnd::CancelledOnPurpose(cancel.why_time())),
        };
        match next {
            Err(_) => Err(StreamEnd::Timeout(self.timeout_msg(deadline))),
            Ok(Err(e)) => Err(StreamEnd::ReadError(self.err_text(&e))),
            Ok(Ok(None)) => Err(StreamEnd::Eof { partial_event: false }),
            Ok(Ok(Some(b))) => Ok(b),
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

/// What a server's answer said about keeping its connection open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum KeepAliveWords {
    /// HTTP/1.0 without `Connection: keep-alive`: that protocol closes after each response.
    Http10,
    /// `Connection: close`.
    Close,
    /// Keep-alive: HTTP/1.1 without `Connection: close`, or HTTP/1.0 with `Connection: keep-alive`.
    KeepAlive,
}

fn keep_alive_words(version: reqwest::Version, headers: &HeaderMap) -> KeepAliveWords {
    let says = |token: &str| {
        headers.get_all(reqwest::header::CONNECTION).iter().any(|v| {
            v.to_str().is_ok_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
        })
    };
    if says("close") {
        KeepAliveWords::Close
    } else if version <= reqwest::Version::HTTP_10 && !says("keep-alive") {
        KeepAliveWords::Http10
    } else {
        KeepAliveWords::KeepAlive
    }
}

/// The summary's note on a server that closes its connections, in the words its answers used.
fn closes_connections_note(words: Option<KeepAliveWords>) -> String {
    let why = match words {
        Some(KeepAliveWords::Http10) => {
            "the server speaks HTTP/1.0, which closes the connection after each response"
        }
        Some(KeepAliveWords::Close) => {
            "the server closes connections after each response (it answers `Connection: close`)"
        }
        Some(KeepAliveWords::KeepAlive) => {
            "the server closes connections after each response although it announces keep-alive"
        }
        None => "the server closes connections after each response",
    };
    format!("{why}: every request opens a new connection (its setup is inside TTFT)")
}

/// The output-length limit a request body sent (`max_tokens` or `max_completion_tokens`, the
/// lower when both), read back from the bytes that went out.
fn sent_max_tokens(body: &[u8]) -> Option<u64> {
    #[derive(serde::Deserialize)]
    struct Limits {
        #[serde(default)]
        max_tokens: Option<u64>,
        #[serde(default)]
        max_completion_tokens: Option<u64>,
    }
    let l: Limits = serde_json::from_slice(body).ok()?;
    match (l.max_tokens, l.max_completion_tokens) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// What is kept of an error body (bytes): enough for any server's message, and the reading stops
/// there (the connection is dropped), so a huge error body costs no memory.
pub const ERROR_BODY_BYTES: usize = 64 * 1024;

/// How many connections the client sets up at once (TCP and TLS handshakes; requests beyond
/// wait for a slot): what bounds [`Client::preconnect`].
pub const PRECONNECT_AT_ONCE: usize = 64;

/// How many rounds of requests [`Client::preconnect`] sends at most.
const PRECONNECT_ROUNDS: usize = 3;

/// How long [`Client::preconnect`] keeps opening connections.
pub const PRECONNECT_TIME: Duration = Duration::from_secs(30);

/// What is kept of a preflight answer (`/v1/models`, `/tokenize`, the probe request).
pub const PREFLIGHT_BODY_BYTES: usize = 4 * 1024 * 1024;

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

/// The JSON body of one request.
pub fn request_body(
    endpoint: Endpoint,
    model: &str,
    stream: bool,
    max_tokens_field: &str,
    item: &WorkItem,
    prompt: &str,
    sampling: &Sampling,
) -> Value {
    let mut body = match (endpoint, &item.payload) {
        (Endpoint::Chat, Payload::Messages(m)) => json!({"model": model, "messages": m}),
        (Endpoint::Chat, Payload::Prompt(_)) => {
            json!({"model": model, "messages": [{"role": "user", "content": prompt}]})
        }
        (Endpoint::Completions, Payload::Messages(m)) => {
            let text: Vec<String> = m
                .iter()
                .map(|x| x.get("content").and_then(|c| c.as_str()).unwrap_or_default().to_string())
                .collect();
            json!({"model": model, "prompt": text.join("\n")})
        }
        (Endpoint::Completions, Payload::Prompt(_)) => json!({"model": model, "prompt": prompt}),
    };
    body[max_tokens_field] = json!(item.max_tokens);
    body["temperature"] = json!(sampling.temperature);
    body["top_p"] = json!(sampling.top_p);
    body["seed"] = json!(sampling.seed);
    body["stream"] = json!(stream);
    if stream {
        body["stream_options"] = json!({"include_usage": true});
    }
    if sampling.ignore_eos {
        body["ignore_eos"] = json!(true);
    }
    if let Some(k) = sampling.logprobs {
        match endpoint {
            Endpoint::Chat => {
                body["logprobs"] = json!(true);
                body["top_logprobs"] = json!(k);
            }
            Endpoint::Completions => body["logprobs"] = json!(k),
        }
    }
    if let Some(rf) = &item.response_format {
        body["response_format"] = rf.clone();
    }
    // Tools are a chat-completions field: a completions request has no place for them.
    if endpoint == Endpoint::Chat {
        if let Some(tools) = &item.tools {
            body["tools"] = tools.clone();
        }
        if let Some(choice) = &item.tool_choice {
            body["tool_choice"] = choice.clone();
        }
    }
    body
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
