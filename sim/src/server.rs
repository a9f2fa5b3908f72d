//! The simulator's OpenAI-compatible HTTP server.
//!
//! Endpoints: `POST /v1/chat/completions`, `POST /v1/completions` (streamed and not), `GET
//! /v1/models`, `GET /health`, `POST /tokenize`, `GET /metrics` (Prometheus text), and
//! `GET /sim/requests` (the simulator's own per-request record, for cross-checks).
//!
//! It owns the wire format and the faults; an engine [`Backend`] decides when tokens are ready.
//! Every response names the model `sim/<name>`: it is a model of an engine, not an engine; and
//! `/v1/models` carries the `wire::SIMULATOR_HEADER` header, which preflight records
//! (`Resolved::simulated`) and summaries report as `simulated`.

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::backend::{Backend, FinishReason, GenEvent, GenRequest};
use super::text;
use infergate_model::config::{FaultConfig, UsageMode};

use infergate_model::wire::QUEUE_TIME_HEADER;
use infergate_model::wire::SIMULATOR_HEADER;

/// How the server behaves around the backend.
#[derive(Clone, Debug)]
pub struct SimOptions {
    /// Model id served (always starts with `sim/`).
    pub model: String,
    pub usage: UsageMode,
    pub faults: FaultConfig,
    /// When set, requests must carry `Authorization: Bearer <key>`.
    pub api_key: Option<String>,
    /// Share of structured-output answers that are corrupted (truncated or wrong shape).
    pub corruption_rate: f64,
    /// Relative perturbation of every log-prob (simulates a lower-precision engine).
    pub logprob_drift: f64,
    /// Refuse `max_tokens` with 400, as servers that take only `max_completion_tokens` do
    /// (OpenAI's reasoning models), so the client's fallback can be tested.
    pub only_max_completion_tokens: bool,
    /// Keep each request's messages (chat) or prompt (completions) in its record, so a test can
    /// check what a client sent (a session's history).
    pub keep_prompts: bool,
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            model: "sim/timing".into(),
            usage: UsageMode::Final,
            faults: FaultConfig::default(),
            api_key: None,
            corruption_rate: 0.0,
            logprob_drift: 0.0,
            only_max_completion_tokens: false,
            keep_prompts: false,
        }
    }
}

/// The simulator's record of one request (times in ms since the server started).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SimRecord {
    pub id: u64,
    /// The client's `x-request-id` header, when sent.
    pub request_id: Option<String>,
    pub arrival_ms: f64,
    pub queue_ms: Option<f64>,
    /// When the first content chunk was handed to the connection.
    pub first_chunk_ms: Option<f64>,
    pub last_chunk_ms: Option<f64>,
    /// Timing mode: how much later than scheduled the latest-handed chunk of this request was
    /// handed to the connection (its worst chunk), so a late server shows as its own lateness
    /// instead of being taken for the client's measurement error.
    pub late_ms_max: Option<f64>,
    /// Timing mode: how much later than scheduled the first content chunk was handed over.
    pub late_ms_first: Option<f64>,
    /// Timing mode: when each content chunk was due by the schedule, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub chunk_due_ms: Vec<f64>,
    /// Timing mode: when each content chunk was handed to the connection, in order (the
    /// known-answer tests' truth for the client's event times and gaps).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub chunk_ms: Vec<f64>,
    pub chunks: u32,
    pub output_tokens: u32,
    pub prompt_tokens: u32,
    pub fault: Option<String>,
    pub finish_reason: Option<String>,
    /// The client went away before the response ended.
    pub disconnected: bool,
    /// The request's `messages` or `prompt` as received (only with `keep_prompts`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt: Option<Value>,
    /// The answer's text as sent (only with `keep_prompts`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
}

struct ServerState {
    opts: SimOptions,
    backend: Arc<dyn Backend>,
    started: Instant,
    next_id: AtomicU64,
    fault_rng: Mutex<StdRng>,
    freeze: Option<(Instant, Instant)>,
    records: Mutex<Vec<SimRecord>>,
    outcomes: Mutex<BTreeMap<String, u64>>,
}

impl ServerState {
    fn ms_since_start(&self, t: Instant) -> f64 {
        (t - self.started).as_secs_f64() * 1000.0
    }

    /// Wait out a freeze of the whole server; true when there was one to wait for.
    async fn wait_freeze(&self) -> bool {
        if let Some((from, until)) = self.freeze {
            let now = Instant::now();
            if now >= from && now < until {
                tokio::time::sleep_until(until).await;
                return true;
            }
        }
        false
    }

    fn count(&self, outcome: &str) {
        *self.outcomes.lock().unwrap().entry(outcome.to_string()).or_default() += 1;
    }
}

/// A running simulator.
pub struct SimHandle {
    addr: SocketAddr,
    state: Arc<ServerState>,
    shutdown: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl SimHandle {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT` (without `/v1`).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn model(&self) -> &str {
        &self.state.opts.model
    }

    pub fn describe(&self) -> String {
        self.state.backend.describe()
    }

    /// The simulator's own per-request records so far.
    pub fn records(&self) -> Vec<SimRecord> {
        self.state.records.lock().unwrap().clone()
    }

    /// Completion requests accepted so far (authorised and well-formed), finished or not: the
    /// event a test waits for instead of a fixed sleep ("every stream is in flight").
    pub fn accepted(&self) -> u64 {
        self.state.next_id.load(Ordering::Relaxed)
    }

    /// What the engine's scheduler did so far (engine mode; `None` in timing mode).
    pub fn scheduler_report(&self) -> Option<crate::engine::SchedulerReport> {
        self.state.backend.scheduler_report()
    }

    /// Stop accepting connections and wait for the server task.
    pub async fn shutdown(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        let _ = tokio::time::timeout(Duration::from_secs(5), &mut self.task).await;
        self.task.abort();
    }
}

/// Start the simulator on `addr` (use `127.0.0.1:0` for an OS-chosen port).
pub async fn start(
    opts: SimOptions,
    backend: Arc<dyn Backend>,
    addr: SocketAddr,
) -> io::Result<SimHandle> {
    let listener = TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    let started = Instant::now();
    let freeze = opts.faults.freeze_at_ms.map(|at| {
        let from = started + Duration::from_secs_f64(at.max(0.0) / 1000.0);
        (from, from + Duration::from_secs_f64(opts.faults.freeze_ms.max(0.0) / 1000.0))
    });
    let state = Arc::new(ServerState {
        fault_rng: Mutex::new(StdRng::seed_from_u64(opts.faults.seed)),
        opts,
        backend,
        started,
        next_id: AtomicU64::new(0),
        freeze,
        records: Mutex::new(Vec::new()),
        outcomes: Mutex::new(BTreeMap::new()),
    });
    let app = Router::new()
        .route("/health", get(|| async { "ok" }))
        .route("/v1/models", get(models))
        .route("/tokenize", post(tokenize))
        .route("/reset_prefix_cache", post(reset_prefix_cache))
        .route("/metrics", get(metrics))
        .route("/sim/requests", get(sim_requests))
        .route("/v1/chat/completions", post(|s, h, b| completions(s, h, b, Kind::Chat)))
        .route("/v1/completions", post(|s, h, b| completions(s, h, b, Kind::Completions)))
        .fallback(|| async {
            error_response(StatusCode::NOT_FOUND, "NotFoundError", "no such route on this server")
        })
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state.clone());
    let (tx, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        // Each chunk must leave when it is written: no Nagle delay on the simulator's side.
        let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = rx.await;
            })
            .await;
    });
    Ok(SimHandle { addr, state, shutdown: Some(tx), task })
}

fn error_response(status: StatusCode, kind: &str, message: &str) -> Response {
    let body = json!({"error": {"message": message, "type": kind, "code": status.as_u16()}});
    (status, [(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

async fn models(State(st): State<Arc<ServerState>>) -> Response {
    let mut model = json!({
        "id": st.opts.model,
        "object": "model",
        "owned_by": "infergate-sim",
        "created": 0,
        "root": st.opts.model,
    });
    if let Some(n) = st.backend.max_model_len() {
        model["max_model_len"] = json!(n);
    }
    let mut resp = axum::Json(json!({"object": "list", "data": [model]})).into_response();
    resp.headers_mut().insert(SIMULATOR_HEADER, HeaderValue::from_static("1"));
    resp
}

/// `POST /reset_prefix_cache`, as vLLM offers it: the engine forgets its cached prefixes.
async fn reset_prefix_cache(State(st): State<Arc<ServerState>>) -> Response {
    match st.backend.reset_prefix_cache() {
        Some(n) => axum::Json(json!({"reset": true, "blocks": n})).into_response(),
        None => error_response(
            StatusCode::NOT_FOUND,
            "NotFoundError",
            "this simulator mode has no prefix cache",
        ),
    }
}

async fn tokenize(State(st): State<Arc<ServerState>>, body: Bytes) -> Response {
    let Ok(v) = serde_json::from_slice::<Value>(&body) else {
        return error_response(StatusCode::BAD_REQUEST, "BadRequestError", "body is not JSON");
    };
    let tokens = if let Some(Value::Array(m)) = v.get("messages") {
        text::chat_prompt_tokens(m)
    } else if let Some(p) = v.get("prompt").or_else(|| v.get("content")).and_then(|p| p.as_str()) {
        text::tokenize(p)
    } else {
        return error_response(
            StatusCode::BAD_REQUEST,
            "BadRequestError",
            "expected `prompt` or `messages`",
        );
    };
    let mut out = json!({"count": tokens.len(), "tokens": tokens});
    if let Some(n) = st.backend.max_model_len() {
        out["max_model_len"] = json!(n);
    }
    axum::Json(out).into_response()
}

async fn metrics(State(st): State<Arc<ServerState>>) -> Response {
    let mut out = String::new();
    st.backend.render_metrics(&mut out);
    out.push_str("# HELP infergate_sim:requests_total Requests answered by the simulator, by outcome or injected fault.\n");
    out.push_str("# TYPE infergate_sim:requests_total counter\n");
    for (k, v) in st.outcomes.lock().unwrap().iter() {
        out.push_str(&format!("infergate_sim:requests_total{{outcome=\"{k}\"}} {v}\n"));
    }
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], out).into_response()
}

async fn sim_requests(State(st): State<Arc<ServerState>>) -> Response {
    let records = st.records.lock().unwrap().clone();
    axum::Json(records).into_response()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Chat,
    Completions,
}

/// A fault chosen for one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    Status(u16),
    Reset,
    ErrorEvent,
    ErrorObject,
    Malformed,
    Truncate,
    Empty,
}

impl Fault {
    fn name(self) -> String {
        match self {
            Fault::Status(s) => format!("http_{s}"),
            Fault::Reset => "reset".into(),
            Fault::ErrorEvent => "error_event".into(),
            Fault::ErrorObject => "error_object".into(),
            Fault::Malformed => "malformed".into(),
            Fault::Truncate => "truncate".into(),
            Fault::Empty => "empty".into(),
        }
    }
}

fn draw_faults(f: &FaultConfig, rng: &mut StdRng) -> (Option<Fault>, bool) {
    let r: f64 = rng.random();
    let stall = f.stall > 0.0 && rng.random::<f64>() < f.stall;
    let table = [
        (f.http_429, Fault::Status(429)),
        (f.http_500, Fault::Status(500)),
        (f.http_503, Fault::Status(503)),
        (f.reset, Fault::Reset),
        (f.error_event, Fault::ErrorEvent),
        (f.error_object, Fault::ErrorObject),
        (f.malformed, Fault::Malformed),
        (f.truncate, Fault::Truncate),
        (f.empty, Fault::Empty),
    ];
    let mut acc = 0.0;
    for (p, fault) in table {
        acc += p;
        if r < acc {
            return (Some(fault), stall);
        }
    }
    (None, stall)
}

/// Everything about a request the response needs.
struct Plan {
    kind: Kind,
    id: u64,
    created: u64,
    model: String,
    stream: bool,
    include_usage: bool,
    prompt_tokens: u32,
    seed: u64,
    /// Structured answer split into tokens (None: plain words).
    doc_tokens: Option<Vec<String>>,
    logprobs: Option<usize>,
    fault: Option<Fault>,
    stall: bool,
    /// Leading output tokens sent as `reasoning_content` (chat streams only).
    reasoning_tokens: u32,
    /// `usage.completion_tokens` reported as the tokens sent times (1 + this)
    /// (`sim.faults.usage_overcount`: a server that counts tokens it never sent).
    usage_overcount: f64,
}

impl Plan {
    fn token_text(&self, pos: u32) -> String {
        match &self.doc_tokens {
            Some(t) => t.get(pos as usize).cloned().unwrap_or_default(),
            None => format!(" {}", text::output_word(self.seed, pos)),
        }
    }

    fn object(&self) -> &'static str {
        match (self.kind, self.stream) {
            (Kind::Chat, true) => "chat.completion.chunk",
            (Kind::Chat, false) => "chat.completion",
            (Kind::Completions, _) => "text_completion",
        }
    }

    fn id_str(&self) -> String {
        match self.kind {
            Kind::Chat => format!("chatcmpl-sim-{}", self.id),
            Kind::Completions => format!("cmpl-sim-{}", self.id),
        }
    }

    fn logprobs_json(&self, from: u32, count: u32, drift: f64) -> Value {
        let Some(k) = self.logprobs else { return Value::Null };
        let entries: Vec<(String, Vec<(String, f64)>)> = (from..from + count)
            .map(|p| {
                let mut lps = text::logprobs_at(self.seed, p, k.max(1), drift);
                let chosen = self.token_text(p);
                lps[0].0 = chosen.clone();
                (chosen, lps)
            })
            .collect();
        match self.kind {
            Kind::Chat => json!({"content": entries.iter().map(|(tok, lps)| json!({
                "token": tok,
                "logprob": lps[0].1,
                "bytes": tok.as_bytes(),
                "top_logprobs": lps.iter().take(k).map(|(t, lp)| json!({"token": t, "logprob": lp, "bytes": t.as_bytes()})).collect::<Vec<_>>(),
            })).collect::<Vec<_>>()}),
            Kind::Completions => json!({
                "tokens": entries.iter().map(|(t, _)| t).collect::<Vec<_>>(),
                "token_logprobs": entries.iter().map(|(_, l)| l[0].1).collect::<Vec<_>>(),
                "top_logprobs": entries.iter().map(|(_, l)| l.iter().take(k).map(|(t, lp)| (t.clone(), json!(lp))).collect::<serde_json::Map<_, _>>()).collect::<Vec<_>>(),
            }),
        }
    }

    /// A content chunk without log-probs or usage, rendered directly (the hot path: one per
    /// token group of every stream).
    fn content_sse(&self, text: &str) -> Bytes {
        let text = serde_json::to_string(text).expect("strings serialize");
        let choice = match self.kind {
            Kind::Chat => format!(
                r#"{{"index":0,"delta":{{"content":{text}}},"logprobs":null,"finish_reason":null}}"#
            ),
            Kind::Completions => {
                format!(r#"{{"index":0,"text":{text},"logprobs":null,"finish_reason":null}}"#)
            }
        };
        Bytes::from(format!(
            "data: {{\"id\":\"{}\",\"object\":\"{}\",\"created\":{},\"model\":{},\"choices\":[{choice}]}}\n\n",
            self.id_str(),
            self.object(),
            self.created,
            serde_json::to_string(&self.model).expect("strings serialize"),
        ))
    }

    /// A chat chunk whose tokens are reasoning: `delta.reasoning_content` instead of content.
    fn reasoning_sse(&self, text: &str, logprobs: Value, usage: Option<Value>) -> Bytes {
        let mut c = self.chunk(Some(text), logprobs, None, usage, false);
        if let Some(delta) = c.pointer_mut("/choices/0/delta").and_then(Value::as_object_mut)
            && let Some(content) = delta.remove("content")
        {
            delta.insert("reasoning_content".into(), content);
        }
        sse(&c)
    }

    fn usage(&self, completion: u32) -> Value {
        let completion = (f64::from(completion) * (1.0 + self.usage_overcount)).round() as u32;
        json!({
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": completion,
            "total_tokens": self.prompt_tokens + completion,
        })
    }

    /// One streamed chunk.
    fn chunk(
        &self,
        content: Option<&str>,
        logprobs: Value,
        finish: Option<&str>,
        usage: Option<Value>,
        role: bool,
    ) -> Value {
        let choice = match self.kind {
            Kind::Chat => {
                let mut delta = serde_json::Map::new();
                if role {
                    delta.insert("role".into(), json!("assistant"));
                }
                if let Some(c) = content {
                    delta.insert("content".into(), json!(c));
                }
                json!({"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish})
            }
            Kind::Completions => {
                json!({"index": 0, "text": content.unwrap_or(""), "logprobs": logprobs, "finish_reason": finish})
            }
        };
        let mut v = json!({
            "id": self.id_str(),
            "object": self.object(),
            "created": self.created,
            "model": self.model,
            "choices": [choice],
        });
        if let Some(u) = usage {
            v["usage"] = u;
        }
        v
    }
}

fn sse(v: &Value) -> Bytes {
    Bytes::from(format!("data: {v}\n\n"))
}

async fn completions(
    State(st): State<Arc<ServerState>>,
    headers: HeaderMap,
    body: Bytes,
    kind: Kind,
) -> Response {
    let arrival = Instant::now();
    let checked = check_auth(&st, &headers).and_then(|()| {
        let req = parse_request(&st, &body)?;
        let prompt = prompt_tokens(&req, kind)?;
        let max_tokens = max_tokens(&st, &req, kind, prompt.len())?;
        Ok((req, prompt, max_tokens))
    });
    let (req, prompt, max_tokens) = match checked {
        Ok(c) => c,
        Err(refusal) => return refusal.respond(&st),
    };
    let flag = |k: &str| req.get(k).and_then(|v| v.as_bool()).unwrap_or(false);
    let include_usage =
        req.pointer("/stream_options/include_usage").and_then(|v| v.as_bool()).unwrap_or(false);
    let id = st.next_id.fetch_add(1, Ordering::Relaxed);
    let seed = text::prompt_seed(&prompt);
    let (fault, stall) = draw_faults(&st.opts.faults, &mut st.fault_rng.lock().unwrap());
    let plan = Plan {
        kind,
        id,
        created: chrono::Utc::now().timestamp() as u64,
        model: st.opts.model.clone(),
        stream: flag("stream"),
        include_usage,
        prompt_tokens: prompt.len() as u32,
        seed,
        logprobs: requested_logprobs(&req, kind),
        fault,
        stall,
        doc_tokens: structured_answer(&st, &req, seed, id),
        usage_overcount: st.opts.faults.usage_overcount,
        reasoning_tokens: if kind == Kind::Chat { st.backend.reasoning_tokens() } else { 0 },
    };
    let record = SimRecord {
        id,
        request_id: headers.get("x-request-id").and_then(|v| v.to_str().ok()).map(str::to_string),
        arrival_ms: st.ms_since_start(arrival),
        prompt_tokens: plan.prompt_tokens,
        fault: fault.map(Fault::name).or_else(|| stall.then(|| "stall".to_string())),
        prompt: st
            .opts
            .keep_prompts
            .then(|| req.get("messages").or_else(|| req.get("prompt")).cloned())
            .flatten(),
        ..SimRecord::default()
    };
    if let Some(Fault::Status(code)) = fault {
        return fault_response(&st, record, code);
    }
    // A frozen server takes the request in only when it resumes; otherwise the engine's clock
    // for the request starts at its arrival (the handler's own work is part of its latency).
    let arrival = if st.wait_freeze().await { Instant::now() } else { arrival };
    let gen_req = GenRequest {
        id,
        prompt,
        max_tokens,
        natural_len: plan.doc_tokens.as_ref().map(|t| t.len() as u32),
        ignore_eos: flag("ignore_eos"),
        priority: req.get("priority").and_then(|v| v.as_i64()).unwrap_or(0),
        arrival,
        request_id: record.request_id.clone(),
    };
    let events = if fault == Some(Fault::Empty) { None } else { Some(st.backend.submit(gen_req)) };
    respond(st, plan, record, events).await
}

/// Why a request is refused before it reaches the engine.
struct Refusal {
    status: StatusCode,
    kind: &'static str,
    message: String,
}

impl Refusal {
    fn bad_request(message: impl Into<String>) -> Refusal {
        Refusal {
            status: StatusCode::BAD_REQUEST,
            kind: "BadRequestError",
            message: message.into(),
        }
    }

    /// The error response, counted by its status.
    fn respond(self, st: &ServerState) -> Response {
        st.count(&format!("http_{}", self.status.as_u16()));
        error_response(self.status, self.kind, &self.message)
    }
}

/// With an API key configured, requests must carry it.
fn check_auth(st: &ServerState, headers: &HeaderMap) -> Result<(), Refusal> {
    let Some(key) = &st.opts.api_key else { return Ok(()) };
    let expected = format!("Bearer {key}");
    let got = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    if got != Some(expected.as_str()) {
        return Err(Refusal {
            status: StatusCode::UNAUTHORIZED,
            kind: "AuthenticationError",
            message: "invalid or missing API key".into(),
        });
    }
    Ok(())
}

/// The body as a JSON object naming this server's model (or none).
fn parse_request(st: &ServerState, body: &[u8]) -> Result<Value, Refusal> {
    let req: Value = match serde_json::from_slice(body) {
        Ok(v @ Value::Object(_)) => v,
        _ => return Err(Refusal::bad_request("the body must be a JSON object")),
    };
    if let Some(m) = req.get("model").and_then(|m| m.as_str()) {
        if m != st.opts.model {
            return Err(Refusal {
                status: StatusCode::NOT_FOUND,
                kind: "NotFoundError",
                message: format!("The model `{m}` does not exist."),
            });
        }
    }
    Ok(req)
}

/// The prompt's tokens: chat messages with their template markers, or the prompt text.
fn prompt_tokens(req: &Value, kind: Kind) -> Result<Vec<u32>, Refusal> {
    match kind {
        Kind::Chat => match req.get("messages") {
            Some(Value::Array(m)) if !m.is_empty() => Ok(text::chat_prompt_tokens(m)),
            _ => Err(Refusal::bad_request("`messages` must be a non-empty array")),
        },
        Kind::Completions => match req.get("prompt") {
            Some(Value::String(p)) => Ok(text::tokenize(p)),
            _ => Err(Refusal::bad_request("`prompt` must be a string")),
        },
    }
}

/// The largest request body the simulator reads (128 MiB). An engine reads a request whole
/// before it refuses a prompt beyond its context (400), so the simulator does too: with the
/// server library's 2 MB default it answered a 100 MB prompt with 413 before reading it and
/// closed the connection, which a client still uploading saw as a reset before any response
/// (`connect_error`) or as the 413, by timing. Above this limit: 413.
pub(crate) const MAX_BODY_BYTES: usize = 128 << 20;

/// The context a backend without an engine model (timing mode) accepts: a request asking for
/// more is refused with 400, as an engine refuses one beyond its `max_model_len`, so no request
/// makes the simulator plan an unbounded output.
pub const TIMING_MAX_MODEL_LEN: u32 = 131_072;

/// Output tokens to generate at most: as requested (`max_completion_tokens` or `max_tokens`),
/// else the endpoint's default; prompt and output must fit the context (the engine's
/// `max_model_len`, else `TIMING_MAX_MODEL_LEN`).
fn max_tokens(
    st: &ServerState,
    req: &Value,
    kind: Kind,
    prompt_len: usize,
) -> Result<u32, Refusal> {
    let max_len = st.backend.max_model_len();
    if st.opts.only_max_completion_tokens && req.get("max_tokens").is_some() {
        return Err(Refusal::bad_request(
            "Unsupported parameter: 'max_tokens' is not supported with this model. Use \
             'max_completion_tokens' instead.",
        ));
    }
    let requested =
        req.get("max_completion_tokens").or_else(|| req.get("max_tokens")).and_then(|v| v.as_u64());
    let max_tokens = match (requested, kind) {
        (Some(0), _) => return Err(Refusal::bad_request("max_tokens must be at least 1")),
        (Some(n), _) => n.min(u32::MAX as u64) as u32,
        (None, Kind::Completions) => 16,
        (None, Kind::Chat) => max_len.map_or(1024, |m| m.saturating_sub(prompt_len as u32).max(1)),
    };
    let m = max_len.unwrap_or(TIMING_MAX_MODEL_LEN);
    let total = prompt_len as u64 + max_tokens as u64;
    if total > m as u64 {
        return Err(Refusal::bad_request(format!(
            "This model's maximum context length is {m} tokens. However, you requested {total} tokens ({prompt_len} in the messages, {max_tokens} in the completion)."
        )));
    }
    Ok(max_tokens)
}

/// Alternatives per position when the request asks for log-probs.
fn requested_logprobs(req: &Value, kind: Kind) -> Option<usize> {
    match kind {
        Kind::Chat => {
            req.get("logprobs").and_then(|v| v.as_bool()).filter(|b| *b).map(|_| {
                req.get("top_logprobs").and_then(|v| v.as_u64()).unwrap_or(0).max(1) as usize
            })
        }
        Kind::Completions => {
            req.get("logprobs").and_then(|v| v.as_u64()).map(|n| n.max(1) as usize)
        }
    }
}

/// For a `response_format` request, the JSON document answered, split into tokens (corrupted
/// for a share of requests when the server is told to).
fn structured_answer(st: &ServerState, req: &Value, seed: u64, id: u64) -> Option<Vec<String>> {
    let rf = req.get("response_format")?;
    let schema = match rf.get("type").and_then(|t| t.as_str()) {
        Some("json_schema") => {
            rf.pointer("/json_schema/schema").cloned().unwrap_or(json!({"type": "object"}))
        }
        Some("json_object") => {
            json!({"type": "object", "properties": {"answer": {"type": "string"}}})
        }
        _ => return None,
    };
    let doc = serde_json::to_string(&text::document_for_schema(&schema, seed)).unwrap_or_default();
    let corrupt = st.opts.corruption_rate > 0.0
        && (text::fnv1a(&id.to_le_bytes()) % 1_000_000) as f64 / 1_000_000.0
            < st.opts.corruption_rate;
    let doc = if corrupt { text::corrupt(&doc, id) } else { doc };
    Some(text::split_tokens(&doc))
}

/// A simulated HTTP error answered before the engine sees the request.
fn fault_response(st: &ServerState, mut record: SimRecord, code: u16) -> Response {
    st.count(&format!("http_{code}"));
    record.finish_reason = None;
    st.records.lock().unwrap().push(record);
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut resp = error_response(status, "SimulatedFault", &format!("simulated HTTP {code}"));
    if code == 429 || code == 503 {
        resp.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    resp
}

async fn respond(
    st: Arc<ServerState>,
    plan: Plan,
    mut record: SimRecord,
    mut events: Option<mpsc::UnboundedReceiver<GenEvent>>,
) -> Response {
    // Wait for the first scheduling so the queue time can go in a header.
    let mut pending_event = None;
    if let Some(rx) = events.as_mut() {
        match rx.recv().await {
            Some(GenEvent::Scheduled { queue }) => {
                record.queue_ms = Some(queue.as_secs_f64() * 1000.0)
            }
            Some(GenEvent::Failed { status, message }) => {
                st.count(&format!("http_{status}"));
                record.fault = Some(format!("engine: {message}"));
                st.records.lock().unwrap().push(record);
                let status =
                    StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                return error_response(status, "EngineError", &message);
            }
            Some(other) => pending_event = Some(other),
            None => {}
        }
    }
    let queue_header =
        record.queue_ms.map(|q| HeaderValue::from_str(&format!("{q:.3}")).expect("number"));
    let (tx, rx) = mpsc::channel::<Result<Bytes, io::Error>>(64);
    let stream = plan.stream;
    let task_state = st.clone();
    tokio::spawn(async move {
        produce(task_state, plan, record, events, pending_event, tx).await;
    });
    let body = Body::from_stream(futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    }));
    let mut resp = Response::new(body);
    let content_type = if stream { "text/event-stream" } else { "application/json" };
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Some(q) = queue_header {
        resp.headers_mut().insert(QUEUE_TIME_HEADER, q);
    }
    resp
}

/// What the token loop of [`produce`] delivered.
struct Delivered {
    tokens: u32,
    /// The whole answer of a non-streamed request, and its log-prob entries.
    text: String,
    logprobs: Vec<Value>,
    finish: Option<FinishReason>,
    failure: Option<String>,
    disconnected: bool,
}

type BodySender = mpsc::Sender<Result<Bytes, io::Error>>;

/// Sends one piece of the body; `false` when the client is gone.
async fn send(tx: &BodySender, bytes: Bytes) -> bool {
    tx.send(Ok(bytes)).await.is_ok()
}

/// Whether the request's usage goes into the stream at all.
fn includes_usage(st: &ServerState, plan: &Plan) -> bool {
    plan.include_usage && st.opts.usage != UsageMode::None
}

/// Generates the response body: streamed chunks or one JSON document.
async fn produce(
    st: Arc<ServerState>,
    plan: Plan,
    record: SimRecord,
    mut events: Option<mpsc::UnboundedReceiver<GenEvent>>,
    pending: Option<GenEvent>,
    tx: BodySender,
) {
    let mut out = Delivered {
        tokens: 0,
        text: String::new(),
        logprobs: Vec::new(),
        finish: None,
        failure: None,
        disconnected: false,
    };
    if plan.stream && !send(&tx, sse(&plan.chunk(Some(""), Value::Null, None, None, true))).await {
        out.disconnected = true;
    }
    let record = match events.as_mut() {
        Some(rx) => match deliver_tokens(&st, &plan, record, rx, pending, &tx, &mut out).await {
            Some(record) => record,
            None => return, // a mid-stream fault ended it; dropping `events` frees the request
        },
        None => {
            out.finish = Some(FinishReason::Stop); // injected empty answer
            record
        }
    };
    conclude(&st, &plan, record, &tx, out).await;
}

/// Streams (or collects) the engine's tokens until it finishes or fails. `None` when a
/// mid-stream fault ended the request (its record is kept).
async fn deliver_tokens(
    st: &ServerState,
    plan: &Plan,
    mut record: SimRecord,
    rx: &mut mpsc::UnboundedReceiver<GenEvent>,
    mut pending: Option<GenEvent>,
    tx: &BodySender,
    out: &mut Delivered,
) -> Option<SimRecord> {
    let drift = st.opts.logprob_drift;
    let usage_mode = st.opts.usage;
    let include_usage = includes_usage(st, plan);
    // Mid-stream faults and stalls strike right after the first content chunk.
    let fault_armed = plan.fault.filter(|f| !matches!(f, Fault::Empty | Fault::Status(_)));
    let mut stall_armed = plan.stall;
    while !out.disconnected {
        let ev = match pending.take() {
            Some(e) => Some(e),
            // A client that closes the stream is noticed at once, as an engine's API server
            // does, not at the next token.
            None => tokio::select! {
                ev = rx.recv() => ev,
                () = tx.closed() => {
                    out.disconnected = true;
                    st.backend.client_gone(plan.id);
                    break;
                }
            },
        };
        match ev {
            Some(GenEvent::Scheduled { .. }) => continue,
            Some(GenEvent::Tokens { count, due }) => {
                st.wait_freeze().await;
                let delivered = out.tokens;
                let text: String =
                    (delivered..delivered + count).map(|p| plan.token_text(p)).collect();
                let lp = plan.logprobs_json(delivered, count, drift);
                if st.opts.keep_prompts {
                    record.answer.get_or_insert_with(String::new).push_str(&text);
                }
                let now = Instant::now();
                if plan.stream {
                    let usage = (include_usage && usage_mode == UsageMode::Every)
                        .then(|| plan.usage(delivered + count));
                    let bytes = if delivered < plan.reasoning_tokens {
                        plan.reasoning_sse(&text, lp, usage)
                    } else if usage.is_none() && lp.is_null() {
                        plan.content_sse(&text)
                    } else {
                        sse(&plan.chunk(Some(&text), lp, None, usage, false))
                    };
                    if !send(tx, bytes).await {
                        out.disconnected = true;
                        st.backend.client_gone(plan.id);
                    }
                } else {
                    out.text.push_str(&text);
                    if let Value::Object(o) = lp {
                        out.logprobs.push(Value::Object(o));
                    }
                }
                out.tokens += count;
                record.chunks += 1;
                record.first_chunk_ms.get_or_insert(st.ms_since_start(now));
                record.last_chunk_ms = Some(st.ms_since_start(now));
                if let Some(due) = due {
                    let late = now.into_std().saturating_duration_since(due).as_secs_f64() * 1e3;
                    record.late_ms_max = Some(record.late_ms_max.map_or(late, |m| m.max(late)));
                    record.late_ms_first.get_or_insert(late);
                    record.chunk_due_ms.push(st.ms_since_start(Instant::from_std(due)));
                    record.chunk_ms.push(st.ms_since_start(now));
                }
                if stall_armed {
                    stall_armed = false;
                    tokio::time::sleep(Duration::from_secs_f64(st.opts.faults.stall_ms / 1000.0))
                        .await;
                }
                if let Some(f) = fault_armed {
                    strike(f, plan, tx, &mut out.disconnected).await;
                    record.output_tokens = out.tokens;
                    break_with(st, record, Some(f), out.disconnected);
                    return None;
                }
            }
            Some(GenEvent::Finished { reason }) => {
                out.finish = Some(reason);
                break;
            }
            Some(GenEvent::Failed { message, .. }) => {
                out.failure = Some(message);
                break;
            }
            None => {
                out.failure = Some("the engine dropped the request".into());
                break;
            }
        }
    }
    Some(record)
}

/// Ends the body after the token loop: an error event or object, else the final chunk (usage,
/// `[DONE]`) or the whole JSON answer; then the request's record.
async fn conclude(
    st: &ServerState,
    plan: &Plan,
    mut record: SimRecord,
    tx: &BodySender,
    mut out: Delivered,
) {
    let usage_mode = st.opts.usage;
    let include_usage = includes_usage(st, plan);
    let delivered = out.tokens;
    record.output_tokens = delivered;
    if out.disconnected {
        record.disconnected = true;
        st.count("disconnected");
        st.records.lock().unwrap().push(record);
        return;
    }
    if let Some(message) = out.failure {
        let err = json!({"error": {"message": message, "type": "EngineError", "code": 500}});
        let bytes =
            if plan.stream { format!("event: error\ndata: {err}\n\n") } else { err.to_string() };
        let _ = tx.send(Ok(Bytes::from(bytes))).await;
        record.fault.get_or_insert_with(|| "engine_error".into());
        st.count("engine_error");
        st.records.lock().unwrap().push(record);
        return;
    }
    let reason = out.finish.unwrap_or(FinishReason::Stop).as_str();
    record.finish_reason = Some(reason.to_string());
    let mut pieces = Vec::new();
    if plan.stream {
        let last_usage = (include_usage
            && matches!(usage_mode, UsageMode::LastChunk | UsageMode::Every))
        .then(|| plan.usage(delivered));
        pieces.push(sse(&plan.chunk(None, Value::Null, Some(reason), last_usage, false)));
        if include_usage && usage_mode == UsageMode::Final {
            let mut u = plan.chunk(None, Value::Null, None, Some(plan.usage(delivered)), false);
            u["choices"] = json!([]);
            pieces.push(sse(&u));
        }
        pieces.push(Bytes::from_static(b"data: [DONE]\n\n"));
    } else {
        let logprobs = if plan.logprobs.is_some() {
            merge_logprobs(plan.kind, &out.logprobs)
        } else {
            Value::Null
        };
        let choice = match plan.kind {
            Kind::Chat => {
                json!({"index": 0, "message": {"role": "assistant", "content": out.text}, "logprobs": logprobs, "finish_reason": reason})
            }
            Kind::Completions => {
                json!({"index": 0, "text": out.text, "logprobs": logprobs, "finish_reason": reason})
            }
        };
        let mut body = json!({
            "id": plan.id_str(),
            "object": plan.object(),
            "created": plan.created,
            "model": plan.model,
            "choices": [choice],
        });
        if usage_mode != UsageMode::None {
            body["usage"] = plan.usage(delivered);
        }
        pieces.push(Bytes::from(body.to_string()));
    }
    for piece in pieces {
        if !send(tx, piece).await {
            out.disconnected = true;
        }
    }
    record.disconnected = out.disconnected;
    st.count(match plan.fault {
        Some(Fault::Empty) => "empty",
        _ if out.disconnected => "disconnected",
        _ => "ok",
    });
    st.records.lock().unwrap().push(record);
}

fn break_with(st: &ServerState, mut record: SimRecord, fault: Option<Fault>, disconnected: bool) {
    record.disconnected = disconnected;
    if let Some(f) = fault {
        st.count(&f.name());
    }
    st.records.lock().unwrap().push(record);
}

/// Carry out a mid-stream fault.
async fn strike(
    f: Fault,
    plan: &Plan,
    tx: &mpsc::Sender<Result<Bytes, io::Error>>,
    disconnected: &mut bool,
) {
    let err = json!({"error": {"message": "simulated engine failure", "type": "InternalServerError", "code": 500}});
    let bytes = match (f, plan.stream) {
        (Fault::Reset, _) => {
            // An error item makes the server abort the connection mid-body.
            let _ = tx
                .send(Err(io::Error::new(io::ErrorKind::ConnectionReset, "simulated reset")))
                .await;
            return;
        }
        (Fault::Truncate, _) => return, // end the body cleanly, without finish_reason or [DONE]
        (Fault::ErrorEvent, true) => format!("event: error\ndata: {err}\n\n"),
        (Fault::ErrorObject, true) => format!("data: {err}\n\n"),
        (Fault::ErrorEvent | Fault::ErrorObject, false) => err.to_string(),
        (Fault::Malformed, true) => {
            "data: {\"choices\": [{\"index\": 0, \"delta\": {\"content\": \"x\"\n\n".to_string()
        }
        (Fault::Malformed, false) => "<html>502 Bad Gateway</html>".to_string(),
        (Fault::Empty | Fault::Status(_), _) => return,
    };
    if tx.send(Ok(Bytes::from(bytes))).await.is_err() {
        *disconnected = true;
    }
}

fn merge_logprobs(kind: Kind, parts: &[Value]) -> Value {
    match kind {
        Kind::Chat => {
            let content: Vec<Value> = parts
                .iter()
                .flat_map(|p| {
                    p.get("content").and_then(|c| c.as_array()).cloned().unwrap_or_default()
                })
                .collect();
            json!({"content": content})
        }
        Kind::Completions => {
            let mut merged = json!({"tokens": [], "token_logprobs": [], "top_logprobs": []});
            for p in parts {
                for key in ["tokens", "token_logprobs", "top_logprobs"] {
                    if let (Some(dst), Some(src)) =
                        (merged[key].as_array_mut(), p.get(key).and_then(|v| v.as_array()))
                    {
                        dst.extend(src.iter().cloned());
                    }
                }
            }
            merged
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(kind: Kind) -> Plan {
        Plan {
            kind,
            id: 3,
            created: 17,
            model: "sim/x".into(),
            stream: true,
            include_usage: false,
            prompt_tokens: 4,
            seed: 1,
            doc_tokens: None,
            logprobs: None,
            fault: None,
            stall: false,
            usage_overcount: 0.0,
            reasoning_tokens: 0,
        }
    }

    #[test]
    fn fast_content_chunk_equals_the_general_one() {
        for kind in [Kind::Chat, Kind::Completions] {
            let p = plan(kind);
            let text = " a \"quoted\" \\ word\n";
            let fast = p.content_sse(text);
            let general = sse(&p.chunk(Some(text), Value::Null, None, None, false));
            let a: Value = serde_json::from_slice(&fast[6..]).unwrap();
            let b: Value = serde_json::from_slice(&general[6..]).unwrap();
            assert_eq!(a, b);
            assert!(fast.ends_with(b"\n\n"));
        }
    }
}
