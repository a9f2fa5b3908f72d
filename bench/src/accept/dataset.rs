//! The acceptance dataset: JSONL, one request per line, in the bench's dataset format
//! (`messages` or `prompt`, optional `max_tokens`, `response_format` or `schema`) plus `id` and
//! `category` (`long_context`, `multi_turn`, `structured`). An item with a JSON Schema (`schema`,
//! or `response_format.json_schema.schema`) is structured: its output is validated.
//!
//! [`generate`] writes a deterministic dataset of any size covering the three categories with
//! at least 40% structured extraction; `configs/acceptance/dataset.jsonl` is its first 50 items
//! (`cargo xtask accept dataset --items 500` for the reference's 500).

use std::path::Path;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

use infergate_model::wire::VOCABULARY;
use infergate_model::workload::{
    DatasetError, WorkItem, dataset_lines, item_schema, parse_dataset_line, read_dataset,
};

/// Seed of the shipped sample.
pub const SAMPLE_SEED: u64 = 20_251_129;

/// One dataset item.
#[derive(Clone, Debug, PartialEq)]
pub struct Item {
    /// Position in the file (0-based, blank and `//` lines skipped).
    pub index: usize,
    pub id: String,
    pub category: Option<String>,
    /// The JSON Schema its output must follow, when structured.
    pub schema: Option<Value>,
    pub work: WorkItem,
}

/// Parse a dataset (in file order): each request line once, into its request and the
/// acceptance's own fields.
pub fn parse(path: &Path, text: &str, max_tokens: u32) -> Result<Vec<Item>, DatasetError> {
    let mut items = Vec::new();
    for (index, (line_no, line)) in dataset_lines(text).enumerate() {
        let raw = parse_dataset_line(path, line_no, line)?;
        let work = WorkItem::from_dataset_line(path, line_no, &raw, max_tokens)?;
        let schema = raw.as_object().and_then(item_schema).cloned();
        items.push(Item {
            index,
            id: raw
                .get("id")
                .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
                .unwrap_or_else(|| format!("line-{}", index + 1)),
            category: raw.get("category").and_then(|c| c.as_str()).map(str::to_string),
            schema,
            work,
        });
    }
    if items.is_empty() {
        return Err(DatasetError::empty(path));
    }
    Ok(items)
}

pub fn load(path: &Path, max_tokens: u32) -> Result<Vec<Item>, DatasetError> {
    parse(path, &read_dataset(path)?, max_tokens)
}

/// Between `min` and `min + spread - 1` words from the vocabulary.
fn words(rng: &mut StdRng, min: usize, spread: usize) -> String {
    let n = min + rng.random_range(0..spread);
    (0..n).map(|_| VOCABULARY[rng.random_range(0..VOCABULARY.len())]).collect::<Vec<_>>().join(" ")
}

/// The extraction schemas the generator draws from.
fn schemas() -> Vec<(&'static str, Value)> {
    vec![
        (
            "person",
            json!({"type": "object", "required": ["name", "age", "city"], "additionalProperties": false,
                "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0, "maximum": 120},
                               "city": {"type": "string"}}}),
        ),
        (
            "invoice",
            json!({"type": "object", "required": ["invoice_id", "total", "currency", "lines"], "additionalProperties": false,
                "properties": {"invoice_id": {"type": "string"}, "total": {"type": "number", "minimum": 0},
                               "currency": {"enum": ["EUR", "USD", "GBP"]},
                               "lines": {"type": "array", "minItems": 1, "items": {"type": "object", "required": ["item", "qty"],
                                   "properties": {"item": {"type": "string"}, "qty": {"type": "integer", "minimum": 1, "maximum": 50}}}}}}),
        ),
        (
            "ticket",
            json!({"type": "object", "required": ["severity", "component", "summary", "needs_reply"], "additionalProperties": false,
                "properties": {"severity": {"enum": ["low", "medium", "high", "critical"]}, "component": {"type": "string"},
                               "summary": {"type": "string"}, "needs_reply": {"type": "boolean"}}}),
        ),
    ]
}

/// A deterministic dataset of `n` items: per 20 items, 9 structured extractions (45%), 5
/// multi-turn conversations and 6 long-context questions.
pub fn generate(n: usize, seed: u64) -> Vec<Value> {
    let mut rng = StdRng::seed_from_u64(seed);
    let schemas = schemas();
    (0..n)
        .map(|i| {
            let slot = i % 20;
            if slot < 9 {
                let (name, schema) = &schemas[i % schemas.len()];
                let text = words(&mut rng, 60, 60);
                json!({
                    "id": format!("structured-{i:04}"),
                    "category": "structured",
                    "messages": [
                        {"role": "system", "content": format!("Extract the {name} described in the text. Answer with one JSON object that follows the schema, nothing else.")},
                        {"role": "user", "content": text}
                    ],
                    "max_tokens": 160,
                    "schema": schema,
                })
            } else if slot < 14 {
                let turns = 2 + rng.random_range(0..3);
                let mut messages = vec![json!({"role": "system", "content": "You are a concise assistant."})];
                for t in 0..turns {
                    messages.push(json!({"role": "user", "content": words(&mut rng, 12, 20)}));
                    if t + 1 < turns {
                        messages.push(json!({"role": "assistant", "content": words(&mut rng, 20, 30)}));
                    }
                }
                json!({"id": format!("multi-turn-{i:04}"), "category": "multi_turn", "messages": messages, "max_tokens": 96})
            } else {
                let doc = words(&mut rng, 1200, 1800);
                json!({
                    "id": format!("long-context-{i:04}"),
                    "category": "long_context",
                    "messages": [{"role": "user", "content": format!("Read the document and answer the question after it.\n\n{doc}\n\nQuestion: what is the document about, in three sentences?")}],
                    "max_tokens": 128,
                })
            }
        })
        .collect()
}

/// The generated items as JSONL text.
pub fn to_jsonl(items: &[Value]) -> String {
    let mut out = String::new();
    for v in items {
        out.push_str(&v.to_string());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_dataset_covers_the_categories_and_parses() {
        let items = generate(100, 7);
        let count = |c: &str| items.iter().filter(|v| v["category"] == c).count();
        assert_eq!(count("structured"), 45);
        assert_eq!(count("multi_turn"), 25);
        assert_eq!(count("long_context"), 30);
        assert_eq!(generate(100, 7), items, "deterministic");
        let text = to_jsonl(&items);
        let parsed = parse(Path::new("gen.jsonl"), &text, 64).unwrap();
        assert_eq!(parsed.len(), 100);
        assert_eq!(parsed.iter().filter(|i| i.schema.is_some()).count(), 45);
        assert_eq!(parsed[0].id, "structured-0000");
        // Structured items ask the server for the schema too.
        assert!(parsed[0].work.response_format.is_some());
        // Every schema compiles.
        #[cfg(feature = "acceptance")]
        for i in parsed.iter().filter_map(|i| i.schema.as_ref()) {
            jsonschema::validator_for(i).unwrap();
        }
    }

    #[test]
    fn the_shipped_sample_is_the_generators_output() {
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/acceptance/dataset.jsonl");
        let shipped = std::fs::read_to_string(&path).unwrap();
        assert_eq!(shipped, to_jsonl(&generate(50, SAMPLE_SEED)));
        let items = parse(&path, &shipped, 64).unwrap();
        let structured = items.iter().filter(|i| i.schema.is_some()).count();
        assert!(structured * 100 >= 40 * items.len());
    }

    #[test]
    fn ids_and_schemas_from_any_line_shape() {
        let text = "{\"prompt\": \"hi\"}\n// comment\n{\"id\": 7, \"messages\": [{\"role\":\"user\",\"content\":\"x\"}], \"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": \"n\", \"schema\": {\"type\": \"object\"}}}}\n";
        let items = parse(Path::new("d.jsonl"), text, 8).unwrap();
        assert_eq!(items[0].id, "line-1");
        assert_eq!(items[0].schema, None);
        assert_eq!(items[1].id, "7");
        assert_eq!(items[1].schema, Some(json!({"type": "object"})));
    }
}
