//! A request read and admitted: the API key, the body, the prompt's tokens, `max_tokens`, the
//! log-probs asked for and a structured answer; a refusal is the OpenAI error it answers with.

use super::*;

/// Why a request is refused before it reaches the engine.
pub(super) struct Refusal {
    pub(super) status: StatusCode,
    pub(super) kind: &'static str,
    pub(super) message: String,
}

impl Refusal {
    pub(super) fn bad_request(message: impl Into<String>) -> Refusal {
        Refusal {
            status: StatusCode::BAD_REQUEST,
            kind: "BadRequestError",
            message: message.into(),
        }
    }

    /// The error response, counted by its status.
    pub(super) fn respond(self, st: &ServerState) -> Response {
        st.count(&format!("http_{}", self.status.as_u16()));
        error_response(self.status, self.kind, &self.message)
    }
}

/// With an API key configured, requests must carry it.
pub(super) fn check_auth(st: &ServerState, headers: &HeaderMap) -> Result<(), Refusal> {
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
pub(super) fn parse_request(st: &ServerState, body: &[u8]) -> Result<Value, Refusal> {
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
pub(super) fn prompt_tokens(req: &Value, kind: Kind) -> Result<Vec<u32>, Refusal> {
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
pub(super) fn max_tokens(
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
pub(super) fn requested_logprobs(req: &Value, kind: Kind) -> Option<usize> {
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
pub(super) fn structured_answer(
    st: &ServerState,
    req: &Value,
    seed: u64,
    id: u64,
) -> Option<Vec<String>> {
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
