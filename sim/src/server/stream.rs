//! The response: tokens streamed as SSE (or gathered into one body) as the backend makes them,
//! the usage and log-probs, a fault struck at its point, the record of what was delivered.

use super::*;

pub(super) fn sse(v: &Value) -> Bytes {
    Bytes::from(format!("data: {v}\n\n"))
}

/// A simulated HTTP error answered before the engine sees the request.
pub(super) fn fault_response(st: &ServerState, mut record: SimRecord, code: u16) -> Response {
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

pub(super) async fn respond(
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
pub(super) struct Delivered {
    pub(super) tokens: u32,
    /// The whole answer of a non-streamed request, and its log-prob entries.
    pub(super) text: String,
    pub(super) logprobs: Vec<Value>,
    pub(super) finish: Option<FinishReason>,
    pub(super) failure: Option<String>,
    pub(super) disconnected: bool,
}

pub(super) type BodySender = mpsc::Sender<Result<Bytes, io::Error>>;

/// Sends one piece of the body; `false` when the client is gone.
pub(super) async fn send(tx: &BodySender, bytes: Bytes) -> bool {
    tx.send(Ok(bytes)).await.is_ok()
}

/// Whether the request's usage goes into the stream at all.
pub(super) fn includes_usage(st: &ServerState, plan: &Plan) -> bool {
    plan.include_usage && st.opts.usage != UsageMode::None
}

/// Generates the response body: streamed chunks or one JSON document.
pub(super) async fn produce(
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
pub(super) async fn deliver_tokens(
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
pub(super) async fn conclude(
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

pub(super) fn break_with(
    st: &ServerState,
    mut record: SimRecord,
    fault: Option<Fault>,
    disconnected: bool,
) {
    record.disconnected = disconnected;
    if let Some(f) = fault {
        st.count(&f.name());
    }
    st.records.lock().unwrap().push(record);
}

/// Carry out a mid-stream fault.
pub(super) async fn strike(
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

pub(super) fn merge_logprobs(kind: Kind, parts: &[Value]) -> Value {
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
