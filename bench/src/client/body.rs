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
pub(crate) fn request_body(
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
    #[test]
    fn tools_and_tool_choice_pass_through_to_chat_requests_only() {
        let cfg = infergate_model::config::WorkloadConfig {
            shuffle: false,
            ..infergate_model::config::WorkloadConfig::default()
        };
        let line = r#"{"messages":[{"role":"user","content":"weather?"}],"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}],"tool_choice":"auto"}"#;
        let w = infergate_model::workload::Workload::from_jsonl(
            std::path::Path::new("d.jsonl"),
            line,
            &cfg,
        )
        .unwrap();
        let item = &w.items[0];
        let sampling = super::Sampling {
            temperature: 0.0,
            top_p: 1.0,
            seed: 1,
            ignore_eos: false,
            logprobs: None,
        };
        let body =
            |endpoint| super::request_body(endpoint, "m", true, "max_tokens", item, "", &sampling);
        let chat = body(infergate_model::config::Endpoint::Chat);
        assert_eq!(chat["tools"][0]["function"]["name"], "get_weather");
        assert_eq!(chat["tool_choice"], "auto");
        let completions = body(infergate_model::config::Endpoint::Completions);
        assert!(completions.get("tools").is_none() && completions.get("tool_choice").is_none());
    }
}
