//! The simulator's text: a whitespace tokenizer, deterministic output words and log-probs, and
//! JSON documents that follow a requested schema.
//!
//! Everything is a pure function of the prompt and the position, so two simulators given the
//! same request produce the same tokens (as greedy decoding on a real engine does).

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Map, Value, json};

use infergate_model::wire::VOCABULARY;
use infergate_model::wire::message_text;

pub use infergate_model::hash::fnv1a;

/// Vocabulary size of the simulated tokenizer.
pub(crate) const VOCAB_SIZE: u32 = 50_000;

/// Tokenize: one token per whitespace-separated word; ids from a hash of the word.
pub fn tokenize(text: &str) -> Vec<u32> {
    text.split_whitespace().map(|w| (fnv1a(w.as_bytes()) % VOCAB_SIZE as u64) as u32).collect()
}

/// Prompt tokens of chat messages: the template markers around each message's text (a role
/// marker and an end marker per message), then the assistant prefix that starts the answer.
pub(crate) fn chat_prompt_tokens(messages: &[Value]) -> Vec<u32> {
    let mut out = Vec::new();
    for m in messages {
        let role = m.get("role").and_then(|r| r.as_str()).unwrap_or("user");
        out.push((fnv1a(format!("<|{role}|>").as_bytes()) % VOCAB_SIZE as u64) as u32);
        out.extend(tokenize(&message_text(m)));
        out.push(1); // end of message
    }
    out.push(2); // assistant prefix
    out
}

/// A seed identifying a prompt (its token ids).
pub(crate) fn prompt_seed(prompt: &[u32]) -> u64 {
    let mut bytes = Vec::with_capacity(prompt.len() * 4);
    for t in prompt {
        bytes.extend_from_slice(&t.to_le_bytes());
    }
    fnv1a(&bytes)
}

fn mix(a: u64, b: u64) -> u64 {
    let mut x = a ^ b.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    x ^= x >> 31;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^ (x >> 29)
}

/// Output word at `position` for a prompt (with a leading space).
pub(crate) fn output_word(seed: u64, position: u32) -> &'static str {
    VOCABULARY[(mix(seed, position as u64) % VOCABULARY.len() as u64) as usize]
}

/// Deterministic log-probs at one position: the chosen token first (highest), then `k - 1`
/// alternatives in decreasing order. `drift` perturbs each value by a relative amount (used to
/// simulate a lower-precision candidate engine).
pub(crate) fn logprobs_at(seed: u64, position: u32, k: usize, drift: f64) -> Vec<(String, f64)> {
    let chosen = output_word(seed, position);
    let base = -0.05 - (mix(seed, position as u64 ^ 0xabc) % 1000) as f64 / 2000.0;
    let mut out = vec![(format!(" {chosen}"), base)];
    let mut lp = base;
    for j in 1..k.max(1) {
        let alt = VOCABULARY[(mix(seed ^ 0x77, (position as u64) << 8 | j as u64)
            % VOCABULARY.len() as u64) as usize];
        lp -= 0.5 + (mix(seed, (position as u64) << 16 | j as u64) % 1000) as f64 / 500.0;
        out.push((format!(" {alt}"), lp));
    }
    if drift != 0.0 {
        for (j, (_, v)) in out.iter_mut().enumerate() {
            let sign = if mix(seed ^ 0xd1, (position as u64) << 8 | j as u64) % 2 == 0 {
                1.0
            } else {
                -1.0
            };
            *v *= 1.0 + sign * drift;
        }
    }
    out
}

/// Split a document into tokens of up to four characters (the unit a structured answer streams in).
pub(crate) fn split_tokens(doc: &str) -> Vec<String> {
    let chars: Vec<char> = doc.chars().collect();
    chars.chunks(4).map(|c| c.iter().collect()).collect()
}

/// A JSON document following `schema` (a practical subset of JSON Schema: type, properties,
/// required, items, enum, const, minItems, minimum/maximum, anyOf/oneOf), deterministic in `seed`.
pub(crate) fn document_for_schema(schema: &Value, seed: u64) -> Value {
    let mut rng = StdRng::seed_from_u64(seed);
    gen_value(schema, &mut rng, 0)
}

fn gen_value(schema: &Value, rng: &mut StdRng, depth: usize) -> Value {
    if let Some(c) = schema.get("const") {
        return c.clone();
    }
    if let Some(Value::Array(options)) = schema.get("enum") {
        if !options.is_empty() {
            return options[rng.random_range(0..options.len())].clone();
        }
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(options)) = schema.get(key) {
            if let Some(first) = options.first() {
                return gen_value(first, rng, depth + 1);
            }
        }
    }
    let ty = match schema.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(Value::Array(ts)) => {
            ts.iter().find_map(|t| t.as_str().filter(|t| *t != "null")).unwrap_or("null")
        }
        _ if schema.get("properties").is_some() => "object",
        _ if schema.get("items").is_some() => "array",
        _ => "string",
    };
    match ty {
        "object" => {
            let mut obj = Map::new();
            if let Some(Value::Object(props)) = schema.get("properties") {
                for (k, sub) in props {
                    if depth < 6 {
                        obj.insert(k.clone(), gen_value(sub, rng, depth + 1));
                    }
                }
            }
            Value::Object(obj)
        }
        "array" => {
            let min = schema.get("minItems").and_then(|v| v.as_u64()).unwrap_or(1) as usize;
            let max = schema.get("maxItems").and_then(|v| v.as_u64()).unwrap_or((min as u64).max(2))
                as usize;
            let n = if depth >= 6 { 0 } else { rng.random_range(min..=max.max(min)) };
            let item = schema.get("items").cloned().unwrap_or(json!({"type": "string"}));
            Value::Array((0..n).map(|_| gen_value(&item, rng, depth + 1)).collect())
        }
        "integer" => {
            let lo = schema.get("minimum").and_then(|v| v.as_i64()).unwrap_or(0);
            let hi = schema.get("maximum").and_then(|v| v.as_i64()).unwrap_or(lo + 100);
            json!(rng.random_range(lo..=hi.max(lo)))
        }
        "number" => {
            let lo = schema.get("minimum").and_then(|v| v.as_f64()).unwrap_or(0.0);
            let hi = schema.get("maximum").and_then(|v| v.as_f64()).unwrap_or(lo + 100.0);
            let v = lo + (hi - lo) * rng.random::<f64>();
            json!((v * 100.0).round() / 100.0)
        }
        "boolean" => json!(rng.random::<bool>()),
        "null" => Value::Null,
        _ => {
            let n = rng.random_range(1..=3);
            let words: Vec<&str> =
                (0..n).map(|_| VOCABULARY[rng.random_range(0..VOCABULARY.len())]).collect();
            json!(words.join(" "))
        }
    }
}

/// Break a document so it no longer parses or no longer follows its schema.
pub fn corrupt(doc: &str, seed: u64) -> String {
    if seed % 2 == 0 && doc.len() > 2 {
        // Truncated document.
        let cut = doc.char_indices().nth(doc.chars().count() / 2).map_or(1, |(i, _)| i);
        doc[..cut].to_string()
    } else {
        // Valid JSON, wrong shape: the top-level value replaced by a string.
        serde_json::to_string(&json!({"unexpected": doc.len()})).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokenizer_counts_words_and_chat_adds_markers() {
        assert_eq!(tokenize("a b  c\nd").len(), 4);
        assert_eq!(tokenize("same words"), tokenize("same   words"));
        let msgs = vec![
            json!({"role":"system","content":"be brief"}),
            json!({"role":"user","content":[{"type":"text","text":"hi there"}]}),
        ];
        assert_eq!(
            chat_prompt_tokens(&msgs).len(),
            // Four words, two markers for each of the two messages, the assistant prefix.
            4 + 2 * 2 + 1
        );
    }

    #[test]
    fn outputs_and_logprobs_are_deterministic_and_ordered() {
        let s = prompt_seed(&tokenize("hello world"));
        assert_eq!(output_word(s, 3), output_word(s, 3));
        let lp = logprobs_at(s, 3, 5, 0.0);
        assert_eq!(lp.len(), 5);
        assert_eq!(lp[0].0, format!(" {}", output_word(s, 3)));
        assert!(lp.windows(2).all(|w| w[0].1 > w[1].1));
        let drifted = logprobs_at(s, 3, 5, 1e-3);
        for (a, b) in lp.iter().zip(&drifted) {
            let rel = ((a.1 - b.1) / a.1).abs();
            assert!((rel - 1e-3).abs() < 1e-9, "{rel}");
        }
    }

    #[test]
    fn documents_follow_their_schema() {
        let schema = json!({
            "type": "object",
            "required": ["name", "age", "tags", "kind"],
            "properties": {
                "name": {"type": "string"},
                "age": {"type": "integer", "minimum": 1, "maximum": 9},
                "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                "kind": {"enum": ["a", "b"]},
                "score": {"type": ["number", "null"]}
            }
        });
        for seed in 0..20 {
            let d = document_for_schema(&schema, seed);
            assert!(d["name"].is_string());
            let age = d["age"].as_i64().unwrap();
            assert!((1..=9).contains(&age));
            assert!(!d["tags"].as_array().unwrap().is_empty());
            assert!(d["kind"] == "a" || d["kind"] == "b");
            let text = serde_json::to_string(&d).unwrap();
            assert_eq!(split_tokens(&text).concat(), text);
            let broken = corrupt(&text, seed);
            let reparsed: Result<Value, _> = serde_json::from_str(&broken);
            assert!(reparsed.is_err() || reparsed.unwrap().get("name").is_none(), "{broken}");
        }
    }
}
