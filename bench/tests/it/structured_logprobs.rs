//! What acceptance checks read from the engine simulator, over HTTP: structured output that
//! validates against the requested JSON schema (and fails at the configured corruption rate),
//! and deterministic log-probs that `logprob_drift` moves by exactly its relative amount.

use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::support::*;
use infergate_sim::SimOptions;

fn schema() -> Value {
    json!({
        "type": "object",
        "required": ["name", "age", "tags", "kind"],
        "additionalProperties": false,
        "properties": {
            "name": {"type": "string", "minLength": 1},
            "age": {"type": "integer", "minimum": 1, "maximum": 120},
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1},
            "kind": {"enum": ["person", "robot"]}
        }
    })
}

fn chat_body(model: &str, prompt: &str, stream: bool) -> Value {
    json!({
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": 400,
        "stream": stream,
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "record", "schema": schema(), "strict": true}
        }
    })
}

/// Post a chat request; the answer's text, finish reason and the simulator's request number.
async fn complete(
    client: &reqwest::Client,
    base: &str,
    body: &Value,
) -> (String, Option<String>, u64) {
    let resp = client.post(format!("{base}/v1/chat/completions")).json(body).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let stream = body["stream"].as_bool().unwrap_or(false);
    let (mut text, mut finish, mut id) = (String::new(), None, String::new());
    if stream {
        let mut buf = Vec::new();
        let mut bytes = resp.bytes_stream();
        while let Some(chunk) = bytes.next().await {
            buf.extend_from_slice(&chunk.unwrap());
        }
        let body = String::from_utf8(buf).unwrap();
        for data in body.lines().filter_map(|l| l.strip_prefix("data: ")) {
            if data == "[DONE]" {
                break;
            }
            let v: Value = serde_json::from_str(data).unwrap();
            id = v["id"].as_str().unwrap().to_string();
            if let Some(c) = v["choices"][0]["delta"]["content"].as_str() {
                text.push_str(c);
            }
            if let Some(f) = v["choices"][0]["finish_reason"].as_str() {
                finish = Some(f.to_string());
            }
        }
    } else {
        let v: Value = resp.json().await.unwrap();
        id = v["id"].as_str().unwrap().to_string();
        text = v["choices"][0]["message"]["content"].as_str().unwrap().to_string();
        finish = v["choices"][0]["finish_reason"].as_str().map(str::to_string);
    }
    let number = id.rsplit('-').next().unwrap().parse().unwrap();
    (text, finish, number)
}

fn valid(validator: &jsonschema::Validator, text: &str) -> bool {
    serde_json::from_str::<Value>(text).is_ok_and(|doc| validator.is_valid(&doc))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn structured_output_validates_against_the_requested_schema() {
    let handle = start_engine_sim(ENGINE_H100, SimOptions::default()).await;
    let (client, base, model) = (http(), handle.base_url(), handle.model().to_string());
    let validator = jsonschema::validator_for(&schema()).unwrap();
    let mut docs = Vec::new();
    for i in 0..12 {
        let body = chat_body(&model, &format!("describe someone, take {i}"), i % 2 == 0);
        let (text, finish, _) = complete(&client, &base, &body).await;
        assert!(valid(&validator, &text), "not a valid document: {text}");
        assert_eq!(finish.as_deref(), Some("stop"), "the document ends by itself");
        docs.push(text);
    }
    // Different prompts, different documents; the same prompt, the same document.
    docs.sort();
    docs.dedup();
    assert!(docs.len() > 6, "{docs:?}");
    let body = chat_body(&model, "describe someone, take 3", false);
    let (a, _, _) = complete(&client, &base, &body).await;
    let mut streamed = body.clone();
    streamed["stream"] = json!(true);
    let (b, _, _) = complete(&client, &base, &streamed).await;
    assert_eq!(a, b);
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_configured_share_of_structured_answers_is_corrupted() {
    let rate = 0.3;
    let opts = SimOptions { corruption_rate: rate, ..SimOptions::default() };
    let handle = start_engine_sim(ENGINE_H100, opts).await;
    let (client, base, model) = (http(), handle.base_url(), handle.model().to_string());
    let validator = jsonschema::validator_for(&schema()).unwrap();
    let n = 80;
    let answers = futures_util::stream::iter(0..n)
        .map(|i| {
            let (client, base) = (client.clone(), base.clone());
            let body = chat_body(&model, &format!("record number {i}"), i % 2 == 1);
            async move { complete(&client, &base, &body).await }
        })
        .buffer_unordered(16)
        .collect::<Vec<_>>()
        .await;
    handle.shutdown().await;
    let mut invalid = 0;
    for (text, _, number) in &answers {
        // The simulator corrupts request number k when its hash falls below the rate, so which
        // answers fail is known exactly.
        let draw = (infergate_model::hash::fnv1a(&number.to_le_bytes()) % 1_000_000) as f64 / 1e6;
        let corrupted = draw < rate;
        assert_eq!(!valid(&validator, text), corrupted, "request {number}: {text}");
        invalid += corrupted as u32;
    }
    // And the share is the configured one: within 3 standard deviations of 30% of 80.
    let share = invalid as f64 / n as f64;
    let sd = (rate * (1.0 - rate) / n as f64).sqrt();
    println!("{invalid} of {n} structured answers failed validation ({:.1}%)", share * 100.0);
    assert!((share - rate).abs() <= 3.0 * sd, "{share}");
    assert!(invalid > 0);
}

/// Log-probs of one request: (token, logprob, top alternatives) per position.
type Lps = Vec<(String, f64, Vec<(String, f64)>)>;

async fn chat_logprobs(client: &reqwest::Client, base: &str, model: &str, stream: bool) -> Lps {
    let body = json!({
        "model": model,
        "messages": [{"role": "user", "content": "name three rivers"}],
        "max_tokens": 12,
        "ignore_eos": true,
        "temperature": 0.0,
        "logprobs": true,
        "top_logprobs": 3,
        "stream": stream,
    });
    let resp = client.post(format!("{base}/v1/chat/completions")).json(&body).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let entries: Vec<Value> = if stream {
        let text = resp.text().await.unwrap();
        text.lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .filter(|d| *d != "[DONE]")
            .map(|d| serde_json::from_str::<Value>(d).unwrap())
            .flat_map(|v| {
                v["choices"][0]["logprobs"]["content"].as_array().cloned().unwrap_or_default()
            })
            .collect()
    } else {
        let v: Value = resp.json().await.unwrap();
        v["choices"][0]["logprobs"]["content"].as_array().unwrap().clone()
    };
    entries
        .iter()
        .map(|e| {
            let top = e["top_logprobs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| (t["token"].as_str().unwrap().to_string(), t["logprob"].as_f64().unwrap()))
                .collect();
            (e["token"].as_str().unwrap().to_string(), e["logprob"].as_f64().unwrap(), top)
        })
        .collect()
}

async fn completion_logprobs(client: &reqwest::Client, base: &str, model: &str) -> Vec<f64> {
    let body = json!({
        "model": model, "prompt": "the rivers of Europe are", "max_tokens": 10,
        "ignore_eos": true, "logprobs": 2,
    });
    let resp = client.post(format!("{base}/v1/completions")).json(&body).send().await.unwrap();
    let v: Value = resp.json().await.unwrap();
    let lp = &v["choices"][0]["logprobs"];
    let mut out: Vec<f64> =
        lp["token_logprobs"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
    for top in lp["top_logprobs"].as_array().unwrap() {
        let mut alts: Vec<f64> =
            top.as_object().unwrap().values().map(|x| x.as_f64().unwrap()).collect();
        alts.sort_by(f64::total_cmp);
        out.extend(alts);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logprobs_are_deterministic_and_drift_moves_them_by_its_relative_amount() {
    let exact = start_engine_sim(ENGINE_H100, SimOptions::default()).await;
    let drift = 0.01;
    let drifted =
        start_engine_sim(ENGINE_H100, SimOptions { logprob_drift: drift, ..SimOptions::default() })
            .await;
    let client = http();
    let (base, model) = (exact.base_url(), exact.model().to_string());
    let a = chat_logprobs(&client, &base, &model, false).await;
    assert_eq!(a.len(), 12);
    assert!(a.iter().all(|(_, lp, top)| top.len() == 3 && *lp < 0.0 && top[0].1 == *lp));
    // The same request again, and streamed: the same values, bit for bit.
    assert_eq!(chat_logprobs(&client, &base, &model, false).await, a);
    assert_eq!(chat_logprobs(&client, &base, &model, true).await, a);
    let c = completion_logprobs(&client, &base, &model).await;
    assert_eq!(completion_logprobs(&client, &base, &model).await, c);

    // A drifting engine: the same tokens, every value moved by exactly `drift`, either way.
    let d = chat_logprobs(&client, &drifted.base_url(), &model, false).await;
    assert_eq!(d.len(), a.len());
    let (mut up, mut down) = (0, 0);
    for ((tok_a, lp_a, top_a), (tok_d, lp_d, top_d)) in a.iter().zip(&d) {
        assert_eq!(tok_a, tok_d);
        assert_eq!(
            top_a.iter().map(|t| &t.0).collect::<Vec<_>>(),
            top_d.iter().map(|t| &t.0).collect::<Vec<_>>()
        );
        for (x, y) in std::iter::once((lp_a, lp_d))
            .chain(top_a.iter().map(|t| &t.1).zip(top_d.iter().map(|t| &t.1)))
        {
            let rel = (y - x) / x.abs();
            assert!(((rel.abs()) - drift).abs() < 1e-9, "{x} -> {y}: {rel}");
            if rel > 0.0 { up += 1 } else { down += 1 }
        }
    }
    assert!(up > 0 && down > 0, "drift goes both ways ({up} up, {down} down)");
    let cd = completion_logprobs(&client, &drifted.base_url(), &model).await;
    assert_eq!(cd.len(), c.len());
    for (x, y) in c.iter().zip(&cd) {
        assert!((((y - x) / x).abs() - drift).abs() < 1e-9, "{x} -> {y}");
    }
    exact.shutdown().await;
    drifted.shutdown().await;
}
