//! A measured request's body (`request_body`): the prompt of a work item with the sampling
//! every request carries (`Sampling`), as the endpoint and the target's `max_tokens` field ask.

use super::*;

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
