//! The simulator's OpenAI-compatible HTTP server.
//!
//! Endpoints: `POST /v1/chat/completions`, `POST /v1/completions` (streamed and not), `GET
//! /v1/models`, `GET /health`, `POST /tokenize`, `GET /metrics` (Prometheus text, with vLLM's
//! `vllm:cache_config_info`), `GET /server_info?config_format=json` (the engine config in
//! effect, as vLLM shows its own), and `GET /sim/requests` (the simulator's own per-request record, for cross-checks).
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
use axum::extract::{Query, State};
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

use crate::backend::{Backend, FinishReason, GenEvent, GenRequest};
use crate::text;
use infergate_model::config::{FaultConfig, UsageMode};

use infergate_model::wire::QUEUE_TIME_HEADER;
use infergate_model::wire::SIMULATOR_HEADER;

mod faults;
mod request;
mod stream;

use faults::*;
/// The longest prompt plus output the timing mode accepts (the engine mode: its `max_model_len`).
pub use request::TIMING_MAX_MODEL_LEN;
use request::*;
use stream::*;

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
        .route("/server_info", get(server_info))
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

/// `GET /server_info`, as vLLM serves it: the engine config in effect (`config_format=json`,
/// else the same as one line of text under `vllm_config`); 404 for the timing mode, which has
/// no engine config.
async fn server_info(
    State(st): State<Arc<ServerState>>,
    Query(q): Query<BTreeMap<String, String>>,
) -> Response {
    match st.backend.server_info() {
        Some(info) if q.get("config_format").map(String::as_str) == Some("json") => {
            axum::Json(info).into_response()
        }
        Some(info) => {
            let text = info.get("vllm_config").map(Value::to_string).unwrap_or_default();
            axum::Json(json!({"vllm_config": text})).into_response()
        }
        None => error_response(
            StatusCode::NOT_FOUND,
            "NotFoundError",
            "this simulator mode runs no engine config",
        ),
    }
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
