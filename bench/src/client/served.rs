//! The served configuration read back (`Client::read_served`): the engine is asked what it
//! runs where it says it, each answer read by `infergate_model::served::parse`.
//!
//! The engines are told apart by what answers: llama.cpp's `GET /props`, else SGLang's
//! `GET /get_server_info`, else TGI's `GET /info`, else vLLM's (and the simulator's)
//! `GET /server_info?config_format=json`, `/metrics` (`vllm:cache_config_info`), `/v1/models`
//! (`max_model_len`, from the preflight's answer) and `/version`. Each request goes out with the
//! target's headers and key, is bounded in time ([`SERVED_TIMEOUT`] each, within the client's
//! own timeouts, and [`SERVED_READING_TIMEOUT`] all together) and in size ([`SERVED_BODY_BYTES`]); an answer that is absent, refused, late or
//! malformed reveals nothing and is said so, never guessed.

use super::*;
use infergate_model::served::ServedReading;
use infergate_model::served::parse::{self, Parsed};

/// The longest one request of the served configuration may take.
pub const SERVED_TIMEOUT: Duration = Duration::from_secs(5);

/// The longest one reading of the served configuration (every request of it) may take.
pub const SERVED_READING_TIMEOUT: Duration = Duration::from_secs(10);

/// What is read of one answer at most (a `/metrics` page is the largest).
pub const SERVED_BODY_BYTES: usize = 1024 * 1024;

/// What one request of the served configuration got.
enum Answer {
    /// A 200 answer's body (up to [`SERVED_BODY_BYTES`]).
    Body(String),
    /// Why nothing was read: a status, no answer in time, no connection.
    Nothing(String),
}

impl Client {
    /// GET `root` + `path` for the served configuration, bounded in time and size.
    async fn served_get(&self, root: &str, path: &str, until: Instant) -> Answer {
        let url = format!("{root}{path}");
        let deadline = (Instant::now() + SERVED_TIMEOUT.min(self.opts.request_timeout)).min(until);
        let mut headers = self.headers.clone();
        headers.remove(CONTENT_TYPE);
        let send = self.http.get(&url).headers(headers).send();
        let resp = match tokio::time::timeout_at(deadline, send).await {
            Err(_) => return Answer::Nothing("no answer in time".into()),
            Ok(Err(e)) => return Answer::Nothing(format!("unreachable ({})", self.err_text(&e))),
            Ok(Ok(r)) => r,
        };
        let status = resp.status().as_u16();
        if status != 200 {
            return Answer::Nothing(format!("answered {status}"));
        }
        match self.read_within(resp, SERVED_BODY_BYTES, deadline).await {
            Ok(text) => Answer::Body(text),
            Err((_, got)) => Answer::Nothing(format!("the answer stopped after {got} bytes")),
        }
    }

    /// GET a JSON answer: the JSON, or why there is none.
    async fn served_json(&self, root: &str, path: &str, until: Instant) -> Result<Value, String> {
        match self.served_get(root, path, until).await {
            Answer::Body(text) => serde_json::from_str(&text)
                .map_err(|_| format!("GET {path}: the answer is not JSON")),
            Answer::Nothing(why) => Err(format!("GET {path}: {why}")),
        }
    }

    /// Ask the engine at `root` what it runs. `models` is the preflight's `/v1/models` answer
    /// and `model` the model measured (vLLM's `max_model_len` is read from it).
    pub async fn read_served(
        &self,
        root: &str,
        models: Option<&Value>,
        model: &str,
    ) -> ServedReading {
        let until = Instant::now() + SERVED_READING_TIMEOUT;
        let mut tried = Vec::new();
        // llama.cpp
        match self.served_json(root, "/props", until).await {
            Ok(body) if body.get("total_slots").is_some() => {
                return self.reading("llama.cpp", vec![parse::llamacpp_props(&body)]);
            }
            Ok(_) => tried.push("GET /props: no total_slots (not llama.cpp)".to_string()),
            Err(why) => tried.push(why),
        }
        // SGLang
        match self.served_json(root, "/get_server_info", until).await {
            Ok(body) if body.get("max_running_requests").is_some() => {
                return self.reading("SGLang", vec![parse::sglang_server_info(&body)]);
            }
            Ok(_) => {
                tried.push("GET /get_server_info: no max_running_requests (not SGLang)".into())
            }
            Err(why) => tried.push(why),
        }
        // Text Generation Inference
        match self.served_json(root, "/info", until).await {
            Ok(body) if body.get("max_concurrent_requests").is_some() => {
                return self.reading("TGI", vec![parse::tgi_info(&body)]);
            }
            Ok(_) => tried.push("GET /info: no max_concurrent_requests (not TGI)".into()),
            Err(why) => tried.push(why),
        }
        // vLLM and the simulator
        let mut parts = Vec::new();
        match self.served_json(root, "/server_info?config_format=json", until).await {
            Ok(body) => parts.push(parse::vllm_server_info(&body)),
            Err(why) => tried.push(why),
        }
        match self.served_get(root, "/metrics", until).await {
            Answer::Body(text) => parts.push(parse::vllm_cache_config(&text)),
            Answer::Nothing(why) => tried.push(format!("GET /metrics: {why}")),
        }
        if let Some(m) = models {
            parts.push(parse::vllm_models(m, model));
        }
        match self.served_json(root, "/version", until).await {
            Ok(body) => parts.push(parse::vllm_version(&body)),
            Err(why) => tried.push(why),
        }
        let vllm = parts
            .iter()
            .any(|p| p.values.iter().any(|v| matches!(v.key.section(), "scheduler" | "vllm")));
        let mut reading = self.reading(if vllm { "vLLM" } else { "" }, parts);
        if !vllm {
            reading.engine = None;
            let tried = tried.into_iter().map(|n| self.redactor.redact(&n));
            reading.not_revealed.splice(0..0, tried);
        }
        reading
    }

    /// The reading of `engine` from its answers, every text with any secret removed.
    fn reading(&self, engine: &str, parts: Vec<Parsed>) -> ServedReading {
        let mut r = ServedReading { engine: Some(engine.to_string()), ..Default::default() };
        for p in parts {
            r.extend(p.values);
            r.not_revealed.extend(p.not_revealed);
        }
        for v in &mut r.values {
            if let Value::String(s) = &v.value {
                v.value = Value::String(self.redactor.redact(s));
            }
        }
        r.not_revealed.iter_mut().for_each(|n| *n = self.redactor.redact(n));
        r
    }
}
