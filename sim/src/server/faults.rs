//! The faults a request may be given (`[sim.faults]`: statuses, a stalled or dropped stream,
//! a broken body) and the plan of one response: what it sends, when and how it ends.

use super::*;

/// A fault chosen for one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Fault {
    Status(u16),
    Reset,
    ErrorEvent,
    ErrorObject,
    Malformed,
    Truncate,
    Empty,
}

impl Fault {
    pub(super) fn name(self) -> String {
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

pub(super) fn draw_faults(f: &FaultConfig, rng: &mut StdRng) -> (Option<Fault>, bool) {
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
pub(super) struct Plan {
    pub(super) kind: Kind,
    pub(super) id: u64,
    pub(super) created: u64,
    pub(super) model: String,
    pub(super) stream: bool,
    pub(super) include_usage: bool,
    pub(super) prompt_tokens: u32,
    pub(super) seed: u64,
    /// Structured answer split into tokens (None: plain words).
    pub(super) doc_tokens: Option<Vec<String>>,
    pub(super) logprobs: Option<usize>,
    pub(super) fault: Option<Fault>,
    pub(super) stall: bool,
    /// Leading output tokens sent as `reasoning_content` (chat streams only).
    pub(super) reasoning_tokens: u32,
    /// `usage.completion_tokens` reported as the tokens sent times (1 + this)
    /// (`sim.faults.usage_overcount`: a server that counts tokens it never sent).
    pub(super) usage_overcount: f64,
}

impl Plan {
    pub(super) fn token_text(&self, pos: u32) -> String {
        match &self.doc_tokens {
            Some(t) => t.get(pos as usize).cloned().unwrap_or_default(),
            None => format!(" {}", text::output_word(self.seed, pos)),
        }
    }

    pub(super) fn object(&self) -> &'static str {
        match (self.kind, self.stream) {
            (Kind::Chat, true) => "chat.completion.chunk",
            (Kind::Chat, false) => "chat.completion",
            (Kind::Completions, _) => "text_completion",
        }
    }

    pub(super) fn id_str(&self) -> String {
        match self.kind {
            Kind::Chat => format!("chatcmpl-sim-{}", self.id),
            Kind::Completions => format!("cmpl-sim-{}", self.id),
        }
    }

    pub(super) fn logprobs_json(&self, from: u32, count: u32, drift: f64) -> Value {
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
    pub(super) fn content_sse(&self, text: &str) -> Bytes {
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
    pub(super) fn reasoning_sse(&self, text: &str, logprobs: Value, usage: Option<Value>) -> Bytes {
        let mut c = self.chunk(Some(text), logprobs, None, usage, false);
        if let Some(delta) = c.pointer_mut("/choices/0/delta").and_then(Value::as_object_mut)
            && let Some(content) = delta.remove("content")
        {
            delta.insert("reasoning_content".into(), content);
        }
        sse(&c)
    }

    pub(super) fn usage(&self, completion: u32) -> Value {
        let completion = (f64::from(completion) * (1.0 + self.usage_overcount)).round() as u32;
        json!({
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": completion,
            "total_tokens": self.prompt_tokens + completion,
        })
    }

    /// One streamed chunk.
    pub(super) fn chunk(
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
