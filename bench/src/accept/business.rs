//! The business layer: structured outputs validated against their JSON Schema (every one, by a
//! deterministic check — an LLM judge never replaces it), and an optional judge's similarity
//! score that is reported and never gates.
//!
//! An output passes when its whole text (leading and trailing whitespace aside) is one JSON
//! document that the item's schema accepts. A request that failed has no output and fails.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Why one output failed its schema.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SchemaFailure {
    pub item: usize,
    pub id: String,
    /// `baseline` or `candidate`.
    pub target: String,
    pub error: String,
    /// The output (null when the request failed).
    pub output: Option<String>,
}

/// Why an output fails its schema (the `error` of its [`SchemaFailure`]).
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    /// Built without the `acceptance` feature: no output validates.
    #[error("built without the `acceptance` feature: no JSON Schema validator")]
    NoValidator,
    #[error("the request failed: no output")]
    NoOutput,
    #[error("the output is not one JSON document: {0}")]
    NotJson(serde_json::Error),
    /// The item's schema is not one the validator compiles; its message.
    #[error("the item's schema is invalid: {0}")]
    Schema(String),
    /// Where the output breaks the schema (at most 5), each `path: message`.
    #[error("{}", reasons.join("; "))]
    Invalid { reasons: Vec<String> },
}

/// Validate one output against a schema: `Ok(())` or the reasons (at most 5). Without the
/// `acceptance` feature no output validates, and the reason says why.
#[cfg(not(feature = "acceptance"))]
pub fn validate(_schema: &Value, _output: Option<&str>) -> Result<(), SchemaError> {
    Err(SchemaError::NoValidator)
}

/// Validate one output against a schema: `Ok(())` or the reasons (at most 5).
#[cfg(feature = "acceptance")]
pub fn validate(schema: &Value, output: Option<&str>) -> Result<(), SchemaError> {
    let Some(text) = output else {
        return Err(SchemaError::NoOutput);
    };
    let doc: Value = serde_json::from_str(text.trim()).map_err(SchemaError::NotJson)?;
    let validator =
        jsonschema::validator_for(schema).map_err(|e| SchemaError::Schema(e.to_string()))?;
    let reasons: Vec<String> = validator
        .iter_errors(&doc)
        .take(5)
        .map(|e| {
            let at = e.instance_path().to_string();
            if at.is_empty() { e.to_string() } else { format!("{at}: {e}") }
        })
        .collect();
    if reasons.is_empty() { Ok(()) } else { Err(SchemaError::Invalid { reasons }) }
}

/// Pass counts of one side.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct SchemaStats {
    /// Items that carry a schema.
    pub structured: u64,
    pub valid: u64,
    /// valid / structured (null without structured items).
    pub pass_rate: Option<f64>,
}

impl SchemaStats {
    pub fn add(&mut self, ok: bool) {
        self.structured += 1;
        self.valid += ok as u64;
        self.pass_rate = Some(self.valid as f64 / self.structured as f64);
    }
}

/// The judge's prompt for one pair of answers.
pub(crate) fn judge_prompt(question: &str, baseline: &str, candidate: &str) -> String {
    format!(
        "You compare two answers to the same request. Reply with one number between 0 and 1: \
         how far the second answer says the same as the first (1 = same meaning, 0 = unrelated). \
         Reply with the number only.\n\nRequest:\n{question}\n\nFirst answer:\n{baseline}\n\n\
         Second answer:\n{candidate}\n"
    )
}

/// The first number within 0..=1 in a judge's reply.
pub(crate) fn parse_judge_score(reply: &str) -> Option<f64> {
    let mut cur = String::new();
    let mut candidates = Vec::new();
    for c in reply.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_digit() || (c == '.' && !cur.contains('.')) {
            cur.push(c);
        } else if !cur.is_empty() {
            candidates.push(std::mem::take(&mut cur));
        }
    }
    candidates
        .iter()
        .filter_map(|s| s.trim_end_matches('.').parse::<f64>().ok())
        .find(|v| (0.0..=1.0).contains(v))
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(feature = "acceptance")]
    use serde_json::json;

    #[cfg(feature = "acceptance")]
    fn schema() -> Value {
        json!({
            "type": "object",
            "required": ["name", "age"],
            "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
            "additionalProperties": false
        })
    }

    #[test]
    #[cfg(feature = "acceptance")]
    fn known_valid_and_invalid_documents() {
        assert!(validate(&schema(), Some(" {\"name\": \"ada\", \"age\": 36}\n")).is_ok());
        let e =
            validate(&schema(), Some("{\"name\": \"ada\", \"age\": -1}")).unwrap_err().to_string();
        assert!(e.contains("/age"), "{e}");
        let e = validate(&schema(), Some("{\"name\": \"ada\"}")).unwrap_err().to_string();
        assert!(e.contains("age"), "{e}");
        let e = validate(&schema(), Some("{\"name\": \"ada\", \"age\": 3, \"x\": 1}"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("x"), "{e}");
        let e = validate(&schema(), Some("{\"name\": \"ad")).unwrap_err().to_string();
        assert!(e.contains("not one JSON document"), "{e}");
        assert!(validate(&schema(), Some("```json\n{\"name\":\"a\",\"age\":1}\n```")).is_err());
        assert_eq!(
            validate(&schema(), None).unwrap_err().to_string(),
            "the request failed: no output"
        );
        let e = validate(&json!({"type": 12}), Some("{}")).unwrap_err().to_string();
        assert!(e.starts_with("the item's schema is invalid: "), "{e}");
    }

    #[test]
    fn pass_rate() {
        let mut s = SchemaStats::default();
        assert_eq!(s.pass_rate, None);
        for ok in [true, true, true, false] {
            s.add(ok);
        }
        assert_eq!((s.structured, s.valid, s.pass_rate), (4, 3, Some(0.75)));
    }

    #[test]
    fn judge_scores() {
        assert_eq!(parse_judge_score("0.93"), Some(0.93));
        assert_eq!(parse_judge_score("Score: 1."), Some(1.0));
        assert_eq!(parse_judge_score("On a scale of 10 I'd say 0.8"), Some(0.8));
        assert_eq!(parse_judge_score("similar"), None);
        assert!(judge_prompt("q", "a", "b").contains("Second answer:\nb"));
    }
}
