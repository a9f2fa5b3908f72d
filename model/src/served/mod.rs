//! The served configuration: what the engine says it runs, read back from its own endpoints,
//! beside the parameters of the engine config file a run names (`summary.engine.served`).
//!
//! Each value carries the canonical dotted key of `configs/engine.toml` where the engine's
//! setting has one (`scheduler.max_num_seqs`), else a key of the engine's own
//! (`vllm.cache_dtype`), and where it was read (`GET /props total_slots`). A key the file sets
//! and the engine answers otherwise is a [`ServedMismatch`]: the run measured another
//! configuration than the file says. A value the engine does not reveal, or answers in a shape
//! that cannot be read, is absent (never guessed); the reading says what was not revealed.
//!
//! The parsers of each engine's answers are in [`parse`]; the HTTP side is
//! `bench::client::served`.

pub mod parse;

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use crate::config::ConfigKey;

/// One setting the engine revealed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServedValue {
    /// The engine config's dotted key (`scheduler.max_num_seqs`), or `<engine>.<name>` for a
    /// setting the engine config has no key for (`tgi.max_concurrent_requests`).
    pub key: ConfigKey,
    pub value: Json,
    /// Where it was read: the request and the field (`GET /props total_slots`).
    pub source: String,
}

/// A key the engine config file sets and the engine answers otherwise.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServedMismatch {
    pub key: ConfigKey,
    /// The engine config file's value.
    pub config: Json,
    /// What the engine said it runs.
    pub served: Json,
    /// Where the engine said it.
    pub source: String,
}

impl ServedMismatch {
    /// `scheduler.max_num_seqs: configs/engine.toml says 2, the server 4 (GET /props total_slots)`.
    pub fn text(&self, file: &str) -> String {
        format!(
            "{}: {file} says {}, the server {} ({})",
            self.key,
            show(&self.config),
            show(&self.served),
            self.source
        )
    }
}

/// A value as a person reads it: strings without quotes.
pub fn show(v: &Json) -> String {
    match v {
        Json::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// What one look at an engine's endpoints found.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ServedReading {
    /// The engine that answered (`llama.cpp`, `vLLM`, `SGLang`, `TGI`), when one did.
    pub engine: Option<String>,
    pub values: Vec<ServedValue>,
    /// What was asked and not revealed (an absent endpoint, a malformed answer), one line each.
    pub not_revealed: Vec<String>,
}

impl ServedReading {
    pub fn get(&self, key: &ConfigKey) -> Option<&ServedValue> {
        self.values.iter().find(|v| &v.key == key)
    }

    /// Add values of another answer; a key already read keeps its first value.
    pub fn extend(&mut self, values: Vec<ServedValue>) {
        for v in values {
            if self.get(&v.key).is_none() {
                self.values.push(v);
            }
        }
    }
}

/// The engine config keys a served value is compared on: every key of the file except the
/// model's name (an alias, a path or the simulator's `sim/` name spell the same model
/// differently) and `engine.dtype = "auto"` (the checkpoint's own type).
pub fn compared(key: &ConfigKey, config: &Json) -> bool {
    key.is_served_key()
        && key != "engine.model"
        && !(key == "engine.dtype" && config.as_str() == Some("auto"))
}

/// Two values are the same setting: numbers by value (`0.9` and `0.90`, `16` and `16.0`),
/// booleans, and text ignoring case and the `half` / `float` spellings of dtypes.
pub fn same(a: &Json, b: &Json) -> bool {
    match (a, b) {
        (Json::Number(x), Json::Number(y)) => match (x.as_f64(), y.as_f64()) {
            (Some(x), Some(y)) => (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1.0),
            _ => x == y,
        },
        (Json::String(x), Json::String(y)) => dtype_word(x) == dtype_word(y),
        _ => a == b,
    }
}

fn dtype_word(s: &str) -> String {
    let s = s.trim().to_ascii_lowercase();
    let s = s.strip_prefix("torch.").unwrap_or(&s).to_string();
    match s.as_str() {
        "half" => "float16".into(),
        "float" => "float32".into(),
        _ => s,
    }
}

/// The keys the engine config file (`params`, as recorded in `summary.engine.params`) sets and
/// the engine answers otherwise. A key the file does not set decides nothing and is not
/// compared.
pub fn mismatches(params: &Json, served: &[ServedValue]) -> Vec<ServedMismatch> {
    let file = crate::params::flatten_params(params);
    served
        .iter()
        .filter_map(|s| {
            let config = file.get(s.key.as_str())?;
            (compared(&s.key, config) && !same(config, &s.value)).then(|| ServedMismatch {
                key: s.key.clone(),
                config: config.clone(),
                served: s.value.clone(),
                source: s.source.clone(),
            })
        })
        .collect()
}

/// The served value that contradicts `key = value` (a decision line), if the engine said
/// otherwise.
pub fn contradicting<'a>(
    key: &ConfigKey,
    value: &Json,
    served: &'a [ServedValue],
) -> Option<&'a ServedValue> {
    served.iter().find(|s| &s.key == key && compared(key, value) && !same(value, &s.value))
}

/// The readings before the load and after it put together: the values after the run where the
/// engine answered then (else those before), and a note for each key whose value changed
/// between the two (the engine was restarted or reconfigured while it was measured).
pub fn combine(before: ServedReading, after: ServedReading) -> (ServedReading, Vec<String>) {
    let mut notes = Vec::new();
    for a in &after.values {
        if let Some(b) = before.get(&a.key)
            && !same(&a.value, &b.value)
        {
            notes.push(format!(
                "the server's {} changed during the run: {} before the load, {} after it ({})",
                a.key,
                show(&b.value),
                show(&a.value),
                a.source
            ));
        }
    }
    let mut out = ServedReading {
        engine: after.engine.clone().or(before.engine.clone()),
        values: after.values,
        not_revealed: after.not_revealed,
    };
    if out.values.is_empty() {
        out.not_revealed = before.not_revealed;
    }
    out.extend(before.values);
    (out, notes)
}

/// The summary's note on a run whose engine answered otherwise than its engine config file.
pub fn mismatch_note(file: &str, mismatches: &[ServedMismatch]) -> Option<String> {
    if mismatches.is_empty() {
        return None;
    }
    let each: Vec<String> = mismatches.iter().map(|m| m.text(file)).collect();
    Some(format!(
        "served configuration differs from {file}: {}; the run measured what the server runs, \
         not the file (a gate does not pass it, adr new refuses a decision it contradicts)",
        each.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn v(key: &str, value: Json) -> ServedValue {
        ServedValue { key: ConfigKey::parse(key).unwrap(), value, source: "GET /x".into() }
    }

    #[test]
    fn only_keys_the_file_sets_are_compared() {
        let params = json!({
            "engine": {"model": "gemma-3-270m", "max_model_len": 1024, "dtype": "auto"},
            "scheduler": {"max_num_seqs": 2, "enable_prefix_caching": true},
        });
        let served = vec![
            v("scheduler.max_num_seqs", json!(4)),
            v("engine.max_model_len", json!(1024.0)),
            v("engine.model", json!("/models/gemma.gguf")),
            v("engine.dtype", json!("torch.bfloat16")),
            v("scheduler.block_size", json!(32)),
            v("scheduler.enable_prefix_caching", json!(true)),
            v("tgi.max_concurrent_requests", json!(128)),
        ];
        let m = mismatches(&params, &served);
        assert_eq!(m.len(), 1, "{m:?}");
        assert_eq!(
            (m[0].key.as_str(), &m[0].config, &m[0].served),
            ("scheduler.max_num_seqs", &json!(2), &json!(4))
        );
        assert_eq!(
            m[0].text("configs/engine-llamacpp.toml"),
            "scheduler.max_num_seqs: configs/engine-llamacpp.toml says 2, the server 4 (GET /x)"
        );
        assert!(mismatch_note("f.toml", &m).unwrap().contains("says 2, the server 4"));
        assert_eq!(mismatch_note("f.toml", &[]), None);
    }

    #[test]
    fn values_compare_by_meaning() {
        assert!(same(&json!(0.9), &json!(0.90000000001)));
        assert!(!same(&json!(0.9), &json!(0.95)));
        assert!(same(&json!(16), &json!(16.0)));
        assert!(same(&json!("bfloat16"), &json!("torch.bfloat16")));
        assert!(same(&json!("half"), &json!("float16")));
        assert!(!same(&json!(true), &json!("true")));
        assert!(
            contradicting(
                &ConfigKey::literal("engine.dtype"),
                &json!("float16"),
                &[v("engine.dtype", json!("bfloat16"))]
            )
            .is_some()
        );
        assert!(
            contradicting(
                &ConfigKey::literal("engine.dtype"),
                &json!("auto"),
                &[v("engine.dtype", json!("bfloat16"))]
            )
            .is_none()
        );
    }

    #[test]
    fn a_change_during_the_run_is_noted_and_the_later_value_kept() {
        let before = ServedReading {
            engine: Some("vLLM".into()),
            values: vec![
                v("scheduler.max_num_seqs", json!(64)),
                v("scheduler.block_size", json!(16)),
            ],
            not_revealed: vec![],
        };
        let after = ServedReading {
            engine: Some("vLLM".into()),
            values: vec![v("scheduler.max_num_seqs", json!(128))],
            not_revealed: vec![],
        };
        let (r, notes) = combine(before.clone(), after);
        assert_eq!(r.get(&ConfigKey::literal("scheduler.max_num_seqs")).unwrap().value, json!(128));
        assert_eq!(r.get(&ConfigKey::literal("scheduler.block_size")).unwrap().value, json!(16));
        assert_eq!(notes.len(), 1);
        assert!(notes[0].contains("64 before the load, 128 after it"), "{notes:?}");
        // An engine gone after the run keeps what it said before.
        let gone = ServedReading {
            not_revealed: vec!["GET /props: unreachable".into()],
            ..Default::default()
        };
        let (r, notes) = combine(before.clone(), gone);
        assert_eq!(r.values, before.values);
        assert!(notes.is_empty());
    }
}
